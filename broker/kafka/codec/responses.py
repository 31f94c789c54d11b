"""Kafka responses: one frozen dataclass per API and ``encode_response`` (-> a whole frame).

Owns: the response dataclasses, ``api_versions_response`` (§3.1's rule) and
``encode_response(header, response)``, which writes the layout of the request's version
(the layouts of kafka-wire-notes §3 that kafka-python, confluent-kafka and kcat accepted).
A response dataclass is version-free: fields a version lacks are simply not written
(``throttle_time_ms`` below Produce v1 / Fetch v1, ``log_append_time_ms`` below Produce v2,
``rack``/``controller_id``/``is_internal`` below Metadata v1, ``cluster_id`` below v2).

Fetch partitions carry ``Record``s; the encoder writes them as an uncompressed MessageSet
of **magic 0 for Fetch v0-v1 and magic 1 for v2-v3** (§3.4: a 0.9 client cannot parse
magic 1). Which records fit the size limits is the handler's choice.

ListOffsets: v0 writes ``old_style_offsets`` when given, else ``[offset]`` (``[]`` for
offset -1); v1 writes ``timestamp`` and ``offset``.

A response that does not match its request's api key, or a version outside
``SUPPORTED_VERSIONS``, is a bug in the caller: ``ValueError``. Produce with acks = 0 gets
no response at all; not sending one is the handler's job.

Must not import: Twisted, sockets, files, the core, the store.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.kafka.codec.error_codes import ErrorCode
from broker.kafka.codec.framing import RequestHeader, frame_response
from broker.kafka.codec.messages import Record, encode_message_set
from broker.kafka.codec.primitives import INT32, Writer
from broker.kafka.codec.requests import SUPPORTED_VERSIONS, ApiKey, ApiVersionsRequest

__all__ = [
    "ApiVersionRange", "ApiVersionsResponse", "api_versions_response",
    "MetadataBroker", "MetadataPartition", "MetadataTopic", "MetadataResponse",
    "ProducePartitionResponse", "ProduceTopicResponse", "ProduceResponse",
    "FetchPartitionResponse", "FetchTopicResponse", "FetchResponse", "fetch_magic",
    "ListOffsetsPartitionResponse", "ListOffsetsTopicResponse", "ListOffsetsResponse",
    "OffsetCommitPartitionResponse", "OffsetCommitTopicResponse", "OffsetCommitResponse",
    "OffsetFetchPartitionResponse", "OffsetFetchTopicResponse", "OffsetFetchResponse",
    "FindCoordinatorResponse", "SaslHandshakeResponse",
    "JoinGroupMember", "JoinGroupResponse",
    "SyncGroupResponse", "HeartbeatResponse", "LeaveGroupResponse",
    "DescribedGroupMember", "DescribedGroup", "DescribeGroupsResponse",
    "ListedGroup", "ListGroupsResponse",
    "Response",
    "encode_response", "encode_response_chunks",
]


# -- ApiVersions (18) ------------------------------------------------------------------

@dataclass(frozen=True)
class ApiVersionRange:
    api_key: int
    min_version: int
    max_version: int


@dataclass(frozen=True)
class ApiVersionsResponse:
    """Always written in the v0 layout, whatever version was asked (§3.1)."""

    error_code: int
    api_keys: tuple[ApiVersionRange, ...]


def api_versions_response(request: ApiVersionsRequest) -> ApiVersionsResponse:
    """§3.1: the full ``SUPPORTED_VERSIONS`` list; error 0 for v0, 35 for any other version
    (the client then retries with v0, which the list offers as ``18: 0-0``)."""
    error = ErrorCode.NONE if request.supported else ErrorCode.UNSUPPORTED_VERSION
    return ApiVersionsResponse(int(error), tuple(
        ApiVersionRange(int(key), low, high) for key, (low, high) in SUPPORTED_VERSIONS.items()))


def _api_versions(w: Writer, r: ApiVersionsResponse, v: int) -> None:
    w.int16(r.error_code)

    def item(w: Writer, a: ApiVersionRange) -> None:
        w.int16(a.api_key)
        w.int16(a.min_version)
        w.int16(a.max_version)

    w.array(r.api_keys, item)


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


@dataclass(frozen=True)
class MetadataTopic:
    error_code: int
    name: str
    partitions: tuple[MetadataPartition, ...]
    is_internal: bool = False


@dataclass(frozen=True)
class MetadataResponse:
    brokers: tuple[MetadataBroker, ...]
    topics: tuple[MetadataTopic, ...]
    controller_id: int = 0
    cluster_id: str | None = None


def _metadata(w: Writer, r: MetadataResponse, v: int) -> None:
    def broker(w: Writer, b: MetadataBroker) -> None:
        w.int32(b.node_id)
        w.string(b.host)
        w.int32(b.port)
        if v >= 1:
            w.nullable_string(b.rack)

    def partition(w: Writer, p: MetadataPartition) -> None:
        w.int16(p.error_code)
        w.int32(p.partition_index)
        w.int32(p.leader_id)
        w.int32_array(p.replica_nodes)
        w.int32_array(p.isr_nodes)

    def topic(w: Writer, t: MetadataTopic) -> None:
        w.int16(t.error_code)
        w.string(t.name)
        if v >= 1:
            w.int8(1 if t.is_internal else 0)
        w.array(t.partitions, partition)

    w.array(r.brokers, broker)
    if v >= 2:
        w.nullable_string(r.cluster_id)
    if v >= 1:
        w.int32(r.controller_id)
    w.array(r.topics, topic)


# -- Produce (0) -----------------------------------------------------------------------

@dataclass(frozen=True)
class ProducePartitionResponse:
    index: int
    error_code: int
    base_offset: int
    """Offset of the first message appended; -1 on error."""
    log_append_time_ms: int = -1


@dataclass(frozen=True)
class ProduceTopicResponse:
    name: str
    partitions: tuple[ProducePartitionResponse, ...]


@dataclass(frozen=True)
class ProduceResponse:
    topics: tuple[ProduceTopicResponse, ...]
    throttle_time_ms: int = 0


def _produce(w: Writer, r: ProduceResponse, v: int) -> None:
    def partition(w: Writer, p: ProducePartitionResponse) -> None:
        w.int32(p.index)
        w.int16(p.error_code)
        w.int64(p.base_offset)
        if v >= 2:
            w.int64(p.log_append_time_ms)

    def topic(w: Writer, t: ProduceTopicResponse) -> None:
        w.string(t.name)
        w.array(t.partitions, partition)

    w.array(r.topics, topic)
    if v >= 1:
        w.int32(r.throttle_time_ms)


# -- Fetch (1) -------------------------------------------------------------------------

@dataclass(frozen=True)
class FetchPartitionResponse:
    partition_index: int
    error_code: int
    high_watermark: int
    """Kafka's exclusive HW: the next offset to be committed (Skerry hw + 1)."""
    records: tuple[Record, ...] | bytes = ()
    """The records, or a MessageSet already encoded in the version's magic
    (``fetch_magic``), written as is (a handler that builds sets in bulk)."""


