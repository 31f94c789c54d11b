"""Golden bytes for the Iggy codec: every request of the seed's code list decodes from and
encodes to bytes written out by hand from the seed and spec/iggy-binary-notes.md (several
captured from the real apache-iggy 0.8.0 client), every reply encoder produces the
documented layout, and malformed payloads get the documented status."""

from __future__ import annotations

import struct

import pytest

from access.errors import InvalidPermissions
from broker.errors import (
    BadRequest,
    NotLeader,
    PartitionNotOwned,
    ReplicationTimeout,
    StaleGeneration,
    StorageError,
    UnknownMember,
)
from broker.iggy import codec as c
from broker.iggy.codec import (
    Consumer,
    ConsumerKind,
    GlobalPermissions,
    Identifier,
    PartitioningKind,
    Permissions,
    PollingKind,
    StreamPermissions,
    TopicPermissions,
)
from broker.iggy.errors import IggyError, Status, status_for
from tests.iggy.harness import SEED_CODES, ident, name8, u32, u64

S = ident("s")
T = ident("t")
N0 = ident(0)
H = bytes.fromhex


def _msg(payload: bytes, headers: bytes = b"", id: int = 0, origin: int = 0) -> bytes:
    return struct.pack("<QQQQQQIIQ", 0, id & (2**64 - 1), id >> 64, 0, 0, origin, len(headers),
                       len(payload), 0) + payload + headers


# The real client's SendMessages ("s", "t", partition 0, ["hello", "wo"]): metadata 16 bytes,
# two 16-byte index entries (ends 69 and 135), then the messages with origin timestamps.
REAL_SEND = H(
    "10000000020173020174020400000000020000000000000045000000000000000000000000000000"
    "87000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00000000000000000000000041cff9dfd26006000000000005000000000000000000000068656c6c"
    "6f000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0044cff9dfd260060000000000020000000000000000000000776f")
REAL_SEND_MESSAGES = REAL_SEND[4 + 16 + 32:]

ROOT_BLOB = bytes([1] * 10) + b"\x00"
STREAM_BLOB = (bytes([0, 1, 0, 1, 0, 0, 0, 0, 1, 0]) + b"\x01"
               + u32(1) + bytes([0, 1, 0, 0, 1, 1]) + b"\x01"
               + u32(4) + bytes([0, 0, 1, 0]) + b"\x01" + u32(9) + bytes([1, 1, 1, 1]) + b"\x00"
               + b"\x01"
               + u32(3) + bytes([1, 0, 0, 0, 0, 0]) + b"\x00" + b"\x00")
STREAM_PERMS = Permissions(
    GlobalPermissions(read_servers=True, read_users=True, poll_messages=True),
    ((1, StreamPermissions(read_stream=True, poll_messages=True, send_messages=True,
                           topics=((4, TopicPermissions(poll_messages=True)),
                                   (9, TopicPermissions(True, True, True, True))))),
     (3, StreamPermissions(manage_stream=True))))

