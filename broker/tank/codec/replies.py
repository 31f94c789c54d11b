"""TANK replies: one frozen dataclass per reply shape and ``encode_reply`` (notes §3.2, §4.2, §7).

Owns: the wire codes (``ProduceError``, ``ConsumeFlag``, ``CreateTopicError``,
``PartitionFault``), the reply dataclasses, ``encode_reply(reply) -> bytes`` (a whole
frame) and ``build_chunk`` (a consume chunk cut to a fetch size).

Shapes, in brief:

* Produce (id 0x01, also for ProduceWithSeqnum): ``request_id``, then per topic in request
  order one ``err:u8`` per partition; a topic-level 0xff (unknown) or 0xfe (read-only) is a
  single byte for the whole topic; 0xfc is followed by ``addr4:u32 port:u16``.
* Consume (0x02): ``header_length:u32``, the header (partition entries whose fields depend
  on ``error_or_flags``: 0xff/0xfb/0xfd nothing, 0xfc endpoint only, 0xfe no base_seq,
  0x01 adds first_available), then the chunks back to back. An unknown topic is its
  ``partitions_cnt`` followed by u16 0xFFFF.
* DiscoverPartitions (0x06), CreateTopic (0x07), ReloadConf (0x08), and the standalone
  forms of Status (0x0a, ``cluster_aware`` 0), DiscoverTopics (0x0b, ``cluster_aware`` 0)
  and DiscoverTopology (0x0c, single node: count 0xFFFF). The cluster-aware variants of
  the last three are not encoded (Skerry answers as a single TANK node).

Which Skerry error becomes which code is the transport's ``errors`` module (later); this
module only refuses replies that would break the client (an unknown produce code makes the
C++ client abort), raising ``ValueError``: that is our bug, never the peer's.

Must not import: Twisted, sockets, ``broker.core``, the store, ``broker.tank.client``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from broker.tank.codec.framing import MsgId, encode_frame
from broker.tank.codec.primitives import (
    U16_MAX,
    U64_MAX,
    pack_str8,
    pack_u8,
    pack_u16,
    pack_u32,
    pack_u64,
    pack_varint,
)

__all__ = [
    "ConsumeFlag",
    "ConsumePartitionReply",
    "ConsumeReply",
    "ConsumeTopicReply",
    "CreateTopicError",
    "CreateTopicReply",
    "DiscoverPartitionsReply",
    "DiscoverTopicsReply",
    "DiscoverTopologyReply",
    "Endpoint",
    "PartitionFault",
    "PartitionUnavailable",
    "PartitionWatermarks",
    "ProduceError",
    "ProducePartitionAck",
    "ProduceReply",
    "ProduceTopicAck",
    "ReloadConfReply",
    "Reply",
    "StatusReply",
    "TopicInfo",
    "UnknownConsumeTopic",
    "build_chunk",
    "encode_reply",
]


class ProduceError(enum.IntEnum):
    """Produce reply ``err`` (``service_wip.cpp``; §3.2). Any other value aborts the client."""

    OK = 0x00
    UNKNOWN_PARTITION = 0x01
    IO_FAULT = 0x02
    ACKS_TIMEOUT = 0x03
    INSUFFICIENT_REPLICAS = 0x04
    INVALID_SEQNUMS = 0x0A
    OTHER_LEADER = 0xFC  # + addr4:u32 port:u16
    NO_LEADER = 0xFD
    READ_ONLY = 0xFE  # per topic
    UNKNOWN_TOPIC = 0xFF  # per topic


class ConsumeFlag(enum.IntEnum):
    """Consume reply ``error_or_flags`` (§4.2)."""

    OK = 0x00
    BOUNDARY_FAULT = 0x01  # + first_available
    SYSTEM_ERROR = 0xFB  # nothing follows
    OTHER_LEADER = 0xFC  # addr4:u32 port:u16, nothing else
    NO_LEADER = 0xFD  # nothing follows
    FIRST_BUNDLE_SPARSE = 0xFE  # no base_seq
    UNKNOWN_PARTITION = 0xFF  # nothing follows


class CreateTopicError(enum.IntEnum):
    """CreateTopic reply ``err`` (§7)."""

    OK = 0
    ALREADY_EXISTS = 1
    SYSTEM_FAULT = 2
    INVALID_REQUEST = 4
    READ_ONLY = 5
    INVALID_REQUEST_10 = 10
    UNSUPPORTED = 11


class PartitionFault(enum.IntEnum):
    """DiscoverPartitions per-partition reason when first and hw are both 2**64 - 1 (§7)."""

    SYSTEM = 0xFB
    OTHER_LEADER = 0xFC
    NO_LEADER = 0xFD


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A TANK node address as the wire has it: ``addr4`` the raw u32, then the port."""

    addr4: int
    port: int

    def pack(self) -> bytes:
        return pack_u32(self.addr4) + pack_u16(self.port)


