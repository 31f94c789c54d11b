"""Group commit: one fsync covers every append waiting at that moment.

Owns: the waiting lists of appends that may be answered only once an fsync covers them,
running ``PartitionLog.sync()`` off the reactor thread (at most one sync in flight per
partition), and answering every waiter the finished sync covered. Appends that arrive
while a sync runs wait for the next one, so under load each fsync covers a whole reactor
turn's worth of appends (or more), and the reactor keeps reading sockets meanwhile.

Must not import: transports. It is part of the core shell: it takes an injected
``run_in_thread`` (``deferToThread`` in the broker, a synchronous runner in tests).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.python.failure import Failure

from broker.errors import SkerryError, StorageError

__all__ = ["Syncable", "GroupCommitter", "synchronous"]

Waiter = Callable[[SkerryError | None], None]


class Syncable(Protocol):
    """What the committer needs from a partition log."""

    durable_offset: int

    def sync(self) -> int: ...


def synchronous(function: Callable[[], Any]) -> Deferred[Any]:
    """A ``run_in_thread`` that runs in the calling thread (tests, fsync=never close)."""
    return maybeDeferred(function)


class _Pending:
    __slots__ = ("waiters", "running")

    def __init__(self) -> None:
        self.waiters: list[tuple[int, Waiter]] = []
        self.running = False


class GroupCommitter:
    """Answers ``wait(log, upto, waiter)`` once ``log.durable_offset >= upto``.

    ``on_synced(log)`` is called on the reactor thread after every successful sync, before
    the waiters are answered (the replication layer moves ``hw`` there).
    """

    def __init__(self, run_in_thread: Callable[[Callable[[], Any]], Deferred[Any]],
                 on_synced: Callable[[Any], None] | None = None) -> None:
        self._run = run_in_thread
        self._on_synced = on_synced
        self._pending: dict[int, tuple[Syncable, _Pending]] = {}
        self.syncs = 0  # fsync rounds completed (observability and tests)

    def wait(self, log: Syncable, upto: int, waiter: Waiter) -> None:
        """Call ``waiter(None)`` once offsets ``< upto`` are durable, ``waiter(err)`` on failure."""
        if log.durable_offset >= upto:
            waiter(None)
            return
        entry = self._pending.get(id(log))
        if entry is None:
            entry = (log, _Pending())
            self._pending[id(log)] = entry
        entry[1].waiters.append((upto, waiter))
        if not entry[1].running:
            self._start(log, entry[1])

    def idle(self) -> bool:
        """True when no sync is running and nobody waits."""
        return not self._pending

    def _start(self, log: Syncable, pending: _Pending) -> None:
        pending.running = True
        self._run(log.sync).addBoth(self._finished, log, pending)

    def _finished(self, result: int | Failure, log: Syncable, pending: _Pending) -> None:
        pending.running = False
        self.syncs += 1
        if isinstance(result, Failure):
            error = result.value if isinstance(result.value, SkerryError) else \
                StorageError(f"fsync failed: {result.getErrorMessage()}")
            waiters, pending.waiters = pending.waiters, []
            self._pending.pop(id(log), None)
            for _, waiter in waiters:
                waiter(error)
            return
        if self._on_synced is not None:
            self._on_synced(log)
        durable = log.durable_offset
        done = [w for upto, w in pending.waiters if upto <= durable]
        pending.waiters = [(upto, w) for upto, w in pending.waiters if upto > durable]
        for waiter in done:
            waiter(None)
        if pending.waiters:
            self._start(log, pending)
        else:
            self._pending.pop(id(log), None)
