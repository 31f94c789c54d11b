"""The Kafka codec's tables: one ``ApiSchema`` per API, from which every version of its
request and response is read and written (``schema``'s walker; KIP-482's flexible
versions included).

Owns: ``SCHEMAS`` (api key -> its table) and ``SUPPORTED_VERSIONS`` (the versions the codec
can read and write, per API: the tables' ranges). What the broker *advertises* in
ApiVersions is not this: it is what the handlers serve (``broker.kafka.handlers``), at most
this. Each table transcribes Kafka's message definitions (clients/src/main/resources/
common/message/*.json) in its own words: the field's versions, its nullable versions, its
tag, and the default a version without it reads as.

Must not import: Twisted, sockets, files, the core, the store.
"""

from __future__ import annotations

from typing import Any

from broker.kafka.codec import requests as q
from broker.kafka.codec import responses as p
from broker.kafka.codec.acls import ACL_SCHEMAS
from broker.kafka.codec.admin import ADMIN_SCHEMAS
from broker.kafka.codec.consumer import CONSUMER_SCHEMAS
from broker.kafka.codec.requests import ApiKey
from broker.kafka.codec.schema import ApiSchema, Array, Field, Struct
from broker.kafka.codec.txn import TXN_SCHEMAS

__all__ = ["SCHEMAS", "SUPPORTED_VERSIONS", "schema_for"]

F = Field
NO_OPS = p.NO_AUTHORIZED_OPERATIONS


# -- Produce (0) -----------------------------------------------------------------------

PRODUCE = ApiSchema(
    ApiKey.PRODUCE, "Produce", "0-9", "9+",
    Struct(q.ProduceRequest,
           F("transactional_id", "string", "3+", nullable="3+", default=None),
           F("acks", "int16"),
           F("timeout_ms", "int32"),
           F("topics", Array(Struct(
               q.ProduceTopic,
               F("name", "string"),
               F("partitions", Array(Struct(
                   q.ProducePartition,
                   F("index", "int32"),
                   F("records", "records", nullable="0+", default=b"")))))))),
    Struct(p.ProduceResponse,
           F("topics", Array(Struct(
               p.ProduceTopicResponse,
               F("name", "string"),
               F("partitions", Array(Struct(
                   p.ProducePartitionResponse,
                   F("index", "int32"),
                   F("error_code", "int16"),
                   F("base_offset", "int64"),
                   F("log_append_time_ms", "int64", "2+", default=-1),
                   F("log_start_offset", "int64", "5+", default=-1),
                   F("record_errors", Array(Struct(
                       p.RecordError,
                       F("batch_index", "int32"),
                       F("batch_index_error_message", "string", nullable="8+",
                         default=None))), "8+"),
                   F("error_message", "string", "8+", nullable="8+", default=None))))))),
           F("throttle_time_ms", "int32", "1+")),
)


# -- Fetch (1) -------------------------------------------------------------------------

def _fetch_records(part: p.FetchPartitionResponse, version: int) -> Any:
    records = part.records
    if records is None or isinstance(records, bytes):
        return records
    from broker.kafka.codec.messages import encode_message_set
    return encode_message_set(records, p.fetch_magic(version))