@dataclass(frozen=True, slots=True)
class ProducePartitionAck:
    error: int = ProduceError.OK
    leader: Endpoint | None = None  # required with OTHER_LEADER


@dataclass(frozen=True, slots=True)
class ProduceTopicAck:
    """One request topic's answer; a nonzero ``topic_error`` (0xfe/0xff) replaces them all."""

    partitions: tuple[ProducePartitionAck, ...] = ()
    topic_error: int = ProduceError.OK


@dataclass(frozen=True, slots=True)
class ProduceReply:
    request_id: int
    topics: tuple[ProduceTopicAck, ...]


@dataclass(frozen=True, slots=True)
class ConsumePartitionReply:
    partition: int
    error_or_flags: int = ConsumeFlag.OK
    base_seq: int = 0
    hw: int = 0
    chunk: bytes = b""  # (bundle_length:varint bundle)*, the last bundle possibly cut
    first_available: int = 0  # only with BOUNDARY_FAULT
    leader: Endpoint | None = None  # only with OTHER_LEADER

    @classmethod
    def boundary_fault(cls, partition: int, *, first_available: int,
                       hw: int) -> ConsumePartitionReply:
        return cls(partition, ConsumeFlag.BOUNDARY_FAULT, 0, hw, b"", first_available)


@dataclass(frozen=True, slots=True)
class ConsumeTopicReply:
    name: bytes
    partitions: tuple[ConsumePartitionReply, ...]


@dataclass(frozen=True, slots=True)
class UnknownConsumeTopic:
    name: bytes
    partitions_cnt: int = 1  # as requested


@dataclass(frozen=True, slots=True)
class ConsumeReply:
    request_id: int
    topics: tuple[ConsumeTopicReply | UnknownConsumeTopic, ...]


@dataclass(frozen=True, slots=True)
class PartitionWatermarks:
    first_available: int
    hw: int


@dataclass(frozen=True, slots=True)
class PartitionUnavailable:
    reason: int
    leader: Endpoint | None = None  # with OTHER_LEADER


@dataclass(frozen=True, slots=True)
class DiscoverPartitionsReply:
    """``partitions`` empty = unknown topic (count 0)."""

    request_id: int
    topic: bytes
    partitions: tuple[PartitionWatermarks | PartitionUnavailable, ...]


@dataclass(frozen=True, slots=True)
class CreateTopicReply:
    request_id: int
    topic: bytes
    error: int = CreateTopicError.OK


@dataclass(frozen=True, slots=True)
class ReloadConfReply:
    request_id: int
    topic: bytes
    partition: int
    error: int = 0


@dataclass(frozen=True, slots=True)
class StatusReply:
    """Standalone status; the optional tail is sent when ``open_partitions`` is not None."""

    request_id: int
    topics: int
    partitions: int
    global_flags: int = 0
    open_partitions: int | None = None
    time_open_partitions: int = 0
    startup_ts: int = 0
    version: int | None = None


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: bytes
    partitions: int
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class DiscoverTopicsReply:
    request_id: int
    topics: tuple[TopicInfo, ...]


