"""The V1 transport's Twisted protocol: framing, dispatch and reply order for one connection.

Owns: running the framer (``broker.v1.codec.framing.LineFramer``, the one the framing tests test)
over each read, the PRODUCE fast path (the codec's faster branch, ``Codec.scan_produce``,
a run of plain PRODUCEs scanned in place at the framer's cursor, compiled or its twin; it
feeds the core's one produce door as a parsed PRODUCE does (``BrokerCore.produce``), and answers
through the same boundary, ``Handlers.boundary``), and the per-connection queue that keeps
replies in request order while some wait (fsync, acks=all, group writes, long polls). What
every connection needs whatever its protocol (socket options, idle timeout, flow control,
half-close, the connection limit) is ``broker.connection``'s.

The PRODUCE path, socket to fsync: ``dataReceived`` -> ``LineFramer.take_fast`` (fast:
a run scanned at the cursor; else a line -> ``_command`` (``Codec.parse_command``) ->
``_execute`` -> ``Handlers.dispatch`` -> ``Handlers.produce``) -> ``BrokerCore.produce``
(``ProducePipeline.produce``, the core's one door: queued in this turn's batch for the
partition) -> ``ProducePipeline.flush`` (one append a partition a turn; answered when
``_when_durable`` says) -> ``V1Protocol.produced`` (the slots get ``replies.produce_ok``)
-> ``drain`` (replies in request order, one write per read). docs/architecture.md lists the
walk, measured by tests/test_produce_walk.py.

Why not ``LineReceiver``: it re-splits the whole buffer for every line, which is quadratic
on a burst of thousands of pipelined requests (``broker.v1.codec.framing``).

Must not import: the store, groups or replication directly; everything goes through the
handlers and the core.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from twisted.internet.interfaces import IReactorTime

from broker.connection import Connection, ConnectionFactory
from broker.core import ProduceRequest, ProduceResult
from broker.errors import BadRequest, SkerryError, Unauthenticated, Unavailable
from broker.transport.slots import CID, REPLY, T0
from broker.v1 import codec
from broker.v1.codec.framing import TOO_LONG, LineFramer
from broker.v1.codec.replies import PRODUCE_OK, err, fill_produce_ok, line_too_long_reply
from broker.v1.handlers.dispatch import Handlers

__all__ = ["V1Protocol", "V1Factory"]

log = logging.getLogger("skerry.v1")

_FAST_RUN = 32
"""Fast-path requests taken from the framer at a time (``LineFramer.take_fast``)."""

_BEFORE_AUTH = (codec.Ping, codec.Auth)
"""The commands served on a connection that has not authenticated (when auth is on)."""

UNTERMINATED = ("unterminated line at end of input: a request ends with a line feed; it was "
                "not executed")
"""The BAD_REQUEST message for bytes after the last line feed when the client half-closes:
they may be half a request from a client that died mid-write, so they are never run."""


class V1Protocol(Connection):
    """One client connection speaking the V1 line protocol."""

    factory: V1Factory

    def __init__(self, factory: V1Factory) -> None:
        super().__init__(factory)
        self.codec = factory.codec
        self.framer = LineFramer(factory.max_line_bytes, self.codec.scan_produce)
        self._pending: deque[list[Any]] = deque()
        self._cmd_slots: set[int] = set()  # ids of pending slots of commands other than PRODUCE
        self._held: Any = None  # a command waiting for the replies before it (see _must_wait)
        self._out: list[bytes] = []
        self._out_bytes = 0
        # Replies ready at once are written in one go at the end of each read, or earlier
        # once this many bytes are waiting, so flow control still acts within a read.
        self._out_limit = min(65536, factory.max_pending_output_bytes // 4)
        self._core = factory.handlers.core
        self._produced = self.produced  # bound once: the core answers every PRODUCE here
        self._topic_names: dict[bytes, str] = {}
        # broker/auth.py: with auth configured nothing but PING and AUTH is served before a
        # successful AUTH (the PRODUCE fast path included). The handler updates these.
        self.authenticated = factory.handlers.auth_tokens is None
        self.principal: str | None = None  # the user of the last successful AUTH
        self.auth_failures = 0
        self.auth_ready_at = 0.0
        self.auth_queue: deque[Any] = deque()
        self._line_too_long = False  # an over-long line was read: its answer closes
        self._closing_reply = factory.too_long_reply  # the answer that closes (last_words)
        self._body_wait: tuple[bytes, int] | None = None  # a raw PRODUCE_BATCH line, its size
        # broker.v1.lane: a clean connection's plain PRODUCEs may be read and answered by
        # the read lane; every way out of this protocol's own path then says so (these two
        # wrappers exist only while the lane is on: removed again for a TLS connection).
        self._lane = factory.lane
        self._lane_fd = -1
        if self._lane is not None:
            self.dataReceived = self._lane_data_received  # type: ignore[method-assign]
            self.drain = self._lane_drain  # type: ignore[method-assign]

    # ---------------------------------------------------------------- connection hooks

    def connection_opened(self) -> None:
        log.info("connection from %s", self.peer)
        if self._lane is not None:
            transport = self.transport
            if self._direct and getattr(transport, "protocol", None) is self:
                self._lane_fd = transport.fileno()  # a plain TCP socket: the lane may read it
                self._lane_settle()
            else:
                self._lane = None  # TLS: the lane does not see the plaintext
                del self.dataReceived, self.drain

    def connection_ended(self) -> None:
        if self._lane is not None:
            self._lane.forget(self._lane_fd, self)
        self._pending.clear()
        self._cmd_slots.clear()
        self._held = None
        log.info("connection from %s closed", self.peer)

    def outstanding(self) -> bool:
        return self._held is not None or bool(self._pending) or \
            (self._lane is not None and self._lane.busy(self._lane_fd))

    # ---------------------------------------------------------------- the read lane

    def _lane_settle(self) -> None:
        """Put the connection (back) on the read lane when nothing of it is in flight or
        buffered here (broker.v1.lane: the lane only takes a clean connection's reads)."""
        transport = self.transport
        if self._pending or self._held is not None or self._out or self._cmd_slots \
                or self._body_wait is not None or not self.authenticated or self.paused \
                or self._read_closed or self._line_too_long or self.framer.buffered \
                or self._backlog or transport.disconnecting or transport.dataBuffer \
                or transport._tempDataBuffer:
            return
        self._lane.settle(self._lane_fd, self, transport, self._pending)  # type: ignore[union-attr]

    def _lane_data_received(self, data: bytes) -> None:
        V1Protocol.dataReceived(self, data)
        self._lane_settle()

    def _lane_drain(self) -> None:
        V1Protocol.drain(self)
        self._lane_settle()

    def reading_blocked(self) -> bool:
        """No reading while a command is held back: the requests pipelined behind it wait
        in the socket, not in the framer (what one read brought stays there, legal
        requests however many bytes they take)."""
        return self._held is not None

    def resume_work(self) -> None:
        if self.framer.buffered:
            self.dataReceived(b"")

    def last_words(self) -> None:
        """Bytes after the last line feed get ``UNTERMINATED``, not a run (a PRODUCE_BATCH
        whose body was cut short, an answer with its cid); after an over-long line, its
        answer; then the last replies go to the transport."""
        if self._body_wait is not None:
            line, size = self._body_wait
            self._body_wait = None
            got = len(self.framer.take_rest())
            try:
                cid = self.codec.parse_command(line).cid  # type: ignore[union-attr]
                error = BadRequest(f"the connection was shut down after {got} of the {size} "
                                   "bytes of the batch after the PRODUCE_BATCH line; it was "
                                   "not executed")
            except codec.CommandError as exc:
                cid, error = exc.cid, exc.error
            self._emit(err(cid, error))
            if self.factory.metrics is not None:
                self.factory.metrics.invalid()
        elif self.framer.take_rest():
            self._emit(err("0", BadRequest(UNTERMINATED)))
            if self.factory.metrics is not None:
                self.factory.metrics.invalid()
        self._flush_out()
        if self._line_too_long:
            self.write_now(self._closing_reply)

    # ---------------------------------------------------------------- framing

    def dataReceived(self, data: bytes) -> None:
        if self._line_too_long:
            return  # nothing after an over-long line is read
        self._arm_idle()
        framer = self.framer
        if self._body_wait is None and self._held is None and not self._cmd_slots \
                and not self.paused and self.authenticated and not self._core.closing:
            # A read that is one plain PRODUCE and nothing else (a request/response
            # client's every read): to the core's door without the loop below.
            one = framer.take_one(data)
            if one is not None:
                metrics = self.factory.metrics
                started = metrics.now() if metrics is not None else 0.0
                slot = self._produce_one(one)
                if metrics is not None:
                    metrics.fast_produced(1, slot, started)
                if self._out:
                    self._flush_out()
                if self._read_closed:
                    self._close_when_answered()
                return
        framer.feed(data)
        if self._body_wait is not None and not self._body_arrived():
            if self._read_closed:
                self._close_when_answered()
            return
        next_request = framer.next_request
        take_fast = framer.take_fast
        transport = self.transport
        command = self._command
        execute = self._execute
        produce_one = self._produce_one
        # The hot path: runs of plain PRODUCE lines are matched in place by the codec's
        # fast branch (no slicing, no command objects) and handed to the produce handler one
        # by one; anything else goes through the codec and the handler table.
        produce = self._core.produce  # the core's one door
        produced = self._produced
        check = self.handlers.check_produce  # ACLs (None without)
        pending = self._pending
        topic_names = self._topic_names
        boundary = self.handlers.boundary
        fast = self.authenticated and not boundary.shutting_down()
        metrics = self.factory.metrics  # broker.metrics: fast PRODUCEs counted once per read
        fast_count = 0
        started = metrics.now() if metrics is not None else 0.0
        while not self.paused and self._held is None:
            if fast and not self._cmd_slots:
                run = take_fast(_FAST_RUN)
                taken = len(run)
                if run:
                    # A run of one topic and one acks level (a pipelined client's read) goes
                    # to the core in one call; a refusal there queued nothing, and the run
                    # is then taken message by message, each answered on its own.
                    if len(run) > 1 and not self.paused:
                        cids, topics, keys, values, acks_col, _ = zip(*run, strict=True)
                        if topics.count(topics[0]) == len(run) and \
                                acks_col.count(acks_col[0]) == len(run):
                            topic = topics[0]
                            name = topic_names.get(topic)
                            if name is None:
                                name = topic_names[topic] = topic.decode()
                            slots = [[None, cid] for cid in cids]
                            try:
                                if check is not None:
                                    check(self, name)
                                produce(ProduceRequest(name, None, acks_col[0], keys, values,
                                                       slots, True), produced)
                            except SkerryError:
                                pass  # refused as a run: answered one by one below
                            except Exception as error:  # a bug: INTERNAL each, as dispatch
                                self._emit(boundary.fault("PRODUCE", cids[0].decode(), error))
                                for cid in cids[1:]:
                                    self._emit(boundary.internal(cid.decode(), error))
                                fast_count += len(cids)
                                slot = [b"", cids[-1]]  # answered (for the metrics)
                                run = ()
                            else:
                                pending.extend(slots)
                                fast_count += len(slots)
                                slot = slots[-1]
                                run = ()
                    for one in run:
                        if self.paused:  # a reply write filled the transport: stop here
                            framer.rewind(one[-1])
                            break
                        slot = produce_one(one)
                        fast_count += 1
                    if framer.at_end:
                        break
                    if taken == _FAST_RUN or self.paused:
                        continue  # more may follow (or the loop ends: paused)
            request = next_request()
            if request is None:
                break
            if request is TOO_LONG:
                self._too_long()
                return
            cmd = command(request)  # type: ignore[arg-type]  # None: answered or held back
            if cmd is not None:
                execute(cmd)
            elif self._body_wait is not None:
                break  # the rest of a PRODUCE_BATCH's batch is still to come
            elif self._line_too_long:
                return  # a body size that cannot be read: answered, closing
            if transport.disconnecting:
                framer.clear()
                return
        if fast_count and metrics is not None:
            metrics.fast_produced(fast_count, slot, started)
        self._flush_out()
        if not framer.at_end and framer.end_of_read(self._held is None) is not None:
            self._too_long()
            return
        if self._read_closed:
            self._close_when_answered()

    def _produce_one(self, one: Any) -> list[Any]:
        """One PRODUCE of the fast path (``(cid, topic, key, value, acks, start)`` from the
        codec's scan) to the core's door; its reply slot, queued, or answered here (a
        refusal, or INTERNAL for a bug: the connection stays)."""
        cid, topic, key, value, acks, _start = one
        slot: list[Any] = [None, cid]
        topic_names = self._topic_names
        name = topic_names.get(topic)
        if name is None:
            name = topic_names[topic] = topic.decode()
        try:
            check = self.handlers.check_produce  # ACLs (None without)
            if check is not None:
                check(self, name)
            self._core.produce(ProduceRequest(name, None, acks, (key,), (value,), (slot,), True),
                               self._produced)  # create: positional, faster
        except SkerryError as error:
            self._emit(self.handlers.boundary.refusal(cid.decode(), error))
        except Exception as error:  # a bug: INTERNAL, the connection stays
            self._emit(self.handlers.boundary.fault("PRODUCE", cid.decode(), error))
        else:
            self._pending.append(slot)
        return slot

    def _too_long(self, reply: bytes | None = None) -> None:
        """An over-long line (or a PRODUCE_BATCH body size that cannot be read, whose
        ``reply`` is given): nothing after it is read. It is answered in its turn, after
        the requests before it (replies keep request order: a PRODUCE still waiting for its
        fsync is answered first), and then the connection closes (``last_words``)."""
        self.framer.clear()
        self._flush_out()
        log.info("%s from %s; closing once the requests before it are answered",
                 "line too long" if reply is None else "unreadable body size", self.peer)
        if reply is not None:
            self._closing_reply = reply
        self._line_too_long = True
        self._read_closed = True
        self._update_reading()
        self.transport.pauseProducing()
        self._close_when_answered()

    def _body_arrived(self) -> bool:
        """The batch a raw PRODUCE_BATCH line waits for is all read: run the command (as
        the loop in ``dataReceived`` would have) and say True; False while it is not."""
        line, size = self._body_wait  # type: ignore[misc]
        body = self.framer.take_body(size)
        if body is None:
            return False
        self._body_wait = None
        cmd = self._command(line, body)
        if cmd is not None:
            self._execute(cmd)
        return True

    def _command(self, line: bytes, body: bytes | None = None) -> Any:
        """The command of one line to run now, or None: the line was answered here (a parse
        error, not authenticated), its command is held back until the replies before it
        are out (``_must_wait``), or it is a PRODUCE_BATCH whose batch follows the line and
        is not all read yet (``_body_wait``; ``body`` is that batch once it is)."""
        if body is None and b"|PRODUCE_BATCH|" in line:
            try:
                size = self.codec.body_size(line, self.factory.max_line_bytes)
            except codec.CommandError as exc:  # the body's end is unknown: answer, close
                if self.factory.metrics is not None:
                    self.factory.metrics.invalid()
                self._too_long(err(exc.cid, exc.error))
                return None
            if size is not None:
                body = self.framer.take_body(size)
                if body is None:
                    self._body_wait = (line, size)
                    return None
        try:
            cmd = self.codec.parse_command(line)
            if type(cmd) is codec.ProduceBatch and (body is not None or cmd.size is not None):
                if body is None or cmd.size != len(body):  # cannot happen: same size= token
                    raise codec.CommandError(cmd.cid, BadRequest("PRODUCE_BATCH size= unread"))
                cmd = self.codec.with_body(cmd, body)
        except codec.CommandError as exc:
            self._emit(err(exc.cid, exc.error))
            if self.factory.metrics is not None:
                self.factory.metrics.invalid()
            return None
        if cmd is None:
            return None
        if not self.authenticated and type(cmd) not in _BEFORE_AUTH:
            self._emit(err(cmd.cid, Unauthenticated("send AUTH <user> <token> first")))
            return None
        if self._must_wait(cmd):
            # Effects happen in request order: a command other than PRODUCE runs only once
            # everything before it on this connection was answered (a CONSUME pipelined
            # behind a PRODUCE sees it), and nothing runs past a command still waiting.
            self._held = cmd
            self._update_reading()
            return None
        return cmd

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
        if metrics is not None and (reply is not None or slot[REPLY] is not None
                                    and not self._pending):
            metrics.answered(slot)  # answered now; queued slots are timed in drain
        if reply is not None:
            self._emit(reply)
        elif slot[REPLY] is not None and not self._pending:
            self._emit(slot[REPLY])  # answered synchronously after all
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
        """Hand the queued replies to the transport in one write."""
        out = self._out
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._out_bytes = 0
        self.write_chunks((data,))

    def drain(self) -> None:
        """Move every reply whose turn has come to the transport; then run a command that
        was held back until those replies were out, and the lines read after it."""
        pending = self._pending
        out = self._out
        cmd_slots = self._cmd_slots
        while pending and pending[0][REPLY] is not None:
            entry = pending.popleft()
            line = entry[REPLY]
            if cmd_slots:
                cmd_slots.discard(id(entry))
            if len(entry) > T0:  # stamped by broker.metrics
                self.factory.metrics.answered(entry)
            out.append(line)
            self._out_bytes += len(line)
            if self._out_bytes > self._out_limit:
                self._flush_out()
        if out:  # _flush_out inlined: one frame less on every produce's answer
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            self._out_bytes = 0
            self.write_chunks((data,))
        held = self._held
        if held is not None and not self._must_wait(held) and not self.transport.disconnecting:
            self._held = None
            self._update_reading()
            self._execute(held)
            self._flush_out()
            if self.framer.buffered and not self.paused and self._held is None:
                self.dataReceived(b"")
        if self._read_closed:
            self._close_when_answered()

    _drain = drain

    def produced(self, result: ProduceResult) -> None:
        """The ``ProduceCallback`` of this connection's PRODUCEs: each slot of the result
        (``result.tokens``, in offset order) gets its reply, then what is due is written."""
        tokens = result.tokens
        error = result.error
        if error is None:
            if len(tokens) == 1:
                token = tokens[0]
                line = token[REPLY] = PRODUCE_OK % (token[CID], result.partition,
                                                    result.offset, result.hw)  # produce_ok
                pending = self._pending
                if len(pending) == 1 and pending[0] is token and not self._out \
                        and self._held is None and not self._read_closed:
                    # The one reply due and nothing else waiting (request/response): what
                    # ``drain`` would do, in fewer steps.
                    pending.clear()
                    if len(token) > T0:  # stamped by broker.metrics
                        self.factory.metrics.answered(token)
                    self.write_chunks((line,))
                    if self._lane is not None:
                        self._lane_settle()
                    return
            else:
                fill_produce_ok(tokens, result.partition, result.offset, result.hw)
        else:
            for token in tokens:
                token[REPLY] = err(token[CID].decode(), error)
        self.drain()


class V1Factory(ConnectionFactory):
    """Builds V1 connections over one set of handlers."""

    log = log
    metrics: Any = None
    """``broker.metrics.BrokerMetrics`` when ``metrics_port`` is set (the server sets it)."""
    lane: Any = None
    """``broker.v1.lane.ReadLane`` when the server runs one (connections opened after)."""

    def __init__(self, handlers: Handlers, clock: IReactorTime, *, max_line_bytes: int,
                 max_message_bytes: int, max_connections: int, idle_timeout_ms: int | None,
                 max_pending_output_bytes: int) -> None:
        super().__init__(handlers, clock, max_connections=max_connections,
                         idle_timeout_ms=idle_timeout_ms,
                         max_pending_output_bytes=max_pending_output_bytes)
        self.codec = codec.Codec(codec.CodecLimits(max_message_bytes=max_message_bytes))
        self.max_line_bytes = max_line_bytes
        self.too_long_reply = line_too_long_reply(max_line_bytes)

    def new_connection(self) -> V1Protocol:
        return V1Protocol(self)

    def refusal(self, reason: str) -> bytes:
        return err("0", Unavailable(reason))
