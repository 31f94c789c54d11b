"""The fetch loop, leader probes and failover, with real brokers connected in memory
(``twisted.test.iosim``) and simulated time (one ``task.Clock`` per broker): followers copy
the leader byte for byte, long polls keep an idle cluster quiet, ``hw`` reaches followers,
newer epochs fence old leaders, and a returning leader truncates to the divergence point."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from data.store import StorageConfig, Store
from replication.follower import (
    FETCHER_TRANSITIONS,
    FetcherState,
    IllegalFetcherTransition,
    PartitionFetcher,
)
from replication.roles import Role
from tests.replication.cluster_harness import TOPIC, Network, produce_reply_offsets
from tests.support import ManualThread


@pytest.fixture
def net(tmp_path: Path) -> Network:
    network = Network(tmp_path)
    network.run_until(lambda: network.confirmed_leader(0), within=5)
    return network


def produce(net: Network, broker: int, count: int, acks: str = "all", prefix: str = "v",
            partition: int = 0) -> list[str]:
    """Send ``count`` produces to ``broker`` and let the cluster settle for a moment."""
    client = net.client(broker)
    for i in range(count):
        client.send(f"PRODUCE|{TOPIC} k:{prefix}{i} acks={acks} partition={partition}")
    net.advance(0.3)
    return client.replies()


def values(net: Network, broker: int, partition: int = 0) -> list[bytes]:
    plog = net.plog(broker, partition)
    return [r.payload for r in plog.read(plog.first_offset, 100_000, 1 << 24).records]


class FetchLoopTests:

    def test_followers_copy_the_leader_byte_for_byte(self, net: Network) -> None:
        """Records arrive on every follower with the leader's offsets, timestamps, ids and
        checksums unchanged; acks=all is answered once the followers hold them."""
        replies = produce(net, 0, 40)
        assert produce_reply_offsets(replies) == list(range(40))
        leader_bytes = net.log_bytes(0)
        assert len(leader_bytes) > 40 * 64
        assert net.log_bytes(1) == leader_bytes
        assert net.log_bytes(2) == leader_bytes
        assert net.status(0).isr == [0, 1, 2]

    def test_binary_values_survive(self, net: Network) -> None:
        """Values holding commas, pipes, newlines and NUL replicate unchanged."""
        import base64

        raw = b"a,b|c\nd\x00\xff"
        client = net.client(0)
        reply = client.request(f"PRODUCE|{TOPIC} k:{base64.b64encode(raw).decode()} "
                               "acks=all enc=b64")
        assert "|OK|" in reply
        assert values(net, 1) == values(net, 2) == [raw]

    def test_idle_cluster_long_polls(self, net: Network) -> None:
        """An idle follower sends about one fetch per fetch_wait_ms, not a busy loop."""
        fetchers = [net.broker(i).replicas.fetchers[(TOPIC, 0)] for i in (1, 2)]
        before = [f.pulls for f in fetchers]
        net.advance(10.0, step=0.05)
        sent = [f.pulls - b for f, b in zip(fetchers, before, strict=True)]
        assert all(15 <= n <= 25 for n in sent), sent  # wait_ms=500: ~20 in 10 s
        assert net.status(0).isr == [0, 1, 2]  # long polls keep idle followers in sync

    def test_data_wakes_a_waiting_fetch(self, net: Network) -> None:
        """A follower waiting in a long poll gets new records at once, not at the end of
        the wait: acks=all is answered within a few simulated milliseconds."""
        net.advance(0.2)
        client = net.client(0)
        client.send(f"PRODUCE|{TOPIC} k:now acks=all")
        waited = net.run_until(lambda: any("|OK|" in r for r in client.replies()), within=1,
                               step=0.001)
        assert waited < 0.05

    def test_follower_serves_up_to_the_leaders_hw(self, net: Network) -> None:
        """A follower's CONSUME stops at min(leader hw, own log end): with broker 2 dead but
        still in the ISR, broker 1 holds 5 records but serves none; once 2 leaves the ISR
        the leader's hw moves and broker 1 serves them all."""
        net.crash(2)
        replies = produce(net, 0, 5, acks="1")
        assert produce_reply_offsets(replies) == list(range(5))
        assert net.plog(1).next_offset == 5
        assert net.client(1).request(f"CONSUME|{TOPIC} 0 0") == "V1|1|OK|messages= hw=-1"
        net.run_until(lambda: net.status(0).isr == [0, 1], within=3)
        net.advance(0.6)  # the next long poll carries the new hw
        assert net.client(1).request(f"CONSUME|{TOPIC} 0 0") == \
            "V1|1|OK|messages=0:v0,1:v1,2:v2,3:v3,4:v4 hw=4"

    def test_follower_refuses_writes(self, net: Network) -> None:
        """PRODUCE to a follower answers NOT_LEADER; REPLICA_STATUS names its leader, and a
        fetch sent to a follower is NOT_LEADER too."""
        produce(net, 0, 1)
        client = net.client(1)
        assert client.request(f"PRODUCE|{TOPIC} k:v").startswith("V1|1|ERR|NOT_LEADER|")
        status = client.request(f"REPLICA_STATUS|{TOPIC} 0")
        assert status == ("V1|2|OK|role=follower epoch=0 confirmed=false hw=0 leo=1 start=0 "
                          "isr=[0 1 2] under_replicated=false replica=1 replicas=[0 1 2] "
                          "leader=0 epochs=[0:0]")
        reply = client.request(f"REPLICA_PULL|{TOPIC} 0 2 0 0")
        assert reply.startswith("V1|3|ERR|NOT_LEADER|") and "leader broker 0" in reply

    def test_restarted_follower_catches_up_and_rejoins(self, net: Network) -> None:
        """A follower killed during the load restarts from its own log end, catches up and
        rejoins the ISR; the leader's progress for it moves back and forth as it must."""
        produce(net, 0, 10)
        net.crash(2)
        client = net.client(0)
        for i in range(10):
            client.send(f"PRODUCE|{TOPIC} k:w{i} acks=all")
        net.run_until(lambda: net.status(0).isr == [0, 1], within=3)
        net.advance(0.1)
        # acks=all waited for the ISR to shrink (lag timeout 2 s < ack timeout... of 1.5 s
        # here, so they time out) or were answered once it did: none is lost.
        replies = client.replies()
        assert len(replies) == 10
        net.start(2)
        net.run_until(lambda: net.status(0).isr == [0, 1, 2], within=3)
        assert net.log_bytes(2) == net.log_bytes(0)
        assert net.plog(2).next_offset == 20

    def test_leaders_spread_over_partitions(self, tmp_path: Path) -> None:
        """With three partitions, partition p is led by broker p and followed by the others."""
        net = Network(tmp_path, partitions=3)
        net.run_until(lambda: all(net.confirmed_leader(p, p) for p in range(3)), within=5)
        for p in range(3):
            replies = produce(net, p, 3, partition=p, prefix=f"p{p}-")
            assert produce_reply_offsets(replies) == [0, 1, 2]
        for p in range(3):
            assert net.log_bytes(0, p) == net.log_bytes(1, p) == net.log_bytes(2, p)
            assert net.status((p + 1) % 3, p).leader == p

    def test_stop_closes_every_connection(self, net: Network) -> None:
        """A clean shutdown stops the fetchers and probes: no connection stays open and no
        timer of the replication layer keeps running."""
        net.stop(1)
        assert not any(1 in (src, dst) for src, dst, _ in net.pumps)
        assert net.broker(1).replicas.fetchers == {}

    def test_fetcher_transition_table(self, net: Network) -> None:
        """The fetcher state machine refuses transitions its table does not list."""
        fetcher = net.broker(1).replicas.fetchers[(TOPIC, 0)]
        assert fetcher.state is FetcherState.FETCHING
        assert FetcherState.STOPPED not in FETCHER_TRANSITIONS[FetcherState.STOPPED]
        stopped = PartitionFetcher(fetcher.view, net.broker(1).replicas.links,
                                   net.nodes[1].clock, fetcher._settings)
        with pytest.raises(IllegalFetcherTransition, match="before moving to fetching"):
            stopped._transition(FetcherState.FETCHING)
        assert stopped.state is FetcherState.STOPPED


