"""MessageSets (kafka-wire-notes §4, §5.6): the golden sets decode into records and
re-encode byte for byte; compressed wrappers of every codec and framing the clients send
(built in full with cramjam where the notes give only their first bytes) decode into the
same three records; corrupt sets are refused with error 2, never another exception."""

from __future__ import annotations

import struct
import zlib

import cramjam
import pytest

from broker.kafka import codec as c
from tests.kafka.test_requests import MSGSET_51, MSGSET_52, h

TS = 0x000001A20CD403FA
RECORDS_51 = (c.Record(0, -1, b"key0", b"value-0"), c.Record(1, -1, None, b"value-1"),
              c.Record(2, -1, b"key2", b"value-2"))
RECORDS_52 = tuple(c.Record(r.offset, TS, r.key, r.value) for r in RECORDS_51)


def wrapper(magic: int, codec: int, value: bytes, timestamp: int = 0, offset: int = 0) -> bytes:
    """One wrapper message (offset, size, crc, magic, attributes, [timestamp], null key,
    value) as a whole MessageSet."""
    body = bytes([magic, codec]) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    body += b"\xff\xff\xff\xff" + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def lz4_frame(data: bytes, flg: int, hc: int) -> bytes:
    """An LZ4 frame of one independent block, as librdkafka and kafka-python write them,
    with the header checksum byte ``hc`` given (the captured one, broken or not); flg 0x68
    adds the content size."""
    block = bytes(cramjam.lz4.compress_block(data, store_size=False))
    descriptor = bytes([flg, 0x40]) + (struct.pack("<Q", len(data)) if flg & 0x08 else b"")
    return (b"\x04\x22\x4d\x18" + descriptor + bytes([hc]) + struct.pack("<I", len(block))
            + block + b"\x00\x00\x00\x00")


def xerial(data: bytes) -> bytes:
    raw = bytes(cramjam.snappy.compress_raw(data))
    return (b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(raw)) + raw)


SET_51_MAGIC1_LIBRDKAFKA = c.encode_message_set(
    [c.Record(r.offset, 0x000001A20CD5AF68, r.key, r.value) for r in RECORDS_51], 1)

# (name, the full wrapper set, the §5.6 first bytes it must start with, expected timestamp)
WRAPPERS = [
    ("gzip, kafka-python magic 0",
     wrapper(0, 1, bytes(cramjam.gzip.compress(MSGSET_51))),
     h("0000000000000000"), -1),
    ("gzip, kafka-python magic 1",
     wrapper(1, 1, bytes(cramjam.gzip.compress(MSGSET_52))),
     h("0000000000000000"), TS),
    ("snappy raw, librdkafka magic 0",
     wrapper(0, 2, bytes(cramjam.snappy.compress_raw(MSGSET_51))),
     h("0000000000000000 00000061 5933c026 00 02 ffffffff 00000053 6b00001901101926d052a0"), -1),
    ("snappy xerial, kafka-python magic 0",
     wrapper(0, 2, xerial(MSGSET_51)),
     h("0000000000000000 00000075 8434f32a 00 02 ffffffff 00000067 82534e4150505900"
       "00000001 00000001 00000053 6b00001901"), -1),
    ("lz4 with the broken header checksum, librdkafka magic 0",
     wrapper(0, 3, lz4_frame(MSGSET_51, 0x60, hc=0x1A)),
     h("0000000000000000 00000075 a489c453 00 03 ffffffff 00000067 04224d18 60 40 1a"), -1),
    ("lz4, librdkafka magic 1",
     wrapper(1, 3, lz4_frame(SET_51_MAGIC1_LIBRDKAFKA, 0x60, hc=0x82), timestamp=0x000001A20CD5AF68),
     h("0000000000000000 00000089 7467f285 01 03 000001a20cd5af68 ffffffff 00000073"
       "04224d18 60 40 82"), 0x000001A20CD5AF68),
]


