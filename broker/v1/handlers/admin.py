"""V1 admin commands: topics (create, delete, add partitions, alter), brokers and leaders
through the control plane, METADATA, OFFSETS and ACLs.

Must not import: Twisted's reactor, sockets, files. Only ``Deferred`` for waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from twisted.internet.defer import Deferred

from access import Operation, ResourceType
from broker.errors import (
    BadRequest,
)
from broker.services.cluster_admin import AdminPlane, Applied
from broker.transport.slots import Slot
from broker.v1 import codec as c
from broker.v1.handlers.context import (
    Connection,
    HandlerContext,
)

log = logging.getLogger("skerry.handlers")


class AdminHandlers(HandlerContext):
    """Topic, cluster, metadata and ACL commands over the admin plane."""

    # ------------------------------------------------------------- topics

    control: Any = None
    """``broker.services.control.ControlPlane`` with ``cluster.etcd``: topic changes then go
    through etcd (every broker applies them from its watch)."""

    admin: AdminPlane | None = None
    """What the seed broker's admin commands ask (``broker/services/cluster_admin.py``): set
    by the shell; the local metadata file without etcd, the etcd control plane with it."""

    def _admin(self) -> AdminPlane:
        if self.admin is None:
            raise BadRequest("this broker has no control plane configured")
        return self.admin

    def admin_create_topic(self, cmd: c.AdminCreateTopic, slot: Slot,
                           conn: Connection) -> bytes | None:
        """The seed broker's shape: the topic's settings, then ``term``/``index`` of the
        change (its own reply fields, added at the end: older parsers read on)."""
        d = self._admin().create_topic(cmd.topic, cmd.partitions, cmd.replication_factor,
                                       cmd.min_insync_replicas, cmd.retention_ms,
                                       cmd.retention_bytes, dict(cmd.settings))
        return self._answer(cmd, d, lambda a: c.ok(cmd.cid, c.admin_topic_payload(
            cmd.topic, cmd.partitions, cmd.replication_factor, a.term, a.index)), slot, conn)

    def create_topic_here(self, topic: str, partitions: int, replication_factor: int,
                          min_insync_replicas: int | None, retention_ms: int | None,
                          retention_bytes: int | None,
                          extra: Mapping[str, Any] | None = None) -> None:
        """Create a topic on this broker (a control plane without etcd calls this)."""
        self.core.create_topic(topic, partitions, replication_factor, min_insync_replicas,
                               retention_ms, retention_bytes, extra)
        if self.replication.cluster is not None:
            self.replication.topic_created(topic)  # followers start fetching now

    def admin_register_broker(self, cmd: c.AdminRegisterBroker, slot: Slot,
                              conn: Connection) -> bytes | None:
        d = self._admin().register_broker(cmd.broker_id, cmd.host, cmd.port, cmd.epoch)

        def render(a: Applied) -> bytes:
            host, port = a.address if a.address is not None else (cmd.host, cmd.port)
            return c.ok(cmd.cid, c.broker_registered_payload(cmd.broker_id, host, port,
                                                             a.term, a.index))

        return self._answer(cmd, d, render, slot, conn)

    def admin_broker_heartbeat(self, cmd: c.AdminBrokerHeartbeat, slot: Slot,
                               conn: Connection) -> bytes | None:
        d = self._admin().heartbeat(cmd.broker_id)
        return self._answer(cmd, d, lambda a: c.ok(cmd.cid, c.broker_heartbeat_payload(
            cmd.broker_id, a.term, a.index)), slot, conn)

    def admin_set_partition_leader(self, cmd: c.AdminSetPartitionLeader, slot: Slot,
                                   conn: Connection) -> bytes | None:
        """The operator's forced election (docs/cluster.md): refused for a leader outside
        the partition's ISR unless unclean election is allowed."""
        self.core.resolve(cmd.topic, cmd.partition, False)
        d: Deferred[Applied] = self._admin().elect(cmd.topic, cmd.partition, cmd.leader,
                                                     cmd.isr)

        def render(a: Applied) -> bytes:
            self.core.notify_hw(cmd.topic, cmd.partition)
            return c.ok(cmd.cid, c.partition_leader_payload(
                cmd.topic, cmd.partition, cmd.leader, cmd.isr, a.term, a.index))

        return self._answer(cmd, d, render, slot, conn)

    def admin_get_metadata(self, cmd: c.AdminGetMetadata, slot: Slot,
                           conn: Connection) -> bytes:
        view = self._admin().metadata()
        return c.ok(cmd.cid, c.cluster_metadata_payload(view.topics, view.brokers))

    def admin_delete_topic(self, cmd: c.AdminDeleteTopic, slot: Slot,
                           conn: Connection) -> bytes | None:
        if self.control is not None:
            d = Deferred.fromCoroutine(self.control.delete_topic(cmd.topic))
            self._later(cmd, d, lambda _ti: c.ok(cmd.cid, c.topic_deleted_payload(cmd.topic)),
                        slot, conn)
            return None
        self.core.delete_topic(cmd.topic)
        forget = getattr(self.admin, "topic_deleted", None)
        if forget is not None:
            forget(cmd.topic)
        return c.ok(cmd.cid, c.topic_deleted_payload(cmd.topic))

    def admin_add_partitions(self, cmd: c.AdminAddPartitions, slot: Slot,
                             conn: Connection) -> bytes | None:
        if self.control is not None:
            d = Deferred.fromCoroutine(self.control.add_partitions(cmd.topic, cmd.partitions))
            self._later(cmd, d, lambda _ti: c.ok(
                cmd.cid, c.topic_partitions_payload(cmd.topic, cmd.partitions)), slot, conn)
            return None
        topic = self.core.add_partitions(cmd.topic, cmd.partitions)
        return c.ok(cmd.cid, c.topic_partitions_payload(cmd.topic, topic.config.partitions))

    def admin_alter_topic(self, cmd: c.AdminAlterTopic, slot: Slot,
                          conn: Connection) -> bytes | None:
        """Change a topic's settings: with etcd in the topic's record, which every broker
        watches and applies (docs/cluster.md), otherwise on this broker."""
        changes = dict(cmd.changes)
        if self.control is not None:
            d = Deferred.fromCoroutine(self.control.alter_topic(cmd.topic, changes))
            self._later(cmd, d, lambda _ti: self._altered(cmd), slot, conn)
            return None
        self.core.alter_topic(cmd.topic, changes)
        return self._altered(cmd)

    def _altered(self, cmd: c.AdminAlterTopic) -> bytes:
        """ADMIN_ALTER_TOPIC's answer: the retention settings, then (additive) the
        compaction settings when the topic is compacted or the request named one, and the
        segment settings when set or named."""
        config = self.core.topic_config(cmd.topic)
        if config is None:
            raise BadRequest(f"unknown topic {cmd.topic}")
        named = {name for name, _value in cmd.changes}
        return c.ok(cmd.cid, c.altered_topic_payload(cmd.topic, config, named))

    def metadata(self, cmd: c.Metadata, slot: Slot, conn: Connection) -> bytes:
        cluster = self.replication.cluster
        if cmd.topic is None:
            names = self.core.topic_names()
            if self.core.access.enabled:  # Kafka: topics the user may not Describe are left out
                names = [n for n in names
                         if self.core.allowed(conn, Operation.DESCRIBE, ResourceType.TOPIC, n)]
            # Additive, in a cluster: every broker's V1 address (and, with etcd, the
            # controller), so a client can reach the leaders METADATA <topic> names.
            return c.ok(cmd.cid, c.topics_payload(
                sorted(names), None if cluster is None else cluster.brokers,
                controller=None if self.control is None else self.control.controller,
                with_controller=self.control is not None))
        cfg = self.core.topic_config(cmd.topic)
        if cfg is None:
            raise BadRequest("unknown topic")
        roles, hws, under = [], [], []
        summaries = [self.core.partition_summary(cmd.topic, p) for p in range(cfg.partitions)]
        for p in range(cfg.partitions):
            info = self.replication.describe(cmd.topic, p)
            roles.append(info.role)
            hws.append(info.hw)
            under.append(info.under_replicated)
        leaders = self._leaders(cmd.topic, cfg.partitions) if cluster is not None else None
        return c.ok(cmd.cid, c.topic_metadata_payload(cmd.topic, cfg, roles, hws, under,
                                                      summaries, leaders))

    def _leaders(self, topic: str, partitions: int) -> tuple[list[int], list[int]]:
        """In a cluster: each partition's leader as this broker knows it (``-1``: unknown or
        offline) and its leader epoch; the addresses are in ``METADATA``'s ``brokers=``."""
        leaders, epochs = [], []
        for p in range(partitions):
            leader, epoch = self.replication.leader_view(topic, p)
            leaders.append(leader)
            epochs.append(epoch)
        return leaders, epochs

    def offsets(self, cmd: c.Offsets, slot: Slot, conn: Connection) -> bytes:
        self.core.resolve(cmd.topic, cmd.partition, False)
        hw = self.core.hw(cmd.topic, cmd.partition)
        found = None
        if cmd.ts_ms is not None:
            found = self.core.offset_for_timestamp(cmd.topic, cmd.partition, cmd.ts_ms * 1000)
            if found is not None and found > hw:
                found = None
        return c.ok(cmd.cid, c.offsets_range_payload(
            self.core.earliest_offset(cmd.topic, cmd.partition), hw + 1, found,
            asked=cmd.ts_ms is not None))

    # ------------------------------------------------------------- ACLs (docs/security.md)

    acls: Any = None
    """``broker.services.acls.AclService``: set by the shell (a file on one broker, etcd in
    a cluster)."""

    def _acls(self) -> Any:
        if self.acls is None:
            raise BadRequest("this broker keeps no ACLs")
        return self.acls

    def admin_acl_add(self, cmd: c.AdminAclAdd, slot: Slot, conn: Connection) -> bytes | None:
        d = self._acls().add([cmd.binding])
        return self._answer(cmd, d, lambda added: c.ok(cmd.cid, c.acls_added_payload(
            len(added))), slot, conn)

    def admin_acl_remove(self, cmd: c.AdminAclRemove, slot: Slot,
                         conn: Connection) -> bytes | None:
        d = self._acls().remove(cmd.filter)
        return self._answer(cmd, d, lambda gone: c.ok(cmd.cid, c.acls_payload(
            map(c.acl_entry, gone), removed=len(gone))), slot, conn)

    def admin_acl_list(self, cmd: c.AdminAclList, slot: Slot, conn: Connection) -> bytes:
        found = self._acls().list(cmd.filter)
        return c.ok(cmd.cid, c.acls_payload(map(c.acl_entry, found)))
