"""The group and offset APIs at their current versions (JoinGroup v9, SyncGroup v5,
Heartbeat v4, LeaveGroup v5, OffsetCommit v9, OffsetFetch v8/v9, DescribeGroups v5,
ListGroups v5, FindCoordinator v4) over the in-memory broker, with the table the broker
serves once its data path is modern (``Harness.serve_modern_table``): static membership
(``group.instance.id``) end to end, batched LeaveGroup, multi-group OffsetFetch, the
transaction coordinator refused. Requests are written and responses read by kafka-python's
codec (Kafka's own message JSON), not ours."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kafka.harness import Conn, Harness

groups_mod = pytest.importorskip("kafka.protocol.consumer.group")
admin_groups = pytest.importorskip("kafka.protocol.admin.groups")
offsets_mod = pytest.importorskip("kafka.protocol.consumer.offsets")
find_mod = pytest.importorskip("kafka.protocol.metadata.find_coordinator")

SUB = b"\x00\x00\x00\x00\x00\x01\x00\x02t1\x00\x00\x00\x00"


def _cls(*names: str) -> Any:
    for module in (groups_mod, admin_groups, offsets_mod, find_mod):
        for name in names:
            if hasattr(module, name):
                return getattr(module, name)
    raise AssertionError(names)


def call(conn: Conn, name: str, version: int, **fields: Any) -> Any:
    """Send ``name``Request at ``version`` (header v2 when flexible); decode the answer."""
    req, resp = _cls(f"{name}Request"), _cls(f"{name}Response")
    body = bytes(req(**fields).encode(version=version))
    if req.flexible_version_q(version):
        body = b"\x00" + body
    raw = conn.call(req.API_KEY, version, body)
    if resp.flexible_version_q(version):
        assert raw[0] == 0
        raw = raw[1:]
    return resp.decode(raw, version=version)


def protocols() -> list[Any]:
    req = _cls("JoinGroupRequest")
    return [req.JoinGroupRequestProtocol(name="range", metadata=SUB)]


def join(conn: Conn, member: str = "", instance: str | None = None) -> Any:
    return call(conn, "JoinGroup", 9, group_id="g", session_timeout_ms=6000,
                rebalance_timeout_ms=6000, member_id=member, group_instance_id=instance,
                protocol_type="consumer", protocols=protocols(), reason=None)


def sync(conn: Conn, member: str, generation: int, instance: str | None,
         assignments: dict[str, bytes] | None = None) -> Any:
    req = _cls("SyncGroupRequest")
    return call(conn, "SyncGroup", 5, group_id="g", generation_id=generation,
                member_id=member, group_instance_id=instance, protocol_type="consumer",
                protocol_name="range", assignments=[
                    req.SyncGroupRequestAssignment(member_id=m, assignment=a)
                    for m, a in (assignments or {}).items()])


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    harness.service.ctx.groups = harness.broker.kafka_groups
    harness.core.create_topic("t1", 2, 1, None, None, None)
    harness.serve_modern_table()
    yield harness
    harness.close()


class StaticMemberTests:
    def test_a_static_member_restarts_into_its_old_assignment(self, h):
        """A static member (JoinGroup v9 with group.instance.id) joins and syncs; its
        restart (no member id) gets a new member id, the same generation and assignment;
        its old member id is fenced (82) on Heartbeat v4; DescribeGroups v5 shows the
        instance id."""
        conn = h.connect()
        first = join(conn, instance="app-0")
        assert (first.error_code, first.generation_id, first.protocol_type) == (0, 1, "consumer")
        assert [(m.member_id, m.group_instance_id) for m in first.members] == [
            (first.member_id, "app-0")]
        got = sync(conn, first.member_id, 1, "app-0", {first.member_id: b"A"})
        assert (got.error_code, got.assignment, got.protocol_name) == (0, b"A", "range")
        again = join(h.connect(), instance="app-0")
        assert again.error_code == 0 and again.member_id != first.member_id
        beat = call(conn, "Heartbeat", 4, group_id="g", generation_id=1,
                    member_id=first.member_id, group_instance_id="app-0")
        assert beat.error_code == 82
        described = call(conn, "DescribeGroups", 5, groups=["g"],
                         include_authorized_operations=False)
        (group,) = described.groups
        assert [(m.member_id, m.group_instance_id) for m in group.members] == [
            (again.member_id, "app-0")]

    def test_batched_leave_by_instance_id(self, h):
        """LeaveGroup v5 with two members: one by instance id alone (goes), one unknown
        (25 for it only)."""
        conn = h.connect()
        first = join(conn, instance="app-0")
        sync(conn, first.member_id, 1, "app-0", {first.member_id: b"A"})
        req = _cls("LeaveGroupRequest")
        got = call(conn, "LeaveGroup", 5, group_id="g", members=[
            req.MemberIdentity(member_id="", group_instance_id="app-0", reason="bye"),
            req.MemberIdentity(member_id="nobody", group_instance_id=None, reason=None)])
        assert got.error_code == 0
        assert [(m.group_instance_id, m.error_code) for m in got.members] == [
            ("app-0", 0), (None, 25)]
        listed = call(conn, "ListGroups", 5, states_filter=["Empty"], types_filter=[])
        assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] == [
            ("g", "Empty", "classic")]


class OffsetTests:
    def test_commit_v9_and_multi_group_fetch_v8(self, h):
        """OffsetCommit v9 (flexible) as a simple commit; OffsetFetch v8 for two groups,
        one with topics null (every committed partition), one that committed nothing."""
        conn = h.connect()
        creq = _cls("OffsetCommitRequest")
        got = call(conn, "OffsetCommit", 9, group_id="g", generation_id_or_member_epoch=-1,
                   member_id="", group_instance_id=None, topics=[
                       creq.OffsetCommitRequestTopic(name="t1", partitions=[
                           creq.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                               partition_index=1, committed_offset=0,
                               committed_leader_epoch=-1, committed_metadata="m")])])
        assert [p.error_code for p in got.topics[0].partitions] == [0]
        freq = _cls("OffsetFetchRequest")
        fetched = call(conn, "OffsetFetch", 8, groups=[
            freq.OffsetFetchRequestGroup(group_id="g", topics=None),
            freq.OffsetFetchRequestGroup(group_id="other", topics=None)],
            require_stable=False)
        by_group = {g.group_id: g for g in fetched.groups}
        assert [(t.name, [(p.partition_index, p.committed_offset, p.metadata)
                          for p in t.partitions]) for t in by_group["g"].topics] == [
            ("t1", [(1, 0, "m")])]
        assert by_group["other"].topics == [] and by_group["other"].error_code == 0


class FindCoordinatorTests:
    def test_batched_keys_and_transactions_refused(self, h):
        """v4: one coordinator per group key; the transaction coordinator (key type 1):
        53, no transactions here."""
        conn = h.connect()
        got = call(conn, "FindCoordinator", 4, key_type=0, coordinator_keys=["a", "b"])
        assert [(c.key, c.node_id, c.port, c.error_code) for c in got.coordinators] == [
            ("a", 0, 9092, 0), ("b", 0, 9092, 0)]
        txn = call(conn, "FindCoordinator", 4, key_type=1, coordinator_keys=["tx"])
        assert [c.error_code for c in txn.coordinators] == [53]
