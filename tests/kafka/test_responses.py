"""Response encoding: every golden response of kafka-wire-notes §5 re-encoded byte for byte
from its dataclass, the ApiVersions rule of §3.1, version-dependent fields, and caller
bugs (a response for another api, an unsupported version)."""

from __future__ import annotations

import pytest

from broker.kafka import codec as c
from broker.kafka.codec import RequestHeader
from broker.kafka.codec.responses import LARGE_CHUNK
from tests.kafka.test_requests import ASSIGNMENT, MSGSET_51, MSGSET_52, SUB_V3, h


def hdr(key: int, version: int, corr: int) -> RequestHeader:
    return RequestHeader(key, version, corr, "client")


RECORDS_51 = (c.Record(0, -1, b"key0", b"value-0"), c.Record(1, -1, None, b"value-1"),
              c.Record(2, -1, b"key2", b"value-2"))
TS = 0x000001A20CD403FA
RECORDS_52 = tuple(c.Record(r.offset, TS, r.key, r.value) for r in RECORDS_51)


def produce_response(throttle: int = 0) -> c.ProduceResponse:
    return c.ProduceResponse((c.ProduceTopicResponse("t1", (
        c.ProducePartitionResponse(0, 0, 0),)),), throttle)


def fetch_response(records: tuple[c.Record, ...]) -> c.FetchResponse:
    return c.FetchResponse((c.FetchTopicResponse("t1", (
        c.FetchPartitionResponse(0, 0, 3, records),)),))


# (name, request header, response, golden bytes)
GOLDEN_RESPONSES: list[tuple[str, RequestHeader, object, bytes]] = [
    ("produce v0 (5.1)", hdr(0, 0, 1), produce_response(),
     h("0000001e 00000001 00000001 0002 7431 00000001 00000000 0000 0000000000000000")),
    ("produce v1 adds the throttle (5.1)", hdr(0, 1, 1), produce_response(),
     h("00000022 00000001 00000001 0002 7431 00000001 00000000 0000 0000000000000000 00000000")),
    ("produce v2 (5.2)", hdr(0, 2, 2), produce_response(),
     h("0000002a 00000002 00000001 0002 7431 00000001 00000000 0000 0000000000000000"
       "ffffffffffffffff 00000000")),
    ("fetch v0, magic 0 (5.4)", hdr(1, 0, 2), fetch_response(RECORDS_51),
     h("0000008d 00000002 00000001 0002 7431 00000001 00000000 0000 0000000000000003 0000006b")
     + MSGSET_51),
    ("fetch v1 adds the throttle, still magic 0 (5.4)", hdr(1, 1, 2), fetch_response(RECORDS_52),
     h("00000091 00000002 00000000 00000001 0002 7431 00000001 00000000 0000 0000000000000003"
       "0000006b") + MSGSET_51),
    ("fetch v3, magic 1 (5.4)", hdr(1, 3, 3), fetch_response(RECORDS_52),
     h("000000a9 00000003 00000000 00000001 0002 7431 00000001 00000000 0000 0000000000000003"
       "00000083") + MSGSET_52),
    ("find coordinator v0 (5.5)", hdr(10, 0, 2), c.FindCoordinatorResponse(0, 0, "127.0.0.1", 19211),
     h("00000019 00000002 0000 00000000 0009 3132372e302e302e31 00004b0b")),
    ("join group v0, the leader's (5.5)", hdr(11, 0, 1),
     c.JoinGroupResponse(0, 1, "range", "member-1", "member-1",
                         (c.JoinGroupMember("member-1", h(SUB_V3)),)),
     h("0000004f 00000001 0000 00000001 0005 72616e6765 0008 6d656d6265722d31"
       f"0008 6d656d6265722d31 00000001 0008 6d656d6265722d31 00000018 {SUB_V3}")),
    ("sync group v0 (5.5)", hdr(14, 0, 4), c.SyncGroupResponse(0, h(ASSIGNMENT)),
     h(f"00000020 00000004 0000 00000016 {ASSIGNMENT}")),
    ("heartbeat v0 (5.5)", hdr(12, 0, 5), c.HeartbeatResponse(0), h("00000006 00000005 0000")),
    ("offset fetch v1, nothing committed (5.5)", hdr(9, 1, 1),
     c.OffsetFetchResponse((c.OffsetFetchTopicResponse("t1", (
         c.OffsetFetchPartitionResponse(0, -1),)),)),
     h("00000020 00000001 00000001 0002 7431 00000001 00000000 ffffffffffffffff 0000 0000")),
    ("list offsets v0 (5.5)", hdr(2, 0, 2),
     c.ListOffsetsResponse((c.ListOffsetsTopicResponse("t1", (
         c.ListOffsetsPartitionResponse(0, 0, offset=0),)),)),
     h("00000022 00000002 00000001 0002 7431 00000001 00000000 0000 00000001 0000000000000000")),
    ("list offsets v1 (5.5; header ours)", hdr(2, 1, 4),
     c.ListOffsetsResponse((c.ListOffsetsTopicResponse("t1", (
         c.ListOffsetsPartitionResponse(0, 0, offset=0),)),)),
     h("00000026 00000004 00000001 0002 7431 00000001 00000000 0000 ffffffffffffffff"
       "0000000000000000")),
    ("offset commit v2 (5.5)", hdr(8, 2, 2),
     c.OffsetCommitResponse((c.OffsetCommitTopicResponse("t1", (
         c.OffsetCommitPartitionResponse(0, 0),)),)),
     h("00000016 00000002 00000001 0002 7431 00000001 00000000 0000")),
    ("leave group v0 (5.5)", hdr(13, 0, 8), c.LeaveGroupResponse(0), h("00000006 00000008 0000")),
]

