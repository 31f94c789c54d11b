"""docs/performance.md: every table says the command that produced it (issue 32, point 4).

The rule, kept simple so that it holds while sections are added: each table's section (from
its heading to the next heading; the block ``bench/run_all`` writes between the bench
markers counts as one section) shows at least one command, in a ``code span``, an indented
or fenced code line, or a table row: a ``python -m ...``, ``python bench/...``,
``bench/run_all``, ``pytest``, ``skerry ...`` or ``py-spy`` command line, optionally after
environment settings and a ``.venv/bin/`` prefix. A table whose figures came from no command
(a hand calculation, a history copied from an older section) says where its figures come
from in a ``Command:`` line all the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.support import ROOT

DOC = ROOT / "docs" / "performance.md"

COMMAND = re.compile(
    r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\.venv/bin/|\./)?"
    r"(?:python3?\s+(?:-m\s+\w|bench/)|bench/run_all\b|pytest\b|skerry\s+\w|py-spy\s+\w)")
"""The start of a command line (after any ``VAR=value`` settings)."""

_SPAN = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Table:
    line: int
    """1-based line of the table's header row."""
    heading: str
    """The heading of its section."""
    has_command: bool


def _is_table_start(lines: list[str], i: int) -> bool:
    return (lines[i].startswith("|") and i + 1 < len(lines)
            and re.fullmatch(r"\|[\s:|-]+\|", lines[i + 1].strip()) is not None)


def _commands_in(text: str) -> list[str]:
    found = []
    if "Command:" in text or "Commands:" in text:
        found.append("Command:")
    for span in _SPAN.findall(text):
        span = " ".join(span.split())  # a span may wrap onto the next line
        if COMMAND.match(span):
            found.append(span)
    for line in text.split("\n"):
        if (line.startswith("    ") or line.startswith("\t")) and COMMAND.match(line.strip()):
            found.append(line.strip())
    in_fence = False
    for line in text.split("\n"):
        if line.startswith("```"):
            in_fence = not in_fence
        elif in_fence and COMMAND.match(line.strip().removeprefix("$ ")):
            found.append(line.strip())
    return found


def tables(text: str) -> list[Table]:
    """Every table of ``text`` and whether its section shows a command."""
    lines = text.split("\n")
    # section boundaries: headings, except inside the generated bench block
    starts: list[tuple[int, str]] = []
    in_block = False
    for i, line in enumerate(lines):
        if line.startswith("<!-- bench:begin"):
            in_block = True
            starts.append((i, "the block bench/run_all writes"))
        elif line.startswith("<!-- bench:end"):
            in_block = False
            starts.append((i + 1, "after the bench block"))
        elif line.startswith("#") and not in_block:
            starts.append((i, line.lstrip("#").strip()))
    starts.append((len(lines), ""))
    out = []
    for (begin, heading), (end, _next) in zip(starts, starts[1:], strict=False):
        section = "\n".join(lines[begin:end])
        commanded = bool(_commands_in(section))
        out.extend(Table(i + 1, heading, commanded)
                   for i in range(begin, end) if _is_table_start(lines, i))
    return out


def test_every_table_of_the_performance_page_says_its_command() -> None:
    found = tables(DOC.read_text(encoding="utf-8"))
    assert len(found) > 30  # the scan sees the page's tables
    missing = [f"line {t.line} ({t.heading})" for t in found if not t.has_command]
    assert missing == [], "tables without the command that produced them: " + \
        "; ".join(missing)


def test_the_rule_fails_on_a_table_without_a_command() -> None:
    """Planted: a section whose table has no command is reported; a command in a code
    span, an indented line or a row, or a ``Command:`` line, satisfies it; prose naming a
    bench module (`bench/report.py`) does not."""
    page = "\n".join([
        "# Performance",
        "## A: in a code span",
        "Run `python -m bench.v1 --duration 3` in each tree.",
        "| a | b |", "|---|---|", "| 1 | 2 |",
        "## B: no command, only a file named",
        "The figures come from `bench/report.py`'s table.",
        "| a | b |", "|---|---|", "| 1 | 2 |",
        "## C: indented",
        "    SKERRY_NO_EXTENSIONS=1 .venv/bin/python -m bench.v1_cpu",
        "| a | b |", "|---|---|", "| 1 | 2 |",
        "## D: in a row",
        "| measure | x |", "|---|---|", "| `python -m bench.iggy --seconds 3` | 1 |",
        "## E: said",
        "Command: none; computed by hand from the table above.",
        "| a | b |", "|---|---|", "| 1 | 2 |",
        "<!-- bench:begin -->",
        "## F: generated", "Command: `bench/run_all --repeat 3`",
        "| a | b |", "|---|---|", "| 1 | 2 |",
        "### F's subsection, same run",
        "| a | b |", "|---|---|", "| 1 | 2 |",
        "<!-- bench:end -->",
        "## G: after the block",
        "| a | b |", "|---|---|", "| 1 | 2 |",
    ])
    verdicts = {t.heading: t.has_command for t in tables(page)}
    assert verdicts == {
        "A: in a code span": True,
        "B: no command, only a file named": False,
        "C: indented": True,
        "D: in a row": True,
        "E: said": True,
        "the block bench/run_all writes": True,
        "G: after the block": False,
    }
