"""One partition's log: append, read, sync, truncate, retention, compaction, state file.

Owns: ``PartitionLog`` (a list of segments, the last one active), the ``ReadResult`` it
returns, and the concurrency contract with the broker's group committer:

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
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from data import paths
from data.atomic import read_json, write_json_atomic
from data.cleaner import (
    CleanAborted,
    CleanPlan,
    CleanPolicy,
    CleanStats,
    build_clean,
    discard_clean,
    load_sindex,
    segment_records,
    write_compacted,
)
from data.errors import StorageError
from data.format import HEADER, HEADER_SIZE, MAX_U32, Record, check_record, decode_record
from data.fs import FileLayer
from data.index import (
    POSITION_SIZE,
    TIME_ENTRY,
    TIME_ENTRY_SIZE,
    find_time_entry,
    new_positions,
    new_time_arrays,
    positions_from_bytes,
    positions_to_bytes,
    time_entries_from_bytes,
    time_entry_bytes,
)
from data.reader import RunResult, decode_run, first_timestamp_at_or_after, scan_log, verify_run
from data.segment import WRITE_FLAGS, Segment
from data.writer import build_batch, scan_stamped, stamp_framed, write_all

__all__ = ["Record", "ReadResult", "RawReadResult", "RemovedSegment", "PartitionLog",
           "MIN_CLEANABLE_DIRTY_RATIO"]

MIN_CLEANABLE_DIRTY_RATIO = 0.5
"""A cleaning pass starts once segments never cleaned make this share of the cleanable
bytes (Kafka's ``min.cleanable.dirty.ratio`` default)."""

_READ_FLAGS = os.O_RDONLY
_MAX_READ_FDS = 16
_INDEX_SYNC_EVERY = 64
"""Every how many ``sync()`` calls the active segment's indexes are fsynced too."""
"""Sealed segments keep at most this many read-only fd pairs open per partition (LRU)."""


@dataclass
class ReadResult:
    """What ``PartitionLog.read`` returns.

    ``raw`` is the exact on-disk bytes of exactly ``records``, concatenated (replication and
    Iggy polls send it as is); ``next_offset`` is the offset to read next: after the last
    returned record (or after a gap that ends the read), or the (clamped) start offset when
    nothing was returned. Records are in offset order; ``gapped`` is True when their
    offsets are not exactly ``next_offset - len(records) .. next_offset - 1`` (a compacted
    topic: look at each record's offset).
    """

    records: list[Record]
    raw: bytes
    next_offset: int
    gapped: bool = False


@dataclass
class RawReadResult:
    """What ``PartitionLog.read_raw`` returns: the same read as ``read`` without the
    ``Record`` tuples. ``raw`` is the exact on-disk bytes of ``count`` records with dense
    offsets from ``next_offset - count`` unless ``gapped`` (compacted topics: each record
    carries its own offset); ``next_offset`` as for ``ReadResult``; ``ends`` the end
    position of each record in ``raw`` (``count`` entries, the last is ``len(raw)``)."""

    raw: bytes
    count: int
    next_offset: int
    ends: list[int] = field(default_factory=list)
    gapped: bool = False


@dataclass(frozen=True)
class RemovedSegment:
    """A segment that retention deleted: offsets ``[base_offset, end_offset)``."""

    topic: str
    partition: int
    base_offset: int
    end_offset: int
    size_bytes: int
    reason: str


class PartitionLog:
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
            roll = False
            if active.count:
                size = HEADER_SIZE * n + sum(map(len, payloads))
                if user_headers is not None:
                    size += sum(map(len, user_headers))
                roll = self._should_roll(active, size, now)
            # Build (and so validate) before rolling: bad input changes nothing on disk.
            data, ends = build_batch(payloads, user_headers, ids, origin_timestamps, first, now, 0 if roll else active.size)
            if roll:
                active = self._roll()
            self._write_batch(active, data, ends, now, now)
            return first

    def append_framed(self, messages: bytes | bytearray, ends: Sequence[int] | None = None) -> int:
        """Append messages that arrive already framed as records; return the first offset.

        ``messages`` is records back to back (64-byte header, payload, user headers: Iggy's
        SendMessages area), ``ends`` the end of each in ``messages`` (walked from the headers
        when ``None``). The store stamps offset, timestamp (one ``now_us()`` per batch), a
        random UUIDv4 where the id is 0, and the checksum; payload, user headers and
        ``origin_timestamp`` are kept. The result on disk is what ``append`` writes for the
        same messages split apart. ``ValueError`` for bad framing (nothing written);
        ``StorageError`` on an I/O error, as for ``append``.
        """
        with self._lock:
            self._check_writable()
            first = self.next_offset
            now = self._now_us()
            active = self._active
            roll = bool(active.count) and self._should_roll(active, len(messages), now)
            data, positions = stamp_framed(messages, ends, first, now, 0 if roll else active.size)
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
            try:
                batch = scan_stamped(raw, first)
            except ValueError:
                if not self.accept_gaps:
                    raise
                gapped = _scan_gapped(raw, first)
                if gapped is None:
                    raise
                self._append_gapped(bytes(raw), *gapped)
                return first
            active = self._active
            if active.count and self._should_roll(active, len(raw), self._now_us()):
                active = self._roll()
            ends = batch.ends if active.size == 0 else [active.size + e for e in batch.ends]
            if ends[-1] > MAX_U32:  # cannot happen after a roll: _should_roll checks it
                raise ValueError(f"batch of {len(raw)} bytes does not fit segment {active.name}")
            self._write_batch(active, bytes(raw), ends, batch.max_timestamp, batch.first_timestamp)
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
        try:
            write_all(fs, active.log_fd, data)
        except OSError as exc:
            self._fail(f"write of {len(data)} bytes to {active.name}", exc)
            self._undo_tail(active, old_size, rel)
            raise self._failure() from exc
        positions = new_positions(ends[:-1])
        new_entry = active.max_timestamp is None or max_ts > active.max_timestamp
        try:
            write_all(fs, active.index_fd, positions_to_bytes(positions))
            if new_entry:
                write_all(fs, active.timeindex_fd, time_entry_bytes(max_ts, rel))
        except OSError as exc:
            self._fail(f"index write for {active.name}", exc)
            self._undo_tail(active, old_size, rel)
            raise self._failure() from exc
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

    def _undo_tail(self, active: Segment, size: int, count: int) -> None:
        """Best effort after a failed write: cut what the batch may have left behind."""
        try:
            if active.log_fd is not None:
                self._fs.ftruncate(active.log_fd, size)
            if active.index_fd is not None:
                self._fs.ftruncate(active.index_fd, count * POSITION_SIZE)
            if active.timeindex_fd is not None:
                self._fs.ftruncate(active.timeindex_fd, active.time_entries * TIME_ENTRY_SIZE)
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

    # --- compaction -----------------------------------------------------------------------

    def plan_clean(self, now_us: int, upto: int, policy: CleanPolicy, *, min_compaction_lag_ms: int = 0,
                   min_dirty_ratio: float = MIN_CLEANABLE_DIRTY_RATIO) -> CleanPlan | None:
        """What a cleaning pass may clean now, or None: the sealed segments from the log
        start that end at or below ``upto`` (the high watermark + 1) and whose newest record
        is at least ``min_compaction_lag_ms`` old, when the ones never cleaned make at least
        ``min_dirty_ratio`` of their bytes (Kafka's ``min.cleanable.dirty.ratio``; 0 cleans
        whatever is cleanable). One pass at a time: ``install_clean`` ends it."""
        with self._lock:
            if self._closed or self.failed is not None or self._cleaning:
                return None
            chosen: list[Segment] = []
            for seg in self._segments[:-1]:
                if seg.end_offset > upto:
                    break
                max_ts = self._max_timestamp(seg) if seg.count else None
                if max_ts is not None and now_us - max_ts < min_compaction_lag_ms * 1000:
                    break
                chosen.append(seg)
            if not chosen:
                return None
            dirty = sum(seg.size for seg in chosen if seg.span is None)
            total = sum(seg.size for seg in chosen)
            if min_dirty_ratio > 0 and (dirty == 0 or dirty < min_dirty_ratio * total):
                return None
            self._cleaning = True
            return CleanPlan(self.path, chosen, now_us, policy)

    def install_clean(self, plan: CleanPlan, stats: CleanStats | None) -> bool:
        """Swap a finished pass's output in (``stats``; None when the pass failed: only
        ends it). False, and the output thrown away, when the log changed under the pass
        (retention or a truncation removed one of its segments, or the log was closed)."""
        with self._lock:
            self._cleaning = False
            if stats is None:
                return False
            n = len(plan.segments)
            current = self._segments[:n]
            if (self._closed or self.failed is not None or len(current) != n
                    or any(a is not b for a, b in zip(current, plan.segments, strict=True))
                    or any(seg is self._active for seg in current)):
                discard_clean(self._fs, stats)
                return False
            try:
                self._swap_in(0, list(plan.segments), [out.segment for out in stats.outputs])
            except OSError as exc:
                self._fail("installing a cleaned segment", exc)
                raise self._failure() from exc
        self._log.info(
            "%s/%d: cleaned offsets %d..%d: %d of %d records kept, %d -> %d bytes",
            self.topic, self.partition, plan.segments[0].base_offset, plan.segments[-1].end_offset - 1,
            stats.records_kept, stats.records_read, stats.bytes_read, stats.bytes_written)
        return True

    def build_clean(self, plan: CleanPlan) -> CleanStats:
        """Build a planned pass (``data.cleaner.build_clean``): reads the plan's sealed
        segments and writes new files only, so it may run in a worker thread while this
        log appends; hand the result to ``install_clean`` on the log's thread."""
        return build_clean(self._fs, plan)

    def clean(self, now_us: int, upto: int, policy: CleanPolicy, *, min_compaction_lag_ms: int = 0,
              min_dirty_ratio: float = MIN_CLEANABLE_DIRTY_RATIO) -> CleanStats | None:
        """Plan, build and install one pass in the calling thread (tests, tools; the broker
        builds in a worker thread). None when there was nothing to clean or the pass was
        thrown away."""
        plan = self.plan_clean(now_us, upto, policy, min_compaction_lag_ms=min_compaction_lag_ms,
                               min_dirty_ratio=min_dirty_ratio)
        if plan is None:
            return None
        try:
            stats = build_clean(self._fs, plan)
        except (CleanAborted, OSError) as exc:
            self.install_clean(plan, None)
            self._log.warning("%s/%d: cleaning pass abandoned: %s", self.topic, self.partition, exc)
            return None
        return stats if self.install_clean(plan, stats) else None

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

    # --- reading ------------------------------------------------------------------------

    def read(self, offset: int, max_messages: int = 1000, max_bytes: int = 1 << 20, upto: int | None = None) -> ReadResult:
        """Records from ``offset`` on, in offset order.

        ``upto`` is an exclusive upper bound (the broker passes ``hw + 1``). An offset below
        ``first_offset`` reads from ``first_offset``. ``max_bytes`` bounds the sum of payload
        sizes, but one record is returned whenever one is available. A record whose checksum
        fails is never returned: the read stops before it, and when it is the first one,
        ``StorageError`` names its offset (and the logger reports it).
        """
        if self._closed:
            raise StorageError(f"partition {self.topic}/{self.partition} is closed")
        try:
            records: list[Record] = []
            raw, _count, at, gapped = self._read(offset, max_messages, max_bytes, upto, records)
            return ReadResult(records, raw, at, gapped)
        except OSError as exc:
            self._log.error("%s/%d: read at offset %d failed: %s", self.topic, self.partition, offset, exc)
            raise StorageError(f"partition {self.topic}/{self.partition}: read at offset {offset} failed: {exc}") from exc

    def read_raw(self, offset: int, max_messages: int = 1000, max_bytes: int = 1 << 20,
                 upto: int | None = None) -> RawReadResult:
        """``read`` for callers that send the stored bytes as they are (Iggy polls).

        The same records as ``read`` with the same arguments, checked the same way (a
        record whose checksum fails is never returned; when it is the first one,
        ``StorageError`` names its offset), but no ``Record`` tuple is built.
        """
        if self._closed:
            raise StorageError(f"partition {self.topic}/{self.partition} is closed")
        try:
            ends: list[int] = []
            raw, count, at, gapped = self._read(offset, max_messages, max_bytes, upto, None, ends)
        except OSError as exc:
            self._log.error("%s/%d: read at offset %d failed: %s", self.topic, self.partition, offset, exc)
            raise StorageError(f"partition {self.topic}/{self.partition}: read at offset {offset} failed: {exc}") from exc
        return RawReadResult(raw, count, at, ends, gapped)

    def _read(
        self, offset: int, max_messages: int, max_bytes: int, upto: int | None,
        records: list[Record] | None, ends_out: list[int] | None = None,
    ) -> tuple[bytes, int, int, bool]:
        """The read loop of ``read`` (``records`` gets the decoded records) and ``read_raw``
        (``records`` is None: checked, not decoded; ``ends_out`` gets each record's end in
        ``raw``). Returns ``(raw, count, next offset, gapped)``; a compacted segment's
        gaps are skipped (a read from a removed offset starts at the next record)."""
        start = offset if offset > self.first_offset else self.first_offset
        stop = self.next_offset if upto is None or upto > self.next_offset else upto
        raws: list[bytes] = []
        at = start
        left = max_messages
        budget = max_bytes
        repaired = False
        fs = self._fs
        got = 0
        first_found = -1
        while at < stop and left > 0:
            seg = self._segment_for(at)
            if seg.span is not None:
                part = self._read_compacted(seg, at, stop, left, budget, records, got == 0)
                if part.count:
                    if first_found < 0:
                        first_found = part.first
                    if ends_out is not None:
                        shift = ends_out[-1] if ends_out else 0
                        ends_out.extend([e + shift for e in part.ends])
                    raws.append(part.data)
                    got += part.count
                    left -= part.count
                    budget -= part.payload
                at = part.next_at
                if part.stopped:
                    break
                continue
            rel = at - seg.base_offset
            n = min(stop - at, seg.count - rel, left)
            if n <= 0:  # an empty segment (only the active one can be)
                break
            try:
                ends = self._end_array(seg, rel, n)
            except _IndexDamaged as exc:
                if not repaired and self._repair_index(seg):
                    repaired = True
                    continue
                raise StorageError(f"partition {self.topic}/{self.partition}: {exc}") from exc
            k = _records_to_read(ends, n, budget)
            p0 = ends[0]
            log_fd = self._read_fds(seg)[0]
            # The last of the k records may not fit the budget (it does not, when records
            # carry no user headers): it is read and checked apart, so that leaving it out
            # costs no copy of the whole read (``data[:consumed]``).
            sure = k - 1 if k > 1 and _payload_bound(ends, k - 1) <= budget else k
            data = fs.pread(log_fd, ends[sure] - p0, p0)
            rel_ends = (ends[: sure + 1].tolist() if p0 == 0 else
                        (np.frombuffer(ends, dtype=np.uint32, count=sure + 1).astype(np.int64)
                         - p0).tolist())
            if records is None:
                run = verify_run(data, rel_ends, at, budget, got == 0)
            else:
                run = decode_run(data, rel_ends, at, records, budget, got == 0)
            if sure < k and run.count == sure and not run.failed and not run.over_budget:
                tail = fs.pread(log_fd, ends[k] - ends[sure], ends[sure])
                if records is None:
                    last = verify_run(tail, [0, ends[k] - ends[sure]], at + sure,
                                      budget - run.payload, False)
                else:
                    last = decode_run(tail, [0, ends[k] - ends[sure]], at + sure, records,
                                      budget - run.payload, False)
                if last.count:
                    data += tail
                    rel_ends.append(rel_ends[-1] + len(tail))
                run = RunResult(run.count + last.count, run.consumed + last.consumed,
                                run.payload + last.payload, last.over_budget, last.failed)
            if run.count:
                if first_found < 0:
                    first_found = at
                if ends_out is not None:
                    shift = (ends_out[-1] if ends_out else 0) - rel_ends[0]
                    ends_out.extend(rel_ends[1 : run.count + 1] if shift == 0
                                    else [e + shift for e in rel_ends[1 : run.count + 1]])
                raws.append(data if run.consumed == len(data) else data[: run.consumed])
            at += run.count
            got += run.count
            left -= run.count
            budget -= run.payload
            if run.failed:
                if not repaired and seg is not self._active and self._repair_index(seg):
                    repaired = True
                    continue
                reason = self._why_bad(seg, at - seg.base_offset)
                self._log.error(
                    "%s/%d: corrupt record at offset %d in %s (%s); reads stop before it",
                    self.topic, self.partition, at, seg.name, reason,
                )
                if got == 0:
                    raise StorageError(
                        f"partition {self.topic}/{self.partition}: record at offset {at} is corrupt ({reason})"
                    )
                break
            if run.over_budget:
                break
        raw = raws[0] if len(raws) == 1 else b"".join(raws)
        return raw, got, at, got > 0 and first_found + got != at

    def _sparse_index(self, seg: Segment) -> tuple[array[int], array[int]]:
        """A compacted segment's relative offsets and positions (loaded on first use)."""
        if seg.rel_offsets is None or seg.spositions is None:
            try:
                load_sindex(self._fs, seg)
            except ValueError as exc:
                raise StorageError(f"partition {self.topic}/{self.partition}: {seg.sindex_path}: {exc}") from exc
        assert seg.rel_offsets is not None and seg.spositions is not None
        return seg.rel_offsets, seg.spositions

    def _read_compacted(self, seg: Segment, at: int, stop: int, left: int, budget: int,
                        records: list[Record] | None, take_first: bool) -> _Part:
        """The records of compacted segment ``seg`` from offset ``at`` (the next one after
        a gap) below ``stop``: at most ``left`` of them, within the payload ``budget``
        (one at least when ``take_first``). Checked one by one (compacted segments are
        small: the cleaner keeps one record per key)."""
        rels, poss = self._sparse_index(seg)
        base = seg.base_offset
        j = bisect_left(rels, at - base)
        jstop = bisect_left(rels, stop - base)
        seg_end = min(seg.end_offset, stop)
        m = min(jstop - j, left)
        if m <= 0:
            return _Part(b"", [], 0, -1, 0, seg_end, False)
        total = len(poss)
        p0 = poss[j]
        p1 = poss[j + m] if j + m < total else seg.size
        data = self._fs.pread(self._read_fds(seg)[0], p1 - p0, p0)
        ends: list[int] = []
        payload = 0
        count = 0
        stopped = False
        pos = 0
        for i in range(m):
            off = base + rels[j + i]
            end = (poss[j + i + 1] if j + i + 1 < total else seg.size) - p0
            reason = check_record(data, pos, off)
            if reason is None:
                *_rest, uhl, pl, _rsv = HEADER.unpack_from(data, pos)
                if pos + HEADER_SIZE + pl + uhl != end:
                    reason = "the offset index disagrees with the log"
            if reason is not None:
                self._log.error("%s/%d: corrupt record at offset %d in %s (%s); reads stop before it",
                                self.topic, self.partition, off, seg.name, reason)
                if count == 0 and take_first:
                    raise StorageError(
                        f"partition {self.topic}/{self.partition}: record at offset {off} is corrupt ({reason})")
                stopped = True
                break
            if payload + pl > budget and not (count == 0 and take_first):
                stopped = True
                break
            payload += pl
            if records is not None:
                records.append(decode_record(data, pos)[0])
            ends.append(end)
            count += 1
            pos = end
        if count == m and m == jstop - j:
            next_at = seg_end
        elif count:
            next_at = base + rels[j + count - 1] + 1
        else:
            next_at = at
        return _Part(data if pos == len(data) else data[:pos], ends, count,
                     base + rels[j] if count else -1, payload, next_at, stopped)

    def _why_bad(self, seg: Segment, rel: int) -> str:
        """Describe what is wrong with record ``rel`` of ``seg`` (for the log and the error)."""
        try:
            log_fd = self._read_fds(seg)[0]
            pos = self._ends(seg, rel, 1)[0]
            head = self._fs.pread(log_fd, HEADER_SIZE, pos)
            if len(head) == HEADER_SIZE:
                *_rest, uhl, pl, _rsv = HEADER.unpack(head)
                head = self._fs.pread(log_fd, HEADER_SIZE + pl + uhl, pos)
            return check_record(head, 0, seg.base_offset + rel) or "index disagrees with the log"
        except (OSError, _IndexDamaged) as exc:
            return f"unreadable: {exc}"

    def _repair_index(self, seg: Segment) -> bool:
        """Rebuild a sealed segment's offset index from its log when they disagree.

        Returns True when the log holds all ``seg.count`` records intact and the index was
        rewritten (the read is retried); False when the log itself is damaged.
        """
        try:
            log_fd = self._read_fds(seg)[0]
            scan = scan_log(self._fs, log_fd, 0, seg.size, seg.base_offset)
            if len(scan.starts) != seg.count or scan.end != seg.size:
                return False
            for fd in seg.take_read_fds():
                self._close_quietly(fd)
            self._read_lru.pop(seg.base_offset, None)
            fd = self._fs.open(seg.index_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_all(self._fs, fd, positions_to_bytes(new_positions(scan.starts)))
                self._fs.fsync(fd)
            finally:
                self._fs.close(fd)
        except OSError as exc:
            self._log.error("%s/%d: could not rebuild the index of %s: %s", self.topic, self.partition, seg.name, exc)
            return False
        self._log.warning("%s/%d: rebuilt the offset index of %s from its log", self.topic, self.partition, seg.name)
        return True

    def offset_for_timestamp(self, timestamp_us: int) -> int | None:
        """The first offset whose record timestamp is ``>= timestamp_us`` (``None`` if none)."""
        if self._closed:
            raise StorageError(f"partition {self.topic}/{self.partition} is closed")
        try:
            return self._offset_for_timestamp(timestamp_us)
        except (OSError, _IndexDamaged) as exc:
            raise StorageError(f"partition {self.topic}/{self.partition}: time index lookup failed: {exc}") from exc

    def _offset_for_timestamp(self, timestamp_us: int) -> int | None:
        for seg in list(self._segments):
            if seg.count == 0:
                continue
            max_ts = self._max_timestamp(seg)
            if max_ts is None or max_ts < timestamp_us:
                continue
            if seg.time_ts is not None and seg.time_rel is not None:
                rel = find_time_entry(seg.time_ts, seg.time_rel, timestamp_us)
            else:
                ts_arr, rel_arr = self._load_time_entries(seg)
                rel = find_time_entry(ts_arr, rel_arr, timestamp_us)
            if rel is None or rel >= seg.end_offset - seg.base_offset:
                continue
            found = self._scan_for_timestamp(seg, rel, timestamp_us)
            if found is not None:
                return found
        return None

    def _scan_for_timestamp(self, seg: Segment, rel: int, timestamp_us: int) -> int | None:
        if seg.span is not None:
            return self._scan_compacted_for_timestamp(seg, rel, timestamp_us)
        try:
            pos = self._ends(seg, rel, 1)[0]
        except _IndexDamaged:
            if not self._repair_index(seg):
                raise
            pos = self._ends(seg, rel, 1)[0]
        log_fd = self._read_fds(seg)[0]
        want = 1 << 20
        while pos < seg.size and rel < seg.count:
            data = self._fs.pread(log_fd, min(want, seg.size - pos), pos)
            if not data:
                return None
            i, walked, consumed = first_timestamp_at_or_after(data, timestamp_us)
            if i is not None:
                return seg.base_offset + rel + i
            if walked == 0:
                want *= 2  # one record larger than the chunk
                if want > 2 * (seg.size - pos) + HEADER_SIZE:
                    return None
                continue
            rel += walked
            pos += consumed
        return None

    def _scan_compacted_for_timestamp(self, seg: Segment, rel: int, timestamp_us: int) -> int | None:
        """``_scan_for_timestamp`` in a compacted segment: records from relative offset
        ``rel`` on, one at a time (each record's offset comes from the sparse index)."""
        rels, poss = self._sparse_index(seg)
        j = bisect_left(rels, rel)
        if j >= len(rels):
            return None
        log_fd = self._read_fds(seg)[0]
        data = self._fs.pread(log_fd, seg.size - poss[j], poss[j])
        i, _walked, _consumed = first_timestamp_at_or_after(data, timestamp_us)
        return None if i is None else seg.base_offset + rels[j + i]

    def _max_timestamp(self, seg: Segment) -> int | None:
        if seg.max_timestamp is None and seg.count and seg.positions is None:
            fd = self._fs.open(seg.timeindex_path, _READ_FLAGS)
            try:
                size = self._fs.fstat_size(fd)
                if size >= TIME_ENTRY_SIZE:
                    last = size - size % TIME_ENTRY_SIZE - TIME_ENTRY_SIZE
                    seg.max_timestamp = TIME_ENTRY.unpack(self._fs.pread(fd, TIME_ENTRY_SIZE, last))[0]
            finally:
                self._fs.close(fd)
        return seg.max_timestamp

    def _load_time_entries(self, seg: Segment) -> tuple[array[int], array[int]]:
        fd = self._fs.open(seg.timeindex_path, _READ_FLAGS)
        try:
            size = self._fs.fstat_size(fd)
            data = self._fs.pread(fd, size - size % TIME_ENTRY_SIZE, 0)
        finally:
            self._fs.close(fd)
        return time_entries_from_bytes(data)

    # --- durability ---------------------------------------------------------------------

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

    # --- truncation and retention ---------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every record ``>= offset`` (a follower's divergent tail). Durable on return.

        An offset at or below ``first_offset`` empties the log, which then starts at
        ``offset``. An offset at or past ``next_offset`` changes nothing.
        """
        if offset < 0:
            raise ValueError(f"offset {offset} is negative")
        with self._lock:
            self._check_writable()
            if offset >= self.next_offset:
                return
            try:
                if offset <= self.first_offset:
                    for seg in reversed(self._segments):
                        self._delete_segment_files(seg)
                    new = Segment(self.path, offset)
                    self._open_write_fds(new, truncate=True)
                    new.positions = new_positions()
                    new.time_ts, new.time_rel = new_time_arrays()
                    self._segments = [new]
                    self._active = new
                else:
                    while self._segments[-1].base_offset >= offset:
                        self._delete_segment_files(self._segments.pop())
                    seg = self._segments[-1]
                    if seg.span is not None:
                        self._cut_compacted(seg, offset)
                    else:
                        if seg is not self._active:
                            self._reactivate(seg)
                        self._cut(seg, offset - seg.base_offset)
                self._bases = [s.base_offset for s in self._segments]
                self.next_offset = offset
                self.durable_offset = min(self.durable_offset, offset)
                self._epoch += 1
                self._fs.fsync_dir(self.path)
            except OSError as exc:
                self._fail(f"truncation to offset {offset}", exc)
                raise self._failure() from exc
            self._log.info("%s/%d: truncated to offset %d", self.topic, self.partition, offset)

    def _cut_compacted(self, seg: Segment, offset: int) -> None:
        """Truncation inside (or at the end of) compacted segment ``seg``, the last one
        left: it is rewritten to cover offsets below ``offset`` only, and a new active
        segment starts at ``offset`` (lock held)."""
        self._bases = [s.base_offset for s in self._segments]
        if offset < seg.end_offset:
            try:
                recs = segment_records(self._fs, seg)
            except CleanAborted as exc:
                raise OSError(f"cannot read {seg.name} to cut it: {exc}") from exc
            keep = bisect_left(recs.offsets, offset)
            out = write_compacted(
                self._fs, self.path, seg.base_offset, offset - seg.base_offset,
                [recs.data[: recs.starts[keep]] if keep < len(recs.starts) else recs.data],
                new_positions([o - seg.base_offset for o in recs.offsets[:keep]]),
                new_positions(recs.starts[:keep]), recs.stamps[:keep], paths.CLEANED_SUFFIX)
            self._fs.fsync_dir(self.path)
            self._swap_in(len(self._segments) - 1, [seg], [out])
        self._start_active(offset)

    def _reactivate(self, seg: Segment) -> None:
        """Make the (new) last segment the active one again (lock held)."""
        fs = self._fs
        self._read_lru.pop(seg.base_offset, None)
        for fd in seg.take_read_fds():
            self._close_quietly(fd)
        if seg in self._pending:
            self._pending.remove(seg)
        self._open_write_fds(seg, truncate=False)
        assert seg.index_fd is not None and seg.timeindex_fd is not None
        seg.positions = positions_from_bytes(fs.pread(seg.index_fd, seg.count * POSITION_SIZE, 0))
        tsize = fs.fstat_size(seg.timeindex_fd)
        seg.time_ts, seg.time_rel = time_entries_from_bytes(fs.pread(seg.timeindex_fd, tsize - tsize % TIME_ENTRY_SIZE, 0))
        seg.time_entries = len(seg.time_ts)
        self._active = seg

    def _cut(self, seg: Segment, rel: int) -> None:
        """Keep the first ``rel`` records of the active segment, durably (lock held)."""
        assert seg.positions is not None and seg.time_ts is not None and seg.time_rel is not None
        assert seg.log_fd is not None and seg.index_fd is not None and seg.timeindex_fd is not None
        fs = self._fs
        if rel < seg.count:
            size = seg.positions[rel] if rel < len(seg.positions) else seg.size
            keep = bisect_left(seg.time_rel, rel)
            fs.ftruncate(seg.log_fd, size)
            fs.ftruncate(seg.index_fd, rel * POSITION_SIZE)
            fs.ftruncate(seg.timeindex_fd, keep * TIME_ENTRY_SIZE)
            del seg.positions[rel:]
            del seg.time_ts[keep:]
            del seg.time_rel[keep:]
            seg.time_entries = keep
            seg.max_timestamp = seg.time_ts[-1] if keep else None
            seg.count = rel
            seg.size = size
            if rel == 0:
                seg.first_timestamp = None
        for fd in seg.write_fds():
            fs.fsync(fd)

    def _delete_segment_files(self, seg: Segment) -> None:
        """Forget ``seg`` and remove its files: log first, so a crash leaves only orphan
        indexes (removed on the next open), never a log without its index (lock held)."""
        self._read_lru.pop(seg.base_offset, None)
        for fd in seg.take_read_fds():
            self._close_quietly(fd)
        if seg in self._pending:
            self._pending.remove(seg)
        self._discard_write_fds(seg)
        for path in seg.files():
            try:
                self._fs.remove(path)
            except FileNotFoundError:
                pass

    def enforce_retention(self, now_us: int, retention_ms: int | None, retention_bytes: int | None) -> list[RemovedSegment]:
        """Roll the active segment when it is older than ``segment_ms``, then delete the
        oldest sealed segments whose newest record is older than ``retention_ms`` or while
        the partition is larger than ``retention_bytes``. The active segment is never deleted."""
        removed: list[RemovedSegment] = []
        with self._lock:
            if self._closed:
                return removed
            active = self._active
            if (
                self.failed is None
                and active.count
                and active.first_timestamp is not None
                and now_us - active.first_timestamp >= self._segment_us
            ):
                try:
                    self._roll()
                except StorageError:
                    pass  # already logged and marked failed; deletion can still go ahead
            total = self.size_bytes()
            while len(self._segments) > 1:
                seg = self._segments[0]
                reason = None
                if seg.count == 0:
                    reason = "empty"
                elif retention_ms is not None:
                    try:
                        max_ts = self._max_timestamp(seg)
                    except OSError as exc:
                        self._log.error("%s/%d: cannot read the time index of %s: %s", self.topic, self.partition, seg.name, exc)
                        break
                    if max_ts is not None and now_us - max_ts > retention_ms * 1000:
                        reason = "retention_ms"
                if reason is None and retention_bytes is not None and total > retention_bytes:
                    reason = "retention_bytes"
                if reason is None:
                    break
                try:
                    self._delete_segment_files(seg)
                except OSError as exc:
                    self._log.error("%s/%d: retention could not remove %s: %s", self.topic, self.partition, seg.name, exc)
                    break
                self._segments.pop(0)
                self._bases.pop(0)
                total -= seg.size
                removed.append(RemovedSegment(self.topic, self.partition, seg.base_offset, seg.end_offset, seg.size, reason))
            if removed:
                try:
                    self._fs.fsync_dir(self.path)
                except OSError as exc:
                    self._log.error("%s/%d: fsync of %s failed after retention: %s", self.topic, self.partition, self.path, exc)
                for r in removed:
                    self._log.info(
                        "%s/%d: retention (%s) removed offsets %d..%d (%d bytes)",
                        self.topic, self.partition, r.reason, r.base_offset, r.end_offset - 1, r.size_bytes,
                    )
        return removed

    # --- replication state file -----------------------------------------------------------

    def load_state(self) -> dict:
        """The partition's small replication state (``state.json``), ``{}`` when absent."""
        state = read_json(paths.state_path(self.path), {}, self._fs)
        if not isinstance(state, dict):
            raise ValueError(f"{paths.state_path(self.path)}: expected a JSON object")
        return state

    def save_state(self, state: dict) -> None:
        """Replace ``state.json`` atomically and durably (tmp, fsync, rename, dir fsync)."""
        write_json_atomic(paths.state_path(self.path), state, self._fs)

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
                self._fail("fsync at close", exc)
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


class _Part(NamedTuple):
    """What ``_read_compacted`` took from one compacted segment."""

    data: bytes
    ends: list[int]
    count: int
    first: int
    payload: int
    next_at: int
    stopped: bool


class _IndexDamaged(Exception):
    """A sealed segment's ``.index`` is shorter than the segment's record count."""


def _payload_bound(ends: Sequence[int], k: int) -> int:
    """At least the payload bytes of the first ``k`` records from ``ends[0]`` (their bytes
    less their headers: user headers counted as payload)."""
    return ends[k] - ends[0] - HEADER_SIZE * k


def _records_to_read(ends: Sequence[int], n: int, budget: int) -> int:
    """How many of the ``n`` records to read for a payload budget: every record that fits
    even counting its headers as payload, plus one that may fit (at least one)."""
    base = ends[0]
    fit = bisect_right(range(1, n + 1), budget, key=lambda k: ends[k] - base - HEADER_SIZE * k)
    return min(n, fit + 1)


def _fsync_path(fs: FileLayer, path: str) -> None:
    try:
        fd = fs.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return  # deleted by retention or truncation meanwhile: nothing left to make durable
    try:
        fs.fsync(fd)
    finally:
        fs.close(fd)


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
