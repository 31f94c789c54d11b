"""Tests for the cluster side of replication/partition.py: replica ids other than 0,
promotion to an epoch, fencing, a follower's hw taken from its leader, truncation, and
restoring the epoch history. Pure: ``now_ms`` is an argument."""

from __future__ import annotations

import pytest

from broker.errors import InvalidReplicaRequest, NotLeader
from replication.epochs import EpochEntry, EpochLookup
from replication.partition import PartitionReplication
from replication.roles import ReplicationCheckpoint, Role

LAG = 1000


def follower(local: int = 1, rf: int = 3, min_isr: int = 2, *, end: int = 0,
             cap: bool = False) -> PartitionReplication:
    """A cluster follower replica ``local`` whose log ends at ``end``."""
    checkpoint = ReplicationCheckpoint(role=Role.FOLLOWER, isr=(local,), local_replica=local,
                                       epochs=((0, 0),) if end else ())
    return PartitionReplication.restore(
        checkpoint, replication_factor=rf, min_insync_replicas=min_isr,
        replica_lag_timeout_ms=LAG, cap_hw_at_durable=cap, next_offset=end,
        durable_offset=end, now_ms=0, local_replica=local, track_epochs=True)


class ReplicaIdTests:

    def test_followers_are_every_other_position(self) -> None:
        """Replica 1's followers, when it leads, are 0 and 2; its own id is no follower."""
        repl = follower(local=1)
        repl.promote(1, now_ms=0)
        repl.validate_replica_id(0)
        repl.validate_replica_id(2)
        with pytest.raises(InvalidReplicaRequest, match="other than 1"):
            repl.validate_replica_id(1)
        with pytest.raises(InvalidReplicaRequest):
            repl.validate_replica_id(3)

    def test_local_replica_in_range(self) -> None:
        """A replica id outside the replica list is a programming error."""
        with pytest.raises(ValueError):
            PartitionReplication(3, 2, local_replica=3)


class PromotionTests:

    def test_promotion_starts_an_epoch_at_the_log_end(self) -> None:
        """Promotion to epoch 1 records (1, log end) after the copied epoch 0."""
        repl = follower(end=50)
        repl.promote(1, now_ms=0)
        assert repl.role is Role.LEADER and repl.leader_epoch == 1
        assert [(e.epoch, e.start_offset) for e in repl.epoch_entries] == [(0, 0), (1, 50)]
        assert repl.lookup_epoch(0) == EpochLookup(0, 50)
        assert repl.last_epoch == 1

    def test_epoch_must_grow(self) -> None:
        """Promotion to an epoch not above the known one is refused."""
        repl = follower(end=5)
        repl.observe_epoch(3)
        with pytest.raises(ValueError):
            repl.promote(3, now_ms=0)

    def test_last_seen_isr_waits_for_first_fetch(self) -> None:
        """The leader's ISR as last seen stays in sync with unknown progress: hw does not
        jump to the new leader's log end until they fetch, or until they lag out."""
        repl = follower(end=50)
        repl.leader_log_changed(50, 50)
        repl.follow(39, (0, 1, 2))
        repl.promote(1, now_ms=1000)
        assert repl.isr == (0, 1, 2)
        assert repl.hw == 39
        repl.record_fetch(2, 49, now_ms=1100, allow_backwards=True)
        assert repl.hw == 39  # replica 0 (the old leader) has not fetched yet
        assert repl.expire_lagging(now_ms=1000 + LAG + 1)
        assert repl.isr == (1, 2)
        assert repl.hw == 49

    def test_unreachable_silent_member_leaves_at_once(self) -> None:
        """A member the new leader cannot reach and that has not fetched since the promotion
        (the dead old leader) leaves the ISR at once; one that fetched stays."""
        repl = follower(end=50)
        repl.leader_log_changed(50, 50)
        repl.follow(39, (0, 1, 2))
        repl.promote(1, now_ms=0)
        repl.record_fetch(2, 49, now_ms=10, allow_backwards=True)
        assert not repl.drop_silent(2, now_ms=20)
        assert repl.drop_silent(0, now_ms=20)
        assert repl.isr == (1, 2) and repl.hw == 49
        assert not repl.drop_silent(0, now_ms=30)

    def test_unknown_isr_means_alone(self) -> None:
        """A follower that never heard its leader's ISR leads alone: hw is its log end."""
        repl = follower(end=20)
        repl.leader_log_changed(20, 20)
        repl.promote(1, now_ms=0)
        assert repl.isr == (1,)
        assert repl.hw == 19

    def test_promotion_checkpoint_holds_what_promote_does(self) -> None:
        """The document written before a promotion says leader, the new epoch, and the
        history with the new entry."""
        repl = follower(end=50)
        checkpoint = repl.promotion_checkpoint(4)
        assert (checkpoint.role, checkpoint.leader_epoch) == (Role.LEADER, 4)
        assert checkpoint.epochs == ((0, 0), (4, 50))
        assert checkpoint.local_replica == 1
        document = checkpoint.to_json()
        assert document["replica"] == 1 and document["epochs"] == [[0, 0], [4, 50]]
        assert ReplicationCheckpoint.from_json(document) == checkpoint


