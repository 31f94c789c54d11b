"""Tests for ``broker.services.replication.ReplicationService`` over a fake store and
``task.Clock``.

Every timing assertion moves the injected clock; nothing sleeps.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.task import Clock, LoopingCall
from twisted.python.failure import Failure

from broker.errors import (
    BadRequest,
    InvalidReplicaRequest,
    NotLeader,
    ReplicationTimeout,
    StorageError,
    Unavailable,
)
from broker.services.replication import ReplicationService
from broker.v1.errors import code_for
from replication.roles import Role
from tests.replication.fakes import FakeLog, FakeStore

LAG_S = 10.0
ACK_S = 2.0
CHECKPOINT_S = 5.0


class Outcome:
    """Collects what a Deferred fired with, without letting a failure go unhandled."""

    def __init__(self, d: Deferred[Any]) -> None:
        self.result: Any = None
        self.failure: Failure | None = None
        self.fired = False
        d.addCallbacks(self._ok, self._err)

    def _ok(self, value: Any) -> None:
        self.fired, self.result = True, value

    def _err(self, failure: Failure) -> None:
        self.fired, self.failure = True, failure

    @property
    def error(self) -> BaseException | None:
        return None if self.failure is None else self.failure.value


class Broker:
    """A fake store, a clock and the service under test, plus produce-like helpers."""

    def __init__(self, store: FakeStore | None = None, clock: Clock | None = None, *,
                 fsync_always: bool = True) -> None:
        self.store = store if store is not None else FakeStore()
        self.clock = clock if clock is not None else Clock()
        self.fsync_always = fsync_always
        self.service = ReplicationService(self.store, self.clock,
                                          replica_lag_timeout_ms=int(LAG_S * 1000),
                                          ack_timeout_ms=int(ACK_S * 1000),
                                          fsync_always=fsync_always,
                                          hw_checkpoint_interval_ms=int(CHECKPOINT_S * 1000))

    def topic(self, name: str = "t", partitions: int = 1, rf: int = 1, min_isr: int = 1) -> None:
        self.store.create_topic(name, partitions, rf, min_isr)

    def log(self, name: str = "t", partition: int = 0) -> FakeLog:
        return self.store.partition(name, partition)

    def append(self, count: int = 1, name: str = "t", partition: int = 0, *,
               durable: bool = True) -> int:
        """Append like the core does (append, on_appended, then fsync and on_durable);
        returns the last offset appended."""
        plog = self.log(name, partition)
        plog.append(count, durable=False)
        self.service.on_appended(name, partition)
        if durable:
            plog.sync()
            self.service.on_durable(name, partition)
        return plog.next_offset - 1

    def produce_all(self, count: int = 1, name: str = "t", partition: int = 0) -> Outcome:
        last = self.append(count, name, partition)
        return Outcome(self.service.wait_for_all(name, partition, last))

    def fetch(self, replica: int, offset: int, name: str = "t", partition: int = 0) -> Any:
        return self.service.replica_fetch(name, partition, replica, offset)

    def isr(self, name: str = "t", partition: int = 0) -> list[int]:
        return self.service.describe(name, partition).isr

    def restart(self, *, lose_unsynced: bool = False) -> Broker:
        """Stop this broker and start a new one over the same persisted state."""
        self.service.close()
        return Broker(self.store.reopen(lose_unsynced=lose_unsynced), self.clock,
                      fsync_always=self.fsync_always)


def timers(broker: Broker) -> list[Any]:
    """Pending one-shot timers (ack and lag timers), without the checkpoint loop."""
    return [call for call in broker.clock.getDelayedCalls()
            if not isinstance(call.func, LoopingCall)]


def ack_timers(broker: Broker, started: float = 0.0) -> list[Any]:
    """Pending timers due exactly one ack timeout after ``started``."""
    return [call for call in timers(broker) if call.getTime() == started + ACK_S]


@pytest.fixture
def broker() -> Broker:
    return Broker()


class HighWatermarkTests:

    def test_rf1_hw_waits_for_fsync(self, broker: Broker) -> None:
        """RF=1 with fsync=always: appended messages are committed once fsynced."""
        broker.topic()
        broker.append(3, durable=False)
        assert broker.service.hw("t", 0) == -1
        broker.log().sync()
        broker.service.on_durable("t", 0)
        assert broker.service.hw("t", 0) == 2

    def test_rf1_on_appended_allocates_nothing(self, broker: Broker) -> None:
        """The per-batch hot path (on_appended/on_durable, RF=1) keeps no memory: 2000
        batches leave the allocated block count unchanged while hw follows."""
        broker.topic()
        plog = broker.log()
        ends = list(range(1000, 3000))
        broker.append(1)
        before = sys.getallocatedblocks()
        for end in ends:
            plog.next_offset = plog.durable_offset = end
            broker.service.on_appended("t", 0)
            broker.service.on_durable("t", 0)
        assert sys.getallocatedblocks() - before <= 2
        assert broker.service.hw("t", 0) == 2998

    def test_rf1_without_fsync_always(self) -> None:
        """With fsync never/interval, hw follows appends."""
        broker = Broker(fsync_always=False)
        broker.topic()
        broker.append(3, durable=False)
        assert broker.service.hw("t", 0) == 2

    def test_hw_is_min_over_isr(self, broker: Broker) -> None:
        """hw is the smallest last offset among ISR members, the leader included."""
        broker.topic(rf=3)
        broker.append(10)
        broker.fetch(1, 9)
        broker.fetch(2, 9)
        broker.append(10)                      # leader at 19
        broker.fetch(1, 15)
        assert broker.fetch(2, 12).hw == 12
        broker.fetch(2, 19)
        assert broker.service.hw("t", 0) == 15

    def test_hw_capped_by_durable_offset(self, broker: Broker) -> None:
        """With fsync=always hw never passes the leader's last fsynced offset."""
        broker.topic(rf=2)
        broker.append(5)
        broker.fetch(1, 4)
        broker.append(5, durable=False)        # leader at 9, durable at 4
        assert broker.fetch(1, 9).hw == 4
        broker.log().sync()
        broker.service.on_durable("t", 0)
        assert broker.service.hw("t", 0) == 9

    def test_hw_never_moves_backwards(self, broker: Broker) -> None:
        """A follower entering the ISR behind hw does not pull hw back."""
        broker.topic(rf=2)
        broker.append(10)
        assert broker.fetch(1, 2).isr == [0]   # behind; the leader was at 9
        broker.append(10)
        assert broker.service.hw("t", 0) == 19
        result = broker.fetch(1, 9)            # keeps pace: enters the ISR at 9
        assert result.isr == [0, 1] and result.hw == 19

    def test_unknown_topic_and_partition(self, broker: Broker) -> None:
        """Unknown topics and partitions beyond the count are BAD_REQUEST."""
        broker.topic(partitions=2)
        with pytest.raises(BadRequest, match="unknown topic"):
            broker.service.hw("nope", 0)
        with pytest.raises(BadRequest, match="out of range"):
            broker.service.hw("t", 2)
        with pytest.raises(BadRequest, match="out of range"):
            broker.service.hw("t", -1)

    def test_topic_created_later_is_picked_up(self, broker: Broker) -> None:
        """A topic created after the service started is tracked on first use."""
        broker.topic("late", rf=1)
        broker.append(2, "late")
        assert broker.service.hw("late", 0) == 1


