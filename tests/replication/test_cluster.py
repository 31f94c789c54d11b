"""Tests for replication/cluster.py and the ``cluster`` section of the broker config: the
YAML format, replica placement (leaders spread by rotation), and every mistake reported
with the key that holds it."""

from __future__ import annotations

from typing import Any

import pytest

from broker.config import ConfigError, config_from_mapping
from replication.cluster import BrokerAddress, ClusterConfig, default_replicas

BROKERS = {0: "127.0.0.1:9092", 1: "127.0.0.1:9093", 2: "127.0.0.1:9094"}


def cluster(**extra: Any) -> ClusterConfig:
    return ClusterConfig.from_mapping({"broker_id": 1, "brokers": BROKERS, **extra})


class PlacementTests:

    @pytest.mark.parametrize("partition, rf, expected", [
        (0, 3, (0, 1, 2)),
        (1, 3, (1, 2, 0)),
        (2, 3, (2, 0, 1)),
        (3, 3, (0, 1, 2)),
        (1, 2, (1, 2)),
        (2, 1, (2,)),
    ])
    def test_default_replicas_rotate(self, partition: int, rf: int,
                                     expected: tuple[int, ...]) -> None:
        """Partition p's replica list is the sorted broker ids rotated by p: the leaders of
        epoch 0 spread over the brokers."""
        assert default_replicas([2, 0, 1], partition, rf) == expected

    def test_replication_factor_above_cluster_size(self) -> None:
        """RF larger than the number of brokers cannot be placed."""
        with pytest.raises(ValueError, match="larger than the cluster"):
            default_replicas([0, 1], 0, 3)

    def test_positions_are_replica_ids(self) -> None:
        """This broker's replica id is its position in the list; None when not listed."""
        config = cluster()
        assert config.position("t", 0, 3) == 1
        assert config.position("t", 1, 3) == 0
        assert config.position("t", 2, 2) is None

    def test_explicit_lists_win(self) -> None:
        """Explicit replica lists from the config are used; later partitions rotate."""
        config = cluster(replicas={"orders": [[2, 1, 0]]})
        assert config.replicas("orders", 0, 3) == (2, 1, 0)
        assert config.replicas("orders", 1, 3) == (1, 2, 0)
        with pytest.raises(ValueError, match="replication factor"):
            config.replicas("orders", 0, 2)

    def test_addresses(self) -> None:
        """Each broker's V1 address is parsed into host and port; IPv6 in brackets too."""
        config = ClusterConfig.from_mapping({"broker_id": 0,
                                             "brokers": {"0": "[::1]:7000", "1": "b1:7001"}})
        assert config.address(0) == BrokerAddress(0, "::1", 7000)
        assert str(config.address(1)) == "b1:7001"
        assert config.broker_ids == (0, 1)


class ClusterParsingTests:

    @pytest.mark.parametrize("raw, where", [
        ("x", "cluster"),
        ({"brokers": BROKERS}, "cluster.broker_id"),
        ({"broker_id": 7, "brokers": BROKERS}, "cluster.broker_id"),
        ({"broker_id": -1, "brokers": BROKERS}, "cluster.broker_id"),
        ({"broker_id": True, "brokers": BROKERS}, "cluster.broker_id"),
        ({"broker_id": 0, "brokers": {}}, "cluster.brokers"),
        ({"broker_id": 0, "brokers": {0: "nohost"}}, "cluster.brokers.0"),
        ({"broker_id": 0, "brokers": {0: "h:0"}}, "cluster.brokers.0"),
        ({"broker_id": 0, "brokers": {0: "h:70000"}}, "cluster.brokers.0"),
        ({"broker_id": 0, "brokers": {"x": "h:1"}}, "cluster.brokers.x"),
        ({"broker_id": 0, "brokers": {0: "h:1", 1: "h:1"}}, "cluster.brokers.1"),
        ({"broker_id": 0, "brokers": BROKERS, "extra": 1}, "cluster.extra"),
        ({"broker_id": 0, "brokers": BROKERS, "replicas": []}, "cluster.replicas"),
        ({"broker_id": 0, "brokers": BROKERS, "replicas": {"t": [[0, 0]]}},
         r"cluster.replicas.t\[0\]"),
        ({"broker_id": 0, "brokers": BROKERS, "replicas": {"t": [[0, 5]]}},
         r"cluster.replicas.t\[0\]"),
        ({"broker_id": 0, "brokers": BROKERS, "replicas": {"t": []}}, "cluster.replicas.t"),
        ({"broker_id": 0, "brokers": BROKERS, "replicas": {"a b": [[0]]}},
         "cluster.replicas.a b"),
        ({"broker_id": 0, "brokers": BROKERS, "kafka_brokers": {0: "h:1", 1: "h:2"}},
         "cluster.kafka_brokers: no Kafka address for broker 2"),
        ({"broker_id": 0, "brokers": BROKERS,
          "kafka_brokers": {0: "h:1", 1: "h:2", 2: "h:3", 3: "h:4"}},
         "cluster.kafka_brokers.3"),
        ({"broker_id": 0, "brokers": BROKERS, "kafka_brokers": {0: "h:1", 1: "h:1", 2: "h:3"}},
         "cluster.kafka_brokers.1"),
        ({"broker_id": 0, "brokers": BROKERS, "kafka_brokers": {0: "h", 1: "h:2", 2: "h:3"}},
         "cluster.kafka_brokers.0"),
        ({"broker_id": 0, "brokers": BROKERS, "kafka_brokers": []}, "cluster.kafka_brokers"),
    ])
    def test_mistakes_name_the_key(self, raw: Any, where: str) -> None:
        """Every malformed cluster section is refused with a message naming the key."""
        with pytest.raises(ValueError, match=f"^{where}"):
            ClusterConfig.from_mapping(raw)


