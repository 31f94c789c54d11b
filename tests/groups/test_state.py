"""Tests for groups.state and groups.group: the transition table, transition_to,
init_next_generation and the validate_member fencing check."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from broker.errors import GenerationMismatch, PartitionNotOwned, StaleGeneration, UnknownMember
from broker.v1.errors import code_for
from groups.group import Group, Member
from groups.state import VALID_PREVIOUS_STATES, GroupState, IllegalStateError

EMPTY, STABLE, DEAD = GroupState.EMPTY, GroupState.STABLE, GroupState.DEAD

LEGAL = {(EMPTY, STABLE), (STABLE, STABLE), (STABLE, EMPTY), (EMPTY, DEAD)}


def _group_in(state: GroupState) -> Group:
    """A group driven into ``state`` through legal moves only."""
    group = Group("g", "t")
    if state is STABLE:
        group.members["c1"] = Member("c1", 1000)
        group.init_next_generation(3)
    elif state is DEAD:
        group.transition_to(DEAD)
    return group


def _snapshot(group: Group) -> tuple[object, ...]:
    return (group.state, group.generation, group.partitions, group.assignor,
            dict(group.members), {m: list(p) for m, p in group.assignment.items()})


class TransitionTableTests(SynchronousTestCase):
    def test_table_is_exactly_the_documented_moves(self) -> None:
        """The table allows exactly: empty->stable (first join), stable->stable (rebalance),
        stable->empty (last member gone) and empty->dead (admin delete)."""
        table = {(src, dst) for dst, sources in VALID_PREVIOUS_STATES.items() for src in sources}
        self.assertEqual(table, LEGAL)
        self.assertEqual(set(VALID_PREVIOUS_STATES), set(GroupState))

    def test_every_pair(self) -> None:
        """Every legal move succeeds; every illegal one raises IllegalStateError naming the
        group, the allowed states and the current one, and leaves the group unchanged."""
        for src in GroupState:
            for dst in GroupState:
                group = _group_in(src)
                before = _snapshot(group)
                if (src, dst) in LEGAL:
                    group.transition_to(dst)
                    self.assertIs(group.state, dst)
                    continue
                with self.assertRaises(IllegalStateError) as caught:
                    group.transition_to(dst)
                self.assertIn("group g/t should be in one of", str(caught.exception))
                self.assertIn(f"before moving to {dst.value}; is in {src.value}",
                              str(caught.exception))
                self.assertEqual(_snapshot(group), before, (src, dst))

    def test_init_next_generation_from_dead_changes_nothing(self) -> None:
        """A rebalance of a deleted group is a bug: it raises before the generation moves."""
        group = _group_in(DEAD)
        before = _snapshot(group)
        self.assertRaises(IllegalStateError, group.init_next_generation, 3)
        self.assertEqual(_snapshot(group), before)

    def test_init_next_generation_of_empty_group_without_members_raises(self) -> None:
        """empty->empty is not a move: an empty group only rebalances when someone joins."""
        group = _group_in(EMPTY)
        self.assertRaises(IllegalStateError, group.init_next_generation, 3)
        self.assertEqual(group.generation, 0)


class GroupTests(SynchronousTestCase):
    def test_generation_and_state_follow_membership(self) -> None:
        """Each init_next_generation adds one to the generation and reassigns; the state is
        stable while there are members and empty (generation kept) when none are left."""
        group = Group("g", "t", assignor="range")
        group.members["c1"] = Member("c1", 1000)
        group.init_next_generation(3)
        self.assertEqual((group.state, group.generation, group.assignment),
                         (STABLE, 1, {"c1": [0, 1, 2]}))
        group.members["c2"] = Member("c2", 1000)
        group.init_next_generation(3)
        self.assertEqual((group.generation, group.assignment), (2, {"c1": [0, 1], "c2": [2]}))
        del group.members["c1"]
        del group.members["c2"]
        group.init_next_generation(3)
        self.assertEqual((group.state, group.generation, group.assignment), (EMPTY, 3, {}))

    def test_validate_member(self) -> None:
        """validate_member refuses an unknown member, a generation other than the current
        one (older or newer) and a partition the member does not own, each with its own
        GenerationMismatch subclass; it returns the member otherwise."""
        group = Group("g", "t")
        for member_id in ("c1", "c2"):
            group.members[member_id] = Member(member_id, 1000)
        group.init_next_generation(1)
        group.init_next_generation(4)  # generation 2: c1 [0, 2], c2 [1, 3]
        self.assertIs(group.validate_member("c1", 2), group.members["c1"])
        self.assertIs(group.validate_member("c2", 2, partition=3), group.members["c2"])
        cases = [
            (("nobody", 2), {}, UnknownMember, "nobody is not a member of group g on topic t"),
            (("c1", 1), {}, StaleGeneration, "generation 1 is not the current generation 2"),
            (("c1", 3), {}, StaleGeneration, "generation 3 is not the current generation 2"),
            (("c1", 2), {"partition": 1}, PartitionNotOwned,
             "partition 1 of topic t is not assigned to c1 in generation 2"),
            (("c1", 2), {"partition": 4}, PartitionNotOwned, "partition 4"),
        ]
        for args, kwargs, error, text in cases:
            with self.assertRaises(error) as caught:
                group.validate_member(*args, **kwargs)
            self.assertIsInstance(caught.exception, GenerationMismatch)
            self.assertEqual(code_for(caught.exception), "GENERATION_MISMATCH")
            self.assertIn(text, caught.exception.message)
