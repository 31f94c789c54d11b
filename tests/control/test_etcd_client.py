"""``broker.services.etcd`` against the in-memory fake etcd (``tests.control.fake_etcd``):
the txn builders of ``replication.control.txn`` evaluated by a store, endpoint rotation, the
unknown outcome of a write, keepalive on a ``task.Clock``, lease expiry, and a watch that
resumes after its member dies and reports compaction. No sockets, no sleeps."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from broker.services.etcd import (
    EtcdClient,
    EtcdUnavailable,
    LeaseKeeper,
    LeaseNotFound,
    OutcomeUnknown,
    WatchEvent,
)
from replication.control.keys import (
    BrokerRegistration,
    ControllerRecord,
    KeyLayout,
    PartitionState,
    TopicRecord,
)
from replication.control.txn import (
    PartitionWrite,
    claim_controller,
    create_topic,
    register_broker,
    write_isr,
    write_partitions,
)
from tests.control.fake_etcd import FakeEtcd, FakeGateway

T = TypeVar("T")
ENDPOINTS = ["http://m1:2379", "http://m2:2379", "http://m3:2379"]
LAYOUT = KeyLayout("c")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that completes without the clock moving."""
    d = Deferred.fromCoroutine(coro)
    results: list[Any] = []
    d.addBoth(results.append)
    assert results, "the call did not complete"
    if isinstance(results[0], Failure):
        results[0].raiseException()
    return results[0]


@pytest.fixture
def world() -> tuple[Clock, FakeEtcd, FakeGateway, EtcdClient]:
    clock = Clock()
    etcd = FakeEtcd(clock)
    gateway = FakeGateway(etcd, ENDPOINTS)
    return clock, etcd, gateway, EtcdClient(ENDPOINTS, clock, gateway, request_timeout=2.0)


class TxnAgainstStoreTests:
    def test_broker_registration_is_exclusive(self, world) -> None:  # noqa: ANN001
        """The second registration of an id fails and reads back the holder's value."""
        clock, etcd, gateway, client = world
        lease1, ttl = run(client.grant(6))
        lease2, _ = run(client.grant(1))
        assert ttl == 6 and etcd.leases() == {lease1, lease2}
        first = run(client.txn(register_broker(LAYOUT, 1, BrokerRegistration("a:1", 1), lease1)))
        second = run(client.txn(register_broker(LAYOUT, 1, BrokerRegistration("b:1", 2), lease2)))
        assert first.succeeded and not second.succeeded
        (holder,) = second.reads[0]
        assert BrokerRegistration.decode(holder.value).addr == "a:1" and holder.lease == lease1

    def test_controller_epoch_fences_an_old_controller(self, world) -> None:  # noqa: ANN001
        """The controller's epoch is its key's create revision; after it expires and another
        broker claims the key, the old controller's partition writes fail."""
        clock, etcd, gateway, client = world
        l1, _ = run(client.grant(3))
        l2, _ = run(client.grant(30))
        for broker, lease in ((1, l1), (2, l2)):
            run(client.txn(register_broker(LAYOUT, broker, BrokerRegistration("h:1", 1), lease)))
        claim = run(client.txn(claim_controller(LAYOUT, 1, l1)))
        assert claim.succeeded
        epoch1 = claim.header.revision
        assert run(client.range(LAYOUT.controller)).kvs[0].create_revision == epoch1
        assert not run(client.txn(claim_controller(LAYOUT, 2, l2))).succeeded
        run(client.txn(create_topic(LAYOUT, "t", TopicRecord(1, 2, 1, ((1, 2),)))))
        part = run(client.range(LAYOUT.partition("t", 0))).kvs[0]

        clock.advance(3)        # broker 1's lease expires: its keys go, in one revision
        assert etcd.get(LAYOUT.controller) is None and etcd.get(LAYOUT.broker(1)) is None
        claim2 = run(client.txn(claim_controller(LAYOUT, 2, l2)))
        assert claim2.succeeded and claim2.header.revision != epoch1
        stale = PartitionWrite("t", 0, part.mod_revision, PartitionState(1, 1, (1,)))
        lost = run(client.txn(write_partitions(LAYOUT, epoch1, [stale])))
        assert not lost.succeeded
        assert ControllerRecord.decode(lost.reads[0][0].value) == ControllerRecord(2)
        fresh = PartitionWrite("t", 0, part.mod_revision, PartitionState(2, 1, (2,)))
        assert run(client.txn(write_partitions(LAYOUT, claim2.header.revision, [fresh]))).succeeded

    def test_isr_write_needs_fresh_key_and_my_lease(self, world) -> None:  # noqa: ANN001
        """The leader's ISR txn fails on a moved key or a lease it no longer holds."""
        clock, etcd, gateway, client = world
        lease, _ = run(client.grant(30))
        run(client.txn(register_broker(LAYOUT, 1, BrokerRegistration("h:1", 1), lease)))
        run(client.txn(create_topic(LAYOUT, "t", TopicRecord(1, 2, 1, ((1, 2),)))))
        mod = run(client.range(LAYOUT.partition("t", 0))).kvs[0].mod_revision
        shrink = PartitionWrite("t", 0, mod, PartitionState(1, 0, (1,)))
        assert not run(client.txn(write_isr(LAYOUT, 1, lease + 1, shrink))).succeeded
        assert run(client.txn(write_isr(LAYOUT, 1, lease, shrink))).succeeded
        again = run(client.txn(write_isr(LAYOUT, 1, lease, shrink)))     # mod moved
        assert not again.succeeded
        assert PartitionState.decode(again.reads[0][0].value) == PartitionState(1, 0, (1,))