class ConfigSectionTests:

    def base(self, **extra: Any) -> dict[str, Any]:
        return {"cluster": {"broker_id": 0, "brokers": BROKERS,
                            "kafka_brokers": {0: "127.0.0.1:19092", 1: "127.0.0.1:19093",
                                              2: "127.0.0.1:19094"}}, **extra}

    def test_no_cluster_section_means_single_broker(self) -> None:
        """Without a cluster section the config has no cluster at all."""
        assert config_from_mapping({}).cluster is None

    def test_cluster_section_is_parsed(self) -> None:
        """A cluster section becomes Config.cluster, with the replication knobs."""
        config = config_from_mapping(self.base(replication={"fetch_wait_ms": 100}))
        assert config.cluster is not None and config.cluster.broker_id == 0
        assert config["replication.fetch_wait_ms"] == 100

    def test_kafka_brokers_are_parsed(self) -> None:
        """cluster.kafka_brokers: each broker's Kafka address, by broker id."""
        config = config_from_mapping(self.base(kafka_port=0))
        assert config.cluster is not None
        assert {b: str(a) for b, a in config.cluster.kafka_brokers.items()} == {
            0: "127.0.0.1:19092", 1: "127.0.0.1:19093", 2: "127.0.0.1:19094"}

    def test_a_kafka_listener_in_a_cluster_needs_the_kafka_addresses(self) -> None:
        """Without cluster.kafka_brokers, Kafka clients could not be sent to the leaders."""
        raw = self.base(kafka_port=0)
        del raw["cluster"]["kafka_brokers"]
        with pytest.raises(ConfigError, match="^cluster.kafka_brokers: required with kafka_port"):
            config_from_mapping(raw)
        del raw["kafka_port"]
        assert config_from_mapping(raw).cluster is not None

    @pytest.mark.parametrize("extra, where", [
        ({"cluster": {"broker_id": 0}}, "cluster.brokers"),
        ({"topics": {"t": {"replication_factor": 4}}}, "topics.t"),
        ({"defaults": {"replication_factor": 4}}, "defaults.replication_factor"),
        ({"replication": {"fetch_wait_ms": 10000}}, "replication.fetch_wait_ms"),
    ])
    def test_config_mistakes(self, extra: dict[str, Any], where: str) -> None:
        """Cluster mistakes in the broker config are ConfigErrors naming the key."""
        with pytest.raises(ConfigError, match=f"^{where}"):
            config_from_mapping(self.base(**extra))

    def test_too_many_explicit_lists(self) -> None:
        """More replica lists than a declared topic has partitions is a mistake."""
        raw = self.base(topics={"t": {"partitions": 1, "replication_factor": 3}})
        raw["cluster"]["replicas"] = {"t": [[0, 1, 2], [1, 2, 0]]}
        with pytest.raises(ConfigError, match="cluster.replicas.t"):
            config_from_mapping(raw)