FETCH = ApiSchema(
    ApiKey.FETCH, "Fetch", "0-12", "12+",
    Struct(q.FetchRequest,
           F("cluster_id", "string", "12+", nullable="12+", tag=0, default=None),
           F("replica_id", "int32"),
           F("max_wait_ms", "int32"),
           F("min_bytes", "int32"),
           F("max_bytes", "int32", "3+", default=0x7FFFFFFF),
           F("isolation_level", "int8", "4+"),
           F("session_id", "int32", "7+"),
           F("session_epoch", "int32", "7+", default=-1),
           F("topics", Array(Struct(
               q.FetchTopic,
               F("topic", "string"),
               F("partitions", Array(Struct(
                   q.FetchPartition,
                   F("partition", "int32"),
                   F("current_leader_epoch", "int32", "9+", default=-1),
                   F("fetch_offset", "int64"),
                   F("last_fetched_epoch", "int32", "12+", default=-1),
                   F("log_start_offset", "int64", "5+", default=-1),
                   F("partition_max_bytes", "int32"))))))),
           F("forgotten_topics", Array(Struct(
               q.ForgottenTopic,
               F("topic", "string"),
               F("partitions", Array("int32")))), "7+"),
           F("rack_id", "string", "11+")),
    Struct(p.FetchResponse,
           F("throttle_time_ms", "int32", "1+"),
           F("error_code", "int16", "7+"),
           F("session_id", "int32", "7+"),
           F("topics", Array(Struct(
               p.FetchTopicResponse,
               F("topic", "string"),
               F("partitions", Array(Struct(
                   p.FetchPartitionResponse,
                   F("partition_index", "int32"),
                   F("error_code", "int16"),
                   F("high_watermark", "int64"),
                   F("last_stable_offset", "int64", "4+", default=-1),
                   F("log_start_offset", "int64", "5+", default=-1),
                   F("diverging_epoch", Struct(
                       p.EpochEndOffset,
                       F("epoch", "int32", default=-1),
                       F("end_offset", "int64", default=-1)), "12+", tag=0, default=None),
                   F("current_leader", Struct(
                       p.LeaderIdAndEpoch,
                       F("leader_id", "int32", default=-1),
                       F("leader_epoch", "int32", default=-1)), "12+", tag=1, default=None),
                   F("snapshot_id", Struct(
                       p.SnapshotId,
                       F("end_offset", "int64", default=-1),
                       F("epoch", "int32", default=-1)), "12+", tag=2, default=None),
                   F("aborted_transactions", Array(Struct(
                       p.AbortedTransaction,
                       F("producer_id", "int64"),
                       F("first_offset", "int64"))), "4+", nullable="4+"),
                   F("preferred_read_replica", "int32", "11+", default=-1),
                   F("records", "records", nullable="0+", get=_fetch_records)))))))),
)


# -- ListOffsets (2) -------------------------------------------------------------------

def _old_style(part: p.ListOffsetsPartitionResponse, version: int) -> tuple[int, ...]:
    if part.old_style_offsets is not None:
        return part.old_style_offsets
    return () if part.offset == -1 else (part.offset,)


LIST_OFFSETS = ApiSchema(
    ApiKey.LIST_OFFSETS, "ListOffsets", "0-7", "6+",
    Struct(q.ListOffsetsRequest,
           F("replica_id", "int32"),
           F("isolation_level", "int8", "2+"),
           F("topics", Array(Struct(
               q.ListOffsetsTopic,
               F("name", "string"),
               F("partitions", Array(Struct(
                   q.ListOffsetsPartition,
                   F("partition_index", "int32"),
                   F("current_leader_epoch", "int32", "4+", default=-1),
                   F("timestamp", "int64"),
                   F("max_num_offsets", "int32", "0", default=1)))))))),
    Struct(p.ListOffsetsResponse,
           F("throttle_time_ms", "int32", "2+"),
           F("topics", Array(Struct(
               p.ListOffsetsTopicResponse,
               F("name", "string"),
               F("partitions", Array(Struct(
                   p.ListOffsetsPartitionResponse,
                   F("partition_index", "int32"),
                   F("error_code", "int16"),
                   F("old_style_offsets", Array("int64"), "0", get=_old_style),
                   F("timestamp", "int64", "1+", default=-1),
                   F("offset", "int64", "1+", default=-1),
                   F("leader_epoch", "int32", "4+", default=-1)))))))),
)


# -- Metadata (3) ----------------------------------------------------------------------