# (code, payload, command): payloads by hand; "real" ones captured from apache-iggy 0.8.0.
REQUESTS: list[tuple[int, bytes, c.Command]] = [
    (1, b"", c.Ping()),
    (10, b"", c.GetStats()),
    (11, b"", c.GetSnapshot()),
    (11, b"\x01\x01\x00", c.GetSnapshot(b"\x01\x01\x00")),
    (12, b"", c.GetClusterMetadata()),
    (20, b"", c.GetMe()),
    (21, u32(7), c.GetClient(7)),
    (22, b"", c.GetClients()),
    (31, N0, c.GetUser(Identifier(0))),
    (31, ident("iggy"), c.GetUser(Identifier("iggy"))),
    (32, b"", c.GetUsers()),
    (33, name8("alice") + name8("secret") + b"\x01" + b"\x00" + u32(0),
     c.CreateUser("alice", "secret", 1)),
    (33, name8("bob") + name8("pw123") + b"\x02" + b"\x01" + u32(len(STREAM_BLOB)) + STREAM_BLOB,
     c.CreateUser("bob", "pw123", 2, STREAM_PERMS)),
    (34, ident(3), c.DeleteUser(Identifier(3))),
    (35, ident(3) + b"\x01" + name8("carl") + b"\x01\x02", c.UpdateUser(Identifier(3), "carl", 2)),
    (35, ident("x") + b"\x00\x00", c.UpdateUser(Identifier("x"))),
    (36, ident(2) + b"\x01" + u32(11) + ROOT_BLOB, c.UpdatePermissions(Identifier(2), Permissions.root())),
    (36, ident(2) + b"\x00" + u32(0), c.UpdatePermissions(Identifier(2))),
    (37, ident(1) + name8("old") + name8("new"), c.ChangePassword(Identifier(1), "old", "new")),
    (38, H("0469676779046967677906000000302e31302e3000000000"),  # real
     c.LoginUser("iggy", "iggy", "0.10.0")),
    (38, name8("u1") + name8("p1") + u32(0) + u32(3) + b"ctx", c.LoginUser("u1", "p1", None, "ctx")),
    (39, b"", c.LogoutUser()),
    (41, b"", c.GetPersonalAccessTokens()),
    (42, name8("token") + u64(0), c.CreatePersonalAccessToken("token", 0)),
    (42, name8("tok2") + u64(3_600_000_000), c.CreatePersonalAccessToken("tok2", 3_600_000_000)),
    (43, name8("token"), c.DeletePersonalAccessToken("token")),
    (44, name8("abc"), c.LoginWithPersonalAccessToken("abc")),
    (100, H("0101040000000002017302017401000000000105000000000000000a00000001"),  # real
     c.PollMessages(Consumer(ConsumerKind.CONSUMER, Identifier(0)), Identifier("s"),
                    Identifier("t"), 0, PollingKind.OFFSET, 5, 10, True)),
    (100, H("02020363673102017302017400000000000500000000000000000a00000001"),  # real
     c.PollMessages(Consumer(ConsumerKind.CONSUMER_GROUP, Identifier("cg1")), Identifier("s"),
                    Identifier("t"), None, PollingKind.NEXT, 0, 10, True)),
    (100, b"\x01" + ident(1) + S + T + b"\x01" + u32(2) + b"\x02" + u64(123) + u32(1) + b"\x00",
     c.PollMessages(Consumer(ConsumerKind.CONSUMER, Identifier(1)), Identifier("s"),
                    Identifier("t"), 2, PollingKind.TIMESTAMP, 123, 1, False)),
    (101, REAL_SEND,  # real
     c.SendMessages(Identifier("s"), Identifier("t"), PartitioningKind.PARTITION_ID, u32(0), 2,
                    REAL_SEND_MESSAGES)),
    (102, S + T + u32(2) + b"\x01", c.FlushUnsavedBuffer(Identifier("s"), Identifier("t"), 2, True)),
    (120, b"\x01" + ident(3) + S + T + b"\x01" + u32(1),
     c.GetConsumerOffset(Consumer(ConsumerKind.CONSUMER, Identifier(3)), Identifier("s"),
                         Identifier("t"), 1)),
    (121, H("02020363673202017302017401000000000800000000000000"),  # real
     c.StoreConsumerOffset(Consumer(ConsumerKind.CONSUMER_GROUP, Identifier("cg2")),
                           Identifier("s"), Identifier("t"), 0, 8)),
    (122, b"\x02" + ident(0) + S + T + b"\x00" + u32(0),
     c.DeleteConsumerOffset(Consumer(ConsumerKind.CONSUMER_GROUP, Identifier(0)), Identifier("s"),
                            Identifier("t"), None)),
    (200, H("020173"), c.GetStream(Identifier("s"))),  # real
    (200, H("010407000000"), c.GetStream(Identifier(7))),  # real
    (201, b"", c.GetStreams()),
    (202, H("03616263"), c.CreateStream("abc")),  # real
    (203, N0, c.DeleteStream(Identifier(0))),
    (204, ident(1) + name8("renamed"), c.UpdateStream(Identifier(1), "renamed")),
    (205, S, c.PurgeStream(Identifier("s"))),
    (300, H("020173010401000000"), c.GetTopic(Identifier("s"), Identifier(1))),  # real
    (301, S, c.GetTopics(Identifier("s"))),
    (302, H("020173030000000100000000000000000000000000000000000174"),  # real
     c.CreateTopic(Identifier("s"), 3, 1, 0, 0, 0, "t")),
    (302, H("0104000000000200000002404b4c0000000000e803000000000000010174"),  # real
     c.CreateTopic(Identifier(0), 2, 2, 5_000_000, 1000, 1, "t")),
    (303, S + T, c.DeleteTopic(Identifier("s"), Identifier("t"))),
    (304, S + T + b"\x03" + u64(7) + u64(8) + b"\x02" + name8("t2"),
     c.UpdateTopic(Identifier("s"), Identifier("t"), 3, 7, 8, 2, "t2")),
    (305, S + T, c.PurgeTopic(Identifier("s"), Identifier("t"))),
    (402, S + T + u32(4), c.CreatePartitions(Identifier("s"), Identifier("t"), 4)),
    (403, S + T + u32(1), c.DeletePartitions(Identifier("s"), Identifier("t"), 1)),
    (503, S + T + u32(2) + u32(3), c.DeleteSegments(Identifier("s"), Identifier("t"), 2, 3)),
    (600, H("0201730201740203636731"),  # real
     c.GetConsumerGroup(Identifier("s"), Identifier("t"), Identifier("cg1"))),
    (601, S + T, c.GetConsumerGroups(Identifier("s"), Identifier("t"))),
    (602, H("02017302017403636732"),  # real
     c.CreateConsumerGroup(Identifier("s"), Identifier("t"), "cg2")),
    (603, S + T + ident(0), c.DeleteConsumerGroup(Identifier("s"), Identifier("t"), Identifier(0))),
    (604, H("0201730201740203636731"),  # real
     c.JoinConsumerGroup(Identifier("s"), Identifier("t"), Identifier("cg1"))),
    (605, S + T + ident(2), c.LeaveConsumerGroup(Identifier("s"), Identifier("t"), Identifier(2))),
]


