"""Turn stored records (docs/storage.md) into Arrow record batches, vectorised with numpy.

Owns: the row schema of the ``skerry`` and ``skerry-log`` sources, finding record starts in a
buffer, checksum verification, and building the Arrow columns (key, value, topic, partition,
offset, timestamp, headers) without a Python loop per value. Field offsets come from
``data.format`` only.

Must not import: Twisted, the broker, pyspark (it runs in Spark's Python workers).
"""

from __future__ import annotations

import mmap
import struct
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyarrow as pa

from data import speedups
from data.format import (
    CHECKSUMMED_FROM,
    HEADER_SIZE,
    KEY_HEADER_NAME,
    KIND_STRING,
    OFFSET_OFFSET,
    PAYLOAD_LENGTH_OFFSET,
    RESERVED_OFFSET,
    TIMESTAMP_OFFSET,
    U32,
    USER_HEADERS_LENGTH_OFFSET,
    checksum_of,
    decode_user_headers,
    extract_key,
    field_view,
    record_checksums,
)

__all__ = ["SCHEMA_DDL", "HEADERS_DDL", "Corruption", "Heads", "arrow_schema", "check_records",
           "read_heads", "record_heads", "record_starts", "to_batch", "walk_records"]

SCHEMA_DDL = ("key binary, value binary not null, topic string not null, partition int not null, "
              "offset bigint not null, timestamp timestamp not null")
"""Only ``key`` can be null (a message without one): declaring the rest ``not null`` is exact,
and Spark then skips a null check per field and row when it copies the rows it gets."""
HEADERS_DDL = ", headers array<struct<key: string, value: binary>> not null"

_KEY_PREFIX = bytes([KIND_STRING]) + U32.pack(len(KEY_HEADER_NAME)) + KEY_HEADER_NAME + bytes([KIND_STRING])
Buffer: TypeAlias = "bytes | bytearray | memoryview | mmap.mmap"
"""What records can be decoded from: anything with the buffer protocol and byte slicing."""
_KEY_AT = len(_KEY_PREFIX) + 4
"""Where a key's bytes start in user headers that begin with the key header."""
_KEY_PREFIX_U64 = int.from_bytes(_KEY_PREFIX[:8], "little")
_KEY_PREFIX_TAIL = int.from_bytes(_KEY_PREFIX[5:9], "little")
_HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


