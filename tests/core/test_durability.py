"""Group commit: answers wait for the fsync that covers them, one fsync covers everything
waiting when it starts, and a failed fsync answers every waiter with an error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred

from broker.core.durability import GroupCommitter
from broker.errors import StorageError
from broker.v1.errors import code_for


class FakeLog:
    """A log whose sync() makes everything appended so far durable."""

    def __init__(self) -> None:
        self.next_offset = 0
        self.durable_offset = 0
        self.syncs = 0
        self.fail = False

    def append(self, count: int) -> int:
        first = self.next_offset
        self.next_offset += count
        return first

    def sync(self) -> int:
        self.syncs += 1
        if self.fail:
            raise StorageError("fsync failed: EIO")
        self.durable_offset = self.next_offset
        return self.durable_offset


class ManualThread:
    """A run_in_thread whose jobs run only when the test says the fsync 'returns'."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Callable[[], Any], Deferred[Any]]] = []

    def __call__(self, function: Callable[[], Any]) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self.jobs.append((function, d))
        return d

    def finish_one(self) -> None:
        function, d = self.jobs.pop(0)
        try:
            result = function()
        except Exception as exc:  # noqa: BLE001 - handed to the Deferred like a thread would
            d.errback(exc)
        else:
            d.callback(result)


def test_no_answer_before_the_covering_fsync_returns() -> None:
    """Appends are answered only after an fsync that started after they were written."""
    thread = ManualThread()
    committer = GroupCommitter(thread)
    plog = FakeLog()
    answered: list[int] = []
    first = plog.append(1)
    committer.wait(plog, first + 1, lambda err: answered.append(first))
    assert answered == [] and len(thread.jobs) == 1
    # Another append arrives before the fsync job has run; it joins the same fsync.
    second = plog.append(1)
    committer.wait(plog, second + 1, lambda err: answered.append(second))
    assert answered == [] and len(thread.jobs) == 1
    thread.finish_one()
    assert answered == [0, 1]
    assert plog.syncs == 1
    assert committer.idle()


def test_one_fsync_covers_every_waiter_of_the_moment() -> None:
    """Under concurrent load, fsyncs are far fewer than appends."""
    thread = ManualThread()
    committer = GroupCommitter(thread)
    plog = FakeLog()
    answered: list[int] = []
    for _turn in range(10):
        for _ in range(50):  # 50 connections each append one message per turn
            offset = plog.append(1)
            committer.wait(plog, offset + 1, lambda err, o=offset: answered.append(o))
        thread.finish_one()
    while thread.jobs:
        thread.finish_one()
    assert sorted(answered) == list(range(500))
    assert plog.syncs <= 11


def test_failed_fsync_answers_every_waiter_with_storage_error() -> None:
    """A failed fsync is never reported durable: each waiter gets STORAGE_ERROR."""
    thread = ManualThread()
    committer = GroupCommitter(thread)
    plog = FakeLog()
    plog.fail = True
    errors: list[Any] = []
    for _ in range(3):
        offset = plog.append(1)
        committer.wait(plog, offset + 1, errors.append)
    thread.finish_one()
    assert len(errors) == 3
    assert all(isinstance(e, StorageError) and code_for(e) == "STORAGE_ERROR" for e in errors)
    assert plog.durable_offset == 0


def test_already_durable_is_answered_at_once() -> None:
    """Waiting for offsets that are already durable answers immediately, without an fsync."""
    thread = ManualThread()
    committer = GroupCommitter(thread)
    plog = FakeLog()
    plog.append(5)
    plog.sync()
    got: list[Any] = []
    committer.wait(plog, 5, got.append)
    assert got == [None] and thread.jobs == []


def test_a_sync_that_makes_no_progress_refuses_its_waiters_instead_of_spinning() -> None:
    """The log is closed (or truncated) under two waiters: its sync returns without moving
    ``durable_offset``. Both get STORAGE_ERROR after that one sync, and no further sync is
    started (before, the committer restarted syncs forever)."""
    thread = ManualThread()
    committer = GroupCommitter(thread)
    plog = FakeLog()
    plog.sync = lambda: plog.durable_offset  # type: ignore[method-assign]  # closed
    errors: list[Any] = []
    for _ in range(2):
        offset = plog.append(1)
        committer.wait(plog, offset + 1, errors.append)
    thread.finish_one()
    assert [type(e) for e in errors] == [StorageError, StorageError]
    assert "closed or truncated" in str(errors[0])
    assert thread.jobs == [] and committer.idle()


def test_an_append_during_a_sync_that_progressed_waits_for_the_next_sync() -> None:
    """Thread mode: an append made while a sync runs (after its target was taken) is not
    refused: the sync progressed, so the next sync covers it."""
    thread = ManualThread()
    committer = GroupCommitter(thread)
    plog = FakeLog()
    answered: list[Any] = []
    first = plog.append(1)
    committer.wait(plog, first + 1, answered.append)
    function, d = thread.jobs.pop(0)
    result = function()  # the sync covers offset 0 ...
    second = plog.append(1)  # ... then offset 1 is appended before it returns
    committer.wait(plog, second + 1, answered.append)
    d.callback(result)
    assert answered == [None] and len(thread.jobs) == 1
    thread.finish_one()
    assert answered == [None, None] and committer.idle()
