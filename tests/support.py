"""Helpers for end-to-end tests: a real broker process on a free loopback port, and a
plain-socket V1 client (what `nc` does, with a timeout so no test can hang)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from twisted.internet.defer import Deferred

ROOT = Path(__file__).resolve().parent.parent
_LISTEN_RE = re.compile(rb"skerry listening on v1=([0-9.]+):([0-9]+)")


class ManualThread:
    """A ``run_in_thread`` whose jobs (fsyncs, state-file writes) run only when the test
    calls ``run_all``: "the fsync returned" becomes an explicit step of an in-memory test."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Callable[[], Any], Deferred[Any]]] = []

    def __call__(self, function: Callable[[], Any]) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self.jobs.append((function, d))
        return d

    def run_all(self) -> int:
        count = 0
        while self.jobs:
            function, d = self.jobs.pop(0)
            count += 1
            try:
                result = function()
            except Exception as exc:  # noqa: BLE001 - a worker thread hands errors over too
                d.errback(exc)
            else:
                d.callback(result)
        return count


class V1Client:
    """A blocking line client over TCP with a read timeout."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self._buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def readline(self) -> bytes:
        while b"\n" not in self._buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"connection closed; buffered {self._buf!r}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def readlines(self, count: int) -> list[bytes]:
        return [self.readline() for _ in range(count)]

    def request(self, line: str | bytes) -> str:
        raw = line.encode() if isinstance(line, str) else line
        self.send(raw + b"\n")
        return self.readline().decode()

    def shut_write(self) -> None:
        """``shutdown(SHUT_WR)``: what ``nc -N`` does when its input ends. The broker sees
        EOF; this side can still read."""
        self.sock.shutdown(socket.SHUT_WR)

    def read_to_eof(self) -> bytes:
        """Every byte the broker sends until it closes the connection (a timeout raises)."""
        data, self._buf = self._buf, b""
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                return data
            data += chunk

    def closed_by_peer(self) -> bool:
        """True when the broker closed the connection (reads EOF)."""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self._buf += chunk
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


class BrokerProcess:
    """``skerry serve`` in a child process with its own data dir and config file."""

    def __init__(self, workdir: Path, config: dict[str, Any] | None = None,
                 port: int = 0) -> None:
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "skerry-data"
        self.config = {"data_dir": str(self.data_dir), "port": port, **(config or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log_path = self.workdir / "broker.log"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "skerry.yaml"
        cfg.write_text(yaml.safe_dump(self.config))
        log = open(self.log_path, "ab")
        offset = log.tell()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "broker", "serve", "--config", str(cfg)],
            cwd=str(ROOT), stdout=log, stderr=log, env=env)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[offset:]
            match = _LISTEN_RE.search(text)
            if match:
                self.port = int(match.group(2))
                # Later restarts reuse the port so that clients can reconnect.
                self.config["port"] = self.port
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n"
                                   f"{text.decode(errors='replace')}")
            time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("broker did not start in time:\n" + self.log_text())

    def client(self, timeout: float = 10.0) -> V1Client:
        return V1Client(self.port, timeout=timeout)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def rss_bytes(self) -> int:
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def debian_tool(command: str, package: str) -> str:
    """The path of ``command`` (Debian's ``package``), which ``.ci/install-tools`` installs
    before the tests run; pytest never installs anything. Missing, it is a ``pytest.skip``
    with a one-line reason locally, and a failure when ``CI`` is set (CI must run every
    test, so a missing program there is a broken setup, not a skip)."""
    import pytest

    found = shutil.which(command)
    if found:
        return found
    reason = f"{command} is not installed (Debian package {package}; .ci/install-tools installs it)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}, and CI is set", pytrace=False)
    pytest.skip(reason)


class ClockedHarness:
    """What the in-memory transport harnesses (tests/iggy, tests/kafka, tests/tank) share:
    a broker (``self.broker``) on a ``task.Clock`` (``self.clock``) with a wall clock in
    microseconds (``self.wall_us``) that moves with it. Subclasses build those three."""

    clock: Any
    wall_us: int
    broker: Any

    @property
    def core(self) -> Any:
        return self.broker.core

    def now_us(self) -> int:
        return self.wall_us

    def pump(self) -> None:
        """Run every call scheduled for now (group-file writes, turn flushes)."""
        for _ in range(100):
            if not any(call.getTime() <= self.clock.seconds() for call in self.clock.calls):
                return
            self.clock.advance(0)

    def advance(self, seconds: float) -> None:
        """Move both clocks by ``seconds``, then run what became due."""
        self.wall_us += int(seconds * 1_000_000)
        self.clock.advance(seconds)
        self.pump()
