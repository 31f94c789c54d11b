"""V1 consumer-group commands: classic groups (JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, OFFSET),
KIP-848 GROUP_HEARTBEAT, DESCRIBE_GROUP, LIST_GROUPS and the group admin commands.

Must not import: Twisted's reactor, sockets, files. Only ``Deferred`` for waiting.
"""

from __future__ import annotations

import logging
from typing import Any

from twisted.internet.defer import maybeDeferred

from access import Operation, ResourceType
from broker.errors import (
    BadRequest,
)
from broker.services.consumer_groups import ConsumerGroupService
from broker.services.iggy_catalog import STORE_PREFIX
from broker.v1 import codec as c
from broker.v1.errors import from_group_refusal
from broker.v1.handlers.context import (
    _DEFAULT_REBALANCE_TIMEOUT_MS,
    Connection,
    HandlerContext,
    Slot,
    _reserved_topic,
)
from groups.consumer_effects import HeartbeatRequest
from groups.kafka_errors import KafkaGroupError

log = logging.getLogger("skerry.handlers")


class GroupHandlers(HandlerContext):
    """The group commands over the group services."""

    # ------------------------------------------------------------- groups

    def _group_topic(self, topic: str, partition: int | None = None) -> None:
        """Existence and range checks for member-scoped group commands (no auto-create)."""
        config = self.core.topic_config(topic)
        if config is None:
            from broker.errors import UnknownGroup
            raise UnknownGroup("no such group (unknown topic)")
        if partition is not None and partition >= config.partitions:
            raise BadRequest(f"partition {partition} out of range; topic {topic} has "
                             f"{config.partitions} partitions")

    def _check_session_timeout(self, value: int | None) -> None:
        if value is not None and not 100 <= value <= 3_600_000:
            raise BadRequest("session_timeout_ms must be between 100 and 3600000")

    def join(self, cmd: c.Join, slot: Slot, conn: Connection) -> None:
        self._check_session_timeout(cmd.session_timeout_ms)
        self.core.resolve(cmd.topic, None, True)
        d = maybeDeferred(self.groups.join, cmd.group, cmd.topic, cmd.member_id,
                          cmd.assignor, cmd.session_timeout_ms)
        self._later(cmd, d, lambda r: c.ok(cmd.cid, c.assignment_payload(r[0], r[1])), slot, conn)
        return None

    def sync(self, cmd: c.Sync, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic)
        d = maybeDeferred(self.groups.sync, cmd.group, cmd.topic, cmd.member_id,
                          cmd.generation)
        self._later(cmd, d, lambda r: c.ok(cmd.cid, c.assignment_payload(r[0], r[1])), slot, conn)
        return None

    def heartbeat(self, cmd: c.Heartbeat, slot: Slot, conn: Connection) -> bytes:
        self._group_topic(cmd.topic)
        self.groups.heartbeat(cmd.group, cmd.topic, cmd.member_id, cmd.generation)
        return c.ok(cmd.cid, c.HEARTBEAT_OK)

    def leave(self, cmd: c.Leave, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic)
        d = maybeDeferred(self.groups.leave, cmd.group, cmd.topic, cmd.member_id,
                          cmd.generation)
        self._later(cmd, d, lambda _: c.ok(cmd.cid, c.LEFT), slot, conn)
        return None

    def _check_commit_offset(self, topic: str, partition: int, offset: int) -> None:
        hw = self.core.hw(topic, partition)
        if offset > hw + 1:
            raise BadRequest(f"offset {offset} out of range; must be between 0 and hw+1 ({hw + 1})")

    def commit(self, cmd: c.Commit, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic, cmd.partition)
        self._check_commit_offset(cmd.topic, cmd.partition, cmd.offset)
        consumer = self.consumer_groups
        if consumer is not None and consumer.is_consumer_group(cmd.group):
            # A KIP-848 group (GROUP_HEARTBEAT): the generation is the member epoch.
            try:
                d = consumer.commit(cmd.group, cmd.member_id, cmd.generation, cmd.topic,
                                    cmd.partition, cmd.offset)
            except KafkaGroupError as refusal:
                raise from_group_refusal(refusal) from None
            self._later(cmd, d, lambda _: c.ok(cmd.cid, c.COMMITTED), slot, conn)
            return None
        d = maybeDeferred(self.groups.commit, cmd.group, cmd.topic, cmd.member_id,
                          cmd.generation, cmd.partition, cmd.offset)
        self._later(cmd, d, lambda _: c.ok(cmd.cid, c.COMMITTED), slot, conn)
        return None

    consumer_groups: ConsumerGroupService | None = None
    """Set by the shell: the KIP-848 consumer groups GROUP_HEARTBEAT serves (None: the
    command is refused)."""

    def group_heartbeat(self, cmd: c.GroupHeartbeat, slot: Slot, conn: Connection) -> bytes:
        """``GROUP_HEARTBEAT``: one KIP-848 heartbeat (join, heartbeat, leave); the reply
        is the member's id, epoch, heartbeat interval, the partitions it may consume now
        and its target."""
        service = self.consumer_groups
        if service is None:
            raise BadRequest("GROUP_HEARTBEAT is not enabled on this broker")
        for topic in cmd.topics or ():
            if topic.startswith(STORE_PREFIX):
                raise _reserved_topic(topic)
        ids = {name: meta.topic_id for name, meta in service.topics().items()}
        owned = None
        if cmd.owned is not None:
            by_topic: dict[Any, set[int]] = {}
            for topic, partition in cmd.owned:
                if topic in ids:  # a topic deleted since is owned by nobody
                    by_topic.setdefault(ids[topic], set()).add(partition)
            owned = tuple((t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))
        timeout = cmd.rebalance_timeout_ms
        if timeout is None:
            timeout = _DEFAULT_REBALANCE_TIMEOUT_MS if cmd.member_epoch == 0 else -1
        request = HeartbeatRequest(
            cmd.group, cmd.member_id, cmd.member_epoch, instance_id=cmd.instance,
            rebalance_timeout_ms=timeout, topic_names=cmd.topics, topic_regex=cmd.regex,
            server_assignor=cmd.assignor, owned=owned, client_id="v1",
            client_host=str(getattr(conn, "peer", "")))
        try:
            reply = service.heartbeat(request)
        except KafkaGroupError as refusal:
            raise from_group_refusal(refusal) from None
        assigned, target = service.assignment_of(cmd.group, reply.member_id)
        return c.ok(cmd.cid, c.group_heartbeat_payload(
            reply.member_id, reply.member_epoch, reply.heartbeat_interval_ms, assigned, target))

    def offset(self, cmd: c.Offset, slot: Slot, conn: Connection) -> bytes:
        config = self.core.topic_config(cmd.topic)
        if config is None:
            return c.ok(cmd.cid, c.offset_payload(0))
        if cmd.partition >= config.partitions:
            raise BadRequest(f"partition {cmd.partition} out of range; topic {cmd.topic} has "
                             f"{config.partitions} partitions")
        return c.ok(cmd.cid, c.offset_payload(
            self.groups.offset(cmd.group, cmd.topic, cmd.partition)))

    def describe_group(self, cmd: c.DescribeGroup, slot: Slot, conn: Connection) -> bytes:
        info = self.groups.describe(cmd.group, cmd.topic)
        coordinator = None if self.coordinators is None else self.coordinators.broker_id
        return c.ok(cmd.cid, c.describe_group_payload(info, coordinator))

    def list_groups(self, cmd: c.ListGroups, slot: Slot, conn: Connection) -> bytes:
        pairs = self.groups.list_groups()
        if self.core.access.enabled:  # groups the user may not Describe are left out
            pairs = [(g, t) for g, t in pairs
                     if self.core.allowed(conn, Operation.DESCRIBE, ResourceType.GROUP, g)]
        return c.ok(cmd.cid, c.groups_payload(f"{g}:{t}" for g, t in pairs))

    def admin_delete_group(self, cmd: c.AdminDeleteGroup, slot: Slot, conn: Connection) -> None:
        d = maybeDeferred(self.groups.delete_group, cmd.group, cmd.topic)
        self._later(cmd, d, lambda _: c.ok(cmd.cid, c.DELETED), slot, conn)
        return None

    def admin_reset_offsets(self, cmd: c.AdminResetOffsets, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic, cmd.partition)
        d = maybeDeferred(self.groups.reset_offsets, cmd.group, cmd.topic, cmd.target,
                          cmd.partition)
        self._later(cmd, d, lambda offsets: c.ok(cmd.cid, c.offsets_payload(offsets)),
                    slot, conn)
        return None

    def admin_commit(self, cmd: c.AdminCommit, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic, cmd.partition)
        self._check_commit_offset(cmd.topic, cmd.partition, cmd.offset)
        d = maybeDeferred(self.groups.admin_commit, cmd.group, cmd.topic, cmd.partition,
                          cmd.offset)
        self._later(cmd, d, lambda _: c.ok(cmd.cid, c.COMMITTED), slot, conn)
        return None
