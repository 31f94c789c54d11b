"""The V1 line-protocol codec: bytes of one request line in, a typed command out.

Owns: the exact wire contract of ``spec/v1-protocol.md`` as far as it can be checked without
state: the envelope (``V1|<cid>|<COMMAND>|<args>``), argument syntax and ranges (names,
numbers, ``key:value``, options), and the PRODUCE fast path, the faster branch of the same
parser (``Codec.match_produce``: a plain PRODUCE matched in place in the read buffer, no
line slicing, no command object; whatever it accepts ``parse_command`` accepts with the same
fields). Checks run in the spec's order: envelope -> command known -> argument syntax and
ranges. All of them answer BAD_REQUEST (UNKNOWN_COMMAND for the second); existence,
generation, membership and ownership are the handlers' business.

The rest of the V1 wire lives next door: the command classes in ``broker.v1.commands``, every
reply line in ``broker.v1.replies``, the line splitter in ``broker.v1.framing``. Their public
names are re-exported here, so ``from broker.v1.codec import Produce, err`` keeps working.

Must not import: Twisted, sockets, the store, ``groups`` or ``replication``; it does no I/O
and reads no clock. Only ``broker.errors`` is imported, for the error classes it raises.
"""

from __future__ import annotations

import binascii
import re
import struct
import sys
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, TypeAlias

from broker.errors import BadRequest, SkerryError, UnknownCommand
from broker.v1.commands import (
    ALL_COMMANDS,
    BAD_KEY_RE,
    BAD_VALUE_RE,
    CLUSTER_COMMANDS,
    COMMANDS,
    DATA_COMMANDS,
    MAX_INT,
    MAX_KEY_BYTES,
    MAX_NAME_CHARS,
    SECURITY_COMMANDS,
    VERSION,
    AdminAddPartitions,
    AdminAlterTopic,
    AdminCommit,
    AdminCreateTopic,
    AdminDeleteGroup,
    AdminDeleteTopic,
    AdminResetOffsets,
    Auth,
    Command,
    Commit,
    Consume,
    DescribeGroup,
    Fetch,
    Heartbeat,
    Join,
    Leave,
    ListGroups,
    Metadata,
    Offset,
    Offsets,
    Ping,
    Produce,
    ProduceBatch,
    ReplicaEpoch,
    ReplicaFetch,
    ReplicaPull,
    ReplicaStatus,
    SetPartitionRole,
    Sync,
    is_plain_key,
    is_plain_value,
)
from broker.v1.framing import LineSplitter, LineTooLong
from broker.v1.replies import (
    LINE_TOO_LONG_REPLY,
    assignment_payload,
    consume_reply,
    consume_reply_raw,
    err,
    fetch_raw_reply,
    fetch_reply,
    format_bool,
    format_list,
    ok,
    produce_batch_payload,
    produce_ok,
    produce_payload,
    replica_epoch_payload,
    replica_fetch_payload,
    replica_pull_reply,
    replica_status_payload,
    role_payload,
)

__all__ = [
    "AdminAddPartitions",
    "AdminCommit",
    "AdminCreateTopic",
    "AdminDeleteGroup",
    "AdminDeleteTopic",
    "AdminResetOffsets",
    "ALL_COMMANDS",
    "Auth",
    "SECURITY_COMMANDS",
    "CLUSTER_COMMANDS",
    "DATA_COMMANDS",
    "Fetch",
    "fetch_reply",
    "fetch_raw_reply",
    "decode_batch",
    "ProduceBatch",
    "produce_batch_payload",
    "COMMANDS",
    "Codec",
    "CodecLimits",
    "Command",
    "consume_reply_raw",
    "produce_ok",
    "AdminAlterTopic",
    "ACK_MODES",
    "FAST_ACKS",
    "PRODUCE_LINE_RE",
    "VERSION",
    "CommandError",
    "Commit",
    "Consume",
    "DescribeGroup",
    "Heartbeat",
    "Join",
    "LINE_TOO_LONG_REPLY",
    "Leave",
    "LineSplitter",
    "LineTooLong",
    "ListGroups",
    "MAX_INT",
    "MAX_KEY_BYTES",
    "MAX_NAME_CHARS",
    "Metadata",
    "Offset",
    "Offsets",
    "Ping",
    "Produce",
    "ReplicaEpoch",
    "ReplicaFetch",
    "ReplicaPull",
    "ReplicaStatus",
    "SetPartitionRole",
    "Sync",
    "assignment_payload",
    "consume_reply",
    "err",
    "format_bool",
    "format_list",
    "is_plain_key",
    "is_plain_value",
    "ok",
    "produce_payload",
    "replica_epoch_payload",
    "replica_fetch_payload",
    "replica_pull_reply",
    "replica_status_payload",
    "role_payload",
]


ACKS_MESSAGE = "invalid ack mode; expected acks=0, acks=1 or acks=all"
KEY_VALUE_MESSAGE = "message must be key:value"

