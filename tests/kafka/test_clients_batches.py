"""Record batches v2 with real clients at their defaults (Produce v3+, Fetch v4+): headers
round trip byte for byte (order, duplicate keys, null and empty values, binary values),
every compression codec including zstd, CreateTime kept as sent and LogAppendTime when the
topic says so; old clients read what new ones wrote (without the headers); kcat's -H.

confluent-kafka 2.16.1 (librdkafka), kafka-python 3.0.12 and Debian's kcat against one
broker process."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    Producer,
    TopicPartition,
)

from tests.kafka.harness import start_kafka_broker  # noqa: E402
from tests.support import debian_tool  # noqa: E402

HEADERS = [("trace-id", b"abc-123"), ("dup", b"first"), ("dup", b"second"), ("nul", None),
           ("empty", b""), ("bin", bytes(range(256))), ("big", b"v" * 1000)]
OLD = {"api.version.request": False, "broker.version.fallback": "0.9.0"}


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    proc, kafka_port = start_kafka_broker(tmp_path_factory.mktemp("batches"), {
        "topics": {"appended": {"partitions": 1, "message_timestamp_type": "LogAppendTime"}}})
    try:
        yield kafka_port
    finally:
        proc.stop()


def produce(port: int, topic: str, rows: list[tuple[bytes | None, bytes, Any, int]],
            **settings: Any) -> list[int]:
    """(key, value, headers, timestamp ms) to partition 0; the offsets delivered."""
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 5,
                         **settings})
    offsets: list[int] = []
    errors: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        (errors.append(err) if err is not None else offsets.append(msg.offset()))

    for key, value, headers, ts in rows:
        producer.produce(topic, key=key, value=value, headers=headers, timestamp=ts,
                         partition=0, on_delivery=report)
    assert producer.flush(20) == 0
    assert errors == []
    return sorted(offsets)


def consume(port: int, topic: str, count: int, **settings: Any) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": f"g-{topic}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100, **settings})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[Any] = []
    deadline = time.monotonic() + 20
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append(msg)
    consumer.close()
    return got


class ConfluentDefaultsTests:
    @pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
    def test_headers_keys_values_and_timestamps_round_trip(self, port: int, codec: str) -> None:
        """At librdkafka's defaults (record batches v2): each message comes back with its
        key, value, CreateTime and headers exactly as produced, in every codec."""
        topic = f"headers-{codec}"
        base = 1_700_000_000_000
        rows = [(b"k%d" % (i % 3) if i % 4 else None, b"value-%d" % i,
                 HEADERS[: i % (len(HEADERS) + 1)], base + i * 7 - (i % 2) * 1000)
                for i in range(60)]
        assert produce(port, topic, rows, **{"compression.type": codec}) == list(range(60))
        got = consume(port, topic, 60)
        assert [(m.key(), m.value(), m.headers() or [], m.timestamp()) for m in got] == [
            (key, value, list(headers), (TIMESTAMP_CREATE_TIME, ts))
            for key, value, headers, ts in rows]

    def test_log_append_time_when_the_topic_says_so(self, port: int) -> None:
        """A topic with message_timestamp_type LogAppendTime: consumers see the broker's
        append time, flagged as such, not the producer's."""
        before = int(time.time() * 1000)
        produce(port, "appended", [(None, b"x", [("h", b"1")], 1_000_000_000_000)] * 3)
        after = int(time.time() * 1000)
        got = consume(port, "appended", 3)
        assert len(got) == 3
        for m in got:
            kind, ts = m.timestamp()
            assert kind == TIMESTAMP_LOG_APPEND_TIME and before - 5 <= ts <= after + 5
            assert m.headers() == [("h", b"1")]

    def test_an_old_client_reads_what_a_new_one_wrote(self, port: int) -> None:
        """broker.version.fallback 0.9.0 (Fetch v1, magic 0): keys and values, no headers,
        as Kafka's brokers down-convert."""
        rows = [(b"k", b"v%d" % i, HEADERS, 1_700_000_000_000 + i) for i in range(5)]
        produce(port, "for-old", rows)
        got = consume(port, "for-old", 5, **OLD)
        assert [(m.key(), m.value(), m.headers()) for m in got] == \
            [(b"k", b"v%d" % i, None) for i in range(5)]


class KafkaPythonDefaultsTests:
    def test_headers_round_trip(self, port: int) -> None:
        """kafka-python at its defaults (it picks Produce/Fetch versions from ApiVersions;
        seeing a broker of Kafka 0.11+ it turns idempotence on and asks InitProducerId)
        sends headers and reads them back."""
        from kafka import KafkaConsumer, KafkaProducer

        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
        headers = [(k, v) for k, v in HEADERS if v is not None]
        for i in range(5):
            producer.send("kp-headers", key=b"k%d" % i, value=b"v%d" % i, headers=headers,
                          partition=0, timestamp_ms=1_700_000_000_000 + i).get(timeout=20)
        producer.close()
        consumer = KafkaConsumer("kp-headers", bootstrap_servers=f"127.0.0.1:{port}",
                                 auto_offset_reset="earliest", consumer_timeout_ms=5000)
        got = [m for _, m in zip(range(5), consumer, strict=False)]
        consumer.close()
        assert [(m.key, m.value, m.headers, m.timestamp) for m in got] == [
            (b"k%d" % i, b"v%d" % i, headers, 1_700_000_000_000 + i) for i in range(5)]


    def test_zstd_with_idempotence_on(self, port: int) -> None:
        """kafka-python with ``enable_idempotence=True`` and ``compression_type="zstd"``
        (its zstd codec is the zstandard package): the idempotent producer's batches come
        back with keys, values, headers (a repeated name kept) and timestamps."""
        from kafka import KafkaConsumer, KafkaProducer

        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}",
                                 enable_idempotence=True, compression_type="zstd")
        headers = [("h1", b"x"), ("h2", b"\x00\xff"), ("h1", b"y")]
        for i in range(20):
            producer.send("kp-zstd", key=b"k%d" % i, value=b"zstd value %d" % i * 20,
                          headers=headers, partition=0,
                          timestamp_ms=1_700_000_000_000 + i).get(timeout=20)
        producer.close()
        consumer = KafkaConsumer("kp-zstd", bootstrap_servers=f"127.0.0.1:{port}",
                                 auto_offset_reset="earliest", consumer_timeout_ms=5000)
        got = [m for _, m in zip(range(20), consumer, strict=False)]
        consumer.close()
        assert [(m.offset, m.key, m.value, m.headers, m.timestamp) for m in got] == [
            (i, b"k%d" % i, b"zstd value %d" % i * 20, headers, 1_700_000_000_000 + i)
            for i in range(20)]


class KcatTests:
    def test_kcat_headers(self, port: int) -> None:
        """kcat -H on produce and %h on consume (Debian's kcat, librdkafka 2.0)."""
        kcat = debian_tool("kcat", "kcat")
        base = [kcat, "-b", f"127.0.0.1:{port}", "-t", "kcat-headers"]
        subprocess.run([*base, "-P", "-p", "0", "-K", ":", "-H", "a=1", "-H", "a=2", "-H",
                        "trace=xyz"], input="key1:value1\n", text=True, check=True,
                       capture_output=True, timeout=30)
        out = subprocess.run([*base, "-C", "-o", "beginning", "-e", "-q", "-f",
                              "%k|%s|%h\\n"], text=True, check=True, capture_output=True,
                             timeout=30).stdout
        assert out.splitlines() == ["key1|value1|a=1,a=2,trace=xyz"]
