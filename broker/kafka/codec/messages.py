"""MessageSets of message format magic 0 and 1 (kafka-wire-notes §4): decode and encode.

Owns: ``Record`` (one message: offset, timestamp, key, value, attributes),
``decode_message_set`` (a produced set -> records, CRCs checked, compressed wrappers
decompressed into one record per inner message), ``encode_message_set`` (records -> an
uncompressed set for fetch replies) and ``CorruptMessageSet``. Layouts::

    MessageSet => [offset:int64 message_size:int32 Message]     (no count: the set is the bytes)
    Message v0 => crc:uint32 magic:int8(0) attributes:int8 key:bytes value:bytes
    Message v1 => crc:uint32 magic:int8(1) attributes:int8 timestamp:int64 key:bytes value:bytes

The CRC is zlib's CRC-32 over everything after the crc field. Attributes bits 0-2 are the
codec (``compression.Codec``), bit 3 the timestamp type (magic 1: 1 = LogAppendTime).

Decoding is for produce: the whole set must be well-formed (a partial trailing message is
corrupt), offsets are reported as the client sent them (placeholders the broker ignores;
inner messages keep their own 0..n-1), and a magic-0 record's timestamp is -1. Inner
messages must be uncompressed and of the wrapper's magic; a LogAppendTime wrapper's
timestamp replaces its inner messages' (Kafka's rule). Any failure raises
``CorruptMessageSet`` (answered as error 2, CORRUPT_MESSAGE, for that partition only).

Must not import: Twisted, sockets, files, the core, the store, ``requests``, ``responses``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from broker.kafka.codec.compression import (
    MAX_DECOMPRESSED_BYTES,
    Codec,
    CompressionFailed,
    decompress,
)
from broker.kafka.codec.error_codes import ErrorCode
from broker.kafka.codec.primitives import INT32, INT64, UINT32

__all__ = [
    "Record",
    "CorruptMessageSet",
    "decode_message_set",
    "encode_message_set",
    "ATTR_CODEC_MASK",
    "ATTR_LOG_APPEND_TIME",
]

ATTR_CODEC_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
LOG_OVERHEAD = 12  # offset:int64 + message_size:int32
_V0_HEAD = struct.Struct(">bb")  # magic, attributes (after the crc)
_V1_HEAD = struct.Struct(">bbq")  # magic, attributes, timestamp


@dataclass(frozen=True)
class Record:
    """One message. ``timestamp`` is ms since the epoch, -1 for none (and for magic 0);
    ``key``/``value`` None are Kafka's null, distinct from ``b""``."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    attributes: int = 0


class CorruptMessageSet(Exception):
    """A produced MessageSet that cannot be accepted: bad framing, CRC mismatch, unknown
    magic or codec, a failed decompression, nested compression."""

    error_code = ErrorCode.CORRUPT_MESSAGE


