"""TANK bundles <-> Skerry's stored records (spec/tank-notes.md §5, §9), in bulk.

Owns the two conversions the transport's hot paths make, one whole bundle or one whole
read at a time (no per-message objects):

* ``bundle_to_records``: a Produce bundle -> a record area framed as the store takes it
  (``data.format``'s 64-byte headers with ``origin_timestamp`` = ts × 1000 µs, the key in
  the V1 key header, the content as payload; the store stamps offsets, timestamps, ids and
  checksums: ``PartitionLog.append_framed``), with the bundle's explicit sequence numbers
  when it is sparse;
* ``records_to_bundles``: stored records read back (``RawReadResult.raw`` and ``ends``)
  -> TANK bundles, one per run of records the store appended together (the same stored
  ``timestamp``: one produce bundle, one V1 batch), at most ``MAX_BUNDLE_MESSAGES``
  messages, snappy-compressed when the reference producer would compress it (keys +
  contents over 1 KiB or more than 512 messages) and that makes it smaller,
  ts = ``origin_timestamp`` / 1000 (the store
  ``timestamp`` when the record has none);
* ``chunk_within``: a consume chunk within a fetch size (§4.4).

Keys: a non-empty TANK key becomes the user header ``("key", kind 2)`` holding it, kind 2
(string) when it is UTF-8 (what V1 and Iggy read as the key) and kind 1 (raw) otherwise,
as the Kafka notes decided for non-UTF-8 keys. Read back, either kind is the TANK key;
any other user headers are not carried (TANK messages have none).

Must not import: Twisted, sockets, ``broker.core``, the store, ``broker.tank.client``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import cramjam
import numpy as np

from broker.tank.codec.bundles import (
    CODEC_SNAPPY,
    DEFAULT_MAX_DECOMPRESSED,
    BundleError,
    decompress_block,
)
from broker.tank.codec.primitives import CodecError, Reader, pack_varint
from data.format import (
    HEADER,
    HEADER_SIZE,
    KEY_HEADER_NAME,
    KIND_RAW,
    KIND_STRING,
    MAX_U64,
    ORIGIN_TIMESTAMP_OFFSET,
    PAYLOAD_LENGTH_OFFSET,
    TIMESTAMP_OFFSET,
    USER_HEADERS_LENGTH_OFFSET,
    field_view,
)

__all__ = ["MAX_BUNDLE_MESSAGES", "StoredBundle", "bundle_to_records", "chunk_within",
           "records_to_bundles", "snappy_worthwhile"]

MAX_BUNDLE_MESSAGES = 1024
"""Most messages in one bundle of a consume reply."""

_SPARSE = 0x40
_HAVE_KEY = 0x01
_USE_LAST_TS = 0x02
_SEQ_PREV_PLUS_ONE = 0x04
_MAX_TS_MS = MAX_U64 // 1000
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_pack_header = HEADER.pack
_pack_u64 = _U64.pack
_KEY_NAME = bytes([KIND_STRING]) + _U32.pack(len(KEY_HEADER_NAME)) + KEY_HEADER_NAME
_KEY_STRING = _KEY_NAME + bytes([KIND_STRING])
_KEY_RAW = _KEY_NAME + bytes([KIND_RAW])
_KEY_PREFIX_LEN = len(_KEY_STRING)
_KEY_VALUE_AT = _KEY_PREFIX_LEN + 4
_VARINT1 = [bytes([n]) for n in range(128)]
_SAMPLE = 4096


@dataclass(frozen=True, slots=True)
class StoredBundle:
    """A decoded Produce bundle as the store takes it: ``area`` (records back to back),
    ``ends`` (each record's end in ``area``), ``count``; ``seqs`` are the explicit
    sequence numbers of a sparse bundle (None otherwise)."""

    area: bytes | bytearray
    ends: list[int]
    count: int
    seqs: list[int] | None = None


def _key_header(key: bytes) -> bytes:
    try:
        key.decode("utf-8")
        prefix = _KEY_STRING
    except UnicodeDecodeError:
        prefix = _KEY_RAW
    return prefix + _U32.pack(len(key)) + key


def snappy_worthwhile(count: int, key_and_content_bytes: int) -> bool:
    """The reference producer's ``choose_compression_codec``: snappy for more than 512
    messages or more than 1024 bytes of keys and contents."""
    return count > 512 or key_and_content_bytes > 1024


def bundle_to_records(bundle: bytes, *, max_message_bytes: int,
                      max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> StoredBundle:
    """Decode one Produce bundle (``BundleError`` for anything invalid, a message over
    ``max_message_bytes`` or a timestamp whose µs overflow u64 included) and frame its
    messages as records.

    The same rules as ``bundles.decode_bundle`` (which the tests hold it to), in one pass
    without a ``Message`` per message; when every message after the first has the same
    bytes before its content and the same content length (one producer's fixed-size
    messages under one timestamp), those are checked and framed as numpy rows at once."""
    try:
        head = _head(bundle, max_decompressed)
        walk = _Walk(head, max_message_bytes)
        if not head.sparse and head.count >= 3:
            walk.run(2)
            if walk.uniform_rest():
                return walk.result()
        walk.run(head.count)
        return walk.result()
    except BundleError:
        raise
    except (IndexError, struct.error) as exc:
        raise BundleError(f"truncated bundle ({exc})") from None
    except CodecError as exc:
        raise BundleError(exc.reason) from None


@dataclass(slots=True)
class _Head:
    body: bytes
    count: int
    sparse: bool
    first_seq: int
    last_seq: int


def _head(bundle: bytes, max_decompressed: int) -> _Head:
    """The bundle header (checked as ``decode_bundle`` does) and its message set."""
    r = Reader(bundle)
    flags = r.u8("bundle flags")
    if flags & 0x80:
        raise BundleError("bundle flag bit 7 (extra flags) is not implemented")
    codec = flags & 0x03
    if codec > CODEC_SNAPPY:
        raise BundleError(f"unknown bundle codec {codec}")
    sparse = bool(flags & _SPARSE)
    count = (flags >> 2) & 0x0F
    if count == 0:
        count = r.varint("bundle message count")
        if count == 0:
            raise BundleError("bundle holds no messages")
    first_seq = last_seq = 0
    if sparse:
        first_seq = last_seq = r.u64("sparse first_seq")
        if count != 1:
            last_seq = first_seq + r.varint("sparse last_seq delta") + 1
            if last_seq > MAX_U64:
                raise BundleError("sparse last_seq overflows u64")
    body = r.raw(r.remaining())
    if codec == CODEC_SNAPPY:
        body = decompress_block(body, max_decompressed)
    if count > len(body) // 2:
        raise BundleError(f"bundle announces {count} messages in {len(body)} bytes")
    return _Head(body, count, sparse, first_seq, last_seq)


class _Walk:
    """Messages of one message set, framed as records as they are read."""

    def __init__(self, head: _Head, max_message_bytes: int) -> None:
        self.head = head
        self.limit = max_message_bytes
        self.area = bytearray()
        self.ends: list[int] = []
        self.seqs: list[int] | None = [] if head.sparse else None
        self.pos = 0
        self.done = 0
        self.ts: int | None = None
        self.seq = 0
        self.key_cache: dict[bytes, bytes] = {}
        self.last = (0, 0, 0, b"")  # message start, content start, content length, uh

    def run(self, upto: int) -> None:
        head = self.head
        body = head.body
        n = len(body)
        count = head.count
        sparse = head.sparse
        area = self.area
        ends = self.ends
        pos = self.pos
        ts = self.ts
        ots = 0 if ts is None else ts * 1000
        seq = self.seq
        limit = self.limit
        pack = _pack_header
        start = content_at = length = 0
        uh = b""
        for i in range(self.done, upto):
            start = pos
            f = body[pos]
            pos += 1
            if f & 0xF8:
                raise BundleError(f"message {i}: unknown flag bits 0x{f & 0xF8:02x}")
            if sparse:
                if i == 0:
                    seq = head.first_seq
                elif i == count - 1:
                    if head.last_seq <= seq:
                        raise BundleError(f"message {i}: sparse seq {head.last_seq} does not "
                                          f"increase")
                    seq = head.last_seq
                else:
                    if f & _SEQ_PREV_PLUS_ONE:
                        seq += 1
                    else:
                        delta, pos = _varint(body, pos)
                        seq += delta + 1
                    if seq >= head.last_seq:
                        raise BundleError(f"message {i}: sparse seq {seq} not below last "
                                          f"{head.last_seq}")
                self.seqs.append(seq)  # type: ignore[union-attr]
            elif f & _SEQ_PREV_PLUS_ONE:
                raise BundleError(f"message {i}: SeqNumPrevPlusOne in a non-sparse bundle")
            if f & _USE_LAST_TS:
                if ts is None:
                    raise BundleError(f"message {i}: UseLastSpecifiedTS with no earlier "
                                      f"timestamp")
            else:
                if pos + 8 > n:
                    raise BundleError(f"message {i}: truncated timestamp")
                t = _U64.unpack_from(body, pos)[0]
                pos += 8
                if t != ts:
                    if t > _MAX_TS_MS:
                        raise BundleError(f"message {i}: timestamp {t} ms does not fit in µs")
                    ts = t
                    ots = t * 1000
            if f & _HAVE_KEY:
                klen = body[pos]
                key = body[pos + 1:pos + 1 + klen]
                pos += 1 + klen
                if pos > n:
                    raise BundleError(f"message {i}: truncated key")
                if key:
                    uh = self.key_cache.get(key)  # type: ignore[assignment]
                    if uh is None:
                        uh = self.key_cache[key] = _key_header(key)
                else:
                    uh = b""
            else:
                uh = b""
            b = body[pos]
            if b < 0x80:
                length = b
                pos += 1
            else:
                length, pos = _varint(body, pos)
            content_at = pos
            pos += length
            if pos > n:
                raise BundleError(f"message {i}: truncated content")
            if length > limit:
                raise BundleError(f"message {i}: {length} bytes, over the limit of {limit}")
            area += pack(0, 0, 0, 0, 0, ots, len(uh), length, 0)
            area += body[content_at:pos]
            if uh:
                area += uh
            ends.append(len(area))
        self.pos = pos
        self.done = max(self.done, upto)
        self.ts = ts
        self.seq = seq
        self.last = (start, content_at, length, uh)

    def uniform_rest(self) -> bool:
        """Frame messages 2.. at once when each repeats message 1's layout (see
        ``bundle_to_records``); False (nothing changed) when they do not."""
        head = self.head
        body = head.body
        start, content_at, length, uh = self.last
        stride = self.pos - start
        rest = head.count - 2
        if len(body) - self.pos != rest * stride:
            return False
        rows = np.frombuffer(body, dtype=np.uint8, offset=self.pos).reshape(rest, stride)
        plen = content_at - start
        prefix = np.frombuffer(body, dtype=np.uint8, count=plen, offset=start)
        if not (rows[:, :plen] == prefix).all():
            return False
        record = HEADER_SIZE + length + len(uh)
        out = np.empty((rest, record), dtype=np.uint8)
        assert self.ts is not None
        out[:, :HEADER_SIZE] = np.frombuffer(
            _pack_header(0, 0, 0, 0, 0, self.ts * 1000, len(uh), length, 0), dtype=np.uint8)
        out[:, HEADER_SIZE:HEADER_SIZE + length] = rows[:, plen:]
        if uh:
            out[:, HEADER_SIZE + length:] = np.frombuffer(uh, dtype=np.uint8)
        base = len(self.area)
        self.area += out.tobytes()
        self.ends.extend(range(base + record, base + record * rest + 1, record))
        self.pos = len(body)
        self.done = head.count
        return True

    def result(self) -> StoredBundle:
        if self.pos != len(self.head.body):
            raise BundleError(f"{len(self.head.body) - self.pos} bytes after the bundle's "
                              f"{self.head.count} messages")
        return StoredBundle(self.area, self.ends, len(self.ends), self.seqs)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = 0
    for shift in (0, 7, 14, 21, 28):
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if value > 0xFFFFFFFF:
                raise BundleError("varint above 2**32 - 1")
            return value, pos
    raise BundleError("varint longer than 5 bytes")


def _keys_of(raw: bytes, body: int, pl: int, uhl: int) -> bytes:
    """The TANK key of one record: its key header's value (kind 2 or 1), else none."""
    at = body + pl
    uh = raw[at:at + uhl]
    if uhl >= _KEY_VALUE_AT and (uh.startswith(_KEY_STRING) or uh.startswith(_KEY_RAW)):
        (length,) = _U32.unpack_from(uh, _KEY_PREFIX_LEN)
        if _KEY_VALUE_AT + length <= uhl and length:
            return uh[_KEY_VALUE_AT:_KEY_VALUE_AT + length]
    return b""


