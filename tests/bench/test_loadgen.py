"""The benchmark load generator: reply codecs, and short real loads against a responder.

The codec tests feed each reply stream in every chunk size, as the TCP stack may split it.
The smoke tests run the generator for about a second (the request/response one) or less
against the canned-reply responder of ``bench.echo`` on the same asyncio loop, on
127.0.0.1, and check that what it counts is positive and consistent with what the
responder answered.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bench.echo import CannedResponder, canned_reply, request_marker
from bench.loadgen import (
    LoadResult,
    LoadSpec,
    ReplyError,
    RespConsumeCodec,
    RespReplyCounter,
    V1ConsumeCodec,
    V1ReplyCounter,
    make_value,
    merge_results,
    resp_xadd_request,
    run_async,
    v1_produce_request,
)


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


class RequestTests:
    def test_value_is_a_plain_v1_value_of_the_asked_size(self) -> None:
        """Benchmark values have the configured size and none of the bytes V1 refuses in a
        plain value (whitespace, ``|``, ``,``) nor CR/LF."""
        for size in (0, 1, 100, 1000):
            value = make_value(size)
            assert len(value) == size
            assert not set(value) & set(b" \t\r\n|,")

    def test_requests_are_one_v1_line_and_one_resp_array(self) -> None:
        """A PRODUCE request is one V1 line; an XADD request is a RESP array of bulk strings
        with an auto id."""
        value = make_value(10)
        assert v1_produce_request("7", "bench", "k7", value) == (
            b"V1|7|PRODUCE|bench k7:" + value + b"\n")
        assert v1_produce_request("7", "t", "k", b"x", acks="all") == (
            b"V1|7|PRODUCE|t k:x acks=all\n")
        assert resp_xadd_request("s", b"abc") == (
            b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$1\r\nv\r\n$3\r\nabc\r\n")


class ReplyCounterTests:
    V1_STREAM = b"".join(b"V1|%d|OK|partition=0 offset=%d hw=%d\n" % (i, i, i)
                         for i in range(7))
    RESP_STREAM = b"".join(b"$%d\r\n%s\r\n" % (len(i), i)
                           for i in (b"1700000000000-%d" % n for n in (0, 9, 10, 123, 4)))

    def test_v1_every_chunk_size_counts_every_reply(self) -> None:
        """However the reply lines are split, the V1 counter counts each exactly once."""
        for size in range(1, len(self.V1_STREAM) + 1):
            counter = V1ReplyCounter()
            counts = [counter.feed(c) for c in _chunks(self.V1_STREAM, size)]
            assert sum(counts) == 7, size
            assert counter.errors == 0

    def test_v1_error_reply_is_counted_and_kept(self) -> None:
        """An ``ERR`` line counts as a reply and as an error, and its text is kept."""
        stream = self.V1_STREAM + b"V1|9|ERR|BAD_REQUEST|message must be key:value\n"
        for size in range(1, len(stream) + 1):
            counter = V1ReplyCounter()
            assert sum(counter.feed(c) for c in _chunks(stream, size)) == 8
            assert counter.errors == 1
            assert counter.first_error == "V1|9|ERR|BAD_REQUEST|message must be key:value"

    def test_v1_counter_refuses_a_non_v1_stream(self) -> None:
        """Lines that are not V1 replies are refused instead of being counted."""
        with pytest.raises(ReplyError):
            V1ReplyCounter().feed(b"+OK\r\n")

    def test_resp_bulk_replies_every_chunk_size(self) -> None:
        """XADD's bulk-string replies are counted exactly once whatever the split."""
        for size in range(1, len(self.RESP_STREAM) + 1):
            counter = RespReplyCounter()
            assert sum(counter.feed(c) for c in _chunks(self.RESP_STREAM, size)) == 5, size
            assert counter.errors == 0

    def test_resp_other_replies_are_walked_exactly(self) -> None:
        """Errors, nulls, integers, simple strings, arrays and bulk strings holding CRLF or
        ``$`` are each one reply; the error is counted and kept."""
        stream = (b"$15\r\n1700000000000-0\r\n-ERR wrong $ type\r\n$-1\r\n:42\r\n+OK\r\n"
                  b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n$6\r\na\r\n$bc\r\n$15\r\n1700000000000-1\r\n")
        for size in range(1, len(stream) + 1):
            counter = RespReplyCounter()
            assert sum(counter.feed(c) for c in _chunks(stream, size)) == 8, size
            assert counter.errors == 1
            assert counter.first_error == "ERR wrong $ type"


class ConsumeCodecTests:
    def test_v1_batch_count_and_next_offset(self) -> None:
        """A CONSUME reply gives its message count and continues after its last offset; an
        empty one starts the walk again from offset 0."""
        reply = canned_reply("v1", "consume", batch=5, value_size=20)
        for size in range(1, len(reply) + 1):
            codec = V1ConsumeCodec("bench", 0, 5)
            outs = [codec.feed(c) for c in _chunks(reply, size)]
            assert outs[:-1] == [None] * (len(outs) - 1)
            assert outs[-1] == (5, 5)
        codec = V1ConsumeCodec("bench", 0, 5)
        assert codec.feed(b"V1|c|OK|messages= hw=41\n") == (0, 0)
        assert codec.feed(b"V1|c|OK|messages=41:x hw=41\n") == (1, 42)
        assert codec.request(42) == b"V1|c|CONSUME|bench 0 42 max=5\n"

    def test_v1_error_is_refused(self) -> None:
        """An error answer to CONSUME stops the walk with the server's words."""
        with pytest.raises(ReplyError, match="BAD_REQUEST"):
            V1ConsumeCodec("bench", 0, 5).feed(b"V1|c|ERR|BAD_REQUEST|partition out of range\n")

    def test_resp_batch_count_and_next_id(self) -> None:
        """An XRANGE reply gives its entry count and the exclusive start after its last id,
        whatever the split; an empty one starts again from ``-``."""
        reply = canned_reply("resp", "consume", batch=4, value_size=12)
        for size in range(1, len(reply) + 1):
            codec = RespConsumeCodec("bench", 4, 12)
            outs = [codec.feed(c) for c in _chunks(reply, size)]
            assert outs[:-1] == [None] * (len(outs) - 1), size
            assert outs[-1] == (4, b"(1700000000000-3")
        codec = RespConsumeCodec("bench", 4, 12)
        assert codec.feed(b"*0\r\n") == (0, b"-")
        assert codec.request(b"(1-2") == (
            b"*6\r\n$6\r\nXRANGE\r\n$5\r\nbench\r\n$4\r\n(1-2\r\n$1\r\n+\r\n"
            b"$5\r\nCOUNT\r\n$1\r\n4\r\n")

    def test_resp_reply_of_another_shape_is_never_counted(self) -> None:
        """An error is refused; entries of another shape are refused once the reply is
        longer than the announced entries could be, and never taken as a complete batch."""
        with pytest.raises(ReplyError, match="WRONGTYPE"):
            RespConsumeCodec("s", 4, 12).feed(b"-WRONGTYPE Operation against a key\r\n")
        other_size = b"*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nv\r\n$3\r\nabc\r\n"
        assert RespConsumeCodec("s", 1, 12).feed(other_size) is None
        many_fields = (b"*1\r\n*2\r\n$3\r\n1-1\r\n*40\r\n"
                       + b"$1\r\nw\r\n$12\r\n0123456789ab\r\n" * 20)
        codec = RespConsumeCodec("s", 1, 12)
        with pytest.raises(ReplyError, match="longer"):
            for chunk in _chunks(many_fields, 16):
                assert codec.feed(chunk) is None


def _run_against_responder(spec_args: dict[str, Any], reply: bytes,
                           marker: bytes) -> tuple[LoadResult, int]:
    """Serve ``reply`` per ``marker`` on a free port, run the load, return what both saw."""

    async def go() -> tuple[LoadResult, int]:
        responders: list[CannedResponder] = []

        def build() -> CannedResponder:
            responders.append(CannedResponder(marker, reply))
            return responders[-1]

        server = await asyncio.get_running_loop().create_server(build, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            result = await run_async(LoadSpec(port=port, **spec_args))
        finally:
            server.close()
        return result, sum(r.answered for r in responders)

    return asyncio.run(go())


class SmokeTests:
    def test_request_response_for_about_a_second(self) -> None:
        """Four request/response connections for ~1 s: a positive count, one latency per
        counted reply, a rate equal to count / window, and never more counted than the
        responder answered."""
        result, answered = _run_against_responder(
            {"protocol": "v1", "connections": 4, "inflight": 1, "duration_s": 1.0,
             "warmup_s": 0.1}, canned_reply("v1", "produce"), request_marker("v1", "produce"))
        assert result.errors == 0 and result.first_error is None
        assert result.requests > 100
        assert result.messages == result.requests
        assert 0.9 < result.window_s < 1.5
        assert result.requests_per_s == pytest.approx(result.requests / result.window_s)
        assert sum(result.latency_us.values()) == result.requests
        assert result.requests <= answered
        assert result.undrained == 0

    def test_pipelined_resp_stops_at_the_request_budget(self) -> None:
        """A pipelined RESP load with a request budget stops by itself once that many were
        sent and answered, long before its time is up, and counts each exactly once."""
        result, answered = _run_against_responder(
            {"protocol": "resp", "connections": 2, "inflight": 100, "duration_s": 30.0,
             "warmup_s": 0.0, "max_requests": 5_000},
            canned_reply("resp", "produce"), request_marker("resp", "produce"))
        assert result.errors == 0
        assert result.requests == 5_000 == answered
        assert sum(result.latency_us.values()) == 5_000
        assert result.window_s < 10.0

    @pytest.mark.parametrize("protocol", ["v1", "resp"])
    def test_consume_counts_messages_per_batch(self, protocol: str) -> None:
        """A consume load counts ``batch`` messages for every full batch it reads."""
        result, answered = _run_against_responder(
            {"protocol": protocol, "mode": "consume", "batch": 50, "value_size": 30,
             "duration_s": 0.3, "warmup_s": 0.05},
            canned_reply(protocol, "consume", batch=50, value_size=30),
            request_marker(protocol, "consume"))
        assert result.errors == 0
        assert result.requests > 0
        assert result.messages == 50 * result.requests
        assert result.requests <= answered

    def test_error_reply_stops_the_load(self) -> None:
        """A server that answers with errors stops the load at once, with its error kept,
        instead of being counted as throughput."""
        result, _ = _run_against_responder(
            {"protocol": "v1", "connections": 2, "duration_s": 30.0, "warmup_s": 0.0},
            b"V1|0|ERR|BAD_REQUEST|unknown topic\n", b"\n")
        assert result.errors >= 1
        assert result.first_error is not None and "BAD_REQUEST" in result.first_error
        assert result.requests == 0
        assert result.window_s < 10.0

    def test_more_replies_than_requests_stops_the_load(self) -> None:
        """A server answering each request twice is caught, not counted as twice the
        throughput."""
        reply = canned_reply("v1", "produce")
        result, _ = _run_against_responder(
            {"protocol": "v1", "connections": 1, "duration_s": 30.0, "warmup_s": 0.0},
            reply + reply, b"\n")
        assert result.errors >= 1
        assert result.first_error is not None and "outstanding" in result.first_error
        assert result.window_s < 10.0

    def test_merged_processes_add_up(self) -> None:
        """Results of several load processes add counts, rates and latency tallies."""
        a = LoadResult("v1", "produce", 2, 1, 1, "asyncio", 1.0, 10, 10, 10.0, 10.0,
                       latency_us={5: 4, 7: 6})
        b = LoadResult("v1", "produce", 3, 1, 1, "asyncio", 1.2, 20, 20, 16.0, 16.0,
                       latency_us={5: 1, 9: 19})
        merged = merge_results([a, b])
        assert (merged.connections, merged.processes, merged.requests) == (5, 2, 30)
        assert merged.requests_per_s == 26.0
        assert merged.latency_us == {5: 5, 7: 6, 9: 19}
