"""Rebuild a coordinator's state from the records of one or more partitions of
``__skerry_groups``: what a broker does when it starts, or becomes the leader of a
coordinator partition, before it answers for that partition's groups.

Owns: ``GroupLog`` (records applied in offset order, the latest value of each key kept,
tombstones deleting) and ``LoadedState`` (the groups, offsets, offset metadata and Kafka
groups the records describe, validated by the same rules as the JSON files of
``groups.store`` and ``groups.classic_store``).

Must not import: Twisted, ``broker``; no file I/O (the shell reads the partition and hands
the records here).

A record that cannot be read (not JSON, an unknown key or value version, a value that
breaks the document rules) raises ``ValueError`` naming the partition and offset: the
loader never guesses, as the JSON stores never paper over a damaged file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from data.names import is_valid_name
from groups.classic_group import ClassicGroup
from groups.classic_store import CLASSIC_FORMAT_VERSION, classic_groups_from_json
from groups.consumer_group import ConsumerGroup
from groups.consumer_records import CONSUMER_KEY_LENGTHS, consumer_groups_from_records
from groups.coordinator import GroupKey
from groups.group import Group
from groups.records import (
    GROUPS_TOPIC,
    KIND_GROUP,
    KIND_KAFKA_GROUP,
    KIND_OFFSET,
    decode_key,
    decode_value,
)
from groups.store import FORMAT_VERSION, check_int, groups_from_json

__all__ = ["GroupLog", "LoadedState"]


@dataclass
class LoadedState:
    """What ``GroupCoordinator.restore`` and ``ClassicGroupCoordinator.restore`` take."""

    groups: list[Group] = field(default_factory=list)
    offsets: dict[GroupKey, dict[int, int]] = field(default_factory=dict)
    metadata: dict[GroupKey, dict[int, str]] = field(default_factory=dict)
    classic_groups: list[ClassicGroup] = field(default_factory=list)
    consumer_groups: list[ConsumerGroup] = field(default_factory=list)
    """KIP-848 consumer groups (``ConsumerGroupService.load_groups`` takes them)."""


class GroupLog:
    """The latest value of every key seen so far; ``apply`` records in offset order."""

    def __init__(self) -> None:
        self.latest: dict[bytes, bytes] = {}
        """``{key: value}`` of every live key (what a cleaned partition would hold)."""
        self._where: dict[bytes, tuple[int, int]] = {}
        """``{key: (partition, offset)}`` of each live key's record (named in errors)."""

    def apply(self, partition: int, offset: int, key: bytes, value: bytes) -> None:
        """Take one record: a value replaces the key's previous one, a tombstone deletes
        it. Key and value are decoded here so a bad record is named where it is."""
        try:
            decode_key(key)
            fields = decode_value(value)
        except ValueError as error:
            raise ValueError(f"{_where(partition, offset)}: {error}") from None
        if fields is None:
            self.latest.pop(key, None)
            self._where.pop(key, None)
        else:
            self.latest[key] = value
            self._where[key] = (partition, offset)

    def apply_all(self, partition: int,
                  records: Iterable[tuple[int, bytes, bytes]]) -> None:
        """``apply`` every ``(offset, key, value)``."""
        for offset, key, value in records:
            self.apply(partition, offset, key, value)

    def merge(self, other: GroupLog) -> None:
        """Take every live key of ``other`` (another partition's records: no key is in two
        partitions)."""
        self.latest.update(other.latest)
        self._where.update(other._where)

    def state(self) -> LoadedState:
        """The state the live keys describe; ``ValueError`` naming the record for one
        whose value breaks the document rules."""
        loaded = LoadedState()
        consumer: dict[bytes, bytes] = {}
        for key in sorted(self.latest):
            kind, *names = decode_key(key)
            if kind in CONSUMER_KEY_LENGTHS:
                consumer[key] = self.latest[key]
                continue
            fields = decode_value(self.latest[key])
            assert fields is not None
            where = _where(*self._where[key])
            named = {"group", "topic", "group_id"} & fields.keys()
            if named:
                raise ValueError(f"{where}: the value names {', '.join(sorted(named))}; "
                                 f"names belong in the key")
            if kind == KIND_GROUP:
                doc: Any = {"version": FORMAT_VERSION,
                            "groups": [{"group": names[0], "topic": names[1], **fields}]}
                loaded.groups += groups_from_json(doc, where)
            elif kind == KIND_KAFKA_GROUP:
                doc = {"version": CLASSIC_FORMAT_VERSION,
                       "groups": [{"group_id": names[0], **fields}]}
                loaded.classic_groups += classic_groups_from_json(doc, where)
            elif kind == KIND_OFFSET:
                group, topic, partition = names
                if not (is_valid_name(group) and is_valid_name(topic)):
                    raise ValueError(f"{where}: {group!r} on {topic!r} is not a valid name")
                _offset_fields(fields, where)
                loaded.offsets.setdefault((group, topic), {})[partition] = fields["offset"]
                if fields.get("metadata"):
                    loaded.metadata.setdefault((group, topic), {})[partition] = \
                        fields["metadata"]
        if consumer:
            try:
                loaded.consumer_groups = consumer_groups_from_records(consumer)
            except ValueError as error:
                where = sorted({self._where[key].split(" offset ")[0] for key in consumer})
                raise ValueError(f"{', '.join(where)}: {error}") from None
        return loaded


def _where(partition: int, offset: int) -> str:
    return f"{GROUPS_TOPIC}/{partition} offset {offset}"


def _offset_fields(fields: dict[str, Any], where: str) -> None:
    extra = fields.keys() - {"offset", "metadata"}
    if extra or "offset" not in fields:
        raise ValueError(f"{where}: an offset value holds offset and optional metadata, "
                         f"got fields {sorted(fields)}")
    check_int(fields["offset"], f"{where}: offset", 0)
    if "metadata" in fields and not (isinstance(fields["metadata"], str)
                                     and fields["metadata"]):
        raise ValueError(f"{where}: metadata is a non-empty string")
