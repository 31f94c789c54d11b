"""What the control plane (``broker.services.control.ReplicaControl``) drives on this broker's replicas: a partition's stored leader and epoch applied, the committed ISR, the facts an ISR proposal needs, and the write fence while the etcd session is lost.

Must not import: the global reactor, sockets, the store's modules, ``replication.follower``.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.services.replication.results import (
    IsrFacts,
)
from replication.roles import Role


class ControlPlaneSide:
    """Part of ``ReplicationService``: the control plane's side."""

    def apply_stored(self, topic: str, partition: int, leader: int, epoch: int,
                     isr: tuple[int, ...]) -> None:
        """etcd's partition key (``cluster.etcd``): ``leader`` (broker id, -1 offline)
        leads ``epoch`` with the committed ``isr`` (broker ids). This broker leads exactly
        that epoch or follows it (``Leadership.apply_stored``)."""
        self._leadership.apply_stored(self._slot(topic, partition), leader, epoch, isr)

    def set_isr(self, topic: str, partition: int, committed: tuple[int, ...],
                pending: tuple[int, ...] | None = None) -> None:
        """A managed leader's ISR (broker ids): ``committed`` as etcd holds it, ``pending``
        the proposal in flight (KIP-497: ``hw`` waits for committed | pending)."""
        slot = self._slot(topic, partition)
        repl = slot.repl
        if not repl.managed:
            return
        index = slot.replicas.index
        hw_before = repl.hw
        repl.set_isr([index(b) for b in committed if b in slot.replicas],
                     None if pending is None else
                     [index(b) for b in pending if b in slot.replicas])
        self._progress.after_change(slot, False, repl.hw > hw_before)

    def isr_facts(self, topic: str, partition: int) -> IsrFacts:
        """What the control plane needs to propose a managed leader's ISR change."""
        slot = self._slot(topic, partition)
        repl = slot.repl
        replicas = slot.replicas
        progress = {b: (repl.leader_last_offset if i == repl.local_replica
                        else repl.follower_offset(i))
                    for i, b in enumerate(replicas)} if slot.is_replica else {}
        return IsrFacts(
            leader=repl.role is Role.LEADER and slot.confirmed,
            epoch=repl.leader_epoch,
            stored_epoch=slot.stored_epoch,
            committed=tuple(replicas[i] for i in repl.committed_isr) if slot.is_replica else (),
            desired=tuple(replicas[i] for i in repl.desired_isr()) if slot.is_replica else (),
            progress=progress, hw=repl.hw, epoch_start=repl.epoch_start_last_offset(),
            log_end=slot.log.next_offset,
            last_epoch=max((e.epoch for e in repl.epoch_entries
                            if e.start_offset < slot.log.next_offset), default=-1))

    def add_isr_listener(self, listener: Callable[[str, int], None]) -> None:
        """Call ``listener(topic, partition)`` when a leader whose ISR is etcd's wants
        another ISR (a follower caught up or lags): the control plane proposes it."""
        self._listeners.add_isr(listener)

    def set_write_fence(self, fence: Callable[[], str | None]) -> None:
        """``fence()`` returns why writes are refused now (None: they are not); checked on
        every write (``fence_writes_on_session_loss``)."""
        self._write_fence = fence
