"""Iggy consumer groups and stored offsets on a cluster, on real processes: one etcd member
and three brokers with ``cluster.etcd`` and an Iggy listener each
(``bench/group_coordinator.py``'s ``GroupCluster``). A broker that is not a group's
coordinator sends the Iggy client's group and offset operations to the coordinator, which
writes them into ``__skerry_groups``: members joined through different brokers share one
group with disjoint partitions, and an offset stored through one broker is read back
through the others (docs/iggy.md, "In a cluster")."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from bench.group_coordinator import TTL_MS, GroupCluster, wait
from broker.iggy import codec
from broker.iggy.codec import Consumer, ConsumerKind, Identifier, PollingKind
from tests.iggy.harness import RawClient, iggy_port_of
from tests.support import ROOT

OK = b"\x00\x00\x00\x00"
NAME_NOT_FOUND = 5003  # written out from the seed's status table
STREAM, TOPIC = Identifier("default"), Identifier("gt")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupCluster]:
    c = GroupCluster(tmp_path_factory.mktemp("iggy-cluster"), extra={"iggy_port": 0})
    try:
        c.start()
        c.ready()
        c.create_topic("gt", 3)
        for p in range(3):
            c.fill("gt", 3, p)  # offsets 0..4 in every partition (fill finds the leader
            # with one message more)
        yield c
    finally:
        c.close()


def iggy(c: GroupCluster, broker: int) -> RawClient:
    client = RawClient(iggy_port_of(c.procs[broker].log_text()))
    assert client.login()[:4] == OK
    return client


def consume(port: int, group: str, expect: int) -> list[tuple[int, int]]:
    """The real client's consumer-group consumer on ``default``/``gt`` in its own process
    (``tests/iggy/group_consumer.py``): ``(partition, offset)`` of what it read."""
    out = subprocess.run(
        [sys.executable, "-m", "tests.iggy.group_consumer", str(port), "default", "gt", group,
         "when_polling", str(expect)], cwd=str(ROOT), capture_output=True, timeout=90,
        check=True)
    return [(p, o) for p, o, _ in map(json.loads, out.stdout.splitlines())]


def members(reply: bytes) -> dict[int, tuple[int, ...]]:
    """GetConsumerGroup's members: ``{client id: partitions}``."""
    status, length = struct.unpack_from("<II", reply)
    assert status == 0 and length > 0, reply
    body = reply[8:]
    count = struct.unpack_from("<I", body, 8)[0]
    pos = 13 + body[12]
    out = {}
    for _ in range(count):
        client, n = struct.unpack_from("<II", body, pos)
        out[client] = struct.unpack_from(f"<{n}I", body, pos + 8)
        pos += 8 + 4 * n
    return out


