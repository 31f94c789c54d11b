"""The cluster-wide group coordinator, measured: one etcd member and three broker processes
on loopback (``cluster.etcd``, lease TTL 3 s, ``__skerry_groups`` with RF 3).

* **The forwarding hop**: sequential COMMITs (one at a time, each waiting for its answer)
  and OFFSETs of one group sent to its coordinator, then to a broker that forwards them to
  the coordinator over the broker link: median and p99 latency of each, and what the hop
  adds. Then pipelined COMMITs (a window of 100) through each: commits per second.
* **Failover**: while one committer per broker commits ever higher offsets (about 100 a
  second each), the group's coordinator is killed with kill -9 (``--failovers`` times; it
  is restarted in between): the time until a commit is acknowledged again through a
  surviving broker, and a check that every partition's committed offset afterwards is the
  last one acknowledged (nothing lost, nothing moved back).

    .venv/bin/python -m bench.group_coordinator --commits 2000 --failovers 5

``GroupCluster`` is shared with ``tests/control/test_cluster_groups.py``.

Must not import: Twisted or the broker's runtime.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.cli.devcluster import free_ports
from groups.records import partition_for_group
from tests.control.real_etcd import EtcdCluster
from tests.support import BrokerProcess

__all__ = ["GroupCluster", "wait", "assigned"]

TTL_MS = 3000
STATE_PARTITIONS = 4


class GroupCluster:
    """One etcd member and three brokers; ``ask(broker, line)`` sends one V1 request."""

    def __init__(self, workdir: Path, *, ttl_ms: int = TTL_MS,
                 state_partitions: int = STATE_PARTITIONS,
                 extra: dict[str, Any] | None = None, kafka: bool = False) -> None:
        """``extra``: more settings for every broker (``{"iggy_port": 0}``); ``kafka``: each
        broker also has a Kafka listener (``kafka_bootstrap``)."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.ttl_ms = ttl_ms
        self.state_partitions = state_partitions
        self.etcd = EtcdCluster(workdir, 1)
        ports = free_ports(6 if kafka else 3)
        brokers = {i: f"127.0.0.1:{p}" for i, p in enumerate(ports[:3])}
        kafka_brokers = {i: f"127.0.0.1:{p}" for i, p in enumerate(ports[3:])}
        self.kafka_bootstrap = ",".join(kafka_brokers.values())
        self.procs: dict[int, BrokerProcess] = {}
        for i, port in enumerate(ports[:3]):
            config: dict[str, Any] = {
                "log_level": "info",
                "auto_create_topics": False,
                "groups": {"state_topic_partitions": state_partitions},
                "replication": {"replica_lag_timeout_ms": 2000, "ack_timeout_ms": 3000,
                                "fetch_wait_ms": 200, "retry_backoff_ms": 100,
                                "request_timeout_ms": 2000},
                "cluster": {"broker_id": i, "brokers": brokers, "id": f"cg{ports[0]}",
                            "etcd": {"endpoints": self.etcd.endpoints,
                                     "lease_ttl_ms": ttl_ms}},
                **(extra or {}),
            }
            if kafka:
                config["kafka_port"] = ports[3 + i]
                config["cluster"]["kafka_brokers"] = kafka_brokers
            self.procs[i] = BrokerProcess(workdir / f"broker{i}", config, port=port)

    def start(self, *ids: int) -> None:
        for i in ids or tuple(self.procs):
            self.procs[i].start()

    def alive(self, broker: int) -> bool:
        proc = self.procs[broker].proc
        return proc is not None and proc.poll() is None

    def ask(self, broker: int, line: str, timeout: float = 5.0) -> str:
        client = self.procs[broker].client(timeout=timeout)
        try:
            return client.request(line)
        finally:
            client.close()

    def create_topic(self, name: str, partitions: int) -> None:
        """A topic with RF 3, every partition writable (one message in each)."""
        reply = self.ask(0, f"V1|t|ADMIN_CREATE_TOPIC|{name} {partitions} 3 min_isr=2")
        assert "|OK|" in reply, reply
        for p in range(partitions):
            wait(lambda p=p: any("|OK|" in self.ask(b, f"V1|p|PRODUCE|{name} k:v "
                                                       f"partition={p} acks=all")
                                 for b in self.procs if self.alive(b)),
                 f"{name}/{p} writable", 30)

    def fill(self, name: str, count: int, partition: int = 0) -> None:
        """``count`` more messages in ``partition`` of ``name`` (pipelined to its leader,
        1,000 at a time), so that offsets up to ``count`` may be committed."""
        leader = next(b for b in self.procs if self.alive(b) and "|OK|" in self.ask(
            b, f"V1|p|PRODUCE|{name} k:v partition={partition} acks=all"))
        client = self.procs[leader].client(timeout=30)
        try:
            for start in range(0, count, 1000):
                n = min(1000, count - start)
                client.send("".join(f"V1|{i}|PRODUCE|{name} k:v partition={partition} "
                                    f"acks=all\n" for i in range(n)).encode())
                for reply in client.readlines(n):
                    assert b"|OK|" in reply, reply
        finally:
            client.close()

    def ready(self) -> None:
        """Wait until every broker answers group commands (the topic exists, each
        coordinator partition has a loaded leader)."""
        for b in self.procs:
            wait(lambda b=b: "|OK|" in self.ask(b, "V1|w|LIST_GROUPS|"), "groups served", 60)

    def coordinator(self, group: str) -> int | None:
        """The broker leading the group's partition of ``__skerry_groups``, confirmed."""
        partition = partition_for_group(group, self.state_partitions)
        for broker in self.procs:
            if not self.alive(broker):
                continue
            try:
                reply = self.ask(broker, f"V1|s|REPLICA_STATUS|__skerry_groups {partition}",
                                 1.0)
            except OSError:
                continue
            if "role=leader" in reply and "confirmed=true" in reply:
                return broker
        return None

    def close(self) -> None:
        for proc in self.procs.values():
            proc.__exit__(None, None, None)
        self.etcd.stop()


