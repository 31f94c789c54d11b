"""Kafka requests: one frozen dataclass per API, and ``parse_request`` (frame -> request).

Owns: ``ApiKey``, ``SUPPORTED_VERSIONS`` (what the broker answers and advertises in
ApiVersions, kafka-wire-notes §1.1), the request dataclasses, and the two results that are
not requests: ``UnsupportedRequest`` (an api key or version outside the table: Kafka closes
the connection without a reply, §2.2) and ``MalformedRequest`` (a truncated or malformed
frame). ``parse_request`` returns one of the three kinds and never raises on bad bytes.

Fields a version does not carry get Kafka's own default for it, so a handler reads one
shape whatever the version: OffsetCommit v0 ``generation_id = -1, member_id = ""``,
``commit_timestamp = -1`` outside v1, ``retention_time_ms = -1`` outside v2; Fetch
``max_bytes = 0x7fffffff`` below v3; ListOffsets v1 ``max_num_offsets = 1``; JoinGroup v0
``rebalance_timeout_ms = session_timeout_ms`` (what Kafka uses for v0, §3.9). Every request
keeps its ``header`` (version, correlation id, client id). Produce keeps each partition's
MessageSet as bytes: decoding it is per partition (``messages.decode_message_set``), so a
corrupt set fails its partition (error 2), not the request.

ApiVersions at any version above 0 parses to ``ApiVersionsRequest`` without reading its
body (v3/v4 use a flexible header and body): §3.1 answers it with error 35 in the v0 layout.

Must not import: Twisted, sockets, files, the core, the store, ``responses``, ``messages``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from broker.kafka.codec.framing import RequestHeader, parse_header
from broker.kafka.codec.primitives import Malformed, Reader

__all__ = [
    "ApiKey",
    "SUPPORTED_VERSIONS",
    "UnsupportedRequest",
    "MalformedRequest",
    "ProduceRequest", "ProduceTopic", "ProducePartition",
    "FetchRequest", "FetchTopic", "FetchPartition",
    "ListOffsetsRequest", "ListOffsetsTopic", "ListOffsetsPartition",
    "MetadataRequest",
    "OffsetCommitRequest", "OffsetCommitTopic", "OffsetCommitPartition",
    "OffsetFetchRequest", "OffsetFetchTopic",
    "FindCoordinatorRequest",
    "SaslHandshakeRequest",
    "JoinGroupRequest", "JoinGroupProtocol",
    "HeartbeatRequest",
    "LeaveGroupRequest",
    "SyncGroupRequest", "SyncGroupAssignment",
    "DescribeGroupsRequest",
    "ListGroupsRequest",
    "ApiVersionsRequest",
    "Request",
    "ParseResult",
    "parse_request",
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


SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 2),
    ApiKey.FETCH: (0, 3),
    ApiKey.LIST_OFFSETS: (0, 1),
    ApiKey.METADATA: (0, 2),
    ApiKey.OFFSET_COMMIT: (0, 2),
    ApiKey.OFFSET_FETCH: (0, 1),
    ApiKey.FIND_COORDINATOR: (0, 0),
    ApiKey.JOIN_GROUP: (0, 1),
    ApiKey.HEARTBEAT: (0, 0),
    ApiKey.LEAVE_GROUP: (0, 0),
    ApiKey.SYNC_GROUP: (0, 0),
    ApiKey.DESCRIBE_GROUPS: (0, 0),
    ApiKey.LIST_GROUPS: (0, 0),
    ApiKey.SASL_HANDSHAKE: (0, 0),
    ApiKey.API_VERSIONS: (0, 0),
}
"""(min, max) version per API: the table of §1.1, exactly the list the real clients were
answered there (SaslHandshake v0: SASL PLAIN with raw tokens after it). Advertising Produce >= 3 or Fetch >= 4 would switch clients to
record batches (magic 2), which this codec does not speak."""


@dataclass(frozen=True)
class UnsupportedRequest:
    """A whole frame whose api key or version is outside ``SUPPORTED_VERSIONS`` (ApiVersions
    excepted). Kafka closes the connection without a reply (§2.2)."""

    header: RequestHeader


@dataclass(frozen=True)
class MalformedRequest:
    """A frame that does not parse: too short for a header (``header`` is None), or a body
    that is truncated, has a bad length, bad UTF-8 or trailing bytes. The reason is for the
    log; the connection should be closed (there is no per-request error shape to answer)."""

    header: RequestHeader | None
    reason: str


# -- Produce (0) v0-v2 -----------------------------------------------------------------

@dataclass(frozen=True)
class ProducePartition:
    index: int
    records: bytes
    """The partition's MessageSet (§4), undecoded; a null set arrives as ``b""``."""


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


