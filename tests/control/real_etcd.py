"""Real etcd members for tests: ``etcd`` processes on free 127.0.0.1 ports in a tmp dir.

Owns: ``etcd_binary`` (finds ``etcd``, Debian's ``etcd-server`` that ``.ci/install-tools``
installs; missing, the test skips with a one-line reason, or fails when ``CI`` is set) and ``EtcdCluster`` (starts 1..n members with short heartbeat and
election timeouts, waits for ``/health``, kills a member with SIGKILL, stops all).

Must not import: the broker. Only the processes it started are ever signalled, by pid.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from broker.cli.devcluster import etcd_is_healthy, free_ports
from tests.support import debian_tool

__all__ = ["etcd_binary", "EtcdCluster"]


def etcd_binary() -> str:
    """The ``etcd`` binary's path; a skip when it is missing (a failure in CI:
    ``tests.support.debian_tool``)."""
    return debian_tool("etcd", "etcd-server")


class EtcdCluster:
    """``size`` etcd members on loopback; ``endpoints[i]`` is member i's client URL."""

    def __init__(self, tmp: Path, size: int) -> None:
        binary = etcd_binary()
        ports = free_ports(2 * size)
        self.endpoints = [f"http://127.0.0.1:{ports[2 * i]}" for i in range(size)]
        peers = [f"http://127.0.0.1:{ports[2 * i + 1]}" for i in range(size)]
        initial = ",".join(f"m{i}={peers[i]}" for i in range(size))
        self.procs: list[subprocess.Popen[bytes]] = []
        for i in range(size):
            log = open(tmp / f"m{i}.log", "wb")  # noqa: SIM115 - closed with the process
            self.procs.append(subprocess.Popen(
                [binary, "--name", f"m{i}", "--data-dir", str(tmp / f"m{i}"),
                 "--listen-client-urls", self.endpoints[i],
                 "--advertise-client-urls", self.endpoints[i],
                 "--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
                 "--initial-cluster", initial, "--initial-cluster-state", "new",
                 "--initial-cluster-token", f"skerry-test-{ports[0]}",
                 "--heartbeat-interval", "50", "--election-timeout", "500",
                 "--logger", "zap", "--log-level", "error"],
                stdout=log, stderr=subprocess.STDOUT))
            log.close()
        try:
            self.wait_healthy(range(size), timeout=15.0)
        except BaseException:
            self.stop()
            raise

    def wait_healthy(self, members: range | list[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for i in members:
            while not etcd_is_healthy(self.endpoints[i]):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"etcd member {i} not healthy after {timeout} s")
                time.sleep(0.05)

    def kill(self, index: int) -> None:
        """SIGKILL member ``index`` (a process this cluster started)."""
        proc = self.procs[index]
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def stop(self) -> None:
        for i in range(len(self.procs)):
            self.kill(i)
