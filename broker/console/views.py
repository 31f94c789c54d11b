"""The JSON documents of the console's API, built from the broker's public methods.

Owns: ``ConsoleData``, one method per ``/api/`` endpoint returning plain dicts (lists,
strings, numbers, None) ready for ``json.dumps``, and ``ApiError`` (status and message of a
refused request). Message bytes (keys, values, header names and values) travel as
``encoded_bytes``: base64 always, the text too when the bytes are valid UTF-8, so any value
survives the trip and the page can show it as text or hex.

Reads go through ``BrokerCore``'s public methods (``topic_names``, ``topic_config``,
``partition_summary``, ``hw``, ``offset_for_timestamp``, ``fetch_raw``: a read that neither
creates a topic nor counts as consumption in the metrics), the group service's
``list_groups``/``describe`` (V1 DESCRIBE_GROUP's figures) and a ``ClusterView``.

Must not import: transports, the store, twisted.web. Time comes from ``now``.
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from broker.console.cluster import ClusterView, Placement
from broker.console.history import History
from broker.errors import SkerryError
from broker.services.iggy_catalog import CONSUMER_GROUP_PREFIX, STORE_PREFIX
from data.format import (
    KEY_HEADER_NAME,
    KIND_STRING,
    decode_record,
    decode_user_headers,
    extract_key,
)
from data.log import RawReadResult
from data.store import TopicConfig

__all__ = ["ApiError", "BrokerFacts", "ConsoleData", "CoreView", "GroupsView",
           "encoded_bytes", "is_internal_group", "is_internal_topic", "MAX_BROWSE",
           "BROWSE_MAX_BYTES"]

MAX_BROWSE = 500
"""Most messages one message-browser request returns."""
BROWSE_MAX_BYTES = 4 * 1024 * 1024
"""Most record bytes one message-browser request reads (at least one message is read)."""


def is_internal_topic(name: str) -> bool:
    """A store topic of the Iggy transport (``__iggy.<n>``): listed only on request, as
    ``skerry topics list`` lists it only with ``--internal``."""
    return name.startswith(STORE_PREFIX)


def is_internal_group(name: str) -> bool:
    """A group the Iggy transport keeps for a consumer (``iggy.consumer.*``): listed only
    on request, as ``skerry groups list`` lists it only with ``--internal``."""
    return name.startswith(CONSUMER_GROUP_PREFIX)


class ApiError(Exception):
    """A request the API refuses: an HTTP status and a sentence."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class CoreView(Protocol):
    """What the console reads of ``broker.core.BrokerCore``."""

    def topic_names(self) -> list[str]: ...

    def topic_config(self, name: str) -> TopicConfig | None: ...

    def partition_summary(self, name: str, partition: int) -> Any: ...

    def hw(self, topic: str, partition: int) -> int: ...

    def offset_for_timestamp(self, name: str, partition: int,
                             timestamp_us: int) -> int | None: ...

    def fetch_raw(self, topic_name: str, partition: int, offset: int, max_messages: int,
                  max_bytes: int) -> tuple[RawReadResult, int, int]: ...


class GroupsView(Protocol):
    """What the console reads of ``broker.services.groups.GroupService``."""

    def list_groups(self) -> list[tuple[str, str]]: ...

    def describe(self, group: str, topic: str) -> Any: ...


@dataclass(frozen=True)
class BrokerFacts:
    """Facts fixed at startup that the overview shows."""

    version: str
    fsync: str
    fsync_interval_ms: int
    data_dir: str
    started: float
    """The broker clock's seconds at startup (uptime is measured from it)."""
    auth: bool
    tls: bool


def encoded_bytes(data: bytes | None) -> dict[str, Any] | None:
    """``{"size", "base64", "text"}`` (``text``: None when ``data`` is not UTF-8)."""
    if data is None:
        return None
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"size": len(data), "base64": base64.b64encode(data).decode("ascii"), "text": text}


def _placement_json(placement: Placement) -> dict[str, Any]:
    return {"leader": placement.leader, "replicas": list(placement.replicas),
            "isr": list(placement.isr), "under_replicated": placement.under_replicated,
            "leader_epoch": placement.epoch, "role": placement.role}


