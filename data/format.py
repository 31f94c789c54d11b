"""The byte layout of a stored record (an Iggy message) and of its user headers.

Owns: every constant that says where a field lives in a record, the ``struct`` objects that
pack and unpack them, the checksum rule, the user-header encoding (and the V1 key header),
the ``Record`` value type, and small encode/decode/verify helpers. The writer, the reader,
recovery, the replication layer and the Iggy codec all import these names; nobody else
spells a field offset (Iggy's recovery once parsed a 24-byte index with a 16-byte parser:
one source of layout is the fix).

A record, little-endian throughout::

    checksum u64 | id u128 | offset u64 | timestamp u64 | origin_timestamp u64 |
    user_headers_length u32 | payload_length u32 | reserved u64 (= 0)      -- 64 bytes
    payload (payload_length bytes)
    user_headers (user_headers_length bytes)

``checksum = xxh3_64(record[8:])`` (XXH3 64-bit, seed 0): every byte after the checksum.

User headers: repeated ``key_kind u8, key_len u32, key, value_kind u8, value_len u32,
value`` with both lengths in 1..255 and both kinds in 1..15. A V1 key travels as one
header ``(2, b"key", 2, <key bytes>)``; an empty V1 key means no header at all.

Must not import: Twisted, anything else of Skerry but ``data.speedups`` (this is the leaf
every layer shares).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import xxhash

from data import speedups

__all__ = [
    "field_view",
    "header_rows",
    "payload_spans",
    "consume_items",
    "keyed_headers",
    "HEADER_SIZE",
    "CHECKSUM_OFFSET",
    "ID_OFFSET",
    "OFFSET_OFFSET",
    "TIMESTAMP_OFFSET",
    "ORIGIN_TIMESTAMP_OFFSET",
    "USER_HEADERS_LENGTH_OFFSET",
    "PAYLOAD_LENGTH_OFFSET",
    "RESERVED_OFFSET",
    "CHECKSUMMED_FROM",
    "CHECKSUM_RANGE",
    "ID_RANGE",
    "OFFSET_RANGE",
    "TIMESTAMP_RANGE",
    "ORIGIN_TIMESTAMP_RANGE",
    "USER_HEADERS_LENGTH_RANGE",
    "PAYLOAD_LENGTH_RANGE",
    "RESERVED_RANGE",
    "HEADER",
    "HEADER_TAIL",
    "CHECKSUM",
    "U32",
    "MAX_U32",
    "MAX_U64",
    "MAX_U128",
    "checksum_of",
    "record_checksum_bytes",
    "record_checksums",
    "HeaderKind",
    "KIND_RAW",
    "KIND_STRING",
    "KEY_HEADER_NAME",
    "KAFKA_HEADERS_NAME",
    "encode_user_headers",
    "decode_user_headers",
    "key_header",
    "extract_key",
    "record_key",
    "keyless_framed",
    "dense_prefix",
    "Record",
    "RecordHeader",
    "encode_record",
    "decode_header",
    "decode_record",
    "verify_record",
    "check_record",
]

# --- field offsets (bytes from the start of a record) --------------------------------------

HEADER_SIZE = 64
CHECKSUM_OFFSET = 0
ID_OFFSET = 8
OFFSET_OFFSET = 24
TIMESTAMP_OFFSET = 32
ORIGIN_TIMESTAMP_OFFSET = 40
USER_HEADERS_LENGTH_OFFSET = 48
PAYLOAD_LENGTH_OFFSET = 52
RESERVED_OFFSET = 56
CHECKSUMMED_FROM = ID_OFFSET
"""The checksum covers ``record[CHECKSUMMED_FROM:]``: everything after the checksum."""

CHECKSUM_RANGE = slice(CHECKSUM_OFFSET, ID_OFFSET)
ID_RANGE = slice(ID_OFFSET, OFFSET_OFFSET)
OFFSET_RANGE = slice(OFFSET_OFFSET, TIMESTAMP_OFFSET)
TIMESTAMP_RANGE = slice(TIMESTAMP_OFFSET, ORIGIN_TIMESTAMP_OFFSET)
ORIGIN_TIMESTAMP_RANGE = slice(ORIGIN_TIMESTAMP_OFFSET, USER_HEADERS_LENGTH_OFFSET)
USER_HEADERS_LENGTH_RANGE = slice(USER_HEADERS_LENGTH_OFFSET, PAYLOAD_LENGTH_OFFSET)
PAYLOAD_LENGTH_RANGE = slice(PAYLOAD_LENGTH_OFFSET, RESERVED_OFFSET)
RESERVED_RANGE = slice(RESERVED_OFFSET, HEADER_SIZE)

# --- structs ---------------------------------------------------------------------------------

HEADER = struct.Struct("<QQQQQQIIQ")
"""The whole header. Unpacks to ``(checksum, id_low, id_high, offset, timestamp,
origin_timestamp, user_headers_length, payload_length, reserved)``; the u128 id is two u64
halves, low half first (little-endian), ``id = id_low | id_high << 64``."""

HEADER_TAIL = struct.Struct("<16sQQQIIQ")
"""The header after the checksum (the first checksummed bytes), id as 16 raw bytes:
``(id_le16, offset, timestamp, origin_timestamp, user_headers_length, payload_length,
reserved)``. The writer packs this, appends payload and user headers, hashes, and puts
``CHECKSUM`` in front."""

CHECKSUM = struct.Struct("<Q")
U32 = struct.Struct("<I")

assert HEADER.size == HEADER_SIZE
assert CHECKSUM.size + HEADER_TAIL.size == HEADER_SIZE
assert HEADER_TAIL.size == HEADER_SIZE - CHECKSUMMED_FROM

MAX_U32 = (1 << 32) - 1
MAX_U64 = (1 << 64) - 1
MAX_U128 = (1 << 128) - 1

checksum_of = xxhash.xxh3_64_intdigest
"""``checksum_of(record[CHECKSUMMED_FROM:])`` is a record's checksum (XXH3-64, seed 0)."""
_digest_of = xxhash.xxh3_64_digest


