"""kafka-python 3.0.12 against a real broker's Kafka listener, with api_version (0,8,2),
(0,9), (0,10,1) and the default (ApiVersions v4 -> error 35 -> v0): produce + flush with
keys, assign() + poll from the earliest offset, and gzip/snappy/lz4 produce (kafka-python
compresses snappy and lz4 through cramjam)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

kafka = pytest.importorskip("kafka")

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402

from tests.kafka.harness import start_kafka_broker  # noqa: E402

VERSIONS = {"0.8.2": (0, 8, 2), "0.9": (0, 9), "0.10.1": (0, 10, 1), "default": None}


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    proc, kafka_port = start_kafka_broker(tmp_path_factory.mktemp("kafka-python"))
    try:
        yield kafka_port
    finally:
        proc.stop()


def _kw(version: str) -> dict[str, Any]:
    v = VERSIONS[version]
    return {} if v is None else {"api_version": v}


def produce(port: int, topic: str, version: str, count: int,
            compression: str | None = None) -> list[tuple[bytes, bytes]]:
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}",
                             compression_type=compression, request_timeout_ms=10000,
                             **_kw(version))
    sent = [(f"key-{i % 7}".encode(), f"value-{i}".encode()) for i in range(count)]
    futures = [producer.send(topic, key=k, value=v) for k, v in sent]
    producer.flush(timeout=20)
    for future in futures:
        assert future.get(timeout=10).offset >= 0
    producer.close(timeout=5)
    return sent


def consume_all(port: int, topic: str, version: str, count: int,
                timeout: float = 20.0) -> list[Any]:
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             fetch_max_wait_ms=100, **_kw(version))
    partitions = consumer.partitions_for_topic(topic) or set()
    assert partitions, "no partitions in the metadata"
    consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
    consumer.seek_to_beginning()
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(records)
    consumer.close()
    return got


def check(sent: list[tuple[bytes, bytes]], got: list[Any]) -> None:
    assert sorted((r.key, r.value) for r in got) == sorted(sent)
    by_partition: dict[int, list[int]] = {}
    for r in got:
        by_partition.setdefault(r.partition, []).append(r.offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))  # dense from 0, in order
    keys = {}
    for r in got:  # the client's own partitioner: one key, one partition
        assert keys.setdefault(r.key, r.partition) == r.partition


@pytest.mark.parametrize("version", list(VERSIONS))
def test_produce_then_assign_and_poll_from_earliest(port, version):
    topic = f"kp-{version.replace('.', '-')}"
    sent = produce(port, topic, version, 50)
    check(sent, consume_all(port, topic, version, len(sent)))


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4"])
@pytest.mark.parametrize("version", ["0.9", "0.10.1"])
def test_compressed_produce(port, version, compression):
    """Magic 0 (0.9: Produce v1) and magic 1 (0.10.1: Produce v2) wrappers; served back
    uncompressed, one record per message."""
    topic = f"kp-{compression}-{version.replace('.', '-')}"
    sent = produce(port, topic, version, 30, compression)
    check(sent, consume_all(port, topic, version, len(sent)))