class ReplicaFetchTests:

    def test_reply_fields(self, broker: Broker) -> None:
        """The reply carries replica, acked_offset, hw, the sorted ISR and under_replicated."""
        broker.topic(rf=3)
        broker.append(5)
        result = broker.fetch(2, 4)
        assert (result.replica, result.acked_offset, result.hw, result.isr,
                result.under_replicated) == (2, 4, 4, [0, 2], True)
        result = broker.fetch(1, 4)
        assert (result.isr, result.under_replicated) == ([0, 1, 2], False)

    @pytest.mark.parametrize("rf, bad", [(3, 0), (3, 3), (3, 99), (1, 1), (2, 2)])
    def test_replica_id_range(self, broker: Broker, rf: int, bad: int) -> None:
        """replica_id must be 1 .. RF-1; anything else is BAD_REQUEST and changes nothing."""
        broker.topic(rf=rf)
        broker.append(5)
        with pytest.raises(InvalidReplicaRequest) as caught:
            broker.fetch(bad, 4)
        assert code_for(caught.value) == "BAD_REQUEST"
        assert broker.isr() == [0]
        assert broker.log().saved == []

    def test_progress_capped_at_leader_last_offset(self, broker: Broker) -> None:
        """A report beyond the leader's last offset is recorded as the last offset."""
        broker.topic(rf=2)
        broker.append(5)
        assert broker.fetch(1, 1000).acked_offset == 4

    def test_progress_never_moves_backwards(self, broker: Broker) -> None:
        """A lower report keeps the recorded progress; a real follower may move it back."""
        broker.topic(rf=2)
        broker.append(10)
        assert broker.fetch(1, 7).acked_offset == 7
        assert broker.fetch(1, 3).acked_offset == 7
        result = broker.service.replica_fetch("t", 0, 1, 3, allow_backwards=True)
        assert result.acked_offset == 3

    def test_empty_log_report_is_in_sync(self, broker: Broker) -> None:
        """On an empty partition any report is capped at -1 and counts as caught up."""
        broker.topic(rf=2)
        result = broker.fetch(1, 5)
        assert (result.acked_offset, result.hw, result.isr) == (-1, -1, [0, 1])


