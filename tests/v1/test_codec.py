"""Table-driven tests of the V1 codec: request parsing, argument validation, reply shapes.

Every rule of spec/v1-protocol.md that the codec owns has a row here: the envelope, the
command table, names, numbers, ``key:value``, options, and each payload shape, plus every
line of the spec's Examples section.

The ``FooTests`` classes are plain pytest classes (so tables can use ``parametrize``);
``__test__ = True`` makes pytest collect them although their names do not start with Test.
"""

from __future__ import annotations

import base64
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.errors import BadRequest, GenerationMismatch, NotLeader, UnknownCommand
from broker.v1.codec import (
    COMMANDS,
    LINE_TOO_LONG_REPLY,
    AdminAddPartitions,
    AdminAlterTopic,
    AdminCommit,
    AdminCreateTopic,
    AdminDeleteGroup,
    AdminDeleteTopic,
    AdminResetOffsets,
    Codec,
    CodecLimits,
    Command,
    CommandError,
    Commit,
    Consume,
    DescribeGroup,
    GroupHeartbeat,
    Heartbeat,
    Join,
    Leave,
    ListGroups,
    Metadata,
    Offset,
    Offsets,
    Ping,
    Produce,
    ReplicaFetch,
    SetPartitionRole,
    Sync,
    assignment_payload,
    consume_reply,
    err,
    format_bool,
    format_list,
    is_plain_key,
    is_plain_value,
    ok,
    produce_payload,
    replica_fetch_payload,
    role_payload,
)
from broker.v1.codec.replies import line_too_long_reply
from broker.v1.errors import code_for

CODEC = Codec()
MAX = "9223372036854775807"
NAME_249 = "n" * 249
SPACES = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]


def parse(line: bytes) -> Command | None:
    return CODEC.parse_command(line)


def refusal(line: bytes, codec: Codec = CODEC) -> CommandError:
    with pytest.raises(CommandError) as info:
        codec.parse_command(line)
    return info.value


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class Rec:
    """A stored record as the handlers pass it to ``consume_reply``."""

    offset: int
    payload: bytes
    key: bytes | None = None
    timestamp: int = 0
    origin_timestamp: int = 0
    user_headers: bytes = b""


# --------------------------------------------------------------------------------------------
# Valid requests: line -> command
# --------------------------------------------------------------------------------------------

