"""TANK requests: one frozen dataclass per request and ``parse_request`` (notes §3, §4, §7).

Owns: the request dataclasses, ``parse_request(frame) -> Request``, and the broker's
normalisation of consume limits (``normalise_max_wait``, ``cap_bytes``; §2.7).

Parsed: Produce (0x01), Consume (0x02, client versions 0, 2 and 3: ``op_flags`` is read
when ``client_version >= 3``), Ping (0x03), ProduceWithSeqnum (0x05), DiscoverPartitions
(0x06), CreateTopic (0x07), ReloadConf (0x08), Status (0x0a), DiscoverTopics (0x0b),
DiscoverTopology (0x0c). Refused with ``CodecError``: the obsolete 0x04, ConsumePeer
(0x09, broker to broker replication, whose layout the notes do not give) and unknown ids.

Bundles stay bytes here (``bundles.decode_bundle`` decodes them) so that a bad bundle can
be answered per partition while a bad frame closes the connection (§9). Names (topics,
client ids) stay bytes: TANK does not require UTF-8. Every payload must be consumed
exactly; trailing bytes are a ``CodecError``.

Must not import: Twisted, sockets, ``broker.core``, the store, ``broker.tank.client``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.tank.codec.framing import Frame, MsgId
from broker.tank.codec.primitives import CodecError, Reader

__all__ = [
    "Consume",
    "ConsumePartition",
    "ConsumeTopic",
    "CreateTopic",
    "DiscoverPartitions",
    "DiscoverTopics",
    "DiscoverTopology",
    "MAX_BYTES_CAP",
    "Ping",
    "Produce",
    "ProducePartition",
    "ProduceTopic",
    "ProduceWithSeqnum",
    "ReloadConf",
    "Request",
    "Status",
    "cap_bytes",
    "normalise_max_wait",
    "parse_request",
]

MAX_BYTES_CAP = 64 * 1024 * 1024
_WAIT_STEP_MS = 64
_WAIT_MIN_MS = 320
_WAIT_MAX_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class ProducePartition:
    partition: int
    bundle: bytes
    base_seq: int | None = None  # only in ProduceWithSeqnum: seq of the bundle's first message


@dataclass(frozen=True, slots=True)
class ProduceTopic:
    name: bytes
    partitions: tuple[ProducePartition, ...]


@dataclass(frozen=True, slots=True)
class Produce:
    """0x01. ``required_acks`` 0 means *all of the ISR* (not "no ack"); standalone ignores it."""

    client_version: int
    request_id: int
    client_id: bytes
    required_acks: int
    ack_timeout_ms: int
    topics: tuple[ProduceTopic, ...]


@dataclass(frozen=True, slots=True)
class ProduceWithSeqnum:
    """0x05: Produce whose partitions carry ``base_seq``; answered with msg id 0x01."""

    client_version: int
    request_id: int
    client_id: bytes
    required_acks: int
    ack_timeout_ms: int
    topics: tuple[ProduceTopic, ...]


@dataclass(frozen=True, slots=True)
class ConsumePartition:
    partition: int
    seq_num: int  # 0 = first available; 2**64 - 1 = from now (hw + 1)
    fetch_size: int


@dataclass(frozen=True, slots=True)
class ConsumeTopic:
    name: bytes
    partitions: tuple[ConsumePartition, ...]


@dataclass(frozen=True, slots=True)
class Consume:
    """0x02, as sent (raw ``max_wait_ms``/``min_bytes``; see ``normalise_max_wait``)."""

    client_version: int
    request_id: int
    client_id: bytes
    max_wait_ms: int
    min_bytes: int
    op_flags: int  # 0 unless client_version >= 3; bit 0 = prefer_local_node
    topics: tuple[ConsumeTopic, ...]


@dataclass(frozen=True, slots=True)
class Ping:
    """0x03, empty payload: the broker's greeting; a peer may send one too."""


@dataclass(frozen=True, slots=True)
class DiscoverPartitions:
    """0x06. An empty ``partitions`` asks for all of them."""

    request_id: int
    topic: bytes
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class CreateTopic:
    request_id: int
    topic: bytes
    partitions: int
    config: bytes = b""


@dataclass(frozen=True, slots=True)
class ReloadConf:
    request_id: int
    topic: bytes
    partition: int


@dataclass(frozen=True, slots=True)
class Status:
    request_id: int


@dataclass(frozen=True, slots=True)
class DiscoverTopics:
    request_id: int
    flags: int = 0


@dataclass(frozen=True, slots=True)
class DiscoverTopology:
    request_id: int
    flags: int = 0


Request = (Produce | ProduceWithSeqnum | Consume | Ping | DiscoverPartitions | CreateTopic
           | ReloadConf | Status | DiscoverTopics | DiscoverTopology)


