"""ISR proposals: when the lag rule on a leader wants another ISR, the leader writes it to etcd (its lease and the key's mod revision compared), one proposal per partition in flight.

Must not import: the global reactor, the transports, the store's modules.
"""

from __future__ import annotations

from broker.services.control.base import ETCD_FAILURES, log, run_logged
from replication.control.errors import NotCaughtUp
from replication.control.isr import IsrView
from replication.control.keys import (
    PartitionState,
)
from replication.control.txn import (
    PartitionWrite,
    write_isr,
)


class IsrProposals:
    """Part of ``ControlPlane``: the leader's ISR proposals."""

    def _isr_wanted(self, topic: str, partition: int) -> None:
        key = (topic, partition)
        if key in self._isr_inflight:
            self._isr_again.add(key)
            return
        if not self._session_ok or self._stopped:
            return
        self._isr_inflight.add(key)
        run_logged(self._propose_loop(key))

    async def _propose_loop(self, key: tuple[str, int]) -> None:
        try:
            while True:
                self._isr_again.discard(key)
                retry = await self._propose(*key)
                if retry:
                    self.clock.callLater(1.0, self._isr_wanted, *key)
                    return
                if key not in self._isr_again:
                    return
        finally:
            self._isr_inflight.discard(key)

    async def _propose(self, topic: str, partition: int) -> bool:
        """One ISR proposal; True when etcd could not be reached (retry later)."""
        if not self._session_ok:
            return False
        key = (topic, partition)
        state = self.view.partitions.get(key)
        mod = self.view.partition_mods.get(key)
        replicas = self.view.replicas(topic, partition)
        if state is None or mod is None or state.leader != self.broker_id or not replicas:
            return False
        try:
            facts = self.replication.isr_facts(topic, partition)
        except Exception:  # noqa: BLE001 - the topic went away meanwhile
            return False
        if not facts.leader or facts.epoch != state.leader_epoch \
                or facts.stored_epoch != state.leader_epoch:
            return False
        committed = frozenset(state.isr)
        desired = set(facts.desired)
        isr = IsrView(committed)
        out = [r for r in committed if r not in desired and r != self.broker_id]
        if out:
            proposed = isr.propose_shrink(out, leader=self.broker_id)
        else:
            joining = []
            alive = self.view.alive
            for r in sorted(desired - committed):
                if r not in alive:
                    continue    # the controller would take it out again
                try:
                    IsrView(committed).propose_expand(
                        r, facts.progress.get(r, -1), facts.hw,
                        epoch_start_offset=facts.epoch_start)
                except NotCaughtUp:
                    continue
                joining.append(r)
            if not joining:
                return False
            proposed = IsrView(committed, committed | frozenset(joining))
        pending = proposed.pending or frozenset()
        new_isr = tuple(r for r in replicas if r in pending)
        self.replication.set_isr(topic, partition, tuple(state.isr), new_isr)
        write = PartitionWrite(topic, partition, mod,
                               PartitionState(self.broker_id, state.leader_epoch, new_isr))
        try:
            result = await self.client.txn(write_isr(self.layout, self.broker_id, self.lease,
                                                     write))
        except ETCD_FAILURES as exc:
            log.warning("%s/%d: ISR change to %s not written: %s", topic, partition,
                        list(new_isr), exc)
            self.replication.set_isr(topic, partition, tuple(state.isr))
            return True
        self._note(result.header)
        if result.succeeded:
            pkey = self.layout.partition(topic, partition)
            self.view.put(pkey, write.state.encode(), mod_revision=result.header.revision,
                          create_revision=0)
            self.replication.set_isr(topic, partition, new_isr)
            log.info("%s/%d: ISR %s -> %s (committed in etcd)", topic, partition,
                     list(state.isr), list(new_isr))
        else:
            self._absorb(result.reads)
            self._apply_partition(topic, partition)
            self._isr_again.add(key)
        return False
