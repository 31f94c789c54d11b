"""Tests for handing a coordinator partition's groups from one broker to another:
``GroupCoordinator.load``/``unload`` and ``ClassicGroupCoordinator.load``/``unload``. A
broker that becomes the leader of a partition of ``__skerry_groups`` loads its groups
(their members get fresh session timers); one that stops leading it forgets them (timers
cancelled, Kafka requests held there answered NOT_COORDINATOR)."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from groups.classic_effects import CancelTimer, ScheduleSession
from groups.classic_store import classic_groups_from_json, classic_groups_to_json
from groups.coordinator import GroupCoordinator
from groups.effects import CancelExpiry, ScheduleExpiry
from groups.kafka_errors import NotCoordinator
from groups.loader import GroupLog
from groups.records import changes, state_records
from tests.groups.classic_helpers import Driver


def _partitions(topic: str) -> int:
    return 3


def _two_groups() -> GroupCoordinator:
    c = GroupCoordinator(_partitions)
    c.join("a", "t", "m1", 0)
    c.commit("a", "t", "m1", 1, 0, 0, 0)
    c.join("b", "t", "m2", 0)
    c.admin_commit("b", "u", 1, 0)
    return c


class V1HandoverTests(SynchronousTestCase):
    def test_unload_forgets_only_the_partitions_groups(self) -> None:
        """unload(owned) forgets the groups and offsets of the group ids owned says, and
        cancels exactly their members' timers; the others stay served."""
        c = _two_groups()
        result = c.unload(lambda g: g == "b")
        self.assertEqual(result.reply, [("b", "t"), ("b", "u")])
        self.assertEqual([e.key for e in result.effects if isinstance(e, CancelExpiry)],
                         ["heartbeat:b:t:m2"])
        self.assertEqual(c.list_groups(), [("a", "t")])
        self.assertEqual(c.offset("b", "u", 1), 0)

    def test_load_takes_over_with_fresh_timers(self) -> None:
        """The state one coordinator held, written as records and loaded by another,
        serves the same generation, assignment and offsets there; only the loaded
        groups' members get timers, a full session timeout from the load."""
        old = _two_groups()
        book = GroupLog()
        records = state_records(old.groups(), old.committed(), old.committed_metadata(), [], 1)
        for offset, (key, value) in enumerate(changes({}, records[0])):
            book.apply(0, offset, key, value)
        loaded = book.state()
        new = GroupCoordinator(_partitions)
        new.join("other", "t", "x", 0)
        result = new.load(loaded.groups, loaded.offsets, loaded.metadata, now_ms=5000)
        self.assertEqual(sorted((e.member_id, e.deadline_ms) for e in result.effects
                                if isinstance(e, ScheduleExpiry)),
                         [("m1", 15_000), ("m2", 15_000)])
        self.assertEqual(new.sync("a", "t", "m1", 1, 6000).reply, (1, [0, 1, 2]))
        self.assertEqual(new.offset("b", "u", 1), 0)
        self.assertEqual(new.committed()[("a", "t")], {0: 0})
        self.assertEqual(new.list_groups(), [("a", "t"), ("b", "t"), ("b", "u"),
                                             ("other", "t")])

    def test_load_refuses_groups_held_already(self) -> None:
        """Loading a group the coordinator holds is a bug in the caller: refused, nothing
        changed."""
        c = _two_groups()
        again = _two_groups()
        with self.assertRaises(ValueError):
            c.load(again.groups(), {}, {})
        self.assertEqual(c.list_groups(), [("a", "t"), ("b", "t"), ("b", "u")])


class ClassicHandoverTests(SynchronousTestCase):
    def test_unload_answers_held_requests_not_coordinator(self) -> None:
        """A JoinGroup held at the barrier when the partition moves is answered
        NOT_COORDINATOR, and the group's timers are cancelled."""
        d = Driver()
        d.round(2)
        d.join(group="h")
        held = d.join()  # a new member of g: held until c-1 and c-2 rejoin
        self.assertIsNone(d.answer(held))
        result = d.coordinator.unload(lambda g: g == "g")
        d.perform(result)
        self.assertEqual(result.reply, ["g"])
        self.assertIsInstance(d.answer(held), NotCoordinator)
        self.assertTrue(any(isinstance(e, CancelTimer) for e in result.effects))
        self.assertEqual([k for k in d.timers if k.split(":")[-2] == "g"
                          or k == "kafka-join:g"], [])
        self.assertTrue([k for k in d.timers if k.split(":")[-2] == "h"])
        self.assertEqual([g.group_id for g in d.coordinator.groups()], ["h"])

    def test_load_starts_only_the_loaded_groups(self) -> None:
        """Loaded groups' members get session timers; groups already held are not
        re-armed."""
        d = Driver()
        d.round(2)
        other = Driver()
        other.round(1)
        moved = classic_groups_from_json(classic_groups_to_json(other.coordinator.groups()))
        for group in moved:
            group.group_id = "moved"
        result = d.coordinator.load(moved, 100)
        self.assertEqual([(e.group_id, e.member_id, e.deadline_ms) for e in result.effects
                          if isinstance(e, ScheduleSession)], [("moved", "c-1", 10_100)])
        with self.assertRaises(ValueError):
            d.coordinator.load(classic_groups_from_json(classic_groups_to_json(
                [d.coordinator.group("g")])), 100)
