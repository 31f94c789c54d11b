"""The load generator: one client, two wire protocols (Skerry V1 lines and Redis RESP).

Owns: encoding the benchmark requests once up front (PRODUCE / XADD, CONSUME / XRANGE),
counting replies with as little per-message Python as possible, the connection loops
(request/response, pipelined, batch consume), the measurement window (warm-up, time and
count bounds, drain), per-request latency tallies (read out through an HDR histogram), and
fanning a load out over several processes. Both protocols go through the same client
classes; only the small reply codecs differ, so neither server gets a better client.

Reply codecs (the encoders, counters and codecs themselves are ``bench.loadgen_wire``):

- V1 produce: replies are lines; count ``b"\\n"`` with ``bytes.count`` and look for
  ``|ERR|`` in the same pass (a V1 reply payload can never contain ``|``).
- RESP produce: XADD answers a bulk string (the entry id). A run of them is counted from
  its line count (two lines per reply) after C-speed checks that every line pairs up as
  ``$<len>`` + id and that no line is an error; anything else (an error, another reply
  type) is walked frame by frame with bulk lengths honoured. Errors are counted.
- Consume: a V1 CONSUME reply is one line: the count is its commas plus one and the next
  offset follows the last one. An XRANGE reply ``*N`` is complete when it ends with a whole
  value right after the N-th ``[id, [v, value]]`` entry: the tail is checked, then the
  entries counted once; the last id is where the next request continues. This relies on
  what the benchmark itself wrote (one field ``v`` per entry, values of the configured
  size without CR/LF), and refuses a reply of any other shape.

Time: the loops run on a real event loop (the point is to measure it), and every loop ends
by itself: at the end of the window, when the request budget is spent, or after the drain
timeout; the smoke test runs it for about a second against an in-process responder.

Must not import: broker internals (``broker``, ``groups``, ``replication``, ``data``).
"""

from __future__ import annotations

import abc
import argparse
import asyncio
import concurrent.futures
import dataclasses
import json
import multiprocessing
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.loadgen_wire import (
    ConsumeCodec,
    ReplyCounter,
    ReplyError,
    RespConsumeCodec,
    RespReplyCounter,
    V1ConsumeCodec,
    V1ReplyCounter,
    make_value,
    resp_command,
    resp_xadd_request,
    v1_produce_request,
)

__all__ = [
    "LoadSpec",
    "LoadResult",
    "ReplyError",
    "ReplyCounter",
    "ConsumeCodec",
    "V1ReplyCounter",
    "RespReplyCounter",
    "V1ConsumeCodec",
    "RespConsumeCodec",
    "make_value",
    "v1_produce_request",
    "resp_command",
    "resp_xadd_request",
    "merge_results",
    "run_async",
    "run",
    "main",
]

ProtocolName = Literal["v1", "resp"]
ModeName = Literal["produce", "consume"]

#: Latencies are recorded in microseconds, from 1 µs to one minute, 3 significant digits.
HIST_LOWEST_US = 1
HIST_HIGHEST_US = 60_000_000
HIST_DIGITS = 3





# ------------------------------------------------------------------------- requests












# ------------------------------------------------------------------------- reply codecs
















# ------------------------------------------------------------------------- spec and result


@dataclass(frozen=True)
class LoadSpec:
    """One load: what to send, how many connections, how long.

    ``mode="produce"`` keeps ``inflight`` requests outstanding on each connection
    (``inflight=1`` is request/response); ``mode="consume"`` walks ``topic`` partition 0
    (or the stream) in batches of ``batch``, one request outstanding per connection, and
    starts again from the beginning at the end. The load stops at ``warmup_s +
    duration_s``, or once ``max_requests`` were sent and answered, whichever is first.
    """

    protocol: ProtocolName
    port: int
    host: str = "127.0.0.1"
    mode: ModeName = "produce"
    connections: int = 1
    inflight: int = 1
    duration_s: float = 5.0
    warmup_s: float = 0.5
    max_requests: int = 50_000_000
    value_size: int = 100
    topic: str = "bench"
    partition: int = 0
    batch: int = 1000
    acks: str | None = None
    processes: int = 1
    loop: Literal["auto", "uvloop", "asyncio"] = "auto"
    drain_timeout_s: float = 10.0
    connect_timeout_s: float = 10.0
    cpus: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.protocol not in ("v1", "resp"):
            raise ValueError(f"unknown protocol {self.protocol!r}")
        if self.mode not in ("produce", "consume"):
            raise ValueError(f"unknown mode {self.mode!r}")
        if self.connections < 1 or self.inflight < 1 or self.batch < 1:
            raise ValueError("connections, inflight and batch must be >= 1")
        if not 1 <= self.processes <= self.connections:
            raise ValueError("processes must be between 1 and the number of connections")
        if self.duration_s <= 0 or self.warmup_s < 0 or self.max_requests < 1:
            raise ValueError("duration_s > 0, warmup_s >= 0 and max_requests >= 1 required")