class ConfirmationTests:

    def test_restarted_leader_waits_for_every_replica(self, tmp_path: Path) -> None:
        """A leader starting from disk refuses writes until every other replica answered
        without a newer epoch: with broker 2 down it stays unconfirmed."""
        net = Network(tmp_path, start=False)
        net.start(0)
        net.start(1)
        net.advance(2.0)
        assert not net.confirmed_leader(0)
        assert "ERR|NOT_LEADER|" in net.client(0).request(f"PRODUCE|{TOPIC} k:v")
        status = net.status(0)
        assert (status.role, status.confirmed) == (Role.LEADER, False)
        net.start(2)
        net.run_until(lambda: net.confirmed_leader(0), within=2)
        assert "|OK|" in net.client(0).request(f"PRODUCE|{TOPIC} k:v acks=all")

    def test_operator_promotion_overrides(self, tmp_path: Path) -> None:
        """SET_PARTITION_ROLE leader on an unconfirmed leader starts a new epoch and accepts
        writes at once (the operator's decision)."""
        net = Network(tmp_path, start=False)
        net.start(0)
        net.advance(1.0)
        client = net.client(0)
        assert client.request(f"SET_PARTITION_ROLE|{TOPIC} 0 leader") == \
            f"V1|1|OK|topic={TOPIC} partition=0 role=leader hw=-1"
        assert net.status(0).epoch == 1 and net.confirmed_leader(0)
        assert "|OK|" in client.request(f"PRODUCE|{TOPIC} k:v acks=1")


