"""Opening a partition folder: find its segments, check them, repair what a crash left.

Owns: the rules that turn whatever is on disk into a list of consistent segments whose last
one is ready to append to, and the ``RecoveryEvent`` records of what was dropped.

Rules (docs/storage.md has the reasons):

* Every segment gets a cheap consistency check, clean start or not: index sizes are whole
  entries, the last ``.index`` entry points at an intact record with the right offset that
  ends exactly at the end of the ``.log``, the ``.timeindex`` ends with an entry for a
  record that exists. Sealed segments' indexes are not read beyond that (a clean open of a
  large partition reads a few hundred bytes per segment, plus the active segment's index).
  A segment failing the check has its indexes rebuilt from a scan of its log.
* After an unclean stop (no clean-shutdown marker) the tail of the last segment is
  re-validated from the last index entry that points at an intact record: the scan stops
  at the first record with a bad length, partial bytes, a non-zero ``reserved``, a wrong
  offset or a bad checksum; the log is truncated there (a torn tail is dropped without an
  error) and the index entries are rebuilt. Then every segment file is fsynced, so what
  the reopened log holds is durable.
* The log is the longest gap-free run of segments from the oldest one: a segment that does
  not start where the previous one ends, and every segment after it, is quarantined (its
  log renamed ``.bad``), as is a segment whose files cannot be read.
* Index files without a log (an interrupted retention) are removed.
* Compaction (``data.cleaner``): ``.cleaned`` files are removed (a pass that never
  committed); a ``.log.swap`` means a swap committed: the old segments in its range are
  removed and the ``.swap`` files renamed into place. A compacted segment (``.sindex``)
  gets the same cheap check of its last record; if it fails it is quarantined (it was
  fsynced before it was swapped in, so a failure is damage, not a crash). A compacted last
  segment gets a new empty active segment after it.

Must not import: Twisted, anything of the broker.
"""

from __future__ import annotations

import logging
import os
import struct
from array import array
from dataclasses import dataclass

from data import paths
from data.cleaner import load_sindex
from data.format import HEADER, HEADER_SIZE, U32, check_record
from data.fs import FileLayer
from data.index import (
    POSITION_SIZE,
    TIME_ENTRY,
    TIME_ENTRY_SIZE,
    new_positions,
    new_time_arrays,
    positions_from_bytes,
    positions_to_bytes,
    time_entries_from_bytes,
    time_entries_to_bytes,
)
from data.reader import count_framed, scan_log
from data.segment import WRITE_FLAGS, Segment
from data.writer import write_all

__all__ = ["RecoveryEvent", "open_segments", "create_segments"]

U64 = struct.Struct("<Q")
_WALK_BACK = 1024
"""How many index entries the tail check tries, newest first, before scanning the whole
segment: entries past the log's end (an index flushed before its log) are skipped."""
_DROP_SIZING_LIMIT = 64 << 20


@dataclass(frozen=True)
class RecoveryEvent:
    """Something recovery dropped or set aside, for ``Store.recovery_report`` and the log.

    ``offsets_dropped`` is the range of offsets that were (at least partly) on disk and are
    gone now; it is sized from the index and from record lengths, best effort.
    """

    topic: str
    partition: int
    segment: str
    bytes_dropped: int
    offsets_dropped: range
    reason: str


class _Context:
    def __init__(self, fs: FileLayer, path: str, topic: str, partition: int, logger: logging.Logger, events: list[RecoveryEvent]) -> None:
        self.fs = fs
        self.path = path
        self.topic = topic
        self.partition = partition
        self.log = logger
        self.events = events

    def dropped(self, seg: Segment, nbytes: int, offsets: range, reason: str) -> None:
        event = RecoveryEvent(self.topic, self.partition, seg.name, nbytes, offsets, reason)
        self.events.append(event)
        self.log.warning(
            "recovery %s/%d %s: dropped %d bytes, offsets %s: %s",
            self.topic, self.partition, seg.name, nbytes, _describe(offsets), reason,
        )

    def report_corruption(self, seg: Segment, nbytes: int, reason: str) -> None:
        """LevelDB's ``Reporter::Corruption``: bytes skipped because they did not check out."""
        self.log.warning("recovery %s/%d %s: %d bytes do not check out: %s", self.topic, self.partition, seg.name, nbytes, reason)


def _describe(offsets: range) -> str:
    return f"{offsets.start}..{offsets.stop - 1}" if len(offsets) else "none"