class _SplitFields(dict[int, str]):
    """``struct`` field of a record of ``size`` bytes: skip the checksum, take the rest."""

    def __missing__(self, size: int) -> str:
        if len(self) > 4096:
            self.clear()
        field = self[size] = f"{CHECKSUMMED_FROM}x{size - CHECKSUMMED_FROM}s"
        return field


_SPLIT_FIELDS = _SplitFields()
_SPLITTERS: dict[tuple[int, ...], struct.Struct] = {}
_SPLIT_CHUNK = 4096
"""Records per ``struct`` splitter (bounds a splitter's size; longer runs take several)."""


def _checksummed_parts(buf: bytes | bytearray | memoryview, first: int,
                       sizes: list[int]) -> list[bytes]:
    """The checksummed bytes of each record lying back to back in ``buf`` from ``first``
    (``sizes[i]`` bytes each), cut by one cached ``struct`` splitter per run of records."""
    out: list[bytes] = []
    for i in range(0, len(sizes), _SPLIT_CHUNK):
        part = sizes[i:i + _SPLIT_CHUNK] if len(sizes) > _SPLIT_CHUNK else sizes
        key = tuple(part)
        splitter = _SPLITTERS.get(key)
        if splitter is None:
            if len(_SPLITTERS) >= 32:
                _SPLITTERS.clear()
            splitter = _SPLITTERS[key] = struct.Struct(
                "<" + "".join(map(_SPLIT_FIELDS.__getitem__, part)))
        out += splitter.unpack_from(buf, first)
        first += splitter.size
    return out


def record_checksums(buf: bytes | bytearray | memoryview, first: int, sizes: list[int]) -> list[int]:
    """The checksums (``checksum_of`` of all but the checksum field) of records that lie
    back to back in ``buf`` from byte ``first``, ``sizes[i]`` bytes each (every size at
    least ``CHECKSUMMED_FROM``; ``struct.error`` when they run past ``buf``).

    The checksummed bytes are cut out by one ``struct`` unpack of ``8x<n>s`` fields per run
    (the splitter is compiled once per shape of batch and kept: batches of one shape repeat),
    then hashed by ``map``: no Python bytecode and no slice object per record, about a
    quarter of the cost of slicing record by record.
    """
    return list(map(checksum_of, _checksummed_parts(buf, first, sizes)))


def record_checksum_bytes(buf: bytes | bytearray | memoryview, first: int, sizes: list[int]) -> bytes:
    """``record_checksums`` as 8-byte big-endian digests back to back (numpy ``>u8``): what
    a writer stamps many of at once, without a Python int per checksum."""
    return b"".join(map(_digest_of, _checksummed_parts(buf, first, sizes)))


# --- user headers ------------------------------------------------------------------------------


