"""Decompressing the value of a compressed wrapper message (kafka-wire-notes §4.1).

Owns: ``Codec`` (the attribute bits 0-2), ``decompress`` and ``compress``. The codecs
themselves are ``cramjam``'s (gzip, raw snappy, LZ4 frames, zstd frames; zstd only in
record batches v2, magic 2, as in Kafka); this module only recognises the two container
quirks around them:

* snappy: librdkafka sends one **raw** snappy block; kafka-python sends **xerial** framing
  (``82 'SNAPPY' 00``, int32 version, int32 compatible version, then blocks of ``int32
  length`` + raw snappy block). The 8-byte magic tells them apart.
* LZ4 in **magic 0** wrappers: Kafka 0.8/0.9 clients compute the frame header checksum over
  the frame magic *and* the descriptor (KAFKA-3160), so a correct LZ4 decoder refuses it.
  For magic 0 the header checksum byte is recomputed (xxh32 of the descriptor, second byte)
  before decoding; magic 1 frames are correct and decoded as they are.

With a ``limit``, the output is bounded: the value is decompressed into a buffer of
``limit`` bytes (cramjam's ``*_into`` functions, which stop at its end), so a small
compressed value cannot make the broker allocate gigabytes (gzip expands up to about
1000:1); a value that would expand beyond ``limit`` is refused. ``MAX_DECOMPRESSED_BYTES``
is the decoders' bound for a whole produced set.

Decompression failures raise ``CompressionFailed``; ``messages`` turns that into a corrupt
message set (error 2). Must not import: Twisted, sockets, files, the core, the store, the
other codec modules.
"""

from __future__ import annotations

from enum import IntEnum

import cramjam
import numpy as np
import xxhash

from broker.kafka.codec.primitives import INT32

__all__ = ["Codec", "CompressionFailed", "decompress", "compress", "MAX_DECOMPRESSED_BYTES"]

MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
"""What the compressed wrappers of one produced MessageSet may expand to, together."""

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_BYTES = 16  # magic, int32 version, int32 compatible version
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"


class Codec(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class CompressionFailed(Exception):
    """A wrapper's value does not decompress with its codec."""


def _snappy(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    pos, out = XERIAL_HEADER_BYTES, []
    if len(data) < pos:
        raise CompressionFailed("xerial snappy header is truncated")
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionFailed(f"xerial snappy block length truncated at byte {pos}")
        (n,) = INT32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CompressionFailed(f"xerial snappy block of {n} bytes at byte {pos} "
                                    f"overruns the {len(data)}-byte value")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos:pos + n])))
        pos += n
    return b"".join(out)


def _fix_lz4_header_checksum(data: bytes) -> bytes:
    """Recompute an LZ4 frame's header checksum (for Kafka's broken magic-0 frames)."""
    if len(data) < 7 or not data.startswith(LZ4_FRAME_MAGIC):
        raise CompressionFailed("not an LZ4 frame (bad magic or truncated header)")
    flg = data[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)  # content size, dict id
    if len(data) <= end:
        raise CompressionFailed("LZ4 frame descriptor is truncated")
    hc = (xxhash.xxh32_intdigest(data[4:end]) >> 8) & 0xFF
    return data[:end] + bytes([hc]) + data[end + 1:]


def _snappy_into(data: bytes, out: np.ndarray) -> int:
    if not data.startswith(XERIAL_MAGIC):
        return int(cramjam.snappy.decompress_raw_into(data, out))
    pos, used = XERIAL_HEADER_BYTES, 0
    if len(data) < pos:
        raise CompressionFailed("xerial snappy header is truncated")
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionFailed(f"xerial snappy block length truncated at byte {pos}")
        (n,) = INT32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CompressionFailed(f"xerial snappy block of {n} bytes at byte {pos} "
                                    f"overruns the {len(data)}-byte value")
        used += int(cramjam.snappy.decompress_raw_into(data[pos:pos + n], out[used:]))
        pos += n
    return used


def _bounded(codec: int, data: bytes, magic: int, limit: int) -> bytes:
    out = np.empty(limit, dtype=np.uint8)  # pages are only touched as they are written
    try:
        if codec == Codec.GZIP:
            n = int(cramjam.gzip.decompress_into(data, out))
        elif codec == Codec.SNAPPY:
            n = _snappy_into(data, out)
        elif codec == Codec.LZ4:
            if magic == 0:
                data = _fix_lz4_header_checksum(data)
            n = int(cramjam.lz4.decompress_into(data, out))
        elif codec == Codec.ZSTD and magic >= 2:
            n = int(cramjam.zstd.decompress_into(data, out))
        else:
            raise CompressionFailed(f"unknown compression codec {codec}")
    except cramjam.DecompressionError as e:
        raise CompressionFailed(f"{_name(codec)}: {e} (or it expands beyond "
                                f"{limit} bytes)") from None
    return out[:n].tobytes()


def decompress(codec: int, data: bytes, magic: int, limit: int | None = None) -> bytes:
    """The inner MessageSet bytes of a wrapper with ``codec`` and ``magic``; with
    ``limit``, at most that many (``CompressionFailed`` beyond)."""
    if limit is not None:
        return _bounded(codec, data, magic, limit)
    try:
        if codec == Codec.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Codec.SNAPPY:
            return _snappy(data)
        if codec == Codec.LZ4:
            if magic == 0:
                data = _fix_lz4_header_checksum(data)
            return bytes(cramjam.lz4.decompress(data))
        if codec == Codec.ZSTD and magic >= 2:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise CompressionFailed(f"{_name(codec)}: {e}") from None
    raise CompressionFailed(f"unknown compression codec {codec}")


def _name(codec: int) -> str:
    return Codec(codec).name.lower() if codec in Codec._value2member_map_ else str(codec)


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed as a magic-2 batch's records are (gzip, raw snappy, an LZ4
    frame, a zstd frame): what a producer sends. ``ValueError`` for an unknown codec."""
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Codec.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == Codec.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == Codec.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")
