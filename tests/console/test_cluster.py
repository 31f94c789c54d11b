"""The cluster page's view of one broker (``LocalClusterView``): alone, it is the only
broker, the controller and every partition's leader; in a static cluster it lists the
configured brokers and reports the leader and ISR its replication service knows."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from broker.console.cluster import BrokerEntry, LocalClusterView, Placement
from broker.errors import BadRequest
from replication.cluster import ClusterConfig


class _Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass
class _Status:
    role: _Role
    epoch: int
    isr: list[int]
    under_replicated: bool
    leader: int
    replicas: list[int] = field(default_factory=list)


class _Replication:
    def __init__(self, cluster: ClusterConfig | None, statuses: dict[tuple[str, int], _Status]):
        self.cluster = cluster
        self._statuses = statuses

    def status(self, topic: str, partition: int) -> _Status:
        if (topic, partition) not in self._statuses:
            raise BadRequest("unknown topic")
        return self._statuses[(topic, partition)]


class LocalClusterViewTests:
    def test_single_broker_is_everything(self) -> None:
        """Alone: broker 0 at its V1 address, controller, leader with itself in the ISR
        (the replication service reports leader -1 without a cluster)."""
        replication = _Replication(None, {("t", 0): _Status(_Role.LEADER, 0, [0], False, -1)})
        view = LocalClusterView(replication, lambda: "127.0.0.1:9092")
        assert view.mode == "single" and view.controller() == 0
        assert view.brokers() == [BrokerEntry(0, "127.0.0.1:9092", True)]
        assert view.placement("t", 0) == Placement(0, (0,), (0,), False, 0, "leader")

    def test_static_cluster_reports_what_this_broker_knows(self) -> None:
        """In a static cluster: the configured brokers (this one marked), no controller,
        and per partition the leader and replicas from the replication service."""
        cluster = ClusterConfig.from_mapping({
            "broker_id": 1,
            "brokers": {0: "127.0.0.1:9092", 1: "127.0.0.1:9093", 2: "127.0.0.1:9094"}})
        replication = _Replication(cluster, {
            ("t", 0): _Status(_Role.FOLLOWER, 3, [], False, 0, [0, 1, 2]),
            ("t", 1): _Status(_Role.LEADER, 2, [1, 2], True, 1, [1, 2, 0]),
        })
        view = LocalClusterView(replication, lambda: "unused")
        assert view.mode == "static" and view.controller() is None
        assert [(b.broker_id, b.address, b.local) for b in view.brokers()] == [
            (0, "127.0.0.1:9092", False), (1, "127.0.0.1:9093", True),
            (2, "127.0.0.1:9094", False)]
        assert view.placement("t", 0) == Placement(0, (0, 1, 2), (), False, 3, "follower")
        assert view.placement("t", 1) == Placement(1, (1, 2, 0), (1, 2), True, 2, "leader")

    def test_a_partition_it_does_not_know(self) -> None:
        """A partition the replication service does not know has no leader (shown as ?)."""
        view = LocalClusterView(_Replication(None, {}), lambda: "x")
        assert view.placement("gone", 0).leader is None