def create_segments(fs: FileLayer, path: str, base_offset: int = 0) -> None:
    """Make a new partition folder holding one empty segment (``open_segments`` opens it)."""
    fs.makedirs(path)
    seg = Segment(path, base_offset)
    _create_empty(fs, seg)
    fs.fsync_dir(path)


def open_segments(
    fs: FileLayer,
    path: str,
    topic: str,
    partition: int,
    *,
    clean: bool,
    logger: logging.Logger,
    events: list[RecoveryEvent],
) -> list[Segment]:
    """Open an existing partition folder; the last returned segment is active (write fds
    open, indexes in memory). Appends what was dropped to ``events``."""
    ctx = _Context(fs, path, topic, partition, logger, events)
    fs.makedirs(path)
    found: dict[int, set[str]] = {}
    dir_changed = _finish_swaps(ctx)
    for name in fs.listdir(path):
        parsed = paths.parse_segment_name(name)
        if parsed is not None:
            found.setdefault(parsed[0], set()).add(parsed[1])
        elif name.endswith(".tmp"):
            fs.remove(os.path.join(path, name))  # an atomic write that never got renamed
            dir_changed = True
    candidates: list[Segment] = []
    for base in sorted(found):
        seg = Segment(path, base)
        if paths.SINDEX_SUFFIX in found[base] and paths.LOG_SUFFIX in found[base]:
            seg.span = 0  # compacted: _check_segment reads the real span
            if paths.INDEX_SUFFIX in found[base]:
                fs.remove(seg.index_path)  # left by an interrupted swap
                dir_changed = True
        if paths.LOG_SUFFIX not in found[base]:
            for orphan in (seg.index_path, seg.timeindex_path, seg.sindex_path):
                if fs.exists(orphan):
                    fs.remove(orphan)
            logger.info("recovery %s/%d: removed index files of missing log %s", topic, partition, seg.name)
            dir_changed = True
            continue
        candidates.append(seg)

    segments: list[Segment] = []
    for i, seg in enumerate(candidates):
        if segments and seg.base_offset != segments[-1].end_offset:
            reason = f"gap: previous segment ends at offset {segments[-1].end_offset}"
            for later in candidates[i:]:
                _quarantine(ctx, later, reason)
            dir_changed = True
            break
        tail_check = not clean and i == len(candidates) - 1
        try:
            if seg.span is not None:
                _check_compacted(ctx, seg)
            else:
                _check_segment(ctx, seg, tail_check)
        except _BadCompacted as exc:
            for later in candidates[i:]:
                _quarantine(ctx, later, str(exc) if later is seg else "after a damaged compacted segment")
            dir_changed = True
            break
        except OSError as exc:
            for later in candidates[i:]:
                _quarantine(ctx, later, f"unreadable: {exc}" if later is seg else "after an unreadable segment")
            dir_changed = True
            break
        segments.append(seg)

    if not segments:
        base = candidates[0].base_offset if candidates else 0
        segments = [_new_active(fs, path, base)]
        dir_changed = True
    elif segments[-1].span is not None:
        # A compacted segment is never active: a crash after a follower's gapped append
        # (or a truncation into a compacted segment) left no active segment after it.
        segments.append(_new_active(fs, path, segments[-1].end_offset))
        dir_changed = True
    else:
        _activate(fs, segments[-1])
    if not clean:
        for seg in segments[:-1]:
            for p in seg.files():
                _fsync_path(fs, p)
        for fd in segments[-1].write_fds():
            fs.fsync(fd)
        dir_changed = True
    if dir_changed:
        fs.fsync_dir(path)
    return segments


# --- compaction swaps and compacted segments ---------------------------------------------------


class _BadCompacted(Exception):
    """A compacted segment whose ``.sindex`` disagrees with its log."""


