"""An idempotent producer across a leader's kill -9, on a real cluster: one etcd member and
three broker processes (``tests/kafka/test_cluster_clients.py``'s), topic ``orders`` with 3
partitions, RF 3, min ISR 2. confluent-kafka with ``enable.idempotence=true`` produces
without pause while the leader of the partitions is killed -9; afterwards every acknowledged
message is in the log and no message is there twice (retries after the failover reach the
new leader, which knows the batches from the replicated records). One run here; skipped
with a one-line reason when etcd or confluent-kafka is missing."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ck = pytest.importorskip("confluent_kafka")

from tests.kafka.test_cluster_clients import TOPIC, _isrs, _leaders, _start, _wait  # noqa: E402

COUNT = 6000


def run_failover(tmp_path: Path, count: int = COUNT) -> dict[str, Any]:
    """One run: produce ``count`` messages idempotently while the leader is killed -9;
    what was acked, failed and stored (``bench/idempotence_failover.py`` repeats it)."""
    etcd, procs, kafka = _start(tmp_path)
    try:
        _wait(lambda: all(len(isr) == 3 for isr in _isrs(kafka[0]).values()),
              "every replica in sync")
        leaders, _ = _leaders(kafka[0])
        victim = leaders[0]
        bootstrap = ",".join(kafka.values())
        producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                "acks": "all", "linger.ms": 2, "message.timeout.ms": 60000})
        acked: list[bytes] = []
        failed: list[Any] = []

        def report(err: Any, msg: Any) -> None:
            if err is None:
                acked.append(msg.value())
            else:
                failed.append(err)

        started = time.monotonic()
        for i in range(count):
            producer.produce(TOPIC, value=b"m-%d" % i, partition=i % 3, on_delivery=report)
            producer.poll(0)
            if i == count // 3:
                procs[victim].kill9()
            time.sleep(0.001)
        unflushed = producer.flush(90)
        seconds = time.monotonic() - started
        _wait(lambda: victim not in _leaders(bootstrap)[1], "the dead broker gone")
        consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                                "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        consumer.subscribe([TOPIC])
        stored: list[bytes] = []
        idle = time.monotonic()
        while time.monotonic() - idle < 8:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            stored.append(msg.value())
            idle = time.monotonic()
        consumer.close()
        return {"acked": acked, "failed": failed, "stored": stored, "unflushed": unflushed,
                "seconds": seconds}
    finally:
        for proc in procs.values():
            proc.__exit__(None, None, None)
        etcd.stop()


def test_idempotent_producer_across_a_leader_kill9(tmp_path: Path) -> None:
    """Every acked message once, none twice."""
    run = run_failover(tmp_path)
    twice = [v for v, n in Counter(run["stored"]).items() if n > 1]
    assert twice == []
    assert run["unflushed"] == 0
    assert set(run["acked"]) <= set(run["stored"])
    assert len(run["acked"]) + len(run["failed"]) == COUNT
