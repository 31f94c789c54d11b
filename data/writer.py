"""Turning messages into record bytes, and checking bytes someone else stamped.

Owns: the append hot path's byte building (``build_batch``: one ``bytes`` for a whole batch,
checksums included), UUIDv4 id generation for a batch from one ChaCha20 keystream call
(``random_ids``), the
validation of already-stamped records (``scan_stamped``, for followers and restores), and
``write_all``, and ``stamp_framed`` (the single-pass append of messages that arrive already
framed as records, Iggy's SendMessages area). Everything byte-level comes from ``data.format``.

Performance notes (CPython is the budget): one precompiled ``Struct.pack`` per record, the
checksum over the bytes object just built, one ``b"".join`` per batch, no per-message
objects besides the bytes themselves. ``stamp_framed`` copies the whole area into one
``bytearray`` and stamps each record in place with two ``pack_into`` calls and one XXH3 over a
``bytearray`` slice (measured on 100-byte messages: about half the cost of ``build_batch``;
hashing a ``memoryview`` slice was slower than the copying slice, and a ``map``-based
variant was slower than this plain loop).

Must not import: Twisted, anything of the broker.
"""

from __future__ import annotations

import operator
import os
import struct
import threading
from collections.abc import Callable, Sequence
from itertools import accumulate, repeat

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from data import speedups
from data.format import (
    CHECKSUM,
    CHECKSUM_OFFSET,
    HEADER,
    HEADER_SIZE,
    HEADER_TAIL,
    ID_OFFSET,
    MAX_U32,
    MAX_U64,
    MAX_U128,
    OFFSET_OFFSET,
    ORIGIN_TIMESTAMP_OFFSET,
    PAYLOAD_LENGTH_OFFSET,
    RESERVED_OFFSET,
    TIMESTAMP_OFFSET,
    USER_HEADERS_LENGTH_OFFSET,
    checksum_of,
    field_view,
    record_checksum_bytes,
)
from data.fs import FileLayer
from data.reader import scan_records

__all__ = ["random_ids", "build_batch", "stamp_framed", "stamp_framed_with_ids", "scan_stamped",
           "write_all", "StampedBatch"]

# UUIDv4 as a u128 (uuid.UUID(int=...) layout): version nibble in bits 76..79 = 4,
# variant bits 62..63 = 0b10. In the 16 little-endian bytes of an id those are the high
# nibble of byte 9 and the top two bits of byte 7.
_VERSION_BYTE = 76 // 8
_VARIANT_BYTE = 62 // 8
_SET_VERSION = bytes((b & 0x0F) | 0x40 for b in range(256))
_SET_VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))


_REKEY_BYTES = 1 << 30
"""Keystream bytes one key gives before ``random_ids`` draws a new one (2**24 ChaCha20
blocks of the 2**32 a 32-bit counter allows; 64 million ids)."""