_USAGE: dict[str, str] = {
    "PING": "PING",
    "PRODUCE": "PRODUCE <topic> <key>:<value> [acks=0, acks=1 or acks=all] [partition=<n>] [enc=b64] "
    "[pid=<producer id> seq=<n>]",
    "CONSUME": "CONSUME <topic> <partition> <offset> [max=<n>] [wait_ms=<ms>] [enc=b64] [detail=true]",
    "JOIN": "JOIN <group> <topic> <consumer_id> [assignor=round_robin, range or sticky] "
    "[session_timeout_ms=<ms>]",
    "SYNC": "SYNC <group> <topic> <consumer_id> <generation>",
    "HEARTBEAT": "HEARTBEAT <group> <topic> <consumer_id> <generation>",
    "LEAVE": "LEAVE <group> <topic> <consumer_id> <generation>",
    "COMMIT": "COMMIT <group> <topic> <consumer_id> <generation> <partition> <offset>",
    "OFFSET": "OFFSET <group> <topic> <partition>",
    "REPLICA_FETCH": "REPLICA_FETCH <topic> <partition> <replica_id> <offset>",
    "SET_PARTITION_ROLE": "SET_PARTITION_ROLE <topic> <partition> <leader or follower>",
    "ADMIN_CREATE_TOPIC": "ADMIN_CREATE_TOPIC <topic> <partitions> <replication_factor> "
    "[min_isr=<n>] [retention_ms=<ms>] [retention_bytes=<n>]",
    "ADMIN_DELETE_TOPIC": "ADMIN_DELETE_TOPIC <topic>",
    "ADMIN_ADD_PARTITIONS": "ADMIN_ADD_PARTITIONS <topic> <partitions>",
    "ADMIN_ALTER_TOPIC": "ADMIN_ALTER_TOPIC <topic> [retention_ms=<ms or none>] "
    "[retention_bytes=<n or none>]",
    "METADATA": "METADATA [<topic>]",
    "OFFSETS": "OFFSETS <topic> <partition> [ts=<ms>]",
    "DESCRIBE_GROUP": "DESCRIBE_GROUP <group> <topic>",
    "LIST_GROUPS": "LIST_GROUPS",
    "ADMIN_DELETE_GROUP": "ADMIN_DELETE_GROUP <group> <topic>",
    "ADMIN_RESET_OFFSETS": "ADMIN_RESET_OFFSETS <group> <topic> <earliest, latest or offset> "
    "[partition=<n>]",
    "ADMIN_COMMIT": "ADMIN_COMMIT <group> <topic> <partition> <offset>",
    "REPLICA_PULL": "REPLICA_PULL <topic> <partition> <replica_id> <offset> <epoch> "
    "[wait_ms=<ms>] [max_bytes=<n>]",
    "REPLICA_EPOCH": "REPLICA_EPOCH <topic> <partition> <replica_id> <epoch> [last_epoch=<n>]",
    "REPLICA_STATUS": "REPLICA_STATUS <topic> <partition>",
    "AUTH": "AUTH <user> <token>",
    "FETCH": "FETCH <topic> <partition> <offset> [max=<n>] [max_bytes=<n>] [enc=b64 or enc=raw]",
    "PRODUCE_BATCH": "PRODUCE_BATCH <topic> <partition> [acks=0, acks=1 or acks=all] "
    "[pid=<producer id> seq=<n>] data=<base64 batch>",
}
_POSITIONAL_COUNT: dict[str, int] = {
    "PING": 0,
    "PRODUCE": 2,
    "CONSUME": 3,
    "JOIN": 3,
    "SYNC": 4,
    "HEARTBEAT": 4,
    "LEAVE": 4,
    "COMMIT": 6,
    "OFFSET": 3,
    "REPLICA_FETCH": 4,
    "SET_PARTITION_ROLE": 3,
    "ADMIN_CREATE_TOPIC": 3,
    "ADMIN_DELETE_TOPIC": 1,
    "ADMIN_ADD_PARTITIONS": 2,
    "ADMIN_ALTER_TOPIC": 1,
    "OFFSETS": 2,
    "DESCRIBE_GROUP": 2,
    "LIST_GROUPS": 0,
    "ADMIN_DELETE_GROUP": 2,
    "ADMIN_RESET_OFFSETS": 3,
    "ADMIN_COMMIT": 4,
    "REPLICA_PULL": 5,
    "REPLICA_EPOCH": 4,
    "REPLICA_STATUS": 2,
    "AUTH": 2,
    "FETCH": 3,
    "PRODUCE_BATCH": 2,
}
_OPTIONS: dict[str, tuple[str, ...]] = {
    "PRODUCE": ("acks", "partition", "enc", "pid", "seq"),
    "CONSUME": ("max", "wait_ms", "enc", "detail"),
    "JOIN": ("assignor", "session_timeout_ms"),
    "ADMIN_CREATE_TOPIC": ("min_isr", "retention_ms", "retention_bytes"),
    "ADMIN_ALTER_TOPIC": ("retention_ms", "retention_bytes"),
    "OFFSETS": ("ts",),
    "ADMIN_RESET_OFFSETS": ("partition",),
    "REPLICA_PULL": ("wait_ms", "max_bytes"),
    "REPLICA_EPOCH": ("last_epoch",),
    "FETCH": ("max", "max_bytes", "enc"),
    "PRODUCE_BATCH": ("acks", "pid", "seq", "data"),
}

ASSIGNORS = ("round_robin", "range", "sticky")
ROLES = ("leader", "follower")
ACK_MODES = ("0", "1", "all")


