"""Record batches v2 (message format magic 2, KIP-98): decode and encode.

Owns: ``RecordBatch`` and ``BatchRecord`` (one batch and its records, decoded),
``decode_batches`` (a produced partition's bytes -> its batches, CRC-32C checked, compressed
records opened within a bound), ``encode_batch`` (-> the wire bytes, compressed when asked),
the varint helpers (``zigzag``), ``encode_headers``/``decode_headers`` (a record's header
list in Kafka's own encoding, which the store keeps as it is), ``is_batch_v2`` and the
refusals ``CorruptRecordBatch`` (error 2) and ``UnsupportedBatch`` (transactional: 48,
control: 87). Layout (big-endian; varints are zigzag, as Kafka's ``ByteUtils.writeVarint``)::

    RecordBatch => baseOffset:int64 batchLength:int32 partitionLeaderEpoch:int32
                   magic:int8(2) crc:uint32 attributes:int16 lastOffsetDelta:int32
                   baseTimestamp:int64 maxTimestamp:int64 producerId:int64
                   producerEpoch:int16 baseSequence:int32 records:[Record] (int32 count)
    Record      => length:varint attributes:int8 timestampDelta:varlong offsetDelta:varint
                   key:varbytes value:varbytes headers:[Header] (varint count)
    Header      => key:varbytes (a string; never null) value:varbytes (-1: null)

``batchLength`` counts the bytes after itself; the CRC (Castagnoli, CRC-32C) covers
``attributes`` to the end. Attributes: bits 0-2 the codec (``Codec``; the records after the
count are compressed as one block), bit 3 the timestamp type (1 = LogAppendTime), bit 4
transactional, bit 5 control. The count is outside the compressed block.

Decoding is for produce and never raises anything but the two refusals (for the partition):
framing, lengths, varints, counts and the CRC are checked; a batch may expand to at most
``max_decompressed`` bytes (all batches of the set together), as for magic 0/1. Headers keep
their order, duplicates and bytes. Transactional and control batches are refused until
Skerry has transactions: a client writing control records gets INVALID_RECORD (87), as
Kafka's brokers answer; a transactional batch gets INVALID_TXN_STATE (48): there is no
transaction it could belong to.

Must not import: Twisted, sockets, files, the core, the store, ``requests``, ``responses``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace

import google_crc32c

from broker.kafka.codec.compression import (
    MAX_DECOMPRESSED_BYTES,
    Codec,
    CompressionFailed,
    compress,
    decompress,
)
from broker.kafka.codec.error_codes import ErrorCode
from broker.kafka.codec.messages import CorruptMessageSet

__all__ = [
    "BatchRecord",
    "RecordBatch",
    "CorruptRecordBatch",
    "UnsupportedBatch",
    "decode_batches",
    "split_batches",
    "RawBatch",
    "encode_batch",
    "encode_headers",
    "decode_headers",
    "header_list_start",
    "encode_varint",
    "is_batch_v2",
    "crc32c",
    "BATCH_OVERHEAD",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "ATTR_CONTROL",
    "MAGIC_V2",
]

MAGIC_V2 = 2
BATCH_OVERHEAD = 61
"""Bytes of a batch besides its records (header up to and including the record count)."""
ATTR_CODEC_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
_LENGTH_AT = 8
_MAGIC_AT = 16
_CRC_AT = 17
_ATTRIBUTES_AT = 21
_HEAD = struct.Struct(">qiibIhiqqqhii")
"""baseOffset .. records count: the 61 bytes of ``BATCH_OVERHEAD``."""
assert _HEAD.size == BATCH_OVERHEAD


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli) of ``data``: a record batch's checksum."""
    return int(google_crc32c.value(bytes(data)))


class CorruptRecordBatch(CorruptMessageSet):
    """A produced batch that cannot be accepted: bad framing or lengths, a CRC mismatch,
    bad varints, a failed decompression, too many bytes once decompressed."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class UnsupportedBatch(Exception):
    """A well-formed batch of a kind Skerry does not store yet (transactional, control)."""

    def __init__(self, message: str, error_code: ErrorCode) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True)
class BatchRecord:
    """One record of a batch: deltas from the batch's base offset and timestamp; ``key`` /
    ``value`` None are Kafka's null; ``headers`` in the order sent, duplicates kept, a
    value None a null header value."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[bytes, bytes | None], ...] = ()
    attributes: int = 0


@dataclass(frozen=True)
class RecordBatch:
    """One batch (records decoded, uncompressed)."""

    base_offset: int
    base_timestamp: int
    records: tuple[BatchRecord, ...]
    max_timestamp: int = -1
    attributes: int = 0
    last_offset_delta: int = -1
    """-1: the last record's offset delta (what ``encode_batch`` writes)."""
    partition_leader_epoch: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_CODEC_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def record_count(self) -> int:
        return len(self.records)

    def timestamp(self, record: BatchRecord) -> int:
        """A record's timestamp as a consumer sees it: the batch's max timestamp under
        LogAppendTime, else base + delta (ms)."""
        if self.log_append_time:
            return self.max_timestamp
        return self.base_timestamp + record.timestamp_delta