BROKERS = (c.MetadataBroker(0, "h", 9092),)
TOPICS = (c.MetadataTopic(0, "t1", (c.MetadataPartition(0, 0, 0, (0,), (0,)),)),
          c.MetadataTopic(3, "nope", ()))
META_PARTITION = "0000 00000000 00000000 00000001 00000000 00000001 00000000"
# Built from the §3 layouts (the notes give no golden bytes for these); the bytes start
# after the size prefix, which the test checks by length.
BUILT_RESPONSES: list[tuple[str, RequestHeader, object, bytes]] = [
    ("metadata v0", hdr(3, 0, 7), c.MetadataResponse(BROKERS, TOPICS, 0, "skerry"),
     h(f"00000007 00000001 00000000 0001 68 00002384 00000002 0000 0002 7431 00000001"
       f"{META_PARTITION} 0003 0004 6e6f7065 00000000")),
    ("metadata v1: rack, controller, is_internal", hdr(3, 1, 7),
     c.MetadataResponse(BROKERS, TOPICS, 0, "skerry"),
     h(f"00000007 00000001 00000000 0001 68 00002384 ffff 00000000 00000002 0000 0002 7431"
       f"00 00000001 {META_PARTITION} 0003 0004 6e6f7065 00 00000000")),
    ("metadata v2: cluster id", hdr(3, 2, 7), c.MetadataResponse(BROKERS, TOPICS, 0, "skerry"),
     h(f"00000007 00000001 00000000 0001 68 00002384 ffff 0006 736b65727279 00000000"
       f"00000002 0000 0002 7431 00 00000001 {META_PARTITION} 0003 0004 6e6f7065 00 00000000")),
    ("list offsets v0, explicit old-style offsets; none for -1", hdr(2, 0, 1),
     c.ListOffsetsResponse((c.ListOffsetsTopicResponse("t1", (
         c.ListOffsetsPartitionResponse(0, 0, old_style_offsets=(7, 3)),
         c.ListOffsetsPartitionResponse(1, 3))),)),
     h("00000001 00000001 0002 7431 00000002 00000000 0000 00000002 0000000000000007"
       "0000000000000003 00000001 0003 00000000")),
    ("offset commit v0 (same layout)", hdr(8, 0, 1),
     c.OffsetCommitResponse((c.OffsetCommitTopicResponse("t1", (
         c.OffsetCommitPartitionResponse(0, 22),)),)),
     h("00000001 00000001 0002 7431 00000001 00000000 0016")),
    ("fetch v2: magic 1, an empty partition", hdr(1, 2, 1),
     c.FetchResponse((c.FetchTopicResponse("t1", (
         c.FetchPartitionResponse(0, 1, 0),)),), throttle_time_ms=5),
     h("00000001 00000005 00000001 0002 7431 00000001 00000000 0001 0000000000000000"
       "00000000")),
    ("describe groups v0", hdr(15, 0, 1),
     c.DescribeGroupsResponse((c.DescribedGroup(0, "g1", "Stable", "consumer", "range", (
         c.DescribedGroupMember("m", "kp", "/127.0.0.1", b"\x01", b""),)),)),
     h("00000001 00000001 0000 0002 6731 0006 537461626c65 0008 636f6e73756d6572"
       "0005 72616e6765 00000001 0001 6d 0002 6b70 000a 2f3132372e302e302e31 00000001 01"
       "00000000")),
    ("list groups v0", hdr(16, 0, 1),
     c.ListGroupsResponse(0, (c.ListedGroup("g1", "consumer"),)),
     h("00000001 0000 00000001 0002 6731 0008 636f6e73756d6572")),
]

