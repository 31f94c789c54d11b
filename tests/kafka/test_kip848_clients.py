"""Real KIP-848 consumers (``group.protocol=consumer``) against a real broker on loopback:
confluent-kafka (librdkafka >= 2.12) members, then Java kafka-clients 4.3.1 members
(tests/kafka/java, GroupMemberDriver), as child processes, three on a six-partition topic
under a steady producer; a fourth joins, then one of the first three is killed with
SIGKILL (issue 31).

From the members' own ``on_assign``/``on_revoke`` callbacks and consumed messages
(timestamped, merged; ``bench.rebalance_compare`` runs the scenario and reads the logs):
no partition is ever owned by two members at once, every produced message is consumed,
duplicates are only the killed member's uncommitted work (counted), and the members that
kept partitions keep consuming (their longest stop is printed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench.rebalance_compare import Outcome, run_scenario
from tests.kafka.harness import kafka_port_of
from tests.kafka.test_java_clients import classpath  # noqa: F401 - the fixture
from tests.support import ROOT, BrokerProcess, V1Client

confluent_kafka = pytest.importorskip("confluent_kafka")


def _librdkafka() -> tuple[int, ...]:
    return tuple(int(x) for x in confluent_kafka.libversion()[0].split(".")[:2])


@pytest.mark.skipif(_librdkafka() < (2, 12), reason="KIP-848 needs librdkafka 2.12+")
class ConfluentConsumerProtocolTests:
    def test_join_and_kill_9_hand_partitions_over_without_overlap_or_loss(
            self, tmp_path: Path) -> None:
        """Three members, a fourth joins, one is killed -9: never two owners of one
        partition, every message consumed, only the killed member's uncommitted messages
        seen twice, and the survivors never stop for a rebalance (longest stop printed; a
        loose bound here, the machine is shared: docs/groups.md has the figures)."""
        check(run_scenario(tmp_path, "kip848"))


def check(outcome: Outcome) -> None:
    print(outcome.line())
    assert outcome.overlaps == []
    assert outcome.produced > 1000
    assert outcome.missing == 0
    assert outcome.unexplained_duplicates == 0
    assert outcome.join_settle_s < 10
    assert outcome.death_settle_s < 6 + 10  # the session timeout, then a handover
    assert outcome.join_stop_s < 2.0
    assert outcome.death_stop_s < 2.0


class JavaConsumerProtocolTests:
    def test_join_and_kill_9_hand_partitions_over_without_overlap_or_loss(
            self, tmp_path: Path, classpath: str) -> None:  # noqa: F811 - the fixture
        """The same scenario with Kafka's Java consumer (``group.protocol=consumer``, its
        rebalance listener's callbacks logged): the same guarantees."""
        check(run_scenario(tmp_path, "kip848-java", java_classpath=classpath))


