"""Iggy streams, topics, partitions, segments, send/poll, consumer offsets and consumer
groups, driven with raw frames over an in-memory connection and checked byte for byte
against layouts written out by hand from the seed and spec/iggy-binary-notes.md."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import xxhash

from broker.core import fnv1a_32
from tests.iggy.harness import WALL_START_US, Harness, err, ident, name8, ok, u32, u64

MASK64 = (1 << 64) - 1
T0 = WALL_START_US


def message(payload: bytes, headers: bytes = b"", id: int = 0, origin: int = 0) -> bytes:
    """A message as a client sends it: checksum, offset, timestamp 0; payload; headers."""
    return struct.pack("<QQQQQQIIQ", 0, id & MASK64, id >> 64, 0, 0, origin, len(headers),
                       len(payload), 0) + payload + headers


def record(offset: int, ts: int, id: int, origin: int, payload: bytes,
           headers: bytes = b"") -> bytes:
    """A stored message: the server's offset, timestamp and xxh3 checksum."""
    rest = struct.pack("<16sQQQIIQ", id.to_bytes(16, "little"), offset, ts, origin,
                       len(headers), len(payload), 0) + payload + headers
    return u64(xxhash.xxh3_64_intdigest(rest)) + rest


def send_payload(stream: int | str, topic: int | str, kind: int, value: bytes,
                 msgs: list[bytes]) -> bytes:
    meta = ident(stream) + ident(topic) + bytes((kind, len(value))) + value + u32(len(msgs))
    index = b""
    end = 0
    for m in msgs:
        end += len(m)
        index += struct.pack("<IIQ", 0, end, 0)
    return u32(len(meta)) + meta + index + b"".join(msgs)


def poll_payload(stream: int | str, topic: int | str, partition: int | None, kind: int,
                 value: int, count: int, auto_commit: bool, consumer: bytes = b"\x01" + ident(7)
                 ) -> bytes:
    part = b"\x00" + u32(0) if partition is None else b"\x01" + u32(partition)
    return (consumer + ident(stream) + ident(topic) + part + bytes((kind,)) + u64(value)
            + u32(count) + bytes((int(auto_commit),)))


def header_kv(key: bytes, value: bytes, kind: int = 2) -> bytes:
    return bytes((2,)) + u32(len(key)) + key + bytes((kind,)) + u32(len(value)) + value


def stream_bytes(id: int, created: int, topics: int, size: int, messages: int, name: str) -> bytes:
    return struct.pack("<IQIQQ", id, created, topics, size, messages) + name8(name)


def topic_bytes(id: int, created: int, partitions: int, expiry: int, compression: int,
                max_size: int, rf: int, size: int, messages: int, name: str) -> bytes:
    return struct.pack("<IQIQBQBQQ", id, created, partitions, expiry, compression, max_size,
                       rf, size, messages) + name8(name)


def partition_bytes(id: int, created: int, segments: int, current: int, size: int,
                    messages: int) -> bytes:
    return struct.pack("<IQIQQQ", id, created, segments, current, size, messages)


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def make_topic(h: Harness, conn, stream: str = "s", topic: str = "t", partitions: int = 3) -> None:
    assert conn.request(202, name8(stream))[:4] == u32(0)
    body = ident(stream) + u32(partitions) + b"\x01" + u64(0) + u64(0) + b"\x00" + name8(topic)
    assert conn.request(302, body)[:4] == u32(0)


