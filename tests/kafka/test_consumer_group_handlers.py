"""The KIP-848 APIs on the Kafka listener, over the wire of an in-memory broker on a
``task.Clock``: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) v0-v1, the
member epochs of OffsetCommit/OffsetFetch v9, ListGroups' types, DescribeGroups v6, and
the errors for mixing the classic and consumer protocols on one group id (Kafka's codes).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.kafka import codec as c
from broker.kafka.codec.apis import SCHEMAS
from broker.kafka.codec.primitives import Reader, Writer
from broker.kafka.codec.schema import read_struct, write_struct
from broker.kafka.errors import ErrorCode
from tests.kafka.harness import Conn, Harness, i16, i32, string

TOPIC = "orders"


@pytest.fixture
def h(tmp_path: Path) -> Any:
    harness = Harness(tmp_path)
    harness.service.ctx.groups = harness.broker.kafka_groups
    harness.service.ctx.consumer_groups = harness.broker.consumer_groups
    harness.core.create_topic(TOPIC, 4, 1, None, None, None)
    yield harness
    harness.close()


def call(conn: Conn, key: int, version: int, request: Any) -> Any:
    """Send ``request`` (a request dataclass, header ignored) as API ``key`` v``version``;
    the response dataclass."""
    schema = SCHEMAS[key]
    flexible = schema.is_flexible(version)
    w = Writer()
    write_struct(schema.request, w, request, version, flexible)
    header = i16(key) + i16(version) + i32(9) + string("test-client")
    if flexible:
        header += b"\x00"
    payload = header + w.getvalue()
    conn.send_raw(i32(len(payload)) + payload)
    got = conn.responses()
    assert len(got) == 1, got
    body = got[0][1]
    if flexible and key != c.ApiKey.API_VERSIONS:
        body = body[1:]  # response header v1: its (empty) tagged fields
    return read_struct(schema.response, Reader(body), version, flexible)


def heartbeat(conn: Conn, group: str, member: str, epoch: int, *, version: int = 1,
              topics: tuple[str, ...] | None = (TOPIC,), rebalance_ms: int = 30000,
              owned: tuple[c.ConsumerTopicPartitions, ...] | None = None,
              regex: str | None = None) -> c.ConsumerGroupHeartbeatResponse:
    request = c.ConsumerGroupHeartbeatRequest(
        None, group, member, epoch, rebalance_timeout_ms=rebalance_ms,  # type: ignore[arg-type]
        subscribed_topic_names=topics, subscribed_topic_regex=regex,
        topic_partitions=owned if owned is not None else (() if epoch == 0 else None))
    return call(conn, 68, version, request)


def topic_id(h: Any) -> bytes:
    return bytes.fromhex(h.core.topic_config(TOPIC).topic_id)


def partitions(response: c.ConsumerGroupHeartbeatResponse) -> list[int]:
    assert response.assignment is not None
    return sorted(p for t in response.assignment.topic_partitions for p in t.partitions)


class HeartbeatTests:
    def test_a_member_joins_and_gets_every_partition_by_the_topics_own_id(self, h: Any) -> None:
        """The first member of a group gets epoch 1, the coordinator's heartbeat interval
        and all four partitions, named by the id Metadata gives the topic."""
        conn = h.connect()
        member = str(uuid.uuid4())
        r = heartbeat(conn, "g", member, 0)
        assert r.error_code == 0, r.error_message
        assert (r.member_id, r.member_epoch) == (member, 1)
        assert r.heartbeat_interval_ms == 5000
        assert r.assignment is not None
        assert [t.topic_id for t in r.assignment.topic_partitions] == [topic_id(h)]
        assert partitions(r) == [0, 1, 2, 3]

    def test_a_second_member_gets_partitions_only_once_the_first_gave_them_up(
            self, h: Any) -> None:
        """Incremental handover: the newcomer gets nothing while the first member still
        owns everything; the first is asked to keep two; once its heartbeat says it owns
        only those, the newcomer's next heartbeat gets the other two."""
        conn = h.connect()
        a, b = str(uuid.uuid4()), str(uuid.uuid4())
        first = heartbeat(conn, "g", a, 0)
        tid = topic_id(h)
        joined = heartbeat(conn, "g", b, 0)
        assert joined.error_code == 0 and partitions(joined) == []
        revoke = heartbeat(conn, "g", a, first.member_epoch,
                           owned=(c.ConsumerTopicPartitions(tid, (0, 1, 2, 3)),))
        kept = partitions(revoke)
        assert len(kept) == 2
        waiting = heartbeat(conn, "g", b, joined.member_epoch, owned=())
        assert partitions(waiting) == []
        heartbeat(conn, "g", a, revoke.member_epoch,
                  owned=(c.ConsumerTopicPartitions(tid, tuple(kept)),))
        given = heartbeat(conn, "g", b, waiting.member_epoch, owned=())
        assert partitions(given) == sorted({0, 1, 2, 3} - set(kept))

    def test_v1_needs_a_member_id_and_v0_is_given_one(self, h: Any) -> None:
        """KIP-1082: v1 with an empty member id is INVALID_REQUEST; v0 joining without one
        is given a member id by the coordinator."""
        conn = h.connect()
        refused = heartbeat(conn, "g", "", 0, version=1)
        assert refused.error_code == ErrorCode.INVALID_REQUEST
        given = heartbeat(conn, "g", "", 0, version=0)
        assert given.error_code == 0 and given.member_id

    def test_refusals_carry_kafkas_codes_and_a_message(self, h: Any) -> None:
        """An epoch ahead of the coordinator's: FENCED_MEMBER_EPOCH (110); an unknown
        assignor: UNSUPPORTED_ASSIGNOR (112); a bad regex: INVALID_REGULAR_EXPRESSION (128);
        a heartbeat for a group that does not exist: GROUP_ID_NOT_FOUND (69)."""
        conn = h.connect()
        member = str(uuid.uuid4())
        heartbeat(conn, "g", member, 0)
        fenced = heartbeat(conn, "g", member, 7)
        assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH and fenced.error_message
        request = c.ConsumerGroupHeartbeatRequest(
            None, "g", str(uuid.uuid4()), 0, rebalance_timeout_ms=1000,  # type: ignore[arg-type]
            subscribed_topic_names=(TOPIC,), server_assignor="sticky", topic_partitions=())
        assert call(conn, 68, 1, request).error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
        bad = heartbeat(conn, "g2", str(uuid.uuid4()), 0, topics=None, regex="(?<=x)y")
        assert bad.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
        missing = heartbeat(conn, "nobody", str(uuid.uuid4()), 3)
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND

    def test_a_regex_subscription_gets_the_matching_topic(self, h: Any) -> None:
        """v1's SubscribedTopicRegex: ``ord.*`` matches ``orders``."""
        conn = h.connect()
        r = heartbeat(conn, "g", str(uuid.uuid4()), 0, topics=None, regex="ord.*")
        assert r.error_code == 0 and partitions(r) == [0, 1, 2, 3]


