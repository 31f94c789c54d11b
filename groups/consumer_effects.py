"""The requests, replies and effects of the KIP-848 consumer-group coordinator
(``groups.consumer_coordinator``).

Owns: ``HeartbeatRequest``/``HeartbeatReply`` (shaped field for field like Kafka's
ConsumerGroupHeartbeat, API 68, so a transport handler only translates), the
ConsumerGroupDescribe views (API 69: ``ConsumerGroupView``, ``ConsumerMemberView``,
``TopicPartitionsView``), the effects the shell performs (``ScheduleSessionTimeout``,
``ScheduleRebalanceTimeout``, ``CancelTimer`` - the classic one, reused -,
``PersistConsumerGroup``) and the timer keys. Operations return ``groups.effects.Result``.

Must not import: Twisted, ``broker``, anything that does I/O or reads a clock.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from groups.classic_effects import CancelTimer
from groups.effects import PersistOffsets

__all__ = [
    "OwnedPartitions",
    "HeartbeatRequest",
    "HeartbeatReply",
    "TopicPartitionsView",
    "ConsumerMemberView",
    "ConsumerGroupView",
    "ScheduleSessionTimeout",
    "ScheduleRebalanceTimeout",
    "CancelTimer",
    "PersistConsumerGroup",
    "PersistOffsets",
    "ConsumerEffect",
    "consumer_session_key",
    "consumer_rebalance_key",
]

OwnedPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]
"""``((topic_id, (partition, ...)), ...)``, topics and partitions sorted: Kafka's
``TopicPartitions`` array."""


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """One ConsumerGroupHeartbeat. ``None`` means "not sent / unchanged since the last
    heartbeat", exactly as Kafka's nullable fields (and ``rebalance_timeout_ms`` -1).

    ``member_epoch``: 0 joins (or rejoins), -1 leaves, -2 leaves temporarily (static
    members only), > 0 heartbeats at that epoch. ``member_id`` is the client's (Kafka 4.x
    clients make a UUID); ``""`` on a join makes the coordinator generate one (v0).
    ``owned`` lists what the member owns right now: sent on joins, after a change of its
    assignment, and on a full heartbeat; None otherwise.
    """

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topic_names: tuple[str, ...] | None = None
    topic_regex: str | None = None
    server_assignor: str | None = None
    owned: OwnedPartitions | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    """The answer to a heartbeat: the member's id and epoch (-1 after a leave, -2 after a
    static member's temporary leave), how often to heartbeat, and - when it changed, or the
    request carried owned partitions - the partitions the member owns now (``assignment``;
    None: unchanged, keep what you have)."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: OwnedPartitions | None = None


@dataclass(frozen=True, slots=True)
class TopicPartitionsView:
    """One topic of a member's assignment in ConsumerGroupDescribe (the name is ``""``
    when the topic no longer exists)."""

    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ConsumerMemberView:
    """One member in ConsumerGroupDescribe: ``assignment`` is what it owns now,
    ``target`` what the coordinator wants it to own, ``pending`` what it was asked to
    revoke and has not yet; ``state`` its reconciliation state."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    topic_names: tuple[str, ...]
    topic_regex: str | None
    state: str
    assignment: tuple[TopicPartitionsView, ...]
    pending: tuple[TopicPartitionsView, ...]
    target: tuple[TopicPartitionsView, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupView:
    """A ConsumerGroupDescribe answer for one group."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ConsumerMemberView, ...]


@dataclass(frozen=True, slots=True)
class ScheduleSessionTimeout:
    """(Re)arm the session timer ``key``: at ``deadline_ms`` call
    ``coordinator.expire_session(group_id, member_id, token, now_ms)``. Replaces a timer
    with the same key."""

    key: str
    group_id: str
    member_id: str
    token: int
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class ScheduleRebalanceTimeout:
    """(Re)arm the rebalance timer ``key`` of a member that must revoke partitions: at
    ``deadline_ms`` call ``coordinator.expire_rebalance(group_id, member_id, member_epoch,
    token, now_ms)``. Replaces a timer with the same key."""

    key: str
    group_id: str
    member_id: str
    member_epoch: int
    token: int
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class PersistConsumerGroup:
    """The persisted state of consumer group ``group_id`` changed (epochs, members, their
    assignments, the target): write its records (``groups.consumer_records``) before the
    reply that reveals the change goes out."""

    group_id: str


ConsumerEffect = (ScheduleSessionTimeout | ScheduleRebalanceTimeout | CancelTimer
                  | PersistConsumerGroup | PersistOffsets)


def consumer_session_key(group_id: str, member_id: str) -> str:
    """``consumer-session:<len>:<group>:<member>``: the group id's length is spelled out,
    so two (group, member) pairs never share a key whatever characters they hold."""
    return f"consumer-session:{len(group_id)}:{group_id}:{member_id}"


def consumer_rebalance_key(group_id: str, member_id: str) -> str:
    """``consumer-rebalance:<len>:<group>:<member>``: the member's revocation deadline."""
    return f"consumer-rebalance:{len(group_id)}:{group_id}:{member_id}"
