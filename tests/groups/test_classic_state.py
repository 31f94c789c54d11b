"""Tests for groups.classic_state and groups.classic_group: the Kafka classic transition
table, transition_to, init_next_generation, protocol selection and validate_member."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from groups.classic_group import ClassicGroup, ClassicMember
from groups.classic_state import (
    CLASSIC_VALID_PREVIOUS_STATES,
    ClassicGroupState,
    IllegalStateError,
)
from groups.kafka_errors import IllegalGeneration, UnknownMemberId

EMPTY = ClassicGroupState.EMPTY
PREPARING = ClassicGroupState.PREPARING_REBALANCE
AWAITING = ClassicGroupState.AWAITING_SYNC
STABLE = ClassicGroupState.STABLE
DEAD = ClassicGroupState.DEAD

LEGAL = {
    (EMPTY, PREPARING), (AWAITING, PREPARING), (STABLE, PREPARING),
    (PREPARING, AWAITING),
    (AWAITING, STABLE),
    (PREPARING, EMPTY),
    *((state, DEAD) for state in ClassicGroupState),
}
"""Kafka's ClassicGroupState table, written out pair by pair."""


def _member(member_id: str, *protocols: str) -> ClassicMember:
    return ClassicMember(member_id, "client", "/127.0.0.1", 10_000, 10_000,
                         tuple((name, name.encode()) for name in protocols or ("range",)))


def _group_in(state: ClassicGroupState) -> ClassicGroup:
    """A group driven into ``state`` through legal moves only."""
    group = ClassicGroup("g")
    if state is EMPTY:
        return group
    if state is DEAD:
        group.transition_to(DEAD)
        return group
    group.add(_member("c1"), "consumer")
    group.transition_to(PREPARING)
    if state is PREPARING:
        return group
    group.init_next_generation()
    if state is STABLE:
        group.transition_to(STABLE)
    return group


def _snapshot(group: ClassicGroup) -> tuple[object, ...]:
    return (group.state, group.generation, group.protocol, group.protocol_type,
            group.leader, {m: (x.protocols, x.assignment) for m, x in group.members.items()})


class ClassicTransitionTableTests(SynchronousTestCase):
    def test_table_is_exactly_kafkas(self) -> None:
        """The table allows exactly Kafka's moves and names every state as a target."""
        table = {(src, dst) for dst, sources in CLASSIC_VALID_PREVIOUS_STATES.items()
                 for src in sources}
        self.assertEqual(table, LEGAL)
        self.assertEqual(set(CLASSIC_VALID_PREVIOUS_STATES), set(ClassicGroupState))

    def test_every_pair(self) -> None:
        """Every legal move succeeds; every illegal one raises IllegalStateError naming the
        group, the allowed states and the current one, and leaves the group unchanged."""
        for src in ClassicGroupState:
            for dst in ClassicGroupState:
                group = _group_in(src)
                self.assertIs(group.state, src)
                before = _snapshot(group)
                if (src, dst) in LEGAL:
                    group.transition_to(dst)
                    self.assertIs(group.state, dst)
                    continue
                with self.assertRaises(IllegalStateError) as caught:
                    group.transition_to(dst)
                self.assertIn("group g should be in one of", str(caught.exception))
                self.assertIn(f"before moving to {dst.value}; is in {src.value}",
                              str(caught.exception))
                self.assertEqual(_snapshot(group), before, (src, dst))

    def test_values_are_describe_groups_names(self) -> None:
        """The enum values are the state names DescribeGroups v0 reports."""
        self.assertEqual([s.value for s in ClassicGroupState],
                         ["Empty", "PreparingRebalance", "AwaitingSync", "Stable", "Dead"])

    def test_init_next_generation_outside_preparing_changes_nothing(self) -> None:
        """Completing a join barrier that is not running is a bug: it raises before the
        generation or the protocol moves."""
        for state in (EMPTY, AWAITING, STABLE, DEAD):
            group = _group_in(state)
            before = _snapshot(group)
            with self.assertRaises(IllegalStateError):
                group.init_next_generation()
            self.assertEqual(_snapshot(group), before, state)

    def test_init_next_generation(self) -> None:
        """With members: generation + 1, protocol chosen, assignments forgotten, awaiting
        sync. Without: generation + 1, no protocol, Empty."""
        group = _group_in(STABLE)
        group.members["c1"].assignment = b"old"
        group.transition_to(PREPARING)
        group.init_next_generation()
        self.assertEqual((group.state, group.generation, group.protocol), (AWAITING, 2, "range"))
        self.assertEqual(group.members["c1"].assignment, b"")
        group.transition_to(PREPARING)
        group.remove("c1")
        group.init_next_generation()
        self.assertEqual((group.state, group.generation, group.protocol, group.leader),
                         (EMPTY, 3, None, None))


class ClassicGroupTests(SynchronousTestCase):
    def test_select_protocol_votes(self) -> None:
        """Only protocols every member supports count; each member votes for its most
        preferred one; ties go to the smaller name."""
        group = ClassicGroup("g")
        group.add(_member("a", "sticky", "range", "roundrobin"), "consumer")
        group.add(_member("b", "roundrobin", "range"), "consumer")
        group.add(_member("c", "range", "roundrobin"), "consumer")
        self.assertEqual(group.select_protocol(), "range")  # a: range, b: rr, c: range
        group.remove("c")
        self.assertEqual(group.select_protocol(), "range")  # 1:1, range < roundrobin

    def test_supports_protocols(self) -> None:
        """An empty group takes any non-empty type and list; otherwise the type must match
        and one protocol must be common to every member."""
        group = ClassicGroup("g")
        self.assertTrue(group.supports_protocols("consumer", ["range"]))
        self.assertFalse(group.supports_protocols("", ["range"]))
        self.assertFalse(group.supports_protocols("consumer", []))
        group.add(_member("a", "range", "roundrobin"), "consumer")
        self.assertTrue(group.supports_protocols("consumer", ["roundrobin"]))
        self.assertFalse(group.supports_protocols("connect", ["range"]))
        self.assertFalse(group.supports_protocols("consumer", ["sticky"]))

    def test_leader_succession(self) -> None:
        """The first member leads; when the leader goes, the earliest remaining one does."""
        group = ClassicGroup("g")
        for member_id in ("a", "b", "c"):
            group.add(_member(member_id), "consumer")
        self.assertEqual(group.leader, "a")
        group.remove("b")
        self.assertEqual(group.leader, "a")
        group.remove("a")
        self.assertEqual(group.leader, "c")

    def test_validate_member(self) -> None:
        """Unknown member first, then the generation."""
        group = _group_in(STABLE)
        self.assertIs(group.validate_member("c1", 1), group.members["c1"])
        with self.assertRaises(UnknownMemberId):
            group.validate_member("zz", 1)
        with self.assertRaises(IllegalGeneration):
            group.validate_member("c1", 0)

    def test_constructor_refuses_inconsistent_state(self) -> None:
        """A restored group must fit its state: members iff not Empty, never Dead, a
        leader among the members."""
        with self.assertRaises(ValueError):
            ClassicGroup("g", state=STABLE)
        with self.assertRaises(ValueError):
            ClassicGroup("g", members=[_member("a")], state=EMPTY)
        with self.assertRaises(ValueError):
            ClassicGroup("g", members=[_member("a")], leader="b")
        with self.assertRaises(ValueError):
            ClassicGroup("g", state=DEAD)
