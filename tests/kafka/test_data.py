"""The Kafka data APIs over an in-memory broker: Metadata, Produce, Fetch, ListOffsets.

Requests and expected bytes come from kafka-wire-notes §5 (captured from the real clients)
or are packed by hand; none is produced by the codec under test."""

from __future__ import annotations

import struct
import zlib

import pytest

from tests.kafka.harness import Harness, i16, i32, i64, string

# §5.1: kafka-python (0,8,2)'s Produce v0 body after the header, and its 107-byte set.
SET_V0 = bytes.fromhex(
    "0000000000000000 00000019 26d052a0 00 00 00000004 6b657930 00000007 76616c75652d30"
    "0000000000000001 00000015 98dda4ae 00 00 ffffffff 00000007 76616c75652d31"
    "0000000000000002 00000019 24e5ad13 00 00 00000004 6b657932 00000007 76616c75652d32"
    .replace(" ", ""))
# §5.2: kafka-python (0,10,1)'s Produce v2 set, magic 1.
SET_V1 = bytes.fromhex(
    "0000000000000000 00000021 3870bc0d 01 00 000001a20cd403fa 00000004 6b657930 00000007 76616c75652d30"
    "0000000000000001 0000001d ccf99c7a 01 00 000001a20cd403fa ffffffff 00000007 76616c75652d31"
    "0000000000000002 00000021 3a4543be 01 00 000001a20cd403fa 00000004 6b657932 00000007 76616c75652d32"
    .replace(" ", ""))


def produce_body(topic: str, partition: int, message_set: bytes, acks: int = -1) -> bytes:
    return (i16(acks) + i32(30000) + i32(1) + string(topic) + i32(1) + i32(partition)
            + i32(len(message_set)) + message_set)


def fetch_body(topic: str, partition: int, offset: int, max_bytes: int = 1 << 20,
               version: int = 0, wait_ms: int = 0, min_bytes: int = 1,
               total: int = 0x03200000) -> bytes:
    head = i32(-1) + i32(wait_ms) + i32(min_bytes) + (i32(total) if version >= 3 else b"")
    return head + i32(1) + string(topic) + i32(1) + i32(partition) + i64(offset) + i32(max_bytes)


def message(offset: int, key: bytes | None, value: bytes | None, magic: int = 0,
            timestamp: int = -1, attributes: int = 0) -> bytes:
    """One message packed by hand (§4)."""
    def b(x: bytes | None) -> bytes:
        return i32(-1) if x is None else i32(len(x)) + x

    body = bytes((magic, attributes)) + (i64(timestamp) if magic else b"") + b(key) + b(value)
    return i64(offset) + i32(4 + len(body)) + struct.pack(">I", zlib.crc32(body)) + body


def produce_reply(body: bytes, version: int = 0) -> list[tuple[int, int]]:
    """(error, base_offset) of the one partition of a produce response."""
    (count,) = struct.unpack_from(">i", body, 0)
    assert count == 1
    (n,) = struct.unpack_from(">h", body, 4)
    pos = 6 + n
    (parts,) = struct.unpack_from(">i", body, pos)
    out = []
    pos += 4
    for _ in range(parts):
        _index, error, base = struct.unpack_from(">ihq", body, pos)
        out.append((error, base))
        pos += 14 + (8 if version >= 2 else 0)
    return out


def fetch_reply(body: bytes, version: int = 0) -> tuple[int, int, bytes]:
    """(error, high watermark, records) of the one partition of a fetch response."""
    pos = 4 if version >= 1 else 0
    pos += 4  # topic count
    (n,) = struct.unpack_from(">h", body, pos)
    pos += 2 + n + 4  # name, partition count
    _index, error, hw, size = struct.unpack_from(">ihqi", body, pos)
    pos += 18
    records = body[pos:pos + size]
    assert pos + size == len(body)
    return error, hw, records


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    yield harness
    harness.close()


