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
  messages, snappy-compressed like the reference producer does (keys + contents over
  1 KiB or more than 512 messages), ts = ``origin_timestamp`` / 1000 (the store
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

from broker.tank.codec.bundles import DEFAULT_MAX_DECOMPRESSED, BundleError, decode_bundle
from broker.tank.codec.primitives import pack_varint
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


@dataclass(frozen=True, slots=True)
class StoredBundle:
    """A decoded Produce bundle as the store takes it: ``area`` (records back to back),
    ``ends`` (each record's end in ``area``), ``count``; ``seqs`` are the explicit
    sequence numbers of a sparse bundle (None otherwise)."""

    area: bytes
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
    messages as records."""
    decoded = decode_bundle(bundle, max_decompressed=max_decompressed)
    area = bytearray()
    ends: list[int] = []
    append_end = ends.append
    key_cache: dict[bytes, bytes] = {}
    last_ts = -1
    ots = 0
    for i, m in enumerate(decoded.messages):
        content = m.content
        if len(content) > max_message_bytes:
            raise BundleError(f"message {i}: {len(content)} bytes, over the limit of "
                              f"{max_message_bytes}")
        if m.ts != last_ts:
            last_ts = m.ts
            if last_ts > _MAX_TS_MS:
                raise BundleError(f"message {i}: timestamp {last_ts} ms does not fit in µs")
            ots = last_ts * 1000
        key = m.key
        if key:
            uh = key_cache.get(key)
            if uh is None:
                uh = key_cache[key] = _key_header(key)
            area += _pack_header(0, 0, 0, 0, 0, ots, len(uh), len(content), 0)
            area += content
            area += uh
        else:
            area += _pack_header(0, 0, 0, 0, 0, ots, 0, len(content), 0)
            area += content
        append_end(len(area))
    seqs = [m.seq for m in decoded.messages] if decoded.sparse else None  # type: ignore[misc]
    return StoredBundle(bytes(area), ends, len(ends), seqs)


def _keys_of(raw: bytes, body: int, pl: int, uhl: int) -> bytes:
    """The TANK key of one record: its key header's value (kind 2 or 1), else none."""
    at = body + pl
    uh = raw[at:at + uhl]
    if uhl >= _KEY_VALUE_AT and (uh.startswith(_KEY_STRING) or uh.startswith(_KEY_RAW)):
        (length,) = _U32.unpack_from(uh, _KEY_PREFIX_LEN)
        if _KEY_VALUE_AT + length <= uhl and length:
            return uh[_KEY_VALUE_AT:_KEY_VALUE_AT + length]
    return b""


def records_to_bundles(raw: bytes, ends: Sequence[int]) -> list[bytes]:
    """TANK bundles (non-sparse, in order) for ``len(ends)`` stored records in ``raw``."""
    n = len(ends)
    if n == 0:
        return []
    ends_a = np.asarray(ends, dtype=np.int64)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends_a[:-1]
    u4 = field_view(raw, "<u4")
    u8 = field_view(raw, "<u8")
    pls = u4[starts + PAYLOAD_LENGTH_OFFSET]
    uhls = u4[starts + USER_HEADERS_LENGTH_OFFSET]
    stamps = u8[starts + TIMESTAMP_OFFSET]
    ots = u8[starts + ORIGIN_TIMESTAMP_OFFSET]
    ts_ms = np.where(ots != 0, ots, stamps) // 1000
    # runs of one store append (same stored timestamp), cut at MAX_BUNDLE_MESSAGES
    cuts = np.flatnonzero(stamps[1:] != stamps[:-1]) + 1
    bounds = [0, *cuts.tolist(), n]
    out: list[bytes] = []
    bodies = (starts + HEADER_SIZE).tolist()
    pl_list = pls.tolist()
    keyless = not uhls.any()
    uhl_list = None if keyless else uhls.tolist()
    ts_list = ts_ms.tolist()
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        for a in range(lo, hi, MAX_BUNDLE_MESSAGES):
            b = min(hi, a + MAX_BUNDLE_MESSAGES)
            out.append(_bundle(raw, bodies, pl_list, uhl_list, ts_list, a, b))
    return out


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
        body_bytes = bytes(cramjam.snappy.compress_raw(body_bytes))
        codec = 1
    if count <= 15:
        return bytes([codec | count << 2]) + body_bytes
    return bytes([codec]) + pack_varint(count) + body_bytes


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