def _produce(h: RequestHeader, r: Reader) -> ProduceRequest:
    def partition(r: Reader) -> ProducePartition:
        return ProducePartition(r.int32("partition index"), r.nullable_bytes("records") or b"")

    def topic(r: Reader) -> ProduceTopic:
        return ProduceTopic(r.string("topic name"), r.array(partition, "partition_data"))

    return ProduceRequest(h, r.int16("acks"), r.int32("timeout_ms"), r.array(topic, "topic_data"))


# -- Fetch (1) v0-v3 -------------------------------------------------------------------

@dataclass(frozen=True)
class FetchPartition:
    partition: int
    fetch_offset: int
    partition_max_bytes: int


@dataclass(frozen=True)
class FetchTopic:
    topic: str
    partitions: tuple[FetchPartition, ...]


@dataclass(frozen=True)
class FetchRequest:
    header: RequestHeader
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    """v3's response bound (KIP-74); ``0x7fffffff`` (no bound) below v3."""
    topics: tuple[FetchTopic, ...]


def _fetch(h: RequestHeader, r: Reader) -> FetchRequest:
    def partition(r: Reader) -> FetchPartition:
        return FetchPartition(r.int32("partition"), r.int64("fetch_offset"),
                              r.int32("partition_max_bytes"))

    def topic(r: Reader) -> FetchTopic:
        return FetchTopic(r.string("topic"), r.array(partition, "partitions"))

    replica_id, max_wait_ms, min_bytes = r.int32("replica_id"), r.int32("max_wait_ms"), r.int32("min_bytes")
    max_bytes = r.int32("max_bytes") if h.api_version >= 3 else 0x7FFFFFFF
    return FetchRequest(h, replica_id, max_wait_ms, min_bytes, max_bytes, r.array(topic, "topics"))


# -- ListOffsets (2) v0-v1 -------------------------------------------------------------

@dataclass(frozen=True)
class ListOffsetsPartition:
    partition_index: int
    timestamp: int
    """-1 latest, -2 earliest, else a time in ms."""
    max_num_offsets: int
    """v0 only; 1 in v1."""


@dataclass(frozen=True)
class ListOffsetsTopic:
    name: str
    partitions: tuple[ListOffsetsPartition, ...]


@dataclass(frozen=True)
class ListOffsetsRequest:
    header: RequestHeader
    replica_id: int
    topics: tuple[ListOffsetsTopic, ...]


def _list_offsets(h: RequestHeader, r: Reader) -> ListOffsetsRequest:
    v0 = h.api_version == 0

    def partition(r: Reader) -> ListOffsetsPartition:
        index, timestamp = r.int32("partition_index"), r.int64("timestamp")
        return ListOffsetsPartition(index, timestamp, r.int32("max_num_offsets") if v0 else 1)

    def topic(r: Reader) -> ListOffsetsTopic:
        return ListOffsetsTopic(r.string("topic name"), r.array(partition, "partitions"))

    return ListOffsetsRequest(h, r.int32("replica_id"), r.array(topic, "topics"))


# -- Metadata (3) v0-v2 ----------------------------------------------------------------

@dataclass(frozen=True)
class MetadataRequest:
    header: RequestHeader
    topics: tuple[str, ...] | None
    """As sent: v0 ``()`` means all topics; v1+ ``None`` means all, ``()`` none."""

    @property
    def all_topics(self) -> bool:
        """Whether the client asks for every topic (§3.2's version-dependent rule)."""
        return self.topics is None or (self.header.api_version == 0 and not self.topics)