VALID: list[tuple[bytes, Command]] = [
    # envelope
    (b"V1|1|PING|", Ping("1")),
    (b"V1|1|PING|\r", Ping("1")),
    (b"V1|1|PING|   ", Ping("1")),
    (b"V1|abc-XYZ.9_|PING|", Ping("abc-XYZ.9_")),
    (b"V1|a b|PING|", Ping("a b")),
    (b"V1|\xc3\xa9t\xc3\xa9|PING|", Ping("\u00e9t\u00e9")),
    (b"V1|0|PING|", Ping("0")),
    # PRODUCE
    (
        b"V1|42|PRODUCE|orders user1:created",
        Produce("42", "orders", "user1", b"created", "1", None, False),
    ),
    (b"V1|42|PRODUCE|orders user1:created\r", Produce("42", "orders", "user1", b"created")),
    (b"V1|43|PRODUCE|orders user1:paid acks=all", Produce("43", "orders", "user1", b"paid", "all")),
    (b"V1|1|PRODUCE|t k:v acks=0", Produce("1", "t", "k", b"v", "0")),
    (b"V1|1|PRODUCE|t k:v acks=1", Produce("1", "t", "k", b"v", "1")),
    (b"V1|1|PRODUCE|t k:v partition=2", Produce("1", "t", "k", b"v", "1", 2)),
    (b"V1|1|PRODUCE|t k:v partition=0 acks=all", Produce("1", "t", "k", b"v", "all", 0)),
    (
        b"V1|1|PRODUCE|t k:" + base64.b64encode(b"a b|c,d\n\x00\xff") + b" enc=b64",
        Produce("1", "t", "k", b"a b|c,d\n\x00\xff", "1", None, True),
    ),
    (
        b"V1|1|PRODUCE|t k:YQ== enc=b64 acks=0 partition=1",
        Produce("1", "t", "k", b"a", "0", 1, True),
    ),
    (b"V1|1|PRODUCE|t k: enc=b64", Produce("1", "t", "k", b"", "1", None, True)),
    (b"V1|1|PRODUCE|   t    k:v    acks=0   ", Produce("1", "t", "k", b"v", "0")),
    (b"V1|1|PRODUCE|t :v", Produce("1", "t", "", b"v")),
    (b"V1|1|PRODUCE|t k:", Produce("1", "t", "k", b"")),
    (b"V1|1|PRODUCE|t :", Produce("1", "t", "", b"")),
    (b"V1|1|PRODUCE|t k:a:b:c", Produce("1", "t", "k", b"a:b:c")),
    (b"V1|1|PRODUCE|t k:a=b", Produce("1", "t", "k", b"a=b")),
    (b"V1|1|PRODUCE|t k=x:v", Produce("1", "t", "k=x", b"v")),
    (b"V1|1|PRODUCE|t k:\xc3\xa9\xe2\x82\xac", Produce("1", "t", "k", "\u00e9\u20ac".encode())),
    (b"V1|1|PRODUCE|t k:a\x00\x7fb", Produce("1", "t", "k", b"a\x00\x7fb")),
    (
        b"V1|1|PRODUCE|t k:a\xe2\x80\x8bb",
        Produce("1", "t", "k", "a\u200bb".encode()),
    ),  # ZWSP: not isspace
    (b"V1|1|PRODUCE|t k:YQli enc=b64", Produce("1", "t", "k", b"a\tb", b64=True)),
    (b"V1|1|PRODUCE|t " + b"k" * 255 + b":v", Produce("1", "t", "k" * 255, b"v")),
    (b"V1|1|PRODUCE|t " + "\u00e9".encode() * 127 + b":v", Produce("1", "t", "\u00e9" * 127, b"v")),
    (b"V1|1|PRODUCE|" + NAME_249.encode() + b" k:v", Produce("1", NAME_249, "k", b"v")),
    (b"V1|1|PRODUCE|a.b_c-D9 k:v", Produce("1", "a.b_c-D9", "k", b"v")),
    (b"V1|1|PRODUCE|... k:v", Produce("1", "...", "k", b"v")),
    (b"V1|1|PRODUCE|.a k:v", Produce("1", ".a", "k", b"v")),
    # CONSUME
    (b"V1|44|CONSUME|orders 2 0", Consume("44", "orders", 2, 0, None, None, False, False)),
    (b"V1|1|CONSUME|t 007 00", Consume("1", "t", 7, 0)),
    (b"V1|1|CONSUME|t 0 " + MAX.encode(), Consume("1", "t", 0, 2**63 - 1)),
    (b"V1|1|CONSUME|t 0 000" + MAX.encode(), Consume("1", "t", 0, 2**63 - 1)),
    (b"V1|1|CONSUME|t 0 5 max=1", Consume("1", "t", 0, 5, max_messages=1)),
    (b"V1|1|CONSUME|t 0 5 wait_ms=0", Consume("1", "t", 0, 5, wait_ms=0)),
    (b"V1|1|CONSUME|t 0 5 wait_ms=250 max=10", Consume("1", "t", 0, 5, 10, 250)),
    (b"V1|1|CONSUME|t 0 5 enc=b64", Consume("1", "t", 0, 5, b64=True)),
    (b"V1|1|CONSUME|t 0 5 detail=true", Consume("1", "t", 0, 5, detail=True)),
    (b"V1|1|CONSUME|t 0 5 detail=false", Consume("1", "t", 0, 5, detail=False)),
    (b"V1|1|CONSUME|t 0 5 detail=true headers=true",
     Consume("1", "t", 0, 5, detail=True, headers=True)),
    (
        b"V1|1|CONSUME|t 1 2 detail=true enc=b64 wait_ms=3 max=4",
        Consume("1", "t", 1, 2, 4, 3, True, True),
    ),
    # JOIN
    (
        b"V1|45|JOIN|analytics orders consumer-a",
        Join("45", "analytics", "orders", "consumer-a", None, None),
    ),
    (b"V1|1|JOIN|g t c assignor=round_robin", Join("1", "g", "t", "c", "round_robin")),
    (b"V1|1|JOIN|g t c assignor=range", Join("1", "g", "t", "c", "range")),
    (b"V1|1|GROUP_HEARTBEAT|g m 0 topics=t", GroupHeartbeat("1", "g", "m", 0, ("t",))),
    (b"V1|1|JOIN|g t c assignor=sticky", Join("1", "g", "t", "c", "sticky")),
    (b"V1|1|JOIN|g t c session_timeout_ms=6000", Join("1", "g", "t", "c", None, 6000)),
    (b"V1|1|JOIN|g t c session_timeout_ms=0 assignor=range", Join("1", "g", "t", "c", "range", 0)),
    # member-scoped
    (b"V1|1|SYNC|g t c 3", Sync("1", "g", "t", "c", 3)),
    (b"V1|1|HEARTBEAT|g t c 0", Heartbeat("1", "g", "t", "c", 0)),
    (b"V1|1|LEAVE|g t c 12", Leave("1", "g", "t", "c", 12)),
    (
        b"V1|46|COMMIT|analytics orders consumer-a 1 2 2",
        Commit("46", "analytics", "orders", "consumer-a", 1, 2, 2),
    ),
    (b"V1|47|OFFSET|analytics orders 2", Offset("47", "analytics", "orders", 2)),
    # replication
    (b"V1|1|REPLICA_FETCH|t 0 1 41", ReplicaFetch("1", "t", 0, 1, 41)),
    (b"V1|1|REPLICA_FETCH|t 0 0 0", ReplicaFetch("1", "t", 0, 0, 0)),
    (b"V1|1|SET_PARTITION_ROLE|t 2 leader", SetPartitionRole("1", "t", 2, "leader")),
    (b"V1|1|SET_PARTITION_ROLE|t 2 follower", SetPartitionRole("1", "t", 2, "follower")),
    # additive
    (b"V1|1|ADMIN_CREATE_TOPIC|t 3 1", AdminCreateTopic("1", "t", 3, 1, None, None, None)),
    (
        b"V1|1|ADMIN_CREATE_TOPIC|t 6 3 retention_bytes=1000 min_isr=2 retention_ms=60000",
        AdminCreateTopic("1", "t", 6, 3, 2, 60000, 1000),
    ),
    (b"V1|1|ADMIN_DELETE_TOPIC|t", AdminDeleteTopic("1", "t")),
    (b"V1|1|ADMIN_ADD_PARTITIONS|t 8", AdminAddPartitions("1", "t", 8)),
    (b"V1|1|ADMIN_ALTER_TOPIC|t retention_ms=60000",
     AdminAlterTopic("1", "t", (("retention_ms", 60000),))),
    (b"V1|1|ADMIN_ALTER_TOPIC|t retention_ms=none retention_bytes=1000",
     AdminAlterTopic("1", "t", (("retention_bytes", 1000), ("retention_ms", None)))),
    (b"V1|1|METADATA|", Metadata("1", None)),
    (b"V1|1|METADATA|  ", Metadata("1", None)),
    (b"V1|1|METADATA|orders", Metadata("1", "orders")),
    (b"V1|1|METADATA| orders ", Metadata("1", "orders")),
    (b"V1|1|OFFSETS|t 0", Offsets("1", "t", 0, None)),
    (b"V1|1|OFFSETS|t 1 ts=1700000000000", Offsets("1", "t", 1, 1700000000000)),
    (b"V1|1|DESCRIBE_GROUP|g t", DescribeGroup("1", "g", "t")),
    (b"V1|1|LIST_GROUPS|", ListGroups("1")),
    (b"V1|1|ADMIN_DELETE_GROUP|g t", AdminDeleteGroup("1", "g", "t")),
    (b"V1|1|ADMIN_RESET_OFFSETS|g t earliest", AdminResetOffsets("1", "g", "t", "earliest", None)),
    (
        b"V1|1|ADMIN_RESET_OFFSETS|g t latest partition=2",
        AdminResetOffsets("1", "g", "t", "latest", 2),
    ),
    (b"V1|1|ADMIN_RESET_OFFSETS|g t 17", AdminResetOffsets("1", "g", "t", 17, None)),
    (b"V1|1|ADMIN_COMMIT|g t 0 42", AdminCommit("1", "g", "t", 0, 42)),
]


