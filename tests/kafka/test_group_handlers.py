"""The Kafka group and offset APIs (broker/kafka/handlers/groups.py) over an in-memory
broker on a task.Clock (``tests.kafka.harness``): request frames packed by hand from the
layouts of kafka-wire-notes §3.6-3.11, responses checked byte by byte. Covers the join
barrier across connections, SyncGroup held for the leader, heartbeat 27, session expiry on
the clock, simple and member commits (shared with V1's OFFSET), OffsetFetch -1, the
per-partition commit checks and the cross-protocol refusal (23)."""

from __future__ import annotations

import struct

import pytest

from tests.kafka.harness import Conn, Harness, i16, i32, i64, request, string

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9
JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST = 11, 12, 13, 14, 15, 16
SUBSCRIPTION = bytes.fromhex("0000 00000001 0002 7431 00000000".replace(" ", ""))


def nbytes(b: bytes) -> bytes:
    return i32(len(b)) + b


def join_body(group: str, member: str = "", *, session: int = 6000,
              rebalance: int | None = None, protocol_type: str = "consumer",
              protocols: tuple[str, ...] = ("range", "roundrobin")) -> bytes:
    """JoinGroup v0 (``rebalance=None``) or v1."""
    body = string(group) + i32(session)
    if rebalance is not None:
        body += i32(rebalance)
    body += string(member) + string(protocol_type) + i32(len(protocols))
    return body + b"".join(string(p) + nbytes(SUBSCRIPTION) for p in protocols)


def sync_body(group: str, generation: int, member: str,
              assignments: dict[str, bytes] | None = None) -> bytes:
    given = assignments or {}
    return (string(group) + i32(generation) + string(member) + i32(len(given))
            + b"".join(string(m) + nbytes(a) for m, a in given.items()))


def commit_v2(group: str, generation: int, member: str,
              partitions: list[tuple[str, int, int, str | None]]) -> bytes:
    body = string(group) + i32(generation) + string(member) + i64(-1)
    topics: dict[str, list[tuple[int, int, str | None]]] = {}
    for topic, p, offset, meta in partitions:
        topics.setdefault(topic, []).append((p, offset, meta))
    body += i32(len(topics))
    for topic, parts in topics.items():
        body += string(topic) + i32(len(parts))
        body += b"".join(i32(p) + i64(o) + string(m) for p, o, m in parts)
    return body


def fetch_body(group: str, topic: str, partitions: list[int]) -> bytes:
    return (string(group) + i32(1) + string(topic) + i32(len(partitions))
            + b"".join(i32(p) for p in partitions))


def commit_response(entries: list[tuple[str, list[tuple[int, int]]]]) -> bytes:
    return i32(len(entries)) + b"".join(
        string(t) + i32(len(ps)) + b"".join(i32(p) + i16(code) for p, code in ps)
        for t, ps in entries)


class Join:
    """A parsed JoinGroup response."""

    def __init__(self, body: bytes) -> None:
        self.error, self.generation = struct.unpack_from(">hi", body)
        pos = 6
        fields = []
        for _ in range(3):
            (n,) = struct.unpack_from(">h", body, pos)
            fields.append(body[pos + 2:pos + 2 + n].decode())
            pos += 2 + n
        self.protocol, self.leader, self.member_id = fields
        (count,) = struct.unpack_from(">i", body, pos)
        self.member_count = count


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    harness.service.ctx.groups = harness.broker.kafka_groups
    harness.core.create_topic("t1", 3, 1, None, None, None)
    yield harness
    harness.close()


def one(conn: Conn, cid: int) -> bytes:
    got = conn.responses()
    assert [c for c, _ in got] == [cid], got
    return got[0][1]


def stable_pair(h: Harness) -> tuple[Conn, str, Conn, str, int]:
    """Two members over two connections, joined and synced; (conn, id) x 2, generation."""
    a, b = h.connect(), h.connect()
    first = Join(a.call(JOIN, 0, join_body("g")))
    assert (first.error, first.generation, first.member_count) == (0, 1, 1)
    assert first.leader == first.member_id
    a.call(SYNC, 0, sync_body("g", 1, first.member_id, {first.member_id: b"x"}))
    b.send_raw(_frame(JOIN, 0, 11, join_body("g")))
    assert b.responses() == []  # held: the barrier waits for the first member
    assert a.call(HEARTBEAT, 0, string("g") + i32(1) + string(first.member_id)) == i16(27)
    again = Join(a.call(JOIN, 0, join_body("g", first.member_id)))
    second = Join(one(b, 11))
    assert (again.generation, second.generation) == (2, 2)
    assert again.member_count == 2 and second.member_count == 0  # only the leader's lists
    assert second.leader == first.member_id
    b.send_raw(_frame(SYNC, 0, 12, sync_body("g", 2, second.member_id)))
    assert b.responses() == []  # held until the leader's SyncGroup
    assert a.call(SYNC, 0, sync_body("g", 2, first.member_id, {
        first.member_id: b"A", second.member_id: b"BB"})) == i16(0) + nbytes(b"A")
    assert one(b, 12) == i16(0) + nbytes(b"BB")
    return a, first.member_id, b, second.member_id, 2


