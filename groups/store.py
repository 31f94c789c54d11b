"""The JSON documents ``groups.json`` and ``offsets.json``: their shapes, and conversion
between them and the coordinator's state, with validation on the way in.

Owns: the document layouts (below), ``groups_to_json``/``groups_from_json`` and
``offsets_to_json``/``offsets_from_json``. A document that does not have exactly this shape
raises ``ValueError`` naming the file, the place (``groups[2].members[0].assigned``) and
what is wrong: these files are only ever replaced atomically, so a damaged one is news the
operator must see, never something to paper over.

Must not import: Twisted, the broker's shell, and it does no file I/O itself: the shell
reads and writes with ``data.atomic`` and hands the parsed objects here.

``groups.json`` (members and assignments of the current generation; the session deadlines
are not stored, restored members get a fresh session timeout)::

    {"version": 1,
     "groups": [{"group": "analytics", "topic": "orders", "generation": 3,
                 "assignor": "range", "partitions": 3,
                 "members": [{"member_id": "c1", "session_timeout_ms": 10000,
                              "assigned": [0, 1]},
                             {"member_id": "c2", "session_timeout_ms": 10000,
                              "assigned": [2]}]}]}

``offsets.json`` (committed offset = the next offset to read, per partition)::

    {"version": 1,
     "offsets": [{"group": "analytics", "topic": "orders", "committed": {"0": 5, "2": 3}}]}

Version 2 is the same document where an entry may also carry ``"metadata": {"0": "text"}``:
the Kafka offset metadata strings (non-empty ones only) of some of its committed
partitions. A broker writes version 1 while no metadata is kept, so a document without
Kafka metadata stays readable by brokers that only know version 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from data.names import is_valid_name
from groups.assignors import ASSIGNORS
from groups.coordinator import GroupKey
from groups.group import Group, Member

__all__ = [
    "GROUPS_FILE",
    "OFFSETS_FILE",
    "FORMAT_VERSION",
    "groups_to_json",
    "groups_from_json",
    "offsets_to_json",
    "offsets_from_json",
    "offset_metadata_from_json",
    "OFFSETS_FORMAT_VERSIONS",
]

GROUPS_FILE = "groups.json"
OFFSETS_FILE = "offsets.json"
FORMAT_VERSION = 1
OFFSETS_FORMAT_VERSIONS = (1, 2)
"""The ``offsets.json`` versions this broker reads (2: with Kafka offset metadata)."""

_GROUP_KEYS = {"group", "topic", "generation", "assignor", "partitions", "members"}
_MEMBER_KEYS = {"member_id", "session_timeout_ms", "assigned"}
_OFFSET_KEYS = {"group", "topic", "committed"}


def groups_to_json(groups: Iterable[Group]) -> dict[str, Any]:
    """The ``groups.json`` document for ``groups`` (fresh objects, safe to hand to a
    writer thread)."""
    return {
        "version": FORMAT_VERSION,
        "groups": [
            {
                "group": group.group,
                "topic": group.topic,
                "generation": group.generation,
                "assignor": group.assignor,
                "partitions": group.partitions,
                "members": [
                    {
                        "member_id": member_id,
                        "session_timeout_ms": group.members[member_id].session_timeout_ms,
                        "assigned": group.assigned(member_id),
                    }
                    for member_id in sorted(group.members)
                ],
            }
            for group in sorted(groups, key=lambda g: (g.group, g.topic))
        ],
    }


def offsets_to_json(offsets: Mapping[GroupKey, Mapping[int, int]],
                    metadata: Mapping[GroupKey, Mapping[int, str]] | None = None
                    ) -> dict[str, Any]:
    """The ``offsets.json`` document for ``{(group, topic): {partition: offset}}`` and the
    Kafka offset metadata ``{(group, topic): {partition: text}}`` kept beside some of them
    (version 2 only when there is any)."""
    metadata = metadata or {}
    entries: list[dict[str, Any]] = []
    for group, topic in sorted(offsets):
        committed = offsets[(group, topic)]
        if not committed:
            continue
        entry: dict[str, Any] = {
            "group": group,
            "topic": topic,
            "committed": {str(p): committed[p] for p in sorted(committed)},
        }
        texts = {str(p): text for p, text in sorted(metadata.get((group, topic), {}).items())
                 if text and p in committed}
        if texts:
            entry["metadata"] = texts
        entries.append(entry)
    version = 2 if any("metadata" in entry for entry in entries) else FORMAT_VERSION
    return {"version": version, "offsets": entries}


def groups_from_json(doc: Any, source: str = GROUPS_FILE) -> list[Group]:
    """Groups from a ``groups.json`` document (``None``: no file yet, no groups)."""
    if doc is None:
        return []
    entries = _document(doc, "groups", source)
    groups: list[Group] = []
    seen: set[GroupKey] = set()
    for index, entry in enumerate(entries):
        where = f"{source}: groups[{index}]"
        check_keys(entry, _GROUP_KEYS, where)
        group = _name(entry["group"], f"{where}.group")
        topic = _name(entry["topic"], f"{where}.topic")
        if (group, topic) in seen:
            raise ValueError(f"{where}: group {group} on topic {topic} appears twice")
        seen.add((group, topic))
        generation = check_int(entry["generation"], f"{where}.generation", 0)
        partitions = check_int(entry["partitions"], f"{where}.partitions", 0)
        assignor = entry["assignor"]
        if assignor not in ASSIGNORS:
            raise ValueError(f"{where}.assignor: unknown assignor {assignor!r}")
        raw_members = entry["members"]
        if not isinstance(raw_members, list):
            raise ValueError(f"{where}.members: expected a list")
        if raw_members and generation < 1:
            raise ValueError(f"{where}.generation: a group with members has generation >= 1")
        members: list[Member] = []
        assignment: dict[str, list[int]] = {}
        owner: dict[int, str] = {}
        for m_index, raw in enumerate(raw_members):
            m_where = f"{where}.members[{m_index}]"
            check_keys(raw, _MEMBER_KEYS, m_where)
            member_id = _name(raw["member_id"], f"{m_where}.member_id")
            if member_id in assignment:
                raise ValueError(f"{m_where}.member_id: {member_id} appears twice")
            timeout = check_int(raw["session_timeout_ms"], f"{m_where}.session_timeout_ms", 1)
            assigned = raw["assigned"]
            if not isinstance(assigned, list):
                raise ValueError(f"{m_where}.assigned: expected a list of partitions")
            for partition in assigned:
                check_int(partition, f"{m_where}.assigned", 0)
                if partition >= partitions:
                    raise ValueError(f"{m_where}.assigned: partition {partition} is not below "
                                     f"the group's partition count {partitions}")
                if partition in owner:
                    raise ValueError(f"{m_where}.assigned: partition {partition} is also "
                                     f"assigned to {owner[partition]}")
                owner[partition] = member_id
            members.append(Member(member_id, timeout))
            assignment[member_id] = sorted(assigned)
        if members and len(owner) != partitions:
            missing = min(set(range(partitions)) - owner.keys())
            raise ValueError(f"{where}.members: partition {missing} is assigned to no member")
        groups.append(Group(group, topic, assignor=assignor, generation=generation,
                            partitions=partitions, members=members, assignment=assignment))
    return groups


def offsets_from_json(doc: Any, source: str = OFFSETS_FILE) -> dict[GroupKey, dict[int, int]]:
    """Committed offsets from an ``offsets.json`` document (``None``: no file yet)."""
    return _offsets_document(doc, source)[0]


def offset_metadata_from_json(doc: Any, source: str = OFFSETS_FILE
                              ) -> dict[GroupKey, dict[int, str]]:
    """The Kafka offset metadata of an ``offsets.json`` document (version 2), checked like
    the rest of it: ``{(group, topic): {partition: text}}``."""
    return _offsets_document(doc, source)[1]


def _offsets_document(doc: Any, source: str
                      ) -> tuple[dict[GroupKey, dict[int, int]], dict[GroupKey, dict[int, str]]]:
    if doc is None:
        return {}, {}
    entries = _document(doc, "offsets", source, OFFSETS_FORMAT_VERSIONS)
    version = doc["version"]
    offsets: dict[GroupKey, dict[int, int]] = {}
    metadata: dict[GroupKey, dict[int, str]] = {}
    for index, entry in enumerate(entries):
        where = f"{source}: offsets[{index}]"
        if version >= 2 and isinstance(entry, dict) and "metadata" in entry:
            check_keys(entry, _OFFSET_KEYS | {"metadata"}, where)
        else:
            check_keys(entry, _OFFSET_KEYS, where)
        group = _name(entry["group"], f"{where}.group")
        topic = _name(entry["topic"], f"{where}.topic")
        if (group, topic) in offsets:
            raise ValueError(f"{where}: group {group} on topic {topic} appears twice")
        committed = entry["committed"]
        if not isinstance(committed, dict):
            raise ValueError(f"{where}.committed: expected an object of partition: offset")
        parsed: dict[int, int] = {}
        for text, offset in committed.items():
            if not (isinstance(text, str) and text.isdecimal() and text.isascii()
                    and str(int(text)) == text):
                raise ValueError(f"{where}.committed: key {text!r} is not a partition number")
            parsed[int(text)] = check_int(offset, f"{where}.committed[{text!r}]", 0)
        offsets[(group, topic)] = parsed
        if "metadata" in entry:
            metadata[(group, topic)] = _metadata(entry["metadata"], parsed, f"{where}.metadata")
    return offsets, metadata


def _metadata(raw: Any, committed: Mapping[int, int], where: str) -> dict[int, str]:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an object of partition: text")
    texts: dict[int, str] = {}
    for key, text in raw.items():
        if not (isinstance(key, str) and key.isdecimal() and key.isascii()
                and int(key) in committed and str(int(key)) == key):
            raise ValueError(f"{where}: key {key!r} is not a committed partition")
        if not isinstance(text, str) or not text:
            raise ValueError(f"{where}[{key!r}]: expected a non-empty string")
        texts[int(key)] = text
    return texts


def _document(doc: Any, field: str, source: str,
              versions: tuple[int, ...] = (FORMAT_VERSION,)) -> list[Any]:
    if not isinstance(doc, dict):
        raise ValueError(f"{source}: expected a JSON object at the top level")
    if doc.get("version") not in versions:
        readable = " or ".join(str(v) for v in versions)
        raise ValueError(f"{source}: version is {doc.get('version')!r}; this broker reads "
                         f"version {readable}")
    check_keys(doc, {"version", field}, source)
    entries = doc[field]
    if not isinstance(entries, list):
        raise ValueError(f"{source}: {field} must be a list")
    return entries


def check_keys(obj: Any, expected: set[str], where: str) -> None:
    """``ValueError`` unless ``obj`` is a JSON object with exactly the ``expected`` keys."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected an object")
    missing = expected - obj.keys()
    if missing:
        raise ValueError(f"{where}: missing {', '.join(sorted(missing))}")
    extra = obj.keys() - expected
    if extra:
        raise ValueError(f"{where}: unknown field {', '.join(sorted(extra))}")


def check_int(value: Any, where: str, minimum: int) -> int:
    """``value`` when it is an integer >= ``minimum``, else ``ValueError``."""
    if type(value) is not int or value < minimum:
        raise ValueError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def _name(value: Any, where: str) -> str:
    if not is_valid_name(value):
        raise ValueError(f"{where}: {value!r} is not a valid name")
    return value
