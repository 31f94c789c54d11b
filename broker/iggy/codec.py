"""The Iggy binary codec: every request of the seed's code list and every reply, as bytes.

Owns: the command codes, one frozen dataclass per request, ``decode_request(code,
payload)`` (bytes -> command, every length checked), ``encode_request(command)`` (command ->
whole frame, for clients, tests and the benchmark), the reply frames (``frame_ok``,
``frame_error``) and one encoder per reply shape (streams, topics, partitions, consumer
groups, offsets, clients, users, tokens, stats, cluster metadata, polled messages), the
``Permissions`` blob, and ``split_messages`` (the SendMessages message area -> the lists
``BrokerCore.produce_batch`` takes). Layouts follow ``spec/iggy-binary-notes.md`` where the
real client differs from the seed; docs/iggy.md lists them.

Framing, little-endian throughout::

    request: u32 length (= 4 + N), u32 code, N bytes of payload
    reply:   u32 status, u32 length (= N), N bytes of payload  (status != 0: N = 0)

A malformed payload raises ``IggyError`` with the status that answers it; nothing here
raises anything else on bad input. Message bytes (the 64-byte header) use the constants of
``data.format``: stored records are Iggy messages.

Must not import: Twisted, sockets, files, the core, anything with state.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from enum import IntEnum
from itertools import repeat
from operator import add, itemgetter
from typing import Any, ClassVar

import numpy as np

from broker.iggy.status import IggyError, Status
from data.format import (
    HEADER,
    HEADER_SIZE,
    USER_HEADERS_LENGTH_OFFSET,
    decode_user_headers,
    header_rows,
)

__all__ = [
    "Code",
    "Identifier",
    "Consumer",
    "ConsumerKind",
    "PollingKind",
    "PartitioningKind",
    "CompressionAlgorithm",
    "GlobalPermissions",
    "StreamPermissions",
    "TopicPermissions",
    "Permissions",
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
    "decode_request",
    "encode_request",
    "frame_ok",
    "frame_error",
    "split_messages",
    "check_messages",
    "encode_messages",
    "StreamInfo",
    "TopicInfo",
    "PartitionInfo",
    "ConsumerGroupInfo",
    "GroupMemberInfo",
    "ClientInfo",
    "ClientGroup",
    "UserInfo",
    "TokenInfo",
    "StatsInfo",
    "ClusterNode",
    "encode_stream",
    "encode_stream_details",
    "encode_topic",
    "encode_topic_details",
    "encode_consumer_group",
    "encode_consumer_group_details",
    "encode_consumer_offset",
    "encode_client",
    "encode_client_details",
    "encode_user",
    "encode_user_details",
    "encode_token",
    "encode_raw_token",
    "encode_identity",
    "encode_stats",
    "encode_cluster_metadata",
    "encode_polled_prefix",
    "REQUEST_HEAD",
    "REPLY_HEAD",
    "INDEX_SIZE",
    "MAX_NAME_BYTES",
    "NO_USER",
]

REQUEST_HEAD = struct.Struct("<II")
"""``length, code`` of a request (``length`` counts the code and the payload)."""
REPLY_HEAD = struct.Struct("<II")
"""``status, length`` of a reply (``length`` counts the payload only)."""

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_F32 = struct.Struct("<f")
_POLLED = struct.Struct("<IQI")
_INDEX = struct.Struct("<IIQ")
INDEX_SIZE = _INDEX.size
"""SendMessages index entry: ``0 u32, cumulative end position u32, 0 u64``."""
MAX_NAME_BYTES = 255
NO_USER = 0xFFFFFFFF
"""``user_id`` of a client that has not logged in (ClientInfo)."""


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


class ConsumerKind(IntEnum):
    CONSUMER = 1
    CONSUMER_GROUP = 2


class PollingKind(IntEnum):
    OFFSET = 1
    TIMESTAMP = 2
    FIRST = 3
    LAST = 4
    NEXT = 5


class PartitioningKind(IntEnum):
    BALANCED = 1
    PARTITION_ID = 2
    MESSAGES_KEY = 3


class CompressionAlgorithm(IntEnum):
    NONE = 1
    GZIP = 2
    LZ4 = 3
    ZSTD = 4


# ============================================================== reading


class _Reader:
    """A cursor over a payload; every read checks that the bytes are there."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _need(self, n: int, what: str) -> int:
        pos = self.pos
        if pos + n > len(self.data):
            raise IggyError(Status.INVALID_FORMAT,
                            f"payload ends in the {what} (needs {n} bytes at byte {pos}, "
                            f"{len(self.data) - pos} left)")
        self.pos = pos + n
        return pos

    def u8(self, what: str) -> int:
        return self.data[self._need(1, what)]

    def u32(self, what: str) -> int:
        return _U32.unpack_from(self.data, self._need(4, what))[0]  # type: ignore[no-any-return]

    def u64(self, what: str) -> int:
        return _U64.unpack_from(self.data, self._need(8, what))[0]  # type: ignore[no-any-return]

    def raw(self, n: int, what: str) -> bytes:
        pos = self._need(n, what)
        return bytes(self.data[pos:pos + n])

    def boolean(self, what: str) -> bool:
        value = self.u8(what)
        if value > 1:
            raise IggyError(Status.INVALID_BOOLEAN_VALUE, f"{what} is {value}; expected 0 or 1")
        return value == 1

    def text(self, n: int, what: str, status: Status) -> str:
        raw = self.raw(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IggyError(status, f"{what} is not valid UTF-8") from exc

    def name(self, what: str, status: Status) -> str:
        """``u8 length`` (1..255) then that many UTF-8 bytes."""
        length = self.u8(f"{what} length")
        if length == 0:
            raise IggyError(status, f"{what} is empty")
        return self.text(length, what, status)

    def optional_text32(self, what: str) -> str | None:
        """``u32 length`` (0 = absent) then UTF-8 bytes."""
        length = self.u32(f"{what} length")
        if length == 0:
            return None
        if length > len(self.data) - self.pos:
            raise IggyError(Status.INVALID_FORMAT, f"{what} length {length} runs past the payload")
        return self.text(length, what, Status.INVALID_FORMAT)

    def identifier(self, what: str) -> Identifier:
        kind = self.u8(f"{what} kind")
        length = self.u8(f"{what} length")
        if kind == 1:
            if length != 4:
                raise IggyError(Status.INVALID_IDENTIFIER,
                                f"numeric {what} has length {length}; expected 4")
            return Identifier(_U32.unpack(self.raw(4, what))[0])
        if kind == 2:
            if length == 0:
                raise IggyError(Status.INVALID_IDENTIFIER, f"{what} name is empty")
            return Identifier(self.text(length, what, Status.INVALID_IDENTIFIER))
        raise IggyError(Status.INVALID_IDENTIFIER, f"{what} kind {kind}; expected 1 or 2")

    def optional_partition(self) -> int | None:
        flag = self.u8("partition flag")
        value = self.u32("partition id")
        if flag > 1:
            raise IggyError(Status.INVALID_FORMAT, f"partition flag {flag}; expected 0 or 1")
        return value if flag == 1 else None

    def consumer(self) -> Consumer:
        kind = self.u8("consumer kind")
        if kind not in (1, 2):
            raise IggyError(Status.INVALID_FORMAT, f"consumer kind {kind}; expected 1 or 2")
        return Consumer(ConsumerKind(kind), self.identifier("consumer id"))

    def end(self) -> None:
        left = len(self.data) - self.pos
        if left:
            raise IggyError(Status.INVALID_FORMAT,
                            f"{left} unexpected byte(s) after the payload at byte {self.pos}")


# ============================================================== shared values


@dataclass(frozen=True, slots=True)
class Identifier:
    """A stream, topic, user, consumer group or consumer id: a u32 or a 1-255 byte name."""

    value: int | str

    @property
    def numeric(self) -> bool:
        return isinstance(self.value, int)

    def encode(self) -> bytes:
        value = self.value
        if isinstance(value, int):
            return b"\x01\x04" + _U32.pack(value)
        raw = value.encode("utf-8")
        if not 1 <= len(raw) <= MAX_NAME_BYTES:
            raise ValueError(f"identifier {value!r} must be 1-255 bytes")
        return bytes((2, len(raw))) + raw

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, slots=True)
class Consumer:
    """Who polls: a consumer (its own offsets) or a consumer group."""

    kind: ConsumerKind
    id: Identifier

    def encode(self) -> bytes:
        return bytes((int(self.kind),)) + self.id.encode()


