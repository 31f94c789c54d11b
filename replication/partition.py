"""Replication state of one partition on its leader: follower progress, ISR, high watermark.

Owns: the pure rules of the spec's "Replication" section, Kafka's model
(``Partition.scala`` ``maybeIncrementLeaderHW``, ``Replica.updateFetchState``):

- ``high_watermark`` and ``acks_all_offset``, pure functions over plain mappings;
- ``PartitionReplication``, the per-partition state machine the shell drives: role and
  leader epoch, replication factor and min ISR, the leader's last and durable offsets,
  each follower's recorded progress and last caught-up time, the ISR and ``hw``; in a
  multi-broker cluster also this broker's replica id, the leader-epoch history of the log
  (``replication.epochs``), promotion and fencing by epoch, and a follower's ``hw``
  learnt from its leader.

Offsets here are *last* offsets (inclusive, ``-1`` when nothing is held), as on the wire;
only the hot path keeps the leader's log end offsets (exclusive) so that it does no
arithmetic. Time is a ``now_ms`` argument (milliseconds on a monotonic clock).

The managed ISR (``replication.partition_isr``) and the epoch rules of a cluster
(``replication.partition_epochs``) are their own modules, parts of ``PartitionReplication``.

Must not import: Twisted, the store, sockets, ``time``. No I/O, no timers: the shell
(``broker/services/replication/``) reads ``next_expiry_ms()`` and schedules the timer,
and persists ``checkpoint()``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from replication.epochs import EpochEntry, EpochHistory
from replication.errors import InvalidReplicaRequest, NotLeader
from replication.partition_epochs import EpochLeadership
from replication.partition_isr import ManagedIsr
from replication.roles import ReplicationCheckpoint, Role, check_transition

__all__ = [
    "LEADER_REPLICA",
    "high_watermark",
    "acks_all_offset",
    "FetchOutcome",
    "PartitionReplication",
]

LEADER_REPLICA = 0
"""On a single broker replica 0 is the leader; 1 .. RF-1 are the followers. In a cluster,
replica ids are positions in the partition's replica list and this broker's own id is the
``local_replica`` of its ``PartitionReplication``."""

_NO_LIMIT = 1 << 62
"""An end offset no log reaches: "no follower limits this bound"."""


def high_watermark(last_offset_by_replica: Mapping[int, int], isr: Collection[int], *,
                   current: int = -1, durable_last_offset: int | None = None,
                   leader: int = LEADER_REPLICA) -> int:
    """The high watermark after an ISR or progress change (inclusive; -1: nothing committed).

    Kafka, ``Partition.maybeIncrementLeaderHW``: "The HW is determined by the smallest log
    end offset among all replicas that are in sync or are considered caught-up." Here the
    ISR *is* the set of caught-up replicas (spec), and offsets are last offsets, so::

        hw = max(current, min(last_offset_by_replica[r] for r in isr | {leader}))

    capped at ``durable_last_offset`` when given (``fsync=always``: ``hw`` never passes the
    leader's last fsynced offset). ``current`` is the high watermark so far: ``hw`` never
    moves backwards. A replica missing from the mapping holds nothing (-1).

    >>> high_watermark({0: 9, 1: 7, 2: 3}, {0, 1})
    7
    >>> high_watermark({0: 9, 1: 7, 2: 3}, {0, 1}, durable_last_offset=5)
    5
    >>> high_watermark({0: 9, 1: 7, 2: 3}, {0, 1, 2}, current=6)
    6
    """
    candidate = last_offset_by_replica.get(leader, -1)
    for replica in isr:
        held = last_offset_by_replica.get(replica, -1)
        if held < candidate:
            candidate = held
    if durable_last_offset is not None and durable_last_offset < candidate:
        candidate = durable_last_offset
    return candidate if candidate > current else current


def acks_all_offset(last_offset_by_replica: Mapping[int, int], isr: Collection[int],
                    min_insync_replicas: int, hw: int, *, leader: int = LEADER_REPLICA) -> int:
    """The highest offset an ``acks=all`` produce may be answered for (-1: none).

    Spec: answered once ``hw >= offset`` with at least ``min_insync_replicas`` replicas in
    sync. An offset counts as held by ``min_insync_replicas`` in-sync replicas: the leader
    (it holds everything up to ``hw``) and ``min_insync_replicas - 1`` ISR followers whose
    last offset reaches it. While every ISR member holds ``hw`` (the normal case, since
    ``hw`` is their minimum) this is exactly ``hw`` when ``|ISR| >= min_insync_replicas``
    and -1 otherwise; it is lower only right after a follower entered the ISR by keeping
    pace while still below ``hw``, until that follower's next report covers the offset.

    >>> acks_all_offset({0: 9, 1: 9, 2: 4}, {0, 1, 2}, 2, 4)
    4
    >>> acks_all_offset({0: 9}, {0}, 2, 9)
    -1
    >>> acks_all_offset({0: 9, 1: 5}, {0, 1}, 2, 7)
    5
    """
    members = set(isr)
    members.add(leader)
    if len(members) < min_insync_replicas:
        return -1
    needed = min_insync_replicas - 1
    if needed <= 0:
        return hw
    followers = sorted((last_offset_by_replica.get(r, -1) for r in members if r != leader),
                       reverse=True)
    return min(hw, followers[needed - 1])


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    """What one follower report changed."""

    acked_offset: int
    """The follower's recorded progress after the report (REPLICA_FETCH ``acked_offset``)."""
    isr_changed: bool
    """The ISR changed (a follower entered, or lagging ones left): persist it now."""
    hw_advanced: bool
    """``hw`` moved forward: waiting ``acks=all`` requests and long polls may proceed."""


class _Follower:
    """Progress of one follower replica as seen by the leader."""

    __slots__ = ("last_offset", "caught_up_ms", "leader_last_at_report", "in_isr")

    def __init__(self) -> None:
        self.last_offset = -1
        self.caught_up_ms: int | None = None
        self.leader_last_at_report: int | None = None
        self.in_isr = False


class PartitionReplication(ManagedIsr, EpochLeadership):
    """One partition's replication state on this broker (replica ``local_replica``, 0 on a
    single broker).

    ISR (spec, Kafka's rule): the leader always; a follower while its last caught-up time
    is within ``replica_lag_timeout_ms`` (``now - caught_up <= lag``). A report makes the
    follower caught up at ``now`` when its recorded progress reaches the leader's current
    last offset, or the leader's last offset as of that follower's previous report.
    Followers start outside the ISR.

    ``hw`` follows ``high_watermark`` over the ISR, capped at the leader's durable last
    offset when ``cap_hw_at_durable`` (``fsync=always``). In FOLLOWER role ``hw`` and the
    ISR are frozen; reports raise ``NotLeader``.

    With ``track_epochs`` (a multi-broker cluster) the log's leader-epoch history is kept,
    a FOLLOWER's ``hw`` follows its leader's (``follow``: ``min(leader hw, own last
    offset)``) and its ``isr`` is the leader's as last seen; ``promote`` and ``fence``
    replace ``change_role`` (a promotion takes an epoch chosen by the shell and restarts
    every follower's progress from unknown).
    """

    __slots__ = (
        "_rf", "_min_isr", "_lag_ms", "_cap", "_role", "_epoch", "_followers", "_isr",
        "_leader_end", "_durable_end", "_hw_end", "_floor_end", "_ack_cap_end",
        "_local", "_track", "_history", "_leader_isr", "_managed", "_committed", "_pending",
    )

    def __init__(self, replication_factor: int, min_insync_replicas: int, *,
                 replica_lag_timeout_ms: int = 10000, cap_hw_at_durable: bool = True,
                 local_replica: int = LEADER_REPLICA, track_epochs: bool = False) -> None:
        if replication_factor < 1:
            raise ValueError(f"replication_factor must be at least 1, not {replication_factor}")
        if min_insync_replicas < 1:
            raise ValueError(f"min_insync_replicas must be at least 1, not {min_insync_replicas}")
        if replica_lag_timeout_ms < 0:
            raise ValueError("replica_lag_timeout_ms must not be negative")
        if not 0 <= local_replica < replication_factor:
            raise ValueError(f"local_replica must be between 0 and {replication_factor - 1}, "
                             f"not {local_replica}")
        self._rf = replication_factor
        self._min_isr = min_insync_replicas
        self._lag_ms = replica_lag_timeout_ms
        self._cap = cap_hw_at_durable
        self._role = Role.LEADER
        self._epoch = 0
        self._local = local_replica
        self._track = track_epochs
        self._history = EpochHistory()
        self._leader_isr: tuple[int, ...] | None = None
        self._followers = {r: _Follower() for r in range(replication_factor)
                           if r != local_replica}
        self._isr: tuple[int, ...] = (local_replica,)
        # A managed ISR (the control plane on etcd, KIP-497): the lag rule only says which
        # followers *should* be in sync (``desired_isr``); the committed ISR and a pending
        # expansion, set by the shell from etcd, are what ``hw`` and acks=all wait for.
        self._managed = False
        self._committed: frozenset[int] = frozenset()
        self._pending: frozenset[int] | None = None
        # Exclusive ends (offset + 1) of: the leader's log, its fsynced prefix, hw, the
        # lowest ISR follower, and the (min_isr - 1)-th highest ISR follower.
        self._leader_end = 0
        self._durable_end = 0
        self._hw_end = 0
        self._floor_end = _NO_LIMIT
        self._ack_cap_end = _NO_LIMIT
        self._recompute_bounds()

    @classmethod
    def restore(cls, checkpoint: ReplicationCheckpoint, *, replication_factor: int,
                min_insync_replicas: int, replica_lag_timeout_ms: int = 10000,
                cap_hw_at_durable: bool = True, next_offset: int, durable_offset: int,
                now_ms: int, local_replica: int = LEADER_REPLICA,
                track_epochs: bool = False, first_offset: int = 0) -> PartitionReplication:
        """The state after a restart, from the persisted checkpoint and the recovered log.

        RF=1: ``hw`` is the recovered log's last offset (its durable one with the fsync
        cap: the store reports a freshly opened log as durable). RF>1: ``hw`` is the checkpoint
        (never above the recovered log's last offset), and the checkpointed ISR members
        come back in sync with a fresh lag window from ``now_ms`` and their checkpointed
        progress, so that a restart does not expose messages they did not hold: the
        checkpoint only protects ``hw`` if the ISR it was computed over protects it too.

        With ``track_epochs``: the epoch history loses the entries the recovered log no
        longer reaches; a leader's history ends with its own epoch (a log without history
        is taken as written by that epoch, from ``first_offset``); a follower's ``isr`` is
        the checkpointed leader ISR. A follower log without history stays without: its
        first fetch session truncates it to where the leader's history starts.
        """
        state = cls(replication_factor, min_insync_replicas,
                    replica_lag_timeout_ms=replica_lag_timeout_ms,
                    cap_hw_at_durable=cap_hw_at_durable, local_replica=local_replica,
                    track_epochs=track_epochs)
        state._role = checkpoint.role
        state._epoch = checkpoint.leader_epoch
        state._leader_end = next_offset
        state._durable_end = durable_offset
        leader_last = next_offset - 1
        if replication_factor == 1:
            state._hw_end = min(next_offset, durable_offset) if cap_hw_at_durable else next_offset
        else:
            state._hw_end = min(checkpoint.hw, leader_last) + 1
        for replica, offset in checkpoint.replica_offsets.items():
            follower = state._followers.get(replica)
            if follower is not None:
                follower.last_offset = min(offset, leader_last)
        for replica in checkpoint.isr:
            follower = state._followers.get(replica)
            if follower is not None:
                follower.in_isr = True
                follower.caught_up_ms = now_ms
        if track_epochs:
            history = EpochHistory(checkpoint.epochs)
            if state._role is Role.LEADER:
                history.truncate_from(next_offset + 1)
                if not len(history) and next_offset > first_offset:
                    history.assign(checkpoint.leader_epoch, first_offset)
                if history.latest_epoch < checkpoint.leader_epoch:
                    history.assign(checkpoint.leader_epoch, next_offset)
            else:
                history.truncate_from(next_offset)
                state._leader_isr = tuple(sorted(checkpoint.isr))
            state._history = history
        state._recompute_bounds()
        if state._role is Role.LEADER:
            state._advance_hw()
        return state

    # ------------------------------------------------------------------ read-only view

    @property
    def role(self) -> Role:
        return self._role

    @property
    def is_leader(self) -> bool:
        return self._role is Role.LEADER

    @property
    def leader_epoch(self) -> int:
        return self._epoch

    @property
    def replication_factor(self) -> int:
        return self._rf

    @property
    def local_replica(self) -> int:
        """This broker's replica id (0 on a single broker)."""
        return self._local

    @property
    def last_epoch(self) -> int:
        """The newest epoch in the log's history: the epoch of the last record (a leader's
        own epoch); -1 without history."""
        return self._history.latest_epoch

    @property
    def epoch_entries(self) -> tuple[EpochEntry, ...]:
        """The leader-epoch history, oldest first (empty unless ``track_epochs``)."""
        return self._history.entries

    @property
    def min_insync_replicas(self) -> int:
        return self._min_isr

    @property
    def replica_lag_timeout_ms(self) -> int:
        return self._lag_ms

    @property
    def hw(self) -> int:
        """Offset of the last committed message, inclusive; -1 while nothing is committed."""
        return self._hw_end - 1

    @property
    def isr(self) -> tuple[int, ...]:
        """In-sync replica ids, sorted (on a single broker the leader, 0, first). A cluster
        follower reports its leader's ISR as last seen."""
        if self._leader_isr is not None and self._role is Role.FOLLOWER:
            return self._leader_isr
        return self._isr

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < self._rf

    @property
    def leader_last_offset(self) -> int:
        return self._leader_end - 1

    @property
    def leader_durable_last_offset(self) -> int:
        return self._durable_end - 1

    @property
    def ack_offset(self) -> int:
        """Highest offset an ``acks=all`` produce may be answered for now (``acks_all_offset``)."""
        if self._role is not Role.LEADER:
            return -1
        end = self._hw_end if self._hw_end < self._ack_cap_end else self._ack_cap_end
        return end - 1

    def follower_offset(self, replica_id: int) -> int:
        """Recorded progress of a follower: the last offset it is known to hold (-1: none)."""
        return self._follower(replica_id).last_offset

    def follower_caught_up_ms(self, replica_id: int) -> int | None:
        """When the follower was last caught up (None: never, or not since it left the ISR)."""
        return self._follower(replica_id).caught_up_ms

    def checkpoint(self, role: Role | None = None) -> ReplicationCheckpoint:
        """What to persist now; with ``role``, what to persist once moved to that role."""
        target = self._role if role is None else role
        epoch = self._epoch + 1 if (target is Role.LEADER and self._role is Role.FOLLOWER) \
            else self._epoch
        return ReplicationCheckpoint(
            role=target,
            leader_epoch=epoch,
            hw=self.hw,
            isr=self.isr,
            replica_offsets={r: f.last_offset for r, f in self._followers.items()
                             if f.last_offset >= 0},
            local_replica=self._local,
            epochs=self._history_pairs(self._history),
        )

    # ------------------------------------------------------------------ operations

    def leader_log_changed(self, next_offset: int, durable_offset: int) -> bool:
        """The local log grew or an fsync covered more of it. True when ``hw`` advanced.

        Hot path (once per appended batch per partition): no allocation, O(1) for any
        replication factor. Arguments are the store's exclusive ends (``next_offset``,
        ``durable_offset``).
        """
        self._leader_end = next_offset
        self._durable_end = durable_offset
        if self._role is not Role.LEADER:
            return False
        end = durable_offset if self._cap else next_offset
        if end > self._floor_end:
            end = self._floor_end
        if end > self._hw_end:
            self._hw_end = end
            return True
        return False

    def validate_replica_id(self, replica_id: int) -> None:
        """BAD_REQUEST unless ``replica_id`` names a follower (``1 .. RF-1`` on a single
        broker; any replica id but this broker's own in a cluster)."""
        if replica_id not in self._followers:
            if self._local != LEADER_REPLICA:
                raise InvalidReplicaRequest(f"replica_id {replica_id} is not a follower; expected 0 to "
                                            f"{self._rf - 1} other than {self._local} (this broker)")
            if self._rf == 1:
                raise InvalidReplicaRequest(f"replica_id {replica_id} is not a follower: replication "
                                            "factor is 1, so the partition has no followers")
            raise InvalidReplicaRequest(f"replica_id {replica_id} is not a follower; expected 1 to "
                                        f"{self._rf - 1} (replication factor {self._rf}, 0 is the leader)")

    def record_fetch(self, replica_id: int, offset: int, now_ms: int, *,
                     allow_backwards: bool = False) -> FetchOutcome:
        """Follower ``replica_id`` reports that it holds every offset up to ``offset``.

        The report is capped at the leader's last offset; recorded progress never moves
        backwards unless ``allow_backwards`` (a real follower starting a new fetch session
        after a restart or a truncation; it may then report -1, "holds nothing"). Lagging
        followers are expired first, so the outcome reflects the ISR at ``now_ms``.
        """
        self.validate_replica_id(replica_id)
        if offset < (-1 if allow_backwards else 0):
            raise InvalidReplicaRequest(f"offset must not be negative, not {offset}")
        if self._role is not Role.LEADER:
            raise NotLeader("partition is in follower role on this broker")
        isr_changed = self._expire(now_ms)
        follower = self._followers[replica_id]
        leader_last = self._leader_end - 1
        progress = offset if offset < leader_last else leader_last
        if not allow_backwards and progress < follower.last_offset:
            progress = follower.last_offset
        follower.last_offset = progress
        previous = follower.leader_last_at_report
        if progress >= leader_last or (previous is not None and progress >= previous):
            if follower.caught_up_ms is None or now_ms > follower.caught_up_ms:
                follower.caught_up_ms = now_ms
            if not follower.in_isr:
                follower.in_isr = True
                isr_changed = True
        follower.leader_last_at_report = leader_last
        self._recompute_bounds()
        return FetchOutcome(progress, isr_changed, self._advance_hw())

    def expire_lagging(self, now_ms: int) -> bool:
        """Drop followers not caught up within the lag timeout. True when the ISR changed.

        ``hw`` may advance as a result (fewer members to wait for).
        """
        if self._role is not Role.LEADER or not self._expire(now_ms):
            return False
        self._recompute_bounds()
        self._advance_hw()
        return True

    def next_expiry_ms(self) -> int | None:
        """The first ``now_ms`` at which an ISR follower will be lagging (None: none will)."""
        if self._role is not Role.LEADER:
            return None
        earliest: int | None = None
        for follower in self._followers.values():
            caught_up = follower.caught_up_ms
            if follower.in_isr and caught_up is not None:
                at = caught_up + self._lag_ms + 1
                if earliest is None or at < earliest:
                    earliest = at
        return earliest

    def change_role(self, role: Role, now_ms: int) -> bool:
        """Move to ``role``; False (and nothing changes) when already in it.

        FOLLOWER freezes ``hw`` and the ISR. LEADER starts a new leader epoch and gives the
        frozen ISR members a fresh lag window from ``now_ms`` (Kafka's ``makeLeader`` resets
        the followers that are in the ISR as caught up now); ``hw`` may then advance.
        """
        if role is self._role:
            return False
        check_transition(self._role, role)
        if role is Role.LEADER:
            self._epoch += 1
            self._role = Role.LEADER
            for follower in self._followers.values():
                follower.leader_last_at_report = None
                if follower.in_isr:
                    follower.caught_up_ms = now_ms
            self._recompute_bounds()
            self._advance_hw()
        else:
            self._role = Role.FOLLOWER
        return True

    # ------------------------------------------------------------------ internals

    def _follower(self, replica_id: int) -> _Follower:
        self.validate_replica_id(replica_id)
        return self._followers[replica_id]

    def _expire(self, now_ms: int) -> bool:
        changed = False
        lag = self._lag_ms
        for follower in self._followers.values():
            caught_up = follower.caught_up_ms
            if follower.in_isr and (caught_up is None or now_ms - caught_up > lag):
                follower.in_isr = False
                follower.caught_up_ms = None
                changed = True
        return changed

    def _recompute_bounds(self) -> None:
        if self._managed:
            self._recompute_managed_bounds()
            return
        members = [r for r, f in self._followers.items() if f.in_isr]
        self._isr = (self._local, *members) if self._local == LEADER_REPLICA \
            else tuple(sorted((self._local, *members)))
        ends = sorted((self._followers[r].last_offset + 1 for r in members), reverse=True)
        self._floor_end = ends[-1] if ends else _NO_LIMIT
        needed = self._min_isr - 1
        if needed <= 0:
            self._ack_cap_end = _NO_LIMIT
        else:
            self._ack_cap_end = ends[needed - 1] if len(ends) >= needed else 0

    def _recompute_managed_bounds(self) -> None:
        committed = self._committed
        maximal = committed if self._pending is None else committed | self._pending
        self._isr = tuple(sorted(committed | {self._local}))
        followers = self._followers
        floor = [followers[r].last_offset + 1 for r in maximal]
        self._floor_end = min(floor) if floor else _NO_LIMIT
        ends = sorted((followers[r].last_offset + 1 for r in committed), reverse=True)
        needed = self._min_isr - 1
        if needed <= 0:
            self._ack_cap_end = _NO_LIMIT
        else:
            self._ack_cap_end = ends[needed - 1] if len(ends) >= needed else 0

    def _advance_hw(self) -> bool:
        end = self._durable_end if self._cap else self._leader_end
        if end > self._floor_end:
            end = self._floor_end
        if end > self._hw_end:
            self._hw_end = end
            return True
        return False
