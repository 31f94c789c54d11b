"""Tests for groups.store: the groups.json and offsets.json documents."""

from __future__ import annotations

import copy
import json
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from groups.coordinator import GroupCoordinator
from groups.store import groups_from_json, groups_to_json, offsets_from_json, offsets_to_json


def _partitions(topic: str) -> int:
    return {"orders": 3, "payments": 2}[topic]


def _populated() -> GroupCoordinator:
    coordinator = GroupCoordinator(_partitions)
    coordinator.join("analytics", "orders", "c2", 0, assignor="range", session_timeout_ms=4000)
    coordinator.join("analytics", "orders", "c1", 0)
    coordinator.join("billing", "payments", "b1", 0)
    coordinator.leave("billing", "payments", "b1", 1)
    coordinator.commit("analytics", "orders", "c1", 2, 1, 17, 0)
    coordinator.admin_commit("billing", "payments", 0, 5)
    return coordinator


GOOD_GROUPS: dict[str, Any] = {
    "version": 1,
    "groups": [{"group": "g", "topic": "t", "generation": 3, "assignor": "range",
                "partitions": 3,
                "members": [{"member_id": "c1", "session_timeout_ms": 1000, "assigned": [0, 1]},
                            {"member_id": "c2", "session_timeout_ms": 1000, "assigned": [2]}]}],
}
GOOD_OFFSETS: dict[str, Any] = {
    "version": 1,
    "offsets": [{"group": "g", "topic": "t", "committed": {"0": 5, "2": 3}}],
}