class EndpointTests:
    def test_rotates_past_dead_and_5xx_members(self, world) -> None:  # noqa: ANN001
        """A refused connection and a 503 move the call to the next member."""
        clock, etcd, gateway, client = world
        gateway.kill(ENDPOINTS[0])
        gateway.members[ENDPOINTS[1]].status = 503
        run(client.put("/k", b"v"))
        assert [m for m, _ in gateway.calls] == ENDPOINTS
        assert client.endpoint == ENDPOINTS[2]
        assert etcd.get("/k").value == b"v"

    def test_all_down_is_unavailable_after_bounded_rounds(self, world) -> None:  # noqa: ANN001
        """With every member down a call fails after ``rounds`` passes over the list."""
        clock, etcd, gateway, client = world
        for member in ENDPOINTS:
            gateway.kill(member)
        d = Deferred.fromCoroutine(client.range("/k"))
        clock.advance(0.25)
        clock.advance(0.25)
        failure = []
        d.addErrback(failure.append)
        assert failure and failure[0].check(EtcdUnavailable)
        assert len(gateway.calls) == 3 * len(ENDPOINTS)

    def test_timed_out_write_is_unknown_but_applied(self, world) -> None:  # noqa: ANN001
        """A txn that committed but never answered raises OutcomeUnknown (not a retry);
        reading again shows it applied. A timed-out read is resent elsewhere."""
        clock, etcd, gateway, client = world
        gateway.members[ENDPOINTS[0]].apply_then_hang = True
        d = Deferred.fromCoroutine(client.put("/k", b"v"))
        clock.advance(2.0)
        errors: list[Failure] = []
        d.addErrback(errors.append)
        assert errors and errors[0].check(OutcomeUnknown)
        assert len(gateway.calls) == 1 and etcd.get("/k").value == b"v"
        gateway.members[ENDPOINTS[1]].black_hole = True
        d = Deferred.fromCoroutine(client.range("/k"))
        clock.advance(2.0)
        assert run_result(d).kvs[0].value == b"v"

    def test_ints_as_strings_and_omitted_fields(self, world) -> None:  # noqa: ANN001
        """A failed txn has no ``succeeded`` field; an absent key's range has no ``kvs``."""
        clock, etcd, gateway, client = world
        result = run(client.txn(register_broker(LAYOUT, 1, BrokerRegistration("h:1", 1), 0)))
        assert result.succeeded
        result = run(client.txn(register_broker(LAYOUT, 1, BrokerRegistration("h:1", 1), 0)))
        assert result.succeeded is False and result.header.revision == 2
        assert run(client.range("/nothing")).kvs == ()


def run_result(d: Deferred[T]) -> T:
    out: list[Any] = []
    d.addBoth(out.append)
    assert out
    if isinstance(out[0], Failure):
        out[0].raiseException()
    return out[0]


