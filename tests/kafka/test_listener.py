"""The Kafka listener's edges: TLS like the other listeners (SASL logins:
tests/kafka/test_sasl*.py), and bad bytes that never hurt the broker (random and mutated frames into
connections over an in-memory broker: no handler bug, the connection closed or answered,
other connections unaffected)."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kafka.harness import Harness, i32, kafka_port_of, request, string
from tests.kafka.test_data import SET_V0, SET_V1, fetch_body, produce_body
from tests.kafka.test_fuzz import mutated
from tests.support import BrokerProcess


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def test_tls_when_tls_cert_is_set(tmp_path: Path) -> None:
    """With tls.cert/tls.key the Kafka listener speaks TLS only: confluent-kafka with
    security.protocol=SSL produces and consumes."""
    ck = pytest.importorskip("confluent_kafka")
    cert, key = _self_signed(tmp_path)
    with BrokerProcess(tmp_path / "b", {"kafka_port": 0,
                                        "tls": {"cert": str(cert), "key": str(key)}}) as proc:
        port = kafka_port_of(proc.log_text())
        ssl = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
               "ssl.ca.location": str(cert)}
        producer = ck.Producer(ssl)
        for i in range(3):
            producer.produce("secure", key=b"k", value=b"v%d" % i, partition=0)
        assert producer.flush(20) == 0
        consumer = ck.Consumer({**ssl, "group.id": "g", "enable.auto.commit": False})
        consumer.assign([ck.TopicPartition("secure", 0, ck.OFFSET_BEGINNING)])
        got = []
        for _ in range(50):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) == 3:
                break
        consumer.close()
        assert got == [b"v0", b"v1", b"v2"]


FRAMES = [
    request(0, 0, 1, produce_body("t1", 0, SET_V0)),
    request(0, 2, 2, produce_body("t1", 0, SET_V1)),
    request(1, 0, 3, fetch_body("t1", 0, 0)),
    request(1, 3, 4, fetch_body("t1", 0, 0, version=3)),
    request(3, 0, 5, i32(1) + string("t1")),
    request(2, 1, 6, i32(-1) + i32(1) + string("t1") + i32(1) + i32(0) + i32(-1) + i32(-1)),
    request(18, 0, 7),
]


@pytest.fixture(scope="module")
def h(tmp_path_factory):
    harness = Harness(tmp_path_factory.mktemp("fuzz"))
    yield harness
    harness.close()


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.one_of(mutated(FRAMES), st.binary(max_size=200)))
def test_bad_frames_never_hurt_the_broker(h, caplog, data):
    """Whatever arrives, no handler fails with a bug (nothing logged at ERROR), the
    connection either answers or closes, and a fresh connection is served."""
    caplog.set_level(logging.ERROR, logger="skerry.kafka")
    caplog.clear()
    conn = h.connect()
    conn.send_raw(data)
    conn.proto.readConnectionLost()  # the half-close: everything read is answered
    h.advance(3e6)  # long polls in the mutated fetches time out (max_wait is an int32 of ms)
    assert conn.closed
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    other = h.connect()
    assert other.call(18, 0)[:2] == b"\x00\x00"
