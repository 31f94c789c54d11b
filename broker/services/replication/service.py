"""The Twisted shell of replication on one broker: the facade the core and handlers call.

Owns: building the parts and wiring them (each takes its collaborators typed by
``ports``), the service's lifecycle (topic deletion, partitions added, shutdown), the
read-only queries (``hw``, ``is_leader``, ``describe``, ``status``) and the listener
registrations. Every other job is a part's:

- ``partitions``: the partitions (``Slot``), built from the store and its checkpoints;
- ``acks``: ``acks=all`` waiters and their ack timers;
- ``progress``: ISR lag expiry timers and what follows a move of the log, ISR or ``hw``;
- ``checkpoints``: the high-watermark checkpoint (lazy, periodic; at once when it matters);
- ``listeners``: the ``hw`` and change listeners;
- ``leadership``: roles, epochs, fencing, confirmation of a restored leadership;
- ``leader_side``: the leader's answers to followers (REPLICA_FETCH, REPLICA_PULL and its
  long poll, REPLICA_EPOCH);
- ``follower_side``: the follower's log copy and the ``ReplicaHandle`` the fetch loop
  (``replication/follower/``) drives.

Without ``cluster`` none of the cluster parts changes how a single broker behaves.

Inside the package the parts import only the shared modules (``partitions``, ``ports``,
``results``) and see each other through ``ports``; only this module (and the package's
``__init__``, to re-export) imports the parts.

Must not import: the global reactor (the clock is injected), sockets, transports, the
store's modules (it codes against ``StoreView``), ``replication.follower``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IReactorTime

from broker.errors import BadRequest, NotLeader, Unavailable
from broker.services.replication.acks import AckWaiters
from broker.services.replication.checkpoints import HwCheckpoints
from broker.services.replication.control_side import ControlPlaneSide
from broker.services.replication.follower_side import FollowerLog, ReplicaHandle
from broker.services.replication.leader_side import FollowerFetches, PullWaiters
from broker.services.replication.leadership import Leadership
from broker.services.replication.listeners import Listeners
from broker.services.replication.partitions import (
    Lifecycle,
    PartitionTable,
    Slot,
    StoreView,
    not_leader,
)
from broker.services.replication.progress import ProgressTracker
from broker.services.replication.results import (
    PartitionStatus,
    PullResult,
    ReplicaFetchResult,
    ReplicaStatusInfo,
)
from replication.cluster import ClusterConfig
from replication.roles import Role
from replication.wire import EpochReply

__all__ = ["ReplicationService"]


class ReplicationService(ControlPlaneSide):
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
        self._cluster = cluster
        self._lifecycle = lifecycle = Lifecycle()
        self._listeners = listeners = Listeners()
        self._checkpoints = checkpoints = HwCheckpoints(clock, hw_checkpoint_interval_ms)
        self._acks = acks = AckWaiters(clock, ack_timeout_ms)
        self._pulls = pulls = PullWaiters(clock, lifecycle)
        self._progress = progress = ProgressTracker(
            clock, lifecycle, acks=acks, pulls=pulls, checkpoints=checkpoints,
            listeners=listeners)
        self._table = table = PartitionTable(
            store, clock, cluster, replica_lag_timeout_ms=replica_lag_timeout_ms,
            fsync_always=fsync_always, expiry=progress, listeners=listeners)
        self._leadership = leadership = Leadership(
            clock, cluster, checkpoints=checkpoints, progress=progress, acks=acks, pulls=pulls,
            listeners=listeners)
        self._fetches = FollowerFetches(clock, lifecycle, cluster, slots=table,
                                        progress=progress, fencing=leadership)
        self._follower = FollowerLog(lifecycle, fsync_always=fsync_always,
                                     checkpoints=checkpoints, listeners=listeners)
        self._leader_lookup: Callable[[str, int], Any] | None = None
        self._lookup_first = False
        self._write_fence: Callable[[], str | None] | None = None
        checkpoints.start()

    # ------------------------------------------------------------------ queries

    def hw(self, topic: str, partition: int) -> int:
        """Offset of the last committed message (inclusive); -1 while nothing is committed."""
        return self._slot(topic, partition).repl.hw

    def is_leader(self, topic: str, partition: int) -> bool:
        """True when this broker accepts writes for the partition: leader role and, in a
        cluster, its leadership of the current epoch confirmed."""
        slot = self._slot(topic, partition)
        return slot.repl.role is Role.LEADER and slot.confirmed and not self._fenced()

    def _fenced(self) -> str | None:
        fence = self._write_fence
        return None if fence is None else fence()

    @property
    def cluster(self) -> ClusterConfig | None:
        return self._cluster

    def describe(self, topic: str, partition: int) -> PartitionStatus:
        repl = self._slot(topic, partition).repl
        return PartitionStatus(repl.role, repl.hw, list(repl.isr), repl.under_replicated,
                               repl.leader_epoch)

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

    def set_leader_lookup(self, lookup: Callable[[str, int], Any], *,
                          authoritative: bool = False) -> None:
        """Where NOT_LEADER hints come from besides this broker's own view: ``lookup(topic,
        partition)`` answers an object with ``leader``, ``addr`` and ``epoch`` (or None).
        ``authoritative`` (the etcd control plane): asked first; otherwise only when this
        broker does not know the leader itself (a forced leader recorded without etcd)."""
        self._leader_lookup = lookup
        self._lookup_first = authoritative

    def leader_hint(self, topic: str, partition: int) -> tuple[int, str | None, int] | None:
        """``(leader broker id, its V1 address or None, leader epoch)`` of a partition this
        broker does not lead, as far as it knows; None when it does not know."""
        slot = self._slot(topic, partition)
        lookup = self._leader_lookup
        if lookup is not None and self._lookup_first:
            found = lookup(topic, partition)
            if found is not None:
                return found.leader, found.addr, found.epoch
        cluster = self._cluster
        if cluster is not None and slot.repl.role is not Role.LEADER and slot.leader_id >= 0:
            address = cluster.brokers.get(slot.leader_id)
            return slot.leader_id, None if address is None else str(address), \
                slot.repl.leader_epoch
        if lookup is not None and not self._lookup_first:
            found = lookup(topic, partition)
            own = cluster.broker_id if cluster is not None else None
            if found is not None and found.leader != own:
                return found.leader, found.addr, found.epoch
        return None

    def leader_view(self, topic: str, partition: int) -> tuple[int, int]:
        """``(leader broker id, leader epoch)`` of a partition as this broker knows it: itself
        when it leads (confirmed), else ``leader_hint``'s; ``(-1, epoch)`` when unknown."""
        slot = self._slot(topic, partition)
        cluster = self._cluster
        if self.is_leader(topic, partition):
            return (cluster.broker_id if cluster is not None else 0), slot.repl.leader_epoch
        hint = self.leader_hint(topic, partition)
        if hint is None:
            return -1, slot.repl.leader_epoch
        return hint[0], hint[2]

    def not_leader_error(self, topic: str, partition: int) -> NotLeader:
        """The NOT_LEADER refusal of a write here, naming the leader when known."""
        error = not_leader(self._slot(topic, partition), self._cluster)
        hint = self.leader_hint(topic, partition)
        if hint is not None:
            error.leader, error.addr, error.epoch = hint
        return error

    def add_hw_listener(self, listener: Callable[[str, int], None]) -> None:
        """Call ``listener(topic, partition)`` whenever a replication event (a report, an ISR
        lag expiry, a role change, a follower taking its leader's ``hw``) moves ``hw``.
        Moves caused by ``on_appended`` and ``on_durable`` are not reported: their caller
        knows already."""
        self._listeners.add_hw(listener)

    def add_change_listener(self, listener: Callable[[str, int], None]) -> None:
        """Call ``listener(topic, partition)`` when a partition appears or goes away, changes
        role, has its leadership confirmed, or (a follower) learns a newer epoch: what the
        fetch loop must react to. Called synchronously; listeners must not re-enter."""
        self._listeners.add_change(listener)

    def add_copy_listener(self, listener: Callable[[str, int, Any, int, bytes], None]) -> None:
        """Call ``listener(topic, partition, log, first, data)`` after a follower appended
        ``data`` (the leader's stored records, the first at offset ``first``) to ``log``:
        the core keeps the partition's idempotent producer state from it. Called
        synchronously, before the records are fsynced; listeners must not raise."""
        self._listeners.add_copied(listener)

    def set_log_syncer(self, sync_log: Callable[[Any, int], Deferred[None]]) -> None:
        """How a follower makes copied records durable: ``sync_log(log, upto)`` fires once
        offsets ``< upto`` are fsynced (the core's group committer). Used with fsync=always."""
        self._follower.set_log_syncer(sync_log)

    # ------------------------------------------------------------------ the leader's log

    def on_appended(self, topic: str, partition: int) -> None:
        """The leader's log grew: may advance ``hw`` and answer ``acks=all`` waiters."""
        self._progress.refresh(self._slot(topic, partition))

    def on_durable(self, topic: str, partition: int) -> None:
        """An fsync covered more offsets: may advance ``hw`` and answer waiters."""
        self._progress.refresh(self._slot(topic, partition))

    def committed(self, topic: str, partition: int, offset: int) -> bool:
        """True when ``wait_for_all`` for ``offset`` would fire at once with success: this
        broker leads the partition (confirmed, not fenced, not shutting down) and ``offset``
        is committed with at least min ISR replicas in sync. False otherwise, without
        saying why (``wait_for_all`` says it). A produce answered by ``acks=all`` asks this
        first: on one broker, or once the followers hold the batch, no Deferred is made."""
        slot = self._slot(topic, partition)
        repl = slot.repl
        if (repl.role is not Role.LEADER or not slot.confirmed or self._lifecycle.closed
                or self._fenced() is not None):
            return False
        self._progress.refresh(slot)
        return offset <= repl.ack_offset

    def wait_for_all(self, topic: str, partition: int, offset: int,
                     timeout_ms: int | None = None) -> Deferred[int]:
        """Fires with ``hw`` once ``offset`` is committed with at least min ISR replicas in
        sync (at once if it already is); fails with ``ReplicationTimeout`` after
        ``timeout_ms`` (None: the ack timeout), ``NotLeader`` if the partition becomes a
        follower meanwhile, ``Unavailable`` on shutdown. Cancelling the Deferred withdraws
        the wait."""
        slot = self._slot(topic, partition)
        repl = slot.repl
        if repl.role is not Role.LEADER or not slot.confirmed:
            return fail(self.not_leader_error(topic, partition))
        fenced = self._fenced()
        if fenced is not None:
            return fail(NotLeader(f"partition {partition} of {topic}: {fenced}"))
        if self._lifecycle.closed:
            return fail(Unavailable("broker shutting down"))
        self._progress.refresh(slot)
        if offset <= repl.ack_offset:
            return succeed(repl.hw)
        return self._acks.wait(slot, offset, timeout_ms)

    # ------------------------------------------------------------------ roles

    def set_role(self, topic: str, partition: int, role: str | Role) -> int:
        """SET_PARTITION_ROLE: persisted before it takes effect; returns ``hw``
        (``Leadership.set_role``)."""
        return self._leadership.set_role(self._slot(topic, partition), role)

    # ------------------------------------------------------------------ other replicas

    def replica_fetch(self, topic: str, partition: int, replica_id: int, offset: int, *,
                      allow_backwards: bool = False) -> ReplicaFetchResult:
        """REPLICA_FETCH: follower ``replica_id`` holds every offset up to ``offset``
        (``FollowerFetches.replica_fetch``)."""
        return self._fetches.replica_fetch(topic, partition, replica_id, offset,
                                           allow_backwards=allow_backwards)

    def pull(self, topic: str, partition: int, replica_id: int, offset: int, epoch: int, *,
             max_bytes: int, record: bool = True) -> PullResult:
        """REPLICA_PULL: a follower's fetch from ``offset`` in ``epoch``
        (``FollowerFetches.pull``)."""
        return self._fetches.pull(topic, partition, replica_id, offset, epoch,
                                  max_bytes=max_bytes, record=record)

    def wait_for_records(self, topic: str, partition: int, offset: int, timeout_ms: int,
                         replica_id: int = -1) -> Deferred[None]:
        """A follower's long poll past ``offset`` (``PullWaiters.wait``)."""
        return self._pulls.wait(self._slot(topic, partition), offset, timeout_ms, replica_id)

    def epoch_query(self, topic: str, partition: int, replica_id: int, epoch: int,
                    last_epoch: int | None) -> EpochReply:
        """REPLICA_EPOCH: where ``last_epoch`` ends here (``FollowerFetches.epoch_query``)."""
        return self._fetches.epoch_query(topic, partition, replica_id, epoch, last_epoch)

    # ------------------------------------------------------------------ the fetch loop's views

    def handle(self, topic: str, partition: int) -> ReplicaHandle | None:
        """The follower-side view of one partition (``replication/follower/`` drives it);
        None when this broker has no such topic or partition (deleted, or not created
        here yet)."""
        try:
            return self._handle(self._slot(topic, partition))
        except (BadRequest, KeyError, IndexError):
            return None

    def handles(self) -> list[ReplicaHandle]:
        """Every partition of every topic in the store, loading the ones not seen yet."""
        out: list[ReplicaHandle] = []
        for name in self._table.store_topics():
            try:
                slots = self._table.load_topic(name)
            except BadRequest:
                continue
            out.extend(self._handle(slot) for slot in slots)
        return out

    # ------------------------------------------------------------------ topic lifecycle

    def topic_created(self, topic: str) -> None:
        """A topic was created on this broker: start tracking (and fetching) it now."""
        self._table.load_topic(topic)

    def forget_topic(self, topic: str) -> None:
        """The topic was deleted: drop its state; its waiting ``acks=all`` requests fail."""
        slots = self._table.forget(topic)
        if not slots:
            return
        for slot in slots:
            slot.forgotten = True
            self._progress.cancel_expiry(slot)
            self._checkpoints.discard(slot)
            self._acks.fail(slot, BadRequest(
                f"unknown topic {topic}: deleted while acks=all was waiting"))
            self._pulls.wake(slot)
            self._listeners.changed(slot)

    def partitions_added(self, topic: str) -> None:
        """The topic has more partitions now: start tracking them."""
        self._table.partitions_added(topic)

    def close(self) -> None:
        """Stop timers, answer waiting ``acks=all`` requests UNAVAILABLE, checkpoint ``hw``."""
        if self._lifecycle.closed:
            return
        self._lifecycle.closed = True
        self._checkpoints.stop()
        for slot in self._table.slots():
            self._progress.cancel_expiry(slot)
            self._acks.fail(slot, Unavailable("broker shutting down"))
            self._pulls.wake(slot)
        self._checkpoints.flush()

    def release_pulls(self) -> None:
        """Answer every waiting follower long poll now, and later ones at once (shutdown:
        connections go idle)."""
        self._lifecycle.no_waiting = True
        for slot in self._table.slots():
            self._pulls.wake(slot)

    # ------------------------------------------------------------------ internals

    def _slot(self, topic: str, partition: int) -> Slot:
        return self._table.get(topic, partition)

    def _handle(self, slot: Slot) -> ReplicaHandle:
        return ReplicaHandle(slot, self._lifecycle, self._follower, self._leadership)
