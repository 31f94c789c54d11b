"""The Kafka admin APIs' messages and tables: CreateTopics, DeleteTopics,
CreatePartitions, DescribeConfigs, IncrementalAlterConfigs, DescribeCluster, DeleteGroups,
OffsetDelete.

Owns: one frozen dataclass per request and response (and their nested structs) and
``ADMIN_SCHEMAS``, one ``ApiSchema`` per API (merged into ``apis.SCHEMAS``), transcribing
Kafka's message definitions in their own words as ``apis`` does.

Must not import: Twisted, sockets, files, the core, the store, ``apis`` (which imports
this module).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.kafka.codec.framing import RequestHeader
from broker.kafka.codec.requests import ApiKey
from broker.kafka.codec.schema import ApiSchema, Array, Field, Struct

__all__ = [
    "CreatableTopic", "CreatableAssignment", "CreatableConfig", "CreateTopicsRequest",
    "CreatedTopic", "CreatedTopicConfig", "CreateTopicsResponse",
    "DeleteTopicState", "DeleteTopicsRequest", "DeletedTopic", "DeleteTopicsResponse",
    "PartitionsTopic", "PartitionsAssignment", "CreatePartitionsRequest",
    "PartitionsResult", "CreatePartitionsResponse",
    "ConfigResource", "DescribeConfigsRequest", "ConfigSynonym", "ConfigEntry",
    "ConfigResult", "DescribeConfigsResponse",
    "AlterableConfig", "AlterResource", "IncrementalAlterConfigsRequest",
    "AlterResult", "IncrementalAlterConfigsResponse",
    "DescribeClusterRequest", "ClusterBroker", "DescribeClusterResponse",
    "DeleteGroupsRequest", "DeletedGroup", "DeleteGroupsResponse",
    "OffsetDeleteTopic", "OffsetDeleteRequest", "OffsetDeletePartitionResult",
    "OffsetDeleteTopicResult", "OffsetDeleteResponse",
    "DeleteRecordsPartition", "DeleteRecordsTopic", "DeleteRecordsRequest",
    "DeleteRecordsPartitionResult", "DeleteRecordsTopicResult", "DeleteRecordsResponse",
    "LogDirTopic", "DescribeLogDirsRequest", "LogDirPartition", "LogDirTopicResult",
    "LogDirResult", "DescribeLogDirsResponse",
    "ADMIN_SCHEMAS", "ADMIN_REQUESTS", "ADMIN_RESPONSES",
]

F = Field
NO_OPS = -2147483648


# -- CreateTopics (19) -----------------------------------------------------------------

@dataclass(frozen=True)
class CreatableAssignment:
    partition_index: int
    broker_ids: tuple[int, ...]


@dataclass(frozen=True)
class CreatableConfig:
    name: str
    value: str | None


@dataclass(frozen=True)
class CreatableTopic:
    name: str
    num_partitions: int
    """-1: the broker's default."""
    replication_factor: int
    """-1: the broker's default."""
    assignments: tuple[CreatableAssignment, ...]
    configs: tuple[CreatableConfig, ...]


@dataclass(frozen=True)
class CreateTopicsRequest:
    header: RequestHeader
    topics: tuple[CreatableTopic, ...]
    timeout_ms: int = 60000
    validate_only: bool = False


@dataclass(frozen=True)
class CreatedTopicConfig:
    name: str
    value: str | None
    read_only: bool
    config_source: int
    is_sensitive: bool = False


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    error_code: int
    error_message: str | None = None
    topic_id: bytes = bytes(16)
    topic_config_error_code: int = 0
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[CreatedTopicConfig, ...] | None = None


@dataclass(frozen=True)
class CreateTopicsResponse:
    topics: tuple[CreatedTopic, ...]
    throttle_time_ms: int = 0


# -- DeleteTopics (20) -----------------------------------------------------------------

@dataclass(frozen=True)
class DeleteTopicState:
    name: str | None
    topic_id: bytes


@dataclass(frozen=True)
class DeleteTopicsRequest:
    header: RequestHeader
    topic_names: tuple[str, ...]
    """v0-v5."""
    timeout_ms: int
    topics: tuple[DeleteTopicState, ...] = ()
    """v6+: by name or by id."""


