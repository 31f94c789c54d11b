"""Tests for groups.consumer_state and groups.consumer_group: the group transition table,
the single-owner rule of ConsumerGroup, each row of RECONCILIATION_RULES driven through
``reconcile``, and the RE2/J regex checks."""

from __future__ import annotations

import uuid

from twisted.trial.unittest import SynchronousTestCase

from groups.consumer_errors import InvalidRegularExpression
from groups.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    compile_subscription_regex,
    reconcile,
)
from groups.consumer_state import (
    CONSUMER_GROUP_VALID_PREVIOUS_STATES,
    RECONCILIATION_RULES,
    ConsumerGroupState,
    IllegalStateError,
    MemberState,
    check_group_transition,
)

E, A, R, S, D = (ConsumerGroupState.EMPTY, ConsumerGroupState.ASSIGNING,
                 ConsumerGroupState.RECONCILING, ConsumerGroupState.STABLE,
                 ConsumerGroupState.DEAD)
LEGAL = {(E, A), (A, E), (R, E), (S, E), (R, A), (S, A), (A, R), (S, R), (A, S), (R, S),
         (E, D)}
"""The consumer group table, written out pair by pair."""

T = uuid.UUID(int=7)
ST, UR, UL = (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
              MemberState.UNRELEASED_PARTITIONS)


class GroupTableTests(SynchronousTestCase):
    def test_table_is_exactly_the_legal_pairs(self) -> None:
        """Every pair of states is legal exactly when listed (staying put always is)."""
        for current in ConsumerGroupState:
            for target in ConsumerGroupState:
                legal = current is target or (current, target) in LEGAL
                self.assertEqual(current in CONSUMER_GROUP_VALID_PREVIOUS_STATES[target]
                                 or current is target, legal, (current, target))
                if legal:
                    check_group_transition("g", current, target)
                else:
                    with self.assertRaises(IllegalStateError):
                        check_group_transition("g", current, target)

    def test_illegal_move_leaves_the_state(self) -> None:
        """Deleting a group with members is a bug: it raises and the state stays."""
        group = ConsumerGroup("g")
        group.add(ConsumerMember("m"))
        group.bump_epoch()
        with self.assertRaises(IllegalStateError):
            group.transition_to(D)
        self.assertIs(group.state, A)


def _group(target: dict[str, set[int]], held: dict[str, tuple[set[int], set[int]]],
           *, states: dict[str, MemberState] | None = None,
           epochs: dict[str, int] | None = None) -> ConsumerGroup:
    members = []
    for member_id, (assigned, revoking) in held.items():
        members.append(ConsumerMember(
            member_id, topic_names=("t",), member_epoch=(epochs or {}).get(member_id, 1),
            state=(states or {}).get(member_id, ST),
            assigned={T: frozenset(assigned)} if assigned else {},
            revoking={T: frozenset(revoking)} if revoking else {}))
    return ConsumerGroup("g", group_epoch=2, assignment_epoch=2, members=members,
                         target={m: {T: frozenset(p)} for m, p in target.items() if p})


