"""Tests that the "Consumer groups (KIP-848)" section of docs/groups.md tells the truth: its
group state table, its reconciliation table, its refusal codes, its assignor example and
every row of its "What happens when" table, played against the coordinator."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

import groups.consumer_errors as errors
from groups.consumer_assignors import assign_uniform
from groups.consumer_effects import HeartbeatRequest
from groups.consumer_errors import FencedMemberEpoch
from groups.consumer_state import (
    CONSUMER_GROUP_VALID_PREVIOUS_STATES,
    RECONCILIATION_RULES,
    ConsumerGroupState,
)
from tests.groups.consumer_helpers import (
    INTERVAL_MS,
    REBALANCE_MS,
    SESSION_MS,
    Consumer,
    Driver,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "groups.md"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"^## Consumer groups \(KIP-848\)\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, "docs/groups.md has no consumer groups section"
    return match.group(1)


def _table(title: str) -> list[list[str]]:
    """The rows of the first table under ``### title``, as stripped cells."""
    part = _section().split(f"### {title}\n", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in part.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in row.strip().strip("|").split(" | ")] for row in rows[2:]
            if not row.startswith("| ---")]


class TableTests(SynchronousTestCase):
    def test_group_state_table_matches_the_code(self) -> None:
        """Each state once; "entered from" is exactly the code's table."""
        documented = {}
        for cells in _table("Group states"):
            state = ConsumerGroupState(cells[0].strip("`"))
            self.assertNotIn(state, documented)
            documented[state] = frozenset(ConsumerGroupState(name)
                                          for name in re.findall(r"`(\w+)`", cells[1]))
        self.assertEqual(documented, dict(CONSUMER_GROUP_VALID_PREVIOUS_STATES))

    def test_reconciliation_table_is_the_code_table(self) -> None:
        """The member-state table is RECONCILIATION_RULES, row for row, in order."""
        rows = [(cells[0].strip("`"), cells[1], cells[2].strip("`"), cells[3])
                for cells in _table("Member states and reconciliation")]
        self.assertEqual(rows, [(r.state.value, r.condition, r.next_state.value, r.epoch)
                                for r in RECONCILIATION_RULES])

    def test_refusal_codes_match_the_docstrings(self) -> None:
        """Each refusal row names the class and the "Kafka: N NAME" of its docstring."""
        rows = [cells for cells in _table("The heartbeat")
                if len(cells) == 3 and cells[0] != "case"]
        self.assertEqual(len(rows), 11)
        for _, name, code in rows:
            cls = getattr(errors, name.strip("`"))
            doc = " ".join((cls.__doc__ or "").split())
            self.assertIn(f"Kafka: {code}", doc, name)

    def test_uniform_example(self) -> None:
        """The uniform example (c2 joins, then c1 dies) is what the assignor computes."""
        block = _section().split("**`uniform`**", 1)[1].split("```")[1]
        shown = [{m: {"t": [int(p) for p in ps.split()]}
                  for m, ps in re.findall(r"(c\d): \[([\d ]*)\]", line.split("->")[1])}
                 for line in block.strip().splitlines()]
        subs3 = {m: ["t"] for m in ("c0", "c1", "c2")}
        joined = assign_uniform(subs3, {"t": 6}, {"c0": {"t": [0, 1, 2]},
                                                   "c1": {"t": [3, 4, 5]}})
        died = assign_uniform({"c0": ["t"], "c2": ["t"]}, {"t": 6}, joined)
        self.assertEqual(shown, [joined, died])


def _stable_pair() -> tuple[Driver, Consumer, Consumer]:
    d = Driver()
    c0, c1 = Consumer(d, instance_id="s0"), Consumer(d)
    for _ in range(3):
        c0.heartbeat()
        c1.heartbeat()
    group = d.coordinator.group("g")
    assert group is not None and group.state is ConsumerGroupState.STABLE
    return d, c0, c1


