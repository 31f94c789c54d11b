"""V1 argument syntax: the checks of one field of a request, with the error each one gives.

Owns: each command's argument grammar (usage line, positional count, known options), splitting
arguments into positionals and ``name=value`` options, and the field checks the parsers
share: names, numbers, keys, plain values, strict base64, ``enc=`` and booleans. Every check
raises ``BadRequest`` with a message that names the field and quotes the client's input
(``show``: short, escaped).

Must not import: Twisted, sockets, the store, ``groups``, ``replication``, or the codec
(``broker.v1.codec`` imports this module); only ``broker.errors`` and ``broker.v1.codec.commands``.
"""

from __future__ import annotations

import binascii
import re

from broker.errors import BadRequest
from broker.v1.codec.commands import (
    BAD_KEY_RE,
    BAD_VALUE_RE,
    MAX_INT,
    MAX_KEY_BYTES,
    MAX_NAME_CHARS,
)
from data.names import is_valid_name

__all__ = [
    "b64decode",
    "broker_ids",
    "host",
    "boolean",
    "encoding",
    "key",
    "name",
    "OPTIONS",
    "options",
    "plain_value_error",
    "POSITIONAL_COUNT",
    "show",
    "split_args",
    "split_tokens",
    "uint",
    "uint_min",
    "USAGE",
    "wrong_count",
]

