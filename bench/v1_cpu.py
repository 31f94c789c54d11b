"""Broker CPU per message, in process: the V1 connection over a fake transport, no sockets.

Owns: feeding one ``V1Protocol`` (built by ``build_broker`` over a real store in a temporary
directory, ``storage.fsync: never``, a ``task.Clock``) reads of pipelined PRODUCE lines of
the load generator's shape (100-byte values, 1,000 a read), running the turn's flush, and
timing the CPU spent per message (best of five rounds); and the same for CONSUME batches of
1,000 from a filled partition. Unlike the socket benchmarks it does not move with the other
work on a shared machine by more than a few per cent, so it is what docs/performance.md's
before/after rows use: ``python -m bench.v1_cpu`` (``SKERRY_NO_EXTENSIONS=1`` for the twin).

Must not import: the load generator (the requests are built here).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.server import build_broker
from data import speedups

READ = 1000


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
        broker.store.close()
    print(f"{speedups.describe()}")
    print(f"pipelined PRODUCE: {min(produce):.2f} us CPU a message (best of 5; rounds "
          f"{', '.join(f'{x:.2f}' for x in produce)})")
    print(f"CONSUME max=1000:  {min(consume):.3f} us CPU a message (best of 5; rounds "
          f"{', '.join(f'{x:.3f}' for x in consume)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
