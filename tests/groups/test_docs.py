"""Tests that docs/groups.md tells the truth about the code: the state table and the
assignor examples."""

from __future__ import annotations

import re
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from groups.assignors import ASSIGNORS, assign_sticky
from groups.state import VALID_PREVIOUS_STATES, GroupState

DOC = Path(__file__).resolve().parents[2] / "docs" / "groups.md"


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/groups.md has no section {title!r}"
    return match.group(1)


def _parse_assignment(text: str) -> dict[str, list[int]]:
    return {member: [int(p) for p in parts.split()]
            for member, parts in re.findall(r"(\w+): \[([\d ]*)\]", text)}


class StateTableTests(SynchronousTestCase):
    def test_state_table_matches_the_code(self) -> None:
        """The "States" table lists every state of groups/state.py once, and its "entered
        from" column is exactly the code's table of legal previous states."""
        rows = [line for line in _section("States").splitlines() if line.startswith("| `")]
        documented: dict[GroupState, frozenset[GroupState]] = {}
        for row in rows:
            cells = [cell.strip() for cell in row.strip("|").split(" | ")]
            state = GroupState(cells[0].strip("`"))
            self.assertNotIn(state, documented, f"{state.value} documented twice")
            documented[state] = frozenset(GroupState(name)
                                          for name in re.findall(r"`(\w+)`", cells[1]))
        self.assertEqual(documented, dict(VALID_PREVIOUS_STATES))


class AssignorExampleTests(SynchronousTestCase):
    def test_round_robin_and_range_examples(self) -> None:
        """Each "members ..., N partitions -> ..." example under round_robin and range is
        what the assignor computes."""
        section = _section("Assignors")
        checked = 0
        for name in ("round_robin", "range"):
            block = section.split(f"**`{name}`**", 1)[1].split("```")[1]
            for line in block.strip().splitlines():
                inputs, expected = line.split("->")
                found = re.match(r"members ([\w ]+), (\d+) partitions", inputs.strip())
                assert found, line
                members, partitions = found.group(1).split(), int(found.group(2))
                self.assertEqual(ASSIGNORS[name](members, partitions, {}),
                                 _parse_assignment(expected), line)
                checked += 1
        self.assertEqual(checked, 4)

    def test_sticky_example(self) -> None:
        """The sticky example (c2 joins, then c1 leaves) is what the assignor computes."""
        block = _section("Assignors").split("**`sticky`**", 1)[1].split("```")[1]
        results = [_parse_assignment(line.split("->")[1]) for line in block.splitlines()
                   if "->" in line]
        joined = assign_sticky(["c0", "c1", "c2"], 6, {"c0": [0, 1, 2], "c1": [3, 4, 5]})
        left = assign_sticky(["c0", "c2"], 6, joined)
        self.assertEqual(results, [joined, left])
