"""The frame splitter and the response frame: every golden request fed in every chunk size
from 1 byte up, the bounded frame size, and the codec's import rule (no Twisted, no core)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker.kafka import codec as c
from tests.kafka.test_requests import GOLDEN_REQUESTS

STREAM = b"".join(frame for _, frame, _ in GOLDEN_REQUESTS)
EXPECTED = [expected for _, _, expected in GOLDEN_REQUESTS]


def split(splitter: c.FrameSplitter, data: bytes, chunk: int) -> list[object]:
    out: list[object] = []
    for i in range(0, len(data), chunk):
        out.extend(splitter.feed(data[i:i + chunk]))
    return out


class FrameSplitterTests:
    @pytest.mark.parametrize("name, frame, expected", GOLDEN_REQUESTS,
                             ids=[g[0] for g in GOLDEN_REQUESTS])
    def test_every_chunk_size(self, name: str, frame: bytes, expected: object) -> None:
        """One golden request fed in chunks of 1 .. len bytes gives exactly one frame, which
        parses into the expected request, and leaves nothing buffered."""
        for chunk in range(1, len(frame) + 1):
            splitter = c.FrameSplitter()
            frames = split(splitter, frame, chunk)
            assert frames == [frame[4:]], chunk
            assert c.parse_request(frames[0]) == expected
            assert splitter.buffered == 0

    def test_pipelined_stream(self) -> None:
        """All goldens back to back (clients pipeline), in every chunk size: the requests
        come out in order."""
        for chunk in range(1, len(STREAM) + 1):
            frames = split(c.FrameSplitter(), STREAM, chunk)
            assert [c.parse_request(f) for f in frames] == EXPECTED, chunk

    def test_empty_frame(self) -> None:
        """A zero size is a frame (an empty one), which the parser calls malformed."""
        (frame,) = c.FrameSplitter().feed(b"\x00\x00\x00\x00")
        assert frame == b""
        result = c.parse_request(frame)
        assert isinstance(result, c.MalformedRequest) and result.header is None

    def test_too_large(self) -> None:
        """A size over the limit ends the output with ``FrameTooLarge``, after the frames
        before it; the splitter then yields nothing, whatever it is fed."""
        splitter = c.FrameSplitter(max_frame_bytes=100)
        good = GOLDEN_REQUESTS[-2][1]  # ApiVersions v0, 27 bytes
        out = splitter.feed(good + b"\x00\x00\x00\x65" + b"x" * 10)
        assert out == [good[4:], c.FrameTooLarge(101, 100)]
        assert str(out[1]) == "frame of 101 bytes is over the 100-byte limit"
        assert splitter.feed(good) == []

    def test_limit_is_inclusive(self) -> None:
        """A frame of exactly the limit passes."""
        assert c.FrameSplitter(max_frame_bytes=3).feed(b"\x00\x00\x00\x03abc") == [b"abc"]

    def test_too_large_before_the_body_arrives(self) -> None:
        """The size is refused as soon as its 4 bytes are in, one byte at a time included:
        the splitter never waits for (or buffers) an oversized body."""
        splitter = c.FrameSplitter()
        out = split(splitter, (c.DEFAULT_MAX_FRAME_BYTES + 1).to_bytes(4, "big"), 1)
        assert out == [c.FrameTooLarge(c.DEFAULT_MAX_FRAME_BYTES + 1, c.DEFAULT_MAX_FRAME_BYTES)]
        assert splitter.buffered == 0

    def test_negative_size(self) -> None:
        """Sizes are signed int32: a negative one is refused too."""
        (err,) = c.FrameSplitter().feed(b"\xff\xff\xff\xfe")
        assert err == c.FrameTooLarge(-2, c.DEFAULT_MAX_FRAME_BYTES)
        assert str(err) == "negative frame size -2"

    def test_default_limit(self) -> None:
        """The default bound is the Iggy listener's 16 MiB."""
        assert c.FrameSplitter().max_frame_bytes == 16 * 1024 * 1024 == c.DEFAULT_MAX_FRAME_BYTES


class ResponseFrameTests:
    def test_frame_response(self) -> None:
        """Response header v0: size (counting the correlation id), correlation id, body."""
        assert c.frame_response(5, b"\x00\x00") == bytes.fromhex("00000006 00000005 0000")


class PurityTests:
    def test_no_twisted_no_core(self) -> None:
        """Importing the codec loads neither Twisted nor Skerry's core, store or groups."""
        code = ("import sys, broker.kafka.codec; "
                "bad = [m for m in sys.modules if m.split('.')[0] in "
                "('twisted', 'data', 'groups', 'replication') or m.startswith('broker.core')]; "
                "print(bad); sys.exit(1 if bad else 0)")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
