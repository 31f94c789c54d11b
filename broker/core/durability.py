"""Group commit: one fsync covers every append waiting at that moment.

Owns: the waiting lists of appends that may be answered only once an fsync covers them,
running ``PartitionLog.sync()`` (at most one sync in flight per partition), and answering
every waiter the finished sync covered. Two ways to run the sync
(``storage.group_commit``):

- ``turn`` (the default): on the reactor thread, once per reactor turn, after every event of
  the turn was handled (``end_of_turn``: the core passes ``clock.callLater(0, ...)``), as
  Redis does with ``appendfsync always``. ``before_sync`` runs first (the produce
  pipeline's flush: the turn's queued messages are appended), then one fsync per partition
  with waiters covers everything the turn read, then the waiters are answered. Nothing is
  read or answered while the fsync runs, and no thread hand-off surrounds it (the cost
  that made the ``thread`` design about half as fast under docs/performance.md's (d)
  load); several partitions' fsyncs in one turn run one after another.
- ``thread``: off the reactor thread (``run_in_thread``: ``deferToThread``); appends that
  arrive while a sync runs wait for the next one, which starts the moment the previous one
  returns, and the reactor keeps reading sockets meanwhile.

Either way no waiter is answered before an fsync that started after its append returned;
a failed fsync answers every waiter of the partition with a ``StorageError``, and so does a
sync that returns without moving ``durable_offset`` while waiters remain (the log was
closed or truncated under them: syncing again could never cover them, and retrying would
spin).

Must not import: transports. It is part of the core shell: it takes an injected runner
(``deferToThread`` in the broker, ``synchronous`` for the turn mode and in tests) and an
injected ``end_of_turn`` scheduler.
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
    """A ``run_in_thread`` that runs in the calling thread (the turn mode, tests)."""
    return maybeDeferred(function)


class _Pending:
    __slots__ = ("waiters", "running", "before")

    def __init__(self) -> None:
        self.waiters: list[tuple[int, Waiter]] = []
        self.running = False
        self.before = -1  # durable_offset when the running sync started


class GroupCommitter:
    """Answers ``wait(log, upto, waiter)`` once ``log.durable_offset >= upto``.

    ``on_synced(log)`` is called on the reactor thread after every successful sync, before
    the waiters are answered (the replication layer moves ``hw`` there).

    With ``end_of_turn`` (a scheduler: ``end_of_turn(f)`` calls ``f`` once the events of the
    current turn are handled), the syncs wait for it: the first waiter of a turn schedules
    one ``sync_turn``, which calls ``before_sync`` and then syncs every partition that has
    waiters, through ``run`` (``synchronous`` on the reactor thread). Without it, the first
    waiter starts a sync at once through ``run`` (a thread), and the next one starts as soon
    as it returns.
    """

    def __init__(self, run: Callable[[Callable[[], Any]], Deferred[Any]],
                 on_synced: Callable[[Any], None] | None = None, *,
                 end_of_turn: Callable[[Callable[[], None]], object] | None = None,
                 before_sync: Callable[[], None] | None = None) -> None:
        self._run = run
        self._on_synced = on_synced
        self._end_of_turn = end_of_turn
        self.before_sync = before_sync
        """Called at the start of ``sync_turn`` (the core sets the produce pipeline's
        flush here, so the messages the turn queued are appended before its fsync)."""
        self._turn_scheduled = False
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
        if self._end_of_turn is not None:
            if not self._turn_scheduled:
                self._turn_scheduled = True
                self._end_of_turn(self.sync_turn)
        elif not entry[1].running:
            self._start(log, entry[1])

    def idle(self) -> bool:
        """True when no sync is running and nobody waits."""
        return not self._pending

    def sync_turn(self) -> None:
        """The end of a turn (turn mode): append what the turn queued, then one sync per
        partition with waiters, each answering the waiters it covered."""
        if self.before_sync is not None:
            self.before_sync()  # its waits join this turn's syncs: none is scheduled for them
        self._turn_scheduled = False
        for log, pending in list(self._pending.values()):
            if not pending.running:
                self._start(log, pending)

    def _start(self, log: Syncable, pending: _Pending) -> None:
        pending.running = True
        pending.before = log.durable_offset
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
        if pending.waiters and durable <= pending.before:
            # Every waiter's append preceded a sync that made no progress: the log is
            # closed or was truncated below them. Refuse rather than spin on syncs.
            stuck, pending.waiters = pending.waiters, []
            error = StorageError(f"not made durable: the log stopped at offset {durable} "
                                 "(closed or truncated) before these appends were synced")
            for _, waiter in stuck:
                waiter(error)
        if not pending.waiters:
            self._pending.pop(id(log), None)
        elif self._end_of_turn is None:
            self._start(log, pending)
        elif not self._turn_scheduled:  # appended after the sync started: the next turn
            self._turn_scheduled = True
            self._end_of_turn(self.sync_turn)