class ParseValidTests:

    @pytest.mark.parametrize(("line", "expected"), VALID, ids=[repr(v[0])[:60] for v in VALID])
    def test_valid_line(self, line: bytes, expected: Command) -> None:
        """Each well-formed request line parses into exactly the expected command."""
        assert parse(line) == expected

    def test_every_command_has_a_valid_row(self) -> None:
        """The valid-line table exercises every command the codec knows."""
        assert {type(cmd) for _, cmd in VALID} == set(COMMANDS.values())

    @pytest.mark.parametrize("line", [b"", b"\r"])
    def test_blank_line_is_ignored(self, line: bytes) -> None:
        """A blank line (empty after one trailing \\r is stripped) gives None, not an error."""
        assert parse(line) is None

    def test_parsed_commands_are_frozen(self) -> None:
        """Commands are immutable values a handler cannot alter by accident."""
        cmd = parse(b"V1|1|PRODUCE|t k:v")
        with pytest.raises(AttributeError):
            cmd.topic = "other"  # type: ignore[union-attr, misc]

    def test_value_at_the_size_limit(self) -> None:
        """A value of exactly max_message_bytes is accepted, plain or base64."""
        codec = Codec(CodecLimits(max_message_bytes=10))
        assert codec.parse_command(b"V1|1|PRODUCE|t k:" + b"x" * 10) == Produce(
            "1", "t", "k", b"x" * 10
        )
        line = b"V1|1|PRODUCE|t k:" + base64.b64encode(bytes(10)) + b" enc=b64"
        assert codec.parse_command(line) == Produce("1", "t", "k", b"\x00" * 10, b64=True)

    def test_multibyte_value_limit_counts_bytes(self) -> None:
        """The size limit counts UTF-8 bytes, not characters."""
        codec = Codec(CodecLimits(max_message_bytes=4))
        assert codec.parse_command("V1|1|PRODUCE|t k:\u00e9\u00e9".encode()) is not None
        assert code_for(refusal("V1|1|PRODUCE|t k:\u00e9\u00e9x".encode(), codec).error) == "BAD_REQUEST"

    def test_negative_limit_is_a_configuration_error(self) -> None:
        """CodecLimits refuses a negative maximum message size."""
        with pytest.raises(ValueError):
            CodecLimits(max_message_bytes=-1)


# --------------------------------------------------------------------------------------------
# Refused requests: line -> (code, cid, exact message or None)
# --------------------------------------------------------------------------------------------

BIG = "9" * 5000  # longer than Python's default int-parsing limit

