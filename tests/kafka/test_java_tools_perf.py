"""Kafka's own load and verification tools from kafka-tools 4.3.1, unmodified, against a
real broker's Kafka listener: ``kafka-producer-perf-test`` (ProducerPerformance) and
``kafka-consumer-perf-test`` (ConsumerPerformance) complete with the record counts asked
for (through ``bench.kafka_tools``, the benchmark that prints their figures for
docs/performance.md), and ``kafka-verifiable-producer`` + ``kafka-verifiable-consumer``
(VerifiableProducer / VerifiableConsumer, the pair Kafka's own system tests use) in a
group of two consumers: every message the producer reports acknowledged is consumed, at
the partition and offset the acknowledgement named, and the consumers' commits succeed.

The JVM and Maven come as for tests/kafka/test_java_clients.py (``tests.support.debian_tool``)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from bench.kafka_tools import build_classpath, consumer_perf, create_topic, producer_perf
from tests.kafka.harness import start_kafka_broker
from tests.support import debian_tool

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def java() -> str:
    return debian_tool("java", "openjdk-17-jdk-headless")


@pytest.fixture(scope="module")
def classpath(java: str) -> str:
    return build_classpath(debian_tool("mvn", "maven"))


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    proc, kafka_port = start_kafka_broker(tmp_path_factory.mktemp("javatools"))
    try:
        yield kafka_port
    finally:
        proc.stop()


def test_producer_and_consumer_perf_tools(java: str, classpath: str, port: int) -> None:
    """kafka-producer-perf-test sends 20,000 records of 100 bytes at its defaults
    (idempotence on, acks=all) over 2 partitions and reports all 20,000 sent;
    kafka-consumer-perf-test then consumes exactly 20,000 in a group."""
    create_topic(java, classpath, port, "perf-t", 2)
    produced = producer_perf(java, classpath, port, "perf-t", 20_000, 100)
    assert produced.records == 20_000 and produced.records_per_sec > 0
    consumed = consumer_perf(java, classpath, port, "perf-t", 20_000, "perf-g")
    assert consumed.records == 20_000
    assert consumed.mb_per_sec > 0


def _events(stream: IO[str], into: list[dict[str, Any]]) -> None:
    for line in stream:
        if line.startswith("{"):
            into.append(json.loads(line))


def _split(events: list[list[dict[str, Any]]]) -> bool:
    """Whether each consumer's latest assignment is non-empty and together they hold the
    3 partitions once each (the group has settled on two members)."""
    latest = []
    for seen in events:
        assigned = [e for e in list(seen) if e["name"] == "partitions_assigned"]
        revoked = [e for e in list(seen) if e["name"] == "partitions_revoked"]
        if not assigned or (revoked and revoked[-1]["timestamp"] > assigned[-1]["timestamp"]):
            return False
        latest.append(sorted(p["partition"] for p in assigned[-1]["partitions"]))
    return all(latest) and sorted(latest[0] + latest[1]) == [0, 1, 2]


def test_verifiable_producer_and_consumers_in_a_group(java: str, classpath: str,
                                                      port: int, tmp_path: Path) -> None:
    """kafka-verifiable-producer (acks=all) sends 4,000 messages to 3 partitions while
    two kafka-verifiable-consumers share one group; each acknowledged (partition, offset,
    value) is consumed with that value, the group splits the 3 partitions between the two
    consumers, and every offset commit succeeds."""
    create_topic(java, classpath, port, "verify-t", 3)
    common = ["--bootstrap-server", f"127.0.0.1:{port}", "--topic", "verify-t"]
    consumers = []
    events: list[list[dict[str, Any]]] = []
    readers = []
    for _ in range(2):
        proc = subprocess.Popen(
            [java, "-cp", classpath, "org.apache.kafka.tools.VerifiableConsumer", *common,
             "--group-id", "verify-g", "--verbose", "--reset-policy", "earliest"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        consumers.append(proc)
        seen: list[dict[str, Any]] = []
        events.append(seen)
        assert proc.stdout is not None
        reader = threading.Thread(target=_events, args=(proc.stdout, seen), daemon=True)
        reader.start()
        readers.append(reader)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not _split(events):
            time.sleep(0.2)
        assert _split(events), events
        producer = subprocess.run(
            [java, "-cp", classpath, "org.apache.kafka.tools.VerifiableProducer", *common,
             "--max-messages", "4000", "--acks", "-1"],
            capture_output=True, text=True, timeout=180)
        assert producer.returncode == 0, producer.stderr[-2000:]
        produced = [json.loads(line) for line in producer.stdout.splitlines()
                    if line.startswith("{")]
        acked = {(e["partition"], e["offset"]): e["value"] for e in produced
                 if e["name"] == "producer_send_success"}
        summary = [e for e in produced if e["name"] == "tool_data"]
        assert summary and summary[0]["acked"] == 4000 == len(acked)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            consumed = {(e["partition"], e["offset"]): e["value"]
                        for seen in events for e in list(seen) if e["name"] == "record_data"}
            if len(consumed) >= len(acked):
                break
            time.sleep(0.5)
    finally:
        for proc in consumers:
            proc.terminate()
        for proc in consumers:
            proc.wait(30)
        for reader in readers:
            reader.join(10)
    consumed = {(e["partition"], e["offset"]): e["value"]
                for seen in events for e in seen if e["name"] == "record_data"}
    missing = set(acked) - set(consumed)
    assert not missing, sorted(missing)[:10]
    assert all(consumed[key] == value for key, value in acked.items())
    commits = [e for seen in events for e in seen if e["name"] == "offsets_committed"]
    assert commits and all(e["success"] for e in commits)


def test_the_bench_command_prints_both_tools_figures(java: str, classpath: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m bench.kafka_tools`` (docs/performance.md) stays runnable: a tiny run on
    its own broker prints a line per tool with the record count and the broker's CPU."""
    from bench import kafka_tools

    assert kafka_tools.main(["--records", "2000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# ") and "2,000 x 100 B" in lines[0]
    assert lines[1].startswith("kafka-producer-perf-test  2,000 records  ")
    assert lines[2].startswith("kafka-consumer-perf-test  2,000 records  ")
    assert all("broker CPU" in line for line in lines[1:3])