@dataclass(frozen=True, slots=True)
class DiscoverTopologyReply:
    """Single-node configuration: ``count`` 0xFFFF and nothing else."""

    request_id: int


Reply = (ProduceReply | ConsumeReply | DiscoverPartitionsReply | CreateTopicReply
         | ReloadConfReply | StatusReply | DiscoverTopicsReply | DiscoverTopologyReply)

_PARTITION_CODES = frozenset(ProduceError) - {ProduceError.READ_ONLY, ProduceError.UNKNOWN_TOPIC}


def _leader(leader: Endpoint | None, what: str) -> bytes:
    if leader is None:
        raise ValueError(f"{what}: OTHER_LEADER needs the leader's endpoint")
    return leader.pack()


def _encode_produce(reply: ProduceReply) -> bytes:
    out = bytearray(pack_u32(reply.request_id))
    for i, topic in enumerate(reply.topics):
        if topic.topic_error:
            if topic.topic_error not in (ProduceError.READ_ONLY, ProduceError.UNKNOWN_TOPIC):
                raise ValueError(f"topic {i}: 0x{topic.topic_error:02x} is no topic-level code")
            out += pack_u8(topic.topic_error)
            continue
        if not topic.partitions:
            raise ValueError(f"topic {i}: a produce ack needs one entry per partition")
        for ack in topic.partitions:
            if ack.error not in _PARTITION_CODES:
                raise ValueError(f"topic {i}: 0x{ack.error:02x} is no partition produce code")
            out += pack_u8(ack.error)
            if ack.error == ProduceError.OTHER_LEADER:
                out += _leader(ack.leader, f"topic {i}")
    return encode_frame(MsgId.PRODUCE, bytes(out))


_NOTHING_FOLLOWS = frozenset({ConsumeFlag.UNKNOWN_PARTITION, ConsumeFlag.SYSTEM_ERROR,
                              ConsumeFlag.NO_LEADER})


def _encode_consume(reply: ConsumeReply) -> bytes:
    header = bytearray(pack_u32(reply.request_id) + pack_u8(len(reply.topics)))
    chunks: list[bytes] = []
    for topic in reply.topics:
        header += pack_str8(topic.name)
        if isinstance(topic, UnknownConsumeTopic):
            header += pack_u8(topic.partitions_cnt) + pack_u16(U16_MAX)
            continue
        header += pack_u8(len(topic.partitions))
        for p in topic.partitions:
            flag = p.error_or_flags
            if flag not in ConsumeFlag.__members__.values():
                raise ValueError(f"partition {p.partition}: unknown error_or_flags 0x{flag:02x}")
            if p.partition == U16_MAX:
                raise ValueError("partition 65535 is the unknown-topic marker")
            header += pack_u16(p.partition) + pack_u8(flag)
            if flag in _NOTHING_FOLLOWS or flag == ConsumeFlag.OTHER_LEADER:
                if flag == ConsumeFlag.OTHER_LEADER:
                    header += _leader(p.leader, f"partition {p.partition}")
                if p.chunk:
                    raise ValueError(f"partition {p.partition}: a fault carries no chunk")
                continue
            if flag != ConsumeFlag.FIRST_BUNDLE_SPARSE:
                header += pack_u64(p.base_seq)
            header += pack_u64(p.hw) + pack_u32(len(p.chunk))
            if flag == ConsumeFlag.BOUNDARY_FAULT:
                if p.chunk:
                    raise ValueError(f"partition {p.partition}: a boundary fault has no chunk")
                header += pack_u64(p.first_available)
            chunks.append(p.chunk)
    return encode_frame(MsgId.CONSUME, pack_u32(len(header)) + bytes(header) + b"".join(chunks))


