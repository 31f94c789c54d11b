"""The TANK fuzz target: whole byte streams through the real TANK connection, handlers,
core and store (in memory, on a ``task.Clock``), while a witness connection keeps working.

``run(data)`` opens a fresh TANK connection on one long-lived in-memory broker (topic
``t1`` with 2 partitions), feeds it ``data`` split at a point chosen from the data, lets
time pass (long polls end, watchers expire), and closes it. Nothing may escape (the
protocol closes the connection on what TANK would close it on), nothing may be logged at
ERROR (a handler bug answered with a system fault is still a bug), and every 500 inputs
the witness connection, open all along, must still get its captured replies. Used by
tests/reliability/fuzz_targets.py (``tank``) for the CI-sized hypothesis run and the
1,000,000-input scorecard row.
"""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
from pathlib import Path

from broker.tank import client as tc
from tests.tank import goldens as g
from tests.tank.harness import Harness

__all__ = ["SEEDS", "run"]

SEEDS: tuple[bytes, ...] = (
    g.PRODUCE_1, g.PRODUCE_2, g.PRODUCE_4, g.CONSUME_5, g.CONSUME_7, g.CONSUME_8,
    g.DISCOVER_9, g.CREATE_10, g.PING,
    tc.build_produce(3, [(b"t1", 1, [tc.Msg(b"x" * 300, b"kk", 1)] * 4)]),
    tc.build_produce_with_seqnum(6, [(b"t1", 1, 3, [tc.Msg(b"a", seq=3), tc.Msg(b"b", seq=9),
                                                    tc.Msg(b"c", seq=12)])]),
    tc.build_consume(1, [(b"t1", 0, 1, 9), (b"t2", 4, 2, 9)], op_flags=1),
    tc.build_consume(2, [(b"t1", 1, 0, 100)], max_wait=1, min_bytes=10, client_version=0),
    g.PRODUCE_1 + g.CONSUME_5 + g.DISCOVER_9,
    bytes.fromhex("08 07000000 01000000 02 7431 0000".replace(" ", "")),  # ReloadConf
    bytes.fromhex("0a 04000000 01000000".replace(" ", "")),  # Status
    bytes.fromhex("0b 05000000 01000000 00".replace(" ", "")),  # DiscoverTopics
    bytes.fromhex("0c 05000000 01000000 00".replace(" ", "")),  # DiscoverTopology
)


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class _Bench:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="skerry-tank-fuzz-"))
        atexit.register(shutil.rmtree, self.dir, True)
        logger = logging.getLogger("skerry")
        self.errors = _Errors()
        logger.addHandler(self.errors)
        # topics and partitions bounded: a million CreateTopics must not exhaust the
        # process's file descriptors (each partition holds its segment files open)
        self.h = Harness(self.dir, {"limits": {"max_message_bytes": 4096,
                                               "idle_timeout_ms": 1 << 40,
                                               "max_topics": 64,
                                               "max_partitions_per_topic": 8},
                                    "tank": {"max_frame_bytes": 1 << 16}})
        self.h.create("t1", 2)
        self.witness = self.h.connect()
        self.count = 0

    def check_witness(self) -> None:
        w = self.witness
        assert not w.closed, "the witness connection was closed"
        assert w.request(g.PRODUCE_4) == g.PRODUCE_4_REPLY
        w.send(tc.build_discover_partitions(77, b"t1"))
        (msg_id, payload), = w.frames()
        _rid, _topic, found = tc.decode_discover_partitions_reply(payload)
        assert msg_id == 6 and len(found) == 2, found

    def run(self, data: bytes) -> None:
        """Feed ``data``; the TANK transport's and the core's warnings are muted while it
        runs, and only then (tests that run later in the same process keep their logs)."""
        loggers = [logging.getLogger("skerry.tank"), logging.getLogger("skerry.core")]
        levels = [logger.level for logger in loggers]
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        try:
            self._run(data)
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)

    def _run(self, data: bytes) -> None:
        h = self.h
        # What other code logged between two inputs (other tests in the same process log
        # deliberate errors on the shared "skerry" logger) is not this input's finding.
        self.errors.records.clear()
        conn = h.connect()
        cut = data[0] % (len(data) + 1) if data else 0
        conn.send(data[:cut])
        conn.send(data[cut:])
        h.advance(1.1)  # long polls of up to 1 s end, their watchers expire
        conn.raw()
        conn.close()
        self.count += 1
        if self.errors.records:
            record = self.errors.records[0]
            self.errors.records.clear()
            raise AssertionError(f"logged at ERROR: {record.getMessage()[:300]}")
        if self.count % 500 == 0:
            self.check_witness()
            h.advance(3700)  # the longest wait (1 h) is over: nothing is left waiting


_bench: _Bench | None = None


def run(data: bytes) -> object:
    global _bench
    if _bench is None:
        _bench = _Bench()
    _bench.run(data)
    return None
