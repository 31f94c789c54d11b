"""A produced MessageSet decoded as columns: the batch-first decoder of the produce path.

Owns: ``MessageColumns`` (one row per message after compressed wrappers are opened: where
its key and value lie in one buffer, their lengths, its magic and timestamp) and
``decode_message_columns``. The same rules as ``messages.decode_message_set`` (CRCs
checked, a partial message is corrupt, compressed wrappers opened into their inner
messages, no nested compression, inner magic = wrapper magic, a LogAppendTime wrapper's
timestamp replaces its inner messages'), ``CorruptMessageSet`` for any failure, but
without a Python object per message: message starts come from one walk over the size
fields (none when every message has the same size), every other field is gathered for all
messages at once through numpy views, and the CRCs are computed by ``map`` over the
message bodies. ``decode_message_set`` stays the readable reference; the tests hold the
two to the same answers.

Must not import: Twisted, sockets, files, the core, the store, ``requests``, ``responses``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from broker.kafka.codec.compression import MAX_DECOMPRESSED_BYTES, CompressionFailed, decompress
from broker.kafka.codec.messages import ATTR_CODEC_MASK, ATTR_LOG_APPEND_TIME, CorruptMessageSet
from broker.kafka.codec.primitives import INT32

__all__ = ["MessageColumns", "decode_message_columns"]

LOG_OVERHEAD = 12
_MIN_SIZE = {0: 14, 1: 22}  # crc, magic, attributes, [timestamp], key length, value length


@dataclass(frozen=True)
class MessageColumns:
    """Messages as columns over ``buffer`` (arrays of one row per message)."""

    buffer: bytes
    magic: np.ndarray
    timestamp: np.ndarray
    """ms; -1 for none (every magic-0 message)."""
    key_pos: np.ndarray
    key_len: np.ndarray
    """-1: a null key."""
    value_pos: np.ndarray
    value_len: np.ndarray
    """-1: a null value."""

    def __len__(self) -> int:
        return len(self.magic)

    def key(self, i: int) -> bytes | None:
        n = int(self.key_len[i])
        if n < 0:
            return None
        at = int(self.key_pos[i])
        return self.buffer[at:at + n]


def _view(data: bytes, dtype: str) -> np.ndarray:
    """``data`` read as ``dtype`` at every byte position (a one-byte-stride view)."""
    size = np.dtype(dtype).itemsize
    return np.ndarray((max(len(data) - size + 1, 0),), dtype=dtype, buffer=data, strides=(1,))


def _starts(data: bytes) -> np.ndarray:
    """Where each message starts: ``arange`` when every message has the size of the first
    (a regular batch), else one walk over the size fields."""
    total = len(data)
    if total < LOG_OVERHEAD:
        raise CorruptMessageSet("partial message header at byte 0")
    (first,) = INT32.unpack_from(data, 8)
    step = LOG_OVERHEAD + first
    if first >= _MIN_SIZE[0] and total % step == 0:
        starts = np.arange(0, total, step, dtype=np.int64)
        if (_view(data, ">i4")[starts + 8] == first).all():
            return starts
    positions = []
    pos = 0
    unpack = INT32.unpack_from
    while pos < total:
        if pos + LOG_OVERHEAD > total:
            raise CorruptMessageSet(f"partial message header at byte {pos}")
        (size,) = unpack(data, pos + 8)
        if size < _MIN_SIZE[0] or pos + LOG_OVERHEAD + size > total:
            raise CorruptMessageSet(f"message at byte {pos} has size {size} "
                                    f"({total - pos - LOG_OVERHEAD} bytes left)")
        positions.append(pos)
        pos += LOG_OVERHEAD + size
    return np.array(positions, dtype=np.int64)


def _first(mask: np.ndarray, starts: np.ndarray) -> int:
    return int(starts[int(np.argmax(mask))])


def _columns(data: bytes) -> tuple[np.ndarray, ...]:
    """(starts, magic, attributes, timestamp, key_pos, key_len, value_pos, value_len) of
    one set, framing and CRCs checked."""
    starts = _starts(data)
    i32 = _view(data, ">i4")
    u8 = np.frombuffer(data, dtype=np.uint8)
    ends = starts + LOG_OVERHEAD + i32[starts + 8]
    magic = u8[starts + 16]
    bad = (magic != 0) & (magic != 1)
    if bad.any():
        at = _first(bad, starts)
        raise CorruptMessageSet(f"message at byte {at}: unsupported magic {data[at + 16]}")
    is1 = magic == 1
    short = is1 & (ends - starts < LOG_OVERHEAD + _MIN_SIZE[1])
    if short.any():
        raise CorruptMessageSet(f"magic-1 message at byte {_first(short, starts)} is too short")
    attributes = u8[starts + 17]
    timestamp = np.where(is1, _view(data, ">i8")[starts + 18], -1)
    key_pos = starts + np.where(is1, 30, 22)
    key_len = i32[key_pos - 4]
    value_len_at = key_pos + np.maximum(key_len, 0)
    bad = (key_len < -1) | (value_len_at + 4 > ends)
    if bad.any():
        raise CorruptMessageSet(f"message at byte {_first(bad, starts)}: the key overruns it")
    value_len = i32[value_len_at]
    value_pos = value_len_at + 4
    bad = (value_len < -1) | (value_pos + np.maximum(value_len, 0) != ends)
    if bad.any():
        raise CorruptMessageSet(f"message at byte {_first(bad, starts)}: the value does not "
                                f"end the message")
    n = len(starts)
    step = int(ends[0] - starts[0])
    if n * step == len(data) and (ends - starts == step).all():
        # a regular batch: the bodies are the rows of one 2-D view
        rows = np.frombuffer(data, dtype=np.uint8).reshape(n, step)[:, 16:]
        crcs = np.fromiter(map(zlib.crc32, rows), dtype=np.uint32, count=n)
    else:
        crcs = np.fromiter(map(zlib.crc32, map(data.__getitem__, map(
            slice, (starts + 16).tolist(), ends.tolist()))), dtype=np.uint32, count=n)
    bad = crcs != _view(data, ">u4")[starts + 12]
    if bad.any():
        raise CorruptMessageSet(f"message at byte {_first(bad, starts)}: CRC mismatch")
    return starts, magic, attributes, timestamp, key_pos, key_len, value_pos, value_len


def decode_message_columns(data: bytes, max_decompressed: int = MAX_DECOMPRESSED_BYTES
                           ) -> MessageColumns:
    """A produced MessageSet -> its messages as columns (wrappers opened, expanding to
    ``max_decompressed`` bytes together); empty input gives no rows;
    ``CorruptMessageSet`` for anything ``decode_message_set`` refuses."""
    data = bytes(data)
    if not data:
        empty = np.zeros(0, dtype=np.int64)
        return MessageColumns(b"", empty.astype(np.uint8), empty, empty, empty, empty, empty)
    starts, magic, attributes, timestamp, key_pos, key_len, value_pos, value_len = \
        _columns(data)
    codecs = attributes & ATTR_CODEC_MASK
    if not codecs.any():
        return MessageColumns(data, magic, timestamp, key_pos, key_len, value_pos, value_len)
    # Wrappers: one buffer of every message, wrappers replaced by their inner sets.
    parts: list[bytes] = []
    overrides: list[tuple[int, int]] = []  # (inner messages so far, LogAppendTime ms)
    ends = np.append(starts[1:], len(data))
    left = max_decompressed
    for i in range(len(starts)):
        start, end = int(starts[i]), int(ends[i])
        codec = int(codecs[i])
        if not codec:
            parts.append(data[start:end])
            continue
        if value_len[i] < 0:
            raise CorruptMessageSet(f"compressed wrapper at byte {start} has a null value")
        at = int(value_pos[i])
        try:
            inner = decompress(codec, data[at:at + int(value_len[i])], int(magic[i]), left)
        except CompressionFailed as e:
            raise CorruptMessageSet(f"wrapper at byte {start}: {e}") from None
        left -= len(inner)
        if not inner:
            continue
        inner_cols = _columns(inner)
        if (inner_cols[2] & ATTR_CODEC_MASK).any():
            raise CorruptMessageSet(f"wrapper at byte {start}: nested compression")
        if (inner_cols[1] != magic[i]).any():
            raise CorruptMessageSet(f"wrapper at byte {start} (magic {int(magic[i])}) holds "
                                    f"a message of another magic")
        if magic[i] == 1 and attributes[i] & ATTR_LOG_APPEND_TIME:
            overrides.append((len(parts), int(timestamp[i])))
        parts.append(inner)
    if not parts:
        return decode_message_columns(b"", max_decompressed)
    whole = b"".join(parts)
    cols = list(_columns(whole))
    if overrides:
        # which part each message came from: parts start at known byte positions
        bounds = np.cumsum([0, *map(len, parts)])
        part_of = np.searchsorted(bounds, cols[0], side="right") - 1
        for index, ms in overrides:
            cols[3][part_of == index] = ms
    _s, magic, _a, timestamp, key_pos, key_len, value_pos, value_len = cols
    return MessageColumns(whole, magic, timestamp, key_pos, key_len, value_pos, value_len)
