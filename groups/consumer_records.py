"""Consumer groups (KIP-848) as records of the internal group-state topic: keys, values,
encode and decode, in the conventions of ``groups.records`` on the coordinator branch
(``__skerry_groups``: one record per key, the latest wins, a tombstone deletes; keys are
JSON arrays whose first element is the key version; values are JSON objects with ``"v"``).

Owns: the three record kinds of a consumer group, ``consumer_group_records`` (the full
record set of one group) and ``consumer_groups_from_records`` (the groups a set of such
records rebuilds, validated). Timers are not records: a loaded group's members get fresh
session timers from ``ConsumerGroupCoordinator.start``.

The keys, version 1 (``g`` a group id, ``m`` a member id), after Kafka's
ConsumerGroupMetadata / ConsumerGroupMemberMetadata + ConsumerGroupCurrentMemberAssignment /
ConsumerGroupTargetAssignmentMember records::

    [1,"consumer_group",g]        {"v":1,"epoch":3,"assignment_epoch":3,"assignor":"uniform",
                                   "topics":[{"name":"orders","id":"<uuid>","partitions":6}]}
    [1,"consumer_member",g,m]     {"v":1,"instance_id":null,"rack_id":null,"client_id":"c",
                                   "client_host":"/10.0.0.1","topic_names":["orders"],
                                   "topic_regex":null,"server_assignor":null,
                                   "rebalance_timeout_ms":300000,"epoch":3,
                                   "previous_epoch":2,"state":"UNREVOKED_PARTITIONS",
                                   "assigned":[{"id":"<uuid>","partitions":[0,1]}],
                                   "revoking":[{"id":"<uuid>","partitions":[2]}]}
    [1,"consumer_target",g,m]     {"v":1,"partitions":[{"id":"<uuid>","partitions":[0,1]}]}

A member's owned partitions and its target are separate keys, as in Kafka, so a heartbeat
that only moves one member rewrites only that member's records. Every record of group
``g`` goes to the partition ``groups.records.partition_for_group(g)`` names, beside the
group's committed offsets.

Must not import: Twisted, ``broker``; no file I/O, no clock.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from data.keys import fnv1a_32
from groups.consumer_group import ConsumerGroup, ConsumerMember, Partitions, TopicMeta, freeze
from groups.consumer_state import IllegalStateError, MemberState

__all__ = [
    "KIND_CONSUMER_GROUP",
    "KIND_CONSUMER_MEMBER",
    "KIND_CONSUMER_TARGET",
    "CONSUMER_KEY_LENGTHS",
    "consumer_group_key",
    "consumer_member_key",
    "consumer_target_key",
    "decode_consumer_key",
    "consumer_group_records",
    "consumer_groups_from_records",
    "consumer_state_records",
]

KEY_VERSION = 1
VALUE_VERSION = 1
TOMBSTONE = b""

KIND_CONSUMER_GROUP = "consumer_group"
KIND_CONSUMER_MEMBER = "consumer_member"
KIND_CONSUMER_TARGET = "consumer_target"

CONSUMER_KEY_LENGTHS = {KIND_CONSUMER_GROUP: 3, KIND_CONSUMER_MEMBER: 4,
                        KIND_CONSUMER_TARGET: 4}
"""Elements of each key kind (version and kind included): the rows to add to
``groups.records._KEY_LENGTHS`` when the two modules meet."""


def _key(*parts: object) -> bytes:
    return json.dumps([KEY_VERSION, *parts], separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def _value(fields: Mapping[str, Any]) -> bytes:
    return json.dumps({"v": VALUE_VERSION, **fields}, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def consumer_group_key(group_id: str) -> bytes:
    """The key of a consumer group's epochs, assignor and subscribed-topic metadata."""
    return _key(KIND_CONSUMER_GROUP, group_id)


def consumer_member_key(group_id: str, member_id: str) -> bytes:
    """The key of one member: subscription, epochs, state, owned partitions."""
    return _key(KIND_CONSUMER_MEMBER, group_id, member_id)


def consumer_target_key(group_id: str, member_id: str) -> bytes:
    """The key of one member's target assignment."""
    return _key(KIND_CONSUMER_TARGET, group_id, member_id)


