"""Turn stored records (docs/storage.md) into Arrow record batches, vectorised with numpy.

Owns: the row schema of the ``skerry`` and ``skerry-log`` sources, finding record starts in a
buffer, checksum verification, and building the Arrow columns (key, value, topic, partition,
offset, timestamp, headers) without a Python loop per value. Field offsets come from
``data.format`` only.

Must not import: Twisted, the broker, pyspark (it runs in Spark's Python workers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

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
)

__all__ = ["SCHEMA_DDL", "HEADERS_DDL", "Corruption", "arrow_schema", "record_starts", "to_batch",
           "check_records"]

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset bigint, "
              "timestamp timestamp")
HEADERS_DDL = ", headers array<struct<key: string, value: binary>>"

_KEY_PREFIX = bytes([KIND_STRING]) + U32.pack(len(KEY_HEADER_NAME)) + KEY_HEADER_NAME + bytes([KIND_STRING])
_HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


@dataclass(frozen=True)
class Corruption:
    """A record that failed its check: where and why."""

    position: int
    offset: int
    reason: str


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
        ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")),
    ]
    if include_headers:
        fields.append(("headers", _HEADER_TYPE))
    return pa.schema(fields)


def record_starts(buf: bytes | memoryview, start: int = 0, end: int | None = None) -> np.ndarray:
    """Byte positions of the records in ``buf[start:end]``, walking the length fields; stops
    at a record that would run past ``end`` (a partial tail)."""
    end = len(buf) if end is None else end
    out = []
    pos = start
    unpack = U32.unpack_from
    while pos + HEADER_SIZE <= end:
        size = HEADER_SIZE + unpack(buf, pos + USER_HEADERS_LENGTH_OFFSET)[0] + unpack(buf, pos + PAYLOAD_LENGTH_OFFSET)[0]
        if pos + size > end:
            break
        out.append(pos)
        pos += size
    return np.asarray(out, dtype=np.int64)


def _gather(u8: np.ndarray, pos: np.ndarray, at: int, width: int, dtype: str) -> np.ndarray:
    idx = pos[:, None] + (at + np.arange(width, dtype=np.int64))
    return np.ascontiguousarray(u8[idx]).view(dtype).reshape(-1)


def _slices(buf: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary array of ``buf[starts[i]:starts[i]+lengths[i]]`` without a Python loop:
    interleave (start, end) as offsets over the whole buffer and take every other value."""
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    offsets = np.empty(2 * n, dtype=np.int64)
    offsets[0::2] = starts
    offsets[1::2] = starts + lengths
    if offsets[-1] < (1 << 31) - 1:
        arr = pa.BinaryArray.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(offsets.astype(np.int32)), buf])
    else:
        arr = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 2 * n - 1, [None, pa.py_buffer(offsets), buf])
    out = arr.take(pa.array(np.arange(0, 2 * n - 1, 2, dtype=np.int64)))
    return out.cast(pa.binary()) if out.type != pa.binary() else out


def check_records(buf: bytes | memoryview, pos: np.ndarray, end_limit: int) -> list[Corruption]:
    """Checksum (and framing) check of every record at ``pos``; the failures."""
    if len(pos) == 0:
        return []
    u8 = np.frombuffer(buf, dtype=np.uint8)
    n = len(buf)
    safe = pos[pos + HEADER_SIZE <= n]
    bad: list[Corruption] = [Corruption(int(p), -1, "partial header") for p in pos[pos + HEADER_SIZE > n]]
    ck = _gather(u8, safe, 0, 8, "<u8")
    off = _gather(u8, safe, OFFSET_OFFSET, 8, "<u8")
    rsv = _gather(u8, safe, RESERVED_OFFSET, 8, "<u8")
    ends = (safe + HEADER_SIZE + _gather(u8, safe, PAYLOAD_LENGTH_OFFSET, 4, "<u4").astype(np.int64)
            + _gather(u8, safe, USER_HEADERS_LENGTH_OFFSET, 4, "<u4").astype(np.int64))
    framed = (rsv == 0) & (ends <= end_limit)
    for i in np.nonzero(~framed)[0].tolist():
        bad.append(Corruption(int(safe[i]), int(off[i]), "bad length or reserved field"))
    mv = memoryview(buf)
    idx = np.nonzero(framed)[0]
    starts = (safe[idx] + CHECKSUMMED_FROM).tolist()
    sums = np.fromiter((checksum_of(mv[s:e]) for s, e in zip(starts, ends[idx].tolist(), strict=True)),
                       dtype=np.uint64, count=len(idx))
    for i in idx[sums != ck[idx]].tolist():
        bad.append(Corruption(int(safe[i]), int(off[i]), "checksum mismatch"))
    return sorted(bad, key=lambda c: c.position)


