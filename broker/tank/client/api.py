"""The TANK client's requests and reply decoding (spec/tank-notes.md §3, §4, §6, §7).

What libtank sends and how it reads the answers, rebuilt from the notes' client-side
sections. Owns: ``build_*`` (whole request frames, bytes), ``decode_*`` (reply payloads to
plain results), the result types (``ProduceAck``, ``PartitionData``, ``ConsumeResult``,
``Discovered``, ``Fault``) and ``clamp_seq`` (``adjust_seqnum_by_boundaries``).

Entries are grouped by topic in order of first appearance, as libtank does; the produce
and consume decoders take the same entries as their builder, because a TANK reply only
makes sense next to the request it answers (produce acks carry no topic names).

Must not import: Twisted, ``broker.core``, the store, ``broker.tank.codec``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from broker.tank.client.bundle import Consumed, Msg, bundle_for, read_chunk
from broker.tank.client.wire import In, Out, TankDecodeError

__all__ = [
    "ConsumeResult",
    "Discovered",
    "Fault",
    "PartitionData",
    "ProduceAck",
    "SEQ_TAIL",
    "build_consume",
    "build_create_topic",
    "build_discover_partitions",
    "build_ping",
    "build_produce",
    "build_produce_with_seqnum",
    "clamp_seq",
    "decode_consume_reply",
    "decode_create_topic_reply",
    "decode_discover_partitions_reply",
    "decode_produce_reply",
    "group_by_topic",
    "reply_request_id",
]

SEQ_TAIL = (1 << 64) - 1  # "from now": hw + 1

_PRODUCE, _CONSUME, _PING, _PRODUCE_SEQ, _DISCOVER, _CREATE = 1, 2, 3, 5, 6, 7

# produce err -> libtank fault type (§3.2); 0xfc/0xfd become OtherLeader / NoLeader here
_PRODUCE_FAULTS = {1: "UnknownPartition", 2: "SystemFail", 3: "SystemFail",
                   4: "InsufficientReplicas", 10: "InvalidReq", 0xFD: "NoLeader",
                   0xFE: "Access", 0xFF: "UnknownTopic"}
_CONSUME_FAULTS = {0xFF: "UnknownPartition", 0xFB: "SystemFail", 0xFD: "NoLeader"}
_CREATE_FAULTS = {1: "AlreadyExists", 2: "SystemFail", 4: "InvalidReq", 5: "Access",
                  10: "InvalidReq", 11: "Unsupported"}


@dataclass(frozen=True)
class Fault:
    kind: str
    topic: bytes
    partition: int | None = None
    first_available: int | None = None
    hw: int | None = None
    leader: tuple[int, int] | None = None  # (addr4, port)


@dataclass(frozen=True)
class ProduceAck:
    topic: bytes
    partition: int


@dataclass
class PartitionData:
    topic: bytes
    partition: int
    messages: list[Consumed]
    hw: int
    next_seq: int
    min_fetch_size: int
    drained: bool


@dataclass
class ConsumeResult:
    request_id: int
    data: list[PartitionData] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)


@dataclass(frozen=True)
class Discovered:
    partition: int
    first_available: int
    hw: int


def _b(name: bytes | str) -> bytes:
    return name.encode() if isinstance(name, str) else name


def group_by_topic(entries: Sequence[tuple]) -> list[tuple[bytes, list[tuple]]]:
    """``[(topic, rest...)]`` -> ``[(topic, [rest, ...])]`` in order of first appearance."""
    groups: dict[bytes, list[tuple]] = {}
    for topic, *rest in entries:
        groups.setdefault(_b(topic), []).append(tuple(rest))
    return list(groups.items())


def build_ping() -> bytes:
    return Out().frame(_PING)


def _produce(msg_id: int, request_id: int, entries: Sequence[tuple], client_id: bytes,
             client_version: int, required_acks: int, ack_timeout: int) -> bytes:
    o = Out().put("H", client_version).put("I", request_id).s8(client_id)
    o.put("B", required_acks).put("I", ack_timeout)
    groups = group_by_topic(entries)
    o.put("B", len(groups))
    for topic, parts in groups:
        o.s8(topic).put("B", len(parts))
        for part in parts:
            if msg_id == _PRODUCE_SEQ:
                partition, base_seq, msgs = part
            else:
                (partition, msgs), base_seq = part, None
            bundle = bundle_for(msgs)
            o.put("H", partition).var(len(bundle))
            if base_seq is not None:
                o.put("Q", base_seq)
            o.raw(bundle)
    return o.frame(msg_id)


def build_produce(request_id: int, entries: Sequence[tuple[bytes, int, Sequence[Msg]]], *,
                  client_id: bytes = b"c++", client_version: int = 2, required_acks: int = 0,
                  ack_timeout: int = 0) -> bytes:
    """Produce (0x01): ``entries`` = ``(topic, partition, msgs)``, one bundle each."""
    return _produce(_PRODUCE, request_id, entries, client_id, client_version, required_acks,
                    ack_timeout)


def build_produce_with_seqnum(request_id: int,
                              entries: Sequence[tuple[bytes, int, int, Sequence[Msg]]], *,
                              client_id: bytes = b"c++", client_version: int = 2) -> bytes:
    """ProduceWithSeqnum (0x05): ``(topic, partition, base_seq, msgs)``; msgs with ``seq``
    set make a sparse bundle."""
    return _produce(_PRODUCE_SEQ, request_id, entries, client_id, client_version, 0, 0)


def build_consume(request_id: int, entries: Sequence[tuple[bytes, int, int, int]], *,
                  max_wait: int = 0, min_bytes: int = 0, client_version: int = 2,
                  op_flags: int = 0, client_id: bytes = b"") -> bytes:
    """Consume (0x02): ``(topic, partition, seq_num, fetch_size)``; libtank sends version 2
    and an empty client id, version 3 (with ``op_flags``) when flags are set."""
    if op_flags and client_version < 3:
        client_version = 3
    o = Out().put("H", client_version).put("I", request_id).s8(client_id)
    o.put("Q", max_wait).put("I", min_bytes)
    if client_version >= 3:
        o.put("B", op_flags)
    groups = group_by_topic(entries)
    o.put("B", len(groups))
    for topic, parts in groups:
        o.s8(topic).put("B", len(parts))
        for partition, seq, fetch_size in parts:
            o.put("H", partition).put("Q", seq).put("I", fetch_size)
    return o.frame(_CONSUME)


def build_discover_partitions(request_id: int, topic: bytes,
                              partitions: Sequence[int] = ()) -> bytes:
    o = Out().put("I", request_id).s8(topic)
    for p in partitions:
        o.put("H", p)
    return o.frame(_DISCOVER)


def build_create_topic(request_id: int, topic: bytes, partitions: int,
                       config: bytes = b"") -> bytes:
    return Out().put("I", request_id).s8(topic).put("H", partitions).var(len(config)).raw(
        config).frame(_CREATE)


def reply_request_id(msg_id: int, payload: bytes) -> int | None:
    """The request id a reply answers (None for a ping); consume's comes after its
    ``header_length``."""
    if msg_id == _PING:
        return None
    at = 4 if msg_id == _CONSUME else 0
    if len(payload) < at + 4:
        raise TankDecodeError(f"reply 0x{msg_id:02x} too short for a request id")
    return struct.unpack_from("<I", payload, at)[0]


def decode_produce_reply(payload: bytes, entries: Sequence[tuple]
                         ) -> tuple[int, list[ProduceAck], list[Fault]]:
    """A produce reply read against its request's ``entries`` (the builder's argument)."""
    src = In(payload)
    request_id = src.get("I")
    acks: list[ProduceAck] = []
    faults: list[Fault] = []
    for topic, parts in group_by_topic(entries):
        for i, part in enumerate(parts):
            partition = part[0]
            err = src.get("B")
            if i == 0 and err in (0xFE, 0xFF):
                faults.append(Fault(_PRODUCE_FAULTS[err], topic))
                break
            if err == 0:
                acks.append(ProduceAck(topic, partition))
            elif err == 0xFC:
                addr, port = src.get("I"), src.get("H")
                faults.append(Fault("OtherLeader", topic, partition, leader=(addr, port)))
            elif err in _PRODUCE_FAULTS and err not in (0xFE, 0xFF):
                faults.append(Fault(_PRODUCE_FAULTS[err], topic, partition))
            else:
                raise TankDecodeError(f"produce err 0x{err:02x} (libtank: IMPLEMENT_ME)")
    if src.left():
        raise TankDecodeError(f"{src.left()} bytes after the produce reply")
    return request_id, acks, faults


def decode_consume_reply(payload: bytes, entries: Sequence[tuple[bytes, int, int, int]]
                         ) -> ConsumeResult:
    """A consume reply, read like ``process_consume``: the messages at or after the
    requested seq, ``next_seq``, ``min_fetch_size``, ``drained`` and the faults."""
    wanted = {(_b(t), p): (seq, fs) for t, p, seq, fs in entries}
    src = In(payload)
    header_length = src.get("I")
    chunks_at = 4 + header_length
    if chunks_at > len(payload):
        raise TankDecodeError("consume header_length past the payload")
    src.end = chunks_at
    res = ConsumeResult(src.get("I"))
    for _ in range(src.get("B")):
        topic = src.s8()
        count = src.get("B")
        if src.left() >= 2 and payload[src.pos:src.pos + 2] == b"\xff\xff":
            src.pos += 2
            res.faults.append(Fault("UnknownTopic", topic))
            continue
        for _ in range(count):
            partition, flag = src.get("H"), src.get("B")
            if flag in _CONSUME_FAULTS:
                res.faults.append(Fault(_CONSUME_FAULTS[flag], topic, partition))
                continue
            if flag == 0xFC:
                leader = (src.get("I"), src.get("H"))
                res.faults.append(Fault("OtherLeader", topic, partition, leader=leader))
                continue
            base = 0 if flag == 0xFE else src.get("Q")
            hw, chunk_len = src.get("Q"), src.get("I")
            if flag == 0x01:
                res.faults.append(Fault("BoundaryCheck", topic, partition,
                                        first_available=src.get("Q"), hw=hw))
                chunks_at += chunk_len
                continue
            if flag not in (0x00, 0xFE):
                raise TankDecodeError(f"consume error_or_flags 0x{flag:02x}")
            if chunks_at + chunk_len > len(payload):
                raise TankDecodeError("consume chunk past the payload")
            chunk = payload[chunks_at:chunks_at + chunk_len]
            chunks_at += chunk_len
            seq, fetch_size = wanted.get((topic, partition), (0, 0))
            got = read_chunk(chunk, base)
            msgs = [m for m in got.messages if seq in (0, SEQ_TAIL) or m.seq >= seq]
            if msgs:
                next_seq = msgs[-1].seq + 1
            else:
                next_seq = hw + 1 if seq == SEQ_TAIL else seq
            res.data.append(PartitionData(topic, partition, msgs, hw, next_seq,
                                          max(fetch_size, got.cut_bundle_bytes),
                                          chunk_len == 0))
    if src.left():
        raise TankDecodeError(f"{src.left()} bytes left in the consume header")
    if chunks_at != len(payload):
        raise TankDecodeError(f"consume chunks cover {chunks_at} of {len(payload)} bytes")
    return res


def clamp_seq(seq: int, first_available: int, hw: int) -> int:
    """``adjust_seqnum_by_boundaries``: clamp a faulted seq into ``[first, hw + 1]``."""
    return min(max(seq, first_available), hw + 1)


def decode_discover_partitions_reply(payload: bytes, partitions: Sequence[int] = ()
                                     ) -> tuple[int, bytes, list[Discovered | Fault]]:
    src = In(payload)
    request_id, topic, count = src.get("I"), src.s8(), src.get("H")
    if count == 0:
        return request_id, topic, [Fault("UnknownTopic", topic)]
    ids = list(partitions) if partitions else list(range(count))
    if len(ids) != count:
        raise TankDecodeError(f"discover: {count} partitions for {len(ids)} asked")
    out: list[Discovered | Fault] = []
    for pid in ids:
        first, hw = src.get("Q"), src.get("Q")
        if first == hw == SEQ_TAIL:
            reason = src.get("B")
            if reason == 0xFC:
                out.append(Fault("OtherLeader", topic, pid, leader=(src.get("I"), src.get("H"))))
            elif reason in (0xFB, 0xFD):
                out.append(Fault(_CONSUME_FAULTS[reason], topic, pid))
            else:
                raise TankDecodeError(f"discover reason 0x{reason:02x}")
        else:
            out.append(Discovered(pid, first, hw))
    if src.left():
        raise TankDecodeError(f"{src.left()} bytes after the discover reply")
    return request_id, topic, out


def decode_create_topic_reply(payload: bytes) -> tuple[int, bytes, Fault | None]:
    src = In(payload)
    request_id, topic, err = src.get("I"), src.s8(), src.get("B")
    if src.left():
        raise TankDecodeError(f"{src.left()} bytes after the create topic reply")
    if err == 0:
        return request_id, topic, None
    return request_id, topic, Fault(_CREATE_FAULTS.get(err, f"err{err}"), topic)
