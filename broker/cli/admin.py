"""``skerry topics ...`` and ``skerry groups ...``: look at and change topics and consumer
groups on a running broker, as tables for people or ``--json`` for scripts.

Owns: which V1 requests each subcommand sends (METADATA, REPLICA_STATUS, ADMIN_CREATE_TOPIC,
ADMIN_ADD_PARTITIONS, ADMIN_ALTER_TOPIC, ADMIN_DELETE_TOPIC, LIST_GROUPS, DESCRIBE_GROUP,
OFFSETS, ADMIN_RESET_OFFSETS, ADMIN_DELETE_GROUP; pipelined where there are many), the
documents built from the answers (one builder per subcommand, shared by the table and the
JSON form, so both always say the same), and the tables.

Columns a broker does not send (``size=``/``segments=`` of METADATA on an older broker, the
ISR when REPLICA_STATUS is refused) are shown as ``-`` and left out of the JSON.

Must not import: Twisted or the broker's server side; V1 through ``broker.client.aio`` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.cli.explain import unknown_topic
from broker.cli.table import human_bytes, render_table
from broker.client.aio import BrokerError, Connection, Reply, ToolError
from data.names import IGGY_GROUP_PREFIX, IGGY_STORE_PREFIX

__all__ = [
    "AlterTopic",
    "CreateTopic",
    "ResetOffsets",
    "alter_topic",
    "create_topic",
    "delete_groups",
    "delete_topic",
    "describe_groups",
    "describe_topic",
    "list_groups",
    "list_topics",
    "render_alter",
    "render_create",
    "render_group_delete",
    "render_group_list",
    "render_groups",
    "render_reset",
    "render_topic",
    "render_topic_list",
    "reset_offsets",
]


# ------------------------------------------------------------------------------ topics

def _topic_document(name: str, meta: Reply, statuses: Sequence[Reply | None]) -> dict[str, Any]:
    count = meta.number("partitions")
    hws = meta.ints("hw")
    earliest = meta.ints("earliest")
    nexts = meta.ints("next")
    roles = meta.items("roles")
    under = meta.bools("under_replicated")
    sizes = meta.ints("size") if meta.has("size") else None
    segments = meta.ints("segments") if meta.has("segments") else None
    partitions = []
    for p in range(count):
        row: dict[str, Any] = {
            "partition": p, "role": roles[p], "hw": hws[p], "earliest": earliest[p],
            "next": nexts[p], "messages": max(0, hws[p] + 1 - earliest[p]),
        }
        status = statuses[p] if p < len(statuses) else None
        if status is not None:
            row["isr"] = status.ints("isr")
        row["under_replicated"] = under[p]
        if sizes is not None:
            row["size_bytes"] = sizes[p]
        if segments is not None:
            row["segments"] = segments[p]
        partitions.append(row)
    return {
        "topic": name,
        "partition_count": count,
        "replication_factor": meta.number("replication_factor"),
        "min_insync_replicas": meta.number("min_insync_replicas"),
        "messages": sum(row["messages"] for row in partitions),
        "size_bytes": sum(sizes) if sizes is not None else None,
        "partitions": partitions,
    }


async def _metadata(conn: Connection, names: Sequence[str]) -> list[Reply]:
    futures = [conn.send("METADATA", name) for name in names]
    replies = []
    for name, future in zip(names, futures, strict=True):
        try:
            replies.append(await conn.wait(future, "METADATA"))
        except BrokerError as exc:
            if exc.broker_message == "unknown topic":
                raise ToolError(unknown_topic(name)) from None
            raise
    return replies


INTERNAL_TOPIC_PREFIX = IGGY_STORE_PREFIX
"""Store topics of the Iggy transport's streams other than ``default`` (reserved: V1 may
read them, not write them); ``topics list`` shows them only with ``--internal``."""


INTERNAL_GROUP_PREFIX = IGGY_GROUP_PREFIX
"""Groups the Iggy transport keeps for its consumer groups (reserved for it like the
topics); ``groups list`` shows them only with ``--internal``."""


async def list_topics(conn: Connection, internal: bool = False) -> list[dict[str, Any]]:
    """Every topic with its partition count, replication factor, messages and size; the
    Iggy transport's internal topics only when ``internal``."""
    names = [name for name in (await conn.request("METADATA")).items("topics")
             if internal or not name.startswith(INTERNAL_TOPIC_PREFIX)]
    metas = await _metadata(conn, names)
    out = []
    for name, meta in zip(names, metas, strict=True):
        doc = _topic_document(name, meta, [])
        out.append({k: doc[k] for k in ("topic", "partition_count", "replication_factor",
                                        "min_insync_replicas", "messages", "size_bytes")})
    return out