def _metadata_finish(request: q.MetadataRequest) -> q.MetadataRequest:
    """The wire's topic structs -> names (and the ids of topics asked for by id alone)."""
    wire: Any = request.topics
    if wire is None:
        return request
    names = tuple(t.name for t in wire if t.name is not None)
    ids = tuple(t.topic_id for t in wire if t.name is None)
    return q.MetadataRequest(request.header, names, request.allow_auto_topic_creation,
                             request.include_cluster_authorized_operations,
                             request.include_topic_authorized_operations, ids)


METADATA = ApiSchema(
    ApiKey.METADATA, "Metadata", "0-12", "9+",
    Struct(q.MetadataRequest,
           F("topics", Array(Struct(
               q.MetadataRequestTopic,
               F("topic_id", "uuid", "10+"),
               F("name", "string", nullable="10+"))), nullable="1+"),
           F("allow_auto_topic_creation", "bool", "4+", default=True),
           F("include_cluster_authorized_operations", "bool", "8-10"),
           F("include_topic_authorized_operations", "bool", "8+")),
    Struct(p.MetadataResponse,
           F("throttle_time_ms", "int32", "3+"),
           F("brokers", Array(Struct(
               p.MetadataBroker,
               F("node_id", "int32"),
               F("host", "string"),
               F("port", "int32"),
               F("rack", "string", "1+", nullable="1+", default=None)))),
           F("cluster_id", "string", "2+", nullable="2+", default=None),
           F("controller_id", "int32", "1+", default=-1),
           F("topics", Array(Struct(
               p.MetadataTopic,
               F("error_code", "int16"),
               F("name", "string", nullable="12+"),
               F("topic_id", "uuid", "10+"),
               F("is_internal", "bool", "1+"),
               F("partitions", Array(Struct(
                   p.MetadataPartition,
                   F("error_code", "int16"),
                   F("partition_index", "int32"),
                   F("leader_id", "int32"),
                   F("leader_epoch", "int32", "7+", default=-1),
                   F("replica_nodes", Array("int32")),
                   F("isr_nodes", Array("int32")),
                   F("offline_replicas", Array("int32"), "5+")))),
               F("topic_authorized_operations", "int32", "8+", default=NO_OPS)))),
           F("cluster_authorized_operations", "int32", "8-10", default=NO_OPS)),
    finish=_metadata_finish,
)


# -- OffsetCommit (8), OffsetFetch (9) -------------------------------------------------

OFFSET_COMMIT = ApiSchema(
    ApiKey.OFFSET_COMMIT, "OffsetCommit", "0-9", "8+",
    Struct(q.OffsetCommitRequest,
           F("group_id", "string"),
           F("generation_id", "int32", "1+", default=-1),
           F("member_id", "string", "1+"),
           F("group_instance_id", "string", "7+", nullable="7+", default=None),
           F("retention_time_ms", "int64", "2-4", default=-1),
           F("topics", Array(Struct(
               q.OffsetCommitTopic,
               F("name", "string"),
               F("partitions", Array(Struct(
                   q.OffsetCommitPartition,
                   F("partition_index", "int32"),
                   F("committed_offset", "int64"),
                   F("committed_leader_epoch", "int32", "6+", default=-1),
                   F("commit_timestamp", "int64", "1", default=-1),
                   F("committed_metadata", "string", nullable="0+")))))))),
    Struct(p.OffsetCommitResponse,
           F("throttle_time_ms", "int32", "3+"),
           F("topics", Array(Struct(
               p.OffsetCommitTopicResponse,
               F("name", "string"),
               F("partitions", Array(Struct(
                   p.OffsetCommitPartitionResponse,
                   F("partition_index", "int32"),
                   F("error_code", "int16")))))))),
)

_FETCH_TOPIC = Struct(q.OffsetFetchTopic,
                      F("name", "string"),
                      F("partition_indexes", Array("int32")))


def _offset_fetch_topics(epoch_from: str) -> Array:
    return Array(Struct(
        p.OffsetFetchTopicResponse,
        F("name", "string"),
        F("partitions", Array(Struct(
            p.OffsetFetchPartitionResponse,
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", epoch_from, default=-1),
            F("metadata", "string", nullable="0+"),
            F("error_code", "int16"))))))


