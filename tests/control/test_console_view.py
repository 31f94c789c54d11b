"""The console's cluster page on a cluster that runs on etcd (``ControlPlaneView``): what
etcd holds, seen from any broker, before and after an automatic failover; in memory with
the fake etcd on ``task.Clock``s (tests/control/etcd_cluster_harness.py)."""

from __future__ import annotations

from pathlib import Path

from broker.console.cluster import BrokerEntry, ControlPlaneView, Placement
from tests.control.etcd_cluster_harness import TOPIC, EtcdNetwork

TTL = 2.0


def view(net: EtcdNetwork, broker: int) -> ControlPlaneView:
    return ControlPlaneView(net.control(broker), net.nodes[broker].broker.config.cluster,
                            broker)


def test_the_cluster_page_follows_a_failover(tmp_path: Path) -> None:
    """Before: broker 0 leads epoch 0 with the whole ISR; after its kill -9 and lease
    expiry, broker 2's console shows broker 1 leading epoch 1, ISR [1 2], under-replicated,
    broker 0 still listed (configured address) and a live controller."""
    net = EtcdNetwork(tmp_path)
    before = view(net, 2)
    assert before.mode == "etcd"
    assert before.placement(TOPIC, 0) == Placement(0, (0, 1, 2), (0, 1, 2), False, 0,
                                                   "follower")
    assert view(net, 0).placement(TOPIC, 0).role == "leader"
    assert [b.broker_id for b in before.brokers()] == [0, 1, 2]
    assert before.controller() == net.controller()
    net.crash(0)
    net.run_until(lambda: net.leader() is not None, within=TTL + 2)
    after = view(net, 2)
    assert after.placement(TOPIC, 0) == Placement(1, (0, 1, 2), (1, 2), True, 1, "follower")
    assert BrokerEntry(0, str(net.nodes[2].broker.config.cluster.address(0)), False) \
        in after.brokers()
    assert after.controller() in (1, 2)
    assert after.placement("no-such-topic", 0).role == "unknown"


def test_a_broker_with_etcd_serves_that_view(tmp_path: Path) -> None:
    """``console_port`` on a broker with ``cluster.etcd``: the console's cluster data comes
    from the control plane (mode etcd, the controller etcd names)."""
    net = EtcdNetwork(tmp_path)
    net.crash(2)
    net.nodes[2].config["console_port"] = 0
    broker = net.start(2)
    net.run_until(lambda: net.control(2).ready.called)
    cluster = broker.console.data.cluster
    assert isinstance(cluster, ControlPlaneView)
    assert cluster.mode == "etcd" and cluster.controller() == net.controller()
