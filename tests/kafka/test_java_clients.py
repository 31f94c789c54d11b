"""Kafka's own Java client (kafka-clients 4.x from Maven Central, the library under
Kafka's tools, Connect, Streams and most JVM services) against a real broker's Kafka
listener, at its default settings: the producer (idempotence on, acks=all) sends 10,000
records with headers and timestamps and a subscribe() consumer in a group reads every one
back byte for byte; the AdminClient creates, lists, describes (configs too), alters and
deletes a topic, commits, lists, describes and deletes a group's offsets
(tests/kafka/java: the driver, built here with Maven; dependencies come from Maven Central
the first time, then from ~/.m2); and Kafka's own command-line tools from kafka-tools of the
same release, unmodified: ``kafka-topics`` (TopicCommand) creates, lists, describes, grows
and deletes a topic, ``kafka-consumer-groups`` (ConsumerGroupCommand) lists a group,
shows its state, its committed offsets and lag per partition, and resets them to the
earliest offsets, ``kafka-configs`` (ConfigCommand, from Kafka's core jar) describes and
alters a topic's configs, and ``kafka-acls`` (AclCommand) adds, lists and removes ACLs.

``mvn`` and ``java`` come from Debian's ``maven`` and ``openjdk-17-jdk-headless``, which
``.ci/install-tools`` installs; missing, the test skips with that reason (fails in CI:
``tests.support.debian_tool``)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.auth import hash_token
from tests.kafka.harness import kafka_port_of, start_kafka_broker
from tests.support import ROOT, BrokerProcess, debian_tool

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
        # set on the topic (at creation) / the broker's default, as Kafka reports them
        "configSources": "ok retention.ms=60000/DYNAMIC_TOPIC_CONFIG "
                         "segment.bytes=67108864/DEFAULT_CONFIG",
        "incrementalAlterConfigs": "ok retention.bytes=8192",
        # DELETE: back to the broker's default, reported as such
        "deleteConfig": "ok retention.ms=-1/DEFAULT_CONFIG "
                        "retention.bytes=8192/DYNAMIC_TOPIC_CONFIG",
        "alterConsumerGroupOffsets": "ok java-group offset=5",
        "resetConsumerGroupOffsets": "ok earliest=0 offset=0",
        "listConsumerGroups": "ok true",
        "describeConsumerGroups": "ok state=Empty",
        "listConsumerGroupOffsets": "ok offset=0",
        "deleteConsumerGroupOffsets": "ok left=0",
        "deleteTopics": "ok listed=false",
    }


def tool(classpath: str, main: str, port: int, *args: str) -> str:
    """Run one of Kafka's command-line tools; its standard output (it must exit 0)."""
    _, java = _tools()
    out = subprocess.run([java, "-cp", classpath, main, "--bootstrap-server",
                          f"127.0.0.1:{port}", *args], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "Error" not in out.stdout, out.stdout + out.stderr[-2000:]
    return out.stdout


def test_kafka_topics_tool(classpath: str, port: int) -> None:
    """kafka-topics.sh's TopicCommand: create, list, describe (partitions, leader 0, the
    configs set on the topic and not the broker's defaults, as Kafka shows them), alter
    the partition count, delete."""
    topics = "org.apache.kafka.tools.TopicCommand"
    assert "Created topic tc-t." in tool(classpath, topics, port, "--create", "--topic", "tc-t",
                                         "--partitions", "2", "--replication-factor", "1",
                                         "--config", "retention.ms=5000")
    assert "tc-t" in tool(classpath, topics, port, "--list").split()
    described = tool(classpath, topics, port, "--describe", "--topic", "tc-t")
    assert "PartitionCount: 2" in described and "retention.ms=5000" in described
    assert "segment.bytes" not in described
    assert described.count("Leader: 0") == 2
    tool(classpath, topics, port, "--alter", "--topic", "tc-t", "--partitions", "3")
    assert "PartitionCount: 3" in tool(classpath, topics, port, "--describe", "--topic", "tc-t")
    tool(classpath, topics, port, "--delete", "--topic", "tc-t")
    assert "tc-t" not in tool(classpath, topics, port, "--list").split()


def test_kafka_consumer_groups_tool(classpath: str, port: int) -> None:
    """kafka-consumer-groups.sh's ConsumerGroupCommand: a group with committed offsets is
    listed, and its state shown (Empty, no members)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    tool(classpath, "org.apache.kafka.tools.TopicCommand", port, "--create", "--topic",
         "tool-t", "--partitions", "1")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": f"127.0.0.1:{port}",
                                         "group.id": "tool-g", "enable.auto.commit": False})
    consumer.commit(offsets=[confluent_kafka.TopicPartition("tool-t", 0, 0)],
                    asynchronous=False)
    consumer.close()
    groups = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
    assert "tool-g" in tool(classpath, groups, port, "--list").split()
    state = tool(classpath, groups, port, "--describe", "--group", "tool-g", "--state")
    assert "Empty" in state and "tool-g" in state


def test_kafka_configs_tool(classpath: str, port: int) -> None:
    """kafka-configs.sh's ConfigCommand (in Kafka's core jar, kafka_2.13, in 4.x):
    ``--describe`` shows only the settings set on the topic (none after a plain create),
    ``--alter --add-config`` sets one, which the next ``--describe`` shows as a
    DYNAMIC_TOPIC_CONFIG; ``--describe --all`` shows the others as DEFAULT_CONFIG; and
    ``--delete-config`` takes the topic back to the broker's default."""
    configs = "kafka.admin.ConfigCommand"
    tool(classpath, "org.apache.kafka.tools.TopicCommand", port, "--create", "--topic",
         "cfg-t", "--partitions", "1")
    topic = ("--entity-type", "topics", "--entity-name", "cfg-t")
    described = tool(classpath, configs, port, "--describe", *topic)
    assert "Dynamic configs for topic cfg-t are:" in described
    assert "retention.ms=" not in described and "segment.bytes=" not in described
    altered = tool(classpath, configs, port, "--alter", *topic, "--add-config",
                   "retention.ms=12345")
    assert "Completed updating config for topic cfg-t." in altered
    described = tool(classpath, configs, port, "--describe", *topic)
    assert ("retention.ms=12345 sensitive=false "
            "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=12345}") in described
    assert "segment.bytes=" not in described
    everything = tool(classpath, configs, port, "--describe", "--all", *topic)
    assert ("segment.bytes=67108864 sensitive=false "
            "synonyms={DEFAULT_CONFIG:segment.bytes=67108864}") in everything
    assert "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=12345}" in everything
    tool(classpath, configs, port, "--alter", *topic, "--delete-config", "retention.ms")
    assert "retention.ms=" not in tool(classpath, configs, port, "--describe", *topic)