class IsrTests:

    def test_followers_start_outside(self, broker: Broker) -> None:
        """A new partition's ISR is the leader alone and it is under-replicated."""
        broker.topic(rf=3)
        status = broker.service.describe("t", 0)
        assert (status.isr, status.under_replicated, status.role, status.leader_epoch) == \
            ([0], True, Role.LEADER, 0)

    def test_caught_up_by_reaching_last_offset(self, broker: Broker) -> None:
        """A follower enters the ISR when it reaches the leader's last offset."""
        broker.topic(rf=2)
        broker.append(10)
        assert broker.fetch(1, 8).isr == [0]
        assert broker.fetch(1, 9).isr == [0, 1]

    def test_caught_up_by_keeping_pace(self, broker: Broker) -> None:
        """Reaching the leader's last offset as of the previous report counts as caught up."""
        broker.topic(rf=2)
        broker.append(10)
        assert broker.fetch(1, 4).isr == [0]   # leader at 9
        broker.append(10)
        assert broker.fetch(1, 8).isr == [0]   # short of 9
        broker.append(10)
        assert broker.fetch(1, 19).isr == [0, 1]  # leader was at 19, is at 29 now

    def test_steady_load_stays_in_sync(self, broker: Broker) -> None:
        """A follower always one batch behind but reporting every second never drops out."""
        broker.topic(rf=2, min_isr=2)
        broker.append(100)
        broker.fetch(1, 99)
        for _ in range(60):
            previous_last = broker.log().next_offset - 1
            broker.append(100)
            broker.clock.advance(1.0)
            result = broker.fetch(1, previous_last)
            assert result.isr == [0, 1] and result.hw == previous_last

    def test_lagging_follower_falls_out_with_no_traffic(self, broker: Broker) -> None:
        """With no requests at all, a follower leaves the ISR right after the lag timeout,
        and hw and under_replicated change on their own."""
        broker.topic(rf=2)
        moved: list[tuple[str, int]] = []
        broker.service.add_hw_listener(lambda t, p: moved.append((t, p)))
        broker.append(10)
        broker.fetch(1, 9)
        broker.append(10)                      # follower never fetches 10..19
        assert broker.service.hw("t", 0) == 9
        broker.clock.advance(LAG_S)
        assert broker.isr() == [0, 1] and broker.service.hw("t", 0) == 9
        broker.clock.advance(0.001)
        status = broker.service.describe("t", 0)
        assert (status.isr, status.under_replicated, status.hw) == ([0], True, 19)
        assert moved == [("t", 0)]
        assert broker.log().saved[-1]["isr"] == [0]   # ISR change persisted at once

    def test_rejoins_after_falling_out(self, broker: Broker) -> None:
        """A follower that fell out comes back by catching up again."""
        broker.topic(rf=2)
        broker.append(5)
        broker.fetch(1, 4)
        broker.clock.advance(LAG_S + 1)
        assert broker.isr() == [0]
        assert broker.fetch(1, 4).isr == [0, 1]

    def test_no_timer_without_isr_followers(self, broker: Broker) -> None:
        """An RF=1 partition, or one with no in-sync follower, schedules no lag timer."""
        broker.topic("one", rf=1)
        broker.topic("three", rf=3)
        broker.append(1, "one")
        broker.append(1, "three")
        assert timers(broker) == []
        broker.fetch(1, 0, "three")
        assert [call.getTime() for call in timers(broker)] == [LAG_S + 0.001]