class MetadataTests:
    def test_v0_creates_a_named_topic_and_names_this_broker(self, h):
        conn = h.connect()
        body = conn.call(3, 0, i32(1) + string("t1"))
        def partition(p):
            return i16(0) + i32(p) + i32(0) + i32(1) + i32(0) + i32(1) + i32(0)
        assert body == (i32(1) + i32(0) + string("127.0.0.1") + i32(9092)
                        + i32(1) + i16(0) + string("t1") + i32(3)
                        + partition(0) + partition(1) + partition(2))
        assert h.core.topic_config("t1").partitions == 3

    def test_v2_layout_and_all_topics_hide_iggy_store_topics(self, h):
        h.core.create_topic("b", 1, 1, None, None, None)
        h.core.create_topic("__iggy.1", 1, 1, None, None, None)
        conn = h.connect()
        body = conn.call(3, 2, i32(-1))  # null: all topics
        partition = i16(0) + i32(0) + i32(0) + i32(1) + i32(0) + i32(1) + i32(0)
        assert body == (i32(1) + i32(0) + string("127.0.0.1") + i32(9092) + string(None)
                        + string("skerry") + i32(0)
                        + i32(1) + i16(0) + string("b") + b"\x00" + i32(1) + partition)
        assert conn.call(3, 1, i32(0)).endswith(i32(0))  # v1 empty array: no topics

    def test_unknown_topic_without_auto_create_and_an_invalid_name(self, tmp_path):
        h = Harness(tmp_path, {"auto_create_topics": False})
        conn = h.connect()
        body = conn.call(3, 0, i32(2) + string("nope") + string("bad name"))
        assert body.endswith(i32(2) + i16(3) + string("nope") + i32(0)
                             + i16(17) + string("bad name") + i32(0))
        assert h.core.topic_config("nope") is None
        h.close()


