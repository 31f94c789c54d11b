"""Crash matrix (fast CI version): a real broker process is SIGKILLed, or SIGSTOPped and
resumed, while clients pipeline PRODUCEs; after a restart every acknowledged message is
there once, intact, in order. bench/reliability.py runs >= 200 trials."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.crash_scenarios import crash_trial


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