class CommandError(Exception):
    """A request line refused by the codec; the broker answers ``err(e.cid, e.error)``.

    ``cid`` is ``"0"`` when the envelope itself was unreadable, else the request's correlation
    id. ``error`` is a ``BadRequest`` or an ``UnknownCommand``.
    """

    def __init__(self, cid: str, error: SkerryError) -> None:
        super().__init__(cid, error)
        self.cid = cid
        self.error = error

    def __str__(self) -> str:
        return f"cid={self.cid} {self.error.code}: {self.error.message}"

    def reply(self) -> bytes:
        """The complete error line for this refusal (with the trailing newline)."""
        return err(self.cid, self.error)


@dataclass(frozen=True)
class CodecLimits:
    """Limits the codec enforces while parsing.

    ``max_message_bytes`` bounds a PRODUCE value in bytes (after base64 decoding).
    """

    max_message_bytes: int = 1048576

    def __post_init__(self) -> None:
        if self.max_message_bytes < 0:
            raise ValueError(f"max_message_bytes must be >= 0, got {self.max_message_bytes}")


_DEFAULT_LIMITS = CodecLimits()

# --------------------------------------------------------------------------------------------
# Field validation
# --------------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,249}")
_SHOW_CHARS = 40


def _show(text: str) -> str:
    """A short, quoted, escaped rendering of client input for an error message."""
    if len(text) > _SHOW_CHARS:
        return repr(text[:_SHOW_CHARS]) + "..."
    return repr(text)


def _describe_char(char: str) -> str:
    if char == "|":
        return "a pipe character"
    if char.isspace():
        return f"whitespace U+{ord(char):04X}"
    return repr(char)


def _name(text: str, what: str) -> str:
    """A topic, group or consumer id: 1-249 chars of [A-Za-z0-9._-], not '.' or '..'."""
    if text.isalnum() and text.isascii() and len(text) <= MAX_NAME_CHARS:
        return text
    if _NAME_RE.fullmatch(text) is not None and text != "." and text != "..":
        return text
    raise BadRequest(
        f"invalid {what} {_show(text)}; names are 1 to {MAX_NAME_CHARS} characters of "
        "A-Z a-z 0-9 . _ - and not '.' or '..'"
    )


def _uint(text: str, what: str) -> int:
    """A numeric field: ASCII digits only, at most 2**63-1."""
    if len(text) <= 18 and text.isdigit() and text.isascii():
        return int(text)
    if not (text.isdigit() and text.isascii()):
        raise BadRequest(
            f"{what} must be a non-negative integer (digits 0-9 only), got {_show(text)}"
        )
    # Leading zeros are digits too; strip them before the size check so int() never sees a
    # string long enough to trip Python's int-parsing limit.
    significant = text.lstrip("0")
    if len(significant) > 19 or int(significant or "0") > MAX_INT:
        raise BadRequest(f"{what} is too large; the maximum is {MAX_INT}")
    return int(significant or "0")


def _uint_min(text: str, what: str, minimum: int) -> int:
    value = _uint(text, what)
    if value < minimum:
        raise BadRequest(f"{what} must be at least {minimum}, got {value}")
    return value


def _key(key: str) -> str:
    """A PRODUCE key: at most 255 UTF-8 bytes, no whitespace, '|', ',' or ':'."""
    if key.isprintable() and "," not in key and (len(key) * 4 <= MAX_KEY_BYTES or _short_key(key)):
        return key  # space, '|' and ':' cannot reach here: the line split removed them
    match = BAD_KEY_RE.search(key)
    if match is not None:
        raise BadRequest(
            f"key contains {_describe_char(match.group())} at position {match.start()}; "
            "keys may not contain whitespace, a comma, a pipe or a colon"
        )
    if not _short_key(key):
        raise BadRequest(f"key is {len(key.encode())} bytes; the maximum is {MAX_KEY_BYTES}")
    return key


def _short_key(key: str) -> bool:
    return len(key) <= MAX_KEY_BYTES and (key.isascii() or len(key.encode()) <= MAX_KEY_BYTES)


def _plain_value_error(value: str) -> None:
    """Raise BadRequest naming the first character that keeps ``value`` from being plain."""
    match = BAD_VALUE_RE.search(value)
    if match is not None:
        raise BadRequest(
            f"value contains {_describe_char(match.group())} at position {match.start()}; "
            "send it with enc=b64"
        )


def _b64decode(text: str, what: str, form: str = "enc=b64") -> bytes:
    """Strict standard base64 with padding; the canonical encoding only. Only the last
    quantum can carry non-zero padding bits, so only it is encoded again to check."""
    try:
        data = binascii.a2b_base64(text, strict_mode=True)
    except ValueError as exc:  # binascii.Error, or non-ASCII input
        raise BadRequest(
            f"{what} is not valid base64 ({exc}); {form} expects standard base64 with padding"
        ) from None
    tail = len(data) % 3
    if tail and binascii.b2a_base64(data[-tail:], newline=False) != text[-4:].encode():
        raise BadRequest(f"{what} is not canonical base64 (non-zero padding bits); {form}")
    return data


def _enc(value: str) -> bool:
    if value == "b64":
        return True
    raise BadRequest(f"invalid encoding {_show(value)}; expected enc=b64")


def _bool(value: str, option: str) -> bool:
    if value == "true":
        return True
    if value == "false":
        return False
    raise BadRequest(f"invalid {option} {_show(value)}; expected {option}=true or {option}=false")



# --------------------------------------------------------------------------------------------
# Argument splitting
# --------------------------------------------------------------------------------------------

