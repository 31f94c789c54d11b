"""Kafka's view of a cluster, over an in-memory broker with a stand-in ``Placement``:
Metadata lists the live brokers' Kafka addresses and each partition's leader, replicas and
ISR (no leader: LEADER_NOT_AVAILABLE); a Fetch of a partition this member does not lead
answers NOT_LEADER_FOR_PARTITION; FindCoordinator names the coordinating broker and the
other members answer the group APIs with NOT_COORDINATOR_FOR_GROUP (16). The real
placement over etcd and three broker processes: tests/kafka/test_cluster_clients.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from broker.kafka.handlers.context import NodeInfo, PartitionPlacement
from tests.kafka.harness import Harness, i16, i32, string
from tests.kafka.test_data import fetch_body, fetch_reply, message, produce_body, produce_reply
from tests.kafka.test_group_handlers import join_body

NODES = [NodeInfo(0, "127.0.0.1", 19092), NodeInfo(1, "127.0.0.1", 19093),
         NodeInfo(2, "127.0.0.1", 19094)]


@dataclass
class StandIn:
    """Three brokers; this one is broker 0 (the harness's node); partition p of any topic
    is led by ``leaders[p]``."""

    leaders: list[int] = field(default_factory=lambda: [0, 1, -1])
    live: list[NodeInfo] = field(default_factory=lambda: list(NODES))

    def brokers(self) -> Sequence[NodeInfo]:
        return self.live

    def partition(self, topic: str, partition: int) -> PartitionPlacement:
        leader = self.leaders[partition]
        replicas = tuple((partition + i) % 3 for i in range(3))
        return PartitionPlacement(leader, replicas, () if leader < 0 else replicas[:2])

    def leads(self, topic: str, partition: int) -> bool:
        return self.leaders[partition] == 0

    def loading(self, group_id: str) -> bool:
        return False

    def coordinator(self, group_id: str | None = None) -> NodeInfo | None:
        return self.live[0] if self.live else None

    def controller(self) -> int:
        return 2


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    harness.service.ctx.placement = StandIn()
    harness.service.ctx.groups = harness.broker.kafka_groups
    yield harness
    harness.close()


def node(n: NodeInfo) -> bytes:
    return i32(n.broker_id) + string(n.host) + i32(n.port)


def test_metadata_lists_the_brokers_leaders_replicas_and_isr(h):
    body = h.connect().call(3, 1, i32(1) + string("t1"))  # v1: controller id, rack

    def partition(p: int, error: int, leader: int, isr: tuple[int, ...]) -> bytes:
        replicas = [(p + i) % 3 for i in range(3)]
        return (i16(error) + i32(p) + i32(leader) + i32(3) + b"".join(map(i32, replicas))
                + i32(len(isr)) + b"".join(map(i32, isr)))

    brokers = b"".join(node(n) + string(None) for n in NODES)  # v1: rack null
    assert body == (i32(3) + brokers + i32(2)  # controller
                    + i32(1) + i16(0) + string("t1") + b"\x00" + i32(3)
                    + partition(0, 0, 0, (0, 1)) + partition(1, 0, 1, (1, 2))
                    + partition(2, 5, -1, ()))  # no leader: LEADER_NOT_AVAILABLE


def test_fetch_and_produce_where_this_broker_does_not_lead_answer_6(h):
    conn = h.connect()
    conn.call(3, 0, i32(1) + string("t1"))
    assert produce_reply(conn.call(0, 0, produce_body("t1", 0, message(0, None, b"v"))))[0][0] == 0
    assert fetch_reply(conn.call(1, 0, fetch_body("t1", 0, 0)))[0] == 0
    # The harness's replication does not know of the stand-in's other leaders, but the
    # fetch rule is the placement's: partition 1 is led by broker 1.
    assert fetch_reply(conn.call(1, 0, fetch_body("t1", 1, 0)))[0] == 6
    assert not conn.closed


def test_the_coordinator_is_the_placements_and_the_others_answer_16(h):
    conn = h.connect()
    assert conn.call(10, 0, string("g")) == i16(0) + node(NODES[0])  # this broker
    h.service.ctx.placement.live = NODES[1:]  # broker 0 left the live set: 1 coordinates
    assert conn.call(10, 0, string("g")) == i16(0) + node(NODES[1])
    assert conn.call(11, 0, join_body("g"))[:2] == i16(16)
    assert conn.call(12, 0, string("g") + i32(1) + string("m")) == i16(16)
    assert conn.call(16, 0) == i16(0) + i32(0)  # ListGroups here: none
    h.service.ctx.placement.live = []
    assert conn.call(10, 0, string("g"))[:2] == i16(15)  # nobody: retry later
    assert not conn.closed


@dataclass
class PerGroup(StandIn):
    """Each group its own coordinator, as with etcd: ``by_group[g]`` is the broker leading
    the group's partition of __skerry_groups; ``loading`` the groups broker 0 is loading."""

    by_group: dict[str, int] = field(default_factory=dict)
    loading_groups: set[str] = field(default_factory=set)

    def loading(self, group_id: str) -> bool:
        return group_id in self.loading_groups

    def coordinator(self, group_id: str | None = None) -> NodeInfo | None:
        if group_id is None:
            return NODES[0]
        broker = self.by_group.get(group_id)
        return None if broker is None else NODES[broker]


def test_each_group_has_its_own_coordinator_and_loading_answers_14(h):
    """FindCoordinator names each group's partition leader (not one broker for all); the
    group APIs answer 16 for a group coordinated elsewhere, 14 while this broker is loading
    the group, and are served for a group it coordinates."""
    placement = PerGroup(by_group={"here": 0, "there": 2, "soon": 0},
                         loading_groups={"soon"})
    h.service.ctx.placement = placement
    conn = h.connect()
    assert conn.call(10, 0, string("here")) == i16(0) + node(NODES[0])
    assert conn.call(10, 0, string("there")) == i16(0) + node(NODES[2])
    assert conn.call(11, 0, join_body("there"))[:2] == i16(16)
    assert conn.call(11, 0, join_body("soon"))[:2] == i16(14)
    assert conn.call(11, 0, join_body("here"))[:2] == i16(0)
    assert conn.call(10, 0, string("nowhere"))[:2] == i16(15)
    assert not conn.closed
