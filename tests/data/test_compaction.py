"""Log compaction in the store: what survives a cleaning pass, how reads cross the gaps it
leaves, how a follower copies a compacted log, and that a crash (a power cut) at any step
of a pass leaves either the old segments or the new ones."""

from __future__ import annotations

import os

import pytest

from data import paths
from data.errors import StorageError
from data.format import key_header
from data.store import StorageConfig, Store, TopicConfig
from tests.data.support import FakeClock, partition_path, stop_uncleanly
from tests.fakes.powercut import PowerCutFileLayer, PowerLost

SEGMENT = 1500
"""Small segments: a few dozen records each, so a partition has many."""
DAY_US = 86_400 * 1_000_000


def _store(root, clock, fs=None) -> Store:
    kwargs = {} if fs is None else {"fs": fs}
    return Store(str(root), StorageConfig(segment_bytes=SEGMENT), now_us=clock, **kwargs)


def _compacted(store: Store, **settings):
    store.create_topic("t", TopicConfig(partitions=1, cleanup_policy="compact", **settings))
    return store.partition("t", 0)


def _put(plog, key: bytes | None, value: bytes) -> int:
    return plog.append([value], [key_header(key) if key else b""])


def _everything(plog) -> list[tuple[int, bytes | None, bytes]]:
    """Every record as (offset, key, value), reading from offset 0 in small steps."""
    out = []
    at = 0
    while at < plog.next_offset:
        result = plog.read(at, 7)
        out += [(r.offset, r.key, r.payload) for r in result.records]
        assert result.next_offset > at or not result.records
        if result.next_offset == at:
            break
        at = result.next_offset
    return out


def _latest(rows) -> dict[bytes | None, bytes]:
    latest: dict[bytes | None, bytes] = {}
    for _offset, key, value in rows:
        latest[key] = value
    return {k: v for k, v in latest.items() if v}


