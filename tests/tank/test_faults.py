"""Fault shapes of notes §2.5, §2.6, §3.2, §4.2 and §7: server encodes, client decodes."""

from __future__ import annotations

import pytest

from broker.tank import client as tc
from broker.tank import codec as sc
from tests.tank import goldens as g

T1 = b"t1"
LEADER = sc.Endpoint(0x0100007F, 11012)


class ProduceFaultsTests:
    def test_every_partition_code(self) -> None:
        """One partition per code, 0xfc followed by the leader; each maps to its client fault."""
        codes = [0, 1, 2, 3, 4, 10, 0xFC, 0xFD]
        acks = tuple(sc.ProducePartitionAck(c, LEADER if c == 0xFC else None) for c in codes)
        frame = sc.encode_reply(sc.ProduceReply(3, (sc.ProduceTopicAck(acks),)))
        entries = [(T1, p, [tc.Msg(b"x")]) for p in range(len(codes))]
        rid, ok, faults = tc.decode_produce_reply(frame[5:], entries)
        assert rid == 3 and ok == [tc.ProduceAck(T1, 0)]
        assert faults == [
            tc.Fault("UnknownPartition", T1, 1), tc.Fault("SystemFail", T1, 2),
            tc.Fault("SystemFail", T1, 3), tc.Fault("InsufficientReplicas", T1, 4),
            tc.Fault("InvalidReq", T1, 5), tc.Fault("OtherLeader", T1, 6, leader=(0x0100007F, 11012)),
            tc.Fault("NoLeader", T1, 7)]

    def test_topic_level_codes_across_topics(self) -> None:
        """0xfe/0xff take one byte for the whole topic; the next topic follows at once."""
        frame = sc.encode_reply(sc.ProduceReply(4, (
            sc.ProduceTopicAck(topic_error=sc.ProduceError.READ_ONLY),
            sc.ProduceTopicAck((sc.ProducePartitionAck(), sc.ProducePartitionAck(1))))))
        assert frame[5:] == g.h("04000000 fe 00 01")
        entries = [(b"ro", 0, [tc.Msg(b"x")]), (b"ro", 1, [tc.Msg(b"x")]),
                   (T1, 0, [tc.Msg(b"x")]), (T1, 1, [tc.Msg(b"x")])]
        assert tc.decode_produce_reply(frame[5:], entries) == (
            4, [tc.ProduceAck(T1, 0)], [tc.Fault("Access", b"ro"),
                                        tc.Fault("UnknownPartition", T1, 1)])

    @pytest.mark.parametrize("reply", [
        sc.ProduceReply(1, (sc.ProduceTopicAck((sc.ProducePartitionAck(5),)),)),
        sc.ProduceReply(1, (sc.ProduceTopicAck((sc.ProducePartitionAck(0xFF),)),)),
        sc.ProduceReply(1, (sc.ProduceTopicAck((sc.ProducePartitionAck(0xFC),)),)),
        sc.ProduceReply(1, (sc.ProduceTopicAck(topic_error=1),)),
        sc.ProduceReply(1, (sc.ProduceTopicAck(),)),
    ])
    def test_encoder_refuses_what_aborts_libtank(self, reply: sc.ProduceReply) -> None:
        """Unknown codes (libtank's IMPLEMENT_ME), 0xfc without a leader: our bug, ValueError."""
        with pytest.raises(ValueError):
            sc.encode_reply(reply)


