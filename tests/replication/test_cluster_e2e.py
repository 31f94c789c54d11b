"""Three real broker processes on loopback (separate data dirs, free ports), RF=3, min ISR 2,
driven over TCP by ``bench/replication_scenario.py``: the CI-sized runs of its scenarios.
Each scenario raises on any check that fails; the tests also pin the facts it reports."""

from __future__ import annotations

import re
from pathlib import Path

from bench.replication_scenario import run_follower_crash, run_leader_crash, run_steady


def test_steady_load_replicates_byte_for_byte(tmp_path: Path) -> None:
    """100,000 random binary values (enc=b64) produced with acks=all are all acknowledged,
    and both followers' logs are byte-identical to the leader's up to hw."""
    result = run_steady(tmp_path, 100_000)
    assert result.acked == 100_000 and result.log_end == 100_000
    assert result.timeouts == result.unanswered == result.not_leader == 0
    assert sum("identical" in note for note in result.notes) == 2


def test_follower_killed_and_restarted(tmp_path: Path) -> None:
    """kill -9 of a follower during the load: producing continues (the ISR shrinks to two
    after the lag timeout), the follower restarts, catches up, rejoins the ISR and ends
    byte-identical; every acknowledged message is on the leader once, in order."""
    result = run_follower_crash(tmp_path, 10_000)
    assert result.acked + result.timeouts == 10_000 and result.unanswered == 0
    assert result.acked >= 9_000
    assert any(re.search(r"ISR while it was down \[0, 1\], then \[0, 1, 2\]", n)
               for n in result.notes), result.notes
    assert sum("identical" in note for note in result.notes) == 2


def test_leader_killed_follower_promoted(tmp_path: Path) -> None:
    """kill -9 of the leader with an unreplicated window in flight, then a promotion: every
    message acknowledged with acks=all is on the new leader exactly once and in order; the
    old leader restarts as a follower, truncates exactly the unacknowledged tail and ends
    byte-identical."""
    result = run_leader_crash(tmp_path, 10_000)
    # The window in flight when the leader died was never acknowledged.
    assert result.unanswered + result.timeouts == 500 and result.acked == 9_500
    facts = result.facts
    # The old leader held the window (offsets up to 5500); the promoted follower's log
    # ended before it (at 5001: the acks=1 message sent just before carried by the frozen
    # followers' pending fetch; 5000 if no fetch was pending). The old leader cut exactly
    # the difference.
    assert facts["old_log_end"] == 5_501
    start = facts["promoted_log_end"]
    assert 5_000 <= start <= 5_001, result.notes
    assert facts["truncated"] == [(start, 5_500)], result.notes
    assert facts["epochs"] == f"[0:0 1:{start}]"
    assert sum("identical" in note for note in result.notes) == 2
