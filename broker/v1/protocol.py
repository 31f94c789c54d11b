"""The V1 transport: framing, ordering of replies and flow control for one TCP connection.

Owns: splitting the byte stream into lines, the per-connection queue that keeps replies in
request order while some wait (fsync, acks=all, group writes, long polls), pausing a client
that does not read its replies (Twisted producer/consumer flow control), the idle timeout,
the connection limit, and the half-close: a client that shuts down its sending side
(``shutdown(SHUT_WR)``, ``nc -N``) gets a reply to every request it sent, then the close.

The line splitting is LineReceiver's contract (``\\n`` delimiter, a maximum length, lines
after a close are ignored) done in one pass over each read: LineReceiver re-splits the whole
buffer for every line, which is quadratic on a burst of thousands of pipelined requests.

Must not import: the store, groups or replication directly; everything goes through the
handlers and the core.
"""

from __future__ import annotations

import logging
import socket
from collections import deque
from typing import Any

from twisted.internet import tcp
from twisted.internet.interfaces import IHalfCloseableProtocol, IPushProducer, IReactorTime
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from zope.interface import implementer

from broker.errors import BadRequest, SkerryError, Unauthenticated, Unavailable
from broker.v1 import codec
from broker.v1.handlers import Handlers

__all__ = ["V1Protocol", "V1Factory"]

log = logging.getLogger("skerry.v1")

KERNEL_SEND_BUFFER_BYTES = 262144
"""SO_SNDBUF of each V1 connection (at most ``limits.max_pending_output_bytes``; Linux
doubles it for its bookkeeping): enough for a loopback or LAN consumer at full speed, and a
bound on what a client that never reads makes the broker produce beyond the pending limit."""

_BEFORE_AUTH = (codec.Ping, codec.Auth)
"""The commands served on a connection that has not authenticated (when auth is on)."""

UNTERMINATED = ("unterminated line at end of input: a request ends with a line feed; it was "
                "not executed")
"""The BAD_REQUEST message for bytes after the last line feed when the client half-closes:
they may be half a request from a client that died mid-write, so they are never run."""