class StreamTests:
    def test_default_stream_exists_and_streams_are_created_listed_renamed_deleted(self, h):
        """GetStreams lists stream 0 "default"; CreateStream answers the new stream's
        details with the next id; GetStream by id and by name; unknown streams answer an
        empty payload; renames and deletes take effect; duplicates are refused."""
        conn = h.connect(login=True)
        assert conn.request(201) == ok(stream_bytes(0, T0, 0, 0, 0, "default"))
        h.wall_us += 5
        assert conn.request(202, name8("orders")) == ok(stream_bytes(1, T0 + 5, 0, 0, 0, "orders"))
        assert conn.request(200, ident("orders")) == ok(stream_bytes(1, T0 + 5, 0, 0, 0, "orders"))
        assert conn.request(200, ident(1)) == ok(stream_bytes(1, T0 + 5, 0, 0, 0, "orders"))
        assert conn.request(200, ident(9)) == ok()
        assert conn.request(200, ident("nope")) == ok()
        assert conn.request(202, name8("orders")) == err(1012)
        assert conn.request(204, ident(1) + name8("sales")) == ok()
        assert conn.request(201) == ok(stream_bytes(0, T0, 0, 0, 0, "default")
                                       + stream_bytes(1, T0 + 5, 0, 0, 0, "sales"))
        assert conn.request(203, ident("sales")) == ok()
        assert conn.request(200, ident(1)) == ok()
        assert conn.request(203, ident(1)) == err(1009)
        assert conn.request(203, ident("missing")) == err(1010)
        assert conn.request(203, ident(0)) == err(1007)
        assert conn.request(204, ident(0) + name8("other")) == err(1013)
        assert conn.request(202, name8("orders")) == ok(stream_bytes(2, T0 + 5, 0, 0, 0, "orders"))

    def test_stream_ids_are_never_reused_and_catalog_survives_a_restart(self, tmp_path):
        """Stream and topic ids keep counting after deletes, and the catalog (ids, names,
        settings) is the same after the broker restarts."""
        h = Harness(tmp_path)
        conn = h.connect(login=True)
        make_topic(h, conn, "a", "t1", 1)
        assert conn.request(203, ident("a")) == ok()
        make_topic(h, conn, "b", "t2", 2)
        before = conn.request(201)
        assert before == ok(stream_bytes(0, T0, 0, 0, 0, "default")
                            + stream_bytes(2, T0, 1, 0, 0, "b"))
        h.close()
        h2 = Harness(tmp_path)
        conn2 = h2.connect(login=True)
        assert conn2.request(201) == before
        assert conn2.request(300, ident("b") + ident("t2"))[8:12] == u32(0)
        h2.close()