def _metadata(h: RequestHeader, r: Reader) -> MetadataRequest:
    def name(r: Reader) -> str:
        return r.string("topic name")

    topics = r.array(name, "topics") if h.api_version == 0 else r.nullable_array(name, "topics")
    return MetadataRequest(h, topics)


# -- OffsetCommit (8) v0-v2 ------------------------------------------------------------

@dataclass(frozen=True)
class OffsetCommitPartition:
    partition_index: int
    committed_offset: int
    """The next offset to read."""
    commit_timestamp: int
    """v1 only; -1 (= now) otherwise."""
    committed_metadata: str | None


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
    """v2 only; -1 (= broker default) otherwise."""
    topics: tuple[OffsetCommitTopic, ...]


def _offset_commit(h: RequestHeader, r: Reader) -> OffsetCommitRequest:
    v = h.api_version

    def partition(r: Reader) -> OffsetCommitPartition:
        index, offset = r.int32("partition_index"), r.int64("committed_offset")
        timestamp = r.int64("commit_timestamp") if v == 1 else -1
        return OffsetCommitPartition(index, offset, timestamp,
                                     r.nullable_string("committed_metadata"))

    def topic(r: Reader) -> OffsetCommitTopic:
        return OffsetCommitTopic(r.string("topic name"), r.array(partition, "partitions"))

    group_id = r.string("group_id")
    generation_id, member_id = (r.int32("generation_id"), r.string("member_id")) if v >= 1 else (-1, "")
    retention = r.int64("retention_time_ms") if v == 2 else -1
    return OffsetCommitRequest(h, group_id, generation_id, member_id, retention,
                               r.array(topic, "topics"))


# -- OffsetFetch (9) v0-v1 -------------------------------------------------------------

@dataclass(frozen=True)
class OffsetFetchTopic:
    name: str
    partition_indexes: tuple[int, ...]


@dataclass(frozen=True)
class OffsetFetchRequest:
    header: RequestHeader
    group_id: str
    topics: tuple[OffsetFetchTopic, ...]


def _offset_fetch(h: RequestHeader, r: Reader) -> OffsetFetchRequest:
    def index(r: Reader) -> int:
        return r.int32("partition index")

    def topic(r: Reader) -> OffsetFetchTopic:
        return OffsetFetchTopic(r.string("topic name"), r.array(index, "partition_indexes"))

    return OffsetFetchRequest(h, r.string("group_id"), r.array(topic, "topics"))


# -- FindCoordinator (10) v0 -----------------------------------------------------------

@dataclass(frozen=True)
class FindCoordinatorRequest:
    header: RequestHeader
    key: str
    """The group id."""


def _find_coordinator(h: RequestHeader, r: Reader) -> FindCoordinatorRequest:
    return FindCoordinatorRequest(h, r.string("key"))


# -- SaslHandshake (17) v0 -------------------------------------------------------------

@dataclass(frozen=True)
class SaslHandshakeRequest:
    header: RequestHeader
    mechanism: str
    """The SASL mechanism the client wants (``PLAIN`` is the one served). After a v0
    handshake the client's next frame is the raw SASL token, not a Kafka request."""


def _sasl_handshake(h: RequestHeader, r: Reader) -> SaslHandshakeRequest:
    return SaslHandshakeRequest(h, r.string("mechanism"))


# -- JoinGroup (11) v0-v1 --------------------------------------------------------------

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
    """v1 only; the session timeout in v0 (what Kafka uses)."""
    member_id: str
    protocol_type: str
    protocols: tuple[JoinGroupProtocol, ...]


def _join_group(h: RequestHeader, r: Reader) -> JoinGroupRequest:
    def protocol(r: Reader) -> JoinGroupProtocol:
        return JoinGroupProtocol(r.string("protocol name"), r.bytes_("protocol metadata"))

    group_id, session = r.string("group_id"), r.int32("session_timeout_ms")
    rebalance = r.int32("rebalance_timeout_ms") if h.api_version >= 1 else session
    return JoinGroupRequest(h, group_id, session, rebalance, r.string("member_id"),
                            r.string("protocol_type"), r.array(protocol, "protocols"))