def wait(condition: Callable[[], Any], what: str, timeout: float = 30.0,
         step: float = 0.02) -> Any:
    """``condition()``'s first truthy value; ``AssertionError`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = condition()
            if last:
                return last
        except (OSError, AssertionError) as exc:
            last = exc
        time.sleep(step)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def assigned(reply: str) -> tuple[int, list[int]]:
    """``(generation, partitions)`` of a JOIN or SYNC answer."""
    m = re.fullmatch(r"V1\|[^|]+\|OK\|generation=(\d+) assigned=\[([\d ]*)\]", reply)
    assert m, reply
    return int(m.group(1)), [int(p) for p in m.group(2).split()]


# ---------------------------------------------------------------------------- measurements


def _sequential(c: GroupCluster, broker: int, lines: list[str]) -> list[float]:
    client = c.procs[broker].client(timeout=10)
    took = []
    try:
        for line in lines:
            start = time.perf_counter()
            reply = client.request(line)
            took.append(time.perf_counter() - start)
            assert "|OK|" in reply, reply
    finally:
        client.close()
    return took


def _pipelined(c: GroupCluster, broker: int, lines: list[str], window: int = 100) -> float:
    client = c.procs[broker].client(timeout=30)
    start = time.perf_counter()
    try:
        for i in range(0, len(lines), window):
            chunk = lines[i:i + window]
            client.send("".join(line + "\n" for line in chunk).encode())
            for reply in client.readlines(len(chunk)):
                assert b"|OK|" in reply, reply
    finally:
        client.close()
    return len(lines) / (time.perf_counter() - start)


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def measure_hop(c: GroupCluster, commits: int) -> dict[str, float]:
    """Latency of COMMIT and OFFSET at the coordinator and one hop away."""
    wait(lambda: c.coordinator("bench") is not None, "a coordinator", 30)
    coordinator = c.coordinator("bench")
    assert coordinator is not None
    other = next(b for b in c.procs if b != coordinator)
    generation, _ = assigned(c.ask(coordinator, "V1|j|JOIN|bench hop m session_timeout_ms="
                                                "600000"))
    figures: dict[str, float] = {}
    for name, broker in (("direct", coordinator), ("forwarded", other)):
        # Each COMMIT moves the offset (a commit of the offset already held writes nothing).
        base = 1 if name == "direct" else commits + 51
        commit = [f"V1|{i}|COMMIT|bench hop m {generation} 0 {base + i}"
                  for i in range(commits + 50)]
        offset = [f"V1|{i}|OFFSET|bench hop 0" for i in range(commits)]
        _sequential(c, broker, commit[:50])  # warm the connections
        took = _sequential(c, broker, commit[50:])
        figures[f"commit_{name}_p50_ms"] = _ms(took, 0.5)
        figures[f"commit_{name}_p99_ms"] = _ms(took, 0.99)
        took = _sequential(c, broker, offset)
        figures[f"offset_{name}_p50_ms"] = _ms(took, 0.5)
        figures[f"offset_{name}_p99_ms"] = _ms(took, 0.99)
        # Alternating offsets: every COMMIT changes the state, so every one is written.
        figures[f"commit_{name}_pipelined_per_s"] = _pipelined(c, broker, [
            f"V1|p{i}|COMMIT|bench hop m {generation} 0 {i % 2 + 1}" for i in range(commits)])
    return figures


class _Committer(threading.Thread):
    """Commits ever higher offsets of one partition of group ``fail`` through one broker
    (ADMIN_COMMIT, one every ``pause`` seconds), retrying a refused commit; ``acked`` is the
    last offset acknowledged. Stops when told, or when its broker is gone."""

    def __init__(self, c: GroupCluster, broker: int, partition: int, start: int,
                 pause: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.c, self.broker, self.partition = c, broker, partition
        self.next = start + 1
        self.acked = start
        self.pause = pause
        self.stop = threading.Event()
        self.acked_at: list[float] = []

    def run(self) -> None:
        client = None
        while not self.stop.is_set():
            try:
                if client is None:
                    client = self.c.procs[self.broker].client(timeout=5)
                reply = client.request(f"V1|c|ADMIN_COMMIT|fail hop {self.partition} "
                                       f"{self.next}")
            except OSError:
                if client is not None:
                    client.close()
                client = None
                if not self.c.alive(self.broker):
                    return
                time.sleep(0.05)
                continue
            if reply == "V1|c|OK|committed=true":
                self.acked = self.next
                self.acked_at.append(time.monotonic())
                self.next += 1
            time.sleep(self.pause)
        if client is not None:
            client.close()


def measure_failover(c: GroupCluster, runs: int) -> list[float]:
    """kill -9 of the coordinator of group ``fail`` ``runs`` times, while one committer per
    broker commits its own partition of ``hop`` about 100 times a second: the time from
    the kill to the first commit acknowledged again through a surviving broker, and a check
    that every partition's committed offset afterwards is the last one acknowledged
    (nothing lost, nothing moved back). The killed broker is restarted between runs."""
    times: list[float] = []
    last = {p: 0 for p in range(3)}
    for _ in range(runs):
        wait(lambda: c.coordinator("fail") is not None, "a coordinator", 60)
        coordinator = c.coordinator("fail")
        assert coordinator is not None
        committers = [_Committer(c, b, b, last[b]) for b in c.procs]
        for committer in committers:
            committer.start()
        wait(lambda cs=committers: all(x.acked > last[x.broker] for x in cs), "commits", 30)
        c.procs[coordinator].kill9()
        killed = time.monotonic()
        survivors = [x for x in committers if x.broker != coordinator]
        wait(lambda k=killed, ss=survivors: any(t > k for x in ss for t in x.acked_at[-1:]),
             "a commit acknowledged after the kill", 30, step=0.01)
        times.append(min(t for x in survivors for t in x.acked_at if t > killed) - killed)
        time.sleep(0.3)
        for committer in committers:
            committer.stop.set()
            committer.join(timeout=10)
        reader = survivors[0].broker
        for x in committers:
            reply = c.ask(reader, f"V1|o|OFFSET|fail hop {x.partition}")
            held = int(reply.rsplit("=", 1)[1])
            # The last acknowledged commit is held; one more may have been written whose
            # answer the kill swallowed (it never moves back).
            assert held in (x.acked, x.acked + 1), (x.partition, held, x.acked)
            last[x.partition] = held
        c.procs[coordinator].start()
        c.ready()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--failovers", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="skerry-groups-") as tmp:
        c = GroupCluster(Path(tmp))
        try:
            c.start()
            c.ready()
            c.create_topic("hop", 3)
            c.fill("hop", 2 * args.commits + 200 + 600 * args.failovers)
            for p in (1, 2):
                c.fill("hop", 600 * args.failovers, p)
            figures = measure_hop(c, args.commits)
            for name, value in figures.items():
                print(f"{name:36} {value:10.2f}")
            added = figures["commit_forwarded_p50_ms"] - figures["commit_direct_p50_ms"]
            print(f"{'hop adds to a COMMIT (p50, ms)':36} {added:10.2f}")
            if args.failovers:
                times = measure_failover(c, args.failovers)
                print(f"failover under commits (kill -9 -> first commit acknowledged again), "
                      f"{len(times)} runs: median {statistics.median(times):.2f} s, max "
                      f"{max(times):.2f} s (lease TTL {c.ttl_ms / 1000:.1f} s); every run: "
                      f"no acknowledged commit lost or moved back")
        finally:
            c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
