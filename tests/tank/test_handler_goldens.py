"""Acceptance 1: the §6 captures through the real handler path (protocol, dispatch,
handlers, core, store), with the broker in memory on a ``task.Clock``.

Every captured request reaches its handler as the expected request; every reply Skerry
builds for §6's scenarios is the captured reply byte for byte where the scenario does not
depend on how a broker packs stored messages into bundles (produce acks, the unknown
topic, the tail wait's EOF, the boundary fault, discover, create), and decodes with the
independent client to the captured values where it does (§6.6's cut chunk: the fake
broker packed 8 messages into its first bundle; Skerry's first bundle is the first
produce's 2 messages, so the cut falls elsewhere and the client's values are compared
message by message); every chunk size from 1 byte gives the same replies.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.tank import client as tc
from broker.tank import codec as sc
from tests.tank import goldens as g
from tests.tank.harness import Harness

T1 = b"t1"


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    h.create("t1")
    yield h
    h.close()


def produce_3() -> bytes:
    """§6.3's request (the notes print its prefix; the client builds the rest and the
    request tests check it against that prefix and length)."""
    frame = tc.build_produce(3, [(T1, 0, [tc.Msg(b"x" * 300, b"kk", g.TS + 1)] * 4)])
    assert frame.startswith(g.PRODUCE_3_PREFIX) and len(frame) == g.PRODUCE_3_LENGTH
    return frame


def load_26(h: Harness) -> None:
    """§6.1, §6.2 and §6.3 into t1/0: seqs 1..26, as §6.6's partition holds."""
    conn = h.connect()
    for frame, rid in ((g.PRODUCE_1, 1), (g.PRODUCE_2, 2), (produce_3(), 3)):
        assert conn.request(frame) == sc.encode_frame(1, bytes([rid, 0, 0, 0, 0]))
        h.advance(0.001)  # each produce is its own store append


