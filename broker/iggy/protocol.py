"""The Iggy transport's Twisted protocol: framing and reply order for one TCP connection.

Owns: splitting the byte stream into frames (``u32 length, u32 code, payload``), handing
each to ``IggyHandlers.dispatch`` and writing its reply; one request at a time per
connection (Iggy's commands depend on what came before: a login, a join), so while a reply
waits (an fsync, a group write, password hashing) the connection stops reading and the next
frame waits in the buffer; pausing a client that does not read its replies (Twisted
producer/consumer flow control, from ``broker.connection``, as are the idle timeout, the
connection limit and the half-close: a client that shuts down its sending side
(``shutdown(SHUT_WR)``) gets a reply to every request it sent, then the close).

Malformed input never crashes anything: a bad payload or an unknown code gets an error
status and the connection carries on; a frame whose length cannot hold a code, or that is
longer than ``max_frame_bytes``, gets an error status and the connection is closed (the
stream cannot be re-synchronised). A frame whose length lies about what follows simply
waits for those bytes, up to the idle timeout.

Must not import: the store, groups or replication; everything goes through the handlers.
"""

from __future__ import annotations

import logging

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from broker.connection import Connection, ConnectionFactory
from broker.iggy.codec import REQUEST_HEAD, frame_error
from broker.iggy.errors import Status
from broker.iggy.handlers import IggyHandlers, Session

__all__ = ["IggyProtocol", "IggyFactory"]

log = logging.getLogger("skerry.iggy")

_HEAD = REQUEST_HEAD.size
_unpack_head = REQUEST_HEAD.unpack_from


class IggyProtocol(Connection):
    """One Iggy client connection."""

    factory: IggyFactory

    def __init__(self, factory: IggyFactory) -> None:
        super().__init__(factory)
        self.max_frame = factory.max_frame_bytes
        self._buffer = bytearray()
        self._pos = 0
        self._waiting = False  # a reply is not ready yet
        self._processing = False
        self.session: Session | None = None

    # ---------------------------------------------------------------- connection hooks

    def connection_opened(self) -> None:
        self.session = self.handlers.open_session(self.peer)
        log.debug("iggy: client %d connected from %s", self.session.client_id, self.peer)

    def connection_ended(self) -> None:
        self._buffer = bytearray()
        self._pos = 0
        if self.session is not None:
            self.handlers.close_session(self.session)
            log.debug("iggy: client %d disconnected", self.session.client_id)

    def who(self) -> str:
        return f"iggy client {self.session.client_id if self.session else '?'}"

    def outstanding(self) -> bool:
        """A reply not ready yet; a complete frame left in the buffer is outstanding only
        while paused, which the base checks."""
        return self._waiting

    def reading_blocked(self) -> bool:
        """One request at a time: no reading while a reply waits."""
        return self._waiting

    def resume_work(self) -> None:
        self._process()

    def last_words(self) -> None:
        """A partial frame at the end is dropped: the client stopped sending in its
        middle."""
        if len(self._buffer) > self._pos:
            log.info("iggy: client %s shut down its side in the middle of a frame (%d bytes "
                     "dropped)", self.session.client_id if self.session else "?",
                     len(self._buffer) - self._pos)
        self._buffer = bytearray()
        self._pos = 0

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


class IggyFactory(ConnectionFactory):
    """Builds Iggy connections over one set of handlers."""

    log = log

    def __init__(self, handlers: IggyHandlers, clock: IReactorTime, *, max_frame_bytes: int,
                 max_connections: int, idle_timeout_ms: int | None,
                 max_pending_output_bytes: int) -> None:
        super().__init__(handlers, clock, max_connections=max_connections,
                         idle_timeout_ms=idle_timeout_ms,
                         max_pending_output_bytes=max_pending_output_bytes)
        self.max_frame_bytes = max_frame_bytes

    def new_connection(self) -> IggyProtocol:
        return IggyProtocol(self)

    def refusal(self, reason: str) -> bytes:
        return frame_error(Status.ERROR)
