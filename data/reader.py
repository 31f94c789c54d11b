"""Decoding and validating records that are already on disk.

Owns: the read hot path (``decode_run``: records between known index positions, checksum
verified, straight into ``Record`` tuples; ``verify_run``: the same checks for a read that
needs only the raw bytes and a count, as C-level ``map`` passes with no Python bytecode per
record), the recovery scan (``scan_records``/``scan_log``:
the longest run of intact records from a position, and why it stopped), and the header-only
walks used to size a dropped tail and to find a timestamp. Field positions come from
``data.format``; nothing here spells a byte offset of its own.

A record is *intact* when its 64-byte header is complete, ``reserved`` is 0, its lengths
stay inside the data, its checksum matches and its offset is the one expected next.

Must not import: Twisted, anything of the broker.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import add, itemgetter, sub

from data import speedups
from data.format import (
    CHECKSUM_OFFSET,
    CHECKSUMMED_FROM,
    HEADER,
    HEADER_SIZE,
    ID_OFFSET,
    OFFSET_OFFSET,
    PAYLOAD_LENGTH_OFFSET,
    RESERVED_OFFSET,
    TIMESTAMP_OFFSET,
    USER_HEADERS_LENGTH_OFFSET,
    Record,
    checksum_of,
    record_checksums,
)
from data.fs import FileLayer

__all__ = [
    "RunResult",
    "decode_run",
    "verify_run",
    "scan_records",
    "scan_log",
    "ScanResult",
    "count_framed",
    "first_timestamp_at_or_after",
]

_new_tuple = tuple.__new__

_CHECKED = struct.Struct(
    f"<Q{OFFSET_OFFSET - ID_OFFSET}xQ{USER_HEADERS_LENGTH_OFFSET - TIMESTAMP_OFFSET}xII"
)
"""``(checksum, offset, user_headers_length, payload_length)`` of a header, the fields
``verify_run`` checks (skipping the id and timestamps: no large ints built per record)."""
assert CHECKSUM_OFFSET == 0 and PAYLOAD_LENGTH_OFFSET == USER_HEADERS_LENGTH_OFFSET + 4
assert _CHECKED.size == RESERVED_OFFSET


class RunResult:
    """How ``decode_run`` ended: ``count`` records appended to ``out``, using ``consumed``
    bytes of data and ``payload`` payload bytes; ``over_budget`` when it stopped because
    the next record's payload did not fit the budget; ``failed`` when the record at
    ``first_offset + count`` did not check out (corrupt data, or an index that disagrees
    with the log: the caller finds out which)."""

    __slots__ = ("count", "consumed", "payload", "over_budget", "failed")

    def __init__(self, count: int, consumed: int, payload: int, over_budget: bool, failed: bool) -> None:
        self.count = count
        self.consumed = consumed
        self.payload = payload
        self.over_budget = over_budget
        self.failed = failed


def _decode_run_py(
    data: bytes,
    ends: Sequence[int],
    first_offset: int,
    out: list[Record],
    budget: int,
    take_first: bool,
) -> RunResult:
    """Decode the records whose positions in ``data`` are ``ends[:-1]`` (``ends[0] == 0``,
    ``ends[-1]`` the end of the last one), expecting offsets from ``first_offset``.

    Every record is checked against its checksum, its expected offset and the index
    (``position + 64 + lengths == next position``) before it is handed out. Stops before the
    first record whose payload would take the sum of payloads past ``budget`` -- unless it is
    the very first record and ``take_first`` (a read returns at least one record).

    The pure-Python twin (the reference) of ``data._cspeedups.decode_run``;
    ``decode_run`` is whichever ``data.speedups`` picked (same preconditions as
    ``_verify_run_py``).
    """
    unpack = HEADER.unpack_from
    xxh = checksum_of
    add = out.append
    record_type = Record
    new = _new_tuple
    start = 0
    expect = first_offset
    used = 0
    over = False
    failed = False
    short = len(data) < ends[-1]
    if short:  # the file is shorter than the index says: decode what is there, then fail
        ends = [e for e in ends if e <= len(data)]
    it = iter(ends)
    next(it)
    try:
        for end in it:
            ck, lo, hi, off, ts, ots, uhl, pl, _rsv = unpack(data, start)
            body_end = start + HEADER_SIZE + pl
            if body_end + uhl != end or off != expect or xxh(data[start + CHECKSUMMED_FROM : end]) != ck:
                failed = True
                break
            used += pl
            if used > budget and (expect != first_offset or not take_first):
                used -= pl
                over = True
                break
            add(new(record_type, (off, ts, lo | hi << 64, ots, data[start + HEADER_SIZE : body_end], data[body_end:end])))
            start = end
            expect += 1
        else:
            failed = short
    except struct.error:
        failed = True
    return RunResult(expect - first_offset, start, used, over, failed)


def _verify_run_py(
    data: bytes,
    ends: Sequence[int],
    first_offset: int,
    budget: int,
    take_first: bool,
) -> RunResult:
    """``decode_run`` without the ``Record`` tuples: the same checks, the same stopping
    rules, the same ``RunResult``; the caller keeps ``data[:result.consumed]``.

    The records at ``ends[:-1]`` are checked in whole-run passes (headers unpacked, lengths
    against the index, offsets dense from ``first_offset``, XXH3 over every record); only
    when a pass finds a mismatch is the run walked record by record to find the first bad
    one. A record that fails its checks is never counted: the run stops before it.
    """
    short = len(data) < ends[-1]
    if short:
        ends = [e for e in ends if e <= len(data)]
    k = len(ends) - 1
    if k <= 0:
        return RunResult(0, 0, 0, False, short)
    starts = ends[:-1]
    stops = ends[1:]
    try:
        heads = list(map(_CHECKED.unpack_from, repeat(data, k), starts))
    except struct.error:
        return _verify_slow(data, ends, first_offset, budget, take_first, short)
    pls = list(map(itemgetter(3), heads))
    sizes = list(map(sub, stops, starts))
    good = (
        list(map(add, map(add, pls, map(itemgetter(2), heads)), repeat(HEADER_SIZE, k))) == sizes
        and list(map(itemgetter(1), heads)) == list(range(first_offset, first_offset + k))
        and record_checksums(data, starts[0], sizes) == list(map(itemgetter(0), heads))
    )
    if not good:
        return _verify_slow(data, ends, first_offset, budget, take_first, short)
    sums = list(accumulate(pls))
    if sums[-1] <= budget:
        return RunResult(k, ends[k], sums[-1], False, short)
    count = bisect_right(sums, budget)
    if count == 0 and take_first:
        count = 1
    if count >= k:  # a single record taken over budget: decode_run ends the run normally
        return RunResult(k, ends[k], sums[-1], False, short)
    return RunResult(count, ends[count], sums[count - 1] if count else 0, True, False)


if speedups.compiled is not None:
    _verify_run_c = speedups.compiled.verify_run
    _decode_run_c = speedups.compiled.decode_run

    def decode_run(data: bytes, ends: Sequence[int], first_offset: int, out: list[Record],
                   budget: int, take_first: bool) -> RunResult:
        """``_decode_run_py``'s contract, one pass in C (``data._cspeedups``)."""
        return RunResult(*_decode_run_c(data, ends, first_offset, out, budget, take_first,
                                        Record))

    def verify_run(data: bytes, ends: Sequence[int], first_offset: int, budget: int,
                   take_first: bool) -> RunResult:
        """``_verify_run_py``'s contract, one pass in C (``data._cspeedups``)."""
        return RunResult(*_verify_run_c(data, ends, first_offset, budget, take_first))