def records_to_bundles(raw: bytes, ends: Sequence[int], budget: int | None = None
                       ) -> list[bytes]:
    """TANK bundles (non-sparse, in order) for the stored records in ``raw`` (``ends``:
    each one's end). With a ``budget`` (the fetch size), only the records whose messages
    reach past it are used, plus one: the last bundle is then the one a chunk cuts, and
    no bundle is built only to be dropped."""
    n = len(ends)
    if n == 0:
        return []
    ends_a = np.asarray(ends, dtype=np.int64)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends_a[:-1]
    u4 = field_view(raw, "<u4")
    pls = u4[starts + PAYLOAD_LENGTH_OFFSET]
    if budget is not None and n > 1:
        # a message takes at least its content and two bytes (flags, length)
        past = int(np.searchsorted(np.cumsum(pls, dtype=np.int64) + np.arange(2, 2 * n + 1, 2),
                                   budget, side="right"))
        if past + 1 < n:
            n = past + 1
            ends_a, starts, pls = ends_a[:n], starts[:n], pls[:n]
    u8 = field_view(raw, "<u8")
    uhls = u4[starts + USER_HEADERS_LENGTH_OFFSET]
    stamps = u8[starts + TIMESTAMP_OFFSET]
    ots = u8[starts + ORIGIN_TIMESTAMP_OFFSET]
    ts_ms = np.where(ots != 0, ots, stamps) // 1000
    # runs of one store append (same stored timestamp), cut at MAX_BUNDLE_MESSAGES
    cuts = np.flatnonzero(stamps[1:] != stamps[:-1]) + 1
    bounds = [0, *cuts.tolist(), n]
    out: list[bytes] = []
    lists: tuple | None = None  # the per-message path's columns, made when first needed
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        for a in range(lo, hi, MAX_BUNDLE_MESSAGES):
            b = min(hi, a + MAX_BUNDLE_MESSAGES)
            bundle = None
            if b - a >= 3:
                bundle = _uniform_bundle(raw, starts, ends_a, pls, uhls, ts_ms, a, b)
            if bundle is None:
                if lists is None:
                    lists = ((starts + HEADER_SIZE).tolist(), pls.tolist(),
                             uhls.tolist() if uhls.any() else None, ts_ms.tolist())
                bundle = _bundle(raw, *lists, a, b)
            out.append(bundle)
    return out