class HeaderKind:
    """User-header kind codes (Iggy's ``HeaderKind::as_code``)."""

    RAW = 1
    STRING = 2
    BOOL = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    INT128 = 8
    UINT8 = 9
    UINT16 = 10
    UINT32 = 11
    UINT64 = 12
    UINT128 = 13
    FLOAT32 = 14
    FLOAT64 = 15


KIND_RAW = HeaderKind.RAW
KIND_STRING = HeaderKind.STRING
_MIN_KIND, _MAX_KIND = 1, 15
_MIN_LEN, _MAX_LEN = 1, 255
KEY_HEADER_NAME = b"key"
KAFKA_HEADERS_NAME = b"kafka.headers"
"""The reserved user header that carries a Kafka record's header list when it cannot be
one user header per Kafka header (docs/storage.md, "Kafka headers"): the list in Kafka's own
encoding (varint count, then varint-length key and value of each, -1 for a null value), cut
into values of at most 255 bytes, one entry each, in order (string name, raw value)."""

_KEY_PREFIX = bytes([KIND_STRING]) + U32.pack(len(KEY_HEADER_NAME)) + KEY_HEADER_NAME + bytes([KIND_STRING])
_KEY_VALUE_AT = len(_KEY_PREFIX) + 4  # after the value length


def encode_user_headers(headers: list[tuple[int, bytes, int, bytes]]) -> bytes:
    """Encode ``[(key_kind, key, value_kind, value), ...]``; ``b""`` for no headers.

    Raises ``ValueError`` for a kind outside 1..15 or a key/value length outside 1..255.
    """
    parts: list[bytes] = []
    for key_kind, key, value_kind, value in headers:
        _check_kind("key", key_kind)
        _check_kind("value", value_kind)
        _check_len("key", key)
        _check_len("value", value)
        parts.append(bytes((key_kind,)) + U32.pack(len(key)) + bytes(key))
        parts.append(bytes((value_kind,)) + U32.pack(len(value)) + bytes(value))
    return b"".join(parts)


def decode_user_headers(raw: bytes) -> list[tuple[int, bytes, int, bytes]]:
    """Decode user headers into ``[(key_kind, key, value_kind, value), ...]``.

    Raises ``ValueError`` naming the byte position when the encoding is malformed: a
    truncated field, a kind outside 1..15 or a length outside 1..255.
    """
    out: list[tuple[int, bytes, int, bytes]] = []
    pos = 0
    end = len(raw)
    while pos < end:
        key_kind, key, pos = _decode_field(raw, pos, "key")
        value_kind, value, pos = _decode_field(raw, pos, "value")
        out.append((key_kind, key, value_kind, value))
    return out


def key_header(key: bytes) -> bytes:
    """The user headers carrying a V1 message key; ``b""`` for the empty key."""
    if not key:
        return b""
    if len(key) > _MAX_LEN:
        raise ValueError(f"key is {len(key)} bytes; at most {_MAX_LEN}")
    return _KEY_PREFIX + U32.pack(len(key)) + bytes(key)


def extract_key(user_headers: bytes) -> bytes | None:
    """The V1 key carried in ``user_headers``, or ``None`` (no key header, or malformed).

    Fast path: a blob that is exactly one key header is sliced without decoding.
    """
    if not user_headers:
        return None
    if user_headers.startswith(_KEY_PREFIX):
        (length,) = U32.unpack_from(user_headers, len(_KEY_PREFIX))
        if _KEY_VALUE_AT + length == len(user_headers) and _MIN_LEN <= length <= _MAX_LEN:
            return bytes(user_headers[_KEY_VALUE_AT:])
    try:
        headers = decode_user_headers(user_headers)
    except ValueError:
        return None
    for key_kind, key, value_kind, value in headers:
        if key_kind == KIND_STRING and key == KEY_HEADER_NAME and value_kind == KIND_STRING:
            return value
    return None


_RAW_KEY_PREFIX = bytes([KIND_STRING]) + U32.pack(len(KEY_HEADER_NAME)) + KEY_HEADER_NAME + bytes([KIND_RAW])


