"""The ``acks=all`` waiters: one Deferred and one ack timer per waiting produce.

Owns: each partition's heap of waiters by offset (kept on its ``Slot``), the ack timer of
each (``ReplicationTimeout`` after ``ack_timeout_ms``), answering every waiter whose offset
the partition's ``ack_offset`` reached (with ``hw``), failing them all (NOT_LEADER on a role
change, UNAVAILABLE on shutdown, an unknown topic on deletion), and withdrawing a waiter
whose Deferred is cancelled. Whether a wait may start at all is the caller's decision.

Must not import: the global reactor (the clock is injected), sockets, the store, the other
parts of this package (only ``partitions.Slot``, for type checking).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from broker.errors import ReplicationTimeout, SkerryError

if TYPE_CHECKING:
    from broker.services.replication.partitions import Slot

__all__ = ["AckWaiter", "AckWaiters"]


class AckWaiter:
    """One produce waiting for ``offset`` to be committed."""

    __slots__ = ("offset", "deferred", "timer", "done", "timeout_ms")

    def __init__(self, offset: int, canceller: Callable[[AckWaiter], None]) -> None:
        self.offset = offset
        self.deferred: Deferred[int] = Deferred(lambda _d: canceller(self))
        self.timer: IDelayedCall | None = None
        self.done = False
        self.timeout_ms = 0


class AckWaiters:
    """Every partition's ``acks=all`` waiters and their ack timers."""

    def __init__(self, clock: IReactorTime, ack_timeout_ms: int) -> None:
        self._clock = clock
        self._ack_timeout_ms = ack_timeout_ms
        self._seq = itertools.count()

    def wait(self, slot: Slot, offset: int, timeout_ms: int | None = None) -> Deferred[int]:
        """A Deferred firing with ``hw`` once ``ack_offset`` reaches ``offset``; fails with
        ``ReplicationTimeout`` after ``timeout_ms`` (None: the ack timeout). Cancelling it
        withdraws the wait."""
        waiter = AckWaiter(offset, lambda w: self._withdraw(slot, w))
        waiter.timeout_ms = self._ack_timeout_ms if timeout_ms is None else timeout_ms
        waiter.timer = self._clock.callLater(waiter.timeout_ms / 1000.0,
                                             self._time_out, slot, waiter)
        heapq.heappush(slot.waiters, (offset, next(self._seq), waiter))
        return waiter.deferred

    def answer(self, slot: Slot) -> None:
        """Answer, with ``hw``, every waiter whose offset ``ack_offset`` reached."""
        heap = slot.waiters
        ack_offset = slot.repl.ack_offset
        if not heap or heap[0][0] > ack_offset:
            return
        ready: list[AckWaiter] = []
        while heap and heap[0][0] <= ack_offset:
            waiter = heapq.heappop(heap)[2]
            if not waiter.done:
                self._settle(waiter)
                ready.append(waiter)
        hw = slot.repl.hw
        for waiter in ready:
            waiter.deferred.callback(hw)

    def fail(self, slot: Slot, error: SkerryError) -> None:
        """Fail every waiter of the slot with ``error``."""
        pending = [entry[2] for entry in slot.waiters if not entry[2].done]
        slot.waiters.clear()
        for waiter in pending:
            self._settle(waiter)
        for waiter in pending:
            waiter.deferred.errback(error)

    def _time_out(self, slot: Slot, waiter: AckWaiter) -> None:
        waiter.timer = None
        if waiter.done:
            return
        waiter.done = True
        self._drop_settled(slot)
        repl = slot.repl
        waiter.deferred.errback(ReplicationTimeout(
            f"acks=all not satisfied within {waiter.timeout_ms} ms for offset "
            f"{waiter.offset} of {slot.topic}/{slot.partition}: hw={repl.hw} "
            f"isr=[{' '.join(map(str, repl.isr))}] min_insync_replicas="
            f"{repl.min_insync_replicas}; the message stays in the log and may still be "
            "committed"))

    def _withdraw(self, slot: Slot, waiter: AckWaiter) -> None:
        if not waiter.done:
            self._settle(waiter)
            self._drop_settled(slot)

    @staticmethod
    def _settle(waiter: AckWaiter) -> None:
        waiter.done = True
        if waiter.timer is not None:
            if waiter.timer.active():
                waiter.timer.cancel()
            waiter.timer = None

    @staticmethod
    def _drop_settled(slot: Slot) -> None:
        heap = slot.waiters
        while heap and heap[0][2].done:
            heapq.heappop(heap)
