"""Reading one partition's log: records by offset (decoded, or raw as stored), compacted segments through their sparse index, a damaged index repaired on the way, and the first offset at or after a timestamp.

Must not import: Twisted, sockets, ``broker``.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from data import speedups
from data.cleaner import (
    load_sindex,
)
from data.errors import StorageError
from data.format import HEADER, HEADER_SIZE, Record, check_record, decode_record
from data.index import (
    TIME_ENTRY,
    TIME_ENTRY_SIZE,
    find_time_entry,
    new_positions,
    positions_to_bytes,
    time_entries_from_bytes,
)
from data.reader import RunResult, decode_run, first_timestamp_at_or_after, scan_log, verify_run
from data.segment import Segment
from data.writer import write_all

_READ_FLAGS = os.O_RDONLY


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


COMPILED_CHECKS = speedups.compiled is not None
"""Whether ``verify_run`` is the compiled loop, which reads int64 ends in place (the pure
twin wants a list): ``read_raw(ends_array=True)`` gives arrays only then."""


@dataclass
class RawReadResult:
    """What ``PartitionLog.read_raw`` returns: the same read as ``read`` without the
    ``Record`` tuples. ``raw`` is the exact on-disk bytes of ``count`` records with dense
    offsets from ``next_offset - count`` unless ``gapped`` (compacted topics: each record
    carries its own offset); ``next_offset`` as for ``ReadResult``; ``ends`` the end
    position of each record in ``raw`` (``count`` entries, the last is ``len(raw)``): a
    list, or an int64 numpy array when asked for (``read_raw(ends_array=True)``)."""

    raw: bytes
    count: int
    next_offset: int
    ends: list[int] | np.ndarray = field(default_factory=list)
    gapped: bool = False


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


class LogReads:
    """Part of ``PartitionLog`` (``data.log``): the read side."""

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
                 upto: int | None = None, ends_array: bool = False) -> RawReadResult:
        """``read`` for callers that send the stored bytes as they are (Iggy polls).

        The same records as ``read`` with the same arguments, checked the same way (a
        record whose checksum fails is never returned; when it is the first one,
        ``StorageError`` names its offset), but no ``Record`` tuple is built.

        ``ends_array``: ``ends`` as an int64 numpy array instead of a list, for a caller
        whose compiled loop reads it in place (a Kafka fetch: a list costs an int object
        per record, a third of an 8 MiB read's time). Only with the compiled checks
        (``data.speedups``); without them ``ends`` stays a list.
        """
        if self._closed:
            raise StorageError(f"partition {self.topic}/{self.partition} is closed")
        arrays = ends_array and COMPILED_CHECKS
        try:
            ends: list[int] = []
            raw, count, at, gapped = self._read(offset, max_messages, max_bytes, upto, None, ends,
                                                arrays)
        except OSError as exc:
            self._log.error("%s/%d: read at offset %d failed: %s", self.topic, self.partition, offset, exc)
            raise StorageError(f"partition {self.topic}/{self.partition}: read at offset {offset} failed: {exc}") from exc
        if arrays:
            chunks: list[np.ndarray] = ends  # type: ignore[assignment]
            joined = chunks[0] if len(chunks) == 1 else (
                np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64))
            return RawReadResult(raw, count, at, joined, gapped)
        return RawReadResult(raw, count, at, ends, gapped)

    def _read(
        self, offset: int, max_messages: int, max_bytes: int, upto: int | None,
        records: list[Record] | None, ends_out: list[int] | None = None,
        arrays: bool = False,
    ) -> tuple[bytes, int, int, bool]:
        """The read loop of ``read`` (``records`` gets the decoded records) and ``read_raw``
        (``records`` is None: checked, not decoded; ``ends_out`` gets each record's end in
        ``raw``, or with ``arrays`` one int64 array of them per run, to be joined).
        Returns ``(raw, count, next offset, gapped)``; a compacted segment's gaps are
        skipped (a read from a removed offset starts at the next record)."""
        out_end = 0  # the last end given to ends_out
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
                        shift = out_end
                        if arrays:
                            ends_out.append(np.asarray(part.ends, dtype=np.int64) + shift)  # type: ignore[arg-type]
                        else:
                            ends_out.extend([e + shift for e in part.ends])
                        out_end = shift + part.ends[-1]
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
            # costs no copy of the whole read (``data[:consumed]``). When all k surely fit
            # (a read bounded by its count), they are read at once: joining the last one
            # on would copy the whole read instead.
            if _payload_bound(ends, k) <= budget:
                sure = k
            else:
                sure = k - 1 if k > 1 and _payload_bound(ends, k - 1) <= budget else k
            data = fs.pread(log_fd, ends[sure] - p0, p0)
            rel_ends: list[int] | np.ndarray
            if arrays:  # read in place by the compiled loops: no int object per record
                rel_ends = np.frombuffer(ends, dtype=np.uint32, count=sure + 1).astype(np.int64)
                if p0:
                    rel_ends -= p0
            else:
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
                    if arrays:
                        rel_ends = np.append(rel_ends, rel_ends[-1] + len(tail))
                    else:
                        rel_ends.append(rel_ends[-1] + len(tail))  # type: ignore[union-attr]
                run = RunResult(run.count + last.count, run.consumed + last.consumed,
                                run.payload + last.payload, last.over_budget, last.failed)
            if run.count:
                if first_found < 0:
                    first_found = at
                if ends_out is not None:
                    shift = out_end - int(rel_ends[0])
                    if arrays:
                        taken = rel_ends[1 : run.count + 1]
                        ends_out.append(taken + shift if shift else taken)  # type: ignore[arg-type]
                    else:
                        ends_out.extend(rel_ends[1 : run.count + 1] if shift == 0
                                        else [e + shift for e in rel_ends[1 : run.count + 1]])
                    out_end = int(rel_ends[run.count]) + shift
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