def _offsets_by_partition(described: str, group: str) -> dict[int, tuple[int, int, int]]:
    """``--describe --group`` rows: partition -> (current offset, log-end offset, lag)."""
    rows = {}
    for line in described.splitlines():
        cells = line.split()
        if len(cells) >= 6 and cells[0] == group and cells[2].isdigit():
            rows[int(cells[2])] = (int(cells[3]), int(cells[4]), int(cells[5]))
    return rows


def test_kafka_consumer_groups_offsets_tool(classpath: str, port: int) -> None:
    """kafka-consumer-groups.sh's ConsumerGroupCommand: ``--describe`` shows the group's
    committed offset, the log-end offset and the lag of each partition, and
    ``--reset-offsets --to-earliest --execute`` moves the committed offsets back to 0."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    tool(classpath, "org.apache.kafka.tools.TopicCommand", port, "--create", "--topic",
         "lag-t", "--partitions", "2")
    producer = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
    for i in range(10):
        producer.produce("lag-t", b"v%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": f"127.0.0.1:{port}",
                                         "group.id": "lag-g", "enable.auto.commit": False})
    consumer.commit(offsets=[confluent_kafka.TopicPartition("lag-t", 0, 3),
                             confluent_kafka.TopicPartition("lag-t", 1, 4)],
                    asynchronous=False)
    consumer.close()
    groups = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
    described = tool(classpath, groups, port, "--describe", "--group", "lag-g")
    assert _offsets_by_partition(described, "lag-g") == {0: (3, 5, 2), 1: (4, 5, 1)}
    reset = tool(classpath, groups, port, "--reset-offsets", "--group", "lag-g", "--topic",
                 "lag-t", "--to-earliest", "--execute")
    assert "NEW-OFFSET" in reset
    described = tool(classpath, groups, port, "--describe", "--group", "lag-g")
    assert _offsets_by_partition(described, "lag-g") == {0: (0, 5, 5), 1: (0, 5, 5)}


def test_java_producer_and_group_consumer_at_defaults(classpath: str, port: int) -> None:
    """kafka-clients at its default settings (the producer: idempotence on, acks=all)
    sends 10,000 records with headers (a repeated name, a null value, binary bytes) and
    timestamps to 3 partitions; a subscribe() consumer in a group reads every one back
    once, key, value, headers and timestamp byte for byte (tests/kafka/java,
    RoundTripDriver)."""
    steps = run_driver(classpath, "skerry.RoundTripDriver", str(port), "java-round", "10000")
    assert steps == {"produce": "ok acked=10000 idempotence=true acks=-1",
                     "consume": "ok read=10000 exact"}


def test_kafka_acls_tool(classpath: str, tmp_path: Path) -> None:
    """kafka-acls.sh's AclCommand, logged in with SASL PLAIN as a super user, adds a literal
    topic rule and a prefixed group rule, lists them, and removes one; V1's ADMIN_ACL_LIST
    (the same store) shows what the tool did (docs/security.md)."""
    token = "tok-admin-java-acls"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"admin:{hash_token(token)}\n")
    properties = tmp_path / "admin.properties"
    properties.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{token}";\n')
    config = {"kafka_port": 0, "storage": {"fsync": "never"},
              "auth": {"tokens_file": str(tokens), "super_users": "admin"}}
    with BrokerProcess(tmp_path, config) as proc:
        port = kafka_port_of(proc.log_text())
        acls = ("org.apache.kafka.tools.AclCommand", port, "--command-config", str(properties))
        added = tool(classpath, *acls, "--add", "--allow-principal", "User:alice",
                     "--operation", "Read", "--topic", "orders")
        assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in added
        tool(classpath, *acls, "--add", "--allow-principal", "User:alice", "--operation",
             "Read", "--group", "billing", "--resource-pattern-type", "prefixed")
        listed = tool(classpath, *acls, "--list")
        assert "resourceType=TOPIC, name=orders, patternType=LITERAL" in listed
        assert "resourceType=GROUP, name=billing, patternType=PREFIXED" in listed
        tool(classpath, *acls, "--remove", "--force", "--allow-principal", "User:alice",
             "--operation", "Read", "--topic", "orders")
        v1 = proc.client()
        assert v1.request(f"V1|1|AUTH|admin {token}") == "V1|1|OK"
        answer = v1.request("V1|2|ADMIN_ACL_LIST|")
        assert "billing" in answer and "orders" not in answer, answer