def _uniform_bundle(raw: bytes, starts: np.ndarray, ends: np.ndarray, pls: np.ndarray,
                    uhls: np.ndarray, ts_ms: np.ndarray, a: int, b: int) -> bytes | None:
    """Records ``a..b`` as one bundle in a few numpy calls when they are alike (the same
    payload length, user headers and timestamp, back to back); None when they are not.
    The bytes are exactly ``_bundle``'s."""
    pl = int(pls[a])
    uhl = int(uhls[a])
    size = HEADER_SIZE + pl + uhl
    if not ((pls[a:b] == pl).all() and (uhls[a:b] == uhl).all()
            and (ts_ms[a:b] == ts_ms[a]).all() and (ends[a:b] - starts[a:b] == size).all()):
        return None
    count = b - a
    rows = np.frombuffer(raw, dtype=np.uint8, count=count * size,
                         offset=int(starts[a])).reshape(count, size)
    key = b""
    if uhl:
        body = int(starts[a]) + HEADER_SIZE
        key = _keys_of(raw, body, pl, uhl)
        if not (rows[:, HEADER_SIZE + pl:] == rows[0, HEADER_SIZE + pl:]).all():
            return None
    flags = _HAVE_KEY if key else 0
    tail = (bytes([len(key)]) + key if key else b"") + pack_varint(pl)
    prefix = np.frombuffer(bytes([flags | _USE_LAST_TS]) + tail, dtype=np.uint8)
    plen = len(prefix)
    first = (bytes([flags]) + _pack_u64(int(ts_ms[a])) + tail
             + raw[int(starts[a]) + HEADER_SIZE:int(starts[a]) + HEADER_SIZE + pl])
    head = bytes([count << 2]) if count <= 15 else b"\x00" + pack_varint(count)
    # the whole bundle in one buffer: head, the first message, then one row per message
    at = len(head) + len(first)
    flat = np.empty(at + (count - 1) * (plen + pl), dtype=np.uint8)
    flat[:len(head)] = np.frombuffer(head, dtype=np.uint8)
    flat[len(head):at] = np.frombuffer(first, dtype=np.uint8)
    out = flat[at:].reshape(count - 1, plen + pl)
    out[:, :plen] = prefix
    out[:, plen:] = rows[1:, HEADER_SIZE:HEADER_SIZE + pl]
    if snappy_worthwhile(count, (pl + len(key)) * count):
        body, codec = _snappy(flat[len(head):])
        if codec:
            return bytes([head[0] | codec]) + head[1:] + body
    return flat.tobytes()


