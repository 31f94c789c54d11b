"""The Twisted shell of replication: Deferreds, timers and persistence.

Owns: one ``PartitionReplication`` per partition (built from the store's partitions and
their persisted ``ReplicationCheckpoint``), the ``acks=all`` waiters (a Deferred and an ack
timer each), the ISR lag timer of each partition (scheduled at the exact moment the first
in-sync follower would start lagging, so ``hw`` and ``under_replicated`` change with no
traffic and waiting ``acks=all`` requests see an ISR shrink), and the high-watermark
checkpoint (lazy, every ``hw_checkpoint_interval_ms``; at once on ISR and role changes).

In a multi-broker cluster (``cluster`` given) it also owns each partition's place in the
cluster: this broker's replica id, whether its leadership of the current epoch is
confirmed (a leader restored from disk is not, until ``confirm``; it refuses writes until
then), fencing by a newer epoch (from a fetch, an epoch query or a probe answer), the
leader side of a real follower's fetch (``pull``, and ``wait_for_records`` for its long
poll), the answer to an epoch query (``epoch_query``: OffsetsForLeaderEpoch), and the
follower side that the fetch loop (``replication/follower.py``) drives through a
``ReplicaHandle``: truncating to the divergence point, appending the leader's records
unchanged, and taking the leader's ``hw``. Without ``cluster`` nothing of that changes
how a single broker behaves.

The rules themselves live in ``replication/partition.py`` and ``replication/epochs.py``
(pure); this module only feeds them the log's offsets and ``now_ms`` and performs what they
ask for.

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
from replication.cluster import ClusterConfig
from replication.epochs import NO_EPOCH, EpochLookup
from replication.partition import PartitionReplication
from replication.roles import ReplicationCheckpoint, Role, parse_role
from replication.wire import EpochReply, PullReply

__all__ = [
    "ReplicationService",
    "ReplicaFetchResult",
    "PartitionStatus",
    "PullResult",
    "ReplicaStatusInfo",
    "ReplicaHandle",
    "StoreView",
    "PartitionLogView",
]

PULL_MAX_MESSAGES = 100_000
"""Most records one REPLICA_PULL answer carries (``max_bytes`` usually bounds it first)."""

log = logging.getLogger("skerry.replication")


class PartitionLogView(Protocol):
    """What replication reads from a partition log. A cluster also uses ``first_offset``,
    ``read``, ``append_records`` and ``truncate_to`` (``data.log.PartitionLog``)."""

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


@dataclass(frozen=True, slots=True)
class PullResult:
    """The leader's answer to a follower's REPLICA_PULL."""

    epoch: int
    hw: int
    leo: int
    start: int
    isr: list[int]
    epochs: list[tuple[int, int]]
    count: int
    data: bytes
    hw_news: bool = False
    """``hw`` moved since the last answer to this follower: worth answering at once even
    without records, so followers' consumers see what is committed without delay."""


@dataclass(frozen=True, slots=True)
class ReplicaStatusInfo:
    """REPLICA_STATUS: everything an operator needs to pick a replica to promote."""

    role: Role
    epoch: int
    confirmed: bool
    hw: int
    leo: int
    start: int
    isr: list[int]
    under_replicated: bool
    replica: int
    replicas: list[int]
    leader: int
    epochs: list[tuple[int, int]]


class _Waiter:
    __slots__ = ("offset", "deferred", "timer", "done")

    def __init__(self, offset: int, canceller: Callable[[_Waiter], None]) -> None:
        self.offset = offset
        self.deferred: Deferred[int] = Deferred(lambda _d: canceller(self))
        self.timer: IDelayedCall | None = None
        self.done = False


class _PullWaiter:
    __slots__ = ("offset", "replica", "deferred", "timer")

    def __init__(self, offset: int, replica: int) -> None:
        self.offset = offset
        self.replica = replica
        self.deferred: Deferred[None] = Deferred()
        self.timer: IDelayedCall | None = None


