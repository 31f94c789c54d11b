"""The Twisted shell of single-broker replication: Deferreds, timers and persistence.

Owns: one ``PartitionReplication`` per partition (built from the store's partitions and
their persisted ``ReplicationCheckpoint``), the ``acks=all`` waiters (a Deferred and an ack
timer each), the ISR lag timer of each partition (scheduled at the exact moment the first
in-sync follower would start lagging, so ``hw`` and ``under_replicated`` change with no
traffic and waiting ``acks=all`` requests see an ISR shrink), and the high-watermark
checkpoint (lazy, every ``hw_checkpoint_interval_ms``; at once on ISR and role changes).

The rules themselves live in ``replication/partition.py`` (pure); this module only feeds
them the log's offsets and ``now_ms`` and performs what they ask for.

Must not import: the global reactor (the clock is injected), sockets, transports, the
store's modules (it codes against the small ``StoreView`` protocol below).
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.task import LoopingCall

from broker.errors import (
    BadRequest,
    NotLeader,
    ReplicationTimeout,
    SkerryError,
    StorageError,
    Unavailable,
)
from replication.partition import PartitionReplication
from replication.roles import ReplicationCheckpoint, Role, parse_role

__all__ = [
    "ReplicationService",
    "ReplicaFetchResult",
    "PartitionStatus",
    "StoreView",
    "PartitionLogView",
]

log = logging.getLogger("skerry.replication")


class PartitionLogView(Protocol):
    """What replication reads from a partition log."""

    next_offset: int
    durable_offset: int

    def load_state(self) -> dict[str, Any]: ...
    def save_state(self, state: dict[str, Any]) -> None: ...


class StoreView(Protocol):
    """What replication needs from the store (``data.store.Store`` satisfies it)."""

    def topic(self, name: str) -> Any: ...
    def partition(self, name: str, partition: int) -> Any: ...


@dataclass(frozen=True, slots=True)
class ReplicaFetchResult:
    """The answer to REPLICA_FETCH (``replica= acked_offset= hw= isr=[] under_replicated=``)."""

    replica: int
    acked_offset: int
    hw: int
    isr: list[int]
    under_replicated: bool


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    """One partition's replication state, for metadata and admin commands."""

    role: Role
    hw: int
    isr: list[int]
    under_replicated: bool
    leader_epoch: int


class _Waiter:
    __slots__ = ("offset", "deferred", "timer", "done")

    def __init__(self, offset: int, canceller: Callable[[_Waiter], None]) -> None:
        self.offset = offset
        self.deferred: Deferred[int] = Deferred(lambda _d: canceller(self))
        self.timer: IDelayedCall | None = None
        self.done = False


class _Slot:
    """A partition as the service sees it: its log, its rules, its waiters and timer."""

    __slots__ = ("topic", "partition", "log", "repl", "replicated", "waiters", "expiry",
                 "expiry_at_ms", "forgotten")

    def __init__(self, topic: str, partition: int, plog: PartitionLogView,
                 repl: PartitionReplication) -> None:
        self.topic = topic
        self.partition = partition
        self.log = plog
        self.repl = repl
        self.replicated = repl.replication_factor > 1
        self.waiters: list[tuple[int, int, _Waiter]] = []  # heap by offset
        self.expiry: IDelayedCall | None = None
        self.expiry_at_ms: int | None = None
        self.forgotten = False


