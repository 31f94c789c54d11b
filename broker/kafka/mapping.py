"""Kafka messages <-> Skerry's stored records (kafka-wire-notes §6.1, §6.3, §6.4).

Owns: the key rule (``key_headers``: a Kafka key -> the user headers that carry it;
``stored_key``: the way back), ``framed_columns`` (a produced set decoded as columns ->
records framed for ``BrokerCore.produce`` (framed): 64-byte header, payload, user headers,
with the origin timestamp set and the fields the store stamps left zero) and
``message_set`` (stored records as a read returned them -> an uncompressed MessageSet of
magic 0 or 1, built straight from the stored bytes, bounded by a byte budget). Both are
batch-first: a regular batch (one shape for every message, what fixed-size producers send)
is built as one numpy array, column by column; an irregular one takes a per-message loop.
``framed_records`` and ``message_set_loop`` are the one-message-at-a-time references the
tests hold them to. ``message_set`` is the compiled loop ``broker.kafka._cfetch`` where it
is built (``data.speedups`` decides; ``_message_set_py`` is its twin).

Record batches v2 (magic 2): ``framed_raw_batches`` (opened batches -> framed records,
keys and headers into user headers; ``framed_batches`` the reference over decoded
batches), ``stored_kafka`` (user headers -> a record's key and header list) and
``record_batches`` (stored records -> batches for Fetch v4+), each compiled in
``broker.kafka._cfetch`` with its twin here; the header rule is above ``kafka_headers_user``.

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
from dataclasses import replace
from functools import lru_cache

import numpy as np

from broker.kafka.codec import (
    ATTR_TIMESTAMP_TYPE,
    BATCH_OVERHEAD,
    CorruptRecordBatch,
    MessageColumns,
    RawBatch,
    Record,
    RecordBatch,
    crc32c,
    encode_headers,
    encode_varint,
    header_list_start,
)
from data import speedups
from data.format import (
    HEADER,
    HEADER_SIZE,
    KAFKA_HEADERS_NAME,
    KEY_HEADER_NAME,
    KIND_RAW,
    KIND_STRING,
    decode_user_headers,
    encode_user_headers,
    extract_key,
    key_header,
)

__all__ = ["MAX_KEY_BYTES", "KeyTooLarge", "key_headers", "stored_key", "framed_records",
           "framed_columns", "message_set", "MESSAGE_OVERHEAD", "kafka_headers_user",
           "stored_kafka", "framed_batches", "record_batches", "record_batches_loop", "ENDS_IN_PLACE", "RESERVED_HEADER_NAMES", "InvalidTimestamp", "ValueTooLarge",
           "framed_raw_batches"]

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


class InvalidTimestamp(ValueError):
    """A record timestamp the store cannot hold (µs in a u64)."""


MAX_TIMESTAMP_MS = ((1 << 64) - 1) // 1000


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
    """``(messages, ends)`` for ``BrokerCore.produce`` (framed); ``KeyTooLarge``."""
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
                    whole_first: bool = True, empty_is_null: bool = False
                    ) -> tuple[bytes, int]:
    """Stored records (``raw``, each ending at ``ends[i]``) -> ``(MessageSet, count)``:
    as many whole messages as fit ``max_bytes``, and the first one whole even when it does
    not fit (when ``whole_first``): a partial first message stalls the clients, and Fetch
    v3 returns it whole (KIP-74).

    Batch-first where the records are regular (the same size, and either no user headers
    or each exactly one key header): the messages are built as one numpy array, column by
    column from the stored rows, and only the CRCs take a call per message. Anything else,
    and a compacted topic's run (``empty_is_null``: an empty value goes out as a null
    value, its tombstone), takes the per-record loop (``message_set_loop``)."""
    n = len(ends)
    if n == 0:
        return b"", 0
    if empty_is_null:
        return message_set_loop(raw, ends, magic, max_bytes, whole_first, empty_is_null=True)
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
                          whole_first: bool = True, empty_is_null: bool = False
                          ) -> tuple[bytes, int]:
    """``message_set`` by ``broker.kafka._cfetch`` (one C call: framing, key, CRC-32 per
    message, the tombstone rule), which declines (None) any shape but a null key or one
    key header, and then the twin answers: the same bytes or error as the twin, by
    construction."""
    got = _cfetch.message_set(raw, ends, magic, max_bytes, whole_first, empty_is_null)
    if got is None:
        return _message_set_py(raw, ends, magic, max_bytes, whole_first, empty_is_null)
    return got


message_set = _message_set_compiled if _cfetch is not None else _message_set_py
"""Stored records (``raw``, each ending at ``ends[i]``) -> ``(MessageSet, count)``: see
``_message_set_py`` (the pure-Python twin, the reference) for the rules; the compiled loop
runs when ``data.speedups`` loads ``broker.kafka._cfetch``."""


# ================================================================ record batches v2
#
# Kafka headers in the store (docs/storage.md, "Kafka headers"): a record's headers become
# one user header each (string name, raw value) when that is unambiguous: every name 1-255
# bytes of UTF-8, none reserved (``key``, ``kafka.headers``, V1's idempotence headers ``pid``
# and ``seq``), no name twice, every value 1-255 bytes. Otherwise the whole list, in Kafka's
# own encoding, goes into ``kafka.headers`` entries (``data.format.KAFKA_HEADERS_NAME``).
# Reading back, a record's Kafka headers are the ``kafka.headers`` list followed by every
# other user header in order (the first string ``key`` header with a string or raw value is
# the key, not a header): so Iggy's (and V1's ``pid``/``seq``) user headers reach Kafka
# clients as headers, value bytes as stored.

RESERVED_HEADER_NAMES = frozenset((KEY_HEADER_NAME, KAFKA_HEADERS_NAME, b"pid", b"seq"))
_USER_HEADER_MAX = 255


def _plain_headers(headers: Sequence[tuple[bytes, bytes | None]]) -> bool:
    names = set()
    for name, value in headers:
        if value is None or not 1 <= len(value) <= _USER_HEADER_MAX \
                or not 1 <= len(name) <= _USER_HEADER_MAX or name in RESERVED_HEADER_NAMES \
                or name in names:
            return False
        try:
            name.decode("utf-8")
        except UnicodeDecodeError:
            return False
        names.add(name)
    return True


def kafka_headers_user(headers: Sequence[tuple[bytes, bytes | None]]) -> bytes:
    """The user headers that keep a Kafka record's ``headers`` (order, duplicates, bytes)."""
    if not headers:
        return b""
    if _plain_headers(headers):
        return encode_user_headers([(KIND_STRING, n, KIND_RAW, v or b"") for n, v in headers])
    blob = encode_headers(headers)
    return encode_user_headers([(KIND_STRING, KAFKA_HEADERS_NAME, KIND_RAW,
                                 blob[i:i + _USER_HEADER_MAX])
                                for i in range(0, len(blob), _USER_HEADER_MAX)])


