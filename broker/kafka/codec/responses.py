"""Kafka responses: one frozen dataclass per API (the shapes ``encode_response`` writes).

Owns: the response dataclasses. A dataclass is version-free: ``wire.encode_response``
writes the fields the request's version carries (the tables of ``apis``) and leaves the
others out (``throttle_time_ms`` below Produce v1 / Fetch v1, ``log_append_time_ms`` below
Produce v2, ``rack``/``controller_id``/``is_internal`` below Metadata v1, ``cluster_id``
below v2, ...). New fields default to what Kafka writes when there is nothing to say.

Fetch partitions carry ``Record``s or an encoded set: ``Record``s are written as an
uncompressed MessageSet of **magic 0 for Fetch v0-v1 and magic 1 for v2-v3** (§3.4: a 0.9
client cannot parse magic 1), ``fetch_magic``; bytes are written as they are. Which records
fit the size limits is the handler's choice.

ListOffsets: v0 writes ``old_style_offsets`` when given, else ``[offset]`` (``[]`` for
offset -1); v1+ writes ``timestamp`` and ``offset``.

Must not import: Twisted, sockets, files, the core, the store.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.kafka.codec.messages import Record

__all__ = [
    "ApiVersionRange", "ApiVersionsResponse", "SupportedFeature", "FinalizedFeature",
    "MetadataBroker", "MetadataPartition", "MetadataTopic", "MetadataResponse",
    "ProducePartitionResponse", "ProduceTopicResponse", "ProduceResponse", "RecordError",
    "FetchPartitionResponse", "FetchTopicResponse", "FetchResponse", "fetch_magic",
    "AbortedTransaction", "EpochEndOffset", "LeaderIdAndEpoch", "SnapshotId",
    "ListOffsetsPartitionResponse", "ListOffsetsTopicResponse", "ListOffsetsResponse",
    "OffsetCommitPartitionResponse", "OffsetCommitTopicResponse", "OffsetCommitResponse",
    "OffsetFetchPartitionResponse", "OffsetFetchTopicResponse", "OffsetFetchResponse",
    "FindCoordinatorResponse", "Coordinator", "SaslHandshakeResponse",
    "JoinGroupMember", "JoinGroupResponse",
    "SyncGroupResponse", "HeartbeatResponse", "LeaveGroupResponse", "LeaveGroupMemberResponse",
    "OffsetFetchGroupResponse",
    "DescribedGroupMember", "DescribedGroup", "DescribeGroupsResponse",
    "ListedGroup", "ListGroupsResponse",
    "InitProducerIdResponse", "SaslAuthenticateResponse",
    "NO_AUTHORIZED_OPERATIONS",
    "Response",
]

LARGE_CHUNK = 16 << 10
"""A byte string at least this long stays its own chunk in ``wire.encode_response_chunks``."""

NO_AUTHORIZED_OPERATIONS = -2147483648
"""Kafka's "authorized operations not asked for" (INT32 min)."""


def fetch_magic(version: int) -> int:
    """The message format of a Fetch reply: magic 0 for v0-v1 (a 0.9 client cannot parse
    magic 1), magic 1 for v2-v3, record batches (magic 2) from v4."""
    return 0 if version <= 1 else 1 if version <= 3 else 2


# -- ApiVersions (18) ------------------------------------------------------------------

@dataclass(frozen=True)
class ApiVersionRange:
    api_key: int
    min_version: int
    max_version: int


@dataclass(frozen=True)
class ApiVersionsResponse:
    """Written in the request's layout up to v3; error 35 for a higher version, in the v0
    layout (§3.1). Its response header is always v0 (KIP-511)."""

    error_code: int
    api_keys: tuple[ApiVersionRange, ...]
    throttle_time_ms: int = 0
    supported_features: tuple[SupportedFeature, ...] = ()
    """v3+, tagged (KIP-584): none here."""
    finalized_features_epoch: int = -1
    finalized_features: tuple[FinalizedFeature, ...] = ()
    zk_migration_ready: bool = False


@dataclass(frozen=True)
class SupportedFeature:
    name: str
    min_version: int
    max_version: int


@dataclass(frozen=True)
class FinalizedFeature:
    name: str
    max_version_level: int
    min_version_level: int


# -- Metadata (3) ----------------------------------------------------------------------

@dataclass(frozen=True)
class MetadataBroker:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class MetadataPartition:
    error_code: int
    partition_index: int
    leader_id: int
    replica_nodes: tuple[int, ...]
    isr_nodes: tuple[int, ...]
    leader_epoch: int = -1
    """v7+."""
    offline_replicas: tuple[int, ...] = ()
    """v5+."""


