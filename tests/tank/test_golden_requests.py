"""Every golden request of notes §6: built byte for byte by the client, parsed by the server."""

from __future__ import annotations

import cramjam
import pytest

from broker.tank import client as tc
from broker.tank import codec as sc
from tests.tank import goldens as g

T1 = b"t1"


def parse(frame_bytes: bytes) -> sc.Request:
    frames = sc.FrameSplitter().feed(frame_bytes)
    assert len(frames) == 1 and isinstance(frames[0], sc.Frame)
    return sc.parse_request(frames[0])


def produce_2_msgs() -> list[tc.Msg]:
    return [tc.Msg(f"m{i}".encode(), ts=g.TS + i // 5) for i in range(20)]


def produce_3_msgs() -> list[tc.Msg]:
    return [tc.Msg(b"x" * 300, key=b"kk", ts=g.TS + 1) for _ in range(4)]


class ClientBuildsGoldenRequestsTests:
    def test_produce_two_messages(self) -> None:
        """§6.1: a keyed and an unkeyed message sharing a timestamp."""
        msgs = [tc.Msg(b"hello", key=b"k1", ts=g.TS), tc.Msg(b"world", ts=g.TS)]
        assert tc.build_produce(1, [(T1, 0, msgs)]) == g.PRODUCE_1

    def test_produce_twenty_messages(self) -> None:
        """§6.2: count > 15 goes as a varint; the printed prefix matches exactly."""
        built = tc.build_produce(2, [(T1, 0, produce_2_msgs())])
        assert built.startswith(g.PRODUCE_2_PRINTED_PREFIX)
        assert built == g.PRODUCE_2

    def test_produce_snappy(self) -> None:
        """§6.3: > 1024 bytes of keys + contents makes a raw snappy bundle; the notes' prefix
        and total length match, and the block decompresses to the notes' message set."""
        built = tc.build_produce(3, [(T1, 0, produce_3_msgs())])
        assert built.startswith(g.PRODUCE_3_PREFIX)
        assert len(built) == g.PRODUCE_3_LENGTH
        flags_at = 5 + 2 + 4 + 4 + 1 + 4 + 1 + 3 + 1 + 2 + 1  # bundle flags follow 0x51
        assert built[flags_at] == 0x11
        block = built[flags_at + 1:]
        assert bytes(cramjam.snappy.decompress_raw(block)) == g.PRODUCE_3_PLAIN

    def test_produce_unknown_topic(self) -> None:
        """§6.4: a one-byte content message to "nope"."""
        assert tc.build_produce(4, [(b"nope", 0, [tc.Msg(b"x", ts=g.TS)])]) == g.PRODUCE_4

    @pytest.mark.parametrize("frame, rid, seq, wait, fetch", [
        (g.CONSUME_5, 5, 0, 0, 64),
        (g.CONSUME_7, 7, tc.SEQ_TAIL, 500, 4096),
        (g.CONSUME_8, 8, 1000, 0, 4096),
    ])
    def test_consume(self, frame: bytes, rid: int, seq: int, wait: int, fetch: int) -> None:
        """§6.5: version 2, empty client id, one partition."""
        assert tc.build_consume(rid, [(T1, 0, seq, fetch)], max_wait=wait) == frame

    def test_discover_and_create(self) -> None:
        """§6.7: discover all partitions of t1; create t2 with 3 partitions, empty config."""
        assert tc.build_discover_partitions(9, T1) == g.DISCOVER_9
        assert tc.build_create_topic(10, b"t2", 3) == g.CREATE_10

    def test_ping(self) -> None:
        """§1: the greeting is 03 00000000 on both sides."""
        assert tc.build_ping() == g.PING == sc.PING_FRAME


class ServerParsesGoldenRequestsTests:
    def test_produce_two_messages(self) -> None:
        """§6.1 parses into Produce with the bundle kept as bytes, then decodes."""
        req = parse(g.PRODUCE_1)
        assert req == sc.Produce(2, 1, b"c++", 0, 0, (sc.ProduceTopic(
            T1, (sc.ProducePartition(0, g.PRODUCE_1_BUNDLE),)),))
        assert sc.decode_bundle(req.topics[0].partitions[0].bundle).messages == (
            sc.Message(b"hello", b"k1", g.TS), sc.Message(b"world", b"", g.TS))

    def test_produce_twenty_messages(self) -> None:
        """§6.2: twenty messages, timestamps carried over by UseLastSpecifiedTS."""
        req = parse(g.PRODUCE_2)
        assert req.request_id == 2
        bundle = sc.decode_bundle(req.topics[0].partitions[0].bundle)
        assert bundle.messages == tuple(
            sc.Message(f"m{i}".encode(), b"", g.TS + i // 5) for i in range(20))

    def test_produce_snappy(self) -> None:
        """§6.3 (as built by the client): codec 1, four keyed messages."""
        req = parse(tc.build_produce(3, [(T1, 0, produce_3_msgs())]))
        bundle = sc.decode_bundle(req.topics[0].partitions[0].bundle)
        assert bundle.codec == sc.CODEC_SNAPPY
        assert bundle.messages == (sc.Message(b"x" * 300, b"kk", g.TS + 1),) * 4

    def test_produce_unknown_topic(self) -> None:
        """§6.4: the topic name is only bytes to the codec."""
        req = parse(g.PRODUCE_4)
        assert req.topics[0].name == b"nope"
        assert sc.decode_bundle(req.topics[0].partitions[0].bundle).messages == (
            sc.Message(b"x", b"", g.TS),)

    @pytest.mark.parametrize("frame, rid, seq, wait, fetch", [
        (g.CONSUME_5, 5, 0, 0, 64),
        (g.CONSUME_7, 7, 2**64 - 1, 500, 4096),
        (g.CONSUME_8, 8, 1000, 0, 4096),
    ])
    def test_consume(self, frame: bytes, rid: int, seq: int, wait: int, fetch: int) -> None:
        """§6.5 into Consume, raw limits kept (normalising is a separate function)."""
        assert parse(frame) == sc.Consume(2, rid, b"", wait, 0, 0, (sc.ConsumeTopic(
            T1, (sc.ConsumePartition(0, seq, fetch),)),))

    def test_discover_and_create(self) -> None:
        """§6.7 into DiscoverPartitions (all) and CreateTopic."""
        assert parse(g.DISCOVER_9) == sc.DiscoverPartitions(9, T1, ())
        assert parse(g.CREATE_10) == sc.CreateTopic(10, b"t2", 3, b"")

    def test_ping(self) -> None:
        """A ping is a request with no fields."""
        assert parse(g.PING) == sc.Ping()


class ClientVersionsTests:
    def test_consume_version_0_java(self) -> None:
        """The 2017 Java client: version 0, client id "JC01", no op_flags."""
        frame = tc.build_consume(3, [(T1, 1, 7, 100)], client_version=0, client_id=b"JC01")
        assert parse(frame) == sc.Consume(0, 3, b"JC01", 0, 0, 0, (sc.ConsumeTopic(
            T1, (sc.ConsumePartition(1, 7, 100),)),))

    def test_consume_version_3_op_flags(self) -> None:
        """op_flags set: the client sends version 3 and the extra u8 after min_bytes."""
        frame = tc.build_consume(3, [(T1, 1, 7, 100)], max_wait=10, min_bytes=5, op_flags=1)
        assert frame[5:7] == b"\x03\x00"
        assert parse(frame) == sc.Consume(3, 3, b"", 10, 5, 1, (sc.ConsumeTopic(
            T1, (sc.ConsumePartition(1, 7, 100),)),))

    def test_produce_version_0(self) -> None:
        """Produce's version is only carried; 0 parses like 2."""
        frame = tc.build_produce(1, [(T1, 0, [tc.Msg(b"a")])], client_version=0,
                                 client_id=b"JC01")
        req = parse(frame)
        assert (req.client_version, req.client_id) == (0, b"JC01")

    def test_grouping_by_topic(self) -> None:
        """Partitions of one topic share its entry, topics in first-appearance order."""
        frame = tc.build_consume(1, [(b"a", 0, 1, 10), (b"b", 2, 1, 10), (b"a", 1, 5, 10)])
        req = parse(frame)
        assert [(t.name, [p.partition for p in t.partitions]) for t in req.topics] == [
            (b"a", [0, 1]), (b"b", [2])]

    def test_produce_with_seqnum(self) -> None:
        """0x05: base_seq after the bundle length; a sparse bundle keeps explicit seqs."""
        msgs = [tc.Msg(b"a", ts=1, seq=10), tc.Msg(b"b", ts=1, seq=11),
                tc.Msg(b"c", ts=2, seq=15), tc.Msg(b"d", ts=2, seq=20)]
        frame = tc.build_produce_with_seqnum(6, [(T1, 3, 10, msgs)])
        req = parse(frame)
        assert isinstance(req, sc.ProduceWithSeqnum)
        part = req.topics[0].partitions[0]
        assert (part.partition, part.base_seq) == (3, 10)
        bundle = sc.decode_bundle(part.bundle)
        assert (bundle.sparse, bundle.first_seq, bundle.last_seq) == (True, 10, 20)
        assert [(m.seq, m.content, m.ts) for m in bundle.messages] == [
            (10, b"a", 1), (11, b"b", 1), (15, b"c", 2), (20, b"d", 2)]

    def test_other_requests(self) -> None:
        """§7's ReloadConf, Status, DiscoverTopics, DiscoverTopology, partition-id lists."""
        cases = [
            (0x08, "01000000 02 7431 0500", sc.ReloadConf(1, T1, 5)),
            (0x0A, "02000000", sc.Status(2)),
            (0x0B, "03000000 00", sc.DiscoverTopics(3, 0)),
            (0x0C, "04000000 00", sc.DiscoverTopology(4, 0)),
            (0x06, "05000000 02 7431 0100 0300", sc.DiscoverPartitions(5, T1, (1, 3))),
        ]
        for msg_id, payload, expected in cases:
            assert sc.parse_request(sc.Frame(msg_id, g.h(payload))) == expected
        assert parse(tc.build_discover_partitions(5, T1, [1, 3])) == cases[-1][2]


class NormalisationTests:
    @pytest.mark.parametrize("raw, expected", [
        (0, 0), (1, 320), (64, 320), (320, 320), (321, 384), (500, 512),
        (3_600_000, 3_600_000), (3_600_001, 3_600_000), (2**64 - 1, 3_600_000)])
    def test_max_wait(self, raw: int, expected: int) -> None:
        """§2.7: 0 stays 0; else rounded up to 64 ms, at least 320 ms, at most 1 h."""
        assert sc.normalise_max_wait(raw) == expected

    def test_cap_bytes(self) -> None:
        """min_bytes and fetch_size are capped at 64 MiB."""
        assert sc.cap_bytes(2**32 - 1) == 64 * 1024 * 1024
        assert sc.cap_bytes(4096) == 4096
