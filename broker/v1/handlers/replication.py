"""V1 replication commands: what followers and peer brokers send (REPLICA_FETCH,
SET_PARTITION_ROLE, REPLICA_PULL, REPLICA_EPOCH, REPLICA_STATUS).

Must not import: Twisted's reactor, sockets, files. Only ``Deferred`` for waiting.
"""

from __future__ import annotations

import logging

from broker.transport.slots import Slot
from broker.v1 import codec as c
from broker.v1.handlers.context import (
    _PULL_DEFAULT_BYTES,
    _PULL_MAX_BYTES,
    Connection,
    HandlerContext,
    _pull_reply,
)

log = logging.getLogger("skerry.handlers")


class ReplicationHandlers(HandlerContext):
    """The replication commands over the replication service."""

    # ------------------------------------------------------------- replication

    def replica_fetch(self, cmd: c.ReplicaFetch, slot: Slot, conn: Connection) -> bytes:
        self.core.resolve(cmd.topic, cmd.partition, False)
        result = self.replication.replica_fetch(cmd.topic, cmd.partition, cmd.replica_id,
                                                     cmd.offset)
        self.core.notify_hw(cmd.topic, cmd.partition)
        return c.ok(cmd.cid, c.replica_fetch_payload(result.replica, result.acked_offset,
                                                     result.hw, result.isr,
                                                     result.under_replicated))

    def set_partition_role(self, cmd: c.SetPartitionRole, slot: Slot, conn: Connection) -> bytes:
        self.core.resolve(cmd.topic, cmd.partition, False)
        hw = self.replication.set_role(cmd.topic, cmd.partition, cmd.role)
        self.core.notify_hw(cmd.topic, cmd.partition)
        return c.ok(cmd.cid, c.role_payload(cmd.topic, cmd.partition, cmd.role, hw))

    # ------------------------------------------------------------- clusters

    def replica_pull(self, cmd: c.ReplicaPull, slot: Slot, conn: Connection) -> bytes | None:
        """A follower's fetch: records from ``offset`` on; long-polls with ``wait_ms`` when
        the follower is caught up (so an idle cluster does not spin)."""
        self.core.resolve(cmd.topic, cmd.partition, False)
        replication = self.replication
        max_bytes = min(cmd.max_bytes or _PULL_DEFAULT_BYTES, _PULL_MAX_BYTES)
        result = replication.pull(cmd.topic, cmd.partition, cmd.replica_id, cmd.offset,
                                  cmd.epoch, max_bytes=max_bytes)
        if result.count or not cmd.wait_ms or result.epoch != cmd.epoch \
                or cmd.offset != result.leo or result.hw_news:
            return _pull_reply(cmd.cid, result, cmd.raw)
        d = replication.wait_for_records(cmd.topic, cmd.partition, cmd.offset, cmd.wait_ms,
                                         cmd.replica_id)

        def render(_: object) -> bytes:
            again = replication.pull(cmd.topic, cmd.partition, cmd.replica_id, cmd.offset,
                                     cmd.epoch, max_bytes=max_bytes, record=False)
            return _pull_reply(cmd.cid, again, cmd.raw)

        self._later(cmd, d, render, slot, conn)
        return None

    def replica_epoch(self, cmd: c.ReplicaEpoch, slot: Slot, conn: Connection) -> bytes:
        self.core.resolve(cmd.topic, cmd.partition, False)
        answer = self.replication.epoch_query(cmd.topic, cmd.partition, cmd.replica_id,
                                                   cmd.epoch, cmd.last_epoch)
        return c.ok(cmd.cid, c.replica_epoch_payload(
            str(answer.role), answer.epoch, answer.confirmed, answer.end_epoch,
            answer.end_offset, answer.leo, answer.hw))

    def replica_status(self, cmd: c.ReplicaStatus, slot: Slot, conn: Connection) -> bytes:
        self.core.resolve(cmd.topic, cmd.partition, False)
        info = self.replication.status(cmd.topic, cmd.partition)
        return c.ok(cmd.cid, c.replica_status_payload(
            role=str(info.role), epoch=info.epoch, confirmed=info.confirmed, hw=info.hw,
            leo=info.leo, start=info.start, isr=info.isr,
            under_replicated=info.under_replicated, replica=info.replica,
            replicas=info.replicas, leader=info.leader, epochs=info.epochs))
