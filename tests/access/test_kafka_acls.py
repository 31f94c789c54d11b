"""ACLs over Kafka on a real broker: confluent-kafka logging in with SASL PLAIN. alice,
with Read on topic orders and group billing only, consumes orders in billing; her
produce to orders is refused with TOPIC_AUTHORIZATION_FAILED, payments is not in her
Metadata and her subscription to it fails, her commit in group other is refused with
GROUP_AUTHORIZATION_FAILED; the super user admin does everything. Refusals are logged
once per connection."""

from __future__ import annotations

import re
import time
import urllib.request
from typing import Any

import pytest

from broker.auth import hash_token
from tests.kafka.harness import kafka_port_of
from tests.support import BrokerProcess

USERS = {"alice": "tok-alice-8Hq2kafka", "admin": "tok-admin-3Zp9kafka"}


def _conf(port: int, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}


def _consume(ck: Any, conf: dict[str, Any], group: str, topic: str, want: int
             ) -> tuple[list[bytes], list[Any], Any]:
    """Subscribe in ``group``; up to ``want`` messages (or 15 s) and the errors seen."""
    consumer = ck.Consumer({**conf, "group.id": group, "enable.auto.commit": False,
                            "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    errors: list[Any] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(got) < want and not errors:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error() is not None:
            errors.append(msg.error())
        else:
            got.append(msg.value())
    return got, errors, consumer


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp_path = tmp_path_factory.mktemp("kafka-acls")
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"{u}:{hash_token(t)}\n" for u, t in USERS.items()))
    config = {"kafka_port": 0, "auth": {"tokens_file": str(tokens), "super_users": "admin"},
              "topics": {"orders": {"partitions": 1}, "payments": {"partitions": 1},
                         "audit": {"partitions": 1}},
              "storage": {"fsync": "never"}, "metrics_port": 0}
    with BrokerProcess(tmp_path, config) as proc:
        admin = proc.client()
        assert admin.request(f"V1|1|AUTH|admin {USERS['admin']}") == "V1|1|OK"
        for line in ("User:alice Topic orders Read", "User:alice Group billing Read"):
            assert "|OK|added=1" in admin.request(f"V1|2|ADMIN_ACL_ADD|{line}")
        yield proc, kafka_port_of(proc.log_text())


def test_alice_reads_orders_in_billing_and_nothing_else(kafka: Any) -> None:
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient
    proc, port = kafka
    admin = _conf(port, "admin")
    producer = ck.Producer(admin)
    for topic in ("orders", "payments"):
        for i in range(3):
            producer.produce(topic, value=b"%s-%d" % (topic.encode(), i), partition=0)
    assert producer.flush(20) == 0  # the super user writes anywhere

    alice = _conf(port, "alice")
    got, errors, consumer = _consume(ck, alice, "billing", "orders", 3)
    assert (got, errors) == ([b"orders-0", b"orders-1", b"orders-2"], [])
    committed = consumer.commit(asynchronous=False)
    assert committed and all(tp.error is None for tp in committed), committed
    consumer.close()

    reports: list[Any] = []
    alice_producer = ck.Producer({**alice, "message.timeout.ms": 5000, "retries": 0})
    alice_producer.produce("orders", value=b"never", partition=0,
                           on_delivery=lambda err, _msg: reports.append(err))
    alice_producer.flush(15)
    assert [e.code() for e in reports] == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED], reports

    seen = AdminClient(alice).list_topics(timeout=10).topics
    assert "orders" in seen and "payments" not in seen
    assert "payments" in AdminClient(admin).list_topics(timeout=10).topics

    got, errors, consumer = _consume(ck, alice, "billing", "payments", 1)
    consumer.close()
    assert got == [] and [e.code() for e in errors] == [
        ck.KafkaError.TOPIC_AUTHORIZATION_FAILED], errors

    got, errors, consumer = _consume(ck, alice, "other", "orders", 1)  # joining to commit
    consumer.close()
    assert got == [] and [e.code() for e in errors] == [
        ck.KafkaError.GROUP_AUTHORIZATION_FAILED], errors

    got, errors, consumer = _consume(ck, admin, "other", "payments", 3)  # admin: anything
    consumer.close()
    assert (got, errors) == ([b"payments-0", b"payments-1", b"payments-2"], [])
    log = proc.log_text()
    assert log.count("not authorized: User:alice may not Write Topic:orders") == 1, log[-3000:]
    # once per connection: librdkafka may ask for the coordinator on its bootstrap
    # connection and again on the coordinator's, so one or two lines, never one a request
    assert log.count("not authorized: User:alice may not Describe Group:other") in (1, 2)
    metrics = _metrics(proc)
    for operation, resource_type in (("Write", "Topic"), ("Describe", "Group")):
        found = re.search(rf'skerry_authorization_refusals_total\{{operation="{operation}",'
                          rf'resource_type="{resource_type}"\}} (\d+)', metrics)
        assert found and int(float(found.group(1))) >= 1, metrics[-2000:]


def _metrics(proc: BrokerProcess) -> str:
    found = re.findall(r"metrics\D*127\.0\.0\.1:(\d+)", proc.log_text())
    assert found, proc.log_text()
    request = urllib.request.Request(f"http://127.0.0.1:{found[-1]}/metrics", headers={
        "Authorization": f"Bearer {USERS['admin']}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(answer.read().decode())


def test_admin_client_creates_describes_and_deletes_acls(kafka: Any) -> None:
    """AdminClient's create_acls / describe_acls / delete_acls manage the rules every
    transport checks: a Write ACL created over Kafka lets alice produce to `audit`; alice
    herself may not create ACLs (CLUSTER_AUTHORIZATION_FAILED)."""
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    proc, port = kafka
    admin = AdminClient(_conf(port, "admin"))
    binding = AclBinding(ResourceType.TOPIC, "audit", ResourcePatternType.LITERAL,
                         "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        assert future.result(timeout=10) is None

    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                           None, AclOperation.ANY, AclPermissionType.ANY)
    listed = admin.describe_acls(flt).result(timeout=10)
    assert sorted((b.name, b.operation.name) for b in listed) == [
        ("audit", "WRITE"), ("billing", "READ"), ("orders", "READ")]
    client = proc.client()
    assert client.request(f"V1|1|AUTH|admin {USERS['admin']}") == "V1|1|OK"
    assert "User:alice,Topic,Literal,audit,Write,Allow" in client.request(
        "V1|2|ADMIN_ACL_LIST|principal=User:alice")

    producer = ck.Producer({**_conf(port, "alice"), "message.timeout.ms": 10000})
    reports: list[Any] = []
    producer.produce("audit", value=b"allowed now", partition=0,
                     on_delivery=lambda err, _msg: reports.append(err))
    producer.flush(15)
    assert reports == [None]

    alice_admin = AdminClient(_conf(port, "alice"))
    refused = alice_admin.create_acls([binding])
    with pytest.raises(ck.KafkaException) as error:
        list(refused.values())[0].result(timeout=10)
    assert error.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED

    only_audit = AclBindingFilter(ResourceType.TOPIC, "audit", ResourcePatternType.LITERAL,
                                  None, None, AclOperation.ANY, AclPermissionType.ANY)
    deleted = list(admin.delete_acls([only_audit]).values())[0].result(timeout=10)
    assert [(b.name, b.principal) for b in deleted] == [("audit", "User:alice")]
    assert sorted(b.name for b in admin.describe_acls(flt).result(timeout=10)) == [
        "billing", "orders"]