class TopicTests:
    def test_create_topic_answers_details_with_settings_and_partitions(self, h):
        """CreateTopic replies the topic (settings echoed) followed by one 40-byte record
        per partition; GetTopic by name and id returns the same; GetTopics lists headers."""
        conn = h.connect(login=True)
        conn.request(202, name8("s"))
        body = ident("s") + u32(2) + b"\x02" + u64(5_000_000) + u64(1 << 20) + b"\x01" + name8("t")
        expected = (topic_bytes(0, T0, 2, 5_000_000, 2, 1 << 20, 1, 0, 0, "t")
                    + partition_bytes(0, T0, 1, 0, 0, 0) + partition_bytes(1, T0, 1, 0, 0, 0))
        assert conn.request(302, body) == ok(expected)
        assert conn.request(300, ident("s") + ident("t")) == ok(expected)
        assert conn.request(300, ident(1) + ident(0)) == ok(expected)
        assert conn.request(301, ident("s")) == ok(topic_bytes(0, T0, 2, 5_000_000, 2, 1 << 20, 1,
                                                               0, 0, "t"))
        assert conn.request(300, ident("s") + ident("zz")) == ok()
        assert conn.request(302, body) == err(2013)
        assert conn.request(301, ident("nope")) == err(1010)
        # Iggy's retention settings become the store topic's retention (whole segments).
        store = h.core.store.topics[h.service.catalog.stream("s").topic("t").store]
        assert store.config.retention_ms == 5000
        assert store.config.retention_bytes == (1 << 20) // 2

    def test_topics_of_other_streams_live_under_reserved_store_names(self, h):
        """A topic of a stream other than default is stored as __iggy.<n>; the default
        stream never lists such store topics, and same-named topics of two streams are
        two store topics."""
        conn = h.connect(login=True)
        make_topic(h, conn, "s1", "orders", 1)
        make_topic(h, conn, "s2", "orders", 1)
        stores = sorted(h.core.store.topics)
        assert stores == ["__iggy.0", "__iggy.1"]
        assert conn.request(301, ident("default")) == ok()

    def test_default_stream_topics_are_v1_topics(self, h):
        """Topics of stream default are the V1 topics: one created over V1 appears with
        the next id; one created over Iggy is a V1 topic of the same name; names V1 cannot
        use are refused; a topic deleted over V1 disappears."""
        conn = h.connect(login=True)
        h.core.create_topic("orders", 2, 1, None, None, None)
        body = topic_bytes(0, T0, 2, 0, 1, 0, 1, 0, 0, "orders")
        assert conn.request(301, ident(0)) == ok(body)
        create = ident("default") + u32(1) + b"\x01" + u64(0) + u64(0) + b"\x00"
        assert conn.request(302, create + name8("pay.ments")) == ok(
            topic_bytes(1, T0, 1, 0, 1, 0, 0, 0, 0, "pay.ments") + partition_bytes(0, T0, 1, 0, 0, 0))
        assert "pay.ments" in h.core.store.topics
        assert conn.request(302, create + name8("has space")) == err(2014)
        assert conn.request(302, create + name8("__iggy.9")) == err(2014)
        h.core.delete_topic("orders")
        assert conn.request(300, ident(0) + ident("orders")) == ok()
        assert conn.request(300, ident(0) + ident(0)) == ok()

    def test_update_delete_and_purge_topic(self, h):
        """UpdateTopic changes name and settings; PurgeTopic removes every message (offsets
        start again at 0); DeleteTopic removes the topic and its store topic."""
        conn = h.connect(login=True)
        make_topic(h, conn, "s", "t", 1)
        conn.request(101, send_payload("s", "t", 2, u32(0), [message(b"a"), message(b"b")]))
        update = ident("s") + ident("t") + b"\x04" + u64(2_000_000) + u64(0) + b"\x03" + name8("t2")
        assert conn.request(304, update) == ok()
        info = conn.request(300, ident("s") + ident("t2"))
        assert info[8:8 + 51] == topic_bytes(0, T0, 1, 2_000_000, 4, 0, 3, 2 * 65, 2, "t2")[:51]
        store_name = h.service.catalog.stream("s").topic("t2").store
        assert h.core.store.topics[store_name].config.retention_ms == 2000
        assert conn.request(305, ident("s") + ident("t2")) == ok()
        poll = poll_payload("s", "t2", 0, 3, 0, 10, False)
        assert conn.request(100, poll) == ok(struct.pack("<IQI", 0, 0, 0))
        conn.request(101, send_payload("s", "t2", 2, u32(0), [message(b"c", id=5)]))
        assert conn.request(100, poll) == ok(struct.pack("<IQI", 0, 0, 1)
                                             + record(0, T0, 5, 0, b"c"))
        assert conn.request(303, ident("s") + ident("t2")) == ok()
        assert store_name not in h.core.store.topics
        assert conn.request(300, ident("s") + ident(0)) == ok()
        assert conn.request(303, ident("s") + ident("t2")) == err(2011)


class PartitionAndSegmentTests:
    def test_create_partitions_adds_and_delete_partitions_is_refused(self, h):
        """CreatePartitions adds partitions after the existing ones; DeletePartitions is
        answered FeatureUnavailable (the store never removes partitions)."""
        conn = h.connect(login=True)
        make_topic(h, conn, "s", "t", 2)
        assert conn.request(402, ident("s") + ident("t") + u32(3)) == ok()
        info = conn.request(300, ident("s") + ident("t"))
        assert struct.unpack_from("<I", info, 8 + 12)[0] == 5
        assert len(info) == 8 + 51 + 1 + 5 * 40
        assert conn.request(403, ident("s") + ident("t") + u32(1)) == err(5)
        assert conn.request(402, ident("s") + ident("t") + u32(0)) == err(2019)

    def test_delete_segments_removes_the_oldest_sealed_segments(self, tmp_path):
        """DeleteSegments removes the oldest sealed segments of a partition: their
        messages are gone (First polls from the new start), the active one stays."""
        h = Harness(tmp_path, {"storage": {"fsync": "never", "segment_bytes": 4096}})
        conn = h.connect(login=True)
        make_topic(h, conn, "s", "t", 1)
        for i in range(10):
            conn.request(101, send_payload("s", "t", 2, u32(0),
                                           [message(bytes([i]) * 1000, id=i + 1)]))
        plog = h.core.store.partition(h.service.catalog.stream("s").topic("t").store, 0)
        segments = plog.segment_count
        assert segments > 2
        assert conn.request(503, ident("s") + ident("t") + u32(0) + u32(1)) == ok()
        assert plog.segment_count == segments - 1
        first = plog.first_offset
        assert first > 0
        reply = conn.request(100, poll_payload("s", "t", 0, 3, 0, 1, False))
        assert struct.unpack_from("<IQI", reply, 8) == (0, 9, 1)
        assert struct.unpack_from("<Q", reply, 8 + 16 + 24)[0] == first
        assert conn.request(503, ident("s") + ident("t") + u32(0) + u32(100)) == ok()
        assert plog.segment_count == 1
        assert conn.request(503, ident("s") + ident("t") + u32(5) + u32(1)) == err(3007)
        assert conn.request(503, ident("s") + ident("t") + u32(0) + u32(0)) == err(4030)
        h.close()


