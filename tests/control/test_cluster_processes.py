"""The CI-sized run of ``bench/cluster_scenario.py``: one real etcd member and three real
broker processes on loopback with ``cluster.etcd``, RF 3, min ISR 2, pipelined acks=all;
kill -9 of the leader. Skipped with a one-line reason when etcd cannot be installed
(``tests.control.real_etcd``)."""

from __future__ import annotations

from pathlib import Path

from bench.cluster_scenario import run_target


def test_kill9_of_the_leader_fails_over_within_ttl(tmp_path: Path) -> None:
    """A new leader acknowledges within TTL + 1 s of the kill; every acknowledged message
    is read back once, in order, at its offset; the three logs are byte-identical."""
    result = run_target("1", tmp_path, messages=3000, runs=1, etcd_members=1, ttl_ms=2000)
    assert len(result.failovers) == 1 and result.failovers[0] <= 2.0 + 1.0, result.line()
    assert result.acked <= result.log_end
    assert result.acked >= 1500, result.line()
    assert any("byte-identical" in n for n in result.notes)
    assert any("read back in order" in n for n in result.notes)


def test_unclean_election_elects_the_longer_log(tmp_path: Path) -> None:
    """Unclean election on, the leader alone in the ISR and killed, the two followers
    resumed with different log ends: the one later in list order holds more and is
    elected from the log ends reported through real etcd; nothing acknowledged is lost.
    A TTL of 10 s: the first follower stays stopped while the ISR shrinks twice, and its
    log end only counts if its lease lives."""
    result = run_target("7", tmp_path, messages=3000, etcd_members=1, ttl_ms=10000,
                        unclean=True)
    # run_target raises unless the later replica in list order (the longer log) was
    # elected: list order would have elected the other one. The log-end keys live only
    # for the moments before the election, so whether the bench's poll saw them is not
    # asserted.
    assert any("elected" in n for n in result.notes), result.line()
    assert result.acked == result.log_end, result.line()
    assert any("read back in order" in n for n in result.notes)
