"""Leader routing end to end: three real broker processes on loopback (operator mode, RF 3,
min ISR 2, three partitions led by three brokers), a kill -9 of one leader and a forced
election (ADMIN_SET_PARTITION_LEADER on the survivor it names). The Python client's
``RoutedProducer``, ``skerry produce --acks all`` and a producer rotating through its
brokers on NOT_LEADER (the seed SDK's way) each lose no acknowledged message."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.replication_scenario import TOPIC, Cluster, ClusterSpec
from broker.client.codec import partition_for_key
from broker.client.sync import Client, RoutedProducer
from tests.support import ROOT, V1Client

PARTITIONS = 3


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, ClusterSpec(replica_lag_timeout_ms=2000))
    for proc in c.procs.values():
        proc.config["topics"][TOPIC]["partitions"] = PARTITIONS
    c.start()
    try:
        c.wait(lambda: "leaders=[0 1 2]" in c.request(0, f"METADATA|{TOPIC}")
               and all("leaders=[0 1 2]" in c.request(i, f"METADATA|{TOPIC}")
                       for i in (1, 2)), "every broker knows the three leaders", 60)
        yield c
    finally:
        c.close()


def addr(c: Cluster, broker: int) -> str:
    return f"127.0.0.1:{c.ports[broker]}"


def fail_over_partition_1(c: Cluster) -> None:
    """kill -9 of broker 1 (leader of partition 1, replicas [1 2 0]); broker 2 is forced to
    lead it (it is in the ISR: the acks=all writes before reached it)."""
    c.kill9(1)
    reply = c.request(2, f"ADMIN_SET_PARTITION_LEADER|{TOPIC} 1 2 2,0")
    assert "|OK|" in reply and "leader=2" in reply, reply


def stored(c: Cluster, broker: int, partition: int) -> list[str]:
    with Client(addr(c, broker)) as client:
        out, offset = [], 0
        while True:
            got = client.consume(TOPIC, partition, offset, max_messages=1000)
            if not got.messages:
                return out
            out.extend(m.value.decode() for m in got.messages)
            offset = got.next_offset


def by_partition(values: list[str]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for value in values:
        out[partition_for_key(value.encode(), PARTITIONS)].append(value)
    return out


def check_nothing_lost(c: Cluster, acked: list[str], leaders: dict[int, int]) -> None:
    """Every acknowledged value is on its partition's leader, in the order acknowledged."""
    for partition, want in by_partition(acked).items():
        wanted = set(want)
        have = stored(c, leaders[partition], partition)
        # a message sent again after a lost connection may be stored twice: first copies
        assert list(dict.fromkeys(v for v in have if v in wanted)) == want, partition


def test_python_client_routes_and_survives_a_failover(cluster: Cluster) -> None:
    """RoutedProducer from one bootstrap broker writes acks=all to all three leaders; after
    broker 1 dies and broker 2 takes partition 1 it follows (NOT_LEADER hint or METADATA)
    and nothing acknowledged is lost."""
    acked: list[str] = []
    with RoutedProducer(addr(cluster, 0), timeout=5, backoff=0.2, retries=30) as producer:
        for i in range(60):
            value = f"py{i}"
            producer.produce(TOPIC, value, key=value, acks="all")
            acked.append(value)
        sends_before = producer.sends
        assert sends_before == 60  # routed straight to the leaders: no NOT_LEADER at all
        fail_over_partition_1(cluster)
        for i in range(60, 120):
            value = f"py{i}"
            producer.produce(TOPIC, value, key=value, acks="all")
            acked.append(value)
    check_nothing_lost(cluster, acked, {0: 0, 1: 2, 2: 2})


def test_asyncio_client_routes_and_survives_a_failover(cluster: Cluster) -> None:
    """The asyncio RoutedProducer does the same as the blocking one: straight to the leaders,
    then across broker 1's kill -9 and the forced election, nothing acknowledged lost."""
    import asyncio

    from broker.client.aio import Address
    from broker.client.aio import RoutedProducer as AioRoutedProducer

    async def run() -> tuple[list[str], int]:
        producer = AioRoutedProducer(Address("127.0.0.1", cluster.ports[2]), timeout=5,
                                     retries=30)
        acked: list[str] = []
        try:
            for i in range(120):
                if i == 60:
                    assert producer.sends == 60
                    fail_over_partition_1(cluster)
                value = f"aio{i}"
                reply = await producer.produce(TOPIC, value.encode(), value.encode(),
                                               acks="all")
                assert reply.number("partition") == partition_for_key(value.encode(),
                                                                      PARTITIONS)
                acked.append(value)
        finally:
            await producer.close()
        return acked, producer.sends

    acked, sends = asyncio.run(run())
    assert len(acked) == 120 and sends > 120  # some went to broker 1 and were sent again
    check_nothing_lost(cluster, acked, {0: 0, 1: 2, 2: 2})


