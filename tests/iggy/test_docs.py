"""docs/iggy.md, "Enabling it", run as written: the YAML block is the broker's config, the
Python block runs with the real apache-iggy client against that broker, and what it prints
is the output block under it. The TLS paragraph's connection string is run the same way.

Only port numbers are rewritten: the YAML's ``iggy_port: 8090`` becomes 0 (the broker picks
a free 127.0.0.1 port, read back from its start-up line) and the example's ``8090`` that
port; the V1 listener gets a free port too (``port: 0``) and the data directory is the
YAML's, under a temporary folder standing for the reader's clone (``BrokerProcess``), so
the test never touches a real 9092, 8090 or ./iggy-data; tests/test_docs_in_order.py
runs the page after the others, in one folder. The example runs as a script (``python example.py``) in its own process, as
a reader runs it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.iggy.harness import iggy_port_of
from tests.support import ROOT, BrokerProcess
from tests.test_docs_getting_started import in_folder

DOC = ROOT / "docs" / "iggy.md"
DOC_PORT = 8090
_FENCE_RE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def section(markdown: str, heading: str) -> str:
    """The text under ``heading``, up to the next heading of the same level."""
    start = markdown.index(heading + "\n") + len(heading) + 1
    end = markdown.find("\n## ", start)
    return markdown[start:] if end < 0 else markdown[start:end]


def example() -> tuple[str, str, list[str]]:
    """``(YAML, Python, printed lines)`` of "Enabling it": its one ``yaml`` block, its one
    ``python`` block and the ``text`` block right after that."""
    blocks = _FENCE_RE.findall(section(DOC.read_text(), "## Enabling it"))
    infos = [info for info, _body in blocks]
    assert infos.count("yaml") == 1 and infos.count("python") == 1, infos
    at = infos.index("python")
    assert infos[at + 1] == "text", "the example's output should follow it"
    return (blocks[infos.index("yaml")][1], blocks[at][1],
            blocks[at + 1][1].splitlines())


def tls_connection_line() -> str:
    """The TLS paragraph's ``client = IggyClient.from_connection_string(...)`` line."""
    tls = section(DOC.read_text(), "## Enabling it").split("### TLS", 1)[1]
    lines = [s for s in re.findall(r"`([^`]+)`", tls.split("###", 1)[0])
             if s.startswith("client = IggyClient.from_connection_string(")]
    assert len(lines) == 1, lines
    return lines[0]


def with_port(text: str, port: int) -> str:
    """``text`` with the page's Iggy port made ``port`` (and nothing else changed)."""
    assert str(DOC_PORT) in text
    return re.sub(rf"(?<=[:\s]){DOC_PORT}\b", str(port), text)


def broker_config(yaml_text: str, folder: Path, **extra: object) -> dict[str, object]:
    """The page's YAML as run in ``folder`` (its data directory there), Iggy's port free."""
    config = yaml.safe_load(yaml_text)
    assert config["iggy_port"] == DOC_PORT
    assert config["data_dir"] == "./iggy-data"
    return {**in_folder(config, folder), "iggy_port": 0, **extra}


def run_iggy_page(folder: Path) -> None:
    """"Enabling it" in ``folder``: the page's broker, its start-up line, its example
    (run twice: the second run adds two lines, as the page says)."""
    yaml_text, code, shown = example()
    assert shown == ["0 b'created'", "1 b'paid'"]
    broker = BrokerProcess(folder / ".broker-iggy", broker_config(yaml_text, folder)).start()
    try:
        port = iggy_port_of(broker.log_text())
        documented = re.search(r"`(skerry listening on [^`]*?); \.\.\.`", DOC.read_text())
        assert documented is not None
        line = documented.group(1).replace(":9092", f":{broker.port}")
        assert with_port(line, port) + ";" in broker.log_text()
        workdir = folder / ".iggy-example"
        workdir.mkdir()
        assert run_example(with_port(code, port), workdir) == shown
        assert run_example(with_port(code, port), workdir) == [
            "0 b'created'", "1 b'paid'", "2 b'created'", "3 b'paid'"]
    finally:
        broker.stop()


def run_example(code: str, workdir: Path) -> list[str]:
    """Run ``code`` as ``python example.py`` in ``workdir``; its stdout lines (it must
    exit 0)."""
    script = workdir / "example.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], cwd=workdir, capture_output=True,
                            stdin=subprocess.DEVNULL, timeout=60)
    out, err = result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace")
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    return out.splitlines()


def make_ca_and_certificate(directory: Path) -> tuple[Path, Path, Path]:
    """``(ca.pem, cert.pem, key.pem)``: a CA and a certificate it signs for ``localhost``
    and 127.0.0.1, as the page asks for."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=skerry-test-ca", "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
            "-keyout", "key.pem", "-out", "cert.csr")
    (directory / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                       "basicConstraints=CA:FALSE\n"
                                       "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "cert.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "cert.pem")
    return directory / "ca.pem", directory / "cert.pem", directory / "key.pem"


class IggyDocExampleTests:
    def test_example_prints_what_the_page_shows(self, tmp_path: Path) -> None:
        """With the page's YAML, the start-up line reads as the page says, the page's
        Python example prints exactly the lines shown under it, and a second run adds two
        more lines (as the page says) instead of failing."""
        run_iggy_page(tmp_path)

    def test_tls_connection_string_works_as_described(self, tmp_path: Path) -> None:
        """With tls.cert/tls.key (a CA-signed certificate), the example with its first three
        lines of ``main`` replaced by the page's connection string prints the same lines."""
        yaml_text, code, shown = example()
        workdir = tmp_path / "client"
        workdir.mkdir()
        ca, cert, key = make_ca_and_certificate(workdir)
        assert ca.name == "ca.pem"  # the name the page's connection string uses
        first_three = re.search(r"(?m)^( +)client = IggyClient\(.*\n.*\n.*login_user.*\n", code)
        assert first_three is not None, code
        indent = first_three.group(1)
        tls_code = code.replace(first_three.group(0), f"{indent}{tls_connection_line()}\n"
                                                      f"{indent}await client.connect()\n")
        config = broker_config(yaml_text, tmp_path, tls={"cert": str(cert), "key": str(key)})
        with BrokerProcess(tmp_path / "broker", config) as broker:
            port = iggy_port_of(broker.log_text())
            assert run_example(with_port(tls_code, port), workdir) == shown
