"""Kafka's own Java client (kafka-clients 4.x from Maven Central, the library under
Kafka's tools, Connect, Streams and most JVM services) against a real broker's Kafka
listener, at its default settings: the AdminClient creates, lists, describes (configs
too), alters and deletes a topic, commits, lists, describes and deletes a group's offsets
(tests/kafka/java: the driver, built here with Maven; dependencies come from Maven Central
the first time, then from ~/.m2).

``mvn`` and ``java`` come from Debian's ``maven`` and ``openjdk-17-jdk-headless``, installed
when missing where the tests run as root with apt-get (CI: ``tests.support.debian_tool``);
elsewhere the test is skipped with that reason."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kafka.harness import start_kafka_broker
from tests.support import ROOT, debian_tool

DRIVER = ROOT / "tests" / "kafka" / "java"


def _tools() -> tuple[str, str]:
    return debian_tool("mvn", "maven"), debian_tool("java", "openjdk-17-jdk-headless")


@pytest.fixture(scope="module")
def classpath() -> str:
    """Compile the driver and resolve kafka-clients; the classpath to run it with."""
    mvn, _ = _tools()
    out = subprocess.run(
        [mvn, "-B", "-q", "compile", "dependency:build-classpath",
         "-Dmdep.outputFile=target/classpath.txt"],
        cwd=DRIVER, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    deps = (DRIVER / "target" / "classpath.txt").read_text().strip()
    return f"{DRIVER / 'target' / 'classes'}{os.pathsep}{deps}"


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    proc, kafka_port = start_kafka_broker(tmp_path_factory.mktemp("java"))
    try:
        yield kafka_port
    finally:
        proc.stop()


def run_driver(classpath: str, main: str, *args: str) -> dict[str, str]:
    _, java = _tools()
    out = subprocess.run([java, "-cp", classpath, main, *args], capture_output=True,
                         text=True, timeout=300)
    steps = {}
    for line in out.stdout.splitlines():
        if line.startswith("STEP "):
            _, name, rest = line.split(" ", 2)
            steps[name] = rest
    assert steps, out.stdout[-3000:] + out.stderr[-3000:]
    return steps


def test_java_admin_client(classpath: str, port: int, tmp_path: Path) -> None:
    """Every AdminClient step succeeds with the values the broker holds."""
    steps = run_driver(classpath, "skerry.AdminDriver", str(port))
    assert steps == {
        "createTopics": "ok java-admin",
        "listTopics": "ok true",
        "describeTopics": "ok partitions=3",
        "describeConfigs": "ok retention.ms=60000",
        "incrementalAlterConfigs": "ok retention.bytes=8192",
        "alterConsumerGroupOffsets": "ok java-group",
        "listConsumerGroups": "ok true",
        "describeConsumerGroups": "ok state=Empty",
        "listConsumerGroupOffsets": "ok offset=0",
        "deleteConsumerGroupOffsets": "ok left=0",
        "deleteTopics": "ok listed=false",
    }
