"""Request parsing: every golden request of kafka-wire-notes §5 (and §3.1) parsed into the
expected dataclass, the versions without a golden built from the §3 layouts, and the
results that are not requests (unsupported api/version, malformed bodies)."""

from __future__ import annotations

import pytest

from broker.kafka import codec as c
from broker.kafka.codec import RequestHeader


def h(text: str) -> bytes:
    """Hex with spaces and newlines for reading, as the notes print it."""
    return bytes.fromhex("".join(text.split()))


def s16(text: str) -> str:
    """A Kafka string (int16 length + UTF-8) as hex, for the notes' ``<"client">``."""
    raw = text.encode()
    return f"{len(raw):04x}{raw.hex()}"


def hdr(key: int, version: int, corr: int, client: str | None) -> RequestHeader:
    return RequestHeader(key, version, corr, client)


MSGSET_51 = h("""
  0000000000000000 00000019 26d052a0 00 00 00000004 6b657930 00000007 76616c75652d30
  0000000000000001 00000015 98dda4ae 00 00 ffffffff 00000007 76616c75652d31
  0000000000000002 00000019 24e5ad13 00 00 00000004 6b657932 00000007 76616c75652d32
""")
MSGSET_52 = h("""
  0000000000000000 00000021 3870bc0d 01 00 000001a20cd403fa 00000004 6b657930 00000007 76616c75652d30
  0000000000000001 0000001d ccf99c7a 01 00 000001a20cd403fa ffffffff 00000007 76616c75652d31
  0000000000000002 00000021 3a4543be 01 00 000001a20cd403fa 00000004 6b657932 00000007 76616c75652d32
""")
SUB_V3 = "0003 00000001 0002 7431 00000000 00000000 ffffffff 0000"  # 24 bytes (§5.5)
SUB_V0 = "0000 00000001 0002 7431 00000000"  # 14 bytes (§5.5, kafka-python)
ASSIGNMENT = "0000 00000001 0002 7431 00000001 00000000 00000000"  # 22 bytes (§3.10)
CK_GROUP = s16("ck-0.9.0-group")
CK_ASSIGNGROUP = s16("ck-0.9.0-assigngroup")


def produce(version: int, corr: int, client: str, records: bytes) -> c.ProduceRequest:
    return c.ProduceRequest(hdr(0, version, corr, client), -1, 30000, (
        c.ProduceTopic("t1", (c.ProducePartition(0, records),)),))


def fetch(version: int, corr: int, client: str, max_bytes: int = 0x7FFFFFFF,
          max_wait: int = 200) -> c.FetchRequest:
    return c.FetchRequest(hdr(1, version, corr, client), -1, max_wait, 1, max_bytes, (
        c.FetchTopic("t1", (c.FetchPartition(0, 0, 0x100000),)),))


