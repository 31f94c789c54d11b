"""Log compaction: keep the latest record per key in a partition's sealed segments.

Owns: the cleaning pass (``build_clean``: read the segments a ``CleanPlan`` names, work
out which records survive, write the survivors as compacted segments under ``.cleaned``
names), the compacted-segment writer shared with a follower's gapped append
(``write_compacted``), and ``CleanPolicy``/``CleanStats``. ``PartitionLog.plan_clean``
makes the plan (under its lock) and ``PartitionLog.install_clean`` swaps the output in;
this module only reads sealed segment files and writes new ones, so ``build_clean`` may
run in a worker thread while the partition keeps appending.

The rules (Kafka's log cleaner's, docs/storage.md "Compaction"):

* a record's key is its ``key`` user header (``data.format.record_key``);
* a record survives when it is the latest record of its key in the cleaned range;
* a record without a key does not survive (compacted topics refuse them; older ones go);
* a tombstone (a record with an empty payload) survives as the latest record of its key
  until its timestamp is more than ``delete_retention_ms`` old, then it goes too;
* the record at the last offset of the cleaned range always survives (whatever it is), so
  that the cleaned range ends with a record: a replica copying this log from behind then
  ends where the leader ends even when nothing follows. The next pass, whose range goes
  further, removes it if it is stale; a tombstone after it is in that range too, so a
  deleted key never comes back;
* offsets never change: surviving records are copied byte for byte (checksums included),
  and the gaps are recorded in the output's ``.sindex``.

Which segments may be cleaned (sealed, below the high watermark, older than
``min_compaction_lag_ms``) is the plan's business (``PartitionLog.plan_clean``).

Must not import: Twisted, anything of the broker.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from data import paths
from data.format import (
    HEADER_SIZE,
    OFFSET_OFFSET,
    PAYLOAD_LENGTH_OFFSET,
    TIMESTAMP_OFFSET,
    USER_HEADERS_LENGTH_OFFSET,
    check_record,
    field_view,
    record_key,
)
from data.fs import FileLayer
from data.index import (
    POSITION_SIZE,
    new_positions,
    positions_from_bytes,
    sindex_bytes,
    sindex_from_bytes,
    time_entries_to_bytes,
)
from data.segment import Segment
from data.writer import write_all

__all__ = ["CleanPolicy", "CleanPlan", "CleanOutput", "CleanStats", "CleanAborted",
           "build_clean", "write_compacted", "segment_records", "load_sindex"]


class CleanAborted(Exception):
    """A cleaning pass gave up (a segment vanished or does not check out); nothing changed."""


@dataclass(frozen=True)
class CleanPolicy:
    """How a compacted topic is cleaned (the topic's settings, in the store's units)."""

    delete_retention_ms: int = 86_400_000
    segment_bytes: int = 64 * 1024 * 1024


@dataclass
class CleanPlan:
    """What one pass cleans: ``segments``, sealed and contiguous from the log start."""

    path: str
    segments: list[Segment]
    now_us: int
    policy: CleanPolicy
    cancelled: Callable[[], bool] = lambda: False
    """Polled between segments: a pass that sees True gives up (``CleanAborted``)."""


@dataclass
class CleanOutput:
    """One compacted segment written under ``.cleaned`` names: it replaces the plan's
    segments ``first .. last`` (indexes into ``CleanPlan.segments``)."""

    segment: Segment
    first: int
    last: int


@dataclass
class CleanStats:
    """What a pass did, for the log line and the bench."""

    records_read: int = 0
    records_kept: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    keyless_dropped: int = 0
    tombstones_dropped: int = 0
    outputs: list[CleanOutput] = field(default_factory=list)


class _Records:
    """The records of one segment as columns: offsets, start/end positions, timestamps,
    payload lengths and the raw user-header blobs."""

    __slots__ = ("data", "offsets", "starts", "ends", "stamps", "payload_lengths", "headers")

    def __init__(self, data: bytes, offsets: list[int], starts: list[int], ends: list[int],
                 stamps: list[int], payload_lengths: list[int], headers: list[bytes]) -> None:
        self.data = data
        self.offsets = offsets
        self.starts = starts
        self.ends = ends
        self.stamps = stamps
        self.payload_lengths = payload_lengths
        self.headers = headers


def load_sindex(fs: FileLayer, seg: Segment) -> None:
    """Fill ``seg.span``/``rel_offsets``/``spositions`` from its ``.sindex``
    (``ValueError`` when it is malformed, ``OSError`` when unreadable)."""
    fd = fs.open(seg.sindex_path, os.O_RDONLY)
    try:
        data = fs.pread(fd, fs.fstat_size(fd), 0)
    finally:
        fs.close(fd)
    span, rels, positions = sindex_from_bytes(data)
    seg.span = span
    seg.rel_offsets = rels
    seg.spositions = positions


def segment_records(fs: FileLayer, seg: Segment) -> _Records:
    """Read every record of a sealed segment as columns (``CleanAborted`` when the files
    are gone or the log disagrees with its index)."""
    try:
        fd = fs.open(seg.log_path, os.O_RDONLY)
        try:
            data = fs.pread(fd, seg.size, 0)
        finally:
            fs.close(fd)
        if seg.span is not None:
            if seg.rel_offsets is None or seg.spositions is None:
                load_sindex(fs, seg)
            assert seg.rel_offsets is not None and seg.spositions is not None
            base = seg.base_offset
            offsets = [base + r for r in seg.rel_offsets]
            starts_arr = seg.spositions
        else:
            ifd = fs.open(seg.index_path, os.O_RDONLY)
            try:
                starts_arr = positions_from_bytes(fs.pread(ifd, seg.count * POSITION_SIZE, 0))
            finally:
                fs.close(ifd)
            offsets = list(range(seg.base_offset, seg.base_offset + seg.count))
    except (OSError, ValueError) as exc:
        raise CleanAborted(f"{seg.name}: {exc}") from exc
    n = len(offsets)
    if len(data) != seg.size or len(starts_arr) != n:
        raise CleanAborted(f"{seg.name}: log or index shorter than expected")
    if n == 0:
        return _Records(data, [], [], [], [], [], [])
    starts = np.frombuffer(starts_arr, dtype=np.uint32).astype(np.int64) \
        if starts_arr.itemsize == 4 else np.array(starts_arr, dtype=np.int64)
    if int(starts[-1]) + HEADER_SIZE > len(data):
        raise CleanAborted(f"{seg.name}: index points past the log")
    uhl = field_view(data, "<u4")[starts + USER_HEADERS_LENGTH_OFFSET].astype(np.int64)
    pl = field_view(data, "<u4")[starts + PAYLOAD_LENGTH_OFFSET].astype(np.int64)
    stamps = field_view(data, "<u8")[starts + TIMESTAMP_OFFSET]
    found = field_view(data, "<u8")[starts + OFFSET_OFFSET]
    ends = starts + HEADER_SIZE + pl + uhl
    following = np.append(starts[1:], len(data))
    if not (ends == following).all() or not (found == np.array(offsets, dtype=np.uint64)).all():
        raise CleanAborted(f"{seg.name}: records disagree with the index")
    hstarts = (starts + HEADER_SIZE + pl).tolist()
    ends_l = ends.tolist()
    headers = list(map(data.__getitem__, map(slice, hstarts, ends_l)))
    return _Records(data, offsets, starts.tolist(), ends_l, stamps.tolist(), pl.tolist(), headers)


def _keys(headers: list[bytes]) -> list[bytes | None]:
    """``record_key`` of every blob, computed once per distinct blob."""
    by_blob = {blob: record_key(blob) for blob in set(headers)}
    return list(map(by_blob.__getitem__, headers))


def write_compacted(fs: FileLayer, path: str, base: int, span: int, chunks: list[bytes],
                    rel_offsets: array[int], positions: array[int], stamps: list[int],
                    suffix: str) -> Segment:
    """Write a compacted segment's three files as ``<name><suffix>`` and fsync them (the
    caller fsyncs the folder and renames them into place). ``chunks`` are the records'
    bytes in offset order; ``positions`` their start positions. Returns the ``Segment``
    it will be once renamed (``count``/``size``/``span`` and the in-memory index set)."""
    seg = Segment(path, base)
    seg.span = span
    seg.count = len(rel_offsets)
    seg.rel_offsets = rel_offsets
    seg.spositions = positions
    ts_arr: array[int] = array("Q")
    rel_arr: array[int] = new_positions()
    running = -1
    for rel, ts in zip(rel_offsets, stamps, strict=True):
        if ts > running:
            ts_arr.append(ts)
            rel_arr.append(rel)
            running = ts
    seg.time_entries = len(ts_arr)
    seg.max_timestamp = ts_arr[-1] if len(ts_arr) else None
    seg.first_timestamp = stamps[0] if stamps else None
    size = 0
    for target, data in ((seg.log_path, chunks), (seg.sindex_path, [sindex_bytes(span, rel_offsets, positions)]),
                         (seg.timeindex_path, [time_entries_to_bytes(ts_arr, rel_arr)])):
        fd = fs.open(target + suffix, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for chunk in data:
                if chunk:
                    write_all(fs, fd, chunk)
                    if target == seg.log_path:
                        size += len(chunk)
            fs.fsync(fd)
        finally:
            fs.close(fd)
    seg.size = size
    return seg


def build_clean(fs: FileLayer, plan: CleanPlan, stats: CleanStats | None = None) -> CleanStats:
    """Clean the plan's segments into compacted segments written as ``.cleaned`` files
    (fsynced, and the folder too). Reads only files of sealed segments and writes only new
    names: safe in a worker thread. ``CleanAborted`` when a segment cannot be read (its
    ``.cleaned`` files are removed then); the caller installs the result or throws it away
    (``discard_clean``)."""
    stats = stats or CleanStats()
    policy = plan.policy
    expiry = plan.now_us - policy.delete_retention_ms * 1000
    latest: dict[bytes | None, int] = {}
    for seg in plan.segments:
        if plan.cancelled():
            raise CleanAborted("stopping")
        recs = segment_records(fs, seg)
        latest.update(zip(_keys(recs.headers), recs.offsets, strict=True))
        stats.records_read += len(recs.offsets)
        stats.bytes_read += seg.size
    latest.pop(None, None)
    try:
        _write_outputs(fs, plan, latest, expiry, stats)
    except BaseException:
        discard_clean(fs, stats)
        raise
    fs.fsync_dir(plan.path)
    return stats


def _write_outputs(fs: FileLayer, plan: CleanPlan, latest: dict[bytes | None, int],
                   expiry: int, stats: CleanStats) -> None:
    limit = plan.policy.segment_bytes
    group_first = 0
    chunks: list[bytes] = []
    rels: list[int] = []
    positions: list[int] = []
    stamps: list[int] = []
    size = 0
    segments = plan.segments

    def flush(last: int) -> None:
        nonlocal chunks, rels, positions, stamps, size, group_first
        base = segments[group_first].base_offset
        end = segments[last].end_offset
        out = write_compacted(fs, plan.path, base, end - base, chunks, new_positions(rels),
                              new_positions(positions), stamps, paths.CLEANED_SUFFIX)
        stats.outputs.append(CleanOutput(out, group_first, last))
        stats.bytes_written += out.size
        chunks, rels, positions, stamps, size = [], [], [], [], 0
        group_first = last + 1

    for i, seg in enumerate(segments):
        if plan.cancelled():
            raise CleanAborted("stopping")
        recs = segment_records(fs, seg)
        keys = _keys(recs.headers)
        base = segments[group_first].base_offset
        kept: list[int] = []
        for j, (key, off) in enumerate(zip(keys, recs.offsets, strict=True)):
            if key is None:
                stats.keyless_dropped += 1
                continue
            if latest.get(key) != off:
                continue
            if recs.payload_lengths[j] == 0 and recs.stamps[j] < expiry:
                stats.tombstones_dropped += 1
                continue
            kept.append(j)
        last_j = len(recs.offsets) - 1
        if (i == len(segments) - 1 and last_j >= 0 and recs.offsets[last_j] == seg.end_offset - 1
                and (not kept or kept[-1] != last_j)):
            kept.append(last_j)  # the cleaned range still ends with a record
        seg_bytes = sum(recs.ends[j] - recs.starts[j] for j in kept)
        if size and size + seg_bytes > limit:
            flush(i - 1)
            base = seg.base_offset
        for j in kept:
            record = recs.data[recs.starts[j]:recs.ends[j]]
            reason = check_record(record, 0, recs.offsets[j])
            if reason is not None:
                raise CleanAborted(f"{seg.name}: record at offset {recs.offsets[j]}: {reason}")
            chunks.append(record)
            rels.append(recs.offsets[j] - base)
            positions.append(size)
            stamps.append(recs.stamps[j])
            size += len(record)
        stats.records_kept += len(kept)
    if segments:
        flush(len(segments) - 1)


def discard_clean(fs: FileLayer, stats: CleanStats) -> None:
    """Remove the ``.cleaned`` files of a pass that will not be installed."""
    for out in stats.outputs:
        for name in out.segment.files():
            try:
                fs.remove(name + paths.CLEANED_SUFFIX)
            except FileNotFoundError:
                pass