def record_key(user_headers: bytes) -> bytes | None:
    """The key a compacted topic keys a record by: the value of its ``key`` header, whether
    a string (a V1 key, a UTF-8 Kafka key) or raw bytes (a Kafka key that is not UTF-8),
    ``None`` when it has none (or malformed headers). The same key bytes always get the
    same kind (``key_header``; the Kafka mapping), so the value alone identifies the key.
    """
    if not user_headers:
        return None
    if user_headers.startswith(_KEY_PREFIX) or user_headers.startswith(_RAW_KEY_PREFIX):
        (length,) = U32.unpack_from(user_headers, len(_KEY_PREFIX))
        if _KEY_VALUE_AT + length == len(user_headers) and _MIN_LEN <= length <= _MAX_LEN:
            return bytes(user_headers[_KEY_VALUE_AT:])
    try:
        headers = decode_user_headers(user_headers)
    except ValueError:
        return None
    for key_kind, key, value_kind, value in headers:
        if key_kind == KIND_STRING and key == KEY_HEADER_NAME and value_kind in (KIND_STRING, KIND_RAW):
            return value
    return None


def keyless_framed(messages: bytes | bytearray | memoryview, ends: Sequence[int] | None) -> bool:
    """True when one of the records framed back to back in ``messages`` (``ends`` their
    end positions, or walked from the headers when None) has no key (``record_key``). For
    compacted topics only: a loop over the records. Framing errors are left to the store
    (a malformed frame answers False here)."""
    pos = 0
    size = len(messages)
    seen: set[bytes] = set()
    for end in ends if ends is not None else iter(int, 1):
        if pos + HEADER_SIZE > size:
            return False
        *_fields, uhl, pl, _rsv = HEADER.unpack_from(messages, pos)
        stop = pos + HEADER_SIZE + pl + uhl
        if ends is None:
            end = stop
        headers = bytes(messages[pos + HEADER_SIZE + pl:stop])
        if headers not in seen:
            if record_key(headers) is None:
                return True
            seen.add(headers)
        pos = end
        if ends is None and pos >= size:
            break
    return False


def _check_kind(what: str, kind: int) -> None:
    if not _MIN_KIND <= kind <= _MAX_KIND:
        raise ValueError(f"user header {what} kind {kind} outside {_MIN_KIND}..{_MAX_KIND}")


def _check_len(what: str, data: bytes) -> None:
    if not _MIN_LEN <= len(data) <= _MAX_LEN:
        raise ValueError(f"user header {what} length {len(data)} outside {_MIN_LEN}..{_MAX_LEN}")


def _decode_field(raw: bytes, pos: int, what: str) -> tuple[int, bytes, int]:
    if pos + 5 > len(raw):
        raise ValueError(f"user headers truncated at byte {pos} (in a {what} kind/length)")
    kind = raw[pos]
    if not _MIN_KIND <= kind <= _MAX_KIND:
        raise ValueError(f"user header {what} kind {kind} at byte {pos} outside {_MIN_KIND}..{_MAX_KIND}")
    (length,) = U32.unpack_from(raw, pos + 1)
    if not _MIN_LEN <= length <= _MAX_LEN:
        raise ValueError(f"user header {what} length {length} at byte {pos + 1} outside {_MIN_LEN}..{_MAX_LEN}")
    start = pos + 5
    if start + length > len(raw):
        raise ValueError(f"user headers truncated at byte {len(raw)} (a {what} of {length} bytes from {start})")
    return kind, bytes(raw[start : start + length]), start + length


# --- records -----------------------------------------------------------------------------------


class Record(NamedTuple):
    """One stored message as the reader hands it out (no per-message objects beyond this)."""

    offset: int
    timestamp: int
    id: int
    origin_timestamp: int
    payload: bytes
    user_headers: bytes

    @property
    def key(self) -> bytes | None:
        """The V1 key in the user headers (``None`` when there is none)."""
        return extract_key(self.user_headers)

    def to_bytes(self) -> bytes:
        """The exact on-disk bytes of this record (checksum recomputed; it is a function of
        the other bytes, so a record read from disk encodes back to what was read)."""
        return encode_record(
            self.offset, self.timestamp, self.id, self.origin_timestamp, self.payload, self.user_headers
        )


class RecordHeader(NamedTuple):
    """The decoded 64-byte header."""

    checksum: int
    id: int
    offset: int
    timestamp: int
    origin_timestamp: int
    user_headers_length: int
    payload_length: int
    reserved: int


def encode_record(
    offset: int,
    timestamp: int,
    id: int,
    origin_timestamp: int,
    payload: bytes,
    user_headers: bytes = b"",
) -> bytes:
    """One record's bytes, checksum included. ``ValueError`` when a field does not fit."""
    if not 0 <= id <= MAX_U128:
        raise ValueError(f"id {id} does not fit in u128")
    for name, value in (("offset", offset), ("timestamp", timestamp), ("origin_timestamp", origin_timestamp)):
        if not 0 <= value <= MAX_U64:
            raise ValueError(f"{name} {value} does not fit in u64")
    if len(payload) > MAX_U32 or len(user_headers) > MAX_U32:
        raise ValueError("payload or user headers longer than u32")
    tail = (
        HEADER_TAIL.pack(
            id.to_bytes(16, "little"), offset, timestamp, origin_timestamp, len(user_headers), len(payload), 0
        )
        + bytes(payload)
        + bytes(user_headers)
    )
    return CHECKSUM.pack(checksum_of(tail)) + tail


