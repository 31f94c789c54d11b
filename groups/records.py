"""Group state as records of the internal topic ``__skerry_groups``: the schema, encode and
decode, the group id -> partition hash, the records a coordinator's state is made of, and
the changes between two such sets.

Owns: ``GROUPS_TOPIC``, ``partition_for_group``, the three record kinds (below),
``state_records`` (the full record set of a state, per partition), ``changes`` (what to
append to go from one record set to the next: new or changed values, tombstones for keys
gone). Reading the records back into a state is ``groups.loader``.

Must not import: Twisted, ``broker``; no file I/O, no clock.

Why this shape (Kafka's ``__consumer_offsets``, in Skerry's own terms):

* **One record per key, the latest wins.** A key names one thing: a V1/Iggy group on a
  topic, a Kafka group, or the committed offset of a group on one partition. Its value is
  that thing's whole current state, so a log in which only the latest record of each key is
  kept (compaction) still rebuilds the same state. A *tombstone* (empty value) says the
  thing is gone: a deleted group, an offset reset away.
* **Versioned.** A key is a JSON array whose first element is the key version; a value is
  a JSON object with ``"v"``. A broker refuses (``ValueError``, naming partition and
  offset) a record of a version it does not know, as it refuses a JSON file of an unknown
  version: state it cannot read is never silently dropped.
* **Deterministic bytes.** Keys are encoded with fixed element order and no spaces, so the
  same thing always has the same key bytes (compaction compares key bytes).

The keys, version 1 (``g`` a group id, ``t`` a topic, ``p`` a partition)::

    [1,"group",g,t]        V1 and Iggy groups: {"v":1,"generation":3,"assignor":"range",
                           "partitions":3,"members":[{"member_id":"c1",
                           "session_timeout_ms":10000,"assigned":[0,1]}, ...]}
    [1,"offset",g,t,p]     committed offsets of every protocol (V1, Kafka, Iggy groups and
                           Iggy consumers' pseudo-groups): {"v":1,"offset":5}, with
                           "metadata":"text" when Kafka kept a non-empty string
    [1,"kafka_group",g]    Kafka classic groups: {"v":1,"state":"Stable",...} -- the
                           fields of a kafka-groups.json entry but ``group_id``
    [1,"consumer_group",g], [1,"consumer_member",g,m], [1,"consumer_target",g,m]
                           KIP-848 consumer groups (``groups.consumer_records``)

The value of a group is the same document the JSON files held for it, so the loader
reuses their validation (``groups.store``, ``groups.classic_store``).

**Which partition.** Every record of group id ``g`` (its V1 groups on every topic, its
Kafka group, its offsets) goes to partition ``fnv1a_32(utf8(g)) % partitions``: FNV-1a
32 bits, the hash Skerry already uses for message keys (``data.keys``), stable across
processes and versions (Python's own ``hash`` of a string is randomised per process).
Kafka uses ``abs(groupId.hashCode()) % partitions`` for the same purpose. The hash is of
the group id alone, not the topic, so one coordinator holds everything named ``g``: the
cross-protocol guard (a group id live under V1 is refused to Kafka) and the offsets V1 and
Kafka share need nothing from another coordinator.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from data.keys import fnv1a_32
from data.names import INTERNAL_PREFIX
from groups.classic_group import ClassicGroup
from groups.classic_store import classic_groups_to_json
from groups.consumer_records import (
    CONSUMER_KEY_LENGTHS,
    KIND_CONSUMER_GROUP,
    consumer_group_records,
    consumer_state_records,
)
from groups.coordinator import GroupKey
from groups.group import Group
from groups.store import groups_to_json

__all__ = [
    "GROUPS_TOPIC",
    "GROUPS_TOPIC_SETTINGS",
    "GROUPS_TOPIC_SEGMENT_BYTES",
    "KEY_VERSION",
    "VALUE_VERSION",
    "TOMBSTONE",
    "partition_for_group",
    "group_key",
    "offset_key",
    "kafka_group_key",
    "encode_value",
    "decode_key",
    "decode_value",
    "group_of_key",
    "state_records",
    "changes",
    "Scope",
    "group_scope",
    "offset_scope",
    "kafka_group_scope",
    "consumer_group_scope",
    "scope_key",
    "consumer_group_of_key",
    "GroupRecords",
    "KIND_GROUP",
    "KIND_OFFSET",
    "KIND_KAFKA_GROUP",
]

GROUPS_TOPIC = f"{INTERNAL_PREFIX}groups"
"""The internal topic holding every group's state and committed offsets. Not named
``__consumer_offsets``: its records are Skerry's, and Kafka tools that decode that topic
by name would misread them."""

GROUPS_TOPIC_SEGMENT_BYTES = 4 << 20
GROUPS_TOPIC_SETTINGS: Mapping[str, Any] = MappingProxyType(
    {"cleanup_policy": "compact", "segment_bytes": GROUPS_TOPIC_SEGMENT_BYTES})
"""The topic's own settings, wherever it is created (a single broker's store, the cluster's
controller): compacted, the latest record of each key being all a coordinator needs, in
4 MiB segments. The cleaner never touches a partition's active segment, so its size bounds
what a loading coordinator reads beyond the latest record of each key: with the store's
64 MiB default a partition holds up to about 500,000 commits uncleaned (seconds to load);
with 4 MiB, about 30,000 (``bench/group_state.py``; Kafka's ``offsets.topic.segment.bytes``
plays the same part)."""

KEY_VERSION = 1
VALUE_VERSION = 1
TOMBSTONE = b""
"""The value of a record that deletes its key."""

KIND_GROUP = "group"
KIND_OFFSET = "offset"
KIND_KAFKA_GROUP = "kafka_group"

# The number of elements a key of each kind has (version and kind included); KIP-848
# consumer groups' three kinds are ``groups.consumer_records``'.
_KEY_LENGTHS = {KIND_GROUP: 4, KIND_OFFSET: 5, KIND_KAFKA_GROUP: 3, **CONSUMER_KEY_LENGTHS}


def partition_for_group(group_id: str, partitions: int) -> int:
    """The partition of ``GROUPS_TOPIC`` that holds group id ``group_id``: FNV-1a 32 of its
    UTF-8 bytes modulo ``partitions`` (``partition_for_group("analytics", 50) == 45``)."""
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    return fnv1a_32(group_id.encode("utf-8")) % partitions


def _key(*parts: object) -> bytes:
    return json.dumps([KEY_VERSION, *parts], separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


@functools.lru_cache(maxsize=1 << 16)
def group_key(group: str, topic: str) -> bytes:
    """The key of a V1/Iggy group on a topic."""
    return _key(KIND_GROUP, group, topic)


@functools.lru_cache(maxsize=1 << 18)
def offset_key(group: str, topic: str, partition: int) -> bytes:
    """The key of a group's committed offset on one partition."""
    return _key(KIND_OFFSET, group, topic, partition)