def stored_kafka(user_headers: bytes) -> tuple[bytes | None, bytes]:
    """A stored record's Kafka key and its headers as a record's wire bytes (varint count,
    then each header), by the rule above. Malformed user headers give the key by
    ``stored_key``'s rule and no headers; a ``kafka.headers`` list that does not decode is
    read as ordinary user headers."""
    if not user_headers:
        return None, b"\x00"
    try:
        entries = decode_user_headers(user_headers)
    except ValueError:
        return stored_key(user_headers), b"\x00"
    key: bytes | None = None
    taken = False
    blob: list[bytes] = []
    items: list[tuple[bool, bytes, bytes]] = []
    for key_kind, name, value_kind, value in entries:
        if not taken and key_kind == KIND_STRING and name == KEY_HEADER_NAME \
                and value_kind in (KIND_STRING, KIND_RAW):
            key, taken = value, True
            continue
        reserved = key_kind == KIND_STRING and name == KAFKA_HEADERS_NAME \
            and value_kind == KIND_RAW
        if reserved:
            blob.append(value)
        items.append((reserved, name, value))
    body = b""
    listed = 0
    if blob:
        joined = b"".join(blob)
        try:
            listed, first = header_list_start(joined)
        except CorruptRecordBatch:
            listed = -1
        if listed >= 0:
            body = joined[first:]
            items = [item for item in items if not item[0]]
    parts = [encode_varint(max(listed, 0) + len(items)), body]
    for _reserved, name, value in items:
        parts += (encode_varint(len(name)), name, encode_varint(len(value)), value)
    return key, b"".join(parts)


