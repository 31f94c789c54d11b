"""Tests for groups.consumer_assignors: the docstring examples, and the properties every
assignment must have (each subscribed partition once, only to subscribers, balance within
one with identical subscriptions, uniform's stickiness, order independence)."""

from __future__ import annotations

import doctest
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

import groups.consumer_assignors
from groups.consumer_assignors import CONSUMER_ASSIGNORS, assign_range, assign_uniform

TOPICS = {"t0": 7, "t1": 3, "t2": 0}


def _flat(target: dict[str, dict[str, list[int]]]) -> list[tuple[str, int]]:
    return sorted((t, p) for ps in target.values() for t, pl in ps.items() for p in pl)


def _count(target: dict[str, dict[str, list[int]]], member: str) -> int:
    return sum(len(ps) for ps in target[member].values())


members_st = st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1,
                      max_size=8, unique=True)
subs_st = st.lists(st.sampled_from(sorted(TOPICS)), min_size=0, max_size=3, unique=True)


class DocExampleTests(SynchronousTestCase):
    def test_docstring_examples(self) -> None:
        """The worked examples in the module are what the assignors compute."""
        failures, tried = doctest.testmod(groups.consumer_assignors)
        self.assertEqual(failures, 0)
        self.assertGreaterEqual(tried, 4)


class PropertyTests(SynchronousTestCase):
    @settings(max_examples=200, deadline=None)
    @given(data=st.data(), members=members_st, name=st.sampled_from(sorted(CONSUMER_ASSIGNORS)))
    def test_every_subscribed_partition_once_and_only_to_subscribers(
            self, data: st.DataObject, members: list[str], name: str) -> None:
        """Every partition of a topic someone subscribes to goes to exactly one member that
        subscribes to it; every member has an entry."""
        subs = {m: data.draw(subs_st) for m in members}
        target = CONSUMER_ASSIGNORS[name](subs, TOPICS, {})
        self.assertEqual(sorted(target), sorted(members))
        wanted = sorted({(t, p) for s in subs.values() for t in s for p in range(TOPICS[t])})
        self.assertEqual(_flat(target), wanted)
        for member, topics in target.items():
            self.assertTrue(set(topics) <= set(subs[member]))

    @settings(max_examples=200, deadline=None)
    @given(members=members_st, data=st.data())
    def test_uniform_is_balanced_and_sticky_with_one_subscription(
            self, members: list[str], data: st.DataObject) -> None:
        """With identical subscriptions uniform's counts differ by at most one, and each
        member keeps min(what it held, its final count) of its previous partitions: only
        partitions that had to move moved."""
        subs = {m: ["t0", "t1"] for m in members}
        everyone = [(t, p) for t in ("t0", "t1") for p in range(TOPICS[t])]
        holders = data.draw(st.lists(st.sampled_from(members + ["gone"]),
                                     min_size=len(everyone), max_size=len(everyone)))
        previous: dict[str, dict[str, list[int]]] = {}
        for (t, p), holder in zip(everyone, holders, strict=True):
            previous.setdefault(holder, {}).setdefault(t, []).append(p)
        target = assign_uniform(subs, TOPICS, previous)
        counts = [_count(target, m) for m in members]
        self.assertLessEqual(max(counts) - min(counts), 1)
        for member in members:
            held = {(t, p) for t, ps in previous.get(member, {}).items() for p in ps}
            now = {(t, p) for t, ps in target[member].items() for p in ps}
            self.assertEqual(len(held & now), min(len(held), len(now)), member)

    @settings(max_examples=100, deadline=None)
    @given(data=st.data(), members=members_st, name=st.sampled_from(sorted(CONSUMER_ASSIGNORS)))
    def test_input_order_does_not_matter(self, data: st.DataObject, members: list[str],
                                         name: str) -> None:
        """Shuffling members and topics gives the same assignment."""
        subs = {m: data.draw(subs_st) for m in members}
        shuffled = list(subs.items())
        random.Random(data.draw(st.integers(0, 1000))).shuffle(shuffled)
        again = {m: list(reversed(s)) for m, s in shuffled}
        self.assertEqual(CONSUMER_ASSIGNORS[name](subs, TOPICS, {}),
                         CONSUMER_ASSIGNORS[name](again, dict(reversed(TOPICS.items())), {}))

    def test_uniform_with_different_subscriptions_balances_what_it_can(self) -> None:
        """C0 reads t0 only, C1 and C2 read t0 and t1: t1 goes to C1/C2 and t0 is
        shared so that no member could give one partition to another member with two
        fewer."""
        subs = {"c0": ["t0"], "c1": ["t0", "t1"], "c2": ["t0", "t1"]}
        target = assign_uniform(subs, {"t0": 6, "t1": 3}, {})
        self.assertEqual([_count(target, m) for m in ("c0", "c1", "c2")], [3, 3, 3])
        self.assertEqual(list(target["c0"]), ["t0"])

    def test_range_table(self) -> None:
        """Range's blocks, table-driven."""
        cases = [
            ({"a": ["t"], "b": ["t"]}, {"t": 5}, {"a": {"t": [0, 1, 2]}, "b": {"t": [3, 4]}}),
            ({"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 2},
             {"a": {"t": [0]}, "b": {"t": [1]}, "c": {}}),
            ({"a": [], "b": ["t"]}, {"t": 2}, {"a": {}, "b": {"t": [0, 1]}}),
            ({"a": ["x"]}, {"t": 2}, {"a": {}}),
        ]
        for subs, topics, expected in cases:
            self.assertEqual(assign_range(subs, topics), expected, subs)