@functools.lru_cache(maxsize=1 << 16)
def kafka_group_key(group_id: str) -> bytes:
    """The key of a Kafka classic group."""
    return _key(KIND_KAFKA_GROUP, group_id)


def encode_value(fields: Mapping[str, Any]) -> bytes:
    """A value: ``fields`` with the value version first."""
    return json.dumps({"v": VALUE_VERSION, **fields}, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


@functools.lru_cache(maxsize=1 << 18)
def _offset_value(offset: int, metadata: str) -> bytes:
    # Cached: a write takes the whole state's records, and most offsets did not change.
    fields: dict[str, Any] = {"offset": offset}
    if metadata:
        fields["metadata"] = metadata
    return encode_value(fields)


@functools.lru_cache(maxsize=1 << 16)
def decode_key(key: bytes) -> tuple[Any, ...]:
    """``(kind, *names)`` of a key; ``ValueError`` for anything that is not a key of a
    known version and kind with well-typed parts."""
    try:
        parts = json.loads(key.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"key {key[:80]!r} is not a JSON array") from None
    if not isinstance(parts, list) or not parts:
        raise ValueError(f"key {key[:80]!r} is not a JSON array")
    if parts[0] != KEY_VERSION or type(parts[0]) is not int:
        raise ValueError(f"key version {parts[0]!r}; this broker reads version {KEY_VERSION}")
    kind = parts[1] if len(parts) > 1 else None
    if not isinstance(kind, str) or kind not in _KEY_LENGTHS or len(parts) != _KEY_LENGTHS[kind]:
        raise ValueError(f"key {key[:80]!r}: unknown kind or wrong length")
    names = parts[2:]
    if kind == KIND_OFFSET:
        if type(names[2]) is not int or names[2] < 0:
            raise ValueError(f"key {key[:80]!r}: partition is not an integer >= 0")
        names_to_check = names[:2]
    else:
        names_to_check = names
    if not all(isinstance(name, str) for name in names_to_check):
        raise ValueError(f"key {key[:80]!r}: names are strings")
    return (kind, *names)


_PLAIN_OFFSET = re.compile(rb'\{"v":1,"offset":(0|[1-9][0-9]{0,18})\}')
"""An offset value as ``encode_value`` writes it (read without the JSON parser: the same
fields ``json.loads`` would give)."""


def decode_value(value: bytes) -> dict[str, Any] | None:
    """The fields of a value without its version (None for a tombstone); ``ValueError``
    when it is not a JSON object of a known version."""
    if value == TOMBSTONE:
        return None
    plain = _PLAIN_OFFSET.fullmatch(value)
    if plain is not None:  # what nearly every record is: a commit without metadata
        return {"offset": int(plain.group(1))}
    try:
        fields = json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"value {value[:80]!r} is not a JSON object") from None
    if not isinstance(fields, dict):
        raise ValueError(f"value {value[:80]!r} is not a JSON object")
    version = fields.pop("v", None)
    if version != VALUE_VERSION or type(version) is not int:
        raise ValueError(f"value version {version!r}; this broker reads version "
                         f"{VALUE_VERSION}")
    return fields


