"""Leaders spread over a real cluster: one real etcd member and three broker processes on
loopback started one at a time (``bench.cluster_scenario.EtcdBrokers``), a topic with three
partitions and RF 3 declared in their config. The first broker creates the topic in etcd
alone and wins every first election; each broker must still end up leading the partition it
is the first replica of within seconds (``cluster.etcd.leader_return_delay_ms``, default
3 s), not at the 300 s periodic check, and get it back after a kill -9 and restart.
Skipped with a one-line reason when etcd cannot be installed (``tests.control.real_etcd``)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from bench.cluster_scenario import TOPIC, EtcdBrokers

PARTITIONS = 3


def leaders(cluster: EtcdBrokers) -> list[int]:
    """Each partition's leader as etcd holds it (-1: none)."""
    states = cluster.etcd_prefix(f"partitions/{TOPIC}/")
    return [int(states[str(p)]["leader"]) if str(p) in states else -1
            for p in range(PARTITIONS)]


def serving(cluster: EtcdBrokers) -> bool:
    """Broker p is the confirmed leader of partition p on the wire (REPLICA_STATUS)."""
    for p in range(PARTITIONS):
        reply = cluster.request(p, f"REPLICA_STATUS|{TOPIC} {p}", timeout=1.0)
        if "role=leader" not in reply or "confirmed=true" not in reply:
            return False
    return True


def test_started_one_at_a_time_each_broker_leads_its_preferred_partition(
        tmp_path: Path) -> None:
    """Started 0, then 1, then 2, each once the previous one registered: within 15 s of the
    last start every broker leads exactly one partition (its own), the ISRs are whole, and
    it stays so. Then kill -9 of broker 1: partition 1 fails over to broker 2; broker 1
    restarted gets it back within 15 s once in sync, and the others never moved."""
    cluster = EtcdBrokers(tmp_path, etcd_members=1, ttl_ms=2000, partitions=PARTITIONS)
    try:
        for i in range(3):
            cluster.start(i)
            cluster.wait(lambda i=i: str(i) in cluster.etcd_prefix("brokers/"),
                         f"broker {i} registered", timeout=30)
            if i == 0:
                cluster.wait(lambda: leaders(cluster) == [0, 0, 0],
                             "broker 0 leading the topic it created alone", timeout=30)
        started = time.monotonic()
        cluster.wait(lambda: leaders(cluster) == [0, 1, 2] and serving(cluster),
                     "each broker leading its preferred partition", timeout=15)
        assert time.monotonic() - started < 15
        states = cluster.etcd_prefix(f"partitions/{TOPIC}/")
        assert all(len(states[str(p)]["isr"]) == 3 for p in range(PARTITIONS)), states
        epochs = [states[str(p)]["leader_epoch"] for p in range(PARTITIONS)]
        time.sleep(4)   # past another delay: nothing flaps
        again = cluster.etcd_prefix(f"partitions/{TOPIC}/")
        assert [again[str(p)]["leader_epoch"] for p in range(PARTITIONS)] == epochs

        cluster.signal(1, signal.SIGKILL)
        cluster.wait(lambda: leaders(cluster)[1] == 2, "partition 1 failed over to 2",
                     timeout=15)
        cluster.start(1)
        restarted = time.monotonic()
        cluster.wait(lambda: leaders(cluster) == [0, 1, 2] and serving(cluster),
                     "broker 1 leading partition 1 again", timeout=15)
        assert time.monotonic() - restarted < 15
        final = cluster.etcd_prefix(f"partitions/{TOPIC}/")
        assert [final[str(p)]["leader_epoch"] for p in (0, 2)] == [epochs[0], epochs[2]]
    finally:
        cluster.close()
