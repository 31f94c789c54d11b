"""The Iggy transport's framing over an in-memory connection: chunked frames, pipelining
and reply order, one request at a time, malformed and oversized frames, flow control,
the connection limit and the idle timeout."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.defer import Deferred

from tests.iggy.harness import Harness, err, frame, ident, name8, ok, u32


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    harness = Harness(tmp_path, {"limits": {"max_connections": 3, "idle_timeout_ms": 5000}})
    yield harness
    harness.close()


class FramingTests:
    def test_a_frame_in_chunks_of_every_size(self, h):
        """Requests delivered in chunks of any size from 1 byte up get the same replies."""
        conn = h.connect(login=True)
        request = frame(200, ident("default")) + frame(1) + frame(301, ident(0))
        conn.send_raw(request)
        expected = conn.replies()
        assert len(expected) == 3 and expected[0][:4] == u32(0)
        for size in range(1, len(request) + 1):
            for i in range(0, len(request), size):
                conn.send_raw(request[i:i + size])
            assert conn.replies() == expected, size

    def test_pipelined_requests_are_answered_in_order(self, h):
        """Many requests in one write are answered in request order, each with its own
        reply (login first, then commands that need it)."""
        conn = h.connect()
        burst = (frame(1) + frame(38, name8("iggy") + name8("iggy") + u32(0) + u32(0))
                 + frame(202, name8("p")) + frame(999) + frame(200, ident(1)) + frame(1)
                 + frame(200, b"\x01\x03"))
        conn.send_raw(burst)
        got = conn.replies()
        assert [r[:4] for r in got] == [u32(0), u32(0), u32(0), u32(3), u32(0), u32(0), u32(6)]
        assert got[4][8:12] == u32(1)

    def test_malformed_payloads_get_a_status_and_the_connection_stays(self, h):
        """Truncated identifiers, bad kinds, trailing bytes and unknown codes are answered
        with a status; the next request on the same connection is served."""
        conn = h.connect(login=True)
        assert conn.request(200, b"\x01") == err(4)
        assert conn.request(200, b"\x01\x04\x00") == err(4)
        assert conn.request(200, b"\x03\x01a") == err(6)
        assert conn.request(200, b"\x01\x02\x00\x00") == err(6)
        assert conn.request(200, ident(0) + b"\x00") == err(4)
        assert conn.request(4242) == err(3)
        assert conn.request(1) == ok()
        assert not conn.closed

    def test_short_and_oversized_frames_close_only_that_connection(self, h):
        """A length that cannot hold a code, or a frame over iggy.max_frame_bytes, gets an
        error status and closes that connection; other clients carry on."""
        bystander = h.connect(login=True)
        short = h.connect()
        short.send_raw(b"\x02\x00\x00\x00\x01\x00\x00\x00")
        assert short.replies() == [err(4)] and short.closed
        big = h.connect()
        big.send_raw(u32(h.config["iggy.max_frame_bytes"] + 5) + u32(1))
        assert big.replies() == [err(3)] and big.closed
        assert bystander.request(1) == ok()

    def test_a_length_that_promises_more_waits_for_it(self, h):
        """A frame whose length says more bytes follow is held until they arrive."""
        conn = h.connect(login=True)
        data = frame(202, name8("late"))
        conn.send_raw(data[:-2])
        assert conn.replies() == []
        conn.send_raw(data[-2:])
        assert conn.replies()[0][:4] == u32(0)


class _Gate:
    """A run_in_thread that holds every job until ``release``."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Callable[[], Any], Deferred[Any]]] = []

    def __call__(self, function: Callable[[], Any]) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self.jobs.append((function, d))
        return d

    def release(self) -> None:
        jobs, self.jobs = self.jobs, []
        for function, d in jobs:
            d.callback(function())


