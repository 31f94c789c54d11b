"""V1 commands: one frozen dataclass per request line of ``spec/v1-protocol.md``.

Owns: the command classes (what a parsed request holds), the command tables (wire name ->
class, by family), the numeric and name limits of the wire, and the plain-text rule (which
keys and values may travel unencoded) that the parser and the replies both apply.

Must not import: Twisted, sockets, the store, ``groups``, ``replication`` or any other
``broker`` module; the rest of ``broker.v1`` imports this module, never the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

from data.names import MAX_NAME_CHARS
from data.plaintext import BAD_KEY_RE, BAD_VALUE_RE, MAX_KEY_BYTES, is_plain_key, is_plain_value

__all__ = [
    "AdminAclAdd",
    "AdminAclList",
    "AdminAclRemove",
    "AdminAddPartitions",
    "AdminAlterTopic",
    "AdminBrokerHeartbeat",
    "AdminCommit",
    "AdminCreateTopic",
    "AdminDeleteGroup",
    "AdminDeleteTopic",
    "AdminGetMetadata",
    "AdminRegisterBroker",
    "AdminResetOffsets",
    "AdminSetPartitionLeader",
    "ALL_COMMANDS",
    "Auth",
    "BAD_KEY_RE",
    "BAD_VALUE_RE",
    "CLUSTER_COMMANDS",
    "Command",
    "COMMANDS",
    "Commit",
    "Consume",
    "CONTROL_COMMANDS",
    "DATA_COMMANDS",
    "DescribeGroup",
    "Fetch",
    "GroupHeartbeat",
    "Heartbeat",
    "is_plain_key",
    "is_plain_value",
    "Join",
    "Leave",
    "ListGroups",
    "MAX_INT",
    "MAX_KEY_BYTES",
    "MAX_NAME_CHARS",
    "Metadata",
    "Offset",
    "Offsets",
    "Ping",
    "Produce",
    "ProduceBatch",
    "ReplicaEpoch",
    "ReplicaFetch",
    "ReplicaPull",
    "ReplicaStatus",
    "SECURITY_COMMANDS",
    "SetPartitionRole",
    "Sync",
    "VERSION",
]

VERSION = "V1"
MAX_INT = 2**63 - 1
"""Largest number accepted in any numeric field (a signed 64-bit integer)."""




@dataclass(frozen=True, slots=True)
class Ping:
    """``PING`` (no arguments). Reply: ``V1|<cid>|OK``."""

    name: ClassVar[str] = "PING"
    cid: str


@dataclass(frozen=True, slots=True)
class Produce:
    """``PRODUCE <topic> <key>:<value> [acks=..] [partition=<n>] [enc=b64]``.

    ``value`` is always the stored bytes: the UTF-8 of a plain value, or the decoded bytes when
    ``b64`` is set. ``partition`` (additive) overrides the key hash; its range is the handler's.
    """

    name: ClassVar[str] = "PRODUCE"
    cid: str
    topic: str
    key: str
    value: bytes
    acks: str = "1"
    partition: int | None = None
    b64: bool = False
    pid: str | None = None
    """Additive idempotent produce: the producer id (a name) and this message's sequence
    number for the target partition; both or neither (``data/spark`` and docs/protocol.md)."""
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class Fetch:
    """Additive: ``FETCH <topic> <partition> <offset> [max=<n>] [max_bytes=<n>]``: committed
    records as their exact on-disk bytes (binary-safe bulk read for data tools)."""

    name: ClassVar[str] = "FETCH"
    cid: str
    topic: str
    partition: int
    offset: int
    max_messages: int | None = None
    max_bytes: int | None = None
    raw: bool = False
    """Additive ``enc=raw``: the records follow the reply line as raw bytes (``size=<n>``)
    instead of base64 in it (``fetch_raw_reply``)."""


@dataclass(frozen=True, slots=True)
class ProduceBatch:
    """Additive: ``PRODUCE_BATCH <topic> <partition> [acks=..] [pid=<id> seq=<n>]
    data=<base64>`` (or ``enc=raw size=<n>``, the batch in the ``n`` bytes after the line):
    messages for one partition in one binary-safe request (docs/protocol.md, the batch
    layout in ``decode_batch``). ``keys`` and ``values`` are the messages in order (an empty
    key is no key); with ``pid``, ``seq`` numbers the first message and the others follow
    it. ``size`` is set (and ``keys``/``values`` empty) for a raw line whose body is still to
    come (``Codec.with_body`` fills them)."""

    name: ClassVar[str] = "PRODUCE_BATCH"
    cid: str
    topic: str
    partition: int
    keys: tuple[bytes, ...]
    values: tuple[bytes, ...]
    acks: str = "1"
    pid: str | None = None
    seq: int | None = None
    size: int | None = None


@dataclass(frozen=True, slots=True)
class Consume:
    """``CONSUME <topic> <partition> <offset> [max=<n>] [wait_ms=<ms>] [enc=b64] [detail=..]
    [headers=..]``."""

    name: ClassVar[str] = "CONSUME"
    cid: str
    topic: str
    partition: int
    offset: int
    max_messages: int | None = None
    wait_ms: int | None = None
    b64: bool = False
    detail: bool = False
    headers: bool = False
    """With ``detail``: each message also carries its producer timestamp and headers."""


@dataclass(frozen=True, slots=True)
class Join:
    """``JOIN <group> <topic> <consumer_id> [assignor=..] [session_timeout_ms=<ms>]``."""

    name: ClassVar[str] = "JOIN"
    cid: str
    group: str
    topic: str
    member_id: str
    assignor: str | None = None
    session_timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class GroupHeartbeat:
    """Additive (KIP-848 consumer groups): ``GROUP_HEARTBEAT <group> <member_id>
    <member_epoch|leave|leave_static> [topics=<t>,..] [regex=<re>] [enc=b64]
    [assignor=uniform|range] [rebalance_timeout_ms=<ms>] [instance=<id>]
    [owned=<t>:<p>,..]``. ``member_epoch`` is -1 for ``leave`` and -2 for
    ``leave_static``; None fields were not sent."""

    name: ClassVar[str] = "GROUP_HEARTBEAT"
    cid: str
    group: str
    member_id: str
    member_epoch: int
    topics: tuple[str, ...] | None = None
    regex: str | None = None
    assignor: str | None = None
    rebalance_timeout_ms: int | None = None
    instance: str | None = None
    owned: tuple[tuple[str, int], ...] | None = None


@dataclass(frozen=True, slots=True)
class Sync:
    """``SYNC <group> <topic> <consumer_id> <generation>``."""

    name: ClassVar[str] = "SYNC"
    cid: str
    group: str
    topic: str
    member_id: str
    generation: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """``HEARTBEAT <group> <topic> <consumer_id> <generation>``."""

    name: ClassVar[str] = "HEARTBEAT"
    cid: str
    group: str
    topic: str
    member_id: str
    generation: int


@dataclass(frozen=True, slots=True)
class Leave:
    """``LEAVE <group> <topic> <consumer_id> <generation>``."""

    name: ClassVar[str] = "LEAVE"
    cid: str
    group: str
    topic: str
    member_id: str
    generation: int


@dataclass(frozen=True, slots=True)
class Commit:
    """``COMMIT <group> <topic> <consumer_id> <generation> <partition> <offset>``."""

    name: ClassVar[str] = "COMMIT"
    cid: str
    group: str
    topic: str
    member_id: str
    generation: int
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Offset:
    """``OFFSET <group> <topic> <partition>``."""

    name: ClassVar[str] = "OFFSET"
    cid: str
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class ReplicaFetch:
    """``REPLICA_FETCH <topic> <partition> <replica_id> <offset>`` (replica range: handler)."""

    name: ClassVar[str] = "REPLICA_FETCH"
    cid: str
    topic: str
    partition: int
    replica_id: int
    offset: int


@dataclass(frozen=True, slots=True)
class SetPartitionRole:
    """``SET_PARTITION_ROLE <topic> <partition> <leader|follower>``."""

    name: ClassVar[str] = "SET_PARTITION_ROLE"
    cid: str
    topic: str
    partition: int
    role: str


@dataclass(frozen=True, slots=True)
class AdminCreateTopic:
    """Additive: ``ADMIN_CREATE_TOPIC <topic> <partitions> <replication_factor>`` + options."""

    name: ClassVar[str] = "ADMIN_CREATE_TOPIC"
    cid: str
    topic: str
    partitions: int
    replication_factor: int
    min_insync_replicas: int | None = None
    retention_ms: int | None = None
    retention_bytes: int | None = None
    settings: tuple[tuple[str, int | str], ...] = ()
    """The other settings given (``cleanup_policy``, ``min_compaction_lag_ms``,
    ``delete_retention_ms``, ``segment_bytes``, ``segment_ms``), sorted by name."""


@dataclass(frozen=True, slots=True)
class AdminDeleteTopic:
    """Additive: ``ADMIN_DELETE_TOPIC <topic>``."""

    name: ClassVar[str] = "ADMIN_DELETE_TOPIC"
    cid: str
    topic: str


@dataclass(frozen=True, slots=True)
class AdminAddPartitions:
    """Additive: ``ADMIN_ADD_PARTITIONS <topic> <new total partition count>``."""

    name: ClassVar[str] = "ADMIN_ADD_PARTITIONS"
    cid: str
    topic: str
    partitions: int


@dataclass(frozen=True, slots=True)
class AdminAlterTopic:
    """Additive: ``ADMIN_ALTER_TOPIC <topic> [retention_ms=<ms|none>]
    [retention_bytes=<n|none>]`` and the compaction and segment settings (docs/protocol.md). ``changes`` holds the settings given, sorted by name, each
    with its new value (None for ``none``: no limit); a setting left out keeps its value."""

    name: ClassVar[str] = "ADMIN_ALTER_TOPIC"
    cid: str
    topic: str
    changes: tuple[tuple[str, int | str | None], ...]


@dataclass(frozen=True, slots=True)
class Metadata:
    """Additive: ``METADATA [<topic>]``; ``topic`` is None for the topic list."""

    name: ClassVar[str] = "METADATA"
    cid: str
    topic: str | None = None


@dataclass(frozen=True, slots=True)
class Offsets:
    """Additive: ``OFFSETS <topic> <partition> [ts=<ms>]``."""

    name: ClassVar[str] = "OFFSETS"
    cid: str
    topic: str
    partition: int
    ts_ms: int | None = None


@dataclass(frozen=True, slots=True)
class DescribeGroup:
    """Additive: ``DESCRIBE_GROUP <group> <topic>``."""

    name: ClassVar[str] = "DESCRIBE_GROUP"
    cid: str
    group: str
    topic: str


@dataclass(frozen=True, slots=True)
class ListGroups:
    """Additive: ``LIST_GROUPS`` (no arguments)."""

    name: ClassVar[str] = "LIST_GROUPS"
    cid: str


@dataclass(frozen=True, slots=True)
class AdminDeleteGroup:
    """Additive: ``ADMIN_DELETE_GROUP <group> <topic>``."""

    name: ClassVar[str] = "ADMIN_DELETE_GROUP"
    cid: str
    group: str
    topic: str


@dataclass(frozen=True, slots=True)
class AdminResetOffsets:
    """Additive: ``ADMIN_RESET_OFFSETS <group> <topic> <earliest|latest|offset> [partition=<n>]``.

    ``target`` is the string ``"earliest"`` or ``"latest"``, or an offset (int).
    """

    name: ClassVar[str] = "ADMIN_RESET_OFFSETS"
    cid: str
    group: str
    topic: str
    target: str | int
    partition: int | None = None


@dataclass(frozen=True, slots=True)
class AdminCommit:
    """Additive: ``ADMIN_COMMIT <group> <topic> <partition> <offset>`` (commit by a non-member)."""

    name: ClassVar[str] = "ADMIN_COMMIT"
    cid: str
    group: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class ReplicaPull:
    """Additive (cluster): ``REPLICA_PULL <topic> <partition> <replica_id> <offset> <epoch>
    [wait_ms=<ms>] [max_bytes=<n>] [enc=b64|enc=raw]``: a follower's fetch. It reports
    that ``replica_id`` holds every offset before ``offset`` and asks for the records from
    ``offset`` on; ``epoch`` is the newest leader epoch the follower knows."""

    name: ClassVar[str] = "REPLICA_PULL"
    cid: str
    topic: str
    partition: int
    replica_id: int
    offset: int
    epoch: int
    wait_ms: int | None = None
    max_bytes: int | None = None
    raw: bool = False
    """Additive ``enc=raw``: the records follow the reply line as raw bytes (``size=<n>``)
    instead of base64 in it (``replica_pull_reply(..., raw=True)``)."""


@dataclass(frozen=True, slots=True)
class ReplicaEpoch:
    """Additive (cluster): ``REPLICA_EPOCH <topic> <partition> <replica_id> <epoch>
    [last_epoch=<n>]``: a replica tells another the newest epoch it knows and asks for its
    role, epoch and where ``last_epoch`` ends in its log (OffsetsForLeaderEpoch)."""

    name: ClassVar[str] = "REPLICA_EPOCH"
    cid: str
    topic: str
    partition: int
    replica_id: int
    epoch: int
    last_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class Auth:
    """Additive (security): ``AUTH <user> <token>``. Reply: ``V1|<cid>|OK`` or
    ``ERR|UNAUTHENTICATED``. ``repr`` never shows the token."""

    name: ClassVar[str] = "AUTH"
    cid: str
    user: str
    token: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """Additive (cluster and operators): ``REPLICA_STATUS <topic> <partition>``."""

    name: ClassVar[str] = "REPLICA_STATUS"
    cid: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class AdminRegisterBroker:
    """Additive (the seed broker's control plane): ``ADMIN_REGISTER_BROKER <broker_id>
    <host> <port> [epoch]``."""

    name: ClassVar[str] = "ADMIN_REGISTER_BROKER"
    cid: str
    broker_id: int
    host: str
    port: int
    epoch: int | None = None


@dataclass(frozen=True, slots=True)
class AdminBrokerHeartbeat:
    """Additive (the seed broker's control plane): ``ADMIN_BROKER_HEARTBEAT <broker_id>``."""

    name: ClassVar[str] = "ADMIN_BROKER_HEARTBEAT"
    cid: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class AdminSetPartitionLeader:
    """Additive (the seed broker's control plane): ``ADMIN_SET_PARTITION_LEADER <topic>
    <partition> <leader_id> <isr_csv>``; ``isr`` holds the ids of ``isr_csv`` in order
    (comma-separated, empty entries ignored)."""

    name: ClassVar[str] = "ADMIN_SET_PARTITION_LEADER"
    cid: str
    topic: str
    partition: int
    leader: int
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AdminGetMetadata:
    """Additive (the seed broker's control plane): ``ADMIN_GET_METADATA`` (no arguments)."""

    name: ClassVar[str] = "ADMIN_GET_METADATA"
    cid: str


Command: TypeAlias = (
    Ping
    | Produce
    | Consume
    | Join
    | GroupHeartbeat
    | Sync
    | Heartbeat
    | Leave
    | Commit
    | Offset
    | ReplicaFetch
    | SetPartitionRole
    | AdminCreateTopic
    | AdminDeleteTopic
    | AdminAddPartitions
    | AdminAlterTopic
    | Metadata
    | Offsets
    | DescribeGroup
    | ListGroups
    | AdminDeleteGroup
    | AdminResetOffsets
    | AdminCommit
    | ReplicaPull
    | ReplicaEpoch
    | ReplicaStatus
    | Fetch
    | ProduceBatch
    | AdminRegisterBroker
    | AdminBrokerHeartbeat
    | AdminSetPartitionLeader
    | AdminGetMetadata
)
"""Any parsed request (a runtime union: ``isinstance(x, Command)`` works)."""

COMMANDS: dict[str, type[Any]] = {
    cls.name: cls
    for cls in (
        Ping,
        Produce,
        Consume,
        Join,
        Sync,
        Heartbeat,
        Leave,
        Commit,
        Offset,
        ReplicaFetch,
        SetPartitionRole,
        AdminCreateTopic,
        AdminDeleteTopic,
        AdminAddPartitions,
        AdminAlterTopic,
        Metadata,
        Offsets,
        DescribeGroup,
        ListGroups,
        AdminDeleteGroup,
        AdminResetOffsets,
        AdminCommit,
        GroupHeartbeat,
    )
}
"""Wire command name -> command class for the commands of a single broker: the spec's
table and the additive admin commands."""

CLUSTER_COMMANDS: dict[str, type[Any]] = {
    cls.name: cls for cls in (ReplicaPull, ReplicaEpoch, ReplicaStatus)
}
"""The additive commands of a multi-broker cluster (broker to broker, plus REPLICA_STATUS
for operators), kept apart from ``COMMANDS`` so that the single-broker set stays as it is."""

DATA_COMMANDS: dict[str, type[Any]] = {cls.name: cls for cls in (Fetch, ProduceBatch)}
"""Additive commands for data tools (the Spark source and sink): bulk binary-safe reads and
writes."""

CONTROL_COMMANDS: dict[str, type[Any]] = {
    cls.name: cls
    for cls in (AdminRegisterBroker, AdminBrokerHeartbeat, AdminSetPartitionLeader,
                AdminGetMetadata)
}
"""The additive admin commands of the seed broker's control plane (its SDK sends them;
docs/cluster.md): answered by every broker, from etcd or from a local metadata file."""

ALL_COMMANDS: dict[str, type[Any]] = {**COMMANDS, **CLUSTER_COMMANDS, **DATA_COMMANDS,
                                      **CONTROL_COMMANDS}
"""Every command of the data plane (``SECURITY_COMMANDS`` are parsed too)."""

@dataclass(frozen=True, slots=True)
class AdminAclAdd:
    """Additive: ``ADMIN_ACL_ADD <principal> <resource_type> <name> <operation>
    [pattern=literal|prefixed] [permission=allow|deny]`` (docs/security.md)."""

    name: ClassVar[str] = "ADMIN_ACL_ADD"
    cid: str
    binding: Any  # access.AclBinding, validated by the codec


@dataclass(frozen=True, slots=True)
class AdminAclRemove:
    """Additive: ``ADMIN_ACL_REMOVE [principal=] [type=] [name=] [pattern=] [operation=]
    [permission=]`` (at least one): every binding that matches all the given fields."""

    name: ClassVar[str] = "ADMIN_ACL_REMOVE"
    cid: str
    filter: Any  # access.authorizer.AclFilter


@dataclass(frozen=True, slots=True)
class AdminAclList:
    """Additive: ``ADMIN_ACL_LIST [principal=] [type=] [name=] [pattern=] [operation=]
    [permission=]``."""

    name: ClassVar[str] = "ADMIN_ACL_LIST"
    cid: str
    filter: Any  # access.authorizer.AclFilter


SECURITY_COMMANDS: dict[str, type[Any]] = {
    cls.name: cls for cls in (Auth, AdminAclAdd, AdminAclRemove, AdminAclList)
}
"""The additive ``AUTH`` command (``broker/auth.py``) and the ACL commands
(docs/security.md), kept apart from the sets above."""
