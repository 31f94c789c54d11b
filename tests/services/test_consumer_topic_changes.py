"""KIP-848 groups follow topic changes made on any path, without waiting for a member's
heartbeat: an in-process broker (``build_broker`` on an injected clock) whose core grows,
creates and deletes topics. Right after each change ConsumerGroupDescribe (what
``kafka-consumer-groups --describe`` shows) has the new group epoch and target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet.task import Clock

from broker.config import config_from_mapping
from broker.server import Broker, build_broker
from groups.consumer_effects import HeartbeatRequest
from tests.support import ManualThread


def _broker(tmp_path: Path) -> Broker:
    thread = ManualThread()
    broker = build_broker(config_from_mapping({"data_dir": str(tmp_path / "data")}), Clock(),
                          run_in_thread=thread)
    thread.run_all()
    return broker


def _join(broker: Broker, group: str, **subscription: Any) -> int:
    return broker.consumer_groups.heartbeat(HeartbeatRequest(
        group, "m1", 0, rebalance_timeout_ms=10_000, owned=(), **subscription)).member_epoch


def _target(broker: Broker, group: str) -> list[tuple[str, int]]:
    return broker.consumer_groups.assignment_of(group, "m1")[1]


def test_partitions_added_give_a_member_a_new_target_at_once(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    try:
        broker.core.create_topic("orders", 2, 1, None, None, None)
        epoch = _join(broker, "g", topic_names=("orders",))
        assert _target(broker, "g") == [("orders", 0), ("orders", 1)]
        broker.core.add_partitions("orders", 4)
        assert broker.consumer_groups.describe("g").group_epoch == epoch + 1
        assert _target(broker, "g") == [("orders", p) for p in range(4)]
    finally:
        broker.core.store.close()


def test_a_topic_created_later_joins_a_regex_subscription(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    try:
        broker.core.create_topic("news-a", 1, 1, None, None, None)
        _join(broker, "g", topic_regex="news-.*")
        assert _target(broker, "g") == [("news-a", 0)]
        broker.core.create_topic("news-b", 2, 1, None, None, None)
        broker.core.create_topic("other", 1, 1, None, None, None)
        assert _target(broker, "g") == [("news-a", 0), ("news-b", 0), ("news-b", 1)]
    finally:
        broker.core.store.close()


def test_a_deleted_topic_leaves_the_target(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    try:
        broker.core.create_topic("a", 1, 1, None, None, None)
        broker.core.create_topic("b", 1, 1, None, None, None)
        epoch = _join(broker, "g", topic_names=("a", "b"))
        broker.core.delete_topic("b")
        assert _target(broker, "g") == [("a", 0)]
        assert broker.consumer_groups.describe("g").group_epoch == epoch + 1
    finally:
        broker.core.store.close()


def test_a_change_applied_from_etcds_watch_reaches_the_groups(tmp_path: Path) -> None:
    """In a cluster on etcd, another broker's CreatePartitions reaches this one as a topic
    record that the control plane applies through ``CoreTopics``: the same news."""
    from broker.services.control.topics import CoreTopics
    from replication.control.keys import TopicRecord

    broker = _broker(tmp_path)
    try:
        broker.core.create_topic("orders", 2, 1, None, None, None)
        _join(broker, "g", topic_names=("orders",))
        watched = CoreTopics(broker.core, broker.replication)
        watched.grow_local("orders", 3)
        assert _target(broker, "g") == [("orders", p) for p in range(3)]
        watched.create_local("orders-eu", TopicRecord(partitions=1, replication_factor=1,
                                                      min_isr=1, replicas=((0,),)))
        epoch = _join(broker, "g2", topic_regex="orders-.*")
        assert _target(broker, "g2") == [("orders-eu", 0)]
        watched.delete_local("orders-eu")
        assert broker.consumer_groups.describe("g2").group_epoch == epoch + 1
        assert _target(broker, "g2") == []
    finally:
        broker.core.store.close()