def render_topic_list(topics: Sequence[dict[str, Any]]) -> str:
    if not topics:
        return "no topics\n"
    return render_table(
        ["topic", "partitions", "replication", "messages", "size"],
        [[t["topic"], t["partition_count"], t["replication_factor"], t["messages"],
          human_bytes(t["size_bytes"])] for t in topics])


async def describe_topic(conn: Connection, name: str) -> dict[str, Any]:
    """METADATA of the topic plus each partition's ISR (REPLICA_STATUS)."""
    meta = (await _metadata(conn, [name]))[0]
    futures = [conn.send("REPLICA_STATUS", f"{name} {p}")
               for p in range(meta.number("partitions"))]
    statuses = []
    for future in futures:
        reply = await conn.wait(future, "REPLICA_STATUS", check=False)
        statuses.append(reply if reply.ok else None)
    return _topic_document(name, meta, statuses)


def render_topic(doc: dict[str, Any]) -> str:
    head = (f"topic {doc['topic']}: {doc['partition_count']} partition"
            f"{'' if doc['partition_count'] == 1 else 's'}, replication factor "
            f"{doc['replication_factor']}, min in-sync replicas {doc['min_insync_replicas']}, "
            f"{doc['messages']} message{'' if doc['messages'] == 1 else 's'}")
    if doc["size_bytes"] is not None:
        head += f", {human_bytes(doc['size_bytes'])}"
    rows = [[p["partition"], p["role"], p["hw"], p["earliest"], p["next"], p["messages"],
             p.get("isr"), p["under_replicated"], human_bytes(p.get("size_bytes")),
             p.get("segments")] for p in doc["partitions"]]
    table = render_table(["partition", "role", "hw", "earliest", "next", "messages", "isr",
                          "under-replicated", "size", "segments"], rows)
    return head + "\n" + table


