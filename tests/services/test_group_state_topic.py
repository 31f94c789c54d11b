"""The broker keeps group state and committed offsets in the internal topic
``__skerry_groups``: a restart rebuilds them from it, old data directories' JSON files are
migrated into it once, it is listed nowhere, and a COMMIT is answered only once its record
is written (``broker/services/group_log.py``)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from broker.core import ProduceRequest, ProduceResult
from broker.errors import StorageError
from broker.services.group_log import GroupStateLog
from data.store import Store, TopicConfig
from groups.records import (
    GROUPS_TOPIC,
    GROUPS_TOPIC_SEGMENT_BYTES,
    Scope,
    offset_key,
    offset_scope,
    partition_for_group,
    scope_key,
)
from tests.reliability.inmemory import InMemoryBroker

LEGACY_GROUPS = {"version": 1, "groups": [
    {"group": "old", "topic": "t", "generation": 2, "assignor": "range", "partitions": 2,
     "members": [{"member_id": "c1", "session_timeout_ms": 10000, "assigned": [0, 1]}]}]}
LEGACY_OFFSETS = {"version": 2, "offsets": [
    {"group": "old", "topic": "t", "committed": {"0": 5, "1": 7}, "metadata": {"1": "k"}}]}
LEGACY_KAFKA = {"version": 1, "groups": [
    {"group_id": "kg", "state": "Empty", "generation": 4, "protocol_type": None,
     "protocol": None, "leader": None, "members": []}]}


def _scratch(case: SynchronousTestCase) -> str:
    """A fresh directory for one test, removed after it (trial's mktemp would leave it in
    the working directory)."""
    path = tempfile.mkdtemp(prefix="skerry-test-")
    case.addCleanup(shutil.rmtree, path, True)
    return path + "/data"


class _Session:
    """One in-memory broker over a data directory, with one V1 connection."""

    def __init__(self, data_dir: Path) -> None:
        self.broker = InMemoryBroker(data_dir)
        self.proto, self.transport = self.broker.connect()

    def ask(self, line: str) -> str:
        replies = self.broker.request(self.proto, self.transport, line)
        assert len(replies) == 1, replies
        return replies[0].decode()

    def close(self) -> None:
        self.broker.close()

    def topic(self, name: str, partitions: int, messages: int = 50) -> None:
        """Create a topic with ``messages`` messages in every partition."""
        assert self.ask(f"V1|t|ADMIN_CREATE_TOPIC|{name} {partitions} 1").startswith("V1|t|OK|")
        for p in range(partitions):
            for i in range(messages):
                assert "|OK|" in self.ask(f"V1|p|PRODUCE|{name} k:v{i} partition={p}")


def _records(data_dir: Path) -> int:
    store = Store(str(data_dir))
    try:
        topic = store.topic(GROUPS_TOPIC)
        if topic is None:
            return 0
        return sum(store.partition(GROUPS_TOPIC, p).next_offset
                   for p in range(topic.config.partitions))
    finally:
        store.close()


class RestartTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.dir = Path(_scratch(self))

    def test_restart_rebuilds_groups_and_offsets_from_the_topic(self) -> None:
        """A group's generation and assignment and its committed offsets come back after a
        restart from the topic alone (no JSON file is written any more); a deleted group
        stays deleted (its tombstones win over its earlier records)."""
        s = _Session(self.dir)
        s.topic("t", 2)
        self.assertEqual(s.ask("V1|2|JOIN|g t c1"), "V1|2|OK|generation=1 assigned=[0 1]")
        self.assertEqual(s.ask("V1|3|COMMIT|g t c1 1 1 42"), "V1|3|OK|committed=true")
        self.assertEqual(s.ask("V1|4|ADMIN_COMMIT|gone t 0 9"), "V1|4|OK|committed=true")
        self.assertEqual(s.ask("V1|5|ADMIN_DELETE_GROUP|gone t"), "V1|5|OK|deleted=true")
        s.close()
        for name in ("groups.json", "offsets.json", "kafka-groups.json"):
            self.assertFalse((self.dir / name).exists(), name)
        s = _Session(self.dir)
        self.addCleanup(s.close)
        self.assertEqual(s.ask("V1|6|OFFSET|g t 1"), "V1|6|OK|offset=42")
        self.assertEqual(s.ask("V1|7|OFFSET|gone t 0"), "V1|7|OK|offset=0")
        self.assertEqual(s.ask("V1|8|SYNC|g t c1 1"), "V1|8|OK|generation=1 assigned=[0 1]")
        self.assertNotIn("gone", s.ask("V1|9|LIST_GROUPS|"))

    def test_the_topic_is_listed_nowhere(self) -> None:
        """Users' topic lists do not show the internal topic, even once it holds state; it
        is compacted and keeps everything else forever."""
        s = _Session(self.dir)
        self.addCleanup(s.close)
        s.topic("t", 1)
        self.assertEqual(s.ask("V1|2|ADMIN_COMMIT|g t 0 3"), "V1|2|OK|committed=true")
        config = s.broker.broker.core.topic_config(GROUPS_TOPIC)
        assert config is not None
        self.assertEqual((config.cleanup_policy, config.retention_ms), ("compact", None))
        self.assertEqual(config.segment_bytes, GROUPS_TOPIC_SEGMENT_BYTES)
        self.assertEqual(s.ask("V1|3|METADATA|"), "V1|3|OK|topics=[t]")

    def test_a_topic_from_before_gets_its_segment_size(self) -> None:
        """A data directory whose topic was created with the store's default segments
        (64 MiB: a loading coordinator would read up to that much uncleaned) has the
        topic's own size set at start, its offsets kept."""
        store = Store(str(self.dir))
        store.create_topic(GROUPS_TOPIC, TopicConfig(partitions=1, cleanup_policy="compact"))
        store.close()
        s = _Session(self.dir)
        s.topic("t", 1)
        self.assertEqual(s.ask("V1|2|ADMIN_COMMIT|g t 0 3"), "V1|2|OK|committed=true")
        s.close()
        s = _Session(self.dir)
        self.addCleanup(s.close)
        config = s.broker.broker.core.topic_config(GROUPS_TOPIC)
        assert config is not None
        self.assertEqual(config.segment_bytes, GROUPS_TOPIC_SEGMENT_BYTES)
        self.assertEqual(s.ask("V1|3|OFFSET|g t 0"), "V1|3|OK|offset=3")

    def test_only_changes_are_appended(self) -> None:
        """A commit appends its own offset record only, not the whole state again: ten
        commits of one partition after a join are ten records more."""
        s = _Session(self.dir)
        s.topic("t", 3)
        s.ask("V1|2|JOIN|g t c1")
        s.ask("V1|3|COMMIT|g t c1 1 0 1")
        s.close()
        before = _records(self.dir)
        s = _Session(self.dir)
        for i in range(10):
            self.assertEqual(s.ask(f"V1|c{i}|COMMIT|g t c1 1 0 {i + 2}"),
                             f"V1|c{i}|OK|committed=true")
        s.close()
        self.assertEqual(_records(self.dir), before + 10)


class MigrationTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.dir = Path(_scratch(self))
        self.dir.mkdir()
        for name, doc in (("groups.json", LEGACY_GROUPS), ("offsets.json", LEGACY_OFFSETS),
                          ("kafka-groups.json", LEGACY_KAFKA)):
            (self.dir / name).write_text(json.dumps(doc))
        store = Store(str(self.dir))  # the old broker's topic
        store.create_topic("t", TopicConfig(partitions=2))
        store.close()

    def test_old_data_directory_opens_with_its_groups_and_offsets(self) -> None:
        """A data directory of a broker before the topic opens with its V1 group, its
        offsets (and their Kafka metadata) and its Kafka group; the files are kept as
        *.migrated; after another restart the state comes from the topic."""
        s = _Session(self.dir)
        self.assertEqual(s.ask("V1|1|OFFSET|old t 1"), "V1|1|OK|offset=7")
        self.assertEqual(s.ask("V1|2|SYNC|old t c1 2"), "V1|2|OK|generation=2 assigned=[0 1]")
        s.close()
        self.assertEqual(sorted(p.name for p in self.dir.iterdir() if "json" in p.name),
                         ["groups.json.migrated", "kafka-groups.json.migrated",
                          "offsets.json.migrated"])
        s = _Session(self.dir)
        self.addCleanup(s.close)
        self.assertEqual(s.ask("V1|3|OFFSET|old t 0"), "V1|3|OK|offset=5")
        kafka = s.broker.broker.kafka_groups
        assert kafka is not None
        self.assertEqual([(g.group_id, g.generation) for g in kafka.coordinator.groups()],
                         [("kg", 4)])
        self.assertEqual(kafka.groups.committed_offset("old", "t", 1), (7, "k"))

    def test_migration_is_idempotent(self) -> None:
        """If the files are found again after their records were written (a crash before
        the rename), the next start appends nothing and loads the same state."""
        s = _Session(self.dir)
        s.close()
        written = _records(self.dir)
        self.assertGreater(written, 0)
        for name in ("groups.json", "offsets.json", "kafka-groups.json"):
            (self.dir / f"{name}.migrated").rename(self.dir / name)
        s = _Session(self.dir)
        self.addCleanup(s.close)
        self.assertEqual(s.ask("V1|1|OFFSET|old t 1"), "V1|1|OK|offset=7")
        s.broker.settle()
        self.assertFalse((self.dir / "offsets.json").exists())
        s.close()
        self.assertEqual(_records(self.dir), written)