def _name(value: str) -> bytes:
    raw = value.encode("utf-8")
    if not 1 <= len(raw) <= MAX_NAME_BYTES:
        raise ValueError(f"name {value!r} must be 1-255 bytes")
    return bytes((len(raw),)) + raw


def _optional_partition(partition_id: int | None) -> bytes:
    return b"\x00\x00\x00\x00\x00" if partition_id is None else b"\x01" + _U32.pack(partition_id)


def _text32(value: str | None) -> bytes:
    if value is None:
        return _U32.pack(0)
    raw = value.encode("utf-8")
    return _U32.pack(len(raw)) + raw


# ============================================================== permissions


@dataclass(frozen=True, slots=True)
class GlobalPermissions:
    manage_servers: bool = False
    read_servers: bool = False
    manage_users: bool = False
    read_users: bool = False
    manage_streams: bool = False
    read_streams: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False


_GLOBAL_FIELDS = tuple(f.name for f in fields(GlobalPermissions))


@dataclass(frozen=True, slots=True)
class TopicPermissions:
    manage_topic: bool = False
    read_topic: bool = False
    poll_messages: bool = False
    send_messages: bool = False


@dataclass(frozen=True, slots=True)
class StreamPermissions:
    manage_stream: bool = False
    read_stream: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False
    topics: tuple[tuple[int, TopicPermissions], ...] | None = None

    def topic(self, topic_id: int) -> TopicPermissions | None:
        for tid, perms in self.topics or ():
            if tid == topic_id:
                return perms
        return None


@dataclass(frozen=True, slots=True)
class Permissions:
    """A user's permissions (Iggy's ``Permissions`` blob).

    Bytes: ten ``u8`` global flags, then ``u8 has_streams``; each stream is ``u32 id``, six
    flags, ``u8 has_topics``, its topics (``u32 id``, four flags, ``u8 more``) and
    ``u8 more``. Stream and topic maps are encoded in id order (Iggy's own order is a
    hash map's).
    """

    global_: GlobalPermissions = field(default_factory=GlobalPermissions)
    streams: tuple[tuple[int, StreamPermissions], ...] | None = None

    def stream(self, stream_id: int) -> StreamPermissions | None:
        for sid, perms in self.streams or ():
            if sid == stream_id:
                return perms
        return None

    def encode(self) -> bytes:
        g = self.global_
        out = bytearray(bytes(int(getattr(g, f)) for f in _GLOBAL_FIELDS))
        streams = sorted(self.streams or (), key=lambda item: item[0])
        if not streams:
            out.append(0)
            return bytes(out)
        out.append(1)
        for index, (sid, sp) in enumerate(streams):
            out += _U32.pack(sid)
            out += bytes((sp.manage_stream, sp.read_stream, sp.manage_topics, sp.read_topics,
                          sp.poll_messages, sp.send_messages))
            topics = sorted(sp.topics or (), key=lambda item: item[0])
            if topics:
                out.append(1)
                for tindex, (tid, tp) in enumerate(topics):
                    out += _U32.pack(tid)
                    out += bytes((tp.manage_topic, tp.read_topic, tp.poll_messages,
                                  tp.send_messages))
                    out.append(1 if tindex < len(topics) - 1 else 0)
            else:
                out.append(0)
            out.append(1 if index < len(streams) - 1 else 0)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes) -> Permissions:
        """Parse the blob; ``IggyError(INVALID_FORMAT)`` when it is truncated or has bytes
        left over."""
        r = _Reader(data)

        def flag(what: str) -> bool:
            return r.u8(what) == 1

        glob = GlobalPermissions(*(flag(f"permission {f}") for f in _GLOBAL_FIELDS))
        streams: list[tuple[int, StreamPermissions]] | None = None
        if flag("streams flag"):
            streams = []
            while True:
                sid = r.u32("stream permission id")
                flags = [flag("stream permission flag") for _ in range(6)]
                topics: list[tuple[int, TopicPermissions]] | None = None
                if flag("topics flag"):
                    topics = []
                    while True:
                        tid = r.u32("topic permission id")
                        topics.append((tid, TopicPermissions(
                            *(flag("topic permission flag") for _ in range(4)))))
                        if not flag("more topics flag"):
                            break
                streams.append((sid, StreamPermissions(
                    *flags, topics=tuple(topics) if topics is not None else None)))
                if not flag("more streams flag"):
                    break
        r.end()
        return cls(glob, tuple(streams) if streams is not None else None)

    @classmethod
    def root(cls) -> Permissions:
        return cls(GlobalPermissions(*([True] * 10)))