class LeaseTests:
    def test_keepalive_every_third_of_ttl_keeps_keys(self, world) -> None:  # noqa: ANN001
        """A kept lease outlives many TTLs; once the keeper stops, the lease expires within
        its TTL and its keys are deleted."""
        clock, etcd, gateway, client = world
        lease, ttl = run(client.grant(6))
        run(client.put("/skerry/c/brokers/1", b"{}", lease))
        keeper = LeaseKeeper(client, lease, ttl, on_lost=lambda lease_id: None)
        keeper.start()
        for _ in range(30):
            clock.advance(1)
        assert etcd.get("/skerry/c/brokers/1") is not None
        assert [p for _, p in gateway.calls].count("/v3/lease/keepalive") == 15
        assert keeper.last_good == 30 and keeper.expires_by == 36
        keeper.stop()
        clock.advance(6)
        assert etcd.get("/skerry/c/brokers/1") is None and lease not in etcd.leases()

    def test_lost_lease_reported_once(self, world) -> None:  # noqa: ANN001
        """A keepalive that finds the lease gone stops the keeper and reports it once."""
        clock, etcd, gateway, client = world
        lease, ttl = run(client.grant(6))
        lost: list[int] = []
        keeper = LeaseKeeper(client, lease, ttl, on_lost=lost.append)
        keeper.start()
        run(client.revoke(lease))
        clock.advance(2)
        clock.advance(2)
        assert lost == [lease] and keeper.lost
        with pytest.raises(LeaseNotFound):
            run(client.revoke(lease))

    def test_unreachable_etcd_freezes_not_loses(self, world) -> None:  # noqa: ANN001
        """With every member down keepalives fail, the keeper keeps trying, ``last_good``
        stays; once a member is back, the next keepalive succeeds."""
        clock, etcd, gateway, client = world
        lease, ttl = run(client.grant(60))
        lost: list[int] = []
        keeper = LeaseKeeper(client, lease, ttl, on_lost=lost.append)
        keeper.start()
        for member in ENDPOINTS:
            gateway.kill(member)
        for _ in range(30):
            clock.advance(1)
        assert keeper.failures == 1 and keeper.last_good == 0 and not lost
        gateway.revive(ENDPOINTS[1])
        for _ in range(10):
            clock.advance(1)
        assert keeper.last_good == 40 and not lost and lease in etcd.leases()

    def test_min_ttl(self, world) -> None:  # noqa: ANN001
        """A TTL below 2 s is granted as 2 s."""
        clock, etcd, gateway, client = world
        assert run(client.grant(1))[1] == 2


class WatchTests:
    def test_resumes_after_member_dies(self, world) -> None:  # noqa: ANN001
        """Killing the member serving the watch loses no event and repeats none: the
        watch reopens on the next member from the revision after the last delivered."""
        clock, etcd, gateway, client = world
        seen: list[WatchEvent] = []
        watch = client.watch("/skerry/c/", lambda evs: seen.extend(evs), prefix=True)
        run(client.put("/skerry/c/a", b"1"))
        run(client.put("/other", b"x"))
        serving = gateway.calls[0][0]
        gateway.kill(serving)
        run(client.put("/skerry/c/b", b"2"))          # while no watch is open
        clock.advance(0.25)
        run(client.put("/skerry/c/a", b"3"))
        etcd.handle("/v3/kv/deleterange", {"key": "L3NrZXJyeS9jL2I="})   # /skerry/c/b
        assert [(e.kv.key, e.kv.value, e.deleted) for e in seen] == [
            ("/skerry/c/a", b"1", False), ("/skerry/c/b", b"2", False),
            ("/skerry/c/a", b"3", False), ("/skerry/c/b", b"", True)]
        assert watch.reopened == 1 and gateway.open_streams() == 1
        revisions = [e.kv.mod_revision for e in seen]
        assert revisions == sorted(revisions) and len(set(revisions)) == 4
        watch.cancel()
        assert gateway.open_streams() == 0

    def test_compacted_start_reported(self, world) -> None:  # noqa: ANN001
        """A watch from a compacted revision stops and reports the compact revision."""
        clock, etcd, gateway, client = world
        for i in range(5):
            run(client.put("/k", str(i).encode()))
        etcd.compact(5)
        compacted: list[int] = []
        watch = client.watch("/k", lambda evs: None, start_revision=2,
                             on_compacted=compacted.append)
        assert compacted == [5] and watch.stopped and gateway.open_streams() == 0
        clock.advance(10)
        assert len([c for c in gateway.calls if c[1] == "/v3/watch"]) == 1

    def test_reopen_backs_off_while_all_down(self, world) -> None:  # noqa: ANN001
        """With every member down, reopening is tried with a doubling delay (at most 2 s),
        so a long outage costs a bounded number of attempts."""
        clock, etcd, gateway, client = world
        client.watch("/k", lambda evs: None)
        for member in ENDPOINTS:
            gateway.kill(member)
        for _ in range(100):
            clock.advance(0.1)
        attempts = len([c for c in gateway.calls if c[1] == "/v3/watch"])
        assert 6 <= attempts <= 10