def test_group_joined_through_two_brokers_and_offsets_everywhere(cluster: GroupCluster) -> None:
    """Two Iggy clients join one group through two brokers that do not coordinate it: one
    generation, disjoint partitions covering the topic, described the same by all three
    brokers; each polls only its own partitions. An offset stored through one broker is
    read back through the other two and by V1's OFFSET; a client leaving gives its
    partitions to the other."""
    c = cluster
    wait(lambda: c.coordinator("workers") is not None, "a coordinator")
    coordinator = c.coordinator("workers")
    a, b = [x for x in c.procs if x != coordinator]
    ca, cb, cc = iggy(c, a), iggy(c, b), iggy(c, coordinator)
    group = Identifier("workers")
    assert ca.call(codec.CreateConsumerGroup(STREAM, TOPIC, "workers"))[:4] == OK
    assert ca.call(codec.JoinConsumerGroup(STREAM, TOPIC, group)) == OK + b"\x00" * 4
    # b never heard of the group: it finds it at the coordinator.
    assert cb.call(codec.JoinConsumerGroup(STREAM, TOPIC, group)) == OK + b"\x00" * 4
    seen = [members(x.call(codec.GetConsumerGroup(STREAM, TOPIC, group)))
            for x in (ca, cb, cc)]
    assert seen[0] == seen[1] == seen[2], seen
    parts = list(seen[0].values())
    assert len(parts) == 2 and sorted(parts[0] + parts[1]) == [0, 1, 2], seen
    assert all(client >> 24 in (a, b) for client in seen[0])  # each broker's own range
    assert "generation=2" in c.ask(coordinator, "V1|1|DESCRIBE_GROUP|workers gt")

    polled: dict[RawClient, set[int]] = {ca: set(), cb: set()}
    member = Consumer(ConsumerKind.CONSUMER_GROUP, group)
    for _ in range(4):
        for client in (ca, cb):
            reply = client.call(codec.PollMessages(member, STREAM, TOPIC, None, PollingKind.NEXT,
                                                   0, 1, True))
            assert reply[:4] == OK, reply
            polled[client].add(struct.unpack_from("<I", reply, 8)[0])
    assert not polled[ca] & polled[cb] and polled[ca] | polled[cb] == {0, 1, 2}, polled

    plain = Consumer(ConsumerKind.CONSUMER, Identifier(7))
    assert ca.call(codec.StoreConsumerOffset(plain, STREAM, TOPIC, 1, 3)) == OK + b"\x00" * 4
    expected = [x.call(codec.GetConsumerOffset(plain, STREAM, TOPIC, 1)) for x in (ca, cb, cc)]
    assert expected[0] == expected[1] == expected[2], expected
    assert struct.unpack_from("<IQQ", expected[0], 8) == (1, 4, 3), expected[0]
    for x in c.procs:  # the coordinator holds V1's "next to read"
        assert c.ask(x, "V1|2|OFFSET|iggy.consumer.7 gt 1") == "V1|2|OK|offset=4"
    assert cb.call(codec.DeleteConsumerOffset(plain, STREAM, TOPIC, 1)) == OK + b"\x00" * 4
    assert cc.call(codec.GetConsumerOffset(plain, STREAM, TOPIC, 1)) == OK + b"\x00" * 4

    assert ca.call(codec.LeaveConsumerGroup(STREAM, TOPIC, group)) == OK + b"\x00" * 4
    left = members(cc.call(codec.GetConsumerGroup(STREAM, TOPIC, group)))
    assert list(left.values()) == [(0, 1, 2)], left
    for x in (ca, cb, cc):
        x.close()


def test_real_client_resumes_through_another_broker(cluster: GroupCluster) -> None:
    """The apache-iggy client's consumer-group consumer reads every partition through
    one broker and stores its offsets (server-side, as it polls); a new consumer of the
    same group through another broker resumes after them: nothing is read twice."""
    c = cluster
    wait(lambda: c.coordinator("resume") is not None, "a coordinator")
    coordinator = c.coordinator("resume")
    a, b = [x for x in c.procs if x != coordinator]
    first = consume(iggy_port_of(c.procs[a].log_text()), "resume", 15)
    assert sorted(first) == [(p, o) for p in range(3) for o in range(5)]
    for p in range(3):
        c.fill("gt", 1, p)  # offsets 5 and 6
    second = consume(iggy_port_of(c.procs[b].log_text()), "resume", 6)
    assert sorted(second) == [(p, o) for p in range(3) for o in (5, 6)]


def test_v1_admin_group_commands_through_any_broker(cluster: GroupCluster) -> None:
    """The V1 admin group commands sent to brokers that do not coordinate the group act on
    the coordinator's group: ADMIN_COMMIT, ADMIN_RESET_OFFSETS and ADMIN_DELETE_GROUP."""
    c = cluster
    wait(lambda: c.coordinator("adm") is not None, "a coordinator")
    coordinator = c.coordinator("adm")
    a, b = [x for x in c.procs if x != coordinator]
    assert c.ask(a, "V1|1|ADMIN_COMMIT|adm gt 2 3") == "V1|1|OK|committed=true"
    assert c.ask(coordinator, "V1|2|OFFSET|adm gt 2") == "V1|2|OK|offset=3"
    assert c.ask(b, "V1|3|ADMIN_RESET_OFFSETS|adm gt 1 partition=2") == \
        "V1|3|OK|offsets=[2:1]"
    assert c.ask(a, "V1|4|OFFSET|adm gt 2") == "V1|4|OK|offset=1"
    assert c.ask(b, "V1|5|ADMIN_DELETE_GROUP|adm gt") == "V1|5|OK|deleted=true"
    assert c.ask(coordinator, "V1|6|DESCRIBE_GROUP|adm gt").startswith(
        "V1|6|ERR|GENERATION_MISMATCH|no group adm on topic gt")