# (name, whole frame with its size prefix, expected request). All from §5 unless noted.
GOLDEN_REQUESTS: list[tuple[str, bytes, object]] = [
    ("produce v0 kafka-python 0.8.2 (5.1)",
     h("0000009f 0000 0000 00000001 0010 6b702d302e382e322d70726f64756365 ffff 00007530"
       "00000001 0002 7431 00000001 00000000 0000006b") + MSGSET_51,
     produce(0, 1, "kp-0.8.2-produce", MSGSET_51)),
    ("produce v0 confluent-kafka 0.8.2 (5.1)",
     h("0000009f 0000 0000 00000001 0010 636b2d302e382e322d70726f64756365 ffff 00007530"
       "00000001 0002 7431 00000001 00000000 0000006b") + MSGSET_51,
     produce(0, 1, "ck-0.8.2-produce", MSGSET_51)),
    ("produce v1, the same body (5.1)",
     h("0000009f 0000 0001 00000001 0010 6b702d302e382e322d70726f64756365 ffff 00007530"
       "00000001 0002 7431 00000001 00000000 0000006b") + MSGSET_51,
     produce(1, 1, "kp-0.8.2-produce", MSGSET_51)),
    ("produce v2 kafka-python 0.10.1, magic 1 (5.2)",
     h("000000b8 0000 0002 00000002 0011 6b702d302e31302e312d70726f64756365 ffff 00007530"
       "00000001 0002 7431 00000001 00000000 00000083") + MSGSET_52,
     produce(2, 2, "kp-0.10.1-produce", MSGSET_52)),
    ("fetch v0 kafka-python 0.8.2 (5.3)",
     h("00000041 0001 0000 00000002 000f 6b702d302e382e322d61737369676e ffffffff 000000c8"
       "00000001 00000001 0002 7431 00000001 00000000 0000000000000000 00100000"),
     fetch(0, 2, "kp-0.8.2-assign")),
    ("fetch v0 confluent-kafka 0.8.2 (5.3)",
     h("00000041 0001 0000 00000003 000f 636b2d302e382e322d61737369676e ffffffff 000000c8"
       "00000001 00000001 0002 7431 00000001 00000000 0000000000000000 00100000"),
     fetch(0, 3, "ck-0.8.2-assign")),
    ("fetch v1, kcat's 500 ms wait (5.3)",
     h("00000041 0001 0001 00000002 000f 6b702d302e382e322d61737369676e ffffffff 000001f4"
       "00000001 00000001 0002 7431 00000001 00000000 0000000000000000 00100000"),
     fetch(1, 2, "kp-0.8.2-assign", max_wait=500)),
    ("fetch v2 (never seen; v1's layout, §1.1)",
     h("00000041 0001 0002 00000002 000f 6b702d302e382e322d61737369676e ffffffff 000000c8"
       "00000001 00000001 0002 7431 00000001 00000000 0000000000000000 00100000"),
     fetch(2, 2, "kp-0.8.2-assign")),
    ("fetch v3 kafka-python 0.10.1 (5.3)",
     h("00000046 0001 0003 00000003 0010 6b702d302e31302e312d61737369676e ffffffff 000000c8"
       "00000001 03200000 00000001 0002 7431 00000001 00000000 0000000000000000 00100000"),
     fetch(3, 3, "kp-0.10.1-assign", max_bytes=50 * 1024 * 1024)),
    ("find coordinator v0 (5.5)",
     h(f"00000028 000a 0000 00000002 {CK_ASSIGNGROUP} 0008 672d61737369676e"),
     c.FindCoordinatorRequest(hdr(10, 0, 2, "ck-0.9.0-assigngroup"), "g-assign")),
    # The notes print this one without the empty member_id (`0000` after the session
    # timeout); its size 0x7b (123) and the v1 golden both say it is there.
    ("join group v0 (5.5)",
     h(f"0000007b 000b 0000 00000002 {CK_GROUP} 0002 6731 00002710 0000"
       f"0008 636f6e73756d6572 00000002 0005 72616e6765 00000018 {SUB_V3}"
       f"000a 726f756e64726f62696e 00000018 {SUB_V3}"),
     c.JoinGroupRequest(hdr(11, 0, 2, "ck-0.9.0-group"), "g1", 10000, 10000, "", "consumer", (
         c.JoinGroupProtocol("range", h(SUB_V3)), c.JoinGroupProtocol("roundrobin", h(SUB_V3))))),
    # §5.5 prints only the body; the header here (correlation 3, "kp-0.10.1-group") is ours.
    ("join group v1 kafka-python (5.5, body)",
     h(f"0000006c 000b 0001 00000003 {s16('kp-0.10.1-group')} 0002 6731 00002710 000493e0 0000"
       f"0008 636f6e73756d6572 00000002 0005 72616e6765 0000000e {SUB_V0}"
       f"000a 726f756e64726f62696e 0000000e {SUB_V0}"),
     c.JoinGroupRequest(hdr(11, 1, 3, "kp-0.10.1-group"), "g1", 10000, 300000, "", "consumer", (
         c.JoinGroupProtocol("range", h(SUB_V0)), c.JoinGroupProtocol("roundrobin", h(SUB_V0))))),
    ("sync group v0, the leader's (5.5)",
     h(f"00000052 000e 0000 00000004 {CK_GROUP} 0002 6731 00000001 0008 6d656d6265722d31"
       f"00000001 0008 6d656d6265722d31 00000016 {ASSIGNMENT}"),
     c.SyncGroupRequest(hdr(14, 0, 4, "ck-0.9.0-group"), "g1", 1, "member-1", (
         c.SyncGroupAssignment("member-1", h(ASSIGNMENT)),))),
    ("heartbeat v0 (5.5)",
     h(f"0000002a 000c 0000 00000005 {CK_GROUP} 0002 6731 00000001 0008 6d656d6265722d31"),
     c.HeartbeatRequest(hdr(12, 0, 5, "ck-0.9.0-group"), "g1", 1, "member-1")),
    ("offset fetch v1 (5.5)",
     h(f"00000038 0009 0001 00000001 {CK_ASSIGNGROUP} 0008 672d61737369676e 00000001 0002 7431"
       "00000001 00000000"),
     c.OffsetFetchRequest(hdr(9, 1, 1, "ck-0.9.0-assigngroup"), "g-assign", (
         c.OffsetFetchTopic("t1", (0,)),))),
    ("list offsets v0, earliest (5.5)",
     h(f"0000003e 0002 0000 00000002 {CK_ASSIGNGROUP} ffffffff 00000001 0002 7431 00000001"
       "00000000 fffffffffffffffe 00000001"),
     c.ListOffsetsRequest(hdr(2, 0, 2, "ck-0.9.0-assigngroup"), -1, (
         c.ListOffsetsTopic("t1", (c.ListOffsetsPartition(0, -2, 1),)),))),
    # §5.5 prints only the body; the header (correlation 4, "kp-0.10.1-assign") is ours.
    ("list offsets v1 kafka-python, earliest (5.5, body)",
     h(f"00000036 0002 0001 00000004 {s16('kp-0.10.1-assign')} ffffffff 00000001 0002 7431"
       "00000001 00000000 fffffffffffffffe"),
     c.ListOffsetsRequest(hdr(2, 1, 4, "kp-0.10.1-assign"), -1, (
         c.ListOffsetsTopic("t1", (c.ListOffsetsPartition(0, -2, 1),)),))),
    ("offset commit v2, a simple commit (5.5)",
     h(f"00000050 0008 0002 00000002 {CK_ASSIGNGROUP} 0008 672d61737369676e ffffffff 0000"
       "ffffffffffffffff 00000001 0002 7431 00000001 00000000 0000000000000003 0000"),
     c.OffsetCommitRequest(hdr(8, 2, 2, "ck-0.9.0-assigngroup"), "g-assign", -1, "", -1, (
         c.OffsetCommitTopic("t1", (c.OffsetCommitPartition(0, 3, -1, ""),)),))),
    ("offset commit v1 kafka-python 0.8.2 with metadata (5.5)",
     h(f"00000054 0008 0001 00000002 {CK_ASSIGNGROUP} 0008 672d61737369676e ffffffff 0000"
       "00000001 0002 7431 00000001 00000000 0000000000000003 ffffffffffffffff 0004 6d642d78"),
     c.OffsetCommitRequest(hdr(8, 1, 2, "ck-0.9.0-assigngroup"), "g-assign", -1, "", -1, (
         c.OffsetCommitTopic("t1", (c.OffsetCommitPartition(0, 3, -1, "md-x"),)),))),
    ("leave group v0 (5.5)",
     h(f"00000026 000d 0000 00000008 {CK_GROUP} 0002 6731 0008 6d656d6265722d31"),
     c.LeaveGroupRequest(hdr(13, 0, 8, "ck-0.9.0-group"), "g1", "member-1")),
    ("api versions v0 kafka-python (5.5)",
     h("0000001b 0012 0000 00000001 0011 6b702d302e31302e312d70726f64756365"),
     c.ApiVersionsRequest(hdr(18, 0, 1, "kp-0.10.1-produce"))),
    ("api versions v3 librdkafka, flexible header (3.1)",
     h("00000049 0012 0003 00000001 0010 636b2d302e392e302d70726f64756365 00"
       "17 636f6e666c75656e742d6b61666b612d707974686f6e 16 322e31362e312d72646b61666b612d322e31362e30 00"),
     c.ApiVersionsRequest(hdr(18, 3, 1, "ck-0.9.0-produce"), "confluent-kafka-python",
                          "2.16.1-rdkafka-2.16.0")),
]