_NO_OPTIONS: dict[str, str] = {}


def _tokens(args: str) -> list[str]:
    """Arguments separated by runs of spaces; leading and trailing spaces are ignored."""
    tokens = args.split(" ")
    if "" in tokens:
        tokens = [token for token in tokens if token]
    return tokens


def _wrong_count(command: str, got: int) -> BadRequest:
    want = _POSITIONAL_COUNT.get(command, 0)
    return BadRequest(
        f"{command} expects {want} positional argument{'s' if want != 1 else ''}, got {got}; "
        f"usage: {_USAGE[command]}"
    )


def _options(command: str, tokens: list[str], start: int) -> dict[str, str]:
    """``name=value`` options after the positionals: known, each at most once."""
    allowed = _OPTIONS.get(command, ())
    options: dict[str, str] = {}
    for token in tokens[start:]:
        option, eq, value = token.partition("=")
        if not eq:
            if allowed:
                hint = f"only name=value options may follow the {start} positional arguments"
            else:
                hint = f"{command} takes exactly {start} positional arguments and no options"
            raise BadRequest(
                f"unexpected argument {_show(token)}; {hint}; usage: {_USAGE[command]}"
            )
        if option not in allowed:
            known = ", ".join(allowed) if allowed else "none"
            raise BadRequest(
                f"unknown option {_show(option)} for {command} (known options: {known}); "
                f"usage: {_USAGE[command]}"
            )
        if option in options:
            raise BadRequest(f"option {option} given more than once")
        options[option] = value
    return options


def _split(command: str, args: str) -> tuple[list[str], dict[str, str]]:
    """Positionals (exactly the command's count) and options."""
    count = _POSITIONAL_COUNT[command]
    tokens = _tokens(args)
    if len(tokens) < count:
        raise _wrong_count(command, len(tokens))
    if len(tokens) == count:
        return tokens, _NO_OPTIONS
    return tokens, _options(command, tokens, count)


# --------------------------------------------------------------------------------------------
# Parsers (one per command; the hot ones are written out for speed)
# --------------------------------------------------------------------------------------------


def _parse_ping(cid: str, args: str) -> Ping:
    if args and _tokens(args):
        _options("PING", _tokens(args), 0)
    return Ping(cid)


def _parse_list_groups(cid: str, args: str) -> ListGroups:
    if args and _tokens(args):
        _options("LIST_GROUPS", _tokens(args), 0)
    return ListGroups(cid)


def _parse_join(cid: str, args: str) -> Join:
    tokens, options = _split("JOIN", args)
    group = _name(tokens[0], "group")
    topic = _name(tokens[1], "topic")
    member_id = _name(tokens[2], "consumer id")
    assignor = options.get("assignor")
    if assignor is not None and assignor not in ASSIGNORS:
        raise BadRequest(
            f"unknown assignor {_show(assignor)}; expected assignor=round_robin, "
            "assignor=range or assignor=sticky"
        )
    timeout = options.get("session_timeout_ms")
    session_timeout_ms = None if timeout is None else _uint(timeout, "session_timeout_ms")
    return Join(cid, group, topic, member_id, assignor, session_timeout_ms)


def _member_fields(command: str, args: str) -> tuple[list[str], str, str, str, int]:
    tokens, _ = _split(command, args)
    return (
        tokens,
        _name(tokens[0], "group"),
        _name(tokens[1], "topic"),
        _name(tokens[2], "consumer id"),
        _uint(tokens[3], "generation"),
    )


def _parse_sync(cid: str, args: str) -> Sync:
    _, group, topic, member_id, generation = _member_fields("SYNC", args)
    return Sync(cid, group, topic, member_id, generation)


def _parse_heartbeat(cid: str, args: str) -> Heartbeat:
    _, group, topic, member_id, generation = _member_fields("HEARTBEAT", args)
    return Heartbeat(cid, group, topic, member_id, generation)


def _parse_leave(cid: str, args: str) -> Leave:
    _, group, topic, member_id, generation = _member_fields("LEAVE", args)
    return Leave(cid, group, topic, member_id, generation)


def _parse_commit(cid: str, args: str) -> Commit:
    tokens, group, topic, member_id, generation = _member_fields("COMMIT", args)
    partition = _uint(tokens[4], "partition")
    offset = _uint(tokens[5], "offset")
    return Commit(cid, group, topic, member_id, generation, partition, offset)


def _parse_offset(cid: str, args: str) -> Offset:
    tokens, _ = _split("OFFSET", args)
    return Offset(
        cid, _name(tokens[0], "group"), _name(tokens[1], "topic"), _uint(tokens[2], "partition")
    )


def _parse_replica_fetch(cid: str, args: str) -> ReplicaFetch:
    tokens, _ = _split("REPLICA_FETCH", args)
    return ReplicaFetch(
        cid,
        _name(tokens[0], "topic"),
        _uint(tokens[1], "partition"),
        _uint(tokens[2], "replica_id"),
        _uint(tokens[3], "offset"),
    )


def _parse_set_partition_role(cid: str, args: str) -> SetPartitionRole:
    tokens, _ = _split("SET_PARTITION_ROLE", args)
    topic = _name(tokens[0], "topic")
    partition = _uint(tokens[1], "partition")
    role = tokens[2]
    if role not in ROLES:
        raise BadRequest(f"invalid role {_show(role)}; expected leader or follower")
    return SetPartitionRole(cid, topic, partition, role)