def decode_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> RecordHeader:
    """The header at ``buf[pos:pos + 64]`` (``ValueError`` when fewer bytes remain)."""
    if pos < 0 or pos + HEADER_SIZE > len(buf):
        raise ValueError(f"partial header at byte {pos}: {max(0, len(buf) - pos)} of {HEADER_SIZE} bytes")
    ck, lo, hi, off, ts, ots, uhl, pl, rsv = HEADER.unpack_from(buf, pos)
    return RecordHeader(ck, lo | hi << 64, off, ts, ots, uhl, pl, rsv)


def check_record(buf: bytes | bytearray | memoryview, pos: int = 0, expect: int | None = None) -> str | None:
    """Why the record at ``buf[pos]`` is not intact, or ``None`` when it is.

    Intact: a complete header, ``reserved == 0``, lengths inside ``buf``, a matching
    checksum, and (when ``expect`` is given) the offset ``expect``.
    """
    total = len(buf)
    if pos < 0 or pos + HEADER_SIZE > total:
        return f"partial header ({max(0, total - pos)} of {HEADER_SIZE} bytes)"
    ck, _lo, _hi, off, _ts, _ots, uhl, pl, rsv = HEADER.unpack_from(buf, pos)
    if rsv:
        return f"reserved field is {rsv}, must be 0"
    end = pos + HEADER_SIZE + pl + uhl
    if end > total:
        return f"bad length or partial record (needs {end - pos} bytes, {total - pos} present)"
    if checksum_of(bytes(buf[pos + CHECKSUMMED_FROM : end])) != ck:
        return "checksum mismatch"
    if expect is not None and off != expect:
        return f"offset field is {off}, expected {expect}"
    return None


