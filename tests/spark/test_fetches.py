"""The ``skerry`` reader's pipelined FETCH loop against a scripted broker (no sockets, no
Spark): windows sent ahead, answers taken in order, short answers and retention gaps move
the position and drop the answers to windows asked for before, uncommitted offsets fail."""

from __future__ import annotations

from collections import deque

import pytest

from broker.client.codec import Fetched
from data.format import encode_record
from data.spark.offsets import DataLoss, OffsetRange
from data.spark.source import FETCH_MAX_RECORDS, SkerryOptions, _fetches


class ScriptedBroker:
    """Answers FETCH like a broker holding offsets ``first .. hw`` of one partition, each
    answer cut to at most ``per_answer`` records (a byte budget stand-in). ``data`` holds the
    answer's first record only (the loop under test reads just its offset)."""

    def __init__(self, first: int, hw: int, per_answer: int = FETCH_MAX_RECORDS) -> None:
        self.first, self.hw, self.per_answer = first, hw, per_answer
        self.sent: list[tuple[int, int]] = []
        self._queue: deque[tuple[int, int]] = deque()

    def send_fetch(self, topic: str, partition: int, offset: int, max_messages: int = 0,
                   max_bytes: int = 0, raw: bool = True) -> None:
        self.sent.append((offset, max_messages))
        self._queue.append((offset, max_messages))

    def receive_fetch(self) -> Fetched:
        offset, most = self._queue.popleft()
        start = max(offset, self.first)
        end = min(start + most, start + self.per_answer, self.hw + 1)
        # The loop reads only the first record's offset field: the rest is not built.
        data = encode_record(start, 1, 0, 1, b"v") if end > start else b""
        return Fetched(self.hw, self.first, max(end, start), max(0, end - start), data)


def read(broker: ScriptedBroker, start: int, end: int, fail_on_data_loss: bool = True) -> list[int]:
    opts = SkerryOptions({"failOnDataLoss": str(fail_on_data_loss).lower()})
    got: list[int] = []
    for answer in _fetches(broker, opts, OffsetRange("t", 0, start, end)):  # type: ignore[arg-type]
        got.extend(range(answer.next_offset - answer.count, answer.next_offset))
    return got


class FetchLoopTests:
    def test_windows_are_pipelined_and_cover_the_range(self) -> None:
        """A range of 2.5 windows is read with one FETCH per window, the next ones sent
        before the last answer is used, every offset exactly once, in order."""
        end = 2 * FETCH_MAX_RECORDS + 7
        broker = ScriptedBroker(0, end - 1)
        assert read(broker, 0, end) == list(range(end))
        assert broker.sent == [(0, FETCH_MAX_RECORDS), (FETCH_MAX_RECORDS, FETCH_MAX_RECORDS),
                               (2 * FETCH_MAX_RECORDS, 7)]

    def test_short_answers_are_continued_not_skipped(self) -> None:
        """When answers stop short of their window (the byte budget), the reader asks again
        from where each one ended and ignores answers to windows sent before: no gap, no
        duplicate."""
        end = FETCH_MAX_RECORDS + 500
        broker = ScriptedBroker(0, end + 100, per_answer=30_000)
        assert read(broker, 0, end) == list(range(end))

    def test_byte_bounded_answers_size_the_windows(self) -> None:
        """When the byte budget holds fewer records than a window (large values), the windows
        shrink to what an answer carries, so the FETCHes sent ahead are used, not dropped:
        one wasted request at most, instead of about one per answer."""
        end = 600_000
        broker = ScriptedBroker(0, end - 1, per_answer=60_000)
        assert read(broker, 0, end) == list(range(end))
        assert len(broker.sent) <= end // 60_000 + 1, broker.sent

    def test_retention_gap_is_data_loss_or_skipped(self) -> None:
        """Offsets no longer retained fail the read (failOnDataLoss) or are skipped, the read
        continuing at the earliest retained offset."""
        with pytest.raises(DataLoss, match="no longer retained"):
            read(ScriptedBroker(50, 199), 10, 200)
        assert read(ScriptedBroker(50, 199), 10, 200, fail_on_data_loss=False) == list(range(50, 200))

    def test_offsets_not_committed_fail(self) -> None:
        """Asking beyond what the broker has committed (the hw moved back) is data loss."""
        with pytest.raises(DataLoss, match="not committed"):
            read(ScriptedBroker(0, -1), 0, 10)