def _optional_uint(options: dict[str, str], option: str, minimum: int = 0) -> int | None:
    text = options.get(option)
    if text is None:
        return None
    return _uint_min(text, option, minimum)


def _producer_fields(options: dict[str, str]) -> tuple[str | None, int | None]:
    """Additive idempotent produce: ``pid=<name> seq=<n>``, both or neither."""
    pid = options.get("pid")
    seq_text = options.get("seq")
    if pid is None and seq_text is None:
        return None, None
    if pid is None or seq_text is None:
        raise BadRequest("pid= and seq= go together (idempotent produce); give both or neither")
    return _name(pid, "pid"), _uint(seq_text, "seq")


def _parse_fetch(cid: str, args: str) -> Fetch:
    tokens, options = _split("FETCH", args)
    return Fetch(
        cid,
        _name(tokens[0], "topic"),
        _uint(tokens[1], "partition"),
        _uint(tokens[2], "offset"),
        _optional_uint(options, "max", 1),
        _optional_uint(options, "max_bytes", 1),
        _fetch_raw(options.get("enc")),
    )


def _fetch_raw(encoding: str | None) -> bool:
    if encoding is None or encoding == "b64":
        return False
    if encoding == "raw":
        return True
    raise BadRequest(f"invalid encoding {_show(encoding)}; expected enc=b64 or enc=raw")


_BATCH_COUNT = struct.Struct("<I")


def decode_batch(data: bytes, max_value_bytes: int) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """``(keys, values)`` of a PRODUCE_BATCH batch (after base64), little-endian::

        count u32 | key lengths (count x u8) | value lengths (count x u32) |
        keys back to back | values back to back

    Columnar, so a client builds it from Arrow-style buffers without a loop per message and
    the broker splits it with C-level slicing. An empty key is no key. ``BadRequest`` when
    the lengths do not add up to exactly the batch, for no messages, or for a value over
    ``max_value_bytes``.
    """
    size = len(data)
    if size < 4:
        raise BadRequest(f"batch of {size} bytes is shorter than its 4-byte message count")
    (count,) = _BATCH_COUNT.unpack_from(data)
    if count == 0:
        raise BadRequest("a batch holds at least one message")
    head = 4 + 5 * count
    if head > size:
        raise BadRequest(f"batch of {size} bytes is too short for the lengths of {count} messages")
    value_lengths = array("I", data[4 + count:head])
    if value_lengths.itemsize != 4:  # pragma: no cover - every platform Skerry runs on
        value_lengths = array("L", data[4 + count:head])
    if sys.byteorder == "big":  # pragma: no cover
        value_lengths.byteswap()
    key_ends = list(accumulate(data[4:4 + count], initial=head))
    value_ends = list(accumulate(value_lengths, initial=key_ends[-1]))
    if value_ends[-1] != size:
        raise BadRequest(f"the lengths of the batch's {count} messages add up to {value_ends[-1]} "
                         f"bytes; the batch has {size}")
    largest = max(value_lengths)
    if largest > max_value_bytes:
        raise _too_big(largest, max_value_bytes)
    cut = data.__getitem__
    keys = tuple(map(cut, map(slice, key_ends, key_ends[1:])))
    values = tuple(map(cut, map(slice, value_ends, value_ends[1:])))
    return keys, values


def _parse_admin_create_topic(cid: str, args: str) -> AdminCreateTopic:
    tokens, options = _split("ADMIN_CREATE_TOPIC", args)
    return AdminCreateTopic(
        cid,
        _name(tokens[0], "topic"),
        _uint_min(tokens[1], "partitions", 1),
        _uint_min(tokens[2], "replication_factor", 1),
        _optional_uint(options, "min_isr", 1),
        _optional_uint(options, "retention_ms", 1),
        _optional_uint(options, "retention_bytes", 1),
    )


def _parse_admin_delete_topic(cid: str, args: str) -> AdminDeleteTopic:
    tokens, _ = _split("ADMIN_DELETE_TOPIC", args)
    return AdminDeleteTopic(cid, _name(tokens[0], "topic"))


def _parse_admin_add_partitions(cid: str, args: str) -> AdminAddPartitions:
    tokens, _ = _split("ADMIN_ADD_PARTITIONS", args)
    return AdminAddPartitions(cid, _name(tokens[0], "topic"), _uint_min(tokens[1], "partitions", 1))


def _parse_admin_alter_topic(cid: str, args: str) -> AdminAlterTopic:
    tokens, options = _split("ADMIN_ALTER_TOPIC", args)
    topic = _name(tokens[0], "topic")
    if not options:
        raise BadRequest("nothing to alter; usage: " + _USAGE["ADMIN_ALTER_TOPIC"])
    changes = tuple((option, None if text == "none" else _uint_min(text, option, 1))
                    for option, text in sorted(options.items()))
    return AdminAlterTopic(cid, topic, changes)


def _parse_metadata(cid: str, args: str) -> Metadata:
    tokens = _tokens(args)
    if not tokens:
        return Metadata(cid, None)
    if "=" in tokens[0]:  # no topic given; METADATA has no options
        _options("METADATA", tokens, 0)
    if len(tokens) > 1:
        raise BadRequest(
            f"METADATA takes at most one argument, got {len(tokens)}; usage: {_USAGE['METADATA']}"
        )
    return Metadata(cid, _name(tokens[0], "topic"))