class AcksAllTests:

    def test_rf1_answered_at_once(self, broker: Broker) -> None:
        """RF=1: acks=all is answered as soon as the message is appended and fsynced."""
        broker.topic()
        outcome = broker.produce_all(3)
        assert (outcome.fired, outcome.result) == (True, 2)

    def test_rf1_before_fsync_waits_for_it(self, broker: Broker) -> None:
        """RF=1, fsync=always: a wait started before the fsync is answered by the fsync."""
        broker.topic()
        last = broker.append(2, durable=False)
        outcome = Outcome(broker.service.wait_for_all("t", 0, last))
        assert not outcome.fired
        broker.log().sync()
        broker.service.on_durable("t", 0)
        assert (outcome.fired, outcome.result) == (True, 1)

    def test_wait_reads_the_log_itself(self, broker: Broker) -> None:
        """A wait started before on_appended/on_durable were called still sees the
        message the log already holds."""
        broker.topic()
        broker.service.hw("t", 0)
        broker.log().append(3)                 # durable, but nobody told the service
        outcome = Outcome(broker.service.wait_for_all("t", 0, 2))
        assert (outcome.fired, outcome.result) == (True, 2)

    def test_committed_says_whether_wait_for_all_would_succeed_at_once(self, broker: Broker
                                                                      ) -> None:
        """``committed`` (asked first by a produce with acks=all) is True exactly when
        ``wait_for_all`` would fire with success at once: before the fsync no, after it
        yes; with RF 3 once the followers hold the batch; never past the log's end or on a
        follower."""
        def fires_with_success(offset: int, name: str = "t") -> bool:
            outcome = Outcome(broker.service.wait_for_all(name, 0, offset))
            return outcome.fired and outcome.error is None

        broker.topic()
        last = broker.append(2, durable=False)
        assert broker.service.committed("t", 0, last) is False
        broker.log().sync()
        broker.service.on_durable("t", 0)
        assert broker.service.committed("t", 0, last) is True
        assert fires_with_success(last)
        assert broker.service.committed("t", 0, last + 1) is False
        broker.topic("r", rf=3, min_isr=3)
        last = broker.append(4, name="r")
        assert broker.service.committed("r", 0, last) is False
        broker.fetch(1, last, name="r")
        assert broker.service.committed("r", 0, last) is False
        broker.fetch(2, last, name="r")
        assert broker.service.committed("r", 0, last) is True
        assert fires_with_success(last, "r")
        broker.service.set_role("t", 0, "follower")
        assert broker.service.committed("t", 0, 0) is False
        assert isinstance(Outcome(broker.service.wait_for_all("t", 0, 0)).error, NotLeader)

    def test_success_when_hw_passes_with_min_isr(self, broker: Broker) -> None:
        """acks=all answers with hw once hw >= offset and min ISR replicas are in sync."""
        broker.topic(rf=3, min_isr=3)
        outcome = broker.produce_all(5)
        broker.fetch(1, 4)
        assert not outcome.fired               # hw is 4 but the ISR has 2 of 3
        broker.fetch(2, 4)
        assert (outcome.fired, outcome.result) == (True, 4)
        assert ack_timers(broker) == []        # the ack timer was cancelled

    def test_timeout_after_exactly_ack_timeout(self, broker: Broker) -> None:
        """REPLICATION_TIMEOUT comes exactly ack_timeout_ms after the wait started."""
        broker.topic(rf=2, min_isr=2)
        outcome = broker.produce_all()
        broker.clock.advance(ACK_S - 0.001)
        assert not outcome.fired
        broker.clock.advance(0.001)
        assert outcome.fired and isinstance(outcome.error, ReplicationTimeout)
        assert code_for(outcome.error) == "REPLICATION_TIMEOUT"
        assert "|" not in outcome.error.message

    def test_a_wait_with_its_own_timeout(self, broker: Broker) -> None:
        """wait_for_all(timeout_ms=...) (a Kafka produce's own timeout) replaces the ack
        timeout for that wait only, and its message names it."""
        broker.topic(rf=2, min_isr=2)
        broker.append(1)
        longer = Outcome(broker.service.wait_for_all("t", 0, 0, timeout_ms=5000))
        default = Outcome(broker.service.wait_for_all("t", 0, 0))
        broker.clock.advance(ACK_S)
        assert isinstance(default.error, ReplicationTimeout) and not longer.fired
        broker.clock.advance(5.0 - ACK_S - 0.001)
        assert not longer.fired
        broker.clock.advance(0.001)
        assert isinstance(longer.error, ReplicationTimeout)
        assert "within 5000 ms" in longer.error.message

    def test_timed_out_message_stays_and_commits_later(self, broker: Broker) -> None:
        """A timed-out message stays in the log; hw passes it once followers catch up."""
        broker.topic(rf=2, min_isr=2)
        broker.append(3)
        broker.fetch(1, 2)
        outcome = broker.produce_all()         # offset 3
        broker.clock.advance(ACK_S)
        assert isinstance(outcome.error, ReplicationTimeout)
        assert broker.service.hw("t", 0) == 2
        assert broker.log().next_offset == 4
        assert broker.fetch(1, 3).hw == 3
        again = Outcome(broker.service.wait_for_all("t", 0, 3))
        assert (again.fired, again.result) == (True, 3)

    def test_spec_scenario_rf3_min_isr2(self, broker: Broker) -> None:
        """RF=3, min ISR 2: acks=all times out with no follower; with two REPLICA_FETCH
        reports covering the message it succeeds."""
        broker.topic("orders", rf=3, min_isr=2)
        first = broker.produce_all(1, "orders")
        broker.clock.advance(ACK_S)
        assert isinstance(first.error, ReplicationTimeout)
        second = broker.produce_all(1, "orders")   # offset 1
        assert not second.fired
        r1 = broker.fetch(1, 1, "orders")
        r2 = broker.fetch(2, 1, "orders")
        assert (second.fired, second.result) == (True, 1)
        assert (r1.acked_offset, r2.acked_offset, r2.hw, r2.isr, r2.under_replicated) == \
            (1, 1, 1, [0, 1, 2], False)

    def test_isr_shrink_within_ack_timeout(self) -> None:
        """A follower that stops reporting is dropped after the lag timeout, which
        releases an acks=all wait still within its (longer) ack timeout."""
        store, clock = FakeStore(), Clock()
        service = ReplicationService(store, clock, replica_lag_timeout_ms=1000,
                                     ack_timeout_ms=2000)
        store.create_topic("t", 1, 3, 2)
        plog = store.partition("t", 0)
        plog.append(3)
        service.on_appended("t", 0)
        service.replica_fetch("t", 0, 1, 2)
        service.replica_fetch("t", 0, 2, 2)
        plog.append(5)
        service.on_appended("t", 0)
        outcome = Outcome(service.wait_for_all("t", 0, 7))
        clock.advance(0.5)
        service.replica_fetch("t", 0, 1, 7)
        clock.advance(0.5)
        assert not outcome.fired               # follower 2 in sync until 1.001 s
        clock.advance(0.001)
        assert (outcome.fired, outcome.result) == (True, 7)
        assert service.describe("t", 0).isr == [0, 1]

    def test_isr_shrink_below_min_isr_times_out(self, broker: Broker) -> None:
        """If the ISR shrinks below min ISR, a waiting acks=all request times out."""
        broker.topic(rf=2, min_isr=2)
        broker.append(1)
        broker.fetch(1, 0)
        outcome = broker.produce_all()         # offset 1, follower silent
        broker.clock.advance(ACK_S)
        assert isinstance(outcome.error, ReplicationTimeout)

    def test_cancel_withdraws_the_wait(self, broker: Broker) -> None:
        """Cancelling the Deferred (client gone) withdraws the wait and its timer."""
        broker.topic(rf=2, min_isr=2)
        broker.append(1)
        d = broker.service.wait_for_all("t", 0, 0)
        outcome = Outcome(d)
        assert len(ack_timers(broker)) == 1
        d.cancel()
        assert isinstance(outcome.error, CancelledError)
        assert ack_timers(broker) == []

    def test_many_waiters_answered_in_offset_order(self, broker: Broker) -> None:
        """Each waiter is answered when hw reaches its own offset, lowest first."""
        broker.topic(rf=2, min_isr=2)
        broker.append(1)
        broker.fetch(1, 0)
        outcomes = [broker.produce_all() for _ in range(5)]    # offsets 1..5
        assert not any(o.fired for o in outcomes)
        broker.fetch(1, 3)
        assert [o.fired for o in outcomes] == [True, True, True, False, False]
        assert [o.result for o in outcomes[:3]] == [3, 3, 3]
        broker.fetch(1, 5)
        assert all(o.fired and o.failure is None for o in outcomes)


