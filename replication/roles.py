"""Partition roles on this broker and the shape in which replication state is persisted.

Owns: the ``Role`` state machine (enum plus its table of legal transitions, in this one
file), the parsing of a role name from a request, and ``ReplicationCheckpoint``: the small
JSON document kept beside each partition (``PartitionLog.save_state``) holding the role,
the leader epoch, the high-watermark checkpoint and the in-sync replica set.

Must not import: Twisted, the store, sockets, ``time``. No I/O here: the shell reads and
writes the document; this module only converts it to and from plain values.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from replication.epochs import EpochHistory
from replication.errors import InvalidReplicaRequest

__all__ = [
    "Role",
    "ROLE_TRANSITIONS",
    "IllegalStateError",
    "check_transition",
    "parse_role",
    "ReplicationCheckpoint",
    "CHECKPOINT_VERSION",
]


class IllegalStateError(Exception):
    """A role transition the table does not allow: a bug in the caller, never a client error."""


class Role(enum.StrEnum):
    """The role this broker plays for one partition. ``str(role)`` is the wire word."""

    LEADER = "leader"
    """Actions: accepts PRODUCE; tracks follower progress (REPLICA_FETCH) and the ISR;
    moves ``hw``; answers ``acks=all`` once ``hw`` and the ISR allow it.
    Transitions: to FOLLOWER on ``SET_PARTITION_ROLE follower``."""

    FOLLOWER = "follower"
    """Actions: PRODUCE and REPLICA_FETCH get NOT_LEADER; pending ``acks=all`` requests are
    answered NOT_LEADER; CONSUME still serves up to the frozen ``hw``; the ISR is frozen
    (no lag expiry).
    Transitions: to LEADER on ``SET_PARTITION_ROLE leader``, which starts a new leader
    epoch and gives the frozen ISR members a fresh lag window."""


ROLE_TRANSITIONS: Mapping[Role, frozenset[Role]] = {
    Role.LEADER: frozenset({Role.FOLLOWER}),
    Role.FOLLOWER: frozenset({Role.LEADER}),
}
"""Legal role changes. Asking for the role a partition already has is not a transition:
the caller treats it as a no-op before consulting this table."""


def check_transition(current: Role, new: Role) -> None:
    """Raise ``IllegalStateError`` unless ``current -> new`` is in ``ROLE_TRANSITIONS``."""
    if new not in ROLE_TRANSITIONS[current]:
        allowed = sorted(str(r) for r in ROLE_TRANSITIONS if new in ROLE_TRANSITIONS[r])
        raise IllegalStateError(
            f"partition should be in one of {{{', '.join(allowed)}}} before moving to {new}; "
            f"is in {current}")


def parse_role(text: str | Role) -> Role:
    """The role named exactly ``leader`` or ``follower``; anything else is BAD_REQUEST."""
    if isinstance(text, Role):
        return text
    try:
        return Role(text)
    except ValueError:
        raise InvalidReplicaRequest(f"invalid role {text!r}; expected leader or follower") from None


CHECKPOINT_VERSION = 1


@dataclass(frozen=True)
class ReplicationCheckpoint:
    """What survives a restart for one partition.

    JSON shape (``to_json``), version 1::

        {"version": 1, "role": "leader", "leader_epoch": 0, "hw": 41,
         "isr": [0, 2], "replica_offsets": {"1": 17, "2": 41}}

    ``hw`` is a value the high watermark really had (never above it); ``isr`` includes the
    leader (0); ``replica_offsets`` are followers' recorded progress (last offsets held),
    lower bounds of what they really hold. A missing document means a new partition:
    leader, epoch 0, ``hw`` -1, ISR ``[0]``.

    In a multi-broker cluster two optional fields join (written only when they carry
    something, so a single broker's document is unchanged): ``"replica": <n>``, this
    broker's replica id when it is not 0 (the ISR always includes it), and
    ``"epochs": [[epoch, start_offset], ...]``, the leader-epoch history of the log
    (``replication.epochs``). A follower's ``leader_epoch`` is the newest epoch it knows of
    and its ``isr`` the leader's ISR as last seen.
    """

    role: Role = Role.LEADER
    leader_epoch: int = 0
    hw: int = -1
    isr: tuple[int, ...] = (0,)
    replica_offsets: Mapping[int, int] = field(default_factory=dict)
    local_replica: int = 0
    epochs: tuple[tuple[int, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "version": CHECKPOINT_VERSION,
            "role": str(self.role),
            "leader_epoch": self.leader_epoch,
            "hw": self.hw,
            "isr": sorted(self.isr),
            "replica_offsets": {str(r): o for r, o in sorted(self.replica_offsets.items())},
        }
        if self.local_replica:
            document["replica"] = self.local_replica
        if self.epochs:
            document["epochs"] = [[epoch, start] for epoch, start in self.epochs]
        return document

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ReplicationCheckpoint:
        """Parse ``to_json`` output; ``{}``/``None`` gives the defaults.

        Raises ``ValueError`` naming the bad field: the document is only ever replaced
        atomically, so a damaged one is news for the operator, not something to guess at.
        """
        if not data:
            return cls()
        if not isinstance(data, Mapping):
            raise ValueError(f"replication state: expected an object, got {type(data).__name__}")
        version = data.get("version", CHECKPOINT_VERSION)
        if version != CHECKPOINT_VERSION:
            raise ValueError(f"replication state: unsupported version {version!r}")
        role_text = data.get("role", str(Role.LEADER))
        try:
            role = Role(role_text)
        except ValueError:
            raise ValueError(f"replication state: bad role {role_text!r}") from None
        epoch = _int_field(data, "leader_epoch", 0, minimum=0)
        hw = _int_field(data, "hw", -1, minimum=-1)
        raw_isr = data.get("isr", [0])
        if not isinstance(raw_isr, list) or not all(_is_int(r) and r >= 0 for r in raw_isr):
            raise ValueError(f"replication state: bad isr {raw_isr!r}")
        raw_offsets = data.get("replica_offsets", {})
        if not isinstance(raw_offsets, Mapping):
            raise ValueError(f"replication state: bad replica_offsets {raw_offsets!r}")
        offsets: dict[int, int] = {}
        for key, value in raw_offsets.items():
            if not (isinstance(key, str) and key.isdigit() and _is_int(value) and value >= -1):
                raise ValueError(f"replication state: bad replica_offsets entry {key!r}: {value!r}")
            offsets[int(key)] = value
        local = _int_field(data, "replica", 0, minimum=0)
        try:
            history = EpochHistory.from_json(data.get("epochs"))
        except ValueError as exc:
            raise ValueError(f"replication state: {exc}") from None
        isr = tuple(sorted(set(raw_isr) | {local}))
        return cls(role=role, leader_epoch=epoch, hw=hw, isr=isr, replica_offsets=offsets,
                   local_replica=local,
                   epochs=tuple((e.epoch, e.start_offset) for e in history.entries))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_field(data: Mapping[str, Any], name: str, default: int, *, minimum: int) -> int:
    value = data.get(name, default)
    if not _is_int(value) or value < minimum:
        raise ValueError(f"replication state: bad {name} {value!r}")
    return int(value)
