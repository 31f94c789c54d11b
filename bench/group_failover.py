"""Coordinator failover under a steady consumer load: one etcd member and three brokers
(``GroupCluster`` with Kafka listeners, lease TTL 3 s), topic ``steady`` (3 partitions,
RF 3, min ISR 2) fed by a steady producer (``--rate`` messages a second in all), consumed
by two groups whose ids hash to the same partition of ``__skerry_groups`` (one
coordinator for both):

* ``ledger``: three V1 members, each its own process and each told all three brokers,
  starting on a different one (the seed SDK's way: JOIN/SYNC/HEARTBEAT/CONSUME/COMMIT,
  on to the next broker of the list when one fails);
* ``kledger``: three confluent-kafka ``subscribe()`` consumers, each its own process, told
  all three Kafka listeners.

Every member commits a partition each time it has read 100 more messages of it, and logs
each commit acknowledged, each partition it starts on (with the offset it starts from) and
the first offset it reads after each start. Each run kills the coordinator's broker with
kill -9 while this goes on, and measures the time from the kill until *both* groups have a
commit acknowledged again ("served again"). Then, every run:

* **no committed offset lost or moved back**: each partition's committed offset (OFFSET
  through a surviving broker) is at least the last commit acknowledged before it was
  asked, and the acknowledged commits of each partition never go down;
* **each member resumes from its last commit**: every partition a member starts on (after
  a rebalance, on another broker, ...) starts at least at the last commit acknowledged
  before, and the first offset read after the kill on every partition is at least the last
  commit acknowledged before the kill (nothing committed is read again);

and the killed broker is started again (every replica back in sync) before the next run.
Prints each run and the median and max over ``--runs`` runs:

    .venv/bin/python -m bench.group_failover --runs 20

Bounded: ``--runs`` runs, each waiting at most a minute for anything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.group_coordinator import STATE_PARTITIONS, GroupCluster, wait
from groups.records import GROUPS_TOPIC, partition_for_group
from tests.support import ROOT, V1Client

__all__ = ["run", "V1_GROUP", "KAFKA_GROUP", "TOPIC"]

TOPIC = "steady"
PARTITIONS = 3
V1_GROUP = "ledger"
COMMIT_EVERY = 100
SESSION_TIMEOUT_MS = 10_000


def _same_partition(group: str, prefix: str) -> str:
    """A group id starting with ``prefix`` in the same ``__skerry_groups`` partition as
    ``group`` (so one broker coordinates both)."""
    target = partition_for_group(group, STATE_PARTITIONS)
    return next(f"{prefix}{i}" for i in range(1000)
                if partition_for_group(f"{prefix}{i}", STATE_PARTITIONS)
                == target)


KAFKA_GROUP = _same_partition(V1_GROUP, "kledger")


class _Log:
    """A member's event log: one JSON object a line, flushed at once."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "a", buffering=1)

    def __call__(self, event: str, **fields: Any) -> None:
        self._file.write(json.dumps({"ev": event, "t": time.time(), **fields}) + "\n")


# ---------------------------------------------------------------------------- V1 member


