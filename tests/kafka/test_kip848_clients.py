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

from pathlib import Path

import pytest

from bench.rebalance_compare import Outcome, run_scenario
from tests.kafka.test_java_clients import classpath  # noqa: F401 - the fixture

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