class RoleTests:

    def test_follower_refuses_and_freezes(self, broker: Broker) -> None:
        """As follower: NOT_LEADER for acks=all waits and reports, hw frozen but served."""
        broker.topic(rf=2, min_isr=2)
        broker.append(3)
        broker.fetch(1, 2)
        pending = broker.produce_all()          # offset 3, waiting for follower 1
        assert broker.service.set_role("t", 0, "follower") == 2
        assert not broker.service.is_leader("t", 0)
        assert isinstance(pending.error, NotLeader)
        assert code_for(pending.error) == "NOT_LEADER"
        with pytest.raises(NotLeader):
            broker.fetch(1, 3)
        refused = Outcome(broker.service.wait_for_all("t", 0, 3))
        assert isinstance(refused.error, NotLeader)
        assert broker.service.hw("t", 0) == 2
        assert timers(broker) == []             # no ack timer, no lag timer
        broker.clock.advance(LAG_S * 3)
        assert broker.isr() == [0, 1]           # no lag expiry while follower

    def test_leader_again_accepts_and_bumps_epoch(self, broker: Broker) -> None:
        """Back to leader: writes are accepted and a new leader epoch starts."""
        broker.topic(rf=2)
        broker.service.set_role("t", 0, "follower")
        assert broker.service.set_role("t", 0, "leader") == -1
        status = broker.service.describe("t", 0)
        assert (status.role, status.leader_epoch) == (Role.LEADER, 1)
        assert broker.service.is_leader("t", 0)
        assert broker.produce_all().failure is None

    def test_same_role_is_a_no_op(self, broker: Broker) -> None:
        """Setting the current role answers hw and writes nothing."""
        broker.topic()
        broker.append(2)
        assert broker.service.set_role("t", 0, "leader") == 1
        assert broker.log().saved == []

    def test_invalid_role(self, broker: Broker) -> None:
        """A role other than leader or follower is BAD_REQUEST."""
        broker.topic()
        with pytest.raises(InvalidReplicaRequest):
            broker.service.set_role("t", 0, "boss")
        assert broker.service.is_leader("t", 0)

    def test_role_change_not_persisted_changes_nothing(self, broker: Broker) -> None:
        """If the role cannot be written to disk, the request fails and the role stays."""
        broker.topic()
        broker.log().fail_saves = True
        with pytest.raises(StorageError) as caught:
            broker.service.set_role("t", 0, "follower")
        assert code_for(caught.value) == "STORAGE_ERROR"
        assert broker.service.is_leader("t", 0)

    def test_roles_survive_restart(self, broker: Broker) -> None:
        """A restarted broker keeps each partition's role and leader epoch."""
        broker.topic(partitions=2, rf=1)
        broker.append(3, partition=1)
        broker.service.set_role("t", 1, "follower")
        broker.service.set_role("t", 1, "leader")
        broker.service.set_role("t", 1, "follower")
        after = broker.restart()
        assert after.service.is_leader("t", 0)
        assert not after.service.is_leader("t", 1)
        status = after.service.describe("t", 1)
        assert (status.role, status.leader_epoch, status.hw) == (Role.FOLLOWER, 1, 2)
        after.service.set_role("t", 1, "leader")
        assert after.service.describe("t", 1).leader_epoch == 2


