"""ACLs over V1 on a real broker (``skerry serve`` with ``auth.tokens_file``): the session
of issue 33 replayed with ACLs on, a user with Read on one topic and one group, prefixed
ACLs and a deny over an allow, refusals logged once per connection and counted in
/metrics, the rules kept in the data directory across a restart."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from broker.auth import hash_token
from tests.kafka.harness import kafka_port_of
from tests.support import BrokerProcess, V1Client

USERS = {"alice": "tok-alice-8Hq2", "admin": "tok-admin-3Zp9", "bob": "tok-bob-5Kt1"}


def _config(tmp_path: Path, **auth: object) -> dict[str, object]:
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"{u}:{hash_token(t)}\n" for u, t in USERS.items()))
    return {"auth": {"tokens_file": str(tokens), "super_users": "admin", **auth},
            "topics": {"orders": {"partitions": 3}, "payments": {"partitions": 1}},
            "storage": {"fsync": "never"}}


def login(broker: BrokerProcess, user: str) -> V1Client:
    client = broker.client()
    assert client.request(f"V1|1|AUTH|{user} {USERS[user]}") == "V1|1|OK"
    return client


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp_path = tmp_path_factory.mktemp("acl-broker")
    with BrokerProcess(tmp_path, {**_config(tmp_path), "metrics_port": 0}) as running:
        yield running


def _refused(reply: str, principal: str, operation: str, resource: str) -> None:
    assert reply.split("|")[2:4] == ["ERR", "NOT_AUTHORIZED"], reply
    assert f"User:{principal} may not {operation} {resource}" in reply, reply


class IssueSessionTests:
    def test_alice_cannot_stop_writes_or_delete_and_admin_can(self, broker: BrokerProcess
                                                             ) -> None:
        """The session of issue 33: alice's SET_PARTITION_ROLE, ADMIN_DELETE_TOPIC and
        ADMIN_REGISTER_BROKER are refused NOT_AUTHORIZED and change nothing (orders stays a
        writable leader); the super user's succeed."""
        alice = login(broker, "alice")
        admin = login(broker, "admin")
        assert admin.request("V1|2|ADMIN_ACL_ADD|User:alice Topic orders Write").endswith(
            "|OK|added=1")
        _refused(alice.request("V1|4|SET_PARTITION_ROLE|orders 0 follower"), "alice",
                 "ClusterAction", "Cluster:kafka-cluster")
        assert "|OK|partition=" in alice.request("V1|7|PRODUCE|orders k2:v2")
        _refused(alice.request("V1|8|ADMIN_DELETE_TOPIC|orders"), "alice", "Delete",
                 "Topic:orders")
        _refused(alice.request("V1|7|ADMIN_REGISTER_BROKER|9 10.0.0.9 9092"), "alice",
                 "ClusterAction", "Cluster:kafka-cluster")
        meta = admin.request("V1|9|METADATA|orders")
        assert "roles=[leader leader leader]" in meta, meta
        reply = admin.request("V1|10|ADMIN_REGISTER_BROKER|9 10.0.0.9 9092")
        assert "|OK|broker_id=9" in reply, reply
        assert admin.request("V1|11|SET_PARTITION_ROLE|payments 0 follower").startswith(
            "V1|11|OK|topic=payments partition=0 role=follower")
        assert admin.request("V1|12|SET_PARTITION_ROLE|payments 0 leader").startswith(
            "V1|12|OK")
        admin.request("V1|13|ADMIN_ACL_REMOVE|principal=User:alice")

    def test_refusals_are_logged_once_per_connection_and_counted(self, broker: BrokerProcess
                                                                 ) -> None:
        """Three refused deletes on one connection log one line naming principal,
        operation and resource; /metrics counts all three."""
        bob = login(broker, "bob")
        for cid in range(3):
            _refused(bob.request(f"V1|{cid}|ADMIN_DELETE_TOPIC|payments"), "bob", "Delete",
                     "Topic:payments")
        lines = [ln for ln in broker.log_text().splitlines()
                 if "User:bob may not Delete Topic:payments" in ln]
        assert len(lines) == 1, lines
        text = _metrics(broker)
        match = re.search(r'skerry_authorization_refusals_total\{operation="Delete",'
                          r'resource_type="Topic"\} (\d+)', text)
        assert match and int(float(match.group(1))) >= 3, text[-2000:]


