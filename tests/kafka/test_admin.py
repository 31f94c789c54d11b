"""The Kafka admin APIs (broker/kafka/handlers/admin.py) over the in-memory broker:
CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, IncrementalAlterConfigs,
DescribeCluster, DeleteGroups, OffsetDelete. Requests are written and responses read by
kafka-python's codec (Kafka's own message JSON), not ours."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.kafka.harness import Conn, Harness

topics_mod = pytest.importorskip("kafka.protocol.admin.topics")
configs_mod = pytest.importorskip("kafka.protocol.admin.configs")
cluster_mod = pytest.importorskip("kafka.protocol.admin.cluster")
groups_mod = pytest.importorskip("kafka.protocol.admin.groups")
offsets_mod = pytest.importorskip("kafka.protocol.consumer.offsets")
consumer_groups_mod = pytest.importorskip("kafka.protocol.consumer.group")


def _cls(name: str) -> Any:
    for module in (topics_mod, configs_mod, cluster_mod, groups_mod, offsets_mod,
                   consumer_groups_mod):
        if hasattr(module, name):
            return getattr(module, name)
    raise AssertionError(name)


def call(conn: Conn, name: str, version: int, **fields: Any) -> Any:
    req, resp = _cls(f"{name}Request"), _cls(f"{name}Response")
    body = bytes(req(**fields).encode(version=version))
    if req.flexible_version_q(version):
        body = b"\x00" + body
    raw = conn.call(req.API_KEY, version, body)
    if resp.flexible_version_q(version):
        assert raw[0] == 0
        raw = raw[1:]
    return resp.decode(raw, version=version)


def create(conn: Conn, name: str, partitions: int = 3, factor: int = -1,
           configs: dict[str, str] | None = None, validate_only: bool = False) -> Any:
    req = _cls("CreateTopicsRequest")
    topic = req.CreatableTopic(name=name, num_partitions=partitions,
                               replication_factor=factor, assignments=[], configs=[
                                   req.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                                   for k, v in (configs or {}).items()])
    return call(conn, "CreateTopics", 7, topics=[topic], timeout_ms=1000,
                validate_only=validate_only).topics[0]


def describe(conn: Conn, name: str, keys: list[str] | None = None, rtype: int = 2) -> Any:
    req = _cls("DescribeConfigsRequest")
    return call(conn, "DescribeConfigs", 4, resources=[req.DescribeConfigsResource(
        resource_type=rtype, resource_name=name, configuration_keys=keys)],
        include_synonyms=False, include_documentation=False).results[0]


def alter(conn: Conn, name: str, *changes: tuple[str, int, str | None],
          validate_only: bool = False) -> Any:
    req = _cls("IncrementalAlterConfigsRequest")
    res = req.AlterConfigsResource
    return call(conn, "IncrementalAlterConfigs", 1, resources=[res(
        resource_type=2, resource_name=name, configs=[
            res.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in changes])],
        validate_only=validate_only).responses[0]


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    harness.service.ctx.groups = harness.broker.kafka_groups
    yield harness
    harness.close()


class CreateTopicsTests:
    def test_create_with_configs_then_again(self, h):
        """v7: created with the default replication factor and a retention, answered with
        its partitions, id and configs; a second create: 36 TOPIC_ALREADY_EXISTS."""
        conn = h.connect()
        got = create(conn, "orders", 3, configs={"retention.ms": "60000"})
        assert (got.error_code, got.num_partitions, got.replication_factor) == (0, 3, 1)
        assert got.topic_id != uuid.UUID(int=0)
        assert {c.name: c.value for c in got.configs}["retention.ms"] == "60000"
        config = h.core.topic_config("orders")
        assert (config.partitions, config.retention_ms) == (3, 60000)
        assert create(conn, "orders").error_code == 36

    @pytest.mark.parametrize("kwargs, code", [
        ({"configs": {"flush.ms": "1"}}, 40),
        ({"configs": {"cleanup.policy": "compact"}}, 40),
        ({"configs": {"retention.ms": "soon"}}, 40),
        ({"factor": 3}, 38),
        ({"partitions": 0}, 37),
    ])
    def test_refusals_create_nothing(self, h, kwargs, code):
        """An unknown config, a read-only one set to another value, a bad number, more
        replicas than brokers, no partitions: refused with Kafka's code, nothing created."""
        got = create(h.connect(), "t2", **kwargs)
        assert got.error_code == code and got.error_message
        assert h.core.topic_config("t2") is None

    def test_validate_only(self, h):
        got = create(h.connect(), "t3", validate_only=True)
        assert got.error_code == 0 and h.core.topic_config("t3") is None


