"""The partitions the replication service knows, and how they are built from the store.

Owns: ``Slot`` (one partition as the service sees it: its log, its rules, and the per-slot
state the other parts keep on it), ``PartitionTable`` (slots by topic, built on first use
from the store's partitions and their persisted ``ReplicationCheckpoint``; in a cluster also
this broker's replica id and the replica list), ``Lifecycle`` (the service's closed flags,
shared by the parts), the ``StoreView``/``PartitionLogView`` protocols it reads the store
through, and two helpers every part uses: ``now_ms`` and the ``not_leader`` error.

Must not import: the global reactor (the clock is injected), sockets, transports, the
store's modules (it codes against ``StoreView``), the other parts of this package at run
time (it sees them through ``ports``; ``acks`` and ``leader_side`` only for their waiter
types, under ``TYPE_CHECKING``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from twisted.internet.interfaces import IDelayedCall, IReactorTime

from broker.errors import BadRequest, NotLeader
from broker.services.replication.ports import Announcing, ExpiryScheduling
from replication.cluster import ClusterConfig
from replication.partition import PartitionReplication
from replication.roles import ReplicationCheckpoint, Role

if TYPE_CHECKING:
    from broker.services.replication.acks import AckWaiter
    from broker.services.replication.leader_side import PullWaiter

__all__ = ["PartitionLogView", "StoreView", "Lifecycle", "Slot", "PartitionTable",
           "now_ms", "not_leader"]

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


class Lifecycle:
    """Whether the service is closed (every part stops scheduling and answers at once) and
    whether follower long polls are answered at once (shutdown: connections go idle)."""

    __slots__ = ("closed", "no_waiting")

    def __init__(self) -> None:
        self.closed = False
        self.no_waiting = False


class Slot:
    """A partition as the service sees it: its log, its rules, its ``acks=all`` waiters
    (``AckWaiters``) and lag timer (``ProgressTracker``); in a cluster also its replica list
    (broker ids), whether this broker holds a replica, whether a restored leadership is
    confirmed (``Leadership``), and the followers' waiting long polls (``PullWaiters``)."""

    __slots__ = ("topic", "partition", "log", "repl", "replicated", "waiters", "expiry",
                 "expiry_at_ms", "forgotten", "replicas", "is_replica", "confirmed",
                 "leader_id", "pulls", "hw_sent", "stored_epoch")

    def __init__(self, topic: str, partition: int, plog: PartitionLogView,
                 repl: PartitionReplication) -> None:
        self.topic = topic
        self.partition = partition
        self.log = plog
        self.repl = repl
        self.replicated = repl.replication_factor > 1
        self.waiters: list[tuple[int, int, AckWaiter]] = []  # heap by offset
        self.expiry: IDelayedCall | None = None
        self.expiry_at_ms: int | None = None
        self.forgotten = False
        self.replicas: tuple[int, ...] = ()
        self.is_replica = True
        self.confirmed = True
        self.leader_id = -1
        self.pulls: list[PullWaiter] = []
        self.hw_sent: dict[int, int] = {}  # replica id -> hw in the last pull answer
        # With the control plane on etcd: the leader epoch of the partition key as last
        # read (None: not read since start; the partition then takes no writes).
        self.stored_epoch: int | None = None


def now_ms(clock: IReactorTime) -> int:
    """The injected clock's time in whole milliseconds (what the pure rules take)."""
    return round(clock.seconds() * 1000)


def not_leader(slot: Slot, cluster: ClusterConfig | None) -> NotLeader:
    """The NOT_LEADER error for a write or fetch this broker cannot serve, saying why."""
    if cluster is not None:
        where = f"partition {slot.partition} of {slot.topic}"
        if not slot.is_replica:
            return NotLeader(f"broker {cluster.broker_id} holds no replica of {where} "
                             f"(replicas: brokers {' '.join(map(str, slot.replicas))})")
        epoch = slot.repl.leader_epoch
        if slot.repl.role is Role.LEADER and cluster.controlled:
            return NotLeader(f"{where}: leadership of epoch {epoch} on this broker is not "
                             "the one etcd holds (or etcd's session is lost)")
        if slot.repl.role is Role.LEADER:
            return NotLeader(f"{where}: leadership of epoch {epoch} on this broker is not "
                             "confirmed yet (waiting for the other replicas' epochs)")
        if cluster.controlled and slot.stored_epoch is None:
            return NotLeader(f"{where}: this broker has not read the partition's state from "
                             "etcd yet")
        leader = f"broker {slot.leader_id}" if slot.leader_id >= 0 else "not known yet"
        return NotLeader(f"{where} is a follower on this broker (epoch {epoch}, leader "
                         f"{leader})")
    return NotLeader(f"partition {slot.partition} of {slot.topic} is a follower on this "
                     "broker")


