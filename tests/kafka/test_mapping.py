"""The batch-first paths of the Kafka transport agree with their readable references:
``decode_message_columns`` with ``decode_message_set`` (accepting and refusing the same
sets, goldens, compressed wrappers, random and mutated sets), ``framed_columns`` with
``framed_records``, and ``message_set`` with ``message_set_loop`` over records a real store
wrote (regular and irregular batches, keys of every kind, every byte budget)."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core import ProduceRequest
from broker.iggy.codec.messages import encode_messages
from broker.kafka import codec as c
from broker.kafka.mapping import (
    KeyTooLarge,
    framed_columns,
    framed_records,
    message_set,
    message_set_loop,
)
from tests.kafka.harness import Harness
from tests.kafka.test_fuzz import SETS, mutated

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


def message(key: bytes | None, value: bytes | None, magic: int, timestamp: int = -1) -> bytes:
    def b(x: bytes | None) -> bytes:
        return struct.pack(">i", -1) if x is None else struct.pack(">i", len(x)) + x

    body = bytes((magic, 0)) + (struct.pack(">q", timestamp) if magic else b"") + b(key) + b(value)
    return struct.pack(">qiI", 0, 4 + len(body), zlib.crc32(body)) + body


keys = st.one_of(st.none(), st.just(b""), st.binary(min_size=1, max_size=12),
                 st.sampled_from([b"k1", b"k2", b"\xff\xfe", "é".encode()]))
values = st.one_of(st.none(), st.binary(max_size=40))


@st.composite
def message_sets(draw: st.DrawFn) -> bytes:
    magic = draw(st.sampled_from([0, 1]))
    if draw(st.booleans()):  # a regular batch: one shape for every message
        n = draw(st.integers(1, 30))
        k = draw(st.one_of(st.none(), st.binary(min_size=1, max_size=6)))
        klen = None if k is None else len(k)
        vlen = draw(st.integers(0, 30))
        return b"".join(message(None if klen is None else draw(st.binary(min_size=klen, max_size=klen)),
                                draw(st.binary(min_size=vlen, max_size=vlen)), magic,
                                draw(st.integers(-1, 2**41))) for _ in range(n))
    items = draw(st.lists(st.tuples(keys, values, st.integers(-1, 2**41)), min_size=1, max_size=20))
    return b"".join(message(k, v, magic, t) for k, v, t in items)


def columns_as_records(cols: c.MessageColumns) -> list[tuple]:
    buf = cols.buffer
    out = []
    for i in range(len(cols)):
        vl = int(cols.value_len[i])
        vp = int(cols.value_pos[i])
        out.append((int(cols.timestamp[i]), cols.key(i), None if vl < 0 else buf[vp:vp + vl]))
    return out


def records_as_tuples(records: tuple[c.Record, ...]) -> list[tuple]:
    return [(r.timestamp, r.key, r.value) for r in records]


def same_decoding(data: bytes) -> None:
    try:
        expected = records_as_tuples(c.decode_message_set(data))
    except c.CorruptMessageSet:
        with pytest.raises(c.CorruptMessageSet):
            c.decode_message_columns(data)
        return
    assert columns_as_records(c.decode_message_columns(data)) == expected


class ColumnsTests:
    @pytest.mark.parametrize("index", range(len(SETS)))
    def test_goldens_and_wrappers(self, index):
        same_decoding(SETS[index])
        assert len(c.decode_message_columns(SETS[index])) == 3

    @SETTINGS
    @given(message_sets())
    def test_random_sets(self, data):
        same_decoding(data)

    @SETTINGS
    @given(mutated(SETS))
    def test_mutated_sets(self, data):
        same_decoding(data)

    def test_a_log_append_time_wrapper_stamps_its_inner_messages(self):
        import cramjam

        inner = message(b"k", b"v", 1, 5) + message(None, b"w", 1, 6)
        wrapper = message(None, bytes(cramjam.gzip.compress(inner)), 1, 99)
        body = bytearray(wrapper)
        body[17] = 1 | 0x08  # gzip, LogAppendTime
        body[12:16] = struct.pack(">I", zlib.crc32(bytes(body[16:])))
        same_decoding(bytes(body))
        assert c.decode_message_columns(bytes(body)).timestamp.tolist() == [99, 99]


class FramedTests:
    @SETTINGS
    @given(message_sets(), st.integers(0, 2**50))
    def test_framed_columns_match_framed_records(self, data, now):
        records = c.decode_message_set(data)
        try:
            expected = framed_records(records, now)
        except KeyTooLarge:
            with pytest.raises(KeyTooLarge):
                framed_columns(c.decode_message_columns(data), now)
            return
        assert framed_columns(c.decode_message_columns(data), now) == expected

    def test_a_long_key_is_refused_both_ways(self):
        data = message(b"k" * 256, b"v", 0) * 3
        with pytest.raises(KeyTooLarge):
            framed_columns(c.decode_message_columns(data), 1)


@pytest.fixture(scope="module")
def h(tmp_path_factory):
    harness = Harness(tmp_path_factory.mktemp("mapping"))
    yield harness
    harness.close()


_topics = iter(range(10**6))


class MessageSetTests:
    @SETTINGS
    @given(message_sets(), st.sampled_from([0, 1]), st.integers(0, 3000), st.booleans())
    def test_vectorized_matches_the_loop(self, h, data, magic, budget, whole_first):
        """Records a real store wrote from a produced set, served back as magic 0 and 1
        with every budget: the same bytes and count both ways."""
        name = f"m{next(_topics)}"
        h.core.create_topic(name, 1, 1, None, None, None)
        messages, ends = framed_columns(c.decode_message_columns(data), 1_700_000_000_000_000)
        h.core.produce(ProduceRequest(name, 0, "1", framed=messages, ends=ends), lambda r: None)
        h.pump()
        result, _hw, _first = h.core.fetch_raw(name, 0, 0, 1000, 1 << 20)
        got = message_set(result.raw, result.ends, magic, budget, whole_first)
        assert got == message_set_loop(result.raw, result.ends, magic, budget, whole_first)
        h.core.delete_topic(name)

    def test_iggy_style_headers_take_the_loop(self, h):
        """Records whose user headers are not one key header (an Iggy client's) are served
        by the loop, with the key found among them."""
        from data.format import KIND_RAW, encode_user_headers, key_header

        h.core.create_topic("iggyish", 1, 1, None, None, None)
        extra = encode_user_headers([(KIND_RAW, b"trace", KIND_RAW, b"\x00\x01")])
        payloads = [b"a" * 10] * 3
        headers = [extra + key_header(b"kk")] * 3
        h.core.produce(ProduceRequest("iggyish", 0, "1",
                                      framed=encode_messages(payloads, headers)),
                       lambda r: None)
        h.pump()
        result, _hw, _first = h.core.fetch_raw("iggyish", 0, 0, 100, 1 << 20)
        got, count = message_set(result.raw, result.ends, 0, 1 << 20)
        assert (got, count) == message_set_loop(result.raw, result.ends, 0, 1 << 20)
        assert count == 3
        assert records_as_tuples(c.decode_message_set(got)) == [(-1, b"kk", b"a" * 10)] * 3




class DecompressionBoundTests:
    """What compressed wrappers expand to is bounded for a whole produced set, in both
    decoders alike, before it is allocated: a gzip bomb is a corrupt set (error 2), not
    gigabytes of memory."""

    @pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
    def test_the_bound_is_for_the_whole_set(self, codec):
        import cramjam

        inner = message(b"k", b"v" * 400, 1) + message(None, b"w" * 400, 1)
        compress = {"gzip": cramjam.gzip.compress, "snappy": cramjam.snappy.compress_raw,
                    "lz4": cramjam.lz4.compress}[codec]
        wrapper = bytearray(message(None, bytes(compress(inner)), 1, 5))
        wrapper[17] = {"gzip": 1, "snappy": 2, "lz4": 3}[codec]
        wrapper[12:16] = struct.pack(">I", zlib.crc32(bytes(wrapper[16:])))
        two = bytes(wrapper) * 2
        size = len(inner)
        assert len(c.decode_message_columns(two, 2 * size)) == 4
        assert len(c.decode_message_set(two, 2 * size)) == 4
        for decode in (c.decode_message_columns, c.decode_message_set):
            with pytest.raises(c.CorruptMessageSet, match="expands beyond"):
                decode(two, 2 * size - 1)

    def test_a_gzip_bomb_refuses_its_partition(self, tmp_path):
        import cramjam

        from tests.kafka.test_data import produce_body, produce_reply

        bomb = bytes(cramjam.gzip.compress(b"\x00" * (c.MAX_DECOMPRESSED_BYTES + 1024)))
        wrapper = bytearray(message(None, bomb, 0))
        wrapper[17] = 1
        wrapper[12:16] = struct.pack(">I", zlib.crc32(bytes(wrapper[16:])))
        harness = Harness(tmp_path)
        conn = harness.connect()
        body = conn.call(0, 0, produce_body("t1", 0, bytes(wrapper)))
        assert produce_reply(body) == [(2, -1)]
        # Refused before anything changed: the topic it would have auto-created is not made.
        assert harness.core.topic_config("t1") is None
        harness.close()


class KafkaHeadersTests:
    """Kafka headers in user headers (docs/storage.md, "Kafka headers"): the two stored
    forms, and the way back for Fetch v4+."""

    def round_trip(self, headers, key=None):
        from broker.kafka.codec import decode_headers
        from broker.kafka.mapping import kafka_headers_user, key_headers, stored_kafka

        stored = key_headers(key) + kafka_headers_user(headers)
        got_key, wire = stored_kafka(stored)
        return stored, got_key, decode_headers(wire)

    def test_distinct_utf8_headers_are_one_iggy_header_each(self) -> None:
        """What Iggy can say is stored as Iggy says it: string names, raw values."""
        from data.format import KIND_RAW, KIND_STRING, decode_user_headers

        headers = ((b"trace-id", b"abc"), (b"caf\xc3\xa9", b"\x00\x01"))
        stored, key, got = self.round_trip(headers, b"k1")
        assert key == b"k1" and got == headers
        assert decode_user_headers(stored)[1:] == [
            (KIND_STRING, b"trace-id", KIND_RAW, b"abc"),
            (KIND_STRING, b"caf\xc3\xa9", KIND_RAW, b"\x00\x01")]

    @pytest.mark.parametrize("headers", [
        ((b"dup", b"1"), (b"dup", b"2")),                 # a key twice
        ((b"a", None), (b"b", b"")),                      # null and empty values
        ((b"", b"x"),),                                   # an empty key
        ((b"big", b"v" * 1000), (b"a", b"1")),            # a long value (several chunks)
        ((b"\xff\xfe", b"x"),),                           # a key that is not UTF-8
        ((b"key", b"x"),), ((b"pid", b"x"),), ((b"kafka.headers", b"x"),),  # reserved names
    ])
    def test_anything_else_is_kept_byte_exact_in_the_reserved_list(self, headers) -> None:
        """Duplicates, null vs empty, long values, binary keys and reserved names survive
        in order, in ``kafka.headers`` entries of at most 255 bytes."""
        from data.format import KAFKA_HEADERS_NAME, decode_user_headers

        stored, key, got = self.round_trip(headers, b"k")
        assert key == b"k" and got == headers
        entries = decode_user_headers(stored)[1:]
        assert {name for _, name, _, _ in entries} == {KAFKA_HEADERS_NAME}

    def test_iggy_and_v1_user_headers_come_back_as_kafka_headers(self) -> None:
        """Headers written by other transports reach Kafka clients: the reserved list
        first, then the others in order; the first ``key`` header is the key."""
        from broker.kafka.codec import decode_headers
        from broker.kafka.mapping import kafka_headers_user, stored_kafka
        from data.format import KIND_RAW, KIND_STRING, encode_user_headers, key_header

        iggy = encode_user_headers([(KIND_STRING, b"region", KIND_STRING, b"eu"),
                                    (KIND_STRING, b"count", 7, (5).to_bytes(8, "little"))])
        stored = iggy + key_header(b"user1") + kafka_headers_user(((b"d", b"1"), (b"d", b"2")))
        key, wire = stored_kafka(stored)
        assert key == b"user1"
        assert decode_headers(wire) == ((b"d", b"1"), (b"d", b"2"), (b"region", b"eu"),
                                        (b"count", (5).to_bytes(8, "little")))
        broken = encode_user_headers([(KIND_STRING, b"kafka.headers", KIND_RAW, b"\x7f")])
        assert decode_headers(stored_kafka(broken)[1]) == ((b"kafka.headers", b"\x7f"),)

    def test_produced_batches_are_fetched_back_with_their_timestamps(self) -> None:
        """CreateTime is served as sent; under LogAppendTime the append time, per run of
        records appended in the same millisecond, with the timestamp-type bit."""
        from broker.kafka.codec import BatchRecord, RecordBatch, decode_batches
        from broker.kafka.mapping import framed_batches, record_batches

        batch = RecordBatch(0, 1_700_000_000_000, tuple(
            BatchRecord(i, -i, None, b"v%d" % i, ((b"h", b"%d" % i),)) for i in range(4)))
        messages, ends = framed_batches([batch], 0)
        raw = bytearray(messages)
        starts = [0, *ends]
        for i in range(4):  # what the store stamps: offsets and append times (µs)
            struct.pack_into("<QQ", raw, starts[i] + 24, 10 + i, 1_800_000_000_000_000 + i // 2 * 1000)
        created = decode_batches(record_batches(bytes(raw), ends, 1 << 20, True, False, -1)[0])
        assert [(b.timestamp(r), r.value, r.headers) for b in created for r in b.records] == [
            (1_700_000_000_000 - i, b"v%d" % i, ((b"h", b"%d" % i),)) for i in range(4)]
        appended = decode_batches(record_batches(bytes(raw), ends, 1 << 20, True, True, -1)[0])
        assert [len(b.records) for b in appended] == [2, 2]
        assert all(b.log_append_time for b in appended)
        assert [b.timestamp(r) for b in appended for r in b.records] == \
            [1_800_000_000_000, 1_800_000_000_000, 1_800_000_000_001, 1_800_000_000_001]
        assert [b.base_offset + r.offset_delta for b in appended for r in b.records] == \
            [10, 11, 12, 13]
