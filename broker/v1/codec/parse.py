"""V1's per-command argument parsers: the ``<args>`` field of one request (already split from
its envelope) in, a command object out, or ``BadRequest`` (argument syntax and ranges, in the
spec's order).

Owns: one parser per command (``PARSERS``, by command name; ``Codec`` in this package adds the
two that need its limits, PRODUCE and PRODUCE_BATCH), the helpers they share
(``producer_fields``, ``too_big``, ``decode_batch``) and their messages.

Imports: ``broker.errors`` (the refusals), ``access`` (the ACL vocabulary ADMIN_ACL_* parses
into), the command classes of ``commands`` and the checks of ``fields``.

Must not import: Twisted, sockets, the store, ``groups`` or ``replication``; it does no I/O.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Callable
from itertools import accumulate
from typing import Any, TypeAlias

from access import AclBinding, InvalidAcl, Operation, PatternType, Permission, ResourceType
from access.authorizer import AclFilter
from access.model import parse_enum
from broker.errors import BadRequest
from broker.v1.codec import fields
from broker.v1.codec.commands import (
    MAX_NAME_CHARS,
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
    ReplicaEpoch,
    ReplicaFetch,
    ReplicaPull,
    ReplicaStatus,
    SetPartitionRole,
    Sync,
)
from data import speedups

ACKS_MESSAGE = "invalid ack mode; expected acks=0, acks=1 or acks=all"
KEY_VALUE_MESSAGE = "message must be key:value"


ASSIGNORS = ("round_robin", "range", "sticky")
ROLES = ("leader", "follower")
ACK_MODES = ("0", "1", "all")

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


def producer_fields(options: dict[str, str]) -> tuple[str | None, int | None]:
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


def _decode_batch_py(data: bytes, max_value_bytes: int) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
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
        raise too_big(largest, max_value_bytes)
    cut = data.__getitem__
    keys = tuple(map(cut, map(slice, key_ends, key_ends[1:])))
    values = tuple(map(cut, map(slice, value_ends, value_ends[1:])))
    return keys, values


_split_batch = getattr(speedups.load("broker.v1._cscan"), "split_batch", None)


def decode_batch(data: bytes, max_value_bytes: int) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """``_decode_batch_py`` (the reference), cut in C (``broker.v1._cscan.split_batch``)
    where that is built; a batch the C cut does not take (any rule broken) goes through the
    reference, which raises its ``BadRequest``."""
    if _split_batch is not None:
        got = _split_batch(data, max_value_bytes)
        if got is not None:
            return got
    return _decode_batch_py(data, max_value_bytes)


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
        _fetch_raw(options.get("enc")),
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


def too_big(size: int, limit: int) -> BadRequest:
    return BadRequest(f"value is {size} bytes; the maximum message size is {limit} bytes")


PARSERS: dict[str, _Parser] = {
    "PING": _parse_ping,
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
    "ADMIN_REGISTER_BROKER": _parse_admin_register_broker,
    "ADMIN_BROKER_HEARTBEAT": _parse_admin_broker_heartbeat,
    "ADMIN_SET_PARTITION_LEADER": _parse_admin_set_partition_leader,
    "ADMIN_GET_METADATA": _parse_admin_get_metadata,
    "ADMIN_ACL_ADD": _parse_admin_acl_add,
    "ADMIN_ACL_REMOVE": _parse_admin_acl_remove,
    "ADMIN_ACL_LIST": _parse_admin_acl_list,
}
"""The parser of every command that needs no codec limits, by command name (``Codec``
adds PRODUCE and PRODUCE_BATCH, which check the value size)."""