class _V1Member:
    """A V1 group member over a list of brokers: JOIN, then CONSUME its partitions,
    COMMIT every ``COMMIT_EVERY`` messages of a partition, HEARTBEAT every second; a
    broker that fails (connection refused or dropped, UNAVAILABLE) is left for the next
    one of the list; GENERATION_MISMATCH is answered with SYNC (JOIN when that fails)."""

    def __init__(self, ports: list[int], home: int, member: str, log: _Log) -> None:
        self.ports, self.at, self.member, self.log = ports, home, member, log
        self.client: V1Client | None = None
        self.generation: int | None = None
        self.positions: dict[int, int] = {}
        self.unread: set[int] = set()
        self.counts: dict[int, int] = {}
        self.beat = 0.0

    def ask(self, line: str) -> str:
        if self.client is None:
            self.client = V1Client(self.ports[self.at], timeout=5)
        return self.client.request(line)

    def next_broker(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = None
        self.at = (self.at + 1) % len(self.ports)
        time.sleep(0.05)

    def take(self, reply: str) -> None:
        m = re.fullmatch(r"V1\|[^|]+\|OK\|generation=(\d+) assigned=\[([\d ]*)\]", reply)
        if m is None:
            raise _Retry(reply)
        self.generation = int(m.group(1))
        assigned = [int(p) for p in m.group(2).split()]
        for p in list(self.positions):
            if p not in assigned:
                del self.positions[p]
        for p in assigned:
            if p not in self.positions:
                reply = self.ask(f"V1|o|OFFSET|{V1_GROUP} {TOPIC} {p}")
                if "|OK|offset=" not in reply:
                    self.positions.clear()
                    raise _Retry(reply)
                self.positions[p] = int(reply.rsplit("=", 1)[1])
                self.counts[p] = 0
                self.unread.add(p)
                self.log("start", p=p, offset=self.positions[p], gen=self.generation)

    def step(self) -> None:
        if self.generation is None:
            self.take(self.ask(f"V1|j|JOIN|{V1_GROUP} {TOPIC} {self.member} "
                               f"session_timeout_ms={SESSION_TIMEOUT_MS}"))
        if time.monotonic() - self.beat > 1.0:
            reply = self.ask(f"V1|h|HEARTBEAT|{V1_GROUP} {TOPIC} {self.member} "
                             f"{self.generation}")
            if "GENERATION_MISMATCH" in reply:
                self.resync()
                return
            if "|OK|" not in reply:
                raise _Retry(reply)
            self.beat = time.monotonic()
        read = 0
        for p in sorted(self.positions):
            reply = self.ask(f"V1|c|CONSUME|{TOPIC} {p} {self.positions[p]} max=500")
            m = re.fullmatch(r"V1\|c\|OK\|messages=(.*) hw=-?\d+", reply)
            if m is None:
                raise _Retry(reply)
            offsets = [int(item.split(":", 1)[0]) for item in m.group(1).split(",") if item]
            read += len(offsets)
            if offsets:
                if p in self.unread:
                    self.unread.discard(p)
                    self.log("read", p=p, offset=offsets[0])
                self.positions[p] = offsets[-1] + 1
                self.counts[p] += len(offsets)
            if self.counts[p] >= COMMIT_EVERY:
                at = self.positions[p]
                reply = self.ask(f"V1|m|COMMIT|{V1_GROUP} {TOPIC} {self.member} "
                                 f"{self.generation} {p} {at}")
                if reply == "V1|m|OK|committed=true":
                    self.counts[p] = 0
                    self.log("commit", p=p, offset=at)
                elif "GENERATION_MISMATCH" in reply:
                    self.resync()
                    return
                else:
                    raise _Retry(reply)
        if not read:
            time.sleep(0.05)

    def resync(self) -> None:
        reply = self.ask(f"V1|s|SYNC|{V1_GROUP} {TOPIC} {self.member} {self.generation}")
        if "|OK|" in reply:
            self.take(reply)
        else:  # evicted: join again (its partitions are fetched from the commits)
            self.generation = None
            self.positions.clear()

    def run(self, stop: str) -> None:
        while not os.path.exists(stop):
            try:
                self.step()
            except _Retry as retry:
                self.log("retry", reply=str(retry)[:200], broker=self.at)
                if "UNAVAILABLE" in str(retry) or "NOT_LEADER" in str(retry):
                    time.sleep(0.05)
                else:
                    self.next_broker()
            except OSError as error:
                self.log("retry", reply=repr(error)[:200], broker=self.at)
                self.next_broker()


class _Retry(Exception):
    """An answer this member does not take: try again (maybe on another broker)."""


def v1_member(ports: list[int], home: int, member: str, log: str, stop: str) -> None:
    _V1Member(ports, home, member, _Log(log)).run(stop)


# ---------------------------------------------------------------------------- Kafka member


def kafka_member(bootstrap: str, member: str, log_path: str, stop: str) -> None:
    """A confluent-kafka ``subscribe()`` consumer committing (synchronously, the offsets
    it has read) every ``COMMIT_EVERY`` messages of a partition."""
    import confluent_kafka as ck

    log = _Log(log_path)
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": KAFKA_GROUP,
                            "client.id": member, "enable.auto.commit": False,
                            "auto.offset.reset": "earliest",
                            "session.timeout.ms": SESSION_TIMEOUT_MS,
                            "heartbeat.interval.ms": 1000})
    positions: dict[int, int] = {}
    counts: dict[int, int] = {}
    unread: set[int] = set()

    def assigned(c: Any, partitions: list[Any]) -> None:
        committed = c.committed(partitions, timeout=30)
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else 0
            positions[tp.partition] = offset
            counts[tp.partition] = 0
            unread.add(tp.partition)
            log("start", p=tp.partition, offset=offset)

    def revoked(_c: Any, partitions: list[Any]) -> None:
        for tp in partitions:
            positions.pop(tp.partition, None)
            unread.discard(tp.partition)

    consumer.subscribe([TOPIC], on_assign=assigned, on_revoke=revoked)
    try:
        while not os.path.exists(stop):
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None and msg.partition() in positions:
                p = msg.partition()
                if p in unread:
                    unread.discard(p)
                    log("read", p=p, offset=msg.offset())
                positions[p] = msg.offset() + 1
                counts[p] += 1
            due = [p for p in positions if counts[p] >= COMMIT_EVERY]
            if not due:
                continue
            offsets = [ck.TopicPartition(TOPIC, p, positions[p]) for p in due]
            try:
                done = consumer.commit(offsets=offsets, asynchronous=False)
            except ck.KafkaException as error:
                log("retry", reply=str(error)[:200])
                continue
            for tp in done or []:
                if tp.error is None:
                    counts[tp.partition] = 0
                    log("commit", p=tp.partition, offset=tp.offset)
    finally:
        consumer.close()