def _frame(key: int, version: int, cid: int, body: bytes) -> bytes:
    return request(key, version, cid, body)


class CoordinatorTests:
    def test_find_coordinator_names_this_broker(self, h):
        """FindCoordinator v0 answers node 0 at the advertised address."""
        body = h.connect().call(FIND_COORDINATOR, 0, string("g"))
        assert body == i16(0) + i32(0) + string("127.0.0.1") + i32(9092)

    def test_without_a_group_service_the_group_apis_answer_15(self, h):
        """Until a group service is wired in, clients get COORDINATOR_NOT_AVAILABLE
        (retriable) in each API's own layout, and the connection stays open."""
        h.service.ctx.groups = None
        conn = h.connect()
        assert conn.call(FIND_COORDINATOR, 0, string("g"))[:2] == i16(15)
        assert conn.call(HEARTBEAT, 0, string("g") + i32(1) + string("m")) == i16(15)
        assert not conn.closed


class MembershipTests:
    def test_join_barrier_sync_and_heartbeat_across_connections(self, h):
        """The full two-member rebalance of kafka-wire-notes §6.5 over two connections:
        held JoinGroup, heartbeat 27, leader-only member list, held follower SyncGroup."""
        a, leader, b, follower, generation = stable_pair(h)
        assert a.call(HEARTBEAT, 0, string("g") + i32(generation) + string(leader)) == i16(0)
        assert b.call(HEARTBEAT, 0, string("g") + i32(1) + string(follower)) == i16(22)
        assert b.call(HEARTBEAT, 0, string("g") + i32(2) + string("nobody")) == i16(25)

    def test_session_expiry_on_the_clock(self, h):
        """A member that stops heartbeating is removed after its 6 s session; the other
        learns it by heartbeat 27, rejoins alone and gets generation 3."""
        a, leader, _b, follower, _ = stable_pair(h)
        for _ in range(2):
            h.advance(2.9)
            assert a.call(HEARTBEAT, 0, string("g") + i32(2) + string(leader)) == i16(0)
        h.advance(0.3)  # 6.1 s after the follower's last request
        assert a.call(HEARTBEAT, 0, string("g") + i32(2) + string(leader)) == i16(27)
        alone = Join(a.call(JOIN, 0, join_body("g", leader)))
        assert (alone.error, alone.generation, alone.member_count) == (0, 3, 1)
        assert follower not in h.broker.kafka_groups.coordinator.group("g").members

    def test_leave_rebalances_the_rest(self, h):
        """LeaveGroup answers 0 and the remaining member's heartbeat answers 27; leaving
        twice answers 25."""
        a, leader, b, follower, _ = stable_pair(h)
        assert b.call(LEAVE, 0, string("g") + string(follower)) == i16(0)
        assert b.call(LEAVE, 0, string("g") + string(follower)) == i16(25)
        assert a.call(HEARTBEAT, 0, string("g") + i32(2) + string(leader)) == i16(27)

    def test_join_v1_and_refusals(self, h):
        """JoinGroup v1 carries a rebalance timeout; an empty group id is 24, a session
        timeout out of range 26, another protocol type 23, an unknown member id 25."""
        conn = h.connect()
        joined = Join(conn.call(JOIN, 1, join_body("g", rebalance=10_000)))
        assert (joined.error, joined.generation) == (0, 1)
        assert Join(conn.call(JOIN, 0, join_body(""))).error == 24
        assert Join(conn.call(JOIN, 0, join_body("g2", session=10))).error == 26
        assert Join(conn.call(JOIN, 0, join_body("g", protocol_type="connect"))).error == 23
        assert Join(conn.call(JOIN, 0, join_body("g2", "ghost"))).error == 25

    def test_join_refused_while_v1_members_are_live(self, h):
        """A group id with live V1 members is refused with 23 INCONSISTENT_GROUP_PROTOCOL
        (fatal in the clients), and V1 JOIN is refused once Kafka members are live."""
        from broker.errors import InvalidGroupRequest

        groups = h.broker.kafka_groups.groups
        d = groups.join("v1g", "t1", "v1-member")
        h.pump()
        assert d.called
        assert Join(h.connect().call(JOIN, 0, join_body("v1g"))).error == 23
        Join(h.connect().call(JOIN, 0, join_body("kg")))
        with pytest.raises(InvalidGroupRequest, match="kafka"):
            groups.join("kg", "t1", "v1-member")