def group_of_key(key: bytes) -> str:
    """The group id a key belongs to (its partition's hash input)."""
    return str(decode_key(key)[1])


def state_records(groups: Iterable[Group],
                  offsets: Mapping[GroupKey, Mapping[int, int]],
                  metadata: Mapping[GroupKey, Mapping[int, str]],
                  classic_groups: Iterable[ClassicGroup],
                  partitions: int) -> dict[int, dict[bytes, bytes]]:
    """Every record of a coordinator's state, ``{partition: {key: value}}``: what a
    compacted partition holds once cleaned. Groups without members and without a generation
    are state too (DESCRIBE_GROUP shows them) and keep their record."""
    out: dict[int, dict[bytes, bytes]] = {}

    def put(group_id: str, key: bytes, value: bytes) -> None:
        out.setdefault(partition_for_group(group_id, partitions), {})[key] = value

    for entry in groups_to_json(groups)["groups"]:
        name, topic = entry.pop("group"), entry.pop("topic")
        put(name, group_key(name, topic), encode_value(entry))
    for (name, topic), committed in offsets.items():
        texts = metadata.get((name, topic), {})
        home = out.setdefault(partition_for_group(name, partitions), {})
        for partition, offset in committed.items():
            home[offset_key(name, topic, partition)] = _offset_value(
                offset, texts.get(partition, ""))
    for entry in classic_groups_to_json(classic_groups)["groups"]:
        group_id = entry.pop("group_id")
        put(group_id, kafka_group_key(group_id), encode_value(entry))
    return out


