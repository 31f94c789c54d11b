"""confluent-kafka 2.16.1 (librdkafka 2.16) against a real broker's Kafka listener: the
default settings (ApiVersions v3 -> error 35 -> v0), and api.version.request=false with
broker.version.fallback 0.9.0 and 0.8.2: produce + flush with keys, assign() + poll from
the beginning, and gzip/snappy/lz4 produce (built into the wheel)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402

from tests.kafka.harness import start_kafka_broker  # noqa: E402

SETTINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "0.9.0": {"api.version.request": False, "broker.version.fallback": "0.9.0"},
    "0.8.2": {"api.version.request": False, "broker.version.fallback": "0.8.2"},
}


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    proc, kafka_port = start_kafka_broker(tmp_path_factory.mktemp("confluent"))
    try:
        yield kafka_port
    finally:
        proc.stop()


def produce(port: int, topic: str, setting: str, count: int,
            compression: str = "none") -> list[tuple[bytes, bytes]]:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}",
                         "compression.codec": compression, "linger.ms": 5,
                         **SETTINGS[setting]})
    errors: list[Any] = []
    delivered: list[int] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(msg.offset())

    sent = [(f"key-{i % 7}".encode(), f"value-{i}".encode()) for i in range(count)]
    for key, value in sent:
        producer.produce(topic, key=key, value=value, on_delivery=report)
    assert producer.flush(20) == 0
    assert errors == []
    assert len(delivered) == count
    return sent


def consume_all(port: int, topic: str, setting: str, count: int,
                timeout: float = 20.0) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": f"g-{topic}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 100, **SETTINGS[setting]})
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    assert partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(partitions)])
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append(msg)
    consumer.close()
    return got


def check(sent: list[tuple[bytes, bytes]], got: list[Any]) -> None:
    assert sorted((m.key(), m.value()) for m in got) == sorted(sent)
    by_partition: dict[int, list[int]] = {}
    for m in got:
        by_partition.setdefault(m.partition(), []).append(m.offset())
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))
    keys: dict[bytes, int] = {}
    for m in got:
        assert keys.setdefault(m.key(), m.partition()) == m.partition()


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_produce_then_assign_and_poll_from_beginning(port, setting):
    topic = f"ck-{setting.replace('.', '-')}"
    sent = produce(port, topic, setting, 50)
    check(sent, consume_all(port, topic, setting, len(sent)))


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4"])
@pytest.mark.parametrize("setting", ["default", "0.9.0"])
def test_compressed_produce(port, setting, compression):
    """Magic 1 (default: Produce v2) and magic 0 (0.9.0: Produce v1) wrappers."""
    topic = f"ck-{compression}-{setting.replace('.', '-')}"
    sent = produce(port, topic, setting, 30, compression)
    check(sent, consume_all(port, topic, setting, len(sent)))