def _finish_swaps(ctx: _Context) -> bool:
    """Remove ``.cleaned`` files (a pass that never committed) and finish every swap whose
    ``.log.swap`` exists (``PartitionLog._swap_in``). True when the folder changed."""
    fs, path = ctx.fs, ctx.path
    swaps: dict[int, set[str]] = {}
    changed = False
    for name in fs.listdir(path):
        parsed = paths.parse_swap_name(name)
        if parsed is None:
            continue
        base, suffix, marker = parsed
        if marker == paths.CLEANED_SUFFIX:
            fs.remove(os.path.join(path, name))
            changed = True
        else:
            swaps.setdefault(base, set()).add(suffix)
    for base in sorted(swaps):
        seg = Segment(path, base)
        seg.span = 0
        pending = swaps[base]
        if paths.LOG_SUFFIX not in pending:  # indexes renamed, the log not: never committed
            for suffix in pending:
                fs.remove(os.path.join(path, paths.segment_name(base, suffix) + paths.SWAP_SUFFIX))
            changed = True
            continue
        sindex = seg.sindex_path + (paths.SWAP_SUFFIX if paths.SINDEX_SUFFIX in pending else "")
        fd = fs.open(sindex, os.O_RDONLY)
        try:
            span = U64.unpack(fs.pread(fd, 8, 0))[0]
        finally:
            fs.close(fd)
        if len(pending) == 3:
            # The old segments' files may still be there: remove every one in the range.
            for name in fs.listdir(path):
                parsed = paths.parse_segment_name(name)
                if parsed is not None and base <= parsed[0] < base + span:
                    fs.remove(os.path.join(path, name))
        fs.fsync_dir(path)
        for name in seg.files()[::-1]:
            if fs.exists(name + paths.SWAP_SUFFIX):
                fs.replace(name + paths.SWAP_SUFFIX, name)
                fs.fsync_dir(path)
        ctx.log.info("recovery %s/%d: finished swapping in compacted segment %s",
                     ctx.topic, ctx.partition, seg.name)
        changed = True
    if changed:
        fs.fsync_dir(path)
    return changed


def _check_compacted(ctx: _Context, seg: Segment) -> None:
    """A compacted segment is written whole and fsynced before it is swapped in: check
    that its ``.sindex`` is well formed and that its last entry names an intact record
    with the right offset ending exactly at the end of the log; ``_BadCompacted`` if not."""
    fs = ctx.fs
    try:
        load_sindex(fs, seg)
    except ValueError as exc:
        raise _BadCompacted(f"{seg.sindex_path}: {exc}") from exc
    assert seg.rel_offsets is not None and seg.spositions is not None
    size = fs.getsize(seg.log_path)
    count = len(seg.rel_offsets)
    if count == 0:
        if size:
            raise _BadCompacted(f"{seg.name}: {size} bytes but no index entries")
    else:
        last = seg.spositions[-1]
        log_fd = fs.open(seg.log_path, os.O_RDONLY)
        try:
            record = fs.pread(log_fd, size - last, last)
        finally:
            fs.close(log_fd)
        reason = check_record(record, 0, seg.base_offset + seg.rel_offsets[-1])
        if reason is None and len(record) >= HEADER_SIZE:
            *_fields, uhl, pl, _rsv = HEADER.unpack_from(record, 0)
            if HEADER_SIZE + pl + uhl != len(record):
                reason = "the last record does not end at the end of the log"
        if reason is not None:
            raise _BadCompacted(f"{seg.name}: {reason}")
    seg.count = count
    seg.size = size
    tsize = _file_size(fs, seg.timeindex_path)
    seg.time_entries = max(tsize, 0) // TIME_ENTRY_SIZE
    if seg.time_entries:
        fd = fs.open(seg.timeindex_path, os.O_RDONLY)
        try:
            seg.max_timestamp = TIME_ENTRY.unpack(fs.pread(fd, TIME_ENTRY_SIZE, (seg.time_entries - 1) * TIME_ENTRY_SIZE))[0]
        finally:
            fs.close(fd)


# --- per segment ------------------------------------------------------------------------------


def _check_segment(ctx: _Context, seg: Segment, tail_check: bool) -> None:
    fs = ctx.fs
    log_fd = fs.open(seg.log_path, os.O_RDWR)
    try:
        size = fs.fstat_size(log_fd)
        if tail_check:
            _recover_tail(ctx, seg, log_fd, size)
        elif not _consistent(fs, seg, log_fd, size):
            ctx.log.warning("recovery %s/%d %s: indexes inconsistent with the log; rebuilding", ctx.topic, ctx.partition, seg.name)
            _rebuild(ctx, seg, log_fd, size, new_positions(), *new_time_arrays(), claimed=_index_count(fs, seg))
    finally:
        fs.close(log_fd)


def _file_size(fs: FileLayer, path: str) -> int:
    return fs.getsize(path) if fs.exists(path) else -1