def decode_consumer_key(key: bytes) -> tuple[str, ...]:
    """``(kind, group_id[, member_id])`` of a consumer-group key; ``ValueError`` for
    anything else (another kind, a version this broker does not read, bad parts)."""
    try:
        parts = json.loads(key.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"key {key[:80]!r} is not a JSON array") from None
    if not isinstance(parts, list) or len(parts) < 2:
        raise ValueError(f"key {key[:80]!r} is not a JSON array of a version and a kind")
    if type(parts[0]) is not int or parts[0] != KEY_VERSION:
        raise ValueError(f"key version {parts[0]!r}; this broker reads version {KEY_VERSION}")
    kind = parts[1]
    if not isinstance(kind, str) or CONSUMER_KEY_LENGTHS.get(kind) != len(parts):
        raise ValueError(f"key {key[:80]!r}: not a consumer-group key")
    if not all(isinstance(name, str) and name for name in parts[2:]):
        raise ValueError(f"key {key[:80]!r}: ids must be non-empty strings")
    return tuple(parts[1:])


def _partitions_json(partitions: Partitions) -> list[dict[str, Any]]:
    return [{"id": str(topic), "partitions": sorted(ps)}
            for topic, ps in sorted(partitions.items()) if ps]


def consumer_group_records(group: ConsumerGroup) -> dict[bytes, bytes]:
    """Every record of one group, ``{key: value}`` (deterministic bytes)."""
    gid = group.group_id
    out = {consumer_group_key(gid): _value({
        "epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
        "assignor": group.assignor,
        "topics": [{"name": name, "id": str(meta.topic_id), "partitions": meta.partitions}
                   for name, meta in sorted(group.topics.items())]})}
    for member in group.members.values():
        out[consumer_member_key(gid, member.member_id)] = _value({
            "instance_id": member.instance_id, "rack_id": member.rack_id,
            "client_id": member.client_id, "client_host": member.client_host,
            "topic_names": list(member.topic_names), "topic_regex": member.topic_regex,
            "server_assignor": member.server_assignor,
            "rebalance_timeout_ms": member.rebalance_timeout_ms,
            "epoch": member.member_epoch, "previous_epoch": member.previous_member_epoch,
            "state": member.state.value,
            "assigned": _partitions_json(member.assigned),
            "revoking": _partitions_json(member.revoking)})
        out[consumer_target_key(gid, member.member_id)] = _value({
            "partitions": _partitions_json(group.target.get(member.member_id, {}))})
    return out


def consumer_state_records(groups: Iterable[ConsumerGroup],
                           partitions: int) -> dict[int, dict[bytes, bytes]]:
    """Every record of these groups by partition of the group-state topic,
    ``{partition: {key: value}}``, each group's records on partition
    ``fnv1a_32(utf8(group_id)) % partitions`` (the coordinator branch's
    ``partition_for_group``), so its ``state_records`` can merge them as they are."""
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    out: dict[int, dict[bytes, bytes]] = {}
    for group in groups:
        partition = fnv1a_32(group.group_id.encode("utf-8")) % partitions
        out.setdefault(partition, {}).update(consumer_group_records(group))
    return out


class _Fields:
    """Typed reads of one decoded value, each failure a ``ValueError`` naming the key."""

    def __init__(self, key: bytes, value: bytes) -> None:
        self.where = key.decode("utf-8", "replace")
        try:
            fields = json.loads(value.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ValueError(f"{self.where}: value is not a JSON object") from None
        if not isinstance(fields, dict):
            raise ValueError(f"{self.where}: value is not a JSON object")
        version = fields.pop("v", None)
        if type(version) is not int or version != VALUE_VERSION:
            raise ValueError(f"{self.where}: value version {version!r}; this broker reads "
                             f"version {VALUE_VERSION}")
        self.fields = fields

    def int(self, name: str, low: int = -2) -> int:
        value = self.fields.get(name)
        if type(value) is not int or value < low:
            raise ValueError(f"{self.where}: {name} must be an integer >= {low}")
        return value

    def str(self, name: str, *, optional: bool = False) -> Any:
        value = self.fields.get(name)
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise ValueError(f"{self.where}: {name} must be a string")
        return value

    def strings(self, name: str) -> tuple[str, ...]:
        value = self.fields.get(name)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{self.where}: {name} must be a list of strings")
        return tuple(value)

    def partitions(self, name: str) -> Partitions:
        value = self.fields.get(name)
        if not isinstance(value, list):
            raise ValueError(f"{self.where}: {name} must be a list")
        out: dict[uuid.UUID, set[int]] = {}
        for entry in value:
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) \
                    or not isinstance(entry.get("partitions"), list) \
                    or not all(type(p) is int and p >= 0 for p in entry["partitions"]):
                raise ValueError(f"{self.where}: {name} entries are "
                                 f'{{"id": uuid, "partitions": [int >= 0]}}')
            try:
                topic = uuid.UUID(entry["id"])
            except ValueError:
                raise ValueError(f"{self.where}: {entry['id']!r} is not a topic id") from None
            out.setdefault(topic, set()).update(entry["partitions"])
        return freeze(out)