def run_produce(c: Cluster, bootstrap: int, lines: list[str]) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "broker", "produce", TOPIC, "--acks", "all",
         "--bootstrap", addr(c, bootstrap), "--timeout", "5"],
        input="".join(f"{v}:{v}\n" for v in lines).encode(), capture_output=True,
        env=env, cwd=str(ROOT), timeout=120)


def test_skerry_produce_acks_all_to_a_cluster(cluster: Cluster) -> None:
    """`skerry produce --acks all` through any one broker: every line acknowledged (before
    routing, the lines of partitions led elsewhere failed NOT_LEADER), and again after a
    failover, through a follower."""
    first = [f"cli{i}" for i in range(300)]
    done = run_produce(cluster, 1, first)
    assert done.returncode == 0, done.stderr
    assert b"produced 300 messages" in done.stderr and b"0 errors" in done.stderr
    fail_over_partition_1(cluster)
    second = [f"cli{i}" for i in range(300, 600)]
    again = run_produce(cluster, 0, second)
    assert again.returncode == 0, again.stderr
    assert b"produced 300 messages" in again.stderr
    check_nothing_lost(cluster, first + second, {0: 0, 1: 2, 2: 2})


def test_rotating_producer_loses_nothing_across_kill_9(cluster: Cluster) -> None:
    """The seed SDK's producer: a list of brokers, acks=all to the current one, and on
    NOT_LEADER (or a dead connection) the next one, sending the same message again. Broker
    1 leading partition 1 is killed mid-stream; every acknowledged message is on the new
    leader once, in order."""
    order = [1, 2, 0]
    current = 0
    acked: list[str] = []
    rotations = 0
    conns: dict[int, V1Client] = {}
    for i in range(80):
        value = f"sdk{i}"
        if i == 40:
            fail_over_partition_1(cluster)
        for _attempt in range(30):
            broker = order[current]
            try:
                conn = conns.get(broker) or V1Client(cluster.ports[broker], timeout=5)
                conns[broker] = conn
                reply = conn.request(f"V1|{i}|PRODUCE|{TOPIC} k:{value} acks=all partition=1")
            except OSError:
                conns.pop(broker, None)
                current = (current + 1) % len(order)
                rotations += 1
                continue
            if "|OK|" in reply:
                acked.append(value)
                break
            assert "NOT_LEADER" in reply or "REPLICATION_TIMEOUT" in reply, reply
            if "NOT_LEADER" in reply:
                current = (current + 1) % len(order)
                rotations += 1
        else:
            raise AssertionError(f"{value} never acknowledged")
    for conn in conns.values():
        conn.close()
    assert rotations >= 1
    have = [v for v in stored(cluster, 2, 1) if v.startswith("sdk")]
    assert list(dict.fromkeys(have)) == acked


def test_skerry_produce_stops_when_no_broker_leads_a_partition(cluster: Cluster) -> None:
    """With partition 1's leader killed and nobody elected, `skerry produce` stops at the
    first line that found no leader, in one line that names `skerry cluster elect` and the
    line to resume from, instead of one error per input line."""
    cluster.kill9(1)
    done = subprocess.run(
        [sys.executable, "-m", "broker", "produce", TOPIC, "--partition", "1",
         "--bootstrap", addr(cluster, 0), "--timeout", "5"],
        input=b"".join(b"k:v%d\n" % i for i in range(200)), capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=str(ROOT), timeout=120)
    assert done.returncode == 1
    err = done.stderr.decode().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"produced 0 messages to {TOPIC} in "), err
    assert err[0].endswith(
        f"; 1 error; stopped: line 1: no broker took partition 1 of {TOPIC} as its leader "
        "after 12 attempts (NOT_LEADER or no connection); see `skerry cluster status`; "
        f"force a leader with `skerry cluster elect {TOPIC} 1`; no line acknowledged, "
        "resume from line 1"), err