def _read_permissions(r: _Reader) -> Permissions | None:
    """``u8 has_permissions, u32 length`` (always there), then ``length`` bytes if present."""
    present = r.boolean("has_permissions")
    length = r.u32("permissions length")
    if not present:
        if length:
            raise IggyError(Status.INVALID_FORMAT, "permissions length without permissions")
        return None
    if length == 0:
        raise IggyError(Status.INVALID_FORMAT, "permissions flagged but empty")
    return Permissions.decode(r.raw(length, "permissions"))


def _permissions_field(permissions: Permissions | None) -> bytes:
    if permissions is None:
        return b"\x00" + _U32.pack(0)
    blob = permissions.encode()
    return b"\x01" + _U32.pack(len(blob)) + blob


# ============================================================== requests


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


# -------------------------------------------------------------- request parsers


def _empty(cls: type[Command]) -> Callable[[_Reader], Command]:
    def parse(r: _Reader) -> Command:
        r.end()
        return cls()
    return parse


def _stream_only(cls: type[Any]) -> Callable[[_Reader], Command]:
    def parse(r: _Reader) -> Command:
        stream = r.identifier("stream id")
        r.end()
        return cls(stream)  # type: ignore[no-any-return]
    return parse


def _stream_topic(cls: type[Any]) -> Callable[[_Reader], Command]:
    def parse(r: _Reader) -> Command:
        stream = r.identifier("stream id")
        topic = r.identifier("topic id")
        r.end()
        return cls(stream, topic)  # type: ignore[no-any-return]
    return parse


def _stream_topic_group(cls: type[Any]) -> Callable[[_Reader], Command]:
    def parse(r: _Reader) -> Command:
        stream = r.identifier("stream id")
        topic = r.identifier("topic id")
        group = r.identifier("consumer group id")
        r.end()
        return cls(stream, topic, group)  # type: ignore[no-any-return]
    return parse


def _user_only(cls: type[Any]) -> Callable[[_Reader], Command]:
    def parse(r: _Reader) -> Command:
        user = r.identifier("user id")
        r.end()
        return cls(user)  # type: ignore[no-any-return]
    return parse


def _get_snapshot(r: _Reader) -> Command:
    return GetSnapshot(bytes(r.data))


def _get_client(r: _Reader) -> Command:
    client_id = r.u32("client id")
    r.end()
    return GetClient(client_id)


def _create_user(r: _Reader) -> Command:
    username = r.name("username", Status.INVALID_USERNAME)
    password = r.name("password", Status.INVALID_PASSWORD)
    status = r.u8("status")
    permissions = _read_permissions(r)
    r.end()
    return CreateUser(username, password, status, permissions)


def _update_user(r: _Reader) -> Command:
    user = r.identifier("user id")
    username = r.name("username", Status.INVALID_USERNAME) if r.boolean("has_username") else None
    status = r.u8("status") if r.boolean("has_status") else None
    r.end()
    return UpdateUser(user, username, status)


def _update_permissions(r: _Reader) -> Command:
    user = r.identifier("user id")
    permissions = _read_permissions(r)
    r.end()
    return UpdatePermissions(user, permissions)


def _change_password(r: _Reader) -> Command:
    user = r.identifier("user id")
    current = r.name("current password", Status.INVALID_PASSWORD)
    new = r.name("new password", Status.INVALID_PASSWORD)
    r.end()
    return ChangePassword(user, current, new)


def _login_user(r: _Reader) -> Command:
    username = r.name("username", Status.INVALID_USERNAME)
    password = r.name("password", Status.INVALID_PASSWORD)
    version = r.optional_text32("version")
    context = r.optional_text32("context")
    r.end()
    return LoginUser(username, password, version, context)


def _create_pat(r: _Reader) -> Command:
    name = r.name("token name", Status.INVALID_PERSONAL_ACCESS_TOKEN_NAME)
    expiry = r.u64("token expiry")
    r.end()
    return CreatePersonalAccessToken(name, expiry)


def _delete_pat(r: _Reader) -> Command:
    name = r.name("token name", Status.INVALID_PERSONAL_ACCESS_TOKEN_NAME)
    r.end()
    return DeletePersonalAccessToken(name)


def _login_pat(r: _Reader) -> Command:
    token = r.name("token", Status.INVALID_PERSONAL_ACCESS_TOKEN)
    r.end()
    return LoginWithPersonalAccessToken(token)


def _poll_messages(r: _Reader) -> Command:
    consumer = r.consumer()
    stream = r.identifier("stream id")
    topic = r.identifier("topic id")
    partition_id = r.optional_partition()
    kind = r.u8("polling kind")
    if not 1 <= kind <= 5:
        raise IggyError(Status.INVALID_FORMAT, f"polling kind {kind}; expected 1-5")
    value = r.u64("polling value")
    count = r.u32("count")
    auto_commit = r.boolean("auto_commit")
    r.end()
    return PollMessages(consumer, stream, topic, partition_id, PollingKind(kind), value, count,
                        auto_commit)


