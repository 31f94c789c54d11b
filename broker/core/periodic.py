"""The store's periodic work: the interval fsync (``storage.fsync: interval``), the
retention pass (once a minute) and the log cleaner of compacted topics (every 15 s).

Owns: the ``LoopingCall``\\ s of all three, on the injected clock, and stopping them. A
cleaning pass is planned and installed on the reactor thread and built in a worker thread
(``data.cleaner``: it reads sealed segments and writes new files only), one partition at a
time, so appends and reads go on while a partition is cleaned.

Must not import: transports, the global reactor, the other core modules but ``ports``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from broker.config import Config
from broker.core.ports import StoreView

__all__ = ["Periodic", "RETENTION_INTERVAL_S", "CLEAN_INTERVAL_S"]

log = logging.getLogger("skerry.core")

RETENTION_INTERVAL_S = 60.0
"""Seconds between two retention passes."""
CLEAN_INTERVAL_S = 15.0
"""Seconds between two looks for compacted partitions worth cleaning by default
(``storage.cleaner_interval_ms``; Kafka's ``log.cleaner.backoff.ms``)."""


class Periodic:
    """Starts and stops the store's periodic tasks."""

    def __init__(self, config: Config, store: StoreView, clock: IReactorTime,
                 run_in_thread: Callable[[Callable[[], Any]], Deferred[Any]],
                 hw: Callable[[str, int], int] | None = None) -> None:
        self._store = store
        self._clock = clock
        self._run_in_thread = run_in_thread
        self._hw = hw
        self._clean_interval_s = config["storage.cleaner_interval_ms"] / 1000.0
        self._cleaning: Deferred[int] | None = None
        self._stopping = False
        self._fsync_interval_s: float | None = (
            config["storage.fsync_interval_ms"] / 1000.0
            if config["storage.fsync"] == "interval" else None)
        self._loops: list[LoopingCall] = []

    def start(self) -> None:
        """Start the interval fsync (when configured) and the retention pass."""
        if self._fsync_interval_s is not None:
            self._loop(self._fsync_interval, self._fsync_interval_s)
        self._loop(self._retention, RETENTION_INTERVAL_S)
        self._loop(self._clean, self._clean_interval_s)

    def stop(self) -> Deferred[None]:
        """Stop every task; fires once a cleaning pass in a worker thread has ended (it
        gives up at its next segment, and its files are thrown away)."""
        self._stopping = True
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()
        done: Deferred[None] = Deferred()
        if self._cleaning is None:
            done.callback(None)
        else:
            self._cleaning.addBoth(lambda _: done.callback(None))
        return done

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

    # ---------------------------------------------------------------- log cleaner

    def _clean(self) -> None:
        self.clean_now()

    def clean_now(self, min_dirty_ratio: float | None = None) -> Deferred[int]:
        """One look at every partition of every compacted topic, one partition at a time:
        fires with the number of passes installed. While a look runs, a second call waits
        for it and fires with 0. ``min_dirty_ratio`` 0 cleans whatever is cleanable (the
        log's default: ``MIN_CLEANABLE_DIRTY_RATIO``)."""
        if self._cleaning is not None:
            d: Deferred[int] = Deferred()
            self._cleaning.addBoth(lambda _: d.callback(0))
            return d
        work = [(topic.name, p) for topic in list(self._store.topics.values())
                if topic.config.compacted for p in range(len(topic.partitions))]
        self._cleaning = self._clean_next(work, 0, min_dirty_ratio)

        def ended(result: Any) -> Any:
            self._cleaning = None
            return result

        return self._cleaning.addBoth(ended)

    def _clean_next(self, work: list[tuple[str, int]], done: int,
                    min_dirty_ratio: float | None) -> Deferred[int]:
        while work and not self._stopping:
            name, partition = work.pop(0)
            topic = self._store.topic(name)
            policy = self._store.clean_policy(name)
            if topic is None or policy is None or partition >= len(topic.partitions):
                continue
            plog = topic.partitions[partition]
            upto = (self._hw(name, partition) + 1) if self._hw is not None else plog.next_offset
            ratio = {} if min_dirty_ratio is None else {"min_dirty_ratio": min_dirty_ratio}
            try:
                # The store's clock (record timestamps are wall-clock microseconds; the
                # reactor's may be monotonic).
                plan = plog.plan_clean(self._store.now_us(), upto, policy,
                                       min_compaction_lag_ms=topic.config.min_compaction_lag_ms,
                                       **ratio)
            except OSError as exc:
                log.error("%s/%d: cannot plan a cleaning pass: %s", name, partition, exc)
                continue
            if plan is None:
                continue
            plan.cancelled = lambda: self._stopping
            built = self._run_in_thread(lambda plog=plog, plan=plan: plog.build_clean(plan))

            def install(stats: Any, plog: Any = plog, plan: Any = plan) -> Deferred[int]:
                ok = plog.install_clean(plan, stats)
                return self._clean_next(work, done + (1 if ok else 0), min_dirty_ratio)

            def failed(failure: Any, plog: Any = plog, plan: Any = plan, name: str = name,
                       partition: int = partition) -> Deferred[int]:
                plog.install_clean(plan, None)
                log.warning("%s/%d: cleaning pass abandoned: %s", name, partition,
                            failure.getErrorMessage())
                return self._clean_next(work, done, min_dirty_ratio)

            return built.addCallbacks(install, failed)
        return succeed(done)