@dataclass(frozen=True)
class DeletedTopic:
    name: str | None
    error_code: int
    error_message: str | None = None
    topic_id: bytes = bytes(16)


@dataclass(frozen=True)
class DeleteTopicsResponse:
    responses: tuple[DeletedTopic, ...]
    throttle_time_ms: int = 0


# -- CreatePartitions (37) -------------------------------------------------------------

@dataclass(frozen=True)
class PartitionsAssignment:
    broker_ids: tuple[int, ...]


@dataclass(frozen=True)
class PartitionsTopic:
    name: str
    count: int
    assignments: tuple[PartitionsAssignment, ...] | None


@dataclass(frozen=True)
class CreatePartitionsRequest:
    header: RequestHeader
    topics: tuple[PartitionsTopic, ...]
    timeout_ms: int
    validate_only: bool


@dataclass(frozen=True)
class PartitionsResult:
    name: str
    error_code: int
    error_message: str | None = None


@dataclass(frozen=True)
class CreatePartitionsResponse:
    results: tuple[PartitionsResult, ...]
    throttle_time_ms: int = 0


# -- DescribeConfigs (32) --------------------------------------------------------------

@dataclass(frozen=True)
class ConfigResource:
    resource_type: int
    """2 topic, 4 broker (Kafka's ConfigResource.Type)."""
    resource_name: str
    configuration_keys: tuple[str, ...] | None
    """None: every config."""


@dataclass(frozen=True)
class DescribeConfigsRequest:
    header: RequestHeader
    resources: tuple[ConfigResource, ...]
    include_synonyms: bool = False
    include_documentation: bool = False


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool
    config_source: int = -1
    """1 topic, 4 static broker config, 5 default (Kafka's ConfigSource)."""
    is_default: bool = False
    """v0 only."""
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    config_type: int = 0
    """v3+: 1 boolean, 2 string, 3 int, 5 long, 7 list (Kafka's ConfigType)."""
    documentation: str | None = None


@dataclass(frozen=True)
class ConfigResult:
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    configs: tuple[ConfigEntry, ...] = ()


@dataclass(frozen=True)
class DescribeConfigsResponse:
    results: tuple[ConfigResult, ...]
    throttle_time_ms: int = 0


# -- IncrementalAlterConfigs (44) ------------------------------------------------------

@dataclass(frozen=True)
class AlterableConfig:
    name: str
    config_operation: int
    """0 SET, 1 DELETE (back to the default), 2 APPEND, 3 SUBTRACT."""
    value: str | None


@dataclass(frozen=True)
class AlterResource:
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...]


@dataclass(frozen=True)
class IncrementalAlterConfigsRequest:
    header: RequestHeader
    resources: tuple[AlterResource, ...]
    validate_only: bool


@dataclass(frozen=True)
class AlterResult:
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


@dataclass(frozen=True)
class IncrementalAlterConfigsResponse:
    responses: tuple[AlterResult, ...]
    throttle_time_ms: int = 0


# -- DescribeCluster (60) --------------------------------------------------------------

@dataclass(frozen=True)
class DescribeClusterRequest:
    header: RequestHeader
    include_cluster_authorized_operations: bool
    endpoint_type: int = 1
    include_fenced_brokers: bool = False


@dataclass(frozen=True)
class ClusterBroker:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    is_fenced: bool = False


@dataclass(frozen=True)
class DescribeClusterResponse:
    error_code: int
    cluster_id: str
    controller_id: int
    brokers: tuple[ClusterBroker, ...]
    error_message: str | None = None
    endpoint_type: int = 1
    cluster_authorized_operations: int = NO_OPS
    throttle_time_ms: int = 0


# -- DeleteGroups (42), OffsetDelete (47) ----------------------------------------------

@dataclass(frozen=True)
class DeleteGroupsRequest:
    header: RequestHeader
    groups_names: tuple[str, ...]


@dataclass(frozen=True)
class DeletedGroup:
    group_id: str
    error_code: int


