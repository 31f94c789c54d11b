"""Automatic failover with the etcd control plane, in memory: three real brokers
(``build_broker``) and a fake etcd on ``task.Clock``s (``etcd_cluster_harness``). No sleeps:
the lease TTL passes by advancing the clocks."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from tests.control.etcd_cluster_harness import TOPIC, EtcdNetwork
from tests.replication.cluster_harness import produce_reply_offsets

TTL = 2.0


def produce(net: EtcdNetwork, broker: int, values: list[str]) -> list[int]:
    client = net.client(broker)
    lines = [client.request(f"PRODUCE|{TOPIC} k:{v} acks=all") for v in values]
    offsets = produce_reply_offsets(lines)
    assert len(offsets) == len(values), lines
    return offsets


class StartupTests:
    def test_brokers_register_and_lead_the_stored_epoch(self, tmp_path: Path) -> None:
        """Each broker registers with a lease; one is the controller; the config's topic is
        in etcd with every replica in the ISR; broker 0 (first replica) leads epoch 0 and
        acknowledges acks=all writes."""
        net = EtcdNetwork(tmp_path)
        assert sorted(net.control(0).metadata().brokers) == [0, 1, 2]
        assert net.controller() in (0, 1, 2)
        net.run_until(lambda: len(net.stored().isr) == 3)
        state = net.stored()
        assert (state.leader, state.leader_epoch, state.isr) == (0, 0, (0, 1, 2))
        assert net.leader() == 0
        assert produce(net, 0, ["a", "b"]) == [0, 1]
        assert net.control(1).leader_of(TOPIC, 0) == (0, "10.0.0.1:9092", 0)

    def test_no_write_before_the_key_is_read(self, tmp_path: Path) -> None:
        """A broker that cannot reach etcd at start never read its partition's key: it takes
        no write (NOT_LEADER), even though it was the leader on disk."""
        net = EtcdNetwork(tmp_path)
        produce(net, 0, ["a"])
        net.crash(0)
        net.advance(TTL + 1)
        net.start(0)
        net.cut_etcd(0)
        net.advance(1)
        reply = net.client(0).request(f"PRODUCE|{TOPIC} k:x acks=1")
        assert "|ERR|NOT_LEADER|" in reply

    def test_set_partition_role_is_refused(self, tmp_path: Path) -> None:
        """With etcd the operator's SET_PARTITION_ROLE would fight the controller: refused
        with a pointer to the forced election."""
        net = EtcdNetwork(tmp_path)
        reply = net.client(1).request(f"SET_PARTITION_ROLE|{TOPIC} 0 leader")
        assert "|ERR|BAD_REQUEST|" in reply and "ADMIN_SET_PARTITION_LEADER" in reply


class FailoverTests:
    def test_leader_crash_elects_next_in_isr(self, tmp_path: Path) -> None:
        """kill -9 of the leader (also the controller here or not): once its lease expires
        the controller elects the next replica in the ISR with epoch + 1, the brokers switch
        roles, every acknowledged message is on the new leader and writes go on there."""
        net = EtcdNetwork(tmp_path)
        acked = produce(net, 0, [f"v{i}" for i in range(20)])
        net.crash(0)
        took = net.run_until(lambda: net.leader() is not None, within=TTL + 2)
        assert took <= TTL + 1
        state = net.stored()
        assert (state.leader, state.leader_epoch, state.isr) == (1, 1, (1, 2))
        assert net.leader() == 1
        assert net.plog(1).next_offset >= len(acked)
        assert produce(net, 1, ["after"]) == [20]
        assert net.controller() in (1, 2)

    def test_controller_crash_moves_the_controller(self, tmp_path: Path) -> None:
        """The controller's broker dies while leading nothing: another broker becomes the
        controller (a new epoch = a new create revision) and still acts on later deaths."""
        net = EtcdNetwork(tmp_path)
        first = net.controller()
        assert first is not None
        net.crash(first)
        net.run_until(lambda: net.controller() not in (None, first), within=TTL + 2)
        second = net.controller()
        survivors = [i for i in (0, 1, 2) if i not in (first, second)]
        net.crash(survivors[0])
        net.run_until(lambda: len(net.stored().isr) == 1, within=TTL + 2)
        assert net.stored().isr == (second,) and net.stored().leader == second

    def test_restart_revokes_the_old_lease(self, tmp_path: Path) -> None:
        """A leader killed and restarted at once revokes its previous lease (its id is in the
        data dir): the controller fails over without waiting for the TTL, and the restarted
        broker follows the new leader."""
        net = EtcdNetwork(tmp_path)
        produce(net, 0, ["a"])
        net.crash(0)
        net.start(0)
        took = net.run_until(lambda: net.stored().leader_epoch == 1, within=TTL)
        assert took < 0.5
        net.run_until(lambda: net.leader() == 1)
        net.run_until(lambda: net.status(0).role.value == "follower")

    def test_clean_shutdown_fails_over_at_once(self, tmp_path: Path) -> None:
        """SIGTERM of the leader revokes its lease: a new leader within a second."""
        net = EtcdNetwork(tmp_path)
        produce(net, 0, ["a"])
        net.stop(0)
        took = net.run_until(lambda: net.leader() is not None, within=TTL)
        assert took < 1.0 and net.leader() == 1

    def test_lost_compare_decides_again(self, tmp_path: Path) -> None:
        """A controller deciding on a stale read loses the txn's compare, takes what etcd
        holds from the failure branch and decides again: the write that lands is right."""
        net = EtcdNetwork(tmp_path)
        controller = net.control(net.controller())
        controller.view.partition_mods[(TOPIC, 0)] -= 1   # a stale read
        leader = net.stored().leader
        victim = [b for b in (1, 2) if b != controller.broker_id and b != leader][0] \
            if leader == 0 else 0
        txns_before = sum(1 for g in net.gateways.values() for c in g.calls
                          if c[1] == "/v3/kv/txn")
        net.crash(victim)
        net.run_until(lambda: victim not in net.stored().isr, within=TTL + 2)
        txns = sum(1 for g in net.gateways.values() for c in g.calls
                   if c[1] == "/v3/kv/txn") - txns_before
        assert txns >= 2  # the lost one and the one that landed
        assert victim not in net.stored().isr


class PreferredLeaderTests:
    def test_the_preferred_leader_gets_its_partition_back(
            self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        """kill -9 of broker 0 (the first replica) moves the partition to broker 1; once 0
        is back and in the committed ISR, the controller's next check hands it back to 0 in
        a new epoch (Kafka's auto.leader.rebalance), with every acknowledged message
        there; writes go on at 0."""
        caplog.set_level(logging.INFO, logger="skerry.control")
        net = EtcdNetwork(tmp_path, etcd_settings={"leader_rebalance_check_ms": 1000,
                                                   "leader_return_delay_ms": 0})
        produce(net, 0, [f"v{i}" for i in range(10)])
        net.crash(0)
        net.run_until(lambda: net.leader() == 1, within=TTL + 2)
        assert produce(net, 1, ["while-away"]) == [10]
        net.start(0)
        net.run_until(lambda: net.stored().leader == 0, within=10)
        state = net.stored()
        assert state.leader_epoch == 2 and state.isr[0] == 0 and set(state.isr) == {0, 1, 2}
        net.run_until(lambda: net.leader() == 0)
        assert produce(net, 0, ["back"]) == [11]
        assert net.plog(0).next_offset == 12
        # Once for the topic (the group state topic's partitions move back too).
        assert sum(r.getMessage().startswith(f"{TOPIC}/0: back to its preferred leader")
                   for r in caplog.records) == 1

    def test_off_or_not_yet_due_leaves_the_leader_where_it_is(self, tmp_path: Path) -> None:
        """With the prompt return off and the check off (0), or before the default 300 s
        are up, the broker that took over keeps leading after the first replica is back in
        the ISR."""
        for settings in ({"leader_rebalance_check_ms": 0, "leader_return_delay_ms": 0},
                         {"leader_return_delay_ms": 0}):
            net = EtcdNetwork(tmp_path / str(len(settings)), etcd_settings=settings)
            produce(net, 0, ["a"])
            net.crash(0)
            net.run_until(lambda n=net: n.leader() == 1, within=TTL + 2)
            net.start(0)
            net.run_until(lambda n=net: set(n.stored().isr) == {0, 1, 2}, within=10)
            net.advance(10)
            assert net.stored().leader == 1 and net.leader() == 1


class LeaderReturnTests:
    """A broker that registers gets back its preferred partitions promptly
    (``leader_return_delay_ms``), not at the periodic check."""

    @staticmethod
    def start_one_at_a_time(tmp_path: Path, settings: dict[str, int]) -> EtcdNetwork:
        """Topic with 3 partitions, RF 3 (replica lists [0,1,2], [1,2,0], [2,0,1]); broker
        0 starts alone and creates the topic in etcd (its config declares it), then 1,
        then 2, a second apart: the first elections see only broker 0."""
        net = EtcdNetwork(tmp_path, partitions=3, start=False, etcd_settings=settings)
        for i in range(3):
            net.start(i)
            net.run_until(lambda i=i: net.control(i).ready.called)
            net.advance(1)
        return net

    def test_a_cluster_started_one_at_a_time_spreads_its_leaders(
            self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        """Each broker leads the partition it is first replica of within seconds of the
        last start (the default 3 s once in the ISR), and accepts writes there; each
        partition moved once. With the return off, broker 0 keeps leading all three (the
        periodic check is 300 s away)."""
        caplog.set_level(logging.INFO, logger="skerry.control")
        net = self.start_one_at_a_time(tmp_path, {})
        took = net.run_until(lambda: [net.stored(TOPIC, p).leader for p in range(3)]
                             == [0, 1, 2], within=10)
        assert took < 6
        for p in range(3):
            net.run_until(lambda p=p: net.leader(p) == p)
            assert set(net.stored(TOPIC, p).isr) == {0, 1, 2}
        client = net.client(2)
        assert "|OK|" in client.request(f"PRODUCE|{TOPIC} k:v partition=2 acks=all")
        net.advance(10)
        assert [net.stored(TOPIC, p).leader for p in range(3)] == [0, 1, 2]
        moves = [r.getMessage() for r in caplog.records
                 if "back to its preferred leader" in r.getMessage()
                 and r.getMessage().startswith(f"{TOPIC}/")]
        assert sorted(m.split(":")[0] for m in moves) == [f"{TOPIC}/1", f"{TOPIC}/2"]

        off = self.start_one_at_a_time(tmp_path / "off", {"leader_return_delay_ms": 0})
        off.run_until(lambda: all(len(off.stored(TOPIC, p).isr) == 3 for p in range(3)),
                      within=10)
        off.advance(10)
        assert [off.stored(TOPIC, p).leader for p in range(3)] == [0, 0, 0]

    def test_a_restarted_broker_gets_its_partition_back(self, tmp_path: Path) -> None:
        """kill -9 of broker 1 moves partition 1 to broker 2; writes go on there. Broker 1
        restarts, catches up, and leads partition 1 again within seconds, with every
        acknowledged message; the other partitions never moved."""
        net = self.start_one_at_a_time(tmp_path, {})
        net.run_until(lambda: [net.stored(TOPIC, p).leader for p in range(3)] == [0, 1, 2])
        net.run_until(lambda: net.leader(1) == 1)
        client = net.client(1)
        for v in ("a", "b"):
            assert "|OK|" in client.request(f"PRODUCE|{TOPIC} k:{v} partition=1 acks=all")
        net.crash(1)
        net.run_until(lambda: net.stored(TOPIC, 1).leader == 2, within=TTL + 2)
        net.run_until(lambda: net.leader(1) == 2)
        reply = net.client(2).request(f"PRODUCE|{TOPIC} k:c partition=1 acks=all")
        assert "|OK|" in reply, reply
        net.start(1)
        took = net.run_until(lambda: net.stored(TOPIC, 1).leader == 1, within=15)
        assert took < 8
        net.run_until(lambda: net.leader(1) == 1)
        assert net.plog(1, 1).next_offset == 3
        assert [net.stored(TOPIC, p).leader for p in (0, 2)] == [0, 2]

    def test_a_new_controller_carries_on_with_the_hand_back(self, tmp_path: Path) -> None:
        """Broker 1 restarted and back in partition 1's ISR, its hand-back not yet due, when
        the controller (broker 0) dies: whichever broker becomes controller (1 itself, or 2)
        still hands partition 1 back to broker 1."""
        net = self.start_one_at_a_time(tmp_path, {"leader_return_delay_ms": 3000})
        net.run_until(lambda: [net.stored(TOPIC, p).leader for p in range(3)] == [0, 1, 2])
        assert net.controller() == 0
        net.crash(1)
        net.run_until(lambda: net.stored(TOPIC, 1).leader == 2, within=TTL + 2)
        net.start(1)
        net.run_until(lambda: 1 in net.stored(TOPIC, 1).isr, within=10)
        assert net.stored(TOPIC, 1).leader == 2
        net.crash(0)
        net.run_until(lambda: net.controller() in (1, 2), within=TTL + 2)
        net.run_until(lambda: net.stored(TOPIC, 1).leader == 1, within=10)
        net.run_until(lambda: net.leader(1) == 1)

    def test_a_restarted_broker_that_becomes_controller_takes_its_partition(
            self, tmp_path: Path) -> None:
        """The restarted broker itself becomes the controller before its hand-back is due
        (the controller shuts down while broker 2 cannot reach etcd for a moment): it hands
        partition 1 back to itself, as the others would have."""
        net = self.start_one_at_a_time(tmp_path, {"leader_return_delay_ms": 3000})
        net.run_until(lambda: [net.stored(TOPIC, p).leader for p in range(3)] == [0, 1, 2])
        net.crash(1)
        net.run_until(lambda: net.stored(TOPIC, 1).leader == 2, within=TTL + 2)
        net.start(1)
        net.run_until(lambda: 1 in net.stored(TOPIC, 1).isr, within=10)
        net.cut_etcd(2)
        net.stop(0)
        net.run_until(lambda: net.controller() == 1, within=0.5)
        net.restore_etcd(2)
        net.run_until(lambda: net.stored(TOPIC, 1).leader == 1, within=10)
        net.run_until(lambda: net.leader(1) == 1)


class UnreachableEtcdTests:
    def test_etcd_down_freezes_leadership(self, tmp_path: Path) -> None:
        """etcd unreachable for 3 x TTL: nothing moves, the leader keeps acknowledging
        acks=all writes (Kafka's rule)."""
        net = EtcdNetwork(tmp_path)
        produce(net, 0, ["a"])
        net.etcd_down()
        net.advance(3 * TTL)
        assert net.leader() == 0
        assert produce(net, 0, ["b", "c"]) == [1, 2]
        net.etcd_up()
        net.advance(TTL)
        assert net.stored().leader_epoch == 0 and net.leader() == 0

    def test_fence_writes_on_session_loss(self, tmp_path: Path) -> None:
        """With fence_writes_on_session_loss the leader refuses writes once the last good
        keepalive + TTL has passed, and takes them again once etcd answers."""
        net = EtcdNetwork(tmp_path, etcd_settings={"fence_writes_on_session_loss": True})
        produce(net, 0, ["a"])
        net.etcd_down()
        net.advance(TTL / 2)
        assert produce(net, 0, ["b"]) == [1]
        net.advance(TTL)
        reply = net.client(0).request(f"PRODUCE|{TOPIC} k:c acks=all")
        assert "|ERR|NOT_LEADER|" in reply
        net.etcd_up()
        net.advance(TTL)
        assert produce(net, 0, ["d"]) == [2]

    def test_broker_cut_off_from_etcd_is_replaced(self, tmp_path: Path) -> None:
        """The leader alone loses etcd: its lease expires, a new leader is elected within
        TTL + 1 s, and the old one acknowledges no acks=all write after that (its followers
        follow the new epoch); it steps down once it reaches etcd again."""
        net = EtcdNetwork(tmp_path)
        produce(net, 0, ["a"])
        net.cut_etcd(0)
        took = net.run_until(lambda: net.stored().leader == 1, within=TTL + 2)
        assert took <= TTL + 1
        net.run_until(lambda: net.confirmed_leader(1))
        reply = net.client(0).request(f"PRODUCE|{TOPIC} k:lost acks=all", within=5)
        assert "|OK|" not in reply
        net.restore_etcd(0)
        net.run_until(lambda: not net.confirmed_leader(0), within=TTL + 2)
        assert net.leader() == 1


class IsrTests:
    def test_shrink_and_expand_go_through_etcd(self, tmp_path: Path) -> None:
        """A follower cut off from the leader (both alive in etcd) leaves the ISR through a
        committed etcd txn after the lag timeout; once healed and caught up it is proposed
        again and the committed ISR is whole."""
        net = EtcdNetwork(tmp_path)
        produce(net, 0, ["a"])
        net.partition(0, 2)
        net.run_until(lambda: net.stored().isr == (0, 1), within=5)
        assert produce(net, 0, ["b"]) == [1]
        net.heal(0, 2)
        net.run_until(lambda: net.stored().isr == (0, 1, 2), within=5)
        assert net.stored().leader_epoch == 0

    def test_every_isr_member_dead_goes_offline(self, tmp_path: Path) -> None:
        """Unclean election off: with every ISR member dead the partition goes offline
        (leader -1) and keeps its ISR; the last in-sync replica leads again on return."""
        net = EtcdNetwork(tmp_path)
        produce(net, 0, ["a"])
        net.partition(0, 2)
        net.run_until(lambda: net.stored().isr == (0, 1), within=5)
        net.crash(0)
        net.crash(1)
        net.run_until(lambda: net.stored().leader == -1, within=2 * TTL + 2)
        assert net.leader() is None and net.stored().isr == (1,)
        net.start(1)
        net.run_until(lambda: net.stored().leader == 1, within=TTL + 2)

    def test_unclean_election_elects_with_a_warning(self, tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
        """Unclean election on: the live replica outside the ISR leads, with a warning."""
        net = EtcdNetwork(tmp_path, cluster_settings={"unclean_leader_election": True})
        produce(net, 0, ["a"])
        net.partition(0, 2)
        net.run_until(lambda: net.stored().isr == (0, 1), within=5)
        net.crash(0)
        net.crash(1)
        net.run_until(lambda: net.stored().leader == 2, within=2 * TTL + 2)
        assert any(re.search("UNCLEAN election", r.getMessage()) for r in caplog.records)


def whittle_isr_to_broker_0(net: EtcdNetwork) -> None:
    """Leave broker 0 alone in the ISR with broker 2 holding more than broker 1 (broker 1
    is cut off from the leader first, two more messages reach broker 2, then broker 2 is
    cut off), then kill broker 0: every ISR member is dead, and the replica *later* in list
    order has the longer log."""
    produce(net, 0, ["a"])
    net.partition(0, 1)
    net.run_until(lambda: net.stored().isr == (0, 2), within=5)
    assert produce(net, 0, ["b", "c"]) == [1, 2]
    net.partition(0, 2)
    net.run_until(lambda: net.stored().isr == (0,), within=5)
    assert (net.plog(1).next_offset, net.plog(2).next_offset) == (1, 3)
    net.crash(0)


def log_end_keys(net: EtcdNetwork) -> list[str]:
    return sorted(k.decode() for k in net.etcd.keys() if b"/logends/" in k)


class UncleanByLogEndTests:
    def test_longest_log_leads_not_list_order(self, tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
        """Unclean election on: the partition goes offline, brokers 1 and 2 report their log
        ends (1 and 3) through etcd, and broker 2 (later in list order, longer log) leads
        the next epoch alone, with a warning naming the log ends; broker 1 then follows it
        and gets b and c; the reports are withdrawn."""
        net = EtcdNetwork(tmp_path, cluster_settings={"unclean_leader_election": True})
        whittle_isr_to_broker_0(net)
        net.run_until(lambda: net.stored().leader != 0, within=TTL + 2)
        net.run_until(lambda: net.stored().leader == 2, within=TTL + 2)
        state = net.stored()
        assert (state.leader, state.isr) == (2, (2,))
        assert net.run_until(lambda: net.leader() == 2) < TTL
        assert any("UNCLEAN election" in r.getMessage() and "broker 1: 1 (last epoch 0)" in
                   r.getMessage() and "broker 2: 3 (last epoch 0)" in r.getMessage()
                   for r in caplog.records)
        net.run_until(lambda: net.plog(1).next_offset == 3)
        assert produce(net, 2, ["d"]) == [3]
        net.run_until(lambda: log_end_keys(net) == [])
        assert sum(r.getMessage().startswith(f"{TOPIC}/0: UNCLEAN election")
                   for r in caplog.records) == 1

    def test_unclean_off_stays_offline(self, tmp_path: Path) -> None:
        """Same history, unclean election off: offline, ISR [0] kept, nobody takes writes,
        however long it lasts (the replicas' reports change nothing)."""
        net = EtcdNetwork(tmp_path)
        whittle_isr_to_broker_0(net)
        net.run_until(lambda: net.stored().leader == -1, within=TTL + 2)
        net.advance(3 * TTL)
        assert net.stored().leader == -1 and net.stored().isr == (0,)
        assert net.leader() is None

    def test_no_report_in_time_falls_back_to_list_order(
            self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        """The replicas never report (as if their etcd writes were lost): after one lease
        TTL the controller elects the first live replica in list order and says so."""
        net = EtcdNetwork(tmp_path, cluster_settings={"unclean_leader_election": True})
        whittle_isr_to_broker_0(net)

        async def lost(*_: object) -> None:
            return None

        for i in (1, 2):
            net.control(i)._publish_log_end = lost
        net.run_until(lambda: net.stored().leader == -1, within=TTL + 2)
        took = net.run_until(lambda: net.stored().leader == 1, within=TTL + 1)
        assert took >= TTL - 0.1
        assert any("no log end reported" in r.getMessage() for r in caplog.records)


    def test_last_epoch_is_the_epoch_of_the_last_record(self, tmp_path: Path) -> None:
        """What a replica reports as its last epoch: the epoch that wrote its last record,
        not the epoch it merely knows (a leader promoted without writing yet still ends in
        the previous epoch); followers copy it with the records."""
        from twisted.internet.defer import Deferred

        net = EtcdNetwork(tmp_path)
        produce(net, 0, ["a"])
        Deferred.fromCoroutine(net.control(1).elect(TOPIC, 0, 1))
        net.run_until(lambda: net.leader() == 1)
        facts = net.service(1).isr_facts(TOPIC, 0)
        assert (facts.epoch, facts.last_epoch, facts.log_end) == (1, 0, 1)
        assert produce(net, 1, ["b"]) == [1]
        assert net.service(1).isr_facts(TOPIC, 0).last_epoch == 1
        net.run_until(lambda: net.service(2).isr_facts(TOPIC, 0).last_epoch == 1)


class ApiTests:
    def test_create_topic_everywhere(self, tmp_path: Path) -> None:
        """create_topic writes one txn; every broker creates the logs from the watch; the
        answer is (etcd term, revision); a second create is refused."""
        net = EtcdNetwork(tmp_path)
        results: list[object] = []
        from twisted.internet.defer import Deferred

        Deferred.fromCoroutine(net.control(2).create_topic("orders", 3, 3, min_isr=2)) \
            .addBoth(results.append)
        net.flush()
        term, index = results[0]  # type: ignore[misc]
        assert term == 2 and index == net.etcd.revision or index <= net.etcd.revision
        net.advance(0.5)
        for i in range(3):
            assert net.broker(i).core.topic_config("orders").partitions == 3
        net.run_until(lambda: all(net.confirmed_leader(p, p) for p in range(3))
                      if False else all(net.service(p).is_leader("orders", p)
                                        for p in range(3)))
        again: list[object] = []
        Deferred.fromCoroutine(net.control(0).create_topic("orders", 1, 1)) \
            .addBoth(again.append)
        net.flush()
        assert "topic already exists" in str(again[0])

    def test_forced_election(self, tmp_path: Path) -> None:
        """elect() moves leadership with epoch + 1 like an automatic election, and refuses
        a leader outside the ISR while unclean election is off."""
        net = EtcdNetwork(tmp_path)
        from twisted.internet.defer import Deferred

        done: list[object] = []
        Deferred.fromCoroutine(net.control(1).elect(TOPIC, 0, 2)).addBoth(done.append)
        net.run_until(lambda: net.leader() == 2)
        assert net.stored().leader_epoch == 1 and net.stored().leader == 2
        net.partition(2, 1)
        net.run_until(lambda: sorted(net.stored().isr) == [0, 2], within=5)
        refused: list[object] = []
        Deferred.fromCoroutine(net.control(0).elect(TOPIC, 0, 1)).addBoth(refused.append)
        net.flush()
        assert "outside the ISR" in str(refused[0])


class AdminThroughEtcdTests:
    def test_topic_commands_go_through_etcd(self, tmp_path: Path) -> None:
        """ADMIN_CREATE_TOPIC, ADMIN_ADD_PARTITIONS and ADMIN_DELETE_TOPIC sent to one
        broker change the topic on every broker (from etcd's watch)."""
        net = EtcdNetwork(tmp_path)
        client = net.client(1)
        assert "|OK|" in client.request("ADMIN_CREATE_TOPIC|events 1 3")
        net.advance(0.1)
        assert all(net.broker(i).core.topic_config("events") is not None for i in range(3))
        assert "|OK|" in client.request("ADMIN_ADD_PARTITIONS|events 2")
        net.advance(0.1)
        assert all(net.broker(i).core.topic_config("events").partitions == 2
                   for i in range(3))
        net.run_until(lambda: net.service(1).is_leader("events", 1))
        assert "|OK|" in net.client(1).request("PRODUCE|events k:v partition=1 acks=all")
        assert "|OK|" in client.request("ADMIN_DELETE_TOPIC|events")
        net.advance(0.1)
        assert all(net.broker(i).core.topic_config("events") is None for i in range(3))

    def test_auto_create_goes_through_etcd(self, tmp_path: Path) -> None:
        """With auto-creation on, the first write to an unknown topic starts its creation
        across the cluster and answers NOT_LEADER; the retry is accepted by its leader."""
        net = EtcdNetwork(tmp_path, start=False)
        for node in net.nodes.values():
            node.config["auto_create_topics"] = True
            node.config["defaults"] = {"partitions": 1, "replication_factor": 3,
                                       "min_insync_replicas": 2}
        for i in range(3):
            net.start(i)
        net.run_until(lambda: all(net.control(i).ready.called for i in range(3)))
        first = net.client(0).request("PRODUCE|fresh k:v acks=1")
        assert "|ERR|NOT_LEADER|" in first and "being created" in first
        net.run_until(lambda: all(net.broker(i).core.topic_config("fresh") is not None
                                  for i in range(3)))
        net.run_until(lambda: net.service(0).is_leader("fresh", 0))
        assert "|OK|" in net.client(0).request("PRODUCE|fresh k:v acks=1")