def framed_batches(batches: Sequence[RecordBatch], now_us: int) -> tuple[bytes, list[int]]:
    """``framed_records`` for decoded record batches v2: key and headers into user headers
    (``KeyTooLarge``; ``InvalidTimestamp`` past ``MAX_TIMESTAMP_MS``), CreateTime (ms) -> ``origin_timestamp`` (µs; none sent: ``now_us``),
    a null value an empty payload."""
    pack = HEADER.pack
    parts: list[bytes] = []
    ends: list[int] = []
    at = 0
    cache: dict[bytes | None, bytes] = {}
    for batch in batches:
        lat = batch.log_append_time
        base = batch.base_timestamp
        for record in batch.records:
            key = record.key
            headers = cache.get(key)
            if headers is None:
                headers = cache[key] = key_headers(key)
            if record.headers:
                headers += kafka_headers_user(record.headers)
            value = record.value or b""
            ts = batch.max_timestamp if lat else base + record.timestamp_delta
            if ts > MAX_TIMESTAMP_MS:
                raise InvalidTimestamp(f"timestamp {ts} ms is past the year 586,000")
            parts.append(pack(0, 0, 0, 0, 0, ts * 1000 if ts >= 0 else now_us, len(headers),
                              len(value), 0))
            parts.append(value)
            parts.append(headers)
            at += HEADER_SIZE + len(value) + len(headers)
            ends.append(at)
    return b"".join(parts), ends


class ValueTooLarge(ValueError):
    """A record value longer than the broker's ``max_message_bytes``."""


def _framed_raw_py(raws: Sequence[RawBatch], now_us: int, max_value: int
                   ) -> tuple[bytes, list[int]]:
    """``framed_raw_batches`` record by record, batch after batch (each batch's records
    decoded, their values checked, then framed): the reference."""
    parts: list[bytes] = []
    all_ends: list[int] = []
    at = 0
    for raw in raws:
        batch = replace(raw.head, records=raw.records())
        for record in batch.records:
            if record.value is not None and len(record.value) > max_value:
                raise ValueTooLarge(f"a value of {len(record.value)} bytes; at most "
                                    f"{max_value}")
        messages, ends = framed_batches((batch,), now_us)
        parts.append(messages)
        all_ends += [e + at for e in ends]
        at += len(messages)
    return b"".join(parts), all_ends


def framed_raw_batches(raws: Sequence[RawBatch], now_us: int, max_value: int
                       ) -> tuple[bytes, list[int]]:
    """Opened batches (``split_batches``) -> ``(messages, ends)`` for
    ``BrokerCore.produce`` (framed), as ``framed_batches`` of their records; refusals:
    ``CorruptRecordBatch``, ``KeyTooLarge``, ``InvalidTimestamp``, ``ValueTooLarge``
    (a value over ``max_value`` bytes). Each batch is framed by one C call
    (``_cfetch.frame_batch``) where it is built, keys and headers included; a batch it
    declines (anything the reference refuses, more than 64 headers on a record) takes the
    reference path, which answers the refusal."""
    frame = getattr(_cfetch, "frame_batch", None)
    if frame is None:
        return _framed_raw_py(raws, now_us, max_value)
    parts: list[bytes] = []
    all_ends: list[int] = []
    at = 0
    for raw in raws:
        head = raw.head
        got = frame(raw.body, raw.count, head.base_timestamp, head.max_timestamp,
                    head.log_append_time, head.last_offset_delta, now_us, max_value)
        if got is None:
            got = _framed_raw_py((raw,), now_us, max_value)
        messages, ends = got
        parts.append(messages)
        all_ends += [e + at for e in ends] if at else ends
        at += len(messages)
    return (parts[0] if len(parts) == 1 else b"".join(parts)), all_ends


_BATCH_HEAD = struct.Struct(">qiibIhiqqqhii")


def _finish_batch(base_offset: int, last_offset: int, base_ts: int, max_ts: int,
                  records: list[bytes], attributes: int, leader_epoch: int) -> bytes:
    body = b"".join(records)
    head = _BATCH_HEAD.pack(base_offset, BATCH_OVERHEAD - 12 + len(body), leader_epoch, 2, 0,
                            attributes, last_offset - base_offset, base_ts, max_ts, -1, -1, -1,
                            len(records))
    crc = crc32c(head[21:] + body)
    return head[:17] + struct.pack(">I", crc) + head[21:] + body