def _send_messages(r: _Reader) -> Command:
    metadata_length = r.u32("metadata length")
    start = r.pos
    stream = r.identifier("stream id")
    topic = r.identifier("topic id")
    kind = r.u8("partitioning kind")
    length = r.u8("partitioning length")
    key = r.raw(length, "partitioning value")
    count = r.u32("messages count")
    if r.pos - start != metadata_length:
        raise IggyError(Status.INVALID_FORMAT,
                        f"metadata length says {metadata_length} bytes; the metadata has "
                        f"{r.pos - start}")
    if kind == PartitioningKind.BALANCED:
        if length:
            raise IggyError(Status.INVALID_KEY_VALUE_LENGTH, "balanced partitioning has a value")
    elif kind == PartitioningKind.PARTITION_ID:
        if length != 4:
            raise IggyError(Status.INVALID_KEY_VALUE_LENGTH,
                            f"partition id partitioning has a {length}-byte value; expected 4")
    elif kind == PartitioningKind.MESSAGES_KEY:
        if length == 0:
            raise IggyError(Status.INVALID_KEY_VALUE_LENGTH, "messages key is empty")
    else:
        raise IggyError(Status.INVALID_FORMAT, f"partitioning kind {kind}; expected 1-3")
    if count == 0:
        raise IggyError(Status.INVALID_MESSAGES_COUNT, "no messages")
    data = r.data
    index_start = r.pos
    index_bytes = count * INDEX_SIZE
    if index_start + index_bytes > len(data):
        raise IggyError(Status.INVALID_INDEXES_COUNT,
                        f"{count} messages need a {index_bytes}-byte index; "
                        f"{len(data) - index_start} bytes left")
    messages = data[index_start + index_bytes:]
    ends = struct.unpack_from(f"<{4 * count}I", data, index_start)[1::4]
    if ends[-1] != len(messages):
        raise IggyError(Status.INVALID_MESSAGES_SIZE,
                        f"index ends at {ends[-1]}; the messages take {len(messages)} bytes")
    return SendMessages(stream, topic, PartitioningKind(kind), key, count, bytes(messages), ends)


def _flush(r: _Reader) -> Command:
    stream = r.identifier("stream id")
    topic = r.identifier("topic id")
    partition_id = r.u32("partition id")
    fsync = r.boolean("fsync")
    r.end()
    return FlushUnsavedBuffer(stream, topic, partition_id, fsync)


def _offset_target(r: _Reader) -> tuple[Consumer, Identifier, Identifier, int | None]:
    consumer = r.consumer()
    stream = r.identifier("stream id")
    topic = r.identifier("topic id")
    return consumer, stream, topic, r.optional_partition()


def _get_offset(r: _Reader) -> Command:
    target = _offset_target(r)
    r.end()
    return GetConsumerOffset(*target)


def _store_offset(r: _Reader) -> Command:
    target = _offset_target(r)
    offset = r.u64("offset")
    r.end()
    return StoreConsumerOffset(*target, offset)


def _delete_offset(r: _Reader) -> Command:
    target = _offset_target(r)
    r.end()
    return DeleteConsumerOffset(*target)


def _create_stream(r: _Reader) -> Command:
    name = r.name("stream name", Status.INVALID_STREAM_NAME)
    r.end()
    return CreateStream(name)


def _update_stream(r: _Reader) -> Command:
    stream = r.identifier("stream id")
    name = r.name("stream name", Status.INVALID_STREAM_NAME)
    r.end()
    return UpdateStream(stream, name)


def _create_topic(r: _Reader) -> Command:
    stream = r.identifier("stream id")
    partitions = r.u32("partitions count")
    compression = r.u8("compression algorithm")
    expiry = r.u64("message expiry")
    max_size = r.u64("max topic size")
    replication = r.u8("replication factor")
    name = r.name("topic name", Status.INVALID_TOPIC_NAME)
    r.end()
    return CreateTopic(stream, partitions, compression, expiry, max_size, replication, name)


def _update_topic(r: _Reader) -> Command:
    stream = r.identifier("stream id")
    topic = r.identifier("topic id")
    compression = r.u8("compression algorithm")
    expiry = r.u64("message expiry")
    max_size = r.u64("max topic size")
    replication = r.u8("replication factor")
    name = r.name("topic name", Status.INVALID_TOPIC_NAME)
    r.end()
    return UpdateTopic(stream, topic, compression, expiry, max_size, replication, name)


def _partitions(cls: type[Any]) -> Callable[[_Reader], Command]:
    def parse(r: _Reader) -> Command:
        stream = r.identifier("stream id")
        topic = r.identifier("topic id")
        count = r.u32("partitions count")
        r.end()
        return cls(stream, topic, count)  # type: ignore[no-any-return]
    return parse


def _delete_segments(r: _Reader) -> Command:
    stream = r.identifier("stream id")
    topic = r.identifier("topic id")
    partition_id = r.u32("partition id")
    count = r.u32("segments count")
    r.end()
    return DeleteSegments(stream, topic, partition_id, count)


def _create_group(r: _Reader) -> Command:
    stream = r.identifier("stream id")
    topic = r.identifier("topic id")
    name = r.name("consumer group name", Status.INVALID_CONSUMER_GROUP_NAME)
    r.end()
    return CreateConsumerGroup(stream, topic, name)