# -- Heartbeat (12), LeaveGroup (13), SyncGroup (14) v0 --------------------------------

@dataclass(frozen=True)
class HeartbeatRequest:
    header: RequestHeader
    group_id: str
    generation_id: int
    member_id: str


def _heartbeat(h: RequestHeader, r: Reader) -> HeartbeatRequest:
    return HeartbeatRequest(h, r.string("group_id"), r.int32("generation_id"), r.string("member_id"))


@dataclass(frozen=True)
class LeaveGroupRequest:
    header: RequestHeader
    group_id: str
    member_id: str


def _leave_group(h: RequestHeader, r: Reader) -> LeaveGroupRequest:
    return LeaveGroupRequest(h, r.string("group_id"), r.string("member_id"))


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


def _sync_group(h: RequestHeader, r: Reader) -> SyncGroupRequest:
    def assignment(r: Reader) -> SyncGroupAssignment:
        return SyncGroupAssignment(r.string("member_id"), r.bytes_("assignment"))

    return SyncGroupRequest(h, r.string("group_id"), r.int32("generation_id"),
                            r.string("member_id"), r.array(assignment, "assignments"))


# -- DescribeGroups (15), ListGroups (16), ApiVersions (18) ----------------------------

@dataclass(frozen=True)
class DescribeGroupsRequest:
    header: RequestHeader
    groups: tuple[str, ...]


def _describe_groups(h: RequestHeader, r: Reader) -> DescribeGroupsRequest:
    return DescribeGroupsRequest(h, r.array(lambda r: r.string("group id"), "groups"))


@dataclass(frozen=True)
class ListGroupsRequest:
    header: RequestHeader


def _list_groups(h: RequestHeader, r: Reader) -> ListGroupsRequest:
    return ListGroupsRequest(h)


@dataclass(frozen=True)
class ApiVersionsRequest:
    """ApiVersions at any version; only v0 is answered normally (see the module doc)."""

    header: RequestHeader

    @property
    def supported(self) -> bool:
        """False for v1+: the reply is error 35 in the v0 layout (§3.1)."""
        return self.header.api_version == 0


def _api_versions(h: RequestHeader, r: Reader) -> ApiVersionsRequest:
    return ApiVersionsRequest(h)


Request = (
    ProduceRequest | FetchRequest | ListOffsetsRequest | MetadataRequest |
    OffsetCommitRequest | OffsetFetchRequest | FindCoordinatorRequest | JoinGroupRequest |
    HeartbeatRequest | LeaveGroupRequest | SyncGroupRequest | DescribeGroupsRequest |
    ListGroupsRequest | SaslHandshakeRequest | ApiVersionsRequest
)
ParseResult = Request | UnsupportedRequest | MalformedRequest

_PARSERS = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _join_group,
    ApiKey.HEARTBEAT: _heartbeat,
    ApiKey.LEAVE_GROUP: _leave_group,
    ApiKey.SYNC_GROUP: _sync_group,
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.SASL_HANDSHAKE: _sasl_handshake,
    ApiKey.API_VERSIONS: _api_versions,
}


def parse_request(frame: bytes) -> ParseResult:
    """One request frame (the bytes after its size prefix, as ``FrameSplitter`` yields
    them) -> a request dataclass, ``UnsupportedRequest`` or ``MalformedRequest``. Never
    raises on bad bytes; the whole body must be consumed (trailing bytes are malformed)."""
    r = Reader(frame)
    try:
        header = parse_header(r)
    except Malformed as e:
        return MalformedRequest(None, f"request header: {e}")
    key, version = header.api_key, header.api_version
    if key == ApiKey.API_VERSIONS and version > 0:
        return ApiVersionsRequest(header)
    if key not in SUPPORTED_VERSIONS:
        return UnsupportedRequest(header)
    low, high = SUPPORTED_VERSIONS[ApiKey(key)]
    if not low <= version <= high:
        return UnsupportedRequest(header)
    try:
        request = _PARSERS[ApiKey(key)](header, r)
        r.end(f"{ApiKey(key).name} v{version} body")
    except Malformed as e:
        return MalformedRequest(header, f"{ApiKey(key).name} v{version}: {e}")
    return request