class _IdStream:
    """The randomness of the store's ids: a ChaCha20 keystream (OpenSSL's, through
    ``cryptography``) under a 256-bit key and a 96-bit nonce from ``os.urandom``, a new key
    every ``_REKEY_BYTES`` and in a forked child (which must not repeat its parent's ids).
    The construction of arc4random and of the kernel's own generator; about a tenth of
    ``os.urandom``'s cost an id for a batch of 1,000 (docs/performance.md)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._update: Callable[[bytes], bytes] | None = None
        self._left = 0
        os.register_at_fork(after_in_child=self.forget)

    def forget(self) -> None:
        """Drop the key: the next draw takes a new one (after a fork)."""
        self._update = None
        self._left = 0
        self._lock = threading.Lock()  # a child may inherit it held

    def draw(self, size: int) -> bytes:
        """``size`` keystream bytes (``size`` at most ``_REKEY_BYTES``)."""
        with self._lock:
            if self._update is None or self._left < size:
                nonce = bytes(4) + os.urandom(12)  # block counter from 0, a random nonce
                cipher = Cipher(algorithms.ChaCha20(os.urandom(32), nonce), mode=None)
                self._update = cipher.encryptor().update
                self._left = _REKEY_BYTES
            self._left -= size
            return self._update(bytes(size))  # the keystream: ChaCha20 of zeros


_ids = _IdStream()


def random_ids(n: int) -> bytes:
    """``n`` random UUIDv4 ids as consecutive 16-byte little-endian u128s.

    One keystream draw for the batch (``_IdStream``); version and variant bits are set on
    the whole batch at once, one ``bytes.translate`` over every id's version byte and one
    over every variant byte (strided slices; no ``uuid.uuid4()`` and no Python code per
    message). A batch above ``_REKEY_BYTES`` is drawn in parts.
    """
    if n <= 0:
        return b""
    size = 16 * n
    if size <= _REKEY_BYTES:
        raw = bytearray(_ids.draw(size))
    else:
        raw = bytearray()
        for start in range(0, size, _REKEY_BYTES):
            raw += _ids.draw(min(_REKEY_BYTES, size - start))
    raw[_VERSION_BYTE::16] = raw[_VERSION_BYTE::16].translate(_SET_VERSION)
    raw[_VARIANT_BYTE::16] = raw[_VARIANT_BYTE::16].translate(_SET_VARIANT)
    return bytes(raw)


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
    return _build_records(idb, payloads, user_headers, origin_timestamps, first_offset,
                          timestamp, start_position)


def _build_records_py(
    idb: bytes,
    payloads: Sequence[bytes],
    user_headers: Sequence[bytes] | None,
    origin_timestamps: Sequence[int] | None,
    first_offset: int,
    timestamp: int,
    start_position: int,
) -> tuple[bytes, list[int]]:
    """``build_batch`` with the ids given as ``16 * n`` bytes: the per-record loop, in
    Python (the reference; ``data._cspeedups.build_records`` is its compiled twin).

    Raises ``ValueError`` for mismatched lengths, for the first record with a field that
    does not fit (its index and field named: ``_first_bad``) or a payload or user headers
    that are not bytes-like, and for a batch too big for a segment.
    """
    n = len(payloads)
    if user_headers is not None and len(user_headers) != n:
        raise ValueError(f"{len(user_headers)} user headers for {n} messages")
    if origin_timestamps is not None and len(origin_timestamps) != n:
        raise ValueError(f"{len(origin_timestamps)} origin timestamps for {n} messages")
    if len(idb) != 16 * n:
        raise ValueError(f"{len(idb)} id bytes for {n} messages")
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
    except (struct.error, TypeError, OverflowError):
        bad = _first_bad(payloads, user_headers, origin_timestamps, first_offset, timestamp)
        if bad is None:
            raise
        raise ValueError(bad) from None
    ends = list(accumulate(map(len, parts), initial=start_position))
    if ends[-1] > MAX_U32:
        raise ValueError(f"batch of {ends[-1] - start_position} bytes does not fit a segment")
    return b"".join(parts), ends


def _u64_problem(what: str, value: object) -> str | None:
    """Why ``value`` is not a u64 field (None when it is one)."""
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return f"{what} must be an int, not {type(value).__name__}"
    if not 0 <= number <= MAX_U64:
        return f"{what} {value} does not fit in u64"
    return None


def _first_bad(payloads: Sequence[object], user_headers: Sequence[object] | None,
               origins: Sequence[object] | None, first_offset: int,
               timestamp: object) -> str | None:
    """The error of the first record that cannot be stamped, the fields checked in the
    order the compiled twin checks them; only walked once the fast loop failed."""
    for i, payload in enumerate(payloads):
        problem = (_u64_problem("offset", first_offset + i)
                   or _u64_problem("timestamp", timestamp)
                   or (_u64_problem("origin timestamp", origins[i]) if origins is not None else None))
        if problem is not None:
            return f"a message field does not fit its type: message {i}: {problem}"
        if not _is_buffer(payload):
            return (f"payloads and user headers must be bytes: message {i}: "
                    f"payload is {type(payload).__name__}")
        if user_headers is not None and not _is_buffer(user_headers[i]):
            return (f"payloads and user headers must be bytes: message {i}: "
                    f"user headers are {type(user_headers[i]).__name__}")
    return None


def _is_buffer(value: object) -> bool:
    try:
        memoryview(value)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


_build_records = (speedups.compiled.build_records if speedups.compiled is not None
                  else _build_records_py)


_FRAMING = struct.Struct(f"<{ID_OFFSET}xQQ{USER_HEADERS_LENGTH_OFFSET - OFFSET_OFFSET}xIIQ")
"""``(id_low, id_high, user_headers_length, payload_length, reserved)``: what
``stamp_framed`` checks in a framed message (no checksum or timestamps unpacked)."""
assert PAYLOAD_LENGTH_OFFSET == USER_HEADERS_LENGTH_OFFSET + 4 and RESERVED_OFFSET == PAYLOAD_LENGTH_OFFSET + 4
assert _FRAMING.size == HEADER_SIZE

_ID_OFFSET_TIMESTAMP = struct.Struct("<16sQQ")
"""``id u128 | offset u64 | timestamp u64``: the fields the store stamps, contiguous from
``ID_OFFSET`` in ``data.format``'s layout."""
assert ID_OFFSET + _ID_OFFSET_TIMESTAMP.size == ORIGIN_TIMESTAMP_OFFSET