@dataclass(frozen=True)
class DeleteGroupsResponse:
    results: tuple[DeletedGroup, ...]
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class OffsetDeleteTopic:
    name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class OffsetDeleteRequest:
    header: RequestHeader
    group_id: str
    topics: tuple[OffsetDeleteTopic, ...]


@dataclass(frozen=True)
class OffsetDeletePartitionResult:
    partition_index: int
    error_code: int


@dataclass(frozen=True)
class OffsetDeleteTopicResult:
    name: str
    partitions: tuple[OffsetDeletePartitionResult, ...]


@dataclass(frozen=True)
class OffsetDeleteResponse:
    error_code: int
    topics: tuple[OffsetDeleteTopicResult, ...] = ()
    throttle_time_ms: int = 0


# -- DeleteRecords (21), DescribeLogDirs (35) -----------------------------------------

@dataclass(frozen=True)
class DeleteRecordsPartition:
    partition_index: int
    offset: int
    """Delete the records before this offset (-1: before the high watermark)."""


@dataclass(frozen=True)
class DeleteRecordsTopic:
    name: str
    partitions: tuple[DeleteRecordsPartition, ...]


@dataclass(frozen=True)
class DeleteRecordsRequest:
    header: RequestHeader
    topics: tuple[DeleteRecordsTopic, ...]
    timeout_ms: int


@dataclass(frozen=True)
class DeleteRecordsPartitionResult:
    partition_index: int
    low_watermark: int
    error_code: int


@dataclass(frozen=True)
class DeleteRecordsTopicResult:
    name: str
    partitions: tuple[DeleteRecordsPartitionResult, ...]


@dataclass(frozen=True)
class DeleteRecordsResponse:
    topics: tuple[DeleteRecordsTopicResult, ...]
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class LogDirTopic:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class DescribeLogDirsRequest:
    header: RequestHeader
    topics: tuple[LogDirTopic, ...] | None
    """None: every topic."""


@dataclass(frozen=True)
class LogDirPartition:
    partition_index: int
    partition_size: int
    offset_lag: int = 0
    is_future_key: bool = False


@dataclass(frozen=True)
class LogDirTopicResult:
    name: str
    partitions: tuple[LogDirPartition, ...]


@dataclass(frozen=True)
class LogDirResult:
    error_code: int
    log_dir: str
    topics: tuple[LogDirTopicResult, ...]
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(frozen=True)
class DescribeLogDirsResponse:
    results: tuple[LogDirResult, ...]
    error_code: int = 0
    throttle_time_ms: int = 0


# -- the tables ------------------------------------------------------------------------

CREATE_TOPICS = ApiSchema(
    ApiKey.CREATE_TOPICS, "CreateTopics", "0-7", "5+",
    Struct(CreateTopicsRequest,
           F("topics", Array(Struct(
               CreatableTopic,
               F("name", "string"),
               F("num_partitions", "int32"),
               F("replication_factor", "int16"),
               F("assignments", Array(Struct(
                   CreatableAssignment,
                   F("partition_index", "int32"),
                   F("broker_ids", Array("int32"))))),
               F("configs", Array(Struct(
                   CreatableConfig,
                   F("name", "string"),
                   F("value", "string", nullable="0+"))))))),
           F("timeout_ms", "int32", default=60000),
           F("validate_only", "bool", "1+")),
    Struct(CreateTopicsResponse,
           F("throttle_time_ms", "int32", "2+"),
           F("topics", Array(Struct(
               CreatedTopic,
               F("name", "string"),
               F("topic_id", "uuid", "7+"),
               F("error_code", "int16"),
               F("error_message", "string", "1+", nullable="0+", default=None),
               F("topic_config_error_code", "int16", "5+", tag=0),
               F("num_partitions", "int32", "5+", default=-1),
               F("replication_factor", "int16", "5+", default=-1),
               F("configs", Array(Struct(
                   CreatedTopicConfig,
                   F("name", "string"),
                   F("value", "string", nullable="0+"),
                   F("read_only", "bool"),
                   F("config_source", "int8", default=-1),
                   F("is_sensitive", "bool"))), "5+", nullable="5+"))))),
)

