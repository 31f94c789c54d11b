"""The Iggy transport's Twisted protocol: framing and reply order for one TCP connection.

Owns: splitting the byte stream into frames (``u32 length, u32 code, payload``), handing
each to ``IggyHandlers.dispatch`` and writing its reply; one request at a time per
connection (Iggy's commands depend on what came before: a login, a join), so while a reply
waits (an fsync, a group write, password hashing) the connection stops reading and the next
frame waits in the buffer; pausing a client that does not read its replies (Twisted
producer/consumer flow control); the idle timeout and the connection limit; the
half-close: a client that shuts down its sending side (``shutdown(SHUT_WR)``) gets a reply to
every request it sent, then the close.

Malformed input never crashes anything: a bad payload or an unknown code gets an error
status and the connection carries on; a frame whose length cannot hold a code, or that is
longer than ``max_frame_bytes``, gets an error status and the connection is closed (the
stream cannot be re-synchronised). A frame whose length lies about what follows simply
waits for those bytes, up to the idle timeout.

Must not import: the store, groups or replication; everything goes through the handlers.
"""

from __future__ import annotations

import logging
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IHalfCloseableProtocol, IPushProducer, IReactorTime
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from zope.interface import implementer

from broker.iggy.codec import REQUEST_HEAD, frame_error
from broker.iggy.errors import Status
from broker.iggy.handlers import IggyHandlers, Session

__all__ = ["IggyProtocol", "IggyFactory"]

log = logging.getLogger("skerry.iggy")

_HEAD = REQUEST_HEAD.size
_unpack_head = REQUEST_HEAD.unpack_from