def _encode_discover_partitions(reply: DiscoverPartitionsReply) -> bytes:
    out = bytearray(pack_u32(reply.request_id) + pack_str8(reply.topic)
                    + pack_u16(len(reply.partitions)))
    for i, p in enumerate(reply.partitions):
        if isinstance(p, PartitionWatermarks):
            if p.first_available == U64_MAX and p.hw == U64_MAX:
                raise ValueError(f"partition {i}: both 2**64 - 1 means unavailable")
            out += pack_u64(p.first_available) + pack_u64(p.hw)
        else:
            if p.reason not in PartitionFault.__members__.values():
                raise ValueError(f"partition {i}: unknown reason 0x{p.reason:02x}")
            out += pack_u64(U64_MAX) + pack_u64(U64_MAX) + pack_u8(p.reason)
            if p.reason == PartitionFault.OTHER_LEADER:
                out += _leader(p.leader, f"partition {i}")
    return encode_frame(MsgId.DISCOVER_PARTITIONS, bytes(out))


def _encode_create_topic(reply: CreateTopicReply) -> bytes:
    return encode_frame(MsgId.CREATE_TOPIC, pack_u32(reply.request_id) + pack_str8(reply.topic)
                        + pack_u8(reply.error))


def _encode_reload_conf(reply: ReloadConfReply) -> bytes:
    return encode_frame(MsgId.RELOAD_CONF, pack_u32(reply.request_id) + pack_str8(reply.topic)
                        + pack_u16(reply.partition) + pack_u8(reply.error))


def _encode_status(reply: StatusReply) -> bytes:
    out = (pack_u32(reply.request_id) + pack_u8(reply.global_flags) + pack_u8(0)
           + pack_u32(reply.topics) + pack_u32(reply.partitions))
    if reply.open_partitions is not None:
        out += (pack_u32(reply.open_partitions) + pack_u32(reply.time_open_partitions)
                + pack_u32(reply.startup_ts))
        if reply.version is not None:
            out += pack_u32(reply.version)
    return encode_frame(MsgId.STATUS, out)


def _encode_discover_topics(reply: DiscoverTopicsReply) -> bytes:
    out = bytearray(pack_u32(reply.request_id) + pack_u32(len(reply.topics)) + pack_u8(0))
    for t in reply.topics:
        out += pack_str8(t.name) + pack_u8(1 if t.enabled else 0) + pack_u16(t.partitions)
    return encode_frame(MsgId.DISCOVER_TOPICS, bytes(out))


def _encode_discover_topology(reply: DiscoverTopologyReply) -> bytes:
    return encode_frame(MsgId.DISCOVER_TOPOLOGY, pack_u32(reply.request_id) + pack_u16(U16_MAX))


_ENCODERS: dict[type, Callable] = {
    ProduceReply: _encode_produce,
    ConsumeReply: _encode_consume,
    DiscoverPartitionsReply: _encode_discover_partitions,
    CreateTopicReply: _encode_create_topic,
    ReloadConfReply: _encode_reload_conf,
    StatusReply: _encode_status,
    DiscoverTopicsReply: _encode_discover_topics,
    DiscoverTopologyReply: _encode_discover_topology,
}


def encode_reply(reply: Reply) -> bytes:
    """The whole frame (msg id, payload size, payload) for one reply."""
    return _ENCODERS[type(reply)](reply)


def build_chunk(bundles: Iterable[bytes], fetch_size: int, *, cut: bool = False) -> bytes:
    """A consume chunk of framed bundles within ``fetch_size``.

    ``cut=False`` (Skerry's choice, §9): whole bundles only, but always the first one even
    if it alone exceeds ``fetch_size``. ``cut=True`` (TANK's behaviour, §4.4): bytes are
    taken up to ``fetch_size`` even inside a bundle.
    """
    out = bytearray()
    for bundle in bundles:
        framed = pack_varint(len(bundle)) + bundle
        if len(out) + len(framed) > fetch_size:
            if cut:
                out += framed[:fetch_size - len(out)]
            elif not out:
                out += framed
            break
        out += framed
    return bytes(out)
