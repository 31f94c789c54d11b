"""The leader side of followers' fetches: progress reports, pulls, long polls, epoch queries.

Owns: REPLICA_FETCH (a follower reports the offset it holds; single-broker replication),
REPLICA_PULL (a real follower's fetch: its progress is recorded, so the ISR and ``hw`` move,
and the records from its offset on are returned as their exact bytes with the epochs
labelling them), the followers' long polls waiting for records or a newer ``hw``
(``PullWaiters``: a Deferred and a timer each), and REPLICA_EPOCH (OffsetsForLeaderEpoch:
where an asked epoch ends in this log; any replica answers, leader or not). A newer epoch in
a pull or an epoch query fences this broker (``ports.Fencing``).

Must not import: the global reactor (the clock is injected), sockets, transports, the
store's modules, the other parts of this package: it imports only the shared ``partitions``,
``ports`` and ``results`` and sees the parts through ``ports``.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from broker.errors import BadRequest, NotLeader, Unavailable
from broker.services.replication.partitions import Lifecycle, Slot, not_leader, now_ms
from broker.services.replication.ports import Fencing, ProgressTracking, SlotLookup
from broker.services.replication.results import PullResult, ReplicaFetchResult
from replication.cluster import ClusterConfig
from replication.epochs import NO_EPOCH
from replication.roles import Role
from replication.wire import EpochReply

__all__ = ["PULL_MAX_MESSAGES", "PullWaiter", "PullWaiters", "FollowerFetches"]

PULL_MAX_MESSAGES = 100_000
"""Most records one REPLICA_PULL answer carries (``max_bytes`` usually bounds it first)."""


class PullWaiter:
    """One follower's long poll waiting past ``offset``."""

    __slots__ = ("offset", "replica", "deferred", "timer")

    def __init__(self, offset: int, replica: int) -> None:
        self.offset = offset
        self.replica = replica
        self.deferred: Deferred[None] = Deferred()
        self.timer: IDelayedCall | None = None


class PullWaiters:
    """Every partition's waiting follower long polls (kept on its ``Slot``)."""

    def __init__(self, clock: IReactorTime, lifecycle: Lifecycle) -> None:
        self._clock = clock
        self._lifecycle = lifecycle

    def wait(self, slot: Slot, offset: int, timeout_ms: int,
             replica_id: int = -1) -> Deferred[None]:
        """Fires once the log reaches past ``offset``, ``hw`` passes the one last sent to
        ``replica_id``, the partition changes role or epoch, the broker closes, or after
        ``timeout_ms`` (a follower's long poll)."""
        waiter = PullWaiter(offset, replica_id)
        lifecycle = self._lifecycle
        if lifecycle.closed or lifecycle.no_waiting or slot.log.next_offset > offset:
            waiter.deferred.callback(None)
            return waiter.deferred

        def expire() -> None:
            waiter.timer = None
            if waiter in slot.pulls:
                slot.pulls.remove(waiter)
            if not waiter.deferred.called:
                waiter.deferred.callback(None)

        waiter.timer = self._clock.callLater(timeout_ms / 1000.0, expire)
        slot.pulls.append(waiter)
        return waiter.deferred

    def wake(self, slot: Slot, below: int | None = None, *, hw: int | None = None) -> None:
        """Answer the long polls waiting for an offset below ``below``, or (with ``hw``)
        those whose follower was last sent an older ``hw``; all when both are None."""
        if not slot.pulls:
            return
        if hw is not None:
            sent = slot.hw_sent
            ready = [w for w in slot.pulls if sent.get(w.replica, -2) < hw]
        else:
            ready = [w for w in slot.pulls if below is None or w.offset < below]
        if not ready:
            return
        slot.pulls = [w for w in slot.pulls if w not in ready]
        for waiter in ready:
            if waiter.timer is not None and waiter.timer.active():
                waiter.timer.cancel()
            waiter.timer = None
            if not waiter.deferred.called:
                waiter.deferred.callback(None)


