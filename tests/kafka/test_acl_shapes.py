"""Kafka ACL refusals in each API's own shape (broker/kafka/access.py), on the in-memory
Kafka transport with ACLs on: a request naming an allowed and a refused topic is served
for the one and answered 29 for the other; a refused group answers 30 on every partition;
a refused cluster request 31; Metadata leaves out (all topics) or answers 29 (named) the
topics a user may not Describe and creates none without Create; refusals are counted."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from access import AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType
from broker.kafka import codec as c
from tests.kafka.harness import Harness

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP


def _allow(resource_type: ResourceType, name: str, operation: Operation) -> AclBinding:
    return AclBinding("User:alice", resource_type, name, PatternType.LITERAL, operation,
                      Permission.ALLOW)


@pytest.fixture
def h(tmp_path: Any):  # type: ignore[no-untyped-def]
    harness = Harness(tmp_path, {"topics": {"orders": {"partitions": 1},
                                            "payments": {"partitions": 1}},
                                 "auto_create_topics": True})
    harness.broker.core.access.authorizer = Authorizer(
        enabled=True, super_users=["User:admin"],
        acls=[_allow(TOPIC, "orders", Operation.READ), _allow(GROUP, "billing", Operation.READ)])
    yield harness
    harness.close()


ALICE = SimpleNamespace(principal="alice", peer="test")
ADMIN = SimpleNamespace(principal="admin", peer="test")


def _header(key: c.ApiKey, version: int) -> c.RequestHeader:
    return c.RequestHeader(int(key), version, 1, "t")


def _respond(h: Harness, request: Any, requester: Any) -> Any:
    return h.service.handlers.respond(request, requester)


def test_list_offsets_serves_the_allowed_topic_and_answers_29_for_the_other(h: Harness
                                                                            ) -> None:
    request = c.ListOffsetsRequest(_header(c.ApiKey.LIST_OFFSETS, 1), -1, tuple(
        c.ListOffsetsTopic(t, (c.ListOffsetsPartition(0, -1),)) for t in ("orders", "payments")))
    answer = _respond(h, request, ALICE)
    codes = {t.name: [p.error_code for p in t.partitions] for t in answer.topics}
    assert codes == {"orders": [0], "payments": [29]}
    admin = _respond(h, request, ADMIN)
    assert {t.name: [p.error_code for p in t.partitions] for t in admin.topics} == {
        "orders": [0], "payments": [0]}


def test_a_commit_in_another_group_answers_30_on_every_partition(h: Harness) -> None:
    topics = (c.OffsetCommitTopic("orders", (c.OffsetCommitPartition(0, 1, -1, ""),)),)
    request = c.OffsetCommitRequest(_header(c.ApiKey.OFFSET_COMMIT, 2), "other", -1, "", -1,
                                    topics)
    answer = _respond(h, request, ALICE)
    assert [(t.name, [p.error_code for p in t.partitions]) for t in answer.topics] == [
        ("orders", [30])]
    assert h.broker.core.access.refusals == 1


def test_metadata_leaves_out_or_refuses_and_auto_creates_nothing(h: Harness) -> None:
    all_topics = _respond(h, c.MetadataRequest(_header(c.ApiKey.METADATA, 1), None), ALICE)
    assert [t.name for t in all_topics.topics] == ["orders"]
    named = _respond(h, c.MetadataRequest(_header(c.ApiKey.METADATA, 4),
                                          ("orders", "payments", "fresh")), ALICE)
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("orders", 0), ("payments", 29), ("fresh", 29)]
    assert "fresh" not in h.broker.core.topic_names()


def test_cluster_requests_answer_31(h: Harness) -> None:
    request = c.DescribeClusterRequest(_header(c.ApiKey.DESCRIBE_CLUSTER, 0), False)
    assert _respond(h, request, ALICE).error_code == 31
    assert _respond(h, request, ADMIN).error_code == 0


def test_without_authentication_everything_stays_allowed(h: Harness) -> None:
    h.broker.core.access.authorizer = Authorizer(enabled=False)
    request = c.DescribeClusterRequest(_header(c.ApiKey.DESCRIBE_CLUSTER, 0), False)
    assert _respond(h, request, SimpleNamespace(principal=None)).error_code == 0


def test_the_kip848_apis_need_read_group_describe_topic_and_describe_group(h: Harness
                                                                             ) -> None:
    """ConsumerGroupHeartbeat: another group answers 30, a subscribed topic the user may
    not Describe 29, the allowed group and topic join; ConsumerGroupDescribe answers 30 for
    the group the user may not Describe and describes the other."""
    h.service.ctx.groups = h.broker.kafka_groups
    h.service.ctx.consumer_groups = h.broker.consumer_groups

    def beat(group: str, topic: str) -> int:
        request = c.ConsumerGroupHeartbeatRequest(
            _header(c.ApiKey.CONSUMER_GROUP_HEARTBEAT, 1), group,
            "7b0a4cde-0000-4000-8000-000000000001", 0, rebalance_timeout_ms=1000,
            subscribed_topic_names=(topic,), topic_partitions=())
        return _respond(h, request, ALICE).error_code

    assert beat("other", "orders") == 30
    assert beat("billing", "payments") == 29
    assert beat("billing", "orders") == 0
    described = _respond(h, c.ConsumerGroupDescribeRequest(
        _header(c.ApiKey.CONSUMER_GROUP_DESCRIBE, 1), ("billing", "other")), ALICE)
    assert sorted((g.group_id, g.error_code, len(g.members)) for g in described.groups) == [
        ("billing", 0, 1), ("other", 30, 0)]