class SendPollTests:
    def test_send_then_poll_returns_the_stored_bytes(self, h):
        """Messages sent to a partition come back from a poll as the exact stored records:
        server offset and timestamp, the client's id and origin timestamp, the payload,
        then the user headers unchanged, and an xxh3 checksum over the rest."""
        conn = h.connect(login=True)
        make_topic(h, conn, "s", "t", 3)
        headers = header_kv(b"key", b"user-7") + header_kv(b"n", b"\x01\x02", kind=1)
        msgs = [message(b"hello", id=11, origin=111), message(b"world", headers, id=12, origin=222)]
        assert conn.request(101, send_payload("s", "t", 2, u32(1), msgs)) == ok()
        expected = record(0, T0, 11, 111, b"hello") + record(1, T0, 12, 222, b"world", headers)
        reply = conn.request(100, poll_payload("s", "t", 1, 1, 0, 10, False))
        assert reply == ok(struct.pack("<IQI", 1, 1, 2) + expected)
        reply = conn.request(100, poll_payload("s", "t", 1, 1, 1, 10, False))
        assert reply == ok(struct.pack("<IQI", 1, 1, 1) + record(1, T0, 12, 222, b"world", headers))
        assert conn.request(100, poll_payload("s", "t", 0, 1, 0, 10, False)) == ok(
            struct.pack("<IQI", 0, 0, 0))

    def test_ids_of_zero_become_uuid4(self, h):
        """A message sent with id 0 is stored with a random UUIDv4 id (version 4, variant
        10), different for each message."""
        conn = h.connect(login=True)
        make_topic(h, conn, "s", "t", 1)
        conn.request(101, send_payload("s", "t", 2, u32(0), [message(b"a"), message(b"b")]))
        reply = conn.request(100, poll_payload("s", "t", 0, 1, 0, 10, False))
        ids = []
        pos = 8 + 16
        for _ in range(2):
            lo, hi = struct.unpack_from("<QQ", reply, pos + 8)
            ids.append(lo | hi << 64)
            pos += 64 + 1
        for value in ids:
            assert (value >> 76) & 0xF == 4 and (value >> 62) & 0x3 == 2
        assert ids[0] != ids[1]

    def test_balanced_partitioning_goes_round_robin(self, h):
        """Balanced sends go to partitions 0, 1, 2, 0, ... in turn."""
        conn = h.connect(login=True)
        make_topic(h, conn, "s", "t", 3)
        for i in range(4):
            assert conn.request(101, send_payload("s", "t", 1, b"", [message(bytes([65 + i]),
                                                                            id=i + 1)])) == ok()
        counts = []
        for p in range(3):
            reply = conn.request(100, poll_payload("s", "t", p, 3, 0, 10, False))
            counts.append(struct.unpack_from("<I", reply, 8 + 12)[0])
        assert counts == [2, 1, 1]

    def test_messages_key_partitioning_uses_the_v1_key_hash(self, h):
        """MessagesKey partitioning sends every message of one key to one partition: the
        FNV-1a hash of the key modulo the partition count, which is where a V1 PRODUCE with
        that key lands too."""
        conn = h.connect(login=True)
        make_topic(h, conn, "s", "t", 5)
        for key in (b"alpha", b"beta", b"gamma"):
            conn.request(101, send_payload("s", "t", 3, key, [message(key, id=1), message(key, id=2)]))
            want = fnv1a_32(key) % 5
            reply = conn.request(100, poll_payload("s", "t", want, 3, 0, 10, False))
            payloads = [reply[8 + 16 + 64 + i * (64 + len(key)):][:len(key)] for i in range(2)]
            assert key in payloads

    def test_send_refusals(self, h):
        """Sends to a missing stream, topic or partition, or with malformed messages, are
        refused with Iggy's statuses and store nothing."""
        conn = h.connect(login=True)
        make_topic(h, conn, "s", "t", 2)
        one = [message(b"x")]
        assert conn.request(101, send_payload("zz", "t", 2, u32(0), one)) == err(1010)
        assert conn.request(101, send_payload("s", "zz", 2, u32(0), one)) == err(2011)
        assert conn.request(101, send_payload("s", 9, 2, u32(0), one)) == err(2010)
        assert conn.request(101, send_payload("s", "t", 2, u32(2), one)) == err(3007)
        assert conn.request(101, send_payload("s", "t", 2, u32(0), [message(b"")])) == err(4024)
        bad_headers = message(b"x", b"\x02\x00\x00")
        assert conn.request(101, send_payload("s", "t", 2, u32(0), [bad_headers])) == err(4016)
        reserved = bytearray(message(b"x"))
        reserved[56] = 1
        assert conn.request(101, send_payload("s", "t", 2, u32(0), [bytes(reserved)])) == err(4101)
        store = h.service.catalog.stream("s").topic("t").store
        assert [p.next_offset for p in h.core.store.topics[store].partitions] == [0, 0]

    def test_poll_strategies_and_auto_commit(self, h):
        """Offset, First, Last, Next and Timestamp polls; auto_commit stores the last
        polled offset so that Next continues after it; the stored offset is per consumer."""
        conn = h.connect(login=True)
        make_topic(h, conn, "s", "t", 1)
        for i in range(5):
            h.wall_us = T0 + i * 10
            conn.request(101, send_payload("s", "t", 2, u32(0), [message(b"m%d" % i, id=i + 1)]))
        h.wall_us = T0 + 100

        def offsets(kind: int, value: int, count: int, auto: bool, consumer: int = 7) -> list[int]:
            reply = conn.request(100, poll_payload("s", "t", 0, kind, value, count, auto,
                                                   b"\x01" + ident(consumer)))
            assert reply[:4] == u32(0)
            n = struct.unpack_from("<I", reply, 8 + 12)[0]
            assert struct.unpack_from("<Q", reply, 8 + 4)[0] == 4
            return [struct.unpack_from("<Q", reply, 8 + 16 + 24 + i * 66)[0] for i in range(n)]

        assert offsets(1, 2, 2, False) == [2, 3]
        assert offsets(3, 0, 2, False) == [0, 1]
        assert offsets(4, 0, 2, False) == [3, 4]
        assert offsets(2, T0 + 25, 10, False) == [3, 4]
        assert offsets(2, T0 + 99, 10, False) == []
        assert offsets(5, 0, 2, True) == [0, 1]
        assert offsets(5, 0, 2, True) == [2, 3]
        assert offsets(5, 0, 2, False, consumer=8) == [0, 1]
        assert offsets(5, 0, 5, True) == [4]
        assert offsets(5, 0, 5, True) == []
        assert conn.request(100, poll_payload("s", "t", 0, 1, 0, 0, False)) == err(4009)
        assert conn.request(100, poll_payload("s", "t", 3, 1, 0, 1, False)) == err(3007)

    def test_consumer_offsets_get_store_delete(self, h):
        """GetConsumerOffset answers partition, current offset and stored offset (empty
        when nothing is stored); StoreConsumerOffset refuses offsets past the current one;
        DeleteConsumerOffset forgets it (and refuses when there is nothing)."""
        conn = h.connect(login=True)
        make_topic(h, conn, "s", "t", 2)
        conn.request(101, send_payload("s", "t", 2, u32(1), [message(b"a"), message(b"b"),
                                                              message(b"c")]))
        target = b"\x01" + ident(3) + ident("s") + ident("t") + b"\x01" + u32(1)
        assert conn.request(120, target) == ok()
        assert conn.request(121, target + u64(1)) == ok()
        assert conn.request(120, target) == ok(u32(1) + u64(2) + u64(1))
        assert conn.request(121, target + u64(3)) == err(4100)
        named = b"\x01" + ident("worker") + ident("s") + ident("t") + b"\x01" + u32(1)
        assert conn.request(120, named) == ok()
        assert conn.request(122, target) == ok()
        assert conn.request(120, target) == ok()
        assert conn.request(122, target) == err(3021)
        no_partition = b"\x01" + ident(3) + ident("s") + ident("t") + b"\x00" + u32(0)
        assert conn.request(121, no_partition + u64(0)) == err(4100)
        conn.request(101, send_payload("s", "t", 2, u32(0), [message(b"z")]))
        assert conn.request(121, no_partition + u64(0)) == ok()
        assert conn.request(120, no_partition) == ok(u32(0) + u64(0) + u64(0))

    def test_flush_unsaved_buffer(self, h):
        """FlushUnsavedBuffer answers empty, with and without fsync; a missing partition
        is refused."""
        conn = h.connect(login=True)
        make_topic(h, conn, "s", "t", 1)
        conn.request(101, send_payload("s", "t", 2, u32(0), [message(b"a")]))
        assert conn.request(102, ident("s") + ident("t") + u32(0) + b"\x01") == ok()
        assert conn.request(102, ident("s") + ident("t") + u32(0) + b"\x00") == ok()
        assert conn.request(102, ident("s") + ident("t") + u32(4) + b"\x01") == err(3007)
        store = h.service.catalog.stream("s").topic("t").store
        assert h.core.store.partition(store, 0).durable_offset == 1