def _stamp_framed_py(
    messages: bytes | bytearray,
    ends: Sequence[int] | None,
    first_offset: int,
    timestamp: int,
    start_position: int,
    fresh_ids: Callable[[int], bytes] | None = None,
) -> tuple[bytearray, list[int]]:
    """Stamp messages that arrive already framed as records: ``(record bytes, ends)``.

    ``messages`` is ``n`` records back to back (64-byte header, payload, user headers);
    ``ends`` the end position of each in ``messages`` (walked from the headers when
    ``None``). Each record keeps its payload, user headers and ``origin_timestamp``; it gets
    offset ``first_offset + i``, ``timestamp``, its id kept when non-zero and a random
    UUIDv4 otherwise, and its checksum. The result is what ``build_batch`` makes from the
    same messages split apart. ``ends`` in the result has ``n + 1`` entries, as for
    ``build_batch``. Raises ``ValueError`` when the framing is wrong (a record's lengths do
    not end it at its ``ends`` entry, a partial header, a non-zero ``reserved``, nothing
    at all) or a field does not fit; nothing is stamped then. ``fresh_ids(k)`` gives the
    ``k`` ids of the records whose id is 0, in record order (default ``random_ids``:
    UUIDv4s).

    The pure-Python (numpy) twin, the reference, of ``data._cspeedups.stamp_framed``;
    ``stamp_framed`` is whichever ``data.speedups`` picked (``ends`` below 2**62, integer
    ``first_offset`` and ``timestamp``).
    """
    total = len(messages)
    if ends is None:
        ends = _walk_ends(messages)
    n = len(ends)
    if n == 0 or total == 0:
        raise ValueError("no messages")
    if ends[-1] != total:
        raise ValueError(f"the messages end at byte {ends[-1]}; the area has {total} bytes")
    if first_offset < 0 or first_offset + n - 1 > MAX_U64:
        raise ValueError(f"offset {first_offset + n - 1} does not fit in u64")
    if not 0 <= timestamp <= MAX_U64:
        raise ValueError(f"timestamp {timestamp} does not fit in u64")
    # Every header field at once, as a column: gathered (checks) and scattered (stamps)
    # through one-byte-stride views at the record starts; only the checksums take a call
    # per record.
    end_at = np.fromiter(ends, dtype=np.int64, count=n)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = end_at[:-1]
    cut = np.nonzero(starts + HEADER_SIZE > end_at)[0]
    if len(cut):
        i = int(cut[0])
        raise ValueError(f"a message header is cut short: message {i} spans bytes "
                         f"{int(starts[i])}-{int(end_at[i])}")
    u32 = field_view(messages, "<u4")
    u64 = field_view(messages, "<u8")
    sizes = u32[starts + USER_HEADERS_LENGTH_OFFSET].astype(np.int64) + u32[starts + PAYLOAD_LENGTH_OFFSET]
    if not np.array_equal(starts + HEADER_SIZE + sizes, end_at):
        raise ValueError("a message's payload and user header lengths disagree with its end position")
    if u64[starts + RESERVED_OFFSET].any():
        raise ValueError("a message's reserved field is not 0")
    id_at = starts + ID_OFFSET
    unset = np.nonzero((u64[id_at] == 0) & (u64[id_at + 8] == 0))[0]
    stamped = bytearray(messages)  # the one copy: stamped in place through numpy views
    out = field_view(stamped, "<u8")
    if len(unset):
        given = (fresh_ids or random_ids)(len(unset))
        if len(given) != 16 * len(unset):
            raise ValueError("random_ids gave the wrong bytes")
        fresh = np.frombuffer(given, dtype="<u8")
        out[id_at[unset]] = fresh[0::2]
        out[id_at[unset] + 8] = fresh[1::2]
    out[starts + OFFSET_OFFSET] = np.arange(first_offset, first_offset + n, dtype=np.uint64)
    out[starts + TIMESTAMP_OFFSET] = timestamp
    out[starts + CHECKSUM_OFFSET] = np.frombuffer(
        record_checksum_bytes(stamped, 0, (end_at - starts).tolist()), dtype=">u8")
    del out
    positions = [start_position, *(end_at + start_position).tolist()] if start_position else [0, *ends]
    if positions[-1] > MAX_U32:
        raise ValueError(f"batch of {total} bytes does not fit a segment")
    return stamped, positions




if speedups.compiled is not None:
    _stamp_framed_c = speedups.compiled.stamp_framed

    def stamp_framed(messages: bytes | bytearray, ends: Sequence[int] | None, first_offset: int,
                     timestamp: int, start_position: int,
                     fresh_ids: Callable[[int], bytes] | None = None
                     ) -> tuple[bytearray, list[int]]:
        """``_stamp_framed_py``'s contract, one pass in C (``data._cspeedups``)."""
        return _stamp_framed_c(messages, ends, first_offset, timestamp, start_position,
                               fresh_ids or random_ids)
