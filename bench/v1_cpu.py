"""Broker CPU per message, in process: the V1 connection over a fake transport, no sockets.

Owns: feeding one ``V1Protocol`` (built by ``build_broker`` over a real store in a temporary
directory, ``storage.fsync: never``, a ``task.Clock``) reads of pipelined PRODUCE lines of
the load generator's shape (100-byte values, 1,000 a read), running the turn's flush, and
timing the CPU spent per message (best of five rounds); the same for CONSUME batches of
1,000 from a filled partition; and the request/response shape (``request_response``: 50
connections, one PRODUCE each a turn). Unlike the socket benchmarks it does not move with the other
work on a shared machine by more than a few per cent, so it is what docs/performance.md's
before/after rows use: ``python -m bench.v1_cpu`` (``SKERRY_NO_EXTENSIONS=1`` for the twin).

Must not import: the load generator (the requests are built here).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.server import build_broker
from data import speedups

READ = 1000


RR_CONNECTIONS = 50
"""Connections of the request/response round (the suite's (a), (d) and (e) loads)."""


def request_response(broker: Any, clock: Clock) -> tuple[float, float]:
    """The request/response shape: ``RR_CONNECTIONS`` connections each read one PRODUCE
    (100-byte value), then the turn's flush appends them and answers each; the best of
    five rounds of 400 turns, CPU per message of the reads and of the turn."""
    conns = []
    for i in range(RR_CONNECTIONS):
        proto = broker.v1_factory.buildProtocol(("127.0.0.1", 2 + i))
        transport = StringTransport()
        proto.makeConnection(transport)
        conns.append((proto, transport))
    value = os.urandom(50).hex().encode()
    requests = [b"V1|%d|PRODUCE|bench user%d:%s\n" % (i, i, value)
                for i in range(RR_CONNECTIONS)]
    reads, turns = [], []
    for _ in range(5):
        read = turn = 0.0
        for _ in range(400):
            start = time.process_time()
            for (proto, _), request in zip(conns, requests, strict=True):
                proto.dataReceived(request)
            middle = time.process_time()
            clock.advance(0)
            read += middle - start
            turn += time.process_time() - middle
            for _, transport in conns:
                transport.clear()
        reads.append(read / (400 * RR_CONNECTIONS) * 1e6)
        turns.append(turn / (400 * RR_CONNECTIONS) * 1e6)
    for proto, _ in conns:
        proto.connectionLost(None)  # type: ignore[arg-type]
    return min(reads), min(turns)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="skerry-v1cpu-") as tmp:
        clock = Clock()
        broker = build_broker(config_from_mapping({
            "data_dir": tmp, "storage.fsync": "never",
            "topics": {"bench": {"partitions": 1}}}), clock, run_in_thread=synchronous)
        proto = broker.v1_factory.buildProtocol(("127.0.0.1", 1))
        transport = StringTransport()
        proto.makeConnection(transport)
        value = os.urandom(50).hex().encode()
        read = b"".join(b"V1|%d|PRODUCE|bench user%d:%s\n" % (i, i % 100, value)
                        for i in range(READ))
        produce = []
        for _ in range(5):
            start = time.process_time()
            for _ in range(50):
                proto.dataReceived(read)
                clock.advance(0)
                transport.clear()
            produce.append((time.process_time() - start) / (50 * READ) * 1e6)
        consume = []
        request = b"V1|c|CONSUME|bench 0 %d max=1000\n"
        for _ in range(5):
            start = time.process_time()
            for i in range(50):
                proto.dataReceived(request % (i * 1000))
                clock.advance(0)
                transport.clear()
            consume.append((time.process_time() - start) / (50 * 1000) * 1e6)
        proto.connectionLost(None)  # type: ignore[arg-type]
        rr_read, rr_turn = request_response(broker, clock)
        broker.store.close()
    print(f"{speedups.describe()}")
    print(f"pipelined PRODUCE: {min(produce):.2f} us CPU a message (best of 5; rounds "
          f"{', '.join(f'{x:.2f}' for x in produce)})")
    print(f"CONSUME max=1000:  {min(consume):.3f} us CPU a message (best of 5; rounds "
          f"{', '.join(f'{x:.3f}' for x in consume)})")
    print(f"request/response PRODUCE ({RR_CONNECTIONS} connections, one each a turn): "
          f"{rr_read + rr_turn:.2f} us CPU a message (best of 5: reads {rr_read:.2f}, the "
          f"turn's append and replies {rr_turn:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