@dataclass(frozen=True)
class MetadataTopic:
    error_code: int
    name: str
    partitions: tuple[MetadataPartition, ...]
    is_internal: bool = False
    topic_id: bytes = bytes(16)
    """v10+: the topic's UUID (all zeroes: none)."""
    topic_authorized_operations: int = NO_AUTHORIZED_OPERATIONS
    """v8+."""


@dataclass(frozen=True)
class MetadataResponse:
    brokers: tuple[MetadataBroker, ...]
    topics: tuple[MetadataTopic, ...]
    controller_id: int = 0
    cluster_id: str | None = None
    throttle_time_ms: int = 0
    cluster_authorized_operations: int = NO_AUTHORIZED_OPERATIONS
    """v8-v10."""


# -- Produce (0) -----------------------------------------------------------------------

@dataclass(frozen=True)
class ProducePartitionResponse:
    index: int
    error_code: int
    base_offset: int
    """Offset of the first message appended; -1 on error."""
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    """v5+."""
    record_errors: tuple[RecordError, ...] = ()
    """v8+: the batch's records that made it fail (KIP-467)."""
    error_message: str | None = None
    """v8+."""


@dataclass(frozen=True)
class RecordError:
    batch_index: int
    batch_index_error_message: str | None = None


@dataclass(frozen=True)
class ProduceTopicResponse:
    name: str
    partitions: tuple[ProducePartitionResponse, ...]


@dataclass(frozen=True)
class ProduceResponse:
    topics: tuple[ProduceTopicResponse, ...]
    throttle_time_ms: int = 0


# -- Fetch (1) -------------------------------------------------------------------------

@dataclass(frozen=True)
class FetchPartitionResponse:
    partition_index: int
    error_code: int
    high_watermark: int
    """Kafka's exclusive HW: the next offset to be committed (Skerry hw + 1)."""
    records: tuple[Record, ...] | bytes | None = ()
    """The records, or a set already encoded in the version's magic (``fetch_magic``),
    written as is (a handler that builds sets in bulk); None is written as null."""
    last_stable_offset: int = -1
    """v4+."""
    log_start_offset: int = -1
    """v5+."""
    aborted_transactions: tuple[AbortedTransaction, ...] | None = None
    """v4+ (null: none)."""
    preferred_read_replica: int = -1
    """v11+ (KIP-392; -1: read from the leader)."""
    diverging_epoch: EpochEndOffset | None = None
    """v12+, tagged."""
    current_leader: LeaderIdAndEpoch | None = None
    """v12+, tagged."""
    snapshot_id: SnapshotId | None = None
    """v12+, tagged."""


@dataclass(frozen=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int


@dataclass(frozen=True)
class EpochEndOffset:
    epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True)
class LeaderIdAndEpoch:
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True)
class SnapshotId:
    end_offset: int = -1
    epoch: int = -1


@dataclass(frozen=True)
class FetchTopicResponse:
    topic: str
    partitions: tuple[FetchPartitionResponse, ...]


@dataclass(frozen=True)
class FetchResponse:
    topics: tuple[FetchTopicResponse, ...]
    throttle_time_ms: int = 0
    error_code: int = 0
    """v7+: the fetch session's error."""
    session_id: int = 0
    """v7+."""


# -- ListOffsets (2) -------------------------------------------------------------------

@dataclass(frozen=True)
class ListOffsetsPartitionResponse:
    partition_index: int
    error_code: int
    offset: int = -1
    timestamp: int = -1
    """v1 only: the found message's timestamp; -1 for latest/earliest or none found."""
    old_style_offsets: tuple[int, ...] | None = None
    """v0 only; None means ``[offset]`` (``[]`` when offset is -1)."""
    leader_epoch: int = -1
    """v4+."""


@dataclass(frozen=True)
class ListOffsetsTopicResponse:
    name: str
    partitions: tuple[ListOffsetsPartitionResponse, ...]


@dataclass(frozen=True)
class ListOffsetsResponse:
    topics: tuple[ListOffsetsTopicResponse, ...]
    throttle_time_ms: int = 0


# -- OffsetCommit (8), OffsetFetch (9) -------------------------------------------------

@dataclass(frozen=True)
class OffsetCommitPartitionResponse:
    partition_index: int
    error_code: int


@dataclass(frozen=True)
class OffsetCommitTopicResponse:
    name: str
    partitions: tuple[OffsetCommitPartitionResponse, ...]


@dataclass(frozen=True)
class OffsetCommitResponse:
    topics: tuple[OffsetCommitTopicResponse, ...]
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class OffsetFetchPartitionResponse:
    partition_index: int
    committed_offset: int
    """-1 when nothing is committed (that is what makes clients apply auto.offset.reset)."""
    metadata: str | None = ""
    error_code: int = 0
    committed_leader_epoch: int = -1
    """v5+."""