def _index_count(fs: FileLayer, seg: Segment) -> int:
    size = _file_size(fs, seg.index_path)
    return max(0, size // POSITION_SIZE)


def _consistent(fs: FileLayer, seg: Segment, log_fd: int, size: int) -> bool:
    """The cheap check; on success fills in ``seg`` from the index files."""
    isize = _file_size(fs, seg.index_path)
    tsize = _file_size(fs, seg.timeindex_path)
    if isize < 0 or tsize < 0 or isize % POSITION_SIZE or tsize % TIME_ENTRY_SIZE:
        return False
    n = isize // POSITION_SIZE
    if size == 0 or n == 0:
        if size == 0 and n == 0 and tsize == 0:
            seg.count = seg.size = seg.time_entries = 0
            return True
        return False
    if tsize == 0:
        return False
    last_pos = _read_u32(fs, seg.index_path, isize - POSITION_SIZE)
    if last_pos + HEADER_SIZE > size:
        return False
    head = fs.pread(log_fd, HEADER_SIZE, last_pos)
    *_fields, uhl, pl, _rsv = HEADER.unpack(head)
    end = last_pos + HEADER_SIZE + pl + uhl
    if end != size:
        return False
    if check_record(fs.pread(log_fd, end - last_pos, last_pos), 0, seg.base_offset + n - 1) is not None:
        return False
    fd = fs.open(seg.timeindex_path, os.O_RDONLY)
    try:
        max_ts, last_rel = TIME_ENTRY.unpack(fs.pread(fd, TIME_ENTRY_SIZE, tsize - TIME_ENTRY_SIZE))
    finally:
        fs.close(fd)
    if last_rel >= n:
        return False
    seg.count = n
    seg.size = size
    seg.time_entries = tsize // TIME_ENTRY_SIZE
    seg.max_timestamp = max_ts
    return True


def _read_u32(fs: FileLayer, path: str, pos: int) -> int:
    fd = fs.open(path, os.O_RDONLY)
    try:
        return U32.unpack(fs.pread(fd, 4, pos))[0]
    finally:
        fs.close(fd)


def _read_all(fs: FileLayer, path: str, unit: int) -> bytes:
    """A whole index file, cut to whole entries; ``b""`` when it does not exist."""
    if not fs.exists(path):
        return b""
    fd = fs.open(path, os.O_RDONLY)
    try:
        size = fs.fstat_size(fd)
        return fs.pread(fd, size - size % unit, 0) if size >= unit else b""
    finally:
        fs.close(fd)


def _recover_tail(ctx: _Context, seg: Segment, log_fd: int, size: int) -> None:
    """Unclean stop: trust the index up to the newest entry pointing at an intact record,
    re-validate everything after it, truncate at the first bad record."""
    fs = ctx.fs
    old = positions_from_bytes(_read_all(fs, seg.index_path, POSITION_SIZE))
    trusted = -1
    for j in range(len(old) - 1, max(-1, len(old) - 1 - _WALK_BACK), -1):
        pos = old[j]
        if pos + HEADER_SIZE > size:
            continue
        *_fields, uhl, pl, _rsv = HEADER.unpack(fs.pread(log_fd, HEADER_SIZE, pos))
        end = pos + HEADER_SIZE + pl + uhl
        if end <= size and check_record(fs.pread(log_fd, end - pos, pos), 0, seg.base_offset + j) is None:
            trusted = j
            break
    kept = old[: trusted + 1]
    ts_arr, rel_arr = time_entries_from_bytes(_read_all(fs, seg.timeindex_path, TIME_ENTRY_SIZE))
    keep_time = 0
    while keep_time < len(rel_arr) and rel_arr[keep_time] <= trusted:
        keep_time += 1
    del ts_arr[keep_time:]
    del rel_arr[keep_time:]
    _rebuild(ctx, seg, log_fd, size, kept, ts_arr, rel_arr, claimed=len(old))


def _rebuild(
    ctx: _Context,
    seg: Segment,
    log_fd: int,
    size: int,
    kept: array[int],
    ts_arr: array[int],
    rel_arr: array[int],
    *,
    claimed: int,
) -> None:
    """Scan the log after the ``kept`` records, truncate at the first bad record, and
    rewrite both indexes (kept entries plus one per newly scanned record / new maximum)."""
    fs = ctx.fs
    if kept:
        last = kept[-1]
        *_fields, uhl, pl, _rsv = HEADER.unpack(fs.pread(log_fd, HEADER_SIZE, last))
        start = last + HEADER_SIZE + pl + uhl
    else:
        start = 0
    scan = scan_log(fs, log_fd, start, size, seg.base_offset + len(kept))
    positions = new_positions(kept)
    positions.extend(new_positions(scan.starts))
    running = ts_arr[-1] if len(ts_arr) else None
    first_new = len(kept)
    for i, ts in enumerate(scan.timestamps):
        if running is None or ts > running:
            ts_arr.append(ts)
            rel_arr.append(first_new + i)
            running = ts
    count = len(positions)
    if scan.end < size:
        dropped = size - scan.end
        framed, leftover = (0, True)
        if dropped <= _DROP_SIZING_LIMIT:
            framed, leftover = count_framed(fs.pread(log_fd, dropped, scan.end))
        ctx.report_corruption(seg, dropped, scan.reason or "unreadable")
        end_claimed = max(claimed, count + framed + (1 if leftover else 0))
        fs.ftruncate(log_fd, scan.end)
        fs.fsync(log_fd)
        ctx.dropped(
            seg,
            dropped,
            range(seg.base_offset + count, seg.base_offset + end_claimed),
            f"torn or corrupt tail at byte {scan.end}: {scan.reason}",
        )
    changed = scan.end < size or len(scan.starts) > 0 or count != claimed
    if changed or _file_size(fs, seg.index_path) != count * POSITION_SIZE or _file_size(fs, seg.timeindex_path) != len(ts_arr) * TIME_ENTRY_SIZE:
        _write_file(fs, seg.index_path, positions_to_bytes(positions))
        _write_file(fs, seg.timeindex_path, time_entries_to_bytes(ts_arr, rel_arr))
    seg.count = count
    seg.size = scan.end
    seg.time_entries = len(ts_arr)
    seg.max_timestamp = ts_arr[-1] if len(ts_arr) else None


def _write_file(fs: FileLayer, path: str, data: bytes) -> None:
    fd = fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if data:
            write_all(fs, fd, data)
        fs.fsync(fd)
    finally:
        fs.close(fd)


def _quarantine(ctx: _Context, seg: Segment, reason: str) -> None:
    """Set a segment aside: its log becomes ``.bad`` (kept for the operator), indexes go."""
    fs = ctx.fs
    size = _file_size(fs, seg.log_path)
    count = seg.count if seg.count else _index_count(fs, seg)
    try:
        fs.replace(seg.log_path, paths.quarantine_path(seg.log_path))
    except OSError as exc:
        ctx.log.error("recovery %s/%d: cannot quarantine %s: %s", ctx.topic, ctx.partition, seg.name, exc)
    for p in (seg.index_path, seg.sindex_path, seg.timeindex_path):
        if fs.exists(p):
            fs.remove(p)
    ctx.dropped(seg, max(size, 0), range(seg.base_offset, seg.base_offset + count), f"quarantined as .bad: {reason}")


# --- the active segment ------------------------------------------------------------------------


def _create_empty(fs: FileLayer, seg: Segment) -> None:
    for p in (seg.log_path, seg.index_path, seg.timeindex_path):
        fd = fs.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        fs.close(fd)


def _new_active(fs: FileLayer, path: str, base_offset: int) -> Segment:
    seg = Segment(path, base_offset)
    _create_empty(fs, seg)
    _activate(fs, seg)
    return seg


def _activate(fs: FileLayer, seg: Segment) -> None:
    """Open the write fds and load the indexes into memory."""
    opened: list[int] = []
    try:
        seg.log_fd = fs.open(seg.log_path, WRITE_FLAGS, 0o644)
        opened.append(seg.log_fd)
        seg.index_fd = fs.open(seg.index_path, WRITE_FLAGS, 0o644)
        opened.append(seg.index_fd)
        seg.timeindex_fd = fs.open(seg.timeindex_path, WRITE_FLAGS, 0o644)
        opened.append(seg.timeindex_fd)
        seg.positions = positions_from_bytes(fs.pread(seg.index_fd, seg.count * POSITION_SIZE, 0))
        seg.time_ts, seg.time_rel = time_entries_from_bytes(
            fs.pread(seg.timeindex_fd, seg.time_entries * TIME_ENTRY_SIZE, 0)
        )
        if len(seg.positions) != seg.count:
            raise OSError(f"{seg.index_path}: short read ({len(seg.positions)} of {seg.count} entries)")
        seg.index_on_disk, seg.time_on_disk = seg.count, len(seg.time_ts)
        if seg.count:
            seg.first_timestamp = HEADER.unpack(fs.pread(seg.log_fd, HEADER_SIZE, 0))[4]
    except OSError:
        for fd in opened:
            fs.close(fd)
        seg.log_fd = seg.index_fd = seg.timeindex_fd = None
        raise


def _fsync_path(fs: FileLayer, path: str) -> None:
    fd = fs.open(path, os.O_RDONLY)
    try:
        fs.fsync(fd)
    finally:
        fs.close(fd)
