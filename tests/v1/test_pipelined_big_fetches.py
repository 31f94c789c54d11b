"""Pipelined FETCHes of megabytes to a client that reads late (the Spark source's pattern:
several ``FETCH ... enc=raw`` in flight on one connection): the broker's unsent reply bytes
pass the output cap, it stops reading, and once the client drains them it reads and answers
the next FETCH. Every answer must arrive, whole and in order; the connection must never
stall with a request unread (a regression: the resume's own reply re-filled the backlog and
the transport then stopped writing)."""

from __future__ import annotations

import time
from pathlib import Path

from broker.client.sync import Client
from tests.support import BrokerProcess

RECORDS = 120_000
PER_FETCH = 20_000  # about 3.3 MB of stored records per answer: past the 1 MiB output cap


def test_pipelined_fetches_past_the_output_cap_all_arrive_in_order(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, {"storage": {"fsync": "never"}}).start()
    try:
        bootstrap = f"127.0.0.1:{broker.port}"
        with Client(bootstrap) as client:
            client.request("ADMIN_CREATE_TOPIC", "big 1 1")
            for start in range(0, RECORDS, 5_000):
                values = [b"v%07d" % i + b"x" * 92 for i in range(start, start + 5_000)]
                client.produce_batch("big", 0, [b""] * len(values), values)
        with Client(bootstrap, timeout=20.0) as client:
            for offset in range(0, RECORDS, PER_FETCH):
                client.send_fetch("big", 0, offset, PER_FETCH, 64 << 20)
            time.sleep(0.5)  # the broker fills the socket, queues the rest, stops reading
            seen = 0
            for offset in range(0, RECORDS, PER_FETCH):
                got = client.receive_fetch()
                assert (got.count, got.next_offset) == (PER_FETCH, offset + PER_FETCH)
                assert got.data[24:32] == offset.to_bytes(8, "little")  # first record's offset
                seen += got.count
            assert seen == RECORDS
    finally:
        assert broker.stop() == 0
