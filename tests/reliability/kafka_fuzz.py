"""The Kafka fuzz target: one fuzzed request frame through the whole transport path (frame
splitter, codec, dispatcher, data and group handlers, the core, the group services) of an
in-process broker on a ``task.Clock``, with a sentinel connection that must keep being
served. Registered as ``TARGETS["kafka"]`` in tests/reliability/fuzz_targets.py.

A *crash* is anything the target raises: an exception escaping the connection, a handler
bug the dispatcher caught and logged with its traceback (answered -1), or the sentinel
connection (open across all inputs, with a live consumer-group member) not answering
ApiVersions, Metadata and its Heartbeat exactly as before. Closing the fuzzed connection
(what Kafka does on an unknown api key or a malformed frame) is allowed.

Each input gets a new connection: a size prefix (usually the right one, sometimes a wrong
one) + the input as the frame. Every third connection must log in with SASL PLAIN
(``broker.kafka.sasl``): half of those get the input as their first frame, the other half a
good SaslHandshake first, so that the input is read as the PLAIN token. The broker is rebuilt every ``REBUILD_EVERY`` inputs so a
million inputs stay bounded in memory and disk, and its clock advances so timers (sessions,
join barriers, long polls) fire.

Must not import: the reactor.
"""

from __future__ import annotations

import atexit
import logging
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Any

from twisted.internet.error import ConnectionDone
from twisted.python.failure import Failure

from broker.auth import TokenStore, hash_token
from tests.kafka.harness import Harness, i16, i32, request, string

__all__ = ["KafkaFuzz", "KAFKA_SEEDS", "KIP848_SEEDS", "run_kafka"]

REBUILD_EVERY = 20_000
SENTINEL_EVERY = 500


def _golden_frames() -> tuple[bytes, ...]:
    """The request frames of kafka-wire-notes §5 (tests/kafka/test_requests.py's table),
    without their size prefix, plus the group requests a consumer sends, plus one frame
    of every API and version of the codec's tables (tests/kafka/test_schema.py)."""
    from tests.kafka.test_requests import GOLDEN_REQUESTS

    frames = [frame[4:] if struct.unpack_from(">i", frame)[0] == len(frame) - 4 else frame
              for _, frame, _ in GOLDEN_REQUESTS]
    sub = bytes.fromhex("000000000001000274310000000000")[:14]
    join = (string("g") + i32(6000) + string("") + string("consumer") + i32(1)
            + string("range") + i32(len(sub)) + sub)
    frames += [
        request(11, 0, 1, join)[4:],
        request(11, 1, 2, string("g") + i32(6000) + i32(9000) + join[6:])[4:],
        request(14, 0, 3, string("g") + i32(1) + string("kp-1") + i32(1) + string("kp-1")
                + i32(4) + b"abcd")[4:],
        request(12, 0, 4, string("g") + i32(1) + string("kp-1"))[4:],
        request(13, 0, 5, string("g") + string("kp-1"))[4:],
        request(8, 2, 6, string("g") + i32(-1) + string("") + struct.pack(">q", -1) + i32(1)
                + string("t1") + i32(1) + i32(0) + struct.pack(">q", 0) + string("m"))[4:],
        request(9, 1, 7, string("g") + i32(1) + string("t1") + i32(1) + i32(0))[4:],
        request(17, 0, 8, string("PLAIN"))[4:],
        b"\x00fuzzer\x00" + SASL_TOKEN.encode(),
        b"fuzzer\x00fuzzer\x00wrong",
    ]
    try:  # every API and version of the codec's tables, flexible ones included
        from tests.kafka.test_schema import request_frames
    except Exception:  # pragma: no cover - kafka-python (the corpus writer) not installed
        return tuple(frames)
    frames += request_frames()
    return tuple(frames)


SASL_TOKEN = "fuzz-token"
"""The password of the fuzz broker's one SASL user, ``fuzzer``."""


def _kip848_frames() -> tuple[bytes, ...]:
    """ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) frames, v0 and v1, as a
    KIP-848 consumer sends them (flexible header, no size prefix): a join, a heartbeat
    with owned partitions, a leave, a regex join, a describe."""
    from broker.kafka import codec as c
    from broker.kafka.codec.apis import SCHEMAS
    from broker.kafka.codec.primitives import Writer
    from broker.kafka.codec.schema import write_struct

    def frame(key: int, version: int, body: Any) -> bytes:
        w = Writer()
        write_struct(SCHEMAS[key].request, w, body, version, True)
        return i16(key) + i16(version) + i32(1) + string("fuzzer") + b"\x00" + w.getvalue()

    member = "5f0c3b7e-0000-4000-8000-000000000001"
    owned = (c.ConsumerTopicPartitions(bytes(range(16)), (0, 1)),)
    beats = [
        c.ConsumerGroupHeartbeatRequest(None, "g", "", 0, rebalance_timeout_ms=30000,  # type: ignore[arg-type]
                                        subscribed_topic_names=("t1",), topic_partitions=()),
        c.ConsumerGroupHeartbeatRequest(None, "g", member, 0, "static-1", "rack-a", 30000,  # type: ignore[arg-type]
                                        ("t1",), "t.*", "uniform", ()),
        c.ConsumerGroupHeartbeatRequest(None, "g", member, 3, topic_partitions=owned),  # type: ignore[arg-type]
        c.ConsumerGroupHeartbeatRequest(None, "g", member, -1),  # type: ignore[arg-type]
    ]
    frames = [frame(68, v, b) for v in (0, 1) for b in beats]
    describe = c.ConsumerGroupDescribeRequest(None, ("g", "other"), True)  # type: ignore[arg-type]
    frames += [frame(69, v, describe) for v in (0, 1)]
    return tuple(frames)


