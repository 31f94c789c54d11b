"""Turning messages into record bytes, and checking bytes someone else stamped.

Owns: the append hot path's byte building (``build_batch``: one ``bytes`` for a whole batch,
checksums included), UUIDv4 id generation for a batch from one ``os.urandom`` call, the
validation of already-stamped records (``scan_stamped``, for followers and restores), and
``write_all``. Everything byte-level comes from ``data.format``.

Performance notes (CPython is the budget): one precompiled ``Struct.pack`` per record, the
checksum over the bytes object just built, one ``b"".join`` per batch, no per-message
objects besides the bytes themselves.

Must not import: Twisted, anything of the broker.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from functools import lru_cache
from itertools import accumulate, repeat

from data.format import (
    CHECKSUM,
    HEADER_TAIL,
    MAX_U32,
    MAX_U128,
    checksum_of,
)
from data.fs import FileLayer
from data.reader import scan_records

__all__ = ["random_ids", "build_batch", "scan_stamped", "write_all", "StampedBatch"]

# UUIDv4 as a u128 (uuid.UUID(int=...) layout): version nibble in bits 76..79 = 4,
# variant bits 62..63 = 0b10.
_UUID_CLEAR = MAX_U128 ^ ((0xF << 76) | (0x3 << 62))
_UUID_SET = (0x4 << 76) | (0x2 << 62)


def _build_masks(n: int) -> tuple[int, int]:
    clear = int.from_bytes(_UUID_CLEAR.to_bytes(16, "little") * n, "little")
    setbits = int.from_bytes(_UUID_SET.to_bytes(16, "little") * n, "little")
    return clear, setbits


_cached_masks = lru_cache(maxsize=8)(_build_masks)
_CACHE_UP_TO = 4096  # batch sizes whose masks are kept (a few KiB each)


def _uuid_masks(n: int) -> tuple[int, int]:
    return _cached_masks(n) if n <= _CACHE_UP_TO else _build_masks(n)


def random_ids(n: int) -> bytes:
    """``n`` random UUIDv4 ids as consecutive 16-byte little-endian u128s.

    One ``os.urandom`` call for the batch; version and variant bits are set on the whole
    batch at once with big-integer masks (no ``uuid.uuid4()`` per message).
    """
    if n <= 0:
        return b""
    clear, setbits = _uuid_masks(n)
    value = int.from_bytes(os.urandom(16 * n), "little")
    return ((value & clear) | setbits).to_bytes(16 * n, "little")


def _id_bytes(ids: Sequence[int], n: int) -> bytes:
    """16-byte ids for a batch: the given ones, a random UUIDv4 where the id is 0."""
    if len(ids) != n:
        raise ValueError(f"{len(ids)} ids for {n} messages")
    randoms = random_ids(n)
    parts = []
    for i, ident in enumerate(ids):
        if ident == 0:
            parts.append(randoms[16 * i : 16 * i + 16])
        elif 0 < ident <= MAX_U128:
            parts.append(ident.to_bytes(16, "little"))
        else:
            raise ValueError(f"id {ident} does not fit in u128")
    return b"".join(parts)


def build_batch(
    payloads: Sequence[bytes],
    user_headers: Sequence[bytes] | None,
    ids: Sequence[int] | None,
    origin_timestamps: Sequence[int] | None,
    first_offset: int,
    timestamp: int,
    start_position: int,
) -> tuple[bytes, list[int]]:
    """Stamp a batch: ``(record bytes, ends)``.

    Record ``i`` gets offset ``first_offset + i``, ``timestamp`` and the id ``ids[i]`` (a
    random UUIDv4 when absent or 0); ``origin_timestamp`` defaults to ``timestamp``.
    ``ends`` has ``n + 1`` entries: the file position of each record when the batch is
    written at ``start_position``, then the position after the batch.
    Raises ``ValueError`` for mismatched lengths or a field that does not fit.
    """
    n = len(payloads)
    if user_headers is not None and len(user_headers) != n:
        raise ValueError(f"{len(user_headers)} user headers for {n} messages")
    if origin_timestamps is not None and len(origin_timestamps) != n:
        raise ValueError(f"{len(origin_timestamps)} origin timestamps for {n} messages")
    idb = random_ids(n) if ids is None else _id_bytes(ids, n)
    pack = HEADER_TAIL.pack
    pack_ck = CHECKSUM.pack
    xxh = checksum_of
    parts: list[bytes] = []
    add = parts.append
    offset = first_offset
    j = 0
    try:
        if user_headers is None and origin_timestamps is None:
            for payload in payloads:
                rest = pack(idb[j : j + 16], offset, timestamp, timestamp, 0, len(payload), 0) + payload
                add(pack_ck(xxh(rest)) + rest)
                offset += 1
                j += 16
        else:
            uhs = repeat(b"", n) if user_headers is None else user_headers
            origins = repeat(timestamp, n) if origin_timestamps is None else origin_timestamps
            for payload, uh, origin in zip(payloads, uhs, origins, strict=True):
                rest = pack(idb[j : j + 16], offset, timestamp, origin, len(uh), len(payload), 0) + payload + uh
                add(pack_ck(xxh(rest)) + rest)
                offset += 1
                j += 16
    except struct.error as exc:
        raise ValueError(f"a message field does not fit its type: {exc}") from exc
    except TypeError as exc:
        raise ValueError(f"payloads and user headers must be bytes: {exc}") from exc
    ends = list(accumulate(map(len, parts), initial=start_position))
    if ends[-1] > MAX_U32:
        raise ValueError(f"batch of {ends[-1] - start_position} bytes does not fit a segment")
    return b"".join(parts), ends


class StampedBatch:
    """What ``scan_stamped`` learnt about valid already-stamped records."""

    __slots__ = ("count", "ends", "max_timestamp", "first_timestamp")

    def __init__(self, count: int, ends: list[int], max_timestamp: int, first_timestamp: int) -> None:
        self.count = count
        self.ends = ends
        self.max_timestamp = max_timestamp
        self.first_timestamp = first_timestamp


def scan_stamped(raw: bytes, first_offset: int, start_position: int = 0) -> StampedBatch:
    """Validate already-stamped records for ``append_records``.

    Every record must be complete, have ``reserved == 0`` and a correct checksum, and the
    offsets must be dense from ``first_offset``. Raises ``ValueError`` naming the first
    problem (and the byte position); nothing partial is accepted.
    """
    data = bytes(raw)
    if not data:
        raise ValueError("no records")
    starts, stamps, stop, reason, _needed = scan_records(data, 0, first_offset)
    if reason is not None:
        raise ValueError(f"record at byte {stop} (offset {first_offset + len(starts)} expected): {reason}")
    if start_position + len(data) > MAX_U32:
        raise ValueError(f"batch of {len(data)} bytes does not fit a segment")
    ends = [start_position + p for p in starts]
    ends.append(start_position + len(data))
    return StampedBatch(len(starts), ends, max(stamps), stamps[0])


def write_all(fs: FileLayer, fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte (one ``write`` call unless the OS returns a short count)."""
    written = fs.write(fd, data)
    if written == len(data):
        return
    view = memoryview(data)[written:]
    while view:
        written = fs.write(fd, view)
        if written <= 0:
            raise OSError(f"write returned {written}")
        view = view[written:]