class FailoverTests:

    def test_kip101_truncation_after_failover(self, net: Network) -> None:
        """The old leader wrote a tail nobody copied (acks=1), then died; broker 1 is
        promoted and takes new writes; the old leader restarts, is fenced by epoch 1,
        truncates exactly the unreplicated tail and ends byte-identical."""
        acked = produce_reply_offsets(produce(net, 0, 20))
        assert acked == list(range(20))
        net.crash(1)
        net.crash(2)
        assert produce_reply_offsets(produce(net, 0, 5, acks="1", prefix="lost")) == \
            list(range(20, 25))
        net.crash(0)
        net.start(1)
        net.start(2)
        net.advance(0.5)
        assert not net.confirmed_leader(1)
        promote = net.client(1).request(f"SET_PARTITION_ROLE|{TOPIC} 0 leader")
        assert "role=leader" in promote
        assert produce_reply_offsets(produce(net, 1, 5, prefix="new")) == list(range(20, 25))
        net.start(0)
        net.run_until(lambda: net.status(0).role is Role.FOLLOWER
                      and net.plog(0).next_offset == 25 and net.status(0).hw == 24, within=5)
        assert net.log_bytes(0) == net.log_bytes(1) == net.log_bytes(2)
        kept = values(net, 0)
        assert kept[:20] == [f"v{i}".encode() for i in range(20)]
        assert kept[20:] == [f"new{i}".encode() for i in range(5)]
        status = net.status(0)
        assert status.epochs == [(0, 0), (1, 20)] and status.epoch == 1
        assert status.leader == 1

    def test_fenced_leader_fails_pending_acks(self, net: Network) -> None:
        """A leader cut off from its followers keeps acks=all requests waiting; when a
        follower is promoted and its probe reaches the old leader, the old leader is fenced:
        the waiting requests fail NOT_LEADER and new writes are refused."""
        net.crash(2)
        net.partition(0, 1)
        client = net.client(0)
        for i in range(3):
            client.send(f"PRODUCE|{TOPIC} k:stale{i} acks=all")
        net.advance(0.2)
        assert client.replies() == []
        net.start(2)
        net.advance(0.2)
        assert "role=leader" in net.client(1).request(f"SET_PARTITION_ROLE|{TOPIC} 0 leader")
        net.run_until(lambda: net.status(0).role is Role.FOLLOWER, within=2)
        replies = client.replies()
        assert len(replies) == 3
        assert all("|ERR|NOT_LEADER|" in r and "fenced" in r for r in replies), replies
        assert "ERR|NOT_LEADER" in net.client(0).request(f"PRODUCE|{TOPIC} k:late")
        net.heal(0, 1)
        net.run_until(lambda: net.status(0).leader == 1, within=3)

    def test_newer_epoch_in_a_fetch_fences(self, net: Network) -> None:
        """A fetch carrying a newer epoch than the leader's fences it at once (NOT_LEADER)."""
        client = net.client(0)
        reply = client.request(f"REPLICA_PULL|{TOPIC} 0 1 0 7")
        assert re.match(r"V1\|1\|ERR\|NOT_LEADER\|.*epoch 7 is newer.*fenced", reply), reply
        assert net.status(0).role is Role.FOLLOWER and net.status(0).epoch == 7

    def test_two_leaders_of_one_epoch_both_refuse(self, tmp_path: Path) -> None:
        """An operator mistake during a network partition: brokers 0 and 1 are both promoted
        to epoch 1. Once they can talk, each refuses writes; promoting one of them again
        (epoch 2) fences the other, which then follows."""
        net = Network(tmp_path, start=False)
        net.partition(0, 1)
        net.partition(0, 2)
        net.start(0)
        net.start(1)
        net.start(2)
        assert "role=leader" in net.client(0).request(f"SET_PARTITION_ROLE|{TOPIC} 0 leader")
        assert "role=leader" in net.client(1).request(f"SET_PARTITION_ROLE|{TOPIC} 0 leader")
        assert net.status(0).epoch == net.status(1).epoch == 1
        net.heal(0, 1)
        net.heal(0, 2)
        net.run_until(lambda: not net.confirmed_leader(0) and not net.confirmed_leader(1),
                      within=3)
        assert "ERR|NOT_LEADER" in net.client(0).request(f"PRODUCE|{TOPIC} k:a")
        assert "ERR|NOT_LEADER" in net.client(1).request(f"PRODUCE|{TOPIC} k:b")
        assert "role=leader" in net.client(1).request(f"SET_PARTITION_ROLE|{TOPIC} 0 leader")
        net.run_until(lambda: net.status(0).role is Role.FOLLOWER
                      and net.status(0).leader == 1, within=3)
        assert net.status(1).epoch == 2 and net.confirmed_leader(1)
        assert "|OK|" in net.client(1).request(f"PRODUCE|{TOPIC} k:c acks=all")


