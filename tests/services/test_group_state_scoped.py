"""Group state writes that follow what changed (``GroupStateLog.changed(scopes)``): after
any sequence of operations on the three coordinators (V1/Iggy groups, Kafka classic
groups, KIP-848 consumer groups, and the offsets they share), what ``__skerry_groups``
holds is exactly what a write of the whole state would have made it hold."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from broker.core.produce import ProduceRequest, ProduceResult
from broker.errors import SkerryError
from broker.services.consumer_groups import ConsumerGroupService
from broker.services.group_log import GroupStateLog
from broker.services.groups import GroupService
from broker.services.kafka_groups import KafkaGroupService
from groups.classic_effects import CommittedOffset
from groups.consumer_effects import HeartbeatRequest
from groups.coordinator import GroupCoordinator
from groups.errors import GroupError
from groups.kafka_errors import KafkaGroupError
from groups.records import GroupRecords, Scope

PARTITIONS = 4
TOPICS = {"t": 3, "u": 2}
GROUP_IDS = ("a", "b", "c", "d", "e")


class _Core:
    """A topic that takes every append at once and keeps each partition's records."""

    def __init__(self) -> None:
        self.created = False
        self.log: dict[int, list[tuple[bytes, bytes]]] = {}

    def topic_config(self, name: str) -> Any:
        return object() if self.created else None

    def create_internal_topic(self, *args: Any) -> None:
        self.created = True

    def produce(self, request: ProduceRequest, answer: Callable[[ProduceResult], None]
                ) -> None:
        records = self.log.setdefault(request.partition, [])
        records.extend(zip(request.keys, request.values, strict=True))
        answer(ProduceResult(0, len(records) - 1, len(records) - 1))

    def compacted(self) -> dict[int, dict[bytes, bytes]]:
        """The latest value of every key, tombstoned keys dropped (a cleaned log)."""
        out: dict[int, dict[bytes, bytes]] = {}
        for partition, records in self.log.items():
            latest = dict(records)
            kept = {k: v for k, v in latest.items() if v}
            if kept:
                out[partition] = kept
        return out


class _Store:
    def topic(self, name: str) -> None:
        return None

    def partition(self, name: str, partition: int) -> None:
        raise AssertionError("no topic")


class _CountingRecords(GroupRecords):
    """``GroupRecords`` that counts whole snapshots taken."""

    snapshots = 0
    scoped: list[Scope]

    def snapshot(self, partitions: int) -> dict[int, dict[bytes, bytes]]:
        self.snapshots += 1
        return super().snapshot(partitions)

    def records(self, scope: Scope) -> dict[bytes, bytes]:
        self.scoped.append(scope)
        return super().records(scope)


def _sync(f: Callable[[], None]) -> Deferred[None]:
    f()
    return succeed(None)


