"""Iggy's requests as values: the request codes and one frozen dataclass per request.

Owns: ``Code`` (the seed's request codes), ``Command`` (the base: ``CODE`` is a command's
request code) and one ``@dataclass(frozen=True)`` per request, ``Ping`` to
``LeaveConsumerGroup``. Their bytes are ``broker.iggy.codec.requests``'.

Must not import: Twisted, sockets, files, the core, the other codec modules but
``primitives`` and ``permissions``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar

from broker.iggy.codec.permissions import Permissions
from broker.iggy.codec.primitives import Consumer, Identifier, PartitioningKind, PollingKind

__all__ = [
    "Code",
    "Command",
    "Ping",
    "GetStats",
    "GetSnapshot",
    "GetClusterMetadata",
    "GetMe",
    "GetClient",
    "GetClients",
    "GetUser",
    "GetUsers",
    "CreateUser",
    "DeleteUser",
    "UpdateUser",
    "UpdatePermissions",
    "ChangePassword",
    "LoginUser",
    "LogoutUser",
    "GetPersonalAccessTokens",
    "CreatePersonalAccessToken",
    "DeletePersonalAccessToken",
    "LoginWithPersonalAccessToken",
    "PollMessages",
    "SendMessages",
    "FlushUnsavedBuffer",
    "GetConsumerOffset",
    "StoreConsumerOffset",
    "DeleteConsumerOffset",
    "GetStream",
    "GetStreams",
    "CreateStream",
    "DeleteStream",
    "UpdateStream",
    "PurgeStream",
    "GetTopic",
    "GetTopics",
    "CreateTopic",
    "DeleteTopic",
    "UpdateTopic",
    "PurgeTopic",
    "CreatePartitions",
    "DeletePartitions",
    "DeleteSegments",
    "GetConsumerGroup",
    "GetConsumerGroups",
    "CreateConsumerGroup",
    "DeleteConsumerGroup",
    "JoinConsumerGroup",
    "LeaveConsumerGroup",
]


class Code(IntEnum):
    """Request codes (the seed's list)."""

    PING = 1
    GET_STATS = 10
    GET_SNAPSHOT = 11
    GET_CLUSTER_METADATA = 12
    GET_ME = 20
    GET_CLIENT = 21
    GET_CLIENTS = 22
    GET_USER = 31
    GET_USERS = 32
    CREATE_USER = 33
    DELETE_USER = 34
    UPDATE_USER = 35
    UPDATE_PERMISSIONS = 36
    CHANGE_PASSWORD = 37
    LOGIN_USER = 38
    LOGOUT_USER = 39
    GET_PERSONAL_ACCESS_TOKENS = 41
    CREATE_PERSONAL_ACCESS_TOKEN = 42
    DELETE_PERSONAL_ACCESS_TOKEN = 43
    LOGIN_WITH_PERSONAL_ACCESS_TOKEN = 44
    POLL_MESSAGES = 100
    SEND_MESSAGES = 101
    FLUSH_UNSAVED_BUFFER = 102
    GET_CONSUMER_OFFSET = 120
    STORE_CONSUMER_OFFSET = 121
    DELETE_CONSUMER_OFFSET = 122
    GET_STREAM = 200
    GET_STREAMS = 201
    CREATE_STREAM = 202
    DELETE_STREAM = 203
    UPDATE_STREAM = 204
    PURGE_STREAM = 205
    GET_TOPIC = 300
    GET_TOPICS = 301
    CREATE_TOPIC = 302
    DELETE_TOPIC = 303
    UPDATE_TOPIC = 304
    PURGE_TOPIC = 305
    CREATE_PARTITIONS = 402
    DELETE_PARTITIONS = 403
    DELETE_SEGMENTS = 503
    GET_CONSUMER_GROUP = 600
    GET_CONSUMER_GROUPS = 601
    CREATE_CONSUMER_GROUP = 602
    DELETE_CONSUMER_GROUP = 603
    JOIN_CONSUMER_GROUP = 604
    LEAVE_CONSUMER_GROUP = 605


class Command:
    """Base of every request; ``CODE`` is its request code."""

    __slots__ = ()
    CODE: ClassVar[Code]


@dataclass(frozen=True, slots=True)
class Ping(Command):
    CODE: ClassVar[Code] = Code.PING


@dataclass(frozen=True, slots=True)
class GetStats(Command):
    CODE: ClassVar[Code] = Code.GET_STATS


@dataclass(frozen=True, slots=True)
class GetSnapshot(Command):
    """The seed sends nothing; newer clients send compression and snapshot types, which
    are accepted and ignored (``raw`` keeps them)."""

    CODE: ClassVar[Code] = Code.GET_SNAPSHOT
    raw: bytes = b""


@dataclass(frozen=True, slots=True)
class GetClusterMetadata(Command):
    CODE: ClassVar[Code] = Code.GET_CLUSTER_METADATA


@dataclass(frozen=True, slots=True)
class GetMe(Command):
    CODE: ClassVar[Code] = Code.GET_ME


@dataclass(frozen=True, slots=True)
class GetClient(Command):
    CODE: ClassVar[Code] = Code.GET_CLIENT
    client_id: int


@dataclass(frozen=True, slots=True)
class GetClients(Command):
    CODE: ClassVar[Code] = Code.GET_CLIENTS


@dataclass(frozen=True, slots=True)
class GetUser(Command):
    CODE: ClassVar[Code] = Code.GET_USER
    user_id: Identifier


@dataclass(frozen=True, slots=True)
class GetUsers(Command):
    CODE: ClassVar[Code] = Code.GET_USERS


@dataclass(frozen=True, slots=True)
class CreateUser(Command):
    CODE: ClassVar[Code] = Code.CREATE_USER
    username: str
    password: str
    status: int
    permissions: Permissions | None = None


@dataclass(frozen=True, slots=True)
class DeleteUser(Command):
    CODE: ClassVar[Code] = Code.DELETE_USER
    user_id: Identifier


@dataclass(frozen=True, slots=True)
class UpdateUser(Command):
    CODE: ClassVar[Code] = Code.UPDATE_USER
    user_id: Identifier
    username: str | None = None
    status: int | None = None


@dataclass(frozen=True, slots=True)
class UpdatePermissions(Command):
    CODE: ClassVar[Code] = Code.UPDATE_PERMISSIONS
    user_id: Identifier
    permissions: Permissions | None = None


@dataclass(frozen=True, slots=True)
class ChangePassword(Command):
    CODE: ClassVar[Code] = Code.CHANGE_PASSWORD
    user_id: Identifier
    current_password: str
    new_password: str


@dataclass(frozen=True, slots=True)
class LoginUser(Command):
    CODE: ClassVar[Code] = Code.LOGIN_USER
    username: str
    password: str
    version: str | None = None
    context: str | None = None


@dataclass(frozen=True, slots=True)
class LogoutUser(Command):
    CODE: ClassVar[Code] = Code.LOGOUT_USER


@dataclass(frozen=True, slots=True)
class GetPersonalAccessTokens(Command):
    CODE: ClassVar[Code] = Code.GET_PERSONAL_ACCESS_TOKENS


@dataclass(frozen=True, slots=True)
class CreatePersonalAccessToken(Command):
    CODE: ClassVar[Code] = Code.CREATE_PERSONAL_ACCESS_TOKEN
    name: str
    expiry: int = 0


@dataclass(frozen=True, slots=True)
class DeletePersonalAccessToken(Command):
    CODE: ClassVar[Code] = Code.DELETE_PERSONAL_ACCESS_TOKEN
    name: str


@dataclass(frozen=True, slots=True)
class LoginWithPersonalAccessToken(Command):
    CODE: ClassVar[Code] = Code.LOGIN_WITH_PERSONAL_ACCESS_TOKEN
    token: str


@dataclass(frozen=True, slots=True)
class PollMessages(Command):
    CODE: ClassVar[Code] = Code.POLL_MESSAGES
    consumer: Consumer
    stream: Identifier
    topic: Identifier
    partition_id: int | None
    strategy: PollingKind
    value: int
    count: int
    auto_commit: bool


@dataclass(frozen=True, slots=True)
class SendMessages(Command):
    """``messages`` is the message area (``count`` records: 64-byte header, payload, user
    headers), already checked against the index table's last end; ``split_messages``
    checks every message against the index and splits it."""

    CODE: ClassVar[Code] = Code.SEND_MESSAGES
    stream: Identifier
    topic: Identifier
    partitioning: PartitioningKind
    key: bytes
    count: int
    messages: bytes
    ends: tuple[int, ...] = field(default=(), compare=False, repr=False)
    """The index table's end positions (decoded requests carry them; not compared)."""


@dataclass(frozen=True, slots=True)
class FlushUnsavedBuffer(Command):
    CODE: ClassVar[Code] = Code.FLUSH_UNSAVED_BUFFER
    stream: Identifier
    topic: Identifier
    partition_id: int
    fsync: bool


@dataclass(frozen=True, slots=True)
class GetConsumerOffset(Command):
    CODE: ClassVar[Code] = Code.GET_CONSUMER_OFFSET
    consumer: Consumer
    stream: Identifier
    topic: Identifier
    partition_id: int | None


@dataclass(frozen=True, slots=True)
class StoreConsumerOffset(Command):
    CODE: ClassVar[Code] = Code.STORE_CONSUMER_OFFSET
    consumer: Consumer
    stream: Identifier
    topic: Identifier
    partition_id: int | None
    offset: int


@dataclass(frozen=True, slots=True)
class DeleteConsumerOffset(Command):
    CODE: ClassVar[Code] = Code.DELETE_CONSUMER_OFFSET
    consumer: Consumer
    stream: Identifier
    topic: Identifier
    partition_id: int | None


@dataclass(frozen=True, slots=True)
class GetStream(Command):
    CODE: ClassVar[Code] = Code.GET_STREAM
    stream: Identifier


@dataclass(frozen=True, slots=True)
class GetStreams(Command):
    CODE: ClassVar[Code] = Code.GET_STREAMS


@dataclass(frozen=True, slots=True)
class CreateStream(Command):
    CODE: ClassVar[Code] = Code.CREATE_STREAM
    name: str


@dataclass(frozen=True, slots=True)
class DeleteStream(Command):
    CODE: ClassVar[Code] = Code.DELETE_STREAM
    stream: Identifier


@dataclass(frozen=True, slots=True)
class UpdateStream(Command):
    CODE: ClassVar[Code] = Code.UPDATE_STREAM
    stream: Identifier
    name: str


@dataclass(frozen=True, slots=True)
class PurgeStream(Command):
    CODE: ClassVar[Code] = Code.PURGE_STREAM
    stream: Identifier


@dataclass(frozen=True, slots=True)
class GetTopic(Command):
    CODE: ClassVar[Code] = Code.GET_TOPIC
    stream: Identifier
    topic: Identifier


@dataclass(frozen=True, slots=True)
class GetTopics(Command):
    CODE: ClassVar[Code] = Code.GET_TOPICS
    stream: Identifier


@dataclass(frozen=True, slots=True)
class CreateTopic(Command):
    CODE: ClassVar[Code] = Code.CREATE_TOPIC
    stream: Identifier
    partitions_count: int
    compression: int
    message_expiry: int
    max_topic_size: int
    replication_factor: int
    name: str


@dataclass(frozen=True, slots=True)
class DeleteTopic(Command):
    CODE: ClassVar[Code] = Code.DELETE_TOPIC
    stream: Identifier
    topic: Identifier


@dataclass(frozen=True, slots=True)
class UpdateTopic(Command):
    CODE: ClassVar[Code] = Code.UPDATE_TOPIC
    stream: Identifier
    topic: Identifier
    compression: int
    message_expiry: int
    max_topic_size: int
    replication_factor: int
    name: str


@dataclass(frozen=True, slots=True)
class PurgeTopic(Command):
    CODE: ClassVar[Code] = Code.PURGE_TOPIC
    stream: Identifier
    topic: Identifier


@dataclass(frozen=True, slots=True)
class CreatePartitions(Command):
    CODE: ClassVar[Code] = Code.CREATE_PARTITIONS
    stream: Identifier
    topic: Identifier
    partitions_count: int


@dataclass(frozen=True, slots=True)
class DeletePartitions(Command):
    CODE: ClassVar[Code] = Code.DELETE_PARTITIONS
    stream: Identifier
    topic: Identifier
    partitions_count: int


@dataclass(frozen=True, slots=True)
class DeleteSegments(Command):
    CODE: ClassVar[Code] = Code.DELETE_SEGMENTS
    stream: Identifier
    topic: Identifier
    partition_id: int
    segments_count: int


@dataclass(frozen=True, slots=True)
class GetConsumerGroup(Command):
    CODE: ClassVar[Code] = Code.GET_CONSUMER_GROUP
    stream: Identifier
    topic: Identifier
    group: Identifier


@dataclass(frozen=True, slots=True)
class GetConsumerGroups(Command):
    CODE: ClassVar[Code] = Code.GET_CONSUMER_GROUPS
    stream: Identifier
    topic: Identifier


@dataclass(frozen=True, slots=True)
class CreateConsumerGroup(Command):
    CODE: ClassVar[Code] = Code.CREATE_CONSUMER_GROUP
    stream: Identifier
    topic: Identifier
    name: str


@dataclass(frozen=True, slots=True)
class DeleteConsumerGroup(Command):
    CODE: ClassVar[Code] = Code.DELETE_CONSUMER_GROUP
    stream: Identifier
    topic: Identifier
    group: Identifier


@dataclass(frozen=True, slots=True)
class JoinConsumerGroup(Command):
    CODE: ClassVar[Code] = Code.JOIN_CONSUMER_GROUP
    stream: Identifier
    topic: Identifier
    group: Identifier


@dataclass(frozen=True, slots=True)
class LeaveConsumerGroup(Command):
    CODE: ClassVar[Code] = Code.LEAVE_CONSUMER_GROUP
    stream: Identifier
    topic: Identifier
    group: Identifier