OFFSET_FETCH = ApiSchema(
    ApiKey.OFFSET_FETCH, "OffsetFetch", "0-9", "6+",
    Struct(q.OffsetFetchRequest,
           F("group_id", "string", "0-7"),
           F("topics", Array(_FETCH_TOPIC), "0-7", nullable="2-7"),
           F("groups", Array(Struct(
               q.OffsetFetchGroup,
               F("group_id", "string"),
               F("member_id", "string", "9+", nullable="9+", default=None),
               F("member_epoch", "int32", "9+", default=-1),
               F("topics", Array(_FETCH_TOPIC), nullable="8+"))), "8+"),
           F("require_stable", "bool", "7+")),
    Struct(p.OffsetFetchResponse,
           F("throttle_time_ms", "int32", "3+"),
           F("topics", _offset_fetch_topics("5+"), "0-7"),
           F("error_code", "int16", "2-7"),
           F("groups", Array(Struct(
               p.OffsetFetchGroupResponse,
               F("group_id", "string"),
               F("topics", _offset_fetch_topics("0+")),
               F("error_code", "int16"))), "8+")),
)


# -- FindCoordinator (10) --------------------------------------------------------------

FIND_COORDINATOR = ApiSchema(
    ApiKey.FIND_COORDINATOR, "FindCoordinator", "0-4", "3+",
    Struct(q.FindCoordinatorRequest,
           F("key", "string", "0-3"),
           F("key_type", "int8", "1+"),
           F("coordinator_keys", Array("string"), "4+")),
    Struct(p.FindCoordinatorResponse,
           F("throttle_time_ms", "int32", "1+"),
           F("error_code", "int16", "0-3"),
           F("error_message", "string", "1-3", nullable="1-3", default=None),
           F("node_id", "int32", "0-3"),
           F("host", "string", "0-3"),
           F("port", "int32", "0-3"),
           F("coordinators", Array(Struct(
               p.Coordinator,
               F("key", "string"),
               F("node_id", "int32"),
               F("host", "string"),
               F("port", "int32"),
               F("error_code", "int16"),
               F("error_message", "string", nullable="0+"))), "4+")),
)


# -- JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14) -------------------

def _join_finish(request: q.JoinGroupRequest) -> q.JoinGroupRequest:
    if request.header.api_version == 0:  # v0 has no rebalance timeout: Kafka uses the session's
        return q.JoinGroupRequest(request.header, request.group_id, request.session_timeout_ms,
                                  request.session_timeout_ms, request.member_id,
                                  request.protocol_type, request.protocols,
                                  request.group_instance_id, request.reason)
    return request


JOIN_GROUP = ApiSchema(
    ApiKey.JOIN_GROUP, "JoinGroup", "0-9", "6+",
    Struct(q.JoinGroupRequest,
           F("group_id", "string"),
           F("session_timeout_ms", "int32"),
           F("rebalance_timeout_ms", "int32", "1+", default=-1),
           F("member_id", "string"),
           F("group_instance_id", "string", "5+", nullable="5+", default=None),
           F("protocol_type", "string"),
           F("protocols", Array(Struct(
               q.JoinGroupProtocol,
               F("name", "string"),
               F("metadata", "bytes")))),
           F("reason", "string", "8+", nullable="8+", default=None)),
    Struct(p.JoinGroupResponse,
           F("throttle_time_ms", "int32", "2+"),
           F("error_code", "int16"),
           F("generation_id", "int32"),
           F("protocol_type", "string", "7+", nullable="7+", default=None),
           F("protocol_name", "string", nullable="7+"),
           F("leader", "string"),
           F("skip_assignment", "bool", "9+"),
           F("member_id", "string"),
           F("members", Array(Struct(
               p.JoinGroupMember,
               F("member_id", "string"),
               F("group_instance_id", "string", "5+", nullable="5+", default=None),
               F("metadata", "bytes"))))),
    finish=_join_finish,
)

