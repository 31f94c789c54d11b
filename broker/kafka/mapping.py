"""Kafka messages <-> Skerry's stored records (kafka-wire-notes §6.1, §6.3, §6.4).

Owns: the key rule (``key_headers``: a Kafka key -> the user headers that carry it;
``stored_key``: the way back), ``framed_records`` (decoded produce records -> records
framed for ``BrokerCore.produce_framed``: 64-byte header, payload, user headers, with the
origin timestamp set and the fields the store stamps left zero) and ``message_set``
(stored records as a read returned them -> an uncompressed MessageSet of magic 0 or 1,
built straight from the stored bytes, bounded by a byte budget).

The mapping:

* key null or empty -> no key header (an empty key comes back as null: a documented loss;
  header values are 1-255 bytes);
* key of 1-255 bytes of UTF-8 -> V1's key header (kind 2 "key" = kind 2 value), so V1
  and Iggy consumers see the same key;
* key of 1-255 bytes that is not UTF-8 -> the same header with a raw (kind 1) value:
  Kafka and Iggy consumers get it back, V1 consumers see no key;
* key over 255 bytes -> refused: MESSAGE_TOO_LARGE (10) for the partition;
* value null (a tombstone) -> an empty payload, read back as an empty value (a documented
  loss: no compaction here, so nothing interprets tombstones);
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

from broker.kafka.codec import Record
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
           "message_set", "MESSAGE_OVERHEAD"]

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


def message_set(raw: bytes, ends: Sequence[int], magic: int, max_bytes: int,
                whole_first: bool = True) -> tuple[bytes, int]:
    """Stored records (``raw``, each ending at ``ends[i]``) -> ``(MessageSet, count)``:
    as many whole messages as fit ``max_bytes``, and the first one whole even when it does
    not fit (when ``whole_first``): a partial first message stalls the clients, and Fetch
    v3 returns it whole (KIP-74)."""
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
        if magic == 0:
            body = b"".join((_V0, key_part, i32(payload_len), value))
        else:
            body = b"".join((v1(1, 0, (origin or appended) // 1000), key_part,
                             i32(payload_len), value))
        message = head(offset, len(body) + 4, crc32(body)) + body
        size += len(message)
        if size > max_bytes and (count or not whole_first):
            break
        parts.append(message)
        count += 1
        pos = end
    return b"".join(parts), count