# Versions with no golden in the notes, built field by field from the §3 layouts.
KP = s16("kp")
BUILT_REQUESTS: list[tuple[str, bytes, object]] = [
    ("metadata v0, one topic", h(f"0003 0000 00000007 {KP} 00000001 0002 7431"),
     c.MetadataRequest(hdr(3, 0, 7, "kp"), ("t1",))),
    ("metadata v0, empty = all topics", h(f"0003 0000 00000007 {KP} 00000000"),
     c.MetadataRequest(hdr(3, 0, 7, "kp"), ())),
    ("metadata v1, null = all topics", h(f"0003 0001 00000007 {KP} ffffffff"),
     c.MetadataRequest(hdr(3, 1, 7, "kp"), None)),
    ("metadata v2, empty = no topics", h(f"0003 0002 00000007 {KP} 00000000"),
     c.MetadataRequest(hdr(3, 2, 7, "kp"), ())),
    ("offset commit v0", h(f"0008 0000 00000001 {KP} 0002 6731 00000001 0002 7431 00000001"
                           "00000002 0000000000000005 ffff"),
     c.OffsetCommitRequest(hdr(8, 0, 1, "kp"), "g1", -1, "", -1, (
         c.OffsetCommitTopic("t1", (c.OffsetCommitPartition(2, 5, -1, None),)),))),
    ("offset commit v2, group-managed", h(f"0008 0002 00000001 {KP} 0002 6731 00000003"
                                          "0008 6d656d6265722d31 0000000000002710 00000000"),
     c.OffsetCommitRequest(hdr(8, 2, 1, "kp"), "g1", 3, "member-1", 10000, ())),
    ("offset fetch v0", h(f"0009 0000 00000001 {KP} 0002 6731 00000001 0002 7431 00000002"
                          "00000000 00000001"),
     c.OffsetFetchRequest(hdr(9, 0, 1, "kp"), "g1", (c.OffsetFetchTopic("t1", (0, 1)),))),
    ("describe groups v0", h(f"000f 0000 00000001 {KP} 00000002 0002 6731 0002 6732"),
     c.DescribeGroupsRequest(hdr(15, 0, 1, "kp"), ("g1", "g2"))),
    ("list groups v0", h(f"0010 0000 00000001 {KP}"), c.ListGroupsRequest(hdr(16, 0, 1, "kp"))),
    ("null client id", h("0012 0000 00000001 ffff"), c.ApiVersionsRequest(hdr(18, 0, 1, None))),
]


