"""Record batches v2 (``broker.kafka.codec.batches``): what a producer's batch decodes to,
what a consumer makes of the batches Skerry writes, and how bad input is refused.

kafka-python's own batch builder and reader stand in for a client here (the real clients
run in test_clients_*.py): a batch it builds (every codec it has, headers with duplicates
and nulls, producer id / epoch / sequence) decodes to the records it was given, and a batch
``encode_batch`` writes passes its reader, CRC-32C included. Corrupt input (every truncation,
every flipped byte of a batch) is refused with ``CorruptRecordBatch`` (error 2) and nothing
else; transactional and control batches are refused with their codes; a compressed batch
that would expand past the bound is refused without being expanded.
"""

from __future__ import annotations

import struct

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.kafka.codec import (
    BatchRecord,
    Codec,
    CorruptMessageSet,
    CorruptRecordBatch,
    ErrorCode,
    RecordBatch,
    UnsupportedBatch,
    crc32c,
    decode_batches,
    decode_headers,
    encode_batch,
    encode_headers,
    is_batch_v2,
)

HEADERS = ((b"trace", b"abc"), (b"dup", b"1"), (b"dup", b"2"), (b"null", None), (b"", b""),
           (b"bin", bytes(range(256)) * 2))


def kafka_python_batch(codec: int, records: list[tuple[int, bytes | None, bytes | None, list]],
                       producer: tuple[int, int, int] = (-1, -1, -1)) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=producer[0], producer_epoch=producer[1],
                                        base_sequence=producer[2], batch_size=1 << 24)
    for offset, (ts, key, value, headers) in enumerate(records):
        builder.append(offset, timestamp=ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


class KafkaPythonBatchTests:
    @pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4])
    def test_a_clients_batch_decodes_to_its_records(self, codec: int) -> None:
        """Keys, null values, timestamps out of order and headers (order, duplicates, null
        values, binary values) come out as the client put them in, with the producer id,
        epoch and base sequence the idempotence layer needs."""
        headers = [(k.decode("latin-1"), v) for k, v in HEADERS]
        data = kafka_python_batch(codec, [(1_700_000_000_000, b"k1", b"v1", headers),
                                          (1_699_999_999_000, None, None, []),
                                          (1_700_000_000_500, b"k3", b"x" * 5000, headers[:2])],
                                  producer=(42, 3, 17))
        assert is_batch_v2(data)
        (batch,) = decode_batches(data)
        assert batch.compression == codec
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 17)
        assert batch.record_count == 3 and batch.last_offset_delta == 2
        assert [batch.timestamp(r) for r in batch.records] == \
            [1_700_000_000_000, 1_699_999_999_000, 1_700_000_000_500]
        assert [(r.offset_delta, r.key, r.value) for r in batch.records] == \
            [(0, b"k1", b"v1"), (1, None, None), (2, b"k3", b"x" * 5000)]
        assert batch.records[0].headers == HEADERS
        assert batch.records[1].headers == ()
        assert batch.max_timestamp == 1_700_000_000_500

    @pytest.mark.parametrize("codec", list(Codec))
    def test_a_batch_skerry_writes_passes_a_clients_reader(self, codec: int) -> None:
        """``encode_batch`` (every codec, zstd included) writes what kafka-python's reader
        accepts, CRC-32C checked, with the same records and headers."""
        batch = RecordBatch(500, 1_700_000_000_000, (
            BatchRecord(0, 0, b"k", b"v", HEADERS), BatchRecord(1, -7, None, b"w"),
            BatchRecord(3, 9, b"", None)))
        data = encode_batch(batch, codec)
        assert decode_batches(data) == (RecordBatch(
            500, 1_700_000_000_000, batch.records, 1_700_000_000_009, int(codec), 3),)
        if codec == Codec.ZSTD:
            return  # kafka-python needs the zstandard package for zstd; our reader read it
        reader = DefaultRecordBatch(data)
        assert reader.validate_crc()
        got = list(reader)
        assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [
            (500, 1_700_000_000_000, b"k", b"v"), (501, 1_699_999_999_993, None, b"w"),
            (503, 1_700_000_000_009, b"", None)]
        assert [(k.encode("latin-1"), v) for k, v in got[0].headers] == list(HEADERS)


