"""bench/kafka_cpu.py measures what it says: every message of the partition is fetched
once a pass through the Kafka listener, and the walk of a response counts its records."""

from __future__ import annotations

import re
import struct

from bench import kafka_cpu


def test_a_small_run_fetches_every_message_and_prints_cpu_per_message(capsys) -> None:
    assert kafka_cpu.main(["--messages", "20000", "--partition-bytes", "200000",
                           "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    match = re.search(r"20,000 messages of 100 bytes, (\d+) fetches of 200000 bytes a pass: "
                      r"([0-9.]+) us CPU a message", out)
    assert match, out
    assert int(match.group(1)) > 1  # the walk moved the offset on, fetch after fetch
    assert float(match.group(2)) > 0


def test_the_walk_counts_whole_batches_and_gives_the_next_offset() -> None:
    def batch(base: int, count: int, body: bytes = b"x" * 10) -> bytes:
        # after base offset and length: leader epoch, magic 2, CRC, attributes, then the
        # last offset delta (batch byte 23) ... the record count (batch byte 57)
        rest = struct.pack(">ibih", 0, 2, 0, 0) + struct.pack(">i", count - 1)
        rest = rest.ljust(45, b"\0") + struct.pack(">i", count) + body
        return struct.pack(">qi", base, len(rest)) + rest

    records = batch(10, 5) + batch(15, 3)
    frame = (struct.pack(">iii", 7, 0, 1) + struct.pack(">h", 5) + b"bench"
             + struct.pack(">iih", 1, 0, 0) + struct.pack(">qqi", 20, 20, -1)
             + struct.pack(">i", len(records) + 20) + records + b"partial-batch-bytes!")
    # correlation id, throttle, one topic "bench", one partition 0 (error 0), hw, last
    # stable offset, no aborted list, then the records: two whole batches and a cut one
    assert kafka_cpu.walk_response(struct.pack(">i", len(frame)) + frame) == (8, 18)
