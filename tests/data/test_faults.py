"""I/O errors (ENOSPC, EIO, a failed fsync): the append or sync raises StorageError, the
partition refuses writes until a restart, nothing unacknowledged is reported durable, and
other partitions keep working. Faults come from tests/fakes/fs.py."""

from __future__ import annotations

import errno
import os

import pytest

from broker.errors import StorageError
from broker.v1.errors import code_for
from data import paths
from data.store import StorageConfig, Store, TopicConfig
from tests.data.support import partition_path
from tests.fakes.fs import FaultyFileLayer, RecordingFileLayer

SMALL = StorageConfig(segment_bytes=1024)


def _open(root: str, fs) -> Store:
    store = Store(root, SMALL, fs=fs)
    if store.topic("t") is None:
        store.create_topic("t", TopicConfig(partitions=2))
    return store


def _p0(root: str) -> str:
    return partition_path(root, "t", 0) + os.sep


class WriteFaultTests:

    @pytest.mark.parametrize("partial", [False, True])
    @pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
    def test_failed_log_write(self, tmp_path, code, partial):
        """A log write failing with ENOSPC/EIO (also after half the batch reached the disk)
        raises StorageError; the partition refuses later writes even when the disk is fine
        again; partition 1 keeps working; after a restart only acknowledged records exist."""
        root = str(tmp_path)
        fs = FaultyFileLayer(armed=False)
        store = _open(root, fs)
        p0, p1 = store.topic("t").partitions
        p0.append([b"acked-1", b"acked-2"])
        assert p0.sync() == 2
        fs.arm("write", path_contains=_p0(root) + "0000", error=code, partial=partial)
        with pytest.raises(StorageError, match="refused until restart"):
            p0.append([b"lost-%d" % i * 20 for i in range(10)])
        assert p0.failed is not None and code_for(p0.failed) == "STORAGE_ERROR"
        assert (p0.next_offset, p0.durable_offset) == (2, 2)
        with pytest.raises(StorageError):
            p0.append([b"refused"])
        with pytest.raises(StorageError):
            p0.sync()
        assert [r.payload for r in p0.read(0).records] == [b"acked-1", b"acked-2"]
        assert p1.append([b"other"]) == 0 and p1.sync() == 1
        store.close()
        restarted = _open(root, FaultyFileLayer(armed=False))
        try:
            again = restarted.partition("t", 0)
            assert [r.payload for r in again.read(0).records] == [b"acked-1", b"acked-2"]
            assert again.failed is None and again.append([b"back"]) == 2
            assert restarted.partition("t", 1).read(0).records[0].payload == b"other"
        finally:
            restarted.close()

    def test_failed_index_write_at_a_sync(self, tmp_path):
        """The .index is written behind the log, at a sync: a failing write there fails the
        sync and the partition, and what the log holds survives the restart (recovery
        rebuilds the entries from it)."""
        root = str(tmp_path)
        fs = FaultyFileLayer(armed=False)
        store = _open(root, fs)
        p0 = store.partition("t", 0)
        p0.append([b"one"])
        assert p0.sync() == 1
        p0.append([b"two"])
        fs.arm("write", path_contains=".index", error=errno.EIO)
        with pytest.raises(StorageError, match="index write"):
            p0.sync()
        assert p0.durable_offset == 1 and p0.failed is not None
        with pytest.raises(StorageError):
            p0.append([b"refused"])
        assert [r.payload for r in p0.read(0).records] == [b"one", b"two"]
        assert store.partition("t", 1).append([b"fine"]) == 0
        store.close()
        restarted = _open(root, FaultyFileLayer(armed=False))
        try:
            again = restarted.partition("t", 0)
            assert [r.payload for r in again.read(0).records] == [b"one", b"two"]
            assert again.append([b"three"]) == 2
        finally:
            restarted.close()

    def test_failed_index_write_behind_refuses_the_next_batch(self, tmp_path, monkeypatch):
        """Once the entries held in memory reach their bound they are written before the
        next batch: a failing write refuses that batch (not written) and fails the
        partition; every batch before it survives the restart."""
        monkeypatch.setattr("data.log._INDEX_BEHIND", 3)
        root = str(tmp_path)
        fs = FaultyFileLayer(armed=False)
        store = _open(root, fs)
        p0 = store.partition("t", 0)
        p0.append([b"one", b"two"])
        p0.append([b"three"])
        fs.arm("write", path_contains=".index", error=errno.EIO)
        with pytest.raises(StorageError, match="index write"):
            p0.append([b"four"])
        assert p0.next_offset == 3 and p0.failed is not None
        store.close()
        restarted = _open(root, FaultyFileLayer(armed=False))
        try:
            assert [r.payload for r in restarted.partition("t", 0).read(0).records] == [
                b"one", b"two", b"three"]
        finally:
            restarted.close()

    def test_failed_roll(self, tmp_path):
        """When the next segment cannot be created (ENOSPC on open), the append that needed
        it fails and the partition is failed; what was appended before is intact."""
        root = str(tmp_path)
        fs = FaultyFileLayer(armed=False)
        store = _open(root, fs)
        p0 = store.partition("t", 0)
        p0.append([b"x" * 600])
        fs.arm("open", path_contains=_p0(root) + "00000000000000000001.log")
        with pytest.raises(StorageError, match="creating segment"):
            p0.append([b"y" * 600])
        assert p0.failed is not None and p0.next_offset == 1 and p0.segment_count == 1
        assert p0.read(0).records[0].payload == b"x" * 600
        store.close()