@dataclass(frozen=True)
class FetchTopicResponse:
    topic: str
    partitions: tuple[FetchPartitionResponse, ...]


@dataclass(frozen=True)
class FetchResponse:
    topics: tuple[FetchTopicResponse, ...]
    throttle_time_ms: int = 0


def fetch_magic(version: int) -> int:
    """The message format of a Fetch reply: magic 0 for v0-v1 (a 0.9 client cannot parse
    magic 1), magic 1 for v2-v3."""
    return 0 if version <= 1 else 1


def _fetch(w: Writer, r: FetchResponse, v: int) -> None:
    magic = fetch_magic(v)

    def partition(w: Writer, p: FetchPartitionResponse) -> None:
        w.int32(p.partition_index)
        w.int16(p.error_code)
        w.int64(p.high_watermark)
        records = p.records
        w.bytes_(records if isinstance(records, bytes) else encode_message_set(records, magic))

    def topic(w: Writer, t: FetchTopicResponse) -> None:
        w.string(t.topic)
        w.array(t.partitions, partition)

    if v >= 1:
        w.int32(r.throttle_time_ms)
    w.array(r.topics, topic)


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


@dataclass(frozen=True)
class ListOffsetsTopicResponse:
    name: str
    partitions: tuple[ListOffsetsPartitionResponse, ...]


@dataclass(frozen=True)
class ListOffsetsResponse:
    topics: tuple[ListOffsetsTopicResponse, ...]


def _list_offsets(w: Writer, r: ListOffsetsResponse, v: int) -> None:
    def partition(w: Writer, p: ListOffsetsPartitionResponse) -> None:
        w.int32(p.partition_index)
        w.int16(p.error_code)
        if v == 0:
            offsets = p.old_style_offsets
            if offsets is None:
                offsets = () if p.offset == -1 else (p.offset,)
            w.array(offsets, Writer.int64)
        else:
            w.int64(p.timestamp)
            w.int64(p.offset)

    def topic(w: Writer, t: ListOffsetsTopicResponse) -> None:
        w.string(t.name)
        w.array(t.partitions, partition)

    w.array(r.topics, topic)


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


