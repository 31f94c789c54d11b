"""KIP-848 consumer groups (V1 GROUP_HEARTBEAT) in a cluster, on real processes: one etcd
member and three brokers (``bench/group_coordinator.py``'s ``GroupCluster``). A heartbeat
sent to a broker that is not the group's coordinator is forwarded to it and its answer
relayed; the group lives in ``__skerry_groups``, so a kill -9 of the coordinator keeps
the group epoch, each member's epoch and assignment, and the committed offsets
(docs/groups.md, Consumer groups (KIP-848), Persistence)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.group_coordinator import GroupCluster, wait


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[GroupCluster]:
    c = GroupCluster(tmp_path)
    try:
        c.start()
        c.ready()
        c.create_topic("gt", 4)
        yield c
    finally:
        c.close()


_REPLY = re.compile(r"V1\|[^|]+\|OK\|member=(\S+) epoch=(-?\d+) interval_ms=\d+ "
                    r"assigned=\[([^\]]*)\] target=\[([^\]]*)\]")


def beat(c: GroupCluster, broker: int, args: str) -> tuple[int, list[str], list[str]]:
    """``(epoch, assigned, target)`` of a GROUP_HEARTBEAT sent to ``broker``."""
    reply = c.ask(broker, f"V1|h|GROUP_HEARTBEAT|{args}")
    m = _REPLY.fullmatch(reply)
    assert m, reply
    return int(m.group(2)), m.group(3).split(), m.group(4).split()


def test_members_on_two_brokers_and_coordinator_failover(cluster: GroupCluster) -> None:
    """Two members of one consumer group, each talking to a broker that is not the
    coordinator, reconcile to disjoint assignments covering every partition at one group
    epoch (each heartbeat forwarded and relayed byte for byte), and DESCRIBE_GROUP shows
    the same epochs through every broker. After kill -9 of the
    coordinator, a surviving broker's new coordinator answers both members' heartbeats at
    the epochs they had with the partitions they had, and their commit is read back."""
    c = cluster
    wait(lambda: c.coordinator("kg") is not None, "a coordinator")
    coordinator = c.coordinator("kg")
    a, b = [x for x in c.procs if x != coordinator]
    assert beat(c, a, "kg w1 0 topics=gt") == (1, ["gt:0", "gt:1", "gt:2", "gt:3"],
                                                ["gt:0", "gt:1", "gt:2", "gt:3"])
    epoch2, owned2, target2 = beat(c, b, "kg w2 0 topics=gt")
    assert (epoch2, owned2, len(target2)) == (2, [], 2)
    epoch1, owned1, target1 = beat(c, a, "kg w1 1")
    assert (epoch1, owned1) == (1, target1) and not set(target1) & set(target2)
    assert beat(c, a, f"kg w1 1 owned={','.join(owned1)}") == (2, owned1, target1)
    assert beat(c, b, "kg w2 2") == (2, target2, target2)
    assert sorted(owned1 + target2) == ["gt:0", "gt:1", "gt:2", "gt:3"]
    # The same answer whichever broker is asked (the coordinator's, relayed).
    answers = {c.ask(x, "V1|same|GROUP_HEARTBEAT|kg w1 2") for x in c.procs}
    assert answers == {f"V1|same|OK|member=w1 epoch=2 interval_ms=5000 "
                       f"assigned=[{' '.join(owned1)}] target=[{' '.join(owned1)}]"}, answers
    # DESCRIBE_GROUP answers the same from every broker: the coordinator's view.
    described = {c.ask(x, "V1|d|DESCRIBE_GROUP|kg gt") for x in c.procs}
    assert len(described) == 1, described
    [line] = described
    assert " type=consumer group_epoch=2 assignment_epoch=2 epochs=[w1:2 w2:2] pending=[] " \
        f"coordinator={coordinator}" in line, line
    mine = int(owned1[0].split(":")[1])
    assert c.ask(a, f"V1|c|COMMIT|kg gt w1 2 {mine} 1") == "V1|c|OK|committed=true"

    c.procs[coordinator].kill9()
    wait(lambda: "|OK|" in c.ask(a, "V1|h|GROUP_HEARTBEAT|kg w1 2", 1.0),
         "the group served again", 30, step=0.05)
    assert c.coordinator("kg") in (a, b)
    assert beat(c, a, "kg w1 2") == (2, owned1, owned1)
    assert beat(c, b, "kg w2 2") == (2, target2, target2)
    for x in (a, b):
        assert c.ask(x, f"V1|o|OFFSET|kg gt {mine}") == "V1|o|OK|offset=1"
        assert " group_epoch=2 assignment_epoch=2 epochs=[w1:2 w2:2] " in c.ask(
            x, "V1|d|DESCRIBE_GROUP|kg gt")
    # The group goes on from there: w2 leaves, w1 takes everything at the next epoch.
    assert beat(c, b, "kg w2 leave")[0] == -1
    assert beat(c, a, f"kg w1 2 owned={','.join(owned1)}") == (
        3, ["gt:0", "gt:1", "gt:2", "gt:3"], ["gt:0", "gt:1", "gt:2", "gt:3"])