def _parse_offsets(cid: str, args: str) -> Offsets:
    tokens, options = _split("OFFSETS", args)
    return Offsets(
        cid, _name(tokens[0], "topic"), _uint(tokens[1], "partition"), _optional_uint(options, "ts")
    )


def _parse_describe_group(cid: str, args: str) -> DescribeGroup:
    tokens, _ = _split("DESCRIBE_GROUP", args)
    return DescribeGroup(cid, _name(tokens[0], "group"), _name(tokens[1], "topic"))


def _parse_admin_delete_group(cid: str, args: str) -> AdminDeleteGroup:
    tokens, _ = _split("ADMIN_DELETE_GROUP", args)
    return AdminDeleteGroup(cid, _name(tokens[0], "group"), _name(tokens[1], "topic"))


def _parse_admin_reset_offsets(cid: str, args: str) -> AdminResetOffsets:
    tokens, options = _split("ADMIN_RESET_OFFSETS", args)
    group = _name(tokens[0], "group")
    topic = _name(tokens[1], "topic")
    text = tokens[2]
    target: str | int
    if text == "earliest" or text == "latest":
        target = text
    elif text.isdigit() and text.isascii():
        target = _uint(text, "offset")
    else:
        raise BadRequest(
            f"invalid reset target {_show(text)}; expected earliest, latest or an offset"
        )
    return AdminResetOffsets(cid, group, topic, target, _optional_uint(options, "partition"))


def _parse_admin_commit(cid: str, args: str) -> AdminCommit:
    tokens, _ = _split("ADMIN_COMMIT", args)
    return AdminCommit(
        cid,
        _name(tokens[0], "group"),
        _name(tokens[1], "topic"),
        _uint(tokens[2], "partition"),
        _uint(tokens[3], "offset"),
    )


def _parse_replica_pull(cid: str, args: str) -> ReplicaPull:
    tokens, options = _split("REPLICA_PULL", args)
    return ReplicaPull(
        cid,
        _name(tokens[0], "topic"),
        _uint(tokens[1], "partition"),
        _uint(tokens[2], "replica_id"),
        _uint(tokens[3], "offset"),
        _uint(tokens[4], "epoch"),
        _optional_uint(options, "wait_ms"),
        _optional_uint(options, "max_bytes", 1),
    )


def _parse_replica_epoch(cid: str, args: str) -> ReplicaEpoch:
    tokens, options = _split("REPLICA_EPOCH", args)
    return ReplicaEpoch(
        cid,
        _name(tokens[0], "topic"),
        _uint(tokens[1], "partition"),
        _uint(tokens[2], "replica_id"),
        _uint(tokens[3], "epoch"),
        _optional_uint(options, "last_epoch"),
    )


def _parse_auth(cid: str, args: str) -> Auth:
    """``AUTH <user> <token>``; no error message ever repeats the token."""
    tokens = _tokens(args)
    if len(tokens) != 2:
        raise BadRequest(f"AUTH expects 2 positional arguments, got {len(tokens)}; "
                         f"usage: {_USAGE['AUTH']}")
    return Auth(cid, _name(tokens[0], "user"), tokens[1])


def _parse_replica_status(cid: str, args: str) -> ReplicaStatus:
    tokens, _ = _split("REPLICA_STATUS", args)
    return ReplicaStatus(cid, _name(tokens[0], "topic"), _uint(tokens[1], "partition"))


_Parser: TypeAlias = Callable[[str, str], Any]


# The common PRODUCE shape, validated in one C-level match (see Codec.parse_produce_fast):
# printable ASCII only, single spaces, optional acks=. Key: no ',', '|' or ':'; value: no
# ',' or '|'; cid: no '|'. PRODUCE_LINE_RE also matches the line's terminator, so the
# transport can walk a whole read with ``match(buf, pos)`` without slicing lines.
_FAST_CID = rb"([\x21-\x7b\x7d\x7e]+)"
_FAST_TOPIC = rb"([A-Za-z0-9._-]{1,249})"
_FAST_KEY = rb"([\x21-\x2b\x2d-\x39\x3b-\x7b\x7d\x7e]{0,255})"
_FAST_VALUE = rb"([\x21-\x2b\x2d-\x7b\x7d\x7e]*)"
_FAST_BODY = (rb"V1\|" + _FAST_CID + rb"\|PRODUCE\|" + _FAST_TOPIC + rb" " + _FAST_KEY + rb":"
              + _FAST_VALUE + rb"(?: acks=(0|1|all))?\r?")
_PRODUCE_FAST_RE = re.compile(_FAST_BODY)
PRODUCE_LINE_RE = re.compile(_FAST_BODY + rb"\n")
_match_produce_line = PRODUCE_LINE_RE.match
FAST_ACKS = {None: "1", b"0": "0", b"1": "1", b"all": "all"}