def changes(previous: Mapping[bytes, bytes],
            current: Mapping[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    """The records that turn a partition holding ``previous`` into one holding
    ``current``: every new or changed key with its value, then a tombstone for every key
    gone, each group in key order (deterministic output)."""
    out = [(key, current[key]) for key in sorted(current) if previous.get(key) != current[key]]
    out += [(key, TOMBSTONE) for key in sorted(previous) if key not in current]
    return out


# ---------------------------------------------------------------------- what changed


class Scope(NamedTuple):
    """Something whose records changed, so that a write builds only its records (not the
    whole state's): a V1/Iggy group on a topic (``group_scope``), one committed offset
    (``offset_scope``), a Kafka classic group (``kafka_group_scope``), or a KIP-848
    consumer group with its members and targets (``consumer_group_scope``). Every scope
    lives in the partition of its ``group`` (``partition_for_group``)."""

    kind: str
    group: str
    topic: str = ""
    partition: int = -1


def group_scope(group: str, topic: str) -> Scope:
    """The record of a V1/Iggy group on a topic."""
    return Scope(KIND_GROUP, group, topic)


def offset_scope(group: str, topic: str, partition: int) -> Scope:
    """The record of a group's committed offset on one partition."""
    return Scope(KIND_OFFSET, group, topic, partition)


def kafka_group_scope(group_id: str) -> Scope:
    """The record of a Kafka classic group."""
    return Scope(KIND_KAFKA_GROUP, group_id)


def consumer_group_scope(group_id: str) -> Scope:
    """Every record of a KIP-848 consumer group (its own, each member's, each target)."""
    return Scope(KIND_CONSUMER_GROUP, group_id)


def scope_key(scope: Scope) -> bytes | None:
    """The one key a scope's record has; None for a consumer group (one key per member:
    which keys it had is what the topic holds)."""
    if scope.kind == KIND_OFFSET:
        return offset_key(scope.group, scope.topic, scope.partition)
    if scope.kind == KIND_GROUP:
        return group_key(scope.group, scope.topic)
    if scope.kind == KIND_KAFKA_GROUP:
        return kafka_group_key(scope.group)
    return None


_CONSUMER_PREFIX = b'[1,"consumer_'


def consumer_group_of_key(key: bytes) -> str | None:
    """The group id of a KIP-848 consumer group's key, None for a key of another kind."""
    if not key.startswith(_CONSUMER_PREFIX):
        return None
    return str(decode_key(key)[1])


class V1Groups(Protocol):
    """What ``GroupRecords`` reads of ``groups.coordinator.GroupCoordinator``."""

    def groups(self) -> list[Group]: ...

    def group(self, group: str, topic: str) -> Group | None: ...

    def committed(self) -> Mapping[GroupKey, Mapping[int, int]]: ...

    def committed_metadata(self) -> Mapping[GroupKey, Mapping[int, str]]: ...

    def committed_offset(self, group: str, topic: str,
                         partition: int) -> tuple[int, str] | None: ...


class ByIdGroups(Protocol):
    """What ``GroupRecords`` reads of the Kafka classic and KIP-848 coordinators."""

    def groups(self) -> list[Any]: ...

    def group(self, group_id: str) -> Any: ...


class GroupRecords:
    """The records of the coordinators' state: all of them (``snapshot``), or those of one
    ``Scope`` (``records``), byte for byte the same as the snapshot holds for its keys."""

    def __init__(self, v1: V1Groups, classic: ByIdGroups,
                 consumer: ByIdGroups | None = None) -> None:
        self._v1 = v1
        self._classic = classic
        self._consumer = consumer

    def snapshot(self, partitions: int) -> dict[int, dict[bytes, bytes]]:
        """Every record, ``{partition: {key: value}}`` (``state_records``)."""
        out = state_records(self._v1.groups(), self._v1.committed(),
                            self._v1.committed_metadata(), self._classic.groups(), partitions)
        if self._consumer is not None:
            for partition, more in consumer_state_records(self._consumer.groups(),
                                                          partitions).items():
                out.setdefault(partition, {}).update(more)
        return out

    def records(self, scope: Scope) -> dict[bytes, bytes]:
        """The records of ``scope`` now, ``{key: value}``: for a single-key scope its key
        with the value, or ``TOMBSTONE`` when the thing is gone; for a consumer group the
        records it has (none when it is gone)."""
        if scope.kind == KIND_OFFSET:
            found = self._v1.committed_offset(scope.group, scope.topic, scope.partition)
            key = offset_key(scope.group, scope.topic, scope.partition)
            return {key: TOMBSTONE if found is None else _offset_value(*found)}
        if scope.kind == KIND_GROUP:
            group = self._v1.group(scope.group, scope.topic)
            if group is None:
                return {group_key(scope.group, scope.topic): TOMBSTONE}
            entry = groups_to_json([group])["groups"][0]
            name, topic = entry.pop("group"), entry.pop("topic")
            return {group_key(name, topic): encode_value(entry)}
        if scope.kind == KIND_KAFKA_GROUP:
            classic = self._classic.group(scope.group)
            if classic is None:
                return {kafka_group_key(scope.group): TOMBSTONE}
            entry = classic_groups_to_json([classic])["groups"][0]
            group_id = entry.pop("group_id")
            return {kafka_group_key(group_id): encode_value(entry)}
        if scope.kind == KIND_CONSUMER_GROUP:
            consumer = None if self._consumer is None else self._consumer.group(scope.group)
            return {} if consumer is None else consumer_group_records(consumer)
        raise ValueError(f"unknown scope kind {scope.kind!r}")
