"""``storage.group_commit: turn`` (the default with ``storage.fsync: always``): the group
commit's fsync runs on the reactor thread once per reactor turn, after the turn's requests
were read and appended, as Redis's ``appendfsync always`` does.

What a producer notices, through the real core and store on ``tmp_path`` with an injected
clock (``task.Clock``) and a file layer that records every fsync: every acknowledged
message was fsynced before its reply; one fsync covers every request read in the turn; no
reply comes before its fsync; a failed fsync refuses the requests instead of acknowledging
them. The committer's own ordering (``before_sync`` before the sync, waits added while the
turn's sync is pending join it, appends after it wait for the next turn) is checked over a
fake log with a manual end-of-turn scheduler.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock

from broker.config import load_config
from broker.core.core import BrokerCore
from broker.core.durability import GroupCommitter, synchronous
from broker.core.produce import ProduceRequest, ProduceResult
from broker.errors import NotLeader, SkerryError, StorageError
from data.store import StorageConfig, Store
from tests.fakes.fs import FaultyFileLayer, RecordingFileLayer


class LocalReplication:
    """One broker, no replicas: it leads everything and ``hw`` follows nothing."""

    def hw(self, topic: str, partition: int) -> int:
        return 0

    def is_leader(self, topic: str, partition: int) -> bool:
        return True

    def not_leader_error(self, topic: str, partition: int) -> NotLeader:
        return NotLeader(f"{topic}/{partition}")

    def on_appended(self, topic: str, partition: int) -> None:
        return None

    def on_durable(self, topic: str, partition: int) -> None:
        return None

    def committed(self, topic: str, partition: int, offset: int) -> bool:
        return True

    def wait_for_all(self, topic: str, partition: int, offset: int,
                     timeout_ms: int | None = None) -> Deferred[int]:
        return succeed(offset + 1)

    def forget_topic(self, topic: str) -> None:
        return None

    def partitions_added(self, topic: str) -> None:
        return None

    def close(self) -> None:
        return None


class NoGroups:
    def topic_deleted(self, topic: str) -> None:
        return None

    def partitions_changed(self, topic: str) -> None:
        return None

    def close(self) -> Deferred[None]:
        return succeed(None)


class Replies:
    """What a connection is answered with, noting for each answer how many log fsyncs had
    happened and how far the partition was durable when it was handed over."""

    def __init__(self, core: BrokerCore, fs: RecordingFileLayer) -> None:
        self.core, self.fs = core, fs
        self.got: list[tuple[Any, int, SkerryError | None, int, int]] = []

    def send(self, value: bytes, token: Any) -> None:
        """One PRODUCE of ``value`` to t/0 with ``acks=1``, answered here."""
        self.core.produce(ProduceRequest("t", 0, "1", keys=(b"",), values=(value,),
                                         tokens=(token,)), self.answer)

    def answer(self, result: ProduceResult) -> None:
        plog = self.core.store.partition("t", result.partition)
        for token in result.tokens:
            self.got.append((token, result.offset, result.error, log_fsyncs(self.fs),
                             plog.durable_offset))


def log_fsyncs(fs: RecordingFileLayer) -> int:
    return len([e for e in fs.ops("fsync") if e.path.endswith(".log")])


def make_core(tmp_path: Any, fs: RecordingFileLayer, mode: str = "turn",
              run_in_thread: Callable[[Callable[[], Any]], Deferred[Any]] = synchronous
              ) -> tuple[BrokerCore, Clock]:
    clock = Clock()
    config = load_config(None, {"storage.fsync": "always", "storage.group_commit": mode})
    store = Store(str(tmp_path / "data"), StorageConfig(fsync="always"), fs=fs)
    core = BrokerCore(config, store, clock, replication=LocalReplication(),  # type: ignore[arg-type]
                      groups=NoGroups(), run_in_thread=run_in_thread)
    core.create_topic("t", 1, 1, None, None, None)
    return core, clock


def test_every_request_read_in_a_turn_is_answered_after_one_fsync_that_covers_it(
        tmp_path: Any) -> None:
    """50 connections' requests read in one turn: no reply before the fsync, one fsync for
    all 50, and every reply's message was durable when the reply was handed over."""
    fs = RecordingFileLayer()
    core, clock = make_core(tmp_path, fs)
    sink = Replies(core, fs)
    before = log_fsyncs(fs)
    for connection in range(50):
        sink.send(b"v%d" % connection, connection)
    assert sink.got == [] and log_fsyncs(fs) == before  # nothing answered or synced yet
    clock.advance(0)  # the turn ends: flush, then the turn's fsync
    assert [token for token, *_ in sink.got] == list(range(50))
    assert core.committer.syncs == 1
    synced_by_then = {fsyncs for *_, fsyncs, _ in sink.got}
    assert synced_by_then == {log_fsyncs(fs)} and log_fsyncs(fs) > before
    for _token, offset, error, _fsyncs, durable in sink.got:
        assert error is None and offset < durable  # acknowledged only once on disk
    assert core.idle()


