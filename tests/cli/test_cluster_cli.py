"""``skerry dev-cluster``, ``skerry cluster status|elect`` and leader-routed ``skerry produce
--acks all`` end to end: real processes on free loopback ports, every wait bounded.

The operator-mode run (``--no-etcd``) always runs; the etcd run needs Debian's
``etcd-server`` (``.ci/install-tools``; missing, skipped with the reason, failed in CI)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.client.sync import Client, RoutedProducer
from tests.support import ROOT, V1Client, debian_tool

ENV = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


class DevCluster:
    """``skerry dev-cluster`` as a child process; ``addresses`` once it printed them."""

    def __init__(self, folder: Path, *extra: str) -> None:
        self.folder = folder
        self.out = folder.with_suffix(".out")
        with open(self.out, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "broker", "dev-cluster", "--dir", str(folder), *extra],
                stdout=out, stderr=subprocess.STDOUT, env=ENV, cwd=str(ROOT))
        deadline = time.monotonic() + 90
        while "Ctrl-C stops them all" not in self.text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"dev-cluster did not start:\n{self.text()}")
            time.sleep(0.1)
        self.addresses = {int(m.group(1)): m.group(2) for m in
                          re.finditer(r"^broker (\d+): (\S+) ", self.text(), re.M)}

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def broker_pids(self) -> dict[int, int]:
        """The pid of each broker child, found by its config path."""
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            for broker in self.addresses:
                if str(self.folder / f"broker{broker}" / "skerry.yaml").encode() in cmdline:
                    found[broker] = int(entry.name)
        return found

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


def skerry(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker", *args], input=stdin, text=True,
                          capture_output=True, env=ENV, cwd=str(ROOT), timeout=120)


def status(bootstrap: str) -> dict:
    done = skerry("cluster", "status", "--json", "--bootstrap", bootstrap)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def wait_for(check, what: str, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def lines(start: int, count: int) -> str:
    return "".join(f"k{i}:v{i}\n" for i in range(start, start + count))


def consumed(bootstrap: str) -> set[str]:
    done = skerry("consume", "demo", "--bootstrap", bootstrap, "-q")
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def rotating_producer(dev: DevCluster, kill_at: int) -> tuple[list[str], float]:
    """The seed SDK's producer: acks=all to partition 1 through the current broker of its
    list; on NOT_LEADER or a dead connection, the next broker, same message again. Broker 1
    (partition 1's leader) is killed with SIGKILL before message ``kill_at``. Returns the
    values acknowledged and the seconds from the kill to the next acknowledgement."""
    order = [1, 2, 0]
    current = 0
    acked: list[str] = []
    conns: dict[int, V1Client] = {}
    killed_at = resumed_at = 0.0
    for i in range(2 * kill_at):
        value = f"sdk{i}"
        if i == kill_at:
            os.kill(dev.broker_pids()[1], signal.SIGKILL)
            killed_at = time.monotonic()
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, f"{value} never acknowledged"
            broker = order[current]
            host, _, port = dev.addresses[broker].rpartition(":")
            try:
                conn = conns.get(broker) or V1Client(int(port), host=host, timeout=5)
                conns[broker] = conn
                reply = conn.request(f"V1|{i}|PRODUCE|demo k:{value} acks=all partition=1")
            except OSError:
                conns.pop(broker, None)
                current = (current + 1) % len(order)
                time.sleep(0.05)
                continue
            if "|OK|" in reply:
                acked.append(value)
                if i == kill_at:
                    resumed_at = time.monotonic()
                break
            assert "NOT_LEADER" in reply or "REPLICATION_TIMEOUT" in reply \
                or "UNAVAILABLE" in reply, reply
            if "NOT_LEADER" in reply:
                current = (current + 1) % len(order)
            time.sleep(0.05)
    for conn in conns.values():
        conn.close()
    return acked, resumed_at - killed_at


@pytest.fixture
def operator_cluster(tmp_path: Path) -> Iterator[DevCluster]:
    cluster = DevCluster(tmp_path / "dev", "--no-etcd")
    try:
        yield cluster
    finally:
        cluster.stop()


def test_dev_cluster_status_elect_and_routed_produce(operator_cluster: DevCluster) -> None:
    """Three brokers without etcd: the note says so; produce --acks all through a follower
    acknowledges every line; status shows three leaders and no under-replication; after a
    kill -9 of broker 1, status shows partition 1 leaderless, `cluster elect demo 1` moves
    it to broker 2, produce acknowledges every line again, nothing is lost; SIGTERM stops
    every process."""
    dev = operator_cluster
    assert "--no-etcd: the brokers run in the operator-driven mode" in dev.text()
    assert sorted(dev.addresses) == [0, 1, 2]
    first = dev.addresses[1]
    wait_for(lambda: [p["leader"] for p in status(first)["partitions"]] == [0, 1, 2],
             "three leaders")
    done = skerry("produce", "demo", "--acks", "all", "--bootstrap", first, stdin=lines(0, 300))
    assert done.returncode == 0 and "produced 300 messages" in done.stderr, done.stderr
    report = wait_for(lambda: (lambda r: r if r["under_replicated"] == 0 else None)(
        status(first)), "full replication")
    assert report["mode"] == "operator" and report["controller"] is None
    assert [b["up"] for b in report["brokers"]] == [True, True, True]
    assert [p["isr"] for p in report["partitions"]] == [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    text = skerry("cluster", "status", "--bootstrap", first)
    assert text.returncode == 0 and "under-replicated partitions: 0" in text.stdout

    os.kill(dev.broker_pids()[1], signal.SIGKILL)
    zero = dev.addresses[0]
    down = wait_for(lambda: (lambda r: r if not r["brokers"][1]["up"] else None)(status(zero)),
                    "broker 1 down")
    assert down["partitions"][1]["leader"] == -1 and down["partitions"][1]["under_replicated"]
    assert skerry("cluster", "status", "--bootstrap", zero).returncode == 1
    elected = skerry("cluster", "elect", "demo", "1", "--bootstrap", zero)
    assert elected.returncode == 0, elected.stderr
    assert elected.stdout.startswith("demo/1: broker 2 leads now (isr [2 0], term 1, index 1)")
    wait_for(lambda: status(zero)["partitions"][1]["leader"] == 2, "broker 2 leading")
    # acks=all waits for every ISR member: until the leaders drop broker 1 (no fetch for
    # replication.replica_lag_timeout_ms, 3 s in dev-cluster, counted from its last fetch)
    # a write can time out (ack_timeout_ms, 2 s); on a quiet machine the steps above take
    # less than the difference.
    wait_for(lambda: all(1 not in p["isr"] for p in status(zero)["partitions"]),
             "broker 1 out of every ISR")
    again = skerry("produce", "demo", "--acks", "all", "--bootstrap", zero, stdin=lines(300, 300))
    assert again.returncode == 0 and "produced 300 messages" in again.stderr, again.stderr
    assert consumed(zero) == {f"v{i}" for i in range(600)}

    pids = dev.broker_pids()
    assert dev.stop() == 0
    assert "dev-cluster stopped" in dev.text()
    for pid in pids.values():
        assert not Path(f"/proc/{pid}").exists() or \
            b"zombie" in Path(f"/proc/{pid}/status").read_bytes().lower()


def test_dev_cluster_with_etcd_fails_over_by_itself(tmp_path: Path) -> None:
    """With etcd installed: dev-cluster starts it, status names a controller, and after a
    kill -9 of broker 1 the controller elects a new leader for partition 1 on its own: a
    producer rotating through its brokers on NOT_LEADER (the seed SDK's way) loses no
    acknowledged message across it, the Python client's RoutedProducer follows the new
    leader, and produce --acks all keeps acknowledging everything."""
    debian_tool("etcd", "etcd-server")
    dev = DevCluster(tmp_path / "dev")
    try:
        assert "etcd: http://127.0.0.1:" in dev.text()
        zero = dev.addresses[0]
        done = skerry("produce", "demo", "--acks", "all", "--bootstrap", zero,
                      stdin=lines(0, 200))
        assert done.returncode == 0 and "produced 200 messages" in done.stderr, done.stderr
        report = wait_for(lambda: (lambda r: r if r["controller"] is not None
                                   and r["under_replicated"] == 0 else None)(status(zero)),
                          "a controller and full replication")
        assert report["mode"] == "etcd"
        routed = RoutedProducer(zero, timeout=5, retries=40, backoff=0.25)
        py_acked = []
        for i in range(30):  # learns the leaders, broker 1 for partition 1 among them
            routed.produce("demo", f"py{i}", key=f"py{i}", acks="all")
            py_acked.append(f"py{i}")
        acked, failover_s = rotating_producer(dev, kill_at=20)
        print(f"kill -9 of the leader -> next acknowledgement: {failover_s:.2f} s")
        assert len(acked) == 40 and failover_s < 10, failover_s
        moved = wait_for(lambda: (lambda p: p if p["leader"] not in (-1, 1) else None)(
            status(zero)["partitions"][1]), "a new leader for partition 1", 30)
        assert moved["leader"] in (0, 2)
        again = skerry("produce", "demo", "--acks", "all", "--bootstrap", zero,
                       stdin=lines(200, 200))
        assert again.returncode == 0 and "produced 200 messages" in again.stderr, again.stderr
        for i in range(30, 60):  # its map is stale now: NOT_LEADER / refused, then the new
            routed.produce("demo", f"py{i}", key=f"py{i}", acks="all")  # leader
            py_acked.append(f"py{i}")
        routed.close()
        assert consumed(zero) == {f"v{i}" for i in range(400)} | set(acked) | set(py_acked)
        with Client(dev.addresses[moved["leader"]]) as client:
            stored = [m.value.decode() for m in client.consume("demo", 1, 0, max_messages=10_000
                                                               ).messages]
        assert list(dict.fromkeys(v for v in stored if v.startswith("sdk"))) == acked
        # a forced election through etcd: partition 2 (replicas 2 0 1) moves to broker 0
        elected = skerry("cluster", "elect", "demo", "2", "--broker", "0", "--bootstrap", zero)
        assert elected.returncode == 0, elected.stderr
        assert re.match(r"demo/2: broker 0 leads now \(isr \[0 2\], term \d+, index \d+\)",
                        elected.stdout), elected.stdout
        wait_for(lambda: status(zero)["partitions"][2]["leader"] == 0, "broker 0 leading")
    finally:
        assert dev.stop() == 0


def test_the_commands_in_docs_cluster_md_are_valid() -> None:
    """Every ``$ skerry ...`` command docs/cluster.md shows parses with the real parser, and
    the shell line dev-cluster suggests makes key:value lines."""
    import shlex

    from broker.cli.main import build_parser

    text = (ROOT / "docs" / "cluster.md").read_text()
    commands = re.findall(r"^\$ skerry (.+)$", text, re.M)
    assert {c.split()[0] for c in commands} >= {"cluster", "dev-cluster"}
    for command in commands:
        build_parser().parse_args(shlex.split(command))
    suggested = re.search(r"^      (seq 100 \| sed .+?) \| skerry", text, re.M)
    assert suggested is not None
    made = subprocess.run(["bash", "-c", suggested.group(1).replace("100", "3")],
                          capture_output=True, text=True, timeout=10)
    assert made.stdout == "k1:v1\nk2:v2\nk3:v3\n"


def test_ctrl_c_stops_the_brokers_before_etcd(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to dev-cluster's whole process group, as a terminal sends it) stops
    the brokers first and etcd only once they are gone: every broker leaves etcd cleanly
    (no "could not revoke etcd lease", a clean shutdown logged) and etcd is stopped too."""
    debian_tool("etcd", "etcd-server")
    folder = tmp_path / "dev"
    out = folder.with_suffix(".out")
    with open(out, "wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker", "dev-cluster", "--dir", str(folder)],
            stdout=sink, stderr=subprocess.STDOUT, env=ENV, cwd=str(ROOT),
            start_new_session=True)  # its own group, which the SIGINT below goes to
    try:
        wait_for(lambda: "Ctrl-C stops them all" in out.read_text(errors="replace")
                 or proc.poll() is not None, "dev-cluster started", 90)
        assert proc.poll() is None, out.read_text(errors="replace")
        zero = re.search(r"^broker 0: (\S+) ", out.read_text(), re.M)
        assert zero is not None
        wait_for(lambda: status(zero.group(1))["controller"] is not None, "a controller")
        etcd_pids = [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()
                     and str(folder / "etcd").encode() in _cmdline(e)]
        assert len(etcd_pids) == 1
        # the terminal's SIGINT goes to dev-cluster's group only: etcd is not in it
        assert os.getpgid(etcd_pids[0]) != os.getpgid(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "dev-cluster stopped" in out.read_text()
    for broker in range(3):
        log = (folder / f"broker{broker}" / "broker.log").read_text(errors="replace")
        assert "clean shutdown complete" in log, log[-2000:]
        assert "could not revoke etcd lease" not in log, log[-2000:]
    assert not Path(f"/proc/{etcd_pids[0]}").exists() or \
        b"zombie" in Path(f"/proc/{etcd_pids[0]}/status").read_bytes().lower()


def _cmdline(entry: Path) -> bytes:
    try:
        return (entry / "cmdline").read_bytes()
    except OSError:
        return b""
