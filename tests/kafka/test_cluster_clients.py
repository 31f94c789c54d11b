"""Unmodified Kafka clients on a Skerry cluster: one real etcd member and three broker
processes with Kafka listeners (``cluster.kafka_brokers``), topic ``orders`` with 3
partitions led by brokers 0, 1 and 2, RF 3, min ISR 2.

A confluent-kafka producer told only broker 0's address produces with acks=all to all
three partitions (it must follow Metadata to brokers 1 and 2: broker 0 refuses writes for
partitions it does not lead); a group consumer told only broker 2's address reads them all
and commits through the coordinator Metadata named; after a kill -9 of broker 1 the
producer's next messages reach the new leader, and a new member of the group resumes
exactly after the committed offsets. Skipped with a one-line reason when etcd or
confluent-kafka is missing."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench.replication_scenario import free_ports
from groups.records import partition_for_group
from tests.control.real_etcd import EtcdCluster
from tests.support import ROOT, BrokerProcess

ck = pytest.importorskip("confluent_kafka")

TOPIC = "orders"


def _start(tmp_path: Path) -> tuple[EtcdCluster, dict[int, BrokerProcess], dict[int, str]]:
    (tmp_path / "etcd").mkdir()
    etcd = EtcdCluster(tmp_path / "etcd", 1)
    ports = free_ports(6)
    brokers = {i: f"127.0.0.1:{ports[i]}" for i in range(3)}
    kafka = {i: f"127.0.0.1:{ports[3 + i]}" for i in range(3)}
    procs = {}
    for i in range(3):
        procs[i] = BrokerProcess(tmp_path / f"broker{i}", {
            "log_level": "info", "auto_create_topics": False, "kafka_port": ports[3 + i],
            "storage": {"fsync": "never"},
            "replication": {"replica_lag_timeout_ms": 1000, "ack_timeout_ms": 3000,
                            "fetch_wait_ms": 100, "retry_backoff_ms": 100,
                            "request_timeout_ms": 1000},
            "topics": {TOPIC: {"partitions": 3, "replication_factor": 3,
                               "min_insync_replicas": 2}},
            "cluster": {"broker_id": i, "brokers": brokers, "kafka_brokers": kafka,
                        "id": "kafka-test",
                        "etcd": {"endpoints": etcd.endpoints, "lease_ttl_ms": 2000}},
        }, port=ports[i])
    for proc in procs.values():
        proc.start()
    return etcd, procs, kafka


def _leaders(bootstrap: str) -> tuple[dict[int, int], set[int]]:
    meta = ck.Producer({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    parts = meta.topics[TOPIC].partitions
    return {p: parts[p].leader for p in parts}, set(meta.brokers)


def _isrs(bootstrap: str) -> dict[int, list[int]]:
    meta = ck.Producer({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    return {p: list(x.isrs) for p, x in meta.topics[TOPIC].partitions.items()}


def _wait(condition: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = condition()
        except ck.KafkaException:
            got = None
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _produce(bootstrap: str, start: int, count: int) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                            "message.timeout.ms": 30000, "linger.ms": 5})
    errors: list[Any] = []
    for i in range(start, start + count):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"order-%d" % i, partition=i % 3,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(40) == 0
    assert errors == []


def _consume(bootstrap: str, count: int) -> list[bytes]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "billing",
                            "enable.auto.commit": False, "auto.offset.reset": "earliest",
                            "session.timeout.ms": 6000})
    consumer.subscribe([TOPIC])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error() is not None:
            continue
        got.append(msg.value())
    consumer.commit(asynchronous=False)
    # Nothing beyond what was produced arrives.
    extra = consumer.poll(1.0)
    assert extra is None or extra.error() is not None
    consumer.close()
    return got


def test_kafka_clients_follow_leaders_and_the_coordinator_across_a_kill9(tmp_path: Path):
    etcd, procs, kafka = _start(tmp_path)
    try:
        # Whoever registered first leads everything; once every replica is in sync the
        # operator hands partitions 1 and 2 to their first replicas (brokers 1 and 2).
        _wait(lambda: all(len(isr) == 3 for isr in _isrs(kafka[0]).values()),
              "every replica in sync, as Kafka's Metadata reports it")
        for partition in (1, 2):
            subprocess.run([sys.executable, "-m", "broker", "cluster", "elect", TOPIC,
                            str(partition), "--bootstrap",
                            f"127.0.0.1:{procs[0].config['port']}"],
                           cwd=str(ROOT), check=True, capture_output=True, timeout=60)
        _wait(lambda: _leaders(kafka[0]) == ({0: 0, 1: 1, 2: 2}, {0, 1, 2}),
              "brokers 0, 1 and 2 leading partitions 0, 1 and 2")

        _produce(kafka[0], 0, 300)
        got = _consume(kafka[2], 300)
        assert sorted(got) == sorted(b"order-%d" % i for i in range(300))

        procs[1].kill9()
        _wait(lambda: _leaders(kafka[0])[0][1] in (0, 2) and _leaders(kafka[0])[1] == {0, 2},
              "a new leader of partition 1, and broker 1 gone from the brokers")
        _produce(kafka[0], 300, 300)
        got = _consume(kafka[2], 300)  # the group's committed offsets: only the new ones
        assert sorted(got) == sorted(b"order-%d" % i for i in range(300, 600))
    finally:
        for proc in procs.values():
            proc.__exit__(None, None, None)
        etcd.stop()


def _group_coordinator(procs: dict[int, BrokerProcess], group: str) -> int | None:
    """The confirmed leader of the group's partition of __skerry_groups (default count)."""
    partition = partition_for_group(group, 10)
    for broker, proc in procs.items():
        if proc.proc is None or proc.proc.poll() is not None:
            continue
        client = proc.client(timeout=2)
        try:
            reply = client.request(f"V1|s|REPLICA_STATUS|__skerry_groups {partition}")
        finally:
            client.close()
        if "role=leader" in reply and "confirmed=true" in reply:
            return broker
    return None


def test_kill9_of_the_groups_coordinator_keeps_its_committed_offsets(tmp_path: Path):
    """A confluent-kafka group commits through the coordinator FindCoordinator names (the
    leader of the group's __skerry_groups partition); kill -9 of that broker: a new member
    of the group, told another broker's address, resumes exactly after the committed
    offsets (nothing read again), which the new coordinator loaded from the partition."""
    etcd, procs, kafka = _start(tmp_path)
    try:
        _wait(lambda: all(len(isr) == 3 for isr in _isrs(kafka[0]).values()),
              "every replica in sync")
        _wait(lambda: _group_coordinator(procs, "billing") is not None, "a coordinator")
        _produce(kafka[0], 0, 300)
        got = _consume(kafka[0], 300)
        assert sorted(got) == sorted(b"order-%d" % i for i in range(300))
        coordinator = _group_coordinator(procs, "billing")
        assert coordinator is not None
        procs[coordinator].kill9()
        survivor = next(b for b in procs if b != coordinator)
        _wait(lambda: _leaders(kafka[survivor])[1] == set(procs) - {coordinator},
              "the dead broker gone from the brokers")
        _produce(kafka[survivor], 300, 300)
        got = _consume(kafka[survivor], 300)
        assert sorted(got) == sorted(b"order-%d" % i for i in range(300, 600))
    finally:
        for proc in procs.values():
            proc.__exit__(None, None, None)
        etcd.stop()
