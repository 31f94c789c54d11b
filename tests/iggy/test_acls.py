"""Iggy's permissions are ACLs (docs/security.md, docs/iggy.md): what Iggy's permission
commands set is stored as ACL bindings that `skerry acls list` shows, every command is
checked by the core's gate, refusals are Iggy's Unauthorized (41), logged once per
connection and counted, a change holds for open connections at their next request, and a
data directory with Iggy permissions from before is migrated once.
The real apache-iggy client sees the refusals in its own error shape."""

from __future__ import annotations

import json
import logging
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from apache_iggy import IggyClient, PollingStrategy, SendMessage

from access import AclBinding, Operation, PatternType, Permission, ResourceType
from broker.iggy.codec.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from broker.services.iggy_users import ACTIVE, UserStore, hash_password
from tests.access.test_v1_acls import _metrics
from tests.iggy.harness import (
    Harness,
    RawClient,
    err,
    ident,
    iggy_port_of,
    name8,
    ok,
    run_isolated,
    u32,
)
from tests.iggy.test_messages import message, poll_payload, send_payload
from tests.iggy.test_system import create_user_payload, login_payload
from tests.support import BrokerProcess


def _topic_read_perms(topic_id: int) -> bytes:
    """Iggy permissions: poll_messages on one topic of stream 0 (``default``) only."""
    perms = Permissions(streams=((0, StreamPermissions(
        topics=((topic_id, TopicPermissions(poll_messages=True)),))),))
    return perms.encode()


def _alice_acls(acls: list[AclBinding]) -> list[tuple[str, str, str]]:
    return sorted((a.resource_type.value, a.name, a.operation.value) for a in acls
                  if a.principal == "User:alice")


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path, {"topics": {"orders": {"partitions": 1},
                                            "payments": {"partitions": 1}}})
    yield harness
    harness.close()


class GateTests:
    def test_update_permissions_writes_acls_and_holds_at_the_next_request(self, h, caplog):
        """UpdatePermissions becomes ACL bindings in the broker's store; alice's open
        connection may poll `orders` at its next request, is refused sending to it and
        polling `payments` (41), loses the poll when the permissions are cleared; each
        refusal is logged once per connection and counted."""
        root = h.connect(login=True)
        assert root.request(33, create_user_payload("alice", "pass12"))[:4] == u32(0)
        alice = h.connect()
        assert alice.request(38, login_payload("alice", "pass12"))[:4] == u32(0)
        poll_orders = poll_payload("default", "orders", 0, 1, 0, 1, False)
        assert alice.request(100, poll_orders) == err(41)
        orders_id = [t.id for t in h.service.catalog.stream(0).topics.values()
                     if t.name == "orders"][0]
        perms = _topic_read_perms(orders_id)
        assert root.request(36, ident("alice") + b"\x01" + u32(len(perms)) + perms) == ok()
        assert _alice_acls(h.broker.acls.list()) == [("Group", "*", "Read"),
                                                     ("Topic", "orders", "Read")]
        assert alice.request(100, poll_orders)[:4] == u32(0)
        refused_before = h.broker.core.access.refusals
        with caplog.at_level(logging.WARNING, logger="skerry.access"):
            for _ in range(3):
                assert alice.request(101, send_payload("default", "orders", 2, u32(0),
                                                       [message(b"x")])) == err(41)
            assert alice.request(100, poll_payload("default", "payments", 0, 1, 0, 1,
                                                   False)) == err(41)
        lines = [r.getMessage() for r in caplog.records if "not authorized" in r.getMessage()]
        assert len([m for m in lines if "Write Topic:orders" in m]) == 1
        assert any("User:alice may not Read Topic:payments" in m for m in lines)
        assert h.broker.core.access.refusals == refused_before + 4
        assert root.request(36, ident("alice") + b"\x00" + u32(0)) == ok()
        assert _alice_acls(h.broker.acls.list()) == []
        assert alice.request(100, poll_orders) == err(41)

    def test_an_acl_added_outside_iggy_counts_rename_moves_and_delete_drops(self, h):
        """A binding written with `skerry acls` (the ACL service) opens the Iggy command;
        the root user needs none; UpdateUser's rename moves the user's bindings as they
        are (prefixed and deny ones too); DeleteUser removes them."""
        root = h.connect(login=True)
        root.request(33, create_user_payload("alice", "pass12"))
        alice = h.connect()
        alice.request(38, login_payload("alice", "pass12"))
        send = send_payload("default", "orders", 2, u32(0), [message(b"x")])
        assert alice.request(101, send) == err(41)
        h.broker.acls.add([AclBinding("User:alice", ResourceType.TOPIC, "orders",
                                      PatternType.LITERAL, Operation.WRITE, Permission.ALLOW)])
        assert alice.request(101, send) == ok()
        assert root.request(101, send) == ok()
        h.broker.acls.add([AclBinding("User:alice", ResourceType.TOPIC, "team-a.",
                                      PatternType.PREFIXED, Operation.READ, Permission.DENY)])
        assert root.request(35, ident("alice") + b"\x01" + name8("alicia") + b"\x00") == ok()
        assert _alice_acls(h.broker.acls.list()) == []
        moved = [(a.name, a.pattern_type.value, a.operation.value, a.permission.value)
                 for a in h.broker.acls.list() if a.principal == "User:alicia"]
        assert sorted(moved) == [("orders", "Literal", "Write", "Allow"),
                                 ("team-a.", "Prefixed", "Read", "Deny")]
        assert root.request(34, ident("alicia")) == ok()
        assert [a for a in h.broker.acls.list() if a.principal == "User:alicia"] == []

    def test_stored_permissions_are_migrated_once(self, tmp_path):
        """A data directory whose iggy-users.json holds Iggy permissions (Skerry before the
        ACLs): the first start writes them as ACL bindings and drops them from the file; a
        binding removed afterwards stays removed at the next start."""
        data = tmp_path / "data"
        data.mkdir()
        users = UserStore(str(data), now_us=lambda: 1)
        users.initialize("iggy", hash_password("iggy", 1 << 4))
        perms = Permissions(GlobalPermissions(read_servers=True, send_messages=True))
        users.create("alice", hash_password("pass12", 1 << 4), ACTIVE, perms)
        first = Harness(tmp_path)
        try:
            assert _alice_acls(first.broker.acls.list()) == [("Cluster", "kafka-cluster",
                                                              "Describe"),
                                                             ("Topic", "*", "Write")]
            stored = json.loads((data / "iggy-users.json").read_text())
            assert [u["permissions"] for u in stored["users"] if u["username"] == "alice"] \
                == [None]
            first.broker.acls.set_principal("User:alice", [])
        finally:
            first.close()
        second = Harness(tmp_path)
        try:
            assert _alice_acls(second.broker.acls.list()) == []
        finally:
            second.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    proc = BrokerProcess(tmp_path_factory.mktemp("iggy-acls"),
                         {"iggy_port": 0, "metrics_port": 0, "topics": {"orders": {"partitions": 1},
                                                     "payments": {"partitions": 1}}})
    with proc:
        yield proc, iggy_port_of(proc.log_text())