class CheckpointTests:

    def test_checkpoint_is_lazy(self, broker: Broker) -> None:
        """hw movement is checkpointed on the interval, not on every append."""
        broker.topic(rf=2)
        broker.fetch(1, 0)                     # joins: ISR change written at once
        writes = len(broker.log().saved)
        for _ in range(50):
            last = broker.append(2)
            broker.fetch(1, last)
        assert len(broker.log().saved) == writes
        broker.clock.advance(CHECKPOINT_S)
        assert len(broker.log().saved) == writes + 1
        assert broker.log().saved[-1]["hw"] == broker.service.hw("t", 0) == 99
        broker.clock.advance(CHECKPOINT_S)
        assert len(broker.log().saved) == writes + 1   # nothing changed, nothing written

    def test_hw_moved_by_appends_is_checkpointed(self, broker: Broker) -> None:
        """RF>1 with the leader alone in the ISR: hw moved by appends reaches the
        checkpoint at the next tick."""
        broker.topic(rf=2)
        broker.append(7)
        assert broker.log().saved == []
        broker.clock.advance(CHECKPOINT_S)
        assert [doc["hw"] for doc in broker.log().saved] == [6]

    def test_rf1_hw_is_not_checkpointed(self, broker: Broker) -> None:
        """RF=1 partitions write no hw checkpoints (the recovered log is the truth)."""
        broker.topic()
        broker.append(10)
        broker.clock.advance(CHECKPOINT_S * 3)
        broker.service.close()
        assert broker.log().saved == []

    def test_checkpoint_never_above_true_hw(self, broker: Broker) -> None:
        """Every checkpoint holds an hw no higher than the partition's hw when written."""
        broker.topic(rf=3, min_isr=2)
        plog = broker.log()
        written: list[tuple[int, int]] = []
        save = plog.save_state

        def checked_save(state: dict[str, Any]) -> None:
            written.append((state["hw"], broker.service.hw("t", 0)))
            save(state)

        plog.save_state = checked_save  # type: ignore[method-assign]
        for step in range(40):
            broker.append(3, durable=step % 3 != 0)
            if step % 2:
                broker.fetch(1, plog.next_offset - 2)
            if step % 5 == 0:
                broker.fetch(2, plog.next_offset - 1)
            broker.clock.advance(1.25)
        assert len(written) >= 8
        assert all(saved <= true_hw for saved, true_hw in written)
        assert written[-1][0] == written[-1][1]

    def test_restart_does_not_expose_uncommitted(self, broker: Broker) -> None:
        """After a restart hw comes from the checkpoint, not the log's end, and the
        checkpointed ISR members get a fresh lag window before hw may move on."""
        broker.topic(rf=2)
        broker.append(5)
        broker.fetch(1, 4)
        broker.append(5)                       # 5..9 not held by follower 1
        broker.clock.advance(CHECKPOINT_S)
        assert broker.service.hw("t", 0) == 4
        after = broker.restart()
        status = after.service.describe("t", 0)
        assert (status.hw, status.isr) == (4, [0, 1])
        after.append(1)                        # traffic does not expose 5..10
        assert after.service.hw("t", 0) == 4
        after.clock.advance(LAG_S + 0.001)     # follower 1 silent since the restart
        assert after.service.describe("t", 0).isr == [0]
        assert after.service.hw("t", 0) == 10

    def test_restart_keeps_follower_progress(self, broker: Broker) -> None:
        """Recorded follower progress survives a restart and still never moves back."""
        broker.topic(rf=2)
        broker.append(8)
        broker.fetch(1, 6)
        broker.service.close()
        after = Broker(broker.store.reopen(), broker.clock)
        assert after.fetch(1, 2).acked_offset == 6

    def test_rf1_restart_uses_recovered_log(self, broker: Broker) -> None:
        """RF=1 after restart: hw is the recovered log's last offset."""
        broker.topic()
        broker.append(4)
        broker.append(3, durable=False)
        after = broker.restart(lose_unsynced=True)
        assert after.service.hw("t", 0) == 3
        broker2 = Broker()
        broker2.topic()
        broker2.append(4)
        broker2.append(3, durable=False)
        assert broker2.restart().service.hw("t", 0) == 6

    def test_failed_checkpoint_is_retried(self, broker: Broker) -> None:
        """A checkpoint that cannot be written is logged and retried at the next tick."""
        broker.topic(rf=2)
        broker.append(5)
        broker.log().fail_saves = True
        broker.fetch(1, 4)                     # ISR change: write fails, report still served
        assert broker.isr() == [0, 1]
        broker.log().fail_saves = False
        broker.clock.advance(CHECKPOINT_S)
        assert broker.log().saved[-1]["isr"] == [0, 1]

    def test_damaged_state_is_reported_at_startup(self, broker: Broker) -> None:
        """A damaged replication state file stops the start with a message naming it."""
        broker.topic()
        broker.log().state = {"role": "boss"}
        with pytest.raises(ValueError, match="t/0: replication state: bad role"):
            Broker(broker.store, broker.clock)