class GoldenRequestTests:
    @pytest.mark.parametrize("name, frame, expected", GOLDEN_REQUESTS,
                             ids=[g[0] for g in GOLDEN_REQUESTS])
    def test_golden(self, name: str, frame: bytes, expected: object) -> None:
        """Each captured request has a size prefix that matches, and parses into exactly
        the dataclass the notes describe."""
        assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
        assert c.parse_request(frame[4:]) == expected

    @pytest.mark.parametrize("name, body, expected", BUILT_REQUESTS,
                             ids=[b[0] for b in BUILT_REQUESTS])
    def test_built(self, name: str, body: bytes, expected: object) -> None:
        """Versions the clients did not send in the captures parse by the §3 layouts."""
        assert c.parse_request(body) == expected


class RequestSemanticsTests:
    def test_metadata_all_topics(self) -> None:
        """v0's empty array and v1+'s null both mean all topics; v1+'s empty means none."""
        table = [(0, (), True), (0, ("t1",), False), (1, None, True), (1, (), False),
                 (2, None, True), (2, ("t1",), False)]
        for version, topics, expected in table:
            req = c.MetadataRequest(hdr(3, version, 1, None), topics)
            assert req.all_topics is expected, (version, topics)

    def test_api_versions_supported(self) -> None:
        """ApiVersions v0-v3 are read and answered normally; v4 and above are flagged for
        the error-35 reply, whatever their body."""
        for version, body, expected in [(0, "", True), (1, "", True), (2, "", True),
                                        (3, "00 02 6b 02 31 00", True),
                                        (4, "00 6a756e6b", False), (100, "00 6a756e6b", False)]:
            result = c.parse_request(h(f"0012 {version:04x} 00000001 {KP} {body}"))
            assert isinstance(result, c.ApiVersionsRequest)
            assert result.supported is expected