def _v1(port: int, line: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(line.encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.decode().strip()


def test_real_client_reader_of_one_topic(broker):
    """With the real apache-iggy client, a user whose only permission is to poll `orders`
    polls it, and its send to `orders` and its poll of `payments` raise Iggy's
    Unauthorized; `skerry acls` (V1 ADMIN_ACL_LIST) shows the bindings."""
    proc, port = broker
    root = RawClient(port)
    assert root.request(38, name8("iggy") + name8("iggy") + u32(0) + u32(0))[:4] == u32(0)
    streams = root.request(300, ident("default") + ident("orders"))
    orders_id = int.from_bytes(streams[8:12], "little")
    assert root.request(33, create_user_payload("alice", "pass12"))[:4] == u32(0)
    perms = _topic_read_perms(orders_id)
    assert root.request(36, ident("alice") + b"\x01" + u32(len(perms)) + perms) == ok()
    listed = _v1(proc.port, "V1|1|ADMIN_ACL_LIST|principal=User:alice")
    assert "User:alice,Topic,Literal,orders,Read,Allow" in listed

    async def scenario() -> list[str]:
        client = IggyClient(f"127.0.0.1:{port}")
        await client.connect()
        await client.login_user("alice", "pass12")
        polled = await client.poll_messages("default", "orders", 0, PollingStrategy.First(),
                                            10, False)
        assert polled == []
        errors = []
        for attempt in (
                lambda: client.send_messages("default", "orders", 0, [SendMessage("x")]),
                lambda: client.poll_messages("default", "payments", 0,
                                             PollingStrategy.First(), 10, False)):
            try:
                await attempt()
            except RuntimeError as exc:
                errors.append(str(exc))
        return errors

    errors = run_isolated(scenario)
    assert len(errors) == 2 and all("Unauthorized" in e for e in errors), errors
    log = proc.log_text()
    assert log.count("not authorized: User:alice may not Write Topic:orders") == 1
    assert log.count("not authorized: User:alice may not Read Topic:payments") == 1
    metrics = _metrics(proc)
    for operation in ("Write", "Read"):
        pattern = ('skerry_authorization_refusals_total{operation="' + operation
                   + '",resource_type="Topic"} ')
        found = re.search(re.escape(pattern) + r"(\d+)", metrics)
        assert found and int(float(found.group(1))) >= 1, metrics[-2000:]
