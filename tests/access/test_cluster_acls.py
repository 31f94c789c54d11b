"""ACLs in a cluster: one real etcd member and three ``skerry serve`` processes with
``cluster.etcd`` and authentication on. The rules live under ``/skerry/<id>/acls``: an ACL
added through one broker holds on the others within 1 s, and a connection already open on
another broker loses a removed permission at its next request."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from broker.auth import hash_token
from broker.cli.devcluster import free_ports
from tests.control.real_etcd import EtcdCluster
from tests.support import BrokerProcess, V1Client

PEERS = {"broker-0": "tok-b0-Jx81", "broker-1": "tok-b1-Qw27", "broker-2": "tok-b2-Lm55"}
USERS = {**PEERS, "alice": "tok-alice-Vz90", "admin": "tok-admin-Pp42"}
TOPIC = "orders"


def until(check: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)
    return time.monotonic() - started


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, BrokerProcess]]:
    tmp = tmp_path_factory.mktemp("acl-cluster")
    etcd = EtcdCluster(tmp, 1)
    tokens = tmp / "tokens"
    tokens.write_text("".join(f"{u}:{hash_token(t)}\n" for u, t in USERS.items()))
    ports = free_ports(3)
    brokers: dict[int, BrokerProcess] = {}
    try:
        for i in range(3):
            token = tmp / f"b{i}.token"
            token.write_text(PEERS[f"broker-{i}"] + "\n")
            token.chmod(0o600)
            config: dict[str, Any] = {
                "host": "127.0.0.1", "storage": {"fsync": "never"},
                "auth": {"tokens_file": str(tokens), "super_users": "admin"},
                "topics": {TOPIC: {"partitions": 1, "replication_factor": 3}},
                "cluster": {
                    "broker_id": i, "id": "acl-test",
                    "brokers": {b: f"127.0.0.1:{p}" for b, p in enumerate(ports)},
                    "peer_users": sorted(PEERS), "peer_user": f"broker-{i}",
                    "peer_token_file": str(token),
                    "etcd": {"endpoints": etcd.endpoints, "lease_ttl_ms": 2000}}}
            brokers[i] = BrokerProcess(tmp / f"b{i}", config, port=ports[i]).start(timeout=30)
        yield brokers
    finally:
        for broker in brokers.values():
            if broker.proc is not None and broker.proc.poll() is None:
                broker.stop()
        etcd.stop()


def login(broker: BrokerProcess, user: str) -> V1Client:
    client = broker.client()
    assert client.request(f"V1|1|AUTH|{user} {USERS[user]}") == "V1|1|OK"
    return client


def test_an_acl_added_on_one_broker_holds_on_the_others(cluster: dict[int, BrokerProcess]
                                                        ) -> None:
    """alice may not describe orders anywhere; an ACL added through broker 0 lets her on
    brokers 1 and 2 within 1 s, on connections opened before the change; removing it
    through broker 1 takes it away from her open connection on broker 2 at its next
    request."""
    admin = login(cluster[0], "admin")
    alices = {i: login(cluster[i], "alice") for i in (1, 2)}
    for i, alice in alices.items():
        reply = alice.request(f"V1|2|OFFSETS|{TOPIC} 0")
        assert "|ERR|NOT_AUTHORIZED|User:alice may not Describe Topic:orders" in reply, (i, reply)
    assert admin.request(f"V1|3|ADMIN_ACL_ADD|User:alice Topic {TOPIC} Describe").endswith(
        "|OK|added=1")
    for i, alice in alices.items():
        took = until(lambda a=alice: "|OK|earliest=" in a.request(f"V1|4|OFFSETS|{TOPIC} 0"),
                     1.0, f"the ACL on broker {i}")
        assert took <= 1.0
    listed = login(cluster[2], "admin").request("V1|5|ADMIN_ACL_LIST|")
    assert listed == "V1|5|OK|acls=[User:alice,Topic,Literal,orders,Describe,Allow]", listed
    remover = login(cluster[1], "admin")
    assert remover.request("V1|6|ADMIN_ACL_REMOVE|principal=User:alice").startswith(
        "V1|6|OK|removed=1")
    until(lambda: "NOT_AUTHORIZED" in alices[2].request(f"V1|7|OFFSETS|{TOPIC} 0"), 1.0,
          "the removal on broker 2's open connection")
