"""The CI-sized run of ``bench/group_commit_cpu.py``: a commit's CPU does not grow with
the number of groups the broker holds (the group log builds the records of what changed,
not the whole state's)."""

from __future__ import annotations

from bench.group_commit_cpu import run


def test_a_commit_among_many_groups_costs_what_one_among_few_does() -> None:
    """One commit per reactor turn, each answered once ``__skerry_groups`` holds it: with
    2,000 groups of 10 committed partitions (20,000 records) it costs about what it costs
    with 5 groups, where a whole-state write costs about 50 times more (before the
    change: 0.25 against 13.6 ms)."""
    few = run(5, 10, 40)
    many = run(2_000, 10, 40)
    assert many["records"] == 20_000, many
    assert many["cpu_ms_per_commit"] < 3 * few["cpu_ms_per_commit"] + 1.0, (few, many)
