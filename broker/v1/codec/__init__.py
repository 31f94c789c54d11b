"""The V1 line-protocol codec: bytes of one request line in, a typed command out.

Owns: the exact wire contract of ``spec/v1-protocol.md`` as far as it can be checked without
state: the envelope (``V1|<cid>|<COMMAND>|<args>``), argument syntax and ranges (names,
numbers, ``key:value``, options), and the PRODUCE fast path, the faster branch of the same
parser (``Codec.scan_produce``: runs of plain PRODUCEs scanned in place in the read buffer,
compiled or its regex twin ``_scan_produce_py``, no line slicing, no command object;
whatever it accepts ``parse_command`` accepts with the same fields). Checks run in the spec's order: envelope -> command known -> argument syntax and
ranges. All of them answer BAD_REQUEST (UNKNOWN_COMMAND for the second); existence,
generation, membership and ownership are the handlers' business.

The rest of the V1 wire lives next door in this package: the command classes in
``commands``, the argument checks in ``fields``, every reply line in ``replies``, the line
splitter in ``framing``. This module re-exports their public names (``__all__``: the
command classes, the command sets, the reply formatters, the framing names; 82 in all), so
the handlers and the protocol use the codec as one namespace (``c.Produce``, ``c.err``).

Imports, each for one reason: ``broker.errors`` (the refusals it raises), ``broker.v1.errors``
(``code_for``, for a ``CommandError``'s text), ``access`` (the ACL vocabulary ADMIN_ACL_*
arguments are parsed into), ``data.names`` (the one topic/group name pattern) and
``data.speedups`` (which loads the compiled scanner, ``broker.v1._cscan``, or keeps the
twin).

Must not import: Twisted, sockets, the store, ``groups`` or ``replication``; it does no I/O
and reads no clock.
"""

from __future__ import annotations

import re
import struct
import sys
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, TypeAlias

