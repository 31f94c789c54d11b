"""Every golden reply of notes §6: encoded byte for byte by the server, decoded by the client."""

from __future__ import annotations

from broker.tank import client as tc
from broker.tank import codec as sc
from tests.tank import goldens as g

T1 = b"t1"


def payload(frame: bytes) -> bytes:
    return frame[5:]


def consume_5_messages() -> list[sc.Message]:
    """The 8 messages of §6.6's first bundle (seqs 1..8)."""
    return ([sc.Message(b"hello", b"k1", g.TS), sc.Message(b"world", b"", g.TS)]
            + [sc.Message(f"m{i}".encode(), b"", g.TS) for i in range(5)]
            + [sc.Message(b"m5", b"", g.TS + 1)])


def a_53_byte_bundle() -> bytes:
    """Any 8-message bundle of 53 bytes opening ``20 00 0168...`` stands in for §6.6's cut
    second bundle, of which the notes show 4 bytes."""
    msgs = [sc.Message(b"m6", b"", g.TS + 1)] + [
        sc.Message(b"y" * n, b"", g.TS + 1) for n in (4, 4, 4, 4, 4, 3, 3)]
    bundle = sc.encode_bundle(msgs)
    assert len(bundle) == 53
    return bundle


class ProduceRepliesTests:
    def test_ok(self) -> None:
        """§6.1's reply: request 1, t1's only partition ok."""
        reply = sc.ProduceReply(1, (sc.ProduceTopicAck((sc.ProducePartitionAck(),)),))
        assert sc.encode_reply(reply) == g.PRODUCE_1_REPLY
        entries = [(T1, 0, [tc.Msg(b"hello")])]
        assert tc.decode_produce_reply(payload(g.PRODUCE_1_REPLY), entries) == (
            1, [tc.ProduceAck(T1, 0)], [])

    def test_unknown_topic(self) -> None:
        """§6.4's reply: one 0xff byte for the whole topic -> client fault UnknownTopic."""
        reply = sc.ProduceReply(4, (sc.ProduceTopicAck(topic_error=sc.ProduceError.UNKNOWN_TOPIC),))
        assert sc.encode_reply(reply) == g.PRODUCE_4_REPLY
        entries = [(b"nope", 0, [tc.Msg(b"x")])]
        assert tc.decode_produce_reply(payload(g.PRODUCE_4_REPLY), entries) == (
            4, [], [tc.Fault("UnknownTopic", b"nope")])

    def test_produce_with_seqnum_reply_uses_id_1(self) -> None:
        """§2.9: the reply to 0x05 goes out with msg id 0x01 (the only produce reply)."""
        frame = sc.encode_reply(sc.ProduceReply(6, (sc.ProduceTopicAck(
            (sc.ProducePartitionAck(sc.ProduceError.INVALID_SEQNUMS),)),)))
        assert frame[0] == 0x01
        assert tc.decode_produce_reply(payload(frame), [(T1, 3, 10, [])])[2] == [
            tc.Fault("InvalidReq", T1, 3)]


class ConsumeRepliesTests:
    def test_data_with_cut_second_bundle(self) -> None:
        """§6.6, request 5: a 58-byte bundle then 4 bytes of a 53-byte one (fetch_size 64)."""
        bundle_1 = sc.encode_bundle(consume_5_messages())
        assert bundle_1 == g.CONSUME_5_BUNDLE_1
        chunk = sc.build_chunk([bundle_1, a_53_byte_bundle()], 64, cut=True)
        assert chunk == b"\x3a" + g.CONSUME_5_BUNDLE_1 + g.CONSUME_5_CUT
        reply = sc.ConsumeReply(5, (sc.ConsumeTopicReply(T1, (sc.ConsumePartitionReply(
            0, sc.ConsumeFlag.OK, base_seq=1, hw=26, chunk=chunk),)),))
        assert sc.encode_reply(reply) == g.CONSUME_5_REPLY

    def test_client_reads_cut_second_bundle(self) -> None:
        """libtank got 8 messages seq 1..8 and next seq 9; our client too. Its
        min_fetch_size is the fetch size or the cut bundle's whole length if larger (54
        here, so 64); libtank's own heuristic reported 258 (a client-side choice)."""
        res = tc.decode_consume_reply(payload(g.CONSUME_5_REPLY), [(T1, 0, 0, 64)])
        assert res.request_id == 5 and res.faults == []
        (part,) = res.data
        assert [(m.seq, m.key, m.ts, m.content) for m in part.messages] == [
            (i + 1, m.key, m.ts, m.content) for i, m in enumerate(consume_5_messages())]
        assert (part.hw, part.next_seq, part.drained, part.min_fetch_size) == (26, 9, False, 64)

    def test_tail_after_wait(self) -> None:
        """§6.6, request 7: EOF after the wait (base = first 1, hw 26, no chunk)."""
        reply = sc.ConsumeReply(7, (sc.ConsumeTopicReply(T1, (sc.ConsumePartitionReply(
            0, base_seq=1, hw=26),)),))
        assert sc.encode_reply(reply) == g.CONSUME_7_REPLY
        res = tc.decode_consume_reply(payload(g.CONSUME_7_REPLY), [(T1, 0, tc.SEQ_TAIL, 4096)])
        (part,) = res.data
        assert (part.messages, part.drained, part.next_seq) == ([], True, 27)

    def test_boundary_fault(self) -> None:
        """§6.6, request 8: seq 1000 past hw 26 -> 0x01 with first_available 1."""
        reply = sc.ConsumeReply(8, (sc.ConsumeTopicReply(T1, (
            sc.ConsumePartitionReply.boundary_fault(0, first_available=1, hw=26),)),))
        assert sc.encode_reply(reply) == g.CONSUME_8_REPLY
        res = tc.decode_consume_reply(payload(g.CONSUME_8_REPLY), [(T1, 0, 1000, 4096)])
        assert res.data == []
        assert res.faults == [tc.Fault("BoundaryCheck", T1, 0, first_available=1, hw=26)]
        assert tc.clamp_seq(1000, 1, 26) == 27


class DiscoverCreateRepliesTests:
    def test_discover(self) -> None:
        """§6.7: one partition, first 1, hw 26."""
        reply = sc.DiscoverPartitionsReply(9, T1, (sc.PartitionWatermarks(1, 26),))
        assert sc.encode_reply(reply) == g.DISCOVER_9_REPLY
        assert tc.decode_discover_partitions_reply(payload(g.DISCOVER_9_REPLY)) == (
            9, T1, [tc.Discovered(0, 1, 26)])

    def test_create(self) -> None:
        """§6.7: create t2 ok."""
        assert sc.encode_reply(sc.CreateTopicReply(10, b"t2")) == g.CREATE_10_REPLY
        assert tc.decode_create_topic_reply(payload(g.CREATE_10_REPLY)) == (10, b"t2", None)
