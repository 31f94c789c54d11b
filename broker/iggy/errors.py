"""The Iggy transport's wire errors: which status answers which of Skerry's exceptions
(``broker.errors``: the broker's own, re-exporting the domain's ``groups.errors``,
``replication.errors`` and ``data.errors``; ``broker.services.errors``: the Iggy catalog
and users).

Owns: ``STATUS_BY_ERROR`` (the one table, one row per exception class: the class that
raised it, or the nearest base class with a row, decides the status), ``status_for``
(exception -> status) and ``REFUSALS`` (the exceptions a handler answers with a status
and no traceback: refusals, not bugs). The codes themselves, and ``IggyError`` (a refusal
the transport raises with its status already chosen), are ``broker.iggy.codec.status``';
they are re-exported here so the transport imports its errors from one place.

Anything else a handler raises is a bug: the dispatcher logs it with its traceback and
answers ``ERROR`` (1).

Must not import: Twisted, the store, sockets, the handlers, the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.errors import (
    BadRequest,
    GenerationMismatch,
    InternalError,
    InvalidAcl,
    InvalidGroupRequest,
    InvalidReplicaRequest,
    KeyRequired,
    NotAuthorized,
    NotLeader,
    PartitionNotOwned,
    ReplicationTimeout,
    SkerryError,
    StorageError,
    TooManyGroups,
    Unauthenticated,
    Unavailable,
    UnknownCommand,
    UnknownGroup,
    UnknownMember,
)
from broker.iggy.codec.status import IggyError, Status
from broker.services.errors import (
    GroupNameTaken,
    InvalidGroupName,
    InvalidPassword,
    InvalidStreamName,
    InvalidTokenExpiry,
    InvalidTokenName,
    InvalidTopicName,
    InvalidUsername,
    InvalidUserStatus,
    RootPermissionsFixed,
    RootUserUndeletable,
    ServiceError,
    StreamNameTaken,
    TokenExpired,
    TokenNameTaken,
    TooManyTokens,
    TooManyUsers,
    TopicNameTaken,
    UnknownStreamId,
    UnknownStreamName,
    UnknownToken,
    UnknownTokenName,
    UnknownTopicId,
    UnknownTopicName,
    UnknownUser,
    UserInactive,
    UsernameTaken,
)
from broker.transport.errors import ErrorTable
from replication.errors import PeerError

__all__ = ["Status", "IggyError", "STATUS_BY_ERROR", "REFUSALS", "status_for"]

STATUS_BY_ERROR: Mapping[type[BaseException], Status] = {
    # broker.errors: the broker's own refusals
    Unauthenticated: Status.UNAUTHENTICATED,
    NotAuthorized: Status.UNAUTHORIZED,  # access: an ACL refused the operation
    InvalidAcl: Status.INVALID_USERNAME,  # a user name no ACL principal can carry
    BadRequest: Status.INVALID_COMMAND,
    UnknownCommand: Status.INVALID_COMMAND,
    Unavailable: Status.ERROR,
    InternalError: Status.ERROR,
    SkerryError: Status.ERROR,
    # groups.errors: consumer groups
    UnknownMember: Status.CONSUMER_GROUP_MEMBER_NOT_FOUND,
    PartitionNotOwned: Status.CONSUMER_GROUP_PARTITION_NOT_OWNED,
    UnknownGroup: Status.CONSUMER_GROUP_NAME_NOT_FOUND,
    GenerationMismatch: Status.CONSUMER_GROUP_MEMBER_NOT_FOUND,  # and StaleGeneration
    InvalidGroupRequest: Status.INVALID_COMMAND,  # and TooManyMembers
    TooManyGroups: Status.ERROR,
    # replication.errors
    ReplicationTimeout: Status.TASK_TIMEOUT,
    NotLeader: Status.ERROR,
    InvalidReplicaRequest: Status.INVALID_COMMAND,
    PeerError: Status.ERROR,  # another broker did not answer a replication request
    # data.errors: storage
    StorageError: Status.IO_ERROR,
    KeyRequired: Status.INVALID_COMMAND,  # a keyless message to a compacted topic
    # broker.services.iggy_catalog: streams, topics, consumer groups
    UnknownStreamId: Status.STREAM_ID_NOT_FOUND,
    UnknownStreamName: Status.STREAM_NAME_NOT_FOUND,
    InvalidStreamName: Status.INVALID_STREAM_NAME,
    StreamNameTaken: Status.STREAM_NAME_ALREADY_EXISTS,
    UnknownTopicId: Status.TOPIC_ID_NOT_FOUND,
    UnknownTopicName: Status.TOPIC_NAME_NOT_FOUND,
    InvalidTopicName: Status.INVALID_TOPIC_NAME,
    TopicNameTaken: Status.TOPIC_NAME_ALREADY_EXISTS,
    InvalidGroupName: Status.INVALID_CONSUMER_GROUP_NAME,
    GroupNameTaken: Status.CONSUMER_GROUP_NAME_ALREADY_EXISTS,
    # broker.services.iggy_users: users and personal access tokens
    InvalidUsername: Status.INVALID_USERNAME,
    InvalidPassword: Status.INVALID_PASSWORD,
    InvalidUserStatus: Status.INVALID_USER_STATUS,
    UnknownUser: Status.RESOURCE_NOT_FOUND,
    UsernameTaken: Status.USER_ALREADY_EXISTS,
    TooManyUsers: Status.USERS_LIMIT_REACHED,
    RootUserUndeletable: Status.CANNOT_DELETE_USER,
    RootPermissionsFixed: Status.CANNOT_CHANGE_PERMISSIONS,
    UserInactive: Status.USER_INACTIVE,
    InvalidTokenName: Status.INVALID_PERSONAL_ACCESS_TOKEN_NAME,
    UnknownTokenName: Status.INVALID_PERSONAL_ACCESS_TOKEN_NAME,
    TokenNameTaken: Status.PERSONAL_ACCESS_TOKEN_ALREADY_EXISTS,
    TooManyTokens: Status.PERSONAL_ACCESS_TOKENS_LIMIT_REACHED,
    InvalidTokenExpiry: Status.INVALID_PERSONAL_ACCESS_TOKEN_EXPIRY,
    UnknownToken: Status.INVALID_PERSONAL_ACCESS_TOKEN,
    TokenExpired: Status.PERSONAL_ACCESS_TOKEN_EXPIRED,
}
"""Skerry's exceptions -> Iggy status; a class without a row takes its nearest base's."""

REFUSALS: tuple[type[Exception], ...] = (IggyError, SkerryError, ServiceError)
"""What a handler may raise to refuse a request (answered with ``status_for``, logged
without a traceback)."""


status_for: ErrorTable[Status] = ErrorTable(
    STATUS_BY_ERROR, Status.ERROR, carries=(IggyError, lambda e: e.status))  # type: ignore[attr-defined]
"""The status that answers an exception: its own for an ``IggyError``, the table's row for
the error's class or its nearest base class, ``ERROR`` (1) for anything else."""