HEARTBEAT = ApiSchema(
    ApiKey.HEARTBEAT, "Heartbeat", "0-4", "4+",
    Struct(q.HeartbeatRequest,
           F("group_id", "string"),
           F("generation_id", "int32"),
           F("member_id", "string"),
           F("group_instance_id", "string", "3+", nullable="3+", default=None)),
    Struct(p.HeartbeatResponse,
           F("throttle_time_ms", "int32", "1+"),
           F("error_code", "int16")),
)

LEAVE_GROUP = ApiSchema(
    ApiKey.LEAVE_GROUP, "LeaveGroup", "0-5", "4+",
    Struct(q.LeaveGroupRequest,
           F("group_id", "string"),
           F("member_id", "string", "0-2"),
           F("members", Array(Struct(
               q.LeaveGroupMember,
               F("member_id", "string"),
               F("group_instance_id", "string", nullable="0+", default=None),
               F("reason", "string", "5+", nullable="5+", default=None))), "3+")),
    Struct(p.LeaveGroupResponse,
           F("throttle_time_ms", "int32", "1+"),
           F("error_code", "int16"),
           F("members", Array(Struct(
               p.LeaveGroupMemberResponse,
               F("member_id", "string"),
               F("group_instance_id", "string", nullable="0+"),
               F("error_code", "int16"))), "3+")),
)

SYNC_GROUP = ApiSchema(
    ApiKey.SYNC_GROUP, "SyncGroup", "0-5", "4+",
    Struct(q.SyncGroupRequest,
           F("group_id", "string"),
           F("generation_id", "int32"),
           F("member_id", "string"),
           F("group_instance_id", "string", "3+", nullable="3+", default=None),
           F("protocol_type", "string", "5+", nullable="5+", default=None),
           F("protocol_name", "string", "5+", nullable="5+", default=None),
           F("assignments", Array(Struct(
               q.SyncGroupAssignment,
               F("member_id", "string"),
               F("assignment", "bytes"))))),
    Struct(p.SyncGroupResponse,
           F("throttle_time_ms", "int32", "1+"),
           F("error_code", "int16"),
           F("protocol_type", "string", "5+", nullable="5+", default=None),
           F("protocol_name", "string", "5+", nullable="5+", default=None),
           F("assignment", "bytes")),
)


# -- DescribeGroups (15), ListGroups (16), SaslHandshake (17), ApiVersions (18) ---------

DESCRIBE_GROUPS = ApiSchema(
    ApiKey.DESCRIBE_GROUPS, "DescribeGroups", "0-6", "5+",
    Struct(q.DescribeGroupsRequest,
           F("groups", Array("string")),
           F("include_authorized_operations", "bool", "3+")),
    Struct(p.DescribeGroupsResponse,
           F("throttle_time_ms", "int32", "1+"),
           F("groups", Array(Struct(
               p.DescribedGroup,
               F("error_code", "int16"),
               F("error_message", "string", "6+", nullable="6+", default=None),
               F("group_id", "string"),
               F("state", "string"),
               F("protocol_type", "string"),
               F("protocol", "string"),
               F("members", Array(Struct(
                   p.DescribedGroupMember,
                   F("member_id", "string"),
                   F("group_instance_id", "string", "4+", nullable="4+", default=None),
                   F("client_id", "string"),
                   F("client_host", "string"),
                   F("metadata", "bytes"),
                   F("assignment", "bytes")))),
               F("authorized_operations", "int32", "3+", default=NO_OPS))))),
)

LIST_GROUPS = ApiSchema(
    ApiKey.LIST_GROUPS, "ListGroups", "0-5", "3+",
    Struct(q.ListGroupsRequest,
           F("states_filter", Array("string"), "4+"),
           F("types_filter", Array("string"), "5+")),
    Struct(p.ListGroupsResponse,
           F("throttle_time_ms", "int32", "1+"),
           F("error_code", "int16"),
           F("groups", Array(Struct(
               p.ListedGroup,
               F("group_id", "string"),
               F("protocol_type", "string"),
               F("group_state", "string", "4+"),
               F("group_type", "string", "5+", default="classic"))))),
)