def _bundle(raw: bytes, bodies: list[int], pls: list[int], uhls: list[int] | None,
            ts: list[int], a: int, b: int) -> bytes:
    count = b - a
    parts: list[bytes] = []
    add = parts.append
    last_ts = -1
    payload_bytes = 0
    for i in range(a, b):
        body = bodies[i]
        pl = pls[i]
        payload_bytes += pl
        t = ts[i]
        key = b"" if uhls is None or not uhls[i] else _keys_of(raw, body, pl, uhls[i])
        flags = _HAVE_KEY if key else 0
        if t == last_ts:
            add(_VARINT1[flags | _USE_LAST_TS])
        else:
            add(_VARINT1[flags])
            add(_pack_u64(t))
            last_ts = t
        if key:
            add(_VARINT1[len(key)] if len(key) < 128 else bytes([len(key)]))
            add(key)
            payload_bytes += len(key)
        add(_VARINT1[pl] if pl < 128 else pack_varint(pl))
        add(raw[body:body + pl])
    body_bytes = b"".join(parts)
    codec = 0
    if snappy_worthwhile(count, payload_bytes):
        body_bytes, codec = _snappy(body_bytes)
    if count <= 15:
        return bytes([codec | count << 2]) + body_bytes
    return bytes([codec]) + pack_varint(count) + body_bytes