def _record_batches_py(raw: bytes, ends: Sequence[int], max_bytes: int,
                       whole_first: bool = True, log_append_time: bool = False,
                       leader_epoch: int = -1, empty_is_null: bool = False) -> tuple[bytes, int]:
    """Stored records (``raw``, record ``i`` ending at ``ends[i]``) -> ``(batches, count)``:
    uncompressed record batches v2 of as many whole records as fit ``max_bytes`` (the
    first one whole even when it does not fit, when ``whole_first``).

    One batch for the run, or under LogAppendTime (``log_append_time``: the topic's
    ``message.timestamp.type``) one per run of records appended in the same millisecond,
    whose timestamp is that append time (timestamp type bit set). Under CreateTime a
    record's timestamp is its origin timestamp (the append time when that is 0), in ms.
    Key and headers as ``stored_kafka`` says; producer id, epoch and sequence -1; the
    partition leader epoch as given. ``empty_is_null``: an empty value goes out as a null
    value (a compacted topic's tombstone, docs/storage.md). The reference of ``broker.kafka._cfetch``'s ``record_batches``."""
    unpack = _STORED.unpack_from
    out: list[bytes] = []
    size = 0
    count = 0
    pos = 0
    records: list[bytes] = []
    base_offset = base_ts = max_ts = last_offset = 0
    attributes = ATTR_TIMESTAMP_TYPE if log_append_time else 0
    for end in ends:
        offset, appended, origin, header_len, payload_len = unpack(raw, pos)
        ts = appended // 1000 if log_append_time else (origin or appended) // 1000
        start = pos + HEADER_SIZE
        new = not records or (log_append_time and ts != base_ts)
        key, headers = stored_kafka(raw[start + payload_len:end]) if header_len \
            else (None, b"\x00")
        body = b"".join((b"\x00", encode_varint(ts - (ts if new else base_ts)),
                         encode_varint(offset - (offset if new else base_offset)),
                         b"\x01" if key is None else encode_varint(len(key)) + key,
                         b"\x01" if empty_is_null and not payload_len
                         else encode_varint(payload_len), raw[start:start + payload_len], headers))
        record = encode_varint(len(body)) + body
        add = len(record) + (BATCH_OVERHEAD if new else 0)
        if size + add > max_bytes and (count or not whole_first):
            break
        if new:
            if records:
                out.append(_finish_batch(base_offset, last_offset, base_ts, max_ts, records,
                                         attributes, leader_epoch))
            records = []
            base_offset, base_ts, max_ts = offset, ts, ts
        records.append(record)
        max_ts = max(max_ts, ts)
        last_offset = offset
        size += add
        count += 1
        pos = end
    if records:
        out.append(_finish_batch(base_offset, last_offset, base_ts, max_ts, records,
                                 attributes, leader_epoch))
    return b"".join(out), count


def _record_batches_compiled(raw: bytes, ends: Sequence[int], max_bytes: int,
                             whole_first: bool = True, log_append_time: bool = False,
                             leader_epoch: int = -1, empty_is_null: bool = False
                             ) -> tuple[bytes, int]:
    """``record_batches`` by ``broker.kafka._cfetch`` (one C call, the tombstone rule
    included), which declines (None) a shape it does not know exactly, and then the twin
    answers."""
    got = _cfetch.record_batches(raw, ends, max_bytes, whole_first, log_append_time,
                                 leader_epoch, empty_is_null)
    if got is None:
        return _record_batches_py(raw, ends if isinstance(ends, list) else list(map(int, ends)),
                                  max_bytes, whole_first, log_append_time, leader_epoch,
                                  empty_is_null)
    return got  # type: ignore[no-any-return]


record_batches = _record_batches_compiled \
    if _cfetch is not None and hasattr(_cfetch, "record_batches") else _record_batches_py

ENDS_IN_PLACE = record_batches is _record_batches_compiled
"""True when ``record_batches`` is the compiled loop, which also takes ``ends`` as an int64
array read in place (``read_raw(ends_array=True)``: no int object per record); the twin
wants a list."""
"""Stored records -> ``(record batches v2, count)``: see ``_record_batches_py`` (the
pure-Python twin, the reference); the compiled loop runs when ``data.speedups`` loads
``broker.kafka._cfetch``."""

record_batches_loop = _record_batches_py
"""The pure twin under its public name (the compiled loop has the same tombstone rule,
``empty_is_null``, so fetch uses ``record_batches`` on compacted topics too)."""