class DescribeTests:
    def test_describe_shows_epochs_members_and_assignments(self, h: Any) -> None:
        """ConsumerGroupDescribe v1: state, group and assignment epochs, the assignor, and
        each member with its epoch, subscription, assignment, target and type 1; an id
        that is no consumer group: GROUP_ID_NOT_FOUND on its own entry."""
        conn = h.connect()
        member = str(uuid.uuid4())
        heartbeat(conn, "g", member, 0)
        r = call(conn, 69, 1, c.ConsumerGroupDescribeRequest(None, ("g", "none")))  # type: ignore[arg-type]
        group, missing = r.groups
        assert (group.error_code, group.group_state, group.group_epoch,
                group.assignment_epoch, group.assignor_name) == (0, "Stable", 1, 1, "uniform")
        (m,) = group.members
        assert (m.member_id, m.member_epoch, m.subscribed_topic_names, m.member_type,
                m.client_id) == (member, 1, (TOPIC,), 1, "test-client")
        assert [(t.topic_name, t.partitions) for t in m.assignment.topic_partitions] == [
            (TOPIC, (0, 1, 2, 3))]
        assert m.target_assignment == m.assignment
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND


class MixingTests:
    def test_classic_join_into_a_live_consumer_group_is_inconsistent(self, h: Any) -> None:
        """JoinGroup for a group id with KIP-848 members: INCONSISTENT_GROUP_PROTOCOL."""
        conn = h.connect()
        heartbeat(conn, "g", str(uuid.uuid4()), 0)
        join = c.JoinGroupRequest(None, "g", 6000, 6000, "", "consumer",  # type: ignore[arg-type]
                                  (c.JoinGroupProtocol("range", b""),))
        assert call(conn, 11, 5, join).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

    def test_consumer_heartbeat_into_a_live_classic_group_is_not_found(self, h: Any) -> None:
        """A consumer heartbeat for a group id with classic members: GROUP_ID_NOT_FOUND."""
        conn = h.connect()
        join = c.JoinGroupRequest(None, "classic", 6000, 6000, "", "consumer",  # type: ignore[arg-type]
                                  (c.JoinGroupProtocol("range", b""),))
        call(conn, 11, 4, join)  # v4: the member id is given at once
        r = heartbeat(conn, "classic", str(uuid.uuid4()), 0)
        assert r.error_code == ErrorCode.GROUP_ID_NOT_FOUND

    def test_describe_groups_and_list_groups_see_the_consumer_group(self, h: Any) -> None:
        """DescribeGroups: a consumer group is Dead with no error below v6 and
        GROUP_ID_NOT_FOUND from v6; ListGroups v5 lists it with type and protocol type
        ``consumer``, and the types filter picks it or leaves it out."""
        conn = h.connect()
        heartbeat(conn, "g", str(uuid.uuid4()), 0)
        old = call(conn, 15, 5, c.DescribeGroupsRequest(None, ("g",)))  # type: ignore[arg-type]
        assert (old.groups[0].error_code, old.groups[0].state) == (0, "Dead")
        new = call(conn, 15, 6, c.DescribeGroupsRequest(None, ("g",)))  # type: ignore[arg-type]
        assert new.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
        listed = call(conn, 16, 5, c.ListGroupsRequest(None))  # type: ignore[arg-type]
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type)
                for g in listed.groups] == [("g", "consumer", "Stable", "consumer")]
        classic_only = call(conn, 16, 5, c.ListGroupsRequest(None, (), ("classic",)))  # type: ignore[arg-type]
        assert classic_only.groups == ()
        consumer_only = call(conn, 16, 5, c.ListGroupsRequest(None, (), ("Consumer",)))  # type: ignore[arg-type]
        assert [g.group_id for g in consumer_only.groups] == ["g"]


