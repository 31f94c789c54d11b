"""Iggy's request bodies: bytes -> command for the broker, command -> bytes for clients.

Owns: ``decode_request(code, payload)`` (one parser per request code, every length
checked; an unknown code or a malformed payload raises ``IggyError`` with the status that
answers it, nothing else), ``encode_request(command)`` (the whole frame, for clients, tests
and the benchmark) and ``encode_send_payload`` (the SendMessages payload: metadata, index,
messages). Layouts follow ``spec/iggy-binary-notes.md`` where the real client differs from
the seed; docs/iggy.md lists them.

Must not import: Twisted, sockets, files, the core, anything with state.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from broker.iggy.codec.commands import (
    ChangePassword,
    Code,
    Command,
    CreateConsumerGroup,
    CreatePartitions,
    CreatePersonalAccessToken,
    CreateStream,
    CreateTopic,
    CreateUser,
    DeleteConsumerGroup,
    DeleteConsumerOffset,
    DeletePartitions,
    DeletePersonalAccessToken,
    DeleteSegments,
    DeleteStream,
    DeleteTopic,
    DeleteUser,
    FlushUnsavedBuffer,
    GetClient,
    GetClients,
    GetClusterMetadata,
    GetConsumerGroup,
    GetConsumerGroups,
    GetConsumerOffset,
    GetMe,
    GetPersonalAccessTokens,
    GetSnapshot,
    GetStats,
    GetStream,
    GetStreams,
    GetTopic,
    GetTopics,
    GetUser,
    GetUsers,
    JoinConsumerGroup,
    LeaveConsumerGroup,
    LoginUser,
    LoginWithPersonalAccessToken,
    LogoutUser,
    Ping,
    PollMessages,
    PurgeStream,
    PurgeTopic,
    SendMessages,
    StoreConsumerOffset,
    UpdatePermissions,
    UpdateStream,
    UpdateTopic,
    UpdateUser,
)
from broker.iggy.codec.framing import REQUEST_HEAD
from broker.iggy.codec.messages import INDEX, INDEX_SIZE, message_sizes
from broker.iggy.codec.permissions import permissions_field, read_permissions
from broker.iggy.codec.primitives import (
    U32,
    U64,
    Consumer,
    Identifier,
    PartitioningKind,
    PollingKind,
    Reader,
    pack_name,
    pack_optional_partition,
    pack_text32,
)
from broker.iggy.codec.status import IggyError, Status

__all__ = ["decode_request", "encode_request", "encode_send_payload"]


# -------------------------------------------------------------- request parsers


def _empty(cls: type[Command]) -> Callable[[Reader], Command]:
    def parse(r: Reader) -> Command:
        r.end()
        return cls()
    return parse


def _stream_only(cls: type[Any]) -> Callable[[Reader], Command]:
    def parse(r: Reader) -> Command:
        stream = r.identifier("stream id")
        r.end()
        return cls(stream)  # type: ignore[no-any-return]
    return parse


def _stream_topic(cls: type[Any]) -> Callable[[Reader], Command]:
    def parse(r: Reader) -> Command:
        stream = r.identifier("stream id")
        topic = r.identifier("topic id")
        r.end()
        return cls(stream, topic)  # type: ignore[no-any-return]
    return parse


def _stream_topic_group(cls: type[Any]) -> Callable[[Reader], Command]:
    def parse(r: Reader) -> Command:
        stream = r.identifier("stream id")
        topic = r.identifier("topic id")
        group = r.identifier("consumer group id")
        r.end()
        return cls(stream, topic, group)  # type: ignore[no-any-return]
    return parse


def _user_only(cls: type[Any]) -> Callable[[Reader], Command]:
    def parse(r: Reader) -> Command:
        user = r.identifier("user id")
        r.end()
        return cls(user)  # type: ignore[no-any-return]
    return parse


def _get_snapshot(r: Reader) -> Command:
    return GetSnapshot(bytes(r.data))


def _get_client(r: Reader) -> Command:
    client_id = r.u32("client id")
    r.end()
    return GetClient(client_id)


def _create_user(r: Reader) -> Command:
    username = r.name("username", Status.INVALID_USERNAME)
    password = r.name("password", Status.INVALID_PASSWORD)
    status = r.u8("status")
    permissions = read_permissions(r)
    r.end()
    return CreateUser(username, password, status, permissions)


def _update_user(r: Reader) -> Command:
    user = r.identifier("user id")
    username = r.name("username", Status.INVALID_USERNAME) if r.boolean("has_username") else None
    status = r.u8("status") if r.boolean("has_status") else None
    r.end()
    return UpdateUser(user, username, status)


def _update_permissions(r: Reader) -> Command:
    user = r.identifier("user id")
    permissions = read_permissions(r)
    r.end()
    return UpdatePermissions(user, permissions)


def _change_password(r: Reader) -> Command:
    user = r.identifier("user id")
    current = r.name("current password", Status.INVALID_PASSWORD)
    new = r.name("new password", Status.INVALID_PASSWORD)
    r.end()
    return ChangePassword(user, current, new)


def _login_user(r: Reader) -> Command:
    username = r.name("username", Status.INVALID_USERNAME)
    password = r.name("password", Status.INVALID_PASSWORD)
    version = r.optional_text32("version")
    context = r.optional_text32("context")
    r.end()
    return LoginUser(username, password, version, context)


def _create_pat(r: Reader) -> Command:
    name = r.name("token name", Status.INVALID_PERSONAL_ACCESS_TOKEN_NAME)
    expiry = r.u64("token expiry")
    r.end()
    return CreatePersonalAccessToken(name, expiry)


def _delete_pat(r: Reader) -> Command:
    name = r.name("token name", Status.INVALID_PERSONAL_ACCESS_TOKEN_NAME)
    r.end()
    return DeletePersonalAccessToken(name)


def _login_pat(r: Reader) -> Command:
    token = r.name("token", Status.INVALID_PERSONAL_ACCESS_TOKEN)
    r.end()
    return LoginWithPersonalAccessToken(token)


def _poll_messages(r: Reader) -> Command:
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


def _send_messages(r: Reader) -> Command:
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


def _flush(r: Reader) -> Command:
    stream = r.identifier("stream id")
    topic = r.identifier("topic id")
    partition_id = r.u32("partition id")
    fsync = r.boolean("fsync")
    r.end()
    return FlushUnsavedBuffer(stream, topic, partition_id, fsync)


def _offset_target(r: Reader) -> tuple[Consumer, Identifier, Identifier, int | None]:
    consumer = r.consumer()
    stream = r.identifier("stream id")
    topic = r.identifier("topic id")
    return consumer, stream, topic, r.optional_partition()


def _get_offset(r: Reader) -> Command:
    target = _offset_target(r)
    r.end()
    return GetConsumerOffset(*target)


def _store_offset(r: Reader) -> Command:
    target = _offset_target(r)
    offset = r.u64("offset")
    r.end()
    return StoreConsumerOffset(*target, offset)


def _delete_offset(r: Reader) -> Command:
    target = _offset_target(r)
    r.end()
    return DeleteConsumerOffset(*target)


def _create_stream(r: Reader) -> Command:
    name = r.name("stream name", Status.INVALID_STREAM_NAME)
    r.end()
    return CreateStream(name)


def _update_stream(r: Reader) -> Command:
    stream = r.identifier("stream id")
    name = r.name("stream name", Status.INVALID_STREAM_NAME)
    r.end()
    return UpdateStream(stream, name)


def _create_topic(r: Reader) -> Command:
    stream = r.identifier("stream id")
    partitions = r.u32("partitions count")
    compression = r.u8("compression algorithm")
    expiry = r.u64("message expiry")
    max_size = r.u64("max topic size")
    replication = r.u8("replication factor")
    name = r.name("topic name", Status.INVALID_TOPIC_NAME)
    r.end()
    return CreateTopic(stream, partitions, compression, expiry, max_size, replication, name)


def _update_topic(r: Reader) -> Command:
    stream = r.identifier("stream id")
    topic = r.identifier("topic id")
    compression = r.u8("compression algorithm")
    expiry = r.u64("message expiry")
    max_size = r.u64("max topic size")
    replication = r.u8("replication factor")
    name = r.name("topic name", Status.INVALID_TOPIC_NAME)
    r.end()
    return UpdateTopic(stream, topic, compression, expiry, max_size, replication, name)


def _partitions(cls: type[Any]) -> Callable[[Reader], Command]:
    def parse(r: Reader) -> Command:
        stream = r.identifier("stream id")
        topic = r.identifier("topic id")
        count = r.u32("partitions count")
        r.end()
        return cls(stream, topic, count)  # type: ignore[no-any-return]
    return parse


def _delete_segments(r: Reader) -> Command:
    stream = r.identifier("stream id")
    topic = r.identifier("topic id")
    partition_id = r.u32("partition id")
    count = r.u32("segments count")
    r.end()
    return DeleteSegments(stream, topic, partition_id, count)


def _create_group(r: Reader) -> Command:
    stream = r.identifier("stream id")
    topic = r.identifier("topic id")
    name = r.name("consumer group name", Status.INVALID_CONSUMER_GROUP_NAME)
    r.end()
    return CreateConsumerGroup(stream, topic, name)


_PARSERS: dict[int, Callable[[Reader], Command]] = {
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
    return parser(Reader(payload))


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
        return U32.pack(cmd.client_id)
    if isinstance(cmd, GetUser | DeleteUser):
        return c.user_id.encode()  # type: ignore[no-any-return]
    if isinstance(cmd, CreateUser):
        return (pack_name(cmd.username) + pack_name(cmd.password) + bytes((cmd.status,))
                + permissions_field(cmd.permissions))
    if isinstance(cmd, UpdateUser):
        out = cmd.user_id.encode()
        out += b"\x00" if cmd.username is None else b"\x01" + pack_name(cmd.username)
        out += b"\x00" if cmd.status is None else bytes((1, cmd.status))
        return out
    if isinstance(cmd, UpdatePermissions):
        return cmd.user_id.encode() + permissions_field(cmd.permissions)
    if isinstance(cmd, ChangePassword):
        return cmd.user_id.encode() + pack_name(cmd.current_password) + pack_name(cmd.new_password)
    if isinstance(cmd, LoginUser):
        return (pack_name(cmd.username) + pack_name(cmd.password) + pack_text32(cmd.version)
                + pack_text32(cmd.context))
    if isinstance(cmd, CreatePersonalAccessToken):
        return pack_name(cmd.name) + U64.pack(cmd.expiry)
    if isinstance(cmd, DeletePersonalAccessToken):
        return pack_name(cmd.name)
    if isinstance(cmd, LoginWithPersonalAccessToken):
        return pack_name(cmd.token)
    if isinstance(cmd, PollMessages):
        return (cmd.consumer.encode() + cmd.stream.encode() + cmd.topic.encode()
                + pack_optional_partition(cmd.partition_id) + bytes((int(cmd.strategy),))
                + U64.pack(cmd.value) + U32.pack(cmd.count) + bytes((int(cmd.auto_commit),)))
    if isinstance(cmd, SendMessages):
        return encode_send_payload(cmd.stream, cmd.topic, cmd.partitioning, cmd.key,
                                   message_sizes(cmd.messages), cmd.messages)
    if isinstance(cmd, FlushUnsavedBuffer):
        return (cmd.stream.encode() + cmd.topic.encode() + U32.pack(cmd.partition_id)
                + bytes((int(cmd.fsync),)))
    if isinstance(cmd, GetConsumerOffset | DeleteConsumerOffset):
        return (c.consumer.encode() + c.stream.encode() + c.topic.encode()
                + pack_optional_partition(c.partition_id))
    if isinstance(cmd, StoreConsumerOffset):
        return (cmd.consumer.encode() + cmd.stream.encode() + cmd.topic.encode()
                + pack_optional_partition(cmd.partition_id) + U64.pack(cmd.offset))
    if isinstance(cmd, GetStream | DeleteStream | PurgeStream | GetTopics):
        return c.stream.encode()  # type: ignore[no-any-return]
    if isinstance(cmd, CreateStream):
        return pack_name(cmd.name)
    if isinstance(cmd, UpdateStream):
        return cmd.stream.encode() + pack_name(cmd.name)
    if isinstance(cmd, GetTopic | DeleteTopic | PurgeTopic | GetConsumerGroups):
        return c.stream.encode() + c.topic.encode()  # type: ignore[no-any-return]
    if isinstance(cmd, CreateTopic):
        return (cmd.stream.encode() + U32.pack(cmd.partitions_count)
                + bytes((cmd.compression,)) + U64.pack(cmd.message_expiry)
                + U64.pack(cmd.max_topic_size) + bytes((cmd.replication_factor,))
                + pack_name(cmd.name))
    if isinstance(cmd, UpdateTopic):
        return (cmd.stream.encode() + cmd.topic.encode() + bytes((cmd.compression,))
                + U64.pack(cmd.message_expiry) + U64.pack(cmd.max_topic_size)
                + bytes((cmd.replication_factor,)) + pack_name(cmd.name))
    if isinstance(cmd, CreatePartitions | DeletePartitions):
        return c.stream.encode() + c.topic.encode() + U32.pack(c.partitions_count)  # type: ignore[no-any-return]
    if isinstance(cmd, DeleteSegments):
        return (cmd.stream.encode() + cmd.topic.encode() + U32.pack(cmd.partition_id)
                + U32.pack(cmd.segments_count))
    if isinstance(cmd, GetConsumerGroup | DeleteConsumerGroup | JoinConsumerGroup
                  | LeaveConsumerGroup):
        return c.stream.encode() + c.topic.encode() + c.group.encode()  # type: ignore[no-any-return]
    if isinstance(cmd, CreateConsumerGroup):
        return cmd.stream.encode() + cmd.topic.encode() + pack_name(cmd.name)
    raise TypeError(f"not an Iggy command: {cmd!r}")


def encode_request(cmd: Command) -> bytes:
    """The whole request frame: ``u32 length, u32 code, payload``."""
    payload = _encode_payload(cmd)
    return REQUEST_HEAD.pack(4 + len(payload), int(cmd.CODE)) + payload


def encode_send_payload(stream: Identifier, topic: Identifier, partitioning: PartitioningKind,
                        key: bytes, sizes: Sequence[int], messages: bytes) -> bytes:
    """SendMessages payload: ``metadata_length u32``, stream, topic, partitioning,
    ``messages_count u32``, the 16-byte index per message, then the messages."""
    meta = (stream.encode() + topic.encode() + bytes((int(partitioning), len(key))) + key
            + U32.pack(len(sizes)))
    index = bytearray()
    end = 0
    for size in sizes:
        end += size
        index += INDEX.pack(0, end, 0)
    return U32.pack(len(meta)) + meta + bytes(index) + messages