class ConfigTests:
    def test_describe_a_topic(self, h):
        """DescribeConfigs v4 lists Skerry's topic configs in Kafka's names; retention is
        the topic's own and alterable, segment.bytes broker-wide and read-only; asking for
        some keys gives those (an unknown key is left out)."""
        conn = h.connect()
        create(conn, "t1", 1, configs={"retention.bytes": "1000"})
        result = describe(conn, "t1")
        entries = {c.name: c for c in result.configs}
        assert set(entries) == {"retention.ms", "retention.bytes", "min.insync.replicas",
                                "segment.bytes", "cleanup.policy", "max.message.bytes",
                                "message.timestamp.type"}
        assert (entries["retention.bytes"].value, entries["retention.bytes"].read_only) == (
            "1000", False)
        assert entries["cleanup.policy"].value == "delete" and entries["segment.bytes"].read_only
        some = describe(conn, "t1", ["retention.bytes", "nope"])
        assert [c.name for c in some.configs] == ["retention.bytes"]
        assert describe(conn, "missing").error_code == 3
        assert any(c.name == "num.partitions" for c in describe(conn, "0", rtype=4).configs)

    def test_incremental_alter(self, h):
        """SET retention.bytes, then DELETE it back to the broker's default (none); a
        resource with one refused change changes nothing (40); validate_only changes
        nothing."""
        conn = h.connect()
        create(conn, "t1", 1)
        assert alter(conn, "t1", ("retention.bytes", 0, "5000")).error_code == 0
        assert h.core.topic_config("t1").retention_bytes == 5000
        refused = alter(conn, "t1", ("retention.ms", 0, "10"), ("min.insync.replicas", 0, "2"))
        assert refused.error_code == 40 and "min.insync.replicas" in refused.error_message
        assert h.core.topic_config("t1").retention_ms is None
        assert alter(conn, "t1", ("retention.ms", 0, "10"), validate_only=True).error_code == 0
        assert h.core.topic_config("t1").retention_ms is None
        assert alter(conn, "t1", ("retention.bytes", 1, None)).error_code == 0
        assert h.core.topic_config("t1").retention_bytes is None
        assert alter(conn, "t1", ("unknown.config", 0, "1")).error_code == 40
        assert alter(conn, "nope", ("retention.ms", 0, "1")).error_code == 3


class TopicLifecycleTests:
    def test_grow_then_delete_by_id_and_by_name(self, h):
        conn = h.connect()
        tid = create(conn, "a", 2).topic_id
        create(conn, "b", 1)
        req = _cls("CreatePartitionsRequest")
        grown = call(conn, "CreatePartitions", 3, topics=[
            req.CreatePartitionsTopic(name="a", count=4, assignments=None),
            req.CreatePartitionsTopic(name="b", count=1, assignments=None)],
            timeout_ms=1000, validate_only=False)
        assert [(r.name, r.error_code) for r in grown.results] == [("a", 0), ("b", 37)]
        assert h.core.topic_config("a").partitions == 4
        dreq = _cls("DeleteTopicsRequest")
        gone = call(conn, "DeleteTopics", 6, topics=[
            dreq.DeleteTopicState(name=None, topic_id=tid),
            dreq.DeleteTopicState(name="b", topic_id=uuid.UUID(int=0)),
            dreq.DeleteTopicState(name=None, topic_id=uuid.UUID(int=7))], timeout_ms=1000)
        assert [(r.name, r.error_code) for r in gone.responses] == [
            ("a", 0), ("b", 0), (None, 100)]
        assert h.core.topic_config("a") is None and h.core.topic_config("b") is None
        again = call(conn, "DeleteTopics", 1, topic_names=["b"], timeout_ms=1000)
        assert [r.error_code for r in again.responses] == [3]

    def test_describe_cluster(self, h):
        got = call(h.connect(), "DescribeCluster", 1, include_cluster_authorized_operations=False,
                   endpoint_type=1)
        assert (got.error_code, got.cluster_id, got.controller_id) == (0, "skerry", 0)
        assert [(b.broker_id, b.host, b.port) for b in got.brokers] == [(0, "127.0.0.1", 9092)]