# 0:0-2 1:0-3 2:0-1 3:0-2 8:0-2 9:0-1 10:0 11:0-1 12:0 13:0 14:0 15:0 16:0 18:0 (§1.1, no 17)
API_LIST = ("0000000f 0000 0000 0002 0001 0000 0003 0002 0000 0001 0003 0000 0002"
            "0008 0000 0002 0009 0000 0001 000a 0000 0000 000b 0000 0001 000c 0000 0000"
            "000d 0000 0000 000e 0000 0000 000f 0000 0000 0010 0000 0000 0011 0000 0000"
            "0012 0000 0000")
LEGACY_TABLE = {0: (0, 2), 1: (0, 3), 2: (0, 1), 3: (0, 2), 8: (0, 2), 9: (0, 1), 10: (0, 0),
                11: (0, 1), 12: (0, 0), 13: (0, 0), 14: (0, 0), 15: (0, 0), 16: (0, 0),
                17: (0, 0), 18: (0, 0)}
"""The advertised table of §1.1, whose v0 answer is ``API_LIST``."""


class GoldenResponseTests:
    @pytest.mark.parametrize("name, header, response, golden", GOLDEN_RESPONSES,
                             ids=[g[0] for g in GOLDEN_RESPONSES])
    def test_golden(self, name: str, header: RequestHeader, response: object,
                    golden: bytes) -> None:
        """The dataclass encodes to exactly the bytes all three clients accepted."""
        assert int.from_bytes(golden[:4], "big") == len(golden) - 4
        assert c.encode_response(header, response) == golden  # type: ignore[arg-type]

    @pytest.mark.parametrize("name, header, response, golden", BUILT_RESPONSES,
                             ids=[b[0] for b in BUILT_RESPONSES])
    def test_built(self, name: str, header: RequestHeader, response: object,
                   golden: bytes) -> None:
        """Versions and APIs without a golden follow the §3 layouts field by field."""
        encoded = c.encode_response(header, response)  # type: ignore[arg-type]
        assert encoded == len(golden).to_bytes(4, "big") + golden


