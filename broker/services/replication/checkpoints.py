"""The high-watermark checkpoint: when each partition's replication state reaches disk.

Owns: the set of partitions whose state changed since it was last written (``mark_dirty``),
the periodic flush of that set (a ``LoopingCall`` every ``hw_checkpoint_interval_ms`` on the
injected clock), writing one checkpoint now (``persist`` raises ``StorageError``; ``save``
logs a failure and retries at the next flush, the in-memory state staying authoritative).
Callers decide when: lazily for ``hw`` moves, at once for ISR and role changes.

Must not import: the global reactor (the clock is injected), sockets, the store's modules
(a slot's log is a ``PartitionLogView``), the other parts of this package (only
``partitions.Slot``, for type checking).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from broker.errors import SkerryError, StorageError
from replication.roles import ReplicationCheckpoint

if TYPE_CHECKING:
    from broker.services.replication.partitions import Slot

__all__ = ["HwCheckpoints"]

log = logging.getLogger("skerry.replication")


class HwCheckpoints:
    """Writes partitions' ``ReplicationCheckpoint``: at once, or at the next periodic flush."""

    def __init__(self, clock: IReactorTime, interval_ms: int) -> None:
        self._clock = clock
        self._interval_ms = interval_ms
        self._dirty: set[Slot] = set()
        self._loop: LoopingCall | None = None

    def start(self) -> None:
        """Start the periodic flush (its first run one interval from now)."""
        loop = self._loop = LoopingCall(self.flush)
        loop.clock = self._clock
        loop.start(self._interval_ms / 1000.0, now=False).addErrback(
            lambda failure: log.error("hw checkpoint loop stopped: %s", failure.getTraceback()))

    def stop(self) -> None:
        """Stop the periodic flush (``flush`` still works)."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def mark_dirty(self, slot: Slot) -> None:
        """Write the slot's state at the next flush."""
        self._dirty.add(slot)

    def discard(self, slot: Slot) -> None:
        """The slot's state was written (or no longer matters)."""
        self._dirty.discard(slot)

    def persist(self, slot: Slot, checkpoint: ReplicationCheckpoint) -> None:
        """Write the checkpoint; a failure raises StorageError (the caller changes nothing)."""
        try:
            slot.log.save_state(checkpoint.to_json())
        except OSError as exc:
            raise StorageError(f"cannot save replication state of {slot.topic}/"
                               f"{slot.partition}: {exc.strerror or exc}") from exc

    def save(self, slot: Slot) -> None:
        """Checkpoint now; on failure log it and retry on the next flush (the in-memory
        state stays authoritative while the broker runs)."""
        try:
            self.persist(slot, slot.repl.checkpoint())
        except SkerryError as error:
            log.error("%s/%d: %s", slot.topic, slot.partition, error.message)
            self._dirty.add(slot)
        else:
            self._dirty.discard(slot)

    def flush(self) -> None:
        """Write every dirty slot's state (forgotten ones are dropped)."""
        for slot in list(self._dirty):
            if not slot.forgotten:
                self.save(slot)
            else:
                self._dirty.discard(slot)
