"""``cluster.etcd``, ``cluster.id`` and ``cluster.unclean_leader_election``: parsed strictly,
and absent means the operator-driven mode (``ClusterConfig.controlled`` false)."""

from __future__ import annotations

from typing import Any

import pytest

from replication.cluster import ClusterConfig

BASE: dict[str, Any] = {"broker_id": 0, "brokers": {0: "127.0.0.1:9092", 1: "127.0.0.1:9093"}}


def parse(**extra: Any) -> ClusterConfig:
    return ClusterConfig.from_mapping({**BASE, **extra})


class EtcdSectionTests:
    def test_absent_is_operator_mode(self) -> None:
        """Without ``etcd`` the cluster is operator-driven, exactly as before."""
        cluster = parse()
        assert cluster.etcd is None and not cluster.controlled
        assert cluster.cluster_id == "skerry" and cluster.unclean_leader_election is False

    def test_full_section(self) -> None:
        """Every key is read; the TTL is rounded up to whole seconds, at least 2."""
        cluster = parse(id="prod-1", unclean_leader_election=True, etcd={
            "endpoints": ["http://10.0.0.1:2379/", "https://e2:2379"], "lease_ttl_ms": 1500,
            "ca": "/ca.pem", "cert": "/c.pem", "key": "/k.pem",
            "fence_writes_on_session_loss": True})
        etcd = cluster.etcd
        assert etcd is not None and cluster.controlled
        assert etcd.endpoints == ("http://10.0.0.1:2379", "https://e2:2379")
        assert etcd.lease_ttl_s == 2 and etcd.fence_writes_on_session_loss
        assert (etcd.ca, etcd.cert, etcd.key) == ("/ca.pem", "/c.pem", "/k.pem")
        assert cluster.cluster_id == "prod-1" and cluster.unclean_leader_election

    @pytest.mark.parametrize(("section", "message"), [
        ({}, "cluster.etcd.endpoints"),
        ({"endpoints": ["tcp://x:1"]}, "cluster.etcd.endpoints"),
        ({"endpoints": ["http://x:1"], "lease_ttl_ms": 10}, "cluster.etcd.lease_ttl_ms"),
        ({"endpoints": ["http://x:1"], "lease_ttl_ms": True}, "cluster.etcd.lease_ttl_ms"),
        ({"endpoints": ["http://x:1"], "cert": "/c"}, "cluster.etcd.cert"),
        ({"endpoints": ["http://x:1"], "fence_writes_on_session_loss": "yes"},
         "cluster.etcd.fence_writes_on_session_loss"),
        ({"endpoints": ["http://x:1"], "ttl": 3}, "cluster.etcd.ttl"),
        ({"endpoints": ["http://x:1"], "leader_return_delay_ms": 50},
         "cluster.etcd.leader_return_delay_ms"),
        ({"endpoints": ["http://x:1"], "leader_return_delay_ms": True},
         "cluster.etcd.leader_return_delay_ms"),
        ({"endpoints": ["http://x:1"], "leader_return_delay_ms": -1},
         "cluster.etcd.leader_return_delay_ms"),
    ])
    def test_bad_sections_name_the_key(self, section: dict[str, Any], message: str) -> None:
        """A mistake names the key at fault."""
        with pytest.raises(ValueError, match=message.replace(".", r"\.")):
            parse(etcd=section)

    def test_leader_return_delay(self) -> None:
        """``leader_return_delay_ms``: 3 s unless set; 0 turns the prompt hand-back off."""
        assert parse(etcd={"endpoints": ["http://x:1"]}).etcd.leader_return_delay_ms == 3000
        for value in (0, 100, 60_000):
            etcd = parse(etcd={"endpoints": ["http://x:1"], "leader_return_delay_ms": value}).etcd
            assert etcd is not None and etcd.leader_return_delay_ms == value

    def test_bad_cluster_id(self) -> None:
        """The cluster id becomes a key prefix: only name characters."""
        with pytest.raises(ValueError, match="cluster.id"):
            parse(id="a/b")