else:
    verify_run = _verify_run_py
    decode_run = _decode_run_py


def _verify_slow(
    data: bytes, ends: Sequence[int], first_offset: int, budget: int, take_first: bool, short: bool
) -> RunResult:
    """``verify_run`` record by record (only for a run that holds a bad record)."""
    unpack = HEADER.unpack_from
    start = 0
    expect = first_offset
    used = 0
    it = iter(ends)
    next(it)
    for end in it:
        try:
            ck, _lo, _hi, off, _ts, _ots, uhl, pl, _rsv = unpack(data, start)
        except struct.error:
            return RunResult(expect - first_offset, start, used, False, True)
        if start + HEADER_SIZE + pl + uhl != end or off != expect or checksum_of(data[start + CHECKSUMMED_FROM : end]) != ck:
            return RunResult(expect - first_offset, start, used, False, True)
        if used + pl > budget and (expect != first_offset or not take_first):
            return RunResult(expect - first_offset, start, used, True, False)
        used += pl
        start = end
        expect += 1
    return RunResult(expect - first_offset, start, used, False, short)


def scan_records(data: bytes, pos: int, expect: int) -> tuple[list[int], list[int], int, str | None, int]:
    """The intact records of ``data`` from ``pos`` on, expecting offsets from ``expect``.

    Returns ``(starts, timestamps, stop, reason, needed)``: the start position and the
    timestamp of each intact record, where the run stopped, and why (``None`` when it ended
    exactly at the end of ``data``). ``needed > 0`` means the data simply ran out: the
    record at ``stop`` needs ``needed`` bytes (the caller may read more and continue).
    """
    unpack = HEADER.unpack_from
    xxh = checksum_of
    total = len(data)
    starts: list[int] = []
    stamps: list[int] = []
    while pos < total:
        if pos + HEADER_SIZE > total:
            return starts, stamps, pos, f"partial header ({total - pos} of {HEADER_SIZE} bytes)", HEADER_SIZE
        ck, _lo, _hi, off, ts, _ots, uhl, pl, rsv = unpack(data, pos)
        end = pos + HEADER_SIZE + pl + uhl
        if rsv:
            return starts, stamps, pos, f"reserved field is {rsv}, must be 0", 0
        if end > total:
            return starts, stamps, pos, f"bad length or partial record (needs {end - pos} bytes, {total - pos} present)", end - pos
        if off != expect:
            return starts, stamps, pos, f"offset field is {off}, expected {expect}", 0
        if xxh(data[pos + CHECKSUMMED_FROM : end]) != ck:
            return starts, stamps, pos, "checksum mismatch", 0
        starts.append(pos)
        stamps.append(ts)
        expect += 1
        pos = end
    return starts, stamps, pos, None, 0


