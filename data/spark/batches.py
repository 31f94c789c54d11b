"""Arrow record batches -> PRODUCE_BATCH requests, for the ``skerry`` sink (and any tool that
holds its messages as Arrow arrays).

Owns: reading the ``key`` / ``value`` / ``partition`` columns of a batch, the key-to-partition
hash (FNV-1a 32-bit, the broker's, vectorised over a column), grouping rows by target
partition (stable: each partition keeps the batch's row order, so sequence numbers are the
same when Spark replays the batch), and cutting a partition's rows into PRODUCE_BATCH
batches of at most ``max_bytes`` (the columnar layout of docs/protocol.md, built from the
Arrow buffers without a loop per message).

Must not import: Twisted, the broker, pyspark (it runs in Spark's Python workers).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from data.keys import FNV_OFFSET_BASIS as _FNV_BASIS
from data.keys import FNV_PRIME as _FNV_PRIME

__all__ = ["MAX_KEY_BYTES", "encode_columns", "fnv1a_32_column", "partition_rows", "requests"]

MAX_KEY_BYTES = 255
_BATCH_HEAD = 4  # the message count
_PER_MESSAGE = 5  # a key length (u8) and a value length (u32)


def _no_keys(n: int) -> pa.Array:
    """``n`` empty keys. (Arrays and scalars are built from buffers here: ``pa.array`` and
    ``pa.scalar`` import pandas on first use, seconds in a fresh Spark worker.)"""
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.zeros(n + 1, dtype=np.int32)),
                                                  pa.py_buffer(b"")])


def _binary(column: pa.Array | pa.ChunkedArray, what: str) -> pa.Array:
    """``column`` as one ``binary`` array (strings as their UTF-8 bytes)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type) \
            or pa.types.is_large_binary(column.type):
        column = column.cast(pa.binary())
    if not pa.types.is_binary(column.type):
        raise ValueError(f"{what} must be binary or string, not {column.type}")
    return column


def _offsets(array: pa.Array) -> np.ndarray:
    """The ``len + 1`` value offsets of a binary array (its slice offset applied), int64."""
    raw = np.frombuffer(array.buffers()[1], dtype=np.int32)
    return raw[array.offset:array.offset + len(array) + 1].astype(np.int64)


def _data(array: pa.Array) -> memoryview:
    buffer = array.buffers()[2]
    return memoryview(buffer if buffer is not None else b"")


def fnv1a_32_column(keys: pa.Array) -> np.ndarray:
    """FNV-1a 32-bit of every value of a binary array (the broker's key hash), as uint64;
    one numpy pass per byte position of the longest key, not a Python loop per key."""
    offsets = _offsets(keys)
    starts, lengths = offsets[:-1], np.diff(offsets)
    data = np.frombuffer(_data(keys), dtype=np.uint8)
    hashes = np.full(len(keys), _FNV_BASIS, dtype=np.uint64)
    for j in range(int(lengths.max()) if len(lengths) else 0):
        rows = np.nonzero(lengths > j)[0]
        mixed = hashes[rows] ^ data[starts[rows] + j]
        hashes[rows] = (mixed * _FNV_PRIME) & 0xFFFFFFFF
    return hashes


def partition_rows(batch: pa.RecordBatch, partitions: int) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """``(target partition per row, keys, values)`` of a batch with a ``value`` column and
    optional ``key`` and ``partition`` columns (a null key is no key; a null or missing
    partition is the key's hash modulo ``partitions``, as the broker would choose)."""
    names = batch.schema.names
    if "value" not in names:
        raise ValueError("the DataFrame to write needs a value column (and optionally key, partition)")
    values = _binary(batch.column("value"), "value")
    if values.null_count:
        raise ValueError("value must not be null")
    n = len(values)
    if "key" in names:
        keys = _binary(batch.column("key"), "key")
        if keys.null_count:
            keys = pc.coalesce(keys, _no_keys(n))
    else:
        keys = _no_keys(n)
    lengths = np.diff(_offsets(keys))
    if n and int(lengths.max()) > MAX_KEY_BYTES:
        raise ValueError(f"key is {int(lengths.max())} bytes; the maximum is {MAX_KEY_BYTES}")
    target = None
    if "partition" in names:
        column = batch.column("partition")
        if column.null_count == 0:
            target = column.to_numpy(zero_copy_only=False).astype(np.int64)
        elif column.null_count < n:
            given = column.to_numpy(zero_copy_only=False)  # float with NaN for the nulls
            hashed = (fnv1a_32_column(keys) % partitions).astype(np.int64)
            target = np.where(np.isnan(given), hashed, np.nan_to_num(given)).astype(np.int64)
    if target is None:
        target = (fnv1a_32_column(keys) % partitions).astype(np.int64)
    bad = (target < 0) | (target >= partitions)
    if bad.any():
        raise ValueError(f"partition {int(target[np.argmax(bad)])} out of range; the topic has "
                         f"{partitions} partitions")
    return target, keys, values


def encode_columns(keys: pa.Array, values: pa.Array, start: int, end: int) -> bytes:
    """The PRODUCE_BATCH batch of rows ``start .. end - 1`` of two binary arrays (the same
    bytes as ``broker.client.codec.encode_batch`` of those messages)."""
    koff, voff = _offsets(keys), _offsets(values)
    count = end - start
    return b"".join((
        count.to_bytes(4, "little"),
        np.diff(koff[start:end + 1]).astype(np.uint8).tobytes(),
        np.diff(voff[start:end + 1]).astype("<u4").tobytes(),
        _data(keys)[koff[start]:koff[end]],
        _data(values)[voff[start]:voff[end]],
    ))


def requests(batch: pa.RecordBatch, partitions: int,
             max_bytes: int) -> Iterator[tuple[int, bytes, int]]:
    """``(partition, PRODUCE_BATCH batch, message count)`` for every row of ``batch``: rows
    grouped by target partition in their order, each group cut into batches of at most
    ``max_bytes`` (a single message larger than that travels alone)."""
    target, keys, values = partition_rows(batch, partitions)
    if len(target) == 0:
        return
    order = np.argsort(target, kind="stable")
    sorted_target = target[order]
    bounds = np.flatnonzero(np.diff(sorted_target)) + 1
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(order)], strict=True):
        rows = order[lo:hi]
        if hi - lo == len(order) and bool(np.all(np.diff(rows) == 1)):
            k, v = keys, values  # one partition, rows in order: no copy
        else:
            index = pa.Array.from_buffers(pa.int64(), len(rows), [None, pa.py_buffer(rows)])
            k, v = keys.take(index), values.take(index)
        sizes = _PER_MESSAGE + np.diff(_offsets(k)) + np.diff(_offsets(v))
        ends = np.cumsum(sizes)
        start = 0
        while start < len(ends):
            before = int(ends[start - 1]) if start else 0
            end = int(np.searchsorted(ends, before + max_bytes - _BATCH_HEAD, side="right"))
            end = max(end, start + 1)
            yield int(sorted_target[lo]), encode_columns(k, v, start, end), end - start
            start = end