@dataclass(frozen=True)
class OffsetFetchTopicResponse:
    name: str
    partitions: tuple[OffsetFetchPartitionResponse, ...]


@dataclass(frozen=True)
class OffsetFetchResponse:
    topics: tuple[OffsetFetchTopicResponse, ...]
    """v0-v7."""
    throttle_time_ms: int = 0
    error_code: int = 0
    """v2-v7: the group's error (a coordinator error is no longer per partition)."""
    groups: tuple[OffsetFetchGroupResponse, ...] = ()
    """v8+: one per group asked for."""


@dataclass(frozen=True)
class OffsetFetchGroupResponse:
    group_id: str
    topics: tuple[OffsetFetchTopicResponse, ...]
    error_code: int = 0


# -- FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14)

@dataclass(frozen=True)
class FindCoordinatorResponse:
    error_code: int
    """v0-v3 (v4+: per key in ``coordinators``)."""
    node_id: int
    host: str
    port: int
    throttle_time_ms: int = 0
    error_message: str | None = None
    coordinators: tuple[Coordinator, ...] = ()
    """v4+: one per key asked for (KIP-699)."""


@dataclass(frozen=True)
class Coordinator:
    key: str
    node_id: int
    host: str
    port: int
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True)
class SaslHandshakeResponse:
    error_code: int
    mechanisms: tuple[str, ...]
    """The mechanisms the broker enables (``("PLAIN",)``)."""


@dataclass(frozen=True)
class JoinGroupMember:
    member_id: str
    metadata: bytes
    group_instance_id: str | None = None
    """v5+."""


@dataclass(frozen=True)
class JoinGroupResponse:
    error_code: int
    generation_id: int
    protocol_name: str
    leader: str
    member_id: str
    members: tuple[JoinGroupMember, ...] = ()
    """Filled in the leader's response only."""
    throttle_time_ms: int = 0
    protocol_type: str | None = None
    """v7+."""
    skip_assignment: bool = False
    """v9+."""


@dataclass(frozen=True)
class SyncGroupResponse:
    error_code: int
    assignment: bytes = b""
    throttle_time_ms: int = 0
    protocol_type: str | None = None
    """v5+."""
    protocol_name: str | None = None


@dataclass(frozen=True)
class HeartbeatResponse:
    error_code: int
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class LeaveGroupResponse:
    error_code: int
    throttle_time_ms: int = 0
    members: tuple[LeaveGroupMemberResponse, ...] = ()
    """v3+: each member's outcome."""


@dataclass(frozen=True)
class LeaveGroupMemberResponse:
    member_id: str
    group_instance_id: str | None
    error_code: int


# -- DescribeGroups (15), ListGroups (16) ----------------------------------------------

@dataclass(frozen=True)
class DescribedGroupMember:
    member_id: str
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes
    group_instance_id: str | None = None
    """v4+."""


@dataclass(frozen=True)
class DescribedGroup:
    error_code: int
    group_id: str
    state: str
    """``Dead``, ``Empty``, ``PreparingRebalance``, ``AwaitingSync`` or ``Stable``."""
    protocol_type: str
    protocol: str
    members: tuple[DescribedGroupMember, ...] = ()
    authorized_operations: int = NO_AUTHORIZED_OPERATIONS
    """v3+."""
    error_message: str | None = None
    """v6+ (KIP-1043)."""


@dataclass(frozen=True)
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...]
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str = ""
    """v4+."""
    group_type: str = "classic"
    """v5+."""


@dataclass(frozen=True)
class ListGroupsResponse:
    error_code: int
    groups: tuple[ListedGroup, ...] = ()
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class SaslAuthenticateResponse:
    error_code: int
    error_message: str | None = None
    auth_bytes: bytes = b""
    session_lifetime_ms: int = 0
    """v1+: 0, the session does not expire."""


# -- InitProducerId (22) ---------------------------------------------------------------

@dataclass(frozen=True)
class InitProducerIdResponse:
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1
    throttle_time_ms: int = 0


Response = (
    ProduceResponse | FetchResponse | ListOffsetsResponse | MetadataResponse |
    OffsetCommitResponse | OffsetFetchResponse | FindCoordinatorResponse | JoinGroupResponse |
    HeartbeatResponse | LeaveGroupResponse | SyncGroupResponse | DescribeGroupsResponse |
    ListGroupsResponse | SaslHandshakeResponse | ApiVersionsResponse | InitProducerIdResponse |
    SaslAuthenticateResponse
)