def _keys(buf: bytes, u8: np.ndarray, pabuf: pa.Buffer, pos: np.ndarray, pl: np.ndarray,
          uhl: np.ndarray) -> pa.Array:
    """V1 keys: vectorised when the user headers start with the key header; else decoded."""
    n = len(pos)
    hstart = pos + HEADER_SIZE + pl
    has = uhl >= len(_KEY_PREFIX) + 5
    klen = np.zeros(n, dtype=np.int64)
    fast = np.zeros(n, dtype=bool)
    if has.any():
        idx = np.nonzero(has)[0]
        prefix = u8[hstart[idx, None] + np.arange(len(_KEY_PREFIX))]
        ok = (prefix == np.frombuffer(_KEY_PREFIX, dtype=np.uint8)).all(axis=1)
        good = idx[ok]
        lens = _gather(u8, hstart[good], len(_KEY_PREFIX), 4, "<u4").astype(np.int64)
        klen[good] = lens
        fast[good] = True
    # A record without a fast key gets an empty slice at its own end (keeps offsets in order).
    keys = _slices(pabuf, np.where(fast, hstart + len(_KEY_PREFIX) + 4, hstart), klen)
    if fast.all():
        return keys
    slow = np.nonzero(~fast & (uhl > 0))[0]
    if len(slow):
        values = keys.to_pylist()
        for i in np.nonzero(~fast)[0].tolist():
            values[i] = None
        for i in slow.tolist():
            s = int(hstart[i])
            values[i] = extract_key(buf[s:s + int(uhl[i])])
        return pa.array(values, pa.binary())
    buffers = keys.buffers()
    validity = pa.py_buffer(np.packbits(fast, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, buffers[1], buffers[2]])


def _headers(buf: bytes, pos: np.ndarray, pl: np.ndarray, uhl: np.ndarray) -> pa.Array:
    out: list[list[dict[str, object]]] = []
    for p, plen, hlen in zip(pos.tolist(), pl.tolist(), uhl.tolist(), strict=True):
        if not hlen:
            out.append([])
            continue
        s = p + HEADER_SIZE + plen
        try:
            items = decode_user_headers(buf[s:s + hlen])
        except ValueError:
            items = []
        out.append([{"key": k.decode(errors="replace"), "value": v} for _kk, k, _vk, v in items])
    return pa.array(out, _HEADER_TYPE)


def to_batch(buf: bytes, pos: np.ndarray, topic: str, partition: int,
             include_headers: bool) -> pa.RecordBatch:
    """The rows of the records at ``pos`` in ``buf`` (already checked), as one batch."""
    schema = arrow_schema(include_headers)
    n = len(pos)
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema)
    u8 = np.frombuffer(buf, dtype=np.uint8)
    pabuf = pa.py_buffer(buf)
    offsets = _gather(u8, pos, OFFSET_OFFSET, 8, "<u8").astype(np.int64)
    ts = _gather(u8, pos, TIMESTAMP_OFFSET, 8, "<u8").astype(np.int64)
    uhl = _gather(u8, pos, USER_HEADERS_LENGTH_OFFSET, 4, "<u4").astype(np.int64)
    pl = _gather(u8, pos, PAYLOAD_LENGTH_OFFSET, 4, "<u4").astype(np.int64)
    columns = [
        _keys(buf, u8, pabuf, pos, pl, uhl),
        _slices(pabuf, pos + HEADER_SIZE, pl),
        pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([topic])).cast(pa.string()),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offsets),
        pa.array(ts.view("datetime64[us]"), pa.timestamp("us")).cast(pa.timestamp("us", tz="UTC")),
    ]
    if include_headers:
        columns.append(_headers(buf, pos, pl, uhl))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