_PARSERS: dict[int, Callable[[_Reader], Command]] = {
    Code.PING: _empty(Ping),
    Code.GET_STATS: _empty(GetStats),
    Code.GET_SNAPSHOT: _get_snapshot,
    Code.GET_CLUSTER_METADATA: _empty(GetClusterMetadata),
    Code.GET_ME: _empty(GetMe),
    Code.GET_CLIENT: _get_client,
    Code.GET_CLIENTS: _empty(GetClients),
    Code.GET_USER: _user_only(GetUser),
    Code.GET_USERS: _empty(GetUsers),
    Code.CREATE_USER: _create_user,
    Code.DELETE_USER: _user_only(DeleteUser),
    Code.UPDATE_USER: _update_user,
    Code.UPDATE_PERMISSIONS: _update_permissions,
    Code.CHANGE_PASSWORD: _change_password,
    Code.LOGIN_USER: _login_user,
    Code.LOGOUT_USER: _empty(LogoutUser),
    Code.GET_PERSONAL_ACCESS_TOKENS: _empty(GetPersonalAccessTokens),
    Code.CREATE_PERSONAL_ACCESS_TOKEN: _create_pat,
    Code.DELETE_PERSONAL_ACCESS_TOKEN: _delete_pat,
    Code.LOGIN_WITH_PERSONAL_ACCESS_TOKEN: _login_pat,
    Code.POLL_MESSAGES: _poll_messages,
    Code.SEND_MESSAGES: _send_messages,
    Code.FLUSH_UNSAVED_BUFFER: _flush,
    Code.GET_CONSUMER_OFFSET: _get_offset,
    Code.STORE_CONSUMER_OFFSET: _store_offset,
    Code.DELETE_CONSUMER_OFFSET: _delete_offset,
    Code.GET_STREAM: _stream_only(GetStream),
    Code.GET_STREAMS: _empty(GetStreams),
    Code.CREATE_STREAM: _create_stream,
    Code.DELETE_STREAM: _stream_only(DeleteStream),
    Code.UPDATE_STREAM: _update_stream,
    Code.PURGE_STREAM: _stream_only(PurgeStream),
    Code.GET_TOPIC: _stream_topic(GetTopic),
    Code.GET_TOPICS: _stream_only(GetTopics),
    Code.CREATE_TOPIC: _create_topic,
    Code.DELETE_TOPIC: _stream_topic(DeleteTopic),
    Code.UPDATE_TOPIC: _update_topic,
    Code.PURGE_TOPIC: _stream_topic(PurgeTopic),
    Code.CREATE_PARTITIONS: _partitions(CreatePartitions),
    Code.DELETE_PARTITIONS: _partitions(DeletePartitions),
    Code.DELETE_SEGMENTS: _delete_segments,
    Code.GET_CONSUMER_GROUP: _stream_topic_group(GetConsumerGroup),
    Code.GET_CONSUMER_GROUPS: _stream_topic(GetConsumerGroups),
    Code.CREATE_CONSUMER_GROUP: _create_group,
    Code.DELETE_CONSUMER_GROUP: _stream_topic_group(DeleteConsumerGroup),
    Code.JOIN_CONSUMER_GROUP: _stream_topic_group(JoinConsumerGroup),
    Code.LEAVE_CONSUMER_GROUP: _stream_topic_group(LeaveConsumerGroup),
}

_PING = Ping()


def decode_request(code: int, payload: bytes) -> Command:
    """The command for one request. ``IggyError(INVALID_COMMAND)`` for an unknown code; a
    malformed payload raises ``IggyError`` with the status that answers it."""
    if code == Code.PING and not payload:
        return _PING
    parser = _PARSERS.get(code)
    if parser is None:
        raise IggyError(Status.INVALID_COMMAND, f"unknown command code {code}")
    return parser(_Reader(payload))


# -------------------------------------------------------------- request encoders


def _encode_payload(cmd: Command) -> bytes:
    """The payload of a request (the inverse of ``decode_request``)."""
    c: Any = cmd
    if isinstance(cmd, GetSnapshot):
        return cmd.raw
    if isinstance(cmd, Ping | GetStats | GetClusterMetadata | GetMe | GetClients | GetUsers
                  | LogoutUser | GetPersonalAccessTokens | GetStreams):
        return b""
    if isinstance(cmd, GetClient):
        return _U32.pack(cmd.client_id)
    if isinstance(cmd, GetUser | DeleteUser):
        return c.user_id.encode()  # type: ignore[no-any-return]
    if isinstance(cmd, CreateUser):
        return (_name(cmd.username) + _name(cmd.password) + bytes((cmd.status,))
                + _permissions_field(cmd.permissions))
    if isinstance(cmd, UpdateUser):
        out = cmd.user_id.encode()
        out += b"\x00" if cmd.username is None else b"\x01" + _name(cmd.username)
        out += b"\x00" if cmd.status is None else bytes((1, cmd.status))
        return out
    if isinstance(cmd, UpdatePermissions):
        return cmd.user_id.encode() + _permissions_field(cmd.permissions)
    if isinstance(cmd, ChangePassword):
        return cmd.user_id.encode() + _name(cmd.current_password) + _name(cmd.new_password)
    if isinstance(cmd, LoginUser):
        return (_name(cmd.username) + _name(cmd.password) + _text32(cmd.version)
                + _text32(cmd.context))
    if isinstance(cmd, CreatePersonalAccessToken):
        return _name(cmd.name) + _U64.pack(cmd.expiry)
    if isinstance(cmd, DeletePersonalAccessToken):
        return _name(cmd.name)
    if isinstance(cmd, LoginWithPersonalAccessToken):
        return _name(cmd.token)
    if isinstance(cmd, PollMessages):
        return (cmd.consumer.encode() + cmd.stream.encode() + cmd.topic.encode()
                + _optional_partition(cmd.partition_id) + bytes((int(cmd.strategy),))
                + _U64.pack(cmd.value) + _U32.pack(cmd.count) + bytes((int(cmd.auto_commit),)))
    if isinstance(cmd, SendMessages):
        return encode_send_payload(cmd.stream, cmd.topic, cmd.partitioning, cmd.key,
                                   _message_sizes(cmd.messages), cmd.messages)
    if isinstance(cmd, FlushUnsavedBuffer):
        return (cmd.stream.encode() + cmd.topic.encode() + _U32.pack(cmd.partition_id)
                + bytes((int(cmd.fsync),)))
    if isinstance(cmd, GetConsumerOffset | DeleteConsumerOffset):
        return (c.consumer.encode() + c.stream.encode() + c.topic.encode()
                + _optional_partition(c.partition_id))
    if isinstance(cmd, StoreConsumerOffset):
        return (cmd.consumer.encode() + cmd.stream.encode() + cmd.topic.encode()
                + _optional_partition(cmd.partition_id) + _U64.pack(cmd.offset))
    if isinstance(cmd, GetStream | DeleteStream | PurgeStream | GetTopics):
        return c.stream.encode()  # type: ignore[no-any-return]
    if isinstance(cmd, CreateStream):
        return _name(cmd.name)
    if isinstance(cmd, UpdateStream):
        return cmd.stream.encode() + _name(cmd.name)
    if isinstance(cmd, GetTopic | DeleteTopic | PurgeTopic | GetConsumerGroups):
        return c.stream.encode() + c.topic.encode()  # type: ignore[no-any-return]
    if isinstance(cmd, CreateTopic):
        return (cmd.stream.encode() + _U32.pack(cmd.partitions_count)
                + bytes((cmd.compression,)) + _U64.pack(cmd.message_expiry)
                + _U64.pack(cmd.max_topic_size) + bytes((cmd.replication_factor,))
                + _name(cmd.name))
    if isinstance(cmd, UpdateTopic):
        return (cmd.stream.encode() + cmd.topic.encode() + bytes((cmd.compression,))
                + _U64.pack(cmd.message_expiry) + _U64.pack(cmd.max_topic_size)
                + bytes((cmd.replication_factor,)) + _name(cmd.name))
    if isinstance(cmd, CreatePartitions | DeletePartitions):
        return c.stream.encode() + c.topic.encode() + _U32.pack(c.partitions_count)  # type: ignore[no-any-return]
    if isinstance(cmd, DeleteSegments):
        return (cmd.stream.encode() + cmd.topic.encode() + _U32.pack(cmd.partition_id)
                + _U32.pack(cmd.segments_count))
    if isinstance(cmd, GetConsumerGroup | DeleteConsumerGroup | JoinConsumerGroup
                  | LeaveConsumerGroup):
        return c.stream.encode() + c.topic.encode() + c.group.encode()  # type: ignore[no-any-return]
    if isinstance(cmd, CreateConsumerGroup):
        return cmd.stream.encode() + cmd.topic.encode() + _name(cmd.name)
    raise TypeError(f"not an Iggy command: {cmd!r}")


