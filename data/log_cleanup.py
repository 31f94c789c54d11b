"""Shrinking one partition's log: compaction (plan, build, install), truncation to an offset (a follower's divergence), and retention by time and size.

Must not import: Twisted, sockets, ``broker``.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from data import paths
from data.cleaner import (
    CleanAborted,
    CleanPlan,
    CleanPolicy,
    CleanStats,
    build_clean,
    discard_clean,
    segment_records,
    write_compacted,
)
from data.errors import StorageError
from data.index import (
    POSITION_SIZE,
    TIME_ENTRY_SIZE,
    new_positions,
    new_time_arrays,
    positions_from_bytes,
    time_entries_from_bytes,
)
from data.segment import Segment

MIN_CLEANABLE_DIRTY_RATIO = 0.5
"""A cleaning pass starts once segments never cleaned make this share of the cleanable
bytes (Kafka's ``min.cleanable.dirty.ratio`` default)."""


@dataclass(frozen=True)
class RemovedSegment:
    """A segment that retention deleted: offsets ``[base_offset, end_offset)``."""

    topic: str
    partition: int
    base_offset: int
    end_offset: int
    size_bytes: int
    reason: str


class LogCleanup:
    """Part of ``PartitionLog`` (``data.log``): compaction, truncation and retention."""

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
                self._drop_producer_snapshots(lambda at: at > offset)
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
        seg.index_on_disk, seg.time_on_disk = seg.count, seg.time_entries
        self._active = seg

    def _cut(self, seg: Segment, rel: int) -> None:
        """Keep the first ``rel`` records of the active segment, durably (lock held)."""
        assert seg.positions is not None and seg.time_ts is not None and seg.time_rel is not None
        assert seg.log_fd is not None and seg.index_fd is not None and seg.timeindex_fd is not None
        fs = self._fs
        self._flush_indexes(seg)  # the files whole first: they are cut at entry counts
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
            seg.index_on_disk, seg.time_on_disk = rel, keep
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
