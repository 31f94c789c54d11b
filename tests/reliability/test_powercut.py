"""Power-cut simulation (tests/fakes/powercut.py): what was fsynced survives, torn tails
are dropped, state files are old-or-new. A handful of seeded trials here; bench/reliability.py
runs hundreds."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.fakes.powercut import PowerCutFileLayer, PowerLost
from tests.reliability.powercut_scenarios import broker_trial, json_trial, store_trial


class PowerCutLayerTests:
    def test_cut_keeps_fsynced_bytes_and_drops_the_rest(self, tmp_path: Path) -> None:
        """Bytes written after the last fsync are gone after a cut; a file whose directory
        was never fsynced disappears."""
        fs = PowerCutFileLayer()
        fs.fsync_dir(str(tmp_path))
        kept, lost = str(tmp_path / "kept"), str(tmp_path / "lost")
        fd = fs.open(kept, os.O_WRONLY | os.O_CREAT, 0o644)
        fs.write(fd, b"durable")
        fs.fsync(fd)
        fs.fsync_dir(str(tmp_path))
        fs.write(fd, b"-volatile")
        other = fs.open(lost, os.O_WRONLY | os.O_CREAT, 0o644)
        fs.write(other, b"x")
        fs.fsync(other)
        assert fs.cut() == len(b"-volatile") + 1
        assert Path(kept).read_bytes() == b"durable"
        assert not Path(lost).exists()

    def test_unsynced_rename_is_undone(self, tmp_path: Path) -> None:
        """A replace not followed by an fsync of the directory comes undone at a cut."""
        fs = PowerCutFileLayer()
        target = tmp_path / "state.json"
        target.write_bytes(b"old")
        tmp = tmp_path / "state.json.tmp"
        fd = fs.open(str(tmp), os.O_WRONLY | os.O_CREAT, 0o644)
        fs.write(fd, b"new")
        fs.fsync(fd)
        fs.close(fd)
        fs.replace(str(tmp), str(target))
        fs.cut()
        assert target.read_bytes() == b"old"

    def test_torn_tail_is_garbage_no_longer_than_what_was_lost(self, tmp_path: Path) -> None:
        """A torn cut leaves random bytes after the fsynced length, within the lost span."""
        fs = PowerCutFileLayer()
        path = tmp_path / "log"
        path.write_bytes(b"")
        fd = fs.open(str(path), os.O_WRONLY)
        fs.write(fd, b"A" * 10)
        fs.fsync(fd)
        fs.write(fd, b"B" * 50)
        fs.cut(random.Random(3), torn=True)
        data = path.read_bytes()
        assert data[:10] == b"A" * 10 and 10 < len(data) <= 60 and b"B" * 50 not in data

    def test_power_lost_fails_every_later_call(self, tmp_path: Path) -> None:
        """From ``crash_at`` on every call raises EIO until the cut."""
        fs = PowerCutFileLayer()
        fs.crash_at = 2
        fd = fs.open(str(tmp_path / "f"), os.O_WRONLY | os.O_CREAT, 0o644)
        with pytest.raises(PowerLost):
            fs.write(fd, b"x")
        with pytest.raises(OSError):
            fs.fsync(fd)
        fs.cut()
        assert not fs.dead


class PowerCutTrialTests:
    @pytest.mark.parametrize("seed", range(12))
    def test_store_loses_no_fsynced_record(self, tmp_path: Path, seed: int) -> None:
        """Three cuts in a row at random calls (rolls included, torn tails half the time):
        every record covered by a completed sync reads back once, intact, in order."""
        report = store_trial(tmp_path, seed)
        assert report.ok, report.summary()
        # A trial that acknowledged nothing would pass the check above without proving
        # anything: each seed must have synced records that then read back.
        assert report.acknowledged > 0, report.summary()
        assert report.read >= report.acknowledged, report.summary()

    @pytest.mark.parametrize("seed,acks", [(s, a) for s in range(4) for a in ("1", "all")])
    def test_broker_loses_no_acknowledged_produce(self, tmp_path: Path, seed: int,
                                                  acks: str) -> None:
        """fsync=always through the real core: after a power cut and a restart, every
        PRODUCE answered OK is there, once and intact."""
        report = broker_trial(tmp_path, seed, acks)
        assert report.ok, report.summary()

    @pytest.mark.parametrize("seed", range(20))
    def test_offsets_json_is_old_or_new_never_empty(self, tmp_path: Path, seed: int) -> None:
        """offsets.json after a cut during rewrites is the last completed version or the
        one being written, and always parses."""
        ok, found = json_trial(tmp_path, seed)
        assert ok, found