def encode_request(cmd: Command) -> bytes:
    """The whole request frame: ``u32 length, u32 code, payload``."""
    payload = _encode_payload(cmd)
    return REQUEST_HEAD.pack(4 + len(payload), int(cmd.CODE)) + payload


def encode_messages(payloads: Sequence[bytes], user_headers: Sequence[bytes] | None = None,
                    ids: Sequence[int] | None = None,
                    origin_timestamps: Sequence[int] | None = None) -> bytes:
    """Messages as a client sends them: the 64-byte header with checksum, offset and
    timestamp 0, then the payload, then the user headers."""
    parts = []
    for i, payload in enumerate(payloads):
        uh = user_headers[i] if user_headers is not None else b""
        ident = ids[i] if ids is not None else 0
        origin = origin_timestamps[i] if origin_timestamps is not None else 0
        parts.append(HEADER.pack(0, ident & 0xFFFFFFFFFFFFFFFF, ident >> 64, 0, 0, origin,
                                 len(uh), len(payload), 0))
        parts.append(payload)
        parts.append(uh)
    return b"".join(parts)


def _message_sizes(messages: bytes) -> list[int]:
    sizes = []
    pos = 0
    while pos < len(messages):
        uhl, pl = struct.unpack_from("<II", messages, pos + USER_HEADERS_LENGTH_OFFSET)
        sizes.append(HEADER_SIZE + pl + uhl)
        pos += HEADER_SIZE + pl + uhl
    return sizes


def encode_send_payload(stream: Identifier, topic: Identifier, partitioning: PartitioningKind,
                        key: bytes, sizes: Sequence[int], messages: bytes) -> bytes:
    """SendMessages payload: ``metadata_length u32``, stream, topic, partitioning,
    ``messages_count u32``, the 16-byte index per message, then the messages."""
    meta = (stream.encode() + topic.encode() + bytes((int(partitioning), len(key))) + key
            + _U32.pack(len(sizes)))
    index = bytearray()
    end = 0
    for size in sizes:
        end += size
        index += _INDEX.pack(0, end, 0)
    return _U32.pack(len(meta)) + meta + bytes(index) + messages


# ============================================================== message area


def _walk_ends(messages: bytes) -> tuple[int, ...]:
    """Message end positions found by walking the headers (when there is no index)."""
    ends = []
    pos = 0
    total = len(messages)
    lengths = struct.Struct("<II")
    while pos < total:
        if pos + HEADER_SIZE > total:
            raise IggyError(Status.TOO_SMALL_MESSAGE,
                            f"message {len(ends)} at byte {pos}: {total - pos} bytes, less than "
                            f"a header")
        uhl, pl = lengths.unpack_from(messages, pos + USER_HEADERS_LENGTH_OFFSET)
        pos += HEADER_SIZE + pl + uhl
        ends.append(pos)
    return tuple(ends)


def check_messages(messages: bytes, count: int, max_payload: int,
                   max_user_headers: int = 100 * 1024, ends: Sequence[int] = (),
                   ) -> tuple[int, ...]:
    """Check the SendMessages message area exactly as ``split_messages`` does, without
    splitting it; return the end positions of the messages (for ``produce_framed``, which
    stamps the area in place). Raises the same ``IggyError`` for the same input.

    The header fields are read as columns (``data.format.header_rows``), so a batch costs
    a few array operations, not Python work per message (user headers, when a message has
    any, are still decoded one by one)."""
    if not ends:
        ends = _walk_ends(messages)
    n = len(ends)
    total = len(messages)
    if not n or ends[-1] != total:
        raise IggyError(Status.INVALID_MESSAGES_SIZE,
                        f"the messages end at {ends[-1] if n else 0}; the area has "
                        f"{total} bytes")
    if n != count:
        raise IggyError(Status.INVALID_MESSAGES_COUNT,
                        f"messages_count says {count}; the area holds {n}")
    end_at = np.fromiter(ends, dtype=np.int64, count=n)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = end_at[:-1]
    if int(starts.max()) + HEADER_SIZE > total:
        raise IggyError(Status.TOO_SMALL_MESSAGE, "a message header is cut short")
    fields = np.ascontiguousarray(
        header_rows(np.frombuffer(messages, dtype=np.uint8))[starts, USER_HEADERS_LENGTH_OFFSET:])
    words = fields.view("<u4")  # user_headers_length, payload_length, reserved (2 words)
    uhls = words[:, 0].astype(np.int64)
    pls = words[:, 1].astype(np.int64)
    stops = starts + HEADER_SIZE + pls
    if not np.array_equal(stops + uhls, end_at):
        raise IggyError(Status.INVALID_MESSAGES_SIZE,
                        "a message's payload and header lengths disagree with the index")
    if words[:, 2:].any():
        raise IggyError(Status.INVALID_RESERVED_FIELD, "a message's reserved field is not 0")
    if int(pls.min()) == 0:
        raise IggyError(Status.EMPTY_MESSAGE_PAYLOAD,
                        f"message {int(np.argmin(pls))} has no payload")
    if int(pls.max()) > max_payload:
        raise IggyError(Status.TOO_BIG_MESSAGE_PAYLOAD,
                        f"a {int(pls.max())}-byte payload; at most {max_payload}")
    if uhls.any():
        if int(uhls.max()) > max_user_headers:
            raise IggyError(Status.TOO_BIG_USER_HEADERS,
                            f"{int(uhls.max())} bytes of user headers; at most {max_user_headers}")
        for index in np.nonzero(uhls)[0].tolist():
            try:
                decode_user_headers(messages[int(stops[index]):ends[index]])
            except ValueError as exc:
                raise IggyError(Status.CANNOT_READ_HEADERS_PAYLOAD,
                                f"message {index}: {exc}") from exc
    return tuple(ends)


