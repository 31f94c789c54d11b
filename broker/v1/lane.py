"""The V1 read lane: request/response PRODUCE taken a reactor turn at a time.

Owns: ``ReadLane``, what ``LeanEPollReactor`` asks first about each turn's events
(``take``), and ``lane_for``, which builds it when it can run.

Why: a request/response client (one PRODUCE, wait for the OK, the next; what rows (a),
(d) and (e) of docs/performance.md measure) cost about 8 µs of Python a message on the
connection's own path: the reactor's dispatch, a recv, the framer, a request object and a
callback, then a send. The lane does the reads, the match and the sends in C
(``broker/v1/_clane.c``) for every readable connection at once, and Python runs once a
turn: one call of the core's produce door for each topic and acks level of the turn
(``BrokerCore.produce``, the door every PRODUCE goes through, with the same refusals), and
one call for each answer the core gives, whatever the number of connections in it.

What it takes, and what it leaves: a read that is exactly one plain PRODUCE line (the
codec's fast branch: ``V1|<cid>|PRODUCE|<topic> <key>:<value>[ acks=...]``) from a
connection that is clean (nothing in flight, nothing buffered, authenticated, not paused,
not half-closed: ``V1Protocol._lane_settle``). Everything else goes the connection's own
way unchanged: any other read is handed back as bytes to ``dataReceived``; more bytes from
a connection whose reply is still awaited first put that reply's slot into the
connection's queue (so its replies keep request order); a reply the socket does not take
whole goes to ``write_chunks``. The lane steps aside while the broker shuts down. With ACLs
on (``Handlers.check_produce``) each request is checked against its own connection's
principal before its group goes to the door, as on the connection's path (a refused one is
answered at once). With metrics on (``V1Factory.metrics``) it counts the requests of each
group and times each answer once, from the oldest read in it, weighted by its requests.

The connection's own path is the reference: tests/v1/test_read_lane.py plays the same
conversations with the lane on and off and compares the bytes.

Must not import: the store, groups or replication (it talks to the core's door).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from broker.core import ProduceRequest, ProduceResult
from broker.errors import SkerryError
from broker.transport.slots import CID, LANE_T0, REPLY
from broker.v1.codec.replies import err
from data import speedups

if TYPE_CHECKING:
    from broker.v1.protocol import V1Factory

__all__ = ["ReadLane", "lane_for"]

log = logging.getLogger("skerry.v1")

_clane = speedups.load("broker.v1._clane")


class ReadLane:
    """The reactor's first look at a turn's events (see the module doc)."""

    def __init__(self, factory: V1Factory, selectables: dict[int, Any]) -> None:
        assert _clane is not None
        self._c = _clane.Lane(selectables, factory.max_line_bytes,
                              factory.codec.limits.max_message_bytes)
        self._factory = factory
        self._handlers = factory.handlers
        self._core = factory.handlers.core
        self._boundary = factory.handlers.boundary
        self._clock = factory.clock
        self._names: dict[bytes, str] = {}
        self._answer = self.answered  # bound once: the core answers every group here
        self.settle = self._c.settle
        self.forget = self._c.forget
        self.busy = self._c.busy
        self.taken = self._c.taken

    def accepting(self) -> bool:
        """Whether the lane takes new requests this turn: not while the broker stops."""
        return not self._boundary.shutting_down()

    def take(self, events: list[tuple[int, int]]) -> tuple[list[tuple[int, int]],
                                                           list[tuple[int, bytes]]]:
        """This turn's events: the PRODUCEs taken go to the core; returned, the events the
        reactor still dispatches and the reads it hands to ``dataReceived``. With metrics
        on, each slot carries the read's time and the requests are counted here."""
        metrics = self._factory.metrics
        now = self._clock.seconds() \
            if self._factory.idle_timeout is not None or metrics is not None else None
        check = self._handlers.check_produce  # ACLs (None without): per connection
        rest, reads, groups = self._c.take(events, now, self.accepting(), metrics is not None,
                                           check is not None)
        for topic, acks, keys, values, slots, protos in groups:
            if metrics is not None:
                metrics.count("PRODUCE", len(slots))
            if check is not None:
                keys, values, slots = self._allowed(check, topic, keys, values, slots, protos)
                if not slots:
                    continue
            self._produce(topic, acks, keys, values, slots)
        return rest, reads

    def _allowed(self, check: Any, topic: bytes, keys: list[bytes], values: list[bytes],
                 slots: list[list[Any]], protos: list[Any]
                 ) -> tuple[list[bytes], list[bytes], list[list[Any]]]:
        """The group's requests whose connection may write the topic (``check_produce``,
        the connection's path's check: Write, and Create where it would create it); the
        others are answered with the refusal at once."""
        name = self._name(topic)
        passed: tuple[list[bytes], list[bytes], list[list[Any]]] = ([], [], [])
        refused = []
        for key, value, slot, proto in zip(keys, values, slots, protos, strict=True):
            try:
                check(proto, name)
            except SkerryError as error:
                refused.append(self._refusal(slot, error))
            else:
                passed[0].append(key)
                passed[1].append(value)
                passed[2].append(slot)
        if refused:
            self._hand_over(self._c.deliver(refused))
        return passed

    def _refusal(self, slot: list[Any], error: SkerryError) -> list[Any]:
        """``slot`` answered with ``error`` as the connection's path answers a refusal."""
        slot[REPLY] = self._boundary.refusal(slot[CID].decode(), error)
        return slot

    def _name(self, topic: bytes) -> str:
        name = self._names.get(topic)
        if name is None:
            name = self._names[topic] = topic.decode()
        return name

    def _produce(self, topic: bytes, acks: str, keys: list[bytes], values: list[bytes],
                 slots: list[list[Any]]) -> None:
        """One group (a topic and an acks level) to the core's door in one call; refused
        as a whole, each request again on its own (``_each``)."""
        name = self._name(topic)
        try:
            self._core.produce(ProduceRequest(name, None, acks, keys, values, slots, True),
                               self._answer)
        except SkerryError:
            self._each(name, acks, keys, values, slots)
        except Exception as error:  # a bug: INTERNAL each, as the connection's path does
            self._faults(slots, error)

    def _each(self, name: str, acks: str, keys: list[bytes], values: list[bytes],
              slots: list[list[Any]]) -> None:
        """A refused group's requests one by one (one may pass where the group did not:
        another partition), each answered as the connection's path answers it."""
        refused = []
        for key, value, slot in zip(keys, values, slots, strict=True):
            try:
                self._core.produce(ProduceRequest(name, None, acks, (key,), (value,),
                                                  (slot,), True), self._answer)
            except SkerryError as error:
                refused.append(self._refusal(slot, error))
            except Exception as error:
                self._faults((slot,), error)
        if refused:
            self._hand_over(self._c.deliver(refused))

    def _faults(self, slots: Sequence[list[Any]], error: Exception) -> None:
        boundary = self._boundary
        slots[0][REPLY] = boundary.fault("PRODUCE", slots[0][CID].decode(), error)
        for slot in slots[1:]:
            slot[REPLY] = boundary.internal(slot[CID].decode(), error)
        self._hand_over(self._c.deliver(slots))

    def answered(self, result: ProduceResult) -> None:
        """The ``ProduceCallback`` of the lane's requests: every reply formatted and sent in
        C; what a connection must handle itself goes to it."""
        error = result.error
        tokens = result.tokens
        if len(tokens[0]) > LANE_T0:  # stamped (metrics on): the oldest read's wait, for all
            self._factory.metrics.timed("PRODUCE", tokens[0][LANE_T0], len(tokens))
        if error is None:
            out = self._c.answer(result.tokens, result.partition, result.offset, result.hw)
        else:
            for token in result.tokens:
                token[REPLY] = err(token[CID].decode(), error)
            out = self._c.deliver(result.tokens)
        if out:
            self._hand_over(out)

    @staticmethod
    def _hand_over(out: list[tuple[Any, bytes | None]]) -> None:
        """Replies the lane could not send itself: the rest of a partial send goes to the
        connection's write path; a reply whose slot is in the connection's queue is
        written in its turn (``drain``)."""
        for proto, rest in out:
            try:
                if rest is None:
                    proto.drain()
                else:
                    proto.write_chunks((rest,))
            except Exception:  # that connection's bug: it is closed, the others answered
                log.exception("reply to %s failed; closing it", proto.peer)
                proto.transport.loseConnection()


def lane_for(factory: V1Factory, reactor: Any) -> ReadLane | str:
    """The lane for ``factory``'s connections on ``reactor``, or why it cannot run: the
    compiled module is not there (``SKERRY_NO_EXTENSIONS``, no compiler), or the reactor is
    not one that asks a lane (``broker.reactor.LeanEPollReactor``)."""
    if _clane is None:
        return f"off ({speedups.status.get('broker.v1._clane', 'not built')})"
    selectables = getattr(reactor, "_selectables", None)
    if not isinstance(getattr(reactor, "read_lanes", None), list) or \
            not isinstance(selectables, dict):
        return "off (reactor: twisted)"
    return ReadLane(factory, selectables)