def test_the_next_turn_gets_its_own_fsync(tmp_path: Any) -> None:
    """A request read after a turn's fsync is not answered by it: it waits for its own."""
    fs = RecordingFileLayer()
    core, clock = make_core(tmp_path, fs)
    sink = Replies(core, fs)
    sink.send(b"first", "first")
    clock.advance(0)
    sink.send(b"second", "second")
    assert [token for token, *_ in sink.got] == ["first"]
    clock.advance(0)
    assert [token for token, *_ in sink.got] == ["first", "second"]
    assert core.committer.syncs == 2
    assert sink.got[1][1] < sink.got[1][4]  # second's offset below the durable offset


def test_a_failed_fsync_refuses_the_turns_requests(tmp_path: Any) -> None:
    """The fsync fails with EIO: every request of the turn gets a STORAGE_ERROR, none an
    offset, and the partition does not claim them durable."""
    fs = FaultyFileLayer(op="fsync", path_endswith=".log", error=errno.EIO, armed=False)
    core, clock = make_core(tmp_path, fs)  # type: ignore[arg-type]
    sink = Replies(core, RecordingFileLayer())
    fs.arm("fsync", path_endswith=".log", error=errno.EIO)
    for connection in range(3):
        sink.send(b"v", connection)
    clock.advance(0)
    assert len(sink.got) == 3
    for _token, offset, error, _fsyncs, durable in sink.got:
        assert isinstance(error, StorageError) and offset == -1
        assert durable == 0
    assert core.idle()


def test_thread_mode_runs_the_fsync_through_the_worker_runner(tmp_path: Any) -> None:
    """``storage.group_commit: thread`` keeps the worker-thread design: the fsync goes to
    ``run_in_thread`` and nothing is answered until that job returns."""
    jobs: list[tuple[Callable[[], Any], Deferred[Any]]] = []

    def worker(function: Callable[[], Any]) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        jobs.append((function, d))
        return d

    fs = RecordingFileLayer()
    core, clock = make_core(tmp_path, fs, "thread", worker)
    sink = Replies(core, fs)
    sink.send(b"v", "a")
    clock.advance(0)
    assert sink.got == [] and len(jobs) == 1
    function, d = jobs.pop()
    d.callback(function())
    assert [token for token, *_ in sink.got] == ["a"]
    assert sink.got[0][2] is None and sink.got[0][1] < sink.got[0][4]


class FakeLog:
    """A log whose sync() makes everything appended so far durable."""

    def __init__(self) -> None:
        self.next_offset = 0
        self.durable_offset = 0
        self.syncs = 0

    def append(self) -> int:
        self.next_offset += 1
        return self.next_offset - 1

    def sync(self) -> int:
        self.syncs += 1
        self.durable_offset = self.next_offset
        return self.durable_offset


class Turns:
    """A manual end-of-turn scheduler: the test ends the turn."""

    def __init__(self) -> None:
        self.scheduled: list[Callable[[], None]] = []

    def __call__(self, function: Callable[[], None]) -> None:
        self.scheduled.append(function)

    def end(self) -> None:
        due, self.scheduled = self.scheduled, []
        for function in due:
            function()


def test_the_turns_queued_messages_are_appended_before_its_fsync() -> None:
    """``before_sync`` (the pipeline's flush) runs first, so what it appends and waits for
    is covered by the same fsync; one end-of-turn call is scheduled however many wait."""
    turns, plog = Turns(), FakeLog()
    committer = GroupCommitter(synchronous, end_of_turn=turns)
    answered: list[tuple[int, int]] = []

    def wait_for(offset: int) -> None:
        committer.wait(plog, offset + 1,
                       lambda error: answered.append((offset, plog.syncs)))

    def flush() -> None:  # two messages the turn queued, appended at its end
        for _ in range(2):
            wait_for(plog.append())

    committer.before_sync = flush
    for _ in range(3):
        wait_for(plog.append())
    assert len(turns.scheduled) == 1 and answered == []
    turns.end()
    assert answered == [(offset, 1) for offset in range(5)]
    assert plog.syncs == 1 and committer.idle() and turns.scheduled == []