class _FakeCore:
    """Answers a produce only when the test says so."""

    def __init__(self) -> None:
        self.created: list[Any] = []
        self.batches: list[tuple[int, list[bytes], list[bytes], Any]] = []

    def topic_config(self, name: str) -> Any:
        return object() if self.created else None

    def create_internal_topic(self, *args: Any) -> None:
        self.created.append(args)

    def produce(self, request: ProduceRequest, answer: Any) -> None:
        assert request.acks == "all" and request.whole
        self.batches.append((request.partition, list(request.keys), list(request.values),
                             answer))


class _EmptyStore:
    def topic(self, name: str) -> None:
        return None

    def partition(self, name: str, partition: int) -> None:
        raise AssertionError("no topic")


class _StateSource:
    """The records a test's ``state`` holds: all, or one scope's (its one key)."""

    def __init__(self, test: WriterTests) -> None:
        self.test = test
        self.scoped: list[Scope] = []

    def snapshot(self, partitions: int) -> dict[int, dict[bytes, bytes]]:
        return {p: dict(v) for p, v in self.test.state.items()}

    def records(self, scope: Scope) -> dict[bytes, bytes]:
        self.scoped.append(scope)
        key = scope_key(scope)
        assert key is not None
        held = self.test.state.get(partition_for_group(scope.group, 4), {})
        return {key: held.get(key, b"")}


class WriterTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.core = _FakeCore()
        self.state: dict[int, dict[bytes, bytes]] = {}
        self.log = GroupStateLog(_EmptyStore(), _scratch(self), self.clock, partitions=4)
        self.source = _StateSource(self)
        self.log.attach(self.core, self.source)

    def _durable(self) -> tuple[Deferred[None], list[Any]]:
        seen: list[Any] = []
        d = self.log.durable()
        d.addBoth(seen.append)
        return d, seen

    def test_answered_once_the_record_is_acknowledged(self) -> None:
        """durable() fires only when the produce (acks=all) answers; the topic is created
        with the configured partitions at the first write; a change made while a write is
        in flight goes into the next one, with only the records that changed."""
        p = partition_for_group("g", 4)
        key = offset_key("g", "t", 0)
        self.state = {p: {key: b'{"v":1,"offset":1}'}}
        self.log.changed()
        _, first = self._durable()
        self.clock.advance(0)
        self.assertEqual(self.core.created, [(GROUPS_TOPIC, 4, 1, 1)])
        self.assertEqual(len(self.core.batches), 1)
        self.state = {p: {key: b'{"v":1,"offset":2}'}}
        self.log.changed()
        _, second = self._durable()
        self.clock.advance(0)
        self.assertEqual((first, len(self.core.batches)), ([], 1))
        self.core.batches[0][3](ProduceResult(0, 0, 0))
        self.assertEqual(first, [None])
        self.assertEqual(second, [])
        self.clock.advance(0)
        partition, keys, values, answer = self.core.batches[1]
        self.assertEqual((partition, keys, values), (p, [key], [b'{"v":1,"offset":2}']))
        answer(ProduceResult(0, 1, 1))
        self.assertEqual(second, [None])

    def test_failed_write_fails_the_waiters_and_is_tried_again(self) -> None:
        """A refused append fails the replies waiting on it with StorageError, and the
        next write sends the same records again (nothing is taken as written)."""
        key = offset_key("g", "t", 0)
        self.state = {partition_for_group("g", 4): {key: b'{"v":1,"offset":1}'}}
        self.log.changed()
        _, seen = self._durable()
        self.clock.advance(0)
        self.core.batches[0][3](ProduceResult(0, -1, -1, 0, 0, StorageError("disk full")))
        self.assertIsInstance(seen[0].value, StorageError)
        self.log.changed()
        self.clock.advance(0)
        self.assertEqual(self.core.batches[1][1:3], ([key], [b'{"v":1,"offset":1}']))

    def test_deleted_keys_get_tombstones(self) -> None:
        """A key gone from the state is written as a tombstone (empty value)."""
        key = offset_key("g", "t", 0)
        p = partition_for_group("g", 4)
        self.state = {p: {key: b'{"v":1,"offset":1}'}}
        self.log.changed()
        self.clock.advance(0)
        self.core.batches[0][3](ProduceResult(0, 0, 0))
        self.state = {}
        self.log.changed()
        self.clock.advance(0)
        self.assertEqual(self.core.batches[1][:3], (p, [key], [b""]))


    def test_a_scoped_change_builds_only_its_records(self) -> None:
        """changed(scopes) builds the records of those scopes alone (never the whole
        state) and appends those that differ from what the partition holds; a scope whose
        thing is gone gets a tombstone only when the partition held its key."""
        p = partition_for_group("g", 4)
        a, b = offset_key("g", "t", 0), offset_key("g", "t", 1)
        self.state = {p: {a: b'{"v":1,"offset":1}', b: b'{"v":1,"offset":1}'}}
        self.log.changed()
        self.clock.advance(0)
        self.core.batches[0][3](ProduceResult(0, 0, 1))
        source = self.source
        self.state = {p: {a: b'{"v":1,"offset":2}', b: b'{"v":1,"offset":9}'}}
        self.log.changed([offset_scope("g", "t", 0)])
        self.clock.advance(0)
        self.assertEqual(source.scoped, [offset_scope("g", "t", 0)])
        self.assertEqual(self.core.batches[1][:3], (p, [a], [b'{"v":1,"offset":2}']))
        self.core.batches[1][3](ProduceResult(0, 2, 2))
        self.assertEqual(self.log.held()[p][a], b'{"v":1,"offset":2}')
        self.assertEqual(self.log.held()[p][b], b'{"v":1,"offset":1}')
        # b and a key never written go; only b, which the partition held, is a tombstone.
        self.state = {p: {a: b'{"v":1,"offset":2}'}}
        self.log.changed([offset_scope("g", "t", 1), offset_scope("g", "t", 7)])
        self.clock.advance(0)
        self.assertEqual(self.core.batches[2][:3], (p, [b], [b""]))
        self.core.batches[2][3](ProduceResult(0, 3, 3))
        self.assertEqual(dict(self.log.held()[p]), {a: b'{"v":1,"offset":2}'})
        # Nothing differs: nothing is appended, durable() fires at once.
        self.log.changed([offset_scope("g", "t", 0)])
        _, seen = self._durable()
        self.clock.advance(0)
        self.assertEqual((len(self.core.batches), seen), (3, [None]))

    def test_after_a_failed_scoped_write_the_whole_state_is_compared(self) -> None:
        """A refused scoped append leaves nothing taken as written: the next write
        compares the whole state (the safety net), so the lost change is appended even
        when the next change names another scope."""
        p = partition_for_group("g", 4)
        a, b = offset_key("g", "t", 0), offset_key("g", "t", 1)
        self.state = {p: {a: b'{"v":1,"offset":1}'}}
        self.log.changed([offset_scope("g", "t", 0)])
        self.clock.advance(0)
        self.core.batches[0][3](ProduceResult(0, -1, -1, 0, 0, StorageError("disk full")))
        self.state = {p: {a: b'{"v":1,"offset":1}', b: b'{"v":1,"offset":4}'}}
        self.log.changed([offset_scope("g", "t", 1)])
        self.clock.advance(0)
        self.assertEqual(self.core.batches[1][:3],
                         (p, [a, b], [b'{"v":1,"offset":1}', b'{"v":1,"offset":4}']))


