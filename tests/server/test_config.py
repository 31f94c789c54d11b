"""Configuration: defaults, YAML files, flag overrides, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import SCHEMA, ConfigError, config_from_mapping, load_config, reference_markdown


def test_defaults_match_the_documented_quick_start() -> None:
    """With no file the broker listens on 127.0.0.1:9092 with data in ./skerry-data and
    fsync=always."""
    config = load_config(None)
    assert config["host"] == "127.0.0.1"
    assert config["port"] == 9092
    assert config["data_dir"] == "./skerry-data"
    assert config["storage.fsync"] == "always"
    assert config["auto_create_topics"] is True
    assert config["iggy_port"] is None and config["metrics_port"] is None
    assert config.topic_defaults.partitions == 3
    assert config["limits.max_line_bytes"] == 1048576


def test_file_values_and_flag_overrides(tmp_path: Path) -> None:
    """Values come from the YAML file; flags override the file."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("port: 7000\nstorage:\n  fsync: interval\n  fsync_interval_ms: 50\n"
                   "topics:\n  orders:\n    partitions: 6\n")
    config = load_config(str(cfg), {"port": 7001, "host": None})
    assert config["port"] == 7001
    assert config["host"] == "127.0.0.1"
    assert config["storage.fsync"] == "interval"
    assert config["storage.fsync_interval_ms"] == 50
    assert config.topics["orders"].partitions == 6
    assert config.topics["orders"].replication_factor == 1


@pytest.mark.parametrize(("raw", "named"), [
    ({"bogus": 1}, "bogus"),
    ({"storage": {"fsync": "sometimes"}}, "storage.fsync"),
    ({"storage": {"nope": 1}}, "storage.nope"),
    ({"port": "9092"}, "port"),
    ({"port": 70000}, "port"),
    ({"limits": {"max_connections": 0}}, "limits.max_connections"),
    ({"auto_create_topics": "yes"}, "auto_create_topics"),
    ({"defaults": {"replication_factor": 1, "min_insync_replicas": 2}},
     "defaults.min_insync_replicas"),
    ({"topics": {"bad/name": {}}}, "topics.bad/name"),
    ({"topics": {"t": {"replication_factor": 2, "min_insync_replicas": 3}}},
     "topics.t.min_insync_replicas"),
    ({"topics": {"t": {"colour": "red"}}}, "topics.t.colour"),
    ({"groups": 5}, "groups"),
])
def test_mistakes_name_the_key(raw: dict, named: str) -> None:
    """Every bad key or value is a ConfigError whose message names the key."""
    with pytest.raises(ConfigError) as info:
        config_from_mapping(raw)
    assert named in str(info.value)


@pytest.mark.parametrize(("raw", "message"), [
    ({"storage": {"fsynk": "always"}}, "storage.fsynk: unknown key; did you mean storage.fsync?"),
    ({"prot": 9092}, "prot: unknown key; did you mean port?"),
    ({"data-dir": "d"}, "data-dir: unknown key; did you mean data_dir?"),
    ({"fsync": "never"}, "fsync: unknown key; did you mean storage.fsync?"),
    ({"storage": {"partitions": 6}},
     "storage.partitions: unknown key; did you mean defaults.partitions?"),
    ({"topic": {"orders": {}}}, "topic: unknown key; did you mean topics?"),
    ({"topics": {"t": {"partition": 2}}},
     "topics.t.partition: unknown key; did you mean partitions? (known: partitions, "
     "replication_factor, min_insync_replicas, retention_ms, retention_bytes, cleanup_policy, "
     "min_compaction_lag_ms, delete_retention_ms, message_timestamp_type)"),
    ({"bogus": 1}, "bogus: unknown key"),
])
def test_unknown_key_suggests_the_nearest_known_key(raw: dict, message: str) -> None:
    """An unknown key is refused with the closest known key as a "did you mean", matched
    on the whole dotted key or on its last part; nothing close, no suggestion."""
    with pytest.raises(ConfigError) as info:
        config_from_mapping(raw)
    assert str(info.value) == message


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    """A missing file or broken YAML is a ConfigError naming the file, not a traceback."""
    with pytest.raises(ConfigError, match="missing.yaml"):
        load_config(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("port: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(str(bad))
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="top level"):
        load_config(str(bad))


def test_reference_lists_every_key() -> None:
    """The generated configuration reference mentions every schema key and its default."""
    text = reference_markdown()
    for key in SCHEMA:
        assert f"`{key.path}`" in text


def test_docs_configuration_is_current() -> None:
    """docs/configuration.md is exactly what `skerry config-reference` prints."""
    path = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert path.read_text() == reference_markdown()


def test_kafka_listener_is_off_by_default_and_logs_in_with_auth_tokens() -> None:
    """kafka_port is null by default; with auth.tokens_file set Kafka clients log in with
    SASL PLAIN (tests/kafka/test_sasl*.py), so the two go together."""
    assert load_config(None)["kafka_port"] is None
    assert config_from_mapping({"kafka_port": 0})["kafka_port"] == 0
    config = config_from_mapping({"kafka_port": 9093, "auth": {"tokens_file": "/x"}})
    assert config["kafka_port"] == 9093 and config["auth.tokens_file"] == "/x"