def normalise_max_wait(max_wait_ms: int) -> int:
    """§2.7: 0 stays 0; otherwise round up to 64 ms, then at least 320 ms, at most 1 h."""
    if max_wait_ms == 0:
        return 0
    rounded = -(-max_wait_ms // _WAIT_STEP_MS) * _WAIT_STEP_MS
    return min(max(rounded, _WAIT_MIN_MS), _WAIT_MAX_MS)


def cap_bytes(n: int) -> int:
    """§2.7: ``min_bytes`` and each ``fetch_size`` are capped at 64 MiB."""
    return min(n, MAX_BYTES_CAP)


def _parse_produce(r: Reader, with_seqnum: bool) -> Produce | ProduceWithSeqnum:
    client_version = r.u16("client_version")
    request_id = r.u32("request_id")
    client_id = r.str8("client_id")
    required_acks = r.u8("required_acks")
    ack_timeout = r.u32("ack_timeout")
    topics = []
    for _ in range(r.u8("topics_cnt")):
        name = r.str8("topic name")
        parts = []
        partitions_cnt = r.u8("partitions_cnt")
        if not partitions_cnt:  # its reply would have no byte for it: nothing to answer
            raise CodecError("a produce topic with no partitions")
        for _ in range(partitions_cnt):
            partition = r.u16("partition_id")
            length = r.varint("bundle_length")
            base_seq = r.u64("base_seq_num") if with_seqnum else None
            parts.append(ProducePartition(partition, r.raw(length, "bundle"), base_seq))
        topics.append(ProduceTopic(name, tuple(parts)))
    r.expect_end("the produce request")
    cls = ProduceWithSeqnum if with_seqnum else Produce
    return cls(client_version, request_id, client_id, required_acks, ack_timeout, tuple(topics))


def _parse_consume(r: Reader) -> Consume:
    client_version = r.u16("client_version")
    request_id = r.u32("request_id")
    client_id = r.str8("client_id")
    max_wait = r.u64("max_wait")
    min_bytes = r.u32("min_bytes")
    op_flags = r.u8("op_flags") if client_version >= 3 else 0
    topics = []
    for _ in range(r.u8("topics_cnt")):
        name = r.str8("topic name")
        parts = tuple(ConsumePartition(r.u16("partition_id"), r.u64("seq_num"),
                                       r.u32("fetch_size"))
                      for _ in range(r.u8("partitions_cnt")))
        topics.append(ConsumeTopic(name, parts))
    r.expect_end("the consume request")
    return Consume(client_version, request_id, client_id, max_wait, min_bytes, op_flags,
                   tuple(topics))


def _parse_ping(r: Reader) -> Ping:
    r.expect_end("a ping (its payload is empty)")
    return Ping()


def _parse_discover_partitions(r: Reader) -> DiscoverPartitions:
    request_id = r.u32("request_id")
    topic = r.str8("topic name")
    if r.remaining() % 2:
        raise CodecError("discover partitions: partition id list is not whole u16s")
    ids = tuple(r.u16("partition_id") for _ in range(r.remaining() // 2))
    return DiscoverPartitions(request_id, topic, ids)


def _parse_create_topic(r: Reader) -> CreateTopic:
    request_id = r.u32("request_id")
    topic = r.str8("topic name")
    partitions = r.u16("partitions")
    config = r.raw(r.varint("config_length"), "config")
    r.expect_end("the create topic request")
    return CreateTopic(request_id, topic, partitions, config)


def _parse_reload_conf(r: Reader) -> ReloadConf:
    out = ReloadConf(r.u32("request_id"), r.str8("topic name"), r.u16("partition"))
    r.expect_end("the reload conf request")
    return out


def _parse_status(r: Reader) -> Status:
    out = Status(r.u32("request_id"))
    r.expect_end("the status request")
    return out


def _parse_discover_topics(r: Reader) -> DiscoverTopics:
    out = DiscoverTopics(r.u32("request_id"), r.u8("flags"))
    r.expect_end("the discover topics request")
    return out


def _parse_discover_topology(r: Reader) -> DiscoverTopology:
    out = DiscoverTopology(r.u32("request_id"), r.u8("flags"))
    r.expect_end("the discover topology request")
    return out


_PARSERS: dict[int, Callable[[Reader], Request]] = {
    MsgId.PRODUCE: lambda r: _parse_produce(r, with_seqnum=False),
    MsgId.CONSUME: _parse_consume,
    MsgId.PING: _parse_ping,
    MsgId.PRODUCE_WITH_SEQNUM: lambda r: _parse_produce(r, with_seqnum=True),
    MsgId.DISCOVER_PARTITIONS: _parse_discover_partitions,
    MsgId.CREATE_TOPIC: _parse_create_topic,
    MsgId.RELOAD_CONF: _parse_reload_conf,
    MsgId.STATUS: _parse_status,
    MsgId.DISCOVER_TOPICS: _parse_discover_topics,
    MsgId.DISCOVER_TOPOLOGY: _parse_discover_topology,
}


def parse_request(frame: Frame) -> Request:
    """One frame to one request; any malformed or unsupported frame raises ``CodecError``."""
    parser = _PARSERS.get(frame.msg_id)
    if parser is None:
        if frame.msg_id == MsgId.OBSOLETE_REG_REPLICA:
            raise CodecError("msg id 0x04 (RegReplica) is obsolete")
        if frame.msg_id == MsgId.CONSUME_PEER:
            raise CodecError("msg id 0x09 (ConsumePeer) is broker-to-broker; not served")
        raise CodecError(f"unknown msg id 0x{frame.msg_id:02x}")
    return parser(Reader(frame.payload))
