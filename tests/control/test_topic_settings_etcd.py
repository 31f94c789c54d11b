"""Topic settings are the cluster's (issue 27, point 5): on three real broker processes
with one real etcd member, ADMIN_ALTER_TOPIC sent to one broker changes the topic's record
in etcd and every broker applies it (each one's ``topic.json``), a broker that was down
picks it up when it comes back, and a topic created with compaction settings has them on
every broker."""

from __future__ import annotations

import base64
import json
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from broker.cli.devcluster import free_ports
from tests.control.real_etcd import EtcdCluster
from tests.support import BrokerProcess

CLUSTER = "settings"


def ask(broker: BrokerProcess, line: str) -> str:
    client = broker.client(timeout=15)
    try:
        return client.request(f"V1|1|{line}")
    finally:
        client.close()


def etcd_record(endpoint: str, topic: str) -> dict[str, Any]:
    key = f"/skerry/{CLUSTER}/topics/{topic}"
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    with urllib.request.urlopen(urllib.request.Request(
            endpoint + "/v3/kv/range", data=body, method="POST"), timeout=5) as answer:
        found = json.loads(answer.read())
    return json.loads(base64.b64decode(found["kvs"][0]["value"]))


def topic_json(broker: BrokerProcess, topic: str) -> dict[str, Any]:
    path = broker.data_dir / "topics" / topic / "topic.json"
    return json.loads(path.read_text()) if path.exists() else {}


def wait_for(what: str, check: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[EtcdCluster, list[BrokerProcess]]]:
    etcd = EtcdCluster(tmp_path, 1)
    ports = free_ports(3)
    brokers = {i: f"127.0.0.1:{p}" for i, p in enumerate(ports)}
    procs = [BrokerProcess(tmp_path / f"b{i}", {
        "auto_create_topics": False,
        "cluster": {"id": CLUSTER, "broker_id": i, "brokers": brokers,
                    "etcd": {"endpoints": etcd.endpoints, "lease_ttl_ms": 2000}}},
        port=port) for i, port in enumerate(ports)]
    try:
        with ThreadPoolExecutor(3) as pool:
            for future in [pool.submit(p.start) for p in procs]:
                future.result()
        wait_for("three registered brokers", lambda: all(
            ask(p, "ADMIN_GET_METADATA|").endswith("brokers=[0 1 2]") for p in procs))
        yield etcd, procs
    finally:
        for proc in procs:
            proc.stop()
        etcd.stop()


def test_alter_on_one_broker_changes_every_broker(cluster) -> None:
    """Created through broker 0 with compaction settings, altered through broker 1:
    the etcd record holds the settings and all three brokers' topic.json follow, within
    moments; broker 2, stopped during a second alter, has it once restarted."""
    etcd, procs = cluster
    created = ask(procs[0], "ADMIN_CREATE_TOPIC|t 2 3 cleanup_policy=compact "
                            "min_compaction_lag_ms=5000")
    assert created.startswith("V1|1|OK|topic=t partitions=2 replication_factor=3"), created
    wait_for("the topic on every broker", lambda: all(
        topic_json(p, "t").get("cleanup_policy") == "compact"
        and topic_json(p, "t").get("min_compaction_lag_ms") == 5000 for p in procs))

    altered = ask(procs[1], "ADMIN_ALTER_TOPIC|t retention_ms=60000 cleanup_policy=compact,delete")
    assert altered == ("V1|1|OK|topic=t retention_ms=60000 retention_bytes=none "
                       "cleanup_policy=compact,delete min_compaction_lag_ms=5000 "
                       "delete_retention_ms=86400000"), altered
    settings = etcd_record(etcd.endpoints[0], "t")["settings"]
    assert settings["retention_ms"] == 60000 and settings["cleanup_policy"] == "compact,delete"
    wait_for("the alter on every broker", lambda: all(
        topic_json(p, "t").get("retention_ms") == 60000
        and topic_json(p, "t").get("cleanup_policy") == "compact,delete" for p in procs),
        timeout=10)

    procs[2].stop()
    assert ask(procs[0], "ADMIN_ALTER_TOPIC|t retention_ms=none").startswith(
        "V1|1|OK|topic=t retention_ms=none")
    assert etcd_record(etcd.endpoints[0], "t")["settings"]["retention_ms"] is None
    assert topic_json(procs[2], "t")["retention_ms"] == 60000  # it was down
    procs[2].start()
    wait_for("the stopped broker to catch up", lambda: all(
        topic_json(p, "t").get("retention_ms") is None for p in procs))


def test_invalid_setting_changes_nothing(cluster) -> None:
    """A value the store refuses is BAD_REQUEST and leaves etcd's record as it was."""
    etcd, procs = cluster
    ask(procs[0], "ADMIN_CREATE_TOPIC|u 1 3")
    before = etcd_record(etcd.endpoints[0], "u")
    refused = ask(procs[2], "ADMIN_ALTER_TOPIC|u segment_bytes=10")
    assert refused.startswith("V1|1|ERR|BAD_REQUEST|"), refused
    assert etcd_record(etcd.endpoints[0], "u") == before