ERRORS: list[tuple[bytes, str, str, str | None]] = [
    # envelope -> cid "0"
    (b"hello", "BAD_REQUEST", "0", None),
    (b"V1|1|PING", "BAD_REQUEST", "0", None),
    (b"V1|1", "BAD_REQUEST", "0", None),
    (b"V1|1|PING||", "BAD_REQUEST", "0", None),
    (b"V1|1|PRODUCE|t k:a|b", "BAD_REQUEST", "0", None),
    (b"V2|1|PING|", "BAD_REQUEST", "0", None),
    (b"v1|1|PING|", "BAD_REQUEST", "0", None),
    (b" V1|1|PING|", "BAD_REQUEST", "0", None),
    (b"V1||PING|", "BAD_REQUEST", "0", "empty correlation id"),
    (b"V1|1||", "BAD_REQUEST", "0", "empty command"),
    (b"V1|||", "BAD_REQUEST", "0", "empty correlation id"),
    (b"V1|a\rb|PING|", "BAD_REQUEST", "0", "correlation id contains a line break"),
    (b"V1|a\nb|PING|", "BAD_REQUEST", "0", "correlation id contains a line break"),
    (b"V1|\r|PING|\xff", "BAD_REQUEST", "0", "correlation id contains a line break"),
    (b"   ", "BAD_REQUEST", "0", None),
    (b"\r\r", "BAD_REQUEST", "0", None),
    (b"V2|1|NOPE|", "BAD_REQUEST", "0", None),  # envelope is checked before the command
    # invalid UTF-8: cid "0" while the envelope is unreadable, else the cid
    (b"\xff", "BAD_REQUEST", "0", None),
    (b"V1|\xff|PING|", "BAD_REQUEST", "0", None),
    (b"V\xff|1|PING|", "BAD_REQUEST", "0", None),
    (b"V1|1|\xffPING|", "BAD_REQUEST", "1", None),
    (b"V1|1|PING|\xff", "BAD_REQUEST", "1", None),
    (b"V1|1|PRODUCE|t k:\xe9", "BAD_REQUEST", "1", None),
    (b"V1|1|PRODUCE|t k:\xed\xa0\x80", "BAD_REQUEST", "1", None),  # encoded surrogate
    (b"V1|1|NOPE|\xff", "UNKNOWN_COMMAND", "1", None),  # command known is checked before args
    (b"V1|\xff|PING|x|", "BAD_REQUEST", "0", None),
    # unknown commands
    (b"V1|7|FOO|", "UNKNOWN_COMMAND", "7", None),
    (b"V1|7|ping|", "UNKNOWN_COMMAND", "7", None),
    (b"V1|7| PING|", "UNKNOWN_COMMAND", "7", None),
    (b"V1|7|PING |", "UNKNOWN_COMMAND", "7", None),
    (b"V1|7|NOPE|\x00 ..", "UNKNOWN_COMMAND", "7", None),
    # argument counts and options (every command)
    (b"V1|2|PING|x", "BAD_REQUEST", "2", None),
    (b"V1|2|PING|x=1", "BAD_REQUEST", "2", None),
    (b"V1|2|LIST_GROUPS|g", "BAD_REQUEST", "2", None),
    (b"V1|2|PRODUCE|", "BAD_REQUEST", "2", None),
    (b"V1|2|PRODUCE|t", "BAD_REQUEST", "2", None),
    (b"V1|2|PRODUCE|t k:v extra", "BAD_REQUEST", "2", None),
    (b"V1|2|PRODUCE|t k:v acks=1 acks=1", "BAD_REQUEST", "2", "option acks given more than once"),
    (b"V1|2|PRODUCE|t k:v foo=1", "BAD_REQUEST", "2", None),
    (b"V1|2|PRODUCE|t k:v =1", "BAD_REQUEST", "2", None),
    (b"V1|2|PRODUCE|t k:v max=1", "BAD_REQUEST", "2", None),
    (b"V1|2|CONSUME|t 0", "BAD_REQUEST", "2", None),
    (b"V1|2|CONSUME|t 0 1 2", "BAD_REQUEST", "2", None),
    (b"V1|2|CONSUME|t 0 1 acks=1", "BAD_REQUEST", "2", None),
    (b"V1|2|CONSUME|t 0 1 max=1 max=2", "BAD_REQUEST", "2", None),
    (b"V1|2|JOIN|g t", "BAD_REQUEST", "2", None),
    (b"V1|2|JOIN|g t c d", "BAD_REQUEST", "2", None),
    (b"V1|2|JOIN|g t c assignor=range assignor=range", "BAD_REQUEST", "2", None),
    (b"V1|2|SYNC|g t c", "BAD_REQUEST", "2", None),
    (b"V1|2|SYNC|g t c 1 2", "BAD_REQUEST", "2", None),
    (b"V1|2|SYNC|g t c 1 acks=1", "BAD_REQUEST", "2", None),
    (b"V1|2|HEARTBEAT|g t c", "BAD_REQUEST", "2", None),
    (b"V1|2|HEARTBEAT|g t c 1 x", "BAD_REQUEST", "2", None),
    (b"V1|2|LEAVE|g t c", "BAD_REQUEST", "2", None),
    (b"V1|2|LEAVE|g t c 1 x", "BAD_REQUEST", "2", None),
    (b"V1|2|COMMIT|g t c 1 2", "BAD_REQUEST", "2", None),
    (b"V1|2|COMMIT|g t c 1 2 3 4", "BAD_REQUEST", "2", None),
    (b"V1|2|OFFSET|g t", "BAD_REQUEST", "2", None),
    (b"V1|2|OFFSET|g t 1 2", "BAD_REQUEST", "2", None),
    (b"V1|2|REPLICA_FETCH|t 0 1", "BAD_REQUEST", "2", None),
    (b"V1|2|REPLICA_FETCH|t 0 1 2 3", "BAD_REQUEST", "2", None),
    (b"V1|2|SET_PARTITION_ROLE|t 0", "BAD_REQUEST", "2", None),
    (b"V1|2|SET_PARTITION_ROLE|t 0 leader x", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_CREATE_TOPIC|t 3", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_CREATE_TOPIC|t 3 1 x", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_CREATE_TOPIC|t 3 1 min_isr=1 min_isr=1", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_DELETE_TOPIC|", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_DELETE_TOPIC|t u", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_ADD_PARTITIONS|t", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_ADD_PARTITIONS|t 3 4", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_ALTER_TOPIC|", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_ALTER_TOPIC|t", "BAD_REQUEST", "2",
     "nothing to alter; usage: ADMIN_ALTER_TOPIC <topic> [retention_ms=<ms or none>] "
     "[retention_bytes=<n or none>] [cleanup_policy=<delete, compact or compact,delete>] "
     "[min_compaction_lag_ms=<ms>] [delete_retention_ms=<ms>] [segment_bytes=<n or none>] "
     "[segment_ms=<ms or none>]"),
    (b"V1|2|ADMIN_ALTER_TOPIC|t cleanup_policy=shrink", "BAD_REQUEST", "2",
     "cleanup_policy must be delete, compact or compact,delete; got 'shrink'"),
    (b"V1|2|ADMIN_ALTER_TOPIC|t u", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_ALTER_TOPIC|t partitions=4", "BAD_REQUEST", "2", None),
    (b"V1|2|METADATA|a b", "BAD_REQUEST", "2", None),
    (b"V1|2|METADATA|x=1", "BAD_REQUEST", "2", None),
    (b"V1|2|METADATA|t x=1", "BAD_REQUEST", "2", None),
    (b"V1|2|OFFSETS|t", "BAD_REQUEST", "2", None),
    (b"V1|2|OFFSETS|t 0 1", "BAD_REQUEST", "2", None),
    (b"V1|2|OFFSETS|t 0 ts=1 ts=2", "BAD_REQUEST", "2", None),
    (b"V1|2|DESCRIBE_GROUP|g", "BAD_REQUEST", "2", None),
    (b"V1|2|DESCRIBE_GROUP|g t x", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_DELETE_GROUP|g", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_DELETE_GROUP|g t x", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_RESET_OFFSETS|g t", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_RESET_OFFSETS|g t 1 2", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_RESET_OFFSETS|g t 1 partition=1 partition=2", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_COMMIT|g t 0", "BAD_REQUEST", "2", None),
    (b"V1|2|ADMIN_COMMIT|g t 0 1 2", "BAD_REQUEST", "2", None),
    # names
    (b"V1|3|PRODUCE|. k:v", "BAD_REQUEST", "3", None),
    (b"V1|3|PRODUCE|.. k:v", "BAD_REQUEST", "3", None),
    (b"V1|3|PRODUCE|" + b"n" * 250 + b" k:v", "BAD_REQUEST", "3", None),
    (b"V1|3|PRODUCE|a/b k:v", "BAD_REQUEST", "3", None),
    (b"V1|3|PRODUCE|a\tb k:v", "BAD_REQUEST", "3", None),
    (b"V1|3|PRODUCE|a:b k:v", "BAD_REQUEST", "3", None),
    (b"V1|3|PRODUCE|\xc3\xa9 k:v", "BAD_REQUEST", "3", None),
    (b"V1|3|PRODUCE|\xd9\xa1 k:v", "BAD_REQUEST", "3", None),  # a non-ASCII alnum
    (b"V1|3|CONSUME|a* 0 0", "BAD_REQUEST", "3", None),
    (b"V1|3|JOIN|g! t c", "BAD_REQUEST", "3", None),
    (b"V1|3|JOIN|g t! c", "BAD_REQUEST", "3", None),
    (b"V1|3|JOIN|g t .", "BAD_REQUEST", "3", None),
    (b"V1|3|SYNC|.. t c 1", "BAD_REQUEST", "3", None),
    (b"V1|3|COMMIT|g t c=1 1 0 0", "BAD_REQUEST", "3", None),
    (b"V1|3|OFFSET|g t\x00 0", "BAD_REQUEST", "3", None),
    (b"V1|3|METADATA|..", "BAD_REQUEST", "3", None),
    (b"V1|3|ADMIN_DELETE_TOPIC|" + b"x" * 250, "BAD_REQUEST", "3", None),
    (b"V1|3|DESCRIBE_GROUP|g+ t", "BAD_REQUEST", "3", None),
    # numbers
    (b"V1|4|CONSUME|t -1 0", "BAD_REQUEST", "4", None),
    (b"V1|4|CONSUME|t +1 0", "BAD_REQUEST", "4", None),
    (b"V1|4|CONSUME|t 1_000 0", "BAD_REQUEST", "4", None),
    (b"V1|4|CONSUME|t 1.0 0", "BAD_REQUEST", "4", None),
    (b"V1|4|CONSUME|t 0x1 0", "BAD_REQUEST", "4", None),
    (b"V1|4|CONSUME|t \xd9\xa1 0", "BAD_REQUEST", "4", None),  # ARABIC-INDIC DIGIT ONE
    (b"V1|4|CONSUME|t \xc2\xb2 0", "BAD_REQUEST", "4", None),  # SUPERSCRIPT TWO
    (b"V1|4|CONSUME|t \xef\xbc\x91 0", "BAD_REQUEST", "4", None),  # FULLWIDTH DIGIT ONE
    (b"V1|4|CONSUME|t 0 9223372036854775808", "BAD_REQUEST", "4", None),
    (b"V1|4|CONSUME|t 0 99999999999999999999", "BAD_REQUEST", "4", None),
    (b"V1|4|CONSUME|t 0 " + BIG.encode(), "BAD_REQUEST", "4", None),
    (b"V1|4|CONSUME|t 0 one", "BAD_REQUEST", "4", None),
    (b"V1|4|CONSUME|t 0 max=5", "BAD_REQUEST", "4", None),
    (b"V1|4|SYNC|g t c -1", "BAD_REQUEST", "4", None),
    (b"V1|4|HEARTBEAT|g t c x", "BAD_REQUEST", "4", None),
    (b"V1|4|LEAVE|g t c 1.5", "BAD_REQUEST", "4", None),
    (b"V1|4|COMMIT|g t c 1 -2 0", "BAD_REQUEST", "4", None),
    (b"V1|4|COMMIT|g t c 1 2 -1", "BAD_REQUEST", "4", None),
    (b"V1|4|OFFSET|g t p", "BAD_REQUEST", "4", None),
    (b"V1|4|REPLICA_FETCH|t 0 -1 0", "BAD_REQUEST", "4", None),
    (b"V1|4|REPLICA_FETCH|t 0 1 " + BIG.encode(), "BAD_REQUEST", "4", None),
    (b"V1|4|SET_PARTITION_ROLE|t x leader", "BAD_REQUEST", "4", None),
    (b"V1|4|OFFSETS|t 0 ts=-5", "BAD_REQUEST", "4", None),
    (b"V1|4|OFFSETS|t 0 ts=", "BAD_REQUEST", "4", None),
    (b"V1|4|ADMIN_COMMIT|g t 0 x", "BAD_REQUEST", "4", None),
    (b"V1|4|ADMIN_RESET_OFFSETS|g t -1", "BAD_REQUEST", "4", None),
    (b"V1|4|ADMIN_RESET_OFFSETS|g t first", "BAD_REQUEST", "4", None),
    (b"V1|4|ADMIN_RESET_OFFSETS|g t 99999999999999999999", "BAD_REQUEST", "4", None),
    (b"V1|4|ADMIN_RESET_OFFSETS|g t 1 partition=x", "BAD_REQUEST", "4", None),
    # ranges
    (b"V1|5|CONSUME|t 0 0 max=0", "BAD_REQUEST", "5", "max must be at least 1, got 0"),
    (b"V1|5|CONSUME|t 0 0 max=", "BAD_REQUEST", "5", None),
    (b"V1|5|CONSUME|t 0 0 wait_ms=-1", "BAD_REQUEST", "5", None),
    (b"V1|5|JOIN|g t c session_timeout_ms=-1", "BAD_REQUEST", "5", None),
    (b"V1|5|ADMIN_CREATE_TOPIC|t 0 1", "BAD_REQUEST", "5", None),
    (b"V1|5|ADMIN_CREATE_TOPIC|t 1 0", "BAD_REQUEST", "5", None),
    (b"V1|5|ADMIN_CREATE_TOPIC|t 1 1 min_isr=0", "BAD_REQUEST", "5", None),
    (b"V1|5|ADMIN_CREATE_TOPIC|t 1 1 retention_ms=0", "BAD_REQUEST", "5", None),
    (b"V1|5|ADMIN_CREATE_TOPIC|t 1 1 retention_bytes=x", "BAD_REQUEST", "5", None),
    (b"V1|5|ADMIN_ADD_PARTITIONS|t 0", "BAD_REQUEST", "5", None),
    (b"V1|5|ADMIN_ALTER_TOPIC|t retention_ms=0", "BAD_REQUEST", "5",
     "retention_ms must be at least 1, got 0"),
    (b"V1|5|ADMIN_ALTER_TOPIC|t retention_bytes=-1", "BAD_REQUEST", "5", None),
    (b"V1|5|ADMIN_ALTER_TOPIC|t retention_bytes=None", "BAD_REQUEST", "5", None),
    # PRODUCE message, acks, encodings
    (b"V1|48|PRODUCE|orders nocolon", "BAD_REQUEST", "48", "message must be key:value"),
    (b"V1|6|PRODUCE|t nocolon acks=all", "BAD_REQUEST", "6", "message must be key:value"),
    (
        b"V1|49|PRODUCE|orders a:b acks=2",
        "BAD_REQUEST",
        "49",
        "invalid ack mode; expected acks=0, acks=1 or acks=all",
    ),
    (
        b"V1|6|PRODUCE|t a:b acks=ALL",
        "BAD_REQUEST",
        "6",
        "invalid ack mode; expected acks=0, acks=1 or acks=all",
    ),
    (
        b"V1|6|PRODUCE|t a:b acks=",
        "BAD_REQUEST",
        "6",
        "invalid ack mode; expected acks=0, acks=1 or acks=all",
    ),
    (
        b"V1|6|PRODUCE|t a:b acks=-1",
        "BAD_REQUEST",
        "6",
        "invalid ack mode; expected acks=0, acks=1 or acks=all",
    ),
    (
        b"V1|6|PRODUCE|t k:abc,d",
        "BAD_REQUEST",
        "6",
        "value contains ',' at position 3; send it with enc=b64",
    ),
    (
        b"V1|6|PRODUCE|t k:a\tb",
        "BAD_REQUEST",
        "6",
        "value contains whitespace U+0009 at position 1; send it with enc=b64",
    ),
    (
        b"V1|6|PRODUCE|t k:\xc2\xa0",
        "BAD_REQUEST",
        "6",
        "value contains whitespace U+00A0 at position 0; send it with enc=b64",
    ),
    (b"V1|6|PRODUCE|t k:x\xe3\x80\x80", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t k:a\rb", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t k\t:v", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t k,1:v", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t \xe2\x80\x83:v", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t " + b"k" * 256 + b":v", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t " + "\u00e9".encode() * 128 + b":v", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t k:v enc=b65", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t k:v enc=", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t k:v enc=B64", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t k:YQ enc=b64", "BAD_REQUEST", "6", None),  # missing padding
    (b"V1|6|PRODUCE|t k:YQ=== enc=b64", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t k:Y!Q= enc=b64", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t k:YR== enc=b64", "BAD_REQUEST", "6", None),  # non-canonical padding bits
    (b"V1|6|PRODUCE|t k:YQ==YQ== enc=b64", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t k:-_8= enc=b64", "BAD_REQUEST", "6", None),  # URL-safe alphabet
    (b"V1|6|PRODUCE|t k:\xc3\xa9Q== enc=b64", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t k:v partition=-1", "BAD_REQUEST", "6", None),
    (b"V1|6|PRODUCE|t k:v partition=", "BAD_REQUEST", "6", None),
    # other enumerations
    (b"V1|7|CONSUME|t 0 0 enc=hex", "BAD_REQUEST", "7", None),
    (b"V1|7|CONSUME|t 0 0 detail=yes", "BAD_REQUEST", "7", None),
    (b"V1|7|CONSUME|t 0 0 detail=", "BAD_REQUEST", "7", None),
    (b"V1|7|CONSUME|t 0 0 headers=true", "BAD_REQUEST", "7", "headers=true needs detail=true"),
    (b"V1|7|CONSUME|t 0 0 detail=true headers=1", "BAD_REQUEST", "7", None),
    (b"V1|7|JOIN|g t c assignor=rr", "BAD_REQUEST", "7", None),
    (b"V1|7|JOIN|g t c assignor=", "BAD_REQUEST", "7", None),
    (b"V1|7|JOIN|g t c assignor=Range", "BAD_REQUEST", "7", None),
    (b"V1|7|SET_PARTITION_ROLE|t 0 Leader", "BAD_REQUEST", "7", None),
    (b"V1|7|SET_PARTITION_ROLE|t 0 observer", "BAD_REQUEST", "7", None),
]


class ParseErrorTests:

    @pytest.mark.parametrize(
        ("line", "code", "cid", "message"), ERRORS, ids=[repr(e[0])[:60] for e in ERRORS]
    )
    def test_refused_line(self, line: bytes, code: str, cid: str, message: str | None) -> None:
        """Each bad request is refused with the expected code and cid (and exact text where the
        spec fixes it); the error line is well formed: 5 fields, non-empty message, one line."""
        error = refusal(line)
        assert (code_for(error.error), error.cid) == (code, cid)
        assert isinstance(error.error, UnknownCommand if code == "UNKNOWN_COMMAND" else BadRequest)
        if message is not None:
            assert error.error.message == message
        reply = err(error.cid, error.error)
        assert reply == error.reply()
        assert reply.endswith(b"\n") and reply.count(b"\n") == 1
        fields = reply[:-1].split(b"|")
        assert fields[:4] == [b"V1", cid.encode(), b"ERR", code.encode()]
        assert len(fields) == 5 and fields[4]
        assert b"\r" not in reply
        assert len(fields[4]) < 600  # client input is quoted in short form, never echoed whole

    def test_values_with_a_pipe_are_told_about_b64(self) -> None:
        """A plain value containing '|' breaks the envelope; the answer points at enc=b64."""
        error = refusal(b"V1|9|PRODUCE|t k:a|b")
        assert error.cid == "0"
        assert "enc=b64" in error.error.message
        assert "pipe" in error.error.message

    def test_missing_trailing_pipe_is_explained(self) -> None:
        """A command without args but without the trailing '|' is told it needs one."""
        assert "pipe" in refusal(b"V1|1|PING").error.message

    @pytest.mark.parametrize("char", SPACES, ids=[f"U+{ord(c):04X}" for c in SPACES])
    def test_every_whitespace_character_is_refused_in_a_plain_value(self, char: str) -> None:
        """Every character str.isspace() accepts is refused in a plain PRODUCE value (space splits
        the arguments instead), with a message naming its code point and enc=b64."""
        error = refusal(f"V1|1|PRODUCE|t k:a{char}b".encode())
        assert code_for(error.error) == "BAD_REQUEST"
        if char != " ":
            assert f"U+{ord(char):04X}" in error.error.message
            assert "enc=b64" in error.error.message
        assert not is_plain_value(f"a{char}b".encode())
        assert not is_plain_key(f"a{char}b".encode())

    def test_value_over_the_limit(self) -> None:
        """A value one byte over max_message_bytes is refused, plain or base64-decoded."""
        codec = Codec(CodecLimits(max_message_bytes=10))
        assert code_for(refusal(b"V1|1|PRODUCE|t k:" + b"x" * 11, codec).error) == "BAD_REQUEST"
        line = f"V1|1|PRODUCE|t k:{b64(b'x' * 11)} enc=b64".encode()
        assert code_for(refusal(line, codec).error) == "BAD_REQUEST"
        line = f"V1|1|PRODUCE|t k:{b64(b'x' * 100)} enc=b64".encode()
        assert "maximum message size is 10" in refusal(line, codec).error.message

    def test_long_client_input_is_not_echoed_in_full(self) -> None:
        """An error about a huge token quotes only its start, keeping error lines short."""
        error = refusal(b"V1|1|" + b"X" * 100_000 + b"|")
        assert code_for(error.error) == "UNKNOWN_COMMAND"
        assert len(error.reply()) < 200

    def test_control_characters_in_input_are_escaped_in_messages(self) -> None:
        """Client bytes echoed in a message are escaped, so an error line is a single clean line."""
        error = refusal(b"V1|1|NO\x0bPE\x1c|")
        assert b"\x0b" not in error.reply() and b"\x1c" not in error.reply()


class CheckOrderTests:

    @pytest.mark.parametrize(
        ("line", "code", "cid"),
        [
            (b"V2|1|NOPE|bad args", "BAD_REQUEST", "0"),  # envelope before command known
            (b"V1||NOPE|", "BAD_REQUEST", "0"),
            (b"V1|1|NOPE|. -1 x=", "UNKNOWN_COMMAND", "1"),  # command known before arguments
            (b"V1|1|PRODUCE|. nocolon acks=2", "BAD_REQUEST", "1"),
        ],
    )
    def test_first_failing_check_answers(self, line: bytes, code: str, cid: str) -> None:
        """Checks run envelope -> command known -> arguments; the first failing one answers."""
        error = refusal(line)
        assert (code_for(error.error), error.cid) == (code, cid)


# --------------------------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------------------------


class ReplyTests:

    def test_ok_without_and_with_payload(self) -> None:
        """Success lines are V1|<cid>|OK or V1|<cid>|OK|<payload>, newline-terminated."""
        assert ok("1") == b"V1|1|OK\n"
        assert ok("7", "heartbeat=ok") == b"V1|7|OK|heartbeat=ok\n"
        assert ok("\u00e9", "left=true") == "V1|\u00e9|OK|left=true\n".encode()

    def test_err_line(self) -> None:
        """Error lines are V1|<cid>|ERR|<CODE>|<message>, newline-terminated."""
        assert err("3", NotLeader("partition 0 of orders is a follower")) == (
            b"V1|3|ERR|NOT_LEADER|partition 0 of orders is a follower\n"
        )
        assert err("4", GenerationMismatch()) == (
            b"V1|4|ERR|GENERATION_MISMATCH|stale generation, unknown member or group, or partition not owned\n"
        )

    def test_err_never_leaks_a_pipe_or_newline(self) -> None:
        """An error message can never add a field or a line to the reply."""
        error = BadRequest("x")
        error.message = "a|b\nc\r"
        line = err("1", error)
        assert line.count(b"|") == 4 and line.count(b"\n") == 1 and b"\r" not in line
        error.message = ""
        assert err("1", error).split(b"|")[4].strip()

    def test_line_too_long_reply(self) -> None:
        """The over-long-line answer is the spec's line (cid 0, BAD_REQUEST, ``line too
        long``) whose message goes on to name the limit and the setting to raise, with no
        ``|`` or ``=`` that a client splitting the line could trip on."""
        assert LINE_TOO_LONG_REPLY == b"V1|0|ERR|BAD_REQUEST|line too long\n"
        assert err("0", BadRequest("line too long")) == LINE_TOO_LONG_REPLY
        reply = line_too_long_reply(1048576)
        assert reply == (b"V1|0|ERR|BAD_REQUEST|line too long: more than 1048576 bytes "
                         b"(the broker's limits.max_line_bytes)\n")
        assert reply.startswith(LINE_TOO_LONG_REPLY[:-1])
        assert reply.count(b"|") == 4 and b"=" not in reply

    def test_lists_and_booleans(self) -> None:
        """Lists are [a b c] space-separated ([] when empty); booleans are true/false."""
        assert format_list([0, 1, 2]) == "[0 1 2]"
        assert format_list([]) == "[]"
        assert format_list(["a", "b"]) == "[a b]"
        assert format_list(iter([5])) == "[5]"
        assert (format_bool(True), format_bool(False)) == ("true", "false")

    def test_payload_shapes(self) -> None:
        """Each spec payload has its exact shape (the SDK finds fields by key= and spaces)."""
        assert produce_payload(2, 0, 0) == "partition=2 offset=0 hw=0"
        assert produce_payload(0, 5, -1) == "partition=0 offset=5 hw=-1"
        assert assignment_payload(1, [0, 1, 2]) == "generation=1 assigned=[0 1 2]"
        assert assignment_payload(4, []) == "generation=4 assigned=[]"
        assert replica_fetch_payload(1, 41, 40, [0, 1], False) == (
            "replica=1 acked_offset=41 hw=40 isr=[0 1] under_replicated=false"
        )
        assert replica_fetch_payload(2, 3, -1, [0], True) == (
            "replica=2 acked_offset=3 hw=-1 isr=[0] under_replicated=true"
        )
        assert (
            role_payload("orders", 1, "follower", 7)
            == "topic=orders partition=1 role=follower hw=7"
        )
        assert (
            role_payload("orders", 0, "leader", -1) == "topic=orders partition=0 role=leader hw=-1"
        )


def sdk_messages(line: bytes) -> tuple[list[tuple[int, str]], int]:
    """Parse a CONSUME reply the way the third-party SDK does (fields by ``key=``)."""
    payload = line.rstrip(b"\n").decode().split("|", 3)[3]
    messages = payload[payload.index("messages=") + len("messages=") :].split(" ", 1)[0]
    hw_start = payload.index(" hw=") + len(" hw=")
    hw = int(payload[hw_start:].split(" ", 1)[0])
    pairs = []
    for item in messages.split(",") if messages else []:
        offset, _, value = item.partition(":")
        pairs.append((int(offset), value))
    return pairs, hw


class ConsumeReplyTests:

    def test_spec_example(self) -> None:
        """Plain form: messages=<offset>:<value>,... hw=<n>."""
        line, count = consume_reply("44", [Rec(0, b"created"), Rec(1, b"paid")], 1)
        assert line == b"V1|44|OK|messages=0:created,1:paid hw=1\n"
        assert count == 2
        assert sdk_messages(line) == ([(0, "created"), (1, "paid")], 1)

    def test_empty(self) -> None:
        """With nothing to return the reply is messages= hw=<n>."""
        assert consume_reply("5", [], -1) == (b"V1|5|OK|messages= hw=-1\n", 0)
        assert consume_reply("5", [], 9) == (b"V1|5|OK|messages= hw=9\n", 0)

    def test_plain_values_that_are_allowed(self) -> None:
        """Empty values, ':' and non-ASCII UTF-8 travel plain."""
        records = [Rec(3, b""), Rec(4, b"a:b"), Rec(5, "\u00e9\u20ac".encode()), Rec(6, b"\x00")]
        line, count = consume_reply("1", records, 6)
        assert count == 4
        assert line == "V1|1|OK|messages=3:,4:a:b,5:\u00e9\u20ac,6:\x00 hw=6\n".encode()

    @pytest.mark.parametrize(
        "bad",
        [
            b"a,b",
            b"a b",
            b"a|b",
            b"a\nb",
            b"a\rb",
            b"\t",
            b"\xff",
            b"\xc3",
            "\u00a0".encode(),
            b"\xed\xa0\x80",
        ],
    )
    def test_plain_consume_stops_before_a_non_plain_value(self, bad: bytes) -> None:
        """A stored value that is not plain is never sent raw: the reply stops just before it."""
        records = [Rec(10, b"ok"), Rec(11, bad), Rec(12, b"later")]
        line, count = consume_reply("1", records, 12)
        assert (line, count) == (b"V1|1|OK|messages=10:ok hw=12\n", 1)

    @pytest.mark.parametrize("bad", [b"a,b", b"a b", b"a|b", b"\xff"])
    def test_plain_consume_starting_at_a_non_plain_value_is_bad_request(self, bad: bytes) -> None:
        """When the first value is not plain, CONSUME answers BAD_REQUEST naming the offset and enc=b64."""
        with pytest.raises(BadRequest) as info:
            consume_reply("1", [Rec(41, bad), Rec(42, b"ok")], 42)
        assert "41" in info.value.message and "enc=b64" in info.value.message
        assert "|" not in info.value.message

    def test_b64_encodes_every_value(self) -> None:
        """With enc=b64 every value is standard base64 with padding, even plain ones."""
        records = [Rec(0, b"created"), Rec(1, b"a b|c,d\n\xff"), Rec(2, b"")]
        line, count = consume_reply("9", records, 2, b64=True)
        assert count == 3
        assert line == b"V1|9|OK|messages=0:Y3JlYXRlZA==,1:YSBifGMsZAr/,2: hw=2\n"
        pairs, _ = sdk_messages(line)
        assert [base64.b64decode(v, validate=True) for _, v in pairs] == [
            r.payload for r in records
        ]

    def test_detail_form(self) -> None:
        """detail=true: <offset>:<timestamp_ms>:<key>:<value>; ms = us // 1000; no key -> empty."""
        records = [
            Rec(0, b"created", b"user1", 1_700_000_000_123_999),
            Rec(1, b"paid", None, 999),
        ]
        line, count = consume_reply("2", records, 1, detail=True)
        assert count == 2
        assert line == b"V1|2|OK|messages=0:1700000000123:user1:created,1:0::paid hw=1\n"

    def test_headers_form(self) -> None:
        """detail=true headers=true:
        <offset>:<timestamp_ms>:<producer_timestamp_ms>:<headers>:<key>:<value>: the
        producer's timestamp apart from the append time (the append time when it gave
        none), each header as <name b64>.<value b64> joined by ';' without the key's own
        header, key and value last (a plain value may hold ':')."""
        from data.format import KIND_RAW, KIND_STRING, encode_user_headers, key_header

        trace = encode_user_headers([(KIND_STRING, b"trace", KIND_RAW, b"\x00\x01"),
                                     (KIND_STRING, b"src", KIND_STRING, b"tank")])
        records = [
            Rec(0, b"a:b", b"k1", 1_795_782_611_488_000, 1_700_000_000_000_000,
                key_header(b"k1") + trace),
            Rec(1, b"v", None, 2_000_999, 0, b""),
        ]
        line, count = consume_reply("5", records, 1, detail=True, headers=True)
        assert count == 2
        assert line == (b"V1|5|OK|messages=0:1795782611488:1700000000000:dHJhY2U=.AAE=;"
                        b"c3Jj.dGFuaw==:k1:a:b,1:2000:2000:::v hw=1\n")
        line, _ = consume_reply("6", records[1:], 1, b64=True, detail=True, headers=True)
        assert line == b"V1|6|OK|messages=1:2000:2000:::dg== hw=1\n"

    def test_detail_b64_encodes_key_and_value(self) -> None:
        """detail=true with enc=b64 base64-encodes both the key and the value."""
        records = [Rec(7, b"v,1", b"k:1", 5000), Rec(8, b"x", None, 6000)]
        line, _ = consume_reply("3", records, 8, b64=True, detail=True)
        assert line == b"V1|3|OK|messages=7:5:azox:diwx,8:6::eA== hw=8\n"

    @pytest.mark.parametrize("bad_key", [b"k:1", b"k,1", b"k 1", b"\xff", b"k" * 256])
    def test_detail_plain_stops_before_a_non_plain_key(self, bad_key: bytes) -> None:
        """In plain detail mode a key that is not a plain key stops the reply like a value."""
        records = [Rec(0, b"a", b"k"), Rec(1, b"b", bad_key), Rec(2, b"c", b"k")]
        line, count = consume_reply("1", records, 2, detail=True)
        assert (line, count) == (b"V1|1|OK|messages=0:0:k:a hw=2\n", 1)
        with pytest.raises(BadRequest):
            consume_reply("1", records[1:], 2, detail=True)

    def test_detail_plain_key_of_255_bytes_is_sent(self) -> None:
        """A 255-byte key is still a plain key in detail mode."""
        line, count = consume_reply("1", [Rec(0, b"v", b"k" * 255)], 0, detail=True)
        assert count == 1 and b"k" * 255 in line

    def test_b64_never_refuses(self) -> None:
        """With enc=b64 any stored bytes can be returned, so nothing is refused or cut short."""
        records = [Rec(i, bytes([i]) * i, bytes([255 - i])) for i in range(50)]
        assert consume_reply("1", records, 49, b64=True)[1] == 50
        assert consume_reply("1", records, 49, b64=True, detail=True)[1] == 50


# --------------------------------------------------------------------------------------------
# The spec's Examples section, request and reply
# --------------------------------------------------------------------------------------------


class SpecExamplesTests:

    def test_examples(self) -> None:
        """Every example line of the spec parses as shown and its reply has the shown shape."""
        assert ok(parse(b"V1|1|PING|").cid) == b"V1|1|OK\n"  # type: ignore[union-attr]

        produce = parse(b"V1|42|PRODUCE|orders user1:created")
        assert produce == Produce("42", "orders", "user1", b"created", "1", None, False)
        assert ok(produce.cid, produce_payload(2, 0, 0)) == b"V1|42|OK|partition=2 offset=0 hw=0\n"  # type: ignore[union-attr]

        produce = parse(b"V1|43|PRODUCE|orders user1:paid acks=all")
        assert produce == Produce("43", "orders", "user1", b"paid", "all")
        assert ok("43", produce_payload(2, 1, 1)) == b"V1|43|OK|partition=2 offset=1 hw=1\n"

        assert parse(b"V1|44|CONSUME|orders 2 0") == Consume("44", "orders", 2, 0)
        line, _ = consume_reply("44", [Rec(0, b"created"), Rec(1, b"paid")], 1)
        assert line == b"V1|44|OK|messages=0:created,1:paid hw=1\n"

        assert parse(b"V1|45|JOIN|analytics orders consumer-a") == Join(
            "45", "analytics", "orders", "consumer-a"
        )
        assert (
            ok("45", assignment_payload(1, [0, 1, 2]))
            == b"V1|45|OK|generation=1 assigned=[0 1 2]\n"
        )

        assert parse(b"V1|46|COMMIT|analytics orders consumer-a 1 2 2") == Commit(
            "46", "analytics", "orders", "consumer-a", 1, 2, 2
        )
        assert ok("46", "committed=true") == b"V1|46|OK|committed=true\n"

        assert parse(b"V1|47|OFFSET|analytics orders 2") == Offset("47", "analytics", "orders", 2)
        assert ok("47", "offset=2") == b"V1|47|OK|offset=2\n"

        assert refusal(b"V1|48|PRODUCE|orders nocolon").reply() == (
            b"V1|48|ERR|BAD_REQUEST|message must be key:value\n"
        )
        assert refusal(b"V1|49|PRODUCE|orders a:b acks=2").reply() == (
            b"V1|49|ERR|BAD_REQUEST|invalid ack mode; expected acks=0, acks=1 or acks=all\n"
        )
        assert refusal(b"hello").reply().startswith(b"V1|0|ERR|BAD_REQUEST|")


DOCS = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def documented_exchanges() -> list[tuple[str, str]]:
    """(request, reply) pairs from docs/protocol.md: `req -> reply` lines and the nc session."""
    text = DOCS.read_text(encoding="utf-8")
    pairs = [
        (m.group(1), m.group(2))
        for m in re.finditer(r"^(V1\|\S*\|[A-Z_]+\|.*?)\s+->\s+(V1\|.*)$", text, re.M)
    ]
    session = text.split("$ nc 127.0.0.1 9092\n", 1)[1].split("```", 1)[0].splitlines()
    pairs.extend(zip(session[0::2], session[1::2], strict=True))
    return pairs


class DocsExamplesTests:

    def test_documented_requests_parse_as_their_replies_say(self) -> None:
        """Every example exchange in docs/protocol.md is consistent with the codec: an error
        the codec gives is shown exactly as the codec writes it, an error shown for a request
        the codec accepts is a handler-level one, a success parses and echoes the cid."""
        pairs = documented_exchanges()
        assert len(pairs) >= 35
        for request, reply in pairs:
            try:
                command = parse(request.encode())
            except CommandError as exc:
                assert exc.reply() == reply.encode() + b"\n", request
                continue
            assert command is not None, request
            if "|ERR|" in reply:
                assert reply.startswith(f"V1|{command.cid}|ERR|"), request
                assert reply.split("|")[3] in {"BAD_REQUEST", "GENERATION_MISMATCH", "NOT_LEADER"}
            else:
                assert reply.startswith(f"V1|{command.cid}|OK"), request
