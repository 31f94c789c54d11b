"""Tests for replication/partition.py: the pure hw/ISR rules, driven with a plain ``now_ms``."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.errors import InvalidReplicaRequest, NotLeader
from replication.partition import PartitionReplication, acks_all_offset, high_watermark
from replication.roles import ReplicationCheckpoint, Role

LAG = 10_000


def leader(rf: int = 3, min_isr: int = 1, *, cap: bool = True) -> PartitionReplication:
    return PartitionReplication(rf, min_isr, replica_lag_timeout_ms=LAG, cap_hw_at_durable=cap)


def grow(state: PartitionReplication, last_offset: int, durable_last: int | None = None) -> bool:
    """The leader's log now ends at ``last_offset`` (durable up to ``durable_last``)."""
    durable = last_offset if durable_last is None else durable_last
    return state.leader_log_changed(last_offset + 1, durable + 1)


class HighWatermarkFunctionTests:

    @pytest.mark.parametrize("offsets, isr, kwargs, expected", [
        ({0: 9}, {0}, {}, 9),                                   # leader alone
        ({0: 9, 1: 7, 2: 3}, {0, 1}, {}, 7),                    # min over ISR only
        ({0: 9, 1: 7, 2: 3}, {0, 1, 2}, {}, 3),
        ({0: 9, 1: 7, 2: 3}, {1, 2}, {}, 3),                    # leader counted even if absent
        ({0: 2, 1: 7}, {0, 1}, {}, 2),                          # leader can be the minimum
        ({0: 9, 1: 7}, {0, 1}, {"durable_last_offset": 5}, 5),  # fsync=always cap
        ({0: 9, 1: 7}, {0, 1}, {"durable_last_offset": 8}, 7),
        ({0: 9, 1: 7}, {0, 1}, {"current": 8}, 8),              # never backwards
        ({0: -1}, {0}, {}, -1),                                 # nothing committed
        ({0: 9}, {0, 1}, {}, -1),                               # ISR follower holding nothing
    ])
    def test_table(self, offsets: dict[int, int], isr: set[int], kwargs: dict[str, int],
                   expected: int) -> None:
        """hw is the smallest last offset among ISR members, capped and never backwards."""
        assert high_watermark(offsets, isr, **kwargs) == expected


class AcksAllOffsetTests:

    @pytest.mark.parametrize("offsets, isr, min_isr, hw, expected", [
        ({0: 9}, {0}, 1, 9, 9),                      # RF=1: as soon as committed
        ({0: 9}, {0}, 2, 9, -1),                     # ISR smaller than min ISR: nothing
        ({0: 9, 1: 9, 2: 4}, {0, 1, 2}, 2, 4, 4),    # everything up to hw
        ({0: 9, 1: 9, 2: 4}, {0, 1, 2}, 3, 4, 4),
        ({0: 9, 1: 9}, {0, 1}, 3, 9, -1),
        ({0: 9, 1: 5}, {0, 1}, 2, 7, 5),             # member below hw: only what it holds
        ({0: 9, 1: 5, 2: 8}, {0, 1, 2}, 2, 7, 7),    # another member covers up to hw
    ])
    def test_table(self, offsets: dict[int, int], isr: set[int], min_isr: int, hw: int,
                   expected: int) -> None:
        """acks=all may answer offsets <= hw held by at least min ISR in-sync replicas."""
        assert acks_all_offset(offsets, isr, min_isr, hw) == expected