class ScanResult:
    """The intact prefix of a log region: record ``starts`` and ``timestamps``, the ``end``
    position after the last intact record, and why the scan stopped (``None`` = end of file)."""

    __slots__ = ("starts", "timestamps", "end", "reason")

    def __init__(self, starts: list[int], timestamps: list[int], end: int, reason: str | None) -> None:
        self.starts = starts
        self.timestamps = timestamps
        self.end = end
        self.reason = reason


def scan_log(
    fs: FileLayer, fd: int, start: int, file_size: int, expect: int, chunk: int = 8 << 20
) -> ScanResult:
    """Scan ``[start, file_size)`` of a log in chunks; stop at the first bad record."""
    starts: list[int] = []
    stamps: list[int] = []
    pos = start
    want = chunk
    while pos < file_size:
        data = fs.pread(fd, min(want, file_size - pos), pos)
        if not data:
            return ScanResult(starts, stamps, pos, "short read")
        s, t, stop, reason, needed = scan_records(data, 0, expect)
        starts.extend(p + pos for p in s)
        stamps.extend(t)
        expect += len(s)
        pos += stop
        if reason is None:
            want = chunk
            continue
        if needed and len(data) < file_size - (pos - stop) and pos + needed <= file_size:
            want = max(chunk, needed)  # the chunk cut a record: read it whole
            continue
        return ScanResult(starts, stamps, pos, reason)
    return ScanResult(starts, stamps, pos, None)


def count_framed(data: bytes) -> tuple[int, bool]:
    """How many records ``data`` seems to hold by their lengths alone (checksums ignored),
    and whether bytes are left over after them: the size of a dropped tail, for reports."""
    pos = 0
    count = 0
    total = len(data)
    unpack = HEADER.unpack_from
    while pos + HEADER_SIZE <= total:
        *_fields, uhl, pl, rsv = unpack(data, pos)
        end = pos + HEADER_SIZE + pl + uhl
        if rsv or end > total:
            break
        count += 1
        pos = end
    return count, pos < total


def first_timestamp_at_or_after(data: bytes, target: int) -> tuple[int | None, int, int]:
    """Walk record headers in ``data``: ``(index of the first record with timestamp >=
    target or None, records walked, bytes consumed)``. Stops at the first incomplete record."""
    pos = 0
    i = 0
    total = len(data)
    unpack = HEADER.unpack_from
    while pos + HEADER_SIZE <= total:
        _ck, _lo, _hi, _off, ts, _ots, uhl, pl, _rsv = unpack(data, pos)
        end = pos + HEADER_SIZE + pl + uhl
        if end > total:
            break
        if ts >= target:
            return i, i, pos
        i += 1
        pos = end
    return None, i, pos