class RequestTests:
    @pytest.mark.parametrize(("code", "payload", "command"), REQUESTS,
                             ids=[f"{code}-{type(cmd).__name__}" for code, _, cmd in REQUESTS])
    def test_decode_and_encode(self, code, payload, command):
        """The bytes decode to the command, and the command encodes to the same frame."""
        assert c.decode_request(code, payload) == command
        assert c.encode_request(command) == struct.pack("<II", 4 + len(payload), code) + payload

    def test_every_seed_code_has_a_fixture(self):
        """The fixtures cover every request code of the seed's list (copied by hand), and
        the codec knows exactly those codes."""
        assert {code for code, _, _ in REQUESTS} == SEED_CODES
        assert {int(code) for code in c.Code} == SEED_CODES

    def test_split_the_real_clients_messages(self):
        """The real client's two messages split into payloads, no user headers, ids 0 and
        the client's origin timestamps."""
        payloads, headers, ids, origins = c.split_messages(REAL_SEND_MESSAGES, 2, 1 << 20)
        assert payloads == [b"hello", b"wo"] and headers is None and ids == [0, 0]
        assert origins == [0x0660D2DFF9CF41, 0x0660D2DFF9CF44]

    def test_split_keeps_user_headers_and_ids(self):
        """User headers (after the payload) and 128-bit ids come back per message."""
        hdr = b"\x02" + u32(3) + b"key" + b"\x02" + u32(2) + b"k1"
        area = _msg(b"a", id=1 << 100) + _msg(b"bb", hdr, id=5, origin=9)
        payloads, headers, ids, origins = c.split_messages(area, 2, 100)
        assert (payloads, headers, ids, origins) == ([b"a", b"bb"], [b"", hdr], [1 << 100, 5], [0, 9])

    def test_encode_messages_matches_the_hand_layout(self):
        """encode_messages writes the client's message layout."""
        assert c.encode_messages([b"a", b"bc"], [b"", b"h"], [3, 0], [7, 8]) == \
            _msg(b"a", id=3, origin=7) + _msg(b"bc", b"h", origin=8)


