"""Bundles both ways between the two codecs, and the server's refusals (notes §5, §4.4)."""

from __future__ import annotations

import cramjam
import pytest

from broker.tank import client as tc
from broker.tank import codec as sc
from tests.tank import goldens as g

T1 = b"t1"


def client_to_server(msgs: list[tc.Msg]) -> sc.DecodedBundle:
    """The client's bundle through a real Produce frame into the server's decoder."""
    frame = tc.build_produce(1, [(T1, 0, msgs)])
    req = sc.parse_request(sc.FrameSplitter().feed(frame)[0])
    return sc.decode_bundle(req.topics[0].partitions[0].bundle)


def server_to_client(bundles: list[bytes], base_seq: int, seq: int = 0,
                     fetch_size: int = 1 << 20, *, cut: bool = False) -> tc.PartitionData:
    """Server bundles through a real Consume reply into the client's decoder."""
    chunk = sc.build_chunk(bundles, fetch_size, cut=cut)
    frame = sc.encode_reply(sc.ConsumeReply(1, (sc.ConsumeTopicReply(T1, (
        sc.ConsumePartitionReply(0, base_seq=base_seq, hw=1000, chunk=chunk),)),)))
    res = tc.decode_consume_reply(frame[5:], [(T1, 0, seq, fetch_size)])
    assert res.faults == []
    return res.data[0]