def is_batch_v2(data: bytes) -> bool:
    """Whether a produced partition's bytes start with a magic-2 batch (the magic byte is
    at the same place in every message format)."""
    return len(data) > _MAGIC_AT and data[_MAGIC_AT] == MAGIC_V2


# ------------------------------------------------------------------------ varints


def encode_varint(value: int) -> bytes:
    """Kafka's zigzag varint (varlong) of ``value``."""
    v = (value << 1) ^ (value >> 63)
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _varint(data: bytes, pos: int, end: int, what: str, limit: int = 10) -> tuple[int, int]:
    """A zigzag varint of at most ``limit`` bytes at ``pos`` -> (value, position after)."""
    shift = 0
    result = 0
    start = pos
    while True:
        if pos >= end:
            raise CorruptRecordBatch(f"{what} varint truncated at byte {pos}")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if pos - start >= limit:
            raise CorruptRecordBatch(f"{what} varint at byte {start} is too long")
    return (result >> 1) ^ -(result & 1), pos


def _varbytes(data: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    n, pos = _varint(data, pos, end, what, 5)
    if n == -1:
        return None, pos
    if n < 0 or pos + n > end:
        raise CorruptRecordBatch(f"{what} of {n} bytes at byte {pos} overruns the record")
    return data[pos:pos + n], pos + n


def _put_bytes(out: list[bytes], b: bytes | None) -> None:
    if b is None:
        out.append(b"\x01")  # zigzag(-1)
    else:
        out.append(encode_varint(len(b)))
        out.append(b)


def encode_headers(headers: Sequence[tuple[bytes, bytes | None]]) -> bytes:
    """A record's header list as Kafka encodes it: varint count, then each header."""
    out = [encode_varint(len(headers))]
    for key, value in headers:
        _put_bytes(out, key)
        _put_bytes(out, value)
    return b"".join(out)


def _headers(data: bytes, pos: int, end: int) -> tuple[tuple[tuple[bytes, bytes | None], ...], int]:
    count, pos = _varint(data, pos, end, "header count", 5)
    if count < 0 or count > end - pos:
        raise CorruptRecordBatch(f"header count {count} at byte {pos}")
    headers = []
    for _ in range(count):
        key, pos = _varbytes(data, pos, end, "header key")
        if key is None:
            raise CorruptRecordBatch(f"null header key before byte {pos}")
        value, pos = _varbytes(data, pos, end, "header value")
        headers.append((key, value))
    return tuple(headers), pos


def header_list_start(blob: bytes) -> tuple[int, int]:
    """``(count, where the first header starts)`` of a whole header list (``blob`` as
    ``encode_headers`` writes it, checked to the end: ``CorruptRecordBatch``)."""
    decode_headers(blob)
    count, pos = _varint(blob, 0, len(blob), "header count", 5)
    return count, pos


def decode_headers(blob: bytes) -> tuple[tuple[bytes, bytes | None], ...]:
    """``encode_headers``' inverse; ``CorruptRecordBatch`` when ``blob`` is not one whole
    header list."""
    headers, pos = _headers(blob, 0, len(blob))
    if pos != len(blob):
        raise CorruptRecordBatch(f"{len(blob) - pos} bytes after a header list")
    return headers


# ------------------------------------------------------------------------ records


def _records(data: bytes, count: int) -> tuple[BatchRecord, ...]:
    """``count`` records filling ``data`` exactly."""
    pos, end = 0, len(data)
    if count > end // 7 + 1:  # a record is at least 7 bytes
        raise CorruptRecordBatch(f"{count} records cannot fit in {end} bytes")
    out = []
    for _ in range(count):
        length, pos = _varint(data, pos, end, "record length", 5)
        stop = pos + length
        if length < 6 or stop > end:
            raise CorruptRecordBatch(f"record of {length} bytes at byte {pos} "
                                     f"({end - pos} bytes left)")
        attributes = data[pos]
        ts_delta, at = _varint(data, pos + 1, stop, "timestamp delta")
        offset_delta, at = _varint(data, at, stop, "offset delta", 5)
        key, at = _varbytes(data, at, stop, "key")
        value, at = _varbytes(data, at, stop, "value")
        headers, at = _headers(data, at, stop)
        if at != stop:
            raise CorruptRecordBatch(f"record at byte {pos}: {stop - at} bytes after its "
                                     f"headers")
        out.append(BatchRecord(offset_delta, ts_delta, key, value, headers, attributes))
        pos = stop
    if pos != end:
        raise CorruptRecordBatch(f"{end - pos} bytes after the last of {count} records")
    return tuple(out)


@dataclass(frozen=True)
class RawBatch:
    """A batch whose framing, CRC-32C and attributes were checked and whose records are
    opened (decompressed) but not yet decoded: ``head`` is the batch with no records,
    ``count`` its record count, ``body`` the records' bytes. What the produce path frames
    straight into stored records, and what the idempotence checks read (``head``'s producer
    id, epoch, base sequence; ``count``)."""

    head: RecordBatch
    count: int
    body: bytes

    def records(self) -> tuple[BatchRecord, ...]:
        """The records (``CorruptRecordBatch`` when they do not fill the body exactly, or
        the last offset delta is not the batch's)."""
        records = _records(self.body, self.count)
        if records and records[-1].offset_delta != self.head.last_offset_delta:
            raise CorruptRecordBatch(f"batch at base offset {self.head.base_offset}: "
                                     f"lastOffsetDelta {self.head.last_offset_delta}, last "
                                     f"record's {records[-1].offset_delta}")
        return records


def split_batches(data: bytes, max_decompressed: int = MAX_DECOMPRESSED_BYTES
                  ) -> tuple[RawBatch, ...]:
    """A produced partition's bytes (one or more magic-2 batches) -> its batches, records
    opened but not decoded. ``CorruptRecordBatch`` for bad framing, a CRC mismatch, a failed
    or too large decompression (a partial trailing batch included: a producer sends whole
    batches); ``UnsupportedBatch`` for a transactional or control batch."""
    data = bytes(data)
    batches: list[RawBatch] = []
    pos, size = 0, len(data)
    left = max_decompressed
    while pos < size:
        if pos + BATCH_OVERHEAD > size:
            raise CorruptRecordBatch(f"partial batch header at byte {pos}")
        (base_offset, length, epoch, magic, crc, attributes, last_delta, base_ts, max_ts,
         producer_id, producer_epoch, base_sequence, count) = _HEAD.unpack_from(data, pos)
        end = pos + 12 + length
        if length < BATCH_OVERHEAD - 12 or end > size:
            raise CorruptRecordBatch(f"batch at byte {pos} has length {length} "
                                     f"({size - pos - 12} bytes left)")
        if magic != MAGIC_V2:
            raise CorruptRecordBatch(f"batch at byte {pos}: magic {magic}, expected 2")
        if crc32c(data[pos + _ATTRIBUTES_AT:end]) != crc:
            raise CorruptRecordBatch(f"batch at byte {pos} (base offset {base_offset}): "
                                     f"CRC-32C mismatch")
        if attributes & ATTR_CONTROL:
            raise UnsupportedBatch("clients may not write control batches",
                                   ErrorCode.INVALID_RECORD)
        if attributes & ATTR_TRANSACTIONAL:
            raise UnsupportedBatch("transactional batch: Skerry has no transactions",
                                   ErrorCode.INVALID_TXN_STATE)
        if count < 0:
            raise CorruptRecordBatch(f"batch at byte {pos}: record count {count}")
        body = data[pos + BATCH_OVERHEAD:end]
        codec = attributes & ATTR_CODEC_MASK
        if codec:
            try:
                body = decompress(codec, body, MAGIC_V2, max(left, 0))
            except CompressionFailed as e:
                raise CorruptRecordBatch(f"batch at byte {pos}: {e}") from None
            left -= len(body)
        batches.append(RawBatch(RecordBatch(base_offset, base_ts, (), max_ts, attributes,
                                            last_delta, epoch, producer_id, producer_epoch,
                                            base_sequence), count, body))
        pos = end
    return tuple(batches)


def decode_batches(data: bytes, max_decompressed: int = MAX_DECOMPRESSED_BYTES
                   ) -> tuple[RecordBatch, ...]:
    """A produced partition's bytes (one or more magic-2 batches) -> its batches, records
    decoded (``split_batches``' refusals, and ``CorruptRecordBatch`` for bad records).
    Nothing else escapes."""
    return tuple(replace(raw.head, records=raw.records())
                 for raw in split_batches(data, max_decompressed))


def _encode_record(r: BatchRecord) -> bytes:
    out = [bytes((r.attributes & 0xFF,)), encode_varint(r.timestamp_delta),
           encode_varint(r.offset_delta)]
    _put_bytes(out, r.key)
    _put_bytes(out, r.value)
    out.append(encode_headers(r.headers))
    body = b"".join(out)
    return encode_varint(len(body)) + body


def encode_batch(batch: RecordBatch, compression: int = Codec.NONE) -> bytes:
    """``batch`` as wire bytes, its records compressed with ``compression`` (the codec
    bits of ``batch.attributes`` are replaced); ``max_timestamp`` -1 and
    ``last_offset_delta`` -1 are computed from the records."""
    records = b"".join(map(_encode_record, batch.records))
    if compression:
        records = compress(compression, records)
    attributes = (batch.attributes & ~ATTR_CODEC_MASK) | compression
    last = batch.last_offset_delta
    if last == -1 and batch.records:
        last = batch.records[-1].offset_delta
    max_ts = batch.max_timestamp
    if max_ts == -1 and batch.records:
        max_ts = max(batch.base_timestamp + r.timestamp_delta for r in batch.records)
    head = _HEAD.pack(batch.base_offset, BATCH_OVERHEAD - 12 + len(records),
                      batch.partition_leader_epoch, MAGIC_V2, 0, attributes, last,
                      batch.base_timestamp, max_ts, batch.producer_id,
                      batch.producer_epoch, batch.base_sequence, len(batch.records))
    crc = crc32c(head[_ATTRIBUTES_AT:] + records)
    return head[:_CRC_AT] + struct.pack(">I", crc) + head[_ATTRIBUTES_AT:] + records