@implementer(IPushProducer, IHalfCloseableProtocol)
class V1Protocol(Protocol):
    """One client connection speaking the V1 line protocol.

    Half-closeable: TCP's read EOF does not close the connection (``readConnectionLost``);
    every request already read is answered, in order, and then the connection closes.
    """

    def __init__(self, factory: V1Factory) -> None:
        self.factory = factory
        self.handlers = factory.handlers
        self.codec = factory.codec
        self.max_line = factory.max_line_bytes
        self._buffer = b""
        self._pending: deque[list[Any]] = deque()
        self._cmd_slots: set[int] = set()  # ids of pending slots of commands other than PRODUCE
        self._held: Any = None  # a command waiting for the replies before it (see _must_wait)
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._direct = False
        # Replies ready at once are written in one go at the end of each read, or earlier
        # once this many bytes are waiting, so flow control still acts within a read.
        self._out_limit = min(65536, factory.max_pending_output_bytes // 4)
        self._core = factory.handlers.core
        self._topic_names: dict[bytes, str] = {}
        self.paused = False
        self._idle_call: Any = None
        self._read_closed = False  # the client shut down its sending side (half-close)
        self._peer = "?"
        # broker/auth.py: with auth configured nothing but PING and AUTH is served before a
        # successful AUTH (the PRODUCE fast path included). The handler updates these.
        self.authenticated = factory.handlers.auth_tokens is None
        self.auth_failures = 0
        self.auth_ready_at = 0.0
        self.auth_queue: deque[Any] = deque()

    # ---------------------------------------------------------------- connection

    def connectionMade(self) -> None:
        peer = self.transport.getPeer()
        self._peer = f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"
        # Unsent replies beyond this make the transport pause us (and us stop reading).
        self.transport.bufferSize = self.factory.max_pending_output_bytes
        self._direct = isinstance(self.transport, tcp.Connection) and \
            hasattr(self.transport, "_tempDataBuffer")
        no_delay = getattr(self.transport, "setTcpNoDelay", None)
        if no_delay is not None:  # a reply's last segment must not wait for a delayed ACK
            no_delay(True)
        handle = getattr(self.transport, "getHandle", lambda: None)()
        if isinstance(handle, socket.socket):
            # Replies in the kernel's send buffer are unsent too. Left alone, Linux grows it
            # to tcp_wmem's 4 MiB, so a client that never reads made the broker build ~5 MiB
            # of replies (seconds of CPU for CONSUMEs) before it was paused. Kafka caps it
            # the same way (socket.send.buffer.bytes).
            handle.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, min(
                self.factory.max_pending_output_bytes, KERNEL_SEND_BUFFER_BYTES))
        self.transport.registerProducer(self, True)
        self._arm_idle()
        log.info("connection from %s", self._peer)

    def connectionLost(self, reason: Failure | None = None) -> None:
        if self._idle_call is not None and self._idle_call.active():
            self._idle_call.cancel()
        self._idle_call = None
        self._pending.clear()
        self._cmd_slots.clear()
        self._held = None
        self.factory.connection_closed(self)
        log.info("connection from %s closed", self._peer)

    def readConnectionLost(self) -> None:
        """The client shut down its sending side: nothing more will be read. Answer what it
        sent (requests still waiting for an fsync, an ``acks=all`` or a long poll
        included), then close; at once if nothing is outstanding."""
        if self._read_closed:
            return
        self._read_closed = True
        log.debug("%s shut down its side; closing once its requests are answered", self._peer)
        self._close_when_answered()

    def writeConnectionLost(self) -> None:
        """Not used: the broker never shuts down only its own sending side."""

    def _close_when_answered(self) -> None:
        """After the client's half-close: once no request is outstanding and no complete
        line waits in the buffer (a paused or held connection still has lines to run), hand
        the last replies to the transport and close; the transport writes them first.
        Bytes after the last line feed get ``UNTERMINATED``, not a run."""
        if not self._read_closed or self.paused or self._held is not None or self._pending \
                or self.transport.disconnecting:
            return
        rest, self._buffer = self._buffer, b""
        if rest:
            self._emit(codec.err("0", BadRequest(UNTERMINATED)))
            if self.factory.metrics is not None:
                self.factory.metrics.invalid()
        self._flush_out()
        # A registered producer that the transport paused would hold the close back.
        self.transport.unregisterProducer()
        self.transport.loseConnection()

    def _arm_idle(self) -> None:
        timeout = self.factory.idle_timeout
        if timeout is None:
            return
        if self._idle_call is not None and self._idle_call.active():
            self._idle_call.reset(timeout)
        else:
            self._idle_call = self.factory.clock.callLater(timeout, self._idle_expired)

    def _idle_expired(self) -> None:
        log.info("closing idle connection from %s", self._peer)
        self.transport.loseConnection()

    # ---------------------------------------------------------------- producer

    def pauseProducing(self) -> None:
        """The client is not reading: stop reading its requests until it catches up."""
        self.paused = True
        self.transport.pauseProducing()

    def resumeProducing(self) -> None:
        self.paused = False
        if not self._read_closed:  # after EOF, reading again would only report EOF again
            self.transport.resumeProducing()
        if self._buffer:
            self.dataReceived(b"")
        self._close_when_answered()

    def stopProducing(self) -> None:
        self.paused = True

    # ---------------------------------------------------------------- framing

    def dataReceived(self, data: bytes) -> None:
        self._arm_idle()
        buf = self._buffer + data if self._buffer else data
        start = 0
        limit = self.max_line
        transport = self.transport
        line_received = self.lineReceived
        # The hot path: runs of plain PRODUCE lines are matched in place (no slicing, no
        # command objects) and handed to the core one by one; anything else goes through
        # the codec and the handler table.
        match_produce = codec.PRODUCE_LINE_RE.match
        fast_ok = self.codec.fast_match_ok
        produce_to = self._core.produce_to
        pending = self._pending
        topic_names = self._topic_names
        acks_map = codec.FAST_ACKS
        fast = self.authenticated and not self._core.closing
        metrics = self.factory.metrics  # broker.metrics: fast PRODUCEs counted once per read
        fast_count = 0
        started = metrics.now() if metrics is not None else 0.0
        while not self.paused and self._held is None:
            if fast and not self._cmd_slots:
                m = match_produce(buf, start)
                if m is not None and m.end() - start <= limit and fast_ok(m):
                    start = m.end()
                    fast_count += 1
                    cid, topic, key, value, acks = m.groups()
                    slot: list[Any] = [None, cid]
                    name = topic_names.get(topic)
                    if name is None:
                        name = topic_names[topic] = topic.decode()
                    try:
                        produce_to(name, None, key, value, acks_map[acks], self, slot)
                    except SkerryError as error:
                        self._emit(codec.err(cid.decode(), error))
                    else:
                        pending.append(slot)
                    continue
            end = buf.find(b"\n", start)
            if end < 0:
                break
            line = buf[start:end]
            start = end + 1
            if len(line) > limit and not (len(line) == limit + 1 and line[-1] == 13):
                self._too_long()
                return
            line_received(line)  # may hold the command back: the loop then stops
            if transport.disconnecting:
                self._buffer = b""
                return
        if fast_count and metrics is not None:
            metrics.fast_produced(fast_count, slot, started)
        self._flush_out()
        rest = buf[start:] if start else buf
        if len(rest) > limit + 1:
            self._too_long()
            return
        self._buffer = rest
        if self._read_closed:
            self._close_when_answered()

    def _too_long(self) -> None:
        self._buffer = b""
        self._flush_out()
        log.info("line too long from %s; closing", self._peer)
        self.transport.write(codec.LINE_TOO_LONG_REPLY)
        self.transport.loseConnection()

    def lineReceived(self, line: bytes) -> None:
        try:
            cmd = self.codec.parse_command(line)
        except codec.CommandError as exc:
            self._emit(codec.err(exc.cid, exc.error))
            if self.factory.metrics is not None:
                self.factory.metrics.invalid()
            return
        if cmd is None:
            return
        if not self.authenticated and type(cmd) not in _BEFORE_AUTH:
            self._emit(codec.err(cmd.cid, Unauthenticated("send AUTH <user> <token> first")))
            return
        if self._must_wait(cmd):
            # Effects happen in request order: a command other than PRODUCE runs only once
            # everything before it on this connection was answered (a CONSUME pipelined
            # behind a PRODUCE sees it), and nothing runs past a command still waiting.
            self._held = cmd
            return
        self._execute(cmd)

    def _must_wait(self, cmd: Any) -> bool:
        if self._cmd_slots:
            return True
        return bool(self._pending) and type(cmd) is not codec.Produce

    def _execute(self, cmd: Any) -> None:
        slot = [None, cmd.cid.encode()]
        metrics = self.factory.metrics
        if metrics is not None:
            metrics.received(cmd.name, slot)  # stamps the slot; timed once answered
        reply = self.handlers.dispatch(cmd, slot, self)
        if metrics is not None and (reply is not None or slot[0] is not None
                                    and not self._pending):
            metrics.answered(slot)  # answered now; queued slots are timed in drain
        if reply is not None:
            self._emit(reply)
        elif slot[0] is not None and not self._pending:
            self._emit(slot[0])  # answered synchronously after all
        else:
            self._pending.append(slot)
            if type(cmd) is not codec.Produce:
                self._cmd_slots.add(id(slot))

    # ---------------------------------------------------------------- replies in order

    def _emit(self, line: bytes) -> None:
        """Queue a reply that is ready now (behind any that still wait)."""
        if self._pending:
            self._pending.append([line])
            return
        self._out.append(line)
        self._out_bytes += len(line)
        if self._out_bytes > self._out_limit:
            self._flush_out()

    def _flush_out(self) -> None:
        """Hand the queued replies to the transport in one write. The transport pauses us
        (``pauseProducing``) when its unsent bytes pass ``max_pending_output_bytes``."""
        out = self._out
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._out_bytes = 0
        transport = self.transport
        if self._direct and not transport.dataBuffer and not transport._tempDataBuffer:
            # Nothing queued in the transport: send now instead of registering for
            # writability and sending on the next turn. For request/response traffic this
            # saves two epoll_ctl calls and one event dispatch per reply; whatever the
            # socket does not take goes through the transport as usual.
            try:
                sent = transport.socket.send(data)
            except OSError:
                sent = 0  # EAGAIN, or an error the transport will report on write
            if sent == len(data):
                return
            data = data[sent:]
        transport.write(data)

    def drain(self) -> None:
        """Move every reply whose turn has come to the transport; then run a command that
        was held back until those replies were out, and the lines read after it."""
        pending = self._pending
        out = self._out
        cmd_slots = self._cmd_slots
        while pending and pending[0][0] is not None:
            entry = pending.popleft()
            line = entry[0]
            if cmd_slots:
                cmd_slots.discard(id(entry))
            if len(entry) > 2:  # stamped by broker.metrics
                self.factory.metrics.answered(entry)
            out.append(line)
            self._out_bytes += len(line)
            if self._out_bytes > self._out_limit:
                self._flush_out()
        self._flush_out()
        held = self._held
        if held is not None and not self._must_wait(held) and not self.transport.disconnecting:
            self._held = None
            self._execute(held)
            self._flush_out()
            if self._buffer and not self.paused and self._held is None:
                self.dataReceived(b"")
        if self._read_closed:
            self._close_when_answered()

    _drain = drain

    # ProduceSink: the core answers this connection's produces in bulk.

    def produced(self, token: Any, partition: int, offset: int, hw: int,
                 error: SkerryError | None) -> None:
        if error is None:
            token[0] = b"V1|%b|OK|partition=%d offset=%d hw=%d\n" % (token[1], partition,
                                                                    offset, hw)
        else:
            token[0] = codec.err(token[1].decode(), error)

    def flush(self) -> None:
        self.drain()

    def idle(self) -> bool:
        """True when every request read so far has been answered."""
        return not self._pending and self._held is None


