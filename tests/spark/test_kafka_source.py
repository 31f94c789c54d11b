"""Spark's ``skerry`` source reads a topic written by an unmodified Kafka producer
(confluent-kafka) through the Kafka listener: the same keys, values and offsets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka")

from tests.kafka.harness import kafka_port_of  # noqa: E402
from tests.support import BrokerProcess  # noqa: E402


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    proc = BrokerProcess(tmp_path_factory.mktemp("kafka-spark"), {"kafka_port": 0})
    proc.start()
    try:
        yield proc, kafka_port_of(proc.log_text())
    finally:
        proc.stop()


def test_skerry_source_reads_what_a_kafka_producer_wrote(spark: Any, kafka_broker: Any) -> None:
    from confluent_kafka import Producer

    proc, kafka_port = kafka_broker
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{kafka_port}", "linger.ms": 5})
    placed: list[tuple[int, int, bytes, bytes]] = []

    def report(err: Any, msg: Any) -> None:
        assert err is None
        placed.append((msg.partition(), msg.offset(), msg.key(), msg.value()))

    for i in range(2000):
        producer.produce("from-kafka", key=b"user%d" % (i % 13), value=b"order-%d" % i,
                         on_delivery=report)
    assert producer.flush(20) == 0
    df = (spark.read.format("skerry").option("bootstrap", f"127.0.0.1:{proc.port}")
          .option("topic", "from-kafka").load())
    pdf = df.select("partition", "offset", "key", "value").toPandas()
    rows = sorted(zip(pdf["partition"], pdf["offset"], [bytes(k) for k in pdf["key"]],
                      [bytes(v) for v in pdf["value"]], strict=True))
    assert rows == sorted(placed)
