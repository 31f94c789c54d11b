"""The read face of ``BrokerCore``: high watermarks, first offsets, reads (decoded or as stored), partition summaries, offsets by timestamp and long polls, each handed to ``broker.core.reads.Reads`` or the watermarks.

Must not import: Twisted's reactor, the transports.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred

from broker.core.reads import PartitionSummary
from data.log import RawReadResult, ReadResult


class ReadApi:
    """Part of ``BrokerCore`` (``broker.core.core``): what every transport reads through."""

    def hw(self, topic: str, partition: int) -> int:
        """The partition's high watermark: its last committed offset (-1: none)."""
        return self._reads.hw(topic, partition)

    def earliest_offset(self, topic: str, partition: int) -> int:
        """The partition's first retained offset (``KeyError``/``IndexError`` when it does
        not exist)."""
        return self._marks.earliest(topic, partition)

    def read(self, topic_name: str, partition: int, offset: int,
             max_messages: int | None, create: bool = True) -> tuple[ReadResult, int]:
        """Committed messages from ``offset`` (``<= hw``), bounded by the configured limits."""
        return self._reads.read(topic_name, partition, offset, max_messages, create)

    def read_raw(self, topic_name: str, partition: int, offset: int,
                 max_messages: int | None, create: bool = True) -> tuple[RawReadResult, int]:
        """``read`` without decoding: the stored bytes and a count."""
        return self._reads.read_raw(topic_name, partition, offset, max_messages, create)

    def fetch_raw(self, topic_name: str, partition: int, offset: int, max_messages: int,
                  max_bytes: int, ends_array: bool = False) -> tuple[RawReadResult, int, int]:
        """Committed records as stored, with the caller's limits: ``(result, hw, first
        retained offset)`` (``Reads.fetch_raw``; ``ends_array``: the ends as an int64 array
        where the compiled checks run, for a compiled loop that reads them in place)."""
        return self._reads.fetch_raw(topic_name, partition, offset, max_messages, max_bytes,
                                     ends_array)

    def partition_summary(self, name: str, partition: int) -> PartitionSummary:
        """A partition's offsets and size (``KeyError``/``IndexError`` when it does not exist)."""
        return self._reads.partition_summary(name, partition)

    def offset_for_timestamp(self, name: str, partition: int, timestamp_us: int) -> int | None:
        """The first offset whose record timestamp is ``>= timestamp_us`` (None if none)."""
        return self._reads.offset_for_timestamp(name, partition, timestamp_us)

    def wait_for_data(self, topic: str, partition: int, offset: int,
                      timeout_ms: int) -> Deferred[None]:
        """Fires when a committed message at ``offset`` may exist, or after ``timeout_ms``."""
        return self._reads.wait_for_data(topic, partition, offset, timeout_ms)

    def notify_hw(self, topic: str, partition: int) -> None:
        """Tell long polls that ``hw`` of a partition may have moved (replication events)."""
        self._reads.notify_hw(topic, partition)