MALFORMED: list[tuple[int, bytes, Status]] = [
    (200, b"", Status.INVALID_FORMAT),
    (200, b"\x02", Status.INVALID_FORMAT),
    (200, b"\x02\x05ab", Status.INVALID_FORMAT),
    (200, b"\x01\x03abc", Status.INVALID_IDENTIFIER),
    (200, b"\x02\x00", Status.INVALID_IDENTIFIER),
    (200, b"\x07\x01a", Status.INVALID_IDENTIFIER),
    (200, b"\x02\x02\xff\xfe", Status.INVALID_IDENTIFIER),
    (200, S + b"!", Status.INVALID_FORMAT),
    (1, b"x", Status.INVALID_FORMAT),
    (9999, b"", Status.INVALID_COMMAND),
    (202, b"\x00", Status.INVALID_STREAM_NAME),
    (202, b"\x05ab", Status.INVALID_FORMAT),
    (302, S + u32(1) + b"\x01" + u64(0) + u64(0) + b"\x00" + b"\x00", Status.INVALID_TOPIC_NAME),
    (33, name8("a") + name8("b") + b"\x01" + b"\x02" + u32(0), Status.INVALID_BOOLEAN_VALUE),
    (33, name8("a") + name8("b") + b"\x01" + b"\x01" + u32(3) + b"\x01\x01\x01",
     Status.INVALID_FORMAT),
    (33, name8("a") + name8("b") + b"\x01" + b"\x00" + u32(5), Status.INVALID_FORMAT),
    (38, name8("u") + name8("p") + u32(99), Status.INVALID_FORMAT),
    (100, b"\x03" + N0 + S + T + b"\x00" + u32(0) + b"\x01" + u64(0) + u32(1) + b"\x00",
     Status.INVALID_FORMAT),
    (100, b"\x01" + N0 + S + T + b"\x00" + u32(0) + b"\x09" + u64(0) + u32(1) + b"\x00",
     Status.INVALID_FORMAT),
    (100, b"\x01" + N0 + S + T + b"\x02" + u32(0) + b"\x01" + u64(0) + u32(1) + b"\x00",
     Status.INVALID_FORMAT),
    (100, b"\x01" + N0 + S + T + b"\x00" + u32(0) + b"\x01" + u64(0) + u32(1) + b"\x05",
     Status.INVALID_BOOLEAN_VALUE),
    (101, u32(99) + REAL_SEND[4:], Status.INVALID_FORMAT),
    (101, REAL_SEND[:20], Status.INVALID_INDEXES_COUNT),
    (101, REAL_SEND[:-1], Status.INVALID_MESSAGES_SIZE),
    (101, u32(16) + S + T + b"\x04\x00" + u32(1), Status.INVALID_FORMAT),
    (101, u32(16) + S + T + b"\x02\x03abc" + u32(1), Status.INVALID_FORMAT),
    (101, u32(15) + S + T + b"\x02\x03abc" + u32(1), Status.INVALID_KEY_VALUE_LENGTH),
    (101, u32(13) + S + T + b"\x01\x01a" + u32(1), Status.INVALID_KEY_VALUE_LENGTH),
    (101, u32(12) + S + T + b"\x03\x00" + u32(1), Status.INVALID_KEY_VALUE_LENGTH),
    (101, u32(12) + S + T + b"\x01\x00" + u32(0), Status.INVALID_MESSAGES_COUNT),
    (121, b"\x01" + N0 + S + T + b"\x01" + u32(0) + b"\x01\x02", Status.INVALID_FORMAT),
    (42, name8("tok") + b"\x00" * 7, Status.INVALID_FORMAT),
]


