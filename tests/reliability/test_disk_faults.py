"""Disk faults under load (fast CI version): ENOSPC or EIO on a write, or a failed fsync,
hits partition 1's files while four V1 connections pipeline PRODUCEs to all four partitions
and a fifth follows every partition with CONSUME (the real core and store, in memory, over
tests/fakes/fs.py). bench/reliability.py runs the same over TCP against a real process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.diskfault_scenarios import FAULTS, inmemory_fault_trial


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fault_under_load_is_answered_and_contained(tmp_path: Path, fault: str,
                                                    seed: int) -> None:
    """fsync=always: the produces the fault hits are answered
    V1|<cid>|ERR|STORAGE_ERROR|<message>, and so is every later produce to partition 1 on a
    connection that got such an error; no other reply is anything but OK; no
    CONSUME ever returns a value that was not acknowledged; partitions 0, 2 and 3 keep
    accepting produces and serving consumes after the fault and partition 1 keeps serving
    reads; after a restart every acknowledged message reads back once, in order, and
    partition 1 accepts writes again."""
    report = inmemory_fault_trial(tmp_path, seed, fault)
    assert report.ok, report.summary()
    assert report.ledger.acknowledged > 100


def test_failed_interval_fsync_keeps_what_was_acknowledged(tmp_path: Path) -> None:
    """fsync=interval: an OK goes out before the fsync, so when the periodic fsync of
    partition 1 fails, what it answered OK stays readable and survives a restart (the page
    cache has it), later produces to partition 1 get STORAGE_ERROR, and the others go on."""
    report = inmemory_fault_trial(tmp_path, 3, "failed fsync", fsync="interval")
    assert report.ok, report.summary()
