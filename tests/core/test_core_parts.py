"""The core's parts on their own, over small fakes: the one write refusal
(``Topics.check_writable``), the idempotent sequence rules (``producers``) and the
watermarks the group service reads before the core exists (``Watermarks``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from broker.config import load_config
from broker.core import Watermarks
from broker.core.producers import ProducerState, check_next, no_longer_retained
from broker.core.topics import Topics
from broker.errors import BadRequest, NotLeader, StorageError


class FakeReplication:
    """Leads the partitions in ``leading``; ``hw`` is a table."""

    def __init__(self, leading: set[tuple[str, int]], hws: dict[tuple[str, int], int]) -> None:
        self.leading = leading
        self.hws = hws

    def is_leader(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self.leading

    def hw(self, topic: str, partition: int) -> int:
        return self.hws[(topic, partition)]

    def not_leader_error(self, topic: str, partition: int) -> NotLeader:
        return NotLeader(f"partition {partition} of {topic} is a follower on this broker")


class FakeStore:
    """One topic ``t`` whose partitions are the given logs."""

    def __init__(self, logs: list[Any]) -> None:
        self.topics = {"t": SimpleNamespace(partitions=logs)}

    def partition(self, name: str, partition: int) -> Any:
        return self.topics[name].partitions[partition]


def _topics(replication: FakeReplication) -> Topics:
    return Topics(load_config(None, {}), FakeStore([]), replication, None)  # type: ignore[arg-type]


class CheckWritableTests:
    """NotLeader first, then a failed partition's StorageError, with their messages."""

    def test_follower_refused_as_not_leader(self) -> None:
        """A partition this broker does not lead is NotLeader, whatever its log's state."""
        topics = _topics(FakeReplication(set(), {}))
        plog = SimpleNamespace(failed=StorageError("EIO"))
        with pytest.raises(NotLeader, match="partition 1 of t is a follower on this broker"):
            topics.check_writable("t", 1, plog)  # type: ignore[arg-type]

    def test_failed_partition_refused_as_storage_error(self) -> None:
        """A led partition whose log failed refuses writes with the log's error."""
        topics = _topics(FakeReplication({("t", 0)}, {}))
        plog = SimpleNamespace(failed=StorageError("EIO"))
        with pytest.raises(StorageError, match="refuses writes after an I/O error: EIO"):
            topics.check_writable("t", 0, plog)  # type: ignore[arg-type]

    def test_healthy_led_partition_passes(self) -> None:
        """A led, healthy partition takes writes."""
        topics = _topics(FakeReplication({("t", 0)}, {}))
        topics.check_writable("t", 0, SimpleNamespace(failed=None))  # type: ignore[arg-type]


class SequenceRuleTests:
    """Input -> expected table for ``check_next``."""

    @pytest.mark.parametrize(("last", "seq", "expected"), [
        (None, 0, None),   # unknown producer: any start
        (None, 7, None),
        (4, 5, 4),         # the next one
        (4, 3, 4),         # a resend
        (4, 4, 4),
    ])
    def test_accepted(self, last: int | None, seq: int, expected: int | None) -> None:
        """Unknown producers, the next number and resends pass, answering the last one."""
        state = ProducerState(SimpleNamespace(first_offset=0))  # type: ignore[arg-type]
        if last is not None:
            state.last_seq["p"] = last
        assert check_next(state, "t", 0, "p", seq) == expected

    def test_gap_refused(self) -> None:
        """A number beyond the next one expected is BadRequest naming the expected one."""
        state = ProducerState(SimpleNamespace(first_offset=0))  # type: ignore[arg-type]
        state.last_seq["p"] = 4
        with pytest.raises(BadRequest, match="out of order sequence 6 .* expected 5"):
            check_next(state, "t", 0, "p", 6)

    def test_no_longer_retained_message(self) -> None:
        """The refusal of a resend whose original retention removed."""
        assert no_longer_retained("t", 2, "p", 9).message == (
            "sequence 9 of producer p on partition 2 of t is no longer retained")


class WatermarksTests:
    """The offsets the group service reads: hw from replication, earliest from the log."""

    def test_offsets(self) -> None:
        """earliest is the log's first offset; latest is hw + 1."""
        store = FakeStore([SimpleNamespace(first_offset=3)])
        marks = Watermarks(store, FakeReplication(set(), {("t", 0): 9}))  # type: ignore[arg-type]
        assert (marks.earliest("t", 0), marks.hw("t", 0), marks.latest("t", 0)) == (3, 9, 10)
