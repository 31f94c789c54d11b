"""The Kafka transport's Twisted protocol: framing and reply order for one TCP connection.

Owns: cutting the byte stream into frames (``int32 size`` + request, the codec's
``FrameSplitter``), handing each to ``KafkaHandlers.dispatch`` as it arrives, and writing
the responses **in request order** (kafka-python checks that each response answers its
oldest request in flight): a response that waits (a produce's acks, a long-poll fetch) holds
back the responses after it, while the requests behind it already run, so a produce
pipelined behind a long-poll fetch on the same connection wakes that fetch instead of
waiting for its timeout. A Produce with acks = 0 has no response and takes no place in
the order. At most ``MAX_IN_FLIGHT`` responses wait at once; beyond that the connection
stops reading until they are written.

With ``auth.tokens_file`` every connection logs in first with SASL PLAIN
(``broker.kafka.sasl``: ApiVersions and SaslHandshake, then the raw token; anything else
before that closes the connection).

From ``broker.connection``: pausing a client that does not read its responses, the idle
timeout, the connection limit, and the half-close: a client that shuts down its sending
side (``shutdown(SHUT_WR)``) gets a response to every request it sent, then the close.

Bad input never hurts the broker: an unknown api key, an unsupported version or a malformed
frame closes that connection without a response (Kafka's own behaviour), after the
responses to the requests before it; a size prefix above ``max_frame_bytes`` (or negative)
closes it at once (the stream cannot be re-synchronised).

Must not import: the store, groups or replication; everything goes through the handlers.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from broker.auth import TokenStore, failure_delay
from broker.connection import Connection, ConnectionFactory
from broker.kafka.codec import FrameSplitter, FrameTooLarge
from broker.kafka.handlers import CLOSE, KafkaHandlers
from broker.kafka.sasl import SaslGate, Step
from broker.transport.slots import REPLY

__all__ = ["KafkaProtocol", "KafkaFactory", "MAX_IN_FLIGHT"]

log = logging.getLogger("skerry.kafka")

MAX_IN_FLIGHT = 256
"""Responses that may wait at once on one connection before it stops reading (librdkafka
keeps up to 1,000,000 requests in flight by default; kafka-python 5)."""

_PENDING: Any = object()


class KafkaProtocol(Connection):
    """One Kafka client connection."""

    factory: KafkaFactory

    def __init__(self, factory: KafkaFactory) -> None:
        super().__init__(factory)
        self._splitter = FrameSplitter(factory.max_frame_bytes)
        self._frames: deque[bytes] = deque()  # read, not dispatched yet
        self._replies: deque[list[Any]] = deque()  # slots [reply or _PENDING], in request order
        self._out: list[bytes] = []
        self._processing = False
        self._closing = False  # a CLOSE was dispatched: read and run nothing more
        self.peer_host = ""
        """The client's IP address (DescribeGroups shows it as the member's host)."""
        self.principal: str | None = None
        """The SASL user once logged in (what ACLs are checked for; None: no login)."""
        tokens = factory.tokens
        self._sasl: SaslGate | None = None if tokens is None else SaslGate(
            tokens, failure_delay(1))
        """Until the client has logged in with SASL PLAIN (``broker.kafka.sasl``); None:
        authenticated, or the listener needs no login."""

    # ---------------------------------------------------------------- connection hooks

    def connection_opened(self) -> None:
        self.peer_host = str(getattr(self.transport.getPeer(), "host", ""))

    def connection_ended(self) -> None:
        self._frames.clear()
        self._replies.clear()
        self._out = []

    def who(self) -> str:
        return f"kafka client {self.peer}"

    def outstanding(self) -> bool:
        return bool(self._replies) or bool(self._frames)

    def reading_blocked(self) -> bool:
        return self._closing or len(self._replies) >= MAX_IN_FLIGHT

    def resume_work(self) -> None:
        self._process()

    def last_words(self) -> None:
        """A partial frame at the end is dropped: the client stopped sending in its middle."""
        if self._splitter.buffered:
            log.info("kafka: %s shut down its side in the middle of a frame (%d bytes "
                     "dropped)", self.peer, self._splitter.buffered)

    # ---------------------------------------------------------------- framing

    def dataReceived(self, data: bytes) -> None:
        self._arm_idle()
        if self._closing:
            return
        for frame in self._splitter.feed(data):
            if isinstance(frame, FrameTooLarge):
                log.info("kafka: %s sent a %s; closing", self.peer, frame)
                self._closing = True
                self._frames.clear()
                self._flush_out()
                self.transport.loseConnection()
                return
            self._frames.append(frame)
        self._process()

    def _process(self) -> None:
        """Dispatch the frames read so far, in order (not again while running: a reply's
        callback may call this), then write the replies that are ready."""
        if self._processing:
            return
        self._processing = True
        frames = self._frames
        replies = self._replies
        dispatch = self.handlers.dispatch
        transport = self.transport
        try:
            while frames and not (self.paused or self._closing or transport.disconnecting
                                  or len(replies) >= MAX_IN_FLIGHT):
                frame = frames.popleft()
                if self._sasl is not None and not self._sasl_step(frame):
                    continue
                reply = dispatch(frame, self.peer_host, self)
                if reply is None:
                    continue
                if isinstance(reply, Deferred):
                    slot = [_PENDING]
                    replies.append(slot)
                    reply.addCallback(self._answer, slot)
                elif reply is CLOSE:
                    self._closing = True
                    frames.clear()
                    replies.append([CLOSE])
                    self._drain()
                elif replies:
                    replies.append([reply])
                else:
                    self._out.append(reply)
        finally:
            self._processing = False
        self._flush_out()
        self._update_reading()
        if self._read_closed:
            self._close_when_answered()

    def _sasl_step(self, frame: bytes) -> bool:
        """A frame before authentication: True when it goes to the dispatcher (an
        ApiVersions); else it was answered here, or the connection is closing."""
        assert self._sasl is not None
        outcome = self._sasl.step(frame)
        if outcome.step is Step.DISPATCH:
            return True
        if outcome.step is Step.REPLY:
            if outcome.user is not None:
                self._sasl = None
                self.principal = outcome.user
                log.info("kafka: SASL PLAIN ok: user %s from %s", outcome.user, self.peer)
            self._out.append(outcome.reply)  # nothing is pending before authentication
            return False
        log.warning("kafka: %s sent %s; closing", self.peer, outcome.why)
        self._closing = True
        self._frames.clear()
        if outcome.reply:
            self._out.append(outcome.reply)  # SaslAuthenticate's error, before the close
        self._flush_out()
        if outcome.delay_s:
            self.factory.clock.callLater(outcome.delay_s, self._close_now)
        else:
            self.transport.loseConnection()
        return False

    def _close_now(self) -> None:
        if self.transport is not None and not self.transport.disconnecting:
            self.transport.loseConnection()

    def _answer(self, reply: bytes | None, slot: list[Any]) -> None:
        slot[REPLY] = reply
        if self.transport is None:
            return
        if self._replies and self._replies[0] is slot:
            self._drain()
            if not self._processing:
                self._flush_out()
                self._update_reading()
                self._process()

    def _drain(self) -> None:
        """Move the responses at the head of the order that are ready to the output."""
        replies = self._replies
        out = self._out
        while replies:
            value = replies[0][REPLY]
            if value is _PENDING:
                return
            replies.popleft()
            if value is CLOSE:
                replies.clear()
                self._flush_out()
                self.transport.loseConnection()
                return
            if value is not None:
                out.append(value)

    def _flush_out(self) -> None:
        out = self._out
        if out and self.transport is not None and not self.transport.disconnecting:
            chunks: list[bytes] = []
            for reply in out:  # bytes, or a fetch's frame in chunks
                if isinstance(reply, bytes):
                    chunks.append(reply)
                else:
                    chunks.extend(reply)
            self.write_chunks(chunks)
        out.clear()


class KafkaFactory(ConnectionFactory):
    """Builds Kafka connections over one set of handlers."""

    log = log

    def __init__(self, handlers: KafkaHandlers, clock: IReactorTime, *, max_frame_bytes: int,
                 max_connections: int, idle_timeout_ms: int | None,
                 max_pending_output_bytes: int, tokens: TokenStore | None = None) -> None:
        super().__init__(handlers, clock, max_connections=max_connections,
                         idle_timeout_ms=idle_timeout_ms,
                         max_pending_output_bytes=max_pending_output_bytes)
        self.max_frame_bytes = max_frame_bytes
        self.tokens = tokens
        """``auth.tokens_file``'s users: every connection logs in with SASL PLAIN first
        (None: no login)."""

    def new_connection(self) -> KafkaProtocol:
        return KafkaProtocol(self)

    def refusal(self, reason: str) -> bytes:
        """Kafka has no unsolicited message: a refused connection is just closed."""
        return b""
