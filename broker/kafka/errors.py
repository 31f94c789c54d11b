"""The Kafka transport's wire errors: which Kafka error code answers which of Skerry's
exceptions (``broker.errors``: the broker's own, re-exporting the domain's
``groups.errors``, ``replication.errors`` and ``data.errors``; ``groups.kafka_errors``:
the classic Kafka group coordinator's refusals).

Owns: ``CODE_BY_ERROR`` (the one table, one row per exception class: the class that
raised it, or the nearest base class with a row, decides the code), ``code_for``
(exception -> code) and ``REFUSALS`` (what a handler may raise to refuse a request or a
partition: answered with ``code_for``, logged without a traceback).

Kafka answers errors per partition (Produce, Fetch, ListOffsets, OffsetCommit, ...) or per
request (the group APIs); the handlers put ``code_for(error)`` where the layout wants it.
Anything else a handler raises is a bug: the dispatcher logs it with its traceback and
answers the request's error layout with -1 (UNKNOWN_SERVER_ERROR) where it can, or closes
the connection.

Must not import: Twisted, the store, sockets, the handlers, the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.errors import (
    BadRequest,
    GenerationMismatch,
    InternalError,
    InvalidGroupRequest,
    InvalidReplicaRequest,
    InvalidTopicName,
    KeyRequired,
    NotLeader,
    ReplicationTimeout,
    SkerryError,
    StorageError,
    TooManyGroups,
    Unauthenticated,
    Unavailable,
    UnknownCommand,
    UnknownPartition,
    UnknownTopic,
)
from broker.kafka.codec import CorruptMessageSet, ErrorCode
from broker.transport.errors import ErrorTable
from groups import consumer_errors as consumer
from groups.kafka_errors import (
    CoordinatorLoading,
    FencedInstanceId,
    GroupIdNotFound,
    GroupInUseByOtherProtocol,
    GroupNotEmpty,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidGroupId,
    InvalidSessionTimeout,
    KafkaGroupError,
    NotCoordinator,
    OffsetMetadataTooLarge,
    RebalanceInProgress,
    UnknownMemberId,
)
from replication.errors import (
    InvalidProducerEpoch,
    OutOfOrderSequence,
    PeerError,
    ProducerStateError,
)

__all__ = ["ErrorCode", "KafkaError", "CODE_BY_ERROR", "REFUSALS", "code_for"]


class KafkaError(Exception):
    """A refusal the Kafka transport raises with its code already chosen (an unknown
    topic or partition, an offset out of range, a message too large)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