def _offset_commit(w: Writer, r: OffsetCommitResponse, v: int) -> None:
    def partition(w: Writer, p: OffsetCommitPartitionResponse) -> None:
        w.int32(p.partition_index)
        w.int16(p.error_code)

    def topic(w: Writer, t: OffsetCommitTopicResponse) -> None:
        w.string(t.name)
        w.array(t.partitions, partition)

    w.array(r.topics, topic)


@dataclass(frozen=True)
class OffsetFetchPartitionResponse:
    partition_index: int
    committed_offset: int
    """-1 when nothing is committed (that is what makes clients apply auto.offset.reset)."""
    metadata: str | None = ""
    error_code: int = 0


@dataclass(frozen=True)
class OffsetFetchTopicResponse:
    name: str
    partitions: tuple[OffsetFetchPartitionResponse, ...]


@dataclass(frozen=True)
class OffsetFetchResponse:
    topics: tuple[OffsetFetchTopicResponse, ...]


def _offset_fetch(w: Writer, r: OffsetFetchResponse, v: int) -> None:
    def partition(w: Writer, p: OffsetFetchPartitionResponse) -> None:
        w.int32(p.partition_index)
        w.int64(p.committed_offset)
        w.nullable_string(p.metadata)
        w.int16(p.error_code)  # last, unlike OffsetCommit (§3.7)

    def topic(w: Writer, t: OffsetFetchTopicResponse) -> None:
        w.string(t.name)
        w.array(t.partitions, partition)

    w.array(r.topics, topic)


# -- FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14)

@dataclass(frozen=True)
class FindCoordinatorResponse:
    error_code: int
    node_id: int
    host: str
    port: int


def _find_coordinator(w: Writer, r: FindCoordinatorResponse, v: int) -> None:
    w.int16(r.error_code)
    w.int32(r.node_id)
    w.string(r.host)
    w.int32(r.port)


@dataclass(frozen=True)
class SaslHandshakeResponse:
    error_code: int
    mechanisms: tuple[str, ...]
    """The mechanisms the broker enables (``("PLAIN",)``)."""


def _sasl_handshake(w: Writer, r: SaslHandshakeResponse, v: int) -> None:
    w.int16(r.error_code)
    w.array(r.mechanisms, lambda w, m: w.string(m))


@dataclass(frozen=True)
class JoinGroupMember:
    member_id: str
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResponse:
    error_code: int
    generation_id: int
    protocol_name: str
    leader: str
    member_id: str
    members: tuple[JoinGroupMember, ...] = ()
    """Filled in the leader's response only."""


def _join_group(w: Writer, r: JoinGroupResponse, v: int) -> None:
    w.int16(r.error_code)
    w.int32(r.generation_id)
    w.string(r.protocol_name)
    w.string(r.leader)
    w.string(r.member_id)

    def member(w: Writer, m: JoinGroupMember) -> None:
        w.string(m.member_id)
        w.bytes_(m.metadata)

    w.array(r.members, member)


@dataclass(frozen=True)
class SyncGroupResponse:
    error_code: int
    assignment: bytes = b""


def _sync_group(w: Writer, r: SyncGroupResponse, v: int) -> None:
    w.int16(r.error_code)
    w.bytes_(r.assignment)


@dataclass(frozen=True)
class HeartbeatResponse:
    error_code: int


@dataclass(frozen=True)
class LeaveGroupResponse:
    error_code: int


def _error_only(w: Writer, r: HeartbeatResponse | LeaveGroupResponse, v: int) -> None:
    w.int16(r.error_code)


# -- DescribeGroups (15), ListGroups (16) ----------------------------------------------

@dataclass(frozen=True)
class DescribedGroupMember:
    member_id: str
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    error_code: int
    group_id: str
    state: str
    """``Dead``, ``Empty``, ``PreparingRebalance``, ``AwaitingSync`` or ``Stable``."""
    protocol_type: str
    protocol: str
    members: tuple[DescribedGroupMember, ...] = ()


@dataclass(frozen=True)
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...]