class GroupAdminTests:
    def commit(self, h: Harness, group: str, partition: int, offset: int) -> None:
        creq = _cls("OffsetCommitRequest")
        got = call(h.connect(), "OffsetCommit", 2, group_id=group,
                   generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
                   topics=[creq.OffsetCommitRequestTopic(name="t1", partitions=[
                       creq.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                           partition_index=partition, committed_offset=offset,
                           committed_metadata="")])])
        assert got.topics[0].partitions[0].error_code == 0

    def test_delete_groups(self, h):
        """A group with committed offsets and no members goes with its offsets (0); an
        unknown one: 69 GROUP_ID_NOT_FOUND."""
        h.core.create_topic("t1", 2, 1, None, None, None)
        self.commit(h, "g", 0, 0)
        got = call(h.connect(), "DeleteGroups", 2, groups_names=["g", "nobody"])
        assert [(r.group_id, r.error_code) for r in got.results] == [("g", 0), ("nobody", 69)]
        assert h.broker.kafka_groups.fetch_offsets("g", [("t1", 0)]) == {("t1", 0): None}

    def test_offset_delete(self, h):
        """OffsetDelete v0 forgets partition 1's offset and keeps partition 0's."""
        h.core.create_topic("t1", 2, 1, None, None, None)
        self.commit(h, "g", 0, 0)
        self.commit(h, "g", 1, 0)
        req = _cls("OffsetDeleteRequest")
        got = call(h.connect(), "OffsetDelete", 0, group_id="g", topics=[
            req.OffsetDeleteRequestTopic(name="t1", partitions=[
                req.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=1)])])
        assert got.error_code == 0
        assert [(p.partition_index, p.error_code) for p in got.topics[0].partitions] == [(1, 0)]
        found = h.broker.kafka_groups.fetch_offsets("g", [("t1", 0), ("t1", 1)])
        assert found[("t1", 1)] is None and found[("t1", 0)] is not None


class RecordsAndLogDirsTests:
    def test_delete_records_takes_whole_segments_only(self, tmp_path):
        """DeleteRecords v2 up to an offset inside the third segment: the two segments
        wholly below it go; the low watermark is the third segment's first offset (at or
        below the one asked for), and every record from there on is still read; an offset
        past the end: OFFSET_OUT_OF_RANGE."""
        from tests.kafka.test_data import SET_V0, produce_body

        h = Harness(tmp_path, {"storage": {"fsync": "never", "segment_bytes": 4096}})
        try:
            h.core.create_topic("t1", 1, 1, None, None, None)
            conn = h.connect()
            for _ in range(60):
                conn.call(0, 0, produce_body("t1", 0, SET_V0))
            bases = h.core.partition_summary("t1", 0).segment_bases
            assert len(bases) >= 4, bases
            target = bases[2] + 1
            req = _cls("DeleteRecordsRequest")
            got = call(conn, "DeleteRecords", 2, topics=[req.DeleteRecordsTopic(
                name="t1", partitions=[
                    req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0,
                                                                  offset=target)])],
                timeout_ms=1000)
            (result,) = got.topics[0].partitions
            assert (result.error_code, result.low_watermark) == (0, bases[2])
            assert h.core.earliest_offset("t1", 0) == bases[2]
            past = call(conn, "DeleteRecords", 2, topics=[req.DeleteRecordsTopic(
                name="t1", partitions=[
                    req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0,
                                                                  offset=10**6)])],
                timeout_ms=1000)
            assert past.topics[0].partitions[0].error_code == 1
        finally:
            h.close()

    def test_describe_log_dirs(self, h):
        """DescribeLogDirs v4: the data directory and each partition's record bytes."""
        conn = h.connect()
        create(conn, "t1", 2)
        got = call(conn, "DescribeLogDirs", 4, topics=None)
        (log_dir,) = got.results
        assert log_dir.error_code == 0 and log_dir.log_dir.endswith("data")
        (topic,) = [t for t in log_dir.topics if t.name == "t1"]
        assert [(p.partition_index, p.partition_size) for p in topic.partitions] == [
            (0, 0), (1, 0)]
