"""Retention and time-based rolling: whole oldest segments go, the log start moves, reads
below it start at it, and the active segment is never deleted."""

from __future__ import annotations

import os

from data.store import StorageConfig, Store, TopicConfig
from tests.data.support import FakeClock, segment_logs

MS = 1000  # microseconds per millisecond
SECOND = 1_000_000


def _store(tmp_path, clock, **kw) -> Store:
    cfg = {"segment_bytes": 1024, "segment_ms": 3_600_000} | kw
    return Store(str(tmp_path), StorageConfig(**cfg), now_us=clock)


class RetentionBytesTests:

    def test_size_retention_removes_oldest_whole_segments(self, tmp_path):
        """With retention_bytes, the oldest sealed segments are removed until the partition
        fits; first_offset moves to the oldest kept segment; reads below it start there."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = store.create_topic("t", TopicConfig(partitions=1, retention_bytes=3000)).partitions[0]
        for i in range(100):
            plog.append([b"%03d" % i * 20])
        segments_before = plog.segment_count
        size_before = plog.size_bytes()
        assert size_before > 3000
        removed = store.enforce_retention()
        assert removed, "something must go"
        assert plog.size_bytes() <= 3000
        assert plog.segment_count == segments_before - len(removed)
        assert [r.base_offset for r in removed] == sorted(r.base_offset for r in removed)
        assert removed[0].base_offset == 0
        assert all(r.reason == "retention_bytes" for r in removed)
        assert plog.first_offset == removed[-1].end_offset
        assert sum(r.size_bytes for r in removed) == size_before - plog.size_bytes()
        result = plog.read(0, max_messages=5)
        assert result.records[0].offset == plog.first_offset
        assert plog.read(0).next_offset > plog.first_offset
        assert len(segment_logs(str(tmp_path), "t", 0)) == plog.segment_count
        assert store.enforce_retention() == []
        store.close()

    def test_active_segment_is_never_removed(self, tmp_path):
        """Even a retention_bytes of 0 keeps the active segment and all its records."""
        clock = FakeClock()
        store = _store(tmp_path, clock, segment_bytes=1_000_000)
        plog = store.create_topic("t", TopicConfig(partitions=1, retention_bytes=0)).partitions[0]
        plog.append([b"x" * 100] * 10)
        assert store.enforce_retention() == []
        assert plog.segment_count == 1 and plog.read(0).records[0].offset == 0
        store.close()


class RetentionTimeTests:

    def test_age_retention_uses_message_timestamps(self, tmp_path):
        """A sealed segment goes once its newest message is older than retention_ms; one
        with a newer message stays, and so does everything after it."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = store.create_topic("t", TopicConfig(partitions=1, retention_ms=60_000)).partitions[0]
        for _ in range(30):
            plog.append([b"old" * 30])
        clock.advance(30 * SECOND)
        for _ in range(30):
            plog.append([b"new" * 30])
        clock.advance(31 * SECOND)  # old ones are 61 s old, new ones 31 s
        removed = store.enforce_retention()
        assert removed and all(r.reason == "retention_ms" for r in removed)
        # Only segments whose newest message is old went, oldest first and contiguous ...
        assert all(r.end_offset <= 30 for r in removed)
        assert [r.base_offset for r in removed][0] == 0
        assert plog.first_offset == removed[-1].end_offset
        # ... and every such segment went: at most the one holding offset 29 (which may
        # also hold new messages) remains, and a segment holds at most 6 of these records.
        assert plog.first_offset > 29 - 6
        assert plog.read(0, max_messages=1).records[0].offset == plog.first_offset
        clock.advance(10 * SECOND)  # 41 s: new ones still young
        assert store.enforce_retention() == []
        store.close()

    def test_quiet_partition_rolls_and_is_freed(self, tmp_path):
        """A partition nobody writes to anymore: enforce_retention rolls its aged active
        segment (segment_ms) and then deletes it by retention_ms, leaving an empty log
        whose offsets continue where they were."""
        clock = FakeClock()
        store = _store(tmp_path, clock, segment_bytes=1_000_000, segment_ms=10_000)
        plog = store.create_topic("t", TopicConfig(partitions=1, retention_ms=20_000)).partitions[0]
        plog.append([b"a", b"b", b"c"])
        clock.advance(5 * SECOND)
        assert store.enforce_retention() == [] and plog.segment_count == 1
        clock.advance(6 * SECOND)  # 11 s: older than segment_ms -> rolled, not yet expired
        assert store.enforce_retention() == []
        assert plog.segment_count == 2
        clock.advance(10 * SECOND)  # newest message 21 s old
        (removed,) = store.enforce_retention(clock.now)
        assert (removed.base_offset, removed.end_offset, removed.reason) == (0, 3, "retention_ms")
        assert (plog.first_offset, plog.next_offset, plog.segment_count) == (3, 3, 1)
        assert plog.read(0).records == [] and plog.read(0).next_offset == 3
        assert plog.append([b"d"]) == 3
        store.close()

    def test_roll_on_append_by_age(self, tmp_path):
        """An append into an active segment older than segment_ms starts a new segment."""
        clock = FakeClock()
        store = _store(tmp_path, clock, segment_bytes=1_000_000, segment_ms=1_000)
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        plog.append([b"a"])
        clock.advance(999 * MS)
        plog.append([b"b"])
        assert plog.segment_count == 1
        clock.advance(1 * MS)
        plog.append([b"c"])
        assert plog.segment_count == 2
        assert [r.payload for r in plog.read(0).records] == [b"a", b"b", b"c"]
        store.close()

    def test_retention_survives_reopen(self, tmp_path):
        """After retention and a reopen, the log starts at the same first offset."""
        clock = FakeClock()
        store = _store(tmp_path, clock)
        plog = store.create_topic("t", TopicConfig(partitions=1, retention_bytes=2000)).partitions[0]
        for i in range(60):
            plog.append([b"%02d" % i * 30])
        store.enforce_retention()
        first = plog.first_offset
        assert first > 0
        store.close()
        again = _store(tmp_path, clock)
        try:
            assert again.partition("t", 0).first_offset == first
            assert again.partition("t", 0).read(0).records[0].offset == first
            assert not any(n.endswith(".bad") for n in os.listdir(os.path.dirname(segment_logs(str(tmp_path), "t", 0)[0])))
        finally:
            again.close()