class PartitionTable:
    """Every partition of the store as a ``Slot``, built on first use. Building one starts
    its lag timer (``expiry``) and, in a cluster, announces it (``listeners``)."""

    def __init__(self, store: StoreView, clock: IReactorTime, cluster: ClusterConfig | None,
                 *, replica_lag_timeout_ms: int, fsync_always: bool,
                 expiry: ExpiryScheduling, listeners: Announcing) -> None:
        self._store = store
        self._clock = clock
        self._cluster = cluster
        self._lag_ms = replica_lag_timeout_ms
        self._fsync_always = fsync_always
        self._expiry = expiry
        self._listeners = listeners
        self._topics: dict[str, list[Slot]] = {}
        for name in self.store_topics():
            self.load_topic(name)

    def store_topics(self) -> list[str]:
        """The names of the store's topics, seen or not."""
        return list(getattr(self._store, "topics", ()))

    def get(self, topic: str, partition: int) -> Slot:
        """The partition's slot, loading the topic when it is not known yet."""
        slots = self._topics.get(topic)
        if slots is not None and 0 <= partition < len(slots):
            return slots[partition]
        slots = self.load_topic(topic)
        if not 0 <= partition < len(slots):
            raise BadRequest(f"partition {partition} out of range; topic {topic} has "
                             f"{len(slots)} partitions")
        return slots[partition]

    def load_topic(self, topic: str) -> list[Slot]:
        """Build the slots of the topic's partitions not built yet; BadRequest when the
        store does not know it."""
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

    def partitions_added(self, topic: str) -> None:
        """Build the new partitions of a topic already tracked."""
        if topic in self._topics:
            self.load_topic(topic)

    def forget(self, topic: str) -> list[Slot] | None:
        """Stop tracking the topic; returns its slots (None when it was not tracked)."""
        return self._topics.pop(topic, None)

    def slots(self) -> Iterator[Slot]:
        """Every slot built so far."""
        for slots in self._topics.values():
            yield from slots

    def _build(self, topic: str, partition: int, config: Any) -> Slot:
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
            now_ms=now_ms(self._clock),
        )
        if config.replication_factor > 1 and checkpoint.hw > repl.hw:
            log.warning("%s/%d: hw checkpoint %d is beyond the recovered log (last offset %d); "
                        "committed messages were lost", topic, partition, checkpoint.hw,
                        plog.next_offset - 1)
        slot = Slot(topic, partition, plog, repl)
        self._expiry.schedule_expiry(slot)
        return slot

    def _build_in_cluster(self, topic: str, partition: int, config: Any,
                          plog: PartitionLogView) -> Slot:
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
            "now_ms": now_ms(self._clock),
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
            if cluster.controlled:
                # The ISR is etcd's; until the partition key is read, the checkpointed one.
                repl.manage_isr(checkpoint.isr)
        slot = Slot(topic, partition, plog, repl)
        slot.replicas = replicas
        slot.is_replica = local is not None
        # A leader restored from disk accepts writes only once no other replica knows a
        # newer epoch (``confirm``) or the operator promotes it again.
        slot.confirmed = repl.role is not Role.LEADER
        slot.leader_id = -1
        if local is not None and repl.role is Role.LEADER:
            log.info("%s/%d: leader of epoch %d on disk; refusing writes until %s", topic,
                     partition, repl.leader_epoch,
                     "etcd's partition key names it" if cluster.controlled
                     else "the other replicas confirm it")
        self._expiry.schedule_expiry(slot)
        self._listeners.changed(slot)
        return slot
