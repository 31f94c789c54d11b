"""A compacted topic seen by confluent-kafka (librdkafka) against a real broker process:
keyed records produced, the log cleaner run (every 100 ms here), the partition read back
from the beginning holds the latest value of every key at the offset it was written at, a
tombstone (null value) hides its key, and a record without a key is refused as Kafka
brokers of these API versions refuse it (CORRUPT_MESSAGE)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

ck = pytest.importorskip("confluent_kafka")

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition  # noqa: E402

from tests.kafka.harness import start_kafka_broker  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, int]]:
    proc, port = start_kafka_broker(tmp_path_factory.mktemp("compaction"),
                                    {"storage": {"cleaner_interval_ms": 100}})
    try:
        yield proc, port
    finally:
        proc.stop()


def _create(proc: Any, topic: str) -> None:
    client = proc.client()
    try:
        answer = client.request(f"V1|1|ADMIN_CREATE_TOPIC|{topic} 1 1 cleanup_policy=compact "
                                "segment_bytes=2000")
    finally:
        client.close()
    assert answer.startswith("V1|1|OK|topic=" + topic), answer


def _produce(port: int, topic: str, records: list[tuple[bytes | None, bytes | None]]
             ) -> list[Any]:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 0,
                         "batch.num.messages": 1, "retries": 0})
    reports: list[Any] = []
    for key, value in records:
        producer.produce(topic, key=key, value=value,
                         on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        producer.poll(0)
    assert producer.flush(20) == 0
    return reports


def _read_all(port: int, topic: str) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": f"g{time.time()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[Any] = []
    quiet = time.monotonic() + 2.0
    while time.monotonic() < quiet:
        msg = consumer.poll(0.1)
        if msg is None:
            continue
        if msg.error() is not None:
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            continue
        got.append(msg)
        quiet = time.monotonic() + 1.0
    consumer.close()
    return got


def test_latest_value_per_key_survives_a_clean(broker: tuple[Any, int]) -> None:
    """One early record, then 600 records on 6 keys, in small segments: once the cleaner
    ran, a consumer from the beginning reads far fewer records, offsets ascending with
    gaps, and the last record of every key is the last value produced for it, at its
    produce offset; the key whose latest record is a tombstone reads back as deleted (a
    null value, as produced)."""
    proc, port = broker
    _create(proc, "cc")
    records: list[tuple[bytes | None, bytes | None]] = [(b"early", b"first")]
    records += [(b"key-%d" % (i % 6), b"value-%03d" % i) for i in range(600)]
    records.append((b"key-5", None))  # a tombstone: key-5 is deleted
    reports = _produce(port, "cc", records)
    assert [err for err, _ in reports if err is not None] == []
    written = {key: (offset, value) for (key, value), (_err, offset) in zip(records, reports, strict=True)}
    deadline = time.monotonic() + 30
    while True:
        got = _read_all(port, "cc")
        if len(got) < 200 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert len(got) < 200, f"not compacted: {len(got)} records read"
    offsets = [m.offset() for m in got]
    assert offsets == sorted(offsets) and offsets[-1] == 601
    assert offsets[:2] == [0, offsets[1]] and offsets[1] > 1  # a gap after "early"
    latest = {m.key(): (m.offset(), m.value()) for m in got}
    for key in [b"early", *(b"key-%d" % k for k in range(5))]:
        assert latest[key] == (written[key][0], written[key][1])
    assert latest[b"key-5"] == (601, None)  # the tombstone comes back as a null value


def test_keyless_record_is_refused(broker: tuple[Any, int]) -> None:
    """A record without a key to a compacted topic fails its delivery with
    CORRUPT_MESSAGE; keyed records around it are stored."""
    proc, port = broker
    _create(proc, "cc2")
    reports = _produce(port, "cc2", [(b"a", b"1"), (None, b"no key"), (b"b", b"2")])
    errors = [err for err, _offset in reports if err is not None]
    # librdkafka names code 2 (CORRUPT_MESSAGE) INVALID_MSG
    assert len(errors) == 1 and errors[0].code() == KafkaError.INVALID_MSG, errors
    assert sorted(m.value() for m in _read_all(port, "cc2")) == [b"1", b"2"]