class UnsupportedRequestTests:
    @pytest.mark.parametrize("key, version", [
        *((int(k), high + 1) for k, (_, high) in c.SUPPORTED_VERSIONS.items()
          if k != c.ApiKey.API_VERSIONS),
        (4, 0), (5, 0), (6, 0), (7, 0), (1000, 0), (-1, 0), (0, -1), (18, -1),
    ])
    def test_outside_the_table(self, key: int, version: int) -> None:
        """An api key or version outside the codec's tables (ApiVersions above its top
        excepted) is an ``UnsupportedRequest`` carrying the header, whatever the body."""
        body = h(f"{key & 0xFFFF:04x} {version & 0xFFFF:04x} 0000002a {KP}") + b"\x00\x01"
        assert c.parse_request(body) == c.UnsupportedRequest(hdr(key, version, 42, "kp"))


class MalformedRequestTests:
    @pytest.mark.parametrize("name, frame, expected", GOLDEN_REQUESTS,
                             ids=[g[0] for g in GOLDEN_REQUESTS])
    def test_every_truncation(self, name: str, frame: bytes, expected: object) -> None:
        """Every proper prefix of a golden body is a ``MalformedRequest``."""
        body = frame[4:]
        header_len = 10 + len(expected.header.client_id or "")  # type: ignore[attr-defined]
        for n in range(len(body)):
            result = c.parse_request(body[:n])
            assert isinstance(result, c.MalformedRequest), (n, result)
            assert (result.header is None) == (n < header_len), n

    @pytest.mark.parametrize("name, frame, expected", GOLDEN_REQUESTS,
                             ids=[g[0] for g in GOLDEN_REQUESTS])
    def test_trailing_bytes(self, name: str, frame: bytes, expected: object) -> None:
        """Bytes after a complete body are malformed, not ignored."""
        result = c.parse_request(frame[4:] + b"\x00")
        assert isinstance(result, c.MalformedRequest)
        assert "after the end" in result.reason

    @pytest.mark.parametrize("body, words", [
        (h(f"0003 0000 00000001 {KP} ffffffff"), "null where an array is required"),
        (h(f"0003 0001 00000001 {KP} fffffffe"), "array count -2"),
        (h(f"0003 0000 00000001 {KP} 7fffffff"), "cannot fit"),
        (h(f"0003 0000 00000001 {KP} 00000001 ffff"), "null where a string is required"),
        (h(f"0003 0000 00000001 {KP} 00000001 0002 ff fe"), "not UTF-8"),
        (h(f"000a 0000 00000001 {KP} fffe"), "string length -2"),
        (h(f"000b 0000 00000001 {KP} 0002 6731 00002710 0000 0008 636f6e73756d6572 00000001"
           "0005 72616e6765 ffffffff"), "null where bytes are required"),
        (h("0003 0000 00000001 0005 6b70"), "client_id"),
        (h("0003"), "api_version"),
    ])
    def test_bad_fields(self, body: bytes, words: str) -> None:
        """Bad lengths, nulls where Kafka has none, bad UTF-8 and lying counts are
        malformed, with a reason that names the problem."""
        result = c.parse_request(body)
        assert isinstance(result, c.MalformedRequest)
        assert words in result.reason, result.reason