class ConsumerGroupRestartTests(SynchronousTestCase):
    """KIP-848 consumer groups (GROUP_HEARTBEAT) are records of the topic too."""

    def setUp(self) -> None:
        self.dir = Path(_scratch(self))

    def test_restart_keeps_epochs_assignments_and_offsets(self) -> None:
        """After a restart the members carry on with the epochs they were answered: the
        same assignments and target, no rejoin, the hand-over in progress completes, and
        the committed offset is read back."""
        s = _Session(self.dir)
        s.topic("clicks", 4, messages=3)
        self.assertIn("epoch=1 ", s.ask("V1|1|GROUP_HEARTBEAT|dash w1 0 topics=clicks"))
        self.assertEqual(
            s.ask("V1|2|GROUP_HEARTBEAT|dash w2 0 topics=clicks"),
            "V1|2|OK|member=w2 epoch=2 interval_ms=5000 assigned=[] "
            "target=[clicks:2 clicks:3]")
        self.assertEqual(
            s.ask("V1|3|GROUP_HEARTBEAT|dash w1 1"),
            "V1|3|OK|member=w1 epoch=1 interval_ms=5000 assigned=[clicks:0 clicks:1] "
            "target=[clicks:0 clicks:1]")
        self.assertEqual(s.ask("V1|4|COMMIT|dash clicks w1 1 0 2"), "V1|4|OK|committed=true")
        s.close()

        s = _Session(self.dir)
        self.addCleanup(s.close)
        self.assertEqual(s.ask("V1|5|OFFSET|dash clicks 0"), "V1|5|OK|offset=2")
        # w2 is still waiting for clicks:2 and clicks:3, which w1 has not yet released.
        self.assertEqual(
            s.ask("V1|6|GROUP_HEARTBEAT|dash w2 2"),
            "V1|6|OK|member=w2 epoch=2 interval_ms=5000 assigned=[] "
            "target=[clicks:2 clicks:3]")
        self.assertEqual(
            s.ask("V1|7|GROUP_HEARTBEAT|dash w1 1 owned=clicks:0,clicks:1"),
            "V1|7|OK|member=w1 epoch=2 interval_ms=5000 assigned=[clicks:0 clicks:1] "
            "target=[clicks:0 clicks:1]")
        self.assertEqual(
            s.ask("V1|8|GROUP_HEARTBEAT|dash w2 2"),
            "V1|8|OK|member=w2 epoch=2 interval_ms=5000 assigned=[clicks:2 clicks:3] "
            "target=[clicks:2 clicks:3]")
        self.assertEqual(s.ask("V1|9|COMMIT|dash clicks w2 2 3 1"), "V1|9|OK|committed=true")
        # A JOIN into the name is still refused: the group's members came back with it.
        self.assertIn("|ERR|BAD_REQUEST|", s.ask("V1|10|JOIN|dash clicks c9"))

    def test_a_left_group_stays_left(self) -> None:
        """Members that left are gone after a restart too (their records were replaced),
        so their old epochs are refused and the name is free for JOIN once empty."""
        s = _Session(self.dir)
        s.topic("clicks", 2, messages=1)
        s.ask("V1|1|GROUP_HEARTBEAT|solo w1 0 topics=clicks")
        self.assertIn("epoch=-1 ", s.ask("V1|2|GROUP_HEARTBEAT|solo w1 leave"))
        s.close()
        s = _Session(self.dir)
        self.addCleanup(s.close)
        self.assertIn("|ERR|GENERATION_MISMATCH|", s.ask("V1|3|GROUP_HEARTBEAT|solo w1 1"))