def consumer_groups_from_records(records: Mapping[bytes, bytes]) -> list[ConsumerGroup]:
    """The consumer groups a partition's latest records hold (tombstones already applied:
    pass only live keys of the three consumer kinds). ``ValueError`` naming the key for a
    record that does not decode, a member or target without its group, a target without
    its member, or a partition owned twice."""
    heads: dict[str, _Fields] = {}
    members: dict[str, dict[str, _Fields]] = {}
    targets: dict[str, dict[str, Partitions]] = {}
    for key in sorted(records):
        kind, group_id, *rest = decode_consumer_key(key)
        fields = _Fields(key, records[key])
        if kind == KIND_CONSUMER_GROUP:
            heads[group_id] = fields
        elif kind == KIND_CONSUMER_MEMBER:
            members.setdefault(group_id, {})[rest[0]] = fields
        else:
            targets.setdefault(group_id, {})[rest[0]] = fields.partitions("partitions")
    for group_id in sorted(set(members) | set(targets)):
        if group_id not in heads:
            raise ValueError(f"consumer group {group_id}: member or target records without "
                             f"the group's record")
        extra = set(targets.get(group_id, {})) - set(members.get(group_id, {}))
        if extra:
            raise ValueError(f"consumer group {group_id}: target of unknown members "
                             f"{sorted(extra)}")
    out: list[ConsumerGroup] = []
    for group_id in sorted(heads):
        head = heads[group_id]
        topics: dict[str, TopicMeta] = {}
        raw_topics = head.fields.get("topics")
        if not isinstance(raw_topics, list):
            raise ValueError(f"{head.where}: topics must be a list")
        for entry in raw_topics:
            try:
                topics[entry["name"]] = TopicMeta(uuid.UUID(entry["id"]),
                                                  int(entry["partitions"]))
            except (TypeError, KeyError, ValueError):
                raise ValueError(f"{head.where}: topics entries are "
                                 f'{{"name", "id", "partitions"}}') from None
        built: list[ConsumerMember] = []
        for member_id, fields in sorted(members.get(group_id, {}).items()):
            try:
                state = MemberState(fields.str("state"))
            except ValueError:
                raise ValueError(f"{fields.where}: unknown member state") from None
            built.append(ConsumerMember(
                member_id, instance_id=fields.str("instance_id", optional=True),
                rack_id=fields.str("rack_id", optional=True),
                client_id=fields.str("client_id"), client_host=fields.str("client_host"),
                topic_names=fields.strings("topic_names"),
                topic_regex=fields.str("topic_regex", optional=True),
                server_assignor=fields.str("server_assignor", optional=True),
                rebalance_timeout_ms=fields.int("rebalance_timeout_ms", 0),
                member_epoch=fields.int("epoch"),
                previous_member_epoch=fields.int("previous_epoch"),
                state=state, assigned=fields.partitions("assigned"),
                revoking=fields.partitions("revoking")))
        try:
            group = ConsumerGroup(group_id, group_epoch=head.int("epoch", 0),
                                  assignment_epoch=head.int("assignment_epoch", 0),
                                  members=built, target=targets.get(group_id, {}),
                                  topics=topics, assignor=head.str("assignor"))
        except IllegalStateError as error:
            raise ValueError(f"{head.where}: {error}") from None
        out.append(group)
    return out
