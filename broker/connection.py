"""The connection base every transport shares (V1 in ``broker.v1.protocol``, Iggy in
``broker.iggy.protocol``): what one TCP connection needs whatever its protocol.

Owns: the socket options (``TCP_NODELAY``; ``SO_SNDBUF`` capped, so unsent replies stay
bounded), the output cap and flow control (``transport.bufferSize``; the connection is an
``IPushProducer``: a client that does not read its replies is paused, and the connection
stops reading its requests until it catches up), the idle timeout on the injected clock, the
half-close (``IHalfCloseableProtocol``: a client that shuts down its sending side, e.g.
``shutdown(SHUT_WR)`` or ``nc -N``, gets a reply to every request it sent, then the close),
the connection limit and the refusal while shutting down (``ConnectionFactory``:
``connections``, ``refusing``, ``all_idle()``), and the open/close log lines.

A transport subclasses ``Connection`` for its framing and dispatch only, and tells the base
through a few hooks: ``outstanding()`` (requests read and not answered yet, or still to run),
``reading_blocked()`` (stop reading for the protocol's own reason, e.g. Iggy's one request
at a time), ``resume_work()`` (run what waited once unpaused), ``last_words()`` (what to say
before the half-close completes), ``idle()``.

Must not import: the store, groups, replication, the core or any transport: it knows
sockets and Twisted, not what the bytes mean.
"""

from __future__ import annotations

import errno
import itertools
import logging
import socket
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Sequence
from typing import Any

from twisted.internet import main, tcp
from twisted.internet.interfaces import IHalfCloseableProtocol, IPushProducer, IReactorTime
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from zope.interface import implementer

__all__ = ["Connection", "ConnectionFactory", "Refuse", "KERNEL_SEND_BUFFER_BYTES"]

KERNEL_SEND_BUFFER_BYTES = 262144
"""SO_SNDBUF of each connection (at most ``limits.max_pending_output_bytes``; Linux doubles
it for its bookkeeping): enough for a loopback or LAN consumer at full speed, and a bound on
what a client that never reads makes the broker produce beyond the pending limit."""


