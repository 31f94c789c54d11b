"""Forwarding group commands in a cluster: the V1 line written for the coordinator parses
back to the same command (``broker/v1/handlers/forward.py``), the relayed answer is the
coordinator's line with the client's correlation id, and ``CoordinatorPartitions`` loads a
partition's groups when this broker starts leading it and unloads them when it stops."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import uuid
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from broker.client.codec import parse_reply
from broker.services.coordinators import CoordinatorPartitions, Route
from broker.services.group_log import GroupStateLog
from broker.v1.codec import Codec
from broker.v1.codec import commands as c
from broker.v1.handlers.forward import command_line, relay
from groups.records import GROUPS_TOPIC, encode_value, offset_key, partition_for_group

COMMANDS: list[Any] = [
    c.Join("x", "g", "t", "m1"),
    c.Join("x", "g", "t", "m1", assignor="range", session_timeout_ms=4000),
    c.Sync("x", "g", "t", "m1", 3),
    c.Heartbeat("x", "g", "t", "m1", 3),
    c.Leave("x", "g", "t", "m1", 3),
    c.Commit("x", "g", "t", "m1", 3, 2, 17),
    c.Offset("x", "g", "t", 2),
    c.DescribeGroup("x", "g", "t"),
    c.AdminDeleteGroup("x", "g", "t"),
    c.AdminResetOffsets("x", "g", "t", "earliest"),
    c.AdminResetOffsets("x", "g", "t", 5, partition=1),
    c.AdminCommit("x", "g", "t", 1, 9),
    c.ListGroups("x"),
    c.GroupHeartbeat("x", "g", "w1", 0, topics=("t", "u")),
    c.GroupHeartbeat("x", "g", "w1", 0, topics=(), regex="a|b c", assignor="range",
                     rebalance_timeout_ms=9000, instance="i1", owned=()),
    c.GroupHeartbeat("x", "g", "w1", 4, owned=(("t", 0), ("u", 3))),
    c.GroupHeartbeat("x", "g", "w1", -1),
    c.GroupHeartbeat("x", "g", "w1", -2, instance="i1"),
]


def _scratch(case: SynchronousTestCase) -> str:
    """A fresh directory for one test, removed after it (trial's mktemp would leave it in
    the working directory)."""
    path = tempfile.mkdtemp(prefix="skerry-test-")
    case.addCleanup(shutil.rmtree, path, True)
    return path + "/data"


class CommandLineTests(SynchronousTestCase):
    def test_every_forwarded_command_parses_back(self) -> None:
        """The line sent to the coordinator is the same command with the forwarding
        correlation id."""
        codec = Codec()
        for cmd in COMMANDS:
            line = command_line(cmd, "fwd-7")
            self.assertTrue(line.endswith(b"\n"))
            parsed = codec.parse_command(line[:-1])
            self.assertEqual(parsed, dataclasses.replace(cmd, cid="fwd-7"), line)

    def test_relay_keeps_the_coordinators_bytes(self) -> None:
        """OK and ERR answers go back byte for byte, under the client's correlation id."""
        for line in [b"V1|fwd-1|OK|generation=2 assigned=[0 2]",
                     b"V1|fwd-1|ERR|GENERATION_MISMATCH|stale generation 1; the group is at 2",
                     b"V1|fwd-1|OK|committed=true"]:
            self.assertEqual(relay(parse_reply(line), "c42"),
                             line.replace(b"fwd-1", b"c42") + b"\n")


class _Replication:
    def __init__(self) -> None:
        self.leading: set[int] = set()
        self.listeners: list[Any] = []

    def is_leader(self, topic: str, partition: int) -> bool:
        return topic == GROUPS_TOPIC and partition in self.leading

    def add_change_listener(self, listener: Any) -> None:
        self.listeners.append(listener)

    def change(self, partition: int, leading: bool) -> None:
        (self.leading.add if leading else self.leading.discard)(partition)
        for listener in self.listeners:
            listener(GROUPS_TOPIC, partition)


class _Log:
    def __init__(self, records: list[tuple[int, bytes, bytes]]) -> None:
        self.records = records
        self.first_offset = 0
        self.next_offset = len(records)

    def read(self, offset: int, count: int, max_bytes: int) -> Any:
        chosen = self.records[offset:offset + count]

        class _Rec:
            def __init__(self, o: int, k: bytes, v: bytes) -> None:
                self.offset, self.key, self.payload = o, k, v

        class _Result:
            records = [_Rec(*r) for r in chosen]
            next_offset = offset + len(chosen)

        return _Result()


