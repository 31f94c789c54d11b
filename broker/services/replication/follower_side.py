"""The follower side of a partition: what the fetch loop and the leader probe act on.

Owns: ``FollowerLog``, copying a leader's log into this one (truncating to the divergence
point, appending the leader's records unchanged and telling the copy listeners, fsynced
first under fsync=always, then taking the leader's ``hw`` and ISR), and ``ReplicaHandle``, the view of one partition that
``replication/follower/`` drives (it satisfies that module's ``ReplicaView``): epochs,
truncation, appends, and the leader probe's confirm, conflict and unreachable reports.

Must not import: the global reactor, sockets, the store's modules, ``replication.follower``
(the fetch loop codes against this, not the other way round), the other parts of this
package: it imports only the shared ``partitions`` and ``ports`` and sees the parts through
``ports``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed

from broker.errors import NotLeader, Unavailable
from broker.services.replication.partitions import Lifecycle, Slot
from broker.services.replication.ports import (
    Announcing,
    Checkpointing,
    FollowerApplying,
    LeadershipView,
)
from replication.epochs import EpochLookup
from replication.roles import Role
from replication.wire import PullReply

__all__ = ["FollowerLog", "ReplicaHandle"]

log = logging.getLogger("skerry.replication")


class FollowerLog:
    """Truncating and appending a follower partition's log as its leader dictates."""

    def __init__(self, lifecycle: Lifecycle, *, fsync_always: bool,
                 checkpoints: Checkpointing, listeners: Announcing) -> None:
        self._lifecycle = lifecycle
        self._fsync_always = fsync_always
        self._checkpoints = checkpoints
        self._listeners = listeners
        self._sync_log: Callable[[Any, int], Deferred[None]] | None = None

    def set_log_syncer(self, sync_log: Callable[[Any, int], Deferred[None]]) -> None:
        """How copied records become durable: ``sync_log(log, upto)`` fires once offsets
        ``< upto`` are fsynced (the core's group committer). Used with fsync=always."""
        self._sync_log = sync_log

    def apply(self, slot: Slot, reply: PullReply) -> Deferred[None]:
        """Append the leader's records unchanged (fsynced first under fsync=always), then
        take its ``hw``. ``ValueError`` when the records do not continue the local log."""
        repl = slot.repl
        plog: Any = slot.log
        if slot.forgotten or self._lifecycle.closed:
            return fail(Unavailable("partition closed"))
        if repl.role is not Role.FOLLOWER:
            return fail(NotLeader("this broker leads the partition now; the fetch stops"))
        if reply.count:
            if repl.adopt_epochs(list(reply.epochs)):
                self._checkpoints.save(slot)
            try:
                first = plog.append_records(reply.data)
            except ValueError:
                repl.truncated(plog.next_offset, plog.durable_offset)
                raise
            repl.leader_log_changed(plog.next_offset, plog.durable_offset)
            self._listeners.copied(slot, first, reply.data)
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
                self._checkpoints.mark_dirty(slot)
                self._listeners.hw_moved(slot)

        return synced.addCallback(take_hw)

    def truncate(self, slot: Slot, offset: int) -> None:
        """Cut the local log at ``offset`` (nothing when it ends there or before)."""
        plog: Any = slot.log
        if offset >= plog.next_offset:
            return
        before = plog.next_offset
        plog.truncate_to(offset)
        slot.repl.truncated(plog.next_offset, plog.durable_offset)
        self._checkpoints.save(slot)
        log.info("%s/%d: truncated the divergent tail %d..%d", slot.topic, slot.partition,
                 offset, before - 1)


class ReplicaHandle:
    """One partition as the fetch loop and the leader probe see it (``ReplicationService
    .handle``). Every method acts on the service's current state of the partition."""

    __slots__ = ("_slot", "_lifecycle", "_follower", "_leadership")

    def __init__(self, slot: Slot, lifecycle: Lifecycle, follower: FollowerApplying,
                 leadership: LeadershipView) -> None:
        self._slot = slot
        self._lifecycle = lifecycle
        self._follower = follower
        self._leadership = leadership

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
        return self._slot.forgotten or self._lifecycle.closed

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
    def leader_hint(self) -> int:
        """The leader etcd names for the epoch this replica knows (-1: none; always -1
        without the control plane)."""
        slot = self._slot
        if slot.stored_epoch is None or slot.stored_epoch != slot.repl.leader_epoch:
            return -1
        return slot.leader_id

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
        return self._leadership.observe(self._slot, epoch)

    def set_leader(self, broker_id: int) -> None:
        """The fetch loop found the leader (shown by REPLICA_STATUS)."""
        self._slot.leader_id = broker_id

    def truncate_for(self, answer: EpochLookup) -> int:
        """Cut the local log where it diverges from the leader that gave ``answer`` for
        ``last_epoch`` (KIP-101); returns the new log end."""
        slot = self._slot
        self._follower.truncate(slot, slot.repl.divergence_offset(answer))
        return slot.log.next_offset

    def truncate_to(self, offset: int) -> None:
        """Cut the local log at ``offset`` (it reached past the leader's log end)."""
        self._follower.truncate(self._slot, offset)

    def apply(self, reply: PullReply) -> Deferred[None]:
        """Append the leader's records unchanged (fsynced first under fsync=always), then
        take its ``hw``. ``ValueError`` when the records do not continue the local log."""
        return self._follower.apply(self._slot, reply)

    def confirm(self, epoch: int) -> bool:
        """Every other replica answered with no newer epoch: writes are accepted. False when
        the partition no longer leads ``epoch``."""
        return self._leadership.confirm(self._slot, epoch)

    def conflict(self, epoch: int) -> None:
        """Another replica claims leadership of the same ``epoch``: refuse writes (and fail
        waiting acks=all requests) until a probe round finds no conflict."""
        self._leadership.conflict(self._slot, epoch)

    def unreachable(self, broker_id: int) -> None:
        """The leader's probe could not reach ``broker_id``; one that has not fetched since
        the promotion leaves the ISR at once."""
        self._leadership.unreachable(self._slot, broker_id)