DELETE_TOPICS = ApiSchema(
    ApiKey.DELETE_TOPICS, "DeleteTopics", "0-6", "4+",
    Struct(DeleteTopicsRequest,
           F("topics", Array(Struct(
               DeleteTopicState,
               F("name", "string", nullable="0+", default=None),
               F("topic_id", "uuid"))), "6+"),
           F("topic_names", Array("string"), "0-5"),
           F("timeout_ms", "int32")),
    Struct(DeleteTopicsResponse,
           F("throttle_time_ms", "int32", "1+"),
           F("responses", Array(Struct(
               DeletedTopic,
               F("name", "string", nullable="6+"),
               F("topic_id", "uuid", "6+"),
               F("error_code", "int16"),
               F("error_message", "string", "5+", nullable="5+", default=None))))),
)

CREATE_PARTITIONS = ApiSchema(
    ApiKey.CREATE_PARTITIONS, "CreatePartitions", "0-3", "2+",
    Struct(CreatePartitionsRequest,
           F("topics", Array(Struct(
               PartitionsTopic,
               F("name", "string"),
               F("count", "int32"),
               F("assignments", Array(Struct(
                   PartitionsAssignment,
                   F("broker_ids", Array("int32")))), nullable="0+")))),
           F("timeout_ms", "int32"),
           F("validate_only", "bool")),
    Struct(CreatePartitionsResponse,
           F("throttle_time_ms", "int32"),
           F("results", Array(Struct(
               PartitionsResult,
               F("name", "string"),
               F("error_code", "int16"),
               F("error_message", "string", nullable="0+", default=None))))),
)

DESCRIBE_CONFIGS = ApiSchema(
    ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", "0-4", "4+",
    Struct(DescribeConfigsRequest,
           F("resources", Array(Struct(
               ConfigResource,
               F("resource_type", "int8"),
               F("resource_name", "string"),
               F("configuration_keys", Array("string"), nullable="0+")))),
           F("include_synonyms", "bool", "1+"),
           F("include_documentation", "bool", "3+")),
    Struct(DescribeConfigsResponse,
           F("throttle_time_ms", "int32"),
           F("results", Array(Struct(
               ConfigResult,
               F("error_code", "int16"),
               F("error_message", "string", nullable="0+"),
               F("resource_type", "int8"),
               F("resource_name", "string"),
               F("configs", Array(Struct(
                   ConfigEntry,
                   F("name", "string"),
                   F("value", "string", nullable="0+"),
                   F("read_only", "bool"),
                   F("config_source", "int8", "1+", default=-1),
                   F("is_default", "bool", "0"),
                   F("is_sensitive", "bool"),
                   F("synonyms", Array(Struct(
                       ConfigSynonym,
                       F("name", "string"),
                       F("value", "string", nullable="0+"),
                       F("source", "int8"))), "1+"),
                   F("config_type", "int8", "3+"),
                   F("documentation", "string", "3+", nullable="0+", default=None)))))))),
)

INCREMENTAL_ALTER_CONFIGS = ApiSchema(
    ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", "0-1", "1+",
    Struct(IncrementalAlterConfigsRequest,
           F("resources", Array(Struct(
               AlterResource,
               F("resource_type", "int8"),
               F("resource_name", "string"),
               F("configs", Array(Struct(
                   AlterableConfig,
                   F("name", "string"),
                   F("config_operation", "int8"),
                   F("value", "string", nullable="0+"))))))),
           F("validate_only", "bool")),
    Struct(IncrementalAlterConfigsResponse,
           F("throttle_time_ms", "int32"),
           F("responses", Array(Struct(
               AlterResult,
               F("error_code", "int16"),
               F("error_message", "string", nullable="0+"),
               F("resource_type", "int8"),
               F("resource_name", "string"))))),
)