USAGE: dict[str, str] = {
    "PING": "PING",
    "PRODUCE": "PRODUCE <topic> <key>:<value> [acks=0, acks=1 or acks=all] [partition=<n>] [enc=b64] "
    "[pid=<producer id> seq=<n>]",
    "CONSUME": "CONSUME <topic> <partition> <offset> [max=<n>] [wait_ms=<ms>] [enc=b64] [detail=true] "
               "[headers=true]",
    "JOIN": "JOIN <group> <topic> <consumer_id> [assignor=round_robin, range or sticky] "
    "[session_timeout_ms=<ms>]",
    "SYNC": "SYNC <group> <topic> <consumer_id> <generation>",
    "GROUP_HEARTBEAT": "GROUP_HEARTBEAT <group> <member_id> <member_epoch, leave or "
    "leave_static> [topics=<t>,...] [regex=<re>] [enc=b64] "
    "[assignor=uniform or range] [rebalance_timeout_ms=<ms>] [instance=<id>] "
    "[owned=<topic>:<partition>,...]",
    "HEARTBEAT": "HEARTBEAT <group> <topic> <consumer_id> <generation>",
    "LEAVE": "LEAVE <group> <topic> <consumer_id> <generation>",
    "COMMIT": "COMMIT <group> <topic> <consumer_id> <generation> <partition> <offset>",
    "OFFSET": "OFFSET <group> <topic> <partition>",
    "REPLICA_FETCH": "REPLICA_FETCH <topic> <partition> <replica_id> <offset>",
    "SET_PARTITION_ROLE": "SET_PARTITION_ROLE <topic> <partition> <leader or follower>",
    "ADMIN_CREATE_TOPIC": "ADMIN_CREATE_TOPIC <topic> <partitions> <replication_factor> "
    "[min_isr=<n>] [retention_ms=<ms>] [retention_bytes=<n>] "
    "[cleanup_policy=<delete, compact or compact,delete>] [min_compaction_lag_ms=<ms>] "
    "[delete_retention_ms=<ms>] [segment_bytes=<n>] [segment_ms=<ms>]",
    "ADMIN_DELETE_TOPIC": "ADMIN_DELETE_TOPIC <topic>",
    "ADMIN_ADD_PARTITIONS": "ADMIN_ADD_PARTITIONS <topic> <partitions>",
    "ADMIN_ALTER_TOPIC": "ADMIN_ALTER_TOPIC <topic> [retention_ms=<ms or none>] "
    "[retention_bytes=<n or none>] [cleanup_policy=<delete, compact or compact,delete>] "
    "[min_compaction_lag_ms=<ms>] [delete_retention_ms=<ms>] [segment_bytes=<n or none>] "
    "[segment_ms=<ms or none>]",
    "METADATA": "METADATA [<topic>]",
    "OFFSETS": "OFFSETS <topic> <partition> [ts=<ms>]",
    "DESCRIBE_GROUP": "DESCRIBE_GROUP <group> <topic>",
    "LIST_GROUPS": "LIST_GROUPS",
    "ADMIN_DELETE_GROUP": "ADMIN_DELETE_GROUP <group> <topic>",
    "ADMIN_RESET_OFFSETS": "ADMIN_RESET_OFFSETS <group> <topic> <earliest, latest or offset> "
    "[partition=<n>]",
    "ADMIN_COMMIT": "ADMIN_COMMIT <group> <topic> <partition> <offset>",
    "REPLICA_PULL": "REPLICA_PULL <topic> <partition> <replica_id> <offset> <epoch> "
    "[wait_ms=<ms>] [max_bytes=<n>] [enc=b64 or enc=raw]",
    "REPLICA_EPOCH": "REPLICA_EPOCH <topic> <partition> <replica_id> <epoch> [last_epoch=<n>]",
    "REPLICA_STATUS": "REPLICA_STATUS <topic> <partition>",
    "AUTH": "AUTH <user> <token>",
    "FETCH": "FETCH <topic> <partition> <offset> [max=<n>] [max_bytes=<n>] [enc=b64 or enc=raw]",
    "PRODUCE_BATCH": "PRODUCE_BATCH <topic> <partition> [acks=0, acks=1 or acks=all] "
    "[pid=<producer id> seq=<n>] data=<base64 batch>",
    "ADMIN_REGISTER_BROKER": "ADMIN_REGISTER_BROKER <broker_id> <host> <port> [epoch]",
    "ADMIN_BROKER_HEARTBEAT": "ADMIN_BROKER_HEARTBEAT <broker_id>",
    "ADMIN_SET_PARTITION_LEADER": "ADMIN_SET_PARTITION_LEADER <topic> <partition> <leader_id> "
    "<isr as comma-separated broker ids>",
    "ADMIN_GET_METADATA": "ADMIN_GET_METADATA",
    "ADMIN_ACL_ADD": "ADMIN_ACL_ADD <principal> <resource_type> <name> <operation> "
    "[pattern=literal or prefixed] [permission=allow or deny]",
    "ADMIN_ACL_REMOVE": "ADMIN_ACL_REMOVE [principal=<User:name>] [type=<resource_type>] "
    "[name=<name>] [pattern=literal or prefixed] [operation=<op>] [permission=allow or deny] "
    "(at least one)",
    "ADMIN_ACL_LIST": "ADMIN_ACL_LIST [principal=<User:name>] [type=<resource_type>] "
    "[name=<name>] [pattern=literal or prefixed] [operation=<op>] [permission=allow or deny]",
}
POSITIONAL_COUNT: dict[str, int] = {
    "PING": 0,
    "PRODUCE": 2,
    "CONSUME": 3,
    "JOIN": 3,
    "SYNC": 4,
    "GROUP_HEARTBEAT": 3,
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
    "ADMIN_BROKER_HEARTBEAT": 1,
    "ADMIN_SET_PARTITION_LEADER": 4,
    "ADMIN_GET_METADATA": 0,
    "ADMIN_ACL_ADD": 4,
    "ADMIN_ACL_REMOVE": 0,
    "ADMIN_ACL_LIST": 0,
}
OPTIONS: dict[str, tuple[str, ...]] = {
    "PRODUCE": ("acks", "partition", "enc", "pid", "seq"),
    "CONSUME": ("max", "wait_ms", "enc", "detail", "headers"),
    "JOIN": ("assignor", "session_timeout_ms"),
    "GROUP_HEARTBEAT": ("topics", "regex", "enc", "assignor", "rebalance_timeout_ms",
                        "instance", "owned"),
    "ADMIN_CREATE_TOPIC": ("min_isr", "retention_ms", "retention_bytes", "cleanup_policy",
                           "min_compaction_lag_ms", "delete_retention_ms", "segment_bytes",
                           "segment_ms"),
    "ADMIN_ALTER_TOPIC": ("retention_ms", "retention_bytes", "cleanup_policy",
                          "min_compaction_lag_ms", "delete_retention_ms", "segment_bytes",
                          "segment_ms"),
    "OFFSETS": ("ts",),
    "ADMIN_RESET_OFFSETS": ("partition",),
    "REPLICA_PULL": ("wait_ms", "max_bytes", "enc"),
    "REPLICA_EPOCH": ("last_epoch",),
    "FETCH": ("max", "max_bytes", "enc"),
    "PRODUCE_BATCH": ("acks", "pid", "seq", "data", "enc", "size"),
    "ADMIN_ACL_ADD": ("pattern", "permission"),
    "ADMIN_ACL_REMOVE": ("principal", "type", "name", "pattern", "operation", "permission"),
    "ADMIN_ACL_LIST": ("principal", "type", "name", "pattern", "operation", "permission"),
}
"""Each command's usage line (quoted in errors), positional count and known options."""


_SHOW_CHARS = 40


def show(text: str) -> str:
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


def name(text: str, what: str) -> str:
    """A topic, group or consumer id: 1-249 chars of [A-Za-z0-9._-], not '.' or '..'."""
    if text.isalnum() and text.isascii() and len(text) <= MAX_NAME_CHARS:
        return text
    if is_valid_name(text):
        return text
    raise BadRequest(
        f"invalid {what} {show(text)}; names are 1 to {MAX_NAME_CHARS} characters of "
        "A-Z a-z 0-9 . _ - and not '.' or '..'"
    )