class FsyncFaultTests:

    def test_failed_fsync_is_final(self, tmp_path):
        """A failed fsync raises StorageError, durable_offset keeps its last true value, the
        partition refuses writes, and the fsync is never retried (not by sync, sync_all or
        close); the other partition syncs fine."""
        root = str(tmp_path)
        fs = FaultyFileLayer(armed=False)
        store = _open(root, fs)
        p0, p1 = store.topic("t").partitions
        p0.append([b"a"])
        assert p0.sync() == 1
        p0.append([b"b", b"c"])
        p1.append([b"z"])
        fs.arm("fsync", path_contains=_p0(root), error=errno.EIO, sticky=True)
        with pytest.raises(StorageError, match="fsync"):
            p0.sync()
        assert p0.durable_offset == 1
        assert p0.failed is not None
        calls = fs.calls
        with pytest.raises(StorageError):
            p0.sync()
        with pytest.raises(StorageError):
            p0.append([b"d"])
        store.sync_all()  # skips the failed partition, syncs the other one
        assert p1.durable_offset == 1
        assert fs.calls == calls
        store.close()
        assert fs.calls == calls
        assert p0.durable_offset == 1

    def test_sync_all_reports_new_failures_and_syncs_the_rest(self, tmp_path):
        """sync_all tries every partition; a failure surfaces as one StorageError naming it."""
        root = str(tmp_path)
        fs = FaultyFileLayer(armed=False)
        store = _open(root, fs)
        p0, p1 = store.topic("t").partitions
        p0.append([b"a"])
        p1.append([b"b"])
        fs.arm("fsync", path_contains=_p0(root), error=errno.EIO)
        with pytest.raises(StorageError, match="t/0"):
            store.sync_all()
        assert p1.durable_offset == 1 and p0.durable_offset == 0
        store.close()


class DurabilityOrderTests:

    def test_durable_means_written_then_fsynced(self, tmp_path):
        """Whenever sync() reports offset D durable, every .log write holding records below D
        happened before an fsync of that file that finished within the sync (checked over
        rolls, with the recorded sequence of writes and fsyncs); a roll also fsyncs the
        partition folder before the new segment's records count as durable."""
        root = str(tmp_path)
        fs = RecordingFileLayer()
        store = _open(root, fs)
        p0 = store.partition("t", 0)
        pdir = partition_path(root, "t", 0)
        for round_ in range(12):
            p0.append([b"r%d-%d" % (round_, i) * 15 for i in range(3)])
            start = len(fs.events)
            durable = p0.sync()
            assert durable == p0.next_offset
            during = fs.events[start:]
            fsynced = {e.path for e in during if e.op == "fsync"}
            # Only the logs carry data: indexes are rebuilt from the log by recovery, so the
            # active segment's indexes are fsynced lazily (test_index_fsync_is_lazy).
            for path in {e.path for e in fs.events[:start] if e.op == "write" and e.path.startswith(pdir)
                         and e.path.endswith(".log")}:
                last_write = max(e.seq for e in fs.events[:start] if e.op == "write" and e.path == path)
                later_fsyncs = [e for e in fs.events if e.op == "fsync" and e.path == path and e.seq > last_write]
                assert later_fsyncs, f"{path} written but never fsynced before offset {durable} was reported"
                assert later_fsyncs[0].seq <= during[-1].seq
            created = [
                e for e in fs.events[:start] if e.op == "open" and e.flags & os.O_CREAT and e.path.startswith(pdir)
            ]
            if created:
                dir_syncs = [e for e in fs.events if e.op == "fsync_dir" and e.path == pdir and e.seq > created[-1].seq]
                assert dir_syncs and dir_syncs[0].seq <= during[-1].seq
            assert fsynced or not during
        assert p0.segment_count > 2
        store.close()


