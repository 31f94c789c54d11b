"""Kafka messages <-> Skerry's stored records (kafka-wire-notes §6.1, §6.3, §6.4).

Owns: the key rule (``key_headers``: a Kafka key -> the user headers that carry it;
``stored_key``: the way back), ``framed_columns`` (a produced set decoded as columns ->
records framed for ``BrokerCore.produce_framed``: 64-byte header, payload, user headers,
with the origin timestamp set and the fields the store stamps left zero) and
``message_set`` (stored records as a read returned them -> an uncompressed MessageSet of
magic 0 or 1, built straight from the stored bytes, bounded by a byte budget). Both are
batch-first: a regular batch (one shape for every message, what fixed-size producers send)
is built as one numpy array, column by column; an irregular one takes a per-message loop.
``framed_records`` and ``message_set_loop`` are the one-message-at-a-time references the
tests hold them to. ``message_set`` is the compiled loop ``broker.kafka._cfetch`` where it
is built (``data.speedups`` decides; ``_message_set_py`` is its twin).

The mapping:

* key null or empty -> no key header (an empty key comes back as null: a documented loss;
  header values are 1-255 bytes);
* key of 1-255 bytes of UTF-8 -> V1's key header (kind 2 "key" = kind 2 value), so V1
  and Iggy consumers see the same key;
* key of 1-255 bytes that is not UTF-8 -> the same header with a raw (kind 1) value:
  Kafka and Iggy consumers get it back, V1 consumers see no key;
* key over 255 bytes -> refused: MESSAGE_TOO_LARGE (10) for the partition;
* value null (a tombstone) -> an empty payload, read back as an empty value (a documented
  loss); on a compacted topic an empty payload is the tombstone (docs/storage.md) and
  fetch serves it as null (``message_set_loop(empty_is_null=True)``);
* timestamp: a magic-1 CreateTime (ms) -> ``origin_timestamp`` (µs); magic 0 has none and
  the store's append time is used. Fetch serves ``origin_timestamp // 1000`` as CreateTime
  (the append time for a record whose origin timestamp is 0, as Iggy clients may send).
* offset: Kafka's offset is the record's offset.

Must not import: Twisted, the core, the store (``data.format`` is the shared layout leaf).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from broker.kafka.codec import MessageColumns, Record
from data import speedups
from data.format import (
    HEADER,
    HEADER_SIZE,
    KEY_HEADER_NAME,
    KIND_RAW,
    KIND_STRING,
    decode_user_headers,
    encode_user_headers,
    extract_key,
    key_header,
)

__all__ = ["MAX_KEY_BYTES", "KeyTooLarge", "key_headers", "stored_key", "framed_records",
           "framed_columns", "message_set", "MESSAGE_OVERHEAD"]

MAX_KEY_BYTES = 255
"""Longest key a user header holds."""

MESSAGE_OVERHEAD = {0: 26, 1: 34}
"""Bytes of a Kafka message besides its key and value, by magic (offset, size, crc, magic,
attributes, [timestamp], the two lengths)."""

_STORED = struct.Struct("<24xQQQII")  # offset, timestamp, origin_timestamp, headers/payload length
_SIZE_CRC = struct.Struct(">qiI")
_V0 = b"\x00\x00"  # magic 0, attributes 0
_V1 = struct.Struct(">bbq")
_I32 = struct.Struct(">i")
_NULL = _I32.pack(-1)
_RAW_KEY_PREFIX = encode_user_headers([(KIND_STRING, KEY_HEADER_NAME, KIND_RAW, b"?")])[:-5]


class KeyTooLarge(ValueError):
    """A key longer than ``MAX_KEY_BYTES``."""


def key_headers(key: bytes | None) -> bytes:
    """The user headers carrying a Kafka key (see the module doc); ``KeyTooLarge``."""
    if not key:
        return b""
    if len(key) > MAX_KEY_BYTES:
        raise KeyTooLarge(f"key of {len(key)} bytes; at most {MAX_KEY_BYTES}")
    try:
        key.decode("utf-8")
    except UnicodeDecodeError:
        return encode_user_headers([(KIND_STRING, KEY_HEADER_NAME, KIND_RAW, key)])
    return key_header(key)


def stored_key(user_headers: bytes) -> bytes | None:
    """The Kafka key carried in a record's user headers: the V1 key, or the raw-valued
    key header ``key_headers`` writes for a key that is not UTF-8; None when neither."""
    if not user_headers:
        return None
    key = extract_key(user_headers)
    if key is not None:
        return key
    try:
        headers = decode_user_headers(user_headers)
    except ValueError:
        return None
    for key_kind, name, value_kind, value in headers:
        if key_kind == KIND_STRING and name == KEY_HEADER_NAME and value_kind == KIND_RAW:
            return value
    return None


def framed_records(records: Sequence[Record], now_us: int) -> tuple[bytes, list[int]]:
    """``(messages, ends)`` for ``BrokerCore.produce_framed``; ``KeyTooLarge``."""
    pack = HEADER.pack
    parts: list[bytes] = []
    ends: list[int] = []
    at = 0
    cache: dict[bytes | None, bytes] = {}
    for record in records:
        key = record.key
        headers = cache.get(key)
        if headers is None:
            headers = cache[key] = key_headers(key)
        value = record.value or b""
        ts = record.timestamp
        origin = ts * 1000 if ts >= 0 else now_us
        parts.append(pack(0, 0, 0, 0, 0, origin, len(headers), len(value), 0))
        parts.append(value)
        parts.append(headers)
        at += HEADER_SIZE + len(value) + len(headers)
        ends.append(at)
    return b"".join(parts), ends


def message_set_loop(raw: bytes, ends: Sequence[int], magic: int, max_bytes: int,
                     whole_first: bool = True, empty_is_null: bool = False) -> tuple[bytes, int]:
    """``message_set`` one record at a time: the readable reference the tests hold the
    batch-first ``message_set`` to. ``empty_is_null``: an empty value goes out as a null
    value (a compacted topic's tombstone, docs/storage.md), what ``fetch`` uses there."""
    unpack = _STORED.unpack_from
    crc32 = zlib.crc32
    i32 = _I32.pack
    head = _SIZE_CRC.pack
    v1 = _V1.pack
    parts: list[bytes] = []
    size = 0
    pos = 0
    count = 0
    keys: dict[bytes, bytes] = {}
    for end in ends:
        offset, appended, origin, header_len, payload_len = unpack(raw, pos)
        start = pos + HEADER_SIZE
        value = raw[start:start + payload_len]
        if header_len:
            user_headers = raw[start + payload_len:end]
            key_part = keys.get(user_headers)
            if key_part is None:
                key = stored_key(user_headers)
                key_part = keys[user_headers] = _NULL if key is None else i32(len(key)) + key
        else:
            key_part = _NULL
        value_len = _NULL if empty_is_null and not payload_len else i32(payload_len)
        if magic == 0:
            body = b"".join((_V0, key_part, value_len, value))
        else:
            body = b"".join((v1(1, 0, (origin or appended) // 1000), key_part,
                             value_len, value))
        message = head(offset, len(body) + 4, crc32(body)) + body
        size += len(message)
        if size > max_bytes and (count or not whole_first):
            break
        parts.append(message)
        count += 1
        pos = end
    return b"".join(parts), count


_KEY_NAME_PART = key_header(b"x")[:8]
"""The first 8 bytes of every key header: name kind 2, name length 3, ``key``; then the
value kind (2 string, 1 raw), the key length (u32) and the key: 13 bytes + the key."""
_KEY_HEADER_OVERHEAD = 13

_cached_stored_key = lru_cache(maxsize=4096)(stored_key)


def _rows(buf: np.ndarray, start: int, n: int, step: int, width: int) -> np.ndarray:
    """``n`` windows of ``width`` bytes of ``buf``, ``step`` bytes apart from ``start``."""
    return np.lib.stride_tricks.as_strided(buf[start:], shape=(n, width),
                                           strides=(step if n > 1 else 0, 1), writeable=False)


def _even(positions: np.ndarray) -> int | None:
    """The common step of ``positions`` (0 for one row), or None when they are uneven."""
    if len(positions) == 1:
        return 0
    step = int(positions[1] - positions[0])
    return step if (np.diff(positions) == step).all() else None


def _crcs(out: np.ndarray) -> np.ndarray:
    """CRC-32 of bytes 16.. of each row of ``out`` (a Kafka message body): ``zlib.crc32``
    over the row views themselves (no copy per message; measured a fifth faster than
    slicing a ``bytes`` copy of the array)."""
    return np.fromiter(map(zlib.crc32, out[:, 16:]), dtype=np.uint32, count=len(out))


def framed_columns(cols: MessageColumns, now_us: int) -> tuple[bytes, list[int]]:
    """``framed_records`` for decoded columns (``KeyTooLarge``), batch-first where the
    batch is regular: when every message has the same value length and the same key length
    (or no key), at the same distance from the one before (what a producer of fixed-size
    records sends), the records are built as one numpy array (header fields, values and
    key headers copied column-wise, no Python per message but a UTF-8 check of keys that
    are not ASCII). Anything else takes the per-message loop."""
    n = len(cols)
    value_len = np.maximum(cols.value_len, 0)
    key_len = np.maximum(cols.key_len, 0)
    v = int(value_len[0])
    k = int(key_len[0])
    value_step = _even(cols.value_pos)
    key_step = _even(cols.key_pos) if k else 0
    if value_step is None or key_step is None or (value_len != v).any() \
            or (key_len != k).any():
        return _framed_loop(cols, now_us)
    if k > MAX_KEY_BYTES:
        raise KeyTooLarge(f"key of {k} bytes; at most {MAX_KEY_BYTES}")
    h = _KEY_HEADER_OVERHEAD + k if k else 0
    width = HEADER_SIZE + v + h
    out = np.zeros((n, width), dtype=np.uint8)
    origin = np.where(cols.timestamp >= 0, cols.timestamp * 1000, now_us)
    out[:, 40:48] = origin.astype("<u8").view(np.uint8).reshape(n, 8)
    out[:, 48:52] = np.frombuffer(struct.pack("<I", h), dtype=np.uint8)
    out[:, 52:56] = np.frombuffer(struct.pack("<I", v), dtype=np.uint8)
    buf = np.frombuffer(cols.buffer, dtype=np.uint8)
    if v:
        out[:, HEADER_SIZE:HEADER_SIZE + v] = _rows(buf, int(cols.value_pos[0]), n,
                                                    value_step, v)
    if h:
        at = HEADER_SIZE + v
        keys = _rows(buf, int(cols.key_pos[0]), n, key_step, k)
        out[:, at:at + 8] = np.frombuffer(_KEY_NAME_PART, dtype=np.uint8)
        kind = np.full(n, KIND_STRING, dtype=np.uint8)
        for i in np.nonzero((keys >= 0x80).any(axis=1))[0].tolist():
            try:
                keys[i].tobytes().decode("utf-8")
            except UnicodeDecodeError:
                kind[i] = KIND_RAW
        out[:, at + 8] = kind
        out[:, at + 9:at + 13] = np.frombuffer(struct.pack("<I", k), dtype=np.uint8)
        out[:, at + 13:] = keys
    return out.tobytes(), list(range(width, n * width + 1, width))


def _framed_loop(cols: MessageColumns, now_us: int) -> tuple[bytes, list[int]]:
    """``framed_columns`` one message at a time (irregular batches)."""
    buf = cols.buffer
    pack = HEADER.pack
    parts: list[bytes] = []
    ends: list[int] = []
    at = 0
    cache: dict[bytes | None, bytes] = {}
    for ts, kp, kl, vp, vl in zip(cols.timestamp.tolist(), cols.key_pos.tolist(),
                                  cols.key_len.tolist(), cols.value_pos.tolist(),
                                  cols.value_len.tolist(), strict=True):
        key = buf[kp:kp + kl] if kl > 0 else None
        headers = cache.get(key)
        if headers is None:
            headers = cache[key] = key_headers(key)
        value = buf[vp:vp + vl] if vl > 0 else b""
        parts.append(pack(0, 0, 0, 0, 0, ts * 1000 if ts >= 0 else now_us, len(headers),
                          len(value), 0))
        parts.append(value)
        parts.append(headers)
        at += HEADER_SIZE + len(value) + len(headers)
        ends.append(at)
    return b"".join(parts), ends


def _message_set_py(raw: bytes, ends: Sequence[int], magic: int, max_bytes: int,
                    whole_first: bool = True) -> tuple[bytes, int]:
    """Stored records (``raw``, each ending at ``ends[i]``) -> ``(MessageSet, count)``:
    as many whole messages as fit ``max_bytes``, and the first one whole even when it does
    not fit (when ``whole_first``): a partial first message stalls the clients, and Fetch
    v3 returns it whole (KIP-74).

    Batch-first where the records are regular (the same size, and either no user headers
    or each exactly one key header): the messages are built as one numpy array, column by
    column from the stored rows, and only the CRCs take a call per message. Anything else
    takes the per-record loop (``message_set_loop``)."""
    n = len(ends)
    if n == 0:
        return b"", 0
    size = ends[0]
    if ends[-1] != n * size or (n > 1 and ends[1] != 2 * size):
        return message_set_loop(raw, ends, magic, max_bytes, whole_first)
    rows = np.frombuffer(raw, dtype=np.uint8, count=n * size).reshape(n, size)
    if not (rows[:, 48:56] == rows[0, 48:56]).all():
        return message_set_loop(raw, ends, magic, max_bytes, whole_first)
    h, v = struct.unpack_from("<II", raw, 48)
    k = h - _KEY_HEADER_OVERHEAD
    if h:
        at = HEADER_SIZE + v
        if not 1 <= k <= MAX_KEY_BYTES or not (rows[:, at:at + 8] == np.frombuffer(_KEY_NAME_PART, np.uint8)).all() \
                or not np.isin(rows[:, at + 8], (KIND_RAW, KIND_STRING)).all() \
                or not (rows[:, at + 9:at + 13] == rows[0, at + 9:at + 13]).all() \
                or struct.unpack_from("<I", raw, at + 9)[0] != k:
            return message_set_loop(raw, ends, magic, max_bytes, whole_first)
    overhead = MESSAGE_OVERHEAD[magic]
    width = overhead + max(k, 0) + v
    count = min(n, max_bytes // width) if max_bytes > 0 else 0
    if count == 0:
        if not whole_first:
            return b"", 0
        count = 1
    rows = rows[:count]
    out = np.empty((count, width), dtype=np.uint8)
    out[:, 0:8] = rows[:, 24:32][:, ::-1]  # offset: little-endian u64 -> big-endian i64
    out[:, 8:12] = np.frombuffer(struct.pack(">i", width - 12), dtype=np.uint8)
    out[:, 16] = magic
    out[:, 17] = 0
    pos = 18
    if magic == 1:
        stamps = rows[:, 32:48].copy().view("<u8")  # (timestamp, origin_timestamp)
        created = np.where(stamps[:, 1] != 0, stamps[:, 1], stamps[:, 0]) // 1000
        out[:, 18:26] = created.astype(">i8").view(np.uint8).reshape(count, 8)
        pos = 26
    if h:
        out[:, pos:pos + 4] = np.frombuffer(struct.pack(">i", k), dtype=np.uint8)
        at = HEADER_SIZE + v + _KEY_HEADER_OVERHEAD
        out[:, pos + 4:pos + 4 + k] = rows[:, at:at + k]
        pos += 4 + k
    else:
        out[:, pos:pos + 4] = 0xFF  # null key
        pos += 4
    out[:, pos:pos + 4] = np.frombuffer(struct.pack(">i", v), dtype=np.uint8)
    out[:, pos + 4:] = rows[:, HEADER_SIZE:HEADER_SIZE + v]
    out[:, 12:16] = _crcs(out).astype(">u4").view(np.uint8).reshape(count, 4)
    return out.tobytes(), count


_cfetch = speedups.load("broker.kafka._cfetch")


def _message_set_compiled(raw: bytes, ends: Sequence[int], magic: int, max_bytes: int,
                          whole_first: bool = True) -> tuple[bytes, int]:
    """``message_set`` by ``broker.kafka._cfetch`` (one C call: framing, key, CRC-32 per
    message), which declines (None) any shape but a null key or one key header, and then
    the twin answers: the same bytes or error as the twin, by construction."""
    got = _cfetch.message_set(raw, ends, magic, max_bytes, whole_first)
    if got is None:
        return _message_set_py(raw, ends, magic, max_bytes, whole_first)
    return got


message_set = _message_set_compiled if _cfetch is not None else _message_set_py
"""Stored records (``raw``, each ending at ``ends[i]``) -> ``(MessageSet, count)``: see
``_message_set_py`` (the pure-Python twin, the reference) for the rules; the compiled loop
runs when ``data.speedups`` loads ``broker.kafka._cfetch``."""
