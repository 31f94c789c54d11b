"""sync() in a worker thread while the reactor thread appends, rolls, reads and deletes:
the group-commit contract of PartitionLog (no fd closed under an fsync, durable_offset
only ever covers what the fsync covered, nothing lost)."""

from __future__ import annotations

import sys
import threading

from data.store import StorageConfig, Store, TopicConfig
from tests.data.support import partition_path
from tests.fakes.fs import GatedFileLayer, NoSyncFileLayer, RecordingFileLayer

WAIT = 30.0  # generous bound on waiting for the other thread (not a timing assumption)


def _run(fn, results: list) -> threading.Thread:
    def target() -> None:
        try:
            results.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            results.append(exc)

    t = threading.Thread(target=target)
    t.start()
    return t


class GatedSyncTests:

    def test_roll_and_retention_while_a_sync_is_inside_fsync(self, tmp_path):
        """While a sync waits inside fsync, the main thread appends, rolls to new segments
        and retention deletes the segment being fsynced. The sync then reports exactly the
        offset it captured; no fd it used was closed under it; the next sync covers the
        rest and closes the rolled segments' write fds."""
        root = str(tmp_path)
        fs = GatedFileLayer(path_contains=partition_path(root, "t", 0))
        fs.release()
        store = Store(root, StorageConfig(segment_bytes=1024), fs=fs)
        plog = store.create_topic("t", TopicConfig(partitions=1, retention_bytes=1500)).partitions[0]
        plog.append([b"a" * 500])
        fs.close_gate()
        results: list = []
        worker = _run(plog.sync, results)
        assert fs.entered.wait(WAIT)
        captured = 1
        for i in range(6):  # every append rolls: 500-byte payloads, 1024-byte segments
            plog.append([b"%d" % i * 500])
        assert plog.segment_count == 7
        removed = store.enforce_retention()
        assert removed and removed[0].base_offset == 0  # the segment the sync is fsyncing
        reads = plog.read(0, max_messages=100)
        assert reads.records[0].offset == plog.first_offset
        fs.release()
        worker.join(WAIT)
        assert results == [captured]
        assert plog.durable_offset == captured
        assert fs.closed_during_fsync == 0 and fs.fsync_of_closed_fd == 0
        assert plog.sync() == plog.next_offset == 7
        assert fs.fsync_of_closed_fd == 0
        # After that sync only the active segment keeps write fds open.
        open_writes = [p for p in fs.fd_paths.values() if p.startswith(partition_path(root, "t", 0))]
        assert sorted(p.rsplit("/", 1)[1] for p in open_writes if "00000000000000000006" in p) == [
            "00000000000000000006.index",
            "00000000000000000006.log",
            "00000000000000000006.timeindex",
        ]
        store.close()

    def test_truncation_during_sync_is_not_reported_durable(self, tmp_path):
        """A truncation while a sync is in flight: the sync does not report the old,
        truncated-away offsets as durable."""
        root = str(tmp_path)
        fs = GatedFileLayer(path_contains=partition_path(root, "t", 0))
        fs.release()
        store = Store(root, StorageConfig(segment_bytes=4096), fs=fs)
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        plog.append([b"x"] * 10)
        fs.close_gate()
        results: list = []
        worker = _run(plog.sync, results)
        assert fs.entered.wait(WAIT)
        plog.truncate_to(4)
        plog.append([b"new"] * 8)  # offsets 4..11, not covered by the sync in flight
        fs.release()
        worker.join(WAIT)
        assert results and not isinstance(results[0], BaseException)
        assert plog.durable_offset <= 4
        assert plog.sync() == 12
        assert fs.closed_during_fsync == 0
        store.close()


class StressTests:

    def test_sync_thread_against_appends_with_rolls(self, tmp_path):
        """A worker thread syncs in a loop while the main thread appends 600 batches over
        dozens of segments, reads, and runs retention (threads switching as often as
        CPython allows; every 20 batches the main thread also waits until a sync covers
        what it appended, so syncs provably land between appends). No error, durable_offset never
        goes backwards nor past next_offset, no fsync on a closed fd, and every record
        reads back in order at the end."""
        root = str(tmp_path)
        # Record every call (to catch an fsync on a closed fd) but skip the disk flush
        # itself, so thousands of sync rounds interleave with the appends.
        fs = RecordingFileLayer(NoSyncFileLayer())
        store = Store(root, StorageConfig(segment_bytes=4096), fs=fs)
        plog = store.create_topic("t", TopicConfig(partitions=1, retention_bytes=200_000)).partitions[0]
        stop = threading.Event()
        rounds = threading.Condition()
        seen: list[int] = []
        errors: list[BaseException] = []

        def syncer() -> None:
            try:
                while not stop.is_set():
                    durable = plog.sync()
                    with rounds:
                        seen.append(durable)
                        rounds.notify_all()
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                errors.append(exc)
                with rounds:
                    rounds.notify_all()

        def until_durable(offset: int) -> None:
            with rounds:
                assert rounds.wait_for(lambda: (seen and seen[-1] >= offset) or errors, WAIT)

        worker = threading.Thread(target=syncer)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows
        worker.start()
        try:
            for i in range(600):
                plog.append([b"%06d" % i * 10] * (1 + i % 5))
                assert plog.durable_offset <= plog.next_offset
                if i % 20 == 0:
                    until_durable(plog.next_offset)
                if i % 50 == 0:
                    store.enforce_retention()
                    chunk = plog.read(plog.first_offset, max_messages=50)
                    assert chunk.records[0].offset == plog.first_offset
        finally:
            stop.set()
            worker.join(WAIT)
            sys.setswitchinterval(switch)
        assert not errors
        assert len(set(seen)) >= 30, "a sync landed after every 20 batches"
        assert seen == sorted(seen)
        assert plog.segment_count > 3
        final = plog.sync()
        assert final == plog.next_offset
        assert fs.fsync_of_closed_fd == 0
        records = plog.read(plog.first_offset, max_messages=100_000, max_bytes=1 << 30).records
        assert [r.offset for r in records] == list(range(plog.first_offset, plog.next_offset))
        store.close()
