"""In-memory brokers run by the etcd control plane: ``tests.replication.cluster_harness``'s
``Network`` (real brokers over ``task.Clock``s, iosim connections) plus one ``FakeEtcd`` on
its own ``Clock`` advanced with theirs, and one ``FakeGateway`` per broker, so each broker's
link to etcd can fail on its own.

``crash(i)`` also cuts broker i's etcd links (a dead process sends nothing); its lease then
expires on etcd's clock after the TTL, as it would for real. ``etcd_down()`` makes etcd
unreachable for every broker and stops etcd's clock (a stopped etcd expires no lease).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet.task import Clock

from broker.config import config_from_mapping
from broker.server import Broker, build_broker
from tests.control.fake_etcd import FakeEtcd, FakeGateway
from tests.replication.cluster_harness import TOPIC, Network

__all__ = ["EtcdNetwork", "TOPIC", "ENDPOINTS"]

ENDPOINTS = ["http://10.0.1.1:2379", "http://10.0.1.2:2379"]


class EtcdNetwork(Network):
    """``count`` brokers with ``cluster.etcd`` over one fake etcd."""

    def __init__(self, tmp_path: Path, count: int = 3, *, ttl_ms: int = 2000,
                 etcd_settings: dict[str, Any] | None = None,
                 cluster_settings: dict[str, Any] | None = None, **kw: Any) -> None:
        self.etcd_clock = Clock()
        self.etcd = FakeEtcd(self.etcd_clock)
        self.etcd_running = True
        self.gateways: dict[int, FakeGateway] = {}
        kw.setdefault("start", True)
        start = kw.pop("start")
        super().__init__(tmp_path, count, start=False, **kw)
        for node in self.nodes.values():
            # One partition of the group state topic: these tests are about the user
            # topic's failover; fewer replicas and fetch loops keep them light.
            node.config.setdefault("groups", {})["state_topic_partitions"] = 1
            node.config["cluster"].update({
                "id": "test",
                "etcd": {"endpoints": ENDPOINTS, "lease_ttl_ms": ttl_ms,
                         **(etcd_settings or {})},
                **(cluster_settings or {})})
        if start:
            for i in range(count):
                self.start(i)
            self.run_until(lambda: all(self.control(i).ready.called for i in range(count)))
            # Brokers registering one after the other: the ISR is whole once they fetched.
            self.run_until(lambda: all(len(self.stored(t, p).isr) == kw.get(
                "replication_factor", 3) for t, p in [(TOPIC, p) for p in range(
                    kw.get("partitions", 1))]))

    def start(self, broker_id: int) -> Broker:
        node = self.nodes[broker_id]
        node.clock = Clock()
        gateway = self.gateways[broker_id] = FakeGateway(self.etcd, list(ENDPOINTS))
        node.broker = build_broker(config_from_mapping(node.config), node.clock,
                                   run_in_thread=node.run_in_thread,
                                   connect=self._connector(broker_id),
                                   etcd_transport=gateway)
        self.built.append(node.broker)
        node.alive = True
        return node.broker

    def crash(self, broker_id: int) -> None:
        self.cut_etcd(broker_id)
        super().crash(broker_id)

    def cut_etcd(self, broker_id: int) -> None:
        """Broker ``broker_id`` can no longer reach etcd (connections refused)."""
        gateway = self.gateways[broker_id]
        for member in list(gateway.members):
            gateway.kill(member)

    def restore_etcd(self, broker_id: int) -> None:
        gateway = self.gateways[broker_id]
        for member in list(gateway.members):
            gateway.revive(member)

    def etcd_down(self) -> None:
        self.etcd_running = False
        for i, node in self.nodes.items():
            if node.alive:
                self.cut_etcd(i)

    def etcd_up(self) -> None:
        self.etcd_running = True
        for i, node in self.nodes.items():
            if node.alive:
                self.restore_etcd(i)

    def _live_clocks(self) -> list[Clock]:
        clocks = super()._live_clocks()
        return [*clocks, self.etcd_clock] if self.etcd_running else clocks

    def control(self, broker_id: int) -> Any:
        return self.broker(broker_id).control

    def stored(self, topic: str = TOPIC, partition: int = 0) -> Any:
        """The partition key as etcd holds it (a ``PartitionState``)."""
        from replication.control.keys import PartitionState

        kv = self.etcd.get(f"/skerry/test/partitions/{topic}/{partition}")
        assert kv is not None
        return PartitionState.decode(kv.value)

    def controller(self) -> int | None:
        import json

        kv = self.etcd.get("/skerry/test/controller")
        return None if kv is None else json.loads(kv.value)["broker"]

    def leader(self, partition: int = 0) -> int | None:
        """The broker that accepts writes for the partition (None: none does)."""
        found = [i for i, n in self.nodes.items()
                 if n.alive and self.confirmed_leader(i, partition)]
        assert len(found) <= 1, f"two brokers accept writes: {found}"
        return found[0] if found else None
