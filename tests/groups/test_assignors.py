"""Tests for groups.assignors: the spec's round_robin and range, and the additive sticky."""

from __future__ import annotations

import doctest
import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

import groups.assignors
from groups.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    assign_range,
    assign_round_robin,
    assign_sticky,
    assignor_choices,
)

NAMES = st.lists(st.sampled_from([f"c{i}" for i in range(8)]), unique=True, max_size=6)


class RoundRobinTests(SynchronousTestCase):
    def test_table(self) -> None:
        """Partition p goes to the member at position p mod n of the id-sorted members;
        members with nothing get [] and zero members get no entries at all."""
        cases = [
            ([], 3, {}),
            (["c0"], 0, {"c0": []}),
            (["c0", "c1"], 0, {"c0": [], "c1": []}),
            (["c0"], 3, {"c0": [0, 1, 2]}),
            (["c1", "c0"], 3, {"c0": [0, 2], "c1": [1]}),
            (["c0", "c1", "c2"], 7, {"c0": [0, 3, 6], "c1": [1, 4], "c2": [2, 5]}),
            (["d", "c", "b", "a"], 2, {"a": [0], "b": [1], "c": [], "d": []}),
            (["consumer-b", "consumer-a"], 4, {"consumer-a": [0, 2], "consumer-b": [1, 3]}),
        ]
        for members, partitions, expected in cases:
            self.assertEqual(assign_round_robin(members, partitions), expected,
                             f"{members} over {partitions} partitions")

    def test_ignores_previous(self) -> None:
        """round_robin depends only on members and partition count, never on history."""
        self.assertEqual(assign_round_robin(["a", "b"], 4, {"a": [3], "b": [0, 1, 2]}),
                         {"a": [0, 2], "b": [1, 3]})


class RangeTests(SynchronousTestCase):
    def test_table(self) -> None:
        """Members get contiguous blocks of floor(P/n); the first P mod n members (by id)
        get one extra; members beyond P get []."""
        cases = [
            ([], 3, {}),
            (["c0", "c1"], 0, {"c0": [], "c1": []}),
            (["c0"], 3, {"c0": [0, 1, 2]}),
            (["c1", "c0"], 3, {"c0": [0, 1], "c1": [2]}),
            (["c0", "c1", "c2"], 7, {"c0": [0, 1, 2], "c1": [3, 4], "c2": [5, 6]}),
            (["c0", "c1", "c2"], 8, {"c0": [0, 1, 2], "c1": [3, 4, 5], "c2": [6, 7]}),
            (["c0", "c1", "c2"], 9, {"c0": [0, 1, 2], "c1": [3, 4, 5], "c2": [6, 7, 8]}),
            (["d", "c", "b", "a"], 2, {"a": [0], "b": [1], "c": [], "d": []}),
        ]
        for members, partitions, expected in cases:
            self.assertEqual(assign_range(members, partitions), expected,
                             f"{members} over {partitions} partitions")


