"""Real admin clients against a real broker's Kafka listener, at their default settings:
confluent-kafka's AdminClient (librdkafka) and kafka-python's KafkaAdminClient create,
list, describe (configs too, with their sources), alter and delete topics, list and
describe groups."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafka.harness import start_kafka_broker

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

TIMEOUT = 15


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    proc, kafka_port = start_kafka_broker(tmp_path_factory.mktemp("admin"))
    try:
        yield kafka_port
    finally:
        proc.stop()


def topic_configs(admin: AdminClient, name: str) -> dict[str, str]:
    resource = ConfigResource("topic", name)
    (future,) = admin.describe_configs([resource]).values()
    return {k: v.value for k, v in future.result(TIMEOUT).items()}


class ConfluentAdminTests:
    def test_topic_lifecycle(self, port: int) -> None:
        """create (with a config) -> listed with its partitions -> configs described ->
        retention.bytes altered incrementally -> an unknown config refused -> deleted."""
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        futures = admin.create_topics([NewTopic("ck-admin", 3, 1,
                                                config={"retention.ms": "60000"})])
        futures["ck-admin"].result(TIMEOUT)
        listed = admin.list_topics(timeout=TIMEOUT).topics
        assert len(listed["ck-admin"].partitions) == 3
        configs = topic_configs(admin, "ck-admin")
        assert configs["retention.ms"] == "60000" and configs["cleanup.policy"] == "delete"
        resource = ConfigResource("topic", "ck-admin", incremental_configs=[
            ConfigEntry("retention.bytes", "4096",
                        incremental_operation=AlterConfigOpType.SET)])
        (done,) = admin.incremental_alter_configs([resource]).values()
        done.result(TIMEOUT)
        assert topic_configs(admin, "ck-admin")["retention.bytes"] == "4096"
        bad = ConfigResource("topic", "ck-admin", incremental_configs=[
            ConfigEntry("flush.messages", "1", incremental_operation=AlterConfigOpType.SET)])
        (refused,) = admin.incremental_alter_configs([bad]).values()
        with pytest.raises(confluent_kafka.KafkaException, match="flush.messages"):
            refused.result(TIMEOUT)
        admin.delete_topics(["ck-admin"])["ck-admin"].result(TIMEOUT)
        assert "ck-admin" not in admin.list_topics(timeout=TIMEOUT).topics

    def test_config_sources(self, port: int) -> None:
        """A setting given at creation or SET later is DYNAMIC_TOPIC_CONFIG, the others
        DEFAULT_CONFIG (``is_default``); a DELETE takes a setting back to the default."""
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        admin.create_topics([NewTopic("ck-src", 1, 1, config={"retention.ms": "60000"})]
                            )["ck-src"].result(TIMEOUT)

        def sources() -> dict[str, tuple[str, str, bool]]:
            (future,) = admin.describe_configs([ConfigResource("topic", "ck-src")]).values()
            return {k: (v.value, confluent_kafka.admin.ConfigSource(v.source).name, v.is_default)
                    for k, v in future.result(TIMEOUT).items()}

        described = sources()
        assert described["retention.ms"] == ("60000", "DYNAMIC_TOPIC_CONFIG", False)
        assert described["cleanup.policy"] == ("delete", "DEFAULT_CONFIG", True)
        resource = ConfigResource("topic", "ck-src", incremental_configs=[
            ConfigEntry("cleanup.policy", "compact",
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
        (done,) = admin.incremental_alter_configs([resource]).values()
        done.result(TIMEOUT)
        described = sources()
        assert described["cleanup.policy"] == ("compact", "DYNAMIC_TOPIC_CONFIG", False)
        assert described["retention.ms"] == ("-1", "DEFAULT_CONFIG", True)

    def test_groups_are_listed_and_described(self, port: int) -> None:
        """A consumer in group ck-g commits; the group is listed and described."""
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        admin.create_topics([NewTopic("ck-gt", 1, 1)])["ck-gt"].result(TIMEOUT)
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "ck-g",
                             "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("ck-gt", 0, 0)], asynchronous=False)
        consumer.close()
        listed = admin.list_consumer_groups().result(TIMEOUT)
        assert "ck-g" in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups(["ck-g"])["ck-g"].result(TIMEOUT)
        assert described.group_id == "ck-g" and str(described.state).endswith("EMPTY")


class KafkaPythonAdminTests:
    def test_topic_lifecycle(self, port: int) -> None:
        """kafka-python's KafkaAdminClient at defaults: create, list, describe configs,
        alter, delete; list and describe groups."""
        from kafka.admin import ConfigResource as KpResource
        from kafka.admin import ConfigResourceType, KafkaAdminClient
        from kafka.admin import NewTopic as KpTopic

        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        try:
            admin.create_topics([KpTopic("kp-admin", 2, 1, topic_configs={
                "retention.bytes": "2048"})])
            assert "kp-admin" in admin.list_topics()
            resource = KpResource(ConfigResourceType.TOPIC, "kp-admin")
            described = admin.describe_configs([resource])["topic"]["kp-admin"]
            assert described["retention.bytes"]["value"] == "2048"
            admin.alter_configs([KpResource(ConfigResourceType.TOPIC, "kp-admin",
                                            configs={"retention.bytes": "4096"})])
            described = admin.describe_configs([resource])["topic"]["kp-admin"]
            assert described["retention.bytes"]["value"] == "4096"
            admin.delete_topics(["kp-admin"])
            assert "kp-admin" not in admin.list_topics()
            from kafka import KafkaConsumer
            from kafka.structs import OffsetAndMetadata
            from kafka.structs import TopicPartition as KpPartition

            admin.create_topics([KpTopic("kp-gt", 1, 1)])
            consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id="kp-g",
                                     enable_auto_commit=False)
            consumer.commit({KpPartition("kp-gt", 0): OffsetAndMetadata(0, "", -1)})
            consumer.close()
            listed = admin.list_groups()
            assert "kp-g" in repr(listed)
            assert "kp-g" in repr(admin.describe_groups(["kp-g"]))
        finally:
            admin.close()