def _read_bytes(data: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptMessageSet(f"message ends in the {what} length")
    (n,) = INT32.unpack_from(data, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or pos + n > end:
        raise CorruptMessageSet(f"{what} of {n} bytes overruns the message")
    return data[pos:pos + n], pos + n


def _messages(data: bytes) -> Iterable[tuple[int, int, int, int, bytes | None, bytes | None]]:
    """(offset, magic, attributes, timestamp, key, value) of each message, CRC checked."""
    pos, size = 0, len(data)
    while pos < size:
        if pos + LOG_OVERHEAD > size:
            raise CorruptMessageSet(f"partial message header at byte {pos}")
        (offset,) = INT64.unpack_from(data, pos)
        (msg_size,) = INT32.unpack_from(data, pos + 8)
        start = pos + LOG_OVERHEAD
        end = start + msg_size
        if msg_size < 4 + _V0_HEAD.size + 8 or end > size:
            raise CorruptMessageSet(f"message at byte {pos} has size {msg_size} "
                                    f"({size - start} bytes left)")
        (crc,) = UINT32.unpack_from(data, start)
        if zlib.crc32(data[start + 4:end]) != crc:
            raise CorruptMessageSet(f"message at byte {pos} (offset {offset}): CRC mismatch")
        magic, attributes = _V0_HEAD.unpack_from(data, start + 4)
        if magic == 0:
            timestamp, body = -1, start + 4 + _V0_HEAD.size
        elif magic == 1:
            if msg_size < 4 + _V1_HEAD.size + 8:
                raise CorruptMessageSet(f"magic-1 message at byte {pos} is too short")
            _, _, timestamp = _V1_HEAD.unpack_from(data, start + 4)
            body = start + 4 + _V1_HEAD.size
        else:
            raise CorruptMessageSet(f"message at byte {pos}: unsupported magic {magic}")
        key, body = _read_bytes(data, body, end, "key")
        value, body = _read_bytes(data, body, end, "value")
        if body != end:
            raise CorruptMessageSet(f"message at byte {pos}: {end - body} bytes after the value")
        yield offset, magic, attributes, timestamp, key, value
        pos = end


def decode_message_set(data: bytes, max_decompressed: int = MAX_DECOMPRESSED_BYTES
                       ) -> tuple[Record, ...]:
    """A produced MessageSet -> its records, wrappers replaced by their inner messages
    (which may expand to ``max_decompressed`` bytes together)."""
    records: list[Record] = []
    left = max_decompressed
    for offset, magic, attributes, timestamp, key, value in _messages(data):
        codec = attributes & ATTR_CODEC_MASK
        if codec == Codec.NONE:
            records.append(Record(offset, timestamp, key, value, attributes))
            continue
        if value is None:
            raise CorruptMessageSet(f"compressed wrapper at offset {offset} has a null value")
        try:
            inner = decompress(codec, value, magic, left)
        except CompressionFailed as e:
            raise CorruptMessageSet(f"wrapper at offset {offset}: {e}") from None
        left -= len(inner)
        log_append = magic == 1 and attributes & ATTR_LOG_APPEND_TIME
        for i_offset, i_magic, i_attributes, i_timestamp, i_key, i_value in _messages(inner):
            if i_attributes & ATTR_CODEC_MASK:
                raise CorruptMessageSet(f"wrapper at offset {offset}: nested compression")
            if i_magic != magic:
                raise CorruptMessageSet(f"wrapper at offset {offset} (magic {magic}) "
                                        f"holds a magic-{i_magic} message")
            records.append(Record(i_offset, timestamp if log_append else i_timestamp,
                                  i_key, i_value, i_attributes))
    return tuple(records)


def _encode_message(record: Record, magic: int) -> bytes:
    if magic == 0:
        head = _V0_HEAD.pack(0, record.attributes & ~ATTR_LOG_APPEND_TIME)
    elif magic == 1:
        head = _V1_HEAD.pack(1, record.attributes, record.timestamp)
    else:
        raise ValueError(f"magic {magic}: only 0 and 1 are encoded")
    key, value = record.key, record.value
    body = b"".join((
        head,
        INT32.pack(-1) if key is None else INT32.pack(len(key)) + key,
        INT32.pack(-1) if value is None else INT32.pack(len(value)) + value,
    ))
    return UINT32.pack(zlib.crc32(body)) + body


def encode_message_set(records: Iterable[Record], magic: int) -> bytes:
    """Uncompressed MessageSet of ``records`` in message format ``magic`` (0 or 1).

    Magic 0 drops the timestamp (and the timestamp-type bit). Records must be
    uncompressed (attributes codec bits 0): fetch replies are always served uncompressed
    (§4.1)."""
    parts = []
    for record in records:
        if record.attributes & ATTR_CODEC_MASK:
            raise ValueError(f"record at offset {record.offset} has codec bits set; "
                             "fetch replies are uncompressed")
        message = _encode_message(record, magic)
        parts.append(INT64.pack(record.offset) + INT32.pack(len(message)) + message)
    return b"".join(parts)
