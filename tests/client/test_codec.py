"""The client codec, sans I/O: request lines, reply lines and payloads as input -> expected
tables, and its rules checked against the broker's own (names, plain keys and values, the
key hash), so the client never sends what the broker refuses."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client import codec
from broker.client.codec import (
    BrokerError,
    GenerationMismatchError,
    Message,
    ProtocolViolation,
    Reply,
    parse_reply,
)
from broker.core import fnv1a_32 as broker_fnv1a_32
from broker.errors import BadRequest
from broker.v1 import codec as server


class RequestTests:

    def test_request_lines(self) -> None:
        """A request is the four-field envelope with its line feed; bytes args stay bytes."""
        assert codec.encode_request(1, "PING") == b"V1|1|PING|\n"
        assert codec.encode_request("a7", "PRODUCE", "t k:v acks=all") == \
            b"V1|a7|PRODUCE|t k:v acks=all\n"
        assert codec.encode_request(3, "PRODUCE", b"t k:\xff") == b"V1|3|PRODUCE|t k:\xff\n"

    def test_requests_parse_on_the_broker(self) -> None:
        """What the client encodes, the broker's codec reads as the command meant."""
        parsed = server.Codec().parse_command(
            codec.encode_request(9, "CONSUME", "orders 2 5 max=3 wait_ms=100").rstrip(b"\n"))
        assert parsed is not None and type(parsed).__name__ == "Consume"


class ReplyTests:

    @pytest.mark.parametrize(("line", "ok", "code", "payload", "cid"), [
        (b"V1|1|OK", True, None, "", "1"),
        (b"V1|1|OK|partition=0 offset=4 hw=4", True, None, "partition=0 offset=4 hw=4", "1"),
        (b"V1|x|OK|messages= hw=-1\r", True, None, "messages= hw=-1", "x"),
        (b"V1|2|ERR|NOT_LEADER|partition is a follower", False, "NOT_LEADER",
         "partition is a follower", "2"),
        (b"V1|0|ERR|BAD_REQUEST|line too long", False, "BAD_REQUEST", "line too long", "0"),
    ])
    def test_reply_lines(self, line: bytes, ok: bool, code: str | None, payload: str,
                         cid: str) -> None:
        """OK and ERR lines split into their parts; one trailing CR is dropped."""
        assert parse_reply(line) == Reply(ok, code, payload, cid)

    @pytest.mark.parametrize("line", [b"", b"V2|1|OK", b"V1|1", b"V1|1|MAYBE|x", b"V1|1|ERR",
                                      b"HTTP/1.1 400 Bad Request"])
    def test_not_a_reply(self, line: bytes) -> None:
        """Anything else is a protocol violation."""
        with pytest.raises(ProtocolViolation):
            parse_reply(line)

    def test_payload_fields_and_lists(self) -> None:
        """Fields read to the next space; lists keep their items; missing fields raise."""
        reply = Reply(True, None, "topic=t partitions=3 hw=[-1 4 0] isr=[] ok=[true false]")
        assert reply.field("topic") == "t" and reply.number("partitions") == 3
        assert reply.ints("hw") == [-1, 4, 0] and reply.items("isr") == []
        assert reply.bools("ok") == [True, False] and reply.has("hw") and not reply.has("h")
        assert reply.fields()["hw"] == "[-1 4 0]"
        with pytest.raises(ProtocolViolation):
            reply.field("missing")
        with pytest.raises(ProtocolViolation):
            Reply(True, None, "n=x").number("n")

    @pytest.mark.parametrize(("payload", "b64", "detail", "expected"), [
        ("messages=0:created,1:a:b hw=1", False, False,
         [Message(4, 0, None, b"", b"created"), Message(4, 1, None, b"", b"a:b")]),
        ("messages=0:" + base64.b64encode(b"a, b").decode() + " hw=0", True, False,
         [Message(4, 0, None, b"", b"a, b")]),
        ("messages=0:1700000000123:user1:created hw=0", False, True,
         [Message(4, 0, 1700000000123, b"user1", b"created")]),
        ("messages=4:7:azE=:/w==,5:8::aGk= hw=5", True, True,
         [Message(4, 4, 7, b"k1", b"\xff"), Message(4, 5, 8, b"", b"hi")]),
        ("messages= hw=-1", True, True, []),
    ])
    def test_messages(self, payload: str, b64: bool, detail: bool,
                      expected: list[Message]) -> None:
        """Every form of ``messages=``: plain, base64, detail, both, empty."""
        assert codec.parse_messages(Reply(True, None, payload), 4, b64=b64,
                                    detail=detail) == expected

    def test_messages_with_headers(self) -> None:
        """``headers=true`` items: the producer's timestamp apart from the append time and
        the ``<name b64>.<value b64>;...`` headers, before key and value, in the plain
        form (a value with ':') and in base64; what the broker's reply builder writes."""
        from broker.v1.codec.replies import consume_reply
        from data.format import KIND_RAW, KIND_STRING, encode_user_headers, key_header

        class Rec:
            offset, payload, key, timestamp = 3, b"a:b", b"k1", 9_000_000
            origin_timestamp = 1_700_000_000_000_000
            user_headers = key_header(b"k1") + encode_user_headers(
                [(KIND_STRING, b"trace", KIND_RAW, b"\x00\x01")])

        want = Message(4, 3, 9000, b"k1", b"a:b", 1_700_000_000_000, ((b"trace", b"\x00\x01"),))
        for b64 in (False, True):
            line, _ = consume_reply("1", [Rec()], 3, b64=b64, detail=True, headers=True)
            reply = parse_reply(line.rstrip(b"\n"))
            assert codec.parse_messages(reply, 4, b64=b64, detail=True, headers=True) == [want]
        with pytest.raises(ProtocolViolation):
            codec.parse_messages(Reply(True, None, "messages=3:1:2:bm8dot:azE=:dg== hw=3"), 4,
                                 b64=True, detail=True, headers=True)

    def test_fetch_bodies(self) -> None:
        """A base64 FETCH carries its records; a raw one announces the bytes that follow."""
        inline = Reply(True, None, "hw=9 start=0 next=3 count=3 data=" +
                       base64.b64encode(b"records").decode())
        assert codec.parse_fetch(inline) == (codec.Fetched(9, 0, 3, 3, b"records"), None)
        raw = Reply(True, None, "hw=9 start=0 next=3 count=3 size=7")
        assert codec.parse_fetch(raw) == (codec.Fetched(9, 0, 3, 3, b""), 7)

    def test_for_code_maps_every_wire_code(self) -> None:
        """Each V1 error code has its class; an unknown code stays a plain BrokerError."""
        for code in ("BAD_REQUEST", "UNKNOWN_COMMAND", "REPLICATION_TIMEOUT", "NOT_LEADER",
                     "GENERATION_MISMATCH", "UNAVAILABLE", "UNAUTHENTICATED", "STORAGE_ERROR",
                     "INTERNAL"):
            assert codec.for_code(code).code_name == code
        assert codec.for_code("SOMETHING_NEW") is BrokerError
        error = Reply(False, "GENERATION_MISMATCH", "stale", "5").error("HEARTBEAT")
        assert isinstance(error, GenerationMismatchError) and error.retriable
        assert str(error) == "HEARTBEAT: GENERATION_MISMATCH: stale"
        assert error.broker_message == "stale"


