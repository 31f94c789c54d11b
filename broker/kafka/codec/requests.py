"""Kafka requests: one frozen dataclass per API (the shapes ``parse_request`` builds).

Owns: ``ApiKey``, the request dataclasses, and the two results that are not requests:
``UnsupportedRequest`` (an api key or version outside the codec's tables,
``apis.SUPPORTED_VERSIONS``) and ``MalformedRequest`` (a truncated or malformed frame).
The wire layouts of every version are the tables of ``apis`` (one per API), walked by
``schema``; ``wire.parse_request`` returns one of the three kinds and never raises on bad
bytes.

A dataclass is version-free: a field a version does not carry holds Kafka's default for
it, so a handler reads one shape whatever the version: OffsetCommit v0
``generation_id = -1, member_id = ""``, ``commit_timestamp = -1`` outside v1,
``retention_time_ms = -1`` outside v2-v4; Fetch ``max_bytes = 0x7fffffff`` below v3;
ListOffsets ``max_num_offsets = 1`` above v0; JoinGroup v0 ``rebalance_timeout_ms =
session_timeout_ms`` (what Kafka uses for v0, §3.9). Every request keeps its ``header``
(version, correlation id, client id). Produce keeps each partition's records as bytes:
decoding them is per partition, so a corrupt set fails its partition (error 2), not the
request.

Must not import: Twisted, sockets, files, the core, the store, ``responses``, ``messages``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from broker.kafka.codec.framing import RequestHeader

__all__ = [
    "ApiKey",
    "UnsupportedRequest",
    "MalformedRequest",
    "ProduceRequest", "ProduceTopic", "ProducePartition",
    "FetchRequest", "FetchTopic", "FetchPartition", "ForgottenTopic",
    "ListOffsetsRequest", "ListOffsetsTopic", "ListOffsetsPartition",
    "MetadataRequest", "MetadataRequestTopic",
    "OffsetCommitRequest", "OffsetCommitTopic", "OffsetCommitPartition",
    "OffsetFetchRequest", "OffsetFetchTopic", "OffsetFetchGroup",
    "FindCoordinatorRequest",
    "SaslHandshakeRequest",
    "JoinGroupRequest", "JoinGroupProtocol",
    "HeartbeatRequest",
    "LeaveGroupRequest", "LeaveGroupMember",
    "SyncGroupRequest", "SyncGroupAssignment",
    "DescribeGroupsRequest",
    "ListGroupsRequest",
    "ApiVersionsRequest",
    "InitProducerIdRequest",
    "SaslAuthenticateRequest",
]


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69


@dataclass(frozen=True)
class UnsupportedRequest:
    """A whole frame whose api key or version is outside the codec's tables (ApiVersions
    excepted: any version parses, see ``ApiVersionsRequest``). There is no layout to
    answer in: the connection is closed (kafka-wire-notes §2.2)."""

    header: RequestHeader


@dataclass(frozen=True)
class MalformedRequest:
    """A frame that does not parse: too short for a header (``header`` is None), or a body
    that is truncated, has a bad length, bad UTF-8 or trailing bytes. The reason is for the
    log; the connection should be closed (there is no per-request error shape to answer)."""

    header: RequestHeader | None
    reason: str


# -- Produce (0) -----------------------------------------------------------------------

@dataclass(frozen=True)
class ProducePartition:
    index: int
    records: bytes
    """The partition's records (a MessageSet, or record batches v2 from Produce v3),
    undecoded; a null set arrives as ``b""``."""


@dataclass(frozen=True)
class ProduceTopic:
    name: str
    partitions: tuple[ProducePartition, ...]


@dataclass(frozen=True)
class ProduceRequest:
    header: RequestHeader
    acks: int
    timeout_ms: int
    topics: tuple[ProduceTopic, ...]
    transactional_id: str | None = None
    """v3+: set only by a transactional producer (refused: no transactions here)."""


# -- Fetch (1) -------------------------------------------------------------------------

@dataclass(frozen=True)
class FetchPartition:
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    """v9+: the leader epoch the client knows (-1: none)."""
    last_fetched_epoch: int = -1
    """v12+: the epoch of the last batch fetched (-1: none)."""
    log_start_offset: int = -1
    """v5+: a follower's log start offset (-1 from consumers)."""


@dataclass(frozen=True)
class FetchTopic:
    topic: str
    partitions: tuple[FetchPartition, ...]


