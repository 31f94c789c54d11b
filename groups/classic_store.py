"""The JSON document of the Kafka classic groups (``kafka-groups.json``): its shape, and
conversion between it and ``ClassicGroup`` objects, with validation on the way in.

Owns: the layout (below), ``classic_groups_to_json`` and ``classic_groups_from_json``. A
document that does not have exactly this shape raises ``ValueError`` naming the file, the
place (``groups[1].members[0].protocols``) and what is wrong, as ``groups.store`` does.
Committed offsets are not here: they live in the store V1 shares (``offsets.json``).

Must not import: Twisted, ``broker``, and it does no file I/O itself: the shell reads and
writes (atomically) and hands the parsed objects here.

Members keep their join order (the leader's successor is the earliest remaining member).
Metadata and assignments are opaque bytes, stored as base64. Held requests, session
deadlines and timer tokens are not stored: restored members get a fresh session timeout
(``ClassicGroupCoordinator.start``), and a group saved in the middle of a rebalance starts
a new one::

    {"version": 1,
     "groups": [{"group_id": "analytics", "state": "Stable", "generation": 3,
                 "protocol_type": "consumer", "protocol": "range", "leader": "c-1a2b",
                 "members": [{"member_id": "c-1a2b", "client_id": "c",
                              "client_host": "/10.0.0.7", "session_timeout_ms": 10000,
                              "rebalance_timeout_ms": 300000,
                              "protocols": [{"name": "range", "metadata": "AAAAAQACdDE="}],
                              "assignment": "AAAAAAAB"}]}]}
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

from data.names import is_valid_name
from groups.classic_group import ClassicGroup, ClassicMember
from groups.classic_state import ClassicGroupState
from groups.store import check_int as _int
from groups.store import check_keys as _keys

__all__ = [
    "CLASSIC_GROUPS_FILE",
    "CLASSIC_FORMAT_VERSION",
    "classic_groups_to_json",
    "classic_groups_from_json",
]

CLASSIC_GROUPS_FILE = "kafka-groups.json"
CLASSIC_FORMAT_VERSION = 1

_GROUP_KEYS = {"group_id", "state", "generation", "protocol_type", "protocol", "leader",
               "members"}
_MEMBER_KEYS = {"member_id", "client_id", "client_host", "session_timeout_ms",
                "rebalance_timeout_ms", "protocols", "assignment"}
_PROTOCOL_KEYS = {"name", "metadata"}
_SAVED_STATES = {state.value: state for state in ClassicGroupState
                 if state is not ClassicGroupState.DEAD}


def classic_groups_to_json(groups: Iterable[ClassicGroup]) -> dict[str, Any]:
    """The document for ``groups`` (fresh objects, safe to hand to a writer thread)."""
    return {
        "version": CLASSIC_FORMAT_VERSION,
        "groups": [
            {
                "group_id": group.group_id,
                "state": group.state.value,
                "generation": group.generation,
                "protocol_type": group.protocol_type,
                "protocol": group.protocol,
                "leader": group.leader,
                "members": [
                    {
                        "member_id": m.member_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "session_timeout_ms": m.session_timeout_ms,
                        "rebalance_timeout_ms": m.rebalance_timeout_ms,
                        "protocols": [{"name": name, "metadata": _b64(metadata)}
                                      for name, metadata in m.protocols],
                        "assignment": _b64(m.assignment),
                        **({"group_instance_id": m.group_instance_id}
                           if m.group_instance_id is not None else {}),
                    }
                    for m in group.members.values()
                ],
            }
            for group in sorted(groups, key=lambda g: g.group_id)
        ],
    }


def classic_groups_from_json(doc: Any, source: str = CLASSIC_GROUPS_FILE) -> list[ClassicGroup]:
    """Groups from the document (``None``: no file yet, no groups)."""
    if doc is None:
        return []
    if not isinstance(doc, dict):
        raise ValueError(f"{source}: expected a JSON object at the top level")
    if doc.get("version") != CLASSIC_FORMAT_VERSION:
        raise ValueError(f"{source}: version is {doc.get('version')!r}; this broker reads "
                         f"version {CLASSIC_FORMAT_VERSION}")
    _keys(doc, {"version", "groups"}, source)
    if not isinstance(doc["groups"], list):
        raise ValueError(f"{source}: groups must be a list")
    groups: list[ClassicGroup] = []
    seen: set[str] = set()
    for index, entry in enumerate(doc["groups"]):
        where = f"{source}: groups[{index}]"
        group = _group(entry, where)
        if group.group_id in seen:
            raise ValueError(f"{where}: group {group.group_id} appears twice")
        seen.add(group.group_id)
        groups.append(group)
    return groups


def _group(entry: Any, where: str) -> ClassicGroup:
    _keys(entry, _GROUP_KEYS, where)
    group_id = entry["group_id"]
    if not isinstance(group_id, str) or not is_valid_name(group_id) \
            or group_id in (".", ".."):
        raise ValueError(f"{where}.group_id: {group_id!r} is not a valid group id")
    state = _SAVED_STATES.get(entry["state"])
    if state is None:
        raise ValueError(f"{where}.state: expected one of {sorted(_SAVED_STATES)}, "
                         f"got {entry['state']!r}")
    generation = _int(entry["generation"], f"{where}.generation", 0)
    raw_members = entry["members"]
    if not isinstance(raw_members, list):
        raise ValueError(f"{where}.members: expected a list")
    members: list[ClassicMember] = []
    for m_index, raw in enumerate(raw_members):
        member = _member(raw, f"{where}.members[{m_index}]")
        if any(m.member_id == member.member_id for m in members):
            raise ValueError(f"{where}.members[{m_index}].member_id: {member.member_id!r} "
                             f"appears twice")
        members.append(member)
    protocol_type = _optional_str(entry["protocol_type"], f"{where}.protocol_type")
    protocol = _optional_str(entry["protocol"], f"{where}.protocol")
    leader = _optional_str(entry["leader"], f"{where}.leader")
    if (state is ClassicGroupState.EMPTY) != (not members):
        raise ValueError(f"{where}.state: {state.value} with {len(members)} members")
    if members:
        if not protocol_type:
            raise ValueError(f"{where}.protocol_type: a group with members has one")
        if leader not in {m.member_id for m in members}:
            raise ValueError(f"{where}.leader: {leader!r} is not a member")
    elif protocol_type is not None or protocol is not None or leader is not None:
        raise ValueError(f"{where}: an Empty group has no protocol type, protocol or leader")
    if state in (ClassicGroupState.AWAITING_SYNC, ClassicGroupState.STABLE):
        if generation < 1:
            raise ValueError(f"{where}.generation: a {state.value} group has generation >= 1")
        if protocol is None:
            raise ValueError(f"{where}.protocol: a {state.value} group has a protocol")
        for m_index, member in enumerate(members):
            if protocol not in member.protocol_names():
                raise ValueError(f"{where}.members[{m_index}].protocols: no {protocol!r}, "
                                 f"the group's protocol")
    return ClassicGroup(group_id, generation=generation, protocol_type=protocol_type,
                        protocol=protocol, leader=leader, members=members, state=state)


def _member(raw: Any, where: str) -> ClassicMember:
    optional = raw.keys() & {"group_instance_id"} if isinstance(raw, dict) else set()
    _keys(raw, _MEMBER_KEYS | optional, where)
    instance = raw.get("group_instance_id")
    if instance is not None and (not isinstance(instance, str) or not instance):
        raise ValueError(f"{where}.group_instance_id: expected a non-empty string")
    member_id = raw["member_id"]
    if not isinstance(member_id, str) or not member_id:
        raise ValueError(f"{where}.member_id: expected a non-empty string")
    client_id = _optional_str(raw["client_id"], f"{where}.client_id")
    client_host = _optional_str(raw["client_host"], f"{where}.client_host")
    if client_id is None or client_host is None:
        raise ValueError(f"{where}: client_id and client_host are strings")
    session = _int(raw["session_timeout_ms"], f"{where}.session_timeout_ms", 1)
    rebalance = _int(raw["rebalance_timeout_ms"], f"{where}.rebalance_timeout_ms", 0)
    raw_protocols = raw["protocols"]
    if not isinstance(raw_protocols, list) or not raw_protocols:
        raise ValueError(f"{where}.protocols: expected a non-empty list")
    protocols: list[tuple[str, bytes]] = []
    for p_index, item in enumerate(raw_protocols):
        p_where = f"{where}.protocols[{p_index}]"
        _keys(item, _PROTOCOL_KEYS, p_where)
        name = item["name"]
        if not isinstance(name, str) or not name:
            raise ValueError(f"{p_where}.name: expected a non-empty string")
        protocols.append((name, _unb64(item["metadata"], f"{p_where}.metadata")))
    return ClassicMember(member_id, client_id, client_host, session, rebalance,
                         tuple(protocols), _unb64(raw["assignment"], f"{where}.assignment"),
                         group_instance_id=instance)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a base64 string")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as error:
        raise ValueError(f"{where}: not base64 ({error})") from None


def _optional_str(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}: expected a string or null, got {value!r}")
    return value
