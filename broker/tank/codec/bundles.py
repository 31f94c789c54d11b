"""TANK bundles: the unit of produce, storage and consume (spec/tank-notes.md §5).

Owns: ``Message``, ``DecodedBundle``, ``BundleError``, ``decode_bundle`` (one whole bundle,
as a Produce carries it), ``encode_bundle`` (what a consume reply carries) and
``frame_bundles`` (a consume chunk: ``(bundle_length:varint bundle)*``)::

    bundle  => flags:u8 [count:varint] [first_seq:u64 [last-first-1:varint]] message_set
    flags   => bits 0-1 codec (0 none, 1 snappy), bits 2-5 count 1..15 (0: varint follows),
               bit 6 SPARSE, bit 7 rejected (§2.8)
    message => flags:u8 [seq delta:varint] [ts:u64] [key:str8] content_length:varint content
    flags   => bit 0 HaveKey, bit 1 UseLastSpecifiedTS, bit 2 SeqNumPrevPlusOne (sparse)

A bundle that is well framed inside its Produce but not a valid bundle raises
``BundleError`` (a ``CodecError``): the notes (§9) answer that per partition instead of
closing the connection, so the request parser leaves bundles as bytes and the handler
calls ``decode_bundle``. Snappy is cramjam's raw block format, both ways; the declared
decompressed size is checked against ``max_decompressed`` before decompressing.

Decoding is strict: unknown codecs, bit 7, message flag bits 3-7, SeqNumPrevPlusOne in a
non-sparse bundle, UseLastSpecifiedTS before any timestamp, a zero count, sparse
sequence numbers that do not increase, and trailing bytes are all refused.

Must not import: Twisted, sockets, ``broker.core``, the store, ``broker.tank.client``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import cramjam

from broker.tank.codec.primitives import (
    U64_MAX,
    CodecError,
    Reader,
    pack_u8,
    pack_u64,
    pack_varint,
)

__all__ = [
    "BundleError",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "DEFAULT_MAX_DECOMPRESSED",
    "DecodedBundle",
    "Message",
    "decode_bundle",
    "decompress_block",
    "encode_bundle",
    "frame_bundles",
]

CODEC_NONE = 0
CODEC_SNAPPY = 1
DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024

_SPARSE = 0x40
_RESERVED_BIT7 = 0x80
_HAVE_KEY = 0x01
_USE_LAST_TS = 0x02
_SEQ_PREV_PLUS_ONE = 0x04
_MESSAGE_FLAGS = _HAVE_KEY | _USE_LAST_TS | _SEQ_PREV_PLUS_ONE


class BundleError(CodecError):
    """A bundle that cannot be decoded (or encoded); ``reason`` says why."""


@dataclass(frozen=True, slots=True)
class Message:
    """One TANK message. ``key`` b"" means no key (the producer never sends HaveKey with an
    empty key). ``seq`` is set only where the wire carries it: messages of sparse bundles."""

    content: bytes
    key: bytes = b""
    ts: int = 0
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class DecodedBundle:
    """A decoded bundle. For a sparse bundle ``first_seq``/``last_seq`` come from its header
    and every message has its ``seq``; otherwise both are None and seqs come from outside
    (``base_seq`` of the consume reply, or the store on produce)."""

    messages: tuple[Message, ...]
    codec: int
    sparse: bool
    first_seq: int | None = None
    last_seq: int | None = None


def decompress_block(data: bytes, max_decompressed: int) -> bytes:
    """A raw snappy block, its declared size checked against ``max_decompressed`` first."""
    try:
        declared = Reader(data).varint("snappy uncompressed length")
    except CodecError as exc:
        raise BundleError(f"snappy block: {exc.reason}") from None
    if declared > max_decompressed:
        raise BundleError(f"snappy block declares {declared} bytes, over the limit of "
                          f"{max_decompressed}")
    try:
        out = bytes(cramjam.snappy.decompress_raw(data))
    except Exception as exc:  # cramjam raises its DecompressionError; nothing else is ours
        raise BundleError(f"snappy block does not decompress: {exc}") from None
    if len(out) != declared:
        raise BundleError(f"snappy block gave {len(out)} bytes, declared {declared}")
    return out


def decode_bundle(data: bytes, *,
                  max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> DecodedBundle:
    """Decode exactly one whole bundle; raise ``BundleError`` for anything else."""
    try:
        return _decode_bundle(data, max_decompressed)
    except BundleError:
        raise
    except CodecError as exc:
        raise BundleError(exc.reason) from None


def _decode_bundle(data: bytes, max_decompressed: int) -> DecodedBundle:
    r = Reader(data)
    flags = r.u8("bundle flags")
    if flags & _RESERVED_BIT7:
        raise BundleError("bundle flag bit 7 (extra flags) is not implemented")
    codec = flags & 0x03
    if codec not in (CODEC_NONE, CODEC_SNAPPY):
        raise BundleError(f"unknown bundle codec {codec}")
    sparse = bool(flags & _SPARSE)
    count = (flags >> 2) & 0x0F
    if count == 0:
        count = r.varint("bundle message count")
        if count == 0:
            raise BundleError("bundle holds no messages")
    first_seq = last_seq = None
    if sparse:
        first_seq = r.u64("sparse first_seq")
        last_seq = first_seq
        if count != 1:
            last_seq = first_seq + r.varint("sparse last_seq delta") + 1
            if last_seq > U64_MAX:
                raise BundleError("sparse last_seq overflows u64")
    body = r.raw(r.remaining())
    if codec == CODEC_SNAPPY:
        body = decompress_block(body, max_decompressed)
    messages = _decode_message_set(body, count, sparse, first_seq, last_seq)
    return DecodedBundle(messages, codec, sparse, first_seq, last_seq)


def _decode_message_set(body: bytes, count: int, sparse: bool, first_seq: int | None,
                        last_seq: int | None) -> tuple[Message, ...]:
    r = Reader(body)
    # every message takes at least 2 bytes: refuse absurd counts before looping
    if count > len(body) // 2:
        raise BundleError(f"bundle announces {count} messages in {len(body)} bytes")
    out: list[Message] = []
    ts: int | None = None
    seq: int | None = None
    for i in range(count):
        mflags = r.u8("message flags")
        if mflags & ~_MESSAGE_FLAGS:
            raise BundleError(f"message {i}: unknown flag bits 0x{mflags & ~_MESSAGE_FLAGS:02x}")
        if sparse:
            assert first_seq is not None and last_seq is not None
            if i == 0:
                seq = first_seq
            elif i == count - 1:
                if last_seq <= seq:
                    raise BundleError(f"message {i}: sparse seq {last_seq} does not increase")
                seq = last_seq
            else:
                assert seq is not None
                seq = seq + 1 if mflags & _SEQ_PREV_PLUS_ONE else seq + r.varint("seq delta") + 1
                if seq >= last_seq:
                    raise BundleError(f"message {i}: sparse seq {seq} not below last {last_seq}")
        elif mflags & _SEQ_PREV_PLUS_ONE:
            raise BundleError(f"message {i}: SeqNumPrevPlusOne in a non-sparse bundle")
        if mflags & _USE_LAST_TS:
            if ts is None:
                raise BundleError(f"message {i}: UseLastSpecifiedTS with no earlier timestamp")
        else:
            ts = r.u64("message timestamp")
        key = r.str8("message key") if mflags & _HAVE_KEY else b""
        content = r.raw(r.varint("content length"), "message content")
        out.append(Message(content, key, ts, seq if sparse else None))
    if not r.at_end():
        raise BundleError(f"{r.remaining()} bytes after the bundle's {count} messages")
    return tuple(out)


def encode_bundle(messages: Sequence[Message], *, codec: int = CODEC_NONE,
                  sparse: bool = False) -> bytes:
    """Encode messages as one bundle the way the C++ producer does: ts on the first message
    and whenever it changes, HaveKey only for a non-empty key. Sparse bundles use each
    message's ``seq`` (strictly increasing) and SeqNumPrevPlusOne for middle messages."""
    count = len(messages)
    if count == 0:
        raise BundleError("a bundle holds at least one message")
    if codec not in (CODEC_NONE, CODEC_SNAPPY):
        raise BundleError(f"unknown bundle codec {codec}")
    flags = codec | (_SPARSE if sparse else 0) | ((count << 2) if count <= 15 else 0)
    head = bytearray(pack_u8(flags))
    if count > 15:
        head += pack_varint(count)
    seqs: list[int] = []
    if sparse:
        seqs = [m.seq for m in messages]  # type: ignore[misc]
        if any(s is None for s in seqs) or any(b <= a for a, b in pairwise(seqs)):
            raise BundleError("sparse bundle messages need strictly increasing seqs")
        head += pack_u64(seqs[0])
        if count != 1:
            head += pack_varint(seqs[-1] - seqs[0] - 1)
    body = bytearray()
    last_ts: int | None = None
    for i, m in enumerate(messages):
        mflags = 0
        if m.key:
            mflags |= _HAVE_KEY
        if last_ts is not None and m.ts == last_ts:
            mflags |= _USE_LAST_TS
        delta = b""
        if sparse and 0 < i < count - 1:
            if seqs[i] == seqs[i - 1] + 1:
                mflags |= _SEQ_PREV_PLUS_ONE
            else:
                delta = pack_varint(seqs[i] - seqs[i - 1] - 1)
        body += pack_u8(mflags) + delta
        if not mflags & _USE_LAST_TS:
            body += pack_u64(m.ts)
            last_ts = m.ts
        if m.key:
            if len(m.key) > 0xFF:
                raise BundleError(f"message {i}: key longer than 255 bytes")
            body += pack_u8(len(m.key)) + m.key
        body += pack_varint(len(m.content)) + m.content
    if codec == CODEC_SNAPPY:
        body = bytearray(bytes(cramjam.snappy.compress_raw(bytes(body))))
    return bytes(head + body)


def frame_bundles(bundles: Iterable[bytes]) -> bytes:
    """A consume chunk: each bundle behind its varint length."""
    return b"".join(pack_varint(len(b)) + b for b in bundles)