class FollowerFetches:
    """What a leader (or, for epoch queries, any replica) answers to other replicas."""

    def __init__(self, clock: IReactorTime, lifecycle: Lifecycle,
                 cluster: ClusterConfig | None, *, slots: SlotLookup,
                 progress: ProgressTracking, fencing: Fencing) -> None:
        self._clock = clock
        self._lifecycle = lifecycle
        self._cluster = cluster
        self._slots = slots
        self._progress = progress
        self._fencing = fencing

    def replica_fetch(self, topic: str, partition: int, replica_id: int, offset: int, *,
                      allow_backwards: bool = False) -> ReplicaFetchResult:
        """Follower ``replica_id`` holds every offset up to ``offset`` (capped at the
        leader's last offset; never backwards unless ``allow_backwards``).

        BadRequest for a replica id outside ``1 .. RF-1``; NotLeader in follower role.
        """
        slot = self._slots.get(topic, partition)
        repl = slot.repl
        repl.validate_replica_id(replica_id)
        if offset < 0:
            raise BadRequest(f"offset must not be negative, not {offset}")
        if repl.role is not Role.LEADER:
            raise not_leader(slot, self._cluster)
        self._progress.refresh(slot)
        outcome = repl.record_fetch(replica_id, offset, now_ms(self._clock),
                                    allow_backwards=allow_backwards)
        self._progress.after_change(slot, outcome.isr_changed, outcome.hw_advanced)
        return ReplicaFetchResult(replica_id, outcome.acked_offset, repl.hw, list(repl.isr),
                                  repl.under_replicated)

    def pull(self, topic: str, partition: int, replica_id: int, offset: int, epoch: int, *,
             max_bytes: int, record: bool = True) -> PullResult:
        """A follower's fetch (REPLICA_PULL): it holds every offset before ``offset`` and
        knows ``epoch``.

        A newer epoch fences this broker (NOT_LEADER). A follower role answers NOT_LEADER.
        An older epoch gets an answer without records (its ``epoch`` tells the follower to
        start a new fetch session). Otherwise the progress ``offset - 1`` is recorded (moving
        back is allowed: a new session after a restart or truncation), and the records from
        ``offset`` on are returned as their exact bytes, at most ``max_bytes`` of values
        (at least one record when one exists), with the epochs labelling them.
        """
        if self._lifecycle.closed:
            raise Unavailable("broker shutting down")
        slot = self._slots.get(topic, partition)
        if self._cluster is None:
            raise BadRequest("REPLICA_PULL needs a cluster section in the broker config")
        repl = slot.repl
        self._check_replica(slot, replica_id)
        if epoch > repl.leader_epoch:
            known, led = repl.leader_epoch, repl.role is Role.LEADER
            self._fencing.observe(slot, epoch)
            raise NotLeader(f"partition {partition} of {topic}: epoch {epoch} is newer than "
                            f"this broker's epoch {known}"
                            + ("; fenced, now a follower" if led else ""))
        if repl.role is not Role.LEADER:
            raise not_leader(slot, self._cluster)
        plog: Any = slot.log
        if epoch < repl.leader_epoch:
            return self._pull_result(slot, replica_id, offset, 0)
        self._progress.refresh(slot)
        if record and offset <= plog.next_offset:
            outcome = repl.record_fetch(replica_id, offset - 1, now_ms(self._clock),
                                        allow_backwards=True)
            self._progress.after_change(slot, outcome.isr_changed, outcome.hw_advanced)
        return self._pull_result(slot, replica_id, offset, max_bytes)

    def epoch_query(self, topic: str, partition: int, replica_id: int, epoch: int,
                    last_epoch: int | None) -> EpochReply:
        """REPLICA_EPOCH from replica ``replica_id``, which knows ``epoch`` (a newer one
        fences this broker, or a follower remembers it) and whose log's latest epoch is
        ``last_epoch`` (None: no history). Any replica answers, leader or not."""
        slot = self._slots.get(topic, partition)
        if self._cluster is None:
            raise BadRequest("REPLICA_EPOCH needs a cluster section in the broker config")
        self._check_replica(slot, replica_id)
        self._fencing.observe(slot, epoch)
        repl = slot.repl
        lookup = repl.lookup_epoch(NO_EPOCH if last_epoch is None else last_epoch)
        return EpochReply(repl.role, repl.leader_epoch,
                          repl.role is Role.LEADER and slot.confirmed, lookup.epoch,
                          lookup.end_offset, slot.log.next_offset, repl.hw)

    def _pull_result(self, slot: Slot, replica_id: int, offset: int,
                     max_bytes: int) -> PullResult:
        repl = slot.repl
        plog: Any = slot.log
        start = plog.first_offset
        count = 0
        data = b""
        entries: list[tuple[int, int]] = []
        if max_bytes > 0 and start <= offset < plog.next_offset:
            # read_raw: checked as read is (a record whose checksum fails is never sent),
            # but no Record tuple is built; the array form spares an int per record end
            result = plog.read_raw(offset, PULL_MAX_MESSAGES, max_bytes, ends_array=True)
            count = result.count
            data = result.raw
            if count:
                # next_offset, not offset + count: a compacted log's read skips gaps
                entries = [(e.epoch, e.start_offset)
                           for e in repl.epochs_covering(offset, result.next_offset)]
        hw = repl.hw
        news = slot.hw_sent.get(replica_id, -2) < hw
        slot.hw_sent[replica_id] = hw
        return PullResult(repl.leader_epoch, hw, plog.next_offset, start, list(repl.isr),
                          entries, count, data, news)

    def _check_replica(self, slot: Slot, replica_id: int) -> None:
        if not slot.is_replica:
            raise NotLeader(not_leader(slot, self._cluster).message)
        repl = slot.repl
        if not 0 <= replica_id < repl.replication_factor or replica_id == repl.local_replica:
            raise BadRequest(f"replica_id {replica_id} is not another replica of "
                             f"{slot.topic}/{slot.partition}; expected 0 to "
                             f"{repl.replication_factor - 1} other than {repl.local_replica}")