CASES = {
    "keys and timestamps": [tc.Msg(b"a", b"k", g.TS), tc.Msg(b"b", b"", g.TS),
                            tc.Msg(b"c", b"kk", g.TS + 5), tc.Msg(b"", b"k", g.TS + 5)],
    "sixteen (varint count)": [tc.Msg(bytes([i]) * i, b"", i // 3) for i in range(16)],
    "binary key 255": [tc.Msg(b"\x00\xff", bytes(range(255)), 2**64 - 1)],
    "snappy over 1 KiB": [tc.Msg(b"payload-%d " % i * 20, b"key%d" % i, g.TS + i % 2)
                          for i in range(10)],
    "snappy over 512 messages": [tc.Msg(b"%d" % i, b"", g.TS) for i in range(600)],
}


class ClientToServerTests:
    @pytest.mark.parametrize("name", CASES)
    def test_round_trip(self, name: str) -> None:
        """What the client produces, the server decodes to the same messages."""
        msgs = CASES[name]
        bundle = client_to_server(msgs)
        assert [(m.content, m.key, m.ts) for m in bundle.messages] == [
            (m.content, m.key, m.ts) for m in msgs]
        assert bundle.codec == (sc.CODEC_SNAPPY if name.startswith("snappy")
                                else sc.CODEC_NONE)

    def test_sparse(self) -> None:
        """Sparse bundles keep gaps; single-message sparse bundles omit the last delta."""
        for seqs in ([5], [5, 6], [5, 9], [1, 2, 3, 10, 11, 2**31]):
            msgs = [tc.Msg(b"s%d" % s, b"", 7, seq=s) for s in seqs]
            bundle = sc.decode_bundle(tc.bundle_for(msgs))
            assert [m.seq for m in bundle.messages] == seqs
            assert (bundle.first_seq, bundle.last_seq) == (seqs[0], seqs[-1])

    def test_sparse_snappy(self) -> None:
        """A sparse snappy bundle: the header stays plain, the message set is compressed."""
        msgs = [tc.Msg(b"z" * 200, b"", 1, seq=s) for s in (3, 4, 8, 9, 30, 31)]
        raw = tc.bundle_for(msgs)
        assert raw[0] & 0x43 == 0x41
        assert [m.seq for m in sc.decode_bundle(raw).messages] == [3, 4, 8, 9, 30, 31]


class ServerToClientTests:
    @pytest.mark.parametrize("name", CASES)
    def test_round_trip(self, name: str) -> None:
        """Server bundles (plain and snappy) reach the client with dense seqs from base."""
        msgs = [sc.Message(m.content, m.key, m.ts) for m in CASES[name]]
        codec = sc.CODEC_SNAPPY if name.startswith("snappy") else sc.CODEC_NONE
        part = server_to_client([sc.encode_bundle(msgs, codec=codec)], base_seq=41)
        assert [(m.seq, m.content, m.key, m.ts) for m in part.messages] == [
            (41 + i, m.content, m.key, m.ts) for i, m in enumerate(msgs)]
        assert part.next_seq == 41 + len(msgs)

    def test_several_bundles_and_skip(self) -> None:
        """base_seq runs on bundle after bundle; messages below the asked seq are skipped."""
        b1 = sc.encode_bundle([sc.Message(b"a", ts=1), sc.Message(b"b", ts=1)])
        b2 = sc.encode_bundle([sc.Message(b"c", ts=2)] * 20, codec=sc.CODEC_SNAPPY)
        part = server_to_client([b1, b2], base_seq=10, seq=11)
        assert [m.seq for m in part.messages] == list(range(11, 32))

    def test_sparse_first_bundle_flag(self) -> None:
        """0xfe: no base_seq; the sparse bundle's own seqs place its messages and the next
        bundle's seqs follow its last."""
        sparse = sc.encode_bundle([sc.Message(b"x", seq=s) for s in (50, 52)], sparse=True)
        dense = sc.encode_bundle([sc.Message(b"y")])
        frame = sc.encode_reply(sc.ConsumeReply(2, (sc.ConsumeTopicReply(T1, (
            sc.ConsumePartitionReply(0, sc.ConsumeFlag.FIRST_BUNDLE_SPARSE, hw=60,
                                     chunk=sc.frame_bundles([sparse, dense])),)),)))
        (part,) = tc.decode_consume_reply(frame[5:], [(T1, 0, 0, 1000)]).data
        assert [m.seq for m in part.messages] == [50, 52, 53]

    def test_cut_uncompressed_bundle(self) -> None:
        """§4.4: complete messages of a cut plain bundle are kept; min_fetch_size covers it."""
        b1 = sc.encode_bundle([sc.Message(b"a" * 10, ts=1)] * 5)
        part = server_to_client([b1], base_seq=1, fetch_size=30, cut=True)
        assert [m.seq for m in part.messages] == [1]
        assert part.next_seq == 2 and part.min_fetch_size == len(b1) + 1

    def test_cut_compressed_bundle(self) -> None:
        """A cut snappy bundle yields nothing; min_fetch_size is its whole framed length."""
        b1 = sc.encode_bundle([sc.Message(b"a" * 100, ts=1)] * 20, codec=sc.CODEC_SNAPPY)
        part = server_to_client([b1], base_seq=7, seq=7, fetch_size=10, cut=True)
        assert part.messages == [] and part.next_seq == 7
        assert part.min_fetch_size == len(b1) + 1

    def test_whole_bundles_chunk(self) -> None:
        """Skerry's default chunk: whole bundles only, but never an empty chunk."""
        b1, b2 = b"\x04" + bytes(11), b"\x04" + bytes(20)
        assert sc.build_chunk([b1, b2], 5) == b"\x0c" + b1
        assert sc.build_chunk([b1, b2], 13) == b"\x0c" + b1
        assert sc.build_chunk([b1, b2], 100) == b"\x0c" + b1 + b"\x15" + b2


def bundle_bytes(text: str) -> bytes:
    return g.h(text)


class ServerRefusesTests:
    @pytest.mark.parametrize("raw, why", [
        ("84 00 0100000000000000 01 78", "bit 7"),
        ("06 00 0100000000000000 01 78", "codec"),
        ("00 00", "no messages"),
        ("04 02 01 78", "UseLastSpecifiedTS"),
        ("04 08 0100000000000000 01 78", "unknown flag"),
        ("04 04 0100000000000000 01 78", "non-sparse"),
        ("04 00 0100000000000000 01 78 00", "after the bundle"),
        ("08 00 0100000000000000 01 78", "truncated"),
        ("04 00 0100000000000000 05 78", "truncated"),
        ("04 00 0100000000000000 ffffffff7f", "varint"),
        ("05 ff", "snappy"),
        ("05 8080808001", "over the limit"),
        ("0c 00 0100000000000000 01 61", "truncated"),
        ("4c 0500000000000000 00 00 0100000000000000 01 61 00 0100000000000000 01 62 "
         "00 0100000000000000 01 63", "not below last"),
        ("40", "truncated"),
        ("ff", "bit 7"),
        ("", "truncated"),
    ])
    def test_bad_bundles(self, raw: str, why: str) -> None:
        """Each malformed bundle is a BundleError naming the problem, nothing else."""
        with pytest.raises(sc.BundleError, match=why):
            sc.decode_bundle(bundle_bytes(raw), max_decompressed=1 << 20)

    def test_snappy_size_mismatch(self) -> None:
        """A snappy block must decompress to a whole message set."""
        block = bytes(cramjam.snappy.compress_raw(g.h("00 0100000000000000 01 78")))
        assert sc.decode_bundle(b"\x05" + block).messages == (sc.Message(b"x", ts=1),)
        with pytest.raises(sc.BundleError):
            sc.decode_bundle(b"\x05" + block[:-1])

    def test_encoder_refuses(self) -> None:
        """Our own mistakes (no messages, long key, unordered sparse seqs) are refused."""
        with pytest.raises(sc.BundleError):
            sc.encode_bundle([])
        with pytest.raises(sc.BundleError):
            sc.encode_bundle([sc.Message(b"", b"k" * 256)])
        with pytest.raises(sc.BundleError):
            sc.encode_bundle([sc.Message(b"", seq=2), sc.Message(b"", seq=2)], sparse=True)