class FencingTests:

    def leader(self) -> PartitionReplication:
        repl = follower(local=0, end=0)
        repl.promote(1, now_ms=0)
        repl.leader_log_changed(10, 10)
        return repl

    def test_fence_makes_a_follower_knowing_the_epoch(self) -> None:
        """A newer epoch turns the leader into a follower that knows it; reports then get
        NOT_LEADER and hw is frozen."""
        repl = self.leader()
        hw = repl.hw
        assert repl.fence(3)
        assert repl.role is Role.FOLLOWER and repl.leader_epoch == 3
        with pytest.raises(NotLeader):
            repl.record_fetch(1, 9, now_ms=5)
        assert not repl.leader_log_changed(20, 20)
        assert repl.hw == hw
        assert not repl.fence(4)  # already a follower: only the epoch moves
        assert repl.leader_epoch == 4

    def test_empty_epoch_leaves_history(self) -> None:
        """An epoch that wrote nothing before it was fenced is dropped from the history."""
        repl = follower(end=30)
        repl.promote(2, now_ms=0)
        assert repl.fence(3)
        assert [(e.epoch, e.start_offset) for e in repl.epoch_entries] == [(0, 0)]

    def test_leader_must_be_fenced_not_told(self) -> None:
        """observe_epoch is for followers; a leader must go through fence."""
        with pytest.raises(ValueError):
            self.leader().observe_epoch(9)


class FollowerHwTests:

    def test_hw_is_min_of_leader_hw_and_own_log(self) -> None:
        """A follower serves up to min(leader hw, its own last offset), never backwards."""
        repl = follower(end=0)
        repl.leader_log_changed(5, 5)
        assert repl.follow(9, (0, 1, 2))
        assert repl.hw == 4
        repl.leader_log_changed(12, 12)
        assert repl.follow(9)
        assert repl.hw == 9
        assert not repl.follow(7)
        assert repl.hw == 9
        assert repl.isr == (0, 1, 2) and not repl.under_replicated

    def test_fsync_cap(self) -> None:
        """Under fsync=always a follower's hw never passes its own fsynced offset."""
        repl = follower(end=0, cap=True)
        repl.leader_log_changed(10, 4)
        repl.follow(9)
        assert repl.hw == 3

    def test_truncation_clamps_hw_and_history(self) -> None:
        """Cutting the log below hw (an unclean promotion elsewhere) pulls hw back to what is
        held, and drops emptied epochs."""
        repl = follower(end=0)
        repl.adopt_epochs([EpochEntry(0, 0), EpochEntry(1, 8)])
        repl.leader_log_changed(12, 12)
        repl.follow(11)
        repl.truncated(6, 6)
        assert repl.hw == 5
        assert repl.last_epoch == 0
        assert repl.divergence_offset(EpochLookup(0, 4)) == 4

    def test_backwards_report_of_nothing(self) -> None:
        """A follower that truncated to nothing reports -1 in a new fetch session."""
        repl = follower(local=0, end=0)
        repl.promote(1, now_ms=0)
        repl.leader_log_changed(10, 10)
        repl.record_fetch(1, 9, now_ms=1, allow_backwards=True)
        outcome = repl.record_fetch(1, -1, now_ms=2, allow_backwards=True)
        assert outcome.acked_offset == -1
        with pytest.raises(InvalidReplicaRequest):
            repl.record_fetch(1, -1, now_ms=3)


class RestoreTests:

    def restore(self, checkpoint: ReplicationCheckpoint, local: int, end: int,
                first: int = 0) -> PartitionReplication:
        return PartitionReplication.restore(
            checkpoint, replication_factor=3, min_insync_replicas=2, next_offset=end,
            durable_offset=end, now_ms=0, local_replica=local, track_epochs=True,
            first_offset=first)

    def test_leader_without_history_owns_its_log(self) -> None:
        """A leader's log without history (older data) is taken as written by its epoch."""
        repl = self.restore(ReplicationCheckpoint(leader_epoch=2), 0, end=40, first=10)
        assert [(e.epoch, e.start_offset) for e in repl.epoch_entries] == [(2, 10)]

    def test_leader_history_trimmed_to_the_recovered_log(self) -> None:
        """Entries beyond what the recovered log holds go; the leader's epoch stays last."""
        checkpoint = ReplicationCheckpoint(leader_epoch=3, epochs=((0, 0), (2, 60), (3, 90)))
        repl = self.restore(checkpoint, 0, end=50)
        assert [(e.epoch, e.start_offset) for e in repl.epoch_entries] == [(0, 0), (3, 50)]

    def test_follower_history_and_leader_isr(self) -> None:
        """A follower keeps its history up to its log end and shows the leader's ISR."""
        checkpoint = ReplicationCheckpoint(role=Role.FOLLOWER, leader_epoch=3, isr=(0, 2),
                                           local_replica=2, epochs=((0, 0), (3, 40)))
        repl = self.restore(checkpoint, 2, end=40)
        assert [(e.epoch, e.start_offset) for e in repl.epoch_entries] == [(0, 0)]
        assert repl.isr == (0, 2) and repl.leader_epoch == 3

    def test_follower_without_history_stays_without(self) -> None:
        """A follower log without history is not labelled: its first session truncates it to
        where the leader's history starts."""
        repl = self.restore(ReplicationCheckpoint(role=Role.FOLLOWER, local_replica=1), 1,
                            end=30)
        assert repl.epoch_entries == ()
        assert repl.divergence_offset(EpochLookup(-1, 0)) == 0

