"""The CI-sized run of ``bench/group_state.py``: many commits on few groups leave
``__skerry_groups`` small and quick to load, because the broker gives the topic small
segments the cleaner can reach (the bench itself checks every loaded offset is the last
committed)."""

from __future__ import annotations

from bench.group_state import run


def test_many_commits_leave_a_small_topic_that_loads_few_records() -> None:
    """300,000 commits on 100 groups in one partition: a coordinator reads at most the
    latest record of each key plus two segments' worth (the dirty and the active one), not
    every commit, and the topic on disk is a few segments, not 300,000 records."""
    result = run(300_000, 100, 1, quiet=True)
    assert result["records_read"] < 100_000, result
    assert result["bytes"] < 3 * (4 << 20) + 1_000_000, result


def test_the_stores_default_segments_would_keep_every_commit() -> None:
    """The same load with the store's 64 MiB default segments: nothing is cleaned and a
    coordinator reads every commit (why the topic has its own segment size)."""
    result = run(300_000, 100, 1, segment_bytes=64 << 20, quiet=True)
    assert result["records_read"] == 300_100, result
