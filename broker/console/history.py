"""What the console remembers over time: group lag and traffic rates, one hour, in memory.

Owns: ``Ring`` (a bounded series of ``(t, value)`` samples: the oldest falls out when it is
full), ``History`` (one ``Ring`` of per-partition lag per (group, topic), and rings of the
produce and consume rates computed from the metrics counters) and ``Sampler`` (a
``LoopingCall`` on the injected clock that calls ``History.sample`` every
``console.sample_interval_ms``).

Times are the broker clock's seconds (monotonic in ``skerry serve``; ``task.Clock`` in
tests). A sample holds no wall time: the API answers ages (``now - t``), which is all a
chart over "the last hour" needs and does not jump when the wall clock is set.

Nothing here is persisted: a restarted broker starts with an empty chart.

Must not import: the store, transports, the global reactor. It reads the objects it is
given through the small protocols below, on the reactor thread.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from broker.errors import SkerryError

__all__ = ["HISTORY_SECONDS", "MAX_TRACKED_GROUPS", "History", "Rate", "Ring", "Sampler",
           "TrafficCounters", "LagSource"]

HISTORY_SECONDS = 3600
"""How far back the charts reach."""
MAX_TRACKED_GROUPS = 1000
"""Most (group, topic) pairs whose lag is charted; the first ones in LIST_GROUPS order win
(the memory is ``pairs x partitions x samples``: 1000 x 3 x 720 small ints at the default
interval)."""

V = TypeVar("V")


class Ring(Generic[V]):
    """The last ``capacity`` samples ``(t, value)``, oldest first."""

    def __init__(self, capacity: int) -> None:
        self._items: deque[tuple[float, V]] = deque(maxlen=max(1, capacity))

    def add(self, t: float, value: V) -> None:
        self._items.append((t, value))

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[float, V]]:
        return iter(self._items)

    def last(self) -> tuple[float, V] | None:
        return self._items[-1] if self._items else None


class TrafficCounters(Protocol):
    """What the history reads of ``broker.metrics.BrokerMetrics``: per-topic totals."""

    messages_in: dict[str, int]
    bytes_in: dict[str, int]
    messages_out: dict[str, int]
    bytes_out: dict[str, int]


class LagSource(Protocol):
    """What the history reads of the group service."""

    def list_groups(self) -> list[tuple[str, str]]: ...

    def describe(self, group: str, topic: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class Rate:
    """Messages and bytes per second over one sampling interval."""

    messages: float
    bytes: float


def _totals(counters: TrafficCounters) -> tuple[int, int, int, int]:
    return (sum(counters.messages_in.values()), sum(counters.bytes_in.values()),
            sum(counters.messages_out.values()), sum(counters.bytes_out.values()))


class History:
    """Lag per partition of every group, and produce/consume rates, sampled by ``sample``.

    ``capacity`` samples are kept per series: ``HISTORY_SECONDS`` worth at the sampling
    interval. A group that LIST_GROUPS no longer shows loses its series at the next sample.
    """

    def __init__(self, interval_s: float, now: Callable[[], float],
                 counters: TrafficCounters | None, groups: LagSource | None) -> None:
        self.interval_s = interval_s
        self.capacity = max(2, math.ceil(HISTORY_SECONDS / interval_s))
        self.now = now
        self._counters = counters
        self._groups = groups
        self.lag: dict[tuple[str, str], Ring[Mapping[int, int]]] = {}
        self.produce: Ring[Rate] = Ring(self.capacity)
        self.consume: Ring[Rate] = Ring(self.capacity)
        self._last: tuple[float, tuple[int, int, int, int]] | None = None

    def sample(self) -> None:
        """Take one sample of every series now."""
        t = self.now()
        self._sample_rates(t)
        self._sample_lag(t)

    def _sample_rates(self, t: float) -> None:
        if self._counters is None:
            return
        totals = _totals(self._counters)
        if self._last is not None:
            then, before = self._last
            dt = t - then
            if dt > 0:
                # A deleted topic takes its counters with it: never a negative rate.
                d = [max(0, now - old) / dt for now, old in zip(totals, before, strict=True)]
                self.produce.add(t, Rate(d[0], d[1]))
                self.consume.add(t, Rate(d[2], d[3]))
        self._last = (t, totals)

    def _sample_lag(self, t: float) -> None:
        if self._groups is None:
            return
        seen = set()
        for key in self._groups.list_groups()[:MAX_TRACKED_GROUPS]:
            try:
                info = self._groups.describe(*key)
            except SkerryError:
                continue  # deleted between the list and the describe
            seen.add(key)
            ring = self.lag.get(key)
            if ring is None:
                ring = self.lag[key] = Ring(self.capacity)
            ring.add(t, dict(zip(info.partitions, info.lag, strict=True)))
        for gone in [key for key in self.lag if key not in seen]:
            del self.lag[gone]

    def lag_series(self, group: str, topic: str) -> list[tuple[float, Mapping[int, int]]]:
        """The group's samples, oldest first (empty before the first sample)."""
        ring = self.lag.get((group, topic))
        return list(ring) if ring is not None else []

    def totals(self) -> tuple[int, int, int, int] | None:
        """Messages in, bytes in, messages out, bytes out since start (None: no metrics)."""
        return None if self._counters is None else _totals(self._counters)


class Sampler:
    """Calls ``history.sample`` every ``history.interval_s`` on ``clock`` (first at once)."""

    def __init__(self, history: History, clock: IReactorTime) -> None:
        self._history = history
        self._call = LoopingCall(history.sample)
        self._call.clock = clock

    def start(self) -> None:
        if not self._call.running:
            self._call.start(self._history.interval_s, now=True)

    def stop(self) -> None:
        if self._call.running:
            self._call.stop()

    @property
    def running(self) -> bool:
        return bool(self._call.running)