@dataclass(frozen=True)
class ForgottenTopic:
    """v7+: partitions an incremental fetch session stops fetching."""

    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class FetchRequest:
    header: RequestHeader
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    """v3's response bound (KIP-74); ``0x7fffffff`` (no bound) below v3."""
    topics: tuple[FetchTopic, ...]
    isolation_level: int = 0
    """v4+: 0 read_uncommitted, 1 read_committed."""
    session_id: int = 0
    """v7+ (KIP-227): 0 with epoch -1 is a full fetch without a session."""
    session_epoch: int = -1
    forgotten_topics: tuple[ForgottenTopic, ...] = ()
    rack_id: str = ""
    """v11+: the consumer's rack (KIP-392)."""
    cluster_id: str | None = None
    """v12+, tagged: the cluster the fetcher expects (followers only)."""


# -- ListOffsets (2) -------------------------------------------------------------------

@dataclass(frozen=True)
class ListOffsetsPartition:
    partition_index: int
    timestamp: int
    """-1 latest, -2 earliest, -3 max timestamp (v7+), else a time in ms."""
    max_num_offsets: int = 1
    """v0 only; 1 in v1+."""
    current_leader_epoch: int = -1
    """v4+."""


@dataclass(frozen=True)
class ListOffsetsTopic:
    name: str
    partitions: tuple[ListOffsetsPartition, ...]


@dataclass(frozen=True)
class ListOffsetsRequest:
    header: RequestHeader
    replica_id: int
    topics: tuple[ListOffsetsTopic, ...]
    isolation_level: int = 0
    """v2+: 1 (read_committed) reads up to the last stable offset."""


# -- Metadata (3) ----------------------------------------------------------------------

@dataclass(frozen=True)
class MetadataRequestTopic:
    """A requested topic on the wire: by name, or (v10+) by id with a null name."""

    topic_id: bytes
    name: str | None


@dataclass(frozen=True)
class MetadataRequest:
    header: RequestHeader
    topics: tuple[str, ...] | None
    """As sent: v0 ``()`` means all topics; v1+ ``None`` means all, ``()`` none."""
    allow_auto_topic_creation: bool = True
    """v4+: False keeps Metadata from creating a requested topic."""
    include_cluster_authorized_operations: bool = False
    include_topic_authorized_operations: bool = False
    topic_ids: tuple[bytes, ...] = ()
    """v10+: topics asked for by id alone (a null name)."""

    @property
    def all_topics(self) -> bool:
        """Whether the client asks for every topic (§3.2's version-dependent rule)."""
        return self.topics is None or (self.header.api_version == 0 and not self.topics
                                       and not self.topic_ids)


# -- OffsetCommit (8) ------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetCommitPartition:
    partition_index: int
    committed_offset: int
    """The next offset to read."""
    commit_timestamp: int
    """v1 only; -1 (= now) otherwise."""
    committed_metadata: str | None
    committed_leader_epoch: int = -1
    """v6+."""


@dataclass(frozen=True)
class OffsetCommitTopic:
    name: str
    partitions: tuple[OffsetCommitPartition, ...]


@dataclass(frozen=True)
class OffsetCommitRequest:
    header: RequestHeader
    group_id: str
    generation_id: int
    """-1 in v0 and in "simple" commits."""
    member_id: str
    """"" in v0 and in "simple" commits."""
    retention_time_ms: int
    """v2-v4 only; -1 (= broker default) otherwise."""
    topics: tuple[OffsetCommitTopic, ...]
    group_instance_id: str | None = None
    """v7+: the static member's id (KIP-345)."""


# -- OffsetFetch (9) -------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetFetchTopic:
    name: str
    partition_indexes: tuple[int, ...]


@dataclass(frozen=True)
class OffsetFetchGroup:
    """v8+: one group of a batched OffsetFetch."""

    group_id: str
    topics: tuple[OffsetFetchTopic, ...] | None
    """None: every partition the group has committed."""
    member_id: str | None = None
    """v9+ (the new consumer protocol's member; unused by classic groups)."""
    member_epoch: int = -1


@dataclass(frozen=True)
class OffsetFetchRequest:
    header: RequestHeader
    group_id: str
    """v0-v7 (from v8 the groups are in ``groups``)."""
    topics: tuple[OffsetFetchTopic, ...] | None
    """v2+: None means every partition the group has committed."""
    require_stable: bool = False
    """v7+."""
    groups: tuple[OffsetFetchGroup, ...] = ()
    """v8+: the groups asked for, each with its topics (KIP-709)."""

    def asked(self) -> tuple[OffsetFetchGroup, ...]:
        """The groups asked for, whatever the version (one below v8)."""
        if self.header.api_version >= 8:
            return self.groups
        return (OffsetFetchGroup(self.group_id, self.topics),)


# -- FindCoordinator (10) --------------------------------------------------------------