class _Slot:
    """A partition as the service sees it: its log, its rules, its waiters and timer; in a
    cluster also its replica list (broker ids), whether this broker holds a replica, whether
    a restored leadership is confirmed, and the followers' waiting long polls."""

    __slots__ = ("topic", "partition", "log", "repl", "replicated", "waiters", "expiry",
                 "expiry_at_ms", "forgotten", "replicas", "is_replica", "confirmed",
                 "leader_id", "pulls", "hw_sent")

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
        self.replicas: tuple[int, ...] = ()
        self.is_replica = True
        self.confirmed = True
        self.leader_id = -1
        self.pulls: list[_PullWaiter] = []
        self.hw_sent: dict[int, int] = {}  # replica id -> hw in the last pull answer


class ReplicationService:
    """Replication for every partition of the store, on one broker.

    ``on_appended``/``on_durable`` must be called after every append / fsync of a leader
    partition (they move ``hw``); ``forget_topic`` after a topic is deleted and
    ``partitions_added`` after partitions are added. Topics created later are picked up on
    first use.
    """

    def __init__(self, store: StoreView, clock: IReactorTime, *,
                 replica_lag_timeout_ms: int = 10000, ack_timeout_ms: int = 2000,
                 fsync_always: bool = True, hw_checkpoint_interval_ms: int = 5000,
                 cluster: ClusterConfig | None = None) -> None:
        if replica_lag_timeout_ms < 0 or ack_timeout_ms < 0 or hw_checkpoint_interval_ms <= 0:
            raise ValueError("replica_lag_timeout_ms and ack_timeout_ms must not be negative, "
                             "hw_checkpoint_interval_ms must be positive")
        self._store = store
        self._clock = clock
        self._lag_ms = replica_lag_timeout_ms
        self._ack_timeout_ms = ack_timeout_ms
        self._fsync_always = fsync_always
        self._cluster = cluster
        self._topics: dict[str, list[_Slot]] = {}
        self._dirty: set[_Slot] = set()
        self._listeners: list[Callable[[str, int], None]] = []
        self._change_listeners: list[Callable[[str, int], None]] = []
        self._sync_log: Callable[[Any, int], Deferred[None]] | None = None
        self._seq = itertools.count()
        self._closed = False
        self._no_waiting = False
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
        """True when this broker accepts writes for the partition: leader role and, in a
        cluster, its leadership of the current epoch confirmed."""
        slot = self._slot(topic, partition)
        return slot.repl.role is Role.LEADER and slot.confirmed

    @property
    def cluster(self) -> ClusterConfig | None:
        return self._cluster

    def describe(self, topic: str, partition: int) -> PartitionStatus:
        repl = self._slot(topic, partition).repl
        return PartitionStatus(repl.role, repl.hw, list(repl.isr), repl.under_replicated,
                               repl.leader_epoch)

    def add_hw_listener(self, listener: Callable[[str, int], None]) -> None:
        """Call ``listener(topic, partition)`` whenever a replication event (a report, an ISR
        lag expiry, a role change, a follower taking its leader's ``hw``) moves ``hw``.
        Moves caused by ``on_appended`` and ``on_durable`` are not reported: their caller
        knows already."""
        self._listeners.append(listener)

    def add_change_listener(self, listener: Callable[[str, int], None]) -> None:
        """Call ``listener(topic, partition)`` when a partition appears or goes away, changes
        role, has its leadership confirmed, or (a follower) learns a newer epoch: what the
        fetch loop must react to. Called synchronously; listeners must not re-enter."""
        self._change_listeners.append(listener)

    def set_log_syncer(self, sync_log: Callable[[Any, int], Deferred[None]]) -> None:
        """How a follower makes copied records durable: ``sync_log(log, upto)`` fires once
        offsets ``< upto`` are fsynced (the core's group committer). Used with fsync=always."""
        self._sync_log = sync_log

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
            if slot.pulls:
                self._wake_pulls(slot, hw=slot.repl.hw)
        if slot.pulls:
            self._wake_pulls(slot, plog.next_offset)

    # ------------------------------------------------------------------ acks=all

    def wait_for_all(self, topic: str, partition: int, offset: int) -> Deferred[int]:
        """Fires with ``hw`` once ``offset`` is committed with at least min ISR replicas in
        sync (at once if it already is); fails with ``ReplicationTimeout`` after the ack
        timeout, ``NotLeader`` if the partition becomes a follower meanwhile, ``Unavailable``
        on shutdown. Cancelling the Deferred withdraws the wait."""
        slot = self._slot(topic, partition)
        repl = slot.repl
        if repl.role is not Role.LEADER or not slot.confirmed:
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
        if self._cluster is not None:
            return self._set_role_in_cluster(slot, new_role)
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
        self._changed(slot)
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
            self._wake_pulls(slot)
            self._changed(slot)

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
                self._wake_pulls(slot)
        self._checkpoint_dirty()

    def release_pulls(self) -> None:
        """Answer every waiting follower long poll now, and later ones at once (shutdown:
        connections go idle)."""
        self._no_waiting = True
        for slots in self._topics.values():
            for slot in slots:
                self._wake_pulls(slot)

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
        if self._cluster is not None:
            return self._build_in_cluster(topic, partition, config, plog)
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
            if slot.pulls:
                self._wake_pulls(slot, hw=slot.repl.hw)
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
        if self._cluster is not None:
            where = f"partition {slot.partition} of {slot.topic}"
            if not slot.is_replica:
                return NotLeader(f"broker {self._cluster.broker_id} holds no replica of {where} "
                                 f"(replicas: brokers {' '.join(map(str, slot.replicas))})")
            epoch = slot.repl.leader_epoch
            if slot.repl.role is Role.LEADER:
                return NotLeader(f"{where}: leadership of epoch {epoch} on this broker is not "
                                 "confirmed yet (waiting for the other replicas' epochs)")
            leader = f"broker {slot.leader_id}" if slot.leader_id >= 0 else "not known yet"
            return NotLeader(f"{where} is a follower on this broker (epoch {epoch}, leader "
                             f"{leader})")
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

    # ================================================================== clusters

    # ------------------------------------------------------------------ building

    def _build_in_cluster(self, topic: str, partition: int, config: Any,
                          plog: PartitionLogView) -> _Slot:
        cluster = self._cluster
        assert cluster is not None
        rf = config.replication_factor
        replicas = cluster.replicas(topic, partition, rf)
        local = replicas.index(cluster.broker_id) if cluster.broker_id in replicas else None
        try:
            document = plog.load_state()
            checkpoint = ReplicationCheckpoint.from_json(document)
        except ValueError as exc:
            raise ValueError(f"{topic}/{partition}: {exc}") from exc
        common = {
            "replication_factor": rf,
            "min_insync_replicas": config.min_insync_replicas,
            "replica_lag_timeout_ms": self._lag_ms,
            "cap_hw_at_durable": self._fsync_always,
            "next_offset": plog.next_offset,
            "durable_offset": plog.durable_offset,
            "now_ms": self._now_ms(),
        }
        if local is None:
            # Not a replica here: a follower that never fetches and never leads.
            repl = PartitionReplication.restore(
                ReplicationCheckpoint(role=Role.FOLLOWER, hw=checkpoint.hw), **common)
        else:
            if not document:
                checkpoint = ReplicationCheckpoint(
                    role=Role.LEADER if local == 0 else Role.FOLLOWER, leader_epoch=0,
                    isr=(local,), local_replica=local)
            elif checkpoint.local_replica != local:
                raise ValueError(
                    f"{topic}/{partition}: this broker was replica {checkpoint.local_replica} "
                    f"and the cluster config now makes it replica {local}; replica lists of "
                    "existing partitions must not change")
            repl = PartitionReplication.restore(
                checkpoint, local_replica=local, track_epochs=True,
                first_offset=plog.first_offset, **common)
        slot = _Slot(topic, partition, plog, repl)
        slot.replicas = replicas
        slot.is_replica = local is not None
        # A leader restored from disk accepts writes only once no other replica knows a
        # newer epoch (``confirm``) or the operator promotes it again.
        slot.confirmed = repl.role is not Role.LEADER
        slot.leader_id = -1
        if local is not None and repl.role is Role.LEADER:
            log.info("%s/%d: leader of epoch %d on disk; refusing writes until the other "
                     "replicas confirm it", topic, partition, repl.leader_epoch)
        self._schedule_expiry(slot)
        self._changed(slot)
        return slot

    def _changed(self, slot: _Slot) -> None:
        for listener in list(self._change_listeners):
            listener(slot.topic, slot.partition)

    # ------------------------------------------------------------------ views

    def handle(self, topic: str, partition: int) -> ReplicaHandle:
        """The follower-side view of one partition (``replication/follower.py`` drives it)."""
        return ReplicaHandle(self, self._slot(topic, partition))

    def handles(self) -> list[ReplicaHandle]:
        """Every partition of every topic in the store, loading the ones not seen yet."""
        names = list(getattr(self._store, "topics", ()))
        out: list[ReplicaHandle] = []
        for name in names:
            try:
                slots = self._load_topic(name)
            except BadRequest:
                continue
            out.extend(ReplicaHandle(self, slot) for slot in slots)
        return out

    def topic_created(self, topic: str) -> None:
        """A topic was created on this broker: start tracking (and fetching) it now."""
        self._load_topic(topic)

    def status(self, topic: str, partition: int) -> ReplicaStatusInfo:
        """REPLICA_STATUS."""
        slot = self._slot(topic, partition)
        repl = slot.repl
        plog = slot.log
        cluster = self._cluster
        local = repl.local_replica if slot.is_replica else -1
        if cluster is None:
            leader = -1
        elif repl.role is Role.LEADER and slot.is_replica:
            leader = cluster.broker_id
        else:
            leader = slot.leader_id
        return ReplicaStatusInfo(
            role=repl.role, epoch=repl.leader_epoch,
            confirmed=repl.role is Role.LEADER and slot.confirmed,
            hw=repl.hw, leo=plog.next_offset, start=getattr(plog, "first_offset", 0),
            isr=list(repl.isr), under_replicated=repl.under_replicated, replica=local,
            replicas=list(slot.replicas), leader=leader,
            epochs=[(e.epoch, e.start_offset) for e in repl.epoch_entries])

    # ------------------------------------------------------------------ roles by epoch

    def _set_role_in_cluster(self, slot: _Slot, role: Role) -> int:
        repl = slot.repl
        if not slot.is_replica:
            raise BadRequest(f"broker {self._cluster.broker_id if self._cluster else '?'} holds "
                             f"no replica of {slot.topic}/{slot.partition}")
        if role is Role.LEADER:
            if repl.role is Role.LEADER and slot.confirmed:
                return repl.hw
            epoch = repl.leader_epoch + 1
            self._persist(slot, repl.promotion_checkpoint(epoch))
            hw_before = repl.hw
            repl.promote(epoch, self._now_ms())
            slot.confirmed = True
            slot.leader_id = self._cluster.broker_id if self._cluster else -1
            self._dirty.discard(slot)
            log.info("%s/%d is now the leader, epoch %d (log end %d, hw=%d)", slot.topic,
                     slot.partition, epoch, slot.log.next_offset, repl.hw)
            self._after_change(slot, False, repl.hw > hw_before, saved=True)
            self._changed(slot)
            return repl.hw
        if repl.role is Role.FOLLOWER:
            return repl.hw
        self._persist(slot, repl.fence_checkpoint(repl.leader_epoch))
        self._step_down(slot, repl.leader_epoch,
                        f"partition {slot.partition} of {slot.topic} was made a follower on "
                        "this broker")
        return repl.hw

    def _step_down(self, slot: _Slot, epoch: int, why: str) -> None:
        """Leader -> follower (already persisted, or persisting failed and is retried)."""
        repl = slot.repl
        repl.fence(epoch)
        slot.confirmed = True
        slot.leader_id = -1
        self._cancel_expiry(slot)
        self._fail_waiters(slot, NotLeader(why))
        self._wake_pulls(slot)
        log.info("%s/%d: now a follower, epoch %d (hw=%d): %s", slot.topic, slot.partition,
                 repl.leader_epoch, repl.hw, why)
        self._changed(slot)

    def _observe(self, slot: _Slot, epoch: int) -> bool:
        """Someone knows ``epoch``. A leader of an older epoch is fenced (it stops taking
        writes, its waiting acks=all requests fail NOT_LEADER); a follower remembers the
        epoch. True when this broker was fenced."""
        repl = slot.repl
        if epoch <= repl.leader_epoch or not slot.is_replica:
            return False
        if repl.role is Role.LEADER:
            try:
                self._persist(slot, repl.fence_checkpoint(epoch))
            except StorageError as error:
                log.error("%s/%d: %s (fenced anyway; retried at the next checkpoint)",
                          slot.topic, slot.partition, error.message)
                self._dirty.add(slot)
            self._step_down(slot, epoch,
                            f"partition {slot.partition} of {slot.topic}: fenced, epoch {epoch} "
                            f"is newer than this broker's epoch {repl.leader_epoch}")
            return True
        repl.observe_epoch(epoch)
        slot.leader_id = -1
        self._save(slot)
        self._changed(slot)
        return False

    def _check_replica(self, slot: _Slot, replica_id: int) -> None:
        if not slot.is_replica:
            raise NotLeader(self._not_leader(slot).message)
        repl = slot.repl
        if not 0 <= replica_id < repl.replication_factor or replica_id == repl.local_replica:
            raise BadRequest(f"replica_id {replica_id} is not another replica of "
                             f"{slot.topic}/{slot.partition}; expected 0 to "
                             f"{repl.replication_factor - 1} other than {repl.local_replica}")

    # ------------------------------------------------------------------ leader side

    def pull(self, topic: str, partition: int, replica_id: int, offset: int, epoch: int, *,
             max_bytes: int, record: bool = True) -> PullResult:
        """A follower's fetch (REPLICA_PULL): it holds every offset before ``offset`` and
        knows ``epoch``.

        A newer epoch fences this broker (NOT_LEADER). A follower role answers NOT_LEADER.
        An older epoch gets an answer without records (its ``epoch`` tells the follower to
        start a new fetch session). Otherwise the progress ``offset - 1`` is recorded (moving
        back is allowed: a new session after a restart or truncation), and the records from
        ``offset`` on are returned as their exact bytes, at most ``max_bytes`` of values
        (at least one record when one exists), with the epochs labelling them.
        """
        if self._closed:
            raise Unavailable("broker shutting down")
        slot = self._slot(topic, partition)
        if self._cluster is None:
            raise BadRequest("REPLICA_PULL needs a cluster section in the broker config")
        repl = slot.repl
        self._check_replica(slot, replica_id)
        if epoch > repl.leader_epoch:
            known, led = repl.leader_epoch, repl.role is Role.LEADER
            self._observe(slot, epoch)
            raise NotLeader(f"partition {partition} of {topic}: epoch {epoch} is newer than "
                            f"this broker's epoch {known}"
                            + ("; fenced, now a follower" if led else ""))
        if repl.role is not Role.LEADER:
            raise self._not_leader(slot)
        plog: Any = slot.log
        if epoch < repl.leader_epoch:
            return self._pull_result(slot, replica_id, offset, 0)
        self._refresh(slot)
        if record and offset <= plog.next_offset:
            outcome = repl.record_fetch(replica_id, offset - 1, self._now_ms(),
                                        allow_backwards=True)
            self._after_change(slot, outcome.isr_changed, outcome.hw_advanced)
        return self._pull_result(slot, replica_id, offset, max_bytes)

    def _pull_result(self, slot: _Slot, replica_id: int, offset: int,
                     max_bytes: int) -> PullResult:
        repl = slot.repl
        plog: Any = slot.log
        start = plog.first_offset
        count = 0
        data = b""
        entries: list[tuple[int, int]] = []
        if max_bytes > 0 and start <= offset < plog.next_offset:
            result = plog.read(offset, PULL_MAX_MESSAGES, max_bytes)
            count = len(result.records)
            data = result.raw
            if count:
                entries = [(e.epoch, e.start_offset)
                           for e in repl.epochs_covering(offset, offset + count)]
        hw = repl.hw
        news = slot.hw_sent.get(replica_id, -2) < hw
        slot.hw_sent[replica_id] = hw
        return PullResult(repl.leader_epoch, hw, plog.next_offset, start, list(repl.isr),
                          entries, count, data, news)

    def wait_for_records(self, topic: str, partition: int, offset: int, timeout_ms: int,
                         replica_id: int = -1) -> Deferred[None]:
        """Fires once the log reaches past ``offset``, ``hw`` passes the one last sent to
        ``replica_id``, the partition changes role or epoch, the broker closes, or after
        ``timeout_ms`` (a follower's long poll)."""
        slot = self._slot(topic, partition)
        waiter = _PullWaiter(offset, replica_id)
        if self._closed or self._no_waiting or slot.log.next_offset > offset:
            waiter.deferred.callback(None)
            return waiter.deferred

        def expire() -> None:
            waiter.timer = None
            if waiter in slot.pulls:
                slot.pulls.remove(waiter)
            if not waiter.deferred.called:
                waiter.deferred.callback(None)

        waiter.timer = self._clock.callLater(timeout_ms / 1000.0, expire)
        slot.pulls.append(waiter)
        return waiter.deferred

    def _wake_pulls(self, slot: _Slot, below: int | None = None, *,
                    hw: int | None = None) -> None:
        """Answer the long polls waiting for an offset below ``below``, or (with ``hw``)
        those whose follower was last sent an older ``hw``; all when both are None."""
        if not slot.pulls:
            return
        if hw is not None:
            sent = slot.hw_sent
            ready = [w for w in slot.pulls if sent.get(w.replica, -2) < hw]
        else:
            ready = [w for w in slot.pulls if below is None or w.offset < below]
        if not ready:
            return
        slot.pulls = [w for w in slot.pulls if w not in ready]
        for waiter in ready:
            if waiter.timer is not None and waiter.timer.active():
                waiter.timer.cancel()
            waiter.timer = None
            if not waiter.deferred.called:
                waiter.deferred.callback(None)

    def epoch_query(self, topic: str, partition: int, replica_id: int, epoch: int,
                    last_epoch: int | None) -> EpochReply:
        """REPLICA_EPOCH from replica ``replica_id``, which knows ``epoch`` (a newer one
        fences this broker, or a follower remembers it) and whose log's latest epoch is
        ``last_epoch`` (None: no history). Any replica answers, leader or not."""
        slot = self._slot(topic, partition)
        if self._cluster is None:
            raise BadRequest("REPLICA_EPOCH needs a cluster section in the broker config")
        self._check_replica(slot, replica_id)
        self._observe(slot, epoch)
        repl = slot.repl
        lookup = repl.lookup_epoch(NO_EPOCH if last_epoch is None else last_epoch)
        return EpochReply(repl.role, repl.leader_epoch,
                          repl.role is Role.LEADER and slot.confirmed, lookup.epoch,
                          lookup.end_offset, slot.log.next_offset, repl.hw)

    # ------------------------------------------------------------------ follower side

    def _apply_pull(self, slot: _Slot, reply: PullReply) -> Deferred[None]:
        repl = slot.repl
        plog: Any = slot.log
        if slot.forgotten or self._closed:
            return fail(Unavailable("partition closed"))
        if repl.role is not Role.FOLLOWER:
            return fail(NotLeader("this broker leads the partition now; the fetch stops"))
        if reply.count:
            if repl.adopt_epochs(list(reply.epochs)):
                self._save(slot)
            try:
                plog.append_records(reply.data)
            except ValueError:
                repl.truncated(plog.next_offset, plog.durable_offset)
                raise
            repl.leader_log_changed(plog.next_offset, plog.durable_offset)
            if self._fsync_always and self._sync_log is not None:
                synced = self._sync_log(plog, plog.next_offset)
            else:
                synced = succeed(None)
        else:
            synced = succeed(None)

        def take_hw(_: object) -> None:
            if slot.forgotten or repl.role is not Role.FOLLOWER:
                return
            repl.leader_log_changed(plog.next_offset, plog.durable_offset)
            if repl.follow(reply.hw, reply.isr):
                self._dirty.add(slot)
                for listener in list(self._listeners):
                    listener(slot.topic, slot.partition)

        return synced.addCallback(take_hw)

    def _truncate(self, slot: _Slot, offset: int) -> None:
        plog: Any = slot.log
        if offset >= plog.next_offset:
            return
        before = plog.next_offset
        plog.truncate_to(offset)
        slot.repl.truncated(plog.next_offset, plog.durable_offset)
        self._save(slot)
        log.info("%s/%d: truncated the divergent tail %d..%d", slot.topic, slot.partition,
                 offset, before - 1)

    def _unreachable(self, slot: _Slot, broker_id: int) -> None:
        if not slot.is_replica or broker_id not in slot.replicas or slot.forgotten:
            return
        repl = slot.repl
        hw_before = repl.hw
        if repl.drop_silent(slot.replicas.index(broker_id), self._now_ms()):
            log.info("%s/%d: broker %d is unreachable and has not fetched since the promotion; "
                     "ISR now [%s] (hw=%d)", slot.topic, slot.partition, broker_id,
                     " ".join(map(str, repl.isr)), repl.hw)
            self._after_change(slot, True, repl.hw > hw_before)

    def _conflict(self, slot: _Slot, epoch: int) -> None:
        repl = slot.repl
        if repl.role is not Role.LEADER or repl.leader_epoch != epoch or not slot.confirmed:
            return
        slot.confirmed = False
        self._fail_waiters(slot, NotLeader(
            f"partition {slot.partition} of {slot.topic}: another replica also leads epoch "
            f"{epoch}; promote one of them again"))
        self._changed(slot)

    def _confirm(self, slot: _Slot, epoch: int) -> bool:
        repl = slot.repl
        if repl.role is not Role.LEADER or repl.leader_epoch != epoch or slot.forgotten:
            return False
        if not slot.confirmed:
            slot.confirmed = True
            log.info("%s/%d: leadership of epoch %d confirmed by every other replica; "
                     "accepting writes", slot.topic, slot.partition, epoch)
            self._changed(slot)
        return True