def verify_record(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """Check the record starting at ``buf[pos]``; return the position just after it.

    Raises ``ValueError`` naming the byte position and the reason (``check_record``).
    """
    reason = check_record(buf, pos)
    if reason is not None:
        raise ValueError(f"record at byte {pos}: {reason}")
    _ck, _lo, _hi, _off, _ts, _ots, uhl, pl, _rsv = HEADER.unpack_from(buf, pos)
    return pos + HEADER_SIZE + pl + uhl


def decode_record(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[Record, int]:
    """Verify and decode the record at ``buf[pos]``: ``(record, position after it)``."""
    end = verify_record(buf, pos)
    _ck, lo, hi, off, ts, ots, uhl, pl, _rsv = HEADER.unpack_from(buf, pos)
    body = pos + HEADER_SIZE
    payload = bytes(buf[body : body + pl])
    user_headers = bytes(buf[body + pl : end])
    return Record(off, ts, lo | hi << 64, ots, payload, user_headers), end


def field_view(buf: bytes | bytearray | memoryview | mmap.mmap | np.ndarray, dtype: str) -> np.ndarray:
    """``buf`` read as ``dtype`` at every byte position: an unaligned view sharing its memory
    with a stride of one byte (writeable when ``buf`` is), so ``field_view(buf, "<u8")[starts
    + OFFSET_OFFSET]`` gathers (or, assigned to, stamps) one header field of every record in
    one numpy indexing call: no Python per record and no copy of whole header rows."""
    size = np.dtype(dtype).itemsize
    count = len(buf) - size + 1
    if count <= 0:
        return np.zeros(0, dtype=dtype)
    return np.ndarray((count,), dtype=dtype, buffer=buf, strides=(1,))


def header_rows(area: np.ndarray) -> np.ndarray:
    """Every ``HEADER_SIZE``-byte window of the byte array ``area`` (row ``i`` is bytes
    ``i .. i + 63``) as a view sharing its memory, writeable when ``area`` is: indexing the
    rows with record start positions reads (or writes) those records' headers with one row
    copy each, however long the records are. Callers index only rows that start a whole
    header inside ``area``."""
    return np.lib.stride_tricks.as_strided(
        area, shape=(max(len(area) - HEADER_SIZE + 1, 0), HEADER_SIZE), strides=(1, 1),
        writeable=area.flags.writeable)


def payload_spans(raw: bytes | bytearray | memoryview, ends: Sequence[int]) -> tuple[list[int], list[int]]:
    """``(starts, stops)`` of the payloads of the records that lie back to back in ``raw``
    from byte 0, ``ends[i]`` the end of record ``i`` (header fields read as columns; the
    framing was checked when the run was read). ``ValueError`` naming the first record whose
    header or payload runs past ``raw``."""
    k = len(ends)
    if k == 0:
        return [], []
    starts = np.empty(k, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1]
    size = len(raw)
    inside = (starts >= 0) & (starts + HEADER_SIZE <= size)
    lengths = field_view(raw, "<u4")[np.where(inside, starts, 0) + PAYLOAD_LENGTH_OFFSET] \
        if size >= HEADER_SIZE else np.zeros(k, dtype=np.uint32)
    bodies = starts + HEADER_SIZE
    stops = bodies + lengths.astype(np.int64)
    bad = np.nonzero(~inside | (stops > size))[0]
    if len(bad):
        raise ValueError(f"record {int(bad[0])} runs past the data")
    return bodies.tolist(), stops.tolist()


def dense_prefix(raw: bytes, ends: Sequence[int]) -> tuple[int, bytes, list[int]]:
    """``(first offset, raw, ends)`` of the leading gap-free run of the records back to back
    in ``raw`` (``ends``: each one's end; at least one record): what a transport whose
    replies number messages one after the other sends from a compacted topic's read."""
    starts = np.zeros(len(ends), dtype=np.int64)
    starts[1:] = ends[:-1]
    offsets = field_view(raw, "<u8")[starts + OFFSET_OFFSET].astype(np.int64)
    first = int(offsets[0])
    breaks = np.flatnonzero(offsets != first + np.arange(len(ends)))
    k = int(breaks[0]) if len(breaks) else len(ends)
    return first, raw[:ends[k - 1]] if k < len(ends) else raw, list(ends[:k])


def _consume_items_py(raw: bytes, ends: Sequence[int], first_offset: int) -> bytes:
    """``b",".join(b"%d:%b" % (first_offset + i, payload_i))`` over the records in ``raw``
    (``payload_spans``' arguments): the ``messages=`` field of a plain V1 CONSUME reply,
    before the plain-text check. The pure-Python twin (the reference) of
    ``data._cspeedups.consume_items``; ``consume_items`` is whichever ``data.speedups``
    picked. ``ValueError`` for a negative ``first_offset`` or a record past ``raw``."""
    if first_offset < 0:
        raise ValueError(f"first offset {first_offset} is negative")
    bodies, stops = payload_spans(raw, ends)
    payloads = map(raw.__getitem__, map(slice, bodies, stops))
    return b",".join(map(b"%d:%b".__mod__, zip(range(first_offset, first_offset + len(bodies)),
                                              payloads, strict=True)))


consume_items: Callable[[bytes, Sequence[int], int], bytes] = (
    speedups.compiled.consume_items if speedups.compiled is not None else _consume_items_py)


def _keyed_headers_py(keys: Sequence[bytes], by_key: dict[bytes, bytes], tail: bytes | None,
                      first: int) -> list[bytes]:
    """Each message's user headers from its key: ``by_key[keys[i]]``, and with ``tail``
    then ``tail`` and ``first + i`` as a little-endian u64 (an idempotent V1 producer's
    key, ``pid`` and ``seq`` headers: ``broker.core.producers.producer_headers``). The
    pure-Python twin (the reference) of ``data._cspeedups.keyed_headers``; ``keyed_headers``
    is whichever ``data.speedups`` picked. ``KeyError`` for a key not in ``by_key``,
    ``OverflowError`` for a number outside 0 .. 2**64 - 1."""
    if tail is None:
        return list(map(by_key.__getitem__, keys))
    count = len(keys)
    if first < 0 or first + max(count, 1) - 1 >= 1 << 64:
        raise OverflowError("sequence number outside 0 .. 2**64 - 1")
    heads = [by_key[key] for key in keys]
    seqs = map(int.to_bytes, range(first, first + count), [8] * count, ["little"] * count)
    return [head + tail + seq for head, seq in zip(heads, seqs, strict=True)]


keyed_headers: Callable[[Sequence[bytes], dict[bytes, bytes], bytes | None, int], list[bytes]] = (
    _c_keyed if (_c_keyed := getattr(speedups.compiled, "keyed_headers", None)) is not None
    else _keyed_headers_py)