def split_messages(messages: bytes, count: int, max_payload: int,
                   max_user_headers: int = 100 * 1024, ends: Sequence[int] = (),
                   ) -> tuple[list[bytes], list[bytes] | None, list[int], list[int]]:
    """Split the SendMessages message area: ``(payloads, user_headers, ids, origin
    timestamps)`` (``user_headers`` is None when no message has any).

    ``ends`` are the index table's end positions (walked from the headers when empty).
    Each message must start where the previous one ended with a complete 64-byte header
    whose lengths end it exactly at its index entry, ``reserved`` 0, a payload of
    1..``max_payload`` bytes and well-formed user headers of at most ``max_user_headers``
    bytes; there must be ``count`` of them. Checksum, offset and timestamp are the server's
    to stamp and are ignored. The checks are ``check_messages``'; the split is C-level
    ``map`` over the batch: no Python bytecode runs per message unless it has user headers.
    """
    ends = check_messages(messages, count, max_payload, max_user_headers, ends)
    n = len(ends)
    starts = (0, *ends[:-1])
    heads = list(map(HEADER.unpack_from, repeat(messages, n), starts))
    bodies = list(map(add, starts, repeat(HEADER_SIZE, n)))
    stops = list(map(add, bodies, map(itemgetter(7), heads)))
    cut = messages.__getitem__
    payloads = list(map(cut, map(slice, bodies, stops)))
    headers = list(map(cut, map(slice, stops, ends))) if any(map(itemgetter(6), heads)) else None
    los = list(map(itemgetter(1), heads))
    if any(map(itemgetter(2), heads)):
        ids = [lo | hi << 64 for lo, hi in zip(los, map(itemgetter(2), heads), strict=True)]
    else:
        ids = los
    return payloads, headers, ids, list(map(itemgetter(5), heads))


# ============================================================== replies


def frame_ok(payload: bytes = b"") -> bytes:
    """A success reply: ``status 0, u32 length, payload``."""
    return REPLY_HEAD.pack(0, len(payload)) + payload


def frame_error(status: int) -> bytes:
    """An error reply: ``status, length 0``, no payload."""
    return REPLY_HEAD.pack(int(status), 0)


_STREAM = struct.Struct("<IQIQQ")
_TOPIC = struct.Struct("<IQIQBQBQQ")
_PARTITION = struct.Struct("<IQIQQQ")
_GROUP = struct.Struct("<III")
_OFFSET = struct.Struct("<IQQ")
_USER = struct.Struct("<IQB")
_CLIENT = struct.Struct("<IIB")
_CLIENT_GROUP = struct.Struct("<III")


@dataclass(frozen=True, slots=True)
class StreamInfo:
    id: int
    created_at: int
    topics_count: int
    size: int
    messages_count: int
    name: str


@dataclass(frozen=True, slots=True)
class TopicInfo:
    id: int
    created_at: int
    partitions_count: int
    message_expiry: int
    compression: int
    max_topic_size: int
    replication_factor: int
    size: int
    messages_count: int
    name: str


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    id: int
    created_at: int
    segments_count: int
    current_offset: int
    size: int
    messages_count: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupInfo:
    id: int
    partitions_count: int
    members_count: int
    name: str


@dataclass(frozen=True, slots=True)
class GroupMemberInfo:
    id: int
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ClientGroup:
    stream_id: int
    topic_id: int
    group_id: int


@dataclass(frozen=True, slots=True)
class ClientInfo:
    client_id: int
    user_id: int | None
    address: str
    consumer_groups_count: int
    transport: int = 1  # 1 = TCP


@dataclass(frozen=True, slots=True)
class UserInfo:
    id: int
    created_at: int
    status: int
    username: str


@dataclass(frozen=True, slots=True)
class TokenInfo:
    name: str
    expiry_at: int | None


@dataclass(frozen=True, slots=True)
class StatsInfo:
    process_id: int
    cpu_usage: float
    total_cpu_usage: float
    memory_usage: int
    total_memory: int
    available_memory: int
    run_time: int
    start_time: int
    read_bytes: int
    written_bytes: int
    messages_size_bytes: int
    streams_count: int
    topics_count: int
    partitions_count: int
    segments_count: int
    messages_count: int
    clients_count: int
    consumer_groups_count: int
    hostname: str
    os_name: str
    os_version: str
    kernel_version: str
    server_version: str
    server_semver: int
    threads_count: int
    free_disk_space: int
    total_disk_space: int


@dataclass(frozen=True, slots=True)
class ClusterNode:
    name: str
    ip: str
    tcp_port: int
    quic_port: int = 0
    http_port: int = 0
    websocket_port: int = 0
    role: int = 0  # 0 = leader, 1 = follower
    status: int = 0  # 0 = healthy


def _short_name(value: str) -> bytes:
    raw = value.encode("utf-8")[:MAX_NAME_BYTES]
    return bytes((len(raw),)) + raw


