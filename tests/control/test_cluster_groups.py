"""One group coordinator for the whole cluster, on real processes: one etcd member and three
brokers with ``cluster.etcd`` (``bench/group_coordinator.py``'s ``GroupCluster``). A
group's coordinator is the leader of its partition of ``__skerry_groups``; the other
brokers forward V1 group commands to it and relay its answers; when it is killed the new
leader of the partition loads the group's state and serves it, with no committed offset
lost (docs/cluster.md, Consumer groups)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.group_coordinator import TTL_MS, GroupCluster, assigned, wait


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[GroupCluster]:
    c = GroupCluster(tmp_path)
    try:
        c.start()
        c.ready()
        c.create_topic("gt", 3)
        yield c
    finally:
        c.close()


def test_one_group_across_brokers_and_failover(cluster: GroupCluster) -> None:
    """Two members of one group on two brokers get disjoint assignments covering every
    partition in one generation; DESCRIBE_GROUP and LIST_GROUPS answer the same on every
    broker; a commit through one broker is read back through the other two; after kill -9
    of the coordinator the group is served again within TTL + 2 s with its committed
    offset and generation."""
    c = cluster
    wait(lambda: c.coordinator("gg") is not None, "a coordinator")
    coordinator = c.coordinator("gg")
    a, b = [x for x in c.procs if x != coordinator]
    gen_a, first = assigned(c.ask(a, "V1|2|JOIN|gg gt ca session_timeout_ms=30000"))
    gen_b, second = assigned(c.ask(b, "V1|3|JOIN|gg gt cb session_timeout_ms=30000"))
    gen, first = assigned(c.ask(a, f"V1|4|SYNC|gg gt ca {gen_b}"))
    assert (gen_a, gen_b, gen) == (1, 2, 2)
    assert sorted(first + second) == [0, 1, 2] and not set(first) & set(second)
    descriptions = {c.ask(x, "V1|5|DESCRIBE_GROUP|gg gt") for x in c.procs}
    assert len(descriptions) == 1, descriptions
    described = next(iter(descriptions))
    assert "generation=2" in described and described.endswith(f" coordinator={coordinator}")

    owner = "ca" if 0 in first else "cb"
    assert c.ask(a, f"V1|6|COMMIT|gg gt {owner} 2 0 1") == "V1|6|OK|committed=true"
    for x in c.procs:
        assert c.ask(x, "V1|7|OFFSET|gg gt 0") == "V1|7|OK|offset=1"
    listed = {c.ask(x, "V1|8|LIST_GROUPS|") for x in c.procs}
    assert listed == {"V1|8|OK|groups=[gg:gt]"}, listed
    for x in c.procs:  # `skerry groups list` through any broker names the coordinator
        shown = subprocess.run(
            [sys.executable, "-m", "broker", "groups", "list", "--json", "--bootstrap",
             f"127.0.0.1:{c.procs[x].port}"], capture_output=True, text=True, check=True,
            timeout=60).stdout
        assert json.loads(shown) == [{"group": "gg", "topic": "gt", "type": "classic",
                                      "coordinator": coordinator,
                                      "state": "stable", "generation": 2, "members": 2,
                                      "lag": 2}], shown

    c.procs[coordinator].kill9()
    killed = time.monotonic()
    wait(lambda: c.ask(a, "V1|9|OFFSET|gg gt 0", 1.0) == "V1|9|OK|offset=1",
         "the group served again", 20, step=0.01)
    took = time.monotonic() - killed
    print(f"coordinator {coordinator} killed; served again after {took:.2f} s")
    assert took <= TTL_MS / 1000 + 2, took
    assert c.ask(b, "V1|10|OFFSET|gg gt 0") == "V1|10|OK|offset=1"
    assert assigned(c.ask(b, "V1|11|SYNC|gg gt cb 2")) == (2, second)


@pytest.fixture
def kafka_cluster(tmp_path: Path) -> Iterator[GroupCluster]:
    c = GroupCluster(tmp_path, kafka=True)
    try:
        c.start()
        c.ready()
        c.create_topic("gt", 3)
        yield c
    finally:
        c.close()


def _kafka_commit(c: GroupCluster, group: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` of ``gt`` for Kafka group ``group`` (a consumer that assigns,
    not subscribes: a commit outside any generation, as Kafka takes it)."""
    ck = pytest.importorskip("confluent_kafka")
    consumer = ck.Consumer({"bootstrap.servers": c.kafka_bootstrap, "group.id": group,
                            "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[ck.TopicPartition("gt", p, o) for p, o in offsets.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def _kafka_committed(c: GroupCluster, group: str) -> dict[int, int]:
    ck = pytest.importorskip("confluent_kafka")
    consumer = ck.Consumer({"bootstrap.servers": c.kafka_bootstrap, "group.id": group,
                            "enable.auto.commit": False})
    try:
        got = consumer.committed([ck.TopicPartition("gt", p) for p in range(3)], timeout=20)
    except ck.KafkaException as error:  # the coordinator still loading: ask again
        raise AssertionError(str(error)) from error
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in got}


def test_restart_of_every_broker_keeps_groups_and_offsets(
        kafka_cluster: GroupCluster) -> None:
    """SIGTERM of all three brokers, then start again: every group's committed offsets
    and generation are served again, from any broker (the records are in the replicated
    topic, loaded by each partition's new leader): V1 groups through V1, a Kafka group
    through confluent-kafka."""
    pytest.importorskip("confluent_kafka")
    c = kafka_cluster
    wait(lambda: c.coordinator("keep") is not None, "a coordinator")
    for proc in c.procs.values():  # every replica of the topic in its own small segments
        settings = json.loads((proc.data_dir / "topics" / "__skerry_groups" /
                               "topic.json").read_text())
        assert settings["segment_bytes"] == 4 << 20, settings
    assert assigned(c.ask(0, "V1|1|JOIN|keep gt k1 session_timeout_ms=60000"))[0] == 1
    assert c.ask(1, "V1|2|COMMIT|keep gt k1 1 2 1") == "V1|2|OK|committed=true"
    assert c.ask(2, "V1|3|ADMIN_COMMIT|other gt 1 1") == "V1|3|OK|committed=true"
    _kafka_commit(c, "kafka-keep", {0: 1, 2: 1})
    assert _kafka_committed(c, "kafka-keep") == {0: 1, 1: -1001, 2: 1}
    for proc in c.procs.values():
        proc.stop()
    c.start()
    c.ready()
    assert wait(lambda: _kafka_committed(c, "kafka-keep") == {0: 1, 1: -1001, 2: 1},
                "the Kafka group's offsets after the restart", 60, step=0.5)
    for x in c.procs:
        assert wait(lambda x=x: c.ask(x, "V1|4|OFFSET|keep gt 2") == "V1|4|OK|offset=1",
                    "offsets after the restart")
        assert c.ask(x, "V1|5|OFFSET|other gt 1") == "V1|5|OK|offset=1"
    assert assigned(c.ask(1, "V1|6|SYNC|keep gt k1 1")) == (1, [0, 1, 2])