CODE_BY_ERROR: Mapping[type[BaseException], ErrorCode] = {
    # broker.errors: the broker's own refusals
    BadRequest: ErrorCode.CORRUPT_MESSAGE,  # input the store refuses: a produce's batch
    UnknownTopic: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # the core's topic resolution
    UnknownPartition: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    InvalidTopicName: ErrorCode.INVALID_TOPIC_EXCEPTION,
    UnknownCommand: ErrorCode.UNKNOWN_SERVER_ERROR,
    Unavailable: ErrorCode.LEADER_NOT_AVAILABLE,  # shutting down: retriable, clients retry
    Unauthenticated: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    InternalError: ErrorCode.UNKNOWN_SERVER_ERROR,
    SkerryError: ErrorCode.UNKNOWN_SERVER_ERROR,
    # groups.errors: V1 groups (the Kafka transport meets them only through shared offsets)
    GenerationMismatch: ErrorCode.ILLEGAL_GENERATION,
    InvalidGroupRequest: ErrorCode.INVALID_GROUP_ID,
    TooManyGroups: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    # replication.errors
    NotLeader: ErrorCode.NOT_LEADER_FOR_PARTITION,
    InvalidReplicaRequest: ErrorCode.UNKNOWN_SERVER_ERROR,
    ReplicationTimeout: ErrorCode.REQUEST_TIMED_OUT,
    PeerError: ErrorCode.LEADER_NOT_AVAILABLE,  # a replication peer did not answer: retry
    # replication.errors: the idempotent producer's refusals (KIP-98), as Kafka answers
    ProducerStateError: ErrorCode.UNKNOWN_SERVER_ERROR,
    InvalidProducerEpoch: ErrorCode.INVALID_PRODUCER_EPOCH,
    OutOfOrderSequence: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    # data.errors: storage
    StorageError: ErrorCode.UNKNOWN_SERVER_ERROR,
    # a keyless record to a compacted topic: what Kafka answers Produce v0-v2 (v8+ got
    # INVALID_RECORD, 87, which these versions do not know)
    KeyRequired: ErrorCode.CORRUPT_MESSAGE,
    # the codec: a produced MessageSet that cannot be accepted
    CorruptMessageSet: ErrorCode.CORRUPT_MESSAGE,
    # groups.kafka_errors: the classic Kafka group coordinator (GroupNotEmpty answers an
    # admin deletion, DeleteGroups, which these API versions do not have: the base row)
    KafkaGroupError: ErrorCode.UNKNOWN_SERVER_ERROR,
    UnknownMemberId: ErrorCode.UNKNOWN_MEMBER_ID,
    FencedInstanceId: ErrorCode.FENCED_INSTANCE_ID,
    GroupNotEmpty: ErrorCode.NON_EMPTY_GROUP,
    GroupIdNotFound: ErrorCode.GROUP_ID_NOT_FOUND,
    IllegalGeneration: ErrorCode.ILLEGAL_GENERATION,
    RebalanceInProgress: ErrorCode.REBALANCE_IN_PROGRESS,
    InconsistentGroupProtocol: ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
    GroupInUseByOtherProtocol: ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
    InvalidGroupId: ErrorCode.INVALID_GROUP_ID,
    InvalidSessionTimeout: ErrorCode.INVALID_SESSION_TIMEOUT,
    OffsetMetadataTooLarge: ErrorCode.OFFSET_METADATA_TOO_LARGE,
    NotCoordinator: ErrorCode.NOT_COORDINATOR,
    CoordinatorLoading: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    # groups.consumer_errors: the KIP-848 consumer-group coordinator (its refusals'
    # docstrings name these codes after "Kafka:")
    consumer.FencedMemberEpoch: ErrorCode.FENCED_MEMBER_EPOCH,
    consumer.StaleMemberEpoch: ErrorCode.STALE_MEMBER_EPOCH,
    consumer.UnreleasedInstanceId: ErrorCode.UNRELEASED_INSTANCE_ID,
    consumer.FencedInstanceId: ErrorCode.FENCED_INSTANCE_ID,
    consumer.UnsupportedAssignor: ErrorCode.UNSUPPORTED_ASSIGNOR,
    consumer.InvalidConsumerGroupRequest: ErrorCode.INVALID_REQUEST,
    consumer.InvalidRegularExpression: ErrorCode.INVALID_REGULAR_EXPRESSION,
    consumer.GroupIdNotFound: ErrorCode.GROUP_ID_NOT_FOUND,
    consumer.GroupMaxSizeReached: ErrorCode.GROUP_MAX_SIZE_REACHED,
    consumer.ConsumerGroupNotEmpty: ErrorCode.NON_EMPTY_GROUP,
}
"""Skerry's exceptions -> Kafka error code; a class without a row takes its nearest
base's."""

REFUSALS: tuple[type[Exception], ...] = (KafkaError, SkerryError, KafkaGroupError,
                                         CorruptMessageSet)
"""What a handler may raise to refuse (answered with ``code_for``, logged without a
traceback)."""


code_for: ErrorTable[ErrorCode] = ErrorTable(
    CODE_BY_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR,
    carries=(KafkaError, lambda e: e.code))  # type: ignore[attr-defined]
"""The code that answers an exception: its own for a ``KafkaError``, the table's row for
the error's class or its nearest base class, -1 (UNKNOWN_SERVER_ERROR) otherwise."""
