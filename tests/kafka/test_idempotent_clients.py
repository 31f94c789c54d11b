"""The idempotent producer against a real broker process over real sockets: a client that
takes a producer id with InitProducerId and sends the same produce request twice on one
TCP connection (a retry) finds its batch written once; confluent-kafka with
``enable.idempotence=true`` produces 10,000 messages, each stored once and marked with its
producer id."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.kafka.codec import ApiKey
from broker.kafka.handlers.data import VERSIONS
from data.idempotence import parse_record_id
from data.store import StorageConfig, Store
from tests.kafka.harness import i16, i32, request, start_kafka_broker, string

PRODUCE_VERSION = min(VERSIONS[ApiKey.PRODUCE][1], 8)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, int, Path]]:
    workdir = tmp_path_factory.mktemp("idempotent")
    proc, port = start_kafka_broker(workdir, {"topics": {"once": {"partitions": 1}}})
    try:
        yield proc, port, workdir
    finally:
        proc.stop()


class _Socket:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)

    def call(self, api_key: int, version: int, body: bytes, cid: int) -> bytes:
        self.sock.sendall(request(api_key, version, cid, body))
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        assert struct.unpack(">i", frame[:4])[0] == cid
        return frame[4:]

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "connection closed"
            out += chunk
        return out


def _batch(values: list[bytes], pid: int, seq: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=pid, producer_epoch=0, base_sequence=seq,
                                        batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=value, headers=[])
    return bytes(builder.build())


def _produce_body(records: bytes) -> bytes:
    head = string(None) if PRODUCE_VERSION >= 3 else b""
    return (head + i16(-1) + i32(30000) + i32(1) + string("once") + i32(1) + i32(0)
            + i32(len(records)) + records)


def _error_and_offset(body: bytes) -> tuple[int, int]:
    pos = 4 + 2 + len("once") + 4 + 4  # topic count, name, partition count, index
    error, offset = struct.unpack_from(">hq", body, pos)
    return error, offset


def test_the_same_request_twice_on_a_socket_is_written_once(broker: tuple[Any, int, Path]
                                                            ) -> None:
    """InitProducerId, then one produce request sent twice on the same connection, then
    the next batch: the retry gets the first base offset, and the next batch lands right
    after the first (nothing was written twice)."""
    _proc, port, _ = broker
    conn = _Socket(port)
    body = conn.call(22, 0, string(None) + i32(60000), cid=1)
    _throttle, error, pid, epoch = struct.unpack(">ihqh", body)
    assert (error, epoch) == (0, 0) and pid >= 0
    frame = _produce_body(_batch([b"a", b"b", b"c"], pid, 0))
    first = _error_and_offset(conn.call(0, PRODUCE_VERSION, frame, cid=2))
    retry = _error_and_offset(conn.call(0, PRODUCE_VERSION, frame, cid=3))
    after = _error_and_offset(conn.call(0, PRODUCE_VERSION,
                                        _produce_body(_batch([b"d"], pid, 3)), cid=4))
    assert first == retry == (0, 0)
    assert after == (0, 3)
    gap = _error_and_offset(conn.call(0, PRODUCE_VERSION,
                                      _produce_body(_batch([b"e"], pid, 9)), cid=5))
    assert gap == (45, -1)


def test_confluent_kafka_idempotent_producer(broker: tuple[Any, int, Path]) -> None:
    """enable.idempotence=true: 10,000 messages acknowledged, read back once each, and
    stored with the producer id InitProducerId gave."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    proc, port, workdir = broker
    producer = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{port}",
                                         "enable.idempotence": True, "linger.ms": 5})
    errors: list[Any] = []
    offsets: list[int] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    for i in range(10_000):
        producer.produce("idem", key=f"k{i % 7}".encode(), value=f"v{i}".encode(),
                         on_delivery=report)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == [] and len(offsets) == 10_000
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": f"127.0.0.1:{port}", "group.id": "idem",
        "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe(["idem"])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 10_000 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(10_000))
    proc.stop()
    store = Store(str(workdir / "skerry-data"), StorageConfig())
    try:
        marks = [parse_record_id(r.id) for plog in store.topics["idem"].partitions
                 for r in plog.read(0, 20_000, 1 << 30).records]
    finally:
        store.close()
    assert len(marks) == 10_000
    assert all(m is not None for m in marks)
    assert len({m.producer_id for m in marks if m is not None}) == 1
