"""The KIP-848 consumer-group APIs' messages and tables: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69), v0-v1, flexible in every version.

Owns: their dataclasses and ``CONSUMER_SCHEMAS`` (merged into ``apis.SCHEMAS``),
transcribing Kafka's message definitions in their own words: ConsumerGroupHeartbeat v1
adds the subscription's regular expression (and clients make their own member id,
KIP-1082); ConsumerGroupDescribe v1 adds each member's type (KIP-1099: 0 classic,
1 consumer). Topics travel by id (16 bytes), as Metadata v10+ names them.

Must not import: Twisted, sockets, files, the core, the store, ``apis``.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.kafka.codec.framing import RequestHeader
from broker.kafka.codec.requests import ApiKey
from broker.kafka.codec.schema import ApiSchema, Array, Field, Struct

__all__ = [
    "CONSUMER_GROUP_HEARTBEAT", "CONSUMER_GROUP_DESCRIBE",
    "ConsumerTopicPartitions", "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatAssignment", "ConsumerGroupHeartbeatResponse",
    "ConsumerGroupDescribeRequest", "DescribedTopicPartitions", "DescribedAssignment",
    "DescribedConsumerMember", "DescribedConsumerGroup", "ConsumerGroupDescribeResponse",
    "CONSUMER_SCHEMAS", "MEMBER_TYPE_CONSUMER",
]

F = Field
NO_OPS = -2147483648
CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
MEMBER_TYPE_CONSUMER = 1
"""ConsumerGroupDescribe v1's member type of a member that speaks the consumer protocol."""


# -- ConsumerGroupHeartbeat (68) -------------------------------------------------------

@dataclass(frozen=True)
class ConsumerTopicPartitions:
    topic_id: bytes
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class ConsumerGroupHeartbeatRequest:
    header: RequestHeader
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: tuple[ConsumerTopicPartitions, ...] | None = None


@dataclass(frozen=True)
class ConsumerGroupHeartbeatAssignment:
    topic_partitions: tuple[ConsumerTopicPartitions, ...]


@dataclass(frozen=True)
class ConsumerGroupHeartbeatResponse:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: ConsumerGroupHeartbeatAssignment | None = None
    throttle_time_ms: int = 0


_TOPIC_PARTITIONS = Struct(ConsumerTopicPartitions,
                           F("topic_id", "uuid"),
                           F("partitions", Array("int32")))

HEARTBEAT_SCHEMA = ApiSchema(
    ApiKey.CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", "0-1", "0+",
    Struct(ConsumerGroupHeartbeatRequest,
           F("group_id", "string"),
           F("member_id", "string"),
           F("member_epoch", "int32"),
           F("instance_id", "string", nullable="0+", default=None),
           F("rack_id", "string", nullable="0+", default=None),
           F("rebalance_timeout_ms", "int32", default=-1),
           F("subscribed_topic_names", Array("string"), nullable="0+", default=None),
           F("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
           F("server_assignor", "string", nullable="0+", default=None),
           F("topic_partitions", Array(_TOPIC_PARTITIONS), nullable="0+", default=None)),
    Struct(ConsumerGroupHeartbeatResponse,
           F("throttle_time_ms", "int32"),
           F("error_code", "int16"),
           F("error_message", "string", nullable="0+", default=None),
           F("member_id", "string", nullable="0+", default=None),
           F("member_epoch", "int32"),
           F("heartbeat_interval_ms", "int32"),
           F("assignment", Struct(ConsumerGroupHeartbeatAssignment,
                                  F("topic_partitions", Array(_TOPIC_PARTITIONS))),
             nullable="0+", default=None)),
)


# -- ConsumerGroupDescribe (69) --------------------------------------------------------

@dataclass(frozen=True)
class ConsumerGroupDescribeRequest:
    header: RequestHeader
    group_ids: tuple[str, ...]
    include_authorized_operations: bool = False


@dataclass(frozen=True)
class DescribedTopicPartitions:
    topic_id: bytes
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class DescribedAssignment:
    topic_partitions: tuple[DescribedTopicPartitions, ...] = ()


@dataclass(frozen=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: DescribedAssignment
    target_assignment: DescribedAssignment
    member_type: int = MEMBER_TYPE_CONSUMER


@dataclass(frozen=True)
class DescribedConsumerGroup:
    error_code: int
    group_id: str
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()
    authorized_operations: int = NO_OPS


@dataclass(frozen=True)
class ConsumerGroupDescribeResponse:
    groups: tuple[DescribedConsumerGroup, ...]
    throttle_time_ms: int = 0


_DESCRIBED_ASSIGNMENT = Struct(
    DescribedAssignment,
    F("topic_partitions", Array(Struct(DescribedTopicPartitions,
                                       F("topic_id", "uuid"),
                                       F("topic_name", "string"),
                                       F("partitions", Array("int32"))))))

DESCRIBE_SCHEMA = ApiSchema(
    ApiKey.CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", "0-1", "0+",
    Struct(ConsumerGroupDescribeRequest,
           F("group_ids", Array("string")),
           F("include_authorized_operations", "bool")),
    Struct(ConsumerGroupDescribeResponse,
           F("throttle_time_ms", "int32"),
           F("groups", Array(Struct(
               DescribedConsumerGroup,
               F("error_code", "int16"),
               F("error_message", "string", nullable="0+", default=None),
               F("group_id", "string"),
               F("group_state", "string"),
               F("group_epoch", "int32"),
               F("assignment_epoch", "int32"),
               F("assignor_name", "string"),
               F("members", Array(Struct(
                   DescribedConsumerMember,
                   F("member_id", "string"),
                   F("instance_id", "string", nullable="0+", default=None),
                   F("rack_id", "string", nullable="0+", default=None),
                   F("member_epoch", "int32"),
                   F("client_id", "string"),
                   F("client_host", "string"),
                   F("subscribed_topic_names", Array("string")),
                   F("subscribed_topic_regex", "string", nullable="0+", default=None),
                   F("assignment", _DESCRIBED_ASSIGNMENT),
                   F("target_assignment", _DESCRIBED_ASSIGNMENT),
                   F("member_type", "int8", "1+", default=-1)))),
               F("authorized_operations", "int32", default=NO_OPS))))),
)

CONSUMER_SCHEMAS = (HEARTBEAT_SCHEMA, DESCRIBE_SCHEMA)
