"""What the replication service answers: small frozen values, one per request kind.

Owns: ``ReplicaFetchResult`` (REPLICA_FETCH), ``PartitionStatus`` (metadata and admin),
``PullResult`` (REPLICA_PULL) and ``ReplicaStatusInfo`` (REPLICA_STATUS). The answer to
REPLICA_EPOCH is ``replication.wire.EpochReply``: the replica asked builds it and the asker
parses it, so both sides share that one type.

Must not import: Twisted, the store, sockets, the other modules of this package. Plain data.
"""

from __future__ import annotations

from dataclasses import dataclass

from replication.roles import Role

__all__ = ["ReplicaFetchResult", "PartitionStatus", "PullResult", "ReplicaStatusInfo", "IsrFacts"]


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


@dataclass(frozen=True, slots=True)
class IsrFacts:
    """A partition as the control plane proposes its ISR: whether this broker leads it
    (confirmed), its epochs (local and as etcd holds it), the committed ISR and the one the
    lag rule wants (broker ids, sorted), each replica's last offset by broker id, ``hw``,
    the leader's last offset when its epoch began, the local log end, and the leader epoch
    of the last record in the local log (-1: empty or unknown; the unclean election ranks
    replicas by it)."""

    leader: bool
    epoch: int
    stored_epoch: int | None
    committed: tuple[int, ...]
    desired: tuple[int, ...]
    progress: dict[int, int]
    hw: int
    epoch_start: int
    log_end: int
    last_epoch: int = -1