class OrderingTests:
    def test_one_request_at_a_time(self, h):
        """While a reply waits (a login hashing its password off the reactor), the
        connection stops reading and later requests wait; then they run in order."""
        gate = _Gate()
        h.service.handlers.run_in_thread = gate
        conn = h.connect()
        conn.send_raw(frame(38, name8("iggy") + name8("iggy") + u32(0) + u32(0))
                      + frame(202, name8("after-login")) + frame(1))
        assert conn.replies() == []
        assert conn.transport.producerState == "paused"
        gate.release()
        h.pump()
        got = conn.replies()
        assert [r[:4] for r in got] == [u32(0), u32(0), u32(0)]
        assert conn.transport.producerState == "producing"
        assert h.service.catalog.stream("after-login") is not None


class FlowControlTests:
    def test_a_client_that_does_not_read_is_paused(self, h):
        """When the transport asks the connection to pause (the client reads no replies),
        buffered requests wait; resuming serves them."""
        conn = h.connect(login=True)
        conn.proto.pauseProducing()
        conn.send_raw(frame(1) + frame(1))
        assert conn.replies() == []
        conn.proto.resumeProducing()
        assert conn.replies() == [ok(), ok()]


class LimitTests:
    def test_connection_limit(self, h):
        """Connections beyond limits.max_connections get an error status and are closed."""
        conns = [h.connect() for _ in range(3)]
        extra = h.connect()
        assert extra.replies() == [err(1)] and extra.closed
        conns[0].close()
        assert h.connect().request(1) == ok()

    def test_idle_connections_are_closed(self, h):
        """A connection silent for limits.idle_timeout_ms is closed; traffic resets it."""
        quiet = h.connect()
        busy = h.connect()
        for _ in range(4):
            h.advance(2.0)
            busy.request(1)
        assert quiet.closed and not busy.closed


class HalfCloseTests:
    def test_a_waiting_reply_and_the_frames_behind_it_are_answered_then_closed(self, h):
        """After the client's half-close, a login still hashing its password and the
        frames behind it are answered in order; only then is the connection closed, and it
        never asks the transport to read again after the EOF."""
        gate = _Gate()
        h.service.handlers.run_in_thread = gate
        conn = h.connect()
        conn.send_raw(frame(38, name8("iggy") + name8("iggy") + u32(0) + u32(0))
                      + frame(202, name8("half-closed")) + frame(1))
        conn.proto.readConnectionLost()
        assert conn.replies() == [] and not conn.closed
        assert not h.service.factory.all_idle()
        gate.release()
        h.pump()
        got = conn.replies()
        assert [r[:4] for r in got] == [u32(0), u32(0), u32(0)]
        assert conn.closed
        assert conn.transport.producer is None  # a paused producer cannot hold the close
        assert conn.transport.producerState == "paused"  # not resumed after the EOF
        assert h.service.catalog.stream("half-closed") is not None

    def test_nothing_outstanding_closes_at_once(self, h):
        """A half-close with every request answered (or none sent) closes at once."""
        conn = h.connect()
        conn.send_raw(frame(1))
        conn.proto.readConnectionLost()
        assert conn.replies() == [ok()] and conn.closed
        silent = h.connect()
        silent.proto.readConnectionLost()
        assert silent.closed

    def test_a_partial_frame_at_the_end_is_dropped(self, h):
        """A frame cut short by the half-close is not run; the ones before it are answered."""
        conn = h.connect(login=True)
        conn.send_raw(frame(1) + frame(202, name8("cut-short"))[:-3])
        conn.proto.readConnectionLost()
        assert conn.replies() == [ok()] and conn.closed
        assert h.service.catalog.stream("cut-short") is None

    def test_a_paused_connection_answers_its_buffered_frames_then_closes(self, h):
        """Frames buffered while the client does not read are answered once it reads
        again, then the connection closes."""
        conn = h.connect(login=True)
        conn.proto.pauseProducing()
        conn.send_raw(frame(1) + frame(1))
        conn.proto.readConnectionLost()
        assert conn.replies() == [] and not conn.closed
        conn.proto.resumeProducing()
        assert conn.replies() == [ok(), ok()] and conn.closed
