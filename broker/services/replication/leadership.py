"""Roles and epochs: who leads a partition on this broker, and fencing by a newer epoch.

Owns: SET_PARTITION_ROLE (persisted before it takes effect), and in a cluster a partition's
leadership by epoch: promotion to a new epoch, stepping down, fencing when another replica
knows a newer epoch (from a fetch, an epoch query or a probe answer), confirming a
leadership restored from disk (refusing writes until then), refusing writes while another
replica claims the same epoch, and dropping from the ISR a replica the leader's probe cannot
reach that has not fetched since the promotion.

The rules live in ``replication/partition.py`` and ``replication/roles.py`` (pure); this
module persists what they decide and tells the other parts.

Must not import: the global reactor (the clock is injected), sockets, the store, the other
parts of this package: it imports only the shared ``partitions`` and ``ports`` and sees the
parts through ``ports``.
"""

from __future__ import annotations

import logging

from twisted.internet.interfaces import IReactorTime

from broker.errors import BadRequest, NotLeader, StorageError
from broker.services.replication.partitions import Slot, not_leader, now_ms
from broker.services.replication.ports import (
    AckSettling,
    Announcing,
    Checkpointing,
    ProgressTracking,
    PullWaking,
)
from replication.cluster import ClusterConfig
from replication.roles import Role, parse_role

__all__ = ["Leadership"]

log = logging.getLogger("skerry.replication")