def _broken(doc: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    """A copy of ``doc`` with the element at ``path`` replaced (or deleted for ...)."""
    doc = copy.deepcopy(doc)
    target = doc
    for step in path[:-1]:
        target = target[step]
    if value is ...:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


class RoundTripTests(SynchronousTestCase):
    def test_round_trip(self) -> None:
        """Writing the coordinator's state and reading it back restores every group
        (generation, assignor, partition count, members with their session timeouts,
        assignment, empty groups too) and every committed offset, through real JSON text."""
        coordinator = _populated()
        groups_doc = json.loads(json.dumps(groups_to_json(coordinator.groups())))
        offsets_doc = json.loads(json.dumps(offsets_to_json(coordinator.committed())))
        restored = GroupCoordinator(_partitions)
        restored.restore(groups_from_json(groups_doc), offsets_from_json(offsets_doc))

        def view(c: GroupCoordinator) -> Any:
            return [(g.group, g.topic, g.state, g.generation, g.assignor, g.partitions,
                     {m: x.session_timeout_ms for m, x in g.members.items()}, g.assignment)
                    for g in c.groups()], c.committed()

        self.assertEqual(view(restored), view(coordinator))
        self.assertEqual(view(restored)[0][0][6], {"c1": 10_000, "c2": 4000})

    def test_documented_shapes(self) -> None:
        """The documents have exactly the shapes the module docstring shows."""
        coordinator = _populated()
        self.assertEqual(groups_to_json(coordinator.groups()), {
            "version": 1,
            "groups": [
                {"group": "analytics", "topic": "orders", "generation": 2, "assignor": "range",
                 "partitions": 3,
                 "members": [
                     {"member_id": "c1", "session_timeout_ms": 10_000, "assigned": [0, 1]},
                     {"member_id": "c2", "session_timeout_ms": 4000, "assigned": [2]},
                 ]},
                {"group": "billing", "topic": "payments", "generation": 2,
                 "assignor": "round_robin", "partitions": 2, "members": []},
            ],
        })
        self.assertEqual(offsets_to_json(coordinator.committed()), {
            "version": 1,
            "offsets": [
                {"group": "analytics", "topic": "orders", "committed": {"1": 17}},
                {"group": "billing", "topic": "payments", "committed": {"0": 5}},
            ],
        })

    def test_no_file_is_no_state(self) -> None:
        """A missing file (None) means no groups and no offsets."""
        self.assertEqual((groups_from_json(None), offsets_from_json(None)), ([], {}))

    def test_good_documents(self) -> None:
        """The sample documents load."""
        [group] = groups_from_json(GOOD_GROUPS)
        self.assertEqual((group.generation, group.assignment), (3, {"c1": [0, 1], "c2": [2]}))
        self.assertEqual(offsets_from_json(GOOD_OFFSETS), {("g", "t"): {0: 5, 2: 3}})


class MalformedTests(SynchronousTestCase):
    def test_malformed_groups(self) -> None:
        """Each defect in groups.json raises ValueError naming the file, the place and the
        problem."""
        member = ["groups", 0, "members", 0]
        cases = [
            ([], "expected a JSON object at the top level"),
            (_broken(GOOD_GROUPS, ["version"], 2), "version is 2"),
            (_broken(GOOD_GROUPS, ["groups"], {}), "groups must be a list"),
            (_broken(GOOD_GROUPS, ["extra"], 1), "unknown field extra"),
            (_broken(GOOD_GROUPS, ["groups", 0], "g"), "groups[0]: expected an object"),
            (_broken(GOOD_GROUPS, ["groups", 0, "topic"], ...), "groups[0]: missing topic"),
            (_broken(GOOD_GROUPS, ["groups", 0, "group"], "a b"), "groups[0].group: 'a b'"),
            (_broken(GOOD_GROUPS, ["groups", 0, "group"], ".."), "groups[0].group: '..'"),
            (_broken(GOOD_GROUPS, ["groups", 0, "generation"], -1), "generation: expected"),
            (_broken(GOOD_GROUPS, ["groups", 0, "generation"], 0),
             "a group with members has generation >= 1"),
            (_broken(GOOD_GROUPS, ["groups", 0, "generation"], True), "got True"),
            (_broken(GOOD_GROUPS, ["groups", 0, "assignor"], "fair"), "unknown assignor 'fair'"),
            (_broken(GOOD_GROUPS, ["groups", 0, "members"], {}), "members: expected a list"),
            (_broken(GOOD_GROUPS, member + ["session_timeout_ms"], 0),
             "members[0].session_timeout_ms: expected an integer >= 1"),
            (_broken(GOOD_GROUPS, member + ["assigned"], [0, 3]),
             "partition 3 is not below the group's partition count 3"),
            (_broken(GOOD_GROUPS, member + ["assigned"], [0, 1, 2]),
             "members[1].assigned: partition 2 is also assigned to c1"),
            (_broken(GOOD_GROUPS, member + ["assigned"], [0]),
             "partition 1 is assigned to no member"),
            (_broken(GOOD_GROUPS, member + ["assigned"], "0"), "expected a list of partitions"),
            (_broken(GOOD_GROUPS, member + ["member_id"], "c2"), "c2 appears twice"),
            ({"version": 1, "groups": [GOOD_GROUPS["groups"][0]] * 2},
             "groups[1]: group g on topic t appears twice"),
        ]
        for doc, message in cases:
            with self.assertRaises(ValueError) as caught:
                groups_from_json(doc, "/data/groups.json")
            self.assertIn("/data/groups.json", str(caught.exception))
            self.assertIn(message, str(caught.exception))

    def test_malformed_offsets(self) -> None:
        """Each defect in offsets.json raises ValueError naming the file, the place and the
        problem."""
        cases = [
            ("nope", "expected a JSON object at the top level"),
            (_broken(GOOD_OFFSETS, ["version"], ...), "version is None"),
            (_broken(GOOD_OFFSETS, ["offsets", 0, "committed"], [5]), "expected an object"),
            (_broken(GOOD_OFFSETS, ["offsets", 0, "committed", "x"], 1), "key 'x' is not"),
            (_broken(GOOD_OFFSETS, ["offsets", 0, "committed", "01"], 1), "key '01' is not"),
            (_broken(GOOD_OFFSETS, ["offsets", 0, "committed", "-1"], 1), "key '-1' is not"),
            (_broken(GOOD_OFFSETS, ["offsets", 0, "committed", "1"], -4), "got -4"),
            (_broken(GOOD_OFFSETS, ["offsets", 0, "committed", "1"], 1.5), "got 1.5"),
            (_broken(GOOD_OFFSETS, ["offsets", 0, "group"], ""), "offsets[0].group: ''"),
            ({"version": 1, "offsets": [GOOD_OFFSETS["offsets"][0]] * 2}, "appears twice"),
        ]
        for doc, message in cases:
            with self.assertRaises(ValueError) as caught:
                offsets_from_json(doc, "/data/offsets.json")
            self.assertIn("/data/offsets.json", str(caught.exception))
            self.assertIn(message, str(caught.exception))
