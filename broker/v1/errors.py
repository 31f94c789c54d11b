"""The V1 transport's wire errors: which code of docs/protocol.md answers which exception.

Owns: ``CODE_BY_ERROR`` (the one table, one row per exception class; a class without a row
takes its nearest base class's, found along the MRO), ``code_for`` (exception -> code;
``INTERNAL`` for anything the table does not know, i.e. a bug), ``for_code`` (the client
side: code -> class, for turning an ``ERR`` reply back into an exception) and
``RETRIABLE`` (the codes docs/protocol.md says a client may retry).

The codes are exactly those of docs/protocol.md's error table; tests/test_architecture.py
checks the table against the page and against every class a handler can see.

Must not import: Twisted, the store, sockets, the codec, the handlers, the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.errors import (
    BadRequest,
    CoordinatorLoading,
    GenerationMismatch,
    InternalError,
    InvalidAcl,
    InvalidGroupRequest,
    InvalidReplicaRequest,
    KeyRequired,
    NotAuthorized,
    NotLeader,
    ReplicationTimeout,
    SkerryError,
    StorageError,
    TooManyGroups,
    Unauthenticated,
    Unavailable,
    UnknownCommand,
)
from broker.transport.errors import ErrorTable
from groups.consumer_errors import (
    FencedInstanceId,
    FencedMemberEpoch,
    GroupIdInUseByOtherProtocol,
    GroupIdNotFound,
    GroupMaxSizeReached,
    InvalidConsumerGroupRequest,
    InvalidRegularExpression,
    StaleMemberEpoch,
    UnreleasedInstanceId,
    UnsupportedAssignor,
)
from groups.kafka_errors import InvalidGroupId, KafkaGroupError, UnknownMemberId
from replication.errors import PeerError

__all__ = ["CODE_BY_ERROR", "CONSUMER_GROUP_ERRORS", "code_for", "for_code",
           "from_group_refusal", "message_for"]

CODE_BY_ERROR: Mapping[type[BaseException], str] = {
    # broker.errors: the broker's own refusals
    BadRequest: "BAD_REQUEST",
    UnknownCommand: "UNKNOWN_COMMAND",
    Unavailable: "UNAVAILABLE",
    Unauthenticated: "UNAUTHENTICATED",
    InternalError: "INTERNAL",
    SkerryError: "INTERNAL",  # a refusal class nobody gave a row: answered as a bug
    # groups.errors (StaleGeneration, UnknownMember, UnknownGroup, PartitionNotOwned take
    # GenerationMismatch's row; TooManyMembers takes InvalidGroupRequest's)
    GenerationMismatch: "GENERATION_MISMATCH",
    InvalidGroupRequest: "BAD_REQUEST",
    TooManyGroups: "UNAVAILABLE",
    CoordinatorLoading: "UNAVAILABLE",  # retriable: the coordinator is reading its records
    # replication.errors
    NotLeader: "NOT_LEADER",
    InvalidReplicaRequest: "BAD_REQUEST",
    ReplicationTimeout: "REPLICATION_TIMEOUT",
    PeerError: "UNAVAILABLE",  # another broker did not answer a replication request
    # data.errors
    StorageError: "STORAGE_ERROR",
    KeyRequired: "BAD_REQUEST",  # a keyless message to a compacted topic
    # access.errors
    NotAuthorized: "NOT_AUTHORIZED",
    InvalidAcl: "BAD_REQUEST",
}
"""Exception class -> V1 code; a class without a row takes its nearest base's."""

_CLASS_BY_CODE: Mapping[str, type[SkerryError]] = {
    "BAD_REQUEST": BadRequest,
    "UNKNOWN_COMMAND": UnknownCommand,
    "REPLICATION_TIMEOUT": ReplicationTimeout,
    "NOT_LEADER": NotLeader,
    "GENERATION_MISMATCH": GenerationMismatch,
    "UNAVAILABLE": Unavailable,
    "UNAUTHENTICATED": Unauthenticated,
    "STORAGE_ERROR": StorageError,
    "INTERNAL": InternalError,
    "NOT_AUTHORIZED": NotAuthorized,
}

CONSUMER_GROUP_ERRORS: Mapping[type[BaseException], type[SkerryError]] = {
    # groups.consumer_errors / groups.kafka_errors (KIP-848 groups, GROUP_HEARTBEAT and
    # COMMIT into a consumer group): "rejoin" refusals are GENERATION_MISMATCH, the rest
    # are requests to fix, BAD_REQUEST.
    FencedMemberEpoch: GenerationMismatch,
    StaleMemberEpoch: GenerationMismatch,
    UnknownMemberId: GenerationMismatch,
    FencedInstanceId: GenerationMismatch,
    GroupIdNotFound: GenerationMismatch,
    GroupIdInUseByOtherProtocol: BadRequest,
    UnreleasedInstanceId: BadRequest,
    UnsupportedAssignor: BadRequest,
    InvalidRegularExpression: BadRequest,
    InvalidConsumerGroupRequest: BadRequest,
    GroupMaxSizeReached: BadRequest,
    InvalidGroupId: BadRequest,
    KafkaGroupError: InternalError,
}
"""A consumer-group refusal -> the V1 error that carries it (its message kept); a class
without a row takes its nearest base's."""


_GROUP_REFUSALS: ErrorTable[type[SkerryError]] = ErrorTable(CONSUMER_GROUP_ERRORS,
                                                            InternalError)


def from_group_refusal(error: KafkaGroupError) -> SkerryError:
    """The V1 error answering a consumer-group refusal, with the refusal's message."""
    target = _GROUP_REFUSALS(error)
    return target(str(error) or target.description)


code_for: ErrorTable[str] = ErrorTable(CODE_BY_ERROR, "INTERNAL")
"""The V1 code that answers an exception: its class's row or its nearest base's,
``INTERNAL`` for an exception the table does not know (``broker.transport.errors``)."""


def for_code(code: str) -> type[SkerryError]:
    """The exception class for a wire code (``InternalError`` for an unknown one)."""
    return _CLASS_BY_CODE.get(code, InternalError)


def message_for(error: SkerryError) -> str:
    """The message of ``error``'s ERR line. A ``NotLeader`` that knows the leader starts with
    ``leader=<id> addr=<host:port> epoch=<n>`` (docs/protocol.md, NOT_LEADER hints), so a
    client can go there without asking for metadata; the rest is the free text."""
    if isinstance(error, NotLeader) and error.leader is not None and error.addr is not None:
        epoch = -1 if error.epoch is None else error.epoch
        return f"leader={error.leader} addr={error.addr} epoch={epoch} {error.message}"
    return error.message