@implementer(IPushProducer, IHalfCloseableProtocol)
class Connection(Protocol):
    """One client connection: socket options, flow control, idle timeout, half-close.

    Half-closeable: TCP's read EOF does not close the connection (``readConnectionLost``);
    every request already read is answered, in order, and then the connection closes.
    """

    factory: ConnectionFactory

    def __init__(self, factory: ConnectionFactory) -> None:
        self.factory = factory
        self.log = factory.log
        self.handlers = factory.handlers
        self.paused = False  # the client does not read its replies
        self.peer = "?"
        self._reading = True
        self._read_closed = False  # the client shut down its sending side (half-close)
        self._idle_call: Any = None
        self._last_active = 0.0  # clock time of the last read (``_arm_idle``)
        self._direct = False
        self._backlog: deque[bytes | memoryview] = deque()
        """Reply bytes the socket has not taken yet, in order, not joined (direct only)."""
        self._backlog_bytes = 0
        self._backlog_paused = False  # paused by the backlog, not by the transport
        self._transport_write: Any = None

    # ---------------------------------------------------------------- hooks

    def connection_opened(self) -> None:
        """The transport is set up (``self.peer`` is known)."""

    def connection_ended(self) -> None:
        """The connection is gone: drop what it held."""

    def outstanding(self) -> bool:
        """True while a request read is not answered, or read and not run yet."""
        return False

    def reading_blocked(self) -> bool:
        """True while the protocol itself wants no more requests (besides flow control)."""
        return False

    def resume_work(self) -> None:
        """The client reads again: run what waited in the buffer."""

    def last_words(self) -> None:
        """After the half-close, just before closing: bytes left after the last complete
        request, last replies still held back."""

    def idle(self) -> bool:
        """True when every request read so far has been answered."""
        return not self.outstanding()

    def who(self) -> str:
        """The connection in log lines."""
        return self.peer

    # ---------------------------------------------------------------- connection

    def connectionMade(self) -> None:
        transport = self.transport
        peer = transport.getPeer()
        self.peer = f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"
        # Unsent replies beyond this make the transport pause us (and us stop reading).
        transport.bufferSize = self.factory.max_pending_output_bytes
        self._direct = isinstance(transport, tcp.Connection) and \
            hasattr(transport, "_tempDataBuffer")
        if self._direct:
            # The reactor calls the transport's doWrite when the socket takes more: the
            # backlog goes first, then whatever the transport itself holds.
            self._transport_write = transport.doWrite
            transport.doWrite = self._write_backlog
        no_delay = getattr(transport, "setTcpNoDelay", None)
        if no_delay is not None:  # a reply's last segment must not wait for a delayed ACK
            no_delay(True)
        handle = getattr(transport, "getHandle", lambda: None)()
        if isinstance(handle, socket.socket):
            # Replies in the kernel's send buffer are unsent too. Left alone, Linux grows it
            # to tcp_wmem's 4 MiB, so a client that never reads made the broker build ~5 MiB
            # of replies (seconds of CPU for CONSUMEs) before it was paused. Kafka caps it
            # the same way (socket.send.buffer.bytes).
            handle.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, min(
                self.factory.max_pending_output_bytes, KERNEL_SEND_BUFFER_BYTES))
        transport.registerProducer(self, True)
        self._arm_idle()
        self.connection_opened()

    def connectionLost(self, reason: Failure | None = None) -> None:
        if self._idle_call is not None and self._idle_call.active():
            self._idle_call.cancel()
        self._idle_call = None
        self._backlog.clear()
        self._backlog_bytes = 0
        self.connection_ended()
        self.factory.connection_closed(self)

    def readConnectionLost(self) -> None:
        """The client shut down its sending side: nothing more will be read. Answer what it
        sent (requests still waiting for an fsync, an ``acks=all``, a long poll or a
        password hash included), then close; at once if nothing is outstanding."""
        if self._read_closed:
            return
        self._read_closed = True
        self.log.debug("%s shut down its side; closing once its requests are answered",
                       self.who())
        self._close_when_answered()

    def writeConnectionLost(self) -> None:
        """Not used: the broker never shuts down only its own sending side."""

    def _close_when_answered(self) -> None:
        """After the client's half-close: once nothing is outstanding (a paused connection
        still has requests to run), say the last words and close; the transport writes
        the replies first."""
        if not self._read_closed or self.paused or self.outstanding() \
                or self.transport.disconnecting:
            return
        self.last_words()
        # A registered producer that the transport paused would hold the close back.
        self.transport.unregisterProducer()
        self.transport.loseConnection()

    def _arm_idle(self) -> None:
        """Note activity: the connection is idle once ``idle_timeout`` passes without more.

        The timer is not moved on every read (a ``DelayedCall.reset`` per request, and the
        reactor re-sorting its timers, was a measurable share of a small request's CPU):
        the read only stamps the time, and a timer that fires before the deadline of the
        last stamp sets itself again for the rest (``_idle_check``), as Netty's idle
        handler does."""
        timeout = self.factory.idle_timeout
        if timeout is None:
            return
        clock = self.factory.clock
        self._last_active = clock.seconds()
        if self._idle_call is None:
            self._idle_call = clock.callLater(timeout, self._idle_check)

    def _idle_check(self) -> None:
        """The idle timer fired: closes (``_idle_expired``) if nothing came since, else
        waits for the rest of the time the last activity gave."""
        self._idle_call = None
        timeout = self.factory.idle_timeout
        if timeout is None:
            return
        clock = self.factory.clock
        left = self._last_active + timeout - clock.seconds()
        if left > 1e-6:
            self._idle_call = clock.callLater(left, self._idle_check)
            return
        self._idle_expired()

    def _idle_expired(self) -> None:
        self.log.info("closing idle connection from %s", self.who())
        self.transport.loseConnection()

    # ---------------------------------------------------------------- flow control

    def pauseProducing(self) -> None:
        """The client is not reading its replies: stop reading its requests."""
        self.paused = True
        self._update_reading()

    def resumeProducing(self) -> None:
        self.paused = False
        self._update_reading()
        self.resume_work()
        self._close_when_answered()

    def stopProducing(self) -> None:
        self.paused = True

    def _update_reading(self) -> None:
        """Read from the socket unless paused or the protocol holds reading back."""
        want = not (self.paused or self.reading_blocked())
        # After EOF, reading again would only report EOF again.
        if want != self._reading and not (self._read_closed or self.transport.disconnecting):
            self._reading = want
            if want:
                self.transport.resumeProducing()
            else:
                self.transport.pauseProducing()

    def write_now(self, data: bytes) -> None:
        """Hand ``data`` to the transport (``write_chunks`` with one chunk); the transport
        pauses us (``pauseProducing``) when its unsent bytes pass
        ``max_pending_output_bytes``."""
        self.write_chunks((data,))

    def write_chunks(self, chunks: Sequence[bytes]) -> None:
        """Send a reply made of ``chunks`` (one, or a fetch response's fields and its record
        sets of megabytes each). With nothing queued they go to the socket now, with one
        ``sendmsg``, instead of registering for writability and sending on the next turn:
        for request/response traffic that saves two epoll_ctl calls and one event dispatch
        per reply, and large chunks are never joined. What the socket does not take waits
        in the connection's own backlog as it is (a view of the first chunk's unsent rest,
        then the other chunks), never joined into one object: the backlog goes out with
        ``sendmsg`` as the socket drains (``_write_backlog``), before anything written after
        it. A transport that writes through this method writes only through it once a
        reply is queued (its greeting, if any, comes first)."""
        transport = self.transport
        if not self._direct:
            transport.write(b"".join(chunks))  # a lone bytes is not copied
            return
        backlog = self._backlog
        if backlog:
            self._queue(chunks, 0)
            return
        if transport.dataBuffer or transport._tempDataBuffer:
            transport.write(b"".join(chunks))
            return
        try:
            sent = transport.socket.sendmsg(chunks[:_IOV_MAX])
        except OSError:
            sent = 0  # EAGAIN, or an error the transport reports on its next write
        if len(chunks) == 1 and sent == len(chunks[0]):
            return  # all taken (a small reply): nothing to queue
        self._queue(chunks, sent)
        if backlog:
            transport.startWriting()

    def _queue(self, chunks: Sequence[bytes], sent: int) -> None:
        """Keep what ``sent`` bytes leave of ``chunks`` in the backlog, not copied; pause
        reading while the backlog is over the output cap, as the transport would."""
        backlog = self._backlog
        for chunk in chunks:
            size = len(chunk)
            if sent >= size:
                sent -= size
                continue
            backlog.append(memoryview(chunk)[sent:] if sent else chunk)
            self._backlog_bytes += size - sent
            sent = 0
        if self._backlog_bytes > self.factory.max_pending_output_bytes and not self.paused:
            self._backlog_paused = True
            self.pauseProducing()

    def _write_backlog(self) -> Any:
        """The transport's ``doWrite`` while this connection is direct: the backlog first
        (``sendmsg`` of as many pieces as one call takes), then the transport's own buffer
        and its usual end of writing (stop writing, the close a ``loseConnection`` asked
        for). Returns what ``doWrite`` returns: None, or why the connection is lost."""
        backlog = self._backlog
        if backlog:
            transport = self.transport
            pieces = list(itertools.islice(backlog, _IOV_MAX))
            try:
                sent = transport.socket.sendmsg(pieces)
            except OSError as error:
                if error.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS, errno.EINTR):
                    return None
                return main.CONNECTION_LOST
            self._backlog_bytes -= sent
            while sent:
                head = backlog[0]
                size = len(head)
                if sent >= size:
                    backlog.popleft()
                    sent -= size
                else:
                    backlog[0] = memoryview(head)[sent:]
                    sent = 0
            if backlog:
                return None
            if self._backlog_paused:
                self._backlog_paused = False
                self.resumeProducing()
                if backlog:
                    # The resume ran requests whose replies queued again: keep writing.
                    # (The transport's own doWrite would see its empty buffer and stop
                    # writing, and the backlog would never drain: a stalled connection.)
                    return None
        return self._transport_write()