class OffsetTests:
    def test_simple_commit_is_shared_with_v1_and_fetch_answers_minus_one(self, h):
        """A simple commit (generation -1, member "") of 0 on t1/1 with metadata is
        OffsetFetch's answer with the metadata, V1 OFFSET's answer too; a partition with
        nothing committed answers -1."""
        conn = h.connect()
        body = commit_v2("g", -1, "", [("t1", 1, 0, "md-x")])
        assert conn.call(OFFSET_COMMIT, 2, body) == commit_response([("t1", [(1, 0)])])
        got = conn.call(OFFSET_FETCH, 1, fetch_body("g", "t1", [1, 2]))
        assert got == (i32(1) + string("t1") + i32(2)
                       + i32(1) + i64(0) + string("md-x") + i16(0)
                       + i32(2) + i64(-1) + string("") + i16(0))
        assert h.broker.kafka_groups.groups.committed_offset("g", "t1", 1) == (0, "md-x")

    def test_commit_checks_each_partition(self, h):
        """An unknown topic or partition answers 3 and a negative offset answers 1 for
        that partition only; the others are stored, an offset past the log end too (Kafka
        stores it; the consumer's fetch then resets by its auto.offset.reset)."""
        conn = h.connect()
        body = commit_v2("g", -1, "", [("t1", 0, 0, None), ("t1", 7, 0, None),
                                       ("t1", 2, 5, None), ("t1", 1, -5, None),
                                       ("nope", 0, 0, None)])
        assert conn.call(OFFSET_COMMIT, 2, body) == commit_response(
            [("t1", [(0, 0), (7, 3), (2, 0), (1, 1)]), ("nope", [(0, 3)])])
        assert h.broker.kafka_groups.groups.committed_offset("g", "t1", 2) == (5, "")
        assert h.broker.kafka_groups.groups.committed_offset("g", "t1", 1) is None

    def test_member_commits_are_fenced(self, h):
        """A member commits with its generation (0); a stale generation is 22 and a
        simple commit into the live group 25, on every partition."""
        a, leader, _b, _follower, generation = stable_pair(h)
        ok = a.call(OFFSET_COMMIT, 2, commit_v2("g", generation, leader, [("t1", 0, 0, "")]))
        assert ok == commit_response([("t1", [(0, 0)])])
        stale = a.call(OFFSET_COMMIT, 2, commit_v2("g", 1, leader, [("t1", 0, 0, "")]))
        assert stale == commit_response([("t1", [(0, 22)])])
        simple = a.call(OFFSET_COMMIT, 2, commit_v2("g", -1, "", [("t1", 0, 0, "")]))
        assert simple == commit_response([("t1", [(0, 25)])])

    def test_commit_v0_is_a_simple_commit(self, h):
        """OffsetCommit v0 (no generation, no member) stores like a simple commit."""
        conn = h.connect()
        body = string("g") + i32(1) + string("t1") + i32(1) + i32(0) + i64(0) + string(None)
        assert conn.call(OFFSET_COMMIT, 0, body) == commit_response([("t1", [(0, 0)])])
        assert h.broker.kafka_groups.groups.committed_offset("g", "t1", 0) == (0, "")

    def test_offset_fetch_v0_unknown_topic_is_3(self, h):
        """v0 answered 3 for an unknown topic (v1: -1 and no error)."""
        conn = h.connect()
        v0 = conn.call(OFFSET_FETCH, 0, fetch_body("g", "nope", [0]))
        assert v0.endswith(i64(-1) + string("") + i16(3))
        v1 = conn.call(OFFSET_FETCH, 1, fetch_body("g", "nope", [0]))
        assert v1.endswith(i64(-1) + string("") + i16(0))


class AdminTests:
    def test_describe_and_list_groups(self, h):
        """DescribeGroups shows a Stable group's protocol and members (with their hosts);
        ListGroups lists it
        with its protocol type; an unknown group describes as Dead."""
        a, leader, _b, _follower, _ = stable_pair(h)
        listed = a.call(LIST, 0)
        assert listed == i16(0) + i32(1) + string("g") + string("consumer")
        described = a.call(DESCRIBE, 0, i32(2) + string("g") + string("zz"))
        assert string("Stable") in described and string("range") in described
        assert string(leader) in described
        # Each member's host is its connection's address, as Kafka shows it ("/<ip>").
        assert described.count(string("/127.0.0.1")) == 2
        assert described.endswith(i16(0) + string("zz") + string("Dead") + string("")
                                  + string("") + i32(0))
