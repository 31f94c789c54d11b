"""Iggy's reply bodies: one value and one encoder per reply shape.

Owns: the reply records (``StreamInfo``, ``TopicInfo``, ``PartitionInfo``,
``ConsumerGroupInfo``, ``GroupMemberInfo``, ``ClientInfo``, ``ClientGroup``, ``UserInfo``,
``TokenInfo``, ``StatsInfo``, ``ClusterNode``) and their encoders (streams, topics,
partitions, consumer groups, offsets, clients, users, tokens, stats, cluster metadata,
the polled messages' prefix). The frame around a reply is ``broker.iggy.codec.framing``'.

Must not import: Twisted, sockets, files, the core, the other codec modules but
``primitives`` and ``permissions``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from broker.iggy.codec.permissions import Permissions
from broker.iggy.codec.primitives import U16, U32, U64, pack_short_name, pack_str32

__all__ = [
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
    "encode_partition",
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
    "NO_USER",
]

NO_USER = 0xFFFFFFFF
"""``user_id`` of a client that has not logged in (ClientInfo)."""
_POLLED = struct.Struct("<IQI")
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


def encode_stream(s: StreamInfo) -> bytes:
    """``id u32, created_at u64, topics_count u32, size u64, messages_count u64, name``."""
    return _STREAM.pack(s.id, s.created_at, s.topics_count, s.size, s.messages_count) \
        + pack_short_name(s.name)


def encode_topic(t: TopicInfo) -> bytes:
    """``id u32, created_at u64, partitions_count u32, message_expiry u64, compression u8,
    max_topic_size u64, replication_factor u8, size u64, messages_count u64, name``."""
    return _TOPIC.pack(t.id, t.created_at, t.partitions_count, t.message_expiry,
                       t.compression, t.max_topic_size, t.replication_factor, t.size,
                       t.messages_count) + pack_short_name(t.name)


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
    return _GROUP.pack(g.id, g.partitions_count, g.members_count) + pack_short_name(g.name)


def encode_consumer_group_details(group: ConsumerGroupInfo,
                                  members: Iterable[GroupMemberInfo]) -> bytes:
    """The group, then each member: ``id u32, partitions_count u32, partition ids u32...``."""
    out = [encode_consumer_group(group)]
    for m in members:
        out.append(U32.pack(m.id) + U32.pack(len(m.partitions))
                   + b"".join(U32.pack(p) for p in m.partitions))
    return b"".join(out)


def encode_consumer_offset(partition_id: int, current_offset: int, stored_offset: int) -> bytes:
    """``partition_id u32, current_offset u64, stored_offset u64``."""
    return _OFFSET.pack(partition_id, current_offset, stored_offset)


def encode_client(c: ClientInfo) -> bytes:
    """``client_id u32, user_id u32 (u32::MAX: none), transport u8, address (u32 len),
    consumer_groups_count u32``."""
    return (_CLIENT.pack(c.client_id, NO_USER if c.user_id is None else c.user_id, c.transport)
            + pack_str32(c.address) + U32.pack(c.consumer_groups_count))


def encode_client_details(c: ClientInfo, groups: Iterable[ClientGroup]) -> bytes:
    """GetMe / GetClient: the client, then ``stream_id, topic_id, group_id`` per group."""
    return encode_client(c) + b"".join(_CLIENT_GROUP.pack(g.stream_id, g.topic_id, g.group_id)
                                       for g in groups)


def encode_user(u: UserInfo) -> bytes:
    """``id u32, created_at u64, status u8, username (u8 len)``."""
    return _USER.pack(u.id, u.created_at, u.status) + pack_short_name(u.username)


def encode_user_details(u: UserInfo, permissions: Permissions | None) -> bytes:
    """GetUser / CreateUser: the user, ``u8 has_permissions``, then ``u32 length`` and the
    permissions blob when there are permissions."""
    if permissions is None:
        return encode_user(u) + b"\x00"
    blob = permissions.encode()
    return encode_user(u) + b"\x01" + U32.pack(len(blob)) + blob


def encode_token(t: TokenInfo) -> bytes:
    """``name (u8 len), expiry_at u64`` (0 = never)."""
    return pack_short_name(t.name) + U64.pack(t.expiry_at or 0)


def encode_raw_token(token: str) -> bytes:
    """CreatePersonalAccessToken: the token itself, ``u8 length`` then the token."""
    return pack_short_name(token)


def encode_identity(user_id: int) -> bytes:
    """LoginUser / LoginWithPersonalAccessToken: ``user_id u32``."""
    return U32.pack(user_id)


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
    strings = b"".join(pack_str32(v) for v in (s.hostname, s.os_name, s.os_version,
                                            s.kernel_version, s.server_version))
    tail = (U32.pack(s.server_semver) + U32.pack(0) + U32.pack(s.threads_count)
            + U64.pack(s.free_disk_space) + U64.pack(s.total_disk_space))
    return head + strings + tail


def encode_cluster_metadata(name: str, nodes: Iterable[ClusterNode]) -> bytes:
    """``name (u32 len), nodes_count u32``, then per node ``name (u32 len), ip (u32 len),
    tcp u16, quic u16, http u16, websocket u16, role u8, status u8``."""
    node_list = list(nodes)
    out = [pack_str32(name), U32.pack(len(node_list))]
    for n in node_list:
        out.append(pack_str32(n.name) + pack_str32(n.ip) + U16.pack(n.tcp_port) + U16.pack(n.quic_port)
                   + U16.pack(n.http_port) + U16.pack(n.websocket_port)
                   + bytes((n.role, n.status)))
    return b"".join(out)


def encode_polled_prefix(partition_id: int, current_offset: int, count: int) -> bytes:
    """PollMessages reply prefix: ``partition_id u32, current_offset u64, count u32``; the
    messages (stored record bytes) follow."""
    return _POLLED.pack(partition_id, current_offset, count)
