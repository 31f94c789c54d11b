"""Real Kafka clients logging in with SASL PLAIN as users of ``auth.tokens_file`` (the
token is the password), against ``skerry serve`` on a loopback port: confluent-kafka and
kafka-python produce and consume with ``SASL_PLAINTEXT``; confluent-kafka also over
``SASL_SSL``; a wrong password and a client without SASL get nothing. (alice is a super
user: what a user may do is tests/access/test_kafka_acls.py's.)"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from broker.auth import hash_token
from tests.kafka.harness import kafka_port_of
from tests.support import BrokerProcess

TOKEN = "kafka-login-token-0123456789"


def _broker(tmp_path: Path, extra: dict[str, Any] | None = None) -> BrokerProcess:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice:{hash_token(TOKEN)}\n")
    return BrokerProcess(tmp_path / "b", {"kafka_port": 0,
                                          "auth": {"tokens_file": str(tokens),
                                                   "super_users": "alice"},
                                          **(extra or {})})


def _sasl(port: int, password: str = TOKEN, protocol: str = "SASL_PLAINTEXT") -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": protocol,
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": password}


def _round_trip(ck: Any, conf: dict[str, Any], topic: str) -> list[bytes]:
    """Produce v0-v2 to partition 0, then everything partition 0 holds (up to 2 s idle)."""
    producer = ck.Producer(conf)
    for i in range(3):
        producer.produce(topic, key=b"k", value=b"v%d" % i, partition=0)
    assert producer.flush(20) == 0
    consumer = ck.Consumer({**conf, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got: list[bytes] = []
    idle_until = time.monotonic() + 10
    while time.monotonic() < idle_until:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
            idle_until = time.monotonic() + 2
    consumer.close()
    return got


def test_confluent_kafka_logs_in_and_a_wrong_password_gets_nothing(tmp_path: Path) -> None:
    ck = pytest.importorskip("confluent_kafka")
    with _broker(tmp_path) as proc:
        port = kafka_port_of(proc.log_text())
        assert _round_trip(ck, _sasl(port), "secured") == [b"v0", b"v1", b"v2"]
        assert "SASL PLAIN ok: user alice" in proc.log_text()

        errors: list[Any] = []
        reports: list[Any] = []
        bad = ck.Producer({**_sasl(port, "wrong"), "error_cb": errors.append,
                           "message.timeout.ms": 3000})
        bad.produce("secured", value=b"never", partition=0,
                    on_delivery=lambda err, _msg: reports.append(err))
        bad.flush(10)
        assert len(reports) == 1 and reports[0] is not None  # not delivered
        assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors), errors
        assert "SASL PLAIN failed for user alice" in proc.log_text()

        reports.clear()
        plain = ck.Producer({"bootstrap.servers": f"127.0.0.1:{port}",
                             "message.timeout.ms": 3000})
        plain.produce("secured", value=b"never", partition=0,
                      on_delivery=lambda err, _msg: reports.append(err))
        plain.flush(10)
        assert len(reports) == 1 and reports[0] is not None
        assert "before SASL authentication" in proc.log_text()
        # Neither wrote anything: the topic still holds the three messages.
        assert _round_trip(ck, _sasl(port), "secured") == [b"v0", b"v1", b"v2"] * 2


def test_kafka_python_logs_in(tmp_path: Path) -> None:
    kafka = pytest.importorskip("kafka")
    with _broker(tmp_path) as proc:
        port = kafka_port_of(proc.log_text())
        conf = {"bootstrap_servers": f"127.0.0.1:{port}", "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
                "sasl_plain_password": TOKEN}
        producer = kafka.KafkaProducer(**conf)
        for i in range(3):
            producer.send("py", key=b"k", value=b"p%d" % i, partition=0).get(timeout=20)
        producer.close()
        consumer = kafka.KafkaConsumer(**conf, auto_offset_reset="earliest",
                                       consumer_timeout_ms=5000)
        consumer.assign([kafka.TopicPartition("py", 0)])
        assert [m.value for m in consumer][:3] == [b"p0", b"p1", b"p2"]
        consumer.close()
        with pytest.raises(kafka.errors.KafkaError):
            kafka.KafkaProducer(**{**conf, "sasl_plain_password": "wrong"},
                                max_block_ms=3000, request_timeout_ms=2000)


def test_sasl_over_tls(tmp_path: Path) -> None:
    ck = pytest.importorskip("confluent_kafka")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    with _broker(tmp_path, {"tls": {"cert": str(cert), "key": str(key)}}) as proc:
        port = kafka_port_of(proc.log_text())
        conf = {**_sasl(port, protocol="SASL_SSL"), "ssl.ca.location": str(cert)}
        assert _round_trip(ck, conf, "tls") == [b"v0", b"v1", b"v2"]
