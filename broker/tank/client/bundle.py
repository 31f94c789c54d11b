"""The TANK client's bundles: what libtank produces, and how it reads consume chunks.

From the client-side sections of spec/tank-notes.md (§4.3 client behaviour, §4.4, §5).
Owns: ``Msg`` (to produce), ``Consumed`` (a decoded message with its seq),
``bundle_for`` (the producer's encoding: HaveKey only for non-empty keys, a timestamp on
the first message and whenever it changes, snappy when > 512 messages or keys + contents
> 1024 bytes) and ``read_chunk`` (a partition's chunk, whose last bundle may be cut).

Must not import: Twisted, ``broker.core``, the store, ``broker.tank.codec``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import cramjam

from broker.tank.client.wire import In, Out, TankDecodeError

__all__ = ["ChunkResult", "Consumed", "Msg", "bundle_for", "read_chunk", "wants_snappy"]

_F_KEY, _F_LAST_TS, _F_PREV_PLUS_ONE = 1, 2, 4
_B_SPARSE, _B_EXTRA = 1 << 6, 1 << 7


@dataclass(frozen=True)
class Msg:
    """A message to produce; ``seq`` only for sparse bundles (produce_with_seqnum)."""

    content: bytes
    key: bytes = b""
    ts: int = 0
    seq: int | None = None


@dataclass(frozen=True)
class Consumed:
    seq: int
    ts: int
    key: bytes
    content: bytes


def wants_snappy(msgs: Sequence[Msg]) -> bool:
    """``choose_compression_codec``: > 512 messages or > 1024 bytes of keys + contents."""
    return len(msgs) > 512 or sum(len(m.key) + len(m.content) for m in msgs) > 1024


def bundle_for(msgs: Sequence[Msg], *, compress: bool | None = None) -> bytes:
    """One bundle, as libtank's producer would write it (sparse when the msgs carry seqs)."""
    if not msgs:
        raise ValueError("empty bundle")
    if compress is None:
        compress = wants_snappy(msgs)
    sparse = msgs[0].seq is not None
    n = len(msgs)
    hdr = Out()
    flags = (1 if compress else 0) | (_B_SPARSE if sparse else 0)
    if 1 <= n <= 15:
        hdr.put("B", flags | n << 2)
    else:
        hdr.put("B", flags).var(n)
    if sparse:
        hdr.put("Q", msgs[0].seq)
        if n != 1:
            hdr.var(msgs[-1].seq - msgs[0].seq - 1)
    body = Out()
    prev_ts = None
    for i, m in enumerate(msgs):
        f = 0
        if len(m.key):
            f |= _F_KEY
        same_ts = i > 0 and m.ts == prev_ts
        if same_ts:
            f |= _F_LAST_TS
        gap = None
        if sparse and i not in (0, n - 1):
            gap = m.seq - msgs[i - 1].seq - 1
            if gap == 0:
                f |= _F_PREV_PLUS_ONE
                gap = None
        body.put("B", f)
        if gap is not None:
            body.var(gap)
        if not same_ts:
            body.put("Q", m.ts)
            prev_ts = m.ts
        if f & _F_KEY:
            body.s8(m.key)
        body.var(len(m.content)).raw(m.content)
    payload = bytes(body.buf)
    if compress:
        payload = bytes(cramjam.snappy.compress_raw(payload))
    return bytes(hdr.buf) + payload


@dataclass
class ChunkResult:
    """What ``read_chunk`` got: messages and, if the last bundle was cut, how many bytes
    (from that bundle's length varint to its end) a fetch needs to get all of it."""

    messages: list[Consumed] = field(default_factory=list)
    cut_bundle_bytes: int = 0


def _messages(src: In, count: int, sparse: bool, first: int, last: int, seq: int,
              out: list[Consumed], cut: bool) -> None:
    """Decode up to ``count`` messages; in a ``cut`` message set, stop at the first
    incomplete one instead of raising."""
    ts = None
    for i in range(count):
        start = src.pos
        try:
            f = src.get("B")
            if sparse:
                if i == 0:
                    seq = first
                elif i == count - 1:
                    seq = last
                elif f & _F_PREV_PLUS_ONE:
                    seq += 1
                else:
                    seq += src.var() + 1
            if not f & _F_LAST_TS:
                ts = src.get("Q")
            elif ts is None:
                raise TankDecodeError("UseLastSpecifiedTS on a bundle's first message")
            key = src.s8() if f & _F_KEY else b""
            content = src.take(src.var())
        except TankDecodeError:
            if not cut:
                raise
            src.pos = start
            return
        out.append(Consumed(seq, ts, key, content))
        seq += 1


def read_chunk(chunk: bytes, base_seq: int) -> ChunkResult:
    """Decode ``(bundle_length:varint bundle)*``; the last bundle may be cut (§4.4): its
    complete messages are returned when it is uncompressed, none when it is snappy."""
    res = ChunkResult()
    src = In(chunk)
    seq = base_seq
    while src.left():
        at = src.pos
        try:
            blen = src.var()
        except TankDecodeError:
            res.cut_bundle_bytes = 5 + len(chunk) - at  # at most a varint + what we saw
            break
        bend = src.pos + blen
        whole = bend <= len(chunk)
        bsrc = In(chunk, src.pos, min(bend, len(chunk)))
        if not whole:
            res.cut_bundle_bytes = bend - at
        try:
            flags = bsrc.get("B")
            if flags & _B_EXTRA:
                raise TankDecodeError("bundle flag bit 7 set")
            codec = flags & 3
            count = (flags >> 2) & 15 or bsrc.var()
            sparse = bool(flags & _B_SPARSE)
            first = last = 0
            if sparse:
                first = bsrc.get("Q")
                last = first if count == 1 else first + bsrc.var() + 1
        except TankDecodeError:
            if whole:
                raise
            break
        if codec == 1:
            if not whole:
                break
            try:
                plain = bytes(cramjam.snappy.decompress_raw(bsrc.take(bsrc.left())))
            except cramjam.DecompressionError as exc:
                raise TankDecodeError(f"snappy: {exc}") from None
            msrc = In(plain)
        elif codec == 0:
            msrc = In(chunk, bsrc.pos, bsrc.end)
        else:
            raise TankDecodeError(f"bundle codec {codec}")
        got = len(res.messages)
        _messages(msrc, count, sparse, first, last, seq, res.messages, cut=not whole)
        if not whole:
            break
        if len(res.messages) - got != count or msrc.left():
            raise TankDecodeError("bundle message set does not match its count")
        seq = (last if sparse else seq + count - 1) + 1
        src.pos = bend
    return res