class MalformedTests:
    @pytest.mark.parametrize(("code", "payload", "status"), MALFORMED)
    def test_status(self, code, payload, status):
        """A malformed payload raises IggyError with the status that answers it."""
        with pytest.raises(IggyError) as caught:
            c.decode_request(code, payload)
        assert caught.value.status == status

    @pytest.mark.parametrize(("area", "count", "status"), [
        (_msg(b"a")[:40], 1, Status.TOO_SMALL_MESSAGE),
        (_msg(b"abc")[:-1], 1, Status.INVALID_MESSAGES_SIZE),
        (_msg(b""), 1, Status.EMPTY_MESSAGE_PAYLOAD),
        (_msg(b"x" * 11), 1, Status.TOO_BIG_MESSAGE_PAYLOAD),
        (_msg(b"a") + _msg(b"b"), 1, Status.INVALID_MESSAGES_COUNT),
        (_msg(b"a", b"\x02" + u32(1) + b"k"), 1, Status.CANNOT_READ_HEADERS_PAYLOAD),
        (_msg(b"a", b"\x02" + u32(0) + b"\x02" + u32(1) + b"v"), 1, Status.CANNOT_READ_HEADERS_PAYLOAD),
        (_msg(b"a")[:56] + u64(3) + b"a", 1, Status.INVALID_RESERVED_FIELD),
    ])
    def test_split_refusals(self, area, count, status):
        """Messages that do not tile the area, lie about lengths, have no payload, too
        big a payload, malformed user headers or a non-zero reserved field are refused."""
        with pytest.raises(IggyError) as caught:
            c.split_messages(area, count, 10)
        assert caught.value.status == status

    def test_an_index_that_lies(self):
        """Index entries that disagree with the messages' own lengths are refused, in
        split_messages and in a whole SendMessages request."""
        area = _msg(b"abc") + _msg(b"de")
        assert c.split_messages(area, 2, 10, ends=(67, 133))[0] == [b"abc", b"de"]
        for ends in ((66, 133), (67, 132), (133,), (67, 67, 133)):
            with pytest.raises(IggyError) as caught:
                c.split_messages(area, len(ends), 10, ends=ends)
            assert caught.value.status in (Status.INVALID_MESSAGES_SIZE, Status.TOO_SMALL_MESSAGE)
        meta = S + T + b"\x01\x00" + u32(2)
        lying = u32(len(meta)) + meta + struct.pack("<IIQIIQ", 0, 70, 0, 0, 133, 0) + area
        cmd = c.decode_request(101, lying)
        with pytest.raises(IggyError) as caught:
            c.split_messages(cmd.messages, cmd.count, 10, ends=cmd.ends)
        assert caught.value.status == Status.TOO_SMALL_MESSAGE

    def test_skerry_errors_map_to_iggy_statuses(self):
        """Core errors become Iggy statuses; anything unexpected is Error (1)."""
        assert status_for(BadRequest("x")) == Status.INVALID_COMMAND
        assert status_for(StorageError("x")) == Status.IO_ERROR
        assert status_for(UnknownMember("x")) == Status.CONSUMER_GROUP_MEMBER_NOT_FOUND
        assert status_for(StaleGeneration("x")) == Status.CONSUMER_GROUP_MEMBER_NOT_FOUND
        assert status_for(PartitionNotOwned("x")) == Status.CONSUMER_GROUP_PARTITION_NOT_OWNED
        assert status_for(ReplicationTimeout("x")) == Status.TASK_TIMEOUT
        assert status_for(NotLeader("x")) == Status.ERROR
        assert status_for(RuntimeError("x")) == Status.ERROR


