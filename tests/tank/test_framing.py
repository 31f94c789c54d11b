"""The frame splitter in every chunk size, its size bound, and unknown message ids."""

from __future__ import annotations

import pytest

from broker.tank import client as tc
from broker.tank import codec as sc
from broker.tank.client.wire import split_frames
from tests.tank import goldens as g


def feed_in_chunks(splitter: sc.FrameSplitter, data: bytes, size: int) -> list:
    out = []
    for i in range(0, len(data), size):
        out += splitter.feed(data[i:i + size])
    return out


class FrameSplitterTests:
    @pytest.mark.parametrize("golden", g.ALL_REQUESTS, ids=lambda b: b[:6].hex())
    def test_every_chunk_size(self, golden: bytes) -> None:
        """Each golden request, fed 1..len bytes at a time, gives the same one frame,
        which parses to the same request."""
        whole = sc.parse_request(sc.FrameSplitter().feed(golden)[0])
        for size in range(1, len(golden) + 1):
            splitter = sc.FrameSplitter()
            frames = feed_in_chunks(splitter, golden, size)
            assert frames == [sc.Frame(golden[0], golden[5:])], size
            assert sc.parse_request(frames[0]) == whole
            assert splitter.buffered == 0

    def test_pipelined_stream(self) -> None:
        """All goldens back to back, in every chunk size up to 64, come out in order."""
        stream = b"".join(g.ALL_REQUESTS)
        expected = [sc.Frame(f[0], f[5:]) for f in g.ALL_REQUESTS]
        for size in range(1, 65):
            assert feed_in_chunks(sc.FrameSplitter(), stream, size) == expected

    def test_too_large(self) -> None:
        """A header announcing more than the bound gives one FrameTooLarge, then nothing."""
        splitter = sc.FrameSplitter(max_frame_size=40)
        out = splitter.feed(g.PING + g.PRODUCE_1)
        assert out == [sc.Frame(3, b""), sc.FrameTooLarge(1, 49, 40)]
        assert "over the limit of 40" in str(out[1])
        assert splitter.feed(g.PING) == []

    def test_too_large_detected_from_header_alone(self) -> None:
        """The bound applies as soon as the 5 header bytes are in, before any payload."""
        splitter = sc.FrameSplitter(max_frame_size=10)
        assert splitter.feed(b"\x02\xff\xff") == []
        assert splitter.feed(b"\xff\xff") == [sc.FrameTooLarge(2, 2**32 - 1, 10)]

    @pytest.mark.parametrize("msg_id", [0x00, 0x04, 0x09, 0x0D, 0xFF])
    def test_unknown_or_unserved_ids(self, msg_id: int) -> None:
        """Obsolete 0x04, broker-to-broker 0x09 and unknown ids are codec errors."""
        with pytest.raises(sc.CodecError):
            sc.parse_request(sc.Frame(msg_id, b""))


class ClientFrameSplitTests:
    @pytest.mark.parametrize("golden", g.ALL_REPLIES, ids=lambda b: b[:6].hex())
    def test_every_chunk_size(self, golden: bytes) -> None:
        """The client's own splitter yields each golden reply whole in every chunk size."""
        for size in range(1, len(golden) + 1):
            buf, frames = bytearray(), []
            for i in range(0, len(golden), size):
                buf += golden[i:i + size]
                frames += split_frames(buf)
            assert frames == [(golden[0], golden[5:])]
            assert not buf

    def test_request_ids(self) -> None:
        """Replies are matched by request id; consume's sits after header_length."""
        assert tc.reply_request_id(1, g.PRODUCE_4_REPLY[5:]) == 4
        assert tc.reply_request_id(2, g.CONSUME_8_REPLY[5:]) == 8
        assert tc.reply_request_id(6, g.DISCOVER_9_REPLY[5:]) == 9
        assert tc.reply_request_id(3, b"") is None
