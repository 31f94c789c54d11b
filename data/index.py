"""The two index formats beside each segment log, and lookups in them.

Owns: the byte layout of ``.index`` and ``.timeindex`` and the pure functions that turn
them into arrays and back, plus the time-index lookup rule.

* ``.index`` (dense offset index): one little-endian ``u32`` per record; entry ``i`` is
  the byte position in the ``.log`` of the record with offset ``base + i``. Offsets are
  dense, so no offset is stored and a lookup is one array access (or one 4-byte ``pread``).
  The file holds exactly ``count`` entries; its size is ``4 * count``.
* ``.timeindex`` (sparse time index): 12-byte entries ``max_timestamp u64, relative_offset
  u32``, appended when a batch raises the segment's running maximum timestamp; the entry
  names the batch's first record and the maximum at the end of the batch. Therefore every
  record before an entry's ``relative_offset`` has a timestamp ``<=`` the previous entry's
  ``max_timestamp``, and the first record with ``timestamp >= t`` lies at or after the
  first entry whose ``max_timestamp >= t`` (``find_time_entry``); the reader scans from
  there. Entries that overstate a maximum (after recovery dropped a tail) only lengthen
  that scan; they never make it miss.
* ``.sindex`` (offset index of a compacted segment, which has gaps): ``span u64`` (the
  segment covers offsets ``base .. base + span - 1``), then one ``relative_offset u32,
  position u32`` pair per record, both strictly increasing. Lookups bisect the relative
  offsets (``sparse_find``). Written whole by the cleaner, never appended to.

Must not import: Twisted, anything of the broker. No I/O here.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left

import numpy as np

__all__ = [
    "POSITION_SIZE",
    "TIME_ENTRY",
    "TIME_ENTRY_SIZE",
    "positions_from_bytes",
    "positions_to_bytes",
    "time_entry_bytes",
    "time_entries_from_bytes",
    "time_entries_to_bytes",
    "find_time_entry",
    "new_positions",
    "new_time_arrays",
    "SINDEX_HEADER_SIZE",
    "SINDEX_ENTRY_SIZE",
    "sindex_bytes",
    "sindex_from_bytes",
]

POSITION_SIZE = 4
TIME_ENTRY = struct.Struct("<QI")
TIME_ENTRY_SIZE = TIME_ENTRY.size

_U32 = "I" if array("I").itemsize == 4 else "L"
_U64 = "Q"
_SWAP = sys.byteorder != "little"
assert array(_U32).itemsize == POSITION_SIZE and array(_U64).itemsize == 8


def new_positions(values: object = ()) -> array[int]:
    """An empty (or filled) array of u32 positions."""
    return array(_U32, values)  # type: ignore[arg-type]


def positions_from_bytes(data: bytes) -> array[int]:
    """Decode ``.index`` bytes (a multiple of 4) into an array of positions."""
    out = array(_U32)
    out.frombytes(data)
    if _SWAP:
        out.byteswap()
    return out


def positions_to_bytes(positions: array[int]) -> bytes:
    """Encode positions as ``.index`` bytes."""
    if _SWAP:
        swapped = array(_U32, positions)
        swapped.byteswap()
        return swapped.tobytes()
    return positions.tobytes()


def time_entry_bytes(max_timestamp: int, relative_offset: int) -> bytes:
    """One ``.timeindex`` entry."""
    return TIME_ENTRY.pack(max_timestamp, relative_offset)


def time_entries_from_bytes(data: bytes) -> tuple[array[int], array[int]]:
    """Decode ``.timeindex`` bytes (a multiple of 12) into (timestamps, relative offsets)."""
    ts: array[int] = array(_U64)
    rel: array[int] = array(_U32)
    for stamp, offset in TIME_ENTRY.iter_unpack(data):
        ts.append(stamp)
        rel.append(offset)
    return ts, rel


def time_entries_to_bytes(ts: array[int], rel: array[int]) -> bytes:
    """Encode (timestamps, relative offsets) as ``.timeindex`` bytes."""
    pack = TIME_ENTRY.pack
    return b"".join(pack(stamp, offset) for stamp, offset in zip(ts, rel, strict=True))


def new_time_arrays() -> tuple[array[int], array[int]]:
    """Empty (timestamps, relative offsets) arrays."""
    return array(_U64), array(_U32)


def find_time_entry(ts: array[int], rel: array[int], timestamp: int) -> int | None:
    """The relative offset to scan from for the first record with ``timestamp >= t``.

    ``None`` when every entry is below ``timestamp`` (no record of the segment qualifies).
    Entries' timestamps are non-decreasing (running maxima), so this is a binary search.
    """
    i = bisect_left(ts, timestamp)
    if i == len(ts):
        return None
    return rel[i]


SINDEX_HEADER_SIZE = 8
SINDEX_ENTRY_SIZE = 8
_SPAN = struct.Struct("<Q")


def sindex_bytes(span: int, rel_offsets: array[int], positions: array[int]) -> bytes:
    """Encode a compacted segment's ``.sindex``."""
    pairs = array(_U32, bytes(8 * len(rel_offsets)))
    pairs[0::2] = rel_offsets
    pairs[1::2] = positions
    if _SWAP:
        pairs.byteswap()
    return _SPAN.pack(span) + pairs.tobytes()


def _not_increasing(values: array[int]) -> bool:
    """True when ``values`` is not strictly increasing (one numpy pass, no Python loop)."""
    column = np.frombuffer(values, dtype=np.uint32).astype(np.int64)
    return bool((np.diff(column) <= 0).any())


def sindex_from_bytes(data: bytes) -> tuple[int, array[int], array[int]]:
    """Decode ``.sindex`` bytes into ``(span, relative offsets, positions)``. ``ValueError``
    when they are malformed (a partial entry, offsets or positions not increasing, an
    offset outside the span)."""
    if len(data) < SINDEX_HEADER_SIZE or (len(data) - SINDEX_HEADER_SIZE) % SINDEX_ENTRY_SIZE:
        raise ValueError(f"sindex of {len(data)} bytes is not a header plus whole entries")
    (span,) = _SPAN.unpack_from(data, 0)
    pairs = positions_from_bytes(data[SINDEX_HEADER_SIZE:])
    rels = pairs[0::2]
    positions = pairs[1::2]
    if len(rels) and (rels[-1] >= span or _not_increasing(rels) or _not_increasing(positions)):
        raise ValueError("sindex entries are not increasing inside the span")
    return span, rels, positions
