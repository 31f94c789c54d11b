"""One core, three transports, on a real broker process: messages produced by unmodified
Kafka clients are consumed over V1 (``detail=true enc=b64``) and polled over Iggy with the
same offsets and bytes, and messages produced over V1 and sent over Iggy are read by a
Kafka consumer with the same offsets and bytes."""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")

from confluent_kafka import Producer  # noqa: E402
from kafka import KafkaConsumer, TopicPartition  # noqa: E402

from broker.iggy import codec  # noqa: E402
from broker.iggy.codec import Identifier, PartitioningKind  # noqa: E402
from tests.iggy.harness import RawClient, iggy_port_of  # noqa: E402
from tests.iggy.test_cross_protocol import key_header, poll, v1_detail  # noqa: E402
from tests.kafka.harness import kafka_port_of  # noqa: E402
from tests.support import BrokerProcess, V1Client  # noqa: E402

VALUES = [b"plain", b"with space, comma|pipe", bytes(range(256)), b"\xff\xfe", b"last"]
KEYS = [b"acct-1", b"acct-2", None, b"k:x", b"acct-1"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int, int]]:
    proc = BrokerProcess(tmp_path_factory.mktemp("kafka-cross"),
                         {"iggy_port": 0, "kafka_port": 0})
    with proc:
        text = proc.log_text()
        yield proc, iggy_port_of(text), kafka_port_of(text)


def kafka_read(port: int, topic: str, partition: int, count: int) -> list[tuple]:
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None,
                             enable_auto_commit=False, fetch_max_wait_ms=100)
    consumer.assign([TopicPartition(topic, partition)])
    consumer.seek_to_beginning()
    got: list = []
    deadline = time.monotonic() + 20
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(records)
    consumer.close()
    return [(r.offset, r.key, r.value, r.timestamp) for r in got]


