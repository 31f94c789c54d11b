"""Where the ACLs live: ``acls.json`` on one broker, one etcd key in a cluster
(``broker/services/acls.py``), against the in-memory etcd on a ``task.Clock``: changes
from two brokers at once both land (the revision-checked transaction retries), every
broker's authorizer follows the key through its watch, and an unreadable document keeps
the rules in force."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from access import AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType
from access.authorizer import AclFilter
from broker.services.acls import AclService, EtcdAcls, FileAcls, decode_acls, encode_acls
from broker.services.etcd import EtcdClient
from tests.control.fake_etcd import FakeEtcd, FakeGateway

ENDPOINTS = ["http://10.0.1.1:2379"]
KEY = "/skerry/test/acls"


def read(principal: str, topic: str) -> AclBinding:
    return AclBinding(principal, ResourceType.TOPIC, topic, PatternType.LITERAL,
                      Operation.READ, Permission.ALLOW)


def result(d):  # type: ignore[no-untyped-def]
    box: list[object] = []
    d.addBoth(box.append)
    assert box, "the Deferred has not fired"
    if hasattr(box[0], "raiseException"):
        box[0].raiseException()  # type: ignore[union-attr]
    return box[0]


class FileStoreTests:
    def test_changes_are_stored_and_read_back(self, tmp_path: Path) -> None:
        """An added ACL is in acls.json before the answer and in force after a restart;
        a removal likewise."""
        auth = Authorizer(enabled=True)
        service = AclService(auth, FileAcls(str(tmp_path)))
        service.start()
        assert result(service.add([read("User:alice", "orders")])) == [
            read("User:alice", "orders")]
        assert auth.authorize("User:alice", Operation.READ, ResourceType.TOPIC, "orders")
        stored = json.loads((tmp_path / "acls.json").read_text())
        assert stored["acls"][0]["principal"] == "User:alice"
        again = Authorizer(enabled=True)
        assert not again.authorize("User:alice", Operation.READ, ResourceType.TOPIC, "orders")
        restarted = AclService(again, FileAcls(str(tmp_path)))
        restarted.start()
        assert again.authorize("User:alice", Operation.DESCRIBE, ResourceType.TOPIC, "orders")
        gone = result(restarted.remove(AclFilter(principal="User:alice")))
        assert len(gone) == 1
        third = Authorizer(enabled=True)
        AclService(third, FileAcls(str(tmp_path))).start()
        assert third.acls == []

    def test_a_damaged_file_stops_the_start(self, tmp_path: Path) -> None:
        """acls.json is only ever replaced atomically: a damaged one is news, not an empty
        rule set (which would silently lock every user out or let them in)."""
        (tmp_path / "acls.json").write_text("{not json")
        with pytest.raises(ValueError, match="acls.json"):
            FileAcls(str(tmp_path)).start(Authorizer(enabled=True))


class EtcdStoreTests:
    def _brokers(self, count: int = 2) -> tuple[Clock, FakeEtcd, list[AclService]]:
        clock = Clock()
        etcd = FakeEtcd(clock)
        services = []
        for _ in range(count):
            client = EtcdClient(ENDPOINTS, clock, FakeGateway(etcd, list(ENDPOINTS)))
            service = AclService(Authorizer(enabled=True), EtcdAcls(client, KEY))
            result(service.start())
            services.append(service)
        return clock, etcd, services

    def test_a_change_through_one_broker_reaches_the_other(self) -> None:
        """Broker 0 adds an ACL; broker 1's authorizer has it from its watch."""
        clock, _, (b0, b1) = self._brokers()
        result(b0.add([read("User:alice", "orders")]))
        clock.advance(0)
        assert b1.authorizer.authorize("User:alice", Operation.READ, ResourceType.TOPIC,
                                       "orders")
        result(b1.remove(AclFilter(principal="User:alice")))
        clock.advance(0)
        assert b0.authorizer.acls == []

    def test_concurrent_changes_both_land(self) -> None:
        """Broker 1's change lands between broker 0's read and its transaction: broker 0's
        transaction finds the key changed, reads again and applies its change on top, so
        the document holds both."""
        clock, etcd, (b0, b1) = self._brokers()
        calls: list[int] = []

        def change(before: list[AclBinding]) -> list[AclBinding]:
            calls.append(len(before))
            if len(calls) == 1:  # the other broker wins the race
                result(b1.add([read("User:bob", "b")]))
            return [*before, read("User:alice", "a")]

        result(b0.store.change(change))
        clock.advance(0)
        assert calls == [0, 1]  # read again after the lost race, with bob's ACL in it
        want = sorted([read("User:alice", "a"), read("User:bob", "b")])
        for service in (b0, b1):
            assert service.authorizer.acls == want
        stored = etcd.get(KEY)
        assert stored is not None and decode_acls(stored.value) == want

    def test_an_unreadable_document_keeps_the_rules_in_force(self) -> None:
        """Someone writes garbage to the key with etcdctl: the brokers log it and keep the
        rules they had; a good document after it is applied."""
        clock, _, (b0, b1) = self._brokers()
        result(b0.add([read("User:alice", "orders")]))
        clock.advance(0)
        client = b0.store.client  # type: ignore[attr-defined]
        result(Deferred.fromCoroutine(client.put(KEY, b"garbage")))
        clock.advance(0)
        assert b1.authorizer.acls == [read("User:alice", "orders")]
        result(Deferred.fromCoroutine(client.put(KEY, encode_acls([read("User:bob", "x")]))))
        clock.advance(0)
        assert b1.authorizer.acls == [read("User:bob", "x")]
