"""Crash matrix (fast CI version): a real broker process is SIGKILLed, or SIGSTOPped and
resumed, while clients pipeline PRODUCEs, COMMIT offsets or churn through a group; after a
restart every acknowledged message is there once, intact, in order, and every acknowledged
COMMIT and generation is still there. bench/reliability.py runs >= 200 produce trials and
>= 20 of each group scenario."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.crash_scenarios import crash_trial, group_crash_trial


@pytest.mark.parametrize("fsync,acks", [("always", "1"), ("always", "all"), ("always", "0"),
                                        ("interval", "1"), ("never", "1")])
def test_sigkill_during_produce_loses_nothing_acknowledged(tmp_path: Path, fsync: str,
                                                          acks: str) -> None:
    """SIGKILL while producing (4 KiB segments, so rolls happen): 0 acknowledged messages
    lost for every fsync policy (SIGKILL keeps the page cache), no duplicates, no
    reordering, nothing read above hw."""
    report, _ = crash_trial(tmp_path, seed=len(fsync) + len(acks), fsync=fsync, acks=acks)
    assert report.ok, report.summary()
    if acks != "0":
        assert report.acknowledged > 0


def test_sigstop_then_sigcont_loses_nothing(tmp_path: Path) -> None:
    """A broker frozen with SIGSTOP and resumed keeps serving; nothing acknowledged is lost."""
    report, _ = crash_trial(tmp_path, seed=7, how="stop")
    assert report.ok, report.summary()
    assert report.acknowledged > 0


def test_sigkill_during_retention(tmp_path: Path) -> None:
    """SIGKILL while retention deletes segments: what is still retained is intact."""
    report, _ = crash_trial(tmp_path, seed=11, retention_bytes=8192)
    assert report.ok, report.summary()


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_crash_while_committing_keeps_every_acknowledged_commit(tmp_path: Path,
                                                                 how: str) -> None:
    """SIGKILL (or SIGSTOP, SIGCONT, SIGKILL) while two members pipeline COMMITs: after a
    restart each partition's committed offset is at least its last COMMIT answered
    committed=true, and exactly that when nothing later was sent; offsets.json and
    groups.json parse; the broker restarts."""
    report = group_crash_trial(tmp_path, seed=21 if how == "kill" else 22, how=how)
    assert report.ok, (report.summary(), report.lost, report.wrong, report.bad_files)
    assert report.commits_acked > 0


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_crash_during_group_churn_loses_no_commit_or_generation(tmp_path: Path,
                                                                 how: str) -> None:
    """The same while other members JOIN, SYNC, HEARTBEAT and LEAVE all the time (the group
    rebalances and the committers rejoin): no acknowledged commit is lost, the generation
    after the restart is at least the largest a JOIN or SYNC answered, the files parse."""
    report = group_crash_trial(tmp_path, seed=23 if how == "kill" else 24, how=how,
                               churn=True)
    assert report.ok, (report.summary(), report.lost, report.wrong,
                       report.generation_regressions, report.bad_files)
    assert report.generations_acked > 0