@dataclass
class LoadResult:
    """What one load measured inside its window (warm-up and drain excluded).

    ``messages`` equals ``requests`` for produce; for consume it counts messages read.
    Rates are summed over processes. ``latency_us`` tallies per-request latencies in whole
    microseconds (latency -> number of requests; pipelined requests included), exact and
    cheap to merge; the percentiles are read from an HDR histogram built from it.
    """

    protocol: str
    mode: str
    connections: int
    inflight: int
    processes: int
    loop: str
    window_s: float
    requests: int
    messages: int
    requests_per_s: float
    messages_per_s: float
    errors: int = 0
    first_error: str | None = None
    undrained: int = 0
    latency_us: dict[int, int] = field(default_factory=dict)

    def histogram(self) -> Any:
        """The latencies as an ``hdrh.histogram.HdrHistogram`` (µs, 3 significant digits)."""
        from hdrh.histogram import HdrHistogram

        hist = HdrHistogram(HIST_LOWEST_US, HIST_HIGHEST_US, HIST_DIGITS)
        for value, count in self.latency_us.items():
            hist.record_value(min(max(value, HIST_LOWEST_US), HIST_HIGHEST_US), count)
        return hist

    def percentiles(self) -> dict[str, float]:
        """Latency percentiles in milliseconds: p50, p99, p999, max (empty without data)."""
        if not self.latency_us:
            return {}
        hist = self.histogram()
        return {
            "p50": hist.get_value_at_percentile(50.0) / 1000.0,
            "p99": hist.get_value_at_percentile(99.0) / 1000.0,
            "p999": hist.get_value_at_percentile(99.9) / 1000.0,
            "max": hist.get_max_value() / 1000.0,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the tally is replaced by percentiles and the encoded HDR histogram."""
        out = dataclasses.asdict(self)
        del out["latency_us"]
        out["latency_ms"] = self.percentiles()
        out["latency_hdr"] = self.histogram().encode().decode() if self.latency_us else None
        return out


# ------------------------------------------------------------------------- the loops


class _Run:
    """State shared by the connections of one load in one process."""

    def __init__(self, budget: int, loop: asyncio.AbstractEventLoop) -> None:
        self.budget = budget
        self.measuring = False
        self.stopping = False
        self.requests = 0
        self.messages = 0
        self.latency: dict[int, int] = {}
        self.errors = 0
        self.first_error: str | None = None
        self.t_start = 0.0
        self.t_end = 0.0
        self.clients: list[_Client] = []
        self.finished: asyncio.Future[None] = loop.create_future()

    def begin_window(self) -> None:
        if not self.stopping:
            self.measuring = True
            self.t_start = time.perf_counter()

    def _close_window(self) -> None:
        if self.stopping:
            return
        if self.measuring:
            self.t_end = time.perf_counter()
        self.measuring = False
        self.stopping = True

    def end_window(self) -> None:
        """The time is up: stop sending, count nothing more, finish once drained."""
        self._close_window()
        self.check_finished()

    def fail(self, message: str) -> None:
        """A reply or connection the benchmark cannot accept: stop the whole load now."""
        self.errors += 1
        if self.first_error is None:
            self.first_error = message
        self._close_window()
        for client in self.clients:
            client.abort()
        self.check_finished()

    def check_finished(self) -> None:
        if self.finished.done():
            return
        if not (self.stopping or self.budget <= 0):
            return
        if any(c.outstanding for c in self.clients):
            return
        self._close_window()
        self.finished.set_result(None)


class _Client(asyncio.Protocol):
    """Base connection: transport handling and the connection-lost path."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.transport: Any = None
        self.outstanding = 0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        lost = self.outstanding
        self.outstanding = 0
        if not self.run.stopping:
            self.run.fail(f"connection lost with {lost} request(s) outstanding: {exc}")
        self.run.check_finished()

    def abort(self) -> None:
        self.outstanding = 0
        if self.transport is not None:
            self.transport.abort()

    @abc.abstractmethod
    def start(self) -> None:
        """Send the first requests (each load shape keeps its own number outstanding)."""


class _ProduceClient(_Client):
    """Keeps ``inflight`` copies of one pre-encoded request outstanding, replies in order."""

    def __init__(self, run: _Run, request: bytes, inflight: int, counter: ReplyCounter) -> None:
        super().__init__(run)
        self.request = request
        self.inflight = inflight
        self.counter = counter
        self.sent: deque[list[int]] = deque()  # [requests, send time ns], oldest first

    def start(self) -> None:
        self._send(self.inflight)

    def _send(self, n: int) -> None:
        run = self.run
        if run.stopping:
            return
        if n > run.budget:
            n = run.budget
            if n <= 0:
                return
        run.budget -= n
        self.transport.write(self.request if n == 1 else self.request * n)
        self.sent.append([n, time.perf_counter_ns()])
        self.outstanding += n

    def data_received(self, data: bytes) -> None:
        counter = self.counter
        try:
            n = counter.feed(data)
        except ReplyError as exc:
            self.run.fail(str(exc))
            return
        if not n:
            return
        if counter.errors:
            self.run.fail(f"error reply: {counter.first_error}")
            return
        if n > self.outstanding:
            self.run.fail(f"{n} replies for {self.outstanding} outstanding requests")
            return
        now = time.perf_counter_ns()
        run = self.run
        self.outstanding -= n
        sent = self.sent
        if run.measuring:
            run.requests += n
            latency = run.latency
            left = n
            while left:
                head = sent[0]
                take = head[0] if head[0] <= left else left
                us = (now - head[1]) // 1000
                latency[us] = latency.get(us, 0) + take
                left -= take
                if take == head[0]:
                    sent.popleft()
                else:
                    head[0] -= take
        else:
            left = n
            while left:
                head = sent[0]
                if head[0] <= left:
                    left -= head[0]
                    sent.popleft()
                else:
                    head[0] -= left
                    left = 0
        self._send(n)
        if self.outstanding == 0:
            run.check_finished()


class _ConsumeClient(_Client):
    """Walks a partition / stream in batches, one request outstanding."""

    def __init__(self, run: _Run, codec: ConsumeCodec) -> None:
        super().__init__(run)
        self.codec = codec
        self.sent_ns = 0

    def start(self) -> None:
        self._send(self.codec.start)

    def _send(self, position: Any) -> None:
        run = self.run
        if run.stopping or run.budget <= 0:
            return
        run.budget -= 1
        self.transport.write(self.codec.request(position))
        self.sent_ns = time.perf_counter_ns()
        self.outstanding = 1

    def data_received(self, data: bytes) -> None:
        if not self.outstanding:
            self.run.fail(f"data without a request outstanding: {data[:80]!r}")
            return
        try:
            done = self.codec.feed(data)
        except ReplyError as exc:
            self.run.fail(str(exc))
            return
        if done is None:
            return
        now = time.perf_counter_ns()
        self.outstanding = 0
        count, position = done
        run = self.run
        if run.measuring:
            run.requests += 1
            run.messages += count
            us = (now - self.sent_ns) // 1000
            run.latency[us] = run.latency.get(us, 0) + 1
        self._send(position)
        if self.outstanding == 0:
            run.check_finished()


def _client_factory(spec: LoadSpec, index: int, run: _Run) -> Callable[[], _Client]:
    value = make_value(spec.value_size)
    if spec.mode == "produce":
        if spec.protocol == "v1":
            request = v1_produce_request(str(index), spec.topic, f"k{index}", value, spec.acks)
            return lambda: _ProduceClient(run, request, spec.inflight, V1ReplyCounter())
        request = resp_xadd_request(spec.topic, value)
        return lambda: _ProduceClient(run, request, spec.inflight, RespReplyCounter())
    if spec.protocol == "v1":
        return lambda: _ConsumeClient(
            run, V1ConsumeCodec(spec.topic, spec.partition, spec.batch, cid=str(index)))
    return lambda: _ConsumeClient(
        run, RespConsumeCodec(spec.topic, spec.batch, spec.value_size))


async def run_async(spec: LoadSpec) -> LoadResult:
    """Run ``spec`` on the running event loop, in this process (``spec.processes`` ignored)."""
    loop = asyncio.get_running_loop()
    run = _Run(spec.max_requests, loop)
    transports = []
    try:
        for index in range(spec.connections):
            transport, client = await asyncio.wait_for(
                loop.create_connection(_client_factory(spec, index, run), spec.host, spec.port),
                spec.connect_timeout_s)
            transports.append(transport)
            run.clients.append(client)
        for client in run.clients:
            client.start()
        if spec.warmup_s > 0:
            timers = [loop.call_later(spec.warmup_s, run.begin_window)]
        else:
            timers = []
            run.begin_window()
        timers.append(loop.call_later(spec.warmup_s + spec.duration_s, run.end_window))
        try:
            await asyncio.wait_for(asyncio.shield(run.finished),
                                   spec.warmup_s + spec.duration_s + spec.drain_timeout_s)
        except TimeoutError:
            run.end_window()
        for timer in timers:
            timer.cancel()
    finally:
        for transport in transports:
            transport.abort()
    undrained = sum(c.outstanding for c in run.clients)
    window = max(run.t_end - run.t_start, 0.0) if run.t_start else 0.0

    def rate(n: int) -> float:
        return n / window if window > 0 else 0.0

    messages = run.messages if spec.mode == "consume" else run.requests
    return LoadResult(
        protocol=spec.protocol, mode=spec.mode, connections=spec.connections,
        inflight=spec.inflight, processes=1, loop=_loop_name(loop), window_s=window,
        requests=run.requests, messages=messages, requests_per_s=rate(run.requests),
        messages_per_s=rate(messages), errors=run.errors, first_error=run.first_error,
        undrained=undrained, latency_us=run.latency)


def _loop_name(loop: asyncio.AbstractEventLoop) -> str:
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def _loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise
        return None
    return uvloop.new_event_loop


def _run_here(spec: LoadSpec) -> LoadResult:
    if spec.cpus:
        os.sched_setaffinity(0, spec.cpus)
    with asyncio.Runner(loop_factory=_loop_factory(spec.loop)) as runner:
        return runner.run(run_async(spec))


def _split(spec: LoadSpec) -> list[LoadSpec]:
    parts = []
    for i in range(spec.processes):
        conns = spec.connections // spec.processes + (i < spec.connections % spec.processes)
        budget = spec.max_requests // spec.processes + (i < spec.max_requests % spec.processes)
        parts.append(dataclasses.replace(spec, connections=conns, max_requests=max(budget, 1),
                                         processes=1))
    return parts


def merge_results(parts: Sequence[LoadResult]) -> LoadResult:
    """One result for a load run by several processes: counts, rates and tallies add up."""
    first = parts[0]
    latency: dict[int, int] = {}
    for part in parts:
        for value, count in part.latency_us.items():
            latency[value] = latency.get(value, 0) + count
    errors = [p.first_error for p in parts if p.first_error]
    return LoadResult(
        protocol=first.protocol, mode=first.mode,
        connections=sum(p.connections for p in parts), inflight=first.inflight,
        processes=len(parts), loop=first.loop, window_s=max(p.window_s for p in parts),
        requests=sum(p.requests for p in parts), messages=sum(p.messages for p in parts),
        requests_per_s=sum(p.requests_per_s for p in parts),
        messages_per_s=sum(p.messages_per_s for p in parts),
        errors=sum(p.errors for p in parts), first_error=errors[0] if errors else None,
        undrained=sum(p.undrained for p in parts), latency_us=latency)


def run(spec: LoadSpec) -> LoadResult:
    """Run ``spec`` to the end (blocking), over ``spec.processes`` processes."""
    if spec.processes == 1:
        return _run_here(spec)
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(spec.processes, mp_context=ctx) as pool:
        return merge_results(list(pool.map(_run_here, _split(spec))))


# ------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.loadgen",
        description="Load a Skerry (V1) or Redis (RESP) server; print one JSON result.")
    p.add_argument("--protocol", choices=("v1", "resp"), required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mode", choices=("produce", "consume"), default="produce")
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--inflight", type=int, default=1, help="requests in flight per connection")
    p.add_argument("--duration", type=float, default=5.0, help="measured seconds")
    p.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds first")
    p.add_argument("--max-requests", type=int, default=50_000_000)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--topic", default="bench", help="topic (V1) or stream key (RESP)")
    p.add_argument("--partition", type=int, default=0)
    p.add_argument("--batch", type=int, default=1000, help="messages per consume request")
    p.add_argument("--acks", choices=("0", "1", "all"), default=None)
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    p.add_argument("--cpus", default=None, help="comma-separated CPUs to pin the load to")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    spec = LoadSpec(
        protocol=args.protocol, host=args.host, port=args.port, mode=args.mode,
        connections=args.connections, inflight=args.inflight, duration_s=args.duration,
        warmup_s=args.warmup, max_requests=args.max_requests, value_size=args.value_size,
        topic=args.topic, partition=args.partition, batch=args.batch, acks=args.acks,
        processes=args.processes, loop=args.loop,
        cpus=tuple(int(c) for c in args.cpus.split(",")) if args.cpus else None)
    result = run(spec)
    out = result.to_dict()
    out.pop("latency_hdr")
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 1 if result.errors else 0


if __name__ == "__main__":
    sys.exit(main())
