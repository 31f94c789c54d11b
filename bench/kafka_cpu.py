"""Broker CPU per consumed message on the Kafka listener, in process: no sockets, no client.

Owns: filling one partition (``storage.fsync: never``) with 100-byte values through V1
PRODUCE, then feeding one Kafka connection (``KafkaService.factory``, a ``StringTransport``,
a ``task.Clock``) Fetch requests (v4: record batches v2, the compiled loop) of
``--partition-bytes`` each from offset 0 to the end, walking the returned batches to the
next offset, and timing the CPU spent per message (best of ``--rounds`` passes). Like
``bench.v1_cpu`` it moves little with the other work on a shared machine, so two trees can
be compared on a loaded one: ``python -m bench.kafka_cpu`` in each (docs/performance.md,
"Issue 30 before/after on a quiet machine").

Must not import: a Kafka client (the Fetch request is built here, the response walked here).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
import time

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.server import build_broker

READ = 1000
"""PRODUCE lines per read while filling."""


def fetch_request(cid: int, topic: bytes, offset: int, partition_bytes: int) -> bytes:
    """A Fetch v4 frame: one topic, partition 0, from ``offset``."""
    body = struct.pack(">hhih", 1, 4, cid, 5) + b"bench"
    body += struct.pack(">iiiib", -1, 0, 1, 64 << 20, 0)
    body += struct.pack(">ih", 1, len(topic)) + topic
    body += struct.pack(">iiqi", 1, 0, offset, partition_bytes)
    return struct.pack(">i", len(body)) + body


def walk_response(frame: bytes) -> tuple[int, int]:
    """(records, next offset) of a Fetch v4 response for one partition (-1: none)."""
    pos = 4 + 4 + 4 + 4  # size, correlation id, throttle, topics count
    (name_len,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + name_len + 4 + 4  # name, partitions count, partition index
    (error,) = struct.unpack_from(">h", frame, pos)
    if error:
        raise RuntimeError(f"fetch answered error {error}")
    pos += 2 + 8 + 8
    (aborted,) = struct.unpack_from(">i", frame, pos)
    pos += 4 + max(aborted, 0) * 16
    (size,) = struct.unpack_from(">i", frame, pos)
    pos += 4
    end = pos + size
    records, next_offset = 0, -1
    while pos + 61 <= end:
        base, length = struct.unpack_from(">qi", frame, pos)
        if pos + 12 + length > end:
            break  # a partial batch at the end (max bytes): not counted
        (last_delta,) = struct.unpack_from(">i", frame, pos + 23)
        (count,) = struct.unpack_from(">i", frame, pos + 57)
        records += count
        next_offset = base + last_delta + 1
        pos += 12 + length
    return records, next_offset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_cpu", description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partition-bytes", type=int, default=8 << 20,
                        help="max bytes a Fetch asks of the partition (the consume bench's "
                             "max.partition.fetch.bytes)")
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="skerry-kafkacpu-") as tmp:
        clock = Clock()
        broker = build_broker(config_from_mapping({
            "data_dir": tmp, "storage.fsync": "never", "kafka_port": 0,
            "topics": {"bench": {"partitions": 1}}}), clock, run_in_thread=synchronous)
        v1 = broker.v1_factory.buildProtocol(("127.0.0.1", 1))
        v1_out = StringTransport()
        v1.makeConnection(v1_out)
        value = os.urandom(50).hex().encode()
        read = b"".join(b"V1|%d|PRODUCE|bench user%d:%s\n" % (i, i % 100, value)
                        for i in range(READ))
        for _ in range(opts.messages // READ):
            v1.dataReceived(read)
            clock.advance(0)
            v1_out.clear()
        kafka = broker.kafka.factory.buildProtocol(("127.0.0.1", 2))
        out = StringTransport()
        kafka.makeConnection(out)
        rounds = []
        fetches = 0
        for _ in range(opts.rounds):
            offset, consumed, cid = 0, 0, 0
            start = time.process_time()
            while consumed < opts.messages:
                cid += 1
                kafka.dataReceived(fetch_request(cid, b"bench", offset, opts.partition_bytes))
                clock.advance(0)
                count, offset = walk_response(out.value())
                out.clear()
                if count == 0:
                    raise RuntimeError(f"no records at offset {offset}")
                consumed += count
            spent = time.process_time() - start
            fetches = cid
            rounds.append(spent / consumed * 1e6)
        kafka.connectionLost(None)  # type: ignore[arg-type]
        v1.connectionLost(None)  # type: ignore[arg-type]
        broker.store.close()
    print(f"Kafka Fetch v4, {opts.messages:,} messages of 100 bytes, {fetches} fetches of "
          f"{opts.partition_bytes} bytes a pass: {min(rounds):.3f} us CPU a message (best of "
          f"{opts.rounds}; rounds {', '.join(f'{x:.3f}' for x in rounds)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
