"""One partition's log: append, read, sync, truncate, retention, compaction, state file.

Owns: ``PartitionLog`` (a list of segments, the last one active) and the concurrency
contract with the broker's group committer. This module keeps appending, rolling and
closing; the class's other parts are their own modules: ``data.log_reads`` (reads and the
``ReadResult`` they return, timestamps), ``data.log_cleanup`` (compaction, truncation,
retention) and ``data.log_durability`` (sync, the state file, producer snapshots).

* ``append``/``append_framed``/``append_records``/``read``/``read_raw``/``truncate_to``/
  ``enforce_retention`` run on one thread (the reactor). ``sync()`` may run in a worker
  thread at the same time.
* ``_lock`` guards what both sides touch: the offsets, the list of sealed segments still
  waiting for an fsync (``_pending``), the fds in flight, ``failed``. ``sync()`` captures
  its target offset and fds under the lock, releases it for the fsyncs themselves, and
  takes it again to publish ``durable_offset``. ``_sync_lock`` lets one sync run at a time.
* No fd a sync may be using is closed under it: a rolled segment's write fds are closed by
  the sync that fsynced them (or, when no sync is in flight, at the next roll, after which
  a sync fsyncs that segment by path); fds of segments deleted while a sync is in flight go
  to a graveyard the sync empties when it ends.
* Compaction (``data.cleaner``): ``plan_clean`` and ``install_clean`` run on the reactor
  thread under ``_lock``; the pass between them (``build_clean``) may run in a worker
  thread: it reads only the planned sealed segments and writes only new ``.cleaned`` files.
  ``install_clean`` swaps the output in only if the planned segments are still the log's
  first ones (``_swap_in`` has the crash-safe steps).
* An I/O error on a write or an fsync sets ``failed``; from then on writes and syncs raise
  ``StorageError`` until a restart (whose recovery checks the tail again). Other partitions
  are not affected. A failed fsync is never retried and never reported durable.

``Record`` is defined with the byte layout in ``data.format`` and re-exported here.

Must not import: Twisted, anything of the broker except ``broker.errors``.
"""

from __future__ import annotations

import logging
import os
import threading
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence

from data import paths
from data.cleaner import (
    write_compacted,
)
from data.errors import StorageError
from data.format import HEADER, HEADER_SIZE, MAX_U32, Record, check_record
from data.fs import FileLayer
from data.index import (
    POSITION_SIZE,
    new_positions,
    new_time_arrays,
    positions_from_bytes,
    positions_to_bytes,
    time_entries_to_bytes,
)
from data.log_cleanup import MIN_CLEANABLE_DIRTY_RATIO, LogCleanup, RemovedSegment
from data.log_durability import LogDurability, _fsync_path
from data.log_reads import _READ_FLAGS, LogReads, RawReadResult, ReadResult, _IndexDamaged
from data.segment import WRITE_FLAGS, Segment
from data.writer import build_batch, scan_stamped, stamp_framed, stamp_framed_with_ids, write_all

__all__ = ["Record", "ReadResult", "RawReadResult", "RemovedSegment", "PartitionLog",
           "MIN_CLEANABLE_DIRTY_RATIO"]


_MAX_READ_FDS = 16
"""Sealed segments keep at most this many read-only fd pairs open per partition (LRU)."""

_INDEX_BEHIND = 16384
"""The active segment's index entries kept in memory only, at most, before they are
written to its ``.index`` (64 KiB of them): besides that bound, a sync, a roll, a cut and
the close write them (``_flush_indexes``)."""








