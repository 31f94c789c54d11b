"""Three consumers of one group spread over a 3-broker cluster (one etcd member), each told
all three brokers as the seed SDK's runtime is, and each starting on a different one: they
consume a topic with every message exactly once between them, and when one dies the
others take over its partitions from its last commit.

The seed's own Python SDK (``flux_sdk``) is not on this machine (it is in neither
/work/shared/seeds nor any package index the project reaches), so ``SeedStyleConsumer``
below does what its runtime is described to do (docs/cluster.md, "Every broker reaches
the coordinator"): a list of brokers, the current one used until it fails, then the next;
JOIN, SYNC on GENERATION_MISMATCH, CONSUME, COMMIT; nothing of coordinators."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.group_coordinator import GroupCluster, wait
from tests.support import V1Client

TOPIC = "sdk"
GROUP = "readers"
PARTITIONS = 3
PER_PARTITION = 200


class SeedStyleConsumer:
    """One group member over a list of broker ports, starting at ``home``."""

    def __init__(self, ports: list[int], home: int, member: str) -> None:
        self.ports, self.at, self.member = ports, home, member
        self.client: V1Client | None = None
        self.generation = 0
        self.assigned: list[int] = []
        self.positions: dict[int, int] = {}
        self.read: list[tuple[int, int, str]] = []

    def ask(self, line: str) -> str:
        for _ in range(3 * len(self.ports)):
            try:
                if self.client is None:
                    self.client = V1Client(self.ports[self.at], timeout=5)
                reply = self.client.request(line)
            except OSError:
                reply = "ERR|UNREACHABLE"
            if "ERR|UNAVAILABLE" not in reply and "ERR|UNREACHABLE" not in reply:
                return reply
            if self.client is not None:
                self.client.close()
            self.client = None
            self.at = (self.at + 1) % len(self.ports)
            time.sleep(0.2)
        raise AssertionError(f"no broker answered {line}")

    def _take(self, reply: str) -> None:
        m = re.fullmatch(r"V1\|[^|]+\|OK\|generation=(\d+) assigned=\[([\d ]*)\]", reply)
        assert m, reply
        self.generation = int(m.group(1))
        self.assigned = [int(p) for p in m.group(2).split()]
        self.positions = {}
        for p in self.assigned:
            offset = self.ask(f"V1|o|OFFSET|{GROUP} {TOPIC} {p}")
            self.positions[p] = int(offset.rsplit("=", 1)[1])

    def join(self) -> None:
        self._take(self.ask(f"V1|j|JOIN|{GROUP} {TOPIC} {self.member} "
                            f"session_timeout_ms=6000"))

    def sync(self) -> None:
        """The current generation's assignment: SYNC, or JOIN again (a current member's
        JOIN does not rebalance) when SYNC names an older generation."""
        reply = self.ask(f"V1|s|SYNC|{GROUP} {TOPIC} {self.member} {self.generation}")
        if "GENERATION_MISMATCH" in reply:
            self.join()
        else:
            self._take(reply)

    def poll(self, limit: int | None = None) -> int:
        """Read (up to ``limit`` messages of each partition) and commit what was read;
        SYNC first when the group moved on. Returns how many messages were read."""
        beat = self.ask(f"V1|h|HEARTBEAT|{GROUP} {TOPIC} {self.member} {self.generation}")
        if "GENERATION_MISMATCH" in beat:
            self.sync()
        count = 0
        for p in self.assigned:
            extra = f" max={limit}" if limit else ""
            reply = self.ask(f"V1|c|CONSUME|{TOPIC} {p} {self.positions[p]}{extra}")
            m = re.fullmatch(r"V1\|c\|OK\|messages=(.*) hw=-?\d+", reply)
            assert m, reply
            items = [item.split(":", 1) for item in m.group(1).split(",") if item]
            for offset, value in items:
                self.read.append((p, int(offset), value))
            if items:
                self.positions[p] = int(items[-1][0]) + 1
                count += len(items)
                committed = self.ask(f"V1|m|COMMIT|{GROUP} {TOPIC} {self.member} "
                                     f"{self.generation} {p} {self.positions[p]}")
                assert committed == "V1|m|OK|committed=true", committed
        return count

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[GroupCluster]:
    c = GroupCluster(tmp_path)
    try:
        c.start()
        c.ready()
        c.create_topic(TOPIC, PARTITIONS)
        for p in range(PARTITIONS):
            c.fill(TOPIC, PER_PARTITION, p)
        yield c
    finally:
        c.close()


def test_three_consumers_over_three_brokers_read_each_message_once(
        cluster: GroupCluster) -> None:
    c = cluster
    ports = [c.procs[b].port for b in sorted(c.procs)]
    ends = {}
    for p in range(PARTITIONS):
        reply = c.ask(0, f"V1|e|CONSUME|{TOPIC} {p} 0 max=1")
        ends[p] = int(reply.rsplit("hw=", 1)[1]) + 1
    assert all(n > PER_PARTITION for n in ends.values()), ends
    consumers = [SeedStyleConsumer(ports, i, f"reader-{i}") for i in range(3)]
    try:
        for consumer in consumers:
            consumer.join()
        for consumer in consumers:
            consumer.sync()
        # One generation, disjoint assignments covering the topic: one partition each.
        assert {x.generation for x in consumers} == {3}
        assert sorted(p for x in consumers for p in x.assigned) == [0, 1, 2]
        assert all(len(x.assigned) == 1 for x in consumers)
        # Half of each partition, a few messages at a time, round-robin over members.
        for _ in range(PER_PARTITION // 20):
            for consumer in consumers:
                consumer.poll(limit=10)
        read = Counter((p, o) for x in consumers for p, o, _v in x.read)
        assert len(read) == PARTITIONS * PER_PARTITION // 2 and set(read.values()) == {1}

        # A member dies (no LEAVE): after its session timeout the others take its
        # partition over from its last commit, and every message is read exactly once.
        dead = consumers.pop(1)
        dead.close()
        wait(lambda: any("GENERATION_MISMATCH" in x.ask(
            f"V1|h|HEARTBEAT|{GROUP} {TOPIC} {x.member} {x.generation}") for x in consumers),
            "the dead member evicted", 20, step=0.5)
        for consumer in consumers:
            consumer.sync()
        assert sorted(p for x in consumers for p in x.assigned) == [0, 1, 2]
        wait(lambda: sum(x.poll() for x in consumers) == 0 and all(
            x.positions[p] == ends[p] for x in consumers for p in x.assigned),
            "everything read", 30, step=0.1)
        every = Counter((p, o) for x in [*consumers, dead] for p, o, _v in x.read)
        assert set(every) == {(p, o) for p in range(PARTITIONS) for o in range(ends[p])}
        assert set(every.values()) == {1}, [k for k, n in every.items() if n > 1][:5]
    finally:
        for consumer in consumers:
            consumer.close()