def test_group_offsets_of_a_group_this_broker_never_saw(cluster: GroupCluster) -> None:
    """A consumer group's stored offset is read through brokers whose Iggy side never heard
    of the group (committed over V1 at the coordinator): they find it there; a group that
    exists nowhere is still ConsumerGroupNameNotFound (5003), as on a single broker."""
    c = cluster
    wait(lambda: c.coordinator("late") is not None, "a coordinator")
    coordinator = c.coordinator("late")
    assert c.ask(coordinator, "V1|1|ADMIN_COMMIT|late gt 0 2") == "V1|1|OK|committed=true"
    late = Consumer(ConsumerKind.CONSUMER_GROUP, Identifier("late"))
    replies = set()
    for x in c.procs:
        client = iggy(c, x)
        replies.add(client.call(codec.GetConsumerOffset(late, STREAM, TOPIC, 0)))
        missing = client.call(codec.GetConsumerOffset(
            Consumer(ConsumerKind.CONSUMER_GROUP, Identifier("nowhere")), STREAM, TOPIC, 0))
        assert struct.unpack_from("<I", missing)[0] == NAME_NOT_FOUND, missing
        client.close()
    assert len(replies) == 1, replies
    assert struct.unpack_from("<IQQ", next(iter(replies)), 8)[::2] == (0, 1)


def test_iggy_group_survives_its_coordinators_death(cluster: GroupCluster) -> None:
    """(Runs last: it kills a broker.) An Iggy member joined and an offset stored through a
    broker that does not coordinate the group; kill -9 of the coordinator: within the lease
    TTL + 2 s the stored offset is read again through the surviving brokers, and the member
    is still in the group with every partition."""
    c = cluster
    wait(lambda: c.coordinator("fo") is not None, "a coordinator")
    coordinator = c.coordinator("fo")
    a, b = [x for x in c.procs if x != coordinator]
    ca = iggy(c, a)
    group = Identifier("fo")
    assert ca.call(codec.CreateConsumerGroup(STREAM, TOPIC, "fo"))[:4] == OK
    assert ca.call(codec.JoinConsumerGroup(STREAM, TOPIC, group)) == OK + b"\x00" * 4
    member = Consumer(ConsumerKind.CONSUMER_GROUP, group)
    mine = members(ca.call(codec.GetConsumerGroup(STREAM, TOPIC, group)))
    assert list(mine.values()) == [(0, 1, 2)], mine
    assert ca.call(codec.StoreConsumerOffset(member, STREAM, TOPIC, 2, 3)) == OK + b"\x00" * 4
    stored = ca.call(codec.GetConsumerOffset(member, STREAM, TOPIC, 2))
    assert struct.unpack_from("<IQQ", stored, 8)[::2] == (2, 3), stored

    c.procs[coordinator].kill9()
    killed = time.monotonic()
    wait(lambda: ca.call(codec.GetConsumerOffset(member, STREAM, TOPIC, 2)) == stored,
         "the offset served again", 20, step=0.01)
    took = time.monotonic() - killed
    print(f"iggy group coordinator {coordinator} killed; served again after {took:.2f} s")
    assert took <= TTL_MS / 1000 + 2, took
    cb = iggy(c, b)
    assert cb.call(codec.GetConsumerOffset(member, STREAM, TOPIC, 2)) == stored
    assert members(cb.call(codec.GetConsumerGroup(STREAM, TOPIC, group))) == mine
    ca.close()
    cb.close()