class PermissionsBlobTests:
    def test_root(self):
        """Root: ten global flags set, no stream map."""
        assert Permissions.root().encode() == ROOT_BLOB
        assert Permissions.decode(ROOT_BLOB) == Permissions.root()

    def test_streams_and_topics(self):
        """Stream and topic maps, with their "more" flags, in id order."""
        assert STREAM_PERMS.encode() == STREAM_BLOB
        assert Permissions.decode(STREAM_BLOB) == STREAM_PERMS

    @pytest.mark.parametrize("blob", [ROOT_BLOB[:5], ROOT_BLOB + b"\x00", STREAM_BLOB[:-1],
                                      bytes(10) + b"\x01" + u32(1)])
    def test_truncated_or_long(self, blob):
        """A blob that ends early or has bytes left over is InvalidFormat on the wire, and
        the access layer's own refusal for the user store."""
        with pytest.raises(IggyError) as caught:
            c.decode_permissions(blob)
        assert caught.value.status == Status.INVALID_FORMAT
        with pytest.raises(InvalidPermissions):
            Permissions.decode(blob)


class ReplyTests:
    def test_frames(self):
        """Success: status 0, length, payload. Error: status, length 0, nothing else."""
        assert c.frame_ok(b"abc") == u32(0) + u32(3) + b"abc"
        assert c.frame_ok() == u32(0) + u32(0)
        assert c.frame_error(1010) == u32(1010) + u32(0)

    def test_stream_and_details(self):
        """Stream: id u32, created_at u64, topics_count u32, size u64, messages u64, name;
        details append the topics' headers."""
        stream = c.StreamInfo(1, 2, 1, 4, 5, "s")
        topic = c.TopicInfo(0, 6, 3, 7, 2, 8, 1, 9, 10, "t")
        s_bytes = u32(1) + u64(2) + u32(1) + u64(4) + u64(5) + b"\x01s"
        t_bytes = (u32(0) + u64(6) + u32(3) + u64(7) + b"\x02" + u64(8) + b"\x01" + u64(9)
                   + u64(10) + b"\x01t")
        assert c.encode_stream(stream) == s_bytes
        assert c.encode_topic(topic) == t_bytes
        assert c.encode_stream_details(stream, [topic]) == s_bytes + t_bytes

    def test_real_get_stream_reply_layout(self):
        """The reply the real client parsed as stream 1 "s" (captured)."""
        stream = c.StreamInfo(1, 0x0660D301A1359B, 1, 0x564, 0x14, "s")
        assert c.encode_stream(stream) == H(
            "010000009b35a101d3600600010000006405000000000000140000000000000001" "73")

    def test_topic_details(self):
        """Topic details: the topic header, then 40 bytes per partition: id u32,
        created_at u64, segments u32, current offset u64, size u64, messages u64."""
        topic = c.TopicInfo(0, 6, 1, 0, 1, 0, 0, 0, 0, "t")
        part = c.PartitionInfo(0, 6, 2, 41, 4096, 42)
        p_bytes = u32(0) + u64(6) + u32(2) + u64(41) + u64(4096) + u64(42)
        assert len(p_bytes) == 40
        assert c.encode_topic_details(topic, [part]) == c.encode_topic(topic) + p_bytes

    def test_consumer_groups(self):
        """Group: id, partitions_count, members_count (u32 each), name; details append
        each member: id u32, partitions_count u32, partition ids u32..."""
        group = c.ConsumerGroupInfo(3, 4, 2, "g")
        members = [c.GroupMemberInfo(1, (0, 2)), c.GroupMemberInfo(2, (1,))]
        g_bytes = u32(3) + u32(4) + u32(2) + b"\x01g"
        assert c.encode_consumer_group(group) == g_bytes
        assert c.encode_consumer_group_details(group, members) == (
            g_bytes + u32(1) + u32(2) + u32(0) + u32(2) + u32(2) + u32(1) + u32(1))

    def test_offsets_identity_tokens(self):
        """Consumer offset: partition u32, current u64, stored u64. Identity: user id u32.
        Token info: name (u8 len), expiry u64 (0 = never). Raw token: u8 len + token."""
        assert c.encode_consumer_offset(2, 10, 7) == u32(2) + u64(10) + u64(7)
        assert c.encode_identity(5) == u32(5)
        assert c.encode_token(c.TokenInfo("ci", None)) == b"\x02ci" + u64(0)
        assert c.encode_token(c.TokenInfo("ci", 99)) == b"\x02ci" + u64(99)
        assert c.encode_raw_token("abc") == b"\x03abc"

    def test_clients(self):
        """Client: id u32, user id u32 (u32::MAX when none), transport u8 (1 = TCP),
        address (u32 len), consumer groups count u32; details append stream, topic and
        group ids (u32 each) per group."""
        info = c.ClientInfo(9, None, "1.2.3.4:5", 1)
        base = u32(9) + u32(0xFFFFFFFF) + b"\x01" + u32(9) + b"1.2.3.4:5" + u32(1)
        assert c.encode_client(info) == base
        assert c.encode_client_details(info, [c.ClientGroup(1, 2, 3)]) == base + u32(1) + u32(2) + u32(3)
        assert c.encode_client(c.ClientInfo(9, 4, "a", 0))[4:8] == u32(4)

    def test_users(self):
        """User: id u32, created_at u64, status u8, username (u8 len); details add
        has_permissions u8, then u32 length and the blob when present."""
        user = c.UserInfo(1, 2, 1, "al")
        u_bytes = u32(1) + u64(2) + b"\x01" + b"\x02al"
        assert c.encode_user(user) == u_bytes
        assert c.encode_user_details(user, None) == u_bytes + b"\x00"
        assert c.encode_user_details(user, Permissions.root()) == u_bytes + b"\x01" + u32(11) + ROOT_BLOB

    def test_stats(self):
        """Stats per the notes: pid u32, cpu f32, total cpu f32, 8 u64s, 4 u32 counts,
        messages u64, clients u32, groups u32, five u32-length strings, semver u32,
        cache entries u32 (0), threads u32, free disk u64, total disk u64."""
        stats = c.StatsInfo(1, 0.5, 1.5, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                            "h", "os", "ver", "k", "srv", 1000, 17, 18, 19)
        expected = (u32(1) + struct.pack("<ff", 0.5, 1.5) + b"".join(u64(v) for v in range(2, 10))
                    + u32(10) + u32(11) + u32(12) + u32(13) + u64(14) + u32(15) + u32(16)
                    + u32(1) + b"h" + u32(2) + b"os" + u32(3) + b"ver" + u32(1) + b"k"
                    + u32(3) + b"srv" + u32(1000) + u32(0) + u32(17) + u64(18) + u64(19))
        assert c.encode_stats(stats) == expected

    def test_cluster_metadata(self):
        """Cluster: name (u32 len), nodes u32; node: name (u32 len), ip (u32 len), tcp,
        quic, http, websocket ports (u16), role u8 (0 leader), status u8 (0 healthy)."""
        node = c.ClusterNode("n", "1.2.3.4", 8090)
        assert c.encode_cluster_metadata("c", [node]) == (
            u32(1) + b"c" + u32(1) + u32(1) + b"n" + u32(7) + b"1.2.3.4"
            + struct.pack("<HHHH", 8090, 0, 0, 0) + b"\x00\x00")

    def test_polled_prefix(self):
        """PolledMessages: partition u32, current offset u64, count u32 (the stored
        messages follow as they are on disk)."""
        assert c.encode_polled_prefix(2, 10, 3) == u32(2) + u64(10) + u32(3)
