"""A listener port already taken: ``skerry serve`` stops before it touches the disk, with one
line naming the address, the setting and what to do; no data directory is left behind.

Real processes on free loopback ports; the taken port is a listening socket of the test."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support import ROOT


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port some other program listens on."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def serve(tmp_path: Path, config: dict[str, object], *args: str) -> tuple[int, list[str]]:
    path = tmp_path / "skerry.yaml"
    path.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "new-data"), "port": 0,
                                    **config}))
    result = subprocess.run([sys.executable, "-m", "broker", "serve", "--config", str(path),
                             *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=60)
    lines = [line for line in result.stdout.decode(errors="replace").splitlines() if line]
    return result.returncode, lines


class PortClashTests:
    @pytest.mark.parametrize("setting", ["port", "kafka_port", "iggy_port", "tank_port",
                                         "console_port", "metrics_port"])
    def test_a_taken_port_stops_startup_before_the_data_directory_exists(
            self, tmp_path: Path, taken: int, setting: str) -> None:
        """Whichever listener's port is taken, the broker exits 1 with one line naming
        ``127.0.0.1:<port>`` and the setting, and ``data_dir`` was never created."""
        code, lines = serve(tmp_path, {setting: taken})
        assert code == 1, lines
        assert len(lines) == 1, lines
        assert f"cannot listen on 127.0.0.1:{taken} ({setting}): address already in use" \
            in lines[0], lines
        assert "Traceback" not in lines[0]
        assert not (tmp_path / "new-data").exists()

    def test_the_port_flag_is_named_as_the_flag_says_it(self, tmp_path: Path,
                                                        taken: int) -> None:
        """``--port N`` on a taken port: the same one line, and nothing on disk."""
        code, lines = serve(tmp_path, {}, "--port", str(taken))
        assert code == 1 and len(lines) == 1, lines
        assert f"127.0.0.1:{taken} (port)" in lines[0]
        assert not (tmp_path / "new-data").exists()
        # docs/operations.md quotes this very line (for port 9092)
        message = lines[0].split("skerry.server: ", 1)[1].replace(str(taken), "9092")
        assert f"`{message}`" in " ".join((ROOT / "docs" / "operations.md").read_text().split())

    def test_two_listeners_given_the_same_port_are_refused(self, tmp_path: Path) -> None:
        """``kafka_port`` equal to ``port``: refused before anything is created, naming
        both settings' port."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            free = probe.getsockname()[1]
        code, lines = serve(tmp_path, {"port": free, "kafka_port": free})
        assert code == 1 and len(lines) == 1, lines
        assert f"127.0.0.1:{free} (kafka_port)" in lines[0], lines
        assert not (tmp_path / "new-data").exists()