def _metrics(broker: BrokerProcess) -> str:
    port = None
    for line in broker.log_text().splitlines():
        found = re.search(r"metrics\D*127\.0\.0\.1:(\d+)", line)
        if found:
            port = int(found.group(1))
    assert port, broker.log_text()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={
        "Authorization": f"Bearer {USERS['admin']}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.read().decode()


class ReadOnlyUserTests:
    def test_alice_reads_orders_in_billing_and_nothing_else(self, broker: BrokerProcess
                                                           ) -> None:
        """With Read on topic orders and group billing only, alice consumes orders in
        billing (JOIN, CONSUME, COMMIT, OFFSET); her produce to orders (slow and fast
        path), her consume of payments and her commit in group other are refused; METADATA
        lists orders and not payments."""
        admin = login(broker, "admin")
        for line in ("User:alice Topic orders Read", "User:alice Group billing Read"):
            assert "|OK|added=1" in admin.request(f"V1|1|ADMIN_ACL_ADD|{line}")
        assert "|OK|" in admin.request("V1|2|PRODUCE|orders k:hello partition=1")
        before = [admin.request(f"V1|0|OFFSETS|orders {p}") for p in range(3)]
        alice = login(broker, "alice")
        joined = alice.request("V1|3|JOIN|billing orders a1")
        assert "|OK|generation=" in joined, joined
        generation = re.search(r"generation=(\d+)", joined).group(1)
        assert "hello" in alice.request("V1|4|CONSUME|orders 1 0")
        assert alice.request(f"V1|5|COMMIT|billing orders a1 {generation} 1 1").endswith(
            "committed=true")
        assert alice.request("V1|6|OFFSET|billing orders 1") == "V1|6|OK|offset=1"
        _refused(alice.request("V1|7|PRODUCE|orders k:v acks=1 partition=0"), "alice",
                 "Write", "Topic:orders")
        alice.send(b"V1|8|PRODUCE|orders k:v\nV1|9|PRODUCE|orders k:w\n")  # the fast path
        for line in alice.readlines(2):
            _refused(line.decode(), "alice", "Write", "Topic:orders")
        _refused(alice.request("V1|10|CONSUME|payments 0 0"), "alice", "Read",
                 "Topic:payments")
        _refused(alice.request("V1|11|JOIN|other orders a2"), "alice", "Read", "Group:other")
        _refused(alice.request("V1|12|ADMIN_COMMIT|other orders 0 0"), "alice", "Read",
                 "Group:other")
        assert alice.request("V1|13|METADATA|") == "V1|13|OK|topics=[orders]"
        _refused(alice.request("V1|14|METADATA|payments"), "alice", "Describe",
                 "Topic:payments")
        assert [admin.request(f"V1|0|OFFSETS|orders {p}") for p in range(3)] == before
        admin.request("V1|16|ADMIN_ACL_REMOVE|principal=User:alice")


class PatternTests:
    def test_prefixed_allow_and_a_deny_over_it(self, broker: BrokerProcess) -> None:
        """Write on prefix team-a. lets bob write team-a.events (auto-created) but not
        team-b.events; a literal deny on team-a.secret wins over the prefixed allow; the
        list shows the three rules; removing the deny lets the write through."""
        admin = login(broker, "admin")
        for line in ("User:bob Topic team-a. Write pattern=prefixed",
                     "User:bob Topic team-a. Create pattern=prefixed",
                     "User:bob Topic team-a.secret Write permission=deny"):
            assert "|OK|added=1" in admin.request(f"V1|1|ADMIN_ACL_ADD|{line}"), line
        bob = login(broker, "bob")
        assert "|OK|partition=" in bob.request("V1|2|PRODUCE|team-a.events k:v")
        _refused(bob.request("V1|3|PRODUCE|team-b.events k:v"), "bob", "Write",
                 "Topic:team-b.events")
        _refused(bob.request("V1|4|PRODUCE|team-a.secret k:v"), "bob", "Write",
                 "Topic:team-a.secret")
        listed = admin.request("V1|5|ADMIN_ACL_LIST|principal=User:bob")
        assert listed == ("V1|5|OK|acls=[User:bob,Topic,Prefixed,team-a.,Create,Allow "
                          "User:bob,Topic,Prefixed,team-a.,Write,Allow "
                          "User:bob,Topic,Literal,team-a.secret,Write,Deny]"), listed
        removed = admin.request("V1|6|ADMIN_ACL_REMOVE|principal=User:bob permission=deny")
        assert removed.startswith("V1|6|OK|removed=1 acls=[User:bob,Topic,Literal,"
                                  "team-a.secret,Write,Deny]"), removed
        assert "|OK|partition=" in bob.request("V1|7|PRODUCE|team-a.secret k:v")
        _refused(bob.request("V1|8|ADMIN_ACL_ADD|User:bob Topic x Read"), "bob", "Alter",
                 "Cluster:kafka-cluster")
        admin.request("V1|9|ADMIN_ACL_REMOVE|principal=User:bob")

    def test_creating_a_topic_by_producing_needs_create(self, broker: BrokerProcess) -> None:
        """Write on prefix team-c. without Create: a produce to an existing team-c. topic is
        served, one that would create a new topic is refused and creates nothing."""
        admin = login(broker, "admin")
        assert "added=1" in admin.request(
            "V1|1|ADMIN_ACL_ADD|User:bob Topic team-c. Write pattern=prefixed")
        assert "|OK|" in admin.request("V1|2|ADMIN_CREATE_TOPIC|team-c.old 1 1")
        bob = login(broker, "bob")
        assert "|OK|partition=" in bob.request("V1|3|PRODUCE|team-c.old k:v")
        reply = bob.request("V1|4|PRODUCE|team-c.new k:v")
        assert "|ERR|NOT_AUTHORIZED|User:bob may not Create Topic:team-c.new" in reply, reply
        assert admin.request("V1|5|METADATA|team-c.new").startswith("V1|5|ERR|BAD_REQUEST|")
        admin.request("V1|6|ADMIN_ACL_REMOVE|principal=User:bob")

    def test_bad_acls_are_bad_requests(self, broker: BrokerProcess) -> None:
        """An unknown operation, an operation that does not apply to the type and a
        remove without a filter are BAD_REQUEST with the usage."""
        admin = login(broker, "admin")
        for line in ("ADMIN_ACL_ADD|User:bob Topic t Fly", "ADMIN_ACL_ADD|User:bob Group g Write",
                     "ADMIN_ACL_ADD|bob Topic t Read", "ADMIN_ACL_REMOVE|"):
            reply = admin.request(f"V1|1|{line}")
            assert reply.startswith("V1|1|ERR|BAD_REQUEST|"), reply


def test_rules_survive_a_restart(tmp_path: Path) -> None:
    """On one broker the ACLs are kept in the data directory: after a restart alice may
    still read orders, and may still not write it."""
    with BrokerProcess(tmp_path, _config(tmp_path)) as first:
        admin = login(first, "admin")
        assert "added=1" in admin.request("V1|1|ADMIN_ACL_ADD|User:alice Topic orders Read")
        first.stop()
        first.start()
        alice = login(first, "alice")
        assert alice.request("V1|2|CONSUME|orders 0 0").startswith("V1|2|OK|")
        _refused(alice.request("V1|3|PRODUCE|orders k:v"), "alice", "Write", "Topic:orders")
    assert (first.data_dir / "acls.json").exists()


def test_without_auth_everything_stays_allowed(tmp_path: Path) -> None:
    """Without auth.tokens_file nothing is checked, as before (loopback development)."""
    with BrokerProcess(tmp_path, {"topics": {"orders": {"partitions": 1}}}) as plain:
        client = plain.client()
        assert client.request("V1|1|ADMIN_DELETE_TOPIC|orders") == \
            "V1|1|OK|topic=orders deleted=true"


def test_the_log_no_longer_says_kafka_is_not_checked(tmp_path: Path) -> None:
    """With authentication on and the Kafka listener on, the Kafka listener checks ACLs
    (tests/access/test_kafka_acls.py): the broker no longer warns otherwise at start."""
    with BrokerProcess(tmp_path, {**_config(tmp_path), "kafka_port": 0}) as broker:
        assert kafka_port_of(broker.log_text()) > 0  # the listener is on
        assert "ACLs are not checked on the Kafka listener" not in broker.log_text()