class PartitionReplicationTests:

    def test_new_partition(self) -> None:
        """A new partition leads, epoch 0, nothing committed, followers outside the ISR."""
        state = leader(3)
        assert (state.role, state.leader_epoch, state.hw, state.isr) == (Role.LEADER, 0, -1, (0,))
        assert state.under_replicated
        assert state.follower_caught_up_ms(1) is None
        assert state.next_expiry_ms() is None

    def test_rf1_hw_follows_the_durable_log(self) -> None:
        """RF=1, fsync=always: hw is the leader's last fsynced offset, and only moves forward."""
        state = leader(1)
        assert not state.under_replicated
        assert grow(state, 4, durable_last=-1) is False
        assert state.hw == -1
        assert grow(state, 4) is True
        assert state.hw == 4 and state.ack_offset == 4
        assert grow(state, 4) is False

    def test_rf1_without_fsync_cap(self) -> None:
        """With fsync never/interval hw follows appends, not fsyncs."""
        state = leader(1, cap=False)
        assert grow(state, 9, durable_last=-1) is True
        assert state.hw == 9

    def test_hot_path_allocates_nothing(self) -> None:
        """RF=1 hw tracking on append keeps no memory: 2000 batches leave the allocated
        block count unchanged while hw follows."""
        state = leader(1)
        ends = [(n, n) for n in range(1000, 3000)]
        grow(state, 0)
        before = sys.getallocatedblocks()
        for next_offset, durable in ends:
            state.leader_log_changed(next_offset, durable)
        assert sys.getallocatedblocks() - before <= 2
        assert state.hw == 2999 - 1

    def test_report_reaching_last_offset_joins_isr(self) -> None:
        """A report reaching the leader's last offset puts the follower in the ISR."""
        state = leader(3)
        grow(state, 4)
        outcome = state.record_fetch(1, 4, now_ms=100)
        assert (outcome.acked_offset, outcome.isr_changed) == (4, True)
        assert state.isr == (0, 1) and state.under_replicated
        assert state.follower_caught_up_ms(1) == 100
        state.record_fetch(2, 4, now_ms=200)
        assert state.isr == (0, 1, 2) and not state.under_replicated

    def test_report_is_capped_and_monotonic(self) -> None:
        """Progress is capped at the leader's last offset and never moves backwards."""
        state = leader(2)
        grow(state, 4)
        assert state.record_fetch(1, 1000, now_ms=0).acked_offset == 4
        grow(state, 9)
        assert state.record_fetch(1, 2, now_ms=1).acked_offset == 4
        assert state.record_fetch(1, 2, now_ms=2, allow_backwards=True).acked_offset == 2
        assert state.follower_offset(1) == 2

    def test_keeping_pace_stays_and_joins(self) -> None:
        """Reaching the leader's last offset as of the previous report counts as caught up."""
        state = leader(2)
        grow(state, 9)
        assert state.record_fetch(1, 4, now_ms=0).isr_changed is False
        assert state.isr == (0,)
        grow(state, 19)
        assert state.record_fetch(1, 8, now_ms=1).isr_changed is False  # short of 9
        grow(state, 29)
        assert state.record_fetch(1, 19, now_ms=2).isr_changed is True  # leader was at 19
        assert state.isr == (0, 1) and state.follower_caught_up_ms(1) == 2

    def test_lagging_follower_leaves_after_timeout(self) -> None:
        """In sync while now - caught_up <= lag; out one millisecond later, hw then advances."""
        state = leader(2)
        grow(state, 9)
        state.record_fetch(1, 9, now_ms=1000)
        grow(state, 19)
        assert state.hw == 9
        assert state.next_expiry_ms() == 1000 + LAG + 1
        assert state.expire_lagging(1000 + LAG) is False
        assert state.isr == (0, 1)
        assert state.expire_lagging(1000 + LAG + 1) is True
        assert state.isr == (0,) and state.hw == 19
        assert state.follower_caught_up_ms(1) is None
        assert state.next_expiry_ms() is None

    def test_hw_capped_by_durable_and_never_backwards(self) -> None:
        """hw waits for the fsync, and a follower joining below hw does not pull it back."""
        state = leader(2, 2)
        grow(state, 9, durable_last=5)
        assert state.hw == 5
        state.record_fetch(1, 2, now_ms=0)   # not caught up; leader was at 9
        grow(state, 19)
        assert state.hw == 19                # ISR is the leader alone
        state.record_fetch(1, 9, now_ms=1)   # keeps pace: joins at 9, below hw
        assert state.isr == (0, 1) and state.hw == 19
        assert state.ack_offset == 9         # acks=all only for what both replicas hold
        state.record_fetch(1, 19, now_ms=2)
        assert state.ack_offset == 19

    def test_acks_all_counts_members_holding_the_offset(self) -> None:
        """With min ISR 2, one follower holding hw is enough even if another ISR member,
        just joined by keeping pace, is still below hw."""
        state = leader(3, 2)
        grow(state, 9)
        state.record_fetch(1, 9, now_ms=0)   # in sync at 9
        state.record_fetch(2, 3, now_ms=0)   # not caught up; leader was at 9
        grow(state, 19)
        state.record_fetch(1, 19, now_ms=1)
        assert state.hw == 19
        state.record_fetch(2, 9, now_ms=2)   # keeps pace: joins at 9, below hw
        assert state.isr == (0, 1, 2) and state.hw == 19
        assert state.ack_offset == 19        # leader and follower 1 hold 19

    def test_min_isr_gates_acks_all_not_hw(self) -> None:
        """hw moves with the leader alone in the ISR; acks=all needs min ISR members."""
        state = leader(3, 2)
        grow(state, 4)
        assert state.hw == 4 and state.ack_offset == -1
        state.record_fetch(2, 4, now_ms=0)
        assert state.ack_offset == 4

    def test_replica_id_validation(self) -> None:
        """Only 1 .. RF-1 are follower ids; a refused report changes nothing."""
        state = leader(3)
        grow(state, 4)
        for bad in (0, 3, 17):
            with pytest.raises(InvalidReplicaRequest, match="expected 1 to 2"):
                state.record_fetch(bad, 4, now_ms=0)
        with pytest.raises(InvalidReplicaRequest, match="no followers"):
            leader(1).record_fetch(1, 0, now_ms=0)
        assert state.isr == (0,) and state.follower_offset(1) == -1

    def test_follower_role_freezes(self) -> None:
        """As follower: reports get NOT_LEADER, hw and the ISR freeze, no lag expiry."""
        state = leader(2)
        grow(state, 4)
        state.record_fetch(1, 4, now_ms=0)
        assert state.change_role(Role.FOLLOWER, now_ms=1) is True
        assert state.change_role(Role.FOLLOWER, now_ms=1) is False
        with pytest.raises(NotLeader):
            state.record_fetch(1, 4, now_ms=2)
        assert grow(state, 9) is False and state.hw == 4
        assert state.next_expiry_ms() is None and state.ack_offset == -1
        assert state.expire_lagging(10 * LAG) is False and state.isr == (0, 1)

    def test_promotion_starts_epoch_and_fresh_lag_window(self) -> None:
        """Back to leader: epoch + 1, frozen ISR members in sync for a fresh lag window."""
        state = leader(2)
        grow(state, 4)
        state.record_fetch(1, 4, now_ms=0)
        state.change_role(Role.FOLLOWER, now_ms=1)
        assert state.checkpoint(Role.LEADER).leader_epoch == 1
        state.change_role(Role.LEADER, now_ms=50_000)
        assert state.leader_epoch == 1 and state.isr == (0, 1)
        assert state.next_expiry_ms() == 50_000 + LAG + 1

    def test_checkpoint_and_restore(self) -> None:
        """RF>1 restores hw from the checkpoint and the ISR with a fresh lag window."""
        state = leader(3, 2)
        grow(state, 9)
        state.record_fetch(1, 4, now_ms=0)   # behind the leader's 9: stays out of the ISR
        state.record_fetch(2, 9, now_ms=0)   # caught up: joins
        grow(state, 19)
        checkpoint = state.checkpoint()
        assert checkpoint.hw == state.hw == 9
        assert checkpoint.isr == (0, 2) and checkpoint.replica_offsets == {1: 4, 2: 9}
        restored = PartitionReplication.restore(
            ReplicationCheckpoint.from_json(checkpoint.to_json()), replication_factor=3,
            min_insync_replicas=2, replica_lag_timeout_ms=LAG, next_offset=20,
            durable_offset=20, now_ms=777)
        assert restored.hw == 9                      # not 19: follower 2 only holds 9
        assert restored.isr == (0, 2) and restored.follower_offset(1) == 4
        assert restored.next_expiry_ms() == 777 + LAG + 1
        assert restored.expire_lagging(777 + LAG + 1) and restored.hw == 19

    def test_restore_caps_at_recovered_log(self) -> None:
        """A checkpoint beyond a log that lost its tail restores hw at the log's end."""
        checkpoint = ReplicationCheckpoint(hw=50, isr=(0, 1), replica_offsets={1: 50})
        restored = PartitionReplication.restore(
            checkpoint, replication_factor=2, min_insync_replicas=1, next_offset=31,
            durable_offset=31, now_ms=0)
        assert restored.hw == 30 and restored.follower_offset(1) == 30

    def test_restore_rf1_uses_the_log(self) -> None:
        """RF=1 after restart: hw is the recovered log's last offset."""
        restored = PartitionReplication.restore(
            ReplicationCheckpoint(hw=3), replication_factor=1, min_insync_replicas=1,
            next_offset=8, durable_offset=8, now_ms=0)
        assert restored.hw == 7


