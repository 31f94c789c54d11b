"""The TANK transport's Twisted protocol: framing and replies for one TCP connection.

Owns: the greeting ping written as soon as a connection is accepted (spec/tank-notes.md
§1: the 2017 Java client waits for it), splitting the byte stream into frames
(``codec.FrameSplitter``: ``msg_id:u8 payload_size:u32 payload``, any chunk size), handing
each to ``TankHandlers.parse`` and ``dispatch_request`` and writing its reply. Replies carry their request id
and **may go out of order**: a request whose reply waits (a produce waiting for its
fsync, a long-poll consume) does not hold up the requests after it on the same connection;
each reply is written when it is ready. At most ``max_pending`` requests of a connection
wait at once; beyond that the connection stops reading until one is answered. Pausing a
client that does not read its replies, the idle timeout, the connection limit and the
half-close come from ``broker.connection``.

Bad input never crashes anything: TANK closes the connection on an unknown message id or
a malformed payload, and so does Skerry (a frame announcing more than
``max_frame_bytes``, a request the codec refuses, one no handler serves); a bundle that is
well framed but invalid is answered per partition instead (the handlers' business). A
closed connection cancels its waiting consumes.

Must not import: the store, groups or replication; everything goes through the handlers.
"""

from __future__ import annotations

import logging
from collections import deque

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.interfaces import IHandshakeListener, INegotiated, IReactorTime
from twisted.python.failure import Failure
from zope.interface import implementer

from broker.connection import Connection, ConnectionFactory
from broker.tank.codec import PING_FRAME, CodecError, Frame, FrameSplitter, FrameTooLarge
from broker.tank.handlers import TankHandlers, Unserved

__all__ = ["TankProtocol", "TankFactory", "DEFAULT_MAX_PENDING"]

log = logging.getLogger("skerry.tank")

DEFAULT_MAX_PENDING = 1024
"""Requests of one connection whose replies may wait at once."""


@implementer(IHandshakeListener)
class TankProtocol(Connection):
    """One TANK client connection."""

    factory: TankFactory

    def __init__(self, factory: TankFactory) -> None:
        super().__init__(factory)
        self.splitter = FrameSplitter(factory.max_frame_bytes)
        self._frames: deque[Frame] = deque()
        self._pending: set[Deferred[bytes]] = set()
        self._processing = False

    # ---------------------------------------------------------------- connection hooks

    def connection_opened(self) -> None:
        # Under TLS the greeting waits for the handshake (``handshakeCompleted``): written
        # before it, it would stall the handshake.
        if not INegotiated.providedBy(self.transport):
            self.transport.write(PING_FRAME)

    def handshakeCompleted(self) -> None:
        """``IHandshakeListener``: the TLS handshake is done; greet the client."""
        self.transport.write(PING_FRAME)

    def connection_ended(self) -> None:
        self._frames.clear()
        pending, self._pending = self._pending, set()
        for d in pending:
            d.cancel()

    def who(self) -> str:
        return f"tank client {self.peer}"

    def outstanding(self) -> bool:
        return bool(self._pending or self._frames)

    def reading_blocked(self) -> bool:
        return len(self._pending) >= self.factory.max_pending

    def resume_work(self) -> None:
        self._process()

    def _idle_expired(self) -> None:
        """A connection whose consume is waiting (up to an hour) is not idle."""
        if self._pending:
            self._arm_idle()
            return
        super()._idle_expired()

    def last_words(self) -> None:
        if self.splitter.buffered:
            log.info("tank: %s shut down its side in the middle of a frame (%d bytes dropped)",
                     self.who(), self.splitter.buffered)

    # ---------------------------------------------------------------- framing

    def dataReceived(self, data: bytes) -> None:
        self._arm_idle()
        for item in self.splitter.feed(data):
            if type(item) is FrameTooLarge:
                self._close(str(item))
                return
            self._frames.append(item)  # type: ignore[arg-type]
        self._process()

    def _process(self) -> None:
        """Dispatch the frames read so far, in order (not again while running: a reply's
        callback may call this); a frame the codec cannot read, or no handler serves,
        closes the connection."""
        if self._processing:
            return
        self._processing = True
        frames = self._frames
        handlers = self.factory.handlers
        parse, dispatch = handlers.parse, handlers.dispatch_request
        max_pending = self.factory.max_pending
        try:
            while frames and not (self.paused or self.transport.disconnecting) \
                    and len(self._pending) < max_pending:
                frame = frames.popleft()
                try:
                    reply = dispatch(parse(frame))
                except (CodecError, Unserved) as exc:
                    self._close(f"frame 0x{frame.msg_id:02x}: {exc}")
                    break
                if reply is None:
                    continue
                if type(reply) is bytes:
                    self.write_chunks((reply,))
                    continue
                self._pending.add(reply)
                reply.addCallbacks(self._answer, self._lost, callbackArgs=(reply,),
                                   errbackArgs=(reply,))
        finally:
            self._processing = False
        self._update_reading()
        if self._read_closed:
            self._close_when_answered()

    def _answer(self, frame: bytes, d: Deferred[bytes]) -> None:
        if d not in self._pending:
            return  # the connection closed meanwhile
        self._pending.discard(d)
        transport = self.transport
        if transport is None or transport.disconnecting:
            return
        self.write_chunks((frame,))
        if not self._processing:
            self._process()

    def _lost(self, failure: Failure, d: Deferred[bytes]) -> None:
        self._pending.discard(d)
        if failure.check(CancelledError):
            return
        if failure.check(Unserved):
            self._close(str(failure.value))
            return
        log.error("tank: a reply for %s failed: %s", self.who(), failure.getTraceback())
        self._close("internal error")

    def _close(self, why: str) -> None:
        log.info("tank: closing %s: %s", self.who(), why)
        self._frames.clear()
        if self.transport is not None and not self.transport.disconnecting:
            self.transport.loseConnection()


class TankFactory(ConnectionFactory):
    """Builds TANK connections over one set of handlers."""

    log = log

    def __init__(self, handlers: TankHandlers, clock: IReactorTime, *, max_frame_bytes: int,
                 max_connections: int, idle_timeout_ms: int | None,
                 max_pending_output_bytes: int, max_pending: int = DEFAULT_MAX_PENDING) -> None:
        super().__init__(handlers, clock, max_connections=max_connections,
                         idle_timeout_ms=idle_timeout_ms,
                         max_pending_output_bytes=max_pending_output_bytes)
        self.max_frame_bytes = max_frame_bytes
        self.max_pending = max_pending

    def new_connection(self) -> TankProtocol:
        return TankProtocol(self)

    def refusal(self, reason: str) -> bytes:
        """TANK has no refusal message: the connection is closed without its greeting."""
        return b""