class GoldenSetTests:
    def test_decode_magic0(self) -> None:
        """The 107-byte magic-0 set of §5.1: three records, null key kept null, no timestamp."""
        assert c.decode_message_set(MSGSET_51) == RECORDS_51

    def test_decode_magic1(self) -> None:
        """The magic-1 set of §5.2: the same records with their CreateTime."""
        assert c.decode_message_set(MSGSET_52) == RECORDS_52

    def test_encode(self) -> None:
        """Encoding the records gives the captured bytes, magic 0 and magic 1 (the same
        records: magic 0 drops the timestamp)."""
        assert c.encode_message_set(RECORDS_51, 0) == MSGSET_51
        assert c.encode_message_set(RECORDS_52, 0) == MSGSET_51
        assert c.encode_message_set(RECORDS_52, 1) == MSGSET_52

    def test_crc_is_zlib_crc32(self) -> None:
        """The notes' check: CRC-32 of everything after the crc field of message 0."""
        assert zlib.crc32(h("0000 00000004 6b657930 00000007 76616c75652d30")) == 0x26D052A0

    def test_null_and_empty_differ(self) -> None:
        """Kafka's null key/value (-1) and empty ones (0) survive a round trip apart."""
        records = (c.Record(5, 7, None, None), c.Record(6, 8, b"", b""))
        for magic in (0, 1):
            decoded = c.decode_message_set(c.encode_message_set(records, magic))
            assert [(r.key, r.value) for r in decoded] == [(None, None), (b"", b"")]

    def test_empty_set(self) -> None:
        """An empty set is no records (and encodes to nothing)."""
        assert c.decode_message_set(b"") == ()
        assert c.encode_message_set((), 1) == b""


class CompressedWrapperTests:
    @pytest.mark.parametrize("name, data, prefix, timestamp", WRAPPERS,
                             ids=[w[0] for w in WRAPPERS])
    def test_wrapper(self, name: str, data: bytes, prefix: bytes, timestamp: int) -> None:
        """Each wrapper starts with the captured bytes (snappy and lz4 match to the
        wrapper's CRC: cramjam compresses them exactly as the clients did) and decodes into
        the three inner messages with inner offsets 0, 1, 2."""
        assert data.startswith(prefix)
        records = c.decode_message_set(data)
        assert [r.offset for r in records] == [0, 1, 2]
        assert [(r.key, r.value) for r in records] == [(r.key, r.value) for r in RECORDS_51]
        assert {r.timestamp for r in records} == {timestamp}
        assert {r.attributes for r in records} == {0}

    def test_lz4_kafka_python_magic1(self) -> None:
        """kafka-python's magic-1 LZ4 frame has the content size and a correct checksum
        (§5.6: ``04224d18 68 40 8300000000000000 8a``); its inner timestamps are not in
        the notes, so this one is compared up to the CRC and after it."""
        inner = c.encode_message_set(RECORDS_52, 1)
        data = wrapper(1, 3, lz4_frame(inner, 0x68, hc=0x8A))
        assert data[:12] == h("0000000000000000 00000091")
        assert data[16:].startswith(h("01 03 0000000000000000 ffffffff 0000007b 04224d18 68 40"
                                       "8300000000000000 8a"))
        assert c.decode_message_set(data) == RECORDS_52

    def test_lz4_magic0_correct_checksum_too(self) -> None:
        """A magic-0 LZ4 frame with a correct header checksum is accepted as well (the
        checksum is recomputed, not required to be broken)."""
        assert c.decode_message_set(wrapper(0, 3, lz4_frame(MSGSET_51, 0x60, hc=0x82))) == RECORDS_51

    def test_lz4_magic1_broken_checksum_refused(self) -> None:
        """Magic 1 frames must be correct: the broken checksum is a corrupt message."""
        data = wrapper(1, 3, lz4_frame(c.encode_message_set(RECORDS_52, 1), 0x60, hc=0x1A))
        with pytest.raises(c.CorruptMessageSet, match="lz4"):
            c.decode_message_set(data)

    def test_log_append_time_wrapper(self) -> None:
        """A magic-1 wrapper with the LogAppendTime bit gives its timestamp to every inner
        message (Kafka's rule)."""
        data = wrapper(1, 1 | c.ATTR_LOG_APPEND_TIME, bytes(cramjam.gzip.compress(MSGSET_52)),
                       timestamp=42)
        assert {r.timestamp for r in c.decode_message_set(data)} == {42}

    def test_multi_block_xerial(self) -> None:
        """Xerial framing with several blocks concatenates them."""
        half = len(MSGSET_51) // 2
        raw = [bytes(cramjam.snappy.compress_raw(p)) for p in (MSGSET_51[:half], MSGSET_51[half:])]
        value = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"".join(
            struct.pack(">i", len(r)) + r for r in raw)
        assert c.decode_message_set(wrapper(0, 2, value)) == RECORDS_51

    def test_uncompressed_and_wrapper_mixed(self) -> None:
        """A set may mix plain messages and wrappers; records come out in order."""
        data = MSGSET_51 + wrapper(0, 1, bytes(cramjam.gzip.compress(MSGSET_51)))
        assert c.decode_message_set(data) == RECORDS_51 * 2


def flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1:]


GZ = bytes(cramjam.gzip.compress(MSGSET_51))
CORRUPT = [
    ("crc mismatch (a value byte)", flip(MSGSET_51, 30), "CRC mismatch"),
    ("crc mismatch (the crc)", flip(MSGSET_51, 12), "CRC mismatch"),
    ("partial trailing message", MSGSET_51[:-1], "has size"),
    ("partial header", MSGSET_51 + b"\x00" * 5, "partial message header"),
    ("size too small for a message", h("0000000000000000 00000004 00000000"), "has size"),
    ("magic 2", wrapper(0, 0, b"v").replace(b"\x00\x00\xff", b"\x02\x00\xff", 1), "CRC mismatch"),
    ("zstd (codec 4)", wrapper(1, 4, b"x"), "unknown compression codec 4"),
    ("codec 7", wrapper(0, 7, b"x"), "unknown compression codec 7"),
    ("gzip garbage", wrapper(0, 1, b"\x1f\x8b\x08garbage"), "gzip"),
    ("snappy garbage", wrapper(0, 2, b"\xff\xff\xff\xff\x0fxx"), "snappy"),
    ("xerial block overruns", wrapper(0, 2, xerial(MSGSET_51)[:-3]), "overruns"),
    ("xerial header truncated", wrapper(0, 2, b"\x82SNAPPY\x00\x00\x00"), "truncated"),
    ("lz4 not a frame", wrapper(0, 3, b"\x04\x22\x4d"), "not an LZ4 frame"),
    ("null wrapper value", h("0000000000000000 0000000e") + struct.pack(
        ">I", zlib.crc32(h("00 01 ffffffff ffffffff"))) + h("00 01 ffffffff ffffffff"), "null value"),
    ("nested compression", wrapper(0, 1, bytes(cramjam.gzip.compress(wrapper(0, 1, GZ)))),
     "nested compression"),
    ("inner magic differs", wrapper(1, 1, GZ), "holds a magic-0 message"),
    ("key overruns", h("0000000000000000 0000000e") + struct.pack(
        ">I", zlib.crc32(h("00 00 00000009 ffffffff"))) + h("00 00 00000009 ffffffff"), "key of 9"),
    ("bytes after the value", h("0000000000000000 0000000f") + struct.pack(
        ">I", zlib.crc32(h("00 00 ffffffff ffffffff 00"))) + h("00 00 ffffffff ffffffff 00"),
     "after the value"),
]


class CorruptSetTests:
    @pytest.mark.parametrize("name, data, words", CORRUPT, ids=[x[0] for x in CORRUPT])
    def test_corrupt(self, name: str, data: bytes, words: str) -> None:
        """Each way a produced set can be wrong is a ``CorruptMessageSet`` answered with
        error 2, with a reason that names it."""
        with pytest.raises(c.CorruptMessageSet, match=words) as info:
            c.decode_message_set(data)
        assert info.value.error_code == c.ErrorCode.CORRUPT_MESSAGE == 2

    def test_magic_2_with_a_good_crc(self) -> None:
        """A record-batch (magic 2) message is refused by magic, not misread."""
        body = h("02 00 ffffffff ffffffff")
        data = h("0000000000000000 0000000e") + struct.pack(">I", zlib.crc32(body)) + body
        with pytest.raises(c.CorruptMessageSet, match="unsupported magic 2"):
            c.decode_message_set(data)

    def test_every_truncation(self) -> None:
        """Every prefix of a set (plain or wrapped) that does not end on a message
        boundary is corrupt: a produced set must not end in a partial message."""
        for data in (MSGSET_51, MSGSET_52, WRAPPERS[3][1], WRAPPERS[5][1]):
            boundaries, pos = {0}, 0
            while pos < len(data):
                pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
                boundaries.add(pos)
            for n in range(1, len(data)):
                if n in boundaries:
                    assert len(c.decode_message_set(data[:n])) >= 1
                    continue
                with pytest.raises(c.CorruptMessageSet):
                    c.decode_message_set(data[:n])
