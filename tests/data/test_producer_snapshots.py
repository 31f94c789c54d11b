"""Tests for the producer snapshots a partition log keeps beside its segments
(``PartitionLog.save_producer_snapshot`` / ``load_producer_snapshot``): one file named by
its offset, atomically replaced, never trusted past the log end."""

from __future__ import annotations

import os

import pytest

from data.store import StorageConfig, Store, TopicConfig
from tests.data.support import FakeClock


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path), StorageConfig(segment_bytes=4096), now_us=FakeClock())
    yield s
    s.close()


def snapshot_names(plog) -> list[str]:
    return sorted(n for n in os.listdir(plog.path) if n.endswith(".producers"))


class ProducerSnapshotTests:

    def test_save_and_load(self, store):
        """The newest snapshot comes back with its offset; older ones are removed."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        assert plog.load_producer_snapshot() is None
        plog.append([b"a", b"b", b"c"])
        plog.save_producer_snapshot(1, b"one")
        plog.save_producer_snapshot(3, b"three")
        assert plog.load_producer_snapshot() == (3, b"three")
        assert snapshot_names(plog) == ["00000000000000000003.producers"]

    def test_a_snapshot_past_the_log_end_is_refused(self, store):
        """Saving beyond the log end is a bug (ValueError); nothing is written."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        plog.append([b"a"])
        with pytest.raises(ValueError):
            plog.save_producer_snapshot(2, b"x")
        assert snapshot_names(plog) == []

    def test_truncation_drops_snapshots_past_the_new_end(self, store):
        """A follower's truncation removes the snapshots that describe records it dropped."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        plog.append([b"a", b"b", b"c", b"d"])
        plog.save_producer_snapshot(4, b"four")
        plog.truncate_to(4)
        assert plog.load_producer_snapshot() == (4, b"four")
        plog.truncate_to(2)
        assert snapshot_names(plog) == []
        assert plog.load_producer_snapshot() is None

    def test_reopened_store_keeps_the_snapshot(self, tmp_path):
        """A snapshot survives a restart of the store; other files are left alone."""
        s = Store(str(tmp_path), StorageConfig(), now_us=FakeClock())
        plog = s.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        plog.append([b"a", b"b"])
        plog.save_producer_snapshot(2, b"two")
        s.close()
        s = Store(str(tmp_path), StorageConfig(), now_us=FakeClock())
        plog = s.topics["t"].partitions[0]
        assert plog.load_producer_snapshot() == (2, b"two")
        assert [r.payload for r in plog.read(0).records] == [b"a", b"b"]
        s.close()

    def test_a_snapshot_past_the_recovered_end_is_dropped_at_open(self, tmp_path):
        """A crash took the log's tail (the snapshot described it): the snapshot goes when
        the store opens, before new records could reach its offset and make it pass."""
        s = Store(str(tmp_path), StorageConfig(), now_us=FakeClock())
        plog = s.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        plog.append([b"a", b"b", b"c"])
        plog.save_producer_snapshot(3, b"three")
        path = plog.path
        s.close()
        s = Store(str(tmp_path), StorageConfig(), now_us=FakeClock())
        s.topics["t"].partitions[0].truncate_to(3)  # nothing: the snapshot is at the end
        s.close()
        # Put back a snapshot from "the future", as a crash that lost the log tail leaves it.
        os.rename(os.path.join(path, "00000000000000000003.producers"),
                  os.path.join(path, "00000000000000000009.producers"))
        s = Store(str(tmp_path), StorageConfig(), now_us=FakeClock())
        plog = s.topics["t"].partitions[0]
        assert snapshot_names(plog) == []
        plog.append([b"d"] * 10)
        assert plog.load_producer_snapshot() is None
        s.close()