DESCRIBE_CLUSTER = ApiSchema(
    ApiKey.DESCRIBE_CLUSTER, "DescribeCluster", "0-1", "0+",
    Struct(DescribeClusterRequest,
           F("include_cluster_authorized_operations", "bool"),
           F("endpoint_type", "int8", "1+", default=1),
           F("include_fenced_brokers", "bool", "2+")),
    Struct(DescribeClusterResponse,
           F("throttle_time_ms", "int32"),
           F("error_code", "int16"),
           F("error_message", "string", nullable="0+", default=None),
           F("endpoint_type", "int8", "1+", default=1),
           F("cluster_id", "string"),
           F("controller_id", "int32", default=-1),
           F("brokers", Array(Struct(
               ClusterBroker,
               F("broker_id", "int32"),
               F("host", "string"),
               F("port", "int32"),
               F("rack", "string", nullable="0+", default=None),
               F("is_fenced", "bool", "2+")))),
           F("cluster_authorized_operations", "int32", default=NO_OPS)),
)

DELETE_GROUPS = ApiSchema(
    ApiKey.DELETE_GROUPS, "DeleteGroups", "0-2", "2+",
    Struct(DeleteGroupsRequest,
           F("groups_names", Array("string"))),
    Struct(DeleteGroupsResponse,
           F("throttle_time_ms", "int32"),
           F("results", Array(Struct(
               DeletedGroup,
               F("group_id", "string"),
               F("error_code", "int16"))))),
)

OFFSET_DELETE = ApiSchema(
    ApiKey.OFFSET_DELETE, "OffsetDelete", "0", "none",
    Struct(OffsetDeleteRequest,
           F("group_id", "string"),
           F("topics", Array(Struct(
               OffsetDeleteTopic,
               F("name", "string"),
               F("partitions", Array("int32")))))),
    Struct(OffsetDeleteResponse,
           F("error_code", "int16"),
           F("throttle_time_ms", "int32"),
           F("topics", Array(Struct(
               OffsetDeleteTopicResult,
               F("name", "string"),
               F("partitions", Array(Struct(
                   OffsetDeletePartitionResult,
                   F("partition_index", "int32"),
                   F("error_code", "int16")))))))),
)

DELETE_RECORDS = ApiSchema(
    ApiKey.DELETE_RECORDS, "DeleteRecords", "0-2", "2+",
    Struct(DeleteRecordsRequest,
           F("topics", Array(Struct(
               DeleteRecordsTopic,
               F("name", "string"),
               F("partitions", Array(Struct(
                   DeleteRecordsPartition,
                   F("partition_index", "int32"),
                   F("offset", "int64"))))))),
           F("timeout_ms", "int32")),
    Struct(DeleteRecordsResponse,
           F("throttle_time_ms", "int32"),
           F("topics", Array(Struct(
               DeleteRecordsTopicResult,
               F("name", "string"),
               F("partitions", Array(Struct(
                   DeleteRecordsPartitionResult,
                   F("partition_index", "int32"),
                   F("low_watermark", "int64"),
                   F("error_code", "int16")))))))),
)

DESCRIBE_LOG_DIRS = ApiSchema(
    ApiKey.DESCRIBE_LOG_DIRS, "DescribeLogDirs", "0-4", "2+",
    Struct(DescribeLogDirsRequest,
           F("topics", Array(Struct(
               LogDirTopic,
               F("topic", "string"),
               F("partitions", Array("int32")))), nullable="0+")),
    Struct(DescribeLogDirsResponse,
           F("throttle_time_ms", "int32"),
           F("error_code", "int16", "3+"),
           F("results", Array(Struct(
               LogDirResult,
               F("error_code", "int16"),
               F("log_dir", "string"),
               F("topics", Array(Struct(
                   LogDirTopicResult,
                   F("name", "string"),
                   F("partitions", Array(Struct(
                       LogDirPartition,
                       F("partition_index", "int32"),
                       F("partition_size", "int64"),
                       F("offset_lag", "int64"),
                       F("is_future_key", "bool"))))))),
               F("total_bytes", "int64", "4+", default=-1),
               F("usable_bytes", "int64", "4+", default=-1))))),
)

ADMIN_SCHEMAS = (CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, DESCRIBE_CONFIGS,
                 INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER, DELETE_GROUPS, OFFSET_DELETE,
                 DELETE_RECORDS, DESCRIBE_LOG_DIRS)
ADMIN_REQUESTS = tuple(s.request.cls for s in ADMIN_SCHEMAS)
ADMIN_RESPONSES = tuple(s.response.cls for s in ADMIN_SCHEMAS)