class _Broker:
    """The three group services over one ``GroupStateLog``, wired as ``broker.server``
    wires them, on a topic held in memory."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.topics = dict(TOPICS)
        data_dir = tempfile.mkdtemp(prefix="skerry-gscoped-")
        self.log = GroupStateLog(_Store(), data_dir, self.clock, partitions=PARTITIONS)
        coordinator = GroupCoordinator(partitions_for=lambda t: self.topics.get(t, 0))
        self.groups = GroupService(coordinator, self.clock, data_dir, hw_for=lambda t, p: 99,
                                   earliest_for=lambda t, p: 0, run_in_thread=_sync,
                                   state_log=self.log)
        self.kafka = KafkaGroupService(self.groups, self.clock, data_dir,
                                       run_in_thread=_sync, state_log=self.log)
        self.consumer = ConsumerGroupService(
            self.groups, self.clock, lambda: dict(self.topics),
            other_protocol=self.kafka.coordinator.live_protocol,
            topic_id=lambda name: None, state_log=self.log)
        self.core = _Core()
        self.records = _CountingRecords(coordinator, self.kafka.coordinator,
                                        self.consumer.coordinator)
        self.records.scoped = []
        self.log.attach(self.core, self.records)
        self.epochs: dict[tuple[str, str], int] = {}

    def settle(self) -> None:
        for _ in range(3):
            self.clock.advance(0)

    def apply(self, op: tuple[Any, ...]) -> None:
        kind, group, topic, n = op
        partition = n % self.topics.get(topic, 1)
        try:
            getattr(self, f"_{kind}")(group, topic, n, partition)
        except (SkerryError, GroupError, KafkaGroupError, KeyError):
            pass  # refused with nothing changed: a client would see an error reply
        self.settle()

    # V1 / Iggy groups
    def _join(self, group: str, topic: str, n: int, partition: int) -> None:
        self.groups.join(group, topic, f"m{n % 3}")

    def _leave(self, group: str, topic: str, n: int, partition: int) -> None:
        grp = self.groups.group(group, topic)
        if grp is not None:
            self.groups.leave(group, topic, f"m{n % 3}", grp.generation)

    def _commit(self, group: str, topic: str, n: int, partition: int) -> None:
        grp = self.groups.group(group, topic)
        if grp is not None:
            for member in list(grp.members):
                if partition in grp.assigned(member):
                    self.groups.commit(group, topic, member, grp.generation, partition, n)

    def _admin_commit(self, group: str, topic: str, n: int, partition: int) -> None:
        self.groups.admin_commit(group, topic, partition, n)

    def _reset(self, group: str, topic: str, n: int, partition: int) -> None:
        self.groups.reset_offsets(group, topic, "earliest" if n % 2 else n)

    def _delete(self, group: str, topic: str, n: int, partition: int) -> None:
        self.groups.delete_group(group, topic)

    def _delete_offsets(self, group: str, topic: str, n: int, partition: int) -> None:
        self.groups.delete_offsets(group, topic, [partition])

    def _grow(self, group: str, topic: str, n: int, partition: int) -> None:
        self.topics[topic] = self.topics.get(topic, 1) + 1
        self.groups.partitions_changed(topic)
        self.consumer.metadata_changed()

    def _topic_deleted(self, group: str, topic: str, n: int, partition: int) -> None:
        self.topics.pop(topic, None)
        self.groups.topic_deleted(topic)
        self.consumer.metadata_changed()
        self.topics[topic] = 2  # created again at once, empty

    def _expire(self, group: str, topic: str, n: int, partition: int) -> None:
        self.clock.advance(400)  # past every session timeout: members are evicted

    # Kafka classic groups: whole rounds (a join completes with the sync), so every
    # state the test ends in is one the coordinator asked to write.
    def _kafka_round(self, group: str, topic: str, n: int, partition: int) -> None:
        kgroup = self.kafka.coordinator.group(group)
        if kgroup is not None and kgroup.members:
            return
        joined: list[Any] = []
        self.kafka.join(group, "", client_id="c", client_host="/127.0.0.1",
                        session_timeout_ms=300, rebalance_timeout_ms=300,
                        protocol_type="consumer",
                        protocols=[("range", b"x")]).addBoth(joined.append)
        self.settle()
        if not joined or isinstance(joined[0], BaseException) or not hasattr(joined[0],
                                                                               "member_id"):
            return
        reply = joined[0]
        self.kafka.sync(group, reply.generation, reply.member_id,
                        {reply.member_id: b"p"}).addErrback(lambda f: None)

    def _kafka_commit(self, group: str, topic: str, n: int, partition: int) -> None:
        self.kafka.commit_offsets(group, -1, "", {(topic, partition): CommittedOffset(n, "m")}
                                  ).addErrback(lambda f: None)

    def _kafka_leave(self, group: str, topic: str, n: int, partition: int) -> None:
        kgroup = self.kafka.coordinator.group(group)
        if kgroup is not None:
            for member in list(kgroup.members):
                self.kafka.leave(group, member).addErrback(lambda f: None)

    def _kafka_delete(self, group: str, topic: str, n: int, partition: int) -> None:
        self.kafka.delete_group(group).addErrback(lambda f: None)

    # KIP-848 consumer groups
    def _cg_join(self, group: str, topic: str, n: int, partition: int) -> None:
        member = f"cm{n % 2}"
        reply = self.consumer.heartbeat(HeartbeatRequest(
            group, member, self.epochs.get((group, member), 0), rebalance_timeout_ms=300,
            topic_names=(topic,), owned=() if (group, member) not in self.epochs else None))
        self.epochs[(group, member)] = reply.member_epoch

    def _cg_leave(self, group: str, topic: str, n: int, partition: int) -> None:
        member = f"cm{n % 2}"
        self.epochs.pop((group, member), None)
        self.consumer.heartbeat(HeartbeatRequest(group, member, -1))


OPS = ("join", "leave", "commit", "admin_commit", "reset", "delete", "delete_offsets",
       "grow", "topic_deleted", "expire", "kafka_round", "kafka_commit", "kafka_leave",
       "kafka_delete", "cg_join", "cg_leave")

operations = st.lists(st.tuples(st.sampled_from(OPS), st.sampled_from(GROUP_IDS),
                                st.sampled_from(sorted(TOPICS)), st.integers(0, 40)),
                      min_size=1, max_size=40)


class ScopedWritesTests(SynchronousTestCase):
    @settings(max_examples=120, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(operations)
    def test_topic_holds_what_a_whole_snapshot_would(self, ops: list[tuple[Any, ...]]
                                                     ) -> None:
        """After any sequence of operations on the three coordinators, what the group log
        believes the topic holds, and what the topic holds once compacted, both equal the
        records of the whole final state; and no write took the whole state's records
        (each built only the scopes that changed)."""
        broker = _Broker()
        for op in ops:
            broker.apply(op)
        broker.settle()
        expected = {p: v for p, v in broker.records.snapshot(PARTITIONS).items() if v}
        held = {p: dict(v) for p, v in broker.log.held().items() if v}
        self.assertEqual(held, expected, ops)
        self.assertEqual(broker.core.compacted(), expected, ops)
        self.assertEqual(broker.records.snapshots, 1, "only the test's own snapshot")

    def test_one_commit_builds_one_record(self) -> None:
        """A commit among many groups builds the records of its own offset alone."""
        broker = _Broker()
        for index in range(50):
            broker.groups.admin_commit(f"g{index}", "t", 0, index)
        broker.settle()
        broker.records.scoped.clear()
        batches = sum(len(v) for v in broker.core.log.values())
        broker.groups.admin_commit("g7", "t", 1, 5)
        broker.settle()
        self.assertEqual(broker.records.scoped, [Scope("offset", "g7", "t", 1)])
        self.assertEqual(sum(len(v) for v in broker.core.log.values()), batches + 1)
