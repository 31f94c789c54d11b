"""Leader epochs of one partition's replication state in a multi-broker cluster: promotion and
fencing by epoch, the leader-epoch history (lookups, divergence, adoption from the leader),
a follower's ``hw`` learnt from its leader, truncation, and the checkpoints that record them.

Must not import: Twisted, the store, sockets, ``time``.
"""

from __future__ import annotations

from replication.epochs import EpochEntry, EpochHistory, EpochLookup, divergence_offset
from replication.roles import ReplicationCheckpoint, Role, check_transition


class EpochLeadership:
    """Part of ``PartitionReplication`` (``replication.partition``): epochs, promotion, fencing and following."""

    def promotion_checkpoint(self, epoch: int) -> ReplicationCheckpoint:
        """What to persist before ``promote(epoch)`` takes effect."""
        history = EpochHistory(self._history.entries)
        history.assign(epoch, self._leader_end)
        members = self._promotion_isr()
        return ReplicationCheckpoint(
            role=Role.LEADER, leader_epoch=epoch, hw=self.hw, isr=members,
            replica_offsets={}, local_replica=self._local,
            epochs=self._history_pairs(history))

    def fence_checkpoint(self, epoch: int) -> ReplicationCheckpoint:
        """What to persist before ``fence(epoch)`` takes effect."""
        history = EpochHistory(self._history.entries)
        history.truncate_from(self._leader_end)
        return ReplicationCheckpoint(
            role=Role.FOLLOWER, leader_epoch=max(epoch, self._epoch), hw=self.hw,
            isr=self.isr, replica_offsets={}, local_replica=self._local,
            epochs=self._history_pairs(history))

    def lookup_epoch(self, epoch: int) -> EpochLookup:
        """Where ``epoch`` ends in this log (KIP-279, ``EpochHistory.lookup``)."""
        return self._history.lookup(epoch, self._leader_end)

    def divergence_offset(self, answer: EpochLookup) -> int:
        """Where this log stops agreeing with a leader that answered ``answer`` for
        ``last_epoch`` (``replication.epochs.divergence_offset``)."""
        return divergence_offset(self._history, self._leader_end, answer)

    def epochs_covering(self, start: int, end: int) -> list[EpochEntry]:
        """The history entries labelling offsets ``[start, end)`` (sent with fetched data)."""
        return self._history.covering(start, end)

    def promote(self, epoch: int, now_ms: int, *, exact: bool = False) -> None:
        """Become the leader of ``epoch`` (a cluster promotion; the shell picks an epoch
        above every one it knows). The history gains ``(epoch, log end)``.

        From FOLLOWER: the leader's ISR as last seen stays the ISR, its members get a fresh
        lag window but unknown progress, so ``hw`` waits for their first fetch (or for
        them to leave the ISR); nobody else is in sync (Kafka's ``makeLeader``). Already
        leader (a restarted one whose leadership was not confirmed): only the epoch moves.
        """
        if epoch < self._epoch or (epoch == self._epoch and not (
                exact and self._role is Role.FOLLOWER and self.last_epoch < epoch)):
            raise ValueError(f"promotion to epoch {epoch} is not above epoch {self._epoch}")
        self._history.assign(epoch, self._leader_end)
        self._epoch = epoch
        if self._role is Role.FOLLOWER:
            check_transition(self._role, Role.LEADER)
            members = set(self._committed) if self._managed else set(self._promotion_isr())
            for replica, follower in self._followers.items():
                follower.last_offset = -1
                follower.leader_last_at_report = None
                follower.in_isr = replica in members
                follower.caught_up_ms = now_ms if follower.in_isr else None
            self._role = Role.LEADER
            self._leader_isr = None
        self._recompute_bounds()
        self._advance_hw()

    def drop_silent(self, replica_id: int, now_ms: int) -> bool:
        """A new leader could not reach ``replica_id``: if it is in the ISR only because the
        old leader's ISR listed it (no report since the promotion), it leaves the ISR now
        rather than after a whole lag timeout. True when the ISR changed (``hw`` may
        advance)."""
        follower = self._followers.get(replica_id)
        if self._role is not Role.LEADER or follower is None or not follower.in_isr \
                or follower.leader_last_at_report is not None:
            return False
        follower.in_isr = False
        follower.caught_up_ms = None
        self._expire(now_ms)
        self._recompute_bounds()
        self._advance_hw()
        return True   # managed: only ``desired_isr`` moved

    def fence(self, epoch: int) -> bool:
        """A leader learnt of ``epoch`` (newer than its own) or the operator demoted it:
        become a follower knowing ``epoch``. ``hw`` freezes until the new leader's first
        answer; an epoch of ours that wrote nothing leaves the history. True when the role
        changed."""
        if epoch > self._epoch:
            self._epoch = epoch
        if self._role is Role.FOLLOWER:
            return False
        check_transition(self._role, Role.FOLLOWER)
        self._role = Role.FOLLOWER
        self._leader_isr = None
        self._history.truncate_from(self._leader_end)
        return True

    def observe_epoch(self, epoch: int) -> bool:
        """A follower heard of ``epoch``; True when it is newer than any it knew. A leader
        must be fenced instead (``ValueError``)."""
        if epoch <= self._epoch:
            return False
        if self._role is Role.LEADER:
            raise ValueError(f"a leader of epoch {self._epoch} must be fenced by epoch {epoch}")
        self._epoch = epoch
        return True

    def adopt_epochs(self, entries: list[EpochEntry]) -> bool:
        """A follower is about to append records the leader labelled with ``entries``.
        ``ValueError`` when they contradict the local history. True when it changed."""
        return self._history.adopt(entries)

    def follow(self, leader_hw: int, leader_isr: tuple[int, ...] | None = None) -> bool:
        """A follower learnt its leader's ``hw`` (and ISR): its own ``hw`` becomes
        ``min(leader hw, own last offset)`` (its last fsynced one under the fsync cap),
        never moving backwards. True when ``hw`` advanced."""
        if leader_isr is not None:
            self._leader_isr = tuple(sorted(leader_isr))
        if self._role is not Role.FOLLOWER:
            return False
        end = self._durable_end if self._cap else self._leader_end
        if leader_hw + 1 < end:
            end = leader_hw + 1
        if end > self._hw_end:
            self._hw_end = end
            return True
        return False

    def truncated(self, next_offset: int, durable_offset: int) -> None:
        """The local log was cut to end at ``next_offset``: ``hw`` and the history follow
        (``hw`` only moves back when a promotion lost committed offsets)."""
        self._leader_end = next_offset
        self._durable_end = durable_offset
        if self._hw_end > next_offset:
            self._hw_end = next_offset
        self._history.truncate_from(next_offset)
        self._recompute_bounds()

    def _promotion_isr(self) -> tuple[int, ...]:
        if self._role is Role.LEADER:
            return self._isr
        return tuple(sorted(set(self.isr) | {self._local}))

    @staticmethod
    def _history_pairs(history: EpochHistory) -> tuple[tuple[int, int], ...]:
        return tuple((e.epoch, e.start_offset) for e in history.entries)