def _heartbeat(d: Driver, c0: Consumer, c1: Consumer) -> None:
    reply = c0.heartbeat()
    assert reply.assignment is None


def _third_joins(d: Driver, c0: Consumer, c1: Consumer) -> None:
    c2 = Consumer(d)
    c2.heartbeat()
    assert c2.partitions() == []


def _leave(d: Driver, c0: Consumer, c1: Consumer) -> None:
    c1.leave()


def _session(d: Driver, c0: Consumer, c1: Consumer) -> None:
    for _ in range(SESSION_MS // INTERVAL_MS - 1):
        d.advance(INTERVAL_MS)
        d.heartbeat(HeartbeatRequest("g", c0.member_id, c0.epoch, instance_id="s0"))
    d.advance(INTERVAL_MS)
    assert d.fired == ["consumer-session:1:g:" + c1.member_id]


def _no_revoke(d: Driver, c0: Consumer, c1: Consumer) -> Callable[[], None]:
    Consumer(d).heartbeat()
    c0.heartbeat(revoke=False, full=True)

    def event() -> None:
        d.advance(REBALANCE_MS)
        assert d.fired == ["consumer-rebalance:1:g:" + c0.member_id]
    return event


def _static_leave(d: Driver, c0: Consumer, c1: Consumer) -> None:
    c0.leave(static=True)


def _static_restart(d: Driver, c0: Consumer, c1: Consumer) -> Callable[[], None]:
    mine = c0.partitions()
    c0.leave(static=True)

    def event() -> None:
        c0.restart()
        c0.heartbeat()
        assert c0.partitions() == mine
    return event


def _resubscribe(d: Driver, c0: Consumer, c1: Consumer) -> None:
    d.heartbeat(HeartbeatRequest("g", c1.member_id, c1.epoch, topic_names=()))


def _grow(d: Driver, c0: Consumer, c1: Consumer) -> None:
    d.set_topic("t", 8)
    d.metadata_changed()


def _unsubscribed_topic(d: Driver, c0: Consumer, c1: Consumer) -> None:
    d.set_topic("other", 4)
    assert d.metadata_changed() == []


def _older_epoch(d: Driver, c0: Consumer, c1: Consumer) -> None:
    try:
        d.heartbeat(HeartbeatRequest("g", c1.member_id, c1.epoch - 1))
    except FencedMemberEpoch:
        return
    raise AssertionError("an older epoch was accepted")


SCENARIOS: dict[str, Callable[[Driver, Consumer, Consumer], object]] = {
    "a heartbeat, nothing changed": _heartbeat,
    "a third member joins": _third_joins,
    "a member leaves (epoch -1)": _leave,
    "a member's session times out": _session,
    "a member does not revoke within its rebalance timeout": _no_revoke,
    "a static member leaves (epoch -2)": _static_leave,
    "a static member restarts (new member id, same instance id)": _static_restart,
    "a member changes its subscription": _resubscribe,
    "a subscribed topic gains partitions": _grow,
    "a topic nobody subscribes to is created": _unsubscribed_topic,
    "a heartbeat with an older member epoch": _older_epoch,
}
"""Each row's event, played from a Stable pair. A scenario that returns a callable has
prepared the ground; the callable is the event itself."""


class WhatHappensWhenTests(SynchronousTestCase):
    def test_every_row(self) -> None:
        """Each row's "group epoch" change and "state after" are what the coordinator does
        for that event; every row has a scenario and every scenario a row."""
        rows = _table("What happens when")
        self.assertEqual(sorted(cells[0] for cells in rows), sorted(SCENARIOS))
        for event, epoch_change, state, _ in rows:
            d, c0, c1 = _stable_pair()
            group = d.coordinator.group("g")
            assert group is not None
            before = group.group_epoch
            prepared = SCENARIOS[event](d, c0, c1)
            if callable(prepared):
                before = group.group_epoch
                prepared()
            self.assertEqual(f"+{group.group_epoch - before}", epoch_change, event)
            self.assertEqual(group.state.value, state.strip("`"), event)