class ProduceFetchTests:
    def test_the_golden_v0_produce_is_fetched_back_byte_for_byte(self, h):
        """§5.1 produced, §5.4 fetched: the same set, offsets 0..2, HW 3 (= hw 2 + 1)."""
        conn = h.connect()
        assert produce_reply(conn.call(0, 0, produce_body("t1", 0, SET_V0))) == [(0, 0)]
        assert fetch_reply(conn.call(1, 0, fetch_body("t1", 0, 0))) == (0, 3, SET_V0)
        assert fetch_reply(conn.call(1, 1, fetch_body("t1", 0, 1)), 1) == (0, 3, SET_V0[37:])

    def test_the_golden_v2_produce_is_fetched_back_as_magic_1(self, h):
        conn = h.connect()
        assert produce_reply(conn.call(0, 2, produce_body("t1", 0, SET_V1)), 2) == [(0, 0)]
        assert fetch_reply(conn.call(1, 3, fetch_body("t1", 0, 0, version=3)), 3) == \
            (0, 3, SET_V1)
        # Fetch v0/v1 serve magic 0: the same keys and values, no timestamp.
        assert fetch_reply(conn.call(1, 0, fetch_body("t1", 0, 0))) == (0, 3, SET_V0)

    def test_keys_and_values_map_as_documented(self, h):
        """Null and empty keys come back null, a non-UTF-8 key whole, a null value
        empty; a key over 255 bytes refuses the partition with 10 and appends nothing."""
        conn = h.connect()
        produced = (message(0, None, b"a") + message(1, b"", b"b") + message(2, b"\xff\x00k", b"c")
                    + message(3, b"k", None))
        assert produce_reply(conn.call(0, 0, produce_body("t1", 0, produced))) == [(0, 0)]
        expected = (message(0, None, b"a") + message(1, None, b"b")
                    + message(2, b"\xff\x00k", b"c") + message(3, b"k", b""))
        assert fetch_reply(conn.call(1, 0, fetch_body("t1", 0, 0))) == (0, 4, expected)
        too_long = message(0, b"k" * 256, b"v")
        assert produce_reply(conn.call(0, 0, produce_body("t1", 0, too_long))) == [(10, -1)]
        assert h.core.hw("t1", 0) == 3

    def test_a_corrupt_set_refuses_its_partition_only(self, h):
        conn = h.connect()
        bad = bytearray(SET_V0)
        bad[-1] ^= 1
        assert produce_reply(conn.call(0, 0, produce_body("t1", 0, bytes(bad)))) == [(2, -1)]
        assert produce_reply(conn.call(0, 0, produce_body("t1", 0, SET_V0))) == [(0, 0)]

    def test_unknown_partition_acks_and_acks_0(self, h):
        conn = h.connect()
        assert produce_reply(conn.call(0, 0, produce_body("t1", 7, SET_V0))) == [(3, -1)]
        assert produce_reply(conn.call(0, 0, produce_body("t1", 0, SET_V0, acks=2))) == [(21, -1)]
        conn.send_raw(_req(0, 0, 1, produce_body("t1", 0, SET_V0, acks=0)))
        conn.send_raw(_req(18, 0, 2))
        assert [cid for cid, _ in conn.responses()] == [2]  # acks 0: no response
        assert h.core.hw("t1", 0) == 2

    def test_compressed_wrappers_become_one_record_per_message(self, h):
        import cramjam

        inner = message(0, b"k0", b"v0") + message(1, None, b"v1")
        wrapper = message(0, None, bytes(cramjam.gzip.compress(inner)), attributes=1)
        conn = h.connect()
        assert produce_reply(conn.call(0, 0, produce_body("t1", 0, wrapper))) == [(0, 0)]
        assert fetch_reply(conn.call(1, 0, fetch_body("t1", 0, 0))) == (0, 2, inner)

    def test_offsets_out_of_range_and_the_empty_partition(self, h):
        conn = h.connect()
        conn.call(3, 0, i32(1) + string("t1"))
        assert fetch_reply(conn.call(1, 0, fetch_body("t1", 0, 0))) == (0, 0, b"")
        assert fetch_reply(conn.call(1, 0, fetch_body("t1", 0, 1))) == (1, 0, b"")
        assert fetch_reply(conn.call(1, 0, fetch_body("t1", 0, -1))) == (1, 0, b"")
        assert fetch_reply(conn.call(1, 0, fetch_body("nope", 0, 0))) == (3, -1, b"")

    def test_below_the_first_retained_offset_is_error_1(self, tmp_path):
        """After retention deleted the oldest segment, a fetch from 0 is error 1 (so the
        client's auto.offset.reset applies) and earliest moves."""
        h = Harness(tmp_path, {"storage": {"fsync": "never", "segment_bytes": 4096}})
        h.core.create_topic("t1", 1, 1, None, None, None)
        conn = h.connect()
        for _ in range(40):
            conn.call(0, 0, produce_body("t1", 0, SET_V0))
        assert h.core.delete_oldest_segments("t1", 0, 1) == 1
        first = h.core.earliest_offset("t1", 0)
        assert 0 < first < 120
        assert fetch_reply(conn.call(1, 0, fetch_body("t1", 0, 0)))[:2] == (1, 120)
        assert fetch_reply(conn.call(1, 0, fetch_body("t1", 0, first)))[:2] == (0, 120)
        earliest = i32(-1) + i32(1) + string("t1") + i32(1) + i32(0) + i64(-2) + i32(1)
        assert conn.call(2, 0, earliest).endswith(i32(1) + i64(first))
        h.close()

    def test_size_limits_first_message_whole_and_whole_messages_only(self, h):
        conn = h.connect()
        conn.call(0, 0, produce_body("t1", 0, SET_V0))
        # 30 bytes: less than the first message (37): it comes whole, nothing after it.
        assert fetch_reply(conn.call(1, 0, fetch_body("t1", 0, 0, 30)))[2] == SET_V0[:37]
        # v3 serves magic 1, with the append time as CreateTime (magic 0 carries none).
        assert fetch_reply(conn.call(1, 3, fetch_body("t1", 0, 0, 30, version=3)), 3)[2] \
            == message(0, b"key0", b"value-0", magic=1, timestamp=h.wall_us // 1000)
        # 80 bytes: two whole messages (37 + 33), not a partial third.
        assert fetch_reply(conn.call(1, 0, fetch_body("t1", 0, 0, 80)))[2] == SET_V0[:70]

    def test_long_poll_waits_and_a_produce_wakes_it(self, h):
        conn = h.connect()
        conn.call(3, 0, i32(1) + string("t1"))
        conn.send_raw(_req(1, 0, 1, fetch_body("t1", 0, 0, wait_ms=5000)))
        assert conn.responses() == []
        other = h.connect()
        other.call(0, 0, produce_body("t1", 0, SET_V0))
        assert [(cid, fetch_reply(b)) for cid, b in conn.responses()] == [(1, (0, 3, SET_V0))]

    def test_long_poll_times_out_empty(self, h):
        conn = h.connect()
        conn.call(3, 0, i32(1) + string("t1"))
        conn.send_raw(_req(1, 0, 1, fetch_body("t1", 0, 0, wait_ms=500)))
        h.advance(0.4)
        assert conn.responses() == []
        h.advance(0.2)
        assert [(cid, fetch_reply(b)) for cid, b in conn.responses()] == [(1, (0, 0, b""))]

    def test_a_produce_pipelined_behind_a_long_poll_wakes_it(self, h):
        conn = h.connect()
        conn.call(3, 0, i32(1) + string("t1"))
        conn.send_raw(_req(1, 0, 1, fetch_body("t1", 0, 0, wait_ms=5000))
                      + _req(0, 0, 2, produce_body("t1", 0, SET_V0)))
        got = conn.responses()
        assert [cid for cid, _ in got] == [1, 2]
        assert fetch_reply(got[0][1]) == (0, 3, SET_V0)


class ListOffsetsTests:
    def test_latest_is_hw_plus_one_and_earliest_the_first(self, h):
        conn = h.connect()
        conn.call(3, 0, i32(1) + string("t1"))
        def v0(ts):
            return i32(-1) + i32(1) + string("t1") + i32(1) + i32(0) + i64(ts) + i32(1)
        def v1(ts):
            return i32(-1) + i32(1) + string("t1") + i32(1) + i32(0) + i64(ts)
        def tail(offs):
            return i32(1) + string("t1") + i32(1) + i32(0) + i16(0) + offs
        assert conn.call(2, 0, v0(-1)) == tail(i32(1) + i64(0))  # empty: HW 0
        conn.call(0, 0, produce_body("t1", 0, SET_V0))
        assert conn.call(2, 0, v0(-1)) == tail(i32(1) + i64(3))
        assert conn.call(2, 0, v0(-2)) == tail(i32(1) + i64(0))
        assert conn.call(2, 1, v1(-1)) == tail(i64(-1) + i64(3))
        assert conn.call(2, 1, v1(-2)) == tail(i64(-1) + i64(0))

    def test_by_time(self, h):
        conn = h.connect()
        conn.call(0, 0, produce_body("t1", 0, SET_V0))
        h.advance(10)
        conn.call(0, 0, produce_body("t1", 0, SET_V0))
        def v1(ts):
            return i32(-1) + i32(1) + string("t1") + i32(1) + i32(0) + i64(ts)
        def tail(ts, off):
            return i32(1) + string("t1") + i32(1) + i32(0) + i16(0) + i64(ts) + i64(off)
        second_ms = h.wall_us // 1000
        assert conn.call(2, 1, v1(second_ms - 5000)) == tail(second_ms, 3)
        assert conn.call(2, 1, v1(second_ms + 1)) == tail(-1, -1)

    def test_unknown_topic(self, h):
        conn = h.connect()
        body = conn.call(2, 1, i32(-1) + i32(1) + string("nope") + i32(1) + i32(0) + i64(-1))
        assert body == i32(1) + string("nope") + i32(1) + i32(0) + i16(3) + i64(-1) + i64(-1)


def _req(api_key: int, version: int, cid: int, body: bytes = b"") -> bytes:
    from tests.kafka.harness import request

    return request(api_key, version, cid, body)


class ProduceTimeoutTests:
    @pytest.mark.parametrize("timeout_ms, waited", [
        (30000, 30000),      # librdkafka's and kafka-python's default request timeout
        (0, None),           # none given: the broker's replication.ack_timeout_ms
        (-5, None),
        (10_000_000, 300_000),  # bounded
    ])
    def test_acks_all_waits_as_long_as_the_request_says(self, h, monkeypatch, timeout_ms,
                                                        waited):
        """A Produce's timeout_ms is how long its acks=-1 answer may wait for the ISR, as
        with Kafka's brokers (a dead follower then leaves the ISR before the client's
        request times out, instead of the message being retried and stored twice)."""
        seen = []
        real = h.core.produce

        def spy(request, answer):
            seen.append(request.ack_timeout_ms)
            return real(request, answer)

        monkeypatch.setattr(h.core, "produce", spy)
        conn = h.connect()
        conn.call(3, 0, i32(1) + string("t1"))
        body = (i16(-1) + i32(timeout_ms) + i32(1) + string("t1") + i32(1) + i32(0)
                + i32(len(SET_V0)) + SET_V0)
        assert produce_reply(conn.call(0, 0, body))[0][0] == 0
        assert seen == [waited]


# ---------------------------------------------------------------- record batches v2

def produce_v3_body(topic: str, partition: int, records: bytes, acks: int = -1,
                    transactional_id: str | None = None) -> bytes:
    return string(transactional_id) + produce_body(topic, partition, records, acks)


def fetch_v4_body(topic: str, partition: int, offset: int, version: int,
                  max_bytes: int = 1 << 20, leader_epoch: int = -1) -> bytes:
    """Fetch v4-v8 by hand (v5 adds the log start offset, v7 the session fields)."""
    head = i32(-1) + i32(0) + i32(1) + i32(0x03200000) + b"\x00"
    if version >= 7:
        head += i32(0) + i32(-1)
    part = i32(partition) + (i32(leader_epoch) if version >= 9 else b"") + i64(offset) \
        + (i64(-1) if version >= 5 else b"") + i32(max_bytes)
    tail = i32(0) if version >= 7 else b""
    return head + i32(1) + string(topic) + i32(1) + part + tail


def fetch_v4_reply(body: bytes, version: int) -> tuple[int, int, int, int, bytes]:
    """(error, high watermark, last stable offset, log start offset, records)."""
    pos = 4 + (6 if version >= 7 else 0) + 4
    (n,) = struct.unpack_from(">h", body, pos)
    pos += 2 + n + 4
    _index, error, hw, lso = struct.unpack_from(">ihqq", body, pos)
    pos += 22
    log_start = -1
    if version >= 5:
        (log_start,) = struct.unpack_from(">q", body, pos)
        pos += 8
    (aborted,) = struct.unpack_from(">i", body, pos)
    assert aborted in (-1, 0)
    (size,) = struct.unpack_from(">i", body, pos + 4)
    records = body[pos + 8:pos + 8 + size]
    assert pos + 8 + size == len(body)
    return error, hw, lso, log_start, records


def produced_batch(attributes: int = 0, codec: int = 0) -> bytes:
    from broker.kafka.codec import BatchRecord, RecordBatch, encode_batch

    return encode_batch(RecordBatch(0, 1_700_000_000_000, (
        BatchRecord(0, 0, b"k1", b"v1", ((b"h", b"1"), (b"h", b"2"), (b"n", None))),
        BatchRecord(1, 5, None, b"v2", ((b"trace", b"abc"),)),
        BatchRecord(2, -5, b"k3", None)), attributes=attributes), codec)


class RecordBatchTests:
    @pytest.mark.parametrize("versions", [(3, 4), (7, 5), (7, 6)])
    def test_a_produced_batch_is_fetched_back_with_its_headers(self, h, versions):
        """Produce v3+ of a batch (zstd) -> Fetch v4+: one uncompressed batch with every
        record's key, value, CreateTime and headers; HW = last stable offset = 3."""
        from broker.kafka.codec import decode_batches

        produce_version, fetch_version = versions
        conn = h.connect()
        reply = conn.call(0, produce_version, produce_v3_body("b", 0, produced_batch(codec=4)))
        assert produce_reply(reply, 2)[0] == (0, 0)
        error, hw, lso, log_start, records = fetch_v4_reply(
            conn.call(1, fetch_version, fetch_v4_body("b", 0, 0, fetch_version)), fetch_version)
        assert (error, hw, lso) == (0, 3, 3)
        assert log_start == (0 if fetch_version >= 5 else -1)
        (batch,) = decode_batches(records)
        assert batch.compression == 0 and batch.producer_id == -1
        assert [(batch.base_offset + r.offset_delta, r.key, r.value, r.headers,
                 batch.timestamp(r)) for r in batch.records] == [
            (0, b"k1", b"v1", ((b"h", b"1"), (b"h", b"2"), (b"n", None)), 1_700_000_000_000),
            (1, None, b"v2", ((b"trace", b"abc"),), 1_700_000_000_005),
            (2, b"k3", b"", (), 1_699_999_999_995)]
        # an old client reads the same records as magic 1, without headers
        _e, _hw, old = fetch_reply(conn.call(1, 3, fetch_body("b", 0, 0, version=3)), 3)
        from broker.kafka.codec import decode_message_set

        assert [m.key for m in decode_message_set(old)] == [b"k1", None, b"k3"]

    def test_a_magic_1_set_is_fetched_as_batches(self, h):
        from broker.kafka.codec import decode_batches

        conn = h.connect()
        assert produce_reply(conn.call(0, 2, produce_body("t1", 0, SET_V1)), 2) == [(0, 0)]
        *_, records = fetch_v4_reply(conn.call(1, 4, fetch_v4_body("t1", 0, 1, 4)), 4)
        (batch,) = decode_batches(records)
        assert [(batch.base_offset + r.offset_delta, r.key, r.value) for r in batch.records] \
            == [(1, None, b"value-1"), (2, b"key2", b"value-2")]

    @pytest.mark.parametrize("attributes, transactional_id, code", [
        (0x10, None, 48), (0x20, None, 87), (0, "txn", 48)])
    def test_transactions_are_refused_for_their_partition(self, h, attributes,
                                                          transactional_id, code):
        """Until Skerry has transactions: a transactional batch or producer 48, a control
        batch 87; nothing is appended."""
        conn = h.connect()
        body = produce_v3_body("tx", 0, produced_batch(attributes), transactional_id=transactional_id)
        assert produce_reply(conn.call(0, 3, body), 2) == [(code, -1)]
        assert h.core.topic_config("tx") is None or h.core.hw("tx", 0) == -1

    def test_a_corrupt_batch_is_error_2(self, h):
        conn = h.connect()
        broken = bytearray(produced_batch())
        broken[-1] ^= 1
        assert produce_reply(conn.call(0, 3, produce_v3_body("c", 0, bytes(broken))), 2) == \
            [(2, -1)]
        good = produce_reply(conn.call(0, 3, produce_v3_body("c", 0, produced_batch())), 2)
        assert good == [(0, 0)]


class LeaderEpochTests:
    def test_kip_320_checks(self):
        """With an epoch Metadata knows (a cluster's placement), an older epoch from the
        client is FENCED_LEADER_EPOCH (74), a newer one UNKNOWN_LEADER_EPOCH (75), the same
        or -1 passes; without one (a single broker) nothing is checked."""
        from types import SimpleNamespace

        from broker.kafka.errors import KafkaError
        from broker.kafka.handlers.data import check_leader_epoch

        where = SimpleNamespace(leader=0, replicas=(0,), isr=(0,), leader_epoch=5)
        ctx = SimpleNamespace(placement=SimpleNamespace(partition=lambda t, p: where))
        assert check_leader_epoch(ctx, "t", 0, 5) == 5
        assert check_leader_epoch(ctx, "t", 0, -1) == 5
        for sent, code in ((4, 74), (6, 75)):
            with pytest.raises(KafkaError) as e:
                check_leader_epoch(ctx, "t", 0, sent)
            assert int(e.value.code) == code
        assert check_leader_epoch(SimpleNamespace(placement=None), "t", 0, 3) == -1


class FlexibleVersionsTests:
    """Produce v9, Fetch v12 and ListOffsets v7 (KIP-482 flexible versions) end to end over
    the table codec, as served once InitProducerId is (``data.VERSIONS``)."""

    def call(self, conn, key: int, version: int, request_obj) -> object:
        from broker.kafka.codec.apis import SCHEMAS
        from broker.kafka.codec.primitives import Reader, Writer
        from broker.kafka.codec.schema import read_struct, write_struct

        schema = SCHEMAS[key]
        w = Writer()
        write_struct(schema.request, w, request_obj, version, True)
        head = i16(key) + i16(version) + i32(5) + string("t") + b"\x00"  # header v2
        conn.send_raw(i32(len(head) + len(w.getvalue())) + head + w.getvalue())
        ((cid, body),) = conn.responses()
        assert cid == 5 and body[0] == 0  # response header v1: no tagged fields
        r = Reader(body[1:])
        response = read_struct(schema.response, r, version, True)
        r.end("body")
        return response

    def test_produce_v9_fetch_v12_list_offsets_v7(self, h):
        from broker.kafka import codec as c
        from broker.kafka.handlers import data

        h.service.handlers.versions = {**h.service.handlers.versions, **data.VERSIONS}
        conn = h.connect()
        header = c.RequestHeader(0, 9, 5, "t")
        produce = c.ProduceRequest(header, -1, 30000, (c.ProduceTopic("f", (
            c.ProducePartition(0, produced_batch(codec=1)),)),))
        (topic,) = self.call(conn, 0, 9, produce).topics
        ((part),) = topic.partitions
        assert (part.error_code, part.base_offset, part.log_start_offset) == (0, 0, 0)
        fetch = c.FetchRequest(c.RequestHeader(1, 12, 5, "t"), -1, 0, 1, 1 << 20, (
            c.FetchTopic("f", (c.FetchPartition(0, 1, 1 << 20),)),))
        (topic,) = self.call(conn, 1, 12, fetch).topics
        ((part),) = topic.partitions
        assert (part.error_code, part.high_watermark, part.last_stable_offset,
                part.log_start_offset) == (0, 3, 3, 0)
        (batch,) = c.decode_batches(part.records)
        assert [(batch.base_offset + r.offset_delta, r.value) for r in batch.records] == \
            [(1, b"v2"), (2, b"")]
        offsets = c.ListOffsetsRequest(c.RequestHeader(2, 7, 5, "t"), -1, (
            c.ListOffsetsTopic("f", (c.ListOffsetsPartition(0, -3),
                                     c.ListOffsetsPartition(0, 1_700_000_000_000))),))
        (topic,) = self.call(conn, 2, 7, offsets).topics
        assert [(p.error_code, p.offset, p.timestamp) for p in topic.partitions] == [
            (0, 2, 1_699_999_999_995), (0, 0, 1_700_000_000_000)]
