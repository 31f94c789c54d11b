"""What a coordinator operation asks its shell to do: ``Result(reply, effects)``.

Owns: the effect records (plain frozen data) and ``Result``. The coordinator decides; the
shell (``broker/services/groups.py``) performs: it writes ``groups.json``/``offsets.json`` and
owns the timers. Like Kafka's ``CoordinatorResult``, "a list of records and a response".

Must not import: Twisted, the broker, anything that does I/O or reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = [
    "PersistGroups",
    "PersistOffsets",
    "ScheduleExpiry",
    "CancelExpiry",
    "Effect",
    "Result",
    "expiry_key",
]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class PersistGroups:
    """The state of group ``group`` on ``topic`` that ``groups.json`` holds changed
    (generation, members, assignor, assignment or session timeouts), or the group is gone.
    Replies that reveal a generation wait for the write. The shell writes that group's
    record alone (``docs/groups.md``, "Writes proportional to what changed")."""

    group: str
    topic: str


@dataclass(frozen=True, slots=True)
class PersistOffsets:
    """Committed offsets changed; the reply waits until ``offsets.json`` holds them.

    ``group``, ``topic`` and ``partitions`` name the offsets that changed (committed,
    moved or forgotten), so the shell writes their records alone. Left empty (the Kafka
    and KIP-848 coordinators' marker: their offsets are stored through the V1 coordinator,
    whose own effect names them) it names nothing: the shell only waits."""

    group: str = ""
    topic: str = ""
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ScheduleExpiry:
    """(Re)arm the session timer ``key``: at ``deadline_ms`` (monotonic ms) call
    ``coordinator.expire(group, topic, member_id, token, now_ms)``. A timer with the same
    key is replaced."""

    key: str
    group: str
    topic: str
    member_id: str
    token: int
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class CancelExpiry:
    """Disarm the session timer ``key`` (the member left or was removed)."""

    key: str


Effect = PersistGroups | PersistOffsets | ScheduleExpiry | CancelExpiry


@dataclass(frozen=True, slots=True)
class Result(Generic[R]):
    """The reply to give and the effects to perform before giving it."""

    reply: R
    effects: tuple[Effect, ...] = ()


def expiry_key(group: str, topic: str, member_id: str) -> str:
    """The timer key of one member's session: ``heartbeat:<group>:<topic>:<member>``.

    ``:`` cannot occur in a group, topic or consumer id (spec: Names), so two members never
    share a key; ``-`` can, which is why the separator is not ``-``.
    """
    return f"heartbeat:{group}:{topic}:{member_id}"
