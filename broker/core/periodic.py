"""The store's periodic work: the interval fsync (``storage.fsync: interval``) and the
retention pass (once a minute).

Owns: the ``LoopingCall``\\ s of both, on the injected clock, and stopping them.

Must not import: transports, the global reactor, the other core modules but ``ports``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from broker.config import Config
from broker.core.ports import StoreView

__all__ = ["Periodic", "RETENTION_INTERVAL_S"]

log = logging.getLogger("skerry.core")

RETENTION_INTERVAL_S = 60.0
"""Seconds between two retention passes."""


class Periodic:
    """Starts and stops the store's periodic tasks."""

    def __init__(self, config: Config, store: StoreView, clock: IReactorTime,
                 run_in_thread: Callable[[Callable[[], Any]], Deferred[Any]]) -> None:
        self._store = store
        self._clock = clock
        self._run_in_thread = run_in_thread
        self._fsync_interval_s: float | None = (
            config["storage.fsync_interval_ms"] / 1000.0
            if config["storage.fsync"] == "interval" else None)
        self._loops: list[LoopingCall] = []

    def start(self) -> None:
        """Start the interval fsync (when configured) and the retention pass."""
        if self._fsync_interval_s is not None:
            self._loop(self._fsync_interval, self._fsync_interval_s)
        self._loop(self._retention, RETENTION_INTERVAL_S)

    def stop(self) -> None:
        """Stop every task (one that is running finishes on its own)."""
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()

    def _loop(self, function: Callable[[], Any], seconds: float) -> None:
        loop = LoopingCall(function)
        loop.clock = self._clock
        loop.start(seconds, now=False).addErrback(
            lambda failure: log.error("periodic task failed: %s", failure.getTraceback()))
        self._loops.append(loop)

    def _fsync_interval(self) -> Deferred[Any]:
        return self._run_in_thread(self._store.sync_all).addErrback(
            lambda failure: log.error("interval fsync failed: %s", failure.getErrorMessage()))

    def _retention(self) -> None:
        removed = self._store.enforce_retention()
        if removed:
            log.info("retention removed %d segment(s)", len(removed))