class ConsoleData:
    """The documents behind every ``/api/`` endpoint (see ``docs/console.md``)."""

    def __init__(self, core: CoreView, groups: GroupsView | None, cluster: ClusterView,
                 history: History, facts: BrokerFacts, now: Callable[[], float],
                 connections: Callable[[], int] | None = None,
                 listeners: dict[str, str] | None = None) -> None:
        self.core = core
        self.groups = groups
        self.cluster = cluster
        self.history = history
        self.facts = facts
        self.now = now
        self._connections = connections
        self.listeners: dict[str, str] = {} if listeners is None else listeners
        """``{"v1": "host:port", ...}``: filled by the shell once every listener is up."""

    # ------------------------------------------------------------------ overview

    def overview(self) -> dict[str, Any]:
        now = self.now()
        facts = self.facts
        partitions = 0
        used = 0
        for name in self.core.topic_names():
            config = self.core.topic_config(name)
            if config is None:
                continue
            for p in range(config.partitions):
                partitions += 1
                used += self._summary(name, p).size_bytes
        try:
            disk = shutil.disk_usage(facts.data_dir)
            free: int | None = disk.free
            total: int | None = disk.total
        except OSError:
            free = total = None
        totals = self.history.totals()
        return {
            "brokers": [{"id": b.broker_id, "address": b.address, "local": b.local}
                        for b in self.cluster.brokers()],
            "cluster_mode": self.cluster.mode,
            "version": facts.version,
            "uptime_s": round(now - facts.started, 3),
            "fsync": facts.fsync,
            "fsync_interval_ms": facts.fsync_interval_ms,
            "listeners": dict(self.listeners),
            "auth": facts.auth,
            "tls": facts.tls,
            "connections": self._connections() if self._connections is not None else None,
            "storage": {"data_dir": os.path.abspath(facts.data_dir), "used_bytes": used,
                        "disk_free_bytes": free, "disk_total_bytes": total,
                        "topics": len(self.core.topic_names()), "partitions": partitions},
            "totals": None if totals is None else {
                "messages_in": totals[0], "bytes_in": totals[1],
                "messages_out": totals[2], "bytes_out": totals[3]},
            "sample_interval_s": self.history.interval_s,
            "rates": {
                "produce": [{"age_s": round(now - t, 3), "messages_per_s": r.messages,
                             "bytes_per_s": r.bytes} for t, r in self.history.produce],
                "consume": [{"age_s": round(now - t, 3), "messages_per_s": r.messages,
                             "bytes_per_s": r.bytes} for t, r in self.history.consume],
            },
        }

    # ------------------------------------------------------------------ topics

    def _summary(self, name: str, partition: int) -> Any:
        return self.core.partition_summary(name, partition)

    def _config(self, name: str) -> TopicConfig:
        config = self.core.topic_config(name)
        if config is None:
            raise ApiError(404, f"no topic {name}")
        return config

    def topics(self, internal: bool = False) -> dict[str, Any]:
        """Every topic; the Iggy transport's internal ones only when ``internal``
        (``internal_hidden`` counts those left out)."""
        rows = []
        hidden = 0
        for name in sorted(self.core.topic_names()):
            if not internal and is_internal_topic(name):
                hidden += 1
                continue
            config = self.core.topic_config(name)
            if config is None:
                continue  # deleted meanwhile
            messages = size = 0
            for p in range(config.partitions):
                summary = self._summary(name, p)
                messages += max(0, self.core.hw(name, p) + 1 - summary.first_offset)
                size += summary.size_bytes
            rows.append({"name": name, "partitions": config.partitions,
                         "replication_factor": config.replication_factor,
                         "messages": messages, "bytes": size,
                         "retention_ms": config.retention_ms,
                         "retention_bytes": config.retention_bytes})
        return {"topics": rows, "internal_hidden": hidden}

    def topic(self, name: str, internal: bool = False) -> dict[str, Any]:
        config = self._config(name)
        rows = []
        for p in range(config.partitions):
            summary = self._summary(name, p)
            hw = self.core.hw(name, p)
            rows.append({
                "partition": p,
                "first_offset": summary.first_offset,
                "last_offset": summary.next_offset - 1,
                "next_offset": summary.next_offset,
                "hw": hw,
                "messages": max(0, hw + 1 - summary.first_offset),
                "size_bytes": summary.size_bytes,
                "segments": summary.segment_count,
                **_placement_json(self.cluster.placement(name, p)),
            })
        groups = []
        if self.groups is not None:
            groups = [g for g, t in self.groups.list_groups()
                      if t == name and (internal or not is_internal_group(g))]
        return {"name": name, "partitions": config.partitions,
                "replication_factor": config.replication_factor,
                "min_insync_replicas": config.min_insync_replicas,
                "retention_ms": config.retention_ms, "retention_bytes": config.retention_bytes,
                "partition_details": rows, "groups": groups}

    def messages(self, name: str, partition: int, offset: int | None,
                 timestamp_ms: int | None, limit: int) -> dict[str, Any]:
        """Committed messages of one partition from ``offset`` (or the first at or after
        ``timestamp_ms``; neither: the last ``limit`` ones), at most ``limit``."""
        config = self._config(name)
        if not 0 <= partition < config.partitions:
            raise ApiError(400, f"partition {partition} out of range; topic {name} has "
                                f"{config.partitions} partitions")
        if not 1 <= limit <= MAX_BROWSE:
            raise ApiError(400, f"limit must be 1-{MAX_BROWSE}")
        hw = self.core.hw(name, partition)
        first = self._summary(name, partition).first_offset
        if timestamp_ms is not None:
            found = self.core.offset_for_timestamp(name, partition, timestamp_ms * 1000)
            start = hw + 1 if found is None else found
        elif offset is not None:
            start = offset
        else:
            start = max(first, hw + 1 - limit)
        start = max(start, first)
        messages: list[dict[str, Any]] = []
        next_offset = start
        if start <= hw:
            try:
                result, hw, first = self.core.fetch_raw(name, partition, start, limit,
                                                        BROWSE_MAX_BYTES)
            except SkerryError as exc:
                raise ApiError(400, str(exc)) from None
            raw = result.raw
            pos = 0
            for _ in range(result.count):
                record, pos = decode_record(raw, pos)
                messages.append(self._message(record))
            next_offset = result.next_offset
        return {"topic": name, "partition": partition, "from_offset": start,
                "next_offset": next_offset, "hw": hw, "first_offset": first,
                "messages": messages}

    @staticmethod
    def _message(record: Any) -> dict[str, Any]:
        headers = []
        if record.user_headers:
            try:
                decoded = decode_user_headers(record.user_headers)
            except ValueError:
                decoded = []
            key = extract_key(record.user_headers)
            for key_kind, hkey, value_kind, hvalue in decoded:
                if (key is not None and key_kind == KIND_STRING and hkey == KEY_HEADER_NAME
                        and hvalue == key):
                    continue  # the V1 key, shown as the key
                headers.append({"name": encoded_bytes(hkey), "name_kind": key_kind,
                                "value": encoded_bytes(hvalue), "value_kind": value_kind})
        else:
            key = None
        return {"offset": record.offset, "timestamp_us": record.timestamp,
                "origin_timestamp_us": record.origin_timestamp,
                "key": encoded_bytes(key), "value": encoded_bytes(record.payload),
                "headers": headers}

    # ------------------------------------------------------------------ groups

    def group_rows(self, internal: bool = False) -> dict[str, Any]:
        """Every group; the Iggy transport's only when ``internal`` (``internal_hidden``
        counts those left out)."""
        rows: list[dict[str, Any]] = []
        groups = self.groups
        if groups is None:
            return {"groups": rows, "internal_hidden": 0}
        hidden = 0
        for group, topic in groups.list_groups():
            if not internal and is_internal_group(group):
                hidden += 1
                continue
            try:
                info = groups.describe(group, topic)
            except SkerryError:
                continue
            rows.append({"group": group, "topic": topic, "state": info.state,
                         "generation": info.generation, "assignor": info.assignor,
                         "members": len(info.members), "lag": sum(info.lag),
                         "type": getattr(info, "type", "classic")})
        return {"groups": rows, "internal_hidden": hidden}

    def group(self, group: str, topic: str) -> dict[str, Any]:
        if self.groups is None:
            raise ApiError(404, f"no group {group} on topic {topic}")
        try:
            info = self.groups.describe(group, topic)
        except SkerryError as exc:
            raise ApiError(404, str(exc)) from None
        owner = {p: member for member, parts in info.members for p in parts}
        now = self.now()
        kind = getattr(info, "type", "classic")
        members: list[dict[str, Any]] = [{"member_id": m, "partitions": list(parts)}
                                         for m, parts in info.members]
        consumer: dict[str, Any] = {}
        if kind == "consumer":  # KIP-848: the epochs and what each member waits for
            epochs = dict(info.member_epochs)
            pending = dict(info.pending)
            for member in members:
                member["member_epoch"] = epochs.get(member["member_id"])
                member["pending"] = list(pending.get(member["member_id"], ()))
            consumer = {"group_epoch": info.group_epoch,
                        "assignment_epoch": info.assignment_epoch}
        return {
            "group": group, "topic": topic, "state": info.state, "type": kind, **consumer,
            "generation": info.generation, "assignor": info.assignor,
            "members": members,
            "partitions": [{"partition": p, "member": owner.get(p), "committed": c, "hw": h,
                            "lag": lag}
                           for p, c, h, lag in zip(info.partitions, info.committed, info.hw,
                                                   info.lag, strict=True)],
            "lag": sum(info.lag),
            "history": {
                "interval_s": self.history.interval_s,
                "window_s": self.history.capacity * self.history.interval_s,
                "samples": [{"age_s": round(now - t, 3),
                             "lag": {str(p): v for p, v in sorted(values.items())}}
                            for t, values in self.history.lag_series(group, topic)],
            },
        }

    # ------------------------------------------------------------------ access

    access: Any = None
    """``broker.services.acls.AclService``: the ACLs in force (set by the shell)."""

    def acls_doc(self) -> dict[str, Any]:
        """Who may do what (docs/security.md): whether ACLs are checked, the super users,
        the switch for resources without ACLs, and every ACL."""
        service = self.access
        if service is None:
            return {"enabled": False, "super_users": [], "allow_everyone_if_no_acl_found":
                    False, "acls": []}
        authorizer = service.authorizer
        return {
            "enabled": authorizer.enabled,
            "super_users": sorted(authorizer.super_users),
            "allow_everyone_if_no_acl_found": authorizer.allow_everyone_if_no_acl_found,
            "acls": [{"principal": a.principal, "resource_type": a.resource_type.value,
                      "pattern": a.pattern_type.value, "name": a.name,
                      "operation": a.operation.value, "permission": a.permission.value}
                     for a in service.list()],
        }

    # ------------------------------------------------------------------ cluster

    def cluster_doc(self, internal: bool = False) -> dict[str, Any]:
        """Brokers and partition placements; the Iggy transport's internal topics'
        partitions are listed only when ``internal``, but counted in ``leader_of`` and
        ``under_replicated`` either way (they are the brokers' work all the same)."""
        brokers = self.cluster.brokers()
        partitions = []
        leaders: dict[int, int] = {}
        under = 0
        hidden = 0
        for name in sorted(self.core.topic_names()):
            config = self.core.topic_config(name)
            if config is None:
                continue
            shown = internal or not is_internal_topic(name)
            hidden += 0 if shown else 1
            for p in range(config.partitions):
                placement = self.cluster.placement(name, p)
                under += placement.under_replicated
                if placement.leader is not None:
                    leaders[placement.leader] = leaders.get(placement.leader, 0) + 1
                if shown:
                    partitions.append({"topic": name, "partition": p,
                                       **_placement_json(placement)})
        return {
            "mode": self.cluster.mode,
            "controller": self.cluster.controller(),
            "brokers": [{"id": b.broker_id, "address": b.address, "local": b.local,
                         "leader_of": leaders.get(b.broker_id, 0)} for b in brokers],
            "under_replicated": under,
            "partitions": partitions,
            "internal_hidden": hidden,
        }
