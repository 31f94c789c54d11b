"""franz-go (github.com/twmb/franz-go, a Go Kafka client) at its default settings against a
real broker's Kafka listener: its producer (idempotence on, acks=all, batches v2) sends
2,000 records with headers (a repeated name, binary bytes) and a group consumer
(``kgo.ConsumerGroup``, the cooperative-sticky balancer by default) reads every one back
once with key, value and headers byte for byte, then commits.

The driver is tests/kafka/go (``main.go``, ``go.mod``, ``go.sum``), built here into a
temporary directory; its modules come from the Go module proxy the first time, then from
Go's module cache. Without ``go`` on the PATH the test is skipped, except in CI
(``CI`` set), where .ci/run has made it available and a missing ``go`` is a failure."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kafka.harness import start_kafka_broker
from tests.support import ROOT

pytestmark = pytest.mark.slow

DRIVER = ROOT / "tests" / "kafka" / "go"


@pytest.fixture(scope="module")
def franzcheck(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The driver's binary, built with ``go build``."""
    go = shutil.which("go")
    if go is None:
        if os.environ.get("CI"):
            pytest.fail("go is not on the PATH in CI (.ci/run should have provided it)")
        pytest.skip("go is not installed (the Go toolchain builds tests/kafka/go)")
    binary = tmp_path_factory.mktemp("franz") / "franzcheck"
    out = subprocess.run([go, "build", "-buildvcs=false", "-o", str(binary), "."], cwd=DRIVER,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return str(binary)


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    proc, kafka_port = start_kafka_broker(tmp_path_factory.mktemp("go"))
    try:
        yield kafka_port
    finally:
        proc.stop()


def test_franz_go_produces_and_consumes_at_defaults(franzcheck: str, port: int,
                                                    tmp_path: Path) -> None:
    """Every record franz-go's producer had acknowledged comes back to its group
    consumer once, with its key, value and three headers (``h1`` twice) unchanged."""
    confluent_kafka = pytest.importorskip("confluent_kafka.admin")
    admin = confluent_kafka.AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    futures = admin.create_topics([confluent_kafka.NewTopic("franz-t", 3)])
    futures["franz-t"].result(30)
    out = subprocess.run([franzcheck, f"127.0.0.1:{port}", "franz-t", "franz-g", "2000"],
                         capture_output=True, text=True, timeout=180)
    steps = dict(line.split(" ", 2)[1:] for line in out.stdout.splitlines()
                 if line.startswith("STEP "))
    assert steps == {"produce": "ok acked=2000", "consume": "ok read=2000 exact"}, (
        out.stdout[-3000:] + out.stderr[-3000:])