@dataclass(frozen=True)
class FindCoordinatorRequest:
    header: RequestHeader
    key: str
    """The group id (v0-v3)."""
    key_type: int = 0
    """v1+: 0 group, 1 transaction."""
    coordinator_keys: tuple[str, ...] = ()
    """v4+: the keys, batched (``key`` is then "")."""


# -- SaslHandshake (17) ----------------------------------------------------------------

@dataclass(frozen=True)
class SaslHandshakeRequest:
    header: RequestHeader
    mechanism: str
    """The SASL mechanism the client wants (``PLAIN`` is the one served). After a v0
    handshake the client's next frame is the raw SASL token, not a Kafka request."""


# -- JoinGroup (11) --------------------------------------------------------------------

@dataclass(frozen=True)
class JoinGroupProtocol:
    name: str
    metadata: bytes
    """For protocol type "consumer": a ConsumerProtocolSubscription (§3.9), opaque here."""


@dataclass(frozen=True)
class JoinGroupRequest:
    header: RequestHeader
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    """v1+; the session timeout in v0 (what Kafka uses)."""
    member_id: str
    protocol_type: str
    protocols: tuple[JoinGroupProtocol, ...]
    group_instance_id: str | None = None
    """v5+: the static member's id (KIP-345)."""
    reason: str | None = None
    """v8+."""


# -- Heartbeat (12), LeaveGroup (13), SyncGroup (14) -----------------------------------

@dataclass(frozen=True)
class HeartbeatRequest:
    header: RequestHeader
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    """v3+."""


@dataclass(frozen=True)
class LeaveGroupMember:
    """v3+: one member leaving, by member id or (static members) group instance id."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None
    """v5+."""


@dataclass(frozen=True)
class LeaveGroupRequest:
    header: RequestHeader
    group_id: str
    member_id: str
    """v0-v2: the one member leaving ("" from v3, which lists ``members``)."""
    members: tuple[LeaveGroupMember, ...] = ()
    """v3+: the members leaving, batched (KIP-345)."""

    def leaving(self) -> tuple[LeaveGroupMember, ...]:
        """The members leaving, whatever the version."""
        if self.header.api_version >= 3:
            return self.members
        return (LeaveGroupMember(self.member_id),)


@dataclass(frozen=True)
class SyncGroupAssignment:
    member_id: str
    assignment: bytes
    """For protocol type "consumer": a ConsumerProtocolAssignment (§3.10), opaque here."""


@dataclass(frozen=True)
class SyncGroupRequest:
    header: RequestHeader
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[SyncGroupAssignment, ...]
    """The leader's: one per member; empty from followers."""
    group_instance_id: str | None = None
    """v3+."""
    protocol_type: str | None = None
    """v5+: checked against the group's when given."""
    protocol_name: str | None = None


# -- DescribeGroups (15), ListGroups (16), ApiVersions (18) ----------------------------

@dataclass(frozen=True)
class DescribeGroupsRequest:
    header: RequestHeader
    groups: tuple[str, ...]
    include_authorized_operations: bool = False
    """v3+."""


@dataclass(frozen=True)
class ListGroupsRequest:
    header: RequestHeader
    states_filter: tuple[str, ...] = ()
    """v4+: only groups in these states (none: all)."""
    types_filter: tuple[str, ...] = ()
    """v5+: only groups of these types ("classic", "consumer"; none: all)."""


API_VERSIONS_MAX = 3
"""The highest ApiVersions version the codec reads (its table's top)."""


@dataclass(frozen=True)
class ApiVersionsRequest:
    """ApiVersions at any version. Versions up to ``API_VERSIONS_MAX`` are read and
    answered in their own layout; a higher one is not read (its body may be anything) and
    is answered with error 35 in the v0 layout, so the client retries lower (§3.1, what
    Kafka does)."""

    header: RequestHeader
    client_software_name: str = ""
    """v3+."""
    client_software_version: str = ""

    @property
    def supported(self) -> bool:
        """False above ``API_VERSIONS_MAX``: the reply is error 35 in the v0 layout."""
        return 0 <= self.header.api_version <= API_VERSIONS_MAX


@dataclass(frozen=True)
class SaslAuthenticateRequest:
    """SaslAuthenticate (36): the SASL token inside a Kafka request (after SaslHandshake
    v1), instead of the raw frame of v0 (KIP-152)."""

    header: RequestHeader
    auth_bytes: bytes


# -- InitProducerId (22) ---------------------------------------------------------------

@dataclass(frozen=True)
class InitProducerIdRequest:
    header: RequestHeader
    transactional_id: str | None
    """None for an idempotent (non-transactional) producer."""
    transaction_timeout_ms: int
    producer_id: int = -1
    """v3+: the producer's current id when it bumps its epoch (-1: a new producer)."""
    producer_epoch: int = -1