class ReplicationService:
    """Replication for every partition of the store, on one broker.

    ``on_appended``/``on_durable`` must be called after every append / fsync of a leader
    partition (they move ``hw``); ``forget_topic`` after a topic is deleted and
    ``partitions_added`` after partitions are added. Topics created later are picked up on
    first use.
    """

    def __init__(self, store: StoreView, clock: IReactorTime, *,
                 replica_lag_timeout_ms: int = 10000, ack_timeout_ms: int = 2000,
                 fsync_always: bool = True, hw_checkpoint_interval_ms: int = 5000) -> None:
        if replica_lag_timeout_ms < 0 or ack_timeout_ms < 0 or hw_checkpoint_interval_ms <= 0:
            raise ValueError("replica_lag_timeout_ms and ack_timeout_ms must not be negative, "
                             "hw_checkpoint_interval_ms must be positive")
        self._store = store
        self._clock = clock
        self._lag_ms = replica_lag_timeout_ms
        self._ack_timeout_ms = ack_timeout_ms
        self._fsync_always = fsync_always
        self._topics: dict[str, list[_Slot]] = {}
        self._dirty: set[_Slot] = set()
        self._listeners: list[Callable[[str, int], None]] = []
        self._seq = itertools.count()
        self._closed = False
        for name in list(getattr(store, "topics", ())):
            self._load_topic(name)
        self._checkpointer = LoopingCall(self._checkpoint_dirty)
        self._checkpointer.clock = clock
        self._checkpointer.start(hw_checkpoint_interval_ms / 1000.0, now=False).addErrback(
            lambda failure: log.error("hw checkpoint loop stopped: %s", failure.getTraceback()))

    # ------------------------------------------------------------------ queries

    def hw(self, topic: str, partition: int) -> int:
        """Offset of the last committed message (inclusive); -1 while nothing is committed."""
        return self._slot(topic, partition).repl.hw

    def is_leader(self, topic: str, partition: int) -> bool:
        return self._slot(topic, partition).repl.role is Role.LEADER

    def describe(self, topic: str, partition: int) -> PartitionStatus:
        repl = self._slot(topic, partition).repl
        return PartitionStatus(repl.role, repl.hw, list(repl.isr), repl.under_replicated,
                               repl.leader_epoch)

    def add_hw_listener(self, listener: Callable[[str, int], None]) -> None:
        """Call ``listener(topic, partition)`` whenever a replication event (a report, an ISR
        lag expiry, a role change) moves ``hw``. Moves caused by ``on_appended`` and
        ``on_durable`` are not reported: their caller knows already."""
        self._listeners.append(listener)

    # ------------------------------------------------------------------ the leader's log

    def on_appended(self, topic: str, partition: int) -> None:
        """The leader's log grew: may advance ``hw`` and answer ``acks=all`` waiters."""
        self._refresh(self._slot(topic, partition))

    def on_durable(self, topic: str, partition: int) -> None:
        """An fsync covered more offsets: may advance ``hw`` and answer waiters."""
        self._refresh(self._slot(topic, partition))

    def _refresh(self, slot: _Slot) -> None:
        plog = slot.log
        if slot.repl.leader_log_changed(plog.next_offset, plog.durable_offset):
            if slot.replicated:
                self._dirty.add(slot)
            if slot.waiters:
                self._answer_waiters(slot)

    # ------------------------------------------------------------------ acks=all

    def wait_for_all(self, topic: str, partition: int, offset: int) -> Deferred[int]:
        """Fires with ``hw`` once ``offset`` is committed with at least min ISR replicas in
        sync (at once if it already is); fails with ``ReplicationTimeout`` after the ack
        timeout, ``NotLeader`` if the partition becomes a follower meanwhile, ``Unavailable``
        on shutdown. Cancelling the Deferred withdraws the wait."""
        slot = self._slot(topic, partition)
        repl = slot.repl
        if repl.role is not Role.LEADER:
            return fail(self._not_leader(slot))
        if self._closed:
            return fail(Unavailable("broker shutting down"))
        self._refresh(slot)
        if offset <= repl.ack_offset:
            return succeed(repl.hw)
        waiter = _Waiter(offset, lambda w: self._withdraw(slot, w))
        waiter.timer = self._clock.callLater(self._ack_timeout_ms / 1000.0,
                                             self._time_out, slot, waiter)
        heapq.heappush(slot.waiters, (offset, next(self._seq), waiter))
        return waiter.deferred

    def _answer_waiters(self, slot: _Slot) -> None:
        heap = slot.waiters
        ack_offset = slot.repl.ack_offset
        if not heap or heap[0][0] > ack_offset:
            return
        ready: list[_Waiter] = []
        while heap and heap[0][0] <= ack_offset:
            waiter = heapq.heappop(heap)[2]
            if not waiter.done:
                self._settle(waiter)
                ready.append(waiter)
        hw = slot.repl.hw
        for waiter in ready:
            waiter.deferred.callback(hw)

    def _time_out(self, slot: _Slot, waiter: _Waiter) -> None:
        waiter.timer = None
        if waiter.done:
            return
        waiter.done = True
        self._drop_settled(slot)
        repl = slot.repl
        waiter.deferred.errback(ReplicationTimeout(
            f"acks=all not satisfied within {self._ack_timeout_ms} ms for offset "
            f"{waiter.offset} of {slot.topic}/{slot.partition}: hw={repl.hw} "
            f"isr=[{' '.join(map(str, repl.isr))}] min_insync_replicas="
            f"{repl.min_insync_replicas}; the message stays in the log and may still be "
            "committed"))

    def _withdraw(self, slot: _Slot, waiter: _Waiter) -> None:
        if not waiter.done:
            self._settle(waiter)
            self._drop_settled(slot)

    def _fail_waiters(self, slot: _Slot, error: SkerryError) -> None:
        pending = [entry[2] for entry in slot.waiters if not entry[2].done]
        slot.waiters.clear()
        for waiter in pending:
            self._settle(waiter)
        for waiter in pending:
            waiter.deferred.errback(error)

    @staticmethod
    def _settle(waiter: _Waiter) -> None:
        waiter.done = True
        if waiter.timer is not None:
            if waiter.timer.active():
                waiter.timer.cancel()
            waiter.timer = None

    @staticmethod
    def _drop_settled(slot: _Slot) -> None:
        heap = slot.waiters
        while heap and heap[0][2].done:
            heapq.heappop(heap)

    # ------------------------------------------------------------------ REPLICA_FETCH

    def replica_fetch(self, topic: str, partition: int, replica_id: int, offset: int, *,
                      allow_backwards: bool = False) -> ReplicaFetchResult:
        """Follower ``replica_id`` holds every offset up to ``offset`` (capped at the
        leader's last offset; never backwards unless ``allow_backwards``).

        BadRequest for a replica id outside ``1 .. RF-1``; NotLeader in follower role.
        """
        slot = self._slot(topic, partition)
        repl = slot.repl
        repl.validate_replica_id(replica_id)
        if offset < 0:
            raise BadRequest(f"offset must not be negative, not {offset}")
        if repl.role is not Role.LEADER:
            raise self._not_leader(slot)
        self._refresh(slot)
        outcome = repl.record_fetch(replica_id, offset, self._now_ms(),
                                    allow_backwards=allow_backwards)
        self._after_change(slot, outcome.isr_changed, outcome.hw_advanced)
        return ReplicaFetchResult(replica_id, outcome.acked_offset, repl.hw, list(repl.isr),
                                  repl.under_replicated)

    # ------------------------------------------------------------------ roles

    def set_role(self, topic: str, partition: int, role: str | Role) -> int:
        """SET_PARTITION_ROLE: persisted before it takes effect; returns ``hw``.

        To FOLLOWER: PRODUCE and REPLICA_FETCH get NOT_LEADER, waiting ``acks=all`` requests
        are answered NOT_LEADER, ``hw`` and the ISR freeze. To LEADER: a new leader epoch;
        the frozen ISR members get a fresh lag window. The current role: no change.
        """
        slot = self._slot(topic, partition)
        new_role = parse_role(role)
        repl = slot.repl
        if new_role is repl.role:
            return repl.hw
        self._persist(slot, repl.checkpoint(new_role))
        hw_before = repl.hw
        repl.change_role(new_role, self._now_ms())
        self._dirty.discard(slot)
        if new_role is Role.FOLLOWER:
            self._cancel_expiry(slot)
            self._fail_waiters(slot, self._not_leader(slot))
            log.info("%s/%d is now a follower (hw=%d)", topic, partition, repl.hw)
        else:
            log.info("%s/%d is now the leader, epoch %d (hw=%d)", topic, partition,
                     repl.leader_epoch, repl.hw)
            self._after_change(slot, False, repl.hw > hw_before, saved=repl.hw == hw_before)
        return repl.hw

    # ------------------------------------------------------------------ topic lifecycle

    def forget_topic(self, topic: str) -> None:
        """The topic was deleted: drop its state; its waiting ``acks=all`` requests fail."""
        slots = self._topics.pop(topic, None)
        if not slots:
            return
        for slot in slots:
            slot.forgotten = True
            self._cancel_expiry(slot)
            self._dirty.discard(slot)
            self._fail_waiters(slot, BadRequest(
                f"unknown topic {topic}: deleted while acks=all was waiting"))

    def partitions_added(self, topic: str) -> None:
        """The topic has more partitions now: start tracking them."""
        if topic in self._topics:
            self._load_topic(topic)

    def close(self) -> None:
        """Stop timers, answer waiting ``acks=all`` requests UNAVAILABLE, checkpoint ``hw``."""
        if self._closed:
            return
        self._closed = True
        if self._checkpointer.running:
            self._checkpointer.stop()
        for slots in self._topics.values():
            for slot in slots:
                self._cancel_expiry(slot)
                self._fail_waiters(slot, Unavailable("broker shutting down"))
        self._checkpoint_dirty()

    # ------------------------------------------------------------------ internals

    def _now_ms(self) -> int:
        return round(self._clock.seconds() * 1000)

    def _slot(self, topic: str, partition: int) -> _Slot:
        slots = self._topics.get(topic)
        if slots is not None and 0 <= partition < len(slots):
            return slots[partition]
        slots = self._load_topic(topic)
        if not 0 <= partition < len(slots):
            raise BadRequest(f"partition {partition} out of range; topic {topic} has "
                             f"{len(slots)} partitions")
        return slots[partition]

    def _load_topic(self, topic: str) -> list[_Slot]:
        try:
            found = self._store.topic(topic)
        except KeyError:
            found = None
        if found is None:
            raise BadRequest("unknown topic")
        config = found.config
        slots = self._topics.setdefault(topic, [])
        for partition in range(len(slots), config.partitions):
            slots.append(self._build(topic, partition, config))
        return slots

    def _build(self, topic: str, partition: int, config: Any) -> _Slot:
        plog: PartitionLogView = self._store.partition(topic, partition)
        try:
            checkpoint = ReplicationCheckpoint.from_json(plog.load_state())
        except ValueError as exc:
            raise ValueError(f"{topic}/{partition}: {exc}") from exc
        repl = PartitionReplication.restore(
            checkpoint,
            replication_factor=config.replication_factor,
            min_insync_replicas=config.min_insync_replicas,
            replica_lag_timeout_ms=self._lag_ms,
            cap_hw_at_durable=self._fsync_always,
            next_offset=plog.next_offset,
            durable_offset=plog.durable_offset,
            now_ms=self._now_ms(),
        )
        if config.replication_factor > 1 and checkpoint.hw > repl.hw:
            log.warning("%s/%d: hw checkpoint %d is beyond the recovered log (last offset %d); "
                        "committed messages were lost", topic, partition, checkpoint.hw,
                        plog.next_offset - 1)
        slot = _Slot(topic, partition, plog, repl)
        self._schedule_expiry(slot)
        return slot

    def _after_change(self, slot: _Slot, isr_changed: bool, hw_advanced: bool, *,
                      saved: bool = False) -> None:
        if isr_changed:
            self._save(slot)
        elif slot.replicated and not saved:
            self._dirty.add(slot)
        self._schedule_expiry(slot)
        if hw_advanced:
            for listener in list(self._listeners):
                listener(slot.topic, slot.partition)
        if slot.waiters:
            self._answer_waiters(slot)

    def _schedule_expiry(self, slot: _Slot) -> None:
        at = None if self._closed else slot.repl.next_expiry_ms()
        call = slot.expiry
        if at is None:
            self._cancel_expiry(slot)
            return
        if call is not None and call.active() and at == slot.expiry_at_ms:
            return
        delay = max(0, at - self._now_ms()) / 1000.0
        if call is not None and call.active():
            call.reset(delay)
        else:
            slot.expiry = self._clock.callLater(delay, self._expire, slot)
        slot.expiry_at_ms = at

    def _cancel_expiry(self, slot: _Slot) -> None:
        if slot.expiry is not None and slot.expiry.active():
            slot.expiry.cancel()
        slot.expiry = None
        slot.expiry_at_ms = None

    def _expire(self, slot: _Slot) -> None:
        slot.expiry = None
        slot.expiry_at_ms = None
        if slot.forgotten or self._closed:
            return
        repl = slot.repl
        hw_before = repl.hw
        isr_changed = repl.expire_lagging(self._now_ms())
        if isr_changed:
            log.info("%s/%d: ISR shrank to [%s] (hw=%d)", slot.topic, slot.partition,
                     " ".join(map(str, repl.isr)), repl.hw)
        self._after_change(slot, isr_changed, repl.hw > hw_before)

    def _not_leader(self, slot: _Slot) -> NotLeader:
        return NotLeader(f"partition {slot.partition} of {slot.topic} is a follower on this "
                         "broker")

    def _persist(self, slot: _Slot, checkpoint: ReplicationCheckpoint) -> None:
        """Write the checkpoint; a failure raises StorageError (the caller changes nothing)."""
        try:
            slot.log.save_state(checkpoint.to_json())
        except OSError as exc:
            raise StorageError(f"cannot save replication state of {slot.topic}/"
                               f"{slot.partition}: {exc.strerror or exc}") from exc

    def _save(self, slot: _Slot) -> None:
        """Checkpoint now; on failure log it and retry on the next checkpoint tick (the
        in-memory state stays authoritative while the broker runs)."""
        try:
            self._persist(slot, slot.repl.checkpoint())
        except SkerryError as error:
            log.error("%s/%d: %s", slot.topic, slot.partition, error.message)
            self._dirty.add(slot)
        else:
            self._dirty.discard(slot)

    def _checkpoint_dirty(self) -> None:
        for slot in list(self._dirty):
            if not slot.forgotten:
                self._save(slot)
            else:
                self._dirty.discard(slot)