# --------------------------------------------------------------------- model check

class _Model:
    """The spec's rules written the plain way, recomputed from scratch at every step."""

    def __init__(self, rf: int, min_isr: int, cap: bool) -> None:
        self.rf, self.min_isr, self.cap = rf, min_isr, cap
        self.last = -1
        self.durable = -1
        self.progress = dict.fromkeys(range(1, rf), -1)
        self.caught_up: dict[int, int | None] = dict.fromkeys(range(1, rf))
        self.previous: dict[int, int | None] = dict.fromkeys(range(1, rf))
        self.hw = -1

    def isr(self, now: int) -> set[int]:
        return {0} | {r for r, t in self.caught_up.items() if t is not None and now - t <= LAG}

    def settle(self, now: int) -> None:
        offsets = {0: self.last, **self.progress}
        self.hw = high_watermark(offsets, self.isr(now), current=self.hw,
                                 durable_last_offset=self.durable if self.cap else None)

    def report(self, replica: int, offset: int, now: int) -> None:
        if self.caught_up[replica] is not None and now - self.caught_up[replica] > LAG:
            self.caught_up[replica] = None
        self.progress[replica] = max(self.progress[replica], min(offset, self.last))
        previous = self.previous[replica]
        if self.progress[replica] >= self.last or (
                previous is not None and self.progress[replica] >= previous):
            self.caught_up[replica] = now
        self.previous[replica] = self.last

    def ack_offset(self, now: int) -> int:
        return acks_all_offset({0: self.last, **self.progress}, self.isr(now), self.min_isr,
                               self.hw)


