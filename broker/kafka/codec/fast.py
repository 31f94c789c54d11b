"""The two hot paths of the Kafka codec, specialised: reading a Produce request and
writing a Fetch response, for their classic (non-flexible) versions.

Owns: ``parse_produce`` (Produce v0-v8) and ``write_fetch`` (Fetch v0-v11). Each is the
table-driven walk of ``apis.PRODUCE`` / ``apis.FETCH`` unrolled by hand, giving the same
dataclass / the same bytes (tests/kafka/test_fast_paths.py holds them to it, version by
version); ``wire`` uses them where they apply and the tables everywhere else (the flexible
versions). They exist because the walker's per-field calls cost 2-4x there, on every
produce and every fetch.

Must not import: Twisted, sockets, files, the core, the store.
"""

from __future__ import annotations

import struct
from typing import Any

from broker.kafka.codec.messages import encode_message_set
from broker.kafka.codec.primitives import INT16, INT32, Malformed, Reader
from broker.kafka.codec.requests import ProducePartition, ProduceRequest, ProduceTopic
from broker.kafka.codec.responses import FetchResponse, fetch_magic

__all__ = ["PRODUCE_FAST", "FETCH_FAST", "parse_produce", "write_fetch"]

PRODUCE_FAST = (0, 8)
"""The Produce versions ``parse_produce`` reads (v9+ are flexible: the table's)."""
FETCH_FAST = (0, 11)
"""The Fetch versions ``write_fetch`` writes (v12+ are flexible: the table's)."""

_HI = struct.Struct(">hi")
_II = struct.Struct(">ii")
_PART0 = struct.Struct(">ihq")
_PART4 = struct.Struct(">ihqq")
_PART5 = struct.Struct(">ihqqq")
_QQ = struct.Struct(">qq")
_NULL32 = INT32.pack(-1)


def parse_produce(header: Any, r: Reader) -> ProduceRequest:
    """A Produce v0-v8 body at ``r`` (raises ``Malformed``): what the table reads."""
    transactional_id = r.nullable_string("transactional_id") if header.api_version >= 3 \
        else None
    acks = r.int16("acks")
    timeout_ms = r.int32("timeout_ms")
    data = r.data
    topics = []
    for _ in range(_count(r, "topics")):
        name = r.string("name")
        partitions = []
        for _ in range(_count(r, "partitions")):
            pos = r.pos
            if pos + 8 > len(data):
                r.int32("index")
                r.int32("records length")
            index, n = _II.unpack_from(data, pos)
            r.pos = pos + 8
            if n == -1:
                records = b""
            else:
                if n < 0:
                    raise Malformed(f"records: bytes length {n}")
                end = r.pos + n
                if end > len(data):
                    raise Malformed(f"body ends in the records (needs {n} bytes at byte "
                                    f"{r.pos}, {len(data) - r.pos} left)")
                records = data[r.pos:end]
                r.pos = end
            partitions.append(ProducePartition(index, records))
        topics.append(ProduceTopic(name, tuple(partitions)))
    return ProduceRequest(header, acks, timeout_ms, tuple(topics), transactional_id)


def _count(r: Reader, what: str) -> int:
    n = r.int32(f"{what} count")
    if n == -1:
        raise Malformed(f"{what}: null where an array is required")
    if n < 0:
        raise Malformed(f"{what}: array count {n}")
    if n > r.remaining():
        raise Malformed(f"{what}: {n} items cannot fit in {r.remaining()} bytes")
    return n


def write_fetch(parts: list[bytes], response: FetchResponse, v: int) -> None:
    """Append a Fetch v0-v11 response body to ``parts``: what the table writes, each
    record set its own part (``encode_response_chunks`` sends it without a copy)."""
    append = parts.append
    if v >= 7:
        append(INT32.pack(response.throttle_time_ms) + _HI.pack(response.error_code,
                                                               response.session_id))
    elif v >= 1:
        append(INT32.pack(response.throttle_time_ms))
    topics = response.topics
    append(INT32.pack(len(topics)))
    magic = fetch_magic(v)
    for t in topics:
        name = t.topic.encode("utf-8")
        partitions = t.partitions
        append(INT16.pack(len(name)) + name + INT32.pack(len(partitions)))
        for p in partitions:
            if v >= 5:
                head = _PART5.pack(p.partition_index, p.error_code, p.high_watermark,
                                   p.last_stable_offset, p.log_start_offset)
            elif v >= 4:
                head = _PART4.pack(p.partition_index, p.error_code, p.high_watermark,
                                   p.last_stable_offset)
            else:
                head = _PART0.pack(p.partition_index, p.error_code, p.high_watermark)
            if v >= 4:
                aborted = p.aborted_transactions
                if aborted is None:
                    head += _NULL32
                else:
                    head += INT32.pack(len(aborted)) + b"".join(
                        _QQ.pack(a.producer_id, a.first_offset) for a in aborted)
                if v >= 11:
                    head += INT32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                append(head + _NULL32)
                continue
            if not isinstance(records, bytes):
                records = encode_message_set(records, magic)
            append(head + INT32.pack(len(records)))
            append(records)