SASL_HANDSHAKE = ApiSchema(
    ApiKey.SASL_HANDSHAKE, "SaslHandshake", "0-1", "none",
    Struct(q.SaslHandshakeRequest,
           F("mechanism", "string")),
    Struct(p.SaslHandshakeResponse,
           F("error_code", "int16"),
           F("mechanisms", Array("string"))),
)

API_VERSIONS = ApiSchema(
    ApiKey.API_VERSIONS, "ApiVersions", f"0-{q.API_VERSIONS_MAX}", "3+",
    Struct(q.ApiVersionsRequest,
           F("client_software_name", "string", "3+"),
           F("client_software_version", "string", "3+")),
    Struct(p.ApiVersionsResponse,
           F("error_code", "int16"),
           F("api_keys", Array(Struct(
               p.ApiVersionRange,
               F("api_key", "int16"),
               F("min_version", "int16"),
               F("max_version", "int16")))),
           F("throttle_time_ms", "int32", "1+"),
           F("supported_features", Array(Struct(
               p.SupportedFeature,
               F("name", "string"),
               F("min_version", "int16"),
               F("max_version", "int16"))), "3+", tag=0),
           F("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
           F("finalized_features", Array(Struct(
               p.FinalizedFeature,
               F("name", "string"),
               F("max_version_level", "int16"),
               F("min_version_level", "int16"))), "3+", tag=2),
           F("zk_migration_ready", "bool", "3+", tag=3)),
)


# -- InitProducerId (22) ---------------------------------------------------------------

INIT_PRODUCER_ID = ApiSchema(
    ApiKey.INIT_PRODUCER_ID, "InitProducerId", "0-4", "2+",
    Struct(q.InitProducerIdRequest,
           F("transactional_id", "string", nullable="0+"),
           F("transaction_timeout_ms", "int32"),
           F("producer_id", "int64", "3+", default=-1),
           F("producer_epoch", "int16", "3+", default=-1)),
    Struct(p.InitProducerIdResponse,
           F("throttle_time_ms", "int32"),
           F("error_code", "int16"),
           F("producer_id", "int64", default=-1),
           F("producer_epoch", "int16")),
)


# -- SaslAuthenticate (36) -------------------------------------------------------------

SASL_AUTHENTICATE = ApiSchema(
    ApiKey.SASL_AUTHENTICATE, "SaslAuthenticate", "0-2", "2+",
    Struct(q.SaslAuthenticateRequest,
           F("auth_bytes", "bytes")),
    Struct(p.SaslAuthenticateResponse,
           F("error_code", "int16"),
           F("error_message", "string", nullable="0+", default=None),
           F("auth_bytes", "bytes"),
           F("session_lifetime_ms", "int64", "1+")),
)


SCHEMAS: dict[int, ApiSchema] = {s.key: s for s in (*ADMIN_SCHEMAS, *TXN_SCHEMAS, *ACL_SCHEMAS,
    *CONSUMER_SCHEMAS,
    PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR,
    JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS,
    SASL_HANDSHAKE, API_VERSIONS, INIT_PRODUCER_ID, SASL_AUTHENTICATE,
)}
"""Api key -> its table."""

SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey(key): s.version_range for key, s in SCHEMAS.items()}
"""(min, max) version per API that the codec reads and writes (not what is advertised:
see ``broker.kafka.handlers``)."""

_BY_RESPONSE: dict[type, ApiSchema] = {s.response.cls: s for s in SCHEMAS.values()}


def schema_for(response: object) -> ApiSchema:
    """The table whose response dataclass ``response`` is (``KeyError``: none)."""
    return _BY_RESPONSE[type(response)]