_IOV_MAX = 1024
"""The most buffers one ``sendmsg`` takes (Linux's ``IOV_MAX``)."""


class Refuse(Protocol):
    """Writes one refusal (connection limit, shutting down) and closes."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply

    def connectionMade(self) -> None:
        self.transport.write(self.reply)
        self.transport.loseConnection()


class ConnectionFactory(Factory, ABC):
    """Builds a transport's connections, enforcing the connection limit; ``refusing`` (a
    reason) turns every new connection away while the broker shuts down."""

    log: logging.Logger = logging.getLogger("skerry.connection")

    def __init__(self, handlers: Any, clock: IReactorTime, *, max_connections: int,
                 idle_timeout_ms: int | None, max_pending_output_bytes: int) -> None:
        self.handlers = handlers
        """The transport's handler table, which its connections dispatch to."""
        self.clock = clock
        self.max_connections = max_connections
        self.idle_timeout = None if idle_timeout_ms is None else idle_timeout_ms / 1000.0
        self.max_pending_output_bytes = max_pending_output_bytes
        self.connections: set[Connection] = set()
        self.refusing: str | None = None

    @abstractmethod
    def new_connection(self) -> Connection:
        """A connection of this transport."""

    @abstractmethod
    def refusal(self, reason: str) -> bytes:
        """What a refused connection is told, in the transport's own shape."""

    def buildProtocol(self, addr: Any) -> Protocol:
        if self.refusing is not None:
            return Refuse(self.refusal(self.refusing))
        if len(self.connections) >= self.max_connections:
            self.log.warning("refusing connection from %s: %d connections open", addr,
                             len(self.connections))
            return Refuse(self.refusal("too many connections"))
        proto = self.new_connection()
        self.connections.add(proto)
        return proto

    def connection_closed(self, proto: Connection) -> None:
        self.connections.discard(proto)

    def all_idle(self) -> bool:
        return all(p.idle() for p in self.connections)