class DurabilityTests:

    def test_follower_reports_only_fsynced_records(self, tmp_path: Path) -> None:
        """Under fsync=always a follower's next fetch (its progress report) waits for the
        fsync of what it appended: the leader never counts unsynced follower copies (the
        worker-thread group commit, so the test can hold the follower's fsync)."""
        net = Network(tmp_path, start=False, storage={"group_commit": "thread"})
        thread = ManualThread()
        net.nodes[1].run_in_thread = thread
        for i in range(3):
            net.start(i)
        net.run_until(lambda: net.confirmed_leader(0), within=5)
        thread.run_all()
        net.advance(0.2)
        thread.run_all()
        client = net.client(0)
        client.send(f"PRODUCE|{TOPIC} k:v acks=all")
        net.advance(0.05)
        assert net.plog(1).next_offset == 1  # appended ...
        assert net.plog(1).durable_offset == 0  # ... not yet fsynced
        leader = net.service(0)
        assert leader._slot(TOPIC, 0).repl.follower_offset(1) == -1  # not reported
        assert thread.run_all() >= 1
        net.advance(0.05)
        assert leader._slot(TOPIC, 0).repl.follower_offset(1) == 0
        assert "|OK|" in client.replies()[0]

    def test_restarted_leader_lost_its_unsynced_tail(self, tmp_path: Path) -> None:
        """A leader that comes back with fewer records than its followers copied (its
        unsynced tail lost in an OS crash) stays the leader; the followers cut what it no
        longer has (never committed) and all logs agree again."""
        net = Network(tmp_path)
        net.run_until(lambda: net.confirmed_leader(0), within=5)
        produce(net, 0, 10, acks="1")
        assert net.plog(1).next_offset == net.plog(2).next_offset == 10
        net.crash(0)
        store = Store(str(net.nodes[0].data_dir), StorageConfig())
        store.partition(TOPIC, 0).truncate_to(8)
        store.close()
        net.start(0)
        net.run_until(lambda: net.confirmed_leader(0)
                      and net.plog(1).next_offset == net.plog(2).next_offset == 8, within=5)
        assert net.log_bytes(0) == net.log_bytes(1) == net.log_bytes(2)
        assert produce_reply_offsets(produce(net, 0, 2, prefix="n")) == [8, 9]
        assert net.log_bytes(0) == net.log_bytes(1) == net.log_bytes(2)