class DecodeTests:
    def batch(self, **fields: int) -> bytes:
        return encode_batch(RecordBatch(0, 1000, (BatchRecord(0, 0, b"k", b"v", HEADERS),
                                                  BatchRecord(1, 1, None, b"w")), **fields))

    def test_several_batches_in_one_partition(self) -> None:
        data = self.batch() + encode_batch(RecordBatch(2, 5, (BatchRecord(0, 0, None, b"z"),)))
        assert [len(b.records) for b in decode_batches(data)] == [2, 1]

    def test_every_truncation_is_corrupt(self) -> None:
        """A partial batch (a producer sends whole ones) is CORRUPT_MESSAGE, never a crash."""
        data = self.batch()
        for n in range(1, len(data)):
            with pytest.raises(CorruptRecordBatch):
                decode_batches(data[:n])

    def test_every_flipped_byte_is_refused(self) -> None:
        """The CRC-32C covers attributes to the end; a flip before it breaks the framing,
        the magic or the base offset (which then decodes, as Kafka's broker would)."""
        data = self.batch()
        for at in range(len(data)):
            broken = bytearray(data)
            broken[at] ^= 0x40
            try:
                decode_batches(bytes(broken))
            except (CorruptRecordBatch, UnsupportedBatch):
                continue
            assert at < 8 or 12 <= at < 16  # base offset, partition leader epoch

    def test_corrupt_is_error_2_for_the_partition(self) -> None:
        assert CorruptRecordBatch.error_code == ErrorCode.CORRUPT_MESSAGE
        assert issubclass(CorruptRecordBatch, CorruptMessageSet)

    def test_transactional_and_control_batches_are_refused(self) -> None:
        """Until Skerry has transactions: a transactional batch is INVALID_TXN_STATE (48),
        a control batch INVALID_RECORD (87), as a client writing one gets from Kafka."""
        with pytest.raises(UnsupportedBatch) as e:
            decode_batches(self.batch(attributes=0x10, producer_id=1, producer_epoch=0))
        assert e.value.error_code == ErrorCode.INVALID_TXN_STATE == 48
        with pytest.raises(UnsupportedBatch) as e:
            decode_batches(self.batch(attributes=0x20))
        assert e.value.error_code == ErrorCode.INVALID_RECORD == 87

    @pytest.mark.parametrize("codec", [Codec.GZIP, Codec.ZSTD, Codec.LZ4, Codec.SNAPPY])
    def test_a_compression_bomb_is_refused_within_the_bound(self, codec: int) -> None:
        """Records that would expand past the bound (64 MiB by default) are refused as
        corrupt; the bound holds for the whole request's batches together."""
        big = RecordBatch(0, 0, tuple(BatchRecord(i, 0, None, bytes(100_000)) for i in range(20)))
        data = encode_batch(big, codec)
        assert len(data) < 200_000
        with pytest.raises(CorruptRecordBatch, match="expands beyond|failed"):
            decode_batches(data, max_decompressed=1_000_000)
        assert len(decode_batches(data, max_decompressed=3_000_000)[0].records) == 20
        with pytest.raises(CorruptRecordBatch):
            decode_batches(data + data, max_decompressed=3_000_000)

    def test_zstd_from_another_library_decodes(self) -> None:
        """A zstd frame cramjam did not write itself is what librdkafka sends; the bytes of
        the records compress alike in any zstd."""
        plain = encode_batch(RecordBatch(0, 0, (BatchRecord(0, 0, b"k", b"v" * 300, HEADERS),)))
        body = plain[61:]
        frame = bytes(cramjam.zstd.compress(body, level=19))
        head = bytearray(plain[:61])
        struct.pack_into(">ih", head, 8, 49 + len(frame), 4)
        head[21:23] = (4).to_bytes(2, "big")
        struct.pack_into(">I", head, 17, crc32c(bytes(head[21:]) + frame))
        (batch,) = decode_batches(bytes(head) + frame)
        assert batch.records[0].value == b"v" * 300 and batch.records[0].headers == HEADERS

    def test_a_wrong_last_offset_delta_is_corrupt(self) -> None:
        with pytest.raises(CorruptRecordBatch, match="lastOffsetDelta"):
            decode_batches(self.batch(last_offset_delta=5))

    def test_header_lists_round_trip_byte_exact(self) -> None:
        blob = encode_headers(HEADERS)
        assert decode_headers(blob) == HEADERS
        assert encode_headers(decode_headers(blob)) == blob
        with pytest.raises(CorruptRecordBatch):
            decode_headers(blob + b"\x00")


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.integers(0, 300), st.binary(max_size=8))
def test_any_bytes_decode_or_are_refused(data: bytes, at: int, patch: bytes) -> None:
    """Random bytes, and a valid batch with random bytes written into it, either decode or
    raise one of the two refusals: nothing else leaves the codec."""
    valid = encode_batch(RecordBatch(0, 0, (BatchRecord(0, 0, b"k", b"v", HEADERS[:3]),)))
    for candidate in (data, valid[:at] + patch + valid[at + len(patch):]):
        try:
            decode_batches(candidate)
        except (CorruptRecordBatch, UnsupportedBatch):
            pass