from access import AclBinding, InvalidAcl, Operation, PatternType, Permission, ResourceType
from access.authorizer import AclFilter
from access.model import parse_enum
from broker.errors import BadRequest, SkerryError, UnknownCommand
from broker.v1.codec import fields
from broker.v1.codec.commands import (
    ALL_COMMANDS,
    CLUSTER_COMMANDS,
    COMMANDS,
    CONTROL_COMMANDS,
    DATA_COMMANDS,
    MAX_INT,
    MAX_KEY_BYTES,
    MAX_NAME_CHARS,
    SECURITY_COMMANDS,
    VERSION,
    AdminAclAdd,
    AdminAclList,
    AdminAclRemove,
    AdminAddPartitions,
    AdminAlterTopic,
    AdminBrokerHeartbeat,
    AdminCommit,
    AdminCreateTopic,
    AdminDeleteGroup,
    AdminDeleteTopic,
    AdminGetMetadata,
    AdminRegisterBroker,
    AdminResetOffsets,
    AdminSetPartitionLeader,
    Auth,
    Command,
    Commit,
    Consume,
    DescribeGroup,
    Fetch,
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
from broker.v1.codec.framing import LineSplitter, LineTooLong
from broker.v1.codec.replies import (
    COMMITTED,
    DELETED,
    HEARTBEAT_OK,
    LEFT,
    LINE_TOO_LONG_REPLY,
    acls_added_payload,
    acls_payload,
    admin_topic_payload,
    altered_topic_payload,
    assignment_payload,
    broker_heartbeat_payload,
    broker_registered_payload,
    cluster_metadata_payload,
    consume_reply,
    consume_reply_raw,
    describe_group_payload,
    err,
    fetch_raw_reply,
    fetch_reply,
    format_bool,
    format_limit,
    format_list,
    group_heartbeat_payload,
    groups_payload,
    offset_payload,
    offsets_payload,
    offsets_range_payload,
    ok,
    partition_leader_payload,
    produce_batch_payload,
    produce_ok,
    produce_payload,
    replica_epoch_payload,
    replica_fetch_payload,
    replica_pull_reply,
    replica_status_payload,
    role_payload,
    topic_deleted_payload,
    topic_metadata_payload,
    topic_partitions_payload,
    topics_payload,
)
from broker.v1.errors import code_for
from data import speedups
from data.names import NAME_PATTERN

__all__ = [
    "HEARTBEAT_OK",
    "LEFT",
    "COMMITTED",
    "DELETED",
    "format_limit",
    "group_heartbeat_payload",
    "offset_payload",
    "describe_group_payload",
    "groups_payload",
    "offsets_payload",
    "topic_deleted_payload",
    "topic_partitions_payload",
    "altered_topic_payload",
    "topics_payload",
    "topic_metadata_payload",
    "offsets_range_payload",
    "acls_added_payload",
    "acls_payload",
    "AdminAclAdd",
    "AdminAclList",
    "AdminAclRemove",
    "acl_entry",
    "AdminAddPartitions",
    "AdminBrokerHeartbeat",
    "AdminGetMetadata",
    "AdminRegisterBroker",
    "AdminSetPartitionLeader",
    "CONTROL_COMMANDS",
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
    "GroupHeartbeat",
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
    "admin_topic_payload",
    "assignment_payload",
    "broker_heartbeat_payload",
    "broker_registered_payload",
    "cluster_metadata_payload",
    "partition_leader_payload",
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
        return f"cid={self.cid} {code_for(self.error)}: {self.error.message}"

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
# Parsers (one per command; the hot ones are written out for speed)
# --------------------------------------------------------------------------------------------


def _parse_ping(cid: str, args: str) -> Ping:
    if args and fields.split_tokens(args):
        fields.options("PING", fields.split_tokens(args), 0)
    return Ping(cid)


def _parse_list_groups(cid: str, args: str) -> ListGroups:
    if args and fields.split_tokens(args):
        fields.options("LIST_GROUPS", fields.split_tokens(args), 0)
    return ListGroups(cid)


def _parse_join(cid: str, args: str) -> Join:
    tokens, options = fields.split_args("JOIN", args)
    group = fields.name(tokens[0], "group")
    topic = fields.name(tokens[1], "topic")
    member_id = fields.name(tokens[2], "consumer id")
    assignor = options.get("assignor")
    if assignor is not None and assignor not in ASSIGNORS:
        raise BadRequest(
            f"unknown assignor {fields.show(assignor)}; expected assignor=round_robin, "
            "assignor=range or assignor=sticky"
        )
    timeout = options.get("session_timeout_ms")
    session_timeout_ms = None if timeout is None else fields.uint(timeout, "session_timeout_ms")
    return Join(cid, group, topic, member_id, assignor, session_timeout_ms)


def _parse_group_heartbeat(cid: str, args: str) -> GroupHeartbeat:
    tokens, options = fields.split_args("GROUP_HEARTBEAT", args)
    group = fields.name(tokens[0], "group")
    member_id = fields.name(tokens[1], "member id")
    epoch = _CONSUMER_LEAVE_WORDS.get(tokens[2])
    if epoch is None:
        epoch = fields.uint(tokens[2], "member epoch")
        if epoch > _MAX_EPOCH:
            raise BadRequest(f"member epoch must be at most {_MAX_EPOCH}, got {epoch}")
    topics = options.get("topics")
    names = None if topics is None else \
        tuple(fields.name(t, "topic") for t in topics.split(",")) if topics else ()
    regex = options.get("regex")
    if "enc" in options:
        fields.encoding(options["enc"])
        if regex is None:
            raise BadRequest("enc=b64 applies to regex=; there is no regex=")
        try:
            regex = fields.b64decode(regex, "regex").decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest("regex is not base64 of UTF-8 text") from None
    assignor = options.get("assignor")
    if assignor:
        assignor = fields.name(assignor, "assignor")
    timeout = options.get("rebalance_timeout_ms")
    rebalance_timeout_ms = None if timeout is None else \
        fields.uint(timeout, "rebalance_timeout_ms")
    if rebalance_timeout_ms is not None and rebalance_timeout_ms > _MAX_EPOCH:
        raise BadRequest(f"rebalance_timeout_ms must be at most {_MAX_EPOCH}")
    instance = options.get("instance")
    if instance is not None:
        instance = fields.name(instance, "instance")
    owned_text = options.get("owned")
    owned = None
    if owned_text is not None:
        pairs = []
        for item in owned_text.split(",") if owned_text else ():
            topic, colon, partition = item.rpartition(":")
            if not colon:
                raise BadRequest(f"owned entries are <topic>:<partition>, got "
                                 f"{fields.show(item)}")
            pairs.append((fields.name(topic, "topic"), fields.uint(partition, "partition")))
        owned = tuple(sorted(set(pairs)))
    return GroupHeartbeat(cid, group, member_id, epoch, names, regex, assignor,
                          rebalance_timeout_ms, instance, owned)


_CONSUMER_LEAVE_WORDS = {"leave": -1, "leave_static": -2}
"""GROUP_HEARTBEAT's epoch words: V1 numbers have no sign, Kafka's -1 and -2 do."""
_MAX_EPOCH = 2_147_483_647
"""Member epochs and timeouts are Kafka int32s."""


def _member_fields(command: str, args: str) -> tuple[list[str], str, str, str, int]:
    tokens, _ = fields.split_args(command, args)
    return (
        tokens,
        fields.name(tokens[0], "group"),
        fields.name(tokens[1], "topic"),
        fields.name(tokens[2], "consumer id"),
        fields.uint(tokens[3], "generation"),
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
    partition = fields.uint(tokens[4], "partition")
    offset = fields.uint(tokens[5], "offset")
    return Commit(cid, group, topic, member_id, generation, partition, offset)


def _parse_offset(cid: str, args: str) -> Offset:
    tokens, _ = fields.split_args("OFFSET", args)
    return Offset(
        cid, fields.name(tokens[0], "group"), fields.name(tokens[1], "topic"), fields.uint(tokens[2], "partition")
    )


def _parse_replica_fetch(cid: str, args: str) -> ReplicaFetch:
    tokens, _ = fields.split_args("REPLICA_FETCH", args)
    return ReplicaFetch(
        cid,
        fields.name(tokens[0], "topic"),
        fields.uint(tokens[1], "partition"),
        fields.uint(tokens[2], "replica_id"),
        fields.uint(tokens[3], "offset"),
    )


def _parse_set_partition_role(cid: str, args: str) -> SetPartitionRole:
    tokens, _ = fields.split_args("SET_PARTITION_ROLE", args)
    topic = fields.name(tokens[0], "topic")
    partition = fields.uint(tokens[1], "partition")
    role = tokens[2]
    if role not in ROLES:
        raise BadRequest(f"invalid role {fields.show(role)}; expected leader or follower")
    return SetPartitionRole(cid, topic, partition, role)


def _optional_uint(options: dict[str, str], option: str, minimum: int = 0) -> int | None:
    text = options.get(option)
    if text is None:
        return None
    return fields.uint_min(text, option, minimum)


def _producer_fields(options: dict[str, str]) -> tuple[str | None, int | None]:
    """Additive idempotent produce: ``pid=<name> seq=<n>``, both or neither."""
    pid = options.get("pid")
    seq_text = options.get("seq")
    if pid is None and seq_text is None:
        return None, None
    if pid is None or seq_text is None:
        raise BadRequest("pid= and seq= go together (idempotent produce); give both or neither")
    return fields.name(pid, "pid"), fields.uint(seq_text, "seq")


def _parse_fetch(cid: str, args: str) -> Fetch:
    tokens, options = fields.split_args("FETCH", args)
    return Fetch(
        cid,
        fields.name(tokens[0], "topic"),
        fields.uint(tokens[1], "partition"),
        fields.uint(tokens[2], "offset"),
        _optional_uint(options, "max", 1),
        _optional_uint(options, "max_bytes", 1),
        _fetch_raw(options.get("enc")),
    )


def _fetch_raw(encoding: str | None) -> bool:
    if encoding is None or encoding == "b64":
        return False
    if encoding == "raw":
        return True
    raise BadRequest(f"invalid encoding {fields.show(encoding)}; expected enc=b64 or enc=raw")


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
    tokens, options = fields.split_args("ADMIN_CREATE_TOPIC", args)
    return AdminCreateTopic(
        cid,
        fields.name(tokens[0], "topic"),
        fields.uint_min(tokens[1], "partitions", 1),
        fields.uint_min(tokens[2], "replication_factor", 1),
        _optional_uint(options, "min_isr", 1),
        _optional_uint(options, "retention_ms", 1),
        _optional_uint(options, "retention_bytes", 1),
        tuple((option, fields.topic_setting(option, text, alter=False))
              for option, text in sorted(options.items())
              if option not in ("min_isr", "retention_ms", "retention_bytes")),
    )


def _parse_admin_delete_topic(cid: str, args: str) -> AdminDeleteTopic:
    tokens, _ = fields.split_args("ADMIN_DELETE_TOPIC", args)
    return AdminDeleteTopic(cid, fields.name(tokens[0], "topic"))


def _parse_admin_add_partitions(cid: str, args: str) -> AdminAddPartitions:
    tokens, _ = fields.split_args("ADMIN_ADD_PARTITIONS", args)
    return AdminAddPartitions(cid, fields.name(tokens[0], "topic"), fields.uint_min(tokens[1], "partitions", 1))


def _parse_admin_alter_topic(cid: str, args: str) -> AdminAlterTopic:
    tokens, options = fields.split_args("ADMIN_ALTER_TOPIC", args)
    topic = fields.name(tokens[0], "topic")
    if not options:
        raise BadRequest("nothing to alter; usage: " + fields.USAGE["ADMIN_ALTER_TOPIC"])
    changes = tuple((option, None if text == "none" else fields.uint_min(text, option, 1))
                    if option in ("retention_ms", "retention_bytes")
                    else (option, fields.topic_setting(option, text, alter=True))
                    for option, text in sorted(options.items()))
    return AdminAlterTopic(cid, topic, changes)


def _parse_metadata(cid: str, args: str) -> Metadata:
    tokens = fields.split_tokens(args)
    if not tokens:
        return Metadata(cid, None)
    if "=" in tokens[0]:  # no topic given; METADATA has no options
        fields.options("METADATA", tokens, 0)
    if len(tokens) > 1:
        raise BadRequest(
            f"METADATA takes at most one argument, got {len(tokens)}; usage: {fields.USAGE['METADATA']}"
        )
    return Metadata(cid, fields.name(tokens[0], "topic"))


def _parse_offsets(cid: str, args: str) -> Offsets:
    tokens, options = fields.split_args("OFFSETS", args)
    return Offsets(
        cid, fields.name(tokens[0], "topic"), fields.uint(tokens[1], "partition"), _optional_uint(options, "ts")
    )


def _parse_describe_group(cid: str, args: str) -> DescribeGroup:
    tokens, _ = fields.split_args("DESCRIBE_GROUP", args)
    return DescribeGroup(cid, fields.name(tokens[0], "group"), fields.name(tokens[1], "topic"))


def _parse_admin_delete_group(cid: str, args: str) -> AdminDeleteGroup:
    tokens, _ = fields.split_args("ADMIN_DELETE_GROUP", args)
    return AdminDeleteGroup(cid, fields.name(tokens[0], "group"), fields.name(tokens[1], "topic"))


def _parse_admin_reset_offsets(cid: str, args: str) -> AdminResetOffsets:
    tokens, options = fields.split_args("ADMIN_RESET_OFFSETS", args)
    group = fields.name(tokens[0], "group")
    topic = fields.name(tokens[1], "topic")
    text = tokens[2]
    target: str | int
    if text == "earliest" or text == "latest":
        target = text
    elif text.isdigit() and text.isascii():
        target = fields.uint(text, "offset")
    else:
        raise BadRequest(
            f"invalid reset target {fields.show(text)}; expected earliest, latest or an offset"
        )
    return AdminResetOffsets(cid, group, topic, target, _optional_uint(options, "partition"))


def _parse_admin_commit(cid: str, args: str) -> AdminCommit:
    tokens, _ = fields.split_args("ADMIN_COMMIT", args)
    return AdminCommit(
        cid,
        fields.name(tokens[0], "group"),
        fields.name(tokens[1], "topic"),
        fields.uint(tokens[2], "partition"),
        fields.uint(tokens[3], "offset"),
    )


def _parse_replica_pull(cid: str, args: str) -> ReplicaPull:
    tokens, options = fields.split_args("REPLICA_PULL", args)
    return ReplicaPull(
        cid,
        fields.name(tokens[0], "topic"),
        fields.uint(tokens[1], "partition"),
        fields.uint(tokens[2], "replica_id"),
        fields.uint(tokens[3], "offset"),
        fields.uint(tokens[4], "epoch"),
        _optional_uint(options, "wait_ms"),
        _optional_uint(options, "max_bytes", 1),
    )


def _parse_replica_epoch(cid: str, args: str) -> ReplicaEpoch:
    tokens, options = fields.split_args("REPLICA_EPOCH", args)
    return ReplicaEpoch(
        cid,
        fields.name(tokens[0], "topic"),
        fields.uint(tokens[1], "partition"),
        fields.uint(tokens[2], "replica_id"),
        fields.uint(tokens[3], "epoch"),
        _optional_uint(options, "last_epoch"),
    )


def _parse_auth(cid: str, args: str) -> Auth:
    """``AUTH <user> <token>``; no error message ever repeats the token."""
    tokens = fields.split_tokens(args)
    if len(tokens) != 2:
        raise BadRequest(f"AUTH expects 2 positional arguments, got {len(tokens)}; "
                         f"usage: {fields.USAGE['AUTH']}")
    return Auth(cid, fields.name(tokens[0], "user"), tokens[1])


def _parse_replica_status(cid: str, args: str) -> ReplicaStatus:
    tokens, _ = fields.split_args("REPLICA_STATUS", args)
    return ReplicaStatus(cid, fields.name(tokens[0], "topic"), fields.uint(tokens[1], "partition"))


def _parse_admin_register_broker(cid: str, args: str) -> AdminRegisterBroker:
    tokens = fields.split_tokens(args)
    if not 3 <= len(tokens) <= 4:
        raise BadRequest(f"ADMIN_REGISTER_BROKER expects 3 or 4 positional arguments, got "
                         f"{len(tokens)}; usage: {fields.USAGE['ADMIN_REGISTER_BROKER']}")
    port = fields.uint(tokens[2], "port")
    if not 0 < port <= 65535:
        raise BadRequest(f"port must be between 1 and 65535, got {port}")
    return AdminRegisterBroker(cid, fields.uint(tokens[0], "broker_id"), fields.host(tokens[1]),
                               port, fields.uint(tokens[3], "epoch") if len(tokens) == 4
                               else None)


def _parse_admin_broker_heartbeat(cid: str, args: str) -> AdminBrokerHeartbeat:
    tokens, _ = fields.split_args("ADMIN_BROKER_HEARTBEAT", args)
    return AdminBrokerHeartbeat(cid, fields.uint(tokens[0], "broker_id"))


def _parse_admin_set_partition_leader(cid: str, args: str) -> AdminSetPartitionLeader:
    tokens, _ = fields.split_args("ADMIN_SET_PARTITION_LEADER", args)
    return AdminSetPartitionLeader(cid, fields.name(tokens[0], "topic"),
                                   fields.uint(tokens[1], "partition"),
                                   fields.uint(tokens[2], "leader_id"),
                                   fields.broker_ids(tokens[3], "isr"))


def _parse_admin_get_metadata(cid: str, args: str) -> AdminGetMetadata:
    if args and fields.split_tokens(args):
        fields.options("ADMIN_GET_METADATA", fields.split_tokens(args), 0)
    return AdminGetMetadata(cid)


def _parse_admin_acl_add(cid: str, args: str) -> AdminAclAdd:
    tokens, options = fields.split_args("ADMIN_ACL_ADD", args)
    if len(tokens) > 4 and not options:
        raise fields.wrong_count("ADMIN_ACL_ADD", len(tokens))
    try:
        binding = AclBinding(
            tokens[0], parse_enum(ResourceType, tokens[1], "resource type"), tokens[2],
            parse_enum(PatternType, options.get("pattern", "literal"), "pattern"),
            parse_enum(Operation, tokens[3], "operation"),
            parse_enum(Permission, options.get("permission", "allow"), "permission"))
    except InvalidAcl as exc:
        raise BadRequest(f"{exc}; usage: {fields.USAGE['ADMIN_ACL_ADD']}") from None
    return AdminAclAdd(cid, binding)


def _acl_filter(command: str, args: str) -> AclFilter:
    tokens, options = fields.split_args(command, args)
    try:
        return AclFilter(
            principal=options.get("principal"),
            resource_type=parse_enum(ResourceType, options["type"], "resource type")
            if "type" in options else None,
            name=options.get("name"),
            pattern_type=parse_enum(PatternType, options["pattern"], "pattern")
            if "pattern" in options else None,
            operation=parse_enum(Operation, options["operation"], "operation")
            if "operation" in options else None,
            permission=parse_enum(Permission, options["permission"], "permission")
            if "permission" in options else None)
    except InvalidAcl as exc:
        raise BadRequest(f"{exc}; usage: {fields.USAGE[command]}") from None


def _parse_admin_acl_remove(cid: str, args: str) -> AdminAclRemove:
    if not fields.split_tokens(args):
        raise BadRequest("name at least one field of the ACLs to remove; usage: "
                         + fields.USAGE["ADMIN_ACL_REMOVE"])
    return AdminAclRemove(cid, _acl_filter("ADMIN_ACL_REMOVE", args))


def _parse_admin_acl_list(cid: str, args: str) -> AdminAclList:
    return AdminAclList(cid, _acl_filter("ADMIN_ACL_LIST", args))


def acl_entry(binding: AclBinding) -> str:
    """One binding in ``ADMIN_ACL_LIST``'s list:
    ``<principal>,<type>,<pattern>,<name>,<operation>,<permission>``."""
    return ",".join((binding.principal, binding.resource_type.value,
                     binding.pattern_type.value, binding.name, binding.operation.value,
                     binding.permission.value))


_Parser: TypeAlias = Callable[[str, str], Any]


# The common PRODUCE shape, validated in one C-level match (see _scan_produce_py):
# printable ASCII only, single spaces, optional acks=. Key: no ',', '|' or ':'; value: no
# ',' or '|'; cid: no '|'. PRODUCE_LINE_RE also matches the line's terminator, so the
# transport can walk a whole read with ``match(buf, pos)`` without slicing lines.
_FAST_CID = rb"([\x21-\x7b\x7d\x7e]+)"
_FAST_TOPIC = b"(" + NAME_PATTERN.encode() + b")"
_FAST_KEY = rb"([\x21-\x2b\x2d-\x39\x3b-\x7b\x7d\x7e]{0,255})"
_FAST_VALUE = rb"([\x21-\x2b\x2d-\x7b\x7d\x7e]*)"
_FAST_BODY = (rb"V1\|" + _FAST_CID + rb"\|PRODUCE\|" + _FAST_TOPIC + rb" " + _FAST_KEY + rb":"
              + _FAST_VALUE + rb"(?: acks=(0|1|all))?\r?")
PRODUCE_LINE_RE = re.compile(_FAST_BODY + rb"\n")
_match_produce_line = PRODUCE_LINE_RE.match
FAST_ACKS = {None: "1", b"0": "0", b"1": "1", b"all": "all"}


ProduceRun: TypeAlias = "list[tuple[bytes, bytes, bytes, bytes, str, int]]"
"""``(cid, topic, key, value, acks, start)`` of each plain PRODUCE line a scan took."""


def _scan_produce_py(buffer: bytes, pos: int, most: int, max_line: int,
                     max_value: int) -> tuple[ProduceRun, int]:
    """The PRODUCE fast path over a read: at most ``most`` plain PRODUCE lines from ``pos``
    (``PRODUCE_LINE_RE``, then the rules the regex cannot say, and at most ``max_line``
    bytes each with the terminator), as ``(cid, topic, key, value, acks,
    start)`` with acks ``"0"``, ``"1"`` or ``"all"``; and the position after the last one.
    Stops at the first line of another shape and at the end of ``buffer``.

    The pure-Python twin (the reference) of ``broker.v1._cscan.scan_produce``, which
    ``scan_produce`` is when ``data.speedups`` loads it."""
    run: ProduceRun = []
    append = run.append
    size = len(buffer)
    for _ in range(most):
        match = _match_produce_line(buffer, pos)
        if match is None:
            break
        # The rules the regex cannot say: the value's size; topics starting with "__" take
        # the full path (the handlers check reserved names); the names "." and "..".
        if match.end(4) - match.start(4) > max_value or buffer.startswith(b"__", match.start(2)) \
                or (match.end(2) - match.start(2) <= 2 and match.group(2).strip(b".") == b""):
            break
        end = match.end()
        if end - pos > max_line:
            break
        cid, topic, key, value, acks = match.groups()
        append((cid, topic, key, value, FAST_ACKS[acks], pos))
        pos = end
        if pos == size:
            break
    return run, pos


_cscan = speedups.load("broker.v1._cscan")
scan_produce: Callable[[bytes, int, int, int, int], tuple[ProduceRun, int]] = (
    _cscan.scan_produce if _cscan is not None else _scan_produce_py)


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
            "GROUP_HEARTBEAT": _parse_group_heartbeat,
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
            "ADMIN_REGISTER_BROKER": _parse_admin_register_broker,
            "ADMIN_BROKER_HEARTBEAT": _parse_admin_broker_heartbeat,
            "ADMIN_SET_PARTITION_LEADER": _parse_admin_set_partition_leader,
            "ADMIN_GET_METADATA": _parse_admin_get_metadata,
            "ADMIN_ACL_ADD": _parse_admin_acl_add,
            "ADMIN_ACL_REMOVE": _parse_admin_acl_remove,
            "ADMIN_ACL_LIST": _parse_admin_acl_list,
        }
        assert self._parsers.keys() == ALL_COMMANDS.keys() | SECURITY_COMMANDS.keys()

    def scan_produce(self, buffer: bytes, pos: int, most: int,
                     max_line: int) -> tuple[ProduceRun, int]:
        """The framer's fast path (``LineFramer.take_fast``): the run of plain PRODUCE lines
        at ``pos`` under this codec's value limit (``scan_produce``: compiled or its twin)."""
        return scan_produce(buffer, pos, most, max_line, self._max_value)

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
        tokens, options = fields.split_args("PRODUCE_BATCH", args)
        topic = fields.name(tokens[0], "topic")
        partition = fields.uint(tokens[1], "partition")
        acks = options.get("acks", "1")
        if acks not in ACK_MODES:
            raise BadRequest(ACKS_MESSAGE)
        pid, seq = _producer_fields(options)
        text = options.get("data")
        if text is None:
            raise BadRequest(f"PRODUCE_BATCH needs data=<base64 batch>; usage: {fields.USAGE['PRODUCE_BATCH']}")
        keys, values = decode_batch(fields.b64decode(text, "data", "PRODUCE_BATCH"), self._max_value)
        return ProduceBatch(cid, topic, partition, keys, values, acks, pid, seq)

    def _parse_produce(self, cid: str, args: str) -> Produce:
        tokens = args.split(" ")
        if "" in tokens:
            tokens = [token for token in tokens if token]
        count = len(tokens)
        if count < 2:
            raise fields.wrong_count("PRODUCE", count)
        topic = tokens[0]
        if not (topic.isalnum() and topic.isascii() and len(topic) <= MAX_NAME_CHARS):
            fields.name(topic, "topic")
        key, colon, value = tokens[1].partition(":")
        if not colon:
            raise BadRequest(KEY_VALUE_MESSAGE)
        if key:
            fields.key(key)
        acks = "1"
        partition = None
        b64 = False
        if count > 2:
            options = fields.options("PRODUCE", tokens, 2)
            mode = options.get("acks")
            if mode is not None:
                if mode not in ACK_MODES:
                    raise BadRequest(ACKS_MESSAGE)
                acks = mode
            text = options.get("partition")
            if text is not None:
                partition = fields.uint(text, "partition")
            encoding = options.get("enc")
            if encoding is not None:
                b64 = fields.encoding(encoding)
            pid, seq = _producer_fields(options)
        else:
            pid = seq = None
        if b64:
            if len(value) > self._max_b64_chars:
                raise _too_big(len(value) * 3 // 4, self._max_value)
            data = fields.b64decode(value, "value")
        else:
            if not (value.isprintable() and "," not in value):
                fields.plain_value_error(value)
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
        raise fields.wrong_count("CONSUME", count)
    topic = tokens[0]
    if not (topic.isalnum() and topic.isascii() and len(topic) <= MAX_NAME_CHARS):
        fields.name(topic, "topic")
    partition = fields.uint(tokens[1], "partition")
    offset = fields.uint(tokens[2], "offset")
    if count == 3:
        return Consume(cid, topic, partition, offset)
    options = fields.options("CONSUME", tokens, 3)
    encoding = options.get("enc")
    detail = options.get("detail")
    headers = options.get("headers")
    consume = Consume(
        cid,
        topic,
        partition,
        offset,
        _optional_uint(options, "max", 1),
        _optional_uint(options, "wait_ms"),
        False if encoding is None else fields.encoding(encoding),
        False if detail is None else fields.boolean(detail, "detail"),
        False if headers is None else fields.boolean(headers, "headers"),
    )
    if consume.headers and not consume.detail:
        raise BadRequest("headers=true needs detail=true")
    return consume


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
    return BadRequest(f"unsupported protocol version {fields.show(version)}; expected V1")


def _unknown_command(command: str) -> UnknownCommand:
    return UnknownCommand(f"unknown command {fields.show(command)}; commands are upper case, e.g. PING")


def _utf8_error(what: str, exc: UnicodeDecodeError, hint: str = "") -> BadRequest:
    byte = exc.object[exc.start]
    return BadRequest(
        f"invalid UTF-8 in the {what} (byte 0x{byte:02x} at position {exc.start}){hint}"
    )


def _too_big(size: int, limit: int) -> BadRequest:
    return BadRequest(f"value is {size} bytes; the maximum message size is {limit} bytes")
