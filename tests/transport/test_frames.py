"""The kit's length-prefixed splitter (``broker.transport.frames``) under the three heads
that use it (Kafka, TANK, Iggy): any chunking gives the same frames, a refused length ends
the stream, and nothing is read after it."""

from __future__ import annotations

import struct

import pytest

from broker.iggy.codec import FrameRefused, request_splitter
from broker.kafka.codec import FrameSplitter as KafkaSplitter
from broker.kafka.codec import FrameTooLarge as KafkaTooLarge
from broker.tank.codec import Frame, FrameTooLarge, encode_frame
from broker.tank.codec import FrameSplitter as TankSplitter
from broker.transport.frames import FrameSplitter


def chunked(splitter: FrameSplitter, data: bytes, size: int) -> list[object]:
    out: list[object] = []
    for i in range(0, len(data), size):
        out += splitter.feed(data[i:i + size])
    return out


def iggy_request(code: int, payload: bytes) -> bytes:
    return struct.pack("<II", 4 + len(payload), code) + payload


KAFKA = b"".join(struct.pack(">i", len(b)) + b for b in (b"abc", b"", b"x" * 300))
TANK = encode_frame(1, b"hello") + encode_frame(3, b"") + encode_frame(2, b"y" * 70)
IGGY = iggy_request(1, b"") + iggy_request(302, b"payload") + iggy_request(9, b"z" * 90)


class SplitterTests:
    @pytest.mark.parametrize("size", range(1, 40))
    def test_every_chunk_size_gives_the_same_frames(self, size: int) -> None:
        """Bytes fed one at a time, or in any chunk size, give the same whole frames in
        order, and nothing stays buffered after the last."""
        kafka = KafkaSplitter()
        assert chunked(kafka, KAFKA, size) == [b"abc", b"", b"x" * 300]
        tank = TankSplitter()
        assert chunked(tank, TANK, size) == [Frame(1, b"hello"), Frame(3, b""),
                                             Frame(2, b"y" * 70)]
        iggy = request_splitter(1000)
        assert chunked(iggy, IGGY, size) == [(1, b""), (302, b"payload"), (9, b"z" * 90)]
        assert kafka.buffered == tank.buffered == iggy.buffered == 0

    def test_a_partial_frame_waits(self) -> None:
        """A frame whose length announces more than has arrived waits for the rest."""
        s = KafkaSplitter()
        assert s.feed(b"\x00\x00\x00\x05ab") == []
        assert s.buffered == 6
        assert s.feed(b"cde") == [b"abcde"]

    def test_over_the_limit_is_refused_and_ends_the_stream(self) -> None:
        """The frames before an over-long one are returned, then the transport's refusal;
        later bytes are ignored (the stream cannot be re-synchronised)."""
        s = KafkaSplitter(max_frame_bytes=10)
        frames = s.feed(struct.pack(">i", 2) + b"ok" + struct.pack(">i", 11) + b"x" * 11)
        assert frames == [b"ok", KafkaTooLarge(11, 10)]
        assert s.feed(struct.pack(">i", 1) + b"z") == []
        t = TankSplitter(max_frame_size=4)
        assert t.feed(encode_frame(2, b"12345")) == [FrameTooLarge(2, 5, 4)]
        assert t.broken == FrameTooLarge(2, 5, 4)

    def test_a_length_that_cannot_hold_what_it_counts_is_refused(self) -> None:
        """Iggy's length counts the 4-byte code: a length under 4 (or a negative Kafka
        size) is refused, not read as a frame."""
        assert request_splitter(100).feed(struct.pack("<II", 3, 1)) == [FrameRefused(3, 100)]
        assert KafkaSplitter().feed(struct.pack(">i", -1)) == [KafkaTooLarge(-1, 16 << 20)]

    def test_exactly_the_limit_passes(self) -> None:
        """A body of exactly the limit is a frame; one byte more is refused."""
        assert request_splitter(3).feed(iggy_request(5, b"abc")) == [(5, b"abc")]
        assert request_splitter(3).feed(iggy_request(5, b"abcd")) == [FrameRefused(8, 3)]

    def test_a_negative_limit_is_a_programming_error(self) -> None:
        """A limit below zero is refused when the splitter is built."""
        with pytest.raises(ValueError):
            FrameSplitter(struct.Struct(">i"), 0, -1, frame=lambda h, b: b,
                          refuse=lambda h, n: None)
