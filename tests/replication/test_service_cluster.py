"""The cluster commands as one broker answers them (REPLICA_PULL, REPLICA_EPOCH,
REPLICA_STATUS, SET_PARTITION_ROLE in a cluster), over the real core and store with
simulated time; the other brokers are down, so every answer is this broker's alone."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from broker.client.codec import parse_reply
from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.peer_links import parse_pull_reply
from broker.server import build_broker
from replication.roles import Role
from replication.wire import PullReply
from tests.replication.cluster_harness import TOPIC, Network


def lone_leader(tmp_path: Path, **kwargs: Any) -> Network:
    """Broker 0 up alone and promoted by the operator (epoch 1), so it takes writes."""
    net = Network(tmp_path, start=False, **kwargs)
    net.start(0)
    assert "role=leader" in net.client(0).request(f"SET_PARTITION_ROLE|{TOPIC} 0 leader")
    return net


def pull(net: Network, args: str) -> PullReply:
    reply = parse_reply(net.client(0).request(f"REPLICA_PULL|{TOPIC} 0 {args}").encode())
    assert reply.ok, reply
    return parse_pull_reply(reply.payload)


def state(net: Network, broker: int) -> dict[str, Any]:
    path = net.plog(broker).path
    return json.loads(Path(path, "state.json").read_text())


class PullTests:

    def test_pull_returns_exact_record_bytes(self, tmp_path: Path) -> None:
        """A fetch gets the on-disk bytes of the records from its offset, the epochs that
        label them, the leader's hw and log end; its offset counts as the follower's
        progress (the follower joins the ISR once that reaches the leader's log end)."""
        net = lone_leader(tmp_path)
        client = net.client(0)
        for i in range(3):
            assert "|OK|" in client.request(f"PRODUCE|{TOPIC} k:v{i} acks=1")
        answer = pull(net, "1 1 1")
        plog = net.plog(0)
        assert answer.data == plog.read(1, 10, 1 << 20).raw
        assert (answer.count, answer.epoch, answer.leo, answer.start) == (2, 1, 3, 0)
        assert [(e.epoch, e.start_offset) for e in answer.epochs] == [(1, 0)]
        assert net.status(0).isr == [0]  # holds offset 0 only: not caught up
        assert pull(net, "1 3 1").count == 0
        assert net.status(0).isr == [0, 1]  # holds everything: in sync

    def test_caught_up_pull_waits_for_records(self, tmp_path: Path) -> None:
        """A caught-up fetch with wait_ms is answered when a record arrives, not before."""
        net = lone_leader(tmp_path)
        pull(net, "1 0 1")  # first answer: hw news, at once
        client = net.client(0)
        cid = client.send(f"REPLICA_PULL|{TOPIC} 0 1 0 1 wait_ms=5000")
        net.advance(1.0)
        assert client.replies() == []
        net.client(0).request(f"PRODUCE|{TOPIC} k:late acks=0")
        net.advance(0.01)
        [line] = client.replies()
        assert line.startswith(f"V1|{cid}|OK|") and "count=1 " in line

    def test_older_epoch_gets_no_records(self, tmp_path: Path) -> None:
        """A follower fetching with an older epoch gets the current epoch and no records
        (its cue to start a new session), and its progress is not recorded."""
        net = lone_leader(tmp_path)
        net.client(0).request(f"PRODUCE|{TOPIC} k:v acks=1")
        answer = pull(net, "2 0 0")
        assert (answer.epoch, answer.count, answer.data) == (1, 0, b"")
        assert net.status(0).isr == [0]

    def test_pull_past_the_log_end(self, tmp_path: Path) -> None:
        """A fetch beyond the leader's log end gets no records and the log end, so the
        follower cuts what the leader never had."""
        net = lone_leader(tmp_path)
        answer = pull(net, "1 9 1")
        assert (answer.count, answer.leo) == (0, 0)

    @pytest.mark.parametrize("args, code", [
        ("0 0 1", "BAD_REQUEST"),   # this broker's own replica id
        ("3 0 1", "BAD_REQUEST"),   # no such replica
    ])
    def test_bad_replica_ids(self, tmp_path: Path, args: str, code: str) -> None:
        """Only another replica of the partition may fetch."""
        net = lone_leader(tmp_path)
        reply = net.client(0).request(f"REPLICA_PULL|{TOPIC} 0 {args}")
        assert reply.startswith(f"V1|1|ERR|{code}|")

    def test_unknown_topic(self, tmp_path: Path) -> None:
        """Cluster commands on an unknown topic are BAD_REQUEST and create nothing."""
        net = lone_leader(tmp_path)
        for line in ("REPLICA_PULL|nope 0 1 0 0", "REPLICA_EPOCH|nope 0 1 0",
                     "REPLICA_STATUS|nope 0"):
            assert net.client(0).request(line) == "V1|1|ERR|BAD_REQUEST|unknown topic"
        assert net.broker(0).core.store.topic("nope") is None


class EpochTests:

    def test_epoch_query_answers_the_lookup(self, tmp_path: Path) -> None:
        """REPLICA_EPOCH answers role, epoch and where the asked epoch ends here."""
        net = lone_leader(tmp_path)
        client = net.client(0)
        for i in range(4):
            client.request(f"PRODUCE|{TOPIC} k:v{i} acks=1")
        assert client.request(f"REPLICA_EPOCH|{TOPIC} 0 1 1 last_epoch=0") == (
            "V1|5|OK|role=leader epoch=1 confirmed=true end_epoch=-1 end_offset=0 leo=4 hw=3")
        assert client.request(f"REPLICA_EPOCH|{TOPIC} 0 1 1 last_epoch=1") == (
            "V1|6|OK|role=leader epoch=1 confirmed=true end_epoch=1 end_offset=4 leo=4 hw=3")

    def test_newer_epoch_fences_and_persists(self, tmp_path: Path) -> None:
        """An epoch query carrying a newer epoch fences the leader: it answers as a follower
        of that epoch, its waiting acks=all requests fail NOT_LEADER, and the fencing is on
        disk (a restart does not bring the old leadership back)."""
        net = lone_leader(tmp_path, min_isr=2)
        client = net.client(0)
        client.send(f"PRODUCE|{TOPIC} k:waits acks=all")
        net.advance(0.1)
        assert client.replies() == []
        reply = net.client(0).request(f"REPLICA_EPOCH|{TOPIC} 0 2 5")
        assert reply.startswith("V1|1|OK|role=follower epoch=5 confirmed=false ")
        [failed] = client.replies()
        assert "|ERR|NOT_LEADER|" in failed and "epoch 5 is newer" in failed
        assert (state(net, 0)["role"], state(net, 0)["leader_epoch"]) == ("follower", 5)
        net.crash(0)
        net.start(0)
        assert net.status(0).role is Role.FOLLOWER and net.status(0).epoch == 5

    def test_follower_remembers_newer_epochs(self, tmp_path: Path) -> None:
        """A follower told of a newer epoch keeps it (on disk) and will only follow a leader
        of that epoch or newer."""
        net = Network(tmp_path, start=False)
        net.start(1)
        reply = net.client(1).request(f"REPLICA_EPOCH|{TOPIC} 0 0 3")
        assert reply.startswith("V1|1|OK|role=follower epoch=3 ")
        assert state(net, 1)["leader_epoch"] == 3

    def test_older_epoch_changes_nothing(self, tmp_path: Path) -> None:
        """An epoch query with an older epoch is answered and changes nothing."""
        net = lone_leader(tmp_path)
        net.client(0).request(f"REPLICA_EPOCH|{TOPIC} 0 1 0")
        assert net.confirmed_leader(0) and net.status(0).epoch == 1


class RoleTests:

    def test_demotion_keeps_the_epoch(self, tmp_path: Path) -> None:
        """SET_PARTITION_ROLE follower in a cluster makes a follower of the same epoch,
        which looks for a leader (none here) instead of taking writes."""
        net = lone_leader(tmp_path)
        client = net.client(0)
        assert client.request(f"SET_PARTITION_ROLE|{TOPIC} 0 follower") == \
            f"V1|1|OK|topic={TOPIC} partition=0 role=follower hw=-1"
        assert net.status(0).epoch == 1
        assert "ERR|NOT_LEADER" in client.request(f"PRODUCE|{TOPIC} k:v")
        net.advance(0.5)
        assert (TOPIC, 0) in net.broker(0).replicas.fetchers

    def test_each_promotion_is_a_new_epoch(self, tmp_path: Path) -> None:
        """Promote, demote, promote: epochs 1 then 2, each with its history entry."""
        net = lone_leader(tmp_path)
        client = net.client(0)
        client.request(f"PRODUCE|{TOPIC} k:a acks=1")
        client.request(f"SET_PARTITION_ROLE|{TOPIC} 0 follower")
        client.request(f"SET_PARTITION_ROLE|{TOPIC} 0 leader")
        client.request(f"PRODUCE|{TOPIC} k:b acks=1")
        status = net.status(0)
        assert status.epoch == 2 and status.epochs == [(1, 0), (2, 1)]
        assert state(net, 0)["epochs"] == [[1, 0], [2, 1]]

    def test_broker_without_a_replica(self, tmp_path: Path) -> None:
        """With RF=2 on three brokers, broker 2 holds no replica of partition 0: writes are
        NOT_LEADER, it cannot be promoted, and it fetches nothing."""
        net = Network(tmp_path, start=False, replication_factor=2, min_isr=1)
        net.start(2)
        client = net.client(2)
        reply = client.request(f"PRODUCE|{TOPIC} k:v")
        assert "ERR|NOT_LEADER" in reply
        assert client.request(f"SET_PARTITION_ROLE|{TOPIC} 0 leader").startswith(
            "V1|2|ERR|BAD_REQUEST|broker 2 holds no replica")
        status = client.request(f"REPLICA_STATUS|{TOPIC} 0")
        assert " replica=-1 replicas=[0 1] leader=-1 " in status
        assert net.broker(2).replicas.fetchers == {}

    def test_replica_list_must_not_change(self, tmp_path: Path) -> None:
        """A broker whose replica id for an existing partition changed refuses to start."""
        net = lone_leader(tmp_path)
        net.stop(0)
        net.nodes[0].config["cluster"]["replicas"] = {TOPIC: [[1, 0, 2]]}
        with pytest.raises(ValueError, match="replica lists of existing partitions"):
            net.start(0)


class SingleBrokerTests:

    def harness(self, tmp_path: Path) -> Any:
        broker = build_broker(config_from_mapping({
            "data_dir": str(tmp_path / "d"),
            "topics": {TOPIC: {"partitions": 1, "replication_factor": 3}}}),
            Clock(), run_in_thread=synchronous)
        proto = broker.v1_factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        return broker, proto, transport

    def test_cluster_commands_need_a_cluster(self, tmp_path: Path) -> None:
        """Without a cluster section the broker stays a single broker: the broker-to-broker
        commands are BAD_REQUEST, REPLICA_STATUS still describes the partition, and no
        fetcher runs."""
        broker, proto, transport = self.harness(tmp_path)
        assert broker.replicas is None
        proto.dataReceived(f"V1|1|REPLICA_PULL|{TOPIC} 0 1 0 0\n".encode())
        proto.dataReceived(f"V1|2|REPLICA_EPOCH|{TOPIC} 0 1 0\n".encode())
        proto.dataReceived(f"V1|3|REPLICA_STATUS|{TOPIC} 0\n".encode())
        lines = transport.value().decode().splitlines()
        assert lines[0].startswith("V1|1|ERR|BAD_REQUEST|REPLICA_PULL needs a cluster")
        assert lines[1].startswith("V1|2|ERR|BAD_REQUEST|REPLICA_EPOCH needs a cluster")
        assert lines[2] == ("V1|3|OK|role=leader epoch=0 confirmed=true hw=-1 leo=0 start=0 "
                            "isr=[0] under_replicated=true replica=0 replicas=[] leader=-1 "
                            "epochs=[]")

    def test_single_broker_roles_unchanged(self, tmp_path: Path) -> None:
        """SET_PARTITION_ROLE on a single broker behaves as before: produce refused as a
        follower, accepted again as a leader, the epoch counting promotions."""
        broker, proto, transport = self.harness(tmp_path)
        for i, line in enumerate([f"SET_PARTITION_ROLE|{TOPIC} 0 follower",
                                  f"PRODUCE|{TOPIC} k:v",
                                  f"SET_PARTITION_ROLE|{TOPIC} 0 leader",
                                  f"PRODUCE|{TOPIC} k:{base64.b64encode(b'x').decode()} "
                                  "enc=b64"], start=1):
            proto.dataReceived(f"V1|{i}|{line}\n".encode())
            broker.core.clock.advance(0)
        lines = transport.value().decode().splitlines()
        assert lines[0] == f"V1|1|OK|topic={TOPIC} partition=0 role=follower hw=-1"
        assert lines[1].startswith("V1|2|ERR|NOT_LEADER|")
        assert lines[2] == f"V1|3|OK|topic={TOPIC} partition=0 role=leader hw=-1"
        assert lines[3].startswith("V1|4|OK|partition=0 offset=0")
        assert broker.core.replication.describe(TOPIC, 0).leader_epoch == 1
