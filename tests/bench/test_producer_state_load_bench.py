"""The CI-sized run of ``bench/producer_state_load.py``: a snapshot at the log end gives a
new leader the same producers as a replay of the whole log, far faster (the figures behind
docs/cluster.md's "Idempotent producers and the internal topic"), and a follower that kept
the state of what it copied replays, once leader, only the records after its last roll."""

from __future__ import annotations

from bench.producer_state_load import run


def test_a_snapshot_saves_the_replay() -> None:
    """50,000 records of 7 producers: both ways find all 7 (the bench asserts it); the
    snapshot is small and loads at least 10 times faster than the replay."""
    result = run(50_000, 7, quiet=True)
    assert 0 < result["snapshot_bytes"] < 10_000, result
    assert result["snapshot_s"] * 10 < result["replay_s"], result


def test_a_promoted_follower_replays_only_after_its_last_roll() -> None:
    """50,000 records over 1 MiB segments copied to a follower: its snapshot is at its last
    roll, and its first state as leader replays only the records after it."""
    result = run(50_000, 7, quiet=True, segment_bytes=1 << 20)
    assert result["segments"] >= 6, result
    assert 40_000 < result["snapshot_offset"] <= 50_000, result
    assert result["failover_replayed"] == 50_000 - result["snapshot_offset"], result