class PartitionLog(LogReads, LogCleanup, LogDurability):
    """The log of one partition: offsets from ``first_offset`` to ``next_offset - 1``, dense
    except where compaction removed records (compacted segments, ``Segment.span``).

    Built by ``data.store.Store`` from segments that ``data.recovery`` opened and checked;
    the last segment is the active one (write fds open, indexes in memory).
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        path: str,
        segments: list[Segment],
        *,
        fs: FileLayer,
        now_us: Callable[[], int],
        segment_bytes: int,
        segment_ms: int,
        fsync_policy: str = "always",
        logger: logging.Logger | None = None,
    ) -> None:
        if not segments:
            raise ValueError("a partition log needs at least its active segment")
        self.topic = topic
        self.partition = partition
        self.path = path
        self.fsync_policy = fsync_policy
        self._fs = fs
        self._now_us = now_us
        self._segment_bytes = segment_bytes
        self._segment_us = segment_ms * 1000
        self._log = logger or logging.getLogger("skerry.data")
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._active = segments[-1]
        self.next_offset: int = self._active.end_offset
        self.durable_offset: int = self.next_offset
        self.failed: StorageError | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._pending: list[Segment] = []
        self._graveyard: list[int] = []
        self._sync_in_flight = False
        self._syncs = 0
        self._dir_dirty = False
        self._epoch = 0
        self._cleaning = False
        self.accept_gaps = any(seg.span is not None for seg in segments)
        """Whether ``append_records`` takes records with gaps (the store sets it for a
        compacted topic; a log holding compacted segments takes them anyway)."""
        self._read_lru: OrderedDict[int, Segment] = OrderedDict()
        # A producer snapshot past the recovered end describes records a crash took: were it
        # kept, new records could reach its offset before it is read and it would pass.
        self._drop_producer_snapshots(lambda at: at > self.next_offset)

    def set_segment_limits(self, segment_bytes: int, segment_ms: int) -> None:
        """New roll limits (a topic's ``segment_bytes``/``segment_ms`` altered)."""
        with self._lock:
            self._segment_bytes = segment_bytes
            self._segment_us = segment_ms * 1000

    # --- small public facts ---------------------------------------------------------------

    @property
    def first_offset(self) -> int:
        """The first retained offset (the log start)."""
        return self._segments[0].base_offset

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def segment_bases(self) -> tuple[int, ...]:
        """Each segment's first offset, oldest first (the last one is the active segment)."""
        return tuple(s.base_offset for s in self._segments)

    def size_bytes(self) -> int:
        """Bytes of record data in the partition's logs (indexes not counted)."""
        return sum(s.size for s in self._segments)

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic}/{self.partition}, {self.first_offset}..{self.next_offset})"

    # --- appending ----------------------------------------------------------------------

    def append(
        self,
        payloads: Sequence[bytes],
        user_headers: Sequence[bytes] | None = None,
        *,
        ids: Sequence[int] | None = None,
        origin_timestamps: Sequence[int] | None = None,
    ) -> int:
        """Append a batch; return the offset of its first message.

        The store stamps offsets and the timestamp (one ``now_us()`` per batch); an id of 0
        (or no ``ids``) becomes a random UUIDv4; ``origin_timestamp`` defaults to the
        timestamp. The whole batch is one ``write`` to the log (plus the index writes).
        Raises ``ValueError`` for bad input (nothing written) and ``StorageError`` on an
        I/O error (the partition is then failed: it refuses writes until a restart).
        """
        n = len(payloads)
        with self._lock:
            self._check_writable()
            first = self.next_offset
            if n == 0:
                return first
            now = self._now_us()
            active = self._active
            # Build (and so validate) before rolling: bad input changes nothing on disk. It
            # is built where it goes when the segment does not roll, and its length is the
            # size the roll is decided on (summing every payload's and header's length for
            # that took a tenth of the broker's CPU on a Spark write); a roll, once a
            # segment, builds it again at position 0. A batch that would end past 4 GiB in
            # the active segment (a ValueError there) rolls too, when it fits a new one.
            try:
                data, ends = build_batch(payloads, user_headers, ids, origin_timestamps, first,
                                         now, active.size)
                roll = bool(active.count) and self._should_roll(active, len(data), now)
            except ValueError:
                if not active.count:
                    raise
                roll = True
            if roll:
                data, ends = build_batch(payloads, user_headers, ids, origin_timestamps, first,
                                         now, 0)
                active = self._roll()
            self._write_batch(active, data, ends, now, now)
            return first

    def append_framed(self, messages: bytes | bytearray, ends: Sequence[int] | None = None,
                      ids: bytes | None = None) -> int:
        """Append messages that arrive already framed as records; return the first offset.

        ``messages`` is records back to back (64-byte header, payload, user headers: Iggy's
        SendMessages area), ``ends`` the end of each in ``messages`` (walked from the headers
        when ``None``). The store stamps offset, timestamp (one ``now_us()`` per batch), a
        random UUIDv4 where the id is 0, and the checksum; payload, user headers and
        ``origin_timestamp`` are kept. The result on disk is what ``append`` writes for the
        same messages split apart. ``ids`` (16 bytes a record, with ``ends``): each record's
        id, in place of the one it carries (``stamp_framed_with_ids``: an idempotent
        producer's batch). ``ValueError`` for bad framing (nothing written);
        ``StorageError`` on an I/O error, as for ``append``.
        """
        with self._lock:
            self._check_writable()
            first = self.next_offset
            now = self._now_us()
            active = self._active
            roll = bool(active.count) and self._should_roll(active, len(messages), now)
            at = 0 if roll else active.size
            if ids is None:
                data, positions = stamp_framed(messages, ends, first, now, at)
            elif ends is None:
                raise ValueError("ids without ends")
            else:
                data, positions = stamp_framed_with_ids(messages, ends, first, now, at, ids)
            if roll:
                active = self._roll()
            self._write_batch(active, data, positions, now, now)
            return first

    def append_records(self, raw: bytes) -> int:
        """Append records someone else stamped (a follower copying its leader, a restore).

        The bytes are written unchanged after checking framing, ``reserved``, checksums,
        and that offsets are dense from ``next_offset``. Returns the first offset.
        ``ValueError`` on bad input (nothing written); ``StorageError`` on an I/O error.

        Where ``accept_gaps`` (a compacted topic), records copied from a compacted log may
        skip offsets (strictly increasing from ``next_offset`` on): they are written as one
        compacted segment of their own, which covers ``next_offset`` to their last offset
        (``_append_gapped``). Elsewhere a gap is refused as bad input.
        """
        with self._lock:
            self._check_writable()
            first = self.next_offset
            active = self._active
            roll = bool(active.count) and self._should_roll(active, len(raw), self._now_us())
            position = 0 if roll else active.size
            try:
                # checked (and the index positions made) where the records will land, in
                # one pass (compiled, data.speedups); bad input changes nothing on disk
                batch = scan_stamped(raw, first, position)
            except ValueError:
                if not self.accept_gaps:
                    raise
                gapped = _scan_gapped(raw, first)
                if gapped is None:
                    raise
                self._append_gapped(bytes(raw), *gapped)
                return first
            if roll:
                active = self._roll()
            ends = batch.ends
            if ends[-1] > MAX_U32:  # cannot happen: _should_roll checks it, scan_stamped too
                raise ValueError(f"batch of {len(raw)} bytes does not fit segment {active.name}")
            self._write_batch(active, raw, ends, batch.max_timestamp, batch.first_timestamp)
            return first

    def _should_roll(self, active: Segment, batch_size: int, now: int) -> bool:
        if active.size + batch_size > self._segment_bytes or active.size + batch_size > MAX_U32:
            return True
        first_ts = active.first_timestamp
        return first_ts is not None and now - first_ts >= self._segment_us

    def _check_writable(self) -> None:
        if self.failed is not None:
            raise self._failure()
        if self._closed:
            raise StorageError(f"partition {self.topic}/{self.partition} is closed")

    def _write_batch(self, active: Segment, data: bytes | bytearray, ends: list[int], max_ts: int, first_ts: int) -> None:
        """Write a built batch to the active segment and its indexes (lock held)."""
        fs = self._fs
        n = len(ends) - 1
        old_size = active.size
        rel = active.count
        assert active.log_fd is not None and active.index_fd is not None and active.timeindex_fd is not None
        # The indexes are written behind the log, a sync's or _INDEX_BEHIND entries' worth
        # at a time: the active segment's readers use its in-memory arrays, and recovery
        # rebuilds index entries missing after a crash from the log (it checks them against
        # it anyway). Written before this batch, so a failure refuses it and leaves it out.
        if rel - active.index_on_disk >= _INDEX_BEHIND:
            self._flush_indexes(active)
        try:
            write_all(fs, active.log_fd, data)
        except OSError as exc:
            self._fail(f"write of {len(data)} bytes to {active.name}", exc)
            self._undo_tail(active, old_size)
            raise self._failure() from exc
        positions = new_positions(ends[:-1])
        new_entry = active.max_timestamp is None or max_ts > active.max_timestamp
        assert active.positions is not None and active.time_ts is not None and active.time_rel is not None
        active.positions.extend(positions)
        if new_entry:
            active.time_ts.append(max_ts)
            active.time_rel.append(rel)
            active.time_entries += 1
            active.max_timestamp = max_ts
        if rel == 0:
            active.first_timestamp = first_ts
        active.count = rel + n
        active.size = ends[-1]
        self.next_offset += n

    def _flush_indexes(self, seg: Segment) -> None:
        """Write the index entries ``seg`` holds in memory only (lock held). An I/O error
        fails the partition (``StorageError``): the log is intact, and the restart's
        recovery rebuilds the entries from it."""
        try:
            self._write_indexes(seg)
        except OSError as exc:
            self._fail(f"index write for {seg.name}", exc)
            raise self._failure() from exc

    def _write_indexes(self, seg: Segment) -> None:
        """``_flush_indexes`` without the failure handling (``OSError`` goes to the caller)."""
        positions, time_ts, time_rel = seg.positions, seg.time_ts, seg.time_rel
        if positions is None or time_ts is None or time_rel is None:
            return  # not an active segment: its files are whole
        count, entries = seg.count, seg.time_entries
        assert seg.index_fd is not None and seg.timeindex_fd is not None
        if seg.index_on_disk < count:
            write_all(self._fs, seg.index_fd, positions_to_bytes(positions[seg.index_on_disk:count]))
            seg.index_on_disk = count
        if seg.time_on_disk < entries:
            write_all(self._fs, seg.timeindex_fd, time_entries_to_bytes(
                time_ts[seg.time_on_disk:entries], time_rel[seg.time_on_disk:entries]))
            seg.time_on_disk = entries

    def _undo_tail(self, active: Segment, size: int) -> None:
        """Best effort after a failed write: cut what the batch may have left behind (its
        index entries are never written before its log)."""
        try:
            if active.log_fd is not None:
                self._fs.ftruncate(active.log_fd, size)
        except OSError as exc:
            self._log.warning("%s/%d: could not cut the failed batch off %s: %s", self.topic, self.partition, active.name, exc)

    def _failure(self) -> StorageError:
        """A fresh exception carrying the partition's failure (raise it from the cause)."""
        return StorageError(self.failed.message if self.failed else "storage failure")

    def _fail(self, what: str, exc: OSError) -> None:
        if self.failed is None:
            self.failed = StorageError(
                f"partition {self.topic}/{self.partition}: {what} failed: {exc}; writes refused until restart"
            )
            self._log.error("%s", self.failed.message)

    def _append_gapped(self, raw: bytes, offsets: list[int], starts: list[int], stamps: list[int]) -> None:
        """Append records with gaps as a compacted segment from ``next_offset`` to their last
        offset, then start a new active segment after it (lock held). Crash-safe as a
        cleaner's swap: written under ``.cleaned`` names, committed by renaming to ``.swap``."""
        base = self.next_offset
        span = offsets[-1] + 1 - base
        fs = self._fs
        try:
            out = write_compacted(fs, self.path, base, span, [raw], new_positions([o - base for o in offsets]),
                                  new_positions(starts), stamps, paths.CLEANED_SUFFIX)
            fs.fsync_dir(self.path)
            active = self._active
            at = len(self._segments) - 1
            replaced: list[Segment] = []
            if active.count == 0:
                replaced = [active]
            else:
                self._seal(active)
                at += 1
            self._swap_in(at, replaced, [out])
            self._start_active(base + span)
        except OSError as exc:
            self._fail(f"appending records {offsets[0]}..{offsets[-1]} with gaps", exc)
            raise self._failure() from exc
        self.next_offset = base + span

    def _seal(self, seg: Segment) -> None:
        """The active segment becomes sealed (its write fds wait for a sync) (lock held)."""
        self._flush_indexes(seg)
        seg.positions = None
        seg.time_ts = seg.time_rel = None
        self._pending.append(seg)
        self._dir_dirty = True

    def _start_active(self, base: int) -> None:
        """A new, empty active segment at ``base`` after the last one (lock held)."""
        new = Segment(self.path, base)
        self._open_write_fds(new, truncate=True)
        new.positions = new_positions()
        new.time_ts, new.time_rel = new_time_arrays()
        self._segments.append(new)
        self._bases.append(base)
        self._active = new
        self._fs.fsync_dir(self.path)

    def _swap_in(self, at: int, old: list[Segment], new: list[Segment]) -> None:
        """Replace ``self._segments[at:at + len(old)]`` by the compacted segments ``new``,
        whose files are written and fsynced under ``.cleaned`` names (lock held).

        On disk: every new file is renamed ``.cleaned`` -> ``.swap`` (indexes first, the
        log last: a segment's ``.log.swap`` is its commit point), the folder fsynced, the
        old segments' files removed, each ``.swap`` renamed to its final name (the log
        last), the folder fsynced after each rename. Recovery (``data.recovery``) removes ``.cleaned`` files
        and finishes any swap whose ``.log.swap`` exists, so a crash at any step leaves
        either the old segments or the new ones."""
        fs = self._fs
        for seg in new:
            for name in seg.files()[::-1]:
                fs.replace(name + paths.CLEANED_SUFFIX, name + paths.SWAP_SUFFIX)
        fs.fsync_dir(self.path)
        for seg in old:
            self._delete_segment_files(seg)
        for seg in new:
            for name in seg.files()[::-1]:
                fs.replace(name + paths.SWAP_SUFFIX, name)
                fs.fsync_dir(self.path)  # each rename durable before the next one
        self._segments[at:at + len(old)] = new
        self._bases = [s.base_offset for s in self._segments]
        self._epoch += 1

    # --- segments -----------------------------------------------------------------------

    def _open_write_fds(self, seg: Segment, truncate: bool) -> None:
        """Open ``seg``'s write fds; ``truncate`` creates (or empties) the files."""
        flags = WRITE_FLAGS | (os.O_CREAT | os.O_TRUNC if truncate else 0)
        opened: list[int] = []
        try:
            for attr, path in (("log_fd", seg.log_path), ("index_fd", seg.index_path), ("timeindex_fd", seg.timeindex_path)):
                if getattr(seg, attr) is None:
                    fd = self._fs.open(path, flags, 0o644)
                    opened.append(fd)
                    setattr(seg, attr, fd)
        except OSError:
            for fd in opened:
                self._close_quietly(fd)
            seg.log_fd = seg.index_fd = seg.timeindex_fd = None
            raise

    def _roll(self) -> Segment:
        """Seal the active segment and start a new one at ``next_offset`` (lock held)."""
        old = self._active
        self._flush_indexes(old)
        new = Segment(self.path, self.next_offset)
        try:
            self._open_write_fds(new, truncate=True)
        except OSError as exc:
            self._fail(f"creating segment {new.name}", exc)
            raise self._failure() from exc
        new.positions = new_positions()
        new.time_ts, new.time_rel = new_time_arrays()
        old.positions = None
        old.time_ts = old.time_rel = None
        self._pending.append(old)
        self._segments.append(new)
        self._bases.append(new.base_offset)
        self._active = new
        self._dir_dirty = True
        if not self._sync_in_flight:
            # Bound the fds held for unsynced sealed segments: all but the newest are
            # closed now and fsynced by path when a sync comes.
            for seg in self._pending[:-1]:
                for fd in seg.take_write_fds():
                    self._close_quietly(fd)
        self._log.debug("%s/%d: rolled to %s", self.topic, self.partition, new.name)
        return new

    def _segment_for(self, offset: int) -> Segment:
        return self._segments[bisect_right(self._bases, offset) - 1]

    def _read_fds(self, seg: Segment) -> tuple[int, int]:
        """(log fd, index fd) for reading ``seg``: the active's write fds, or read-only fds."""
        if seg is self._active:
            assert seg.log_fd is not None and seg.index_fd is not None
            return seg.log_fd, seg.index_fd
        lru = self._read_lru
        if seg.read_fd is None or seg.index_read_fd is None:
            for fd in seg.take_read_fds():
                self._close_quietly(fd)
            log_fd = self._fs.open(seg.log_path, _READ_FLAGS)
            try:
                seg.index_read_fd = self._fs.open(
                    seg.index_path if seg.span is None else seg.sindex_path, _READ_FLAGS)
            except OSError:
                self._close_quietly(log_fd)
                raise
            seg.read_fd = log_fd
            lru[seg.base_offset] = seg
            while len(lru) > _MAX_READ_FDS:
                _base, evicted = lru.popitem(last=False)
                for fd in evicted.take_read_fds():
                    self._close_quietly(fd)
        else:
            lru.move_to_end(seg.base_offset)
        assert seg.read_fd is not None and seg.index_read_fd is not None
        return seg.read_fd, seg.index_read_fd

    def _ends(self, seg: Segment, rel: int, n: int) -> list[int]:
        """File positions of records ``rel .. rel + n - 1`` of ``seg`` and the end of the last."""
        return self._end_array(seg, rel, n).tolist()

    def _end_array(self, seg: Segment, rel: int, n: int) -> array[int]:
        """``_ends`` as an ``array`` of u32: a read converts to Python ints only the
        positions of the records it takes (a Kafka fetch asks for up to ``budget // 26``
        records and takes a fifth of them)."""
        if seg.positions is not None:
            ends = seg.positions[rel : rel + n + 1]
        else:
            _log_fd, index_fd = self._read_fds(seg)
            m = min(n + 1, seg.count - rel)
            raw = self._fs.pread(index_fd, m * POSITION_SIZE, rel * POSITION_SIZE)
            if len(raw) != m * POSITION_SIZE:
                raise _IndexDamaged(f"{seg.index_path} is shorter than its {seg.count} entries")
            ends = positions_from_bytes(raw)
        if len(ends) == n:
            ends.append(seg.size)
        return ends

    # --- closing ------------------------------------------------------------------------

    def close(self, *, sync: bool = True) -> None:
        """fsync everything unsynced (unless failed, or ``sync=False`` for a log about to be
        deleted) and close every fd. Waits for a sync in flight. Idempotent."""
        with self._sync_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            fs = self._fs
            try:
                if sync and self.failed is None:
                    self._write_indexes(self._active)
                    for seg in self._pending:
                        if seg.log_fd is not None:
                            for fd in seg.write_fds():
                                fs.fsync(fd)
                        else:
                            for path in seg.files():
                                _fsync_path(fs, path)
                    for fd in self._active.write_fds():
                        fs.fsync(fd)
                    if self._dir_dirty:
                        fs.fsync_dir(self.path)
                    self.durable_offset = self.next_offset
            except OSError as exc:
                self._fail("index write or fsync at close", exc)
            finally:
                for seg in self._segments:
                    for fd in seg.take_write_fds() + seg.take_read_fds():
                        self._close_quietly(fd)
                for seg in self._pending:
                    for fd in seg.take_write_fds():
                        self._close_quietly(fd)
                self._pending.clear()
                self._read_lru.clear()
                self._empty_graveyard()












def _scan_gapped(raw: bytes | bytearray | memoryview, first: int) -> tuple[list[int], list[int], list[int]] | None:
    """``(offsets, starts, timestamps)`` of intact records whose offsets increase strictly
    from ``first`` on with at least one gap; None when ``raw`` is anything else."""
    data = bytes(raw)
    pos = 0
    offsets: list[int] = []
    starts: list[int] = []
    stamps: list[int] = []
    expect = first
    while pos < len(data):
        if check_record(data, pos) is not None:
            return None
        _ck, _lo, _hi, off, ts, _ots, uhl, pl, _rsv = HEADER.unpack_from(data, pos)
        if off < expect:
            return None
        offsets.append(off)
        starts.append(pos)
        stamps.append(ts)
        expect = off + 1
        pos += HEADER_SIZE + pl + uhl
    if not offsets or offsets[-1] - first + 1 == len(offsets) or pos > MAX_U32:
        return None
    return offsets, starts, stamps
