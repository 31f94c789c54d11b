"""``broker.services.etcd`` against real etcd processes on loopback (``tests.control.real_etcd``):
lease expiry and keepalive, the control plane's txns as compare-and-swap, and a watch that
resumes after the member serving it is killed in a 3-member cluster. Each test is bounded
(a few seconds) and stops its members."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import pytest_twisted
from twisted.internet import reactor as _reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater

from broker.services.etcd import (
    EtcdClient,
    LeaseKeeper,
    OutcomeUnknown,
    TreqTransport,
    WatchEvent,
)
from replication.control.keys import BrokerRegistration, KeyLayout, PartitionState, TopicRecord
from replication.control.txn import (
    PartitionWrite,
    claim_controller,
    create_topic,
    register_broker,
    write_partitions,
)
from tests.control.real_etcd import EtcdCluster

reactor = _reactor  # the real reactor pytest-twisted runs: these tests use real sockets
LAYOUT = KeyLayout("t1")


def sleep(seconds: float) -> Deferred[None]:
    return deferLater(reactor, seconds, lambda: None)


async def until(check: Callable[[], bool], timeout: float, step: float = 0.05) -> float:
    """Wait until ``check()`` holds; the seconds it took. Fails after ``timeout``."""
    start = reactor.seconds()
    while not check():
        if reactor.seconds() - start > timeout:
            raise AssertionError(f"condition not met within {timeout} s")
        await sleep(step)
    return reactor.seconds() - start


@pytest.fixture
def one(tmp_path: Path) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster(tmp_path, 1)
    yield cluster
    cluster.stop()


@pytest.fixture
def three(tmp_path: Path) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster(tmp_path, 3)
    yield cluster
    cluster.stop()


def client_for(cluster: EtcdCluster, **kw: float) -> tuple[EtcdClient, TreqTransport]:
    transport = TreqTransport(reactor)
    return EtcdClient(cluster.endpoints, reactor, transport, **kw), transport


@pytest_twisted.ensureDeferred
async def test_lease_expiry_and_keepalive(one: EtcdCluster) -> None:
    """A lease left alone expires within TTL + 1 s and takes its key; a lease kept by
    ``LeaseKeeper`` outlives it; revoking deletes its key at once."""
    client, transport = client_for(one)
    try:
        kept, ttl = await client.grant(2)
        left, _ = await client.grant(2)
        await client.put("/k/kept", b"1", kept)
        await client.put("/k/left", b"1", left)
        keeper = LeaseKeeper(client, kept, ttl, on_lost=lambda lease: None)
        keeper.start()

        async def present(key: str) -> bool:
            return bool((await client.range(key)).kvs)

        start = reactor.seconds()
        while await present("/k/left"):
            assert reactor.seconds() - start < 3.5, "the lease did not expire"
            await sleep(0.1)
        assert reactor.seconds() - start >= 1.5
        assert await present("/k/kept")
        keeper.stop()
        await client.revoke(kept)
        assert not await present("/k/kept")
    finally:
        await transport.close()


@pytest_twisted.ensureDeferred
async def test_control_txns_are_compare_and_swap(one: EtcdCluster) -> None:
    """Registration and controller claims are exclusive, a topic is created once, and a
    controller write fenced by a stale epoch or a stale mod revision fails."""
    client, transport = client_for(one)
    try:
        lease, _ = await client.grant(10)
        reg = BrokerRegistration("127.0.0.1:9092", 1)
        assert (await client.txn(register_broker(LAYOUT, 0, reg, lease))).succeeded
        assert not (await client.txn(register_broker(LAYOUT, 0, reg, lease))).succeeded
        claim = await client.txn(claim_controller(LAYOUT, 0, lease))
        assert claim.succeeded and claim.header.raft_term >= 1
        epoch = claim.header.revision
        topic = TopicRecord(1, 1, 1, ((0,),))
        assert (await client.txn(create_topic(LAYOUT, "t", topic))).succeeded
        again = await client.txn(create_topic(LAYOUT, "t", topic))
        assert not again.succeeded and TopicRecord.decode(again.reads[0][0].value) == topic
        kv = (await client.range(LAYOUT.partition("t", 0))).kvs[0]
        write = PartitionWrite("t", 0, kv.mod_revision, PartitionState(0, 1, (0,)))
        assert not (await client.txn(write_partitions(LAYOUT, epoch + 1, [write]))).succeeded
        assert (await client.txn(write_partitions(LAYOUT, epoch, [write]))).succeeded
        assert not (await client.txn(write_partitions(LAYOUT, epoch, [write]))).succeeded
        stored = (await client.range(LAYOUT.partitions_prefix(), prefix=True)).kvs
        assert [PartitionState.decode(s.value) for s in stored] == [PartitionState(0, 1, (0,))]
        await client.revoke(lease)
        assert not (await client.range(LAYOUT.controller)).kvs
    finally:
        await transport.close()


@pytest_twisted.ensureDeferred
async def put_once(client: EtcdClient, key: str, value: bytes) -> None:
    """A put as a careful caller makes it while the cluster elects a new leader: a write
    with no answer may have committed, so read the key before sending it again."""
    for _ in range(5):
        try:
            await client.put(key, value)
            return
        except OutcomeUnknown:
            if (await client.range(key)).kvs:
                return
    raise AssertionError(f"{key} never written")


async def test_watch_resumes_after_member_killed(three: EtcdCluster) -> None:
    """kill -9 of the member serving a prefix watch: the watch reopens on a survivor from
    the revision after the last event it delivered; every write is seen once, in order."""
    client, transport = client_for(three, request_timeout=5.0, rounds=8)
    seen: list[WatchEvent] = []
    watch = client.watch("/w/", lambda events: seen.extend(events), prefix=True)
    try:
        serving = client.endpoints.index(client.endpoint)
        await sleep(0.2)
        await client.put("/w/a", b"1")
        await until(lambda: len(seen) == 1, 3.0)
        three.kill(serving)
        for i in range(2, 6):
            await put_once(client, f"/w/{i}", str(i).encode())
        await until(lambda: len(seen) == 5, 15.0)
        await sleep(0.2)
        assert [e.kv.key for e in seen] == ["/w/a", "/w/2", "/w/3", "/w/4", "/w/5"]
        revisions = [e.kv.mod_revision for e in seen]
        assert revisions == sorted(set(revisions))
        assert watch.reopened >= 1
        assert client.endpoints.index(client.endpoint) != serving
    finally:
        watch.cancel()
        await transport.close()
