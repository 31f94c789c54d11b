"""Framing tests: ``LineSplitter`` feeds the codec the same lines however the bytes arrive.

Each fixture is fed in every chunk size from 1 byte to its full length (Twisted's
test_basic ``test_buffer`` habit), and the resulting commands must be identical. The
splitter is also checked against Twisted's own ``LineReceiver`` (``delimiter = b"\\n"``),
whose rules it follows except that the ``\\r`` of a ``\\r\\n`` terminator does not count
toward the line length limit (the spec measures lines without their terminator).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from twisted.internet.testing import StringTransport
from twisted.protocols.basic import LineReceiver

from broker.v1.codec import (
    LINE_TOO_LONG_REPLY,
    Codec,
    CommandError,
    Consume,
    Join,
    LineSplitter,
    LineTooLong,
    Ping,
    Produce,
)
from broker.v1.codec.framing import LineFramer
from broker.v1.errors import code_for

CODEC = Codec()

PIPELINED = (
    b"V1|1|PING|\n"
    b"V1|42|PRODUCE|orders user1:created\r\n"
    b"\n"
    b"\r\n"
    b"V1|43|PRODUCE|orders   user1:paid    acks=all\n"
    b"hello\n"
    b"V1|44|CONSUME|orders 2 0\n"
    b"V1|45|JOIN|analytics orders consumer-a\r\n"
    b"V1|46|PRODUCE|orders k:\xc3\xa9t\xc3\xa9\n"
    b"V1|47|NOPE|\n"
)
PIPELINED_EXPECTED: list[object] = [
    Ping("1"),
    Produce("42", "orders", "user1", b"created"),
    Produce("43", "orders", "user1", b"paid", "all"),
    ("0", "BAD_REQUEST"),
    Consume("44", "orders", 2, 0),
    Join("45", "analytics", "orders", "consumer-a"),
    Produce("46", "orders", "k", "\u00e9t\u00e9".encode()),
    ("47", "UNKNOWN_COMMAND"),
]


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def run(data: bytes, size: int, max_line_bytes: int = 1 << 20) -> list[object]:
    """Feed ``data`` in ``size``-byte chunks; return what the broker would act on, in order."""
    splitter = LineSplitter(max_line_bytes)
    results: list[object] = []
    for chunk in chunks(data, size):
        for line in splitter.feed(chunk):
            if isinstance(line, LineTooLong):
                results.append(LINE_TOO_LONG_REPLY)
                continue
            try:
                command = CODEC.parse_command(line)
            except CommandError as exc:
                results.append((exc.cid, code_for(exc.error)))
            else:
                if command is not None:
                    results.append(command)
    return results


class _Recorder(LineReceiver):
    delimiter = b"\n"

    def __init__(self, max_length: int) -> None:
        self.MAX_LENGTH = max_length
        self.seen: list[bytes | LineTooLong] = []

    def lineReceived(self, line: bytes) -> None:
        self.seen.append(line)

    def lineLengthExceeded(self, line: bytes) -> None:
        self.seen.append(LineTooLong())
        self.transport.loseConnection()


def twisted_lines(data: bytes, size: int, max_length: int) -> list[bytes | LineTooLong]:
    proto = _Recorder(max_length)
    transport = StringTransport()
    proto.makeConnection(transport)
    for chunk in chunks(data, size):
        if transport.disconnecting:  # a closing connection reads nothing more
            break
        proto.dataReceived(chunk)
    return proto.seen


def splitter_lines(data: bytes, size: int, max_length: int) -> list[bytes | LineTooLong]:
    splitter = LineSplitter(max_length)
    out: list[bytes | LineTooLong] = []
    for chunk in chunks(data, size):
        out.extend(splitter.feed(chunk))
    return out


class ChunkingTests:

    def test_every_chunk_size_gives_the_same_commands(self) -> None:
        """Pipelined requests (with \\r\\n, blank lines, errors) parse identically whether
        they arrive in one piece or split at every possible chunk size."""
        assert run(PIPELINED, len(PIPELINED)) == PIPELINED_EXPECTED
        for size in range(1, len(PIPELINED) + 1):
            assert run(PIPELINED, size) == PIPELINED_EXPECTED, size

    def test_unterminated_last_line_waits(self) -> None:
        """A line is only handed over once its \\n arrives."""
        splitter = LineSplitter(100)
        assert splitter.feed(b"V1|1|PI") == []
        assert splitter.feed(b"NG|") == []
        assert splitter.feed(b"\nV1|2|") == [b"V1|1|PING|"]
        assert splitter.feed(b"PING|\n") == [b"V1|2|PING|"]

    def test_carriage_return_is_kept_for_the_codec(self) -> None:
        """The splitter cuts at \\n only; the codec strips the one trailing \\r."""
        assert LineSplitter(100).feed(b"a\r\n\r\n") == [b"a\r", b"\r"]


class LineTooLongTests:

    def test_line_of_exactly_the_limit_is_accepted(self) -> None:
        """A line of max_line_bytes bytes (terminator not counted) is a normal line."""
        assert LineSplitter(10).feed(b"x" * 10 + b"\n") == [b"x" * 10]

    def test_one_byte_over_the_limit(self) -> None:
        """A line one byte over the limit yields LineTooLong after the lines before it."""
        assert LineSplitter(10).feed(b"ok\n" + b"x" * 11 + b"\nV1|1|PING|\n") == [
            b"ok",
            LineTooLong(),
        ]

    def test_unterminated_tail_over_the_limit_is_detected_early(self) -> None:
        """An over-long line is reported as soon as the buffer exceeds the limit, without
        waiting for a newline that may never come (memory stays bounded)."""
        splitter = LineSplitter(10)
        assert splitter.feed(b"x" * 10) == []
        assert splitter.feed(b"x") == [LineTooLong()]
        assert splitter.overflowed

    def test_nothing_after_line_too_long(self) -> None:
        """After LineTooLong the splitter produces no more lines (the connection is closing)."""
        splitter = LineSplitter(5)
        assert splitter.feed(b"123456\n") == [LineTooLong()]
        assert splitter.feed(b"V1|1|PING|\n") == []
        assert splitter.feed(b"\n\n") == []

    def test_reply_is_sent_once_in_every_chunking(self) -> None:
        """Requests before an over-long line are answered, then exactly one line-too-long
        answer, then nothing, whatever the chunk size."""
        data = b"V1|1|PING|\n" + b"V1|2|PRODUCE|t k:" + b"v" * 40 + b"\nV1|3|PING|\n"
        expected = [Ping("1"), LINE_TOO_LONG_REPLY]
        for size in range(1, len(data) + 1):
            assert run(data, size, max_line_bytes=30) == expected, size

    def test_the_crlf_terminator_is_not_counted(self) -> None:
        """The limit counts bytes without the terminator, and telnet's terminator is \\r\\n:
        a line of exactly the limit followed by \\r\\n is accepted (the codec strips the
        \\r), one more byte before the \\r is not."""
        assert LineSplitter(3).feed(b"abc\r\n") == [b"abc\r"]
        assert LineSplitter(3).feed(b"abcd\r\n") == [LineTooLong()]
        assert LineSplitter(3).feed(b"abcd\n") == [LineTooLong()]
        assert LineSplitter(3).feed(b"ab\r\r\n") == [b"ab\r\r"]  # only one \r is the terminator
        assert LineSplitter(3).feed(b"abc\r\r\n") == [LineTooLong()]

    def test_tail_waits_only_while_it_can_still_be_legal(self) -> None:
        """An unterminated tail one byte over the limit waits only if that byte is a \\r
        (the \\n may follow); any other extra byte is reported at once."""
        splitter = LineSplitter(3)
        assert splitter.feed(b"abc\r") == []
        assert splitter.feed(b"\n") == [b"abc\r"]
        assert splitter.feed(b"abc\r") == []
        assert splitter.feed(b"x") == [LineTooLong()]
        assert LineSplitter(3).feed(b"abcd") == [LineTooLong()]

    def test_limit_reply_is_the_same_for_crlf_in_every_chunking(self) -> None:
        """With \\r\\n terminators, lines at the limit pass and the first longer one is
        refused, whatever the chunk size."""
        data = b"V1|1|PING|\r\nV1|2|PING|x\r\nV1|3|PING|\r\n"
        expected = [Ping("1"), LINE_TOO_LONG_REPLY]
        for size in range(1, len(data) + 1):
            assert run(data, size, max_line_bytes=len(b"V1|1|PING|")) == expected, size

    @pytest.mark.parametrize("max_length", [0, 1, 5, 11, 12, 40])
    def test_same_lines_as_twisted_line_receiver(self, max_length: int) -> None:
        """Without \\r\\n terminators, LineSplitter hands over exactly the lines LineReceiver
        would and reports the over-long line at the same point, for every chunk size."""
        data = b"V1|1|PING|\n\nabc\n" + b"y" * 11 + b"\nV1|2|PING|\n" + b"z" * 20
        for size in range(1, len(data) + 1):
            assert splitter_lines(data, size, max_length) == twisted_lines(
                data, size, max_length
            ), (
                max_length,
                size,
            )

    def test_negative_limit_is_refused(self) -> None:
        """A negative line limit is a configuration error."""
        with pytest.raises(ValueError):
            LineSplitter(-1)


class TakeOneTests:
    """``LineFramer.take_one``: a read that is exactly one fast-path PRODUCE, on a framer
    holding nothing, is taken in one call; any other read is left untouched for ``feed``."""

    @staticmethod
    def framer(max_line: int = 1024) -> LineFramer:
        return LineFramer(max_line, CODEC.scan_produce)

    def test_one_plain_produce_is_taken_and_nothing_stays(self) -> None:
        framer = self.framer()
        one = framer.take_one(b"V1|7|PRODUCE|orders user1:paid\n")
        assert one is not None and one[:5] == (b"7", b"orders", b"user1", b"paid", "1")
        assert framer.buffered == 0 and framer.at_end
        assert framer.take_one(b"V1|8|PRODUCE|orders user2:sent acks=all\n")[:5] == (
            b"8", b"orders", b"user2", b"sent", "all")

    @pytest.mark.parametrize("read", [
        b"V1|1|PRODUCE|orders a:1\nV1|2|PRODUCE|orders b:2\n",  # two requests
        b"V1|1|PRODUCE|orders a:1",  # no line feed yet
        b"V1|1|PING|\n",  # not a plain PRODUCE
        b"V1|1|PRODUCE|orders a:1\nV1|2|PI",  # one and a part
    ])
    def test_any_other_read_is_left_to_feed(self, read: bytes) -> None:
        framer = self.framer()
        assert framer.take_one(read) is None
        assert framer.buffered == 0
        framer.feed(read)  # the usual way still sees every byte
        assert framer.buffered == len(read)

    def test_not_taken_when_bytes_wait_from_an_earlier_read(self) -> None:
        framer = self.framer()
        framer.feed(b"V1|1|PRODUCE|orders a:")
        assert framer.take_one(b"V1|2|PRODUCE|orders b:2\n") is None
        assert framer.buffered == len(b"V1|1|PRODUCE|orders a:")

    def test_a_line_over_the_limit_is_not_taken(self) -> None:
        line = b"V1|1|PRODUCE|orders a:" + b"x" * 40 + b"\n"
        assert self.framer(max_line=30).take_one(line) is None
        assert self.framer(max_line=len(line)).take_one(line) is not None