# ---------------------------------------------------------------------------- the runs


def _events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # a line being written
            pass
    return out


class _Producer(threading.Thread):
    """``rate`` messages a second over the topic's partitions (PRODUCE acks=all, 1/20 of
    a second's worth pipelined at a time), each partition's to the broker that last took
    one, the next broker on a refusal (the message is sent again)."""

    def __init__(self, c: GroupCluster, rate: int) -> None:
        super().__init__(daemon=True)
        self.c, self.rate = c, rate
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> None:
        at = {p: p for p in range(PARTITIONS)}
        clients: dict[int, V1Client] = {}
        tick = 0.05
        per_partition = max(1, round(self.rate * tick / PARTITIONS))
        while not self.stop.is_set():
            started = time.monotonic()
            for p in range(PARTITIONS):
                broker = at[p]
                try:
                    if broker not in clients:
                        clients[broker] = self.c.procs[broker].client(timeout=5)
                    client = clients[broker]
                    client.send("".join(f"V1|{i}|PRODUCE|{TOPIC} k:m{self.sent + i} "
                                        f"partition={p} acks=all\n"
                                        for i in range(per_partition)).encode())
                    replies = client.readlines(per_partition)
                except OSError:
                    clients.pop(broker, None)
                    at[p] = (broker + 1) % 3
                    continue
                ok = sum(1 for r in replies if b"|OK|" in r)
                self.sent += ok
                if ok < per_partition:
                    at[p] = (broker + 1) % 3
            time.sleep(max(0.0, tick - (time.monotonic() - started)))
        for client in clients.values():
            client.close()


def _in_sync(c: GroupCluster) -> bool:
    """Every replica of the topic and of the groups' partition is in the ISR."""
    state = partition_for_group(V1_GROUP, c.state_partitions)
    for topic, p in [(TOPIC, q) for q in range(PARTITIONS)] + [(GROUPS_TOPIC, state)]:
        for b in c.procs:
            reply = c.ask(b, f"V1|s|REPLICA_STATUS|{topic} {p}", 2.0)
            if "role=leader" in reply:
                if "isr=[0 1 2]" not in reply:
                    return False
                break
        else:
            return False
    return True


def _committed(c: GroupCluster, broker: int, group: str) -> dict[int, int]:
    out = {}
    for p in range(PARTITIONS):
        reply = c.ask(broker, f"V1|o|OFFSET|{group} {TOPIC} {p}", 5.0)
        assert "|OK|offset=" in reply, reply
        out[p] = int(reply.rsplit("=", 1)[1])
    return out