@dataclass(frozen=True)
class Corruption:
    """A record that failed its check: where and why."""

    position: int
    offset: int
    reason: str


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow form of ``SCHEMA_DDL`` (+ ``HEADERS_DDL``), nullability included."""
    fields = [
        pa.field("key", pa.binary()), pa.field("value", pa.binary(), nullable=False),
        pa.field("topic", pa.string(), nullable=False), pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
    if include_headers:
        fields.append(pa.field("headers", _HEADER_TYPE, nullable=False))
    return pa.schema(fields)


@dataclass(frozen=True)
class Heads:
    """Header fields of the records at some positions, gathered as columns (one numpy
    indexing call per field), shared by the checksum check and the row building."""

    checksums: np.ndarray  # uint64
    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64, microseconds
    user_headers_lengths: np.ndarray  # int64
    payload_lengths: np.ndarray  # int64
    reserved: np.ndarray  # uint64


_LENGTHS = struct.Struct("<II")
"""``user_headers_length`` and ``payload_length``, adjacent in the header (one unpack)."""
assert PAYLOAD_LENGTH_OFFSET == USER_HEADERS_LENGTH_OFFSET + 4

_HEAD_COLUMNS = 7
"""Columns ``record_heads`` fills: position, checksum, offset, timestamp,
user_headers_length, payload_length, reserved (each a little-endian u64)."""


def _record_heads_py(buf: Buffer, start: int, end: int, out: Buffer | np.ndarray) -> int:
    """Walk the records of ``buf[start:end]`` by their length fields and write the header
    fields of record ``i`` into ``out`` (a writable buffer read as ``_HEAD_COLUMNS`` columns
    of ``cap = len(out) // 56`` little-endian u64 each): ``out[c * cap + i]`` for column ``c``.
    Stops at a record that would run past ``end`` (clamped to ``len(buf)``: a partial tail)
    or after ``cap`` records; returns how many it wrote.

    The pure-Python twin (the reference) of ``data._cspeedups.record_heads``: the one
    per-record loop of a read (each start depends on the previous record's lengths).
    """
    if start < 0:
        raise ValueError("start must not be negative")
    end = min(end, len(buf))
    view = memoryview(out).cast("B")
    cap = len(view) // (8 * _HEAD_COLUMNS)
    cols = np.frombuffer(view, dtype="<u8", count=_HEAD_COLUMNS * cap)
    found = array("q")
    add = found.append
    unpack = _LENGTHS.unpack_from
    at = USER_HEADERS_LENGTH_OFFSET
    pos = start
    last = end - HEADER_SIZE
    while pos <= last and len(found) < cap:
        uhl, pl = unpack(buf, pos + at)
        nxt = pos + HEADER_SIZE + uhl + pl
        if nxt > end:
            break
        add(pos)
        pos = nxt
    n = len(found)
    if n:  # the header fields: one strided gather per column
        starts = np.frombuffer(found, dtype=np.int64)
        table = cols.reshape(_HEAD_COLUMNS, cap)
        u64, u32 = field_view(buf, "<u8"), field_view(buf, "<u4")
        table[0, :n] = starts
        for column, field in enumerate((0, OFFSET_OFFSET, TIMESTAMP_OFFSET), 1):
            table[column, :n] = u64[starts + field]
        table[4, :n] = u32[starts + USER_HEADERS_LENGTH_OFFSET]
        table[5, :n] = u32[starts + PAYLOAD_LENGTH_OFFSET]
        table[6, :n] = u64[starts + RESERVED_OFFSET]
    return n


record_heads = speedups.compiled.record_heads if speedups.compiled is not None else _record_heads_py


def walk_records(buf: Buffer, start: int = 0, end: int | None = None,
                 limit: int | None = None) -> tuple[np.ndarray, Heads]:
    """The byte positions of the records in ``buf[start:end]`` (at most ``limit`` of them),
    walking the length fields, and their header fields; stops at a record that would run
    past ``end`` (a partial tail). One ``record_heads`` call: the columns come out
    contiguous, so the rows are built from them without further gathers."""
    end = len(buf) if end is None else min(end, len(buf))
    cap = max(0, (end - start) // HEADER_SIZE)
    if limit is not None:
        cap = min(cap, limit)
    out = np.empty((_HEAD_COLUMNS, cap), dtype=np.uint64)
    n = record_heads(buf, start, end, out) if cap else 0
    cols = out[:, :n]
    return cols[0].view(np.int64), Heads(cols[1], cols[2].view(np.int64), cols[3].view(np.int64),
                                         cols[4].view(np.int64), cols[5].view(np.int64), cols[6])


def record_starts(buf: Buffer, start: int = 0, end: int | None = None) -> np.ndarray:
    """Byte positions of the records in ``buf[start:end]``, walking the length fields; stops
    at a record that would run past ``end`` (a partial tail). Callers that have the
    positions already (the segment index) skip it. Walked ``_WALK_WINDOW`` records at a
    time, so a whole segment's walk holds the header columns of one window only."""
    end = len(buf) if end is None else min(end, len(buf))
    parts: list[np.ndarray] = []
    while True:
        pos, heads = walk_records(buf, start, end, _WALK_WINDOW)
        parts.append(pos.copy())
        if len(pos) < _WALK_WINDOW:
            break
        start = int(pos[-1]) + HEADER_SIZE + int(heads.user_headers_lengths[-1]) + int(heads.payload_lengths[-1])
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


_WALK_WINDOW = 1 << 20
"""Records per ``record_heads`` call in ``record_starts`` (56 MiB of header columns)."""


def read_heads(buf: Buffer, pos: np.ndarray) -> Heads:
    """The header fields of the records at ``pos`` (each ``pos + HEADER_SIZE <= len(buf)``)."""
    u64 = field_view(buf, "<u8")
    u32 = field_view(buf, "<u4")
    return Heads(u64[pos], u64[pos + OFFSET_OFFSET].view(np.int64), u64[pos + TIMESTAMP_OFFSET].view(np.int64),
                 u32[pos + USER_HEADERS_LENGTH_OFFSET].astype(np.int64),
                 u32[pos + PAYLOAD_LENGTH_OFFSET].astype(np.int64), u64[pos + RESERVED_OFFSET])


def _int32s(values: np.ndarray) -> pa.Array:
    """An int32 Arrow array over a numpy array's memory. (Arrow arrays are built from buffers
    here: ``pa.array`` imports pandas on first use, seconds in a fresh Spark worker.)"""
    return pa.Array.from_buffers(pa.int32(), len(values), [None, pa.py_buffer(values)])


def _binary_of(offsets: np.ndarray, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(pa.binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _slices(buf: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary array of ``buf[starts[i]:starts[i]+lengths[i]]`` without a Python loop:
    interleave (start, end) as offsets over the whole buffer and take every other value
    (Arrow's ``take`` copies each value once, in C++)."""
    n = len(starts)
    if n == 0:
        return _binary_of(np.zeros(1, dtype=np.int32), b"")
    offsets = np.empty(2 * n, dtype=np.int64)
    offsets[0::2] = starts
    offsets[1::2] = starts + lengths
    if offsets[-1] < (1 << 31) - 1:
        arr = pa.BinaryArray.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(offsets.astype(np.int32)), buf])
    else:
        arr = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 2 * n - 1, [None, pa.py_buffer(offsets), buf])
    out = arr.take(_int32s(np.arange(0, 2 * n - 1, 2, dtype=np.int32)))
    return out.cast(pa.binary()) if out.type != pa.binary() else out


def check_records(buf: Buffer, pos: np.ndarray, end_limit: int,
                  heads: Heads | None = None) -> list[Corruption]:
    """Checksum (and framing) check of every record at ``pos``; the failures.

    The header fields are gathered as columns (``heads`` when the caller has them); the XXH3
    of each record is the one call per record (``checksum_of`` over a slice, driven by
    ``map`` so no Python bytecode runs per record).
    """
    if len(pos) == 0:
        return []
    fits = pos + HEADER_SIZE <= len(buf)
    bad: list[Corruption] = []
    if fits.all():
        safe = pos
    else:
        safe = pos[fits]
        bad = [Corruption(int(p), -1, "partial header") for p in pos[~fits]]
        heads = None
    if heads is None:
        heads = read_heads(buf, safe)
    ck, off = heads.checksums, heads.offsets
    ends = safe + HEADER_SIZE + heads.payload_lengths + heads.user_headers_lengths
    framed = (heads.reserved == 0) & (ends <= end_limit)
    if not framed.all():
        for i in np.nonzero(~framed)[0].tolist():
            bad.append(Corruption(int(safe[i]), int(off[i]), "bad length or reserved field"))
        idx = np.nonzero(framed)[0]
        starts, stops, expected = safe[idx], ends[idx], ck[idx]
    else:
        idx, starts, stops, expected = None, safe, ends, ck
    sums = np.fromiter(_checksums(buf, starts, stops), dtype=np.uint64, count=len(starts))
    wrong = np.nonzero(sums != expected)[0]
    if len(wrong):
        at = wrong if idx is None else idx[wrong]
        for i in at.tolist():
            bad.append(Corruption(int(safe[i]), int(off[i]), "checksum mismatch"))
    return sorted(bad, key=lambda c: c.position)


def _checksums(buf: Buffer, starts: np.ndarray, stops: np.ndarray) -> Iterable[int]:
    """The checksums of the records ``starts[i] .. stops[i]``: ``record_checksums`` when they
    lie back to back (the usual case), else each sliced and hashed."""
    if len(starts) > 1 and np.array_equal(starts[1:], stops[:-1]):
        return record_checksums(buf, int(starts[0]), (stops - starts).tolist())
    cut = buf.__getitem__  # bytes and mmap slices are copies, memoryview slices views: all hash
    return map(checksum_of, map(cut, map(slice, (starts + CHECKSUMMED_FROM).tolist(), stops.tolist())))


def _keys(buf: Buffer, pabuf: pa.Buffer, pos: np.ndarray, pl: np.ndarray,
          uhl: np.ndarray) -> pa.Array:
    """V1 keys: vectorised when the user headers start with the key header; else decoded.

    Two gathers decide it: the key header's first 8 bytes, and the 8 bytes from its 6th on
    (the rest of the name and the value kind in the low half, the key's length in the high).
    """
    n = len(pos)
    hstart = pos + HEADER_SIZE + pl
    fast = uhl >= _KEY_AT + 1
    klen = np.zeros(n, dtype=np.int64)
    if fast.any():
        idx = None if fast.all() else np.nonzero(fast)[0]
        at = hstart if idx is None else hstart[idx]
        u64 = field_view(buf, "<u8")
        tail = u64[at + 5]
        lens = (tail >> np.uint64(32)).astype(np.int64)
        ok = ((u64[at] == _KEY_PREFIX_U64) & ((tail & np.uint64(0xFFFFFFFF)) == _KEY_PREFIX_TAIL)
              & (lens >= 1) & (_KEY_AT + lens <= (uhl if idx is None else uhl[idx])))
        if idx is None:
            fast = ok
            klen = np.where(ok, lens, 0)
        else:
            fast[idx] = ok
            klen[idx] = np.where(ok, lens, 0)
    # A record without a fast key gets an empty slice at its own end (keeps offsets in order).
    keys = _slices(pabuf, np.where(fast, hstart + _KEY_AT, hstart), klen)
    if fast.all():
        return keys
    slow = np.nonzero(~fast & (uhl > 0))[0]
    if len(slow):
        values = keys.to_pylist()
        for i in np.nonzero(~fast)[0].tolist():
            values[i] = None
        for i in slow.tolist():
            s = int(hstart[i])
            values[i] = extract_key(bytes(buf[s:s + int(uhl[i])]))
        return pa.array(values, pa.binary())
    buffers = keys.buffers()
    validity = pa.py_buffer(np.packbits(fast, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, buffers[1], buffers[2]])


def _headers(buf: Buffer, pos: np.ndarray, pl: np.ndarray, uhl: np.ndarray) -> pa.Array:
    out: list[list[dict[str, object]]] = []
    for p, plen, hlen in zip(pos.tolist(), pl.tolist(), uhl.tolist(), strict=True):
        if not hlen:
            out.append([])
            continue
        s = p + HEADER_SIZE + plen
        try:
            items = decode_user_headers(bytes(buf[s:s + hlen]))
        except ValueError:
            items = []
        out.append([{"key": k.decode(errors="replace"), "value": v} for _kk, k, _vk, v in items])
    return pa.array(out, _HEADER_TYPE)


def to_batch(buf: Buffer, pos: np.ndarray, topic: str, partition: int,
             include_headers: bool, heads: Heads | None = None) -> pa.RecordBatch:
    """The rows of the records at ``pos`` in ``buf`` (already checked), as one batch.

    Every column is built from numpy gathers and Arrow buffers; the only per-record Python
    is for keys that are not the first user header and for ``headers`` when asked for.
    """
    schema = arrow_schema(include_headers)
    n = len(pos)
    if n == 0:
        return pa.RecordBatch.from_arrays([pa.nulls(0, field.type) for field in schema], schema=schema)
    pabuf = pa.py_buffer(buf)
    if heads is None:
        heads = read_heads(buf, pos)
    pl, uhl = heads.payload_lengths, heads.user_headers_lengths
    name = topic.encode()
    columns = [
        _keys(buf, pabuf, pos, pl, uhl),
        _slices(pabuf, pos + HEADER_SIZE, pl),
        pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(name)),
                                               pa.py_buffer(name * n)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.full(n, partition, dtype=np.int32))]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(np.ascontiguousarray(heads.offsets))]),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n,
                              [None, pa.py_buffer(np.ascontiguousarray(heads.timestamps))]),
    ]
    if include_headers:
        columns.append(_headers(buf, pos, pl, uhl))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