class CleaningTests:

    def test_latest_record_per_key_survives_with_its_offset(self, tmp_path):
        """After a pass, each key's latest value is still read at the offset it was written
        at; superseded records are gone and the partition is much smaller."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = _compacted(store)
        written = {}
        for i in range(300):
            key = b"k%d" % (i % 5)
            written[key] = (_put(plog, key, b"v%d" % i), b"v%d" % i)
        before = plog.size_bytes()
        stats = store.clean()
        assert len(stats) == 1
        rows = _everything(plog)
        for key, (offset, value) in written.items():
            if offset < plog._segments[-1].base_offset:  # cleaned part: exactly its latest
                assert (offset, key, value) in rows
        assert _latest(rows) == {k: v for k, (_o, v) in written.items()}
        assert plog.size_bytes() < before / 4
        assert [r[0] for r in rows] == sorted(r[0] for r in rows)
        assert plog.next_offset == 300 and plog.first_offset == 0
        store.close()

    def test_active_segment_is_never_cleaned(self, tmp_path):
        """Records in the active segment stay, duplicates included, until it is sealed."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = _compacted(store)
        for i in range(5):
            _put(plog, b"same", b"v%d" % i)
        assert plog.segment_count == 1
        assert store.clean(min_dirty_ratio=0) == []
        assert len(_everything(plog)) == 5
        store.close()

    def test_read_from_a_removed_offset_gets_the_next_record(self, tmp_path):
        """A consumer at an offset compaction removed is served from the next record; a
        read that spans gaps says so (``gapped``) and each record keeps its offset."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = _compacted(store)
        for i in range(100):
            _put(plog, b"k%d" % (i % 3) if i % 4 else b"hot", b"v%d" % i)
        store.clean()
        first_kept = _everything(plog)[0][0]
        assert first_kept > 0
        result = plog.read(0, 1)
        assert [r.offset for r in result.records] == [first_kept]
        assert result.next_offset == first_kept + 1
        raw = plog.read_raw(0, 1000)
        offsets = [r.offset for r in plog.read(0, 1000).records]
        assert raw.gapped and offsets != list(range(offsets[0], offsets[0] + len(offsets)))
        assert raw.count == len(offsets) and raw.next_offset == 100
        # the ends as an int64 array (a Kafka fetch) across the compacted runs: the same
        arr = plog.read_raw(0, 1000, ends_array=True)
        assert (arr.raw, arr.count, arr.gapped) == (raw.raw, raw.count, raw.gapped)
        assert list(map(int, arr.ends)) == list(raw.ends)
        store.close()

    def test_records_without_key_are_removed(self, tmp_path):
        """Keyless records (written before the topic became compacted) do not survive."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = _compacted(store)
        for i in range(60):
            _put(plog, None if i % 2 else b"k", b"v%d" % i)
        for i in range(30):
            _put(plog, b"filler%d" % i, b"x" * 40)
        store.clean()
        rows = [r for r in _everything(plog) if r[0] < 60]
        assert all(key == b"k" for _o, key, _v in rows)
        store.close()

    def test_tombstone_deletes_a_key_and_goes_after_delete_retention(self, tmp_path):
        """A tombstone (empty value) hides its key; it stays readable for
        ``delete_retention_ms`` so consumers see the delete, then a pass removes it."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = _compacted(store, delete_retention_ms=60_000)
        _put(plog, b"gone", b"value")
        tomb = _put(plog, b"gone", b"")
        for i in range(60):
            _put(plog, b"other%d" % (i % 3), b"v%d" % i)
        store.clean()
        rows = _everything(plog)
        assert (tomb, b"gone", b"") in rows
        assert not any(k == b"gone" and v for _o, k, v in rows)
        clock.advance(61 * 1_000_000)
        for i in range(60):
            _put(plog, b"other%d" % (i % 3), b"w%d" % i)
        store.clean()
        assert not any(k == b"gone" for _o, k, _v in _everything(plog))
        store.close()

    def test_min_compaction_lag_keeps_recent_records(self, tmp_path):
        """Segments whose newest record is younger than ``min_compaction_lag_ms`` wait."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = _compacted(store, min_compaction_lag_ms=10_000)
        for i in range(100):
            _put(plog, b"k", b"v%d" % i)
        assert store.clean() == []
        assert len(_everything(plog)) == 100
        clock.advance(11 * 1_000_000)
        assert len(store.clean()) == 1
        assert len(_everything(plog)) < 100
        store.close()

    def test_nothing_above_the_high_watermark_is_cleaned(self, tmp_path):
        """``upto`` (the high watermark + 1) bounds the pass: segments past it stay whole."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = _compacted(store)
        for i in range(200):
            _put(plog, b"k", b"v%d" % i)
        assert store.clean(lambda topic, partition: 0) == []
        assert len(_everything(plog)) == 200
        store.close()

    def test_compacted_segments_survive_a_restart_and_a_second_pass(self, tmp_path):
        """A reopened store serves the compacted segments; a later pass merges them with
        new ones, still one latest record per key."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = _compacted(store)
        for i in range(200):
            _put(plog, b"k%d" % (i % 4), b"a%d" % i)
        store.clean()
        store.close()
        store = _store(tmp_path, clock)
        assert store.recovery_report == []
        plog = store.partition("t", 0)
        for i in range(200):
            _put(plog, b"k%d" % (i % 4), b"b%d" % i)
        store.clean()
        assert _latest(_everything(plog)) == {b"k%d" % k: b"b%d" % (196 + k) for k in range(4)}
        assert plog.next_offset == 400
        store.close()

    def test_offset_for_timestamp_finds_compacted_records(self, tmp_path):
        """A time lookup lands on the first surviving record at or after the time."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = _compacted(store)
        for i in range(100):
            _put(plog, b"k%d" % (i % 3), b"v%d" % i)
            clock.advance(1000)
        store.clean()
        first = _everything(plog)[0][0]
        assert plog.offset_for_timestamp(0) == first
        store.close()

    def test_retention_is_off_for_compact_and_on_for_compact_delete(self, tmp_path):
        """``compact`` ignores ``retention_ms``; ``compact,delete`` applies it as well."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        store.create_topic("c", TopicConfig(partitions=1, cleanup_policy="compact", retention_ms=1))
        store.create_topic("cd", TopicConfig(partitions=1, cleanup_policy="compact,delete", retention_ms=1))
        for name in ("c", "cd"):
            for i in range(100):
                _put(store.partition(name, 0), b"k%d" % i, b"v" * 20)
        clock.advance(DAY_US)
        store.enforce_retention()
        assert store.partition("c", 0).first_offset == 0
        assert store.partition("cd", 0).first_offset > 0
        store.close()

    def test_truncation_into_a_compacted_segment(self, tmp_path):
        """A follower cut back into a compacted segment keeps the records below the cut
        and appends after it; a restart reads the same."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = _compacted(store)
        for i in range(200):
            _put(plog, b"k%d" % (i % 50), b"v%d" % i)
        store.clean()
        cut = plog._segments[0].end_offset - 10
        keep = [r for r in _everything(plog) if r[0] < cut]
        plog.truncate_to(cut)
        assert plog.next_offset == cut
        assert _everything(plog) == keep
        _put(plog, b"new", b"after")
        store.close()
        store = _store(tmp_path, clock)
        assert _everything(store.partition("t", 0)) == keep + [(cut, b"new", b"after")]
        store.close()

    def test_topic_settings_are_validated_and_kept(self, tmp_path):
        """The compaction settings are checked, written to topic.json only when set, and
        alterable."""
        with pytest.raises(ValueError, match="cleanup_policy"):
            TopicConfig(partitions=1, cleanup_policy="shrink").validate()
        with pytest.raises(ValueError, match="min_compaction_lag_ms"):
            TopicConfig(partitions=1, min_compaction_lag_ms=-1).validate()
        assert "cleanup_policy" not in TopicConfig(partitions=1).to_json()
        clock = FakeClock()
        store = _store(tmp_path, clock)
        store.create_topic("t", TopicConfig(partitions=1))
        store.alter_topic("t", {"cleanup_policy": "compact", "delete_retention_ms": 5})
        store.close()
        store = _store(tmp_path, clock)
        config = store.topic("t").config
        assert (config.cleanup_policy, config.delete_retention_ms) == ("compact", 5)
        store.close()


class FollowerCopyTests:

    def test_follower_copies_a_compacted_log_and_ends_where_the_leader_ends(self, tmp_path):
        """Records read from a compacted leader (with gaps) append to a follower as they
        are: same offsets, same bytes, same end offset, and a restart keeps them."""
        clock = FakeClock()
        leader = _store(tmp_path / "leader", clock)
        plog = _compacted(leader)
        for i in range(300):
            _put(plog, b"k%d" % (i % 6), b"v%d" % i)
        leader.clean()
        follower = _store(tmp_path / "follower", clock)
        copy = _compacted(follower)
        while copy.next_offset < plog.next_offset:
            result = plog.read(copy.next_offset, 5)
            assert result.records
            copy.append_records(result.raw)
        assert _everything(copy) == _everything(plog)
        follower.close()
        follower = _store(tmp_path / "follower", clock)
        assert _everything(follower.partition("t", 0)) == _everything(plog)
        assert follower.partition("t", 0).next_offset == plog.next_offset
        follower.close()
        leader.close()

    def test_gaps_are_refused_on_a_topic_that_is_not_compacted(self, tmp_path):
        """A delete-policy follower still refuses records that skip offsets."""
        clock = FakeClock()
        leader = _store(tmp_path / "leader", clock)
        plog = _compacted(leader)
        for i in range(100):
            _put(plog, b"k", b"v%d" % i)
        leader.clean()
        follower = _store(tmp_path / "follower", clock)
        follower.create_topic("t", TopicConfig(partitions=1))
        with pytest.raises(ValueError):
            follower.partition("t", 0).append_records(plog.read(0, 5).raw)
        follower.close()
        leader.close()


def _fill(plog) -> None:
    for i in range(150):
        _put(plog, b"k%d" % (i % 4), b"v%d" % i)
    _put(plog, b"k0", b"")
    for i in range(40):
        _put(plog, b"z%d" % (i % 3), b"w%d" % i)
    plog.sync()


class CrashTests:

    @pytest.mark.parametrize("power_cut", [False, True], ids=["kill", "power-cut"])
    def test_crash_at_every_step_of_a_pass_leaves_old_or_new_segments(self, tmp_path, power_cut):
        """Kill the process (or cut the power) at each file operation of a cleaning pass
        and of its install: the reopened partition holds either every record it had
        before the pass or exactly the records the pass keeps, never a mix, and the latest
        value per key is the same; no ``.cleaned`` or ``.swap`` file is left."""
        clock = FakeClock()
        fs = PowerCutFileLayer()
        store = _store(tmp_path / "ref", clock, fs)
        plog = _compacted(store)
        _fill(plog)
        before = _everything(plog)
        ops0 = fs.ops
        assert store.clean()
        steps = fs.ops - ops0
        after = _everything(plog)
        store.close()
        assert len(after) < len(before) and steps > 5
        for crash_at in range(1, steps + 1):
            root = tmp_path / f"crash{crash_at}"
            fs = PowerCutFileLayer(renames_keep_source=True)
            store = _store(root, clock, fs)
            plog = _compacted(store)
            _fill(plog)
            fs.crash_at = fs.ops + crash_at
            try:
                store.clean()
            except (StorageError, PowerLost):
                pass
            if power_cut:
                fs.cut()
            stop_uncleanly(store)
            store = _store(root, clock)
            rows = _everything(store.partition("t", 0))
            assert rows in (before, after), f"power cut at step {crash_at} of {steps}"
            assert _latest(rows) == _latest(before)
            leftovers = [n for n in os.listdir(partition_path(str(root), "t", 0))
                         if n.endswith((paths.CLEANED_SUFFIX, paths.SWAP_SUFFIX))]
            assert leftovers == [], f"step {crash_at}: {leftovers}"
            # and the reopened partition takes a pass and new records
            store.clean(min_dirty_ratio=0)
            _put(store.partition("t", 0), b"k1", b"later")
            assert _latest(_everything(store.partition("t", 0)))[b"k1"] == b"later"
            store.close()

    def test_crash_during_a_gapped_follower_append(self, tmp_path):
        """A follower that dies while writing a gapped copy reopens with the copy complete
        or absent, and the log is writable after it."""
        clock = FakeClock()
        leader = _store(tmp_path / "leader", clock)
        plog = _compacted(leader)
        for i in range(200):
            _put(plog, b"k%d" % (i % 3), b"v%d" % i)
        leader.clean()
        batch = plog.read(0, 1000, upto=plog._segments[0].end_offset)
        assert batch.records[0].offset > 0  # a gap before the first record
        for crash_at in range(1, 30):
            root = tmp_path / f"f{crash_at}"
            fs = PowerCutFileLayer(renames_keep_source=True)
            follower = _store(root, clock, fs)
            copy = _compacted(follower)
            fs.crash_at = fs.ops + crash_at
            try:
                copy.append_records(batch.raw)
            except (StorageError, PowerLost, OSError):
                pass
            done = not fs.dead
            fs.cut()
            stop_uncleanly(follower)
            follower = _store(root, clock)
            copy = follower.partition("t", 0)
            rows = _everything(copy)
            assert rows in ([], [(r.offset, r.key, r.payload) for r in batch.records])
            if done:
                assert copy.next_offset == batch.next_offset
                follower.close()
                break
            _put(copy, b"k", b"after")
            follower.close()
        else:
            raise AssertionError("the append never completed within 30 operations")