def uint(text: str, what: str) -> int:
    """A numeric field: ASCII digits only, at most 2**63-1."""
    if len(text) <= 18 and text.isdigit() and text.isascii():
        return int(text)
    if not (text.isdigit() and text.isascii()):
        raise BadRequest(
            f"{what} must be a non-negative integer (digits 0-9 only), got {show(text)}"
        )
    # Leading zeros are digits too; strip them before the size check so int() never sees a
    # string long enough to trip Python's int-parsing limit.
    significant = text.lstrip("0")
    if len(significant) > 19 or int(significant or "0") > MAX_INT:
        raise BadRequest(f"{what} is too large; the maximum is {MAX_INT}")
    return int(significant or "0")


CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
SEGMENT_BYTES_MIN = 65
"""A segment holds at least one 64-byte header and a byte."""


def topic_setting(option: str, text: str, *, alter: bool) -> int | str | None:
    """The value of one of the topic settings ADMIN_CREATE_TOPIC and ADMIN_ALTER_TOPIC
    take besides ``min_isr``: ``cleanup_policy`` one of ``CLEANUP_POLICIES``; the others
    whole numbers (``none``, only where ``alter``, for no limit / the store's default)."""
    if option == "cleanup_policy":
        if text not in CLEANUP_POLICIES:
            raise BadRequest(f"cleanup_policy must be delete, compact or compact,delete; "
                             f"got {show(text)}")
        return text
    if option in ("min_compaction_lag_ms", "delete_retention_ms"):
        return uint_min(text, option, 0)
    if alter and text == "none":
        return None
    return uint_min(text, option, SEGMENT_BYTES_MIN if option == "segment_bytes" else 1)


def uint_min(text: str, what: str, minimum: int) -> int:
    value = uint(text, what)
    if value < minimum:
        raise BadRequest(f"{what} must be at least {minimum}, got {value}")
    return value


def key(key: str) -> str:
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


def plain_value_error(value: str) -> None:
    """Raise BadRequest naming the first character that keeps ``value`` from being plain."""
    match = BAD_VALUE_RE.search(value)
    if match is not None:
        raise BadRequest(
            f"value contains {_describe_char(match.group())} at position {match.start()}; "
            "send it with enc=b64"
        )


def b64decode(text: str, what: str, form: str = "enc=b64") -> bytes:
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


def encoding(value: str) -> bool:
    if value == "b64":
        return True
    raise BadRequest(f"invalid encoding {show(value)}; expected enc=b64")


def boolean(value: str, option: str) -> bool:
    if value == "true":
        return True
    if value == "false":
        return False
    raise BadRequest(f"invalid {option} {show(value)}; expected {option}=true or {option}=false")




_HOST_RE = re.compile(r"[A-Za-z0-9.:_-]{1,253}")


def host(text: str) -> str:
    """A host name or address (``[v6]`` brackets dropped): letters, digits, ``. : _ -``."""
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if _HOST_RE.fullmatch(bare) is None:
        raise BadRequest(f"invalid host {show(text)}; expected a host name or an IP address")
    return bare


def broker_ids(text: str, what: str) -> tuple[int, ...]:
    """Comma-separated broker ids (``1,2``), empty entries ignored, each at most once."""
    ids: list[int] = []
    for item in text.split(","):
        if not item:
            continue
        value = uint(item, what)
        if value in ids:
            raise BadRequest(f"broker {value} is listed twice in the {what}")
        ids.append(value)
    return tuple(ids)


_NO_OPTIONS: dict[str, str] = {}


def split_tokens(args: str) -> list[str]:
    """Arguments separated by runs of spaces; leading and trailing spaces are ignored."""
    tokens = args.split(" ")
    if "" in tokens:
        tokens = [token for token in tokens if token]
    return tokens


def wrong_count(command: str, got: int) -> BadRequest:
    want = POSITIONAL_COUNT.get(command, 0)
    return BadRequest(
        f"{command} expects {want} positional argument{'s' if want != 1 else ''}, got {got}; "
        f"usage: {USAGE[command]}"
    )


def options(command: str, tokens: list[str], start: int) -> dict[str, str]:
    """``name=value`` options after the positionals: known, each at most once."""
    allowed = OPTIONS.get(command, ())
    options: dict[str, str] = {}
    for token in tokens[start:]:
        option, eq, value = token.partition("=")
        if not eq:
            if allowed:
                hint = f"only name=value options may follow the {start} positional arguments"
            else:
                hint = f"{command} takes exactly {start} positional arguments and no options"
            raise BadRequest(
                f"unexpected argument {show(token)}; {hint}; usage: {USAGE[command]}"
            )
        if option not in allowed:
            known = ", ".join(allowed) if allowed else "none"
            raise BadRequest(
                f"unknown option {show(option)} for {command} (known options: {known}); "
                f"usage: {USAGE[command]}"
            )
        if option in options:
            raise BadRequest(f"option {option} given more than once")
        options[option] = value
    return options


def split_args(command: str, args: str) -> tuple[list[str], dict[str, str]]:
    """Positionals (exactly the command's count) and options."""
    count = POSITIONAL_COUNT[command]
    tokens = split_tokens(args)
    if len(tokens) < count:
        raise wrong_count(command, len(tokens))
    if len(tokens) == count:
        return tokens, _NO_OPTIONS
    return tokens, options(command, tokens, count)