class _Store:
    def __init__(self, logs: dict[int, _Log]) -> None:
        self.logs = logs

    def topic(self, name: str) -> Any:
        return None

    def partition(self, name: str, partition: int) -> _Log:
        return self.logs.get(partition, _Log([]))


class _Groups:
    def __init__(self) -> None:
        self.loaded: list[Any] = []
        self.unloaded: list[Any] = []
        self.calls: list[str] = []

    def load_groups(self, loaded: Any) -> None:
        self.loaded.append(loaded)
        self.calls.append("load")

    def unload_groups(self, owned: Any) -> list[str]:
        self.unloaded.append(owned)
        self.calls.append("unload")
        return []


class CoordinatorPartitionsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.partition = partition_for_group("g", 4)
        records = [(0, offset_key("g", "t", 0), encode_value({"offset": 5}))]
        self.store = _Store({self.partition: _Log(records)})
        self.replication = _Replication()
        self.leader: dict[int, int] = {}
        self.log = GroupStateLog(self.store, _scratch(self), self.clock, partitions=4,
                                 cluster=True)
        self.groups = _Groups()
        self.coordinators = CoordinatorPartitions(
            0, self.log, self.store, self.replication, self.clock, self.groups, None,
            leader_of=lambda topic, p: type("Hint", (), {"leader": self.leader.get(p, -1)}))

    def test_leading_loads_then_serves(self) -> None:
        """A partition etcd names this broker the leader of is LOADING until the broker has
        confirmed its leadership and read the records, then LOCAL with its offsets handed
        to the group service."""
        self.leader[self.partition] = 0
        self.assertIs(self.coordinators.route("g").route, Route.LOADING)
        self.assertEqual(self.groups.loaded, [])
        self.replication.change(self.partition, True)
        self.clock.advance(0)
        self.assertIs(self.coordinators.route("g").route, Route.LOCAL)
        self.assertEqual(self.groups.loaded[0].offsets, {("g", "t"): {0: 5}})
        # State made here for the partition before it led it gives way to the records.
        self.assertEqual(self.groups.calls, ["unload", "load"])
        self.assertTrue(self.groups.unloaded[0]("g"))

    def test_other_leader_is_forwarded_to_and_losing_leadership_unloads(self) -> None:
        """Groups of a partition another broker leads are forwarded there; a partition
        this broker stops leading is unloaded at once (only its groups) and forwarded."""
        self.leader[self.partition] = 2
        self.assertEqual(self.coordinators.route("g").broker, 2)
        self.assertIs(self.coordinators.route("g").route, Route.FORWARD)
        self.replication.change(self.partition, True)
        self.clock.advance(0)
        self.clock.advance(0)
        self.replication.change(self.partition, False)
        self.clock.advance(0)
        owned = self.groups.unloaded[-1]
        self.assertEqual(self.groups.calls, ["unload", "load", "unload"])
        self.assertTrue(owned("g"))
        self.assertFalse(owned(next(f"h{i}" for i in range(100)
                                    if partition_for_group(f"h{i}", 4) != self.partition)))
        self.assertIs(self.coordinators.route("g").route, Route.FORWARD)

    def test_consumer_groups_are_loaded_and_unloaded_with_their_partition(self) -> None:
        """A KIP-848 group's records in the partition are handed to the consumer-group
        service when this broker starts leading it (epochs and owned partitions as
        written), and taken back when it stops."""
        from groups.consumer_group import ConsumerGroup, ConsumerMember, TopicMeta
        from groups.consumer_records import consumer_group_records
        from groups.consumer_state import MemberState

        topic = TopicMeta(uuid.uuid5(uuid.NAMESPACE_DNS, "t"), 2)
        member = ConsumerMember("w1", client_id="c", client_host="h", topic_names=("t",),
                                rebalance_timeout_ms=1000, member_epoch=4,
                                previous_member_epoch=3, state=MemberState.STABLE,
                                assigned={topic.topic_id: frozenset({0, 1})})
        group = ConsumerGroup("g", group_epoch=4, assignment_epoch=4, members=[member],
                              target={"w1": {topic.topic_id: frozenset({0, 1})}},
                              topics={"t": topic}, assignor="uniform")
        records = sorted(consumer_group_records(group).items())
        self.store.logs[self.partition] = _Log([(i, k, v) for i, (k, v) in enumerate(records)])
        consumer = _Groups()
        replication = _Replication()  # not the one setUp's coordinators listen to
        log = GroupStateLog(self.store, _scratch(self), self.clock, partitions=4,
                            cluster=True)
        coordinators = CoordinatorPartitions(
            0, log, self.store, replication, self.clock, _Groups(), None,
            leader_of=lambda topic, p: None, consumer_groups=consumer)
        replication.change(self.partition, True)
        self.clock.advance(0)
        self.clock.advance(0)
        self.assertIs(coordinators.route("g").route, Route.LOCAL)
        self.assertEqual(consumer.calls, ["unload", "load"])
        [loaded] = consumer.loaded[0]
        self.assertEqual((loaded.group_epoch, loaded.members["w1"].member_epoch,
                          loaded.members["w1"].assigned), (4, 4, {topic.topic_id: {0, 1}}))
        replication.change(self.partition, False)
        self.clock.advance(0)
        self.assertEqual(consumer.calls, ["unload", "load", "unload"])
        self.assertTrue(consumer.unloaded[-1]("g"))

    def test_no_leader_is_unavailable(self) -> None:
        """A partition without a leader (offline, or the topic being created) answers
        UNAVAILABLE rather than guessing."""
        self.assertIs(self.coordinators.route("g").route, Route.UNAVAILABLE)