class ReconciliationRuleTests(SynchronousTestCase):
    def test_each_rule(self) -> None:
        """Each row of RECONCILIATION_RULES, driven through ``reconcile``: (condition,
        group before, heartbeat's owned partitions) -> (next state, member epoch, assigned,
        revoking) of member ``a``."""
        cases = {
            "member epoch = assignment epoch": (
                _group({"a": {0}}, {"a": ({0}, set())}, epochs={"a": 2}), {0},
                (ST, 2, {0}, set())),
            "target drops partitions the member owns": (
                _group({"a": {0}, "b": {1}}, {"a": ({0, 1}, set()), "b": (set(), set())}),
                {0, 1}, (UR, 1, {0}, {1})),
            "target adds partitions, all free": (
                _group({"a": {0, 1}}, {"a": ({0}, set())}), {0}, (ST, 2, {0, 1}, set())),
            "target adds partitions, some still held by another member": (
                _group({"a": {0, 1}, "b": set()}, {"a": ({0}, set()), "b": ({1}, set())}),
                {0}, (UL, 2, {0}, set())),
            "owned partitions still list a revoked one, or are not sent": (
                _group({"a": {0}, "b": {1}}, {"a": ({0}, {1}), "b": (set(), set())},
                       states={"a": UR}),
                {0, 1}, (UR, 1, {0}, {1})),
            "revocation confirmed, remaining target partitions free": (
                _group({"a": {0, 2}, "b": {1}}, {"a": ({0}, {1}), "b": (set(), set())},
                       states={"a": UR}),
                {0}, (ST, 2, {0, 2}, set())),
            "revocation confirmed, some target partitions still held": (
                _group({"a": {0, 2}, "b": {1}}, {"a": ({0}, {1}), "b": ({2}, set())},
                       states={"a": UR}),
                {0}, (UL, 2, {0}, set())),
            "every target partition free now": (
                _group({"a": {0, 1}}, {"a": ({0}, set())}, states={"a": UL},
                       epochs={"a": 2}), {0}, (ST, 2, {0, 1}, set())),
            "some target partitions still held": (
                _group({"a": {0, 1}, "b": set()}, {"a": ({0}, set()), "b": ({1}, set())},
                       states={"a": UL}, epochs={"a": 2}),
                {0}, (UL, 2, {0}, set())),
            "target moved and drops partitions the member owns": (
                _group({"a": {1}, "b": {0}}, {"a": ({0}, set()), "b": (set(), set())},
                       states={"a": UL}, epochs={"a": 1}),
                {0}, (UR, 1, set(), {0})),
        }
        self.assertEqual(sorted(cases), sorted(r.condition for r in RECONCILIATION_RULES))
        for rule in RECONCILIATION_RULES:
            group, owned, (state, epoch, assigned, revoking) = cases[rule.condition]
            member = group.members["a"]
            self.assertIs(member.state, rule.state, rule.condition)
            epoch_before = member.member_epoch
            reconcile(group, member, {T: owned}, frozenset({T}))
            self.assertIs(state, rule.next_state, rule.condition)
            self.assertEqual((member.state, member.member_epoch,
                              set(member.assigned.get(T, ())),
                              set(member.revoking.get(T, ()))),
                             (state, epoch, assigned, revoking), rule.condition)
            expected_epoch = group.assignment_epoch if rule.epoch == "assignment epoch" \
                else epoch_before
            self.assertEqual(member.member_epoch, expected_epoch, rule.condition)

    def test_owned_not_sent_means_still_owned(self) -> None:
        """A heartbeat without owned partitions never confirms a revocation."""
        group = _group({"a": {0}, "b": {1}}, {"a": ({0}, {1}), "b": (set(), set())},
                       states={"a": UR})
        reconcile(group, group.members["a"], None, frozenset({T}))
        self.assertIs(group.members["a"].state, UR)
        self.assertEqual(group.owner(T, 1), "a")


class SingleOwnerTests(SynchronousTestCase):
    def test_a_held_partition_cannot_be_given(self) -> None:
        """Giving b a partition a still holds (even only pending revocation) is a bug:
        IllegalStateError, and nothing changes."""
        group = _group({}, {"a": ({0}, {1}), "b": (set(), set())})
        for partition in (0, 1):
            with self.assertRaises(IllegalStateError):
                group.set_member_assignment(group.members["b"], {T: frozenset({partition})},
                                            {})
        self.assertEqual(group.owners(), {(T, 0): "a", (T, 1): "a"})
        self.assertEqual(group.members["b"].assigned, {})

    def test_loaded_state_with_two_owners_is_refused(self) -> None:
        """Constructing a group in which two members hold one partition raises."""
        with self.assertRaises(IllegalStateError):
            _group({}, {"a": ({0}, set()), "b": ({0}, set())})


class RegexTests(SynchronousTestCase):
    def test_re2_semantics(self) -> None:
        """Full match, ASCII classes; constructs RE2/J lacks are refused."""
        matches = [("orders-.*", "orders-eu", True), ("orders", "orders-eu", False),
                   ("o\\d", "o1", True), ("o\\d", "o\u0661", False), ("a|b", "b", True),
                   ("(?i)ORDERS", "orders", True)]
        for pattern, name, expected in matches:
            self.assertEqual(bool(compile_subscription_regex(pattern).fullmatch(name)),
                             expected, (pattern, name))
        for bad in ["(a)\\1", "a(?=b)", "(?<!a)b", "(?>a)", "a++", "(?P<x>a)(?P=x)",
                    "\\pL", "[", "(?(1)a)"]:
            with self.assertRaises(InvalidRegularExpression, msg=bad):
                compile_subscription_regex(bad)
