"""The seed broker's admin commands on a broker with etcd (a real etcd process and a real
broker process): the contract's shapes with ``term`` = etcd's Raft term and ``index`` = the
revision of the write (checked against etcd's own ``mod_revision``), growing across
changes and across a restart of the broker."""

from __future__ import annotations

import base64
import json
import re
import socket
import time
import urllib.request
from pathlib import Path

from tests.control.real_etcd import EtcdCluster
from tests.support import BrokerProcess


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mod_revision(endpoint: str, key: str) -> int:
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    with urllib.request.urlopen(urllib.request.Request(
            endpoint + "/v3/kv/range", data=body, method="POST"), timeout=5) as answer:
        found = json.loads(answer.read())
    return int(found["kvs"][0]["mod_revision"])


def ask(broker: BrokerProcess, line: str) -> str:
    client = broker.client(timeout=10)
    try:
        return client.request(f"V1|1|{line}")
    finally:
        client.close()


def test_admin_commands_answer_with_etcds_term_and_revision(tmp_path: Path) -> None:
    """Shapes exactly as the contract says; ``index`` of a write is the etcd revision that
    wrote the key; indexes grow across changes and a broker restart; an id outside the
    address book cannot be registered."""
    etcd = EtcdCluster(tmp_path, 1)
    port = free_port()
    endpoint = etcd.endpoints[0]
    config = {"cluster": {"id": "adm", "broker_id": 0, "brokers": {0: f"127.0.0.1:{port}"},
                          "etcd": {"endpoints": [endpoint], "lease_ttl_ms": 2000}}}
    broker = BrokerProcess(tmp_path / "b0", config, port=port)
    try:
        broker.start()
        deadline = time.monotonic() + 30
        while ask(broker, "ADMIN_GET_METADATA|") != "V1|1|OK|topics=[] brokers=[0]":
            assert time.monotonic() < deadline, "the broker never registered in etcd"
            time.sleep(0.1)
        created = ask(broker, "ADMIN_CREATE_TOPIC|orders 2 1")
        match = re.fullmatch(r"V1\|1\|OK\|topic=orders partitions=2 replication_factor=1 "
                             r"term=(\d+) index=(\d+)", created)
        assert match, created
        term, index = int(match.group(1)), int(match.group(2))
        assert term >= 1 and index == mod_revision(endpoint, "/skerry/adm/topics/orders")
        # the answer is the registration state (what the broker's lease registered), not
        # what was sent
        registered = ask(broker, "ADMIN_REGISTER_BROKER|0 10.9.9.9 1234")
        assert re.fullmatch(rf"V1\|1\|OK\|broker_id=0 host=127\.0\.0\.1 port={port} "
                            rf"term={term} index=\d+", registered), registered
        assert "ERR|BAD_REQUEST|broker 7 is not in this cluster's address book" in \
            ask(broker, "ADMIN_REGISTER_BROKER|7 10.0.0.7 9092")
        beat = ask(broker, "ADMIN_BROKER_HEARTBEAT|0")
        assert re.fullmatch(rf"V1\|1\|OK\|broker_id=0 heartbeat=ok term={term} index=\d+",
                            beat), beat
        elected = ask(broker, "ADMIN_SET_PARTITION_LEADER|orders 0 0 0")
        match = re.fullmatch(rf"V1\|1\|OK\|topic=orders partition=0 leader=0 isr=\[0\] "
                             rf"term={term} index=(\d+)", elected)
        assert match, elected
        leader_index = int(match.group(1))
        assert leader_index > index
        assert leader_index == mod_revision(endpoint, "/skerry/adm/partitions/orders/0")
        assert ask(broker, "ADMIN_GET_METADATA|") == "V1|1|OK|topics=[orders] brokers=[0]"
        assert broker.stop() == 0
        broker.start()
        deadline = time.monotonic() + 30
        while True:
            later = ask(broker, "ADMIN_CREATE_TOPIC|later 1 1")
            if "|OK|" in later or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # until the restarted broker's session is up
        match = re.fullmatch(rf"V1\|1\|OK\|topic=later partitions=1 replication_factor=1 "
                             rf"term={term} index=(\d+)", later)
        assert match, later
        assert int(match.group(1)) > leader_index
    finally:
        broker.__exit__(None, None, None)
        etcd.stop()