class ApiVersionsTests:
    def test_v0(self) -> None:
        """ApiVersions v0 is answered with error 0 and exactly the advertised list (§1.1's
        here, 17 included: SaslHandshake v0), in the v0 layout."""
        request = c.parse_request(h("0012 0000 00000001 0011 6b702d302e31302e312d70726f64756365"))
        response = c.api_versions_response(request, LEGACY_TABLE)  # type: ignore[arg-type]
        assert response.error_code == c.ErrorCode.NONE
        assert c.encode_response(request.header, response) == h(  # type: ignore[union-attr]
            f"00000064 00000001 0000 {API_LIST}")

    @pytest.mark.parametrize("version", [4, 5, 7, 300])
    def test_higher_versions(self, version: int) -> None:
        """An ApiVersions version above the codec's (v3) gets error 35 UNSUPPORTED_VERSION
        and the list, in the v0 layout (response header v0 too), so the client retries
        with the highest version the list offers; its body is not read."""
        body = h(f"0012 {version:04x} 00000009 0002 6b70 00 01 01 00 ff")
        request = c.parse_request(body)
        assert isinstance(request, c.ApiVersionsRequest) and not request.supported
        response = c.api_versions_response(request, LEGACY_TABLE)
        assert response.error_code == c.ErrorCode.UNSUPPORTED_VERSION == 35
        assert c.encode_response(request.header, response) == h(f"00000064 00000009 0023 {API_LIST}")

    def test_librdkafka_v3_golden(self) -> None:
        """The captured librdkafka v3 request (§3.1) is answered directly in the v3 layout:
        response header v0 (no tagged fields after the correlation id, KIP-511), error 0,
        a compact array of (key, min, max, tagged fields), the throttle, tagged fields."""
        frame = h("00000049 0012 0003 00000001 0010 636b2d302e392e302d70726f64756365 00"
                  "17 636f6e666c75656e742d6b61666b612d707974686f6e"
                  "16 322e31362e312d72646b61666b612d322e31362e30 00")
        request = c.parse_request(frame[4:])
        response = c.api_versions_response(request, {0: (0, 2), 18: (0, 3)})  # type: ignore[arg-type]
        assert response.error_code == 0
        assert c.encode_response(request.header, response) == h(  # type: ignore[union-attr]
            "0000001a 00000001 0000 03 0000 0000 0002 00 0012 0000 0003 00 00000000 00")

    @pytest.mark.parametrize("version", [1, 2])
    def test_v1_v2_add_the_throttle(self, version: int) -> None:
        """v1 and v2 are v0's layout plus the throttle time (not flexible)."""
        request = c.parse_request(h(f"0012 {version:04x} 00000001 ffff"))
        assert isinstance(request, c.ApiVersionsRequest) and request.supported
        response = c.api_versions_response(request, {18: (0, 3)})
        assert c.encode_response(request.header, response) == h(
            "00000014 00000001 0000 00000001 0012 0000 0003 00000000")

    def test_list_matches_supported_versions(self) -> None:
        """Without an advertised table the list is the codec's: every version it parses."""
        response = c.api_versions_response(c.ApiVersionsRequest(hdr(18, 0, 1)))
        assert {a.api_key: (a.min_version, a.max_version) for a in response.api_keys} == {
            int(k): v for k, v in c.SUPPORTED_VERSIONS.items()}
        assert c.SUPPORTED_VERSIONS[c.ApiKey.PRODUCE] == (0, 9)


class EncoderMisuseTests:
    def test_wrong_api(self) -> None:
        """A response for another api key is a caller bug: ValueError."""
        with pytest.raises(ValueError, match="does not answer api key 1"):
            c.encode_response(hdr(1, 0, 1), c.HeartbeatResponse(0))

    def test_unsupported_version(self) -> None:
        """Encoding for a version outside the table is a caller bug: ValueError."""
        with pytest.raises(ValueError, match="PRODUCE v10"):
            c.encode_response(hdr(0, 10, 1), produce_response())

    def test_compressed_record_in_fetch(self) -> None:
        """Fetch replies are served uncompressed; a record with codec bits is refused."""
        with pytest.raises(ValueError, match="codec bits"):
            c.encode_response(hdr(1, 0, 1), fetch_response((c.Record(0, -1, None, b"", 1),)))


@pytest.mark.parametrize("name,header,response,golden", GOLDEN_RESPONSES,
                         ids=[g[0] for g in GOLDEN_RESPONSES])
def test_chunks_join_to_the_golden_frame(name: str, header: RequestHeader, response: object,
                                         golden: bytes) -> None:
    assert b"".join(c.encode_response_chunks(header, response)) == golden  # type: ignore[arg-type]


def test_a_fetch_frame_keeps_each_large_record_set_as_its_own_chunk() -> None:
    """The record sets the connection sends without copying: every set of LARGE_CHUNK
    bytes or more is one chunk, the same object, with the small fields joined between."""
    big = [bytes([i]) * (LARGE_CHUNK + i) for i in range(3)]
    response = c.FetchResponse((c.FetchTopicResponse("t1", tuple(
        c.FetchPartitionResponse(i, 0, 9, big[i]) for i in range(3))),), 0)
    chunks = c.encode_response_chunks(hdr(1, 3, 5), response)
    assert b"".join(chunks) == c.encode_response(hdr(1, 3, 5), response)
    assert [i for i, chunk in enumerate(chunks) if any(chunk is b for b in big)] == [1, 3, 5]
    assert len(chunks) == 6  # head, set, fields, set, fields, set