def _str32(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _U32.pack(len(raw)) + raw


def encode_stream(s: StreamInfo) -> bytes:
    """``id u32, created_at u64, topics_count u32, size u64, messages_count u64, name``."""
    return _STREAM.pack(s.id, s.created_at, s.topics_count, s.size, s.messages_count) \
        + _short_name(s.name)


def encode_topic(t: TopicInfo) -> bytes:
    """``id u32, created_at u64, partitions_count u32, message_expiry u64, compression u8,
    max_topic_size u64, replication_factor u8, size u64, messages_count u64, name``."""
    return _TOPIC.pack(t.id, t.created_at, t.partitions_count, t.message_expiry,
                       t.compression, t.max_topic_size, t.replication_factor, t.size,
                       t.messages_count) + _short_name(t.name)


def encode_stream_details(stream: StreamInfo, topics: Iterable[TopicInfo]) -> bytes:
    """GetStream / CreateStream: the stream, then its topics' headers."""
    return encode_stream(stream) + b"".join(encode_topic(t) for t in topics)


def encode_partition(p: PartitionInfo) -> bytes:
    """40 bytes: ``id u32, created_at u64, segments_count u32, current_offset u64,
    size u64, messages_count u64``."""
    return _PARTITION.pack(p.id, p.created_at, p.segments_count, p.current_offset, p.size,
                           p.messages_count)


def encode_topic_details(topic: TopicInfo, partitions: Iterable[PartitionInfo]) -> bytes:
    """GetTopic / CreateTopic: the topic, then one 40-byte record per partition."""
    return encode_topic(topic) + b"".join(encode_partition(p) for p in partitions)


def encode_consumer_group(g: ConsumerGroupInfo) -> bytes:
    """``id u32, partitions_count u32, members_count u32, name``."""
    return _GROUP.pack(g.id, g.partitions_count, g.members_count) + _short_name(g.name)


def encode_consumer_group_details(group: ConsumerGroupInfo,
                                  members: Iterable[GroupMemberInfo]) -> bytes:
    """The group, then each member: ``id u32, partitions_count u32, partition ids u32...``."""
    out = [encode_consumer_group(group)]
    for m in members:
        out.append(_U32.pack(m.id) + _U32.pack(len(m.partitions))
                   + b"".join(_U32.pack(p) for p in m.partitions))
    return b"".join(out)


def encode_consumer_offset(partition_id: int, current_offset: int, stored_offset: int) -> bytes:
    """``partition_id u32, current_offset u64, stored_offset u64``."""
    return _OFFSET.pack(partition_id, current_offset, stored_offset)


def encode_client(c: ClientInfo) -> bytes:
    """``client_id u32, user_id u32 (u32::MAX: none), transport u8, address (u32 len),
    consumer_groups_count u32``."""
    return (_CLIENT.pack(c.client_id, NO_USER if c.user_id is None else c.user_id, c.transport)
            + _str32(c.address) + _U32.pack(c.consumer_groups_count))


def encode_client_details(c: ClientInfo, groups: Iterable[ClientGroup]) -> bytes:
    """GetMe / GetClient: the client, then ``stream_id, topic_id, group_id`` per group."""
    return encode_client(c) + b"".join(_CLIENT_GROUP.pack(g.stream_id, g.topic_id, g.group_id)
                                       for g in groups)


def encode_user(u: UserInfo) -> bytes:
    """``id u32, created_at u64, status u8, username (u8 len)``."""
    return _USER.pack(u.id, u.created_at, u.status) + _short_name(u.username)


def encode_user_details(u: UserInfo, permissions: Permissions | None) -> bytes:
    """GetUser / CreateUser: the user, ``u8 has_permissions``, then ``u32 length`` and the
    permissions blob when there are permissions."""
    if permissions is None:
        return encode_user(u) + b"\x00"
    blob = permissions.encode()
    return encode_user(u) + b"\x01" + _U32.pack(len(blob)) + blob


def encode_token(t: TokenInfo) -> bytes:
    """``name (u8 len), expiry_at u64`` (0 = never)."""
    return _short_name(t.name) + _U64.pack(t.expiry_at or 0)


def encode_raw_token(token: str) -> bytes:
    """CreatePersonalAccessToken: the token itself, ``u8 length`` then the token."""
    return _short_name(token)


def encode_identity(user_id: int) -> bytes:
    """LoginUser / LoginWithPersonalAccessToken: ``user_id u32``."""
    return _U32.pack(user_id)


_STATS_HEAD = struct.Struct("<IffQQQQQQQQIIIIQII")


def encode_stats(s: StatsInfo) -> bytes:
    """GetStats (spec/iggy-binary-notes.md): the fixed 108 bytes, five u32-length strings,
    ``semver u32``, ``cache_entries u32`` (0), ``threads u32, free_disk u64,
    total_disk u64``."""
    head = _STATS_HEAD.pack(
        s.process_id, s.cpu_usage, s.total_cpu_usage, s.memory_usage, s.total_memory,
        s.available_memory, s.run_time, s.start_time, s.read_bytes, s.written_bytes,
        s.messages_size_bytes, s.streams_count, s.topics_count, s.partitions_count,
        s.segments_count, s.messages_count, s.clients_count, s.consumer_groups_count)
    strings = b"".join(_str32(v) for v in (s.hostname, s.os_name, s.os_version,
                                            s.kernel_version, s.server_version))
    tail = (_U32.pack(s.server_semver) + _U32.pack(0) + _U32.pack(s.threads_count)
            + _U64.pack(s.free_disk_space) + _U64.pack(s.total_disk_space))
    return head + strings + tail


def encode_cluster_metadata(name: str, nodes: Iterable[ClusterNode]) -> bytes:
    """``name (u32 len), nodes_count u32``, then per node ``name (u32 len), ip (u32 len),
    tcp u16, quic u16, http u16, websocket u16, role u8, status u8``."""
    node_list = list(nodes)
    out = [_str32(name), _U32.pack(len(node_list))]
    for n in node_list:
        out.append(_str32(n.name) + _str32(n.ip) + _U16.pack(n.tcp_port) + _U16.pack(n.quic_port)
                   + _U16.pack(n.http_port) + _U16.pack(n.websocket_port)
                   + bytes((n.role, n.status)))
    return b"".join(out)


def encode_polled_prefix(partition_id: int, current_offset: int, count: int) -> bytes:
    """PollMessages reply prefix: ``partition_id u32, current_offset u64, count u32``; the
    messages (stored record bytes) follow."""
    return _POLLED.pack(partition_id, current_offset, count)