else:
    stamp_framed = _stamp_framed_py


class _IdsAlreadySet(Exception):
    """Some record of a batch given ``ids`` carries an id of its own."""


def stamp_framed_with_ids(messages: bytes | bytearray, ends: Sequence[int], first_offset: int,
                          timestamp: int, start_position: int, ids: bytes
                          ) -> tuple[bytearray, list[int]]:
    """``stamp_framed`` with record ``i``'s id set to ``ids[16 * i:16 * i + 16]`` (non-zero
    little-endian u128s, one per record) whatever id the record carried: the same bytes as
    writing the ids into a copy of ``messages`` first, then ``stamp_framed``.

    The common case (every record arrives with id 0, as the Kafka transport frames them)
    is that one pass: the ids go in as ``stamp_framed``'s fresh ids, no copy before it.
    """
    return _stamp_framed_with_ids(stamp_framed, messages, ends, first_offset, timestamp,
                                  start_position, ids)


def _stamp_framed_with_ids(stamp: Callable[..., tuple[bytearray, list[int]]],
                           messages: bytes | bytearray, ends: Sequence[int], first_offset: int,
                           timestamp: int, start_position: int, ids: bytes
                           ) -> tuple[bytearray, list[int]]:
    """``stamp_framed_with_ids`` over ``stamp`` (the C loop or its pure twin)."""
    n = len(ends)
    if len(ids) != 16 * n:
        raise ValueError(f"{len(ids)} id bytes for {n} records")

    asked: list[int] = []

    def given(unset: int) -> bytes:
        asked.append(unset)
        if unset != n:
            raise _IdsAlreadySet
        return ids

    try:
        stamped = stamp(messages, ends, first_offset, timestamp, start_position, given)
    except _IdsAlreadySet:
        asked.clear()  # some record carries an id of its own: the copy below sets them all
    if asked:  # (not asked: every record carried an id, or there were none)
        return stamped
    out = bytearray(messages)
    at = 0
    for i, end in enumerate(ends):
        if at + ID_OFFSET + 16 <= min(end, len(out)):  # else stamp_framed names the error
            out[at + ID_OFFSET:at + ID_OFFSET + 16] = ids[16 * i:16 * i + 16]
        at = end
    return stamp(out, ends, first_offset, timestamp, start_position)


def _walk_ends(messages: bytes | bytearray) -> list[int]:
    """End positions of the records in ``messages`` by their header lengths alone."""
    ends: list[int] = []
    pos = 0
    total = len(messages)
    unpack = HEADER.unpack_from
    while pos < total:
        if pos + HEADER_SIZE > total:
            raise ValueError(f"partial header at byte {pos} ({total - pos} of {HEADER_SIZE} bytes)")
        *_fields, uhl, pl, _rsv = unpack(messages, pos)
        pos += HEADER_SIZE + pl + uhl
        ends.append(pos)
    return ends


class StampedBatch:
    """What ``scan_stamped`` learnt about valid already-stamped records."""

    __slots__ = ("count", "ends", "max_timestamp", "first_timestamp")

    def __init__(self, count: int, ends: list[int], max_timestamp: int, first_timestamp: int) -> None:
        self.count = count
        self.ends = ends
        self.max_timestamp = max_timestamp
        self.first_timestamp = first_timestamp


def _scan_stamped_py(raw: bytes, first_offset: int, start_position: int = 0) -> StampedBatch:
    """Validate already-stamped records for ``append_records``.

    Every record must be complete, have ``reserved == 0`` and a correct checksum, and the
    offsets must be dense from ``first_offset``. Raises ``ValueError`` naming the first
    problem (and the byte position); nothing partial is accepted. ``ends`` are
    ``start_position`` plus each record's start, then plus ``len(raw)``.

    The pure-Python twin, the reference, of ``data._cspeedups.scan_stamped``;
    ``scan_stamped`` is whichever ``data.speedups`` picked.
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


if speedups.compiled is not None:
    _scan_stamped_c = speedups.compiled.scan_stamped

    def scan_stamped(raw: bytes, first_offset: int, start_position: int = 0) -> StampedBatch:
        """``_scan_stamped_py``'s contract, one pass in C (``data._cspeedups``)."""
        ends, max_ts, first_ts = _scan_stamped_c(raw, first_offset, start_position)
        return StampedBatch(len(ends) - 1, ends, max_ts, first_ts)
else:
    scan_stamped = _scan_stamped_py


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
