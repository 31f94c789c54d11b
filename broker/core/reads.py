"""The consume side of the core: high watermarks, reads bounded by them, and long polls.

Owns: ``Watermarks`` (a partition's ``hw``, earliest and latest offsets, from the store
and the replication service: the shell also hands these to the group service before the
core exists), ``Reads`` (reads of committed records, decoded or raw, capped by the
configured limits; the waiters of long polls, woken when ``hw`` may have moved or at their
deadline) and ``PartitionSummary``.

Must not import: transports, the produce pipeline. Time comes from the injected ``clock``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from broker.config import Config
from broker.core.ports import CoreMetrics, ReplicationView, StoreView
from broker.core.topics import Topics
from data.log import PartitionLog, RawReadResult, ReadResult

__all__ = ["PartitionSummary", "Reads", "Watermarks"]


@dataclass(frozen=True, slots=True)
class PartitionSummary:
    """What ``partition_summary`` answers: the first retained offset, the next offset to
    be written, the number of segments and the record bytes they hold."""

    first_offset: int
    next_offset: int
    segment_count: int
    size_bytes: int
    segment_bases: tuple[int, ...] = ()
    """Each segment's first offset, oldest first (what deleting whole segments can reach)."""


class Watermarks:
    """A partition's offsets as consumers see them."""

    def __init__(self, store: StoreView, replication: ReplicationView) -> None:
        self._store = store
        self._replication = replication

    def hw(self, topic: str, partition: int) -> int:
        """The last committed offset (-1: none)."""
        return self._replication.hw(topic, partition)

    def earliest(self, topic: str, partition: int) -> int:
        """The first retained offset."""
        return self._store.partition(topic, partition).first_offset

    def latest(self, topic: str, partition: int) -> int:
        """The offset after the last committed one (``hw + 1``)."""
        return self._replication.hw(topic, partition) + 1


class Reads:
    """Reads of committed records and the long polls waiting for more."""

    def __init__(self, config: Config, store: StoreView, topics: Topics, marks: Watermarks,
                 clock: IReactorTime) -> None:
        self._store = store
        self._topics = topics
        self._clock = clock
        self.hw = marks.hw
        self._max_messages: int = config["limits.consume_max_messages"]
        self._max_bytes: int = config["limits.consume_max_bytes"]
        self._watchers: dict[tuple[str, int], list[tuple[int, Callable[[], None]]]] = {}
        self.metrics: CoreMetrics | None = None

    # ---------------------------------------------------------------- reads

    def _bounds(self, topic_name: str, partition: int, max_messages: int | None,
                create: bool) -> tuple[PartitionLog, int, int]:
        """(log, message limit, hw) of a consume-style read: the topic checked (or
        auto-created), ``max_messages`` capped by the configured limit."""
        topic = self._topics.resolve(topic_name, partition, create)
        limit = self._max_messages
        if max_messages is not None:
            limit = min(limit, max_messages)
        return topic.partitions[partition], limit, self.hw(topic_name, partition)

    def read(self, topic_name: str, partition: int, offset: int,
             max_messages: int | None, create: bool = True) -> tuple[ReadResult, int]:
        """Committed messages from ``offset`` (``<= hw``), bounded by the configured limits."""
        plog, limit, hw = self._bounds(topic_name, partition, max_messages, create)
        result = plog.read(offset, limit, self._max_bytes, hw + 1)
        if self.metrics is not None and result.records:
            self.metrics.consumed(topic_name, len(result.records), len(result.raw))
        return result, hw

    def read_raw(self, topic_name: str, partition: int, offset: int,
                 max_messages: int | None, create: bool = True) -> tuple[RawReadResult, int]:
        """``read`` without decoding: the stored bytes and a count (``PartitionLog.read_raw``)."""
        plog, limit, hw = self._bounds(topic_name, partition, max_messages, create)
        result = plog.read_raw(offset, limit, self._max_bytes, hw + 1)
        if self.metrics is not None and result.count:
            self.metrics.consumed(topic_name, result.count, len(result.raw))
        return result, hw

    def fetch_raw(self, topic_name: str, partition: int, offset: int, max_messages: int,
                  max_bytes: int, ends_array: bool = False) -> tuple[RawReadResult, int, int]:
        """A bulk read of committed records as stored, with the caller's own limits instead
        of the consume limits (V1 FETCH): ``(result, hw, first retained offset)``. Never
        creates a topic. ``ends_array``: as ``PartitionLog.read_raw``'s."""
        plog = self._topics.resolve(topic_name, partition, False).partitions[partition]
        hw = self.hw(topic_name, partition)
        return (plog.read_raw(offset, max_messages, max_bytes, hw + 1, ends_array), hw,
                plog.first_offset)

    def partition_summary(self, name: str, partition: int) -> PartitionSummary:
        """A partition's offsets and size (``KeyError``/``IndexError`` when it does not exist)."""
        plog = self._store.partition(name, partition)
        return PartitionSummary(plog.first_offset, plog.next_offset, plog.segment_count,
                                plog.size_bytes(), plog.segment_bases)

    def offset_for_timestamp(self, name: str, partition: int, timestamp_us: int) -> int | None:
        """The first offset whose record timestamp is ``>= timestamp_us`` (None if none)."""
        return self._store.partition(name, partition).offset_for_timestamp(timestamp_us)

    # ---------------------------------------------------------------- long polls

    def wait_for_data(self, topic: str, partition: int, offset: int,
                      timeout_ms: int) -> Deferred[None]:
        """Fires when a committed message at ``offset`` may exist, or after ``timeout_ms``."""
        d: Deferred[None] = Deferred()
        key = (topic, partition)
        watchers = self._watchers.setdefault(key, [])
        timer: IDelayedCall | None = None

        def wake() -> None:
            if timer is not None and timer.active():
                timer.cancel()
            if not d.called:
                d.callback(None)

        def expire() -> None:
            entries = self._watchers.get(key)
            if entries is not None:
                entries[:] = [e for e in entries if e[1] is not wake]
                if not entries:
                    del self._watchers[key]
            if not d.called:
                d.callback(None)

        watchers.append((offset, wake))
        timer = self._clock.callLater(timeout_ms / 1000.0, expire)
        return d

    def notify_hw(self, topic: str, partition: int) -> None:
        """``hw`` of a partition may have moved: wake the long polls it satisfies."""
        watchers = self._watchers.get((topic, partition))
        if not watchers:
            return
        hw = self.hw(topic, partition)
        ready = [wake for offset, wake in watchers if offset <= hw]
        if not ready:
            return
        remaining = [(offset, wake) for offset, wake in watchers if offset > hw]
        if remaining:
            self._watchers[(topic, partition)] = remaining
        else:
            del self._watchers[(topic, partition)]
        for wake in ready:
            wake()

    def wake_all(self) -> None:
        """Answer every long poll now (shutdown)."""
        for key in list(self._watchers):
            for _, wake in self._watchers.pop(key):
                wake()