def _snappy(body: bytes | np.ndarray) -> tuple[bytes, int]:
    """A message set snappy-compressed (codec 1), or as it is (codec 0) when compressing
    does not make it smaller (random contents): the client then also keeps the complete
    messages of such a bundle when a fetch size cuts it. A large set whose first 4 KiB do
    not shrink by an eighth is not tried as a whole."""
    if len(body) > 2 * _SAMPLE:
        sample = cramjam.snappy.compress_raw(bytes(body[:_SAMPLE]))
        if len(sample) > _SAMPLE - _SAMPLE // 8:
            return bytes(body), 0
    plain = bytes(body)
    packed = bytes(cramjam.snappy.compress_raw(plain))
    return (packed, 1) if len(packed) < len(plain) else (plain, 0)


def chunk_within(bundles: Sequence[bytes], fetch_size: int) -> tuple[bytes, int]:
    """A consume chunk of ``bundles`` within ``fetch_size`` bytes, and how many bundles it
    holds whole.

    Whole bundles while they fit; then the next one cut at ``fetch_size`` as TANK does
    (§4.4: the client keeps the complete messages of an uncompressed cut bundle and learns
    the size it needs). When not even the first bundle fits, it is sent whole anyway, so a
    consume always makes progress (the notes' preference, §9)."""
    out = bytearray()
    whole = 0
    for bundle in bundles:
        framed = pack_varint(len(bundle)) + bundle
        if len(out) + len(framed) > fetch_size:
            if not out:
                return framed, 1
            out += framed[:fetch_size - len(out)]
            break
        out += framed
        whole += 1
    return bytes(out), whole
