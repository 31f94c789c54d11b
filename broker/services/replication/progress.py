"""A leader's progress: ISR lag expiry timers and what follows a move of its log, ISR or hw.

Owns: each partition's ISR lag timer (kept on its ``Slot``), scheduled at the exact moment
the first in-sync follower would start lagging (``PartitionReplication.next_expiry_ms``), so
``hw`` and ``under_replicated`` change with no traffic and waiting ``acks=all`` requests see
an ISR shrink; and the one sequence that follows any move (``refresh`` after the leader's log
grew or was fsynced, ``after_change`` after a fetch, a lag expiry or a role change):
checkpoint (at once for an ISR change, lazily otherwise), reschedule the lag timer, tell the
``hw`` listeners, wake followers' long polls, answer ``acks=all`` waiters.

The rules themselves live in ``replication/partition.py`` (pure); this module feeds them
the log's offsets and ``now_ms`` and performs what they ask for.

Must not import: the global reactor (the clock is injected), sockets, the store, the other
parts of this package: it imports only the shared ``partitions`` and ``ports`` and sees the
parts through ``ports``.
"""

from __future__ import annotations

import logging

from twisted.internet.interfaces import IReactorTime

from broker.services.replication.partitions import Lifecycle, Slot, now_ms
from broker.services.replication.ports import (
    AckSettling,
    Announcing,
    Checkpointing,
    PullWaking,
)

__all__ = ["ProgressTracker"]

log = logging.getLogger("skerry.replication")


class ProgressTracker:
    """ISR lag timers, and the reactions to a leader's log, ISR or ``hw`` moving."""

    def __init__(self, clock: IReactorTime, lifecycle: Lifecycle, *, acks: AckSettling,
                 pulls: PullWaking, checkpoints: Checkpointing,
                 listeners: Announcing) -> None:
        self._clock = clock
        self._lifecycle = lifecycle
        self._acks = acks
        self._pulls = pulls
        self._checkpoints = checkpoints
        self._listeners = listeners

    def refresh(self, slot: Slot) -> None:
        """The leader's log grew or was fsynced: may advance ``hw``, answer waiters and
        wake long polls. Moves of ``hw`` here are not told to the ``hw`` listeners: the
        caller (the core) knows already."""
        plog = slot.log
        if slot.repl.leader_log_changed(plog.next_offset, plog.durable_offset):
            if slot.replicated:
                self._checkpoints.mark_dirty(slot)
            if slot.waiters:
                self._acks.answer(slot)
            if slot.pulls:
                self._pulls.wake(slot, hw=slot.repl.hw)
        if slot.pulls:
            self._pulls.wake(slot, plog.next_offset)

    def after_change(self, slot: Slot, isr_changed: bool, hw_advanced: bool, *,
                     saved: bool = False) -> None:
        """The ISR or ``hw`` may have moved (``saved``: the state is on disk already)."""
        repl = slot.repl
        if repl.managed and repl.is_leader and (isr_changed or not repl.isr_settled()):
            # A follower caught up or lags (or caught up further, past hw): propose again.
            self._listeners.isr_wanted(slot)
        if isr_changed:
            self._checkpoints.save(slot)
        elif slot.replicated and not saved:
            self._checkpoints.mark_dirty(slot)
        self.schedule_expiry(slot)
        if hw_advanced:
            self._listeners.hw_moved(slot)
            if slot.pulls:
                self._pulls.wake(slot, hw=slot.repl.hw)
        if slot.waiters:
            self._acks.answer(slot)

    def schedule_expiry(self, slot: Slot) -> None:
        """Set the lag timer to the next moment a follower would leave the ISR (none: no
        timer), moving an existing timer rather than adding one."""
        at = None if self._lifecycle.closed else slot.repl.next_expiry_ms()
        call = slot.expiry
        if at is None:
            self.cancel_expiry(slot)
            return
        if call is not None and call.active() and at == slot.expiry_at_ms:
            return
        delay = max(0, at - now_ms(self._clock)) / 1000.0
        if call is not None and call.active():
            call.reset(delay)
        else:
            slot.expiry = self._clock.callLater(delay, self._expire, slot)
        slot.expiry_at_ms = at

    def cancel_expiry(self, slot: Slot) -> None:
        if slot.expiry is not None and slot.expiry.active():
            slot.expiry.cancel()
        slot.expiry = None
        slot.expiry_at_ms = None

    def _expire(self, slot: Slot) -> None:
        slot.expiry = None
        slot.expiry_at_ms = None
        if slot.forgotten or self._lifecycle.closed:
            return
        repl = slot.repl
        hw_before = repl.hw
        isr_changed = repl.expire_lagging(now_ms(self._clock))
        if isr_changed:
            log.info("%s/%d: ISR shrank to [%s] (hw=%d)", slot.topic, slot.partition,
                     " ".join(map(str, repl.isr)), repl.hw)
        self.after_change(slot, isr_changed, repl.hw > hw_before)