class _Refuse(Protocol):
    """Answers one UNAVAILABLE line and closes (connection limit or shutdown)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def connectionMade(self) -> None:
        self.transport.write(codec.err("0", Unavailable(self.reason)))
        self.transport.loseConnection()


class V1Factory(Factory):
    """Builds V1 connections over one set of handlers, enforcing the connection limit."""

    metrics: Any = None
    """``broker.metrics.BrokerMetrics`` when ``metrics_port`` is set (the server sets it)."""

    def __init__(self, handlers: Handlers, clock: IReactorTime, *, max_line_bytes: int,
                 max_message_bytes: int, max_connections: int, idle_timeout_ms: int | None,
                 max_pending_output_bytes: int) -> None:
        self.handlers = handlers
        self.clock = clock
        self.codec = codec.Codec(codec.CodecLimits(max_message_bytes=max_message_bytes))
        self.max_line_bytes = max_line_bytes
        self.max_connections = max_connections
        self.idle_timeout = None if idle_timeout_ms is None else idle_timeout_ms / 1000.0
        self.max_pending_output_bytes = max_pending_output_bytes
        self.connections: set[V1Protocol] = set()
        self.refusing: str | None = None

    def buildProtocol(self, addr: Any) -> Protocol:
        if self.refusing is not None:
            return _Refuse(self.refusing)
        if len(self.connections) >= self.max_connections:
            log.warning("refusing connection from %s: %d connections open", addr,
                        len(self.connections))
            return _Refuse("too many connections")
        proto = V1Protocol(self)
        self.connections.add(proto)
        return proto

    def connection_closed(self, proto: V1Protocol) -> None:
        self.connections.discard(proto)

    def all_idle(self) -> bool:
        return all(p.idle() for p in self.connections)

