"""Tests for groups.classic_store: the kafka-groups.json round trip, restore + start, and
the refusal of damaged documents."""

from __future__ import annotations

import copy
import json
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from groups.classic import ClassicGroupCoordinator
from groups.classic_effects import ScheduleJoin, ScheduleSession
from groups.classic_state import ClassicGroupState
from groups.classic_store import classic_groups_from_json, classic_groups_to_json
from groups.kafka_errors import RebalanceInProgress
from tests.groups.classic_helpers import Driver


def _saved(driver: Driver) -> Any:
    """The document as the shell would write and read it back."""
    return json.loads(json.dumps(classic_groups_to_json(driver.coordinator.groups())))


class ClassicStoreTests(SynchronousTestCase):
    def test_round_trip(self) -> None:
        """Generation, state, protocol type and name, leader, members in join order with
        their timeouts, protocols and assignment bytes survive the document."""
        d = Driver()
        d.round(2)
        d.join(group="h")
        d.leave("c-3", group="h")
        doc = _saved(d)
        restored = classic_groups_from_json(doc)
        self.assertEqual(classic_groups_to_json(restored), doc)
        g = restored[0]
        self.assertEqual((g.group_id, g.state, g.generation, g.protocol, g.leader),
                         ("g", ClassicGroupState.STABLE, 2, "range", "c-1"))
        self.assertEqual([(m.member_id, m.assignment) for m in g.members.values()],
                         [("c-1", b"c-1"), ("c-2", b"c-2")])
        self.assertEqual((restored[1].state, restored[1].generation),
                         (ClassicGroupState.EMPTY, 2))
        self.assertEqual(classic_groups_from_json(None), [])

    def test_restored_stable_group_carries_on(self) -> None:
        """After a restart a Stable group's members keep their generation: start() arms a
        full session timeout for each, and heartbeats are served."""
        d = Driver()
        _, generation = d.round(2)
        fresh = ClassicGroupCoordinator()
        fresh.restore(classic_groups_from_json(_saved(d)))
        effects = fresh.start(100).effects
        self.assertEqual(sorted((e.member_id, e.deadline_ms) for e in effects
                                if isinstance(e, ScheduleSession)),
                         [("c-1", 10_100), ("c-2", 10_100)])
        self.assertIsNone(fresh.heartbeat("g", generation, "c-2", 200).reply)

    def test_restored_mid_rebalance_group_rebalances(self) -> None:
        """A group saved awaiting sync starts a new rebalance on start(): heartbeats ask the
        members to rejoin and the join barrier's timer is armed."""
        d = Driver()
        d.join()
        doc = _saved(d)
        self.assertEqual(doc["groups"][0]["state"], "AwaitingSync")
        fresh = ClassicGroupCoordinator()
        fresh.restore(classic_groups_from_json(doc))
        effects = fresh.start(0).effects
        self.assertTrue(any(isinstance(e, ScheduleJoin) for e in effects))
        self.assertIsInstance(fresh.heartbeat("g", 1, "c-1", 0).reply, RebalanceInProgress)
        with self.assertRaises(ValueError):
            fresh.restore([])

    def test_damaged_documents_are_refused(self) -> None:
        """Each damage raises ValueError naming the place."""
        d = Driver()
        d.round(2)
        good = _saved(d)
        damages = {
            "version": lambda doc: doc.update(version=2),
            "groups[0].state": lambda doc: doc["groups"][0].update(state="Dead"),
            "groups[0].leader": lambda doc: doc["groups"][0].update(leader="zz"),
            "groups[0].members[1].assignment":
                lambda doc: doc["groups"][0]["members"][1].update(assignment="!!"),
            "groups[0].members[0].protocols":
                lambda doc: doc["groups"][0]["members"][0].update(protocols=[]),
            "groups[0].protocol": lambda doc: doc["groups"][0].update(protocol=None),
            "groups[0].generation": lambda doc: doc["groups"][0].update(generation=-1),
            "groups[0]: unknown field": lambda doc: doc["groups"][0].update(extra=1),
            "groups[0].members[1].member_id": lambda doc: doc["groups"][0]["members"][1]
                .update(member_id="c-1"),
            "groups[0].group_id": lambda doc: doc["groups"][0].update(group_id="a b"),
        }
        for place, damage in damages.items():
            doc = copy.deepcopy(good)
            damage(doc)
            with self.assertRaises(ValueError) as caught:
                classic_groups_from_json(doc)
            self.assertIn(place if place != "version" else "version", str(caught.exception),
                          place)
