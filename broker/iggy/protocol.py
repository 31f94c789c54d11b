"""The Iggy transport's Twisted protocol: framing and reply order for one TCP connection.

Owns: splitting the byte stream into frames (``u32 length, u32 code, payload``, with the
kit's splitter, ``broker.iggy.codec.request_splitter``), handing
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
from collections import deque

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from broker.connection import Connection, ConnectionFactory
from broker.iggy.codec import FrameRefused, frame_error, request_splitter
from broker.iggy.errors import Status
from broker.iggy.handlers import IggyHandlers, Session

__all__ = ["IggyProtocol", "IggyFactory"]

log = logging.getLogger("skerry.iggy")


class IggyProtocol(Connection):
    """One Iggy client connection."""

    factory: IggyFactory

    def __init__(self, factory: IggyFactory) -> None:
        super().__init__(factory)
        self.max_frame = factory.max_frame_bytes
        self._splitter = request_splitter(self.max_frame)
        self._frames: deque[tuple[int, bytes] | FrameRefused] = deque()  # read, not run yet
        self._waiting = False  # a reply is not ready yet
        self._processing = False
        self.session: Session | None = None

    # ---------------------------------------------------------------- connection hooks

    def connection_opened(self) -> None:
        self.session = self.handlers.open_session(self.peer)
        log.debug("iggy: client %d connected from %s", self.session.client_id, self.peer)

    def connection_ended(self) -> None:
        self._splitter.clear()
        self._frames.clear()
        if self.session is not None:
            self.handlers.close_session(self.session)
            log.debug("iggy: client %d disconnected", self.session.client_id)

    def who(self) -> str:
        return f"iggy client {self.session.client_id if self.session else '?'}"

    def outstanding(self) -> bool:
        """A reply not ready yet, or a whole request read and not run yet."""
        return self._waiting or bool(self._frames)

    def reading_blocked(self) -> bool:
        """One request at a time: no reading while a reply waits."""
        return self._waiting

    def resume_work(self) -> None:
        self._process()

    def last_words(self) -> None:
        """A partial frame at the end is dropped: the client stopped sending in its
        middle."""
        if self._splitter.buffered:
            log.info("iggy: client %s shut down its side in the middle of a frame (%d bytes "
                     "dropped)", self.session.client_id if self.session else "?",
                     self._splitter.buffered)
        self._splitter.clear()

    # ---------------------------------------------------------------- framing

    def dataReceived(self, data: bytes) -> None:
        self._arm_idle()
        self._frames.extend(self._splitter.feed(data))
        self._process()

    def _process(self) -> None:
        """Dispatch the frames read so far, one at a time and in order (a waiting reply
        holds the rest; not again while running: a reply's callback may call this)."""
        if self._processing:
            return
        self._processing = True
        frames = self._frames
        transport = self.transport
        dispatch = self.handlers.dispatch
        session = self.session
        assert session is not None
        try:
            while frames and not (self.paused or self._waiting or transport.disconnecting):
                request = frames.popleft()
                if type(request) is FrameRefused:
                    self._refuse(request)
                    break
                code, payload = request  # type: ignore[misc]
                reply = dispatch(session, code, payload)
                if isinstance(reply, Deferred):
                    self._waiting = True
                    reply.addCallback(self._answer)
                    if self._waiting:
                        self._update_reading()
                else:
                    transport.write(reply)
        finally:
            self._processing = False
        if self._read_closed:
            self._close_when_answered()

    def _answer(self, frame: bytes) -> None:
        self._waiting = False
        if self.transport is None or self.transport.disconnecting:
            return
        self.transport.write(frame)
        if not self._processing:
            self._update_reading()
            self._process()

    def _refuse(self, refused: FrameRefused) -> None:
        log.info("iggy: client %s sent a %s; closing",
                 self.session.client_id if self.session else "?", refused)
        self._frames.clear()
        self.transport.write(frame_error(Status.INVALID_FORMAT if refused.length < 4
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
