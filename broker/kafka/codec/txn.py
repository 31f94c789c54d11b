"""The Kafka transaction APIs' messages and tables: AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, TxnOffsetCommit (v0-v3).

Owns: their dataclasses and ``TXN_SCHEMAS`` (merged into ``apis.SCHEMAS``). Skerry has no
transactions: no handler serves these and ApiVersions does not offer them, so a client
that sends one anyway gets UNSUPPORTED_VERSION (35) in the API's own layout instead of a
closed connection (docs/kafka.md, What is supported). The tables exist for that layout.

Must not import: Twisted, sockets, files, the core, the store, ``apis``.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.kafka.codec.framing import RequestHeader
from broker.kafka.codec.requests import ApiKey
from broker.kafka.codec.schema import ApiSchema, Array, Field, Struct

__all__ = [
    "TxnTopic", "AddPartitionsToTxnRequest", "TxnPartitionResult", "TxnTopicResult",
    "AddPartitionsToTxnResponse", "AddOffsetsToTxnRequest", "AddOffsetsToTxnResponse",
    "EndTxnRequest", "EndTxnResponse", "TxnOffsetCommitPartition", "TxnOffsetCommitTopic",
    "TxnOffsetCommitRequest", "TxnOffsetCommitPartitionResult", "TxnOffsetCommitTopicResult",
    "TxnOffsetCommitResponse", "TXN_SCHEMAS",
]

F = Field


@dataclass(frozen=True)
class TxnTopic:
    name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class AddPartitionsToTxnRequest:
    header: RequestHeader
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: tuple[TxnTopic, ...]


@dataclass(frozen=True)
class TxnPartitionResult:
    partition_index: int
    partition_error_code: int


@dataclass(frozen=True)
class TxnTopicResult:
    name: str
    results_by_partition: tuple[TxnPartitionResult, ...]


@dataclass(frozen=True)
class AddPartitionsToTxnResponse:
    results_by_topic: tuple[TxnTopicResult, ...]
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class AddOffsetsToTxnRequest:
    header: RequestHeader
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@dataclass(frozen=True)
class AddOffsetsToTxnResponse:
    error_code: int
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class EndTxnRequest:
    header: RequestHeader
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


@dataclass(frozen=True)
class EndTxnResponse:
    error_code: int
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class TxnOffsetCommitPartition:
    partition_index: int
    committed_offset: int
    committed_metadata: str | None
    committed_leader_epoch: int = -1


@dataclass(frozen=True)
class TxnOffsetCommitTopic:
    name: str
    partitions: tuple[TxnOffsetCommitPartition, ...]


@dataclass(frozen=True)
class TxnOffsetCommitRequest:
    header: RequestHeader
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    topics: tuple[TxnOffsetCommitTopic, ...]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class TxnOffsetCommitPartitionResult:
    partition_index: int
    error_code: int


@dataclass(frozen=True)
class TxnOffsetCommitTopicResult:
    name: str
    partitions: tuple[TxnOffsetCommitPartitionResult, ...]


@dataclass(frozen=True)
class TxnOffsetCommitResponse:
    topics: tuple[TxnOffsetCommitTopicResult, ...]
    throttle_time_ms: int = 0


_TOPIC = Struct(TxnTopic, F("name", "string"), F("partitions", Array("int32")))

ADD_PARTITIONS_TO_TXN = ApiSchema(
    ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", "0-3", "3+",
    Struct(AddPartitionsToTxnRequest,
           F("transactional_id", "string"),
           F("producer_id", "int64"),
           F("producer_epoch", "int16"),
           F("topics", Array(_TOPIC))),
    Struct(AddPartitionsToTxnResponse,
           F("throttle_time_ms", "int32"),
           F("results_by_topic", Array(Struct(
               TxnTopicResult,
               F("name", "string"),
               F("results_by_partition", Array(Struct(
                   TxnPartitionResult,
                   F("partition_index", "int32"),
                   F("partition_error_code", "int16")))))))),
)

ADD_OFFSETS_TO_TXN = ApiSchema(
    ApiKey.ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", "0-3", "3+",
    Struct(AddOffsetsToTxnRequest,
           F("transactional_id", "string"),
           F("producer_id", "int64"),
           F("producer_epoch", "int16"),
           F("group_id", "string")),
    Struct(AddOffsetsToTxnResponse,
           F("throttle_time_ms", "int32"),
           F("error_code", "int16")),
)

END_TXN = ApiSchema(
    ApiKey.END_TXN, "EndTxn", "0-3", "3+",
    Struct(EndTxnRequest,
           F("transactional_id", "string"),
           F("producer_id", "int64"),
           F("producer_epoch", "int16"),
           F("committed", "bool")),
    Struct(EndTxnResponse,
           F("throttle_time_ms", "int32"),
           F("error_code", "int16")),
)

TXN_OFFSET_COMMIT = ApiSchema(
    ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommit", "0-3", "3+",
    Struct(TxnOffsetCommitRequest,
           F("transactional_id", "string"),
           F("group_id", "string"),
           F("producer_id", "int64"),
           F("producer_epoch", "int16"),
           F("generation_id", "int32", "3+", default=-1),
           F("member_id", "string", "3+"),
           F("group_instance_id", "string", "3+", nullable="3+", default=None),
           F("topics", Array(Struct(
               TxnOffsetCommitTopic,
               F("name", "string"),
               F("partitions", Array(Struct(
                   TxnOffsetCommitPartition,
                   F("partition_index", "int32"),
                   F("committed_offset", "int64"),
                   F("committed_leader_epoch", "int32", "2+", default=-1),
                   F("committed_metadata", "string", nullable="0+")))))))),
    Struct(TxnOffsetCommitResponse,
           F("throttle_time_ms", "int32"),
           F("topics", Array(Struct(
               TxnOffsetCommitTopicResult,
               F("name", "string"),
               F("partitions", Array(Struct(
                   TxnOffsetCommitPartitionResult,
                   F("partition_index", "int32"),
                   F("error_code", "int16")))))))),
)

TXN_SCHEMAS = (ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT)