class TopicFaultTests:

    def test_failed_topic_creation(self, tmp_path):
        """A topic whose creation hits ENOSPC is not created (StorageError); the half-built
        folder is removed on the next open and the name can be used again."""
        root = str(tmp_path)
        fs = FaultyFileLayer(op="open", path_contains="topic.json", error=errno.ENOSPC)
        store = Store(root, SMALL, fs=fs)
        with pytest.raises(StorageError, match="creating topic t"):
            store.create_topic("t", TopicConfig(partitions=2))
        assert store.topic("t") is None
        assert os.path.isdir(paths.new_topic_dir(root, "t"))
        store.close()
        again = Store(root, SMALL)
        try:
            assert os.listdir(os.path.join(root, "topics")) == []
            assert again.create_topic("t", TopicConfig(partitions=2)).partitions[1].append([b"ok"]) == 0
        finally:
            again.close()


class LazyIndexSyncTests:

    def test_one_fsync_per_group_commit_and_indexes_survive_a_cut(self, tmp_path):
        """A sync() fsyncs the active segment's log only (one fsync per group commit); its
        indexes are fsynced every few dozen syncs and at close. After an unclean stop with
        the indexes behind the log, reopening rebuilds them and every record reads back."""
        root = str(tmp_path)
        fs = RecordingFileLayer()
        store = _open(root, fs)
        p0 = store.partition("t", 0)
        before = len(fs.ops("fsync"))
        for i in range(10):
            p0.append([b"v%d" % i])
            p0.sync()
        fsyncs = fs.ops("fsync")[before:]
        assert [e.path.rsplit(".", 1)[1] for e in fsyncs].count("log") == 10
        assert not [e for e in fsyncs if e.path.endswith("index")]
        # Simulate the indexes losing what was never fsynced: empty them, no clean marker.
        for name in os.listdir(partition_path(root, "t", 0)):
            if name.endswith("index"):
                os.truncate(os.path.join(partition_path(root, "t", 0), name), 0)
        store.lock.release()  # the first store "dies": never closed (unclean), lock dropped
        reopened = _open(root, RecordingFileLayer())
        log = reopened.partition("t", 0)
        assert log.next_offset == 10
        assert [r.payload for r in log.read(0, 100).records] == [b"v%d" % i for i in range(10)]
        reopened.close()

    def test_indexes_are_written_behind_the_log(self, tmp_path):
        """An append writes its records with one write, the log's: the index entries follow
        at the next sync (two writes for everything since the last one), so the files say
        what the log holds after each sync. Reads never wait for them, and after an unclean
        stop with entries never written, reopening rebuilds them from the log."""
        root = str(tmp_path)
        fs = RecordingFileLayer()
        store = _open(root, fs)
        p0 = store.partition("t", 0)
        pdir = partition_path(root, "t", 0)
        p0.append([b"first"])
        p0.sync()
        start = len(fs.events)
        for i in range(5):
            p0.append([b"v%d" % i])
        writes = [e for e in fs.events[start:] if e.op == "write" and e.path.startswith(pdir)]
        assert [e.path.rsplit(".", 1)[1] for e in writes] == ["log"] * 5
        assert [r.payload for r in p0.read(1, 100).records] == [b"v%d" % i for i in range(5)]
        start = len(fs.events)
        p0.sync()
        writes = [e for e in fs.events[start:] if e.op == "write"]
        assert sorted(e.path.rsplit(".", 1)[1] for e in writes) == ["index", "timeindex"]
        assert [e.nbytes for e in writes if e.path.endswith(".index")] == [4 * 5]
        index = [n for n in os.listdir(pdir) if n.endswith(".index")]
        assert [os.path.getsize(os.path.join(pdir, n)) for n in index] == [4 * 6]
        p0.append([b"never indexed"])
        store.lock.release()  # dies uncleanly: the last entry never written
        reopened = _open(root, RecordingFileLayer())
        try:
            log = reopened.partition("t", 0)
            assert [r.payload for r in log.read(0, 100).records] == (
                [b"first"] + [b"v%d" % i for i in range(5)] + [b"never indexed"])
        finally:
            reopened.close()