class OffsetTests:
    def commit(self, conn: Conn, version: int, member: str, epoch: int) -> int:
        request = c.OffsetCommitRequest(
            None, "g", epoch, member, -1, (c.OffsetCommitTopic(TOPIC, (  # type: ignore[arg-type]
                c.OffsetCommitPartition(0, 0, -1, ""),)),))
        r = call(conn, 8, version, request)
        return r.topics[0].partitions[0].error_code

    def test_commits_check_the_member_epoch(self, h: Any) -> None:
        """OffsetCommit v9 from a member: its current epoch is stored; another epoch is
        STALE_MEMBER_EPOCH; an unknown member UNKNOWN_MEMBER_ID; a member on v8:
        UNSUPPORTED_VERSION."""
        conn = h.connect()
        member = str(uuid.uuid4())
        r = heartbeat(conn, "g", member, 0)
        assert self.commit(conn, 9, member, r.member_epoch) == 0
        assert self.commit(conn, 9, member, r.member_epoch + 1) == ErrorCode.STALE_MEMBER_EPOCH
        assert self.commit(conn, 9, "stranger", 1) == ErrorCode.UNKNOWN_MEMBER_ID
        assert self.commit(conn, 8, member, r.member_epoch) == ErrorCode.UNSUPPORTED_VERSION

    def test_fetches_check_the_member_epoch(self, h: Any) -> None:
        """OffsetFetch v9 with a member id and epoch: a stale epoch answers
        STALE_MEMBER_EPOCH for the group; epoch -1 (a tool) reads freely."""
        conn = h.connect()
        member = str(uuid.uuid4())
        r = heartbeat(conn, "g", member, 0)
        topics = (c.OffsetFetchTopic(TOPIC, (0,)),)

        def fetch(member_id: str | None, epoch: int) -> int:
            request = c.OffsetFetchRequest(None, "", None, groups=(  # type: ignore[arg-type]
                c.OffsetFetchGroup("g", topics, member_id, epoch),))
            return call(conn, 9, 9, request).groups[0].error_code

        assert fetch(member, r.member_epoch) == 0
        assert fetch(member, r.member_epoch + 3) == ErrorCode.STALE_MEMBER_EPOCH
        assert fetch(None, -1) == 0