class _Routes:
    """A stand-in ``CoordinatorPartitions``: every group routed as ``routes`` says."""

    broker_id = 0

    def __init__(self, routes: dict[str, Any]) -> None:
        self.routes = routes

    def route(self, group: str) -> Any:
        from broker.services.coordinators import Routing

        route, broker = self.routes[group]
        return Routing(route, 0, broker)


class HandlerRoutingTests(SynchronousTestCase):
    """The V1 handlers of a cluster member, over an in-memory broker with stand-in routes
    and a stand-in broker link."""

    def setUp(self) -> None:
        from tests.reliability.inmemory import InMemoryBroker

        self.broker = InMemoryBroker(_scratch(self))
        self.addCleanup(self.broker.close)
        self.handlers = self.broker.broker.v1_factory.handlers
        self.sent: list[tuple[int, bytes, Any]] = []

        def forward(broker: int, build: Any) -> Any:
            from twisted.internet.defer import Deferred

            d: Deferred[Any] = Deferred()
            self.sent.append((broker, build("fwd-1"), d))
            return d

        self.handlers.coordinators = _Routes({
            "here": (Route.LOCAL, None), "loading": (Route.LOADING, None),
            "there": (Route.FORWARD, 2), "nowhere": (Route.UNAVAILABLE, None)})
        self.handlers.forward = forward
        self.proto, self.transport = self.broker.connect()
        self.ask("V1|t|ADMIN_CREATE_TOPIC|t 1 1")

    def ask(self, line: str) -> list[str]:
        return [r.decode() for r in self.broker.request(self.proto, self.transport, line)]

    def test_routes(self) -> None:
        """A group coordinated here is served here; one elsewhere is sent to its
        coordinator as the same command and its answer relayed under the client's
        correlation id; loading and leaderless groups answer UNAVAILABLE; a forwarded
        request (fwd- id) for a group not coordinated here is never forwarded again; an
        unreachable coordinator answers UNAVAILABLE."""
        self.assertEqual(self.ask("V1|1|OFFSET|here t 0"), ["V1|1|OK|offset=0"])
        self.assertEqual(self.ask("V1|2|OFFSET|there t 0"), [])
        broker, line, d = self.sent[-1]
        self.assertEqual((broker, line), (2, b"V1|fwd-1|OFFSET|there t 0\n"))
        d.callback(parse_reply(b"V1|fwd-1|OK|offset=7"))
        self.broker.settle()
        self.assertEqual(self.transport.value().decode(), "V1|2|OK|offset=7\n")
        self.transport.clear()
        [loading] = self.ask("V1|3|JOIN|loading t m")
        self.assertTrue(loading.startswith("V1|3|ERR|UNAVAILABLE|the coordinator of group "
                                           "loading is loading"), loading)
        [nowhere] = self.ask("V1|4|COMMIT|nowhere t m 1 0 0")
        self.assertTrue(nowhere.startswith("V1|4|ERR|UNAVAILABLE|no coordinator"), nowhere)
        [again] = self.ask("V1|fwd-9|OFFSET|there t 0")
        self.assertTrue(again.startswith("V1|fwd-9|ERR|UNAVAILABLE|"), again)
        self.assertEqual(len(self.sent), 1)
        self.assertEqual(self.ask("V1|5|DESCRIBE_GROUP|there t"), [])
        self.sent[-1][2].errback(ConnectionError("refused"))
        self.broker.settle()
        self.assertTrue(self.transport.value().decode().startswith(
            "V1|5|ERR|UNAVAILABLE|the group's coordinator, broker 2, did not answer"))