class ReplicaHandle:
    """One partition as the fetch loop and the leader probe see it (``ReplicationService
    .handle``). Every method acts on the service's current state of the partition."""

    __slots__ = ("_service", "_slot")

    def __init__(self, service: ReplicationService, slot: _Slot) -> None:
        self._service = service
        self._slot = slot

    @property
    def topic(self) -> str:
        return self._slot.topic

    @property
    def partition(self) -> int:
        return self._slot.partition

    @property
    def replicas(self) -> tuple[int, ...]:
        """Broker ids by replica id (position)."""
        return self._slot.replicas

    @property
    def is_replica(self) -> bool:
        return self._slot.is_replica and not self._slot.forgotten

    @property
    def gone(self) -> bool:
        """The topic was deleted (or the service closed)."""
        return self._slot.forgotten or self._service._closed

    @property
    def local_replica(self) -> int:
        return self._slot.repl.local_replica

    @property
    def role(self) -> Role:
        return self._slot.repl.role

    @property
    def confirmed(self) -> bool:
        return self._slot.confirmed

    @property
    def known_epoch(self) -> int:
        """The newest leader epoch this replica knows (its own, when it leads)."""
        return self._slot.repl.leader_epoch

    @property
    def last_epoch(self) -> int:
        """The epoch of the last record in the local log (-1: no history)."""
        return self._slot.repl.last_epoch

    @property
    def log_end(self) -> int:
        """The local log end offset (the next offset to fetch)."""
        return self._slot.log.next_offset

    def observe_epoch(self, epoch: int) -> bool:
        """Another replica knows ``epoch``: fences this broker if it leads an older one
        (True), or remembers it."""
        return self._service._observe(self._slot, epoch)

    def set_leader(self, broker_id: int) -> None:
        """The fetch loop found the leader (shown by REPLICA_STATUS)."""
        self._slot.leader_id = broker_id

    def truncate_for(self, answer: EpochLookup) -> int:
        """Cut the local log where it diverges from the leader that gave ``answer`` for
        ``last_epoch`` (KIP-101); returns the new log end."""
        slot = self._slot
        self._service._truncate(slot, slot.repl.divergence_offset(answer))
        return slot.log.next_offset

    def truncate_to(self, offset: int) -> None:
        """Cut the local log at ``offset`` (it reached past the leader's log end)."""
        self._service._truncate(self._slot, offset)

    def apply(self, reply: PullReply) -> Deferred[None]:
        """Append the leader's records unchanged (fsynced first under fsync=always), then
        take its ``hw``. ``ValueError`` when the records do not continue the local log."""
        return self._service._apply_pull(self._slot, reply)

    def confirm(self, epoch: int) -> bool:
        """Every other replica answered with no newer epoch: writes are accepted. False when
        the partition no longer leads ``epoch``."""
        return self._service._confirm(self._slot, epoch)

    def conflict(self, epoch: int) -> None:
        """Another replica claims leadership of the same ``epoch``: refuse writes (and fail
        waiting acks=all requests) until a probe round finds no conflict."""
        self._service._conflict(self._slot, epoch)

    def unreachable(self, broker_id: int) -> None:
        """The leader's probe could not reach ``broker_id``; one that has not fetched since
        the promotion leaves the ISR at once."""
        self._service._unreachable(self._slot, broker_id)