def group_bytes(id: int, partitions: int, members: int, name: str) -> bytes:
    return struct.pack("<III", id, partitions, members) + name8(name)


def member_bytes(id: int, partitions: list[int]) -> bytes:
    return struct.pack("<II", id, len(partitions)) + b"".join(u32(p) for p in partitions)


class ConsumerGroupTests:
    def test_create_get_list_join_leave_delete(self, h):
        """CreateConsumerGroup answers the group's details; joining members appear with
        their assigned partitions (round robin over members); leaving and disconnecting
        rebalance; DeleteConsumerGroup removes it."""
        a = h.connect(login=True)
        b = h.connect(login=True)
        make_topic(h, a, "s", "t", 3)
        st = ident("s") + ident("t")
        assert a.request(602, st + name8("g")) == ok(group_bytes(0, 3, 0, "g"))
        assert a.request(602, st + name8("g")) == err(5004)
        assert a.request(602, st + name8("h")) == ok(group_bytes(1, 3, 0, "h"))
        assert a.request(601, st) == ok(group_bytes(0, 3, 0, "g") + group_bytes(1, 3, 0, "h"))
        assert a.request(604, st + ident("g")) == ok()
        assert a.request(600, st + ident(0)) == ok(group_bytes(0, 3, 1, "g")
                                                   + member_bytes(1, [0, 1, 2]))
        assert b.request(604, st + ident(0)) == ok()
        assert a.request(600, st + ident("g")) == ok(group_bytes(0, 3, 2, "g")
                                                     + member_bytes(1, [0, 2])
                                                     + member_bytes(2, [1]))
        me = a.request(20)
        assert me == ok(struct.pack("<IIB", 1, 0, 1) + u32(15) + b"127.0.0.1:40001" + u32(1)
                        + struct.pack("<III", 1, 0, 0))
        assert a.request(605, st + ident("g")) == ok()
        assert a.request(605, st + ident("g")) == err(5006)
        assert a.request(600, st + ident("g")) == ok(group_bytes(0, 3, 1, "g")
                                                     + member_bytes(2, [0, 1, 2]))
        b.close()
        assert a.request(600, st + ident("g")) == ok(group_bytes(0, 3, 0, "g"))
        assert a.request(603, st + ident("g")) == ok()
        assert a.request(600, st + ident("g")) == ok()
        assert a.request(604, st + ident("g")) == err(5003)
        assert a.request(604, st + ident(7)) == err(5000)

    def test_group_polls_read_the_members_partitions_and_offsets_resume(self, h):
        """A group poll without a partition reads the member's assigned partitions in
        turn, with Next and auto-commit storing the group's offset per partition; a new
        member resumes where the group stopped."""
        a = h.connect(login=True)
        make_topic(h, a, "s", "t", 2)
        for p in range(2):
            a.request(101, send_payload("s", "t", 2, u32(p), [message(b"p%d-%d" % (p, i), id=1)
                                                               for i in range(3)]))
        st = ident("s") + ident("t")
        a.request(602, st + name8("g"))
        a.request(604, st + ident("g"))
        group = b"\x02" + ident("g")
        seen = []
        for _ in range(4):
            reply = a.request(100, poll_payload("s", "t", None, 5, 0, 2, True, group))
            part, _current, count = struct.unpack_from("<IQI", reply, 8)
            seen.append((part, count))
        assert seen == [(0, 2), (1, 2), (0, 1), (1, 1)]
        assert a.request(120, group + st + b"\x01" + u32(0)) == ok(u32(0) + u64(2) + u64(2))
        a.request(101, send_payload("s", "t", 2, u32(0), [message(b"new", id=9)]))
        a.close()
        b = h.connect(login=True)
        b.request(604, st + ident("g"))
        reply = b.request(100, poll_payload("s", "t", None, 5, 0, 10, False, group))
        assert reply == ok(struct.pack("<IQI", 0, 3, 1) + record(3, T0, 9, 0, b"new"))

    def test_group_poll_without_membership_is_refused(self, h):
        """A group poll with no partition from a client that did not join answers
        ConsumerGroupMemberNotFound; with an explicit partition it reads that partition."""
        a = h.connect(login=True)
        make_topic(h, a, "s", "t", 2)
        st = ident("s") + ident("t")
        a.request(602, st + name8("g"))
        group = b"\x02" + ident("g")
        assert a.request(100, poll_payload("s", "t", None, 5, 0, 1, False, group)) == err(5006)
        assert a.request(100, poll_payload("s", "t", 1, 5, 0, 1, False, group)) == ok(
            struct.pack("<IQI", 1, 0, 0))
        assert a.request(100, poll_payload("s", "t", 1, 5, 0, 1, False, b"\x02" + ident("x"))) \
            == err(5003)

    def test_membership_outlives_the_session_timeout_while_connected(self, tmp_path):
        """An Iggy member is kept alive by the broker while its connection is open (no
        V1-style heartbeats from the client), however long the group session timeout."""
        h = Harness(tmp_path, {"groups": {"session_timeout_ms": 3000}})
        a = h.connect(login=True)
        make_topic(h, a, "s", "t", 1)
        st = ident("s") + ident("t")
        a.request(602, st + name8("g"))
        a.request(604, st + ident("g"))
        for _ in range(10):
            h.advance(1.0)
        assert a.request(600, st + ident("g")) == ok(group_bytes(0, 1, 1, "g") + member_bytes(1, [0]))
        h.close()

    def test_delete_waits_for_v1_members_to_leave(self, h):
        """DeleteConsumerGroup is refused (status 1) while the group has a live V1 member,
        and changes nothing; once it left, the group and its offsets are deleted."""
        a = h.connect(login=True)
        make_topic(h, a, "s", "t", 1)
        st = ident("s") + ident("t")
        a.request(602, st + name8("g"))
        a.request(604, st + ident("g"))
        store = h.service.catalog.stream("s").topic("t").store
        h.core.groups.join("g", store, "v1-consumer")
        h.pump()
        assert a.request(603, st + ident("g")) == err(1)
        assert a.request(600, st + ident("g"))[8:20] == struct.pack("<III", 0, 1, 2)
        h.core.groups.leave("g", store, "v1-consumer",
                            h.core.groups.coordinator.group("g", store).generation)
        h.pump()
        assert a.request(603, st + ident("g")) == ok()
        assert a.request(600, st + ident("g")) == ok()
        assert ("g", store) not in h.core.groups.list_groups()

    def test_v1_groups_show_up_as_consumer_groups_of_the_default_stream(self, h):
        """A V1 group on a V1 topic is listed as a consumer group of that topic in stream
        default, with its committed offset as the stored offset (minus one: V1 commits the
        next offset to read, Iggy stores the last one consumed)."""
        conn = h.connect(login=True)
        h.core.create_topic("orders", 1, 1, None, None, None)
        plog = h.core.store.partition("orders", 0)
        plog.append([b"a", b"b", b"c"])
        h.core.groups.admin_commit("analytics", "orders", 0, 2)
        h.pump()
        st = ident("default") + ident("orders")
        assert conn.request(601, st) == ok(group_bytes(0, 1, 0, "analytics"))
        got = conn.request(120, b"\x02" + ident("analytics") + st + b"\x01" + u32(0))
        assert got == ok(u32(0) + u64(2) + u64(1))