class LifecycleTests:

    def test_close_answers_waiters_and_stops_timers(self, broker: Broker) -> None:
        """close() answers waiting acks=all with UNAVAILABLE, stops every timer and
        writes pending checkpoints."""
        broker.topic(rf=2, min_isr=2)
        broker.append(1)
        broker.fetch(1, 0)
        outcome = broker.produce_all()
        broker.service.close()
        assert isinstance(outcome.error, Unavailable)
        assert broker.clock.getDelayedCalls() == []
        assert broker.log().saved[-1]["replica_offsets"] == {"1": 0}
        refused = Outcome(broker.service.wait_for_all("t", 0, 5))
        assert isinstance(refused.error, Unavailable)
        broker.fetch(1, 0)                     # still answered, but starts no timer
        assert broker.clock.getDelayedCalls() == []
        broker.service.close()                 # idempotent

    def test_forget_topic(self, broker: Broker) -> None:
        """A deleted topic's waiters fail, its timers stop, a new topic of the same name
        starts fresh."""
        broker.topic(rf=2, min_isr=2)
        broker.append(2)
        broker.fetch(1, 1)
        outcome = broker.produce_all()
        broker.store.delete_topic("t")
        broker.service.forget_topic("t")
        assert isinstance(outcome.error, BadRequest)
        assert timers(broker) == []
        with pytest.raises(BadRequest, match="unknown topic"):
            broker.service.hw("t", 0)
        broker.topic(rf=2)
        assert broker.service.describe("t", 0).isr == [0]
        assert broker.service.hw("t", 0) == -1
        broker.service.forget_topic("never-existed")

    def test_partitions_added(self, broker: Broker) -> None:
        """Partitions added to a tracked topic are usable at once."""
        broker.topic(partitions=1, rf=2)
        broker.service.hw("t", 0)
        broker.store.add_partitions("t", 3)
        broker.service.partitions_added("t")
        broker.append(2, partition=2)
        assert broker.fetch(1, 1, partition=2).isr == [0, 1]