_step = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 5), st.booleans()),
    st.tuples(st.just("sync"), st.just(0), st.just(False)),
    st.tuples(st.just("report"), st.integers(1, 3), st.integers(0, 40)),
    st.tuples(st.just("wait"), st.integers(0, 6000), st.just(False)),
)


class ModelTests:

    @settings(max_examples=300, deadline=None)
    @given(rf=st.integers(1, 4), min_isr=st.integers(1, 4), cap=st.booleans(),
           steps=st.lists(_step, max_size=60))
    def test_incremental_state_matches_the_rules(self, rf: int, min_isr: int, cap: bool,
                                                 steps: list[tuple[str, int, int]]) -> None:
        """After any sequence of appends, fsyncs, reports and quiet time, ISR, hw and the
        acks=all bound equal the spec's rules recomputed from scratch; hw never goes back
        and never passes the leader's (durable) last offset."""
        min_isr = min(min_isr, rf)
        state = leader(rf, min_isr, cap=cap)
        model = _Model(rf, min_isr, cap)
        now = 0
        for kind, a, b in steps:
            previous_hw = state.hw
            if kind == "append":
                model.last += a
                if b:
                    model.durable = model.last
                state.leader_log_changed(model.last + 1, model.durable + 1)
            elif kind == "sync":
                model.durable = model.last
                state.leader_log_changed(model.last + 1, model.durable + 1)
            elif kind == "report":
                replica = 1 + (a - 1) % max(rf - 1, 1)
                if rf == 1:
                    with pytest.raises(InvalidReplicaRequest):
                        state.record_fetch(a, b, now)
                    continue
                model.report(replica, b, now)
                state.record_fetch(replica, b, now)
            else:
                now += a
                state.expire_lagging(now)
            model.settle(now)
            assert set(state.isr) == model.isr(now)
            assert state.hw == model.hw
            assert state.ack_offset == model.ack_offset(now)
            assert state.hw >= previous_hw
            assert state.hw <= (model.durable if cap else model.last)
            assert state.under_replicated == (len(model.isr(now)) < rf)