class ConsumeFaultsTests:
    def test_every_flag_and_unknown_topic(self) -> None:
        """0xff/0xfb/0xfd carry nothing, 0xfc only the leader, an unknown topic is its
        partitions count and u16 0xFFFF; data for a later partition still lines up."""
        chunk = sc.frame_bundles([sc.encode_bundle([sc.Message(b"ok", ts=3)])])
        frame = sc.encode_reply(sc.ConsumeReply(9, (
            sc.UnknownConsumeTopic(b"nope", 2),
            sc.ConsumeTopicReply(T1, (
                sc.ConsumePartitionReply(0, sc.ConsumeFlag.UNKNOWN_PARTITION),
                sc.ConsumePartitionReply(1, sc.ConsumeFlag.SYSTEM_ERROR),
                sc.ConsumePartitionReply(2, sc.ConsumeFlag.NO_LEADER),
                sc.ConsumePartitionReply(3, sc.ConsumeFlag.OTHER_LEADER, leader=LEADER),
                sc.ConsumePartitionReply(4, base_seq=5, hw=5, chunk=chunk),
            )),
        )))
        entries = [(b"nope", 0, 0, 100), (b"nope", 1, 0, 100)] + [
            (T1, p, 0, 100) for p in range(5)]
        res = tc.decode_consume_reply(frame[5:], entries)
        assert res.request_id == 9
        assert res.faults == [
            tc.Fault("UnknownTopic", b"nope"), tc.Fault("UnknownPartition", T1, 0),
            tc.Fault("SystemFail", T1, 1), tc.Fault("NoLeader", T1, 2),
            tc.Fault("OtherLeader", T1, 3, leader=(0x0100007F, 11012))]
        (part,) = res.data
        assert [(m.seq, m.content, m.ts) for m in part.messages] == [(5, b"ok", 3)]
        assert (part.partition, part.next_seq, part.drained) == (4, 6, False)

    @pytest.mark.parametrize("partition", [
        sc.ConsumePartitionReply(0, 0x02),
        sc.ConsumePartitionReply(0, sc.ConsumeFlag.OTHER_LEADER),
        sc.ConsumePartitionReply(0, sc.ConsumeFlag.NO_LEADER, chunk=b"\x01\x04"),
        sc.ConsumePartitionReply(0xFFFF),
    ])
    def test_encoder_refuses(self, partition: sc.ConsumePartitionReply) -> None:
        """Unknown flags, 0xfc without a leader, a fault with data, partition 65535."""
        with pytest.raises(ValueError):
            sc.encode_reply(sc.ConsumeReply(1, (sc.ConsumeTopicReply(T1, (partition,)),)))


class DiscoverAndOthersTests:
    def test_discover_faults_and_unknown_topic(self) -> None:
        """Both watermarks 2**64 - 1 announce a reason byte (+ leader for 0xfc); count 0 is
        an unknown topic; asked ids name the entries."""
        frame = sc.encode_reply(sc.DiscoverPartitionsReply(2, T1, (
            sc.PartitionWatermarks(0, 0),
            sc.PartitionUnavailable(sc.PartitionFault.OTHER_LEADER, LEADER),
            sc.PartitionUnavailable(sc.PartitionFault.SYSTEM))))
        assert tc.decode_discover_partitions_reply(frame[5:], [4, 5, 6]) == (2, T1, [
            tc.Discovered(4, 0, 0), tc.Fault("OtherLeader", T1, 5, leader=(0x0100007F, 11012)),
            tc.Fault("SystemFail", T1, 6)])
        empty = sc.encode_reply(sc.DiscoverPartitionsReply(3, b"x", ()))
        assert tc.decode_discover_partitions_reply(empty[5:]) == (
            3, b"x", [tc.Fault("UnknownTopic", b"x")])

    def test_create_errors(self) -> None:
        """CreateTopic codes reach the client as faults."""
        for code, kind in [(1, "AlreadyExists"), (2, "SystemFail"), (4, "InvalidReq"),
                           (5, "Access"), (10, "InvalidReq"), (11, "Unsupported")]:
            frame = sc.encode_reply(sc.CreateTopicReply(1, T1, code))
            assert tc.decode_create_topic_reply(frame[5:])[2] == tc.Fault(kind, T1)

    def test_standalone_shapes(self) -> None:
        """§7's ReloadConf, Status, DiscoverTopics and DiscoverTopology as a single node."""
        assert sc.encode_reply(sc.ReloadConfReply(1, T1, 2)) == g.h(
            "08 0a000000 01000000 027431 0200 00")
        assert sc.encode_reply(sc.StatusReply(2, topics=3, partitions=7)) == g.h(
            "0a 0e000000 02000000 00 00 03000000 07000000")
        assert sc.encode_reply(sc.StatusReply(2, 3, 7, open_partitions=1, startup_ts=9,
                                              version=4))[-16:] == g.h(
            "01000000 00000000 09000000 04000000")
        assert sc.encode_reply(sc.DiscoverTopicsReply(3, (sc.TopicInfo(T1, 2),))) == g.h(
            "0b 0f000000 03000000 01000000 00 027431 01 0200")
        assert sc.encode_reply(sc.DiscoverTopologyReply(4)) == g.h("0c 06000000 04000000 ffff")