class StickyTests(SynchronousTestCase):
    def test_table(self) -> None:
        """Sticky keeps partitions with their previous owner as far as balance allows,
        cleans impossible history, and equals range when there is no history."""
        cases = [
            # (members, partitions, previous, expected)
            ([], 4, {"a": [0]}, {}),
            (["c0", "c1"], 0, {"c0": [0]}, {"c0": [], "c1": []}),
            (["c0", "c1", "c2"], 7, {}, assign_range(["c0", "c1", "c2"], 7)),
            # a member joins: the two holders give up one each
            (["c0", "c1", "c2"], 6, {"c0": [0, 1, 2], "c1": [3, 4, 5]},
             {"c0": [0, 1], "c1": [3, 4], "c2": [2, 5]}),
            # a member leaves: the others keep everything and share its partitions
            (["c0", "c2"], 6, {"c0": [0, 1], "c1": [3, 4], "c2": [2, 5]},
             {"c0": [0, 1, 3], "c2": [2, 4, 5]}),
            # the extra slots go to the biggest previous holders
            (["c0", "c1", "c2"], 5, {"c0": [0], "c1": [1, 2, 3, 4]},
             {"c0": [0, 3], "c1": [1, 2], "c2": [4]}),
            # more members than partitions: the holders keep theirs
            (["c0", "c1", "c2"], 2, {"c2": [0], "c1": [1]}, {"c0": [], "c1": [1], "c2": [0]}),
            # history from a bigger topic, a gone member and a double claim is cleaned
            (["b", "c"], 3, {"a": [0], "b": [1, 7], "c": [1, 2]},
             {"b": [0, 1], "c": [2]}),
        ]
        for members, partitions, previous, expected in cases:
            self.assertEqual(assign_sticky(members, partitions, previous), expected,
                             f"{members} over {partitions} partitions after {previous}")

    def test_stable_across_member_changes(self) -> None:
        """Over a run of joins and leaves on 12 partitions, each step moves only the
        partitions balance forces to move: a join moves floor(12/n) partitions to the
        newcomer, a leave moves only the leaver's partitions."""
        current = assign_sticky(["c0", "c1", "c2"], 12)
        steps = [("join", "c3"), ("join", "c4"), ("leave", "c1"), ("leave", "c0"),
                 ("join", "c5")]
        members = set(current)
        for action, member in steps:
            before = {p: owner for owner, parts in current.items() for p in parts}
            if action == "join":
                members.add(member)
            else:
                members.discard(member)
            current = assign_sticky(members, 12, current)
            after = {p: owner for owner, parts in current.items() for p in parts}
            moved = sorted(p for p in after if before[p] != after[p])
            if action == "join":
                self.assertEqual(len(moved), len(current[member]), (action, member, moved))
                self.assertEqual(len(current[member]), 12 // len(members))
            else:
                self.assertEqual(moved, sorted(p for p, owner in before.items()
                                               if owner == member), (action, member))

    @settings(max_examples=150, deadline=None)
    @given(members=st.lists(st.sampled_from(["a", "b", "c"]), unique=True, min_size=1),
           partitions=st.integers(0, 6), data=st.data())
    def test_keeps_the_most_partitions_a_balanced_assignment_can(
            self, members: list[str], partitions: int, data: st.DataObject) -> None:
        """Brute force over every balanced assignment: none keeps more partitions with their
        previous owner than sticky does (the previous assignment may name partitions beyond
        the count and members that left)."""
        pool = ["a", "b", "c", "gone"]
        previous_owner = data.draw(st.dictionaries(st.integers(0, partitions + 1),
                                                   st.sampled_from(pool)))
        previous: dict[str, list[int]] = {}
        for p, owner in previous_owner.items():
            previous.setdefault(owner, []).append(p)
        result = assign_sticky(members, partitions, previous)
        kept = sum(1 for owner, parts in result.items() for p in parts
                   if previous_owner.get(p) == owner)
        best = 0
        for owners in itertools.product(sorted(members), repeat=partitions):
            counts = [owners.count(m) for m in members]
            if max(counts) - min(counts) > 1:
                continue
            best = max(best, sum(1 for p, o in enumerate(owners) if previous_owner.get(p) == o))
        self.assertEqual(kept, best)


class InvariantTests(SynchronousTestCase):
    @settings(max_examples=200, deadline=None)
    @given(members=NAMES, partitions=st.integers(0, 40), data=st.data())
    def test_every_assignor(self, members: list[str], partitions: int,
                            data: st.DataObject) -> None:
        """For every assignor and any previous assignment: each member has an entry, no
        partition goes to two members, every partition is assigned when there is a member,
        counts differ by at most one, and shuffling the inputs changes nothing."""
        previous_owner = data.draw(st.dictionaries(st.integers(0, partitions + 3),
                                                   st.sampled_from(["c0", "c1", "c5", "zz"])))
        previous: dict[str, list[int]] = {}
        for p, owner in previous_owner.items():
            previous.setdefault(owner, []).append(p)
        shuffled = list(reversed(members))
        random.Random(partitions).shuffle(shuffled)
        shuffled_previous = {m: list(reversed(ps)) for m, ps in reversed(list(previous.items()))}
        for name, assignor in ASSIGNORS.items():
            result = assignor(members, partitions, previous)
            self.assertEqual(set(result), set(members), name)
            flat = [p for parts in result.values() for p in parts]
            self.assertEqual(len(flat), len(set(flat)), f"{name}: a partition twice")
            self.assertEqual(sorted(flat), list(range(partitions)) if members else [], name)
            counts = [len(parts) for parts in result.values()]
            if counts:
                self.assertLessEqual(max(counts) - min(counts), 1, name)
            for parts in result.values():
                self.assertEqual(parts, sorted(parts), name)
            self.assertEqual(assignor(shuffled, partitions, shuffled_previous), result, name)


class RegistryTests(SynchronousTestCase):
    def test_names_and_default(self) -> None:
        """JOIN accepts exactly round_robin, range and sticky; a new group uses round_robin."""
        self.assertEqual(sorted(ASSIGNORS), ["range", "round_robin", "sticky"])
        self.assertEqual(DEFAULT_ASSIGNOR, "round_robin")
        self.assertEqual(assignor_choices(), "round_robin, range or sticky")

    def test_docstring_examples(self) -> None:
        """The worked examples in the assignor docstrings are true."""
        outcome = doctest.testmod(groups.assignors)
        self.assertEqual(outcome.failed, 0)
        self.assertGreaterEqual(outcome.attempted, 6)