class RulesTests:

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=300) | st.text(max_size=60).map(str.encode))
    def test_plain_rules_agree_with_the_broker(self, data: bytes) -> None:
        """The client sends plain exactly what the broker accepts plain."""
        assert codec.is_plain_value(data) == server.is_plain_value(data)
        assert codec.is_plain_key(data) == server.is_plain_key(data)

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=64))
    def test_key_hash_agrees_with_the_broker(self, key: bytes) -> None:
        """The client picks the partition the broker would."""
        assert codec.fnv1a_32(key) == broker_fnv1a_32(key)
        assert codec.partition_for_key(key, 7) == broker_fnv1a_32(key) % 7

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet="ab.-_Z9\u00e9", min_size=1, max_size=12))
    def test_name_rule_agrees_with_the_broker(self, name: str) -> None:
        """A name the client calls valid is one the broker accepts in a request."""
        line = codec.encode_request(1, "OFFSET", f"{name} t 0").rstrip(b"\n")
        try:
            server.Codec().parse_command(line)
            accepted = True
        except (BadRequest, server.CommandError):
            accepted = False
        assert codec.is_valid_name(name) == accepted


class LeaderRoutingCodecTests:
    """The sans-I/O side of leader routing: NOT_LEADER hints and the ClusterMap."""

    def test_hint_is_read_from_the_first_fields_only(self) -> None:
        """``leader= addr= epoch=`` first in the message is a hint; anywhere else, or
        incomplete, it is not."""
        from broker.client.codec import LeaderHint, parse_leader_hint

        assert parse_leader_hint("leader=2 addr=127.0.0.1:9094 epoch=7 partition 0 ...") == \
            LeaderHint(2, "127.0.0.1:9094", 7)
        assert parse_leader_hint("leader=2 addr=h:1 epoch=7") == LeaderHint(2, "h:1", 7)
        assert parse_leader_hint("partition 0 of t is a follower on this broker") is None
        assert parse_leader_hint("x leader=2 addr=h:1 epoch=7") is None
        assert parse_leader_hint("leader=2 epoch=7 addr=h:1") is None

    def test_cluster_map_keeps_the_newest_epoch(self) -> None:
        """METADATA answers from several brokers merge per partition by epoch; a hint moves
        a partition; a NOT_LEADER without news forgets it (ask again)."""
        from broker.client.codec import ClusterMap, LeaderHint, parse_reply

        routes = ClusterMap("t")
        routes.update_brokers(parse_reply(b"V1|1|OK|topics=[t] brokers=[0@h:1 1@h:2 2@h:3]"))
        routes.update_topic(parse_reply(b"V1|2|OK|topic=t partitions=3 replication_factor=3 "
                                        b"leaders=[0 1 -1] epochs=[4 0 2]"))
        routes.update_topic(parse_reply(b"V1|3|OK|topic=t partitions=3 replication_factor=3 "
                                        b"leaders=[2 0 2] epochs=[3 1 2]"))
        assert [routes.leader_address(p) for p in range(3)] == ["h:1", "h:1", "h:3"]
        assert routes.note_hint(0, LeaderHint(1, "h:2", 5)) is True
        assert routes.leader_address(0) == "h:2"
        assert routes.note_hint(0, LeaderHint(1, "h:2", 5)) is False  # no news: forget
        assert routes.leader_address(0) is None
        assert routes.partition_for(b"user1") == routes.partition_for(b"user1") < 3

    def test_single_broker_metadata_names_no_brokers(self) -> None:
        """A single broker's answers carry no cluster fields: the map stays empty and
        every partition goes to the bootstrap broker."""
        from broker.client.codec import ClusterMap, parse_brokers, parse_reply

        listing = parse_reply(b"V1|1|OK|topics=[t]")
        assert parse_brokers(listing) == {}
        routes = ClusterMap("t")
        routes.update_topic(parse_reply(b"V1|2|OK|topic=t partitions=3 replication_factor=1 "
                                        b"min_insync_replicas=1 roles=[leader leader leader]"))
        assert routes.partitions == 3 and routes.leader_address(0) is None
