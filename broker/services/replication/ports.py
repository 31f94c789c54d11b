"""The narrow interfaces through which the parts of the replication service see each other.

Owns: one ``typing.Protocol`` per job a part does for the others (look a partition up,
announce a change, checkpoint, answer or fail ``acks=all`` waiters, wake follower long
polls, track ISR and ``hw`` progress, fence by epoch, apply a leader's records). Each part
takes its collaborators typed by these, so it depends on a job, not on a class; the facade
(``service.py``) passes the concrete parts at construction.

Must not import: Twisted at run time, the store, sockets, the parts' modules (only
``partitions.Slot``, and only for type checking).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

    from broker.errors import SkerryError
    from broker.services.replication.partitions import Slot
    from replication.roles import ReplicationCheckpoint
    from replication.wire import PullReply

__all__ = [
    "SlotLookup",
    "Announcing",
    "Checkpointing",
    "AckSettling",
    "PullWaking",
    "ExpiryScheduling",
    "ProgressTracking",
    "Fencing",
    "LeadershipView",
    "FollowerApplying",
]


class SlotLookup(Protocol):
    """Find a partition, loading its topic on first use (``PartitionTable``)."""

    def get(self, topic: str, partition: int) -> Slot: ...


class Announcing(Protocol):
    """Tell the listeners about a partition (``Listeners``)."""

    def hw_moved(self, slot: Slot) -> None: ...
    def changed(self, slot: Slot) -> None: ...
    def isr_wanted(self, slot: Slot) -> None: ...
    def copied(self, slot: Slot, first: int, data: bytes) -> None: ...


class Checkpointing(Protocol):
    """Persist a partition's replication state (``HwCheckpoints``)."""

    def persist(self, slot: Slot, checkpoint: ReplicationCheckpoint) -> None: ...
    def save(self, slot: Slot) -> None: ...
    def mark_dirty(self, slot: Slot) -> None: ...
    def discard(self, slot: Slot) -> None: ...


class AckSettling(Protocol):
    """Answer or fail the ``acks=all`` waiters of a partition (``AckWaiters``)."""

    def answer(self, slot: Slot) -> None: ...
    def fail(self, slot: Slot, error: SkerryError) -> None: ...


class PullWaking(Protocol):
    """Answer followers' waiting long polls (``PullWaiters``)."""

    def wake(self, slot: Slot, below: int | None = None, *, hw: int | None = None) -> None: ...


class ExpiryScheduling(Protocol):
    """Keep a partition's ISR lag timer in step with its state (``ProgressTracker``)."""

    def schedule_expiry(self, slot: Slot) -> None: ...
    def cancel_expiry(self, slot: Slot) -> None: ...


class ProgressTracking(ExpiryScheduling, Protocol):
    """React to a leader's log, ISR or ``hw`` moving (``ProgressTracker``)."""

    def refresh(self, slot: Slot) -> None: ...
    def after_change(self, slot: Slot, isr_changed: bool, hw_advanced: bool, *,
                     saved: bool = False) -> None: ...


class Fencing(Protocol):
    """Learn of a leader epoch from another replica (``Leadership``)."""

    def observe(self, slot: Slot, epoch: int) -> bool: ...


class LeadershipView(Fencing, Protocol):
    """What a leader's probe reports about its epoch (``Leadership``)."""

    def confirm(self, slot: Slot, epoch: int) -> bool: ...
    def conflict(self, slot: Slot, epoch: int) -> None: ...
    def unreachable(self, slot: Slot, broker_id: int) -> None: ...


class FollowerApplying(Protocol):
    """Copy a leader's log into a follower's (``FollowerLog``)."""

    def apply(self, slot: Slot, reply: PullReply) -> Deferred[None]: ...
    def truncate(self, slot: Slot, offset: int) -> None: ...