KIP848_SEEDS: tuple[bytes, ...] = _kip848_frames()
KAFKA_SEEDS: tuple[bytes, ...] = _golden_frames() + KIP848_SEEDS


class _BugLog(logging.Handler):
    """Records what the Kafka transport logs with a traceback: handler bugs."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.bugs: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or "Traceback" in record.getMessage():
            self.bugs.append(record.getMessage()[:300])


class KafkaFuzz:
    """The broker, the sentinel and the bookkeeping of one fuzz run."""

    def __init__(self) -> None:
        self._tmp: Path | None = None
        self._harness: Harness | None = None
        self._inputs = 0
        self._bugs = _BugLog()
        for name in ("skerry.kafka", "skerry.kafka.groups"):
            logging.getLogger(name).addHandler(self._bugs)
        self._expected: tuple[bytes, bytes] | None = None
        self._sentinel: Any = None
        self._member = ""
        self._tokens = TokenStore({"fuzzer": hash_token(SASL_TOKEN)})

    # ---------------------------------------------------------------- the broker

    def _build(self) -> Harness:
        self.close()
        self._tmp = Path(tempfile.mkdtemp(prefix="skerry-kafka-fuzz-"))
        harness = Harness(self._tmp, {"auto_create_topics": False})
        harness.service.ctx.groups = harness.broker.kafka_groups
        harness.service.ctx.consumer_groups = harness.broker.consumer_groups
        harness.core.create_topic("t1", 2, 1, None, None, None)
        self._harness = harness
        self._sentinel = harness.connect()
        join = (string("sentinel") + i32(3_600_000) + string("") + string("consumer")
                + i32(1) + string("range") + i32(2) + b"\x00\x00")
        body = self._sentinel.call(11, 0, join)
        (n,) = struct.unpack_from(">h", body, 6)
        pos = 8 + n
        (n,) = struct.unpack_from(">h", body, pos)
        self._member = body[pos + 2:pos + 2 + n].decode()
        self._sentinel.call(14, 0, string("sentinel") + i32(1) + string(self._member)
                            + i32(0))
        self._expected = None
        self._expected = self._sentinel_answers()
        return harness

    def _sentinel_answers(self) -> tuple[bytes, bytes]:
        conn = self._sentinel
        if conn.closed:
            raise AssertionError("the sentinel connection was closed")
        versions = conn.call(18, 0)
        metadata = conn.call(3, 0, i32(1) + string("t1"))
        beat = conn.call(12, 0, string("sentinel") + i32(1) + string(self._member))
        if beat != i16(0):
            raise AssertionError(f"the sentinel member's heartbeat answered {beat.hex()}")
        return versions, metadata

    def close(self) -> None:
        if self._harness is not None:
            try:
                self._harness.close()
            finally:
                self._harness = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    # ---------------------------------------------------------------- one input

    def run(self, data: bytes) -> None:
        """Feed ``data`` as one frame on a new connection (see the module doc).

        The broker's warnings are muted while the input runs, and only then: the level of
        the shared ``skerry`` logger is restored afterwards, so tests that run later in the
        same process still see their log lines. What other code logged between two inputs
        is not this input's finding."""
        self._bugs.bugs.clear()
        logger = logging.getLogger("skerry")
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            self._run(data)
        finally:
            logger.setLevel(level)

    def _run(self, data: bytes) -> None:
        if self._harness is None or self._inputs % REBUILD_EVERY == 0:
            self._build()
        harness = self._harness
        assert harness is not None
        self._inputs += 1
        size = len(data)
        if data[:1] == b"\xfe":  # sometimes a size that lies
            size = int.from_bytes(data[1:3].ljust(2, b"\0"), "big") - 100
        sasl = self._inputs % 3 == 0
        harness.service.factory.tokens = self._tokens if sasl else None
        try:
            conn = harness.connect()
        finally:
            harness.service.factory.tokens = None
        try:
            if sasl and self._inputs % 2 == 0:
                conn.send_raw(request(17, 0, 1, string("PLAIN")))  # the input is the token
            conn.send_raw(struct.pack(">i", size) + data)
            if self._inputs % 7 == 0:
                harness.advance(0.25)  # let timers and long polls fire now and then
        finally:
            conn.proto.connectionLost(Failure(ConnectionDone()))
        if self._bugs.bugs:
            bugs, self._bugs.bugs = self._bugs.bugs, []
            raise AssertionError(f"handler bug: {bugs[0]}")
        if self._inputs % SENTINEL_EVERY == 0:
            self._keep_sentinel_alive()

    def _keep_sentinel_alive(self) -> None:
        assert self._harness is not None
        got = self._sentinel_answers()
        if got != self._expected:
            raise AssertionError("the sentinel connection's answers changed")


_FUZZ: KafkaFuzz | None = None


def run_kafka(data: bytes) -> object:
    """``TARGETS["kafka"].run``: one input through the module's shared ``KafkaFuzz``."""
    global _FUZZ
    if _FUZZ is None:
        _FUZZ = KafkaFuzz()
        atexit.register(_FUZZ.close)  # its temporary data directory
    _FUZZ.run(data)
    return None