def _describe_groups(w: Writer, r: DescribeGroupsResponse, v: int) -> None:
    def member(w: Writer, m: DescribedGroupMember) -> None:
        w.string(m.member_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.bytes_(m.metadata)
        w.bytes_(m.assignment)

    def group(w: Writer, g: DescribedGroup) -> None:
        w.int16(g.error_code)
        w.string(g.group_id)
        w.string(g.state)
        w.string(g.protocol_type)
        w.string(g.protocol)
        w.array(g.members, member)

    w.array(r.groups, group)


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str


@dataclass(frozen=True)
class ListGroupsResponse:
    error_code: int
    groups: tuple[ListedGroup, ...] = ()


def _list_groups(w: Writer, r: ListGroupsResponse, v: int) -> None:
    w.int16(r.error_code)

    def group(w: Writer, g: ListedGroup) -> None:
        w.string(g.group_id)
        w.string(g.protocol_type)

    w.array(r.groups, group)


Response = (
    ProduceResponse | FetchResponse | ListOffsetsResponse | MetadataResponse |
    OffsetCommitResponse | OffsetFetchResponse | FindCoordinatorResponse | JoinGroupResponse |
    HeartbeatResponse | LeaveGroupResponse | SyncGroupResponse | DescribeGroupsResponse |
    ListGroupsResponse | SaslHandshakeResponse | ApiVersionsResponse
)

_ENCODERS = {
    ProduceResponse: (ApiKey.PRODUCE, _produce),
    FetchResponse: (ApiKey.FETCH, _fetch),
    ListOffsetsResponse: (ApiKey.LIST_OFFSETS, _list_offsets),
    MetadataResponse: (ApiKey.METADATA, _metadata),
    OffsetCommitResponse: (ApiKey.OFFSET_COMMIT, _offset_commit),
    OffsetFetchResponse: (ApiKey.OFFSET_FETCH, _offset_fetch),
    FindCoordinatorResponse: (ApiKey.FIND_COORDINATOR, _find_coordinator),
    SaslHandshakeResponse: (ApiKey.SASL_HANDSHAKE, _sasl_handshake),
    JoinGroupResponse: (ApiKey.JOIN_GROUP, _join_group),
    HeartbeatResponse: (ApiKey.HEARTBEAT, _error_only),
    LeaveGroupResponse: (ApiKey.LEAVE_GROUP, _error_only),
    SyncGroupResponse: (ApiKey.SYNC_GROUP, _sync_group),
    DescribeGroupsResponse: (ApiKey.DESCRIBE_GROUPS, _describe_groups),
    ListGroupsResponse: (ApiKey.LIST_GROUPS, _list_groups),
    ApiVersionsResponse: (ApiKey.API_VERSIONS, _api_versions),
}


def encode_response(header: RequestHeader, response: Response) -> bytes:
    """The whole response frame (size, correlation id, body) answering the request with
    ``header``, in the layout of its version."""
    return b"".join(_encode(header, response))


LARGE_CHUNK = 16 << 10
"""A byte string at least this long stays its own chunk in ``encode_response_chunks``."""


def encode_response_chunks(header: RequestHeader, response: Response) -> list[bytes]:
    """``encode_response``'s frame in chunks, ``b"".join`` of which is that frame: every
    byte string of at least ``LARGE_CHUNK`` (a fetch's record sets, megabytes each) as it
    is, the small fields between them joined. A connection sends the chunks with one
    ``sendmsg`` instead of first copying the records into one frame."""
    chunks: list[bytes] = []
    small: list[bytes] = []
    for part in _encode(header, response):
        if len(part) >= LARGE_CHUNK:
            if small:
                chunks.append(b"".join(small))
                small = []
            chunks.append(part)
        else:
            small.append(part)
    if small:
        chunks.append(b"".join(small))
    return chunks


def _encode(header: RequestHeader, response: Response) -> list[bytes]:
    key, encode = _ENCODERS[type(response)]
    if header.api_key != key:
        raise ValueError(f"{type(response).__name__} does not answer api key {header.api_key}")
    version = header.api_version
    if key == ApiKey.API_VERSIONS:
        version = 0  # any ApiVersions version is answered in the v0 layout (§3.1)
    low, high = SUPPORTED_VERSIONS[key]
    if not low <= version <= high:
        raise ValueError(f"{key.name} v{version} is not a supported version")
    w = Writer()
    w.raw(b"")  # the frame head, once the body's size is known: no second copy
    encode(w, response, version)
    parts = w.parts
    parts[0] = frame_response(header.correlation_id, b"")
    parts[0] = INT32.pack(sum(map(len, parts)) - 4) + parts[0][4:]
    return parts
