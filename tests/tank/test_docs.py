"""docs/tank.md run as written: "Enabling it" (its YAML is the broker's config, its Python
runs against that broker and prints the text block under it) and "Security" (the two
refusals, and TLS with the client's ``ssl_context``).

Only ports are rewritten: the page's 11011 becomes the free port the broker picked
(``tank_port: 0``), the V1 listener's port is the test's own, and the data directory is the
YAML's, under a folder standing for the reader's clone (``BrokerProcess``);
tests/test_docs_in_order.py runs the page after the others, in one folder."""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import sys
from pathlib import Path

import yaml

from broker.config import config_from_mapping
from broker.tank import client as tc
from broker.tank.service import tank_refusal
from tests.iggy.test_docs import make_ca_and_certificate, section
from tests.support import ROOT, BrokerProcess
from tests.tank.harness import tank_port_of
from tests.test_docs_getting_started import in_folder

DOC = ROOT / "docs" / "tank.md"
DOC_PORT = 11011
_FENCE_RE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def example() -> tuple[dict, str, list[str]]:
    blocks = _FENCE_RE.findall(section(DOC.read_text(), "## Enabling it"))
    infos = [info for info, _ in blocks]
    assert infos == ["yaml", "python", "text"], infos
    return yaml.safe_load(blocks[0][1]), blocks[1][1], blocks[2][1].splitlines()


def run_example(code: str, workdir: Path) -> list[str]:
    script = workdir / "example.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], cwd=workdir, capture_output=True,
                            stdin=subprocess.DEVNULL, timeout=60,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result.stdout.decode().splitlines()


def run_tank_page(folder: Path) -> None:
    """"Enabling it" in ``folder``: the page's broker, then its example."""
    config, code, shown = example()
    assert config == {"host": "127.0.0.1", "tank_port": DOC_PORT, "data_dir": "./tank-data"}
    broker = BrokerProcess(folder / ".broker-tank",
                           {**in_folder(config, folder), "tank_port": 0}).start()
    try:
        port = tank_port_of(broker.log_text())
        workdir = folder / ".tank-example"
        workdir.mkdir()
        assert str(DOC_PORT) in code
        assert run_example(code.replace(str(DOC_PORT), str(port)), workdir) == shown
    finally:
        broker.stop()


class TankDocTests:
    def test_example_prints_what_the_page_shows(self, tmp_path: Path) -> None:
        run_tank_page(tmp_path)

    def test_refusals(self, tmp_path: Path) -> None:
        """Not on a non-loopback host, not with auth.tokens_file: the broker exits 2 with
        one line saying why; off (the default) or on loopback without auth it starts."""
        base = {"data_dir": str(tmp_path / "d")}
        assert tank_refusal(config_from_mapping(base)) is None
        assert tank_refusal(config_from_mapping({**base, "tank_port": 0})) is None
        assert "no credentials" in tank_refusal(config_from_mapping(
            {**base, "tank_port": 0, "host": "0.0.0.0",
             "auth": {"tokens_file": "t"}}))  # type: ignore[operator]
        tokens = tmp_path / "tokens"
        tokens.write_text("alice:" + "0" * 64 + "\n")
        cfg = tmp_path / "skerry.yaml"
        cfg.write_text(yaml.safe_dump({**base, "port": 0, "tank_port": 0,
                                       "auth": {"tokens_file": str(tokens)}}))
        result = subprocess.run([sys.executable, "-m", "broker", "serve", "--config", str(cfg)],
                                cwd=ROOT, capture_output=True, timeout=60)
        assert result.returncode == 2
        assert b"refusing to start the TANK listener with auth.tokens_file set" in result.stderr

    def test_tls(self, tmp_path: Path) -> None:
        """With tls.cert/tls.key the TANK listener speaks TLS: the client with an
        ``ssl_context`` trusting the CA works, greeting ping first."""
        workdir = tmp_path / "certs"
        workdir.mkdir()
        ca, cert, key = make_ca_and_certificate(workdir)
        config = {"tank_port": 0, "tls": {"cert": str(cert), "key": str(key)}}
        with BrokerProcess(tmp_path / "broker", config) as broker:
            context = ssl.create_default_context(cafile=str(ca))
            with tc.TankClient("localhost", tank_port_of(broker.log_text()),
                               ssl_context=context) as tank:
                assert tank.create_topic(b"tls", 1) is None
                assert tank.produce([(b"tls", 0, [tc.Msg(b"secret")])])[2] == []
                got = tank.consume([(b"tls", 0, 0, 4096)]).data[0]
                assert [m.content for m in got.messages] == [b"secret"]
