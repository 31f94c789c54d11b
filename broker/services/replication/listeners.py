"""Who hears about replication events: the ``hw`` listeners and the change listeners.

Owns: the listener lists and calling them, synchronously, with ``(topic, partition)``.
``hw_moved`` is for a replication event that moved ``hw`` (the core answers waiting
consumers); ``changed`` is for a partition appearing or going away, changing role or epoch,
or having its leadership confirmed (the fetch loop reacts); ``copied`` (with the log, the
first offset and the bytes) for records a follower appended (the core keeps its producer
state).

Must not import: Twisted, the store, sockets, the other parts of this package (only
``partitions.Slot``, for type checking).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.services.replication.partitions import Slot

__all__ = ["Listeners"]


class Listeners:
    """The ``hw`` and change listeners of one replication service."""

    def __init__(self) -> None:
        self._hw: list[Callable[[str, int], None]] = []
        self._change: list[Callable[[str, int], None]] = []
        self._isr: list[Callable[[str, int], None]] = []
        self._copied: list[Callable[[str, int, Any, int, bytes], None]] = []

    def add_hw(self, listener: Callable[[str, int], None]) -> None:
        self._hw.append(listener)

    def add_change(self, listener: Callable[[str, int], None]) -> None:
        self._change.append(listener)

    def add_copied(self, listener: Callable[[str, int, Any, int, bytes], None]) -> None:
        self._copied.append(listener)

    def copied(self, slot: Slot, first: int, data: bytes) -> None:
        """A follower appended ``data`` (stored records from offset ``first``) to its log."""
        for listener in list(self._copied):
            listener(slot.topic, slot.partition, slot.log, first, data)

    def add_isr(self, listener: Callable[[str, int], None]) -> None:
        self._isr.append(listener)

    def isr_wanted(self, slot: Slot) -> None:
        """A leader whose ISR is etcd's (managed) wants a different ISR: the control plane
        proposes it."""
        for listener in list(self._isr):
            listener(slot.topic, slot.partition)

    def hw_moved(self, slot: Slot) -> None:
        for listener in list(self._hw):
            listener(slot.topic, slot.partition)

    def changed(self, slot: Slot) -> None:
        for listener in list(self._change):
            listener(slot.topic, slot.partition)
