"""The replies and effects of the Kafka classic group coordinator (``groups.classic``).

Owns: the reply records (``JoinReply``, ``SyncReply``, ``Held``, ``GroupView``,
``MemberView``, ``CommittedOffset``), the effect records the shell performs
(``Deliver``, ``ScheduleSession``, ``ScheduleJoin``, ``CancelTimer``,
``PersistClassicGroups``; ``groups.effects.PersistOffsets`` is reused because the offsets
store is shared with V1) and the timer keys. Operations return ``groups.effects.Result``.

Held requests: JoinGroup waits for the join barrier and a follower's SyncGroup for the
leader's, so those operations may reply ``Held(ticket)``. The shell keeps the request
(connection, correlation id) under the ticket and answers it when a later operation or
timer returns ``Deliver(ticket, reply)`` - a ``JoinReply``/``SyncReply`` or a
``KafkaGroupError`` instance. Every held ticket is delivered exactly once.

Must not import: Twisted, ``broker``, anything that does I/O or reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from groups.effects import PersistOffsets
from groups.kafka_errors import KafkaGroupError

__all__ = [
    "JoinReply",
    "SyncReply",
    "Held",
    "MemberView",
    "GroupView",
    "CommittedOffset",
    "Deliver",
    "ScheduleSession",
    "ScheduleJoin",
    "CancelTimer",
    "PersistClassicGroups",
    "PersistOffsets",
    "ClassicEffect",
    "session_key",
    "join_key",
]


@dataclass(frozen=True, slots=True)
class JoinReply:
    """A JoinGroup answer: the new generation, the chosen protocol, the leader, the
    member's own (possibly just generated) id and - for the leader only - every member's
    ``(member_id, metadata for the chosen protocol)`` in join order (empty for followers)."""

    generation: int
    protocol: str
    leader: str
    member_id: str
    members: tuple[tuple[str, bytes], ...] = ()
    instance_ids: tuple[str | None, ...] = ()
    """The leader's answer: each member's group instance id, in ``members``' order (None
    for a dynamic member); empty for followers."""


@dataclass(frozen=True, slots=True)
class SyncReply:
    """A SyncGroup answer: this member's opaque assignment from the leader (``b""`` when
    the leader gave it none)."""

    assignment: bytes


@dataclass(frozen=True, slots=True)
class Held:
    """The request is held; a later ``Deliver(ticket, ...)`` answers it. ``member_id`` is
    the member the request belongs to (a new member's generated id for a first join)."""

    ticket: int
    member_id: str


@dataclass(frozen=True, slots=True)
class MemberView:
    """One member in a DescribeGroups answer; ``metadata`` and ``assignment`` are filled
    only while the group is Stable (as Kafka does)."""

    member_id: str
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupView:
    """A DescribeGroups answer. An unknown group is ``Dead`` with nothing else."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberView, ...]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A committed position: ``offset`` is the next offset to read (V1's meaning too) and
    ``metadata`` the client's string (``""`` for null)."""

    offset: int
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class Deliver:
    """Answer the held request ``ticket`` with ``reply``."""

    ticket: int
    reply: JoinReply | SyncReply | KafkaGroupError


@dataclass(frozen=True, slots=True)
class ScheduleSession:
    """(Re)arm the session timer ``key``: at ``deadline_ms`` call
    ``coordinator.expire_session(group_id, member_id, generation, token, now_ms)``. A timer
    with the same key is replaced."""

    key: str
    group_id: str
    member_id: str
    generation: int
    token: int
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class ScheduleJoin:
    """(Re)arm the join-barrier timer ``key``: at ``deadline_ms`` (the rebalance timeout)
    call ``coordinator.expire_join(group_id, generation, token, now_ms)``. Replaces a timer
    with the same key."""

    key: str
    group_id: str
    generation: int
    token: int
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    """Disarm the timer ``key`` (a session or join timer that is no longer needed)."""

    key: str


@dataclass(frozen=True, slots=True)
class PersistClassicGroups:
    """The state of group ``group_id`` that ``groups.classic_store`` writes changed
    (generation, members, protocol, leader or assignments), or the group is gone: the
    shell writes that group's record alone."""

    group_id: str


ClassicEffect = (Deliver | ScheduleSession | ScheduleJoin | CancelTimer | PersistClassicGroups
                 | PersistOffsets)


def session_key(group_id: str, member_id: str) -> str:
    """The session timer key of one member: ``kafka-session:<len>:<group>:<member>``.

    Kafka group and member ids may contain ``:``, so the group id's length is spelled out:
    two different (group, member) pairs never share a key.
    """
    return f"kafka-session:{len(group_id)}:{group_id}:{member_id}"


def join_key(group_id: str) -> str:
    """The join-barrier timer key of one group: ``kafka-join:<group>``."""
    return f"kafka-join:{group_id}"