class KafkaToOthersTests:
    def test_produced_over_kafka_consumed_over_v1_and_iggy(self, broker):
        proc, iggy_port, kafka_port = broker
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{kafka_port}", "linger.ms": 5})
        for key, value in zip(KEYS, VALUES, strict=True):
            producer.produce("kx", key=key, value=value, partition=1)
        assert producer.flush(20) == 0
        v1 = V1Client(proc.port)
        detail = v1_detail(v1, "kx", 1, 0)
        assert [(o, k, v) for o, _ts, k, v in detail] == \
            [(i, k or b"", v) for i, (k, v) in enumerate(zip(KEYS, VALUES, strict=True))]
        raw = RawClient(iggy_port)
        raw.login()
        records = poll(raw, "default", "kx", 1, 0)
        assert [(r["offset"], r["payload"], r["headers"]) for r in records] == \
            [(i, v, key_header(k) if k else b"")
             for i, (k, v) in enumerate(zip(KEYS, VALUES, strict=True))]
        # The Kafka consumer sees what the others see, CreateTime from the producer.
        kafka = kafka_read(kafka_port, "kx", 1, len(VALUES))
        assert [(o, k, v) for o, k, v, _ts in kafka] == \
            [(i, k, v) for i, (k, v) in enumerate(zip(KEYS, VALUES, strict=True))]
        assert [ts for *_, ts in kafka] == [r["origin"] // 1000 for r in records]


class OthersToKafkaTests:
    def test_produced_over_v1_and_sent_over_iggy_read_by_a_kafka_consumer(self, broker):
        proc, iggy_port, kafka_port = broker
        v1 = V1Client(proc.port)
        assert v1.request("V1|1|ADMIN_CREATE_TOPIC|vx 2 1").startswith("V1|1|OK")
        lines = [("user1", "aGVsbG8gd29ybGQ="), ("user2", "AAEC"), ("user1", "Zm9v")]
        for i, (key, b64) in enumerate(lines):
            line = v1.request(f"V1|{i}|PRODUCE|vx {key}:{b64} enc=b64 partition=0")
            assert re.fullmatch(rf"V1\|{i}\|OK\|partition=0 offset={i} hw=\d+", line), line
        raw = RawClient(iggy_port)
        raw.login()
        payloads = [b"from-iggy", bytes(range(10))]
        headers = [key_header(b"acct-9"), b""]
        messages = codec.encode_messages(payloads, headers, [0, 0])
        send = codec.SendMessages(Identifier("default"), Identifier("vx"),
                                  PartitioningKind.PARTITION_ID, struct.pack("<I", 0), 2,
                                  messages)
        assert raw.call(send) == b"\x00" * 8
        got = kafka_read(kafka_port, "vx", 0, 5)
        assert [(o, k, v) for o, k, v, _ts in got] == [
            (0, b"user1", b"hello world"), (1, b"user2", b"\x00\x01\x02"),
            (2, b"user1", b"foo"), (3, b"acct-9", b"from-iggy"), (4, None, bytes(range(10)))]
        detail = v1_detail(v1, "vx", 0, 0)
        assert [ts for *_, ts in got] == [ts for _o, ts, _k, _v in detail]


class HeadersAcrossTransportsTests:
    def test_kafka_headers_as_iggy_user_headers_and_back(self, broker):
        """Kafka headers Iggy can say arrive at an Iggy poll as string-keyed raw user
        headers (after the key header); a list it cannot say (a duplicate key) is carried
        in ``kafka.headers`` entries; V1 CONSUME shows key and value. Iggy user headers
        come back to a Kafka consumer as headers, and the Kafka list byte for byte."""
        from data.format import KIND_RAW, KIND_STRING, decode_user_headers, encode_user_headers

        proc, iggy_port, kafka_port = broker
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{kafka_port}", "linger.ms": 5})
        producer.produce("hx", key=b"k1", value=b"plain", partition=0,
                         headers=[("trace", b"abc"), ("n", b"\x00\x01")])
        producer.produce("hx", key=b"k2", value=b"dups", partition=0,
                         headers=[("d", b"1"), ("d", b"2"), ("z", None)])
        assert producer.flush(20) == 0
        raw = RawClient(iggy_port)
        raw.login()
        records = poll(raw, "default", "hx", 0, 0)
        assert decode_user_headers(records[0]["headers"]) == [
            (KIND_STRING, b"key", KIND_STRING, b"k1"), (KIND_STRING, b"trace", KIND_RAW, b"abc"),
            (KIND_STRING, b"n", KIND_RAW, b"\x00\x01")]
        assert [name for _, name, _, _ in decode_user_headers(records[1]["headers"])] == \
            [b"key", b"kafka.headers"]
        v1 = V1Client(proc.port)
        assert [(k, v) for _o, _ts, k, v in v1_detail(v1, "hx", 0, 0)] == \
            [(b"k1", b"plain"), (b"k2", b"dups")]
        headers = encode_user_headers([(KIND_STRING, b"region", KIND_STRING, b"eu"),
                                       (KIND_STRING, b"n", 7, (5).to_bytes(8, "little"))])
        send = codec.SendMessages(Identifier("default"), Identifier("hx"),
                                  PartitioningKind.PARTITION_ID, struct.pack("<I", 0), 1,
                                  codec.encode_messages([b"from-iggy"], [headers], [0]))
        assert raw.call(send) == b"\x00" * 8
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{kafka_port}", group_id=None,
                                 enable_auto_commit=False, fetch_max_wait_ms=100)
        consumer.assign([TopicPartition("hx", 0)])
        consumer.seek_to_beginning()
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                got.extend(batch)
        consumer.close()
        assert [(r.key, r.value, r.headers) for r in got] == [
            (b"k1", b"plain", [("trace", b"abc"), ("n", b"\x00\x01")]),
            (b"k2", b"dups", [("d", b"1"), ("d", b"2"), ("z", None)]),
            (None, b"from-iggy", [("region", b"eu"), ("n", (5).to_bytes(8, "little"))])]
