"""The controller's duties: claiming the controller key, running the election rule after every change and writing the elections in batched, fenced txns, waiting for log ends before an unclean election, and handing partitions back to their preferred leader.

Must not import: the global reactor, the transports, the store's modules.
"""

from __future__ import annotations

from broker.services.control.base import ETCD_FAILURES, RETRY_S, log, run_logged
from broker.services.etcd import (
    KeyValue,
)
from replication.control.txn import (
    claim_controller,
    write_partitions,
)
from replication.control.view import (
    PlannedElection,
    batches,
    plan,
    preferred_leader_moves,
)


class ControllerDuties:
    """Part of ``ControlPlane``: what the broker does while (or to become) the controller."""

    def _try_claim(self) -> None:
        if self._claiming or not self._session_ok or self.view.controller is not None \
                or self._stopped:
            return
        self._claiming = True
        run_logged(self._claim())

    async def _claim(self) -> None:
        try:
            result = await self.client.txn(claim_controller(self.layout, self.broker_id,
                                                            self.lease))
        except ETCD_FAILURES as exc:
            log.warning("claiming the controller failed: %s", exc)
            self._claiming = False
            self.clock.callLater(RETRY_S, self._try_claim)
            return
        self._claiming = False
        self._note(result.header)
        if result.succeeded:
            rev = result.header.revision
            self.view.put(self.layout.controller, b'{"broker":%d}' % self.broker_id,
                          mod_revision=rev, create_revision=rev, lease=self.lease)
            log.info("this broker (%d) is the controller, epoch %d", self.broker_id, rev)
            self._schedule_reconcile()
            self._review_returns()      # hand-backs the last controller left due
        else:
            kvs = result.reads[0] if result.reads else None
            if kvs:
                self._absorb((kvs,))
            else:
                self.clock.callLater(RETRY_S, self._try_claim)

    def _schedule_reconcile(self) -> None:
        if not self.is_controller:
            return
        if self._reconciling:
            self._reconcile_again = True
            return
        self._reconciling = True
        run_logged(self._reconcile())

    async def _reconcile(self) -> None:
        try:
            while self.is_controller and not self._stopped:
                self._reconcile_again = False
                now = self.clock.seconds()
                gave_up = {k for k, at in self._unclean_deadlines.items() if now >= at}
                decided = plan(self.view, unclean_default=self.cluster.unclean_leader_election,
                               gave_up=gave_up)
                self._await_log_ends(decided.waiting, now)
                plans = decided.writes
                lost = False
                for batch in batches(plans):
                    if not self.is_controller:
                        return
                    try:
                        revision = await self._write_elections(batch)
                    except ETCD_FAILURES as exc:
                        log.warning("controller: writing %d partition(s) failed: %s; "
                                    "retrying", len(batch), exc)
                        self.clock.callLater(RETRY_S, self._schedule_reconcile)
                        return
                    if revision is None:
                        lost = True
                        break
                    self._elected(batch, revision)
                if not lost and not self._reconcile_again:
                    return
        finally:
            self._reconciling = False

    async def _write_elections(self, batch: list[PlannedElection]) -> int | None:
        """Write one batch of partition states with the controller's compares (its epoch,
        each key's revision): etcd's revision, or None when a compare was lost (what etcd
        holds is taken in). etcd failures propagate."""
        txn = write_partitions(self.layout, self.view.controller_epoch,
                               [p.write for p in batch])
        result = await self.client.txn(txn)
        self._note(result.header)
        if not result.succeeded:
            self._lost_compare(result.reads)
            return None
        return result.header.revision

    def _arm_rebalance(self) -> None:
        interval = self.settings.leader_rebalance_check_ms
        if interval and not self._stopped:
            self._rebalance_call = self.clock.callLater(interval / 1000.0, self._rebalance_tick)

    def _rebalance_tick(self) -> None:
        """Every ``leader_rebalance_check_ms``: the controller hands partitions back to
        their preferred leaders (``preferred_leader_moves``), unless an election is being
        written (then at the next check)."""
        self._rebalance_call = None
        if self.is_controller and not self._reconciling:
            run_logged(self._rebalance())
        self._arm_rebalance()

    async def _rebalance(self) -> None:
        await self._hand_back(preferred_leader_moves(self.view), "at the next check")

    async def _hand_back(self, moves: list[PlannedElection], retry: str) -> bool:
        """Write preferred-leader moves in batched, fenced txns; False when stopped short
        (not the controller, an election being written, a lost compare, etcd failing):
        the caller decides again later (``retry`` says when, for the log)."""
        for batch in batches(moves):
            if not self.is_controller or self._reconciling:
                return False
            try:
                revision = await self._write_elections(batch)
            except ETCD_FAILURES as exc:
                log.warning("controller: handing partitions back to their preferred leaders "
                            "failed: %s; trying %s", exc, retry)
                return False
            if revision is None:  # something moved meanwhile: decide again
                return False
            for planned in batch:
                write = planned.write
                key = self.layout.partition(write.topic, write.partition)
                self.view.put(key, write.state.encode(), mod_revision=revision,
                              create_revision=0)
                self.preferred_elections += 1
                log.info("%s/%d: back to its preferred leader: broker %d leads epoch %d, "
                         "isr %s", write.topic, write.partition, write.state.leader,
                         write.state.leader_epoch, list(write.state.isr))
                self._apply_partition(write.topic, write.partition)
        return True

    def _registered_myself(self) -> None:
        """This broker registered (it started, or renewed a lost session): its preferred
        partitions come back to it as any joining broker's do. The others saw the
        registration in their watch; this one's watch starts after it."""
        self.returns.broker_joined(self.view, self.broker_id)
        self._review_returns()

    def _review_returns(self) -> None:
        """After any change: the partitions a (re)joined broker gets back now
        (``LeaderReturns``), written if this broker is the controller and no election is
        being written; a timer for the next one due. Every broker keeps the marks, so a new
        controller carries on."""
        if self._stopped or not self.returns.enabled:
            return
        due = self.returns.observe(self.view, self.clock.seconds())
        if due.moves and self.is_controller:
            if self._reconciling or self._returning:
                self._return_later(RETRY_S)     # the reconcile's events review again too
            else:
                self._returning = True
                run_logged(self._write_returns(due.moves))
        if due.next_at is not None:
            self._return_later(max(0.0, due.next_at - self.clock.seconds()))

    async def _write_returns(self, moves: list[PlannedElection]) -> None:
        try:
            done = await self._hand_back(moves, "again shortly")
        finally:
            self._returning = False
        if not done:
            self._return_later(RETRY_S)

    def _return_later(self, delay: float) -> None:
        """One timer for the next review: kept when it fires sooner than ``delay``."""
        call = self._return_call
        at = self.clock.seconds() + delay
        if call is not None and call.active():
            if call.getTime() <= at:
                return
            call.cancel()
        self._return_call = self.clock.callLater(delay, self._return_tick)

    def _return_tick(self) -> None:
        self._return_call = None
        self._review_returns()

    def _await_log_ends(self, waiting: list[tuple[str, int, int]], now: float) -> None:
        """Unclean elections waiting for the live replicas' log ends: decide again when the
        wait (one lease TTL) ends, whatever arrived by then."""
        deadlines = {}
        for key in waiting:
            at = self._unclean_deadlines.get(key)
            if at is None:
                at = now + self.unclean_wait_s
                self.clock.callLater(self.unclean_wait_s, self._schedule_reconcile)
                topic, partition, epoch = key
                log.warning("%s/%d: offline (epoch %d) with unclean election on: waiting up "
                            "to %.1f s for the live replicas' log ends", topic, partition,
                            epoch, self.unclean_wait_s)
            deadlines[key] = at
        self._unclean_deadlines = deadlines

    def _lost_compare(self, reads: tuple[tuple[KeyValue, ...] | None, ...]) -> None:
        controller = reads[0] if reads else None
        if not controller:
            self.view.delete(self.layout.controller, revision=0)
        self._absorb(reads)
        log.info("controller: a compare was lost; deciding again on what etcd holds")

    def _elected(self, batch: list[PlannedElection], revision: int) -> None:
        for planned in batch:
            write, election = planned.write, planned.election
            key = self.layout.partition(write.topic, write.partition)
            self.view.put(key, write.state.encode(), mod_revision=revision, create_revision=0)
            state = write.state
            if election.unclean:
                self.unclean_elections += 1
                ends = planned.log_ends
                if ends:
                    basis = "log ends " + ", ".join(
                        f"broker {b}: {r.log_end} (last epoch {r.last_epoch})"
                        for b, r in sorted(ends.items()))
                else:
                    basis = (f"no log end reported within {self.unclean_wait_s:.1f} s; "
                             "first live replica in list order")
                log.warning("%s/%d: UNCLEAN election: broker %d leads epoch %d from outside "
                            "the ISR (%s); committed messages may be lost", write.topic,
                            write.partition, state.leader, state.leader_epoch, basis)
            elif election.offline:
                self.offline += 1
                log.warning("%s/%d: offline: no live replica in the ISR %s (epoch %d)",
                            write.topic, write.partition, list(state.isr), state.leader_epoch)
            else:
                self.elections += 1
                log.info("%s/%d: broker %d leads epoch %d, isr %s", write.topic,
                         write.partition, state.leader, state.leader_epoch, list(state.isr))
            self._apply_partition(write.topic, write.partition)