@implementer(IPushProducer, IHalfCloseableProtocol)
class IggyProtocol(Protocol):
    """One Iggy client connection.

    Half-closeable: TCP's read EOF does not close the connection (``readConnectionLost``);
    every request already read is answered, in order, and then the connection closes.
    """

    def __init__(self, factory: IggyFactory) -> None:
        self.factory = factory
        self.handlers = factory.handlers
        self.max_frame = factory.max_frame_bytes
        self._buffer = bytearray()
        self._pos = 0
        self.paused = False  # the client does not read its replies
        self._waiting = False  # a reply is not ready yet
        self._reading = True
        self._processing = False
        self._read_closed = False  # the client shut down its sending side (half-close)
        self._idle_call: Any = None
        self.session: Session | None = None

    # ---------------------------------------------------------------- connection

    def connectionMade(self) -> None:
        peer = self.transport.getPeer()
        address = f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"
        self.session = self.handlers.open_session(address)
        self.transport.bufferSize = self.factory.max_pending_output_bytes
        no_delay = getattr(self.transport, "setTcpNoDelay", None)
        if no_delay is not None:  # a reply's last segment must not wait for a delayed ACK
            no_delay(True)
        self.transport.registerProducer(self, True)
        self._arm_idle()
        log.debug("iggy: client %d connected from %s", self.session.client_id, address)

    def connectionLost(self, reason: Failure | None = None) -> None:
        if self._idle_call is not None and self._idle_call.active():
            self._idle_call.cancel()
        self._idle_call = None
        self._buffer = bytearray()
        self._pos = 0
        if self.session is not None:
            self.handlers.close_session(self.session)
            log.debug("iggy: client %d disconnected", self.session.client_id)
        self.factory.connection_closed(self)

    def readConnectionLost(self) -> None:
        """The client shut down its sending side: nothing more will be read. Answer the
        frames it sent (one waiting for an fsync or a password hash included), then close;
        at once if nothing is outstanding."""
        if self._read_closed:
            return
        self._read_closed = True
        log.debug("iggy: client %s shut down its side; closing once its requests are "
                  "answered", self.session.client_id if self.session else "?")
        self._close_when_answered()

    def writeConnectionLost(self) -> None:
        """Not used: the broker never shuts down only its own sending side."""

    def _close_when_answered(self) -> None:
        """After the client's half-close: once no reply waits and no complete frame is
        left in the buffer (a paused connection still has frames to run), close; the
        transport writes the replies first. A partial frame at the end is dropped: the
        client stopped sending in its middle."""
        if not self._read_closed or self.paused or self._waiting \
                or self.transport.disconnecting:
            return
        if len(self._buffer) > self._pos:
            log.info("iggy: client %s shut down its side in the middle of a frame (%d bytes "
                     "dropped)", self.session.client_id if self.session else "?",
                     len(self._buffer) - self._pos)
        self._buffer = bytearray()
        self._pos = 0
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
        log.info("iggy: closing idle connection of client %s",
                 self.session.client_id if self.session else "?")
        self.transport.loseConnection()

    # ---------------------------------------------------------------- flow control

    def pauseProducing(self) -> None:
        """The client is not reading its replies: stop reading its requests."""
        self.paused = True
        self._update_reading()

    def resumeProducing(self) -> None:
        self.paused = False
        self._update_reading()
        self._process()

    def stopProducing(self) -> None:
        self.paused = True

    def _update_reading(self) -> None:
        want = not (self.paused or self._waiting)
        # After EOF, reading again would only report EOF again.
        if want != self._reading and not (self._read_closed or self.transport.disconnecting):
            self._reading = want
            if want:
                self.transport.resumeProducing()
            else:
                self.transport.pauseProducing()

    # ---------------------------------------------------------------- framing

    def dataReceived(self, data: bytes) -> None:
        self._arm_idle()
        self._buffer += data
        self._process()

    def _process(self) -> None:
        if self._processing:
            return
        self._processing = True
        try:
            self._frames()
        finally:
            self._processing = False
        if self._read_closed:
            self._close_when_answered()

    def _frames(self) -> None:
        buf = self._buffer
        transport = self.transport
        dispatch = self.handlers.dispatch
        session = self.session
        assert session is not None
        while not (self.paused or self._waiting or transport.disconnecting):
            pos = self._pos
            available = len(buf) - pos
            if available < _HEAD:
                break
            length, code = _unpack_head(buf, pos)
            if length < 4 or length - 4 > self.max_frame:
                self._refuse(length)
                return
            end = pos + 4 + length
            if len(buf) < end:
                break
            with memoryview(buf) as view:  # one copy of the frame, not two
                payload = bytes(view[pos + _HEAD:end])
            self._pos = end
            reply = dispatch(session, code, payload)
            if isinstance(reply, Deferred):
                self._waiting = True
                reply.addCallback(self._answer)
                if self._waiting:
                    self._update_reading()
            else:
                transport.write(reply)
        pos = self._pos
        if pos and (pos >= len(buf) or pos > 65536):
            del buf[:pos]
            self._pos = 0

    def _answer(self, frame: bytes) -> None:
        self._waiting = False
        if self.transport is None or self.transport.disconnecting:
            return
        self.transport.write(frame)
        if not self._processing:
            self._update_reading()
            self._process()

    def _refuse(self, length: int) -> None:
        log.info("iggy: client %s sent a frame of length %d (limit %d); closing",
                 self.session.client_id if self.session else "?", length, self.max_frame + 4)
        self._buffer = bytearray()
        self._pos = 0
        self.transport.write(frame_error(Status.INVALID_FORMAT if length < 4
                                         else Status.INVALID_COMMAND))
        self.transport.loseConnection()

    def idle(self) -> bool:
        """True when no reply is outstanding."""
        return not self._waiting


class _Refuse(Protocol):
    """Answers one error status and closes (connection limit or shutdown)."""

    def connectionMade(self) -> None:
        self.transport.write(frame_error(Status.ERROR))
        self.transport.loseConnection()


class IggyFactory(Factory):
    """Builds Iggy connections over one set of handlers, enforcing the connection limit."""

    def __init__(self, handlers: IggyHandlers, clock: IReactorTime, *, max_frame_bytes: int,
                 max_connections: int, idle_timeout_ms: int | None,
                 max_pending_output_bytes: int) -> None:
        self.handlers = handlers
        self.clock = clock
        self.max_frame_bytes = max_frame_bytes
        self.max_connections = max_connections
        self.idle_timeout = None if idle_timeout_ms is None else idle_timeout_ms / 1000.0
        self.max_pending_output_bytes = max_pending_output_bytes
        self.connections: set[IggyProtocol] = set()
        self.refusing: str | None = None

    def buildProtocol(self, addr: Any) -> Protocol:
        if self.refusing is not None:
            return _Refuse()
        if len(self.connections) >= self.max_connections:
            log.warning("iggy: refusing connection from %s: %d connections open", addr,
                        len(self.connections))
            return _Refuse()
        proto = IggyProtocol(self)
        self.connections.add(proto)
        return proto

    def connection_closed(self, proto: IggyProtocol) -> None:
        self.connections.discard(proto)

    def all_idle(self) -> bool:
        return all(p.idle() for p in self.connections)
