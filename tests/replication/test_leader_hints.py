"""Leader routing on the broker side, in memory (``tests/replication/cluster_harness.py``:
three real brokers over ``iosim``, simulated time), in the operator-driven mode:
NOT_LEADER names the leader, METADATA lists brokers and leaders, ADMIN_SET_PARTITION_LEADER
is a forced election carried out by the broker it names, and a producer that rotates through
its list of brokers on NOT_LEADER (as the seed broker's SDK does) loses no acknowledged
message across a kill -9 failover."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replication.roles import Role
from tests.replication.cluster_harness import TOPIC, Network

ADDR = {0: "10.0.0.1:9092", 1: "10.0.0.2:9092", 2: "10.0.0.3:9092"}


@pytest.fixture
def net(tmp_path: Path) -> Network:
    network = Network(tmp_path)
    network.run_until(lambda: network.confirmed_leader(0) and network.status(1).leader == 0
                      and network.status(2).leader == 0, within=5)
    return network


def in_sync(net: Network) -> None:
    """Produce acks=all until every replica is in the leader's ISR."""
    client = net.client(0)
    assert "|OK|" in client.request(f"PRODUCE|{TOPIC} k:warm acks=all")
    net.run_until(lambda: net.status(0).isr == [0, 1, 2] and net.status(1).isr == [0, 1, 2],
                  within=5)


class HintTests:
    def test_not_leader_names_the_leader(self, net: Network) -> None:
        """A produce to a follower answers NOT_LEADER with leader=, addr= and epoch= first
        (nothing stored), so a client can go straight there."""
        reply = net.client(1).request(f"PRODUCE|{TOPIC} k:v")
        assert re.fullmatch(r"V1\|1\|ERR\|NOT_LEADER\|leader=0 addr=10\.0\.0\.1:9092 epoch=0 "
                            r"\S.*", reply), reply
        assert net.plog(1).next_offset == 0

    def test_metadata_lists_brokers_and_leaders(self, net: Network) -> None:
        """METADATA (additive fields at the end, in a cluster) gives every broker's address
        and, per partition, the leader and its epoch, on the leader and a follower alike."""
        for broker in (0, 2):
            client = net.client(broker)
            listing = client.request("METADATA|")
            assert listing.endswith(f"OK|topics=[{TOPIC}] brokers=[0@{ADDR[0]} 1@{ADDR[1]} "
                                    f"2@{ADDR[2]}]"), listing
            topic = client.request(f"METADATA|{TOPIC}")
            assert topic.endswith(" leaders=[0] epochs=[0]"), topic
            assert f"topic={TOPIC} partitions=1 replication_factor=3" in topic


class ForcedElectionTests:
    def test_the_named_broker_promotes_itself(self, net: Network) -> None:
        """ADMIN_SET_PARTITION_LEADER sent to the broker it names (in the ISR) makes it lead
        the next epoch; the old leader is fenced and its NOT_LEADER names the new one."""
        in_sync(net)
        elsewhere = net.client(2).request(f"ADMIN_SET_PARTITION_LEADER|{TOPIC} 0 1 1,0,2")
        assert "ERR|BAD_REQUEST|operator mode (no etcd): send ADMIN_SET_PARTITION_LEADER to " \
               f"broker 1 at {ADDR[1]}" in elsewhere
        reply = net.client(1).request(f"ADMIN_SET_PARTITION_LEADER|{TOPIC} 0 1 1,0,2")
        assert reply == f"V1|1|OK|topic={TOPIC} partition=0 leader=1 isr=[1 0 2] term=1 index=1"
        net.run_until(lambda: net.status(0).role is Role.FOLLOWER
                      and net.status(0).leader == 1, within=5)
        assert net.confirmed_leader(1) and net.status(1).epoch == 1
        refused = net.client(0).request(f"PRODUCE|{TOPIC} k:v")
        assert f"ERR|NOT_LEADER|leader=1 addr={ADDR[1]} epoch=1 " in refused
        assert "|OK|" in net.client(1).request(f"PRODUCE|{TOPIC} k:v acks=all")


class RotatingProducerTests:
    def test_nothing_acknowledged_is_lost_across_a_kill_9_failover(self, net: Network) -> None:
        """The seed SDK's way: produce acks=all to the current broker; on NOT_LEADER (or no
        answer: the broker died) move to the next broker of the list and send the same
        message again. Broker 0, the leader, is killed mid-stream and broker 1 forced to
        lead; every acknowledged message is on the new leader, in order, and the logs of
        the survivors are identical."""
        in_sync(net)
        brokers = [0, 1, 2]
        current = 0
        clients = {b: net.client(b) for b in brokers}
        acked: list[str] = []
        rotations = 0
        for i in range(60):
            value = f"m{i}"
            if i == 25:
                net.crash(0)
                elected = net.client(1).request(
                    f"ADMIN_SET_PARTITION_LEADER|{TOPIC} 0 1 1,2")
                assert "|OK|" in elected, elected
            for _attempt in range(10):
                broker = brokers[current]
                if not net.nodes[broker].alive:
                    current = (current + 1) % len(brokers)
                    rotations += 1
                    continue
                try:
                    reply = clients[broker].request(f"PRODUCE|{TOPIC} k:{value} acks=all",
                                                    within=3)
                except AssertionError:  # no answer in time
                    current = (current + 1) % len(brokers)
                    rotations += 1
                    continue
                if "|OK|" in reply:
                    acked.append(value)
                    break
                assert "NOT_LEADER" in reply or "REPLICATION_TIMEOUT" in reply, reply
                if "NOT_LEADER" in reply:
                    current = (current + 1) % len(brokers)
                    rotations += 1
            else:
                raise AssertionError(f"{value} never acknowledged")
        assert rotations >= 1 and len(acked) == 60
        net.run_until(lambda: net.status(2).hw == net.status(1).hw, within=5)
        stored = [r.payload.decode() for r in net.plog(1).read(0, 100_000, 1 << 24).records]
        assert [v for v in stored if v != "warm"] == acked
        assert net.log_bytes(1) == net.log_bytes(2)