class ConsumerGroupsToolTests:
    def test_kafka_consumer_groups_describes_a_live_consumer_group(
            self, tmp_path: Path, classpath: str) -> None:  # noqa: F811 - the fixture
        """Kafka's kafka-consumer-groups (ConsumerGroupCommand 4.3.1, unmodified) against a
        group of two KIP-848 members: ``--describe`` shows each partition with its owner,
        ``--members`` both members with their partition counts (6 in all), ``--state``
        the group Stable with 2 members, and ``--list --type`` the group as a consumer
        group."""
        from tests.kafka.test_java_clients import tool

        (tmp_path / "b").mkdir()
        with BrokerProcess(tmp_path / "b", {"kafka_port": 0}) as broker:
            port = kafka_port_of(broker.log_text())
            v1 = V1Client(broker.port)
            assert "|OK|" in v1.request("V1|1|ADMIN_CREATE_TOPIC|tool848 6 1")
            stop = tmp_path / "stop"
            logs = [tmp_path / f"m{i}.jsonl" for i in range(2)]
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            procs = [subprocess.Popen(
                [sys.executable, "-m", "tests.kafka.group_member", "--client", "ck",
                 "--bootstrap", f"127.0.0.1:{port}", "--topic", "tool848", "--group", "g848",
                 "--log", str(log), "--name", f"member-{i}", "--protocol", "consumer",
                 "--stop", str(stop), "--max-seconds", "120"], cwd=str(ROOT), env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for i, log in enumerate(logs)]
            try:
                deadline = time.time() + 60
                while time.time() < deadline:
                    owned = [_owned_now(log) for log in logs]
                    if all(owned) and set().union(*owned) == set(range(6)):
                        break
                    time.sleep(0.2)
                else:
                    raise AssertionError("the two members never shared the topic")
                groups = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
                described = tool(classpath, groups, port, "--describe", "--group", "g848")
                rows = [line.split() for line in described.splitlines()
                        if line.startswith("g848 ")]
                assert sorted(int(r[2]) for r in rows) == list(range(6))
                assert {r[-1] for r in rows} == {"member-0", "member-1"}
                members = tool(classpath, groups, port, "--describe", "--group", "g848",
                               "--members")
                counts = {line.split()[3]: line.split()[4] for line in members.splitlines()
                          if line.startswith("g848 ")}
                assert set(counts) == {"member-0", "member-1"}, members
                assert sum(int(n) for n in counts.values()) == 6, members
                state = tool(classpath, groups, port, "--describe", "--group", "g848",
                             "--state")
                assert "Stable" in state and "uniform" in state, state
                listed = tool(classpath, groups, port, "--list", "--type")
                assert any(line.split()[:2] == ["g848", "Consumer"]
                           for line in listed.splitlines()), listed
                print(described, members, state, listed, sep="\n")
            finally:
                stop.touch()
                for proc in procs:
                    try:
                        proc.wait(30)
                    except subprocess.TimeoutExpired:
                        proc.kill()


def _owned_now(log: Path) -> set[int]:
    held: set[int] = set()
    if not log.exists():
        return held
    for line in log.read_text().splitlines():
        if not line.endswith("}"):
            continue
        event = json.loads(line)
        if event["e"] == "assign":
            held |= set(event["parts"])
        elif event["e"] == "revoke":
            held -= set(event["parts"])
    return held


@pytest.mark.skipif(_librdkafka() < (2, 12), reason="KIP-848 needs librdkafka 2.12+")
class TopicChangeTests:
    def test_a_member_gets_partitions_added_to_its_topic(self, tmp_path: Path) -> None:
        """A KIP-848 member (confluent-kafka, ``group.protocol=consumer``) holds both
        partitions of a two-partition topic; Kafka's CreatePartitions grows the topic to
        four: within a bounded time the member is assigned partitions 2 and 3 and
        consumes the messages produced to them. (The member's own heartbeat would find the
        change too; tests/services/test_consumer_topic_changes.py checks that the group
        changes at once, before any heartbeat.)"""
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewPartitions

        (tmp_path / "b").mkdir()
        with BrokerProcess(tmp_path / "b", {"kafka_port": 0}) as broker:
            port = kafka_port_of(broker.log_text())
            bootstrap = f"127.0.0.1:{port}"
            v1 = V1Client(broker.port)
            assert "|OK|" in v1.request("V1|1|ADMIN_CREATE_TOPIC|grow848 2 1")
            stop, log = tmp_path / "stop", tmp_path / "m.jsonl"
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.kafka.group_member", "--client", "ck",
                 "--bootstrap", bootstrap, "--topic", "grow848", "--group", "g-grow",
                 "--log", str(log), "--protocol", "consumer", "--stop", str(stop),
                 "--max-seconds", "120"], cwd=str(ROOT),
                env=dict(os.environ, PYTHONPATH=str(ROOT)),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                _wait_for(lambda: _owned_now(log) == {0, 1}, 60, "the member never held 0 and 1")
                admin = AdminClient({"bootstrap.servers": bootstrap})
                for future in admin.create_partitions(
                        [NewPartitions("grow848", 4)], request_timeout=15).values():
                    future.result(timeout=15)
                grown = time.monotonic()
                producer = Producer({"bootstrap.servers": bootstrap})
                for partition in (2, 3):
                    for i in range(5):
                        producer.produce("grow848", f"p{partition}-{i}".encode(),
                                         partition=partition)
                assert producer.flush(15) == 0
                _wait_for(lambda: {m["p"] for m in _messages(log)} >= {2, 3}, 30,
                          "the member never consumed partitions 2 and 3")
                print(f"partitions 2 and 3 consumed {time.monotonic() - grown:.1f} s after "
                      "CreatePartitions")
                assert _owned_now(log) == {0, 1, 2, 3}
                assert sorted(m["v"] for m in _messages(log)) == sorted(
                    f"p{p}-{i}" for p in (2, 3) for i in range(5))
            finally:
                stop.touch()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()


def _wait_for(condition: Any, seconds: float, failure: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(failure)


def _messages(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    events = [json.loads(line) for line in log.read_text().splitlines() if line.endswith("}")]
    return [event for event in events if event["e"] == "msg"]