class Members:
    """The six member processes and their logs."""

    def __init__(self, c: GroupCluster, workdir: Path) -> None:
        self.workdir = workdir
        self.stop = str(workdir / "stop")
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: dict[str, Path] = {}
        ports = [c.procs[b].port for b in sorted(c.procs)]
        for i in range(3):
            name = f"v{i}"
            self.logs[name] = workdir / f"{name}.jsonl"
            self._spawn("v1-member", ",".join(map(str, ports)), str(i), name)
        for i in range(3):
            name = f"k{i}"
            self.logs[name] = workdir / f"{name}.jsonl"
            self._spawn("kafka-member", c.kafka_bootstrap, name)

    def _spawn(self, *args: str) -> None:
        name = args[-1]
        err = open(self.workdir / f"{name}.err", "ab")
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "bench.group_failover", *args,
             "--log", str(self.logs[name]), "--stop", self.stop],
            cwd=str(ROOT), stdout=err, stderr=subprocess.STDOUT))
        err.close()

    def events(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """``(group, member, event)`` of every member, in each member's order."""
        for name, path in self.logs.items():
            group = V1_GROUP if name.startswith("v") else KAFKA_GROUP
            for event in _events(path):
                yield group, name, event

    def close(self) -> None:
        Path(self.stop).touch()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _last_commits(events: list[tuple[str, str, dict[str, Any]]], before: float
                  ) -> dict[tuple[str, int], int]:
    last: dict[tuple[str, int], int] = {}
    for group, _name, e in events:
        if e["ev"] == "commit" and e["t"] < before:
            key = (group, e["p"])
            last[key] = max(last.get(key, 0), e["offset"])
    return last


def check(events: list[tuple[str, str, dict[str, Any]]], killed: float) -> list[str]:
    """What went wrong (empty: nothing) in the events of all runs so far; see the module
    docstring."""
    problems: list[str] = []
    commits = sorted((e["t"], g, e["p"], e["offset"], n) for g, n, e in events
                     if e["ev"] == "commit")
    high: dict[tuple[str, int], int] = {}
    for t, g, p, offset, name in commits:
        if offset < high.get((g, p), 0):
            problems.append(f"{g}/{p}: {name} committed {offset} after {high[(g, p)]} "
                            f"(moved back) at {t:.3f}")
        high[(g, p)] = max(high.get((g, p), 0), offset)
    for g, name, e in events:
        if e["ev"] == "start":
            before = _last_commits(events, e["t"]).get((g, e["p"]), 0)
            if e["offset"] < before:
                problems.append(f"{g}/{e['p']}: {name} started at {e['offset']}, below the "
                                f"last acknowledged commit {before}")
    at_kill = _last_commits(events, killed)
    first_read: dict[tuple[str, int], tuple[float, int, str]] = {}
    for g, name, e in events:
        if e["ev"] == "read" and e["t"] > killed:
            key = (g, e["p"])
            if key not in first_read or e["t"] < first_read[key][0]:
                first_read[key] = (e["t"], e["offset"], name)
    for (g, p), (_t, offset, name) in first_read.items():
        if offset < at_kill.get((g, p), 0):
            problems.append(f"{g}/{p}: {name} read from {offset} after the kill, below "
                            f"the commit {at_kill[(g, p)]} acknowledged before it")
    return problems


def _late(members: Members, firsts: dict[str, float], killed: float, target: float) -> None:
    """Over the target: what each member of a late group was answered meanwhile."""
    for group, first in firsts.items():
        if first - killed <= target:
            continue
        for g, name, e in members.events():
            if g == group and e["ev"] == "retry" and killed <= e["t"] <= first:
                print(f"    {name} +{e['t'] - killed:.2f} s: {e['reply']} "
                      f"(broker {e.get('broker', '?')})")


def run(runs: int, rate: int = 300, quiet: bool = False) -> list[float]:
    """``runs`` kills; the time until both groups were served again, per run. Raises
    ``AssertionError`` naming what went wrong."""
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="skerry-group-failover-") as tmp:
        c = GroupCluster(Path(tmp) / "cluster", kafka=True)
        producer = members = None
        try:
            c.start()
            c.ready()
            c.create_topic(TOPIC, PARTITIONS)
            producer = _Producer(c, rate)
            producer.start()
            members = Members(c, Path(tmp))
            for run_no in range(1, runs + 1):
                wait(lambda: _in_sync(c), "every replica in sync", 60, step=0.2)
                wait(lambda: c.coordinator(V1_GROUP) is not None, "a coordinator", 60)
                coordinator = c.coordinator(V1_GROUP)
                assert coordinator is not None
                # Every member has committed lately: both groups are stable (one partition
                # each), not in the middle of a rebalance.
                mark = time.time()
                wait(lambda m=mark: {n for _g, n, e in members.events()
                                     if e["ev"] == "commit" and e["t"] > m + 1}
                     == set(members.logs), "commits of every member", 90, step=0.1)
                c.procs[coordinator].kill9()
                killed = time.time()

                def served(k: float = killed) -> dict[str, float] | None:
                    firsts: dict[str, float] = {}
                    for g, _n, e in members.events():
                        if e["ev"] == "commit" and e["t"] > k:
                            firsts[g] = min(firsts.get(g, e["t"]), e["t"])
                    return firsts if len(firsts) == 2 else None

                firsts = wait(served, "both groups served again", 60, step=0.05)
                took = max(firsts.values()) - killed
                times.append(took)
                if took > c.ttl_ms / 1000 + 2 and not quiet:
                    _late(members, firsts, killed, c.ttl_ms / 1000 + 2)
                time.sleep(2.0)  # every member has read and committed after the failover
                survivor = next(b for b in c.procs if b != coordinator)
                asked = time.time()
                held = {g: _committed(c, survivor, g) for g in (V1_GROUP, KAFKA_GROUP)}
                events = list(members.events())
                problems = check(events, killed)
                for (g, p), offset in _last_commits(events, asked).items():
                    if held[g][p] < offset:
                        problems.append(f"{g}/{p}: committed {held[g][p]}, below the "
                                        f"acknowledged {offset} (lost)")
                if not quiet:
                    print(f"run {run_no:2}: broker {coordinator} killed; V1 group served "
                          f"again after {firsts[V1_GROUP] - killed:.2f} s, Kafka group "
                          f"after {firsts[KAFKA_GROUP] - killed:.2f} s; committed "
                          f"{held[V1_GROUP]} / {held[KAFKA_GROUP]}; "
                          f"{'ok' if not problems else 'FAILED'}", flush=True)
                assert not problems, "\n".join(problems)
                c.procs[coordinator].start()
                c.ready()
        finally:
            if members is not None:
                members.close()
            if producer is not None:
                producer.stop.set()
                producer.join(timeout=10)
            c.close()
    if not quiet:
        print(f"coordinator failover under steady load (3 V1 + 3 confluent-kafka members "
              f"committing every {COMMIT_EVERY} messages, kill -9 -> both groups' first "
              f"commit acknowledged again), {len(times)} runs: median "
              f"{statistics.median(times):.2f} s, max {max(times):.2f} s (lease TTL "
              f"{c.ttl_ms / 1000:.1f} s); every run: no committed offset lost or moved back, "
              f"every member resumed from its last commit")
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    v1 = sub.add_parser("v1-member")
    v1.add_argument("ports")
    v1.add_argument("home", type=int)
    v1.add_argument("member")
    kafka = sub.add_parser("kafka-member")
    kafka.add_argument("bootstrap")
    kafka.add_argument("member")
    for p in (v1, kafka):
        p.add_argument("--log", required=True)
        p.add_argument("--stop", required=True)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rate", type=int, default=300)
    args = parser.parse_args(argv)
    if args.command == "v1-member":
        v1_member([int(p) for p in args.ports.split(",")], args.home, args.member, args.log,
                  args.stop)
    elif args.command == "kafka-member":
        kafka_member(args.bootstrap, args.member, args.log, args.stop)
    else:
        run(args.runs, args.rate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
