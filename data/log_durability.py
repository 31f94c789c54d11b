"""Durability and the side files of one partition's log: fsync of what was appended (group commit calls ``sync``), the replication state file, and the idempotent producers' snapshots.

Must not import: Twisted, sockets, ``broker``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from data import paths
from data.atomic import read_json, write_atomic, write_json_atomic
from data.fs import FileLayer
from data.log_reads import _READ_FLAGS
from data.segment import Segment

_INDEX_SYNC_EVERY = 64
"""Every how many ``sync()`` calls the active segment's indexes are fsynced too."""


def _fsync_path(fs: FileLayer, path: str) -> None:
    try:
        fd = fs.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return  # deleted by retention or truncation meanwhile: nothing left to make durable
    try:
        fs.fsync(fd)
    finally:
        fs.close(fd)


class LogDurability:
    """Part of ``PartitionLog`` (``data.log``): sync, the state file and producer snapshots."""

    def has_unsynced(self) -> bool:
        """True when an append, a roll or a new file is not yet covered by an fsync."""
        return self.durable_offset < self.next_offset or bool(self._pending) or self._dir_dirty

    def sync(self) -> int:
        """fsync data and indexes; return the new ``durable_offset``.

        Safe in a worker thread while the reactor thread appends and reads: the target
        offset and the fds are captured under the lock, the fsyncs run without it. A failed
        fsync marks the partition failed for good (``StorageError``; never retried).
        """
        fs = self._fs
        with self._sync_lock:
            with self._lock:
                if self.failed is not None:
                    raise self._failure()
                if self._closed or not self.has_unsynced():
                    return self.durable_offset
                # What the files hold follows the log at each sync: the active segment's
                # index entries written behind go out now (two writes per sync, not per
                # append), fsynced with its indexes every _INDEX_SYNC_EVERY syncs.
                self._flush_indexes(self._active)
                target = self.next_offset
                epoch = self._epoch
                pending = list(self._pending)
                fds: list[int] = []
                by_path: list[str] = []
                for seg in pending:
                    if seg.log_fd is not None:
                        fds.extend(seg.write_fds())
                    else:
                        by_path.extend(seg.files())
                # The data is durable once the log is: indexes are rebuilt from the log by
                # recovery (entries past the log's end are skipped), so the active
                # segment's indexes are fsynced only every _INDEX_SYNC_EVERY syncs (and when
                # sealed or closed). That keeps one fsync per group commit, not three.
                self._syncs += 1
                if self._syncs % _INDEX_SYNC_EVERY == 0:
                    fds.extend(self._active.write_fds())
                elif self._active.log_fd is not None:
                    fds.append(self._active.log_fd)
                dir_dirty = self._dir_dirty
                self._dir_dirty = False
                self._sync_in_flight = True
            error: OSError | None = None
            try:
                for fd in fds:
                    fs.fsync(fd)
                for path in by_path:
                    _fsync_path(fs, path)
                if dir_dirty:
                    fs.fsync_dir(self.path)
            except OSError as exc:
                error = exc
            with self._lock:
                self._sync_in_flight = False
                if error is None:
                    for seg in pending:
                        if seg in self._pending:
                            self._pending.remove(seg)
                            for fd in seg.take_write_fds():
                                self._close_quietly(fd)
                self._empty_graveyard()
                if error is not None:
                    self._fail("fsync", error)
                    raise self._failure() from error
                if epoch == self._epoch and target > self.durable_offset:
                    self.durable_offset = target
                return self.durable_offset

    def _empty_graveyard(self) -> None:
        for fd in self._graveyard:
            self._close_quietly(fd)
        self._graveyard.clear()

    def _discard_write_fds(self, seg: Segment) -> None:
        """Close a deleted segment's write fds, or bury them while a sync may use them."""
        fds = seg.take_write_fds()
        if self._sync_in_flight:
            self._graveyard.extend(fds)
        else:
            for fd in fds:
                self._close_quietly(fd)

    def _close_quietly(self, fd: int) -> None:
        try:
            self._fs.close(fd)
        except OSError as exc:
            self._log.warning("%s/%d: close(%d) failed: %s", self.topic, self.partition, fd, exc)

    def load_state(self) -> dict:
        """The partition's small replication state (``state.json``), ``{}`` when absent."""
        state = read_json(paths.state_path(self.path), {}, self._fs)
        if not isinstance(state, dict):
            raise ValueError(f"{paths.state_path(self.path)}: expected a JSON object")
        return state

    def save_state(self, state: dict) -> None:
        """Replace ``state.json`` atomically and durably (tmp, fsync, rename, dir fsync)."""
        write_json_atomic(paths.state_path(self.path), state, self._fs)

    def _producer_snapshots(self) -> list[int]:
        """Offsets of the producer snapshots in the partition folder, ascending."""
        found = (paths.parse_producer_snapshot_name(n) for n in self._fs.listdir(self.path))
        return sorted(at for at in found if at is not None)

    def _drop_producer_snapshots(self, which: Callable[[int], bool]) -> None:
        for at in self._producer_snapshots():
            if which(at):
                self._fs.remove(paths.producer_snapshot_path(self.path, at))

    def save_producer_snapshot(self, offset: int, data: bytes) -> None:
        """Keep ``data`` (opaque here: ``replication.producer_state``'s snapshot bytes) as
        the partition's producer state as of ``offset``, atomically and durably; older
        snapshots go. ``truncate_to`` drops snapshots past the new end."""
        if not 0 <= offset <= self.next_offset:
            raise ValueError(f"producer snapshot at {offset} outside the log (end "
                             f"{self.next_offset})")
        write_atomic(paths.producer_snapshot_path(self.path, offset), data, self._fs)
        self._drop_producer_snapshots(lambda at: at < offset)

    def load_producer_snapshot(self) -> tuple[int, bytes] | None:
        """The newest producer snapshot at or below the log end, ``(offset, data)``, or
        None. Snapshots past the log end (its tail was lost in a crash) are removed."""
        self._drop_producer_snapshots(lambda at: at > self.next_offset)
        found = self._producer_snapshots()
        if not found:
            return None
        at = found[-1]
        fd = self._fs.open(paths.producer_snapshot_path(self.path, at), os.O_RDONLY)
        try:
            return at, self._fs.pread(fd, self._fs.fstat_size(fd), 0)
        finally:
            self._fs.close(fd)