class Leadership:
    """Role changes and epoch fencing of every partition on this broker."""

    def __init__(self, clock: IReactorTime, cluster: ClusterConfig | None, *,
                 checkpoints: Checkpointing, progress: ProgressTracking, acks: AckSettling,
                 pulls: PullWaking, listeners: Announcing) -> None:
        self._clock = clock
        self._cluster = cluster
        self._checkpoints = checkpoints
        self._progress = progress
        self._acks = acks
        self._pulls = pulls
        self._listeners = listeners

    def set_role(self, slot: Slot, role: str | Role) -> int:
        """SET_PARTITION_ROLE: persisted before it takes effect; returns ``hw``.

        To FOLLOWER: PRODUCE and REPLICA_FETCH get NOT_LEADER, waiting ``acks=all`` requests
        are answered NOT_LEADER, ``hw`` and the ISR freeze. To LEADER: a new leader epoch;
        the frozen ISR members get a fresh lag window. The current role: no change.
        """
        new_role = parse_role(role)
        if self._cluster is not None and self._cluster.controlled:
            raise BadRequest("this cluster's leaders are elected through etcd "
                             "(cluster.etcd); use ADMIN_SET_PARTITION_LEADER or "
                             "`skerry cluster elect` instead of SET_PARTITION_ROLE")
        if self._cluster is not None:
            return self._set_role_in_cluster(slot, new_role)
        repl = slot.repl
        if new_role is repl.role:
            return repl.hw
        self._checkpoints.persist(slot, repl.checkpoint(new_role))
        hw_before = repl.hw
        repl.change_role(new_role, now_ms(self._clock))
        self._checkpoints.discard(slot)
        if new_role is Role.FOLLOWER:
            self._progress.cancel_expiry(slot)
            self._acks.fail(slot, not_leader(slot, self._cluster))
            log.info("%s/%d is now a follower (hw=%d)", slot.topic, slot.partition, repl.hw)
        else:
            log.info("%s/%d is now the leader, epoch %d (hw=%d)", slot.topic, slot.partition,
                     repl.leader_epoch, repl.hw)
            self._progress.after_change(slot, False, repl.hw > hw_before,
                                        saved=repl.hw == hw_before)
        self._listeners.changed(slot)
        return repl.hw

    def observe(self, slot: Slot, epoch: int) -> bool:
        """Someone knows ``epoch``. A leader of an older epoch is fenced (it stops taking
        writes, its waiting acks=all requests fail NOT_LEADER); a follower remembers the
        epoch. True when this broker was fenced."""
        repl = slot.repl
        if epoch <= repl.leader_epoch or not slot.is_replica:
            return False
        if repl.role is Role.LEADER:
            try:
                self._checkpoints.persist(slot, repl.fence_checkpoint(epoch))
            except StorageError as error:
                log.error("%s/%d: %s (fenced anyway; retried at the next checkpoint)",
                          slot.topic, slot.partition, error.message)
                self._checkpoints.mark_dirty(slot)
            self._step_down(slot, epoch,
                            f"partition {slot.partition} of {slot.topic}: fenced, epoch {epoch} "
                            f"is newer than this broker's epoch {repl.leader_epoch}")
            return True
        repl.observe_epoch(epoch)
        slot.leader_id = -1
        self._checkpoints.save(slot)
        self._listeners.changed(slot)
        return False

    def confirm(self, slot: Slot, epoch: int) -> bool:
        """Every other replica answered with no newer epoch: writes are accepted. False when
        the partition no longer leads ``epoch``."""
        repl = slot.repl
        if repl.role is not Role.LEADER or repl.leader_epoch != epoch or slot.forgotten:
            return False
        if self._cluster is not None and self._cluster.controlled \
                and slot.stored_epoch != epoch:
            return False    # with etcd, only the partition key confirms a leadership
        if not slot.confirmed:
            slot.confirmed = True
            log.info("%s/%d: leadership of epoch %d confirmed by every other replica; "
                     "accepting writes", slot.topic, slot.partition, epoch)
            self._listeners.changed(slot)
        return True

    def conflict(self, slot: Slot, epoch: int) -> None:
        """Another replica claims leadership of the same ``epoch``: refuse writes (and fail
        waiting acks=all requests) until a probe round finds no conflict."""
        repl = slot.repl
        if repl.role is not Role.LEADER or repl.leader_epoch != epoch or not slot.confirmed:
            return
        slot.confirmed = False
        self._acks.fail(slot, NotLeader(
            f"partition {slot.partition} of {slot.topic}: another replica also leads epoch "
            f"{epoch}; promote one of them again"))
        self._listeners.changed(slot)

    def unreachable(self, slot: Slot, broker_id: int) -> None:
        """The leader's probe could not reach ``broker_id``; one that has not fetched since
        the promotion leaves the ISR at once."""
        if not slot.is_replica or broker_id not in slot.replicas or slot.forgotten:
            return
        repl = slot.repl
        hw_before = repl.hw
        if repl.drop_silent(slot.replicas.index(broker_id), now_ms(self._clock)):
            log.info("%s/%d: broker %d is unreachable and has not fetched since the promotion; "
                     "ISR now [%s] (hw=%d)", slot.topic, slot.partition, broker_id,
                     " ".join(map(str, repl.isr)), repl.hw)
            self._progress.after_change(slot, True, repl.hw > hw_before)

    def apply_stored(self, slot: Slot, leader: int, epoch: int,
                     isr: tuple[int, ...]) -> None:
        """The partition key in etcd says ``leader`` (a broker id, -1: offline) leads
        ``epoch`` with the committed ``isr`` (broker ids): lead exactly that epoch, or
        follow it. Writes are accepted only once this has run for the current epoch."""
        assert self._cluster is not None
        me = self._cluster.broker_id
        repl = slot.repl
        if not slot.is_replica or slot.forgotten:
            slot.stored_epoch = epoch
            slot.leader_id = leader
            return
        positions = [slot.replicas.index(b) for b in isr if b in slot.replicas]
        if leader == me:
            if epoch < repl.leader_epoch:
                log.warning("%s/%d: etcd names this broker leader of epoch %d but it knows "
                            "epoch %d; waiting for the controller", slot.topic,
                            slot.partition, epoch, repl.leader_epoch)
                slot.stored_epoch = epoch
                return
            if repl.role is Role.LEADER and repl.leader_epoch == epoch:
                hw_before = repl.hw
                slot.stored_epoch = epoch
                repl.set_isr(positions)
                slot.leader_id = me
                if not slot.confirmed:
                    repl.grant_lag_window(now_ms(self._clock))
                    slot.confirmed = True
                    log.info("%s/%d: leader of epoch %d as etcd holds it; accepting writes",
                             slot.topic, slot.partition, epoch)
                self._progress.after_change(slot, False, repl.hw > hw_before)
                self._listeners.changed(slot)
                self._listeners.isr_wanted(slot)
                return
            if repl.role is Role.LEADER:   # leads an older epoch: the new one replaces it
                self._checkpoints.persist(slot, repl.fence_checkpoint(repl.leader_epoch))
                repl.fence(repl.leader_epoch)
            slot.stored_epoch = epoch
            repl.set_isr(positions)
            self._checkpoints.persist(slot, repl.promotion_checkpoint(epoch))
            hw_before = repl.hw
            repl.promote(epoch, now_ms(self._clock), exact=True)
            slot.confirmed = True
            slot.leader_id = me
            self._checkpoints.discard(slot)
            log.info("%s/%d is now the leader, epoch %d as etcd holds it (log end %d, hw=%d, "
                     "isr=%s)", slot.topic, slot.partition, epoch, slot.log.next_offset,
                     repl.hw, list(isr))
            self._progress.after_change(slot, False, repl.hw > hw_before, saved=True)
            self._listeners.changed(slot)
            return
        slot.stored_epoch = epoch
        slot.leader_id = leader
        if repl.role is Role.LEADER:
            fenced_at = max(epoch, repl.leader_epoch)
            self._checkpoints.persist(slot, repl.fence_checkpoint(fenced_at))
            self._step_down(slot, fenced_at,
                            f"partition {slot.partition} of {slot.topic}: etcd names "
                            f"{'no leader' if leader < 0 else f'broker {leader}'} for epoch "
                            f"{epoch}")
            slot.leader_id = leader
            return
        if repl.observe_epoch(epoch):
            self._checkpoints.save(slot)
        self._listeners.changed(slot)

    def _set_role_in_cluster(self, slot: Slot, role: Role) -> int:
        repl = slot.repl
        if not slot.is_replica:
            raise BadRequest(f"broker {self._cluster.broker_id if self._cluster else '?'} holds "
                             f"no replica of {slot.topic}/{slot.partition}")
        if role is Role.LEADER:
            if repl.role is Role.LEADER and slot.confirmed:
                return repl.hw
            epoch = repl.leader_epoch + 1
            self._checkpoints.persist(slot, repl.promotion_checkpoint(epoch))
            hw_before = repl.hw
            repl.promote(epoch, now_ms(self._clock))
            slot.confirmed = True
            slot.leader_id = self._cluster.broker_id if self._cluster else -1
            self._checkpoints.discard(slot)
            log.info("%s/%d is now the leader, epoch %d (log end %d, hw=%d)", slot.topic,
                     slot.partition, epoch, slot.log.next_offset, repl.hw)
            self._progress.after_change(slot, False, repl.hw > hw_before, saved=True)
            self._listeners.changed(slot)
            return repl.hw
        if repl.role is Role.FOLLOWER:
            return repl.hw
        self._checkpoints.persist(slot, repl.fence_checkpoint(repl.leader_epoch))
        self._step_down(slot, repl.leader_epoch,
                        f"partition {slot.partition} of {slot.topic} was made a follower on "
                        "this broker")
        return repl.hw

    def _step_down(self, slot: Slot, epoch: int, why: str) -> None:
        """Leader -> follower (already persisted, or persisting failed and is retried)."""
        repl = slot.repl
        repl.fence(epoch)
        slot.confirmed = True
        slot.leader_id = -1
        self._progress.cancel_expiry(slot)
        self._acks.fail(slot, NotLeader(why))
        self._pulls.wake(slot)
        log.info("%s/%d: now a follower, epoch %d (hw=%d): %s", slot.topic, slot.partition,
                 repl.leader_epoch, repl.hw, why)
        self._listeners.changed(slot)