class Codec:
    """Parses request lines into commands under a set of ``CodecLimits``."""

    __slots__ = ("limits", "_max_value", "_max_b64_chars", "_parsers")

    def __init__(self, limits: CodecLimits = _DEFAULT_LIMITS) -> None:
        self.limits = limits
        self._max_value = limits.max_message_bytes
        self._max_b64_chars = 4 * ((limits.max_message_bytes + 2) // 3)
        self._parsers: dict[str, _Parser] = {
            "PING": _parse_ping,
            "PRODUCE": self._parse_produce,
            "CONSUME": _parse_consume,
            "JOIN": _parse_join,
            "SYNC": _parse_sync,
            "HEARTBEAT": _parse_heartbeat,
            "LEAVE": _parse_leave,
            "COMMIT": _parse_commit,
            "OFFSET": _parse_offset,
            "REPLICA_FETCH": _parse_replica_fetch,
            "SET_PARTITION_ROLE": _parse_set_partition_role,
            "ADMIN_CREATE_TOPIC": _parse_admin_create_topic,
            "ADMIN_DELETE_TOPIC": _parse_admin_delete_topic,
            "ADMIN_ADD_PARTITIONS": _parse_admin_add_partitions,
            "ADMIN_ALTER_TOPIC": _parse_admin_alter_topic,
            "METADATA": _parse_metadata,
            "OFFSETS": _parse_offsets,
            "DESCRIBE_GROUP": _parse_describe_group,
            "LIST_GROUPS": _parse_list_groups,
            "ADMIN_DELETE_GROUP": _parse_admin_delete_group,
            "ADMIN_RESET_OFFSETS": _parse_admin_reset_offsets,
            "ADMIN_COMMIT": _parse_admin_commit,
            "REPLICA_PULL": _parse_replica_pull,
            "REPLICA_EPOCH": _parse_replica_epoch,
            "REPLICA_STATUS": _parse_replica_status,
            "AUTH": _parse_auth,
            "FETCH": _parse_fetch,
            "PRODUCE_BATCH": self._parse_produce_batch,
        }
        assert self._parsers.keys() == ALL_COMMANDS.keys() | SECURITY_COMMANDS.keys()

    def parse_produce_fast(self, line: bytes) -> tuple[bytes, bytes, bytes, bytes, str] | None:
        """The hot path: ``(cid, topic, key, value, acks)`` for a plain, printable-ASCII
        PRODUCE line in its common shape (single spaces, optionally ``acks=``), or None.

        None means "not this shape", never "invalid": the caller then uses
        ``parse_command``, which gives the same command or the precise error. Whatever this
        accepts, ``parse_command`` accepts with the same fields (a property test pins it).
        """
        match = _PRODUCE_FAST_RE.fullmatch(line)
        if match is None or not self.fast_match_ok(match):
            return None
        cid, topic, key, value, acks = match.groups()
        return cid, topic, key, value, FAST_ACKS[acks]

    def match_produce(self, buffer: bytes, pos: int) -> re.Match[bytes] | None:
        """The fast path over a read buffer: the plain PRODUCE line (``\\n`` included) that
        starts at ``pos``, or None for "not this shape" (the framer then cuts the line and
        ``parse_command`` reads it). ``match.groups()`` is ``(cid, topic, key, value,
        acks)``, with acks as on the wire or None (``FAST_ACKS`` maps them). Matching in
        place is what keeps pipelined PRODUCE fast: no line is sliced, no command built."""
        match = _match_produce_line(buffer, pos)
        if match is None or not self.fast_match_ok(match):
            return None
        return match

    def fast_match_ok(self, match: re.Match[bytes]) -> bool:
        """The rules the fast regex cannot say: value size and the names '.'/'..'. Topics
        starting with ``__`` take the full path too, where the handlers check reserved
        names (``broker.v1.handlers``)."""
        if match.end(4) - match.start(4) > self._max_value:
            return False
        if match.string.startswith(b"__", match.start(2)):
            return False
        return match.end(2) - match.start(2) > 2 or match.group(2).strip(b".") != b""

    def parse_command(self, line: bytes) -> Command | None:
        """Parse one request line given WITHOUT its ``\\n`` terminator.

        One trailing ``\\r`` is stripped; an empty line gives None (the spec ignores blank
        lines). Otherwise returns a command object or raises ``CommandError``.
        """
        if line[-1:] == b"\r":
            line = line[:-1]
        if not line:
            return None
        try:
            text = line.decode()
        except UnicodeDecodeError:
            raise self._undecodable(line) from None
        fields = text.split("|")
        if len(fields) != 4:
            raise CommandError("0", _field_count_error(len(fields)))
        version, cid, command, args = fields
        if version != VERSION:
            raise CommandError("0", _version_error(version))
        if not cid:
            raise CommandError("0", BadRequest("empty correlation id"))
        if "\n" in cid or "\r" in cid:
            raise CommandError("0", _cid_line_break())
        parser = self._parsers.get(command)
        if parser is None:
            if not command:
                raise CommandError("0", BadRequest("empty command"))
            raise CommandError(cid, _unknown_command(command))
        try:
            return parser(cid, args)
        except BadRequest as exc:
            raise CommandError(cid, exc) from None

    def _undecodable(self, line: bytes) -> CommandError:
        """The error for a line that is not valid UTF-8, in check order."""
        fields = line.split(b"|")
        if len(fields) != 4:
            return CommandError("0", _field_count_error(len(fields)))
        version, raw_cid, raw_command, raw_args = fields
        if version != b"V1":
            return CommandError("0", _version_error(version.decode(errors="replace")))
        if not raw_cid:
            return CommandError("0", BadRequest("empty correlation id"))
        try:
            cid = raw_cid.decode()
        except UnicodeDecodeError as exc:
            return CommandError("0", _utf8_error("correlation id", exc))
        if "\n" in cid or "\r" in cid:
            return CommandError("0", _cid_line_break())
        if not raw_command:
            return CommandError("0", BadRequest("empty command"))
        try:
            command = raw_command.decode()
        except UnicodeDecodeError as exc:
            return CommandError(cid, _utf8_error("command", exc))
        if command not in self._parsers:
            return CommandError(cid, _unknown_command(command))
        try:
            raw_args.decode()
        except UnicodeDecodeError as exc:
            return CommandError(
                cid, _utf8_error("arguments", exc, hint="; send binary values with enc=b64")
            )
        raise AssertionError("undecodable line whose fields all decode")  # pragma: no cover

    def _parse_produce_batch(self, cid: str, args: str) -> ProduceBatch:
        tokens, options = _split("PRODUCE_BATCH", args)
        topic = _name(tokens[0], "topic")
        partition = _uint(tokens[1], "partition")
        acks = options.get("acks", "1")
        if acks not in ACK_MODES:
            raise BadRequest(ACKS_MESSAGE)
        pid, seq = _producer_fields(options)
        text = options.get("data")
        if text is None:
            raise BadRequest(f"PRODUCE_BATCH needs data=<base64 batch>; usage: {_USAGE['PRODUCE_BATCH']}")
        keys, values = decode_batch(_b64decode(text, "data", "PRODUCE_BATCH"), self._max_value)
        return ProduceBatch(cid, topic, partition, keys, values, acks, pid, seq)

    def _parse_produce(self, cid: str, args: str) -> Produce:
        tokens = args.split(" ")
        if "" in tokens:
            tokens = [token for token in tokens if token]
        count = len(tokens)
        if count < 2:
            raise _wrong_count("PRODUCE", count)
        topic = tokens[0]
        if not (topic.isalnum() and topic.isascii() and len(topic) <= MAX_NAME_CHARS):
            _name(topic, "topic")
        key, colon, value = tokens[1].partition(":")
        if not colon:
            raise BadRequest(KEY_VALUE_MESSAGE)
        if key:
            _key(key)
        acks = "1"
        partition = None
        b64 = False
        if count > 2:
            options = _options("PRODUCE", tokens, 2)
            mode = options.get("acks")
            if mode is not None:
                if mode not in ACK_MODES:
                    raise BadRequest(ACKS_MESSAGE)
                acks = mode
            text = options.get("partition")
            if text is not None:
                partition = _uint(text, "partition")
            encoding = options.get("enc")
            if encoding is not None:
                b64 = _enc(encoding)
            pid, seq = _producer_fields(options)
        else:
            pid = seq = None
        if b64:
            if len(value) > self._max_b64_chars:
                raise _too_big(len(value) * 3 // 4, self._max_value)
            data = _b64decode(value, "value")
        else:
            if not (value.isprintable() and "," not in value):
                _plain_value_error(value)
            data = value.encode()
        if len(data) > self._max_value:
            raise _too_big(len(data), self._max_value)
        return Produce(cid, topic, key, data, acks, partition, b64, pid, seq)


def _parse_consume(cid: str, args: str) -> Consume:
    tokens = args.split(" ")
    if "" in tokens:
        tokens = [token for token in tokens if token]
    count = len(tokens)
    if count < 3:
        raise _wrong_count("CONSUME", count)
    topic = tokens[0]
    if not (topic.isalnum() and topic.isascii() and len(topic) <= MAX_NAME_CHARS):
        _name(topic, "topic")
    partition = _uint(tokens[1], "partition")
    offset = _uint(tokens[2], "offset")
    if count == 3:
        return Consume(cid, topic, partition, offset)
    options = _options("CONSUME", tokens, 3)
    encoding = options.get("enc")
    detail = options.get("detail")
    return Consume(
        cid,
        topic,
        partition,
        offset,
        _optional_uint(options, "max", 1),
        _optional_uint(options, "wait_ms"),
        False if encoding is None else _enc(encoding),
        False if detail is None else _bool(detail, "detail"),
    )


def _field_count_error(count: int) -> BadRequest:
    hint = (
        "a value containing a pipe character must be sent with enc=b64"
        if count > 4
        else "a command without arguments still ends with a pipe"
    )
    return BadRequest(
        "malformed envelope: expected 4 pipe-separated fields (V1, correlation id, command, "
        f"arguments), got {count}; {hint}"
    )


def _cid_line_break() -> BadRequest:
    # The cid is echoed verbatim, so a line break in it would split the reply line.
    return BadRequest("correlation id contains a line break")


def _version_error(version: str) -> BadRequest:
    return BadRequest(f"unsupported protocol version {_show(version)}; expected V1")


def _unknown_command(command: str) -> UnknownCommand:
    return UnknownCommand(f"unknown command {_show(command)}; commands are upper case, e.g. PING")


def _utf8_error(what: str, exc: UnicodeDecodeError, hint: str = "") -> BadRequest:
    byte = exc.object[exc.start]
    return BadRequest(
        f"invalid UTF-8 in the {what} (byte 0x{byte:02x} at position {exc.start}){hint}"
    )


def _too_big(size: int, limit: int) -> BadRequest:
    return BadRequest(f"value is {size} bytes; the maximum message size is {limit} bytes")