@dataclass(frozen=True)
class CreateTopic:
    name: str
    partitions: int = 3
    replication_factor: int = 1
    min_isr: int | None = None
    retention_ms: int | None = None
    retention_bytes: int | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Cleanup policy, compaction and segment settings (ADMIN_CREATE_TOPIC's options)."""


async def create_topic(conn: Connection, spec: CreateTopic,
                       if_not_exists: bool = False) -> dict[str, Any]:
    """ADMIN_CREATE_TOPIC; with ``if_not_exists`` a topic that exists already is left as
    it is (``"created": false``, with its partitions and replication factor)."""
    args = f"{spec.name} {spec.partitions} {spec.replication_factor}"
    for option, value in (("min_isr", spec.min_isr), ("retention_ms", spec.retention_ms),
                          ("retention_bytes", spec.retention_bytes)):
        if value is not None:
            args += f" {option}={value}"
    for option, value in sorted(spec.settings.items()):
        args += f" {option}={value}"
    try:
        reply = await conn.request("ADMIN_CREATE_TOPIC", args)
    except BrokerError as exc:
        if not if_not_exists or exc.code != "BAD_REQUEST":
            raise
        existing = await conn.request("METADATA", spec.name, check=False)
        if not existing.ok:  # refused for another reason than being there
            raise
        reply = existing
        created = False
    else:
        created = True
    return {"topic": spec.name, "partitions": reply.number("partitions"),
            "replication_factor": reply.number("replication_factor"), "created": created}


def render_create(doc: dict[str, Any]) -> str:
    what = (f"{doc['partitions']} partition{'' if doc['partitions'] == 1 else 's'}, "
            f"replication factor {doc['replication_factor']}")
    if doc["created"]:
        return f"created topic {doc['topic']}: {what}\n"
    return f"topic {doc['topic']} exists already ({what}); left as it is\n"


_KEEP = object()


@dataclass(frozen=True)
class AlterTopic:
    """What ``topics alter`` changes; a field left at its default is not changed."""

    name: str
    partitions: int | None = None
    """The new total partition count."""
    retention_ms: Any = _KEEP
    """Milliseconds, or None for no limit."""
    retention_bytes: Any = _KEEP
    """Bytes per partition, or None for no limit."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Cleanup policy, compaction and segment settings to change (None: the broker's)."""

    def retention_changes(self) -> dict[str, int | None]:
        return {name: value for name, value in (("retention_ms", self.retention_ms),
                                                ("retention_bytes", self.retention_bytes))
                if value is not _KEEP}


async def alter_topic(conn: Connection, spec: AlterTopic) -> dict[str, Any]:
    """ADMIN_ADD_PARTITIONS for ``partitions``, ADMIN_ALTER_TOPIC for the retention."""
    before = (await _metadata(conn, [spec.name]))[0].number("partitions")
    doc: dict[str, Any] = {"topic": spec.name, "partitions_before": before,
                           "partitions": before}
    if spec.partitions is not None:
        if spec.partitions <= before:
            raise ToolError(f"topic {spec.name} has {before} partitions; --partitions must "
                            "be more (partitions are never removed)")
        reply = await conn.request("ADMIN_ADD_PARTITIONS", f"{spec.name} {spec.partitions}")
        doc["partitions"] = reply.number("partitions")
    changes: dict[str, Any] = {**spec.retention_changes(), **spec.settings}
    if changes:
        args = " ".join(f"{key}={'none' if value is None else value}"
                        for key, value in changes.items())
        reply = await conn.request("ADMIN_ALTER_TOPIC", f"{spec.name} {args}")
        for key in ("retention_ms", "retention_bytes"):
            value = reply.field(key)
            doc[key] = None if value == "none" else _number(value, key)
        for key in spec.settings:
            value = reply.field(key)
            doc[key] = None if value == "none" else (value if key == "cleanup_policy"
                                                     else _number(value, key))
    return doc


def _number(text: str, key: str) -> int:
    if not text.isdigit():
        raise ToolError(f"unexpected answer from the broker: {key}={text!r}")
    return int(text)


def render_alter(doc: dict[str, Any]) -> str:
    parts = []
    if doc["partitions"] != doc["partitions_before"]:
        parts.append(f"partitions {doc['partitions_before']} -> {doc['partitions']}")
    for key in ("retention_ms", "retention_bytes", "cleanup_policy", "min_compaction_lag_ms",
                "delete_retention_ms", "segment_bytes", "segment_ms"):
        if key in doc:
            parts.append(f"{key} {'none' if doc[key] is None else doc[key]}")
    return f"altered topic {doc['topic']}: {', '.join(parts)}\n"


async def delete_topic(conn: Connection, name: str) -> dict[str, Any]:
    try:
        await conn.request("ADMIN_DELETE_TOPIC", name)
    except BrokerError as exc:
        if exc.broker_message == "unknown topic":
            raise ToolError(unknown_topic(name)) from None
        raise
    return {"topic": name, "deleted": True}


# ------------------------------------------------------------------------------ groups

def _group_document(group: str, topic: str, reply: Reply) -> dict[str, Any]:
    members = []
    owner: dict[int, str] = {}
    for item in reply.items("members"):
        member_id, _, parts = item.partition(":")
        assigned = [int(p) for p in parts.split(",") if p]
        members.append({"member_id": member_id, "partitions": assigned})
        for p in assigned:
            owner[p] = member_id
    partitions = reply.ints("partitions")
    committed = reply.ints("committed")
    hws = reply.ints("hw")
    lags = reply.ints("lag")
    fields = reply.fields()
    coordinator = fields.get("coordinator")
    doc: dict[str, Any] = {
        "group": group,
        "topic": topic,
        "type": fields.get("type", "classic"),
        "coordinator": None if coordinator is None else int(coordinator),
        "state": reply.field("state"),
        "generation": reply.number("generation"),
        "assignor": reply.field("assignor"),
        "members": members,
        "lag": sum(lags),
        "partitions": [{"partition": p, "member_id": owner.get(p), "committed": c, "hw": h,
                        "lag": lag}
                       for p, c, h, lag in zip(partitions, committed, hws, lags, strict=True)],
    }
    if doc["type"] == "consumer":  # KIP-848: epochs, and what each member still waits for
        doc["group_epoch"] = reply.number("group_epoch")
        doc["assignment_epoch"] = reply.number("assignment_epoch")
        epochs = dict(item.split(":", 1) for item in reply.items("epochs"))
        pending = {m: [int(p) for p in parts.split(",") if p]
                   for m, _, parts in (i.partition(":") for i in reply.items("pending"))}
        for member in members:
            member["member_epoch"] = int(epochs.get(member["member_id"], -1))
            member["pending"] = pending.get(member["member_id"], [])
    return doc


async def _pairs(conn: Connection) -> list[tuple[str, str]]:
    pairs = []
    for item in (await conn.request("LIST_GROUPS")).items("groups"):
        group, _, topic = item.partition(":")
        pairs.append((group, topic))
    return pairs


async def _describe_pairs(conn: Connection,
                          pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    futures = [conn.send("DESCRIBE_GROUP", f"{g} {t}") for g, t in pairs]
    docs = []
    for (group, topic), future in zip(pairs, futures, strict=True):
        reply = await conn.wait(future, "DESCRIBE_GROUP", check=False)
        if reply.ok:  # a pair deleted between the two requests is simply gone
            docs.append(_group_document(group, topic, reply))
        elif reply.code != "GENERATION_MISMATCH":
            raise BrokerError(reply.code or "?", reply.payload, "DESCRIBE_GROUP")
    return docs


async def list_groups(conn: Connection, internal: bool = False) -> list[dict[str, Any]]:
    """Every (group, topic) pair with its state, generation, member count and total lag;
    the Iggy transport's groups only when ``internal``."""
    pairs = [(group, topic) for group, topic in await _pairs(conn)
             if internal or not group.startswith(INTERNAL_GROUP_PREFIX)]
    docs = await _describe_pairs(conn, pairs)
    return [{"group": d["group"], "topic": d["topic"], "type": d.get("type", "classic"),
             "state": d["state"], "generation": d["generation"], "members": len(d["members"]),
             "lag": d["lag"],
             **({} if d["coordinator"] is None else {"coordinator": d["coordinator"]})}
            for d in docs]


def render_group_list(groups: Sequence[dict[str, Any]]) -> str:
    """One row per (group, topic). A ``coordinator`` column in a cluster (where each group
    lives) and a ``type`` column once any group speaks KIP-848's protocol (``consumer``
    beside ``classic``, as ``kafka-consumer-groups --list --type`` shows)."""
    if not groups:
        return "no consumer groups\n"
    columns = ["group", "topic"]
    if any("coordinator" in g for g in groups):
        columns.append("coordinator")
    if any(g.get("type", "classic") != "classic" for g in groups):
        columns.append("type")
    columns += ["state", "generation", "members", "lag"]
    return render_table(columns, [[g.get(c) for c in columns] for g in groups])


async def describe_groups(conn: Connection, group: str,
                          topic: str | None = None) -> list[dict[str, Any]]:
    """Every topic ``group`` consumes (or just ``topic``): members, assignment, committed
    offsets, hw and lag per partition. ``ToolError`` when there is nothing to describe."""
    pairs = [(g, t) for g, t in await _pairs(conn) if g == group and topic in (None, t)]
    docs = await _describe_pairs(conn, pairs)
    if not docs:
        raise ToolError(f"no consumer group {group}" if topic is None
                        else f"no consumer group {group} on topic {topic}")
    return docs


def render_groups(docs: Sequence[dict[str, Any]]) -> str:
    summary = render_table(
        ["topic", "state", "generation", "assignor", "members"],
        [[d["topic"], d["state"], d["generation"], d["assignor"],
          ", ".join(m["member_id"] for m in d["members"]) or None] for d in docs])
    rows = [[d["topic"], p["partition"], p["member_id"], p["committed"], p["hw"], p["lag"]]
            for d in docs for p in d["partitions"]]
    detail = render_table(["topic", "partition", "member", "committed", "hw", "lag"], rows)
    coordinator = docs[0].get("coordinator")
    where = "" if coordinator is None else f" (coordinator: broker {coordinator})"
    consumer = [d for d in docs if d.get("type") == "consumer"]
    if consumer:  # KIP-848: the group's epochs and each member's epoch, owned and pending
        first = consumer[0]
        where += (f" (consumer group: group epoch {first['group_epoch']}, assignment epoch "
                  f"{first['assignment_epoch']})")
        members = render_table(
            ["topic", "member", "epoch", "assigned", "pending"],
            [[d["topic"], m["member_id"], m["member_epoch"],
              ",".join(str(p) for p in m["partitions"]) or None,
              ",".join(str(p) for p in m["pending"]) or None]
             for d in consumer for m in d["members"]])
        return f"group {docs[0]['group']}{where}\n{summary}\n{members}\n{detail}"
    return f"group {docs[0]['group']}{where}\n{summary}\n{detail}"


async def delete_groups(conn: Connection, group: str,
                        topic: str | None = None) -> dict[str, Any]:
    """ADMIN_DELETE_GROUP on every topic ``group`` consumes (or on ``topic``)."""
    topics = [t for g, t in await _pairs(conn) if g == group and topic in (None, t)]
    if not topics:
        raise ToolError(f"no consumer group {group}" if topic is None
                        else f"no consumer group {group} on topic {topic}")
    futures = [conn.send("ADMIN_DELETE_GROUP", f"{group} {t}") for t in topics]
    deleted = []
    for t, future in zip(topics, futures, strict=True):
        reply = await conn.wait(future, "ADMIN_DELETE_GROUP", check=False)
        if reply.ok:
            deleted.append(t)
        elif reply.code != "GENERATION_MISMATCH":  # not gone by itself meanwhile
            raise ToolError(f"cannot delete group {group} on topic {t}: {reply.payload}"
                            + (f" (deleted on {', '.join(deleted)})" if deleted else ""))
    return {"group": group, "deleted_topics": deleted}


def render_group_delete(doc: dict[str, Any]) -> str:
    return "".join(f"deleted group {doc['group']} on topic {t}\n"
                   for t in doc["deleted_topics"])


@dataclass(frozen=True)
class ResetOffsets:
    group: str
    topic: str
    target: str
    """``earliest``, ``latest``, ``offset``, ``datetime`` or ``shift``."""
    value: int | None = None
    """The offset, the time (ms since the epoch) or the shift of the last three."""
    partition: int | None = None
    execute: bool = False
    create: bool = False
    """Start the group on the topic when it has no offsets there yet."""
    shown: str = ""
    """How the target reads in the output (the time as given)."""

    def shown_target(self) -> str:
        """``earliest``, ``latest``, the offset, the time as given, or the signed shift."""
        if self.target in ("earliest", "latest"):
            return self.target
        if self.target == "datetime":
            return self.shown or str(self.value)
        if self.target == "shift":
            return f"{self.value or 0:+d}"
        return str(self.value)


async def reset_offsets(conn: Connection, spec: ResetOffsets) -> dict[str, Any]:
    """The plan (committed now -> after), applied with ADMIN_RESET_OFFSETS when
    ``execute``; otherwise nothing changes (a dry run, as kafka-consumer-groups does).
    A target outside ``[earliest, latest]`` is clamped into it and reported under
    ``clamped``. A group without offsets on the topic is refused on ``execute`` unless
    ``create``: the broker would start a new group under a mistyped name."""
    count = (await _metadata(conn, [spec.topic]))[0].number("partitions")
    if spec.partition is not None and spec.partition >= count:
        raise ToolError(f"partition {spec.partition} out of range; topic {spec.topic} has "
                        f"{count} partitions", 2)
    described = await conn.request("DESCRIBE_GROUP", f"{spec.group} {spec.topic}", check=False)
    current: dict[int, int] = {}
    members: list[str] = []
    if described.ok:
        doc = _group_document(spec.group, spec.topic, described)
        current = {p["partition"]: p["committed"] for p in doc["partitions"]}
        members = [m["member_id"] for m in doc["members"]]
    elif spec.execute and not spec.create:
        raise ToolError(f"no consumer group {spec.group} on topic {spec.topic}: check the "
                        "name (skerry groups list), or add --create to start it with these "
                        "offsets")
    partitions = [spec.partition] if spec.partition is not None else list(range(count))
    lookup = f" ts={spec.value}" if spec.target == "datetime" else ""
    futures = [conn.send("OFFSETS", f"{spec.topic} {p}{lookup}") for p in partitions]
    bounds: dict[int, tuple[int, int]] = {}
    wanted: dict[int, int] = {}
    for p, future in zip(partitions, futures, strict=True):
        reply = await conn.wait(future, "OFFSETS")
        low, high = reply.number("earliest"), reply.number("latest")
        bounds[p] = (low, high)
        if spec.target == "earliest":
            wanted[p] = low
        elif spec.target == "latest":
            wanted[p] = high
        elif spec.target == "offset":
            wanted[p] = spec.value or 0
        elif spec.target == "datetime":
            found = reply.number("offset")
            wanted[p] = found if found >= 0 else high
        else:
            wanted[p] = current.get(p, 0) + (spec.value or 0)
    planned = {p: min(max(w, bounds[p][0]), bounds[p][1]) for p, w in wanted.items()}
    if spec.execute:
        planned = await _apply_reset(conn, spec, planned)
    clamped = [{"partition": p, "requested": wanted[p], "after": planned[p],
                "earliest": bounds[p][0], "latest": bounds[p][1]}
               for p in sorted(planned) if planned[p] != wanted[p]]
    return {
        "group": spec.group, "topic": spec.topic, "target": spec.shown_target(),
        "executed": spec.execute, "group_exists": described.ok, "live_members": members,
        "offsets": [{"partition": p, "before": current.get(p, 0), "after": o}
                    for p, o in sorted(planned.items())],
        "clamped": clamped,
    }


async def _apply_reset(conn: Connection, spec: ResetOffsets,
                       planned: dict[int, int]) -> dict[int, int]:
    """ADMIN_RESET_OFFSETS: one request for a target the broker knows (earliest, latest,
    an offset), else one per partition with its planned offset. The broker's answer is
    what happened."""
    if spec.target in ("earliest", "latest", "offset"):
        target = spec.target if spec.target != "offset" else str(spec.value)
        args = [f"{spec.group} {spec.topic} {target}"
                + (f" partition={spec.partition}" if spec.partition is not None else "")]
    else:
        args = [f"{spec.group} {spec.topic} {offset} partition={p}"
                for p, offset in sorted(planned.items())]
    futures = [conn.send("ADMIN_RESET_OFFSETS", a) for a in args]
    done: dict[int, int] = {}
    for future in futures:
        reply = await conn.wait(future, "ADMIN_RESET_OFFSETS")
        for item in reply.items("offsets"):
            p, _, offset = item.partition(":")
            done[int(p)] = int(offset)
    return done


def render_reset(doc: dict[str, Any]) -> str:
    table = render_table(["partition", "before", "after"],
                         [[o["partition"], o["before"], o["after"]] for o in doc["offsets"]])
    where = f"group {doc['group']} on topic {doc['topic']}"
    how = f"by {doc['target']}" if doc["target"][:1] in "+-" else f"to {doc['target']}"
    notes = ""
    for c in doc["clamped"]:
        if c["requested"] > c["latest"]:
            why = f"is past the end (latest {c['latest']}: hw + 1)"
        else:
            why = f"is below the earliest retained offset {c['earliest']}"
        notes += (f"note: partition {c['partition']}: offset {c['requested']} {why}; "
                  f"moved to {c['after']} instead\n")
    if doc["executed"]:
        created = "" if doc["group_exists"] else f"started {where} (--create)\n"
        return f"reset {where} {how}\n{table}{notes}{created}"
    note = "dry run: nothing changed; add --execute to apply\n"
    if not doc["group_exists"]:
        note += (f"note: {where} has no offsets yet; --execute starts it only with "
                 "--create (check the name: skerry groups list)\n")
    if doc["live_members"]:
        note += (f"note: {where} has live members ({', '.join(doc['live_members'])}); the "
                 "broker refuses a reset until they stop\n")
    return f"plan to reset {where} {how}\n{table}{notes}{note}"
