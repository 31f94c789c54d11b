"""Metadata up to v12 over the in-memory broker: topic ids (random, kept in the topic's
``topic.json`` across restarts, looked up by id), leader epochs, v4's
``allow_auto_topic_creation``, authorized operations when asked. Requests are written and
responses read by kafka-python's codec (Kafka's own message JSON), not by ours."""

from __future__ import annotations

import uuid

import pytest

from tests.kafka.harness import Harness

kp_metadata = pytest.importorskip("kafka.protocol.metadata.metadata")
MetadataRequest = kp_metadata.MetadataRequest
MetadataResponse = kp_metadata.MetadataResponse


def call(conn, version: int, **fields):  # type: ignore[no-untyped-def]
    body = bytes(MetadataRequest(**fields).encode(version=version))
    if MetadataRequest.flexible_version_q(version):
        body = b"\x00" + body  # request header v2: its tagged fields
    raw = conn.call(3, version, body)
    if MetadataResponse.flexible_version_q(version):
        assert raw[0] == 0  # response header v1: no tagged fields
        raw = raw[1:]
    return MetadataResponse.decode(raw, version=version)


def topic(name: str | None = None, topic_id: uuid.UUID | None = None):  # type: ignore[no-untyped-def]
    return MetadataRequest.MetadataRequestTopic(
        name=name, topic_id=topic_id or uuid.UUID(int=0))


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    yield harness
    harness.close()


class TopicIdTests:
    def test_a_created_topic_has_a_random_id_kept_across_restarts(self, tmp_path):
        """v12 names a new topic with a non-zero UUID, its partitions with leader epoch 0;
        another topic gets another id; a restarted broker answers the same ids."""
        first = Harness(tmp_path)
        conn = first.connect()
        got = call(conn, 12, topics=[topic("t1"), topic("t2")], allow_auto_topic_creation=True,
                   include_topic_authorized_operations=False)
        ids = {t.name: t.topic_id for t in got.topics}
        assert all(t.error_code == 0 for t in got.topics)
        assert uuid.UUID(int=0) not in ids.values() and len(set(ids.values())) == 2
        assert [p.leader_epoch for p in got.topics[0].partitions] == [0] * len(
            got.topics[0].partitions)
        first.close()
        again = Harness(tmp_path)
        try:
            got = call(again.connect(), 10, topics=None, allow_auto_topic_creation=True,
                       include_topic_authorized_operations=False)
            assert {t.name: t.topic_id for t in got.topics} == ids
        finally:
            again.close()

    def test_a_topic_asked_for_by_id(self, h):
        """v12 with a null name and an id answers that topic by name; an id no topic has
        answers UNKNOWN_TOPIC_ID (100) with a null name."""
        conn = h.connect()
        tid = call(conn, 12, topics=[topic("t1")], allow_auto_topic_creation=True,
                   include_topic_authorized_operations=False).topics[0].topic_id
        got = call(conn, 12, topics=[topic(None, tid), topic(None, uuid.UUID(int=5))],
                   allow_auto_topic_creation=True, include_topic_authorized_operations=False)
        assert [(t.error_code, t.name, t.topic_id) for t in got.topics] == [
            (0, "t1", tid), (100, None, uuid.UUID(int=5))]


class AutoCreateTests:
    def test_a_request_that_forbids_auto_creation(self, h):
        """v4+'s allow_auto_topic_creation=False: UNKNOWN_TOPIC_OR_PARTITION and nothing
        created, although the broker allows it."""
        conn = h.connect()
        got = call(conn, 9, topics=[topic("nope")], allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)
        assert [(t.name, t.error_code) for t in got.topics] == [("nope", 3)]
        assert h.broker.core.topic_config("nope") is None

    def test_authorized_operations_when_asked(self, h):
        """v8+ asks for the operations a client may do: without ACLs, every topic
        operation (Kafka's bits: READ..ALTER_CONFIGS); not asked: INT32 min."""
        conn = h.connect()
        asked = call(conn, 8, topics=[topic("t1")], allow_auto_topic_creation=True,
                     include_topic_authorized_operations=True,
                     include_cluster_authorized_operations=False)
        assert asked.topics[0].authorized_operations == {3, 4, 5, 6, 7, 8, 10, 11}
        plain = call(conn, 8, topics=[topic("t1")], allow_auto_topic_creation=True,
                     include_topic_authorized_operations=False,
                     include_cluster_authorized_operations=False)
        assert plain.topics[0].authorized_operations is None


def test_the_classic_era_table_caps_metadata(tmp_path):
    """Were InitProducerId not served, Metadata v4+ would be neither advertised nor served
    (35), nor the newest data and JoinGroup versions: kafka-python would take the broker
    for 0.11+ and turn on idempotence. With it (as built), nothing is capped."""
    from broker.kafka.codec import ApiKey
    from broker.kafka.handlers import (
        acls,
        admin,
        consumer,
        data,
        dispatch,
        groups,
        metadata,
        producers,
    )

    parts = (dispatch.VERSIONS, metadata.VERSIONS, data.VERSIONS, groups.GROUP_VERSIONS,
             admin.ADMIN_VERSIONS, acls.VERSIONS, consumer.CONSUMER_VERSIONS)
    capped = dispatch.advertised_versions(*parts)
    assert {k: capped[k] for k in dispatch.CLASSIC_ERA} == dispatch.CLASSIC_ERA
    full = dispatch.advertised_versions(*parts, producers.VERSIONS)
    assert full == dispatch.advertised_versions()
    assert (full[ApiKey.METADATA], full[ApiKey.PRODUCE], full[ApiKey.FETCH]) == (
        (0, 12), (0, 9), (0, 12))
    harness = Harness(tmp_path)
    try:
        harness.service.handlers.versions = capped
        harness.service.ctx.advertised = capped
        conn = harness.connect()
        body = bytes(MetadataRequest(topics=None, allow_auto_topic_creation=True).encode(
            version=4))
        raw = conn.call(3, 4, body)
        got = MetadataResponse.decode(raw, version=4)
        assert got.topics == [] and not conn.closed
        assert harness.service.handlers.versions[3] == (0, 3)
    finally:
        harness.close()