def expected_26() -> list[tc.Consumed]:
    msgs = [tc.Consumed(1, g.TS, b"k1", b"hello"), tc.Consumed(2, g.TS, b"", b"world")]
    msgs += [tc.Consumed(3 + i, g.TS + i // 5, b"", f"m{i}".encode()) for i in range(20)]
    msgs += [tc.Consumed(23 + i, g.TS + 1, b"kk", b"x" * 300) for i in range(4)]
    return msgs


class RequestsReachTheirHandlersTests:
    @pytest.mark.parametrize("frame, expected", [
        (g.PRODUCE_1, sc.Produce(2, 1, b"c++", 0, 0, (sc.ProduceTopic(
            T1, (sc.ProducePartition(0, g.PRODUCE_1_BUNDLE),)),))),
        (g.PRODUCE_4, sc.Produce(2, 4, b"c++", 0, 0, (sc.ProduceTopic(b"nope", (
            sc.ProducePartition(0, bytes.fromhex("04000068e5cf8b0100000178")),)),))),
        (g.CONSUME_5, sc.Consume(2, 5, b"", 0, 0, 0, (sc.ConsumeTopic(
            T1, (sc.ConsumePartition(0, 0, 64),)),))),
        (g.CONSUME_7, sc.Consume(2, 7, b"", 500, 0, 0, (sc.ConsumeTopic(
            T1, (sc.ConsumePartition(0, 2**64 - 1, 4096),)),))),
        (g.CONSUME_8, sc.Consume(2, 8, b"", 0, 0, 0, (sc.ConsumeTopic(
            T1, (sc.ConsumePartition(0, 1000, 4096),)),))),
        (g.DISCOVER_9, sc.DiscoverPartitions(9, T1, ())),
        (g.CREATE_10, sc.CreateTopic(10, b"t2", 3, b"")),
    ])
    def test_captured_request_reaches_its_handler(self, harness: Harness, frame: bytes,
                                                  expected: sc.Request) -> None:
        """Fed through a connection one byte at a time, each capture is dispatched to the
        table's handler for its class as exactly the expected request."""
        seen: list[sc.Request] = []
        handlers = harness.service.handlers
        original = handlers.table[type(expected)]

        def spy(req: sc.Request):  # noqa: ANN202
            seen.append(req)
            return original(req)

        handlers.table[type(expected)] = spy
        conn = harness.connect()
        conn.send(frame, chunk=1)
        harness.advance(1.0)  # the tail consume's wait
        assert seen == [expected]
        assert len(conn.frames()) == 1 and not conn.closed

    def test_produce_3_snappy_and_20_messages_land_as_the_client_sent_them(
            self, harness: Harness) -> None:
        load_26(harness)
        conn = harness.connect()
        conn.send(tc.build_consume(11, [(T1, 0, 1, 1 << 20)]))
        (msg_id, payload), = conn.frames()
        got = tc.decode_consume_reply(payload, [(T1, 0, 1, 1 << 20)])
        assert msg_id == 2 and got.data[0].messages == expected_26()
        assert got.data[0].hw == 26 and got.data[0].next_seq == 27


class RepliesTests:
    def test_produce_acks_are_the_captured_bytes(self, harness: Harness) -> None:
        """§6.1 and §6.4: the replies equal the captures."""
        conn = harness.connect()
        assert conn.request(g.PRODUCE_1) == g.PRODUCE_1_REPLY
        assert conn.request(g.PRODUCE_4) == g.PRODUCE_4_REPLY

    def test_consume_with_a_cut_bundle(self, harness: Harness) -> None:
        """§6.6, request 5 (seq 0, fetch size 64): the chunk is 64 bytes, its last bundle
        cut; the client gets the complete messages in order with the captured keys and
        timestamps, and its next fetch (seq ``next_seq``, fetch size ``min_fetch_size``)
        continues exactly where it stopped."""
        load_26(harness)
        conn = harness.connect()
        conn.send(g.CONSUME_5)
        (msg_id, payload), = conn.frames()
        assert msg_id == 2
        header_length = int.from_bytes(payload[:4], "little")
        assert payload[4:4 + header_length] == bytes.fromhex(
            "05000000 01 027431 01 0000 00 0100000000000000 1a00000000000000 40000000"
            .replace(" ", ""))  # request 5, ok, base_seq 1, hw 26, chunk_length 64
        got = tc.decode_consume_reply(payload, [(T1, 0, 0, 64)]).data[0]
        assert got.messages and got.messages == expected_26()[:len(got.messages)]
        assert got.next_seq == len(got.messages) + 1 and got.min_fetch_size > 64
        assert not got.drained and got.hw == 26
        rest = tc.decode_consume_reply(*self._consume(conn, 12, got.next_seq,
                                                      got.min_fetch_size)).data[0]
        assert rest.messages[0].seq == got.next_seq
        assert rest.messages == expected_26()[got.next_seq - 1:got.next_seq - 1
                                              + len(rest.messages)]

    @staticmethod
    def _consume(conn, rid: int, seq: int, fetch: int):  # noqa: ANN205
        entries = [(T1, 0, seq, fetch)]
        conn.send(tc.build_consume(rid, entries))
        (_, payload), = conn.frames()
        return payload, entries

    def test_tail_wait_is_the_captured_eof(self, harness: Harness) -> None:
        """§6.6, request 7 (seq 2^64-1, max_wait 500 → 512 ms): nothing before the wait
        ends, then the captured EOF reply."""
        load_26(harness)
        conn = harness.connect()
        conn.send(g.CONSUME_7)
        harness.advance(0.5)
        assert conn.raw() == b""
        harness.advance(0.012)
        assert conn.raw() == g.CONSUME_7_REPLY

    def test_boundary_fault_is_the_captured_bytes(self, harness: Harness) -> None:
        load_26(harness)
        assert harness.connect().request(g.CONSUME_8) == g.CONSUME_8_REPLY

    def test_discover_and_create_are_the_captured_bytes(self, harness: Harness) -> None:
        load_26(harness)
        conn = harness.connect()
        assert conn.request(g.DISCOVER_9) == g.DISCOVER_9_REPLY
        assert conn.request(g.CREATE_10) == g.CREATE_10_REPLY
        assert harness.core.topic_config("t2").partitions == 3


class ChunkSizesTests:
    def test_every_chunk_size_gives_the_same_replies(self, harness: Harness) -> None:
        """The captured read requests and the unknown-topic produce, back to back on one
        connection, in chunks of every size from 1 byte to the whole stream."""
        load_26(harness)
        stream = g.PRODUCE_4 + g.CONSUME_5 + g.CONSUME_8 + g.DISCOVER_9 + g.PING
        reference = harness.connect()
        reference.send(stream)
        expected = reference.raw()
        assert expected.startswith(g.PRODUCE_4_REPLY)
        assert g.CONSUME_8_REPLY + g.DISCOVER_9_REPLY == expected[-len(
            g.CONSUME_8_REPLY + g.DISCOVER_9_REPLY):]
        for size in range(1, len(stream) + 1):
            conn = harness.connect()
            conn.send(stream, chunk=size)
            assert conn.raw() == expected, size
            conn.close()

    def test_produce_in_every_chunk_size(self, harness: Harness) -> None:
        """§6.1 fed in chunks of 1..54 bytes: always the captured ack, two messages each."""
        for size in range(1, len(g.PRODUCE_1) + 1):
            conn = harness.connect()
            assert conn.request(g.PRODUCE_1, chunk=size) == g.PRODUCE_1_REPLY, size
            conn.close()
        assert harness.core.hw("t1", 0) + 1 == 2 * len(g.PRODUCE_1)


class EdgeTests:
    def test_partition_65535_is_an_unknown_topic(self, harness: Harness) -> None:
        """Found by the fuzzer: 0xFFFF cannot be a partition in a consume reply (it is the
        unknown-topic marker), so a topic asked with it is answered as unknown."""
        conn = harness.connect()
        entries = [(T1, 0xFFFF, 1, 100)]
        conn.send(tc.build_consume(3, entries))
        (msg_id, payload), = conn.frames()
        assert tc.decode_consume_reply(payload, entries).faults == [
            tc.Fault("UnknownTopic", T1)]
        assert not conn.closed

    @pytest.mark.parametrize("version, op_flags, client_id", [(0, 0, b"JC01"), (2, 0, b""),
                                                               (3, 0, b""), (3, 1, b"")])
    def test_consume_client_versions(self, harness: Harness, version: int, op_flags: int,
                                     client_id: bytes) -> None:
        """Client versions 0 (Java), 2 (libtank) and 3 (op_flags; bit 0 prefer local
        node) read the same messages."""
        load_26(harness)
        conn = harness.connect()
        entries = [(T1, 0, 20, 1 << 16)]
        conn.send(tc.build_consume(4, entries, client_version=version, op_flags=op_flags,
                                   client_id=client_id))
        (_, payload), = conn.frames()
        got = tc.decode_consume_reply(payload, entries).data[0]
        assert got.messages == expected_26()[19:]

    def test_long_poll_waits_for_min_bytes(self, harness: Harness) -> None:
        """At hw + 1 with min_bytes 50: a 10-byte message does not end the wait, 60 more
        bytes do, and the reply carries both; without new data it ends at max_wait."""
        conn, other = harness.connect(), harness.connect()
        entries = [(T1, 0, 1, 4096)]
        conn.send(tc.build_consume(5, entries, max_wait=5000, min_bytes=50))
        other.request(tc.build_produce(6, [(T1, 0, [tc.Msg(b"a" * 10)])]))
        harness.advance(0.1)
        assert conn.raw() == b""
        other.request(tc.build_produce(7, [(T1, 0, [tc.Msg(b"b" * 60)])]))
        (_, payload), = conn.frames()
        got = tc.decode_consume_reply(payload, entries).data[0]
        assert [m.content for m in got.messages] == [b"a" * 10, b"b" * 60]
        conn.send(tc.build_consume(8, [(T1, 0, 3, 4096)], max_wait=1000, min_bytes=1))
        harness.advance(1.0)
        assert conn.raw() == b""
        harness.advance(0.024)  # 1000 ms normalised: 1024
        (_, payload), = conn.frames()
        assert tc.decode_consume_reply(payload, [(T1, 0, 3, 4096)]).data[0].drained


def test_a_waiting_consume_is_not_idle(tmp_path: Path) -> None:
    """limits.idle_timeout_ms closes silent connections, but not one whose consume is
    still waiting (TANK's max_wait goes up to an hour); after the answer, idle counts."""
    h = Harness(tmp_path, {"limits": {"idle_timeout_ms": 1000}})
    h.create("t1")
    conn = h.connect()
    conn.send(tc.build_consume(1, [(T1, 0, 1, 4096)], max_wait=3000))
    h.advance(2.0)
    assert not conn.closed and conn.raw() == b""
    h.advance(1.1)
    assert len(conn.frames()) == 1 and not conn.closed
    h.advance(1.1)
    assert conn.closed
    h.close()


def test_follower_partitions_answer_no_leader_or_the_leader(tmp_path: Path) -> None:
    """A partition this broker follows: 0xfd (NoLeader) while no leader address is known;
    0xfc with the address once ``Context.leader_of`` knows it; prefer_local_node reads it
    here anyway."""
    from broker.tank.codec import Endpoint

    h = Harness(tmp_path)
    h.create("t1")
    conn = h.connect()
    assert conn.request(g.PRODUCE_1) == g.PRODUCE_1_REPLY
    ctx = h.service.handlers.ctx
    ctx.is_leader = lambda topic, partition: False
    produce = [(T1, 0, [tc.Msg(b"x")])]
    consume = [(T1, 0, 1, 4096)]

    def ask() -> tuple[list, list]:
        conn.send(tc.build_produce(2, produce))
        (_, p1), = conn.frames()
        conn.send(tc.build_consume(3, consume))
        (_, p2), = conn.frames()
        return (tc.decode_produce_reply(p1, produce)[2],
                tc.decode_consume_reply(p2, consume).faults)

    assert ask() == ([tc.Fault("NoLeader", T1, 0)], [tc.Fault("NoLeader", T1, 0)])
    conn.send(tc.build_discover_partitions(4, T1))
    (_, payload), = conn.frames()
    assert tc.decode_discover_partitions_reply(payload)[2] == [tc.Fault("NoLeader", T1, 0)]
    ctx.leader_of = lambda topic, partition: Endpoint(0x0100007F, 11012)
    leader = (0x0100007F, 11012)
    assert ask() == ([tc.Fault("OtherLeader", T1, 0, leader=leader)],
                     [tc.Fault("OtherLeader", T1, 0, leader=leader)])
    conn.send(tc.build_consume(5, consume, op_flags=1))
    (_, payload), = conn.frames()
    assert [m.content for m in tc.decode_consume_reply(payload, consume).data[0].messages] \
        == [b"hello", b"world"]
    h.close()
