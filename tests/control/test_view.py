"""``replication.control.view``: the cluster view fed from etcd, the controller's batched
elections and the operator's forced election."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replication.control.errors import IneligibleLeader, InvalidIsr
from replication.control.keys import (
    BrokerRegistration,
    KeyLayout,
    LogEndKey,
    LogEndReport,
    PartitionState,
    TopicRecord,
)
from replication.control.view import (
    MAX_WRITES_PER_TXN,
    ClusterView,
    ElectionPlan,
    batches,
    forced_election,
    plan,
    plan_elections,
    preferred_leader_moves,
)

LAYOUT = KeyLayout("c")


def view_with(partitions: int, alive: list[int], isr: tuple[int, ...] = (0, 1, 2),
              settings: dict[str, object] | None = None) -> ClusterView:
    view = ClusterView(LAYOUT)
    replicas = tuple((0, 1, 2) for _ in range(partitions))
    record = TopicRecord(partitions, 3, 2, replicas, settings or {})
    view.put(LAYOUT.topic("t"), record.encode(), mod_revision=5, create_revision=5)
    for p in range(partitions):
        view.put(LAYOUT.partition("t", p), PartitionState(0, 3, isr).encode(),
                 mod_revision=5, create_revision=5)
    for b in alive:
        view.put(LAYOUT.broker(b), BrokerRegistration(f"h:{b}", 1).encode(),
                 mod_revision=6 + b, create_revision=6 + b, lease=100 + b)
    return view


class ClusterViewTests:
    def test_older_writes_are_ignored(self) -> None:
        """A txn answer applied early and the same write's watch event arriving later, or
        an older value, never move the view back."""
        view = view_with(1, [0, 1, 2])
        key = LAYOUT.partition("t", 0)
        view.put(key, PartitionState(1, 4, (1, 2)).encode(), mod_revision=9,
                 create_revision=5)
        assert view.put(key, PartitionState(0, 3, (0,)).encode(), mod_revision=8,
                        create_revision=5) is None
        assert view.partitions[("t", 0)].leader == 1

    def test_foreign_values_are_skipped(self) -> None:
        """A value that does not decode is not guessed around."""
        view = ClusterView(LAYOUT)
        assert view.put(LAYOUT.broker(1), b"not json", mod_revision=3,
                        create_revision=3) is None
        assert view.put("/elsewhere", b"{}", mod_revision=3, create_revision=3) is None
        assert view.alive == frozenset()

    def test_controller_epoch_is_the_create_revision(self) -> None:
        view = ClusterView(LAYOUT)
        view.put(LAYOUT.controller, b'{"broker":2}', mod_revision=12, create_revision=11)
        assert (view.controller, view.controller_epoch) == (2, 11)
        view.delete(LAYOUT.controller, revision=13)
        assert (view.controller, view.controller_epoch) == (None, 0)


class PlanTests:
    def test_dead_leader_moves_in_every_partition(self) -> None:
        """Broker 0 dead: each partition it led moves to broker 1 with epoch + 1, decided
        on the revision each key was read at."""
        view = view_with(3, [1, 2])
        plans = plan_elections(view)
        assert [(p.write.partition, p.write.mod_revision, p.write.state) for p in plans] == [
            (p, 5, PartitionState(1, 4, (1, 2))) for p in range(3)]

    def test_nothing_to_do_when_healthy(self) -> None:
        assert plan_elections(view_with(4, [0, 1, 2])) == []

    def test_batches_stay_under_the_txn_limit(self) -> None:
        """More partitions than one txn may write: batches of MAX_WRITES_PER_TXN."""
        plans = plan_elections(view_with(130, [1, 2]))
        sizes = [len(b) for b in batches(plans)]
        assert sizes == [MAX_WRITES_PER_TXN, MAX_WRITES_PER_TXN, 10]
        assert 2 + 2 * MAX_WRITES_PER_TXN <= 128

    def test_topic_setting_overrides_unclean(self) -> None:
        """Only broker 2 alive and outside the ISR: offline with unclean off (cluster
        default on, the topic says off), elected when the topic allows it."""
        off = view_with(1, [2], isr=(0, 1), settings={"unclean_leader_election": False})
        assert plan_elections(off, unclean_default=True)[0].election.offline
        on = view_with(1, [2], isr=(0, 1), settings={"unclean_leader_election": True})
        assert plan_elections(on)[0].election.offline       # step 1: offline, epoch 4
        offline(on, 4)
        report(on, 2, log_end=7, last_epoch=3, offline_epoch=4)
        planned = plan_elections(on)[0]
        assert planned.election.unclean and planned.write.state.leader == 2


def offline(view: ClusterView, epoch: int, isr: tuple[int, ...] = (0,)) -> None:
    """The controller's first step landed: the partition key says offline at ``epoch``."""
    view.put(LAYOUT.partition("t", 0), PartitionState(-1, epoch, isr).encode(),
             mod_revision=20 + epoch, create_revision=5)


def report(view: ClusterView, broker: int, *, log_end: int, last_epoch: int,
           offline_epoch: int) -> None:
    view.put(LAYOUT.log_end("t", 0, broker),
             LogEndReport(log_end, last_epoch, offline_epoch).encode(),
             mod_revision=40 + broker, create_revision=40 + broker, lease=100 + broker)


class UncleanPlanTests:
    """Unclean election on, every ISR member (broker 0) dead, brokers 1 and 2 alive."""

    def unclean_view(self) -> ClusterView:
        return view_with(1, [1, 2], isr=(0,), settings={"unclean_leader_election": True})

    def test_goes_offline_first(self) -> None:
        """Step 1: the partition goes offline (epoch + 1) rather than electing at once, so
        a leader cut off from etcd is fenced before the replicas' log ends are compared."""
        result = plan(self.unclean_view())
        assert [w.write.state for w in result.writes] == [PartitionState(-1, 4, (0,))]
        assert not result.writes[0].election.unclean and result.waiting == []

    def test_waits_for_every_live_replica(self) -> None:
        """Offline with one report of two: no write yet, the partition waits."""
        view = self.unclean_view()
        offline(view, 4)
        assert plan(view) == ElectionPlan([], [("t", 0, 4)])
        report(view, 1, log_end=10, last_epoch=3, offline_epoch=4)
        assert plan(view) == ElectionPlan([], [("t", 0, 4)])

    def test_largest_log_end_wins_not_list_order(self) -> None:
        """Both reported: broker 2, later in list order, holds more and leads epoch + 1
        alone; the plan carries the reports it ranked."""
        view = self.unclean_view()
        offline(view, 4)
        report(view, 1, log_end=10, last_epoch=3, offline_epoch=4)
        report(view, 2, log_end=12, last_epoch=3, offline_epoch=4)
        [planned] = plan(view).writes
        assert planned.write.state == PartitionState(2, 5, (2,)) and planned.election.unclean
        assert sorted(planned.log_ends) == [1, 2]

    def test_newer_last_epoch_beats_a_longer_stale_tail(self) -> None:
        """Broker 2's longer log ends in epoch 2 (a deposed leader's tail); broker 1's last
        record is of epoch 3: broker 1 leads."""
        view = self.unclean_view()
        offline(view, 4)
        report(view, 1, log_end=10, last_epoch=3, offline_epoch=4)
        report(view, 2, log_end=15, last_epoch=2, offline_epoch=4)
        assert plan(view).writes[0].write.state.leader == 1

    def test_stale_and_dead_reports_do_not_count(self) -> None:
        """A report for an older offline epoch, or from a broker no longer alive, is not
        waited on nor ranked."""
        view = self.unclean_view()
        offline(view, 4)
        report(view, 1, log_end=10, last_epoch=3, offline_epoch=4)
        report(view, 2, log_end=99, last_epoch=3, offline_epoch=2)
        assert plan(view).waiting == [("t", 0, 4)]
        report(view, 0, log_end=50, last_epoch=3, offline_epoch=4)
        assert plan(view).waiting == [("t", 0, 4)]
        assert plan(view, alive={1}).writes[0].write.state.leader == 1

    def test_deadline_falls_back_to_what_arrived(self) -> None:
        """The caller's deadline passed: rank what arrived (a replica without a report
        ranks last); with no report at all, replica-list order."""
        view = self.unclean_view()
        offline(view, 4)
        report(view, 2, log_end=3, last_epoch=1, offline_epoch=4)
        [planned] = plan(view, gave_up=[("t", 0, 4)]).writes
        assert planned.write.state.leader == 2 and list(planned.log_ends) == [2]
        view.delete(LAYOUT.log_end("t", 0, 2), revision=60)
        [planned] = plan(view, gave_up=[("t", 0, 4)]).writes
        assert planned.write.state.leader == 1 and planned.log_ends == {}

    def test_unclean_off_never_waits(self) -> None:
        view = view_with(1, [1, 2], isr=(0,))
        offline(view, 4)
        report(view, 1, log_end=10, last_epoch=3, offline_epoch=4)
        report(view, 2, log_end=12, last_epoch=3, offline_epoch=4)
        assert plan(view) == ElectionPlan([], [])

    def test_clean_candidate_back_beats_reports(self) -> None:
        """The last ISR member returns while the reports are gathered: a clean election."""
        view = self.unclean_view()
        offline(view, 4)
        report(view, 2, log_end=12, last_epoch=3, offline_epoch=4)
        [planned] = plan(view, alive={0, 1, 2}).writes
        assert planned.write.state == PartitionState(0, 5, (0,))
        assert not planned.election.unclean

    @given(st.sets(st.integers(0, 2)),
           st.dictionaries(st.integers(0, 2), st.tuples(st.integers(0, 20),
                                                        st.integers(-1, 3),
                                                        st.integers(3, 5))),
           st.booleans())
    def test_never_elects_unclean_before_every_live_report_or_the_deadline(
            self, alive: set[int], reports: dict[int, tuple[int, int, int]],
            deadline: bool) -> None:
        """Over random live sets and reports (some stale): an unclean leader is elected
        only once every live replica reported for the current offline epoch or the wait
        is over, and then no counted report ranks above it."""
        view = self.unclean_view()
        offline(view, 4, isr=(0,))
        for b, (end, last, epoch) in reports.items():
            report(view, b, log_end=end, last_epoch=last, offline_epoch=epoch)
        result = plan(view, alive=alive, gave_up=[("t", 0, 4)] if deadline else [])
        counted = {b: r for b, r in reports.items() if b in alive and r[2] == 4}
        if 0 in alive:                    # the ISR member is back: clean
            assert result.writes[0].write.state.leader == 0
            assert not result.writes[0].election.unclean
            return
        if not alive:
            assert result == ElectionPlan([], [])
            return
        complete = all(b in counted for b in alive)
        if not complete and not deadline:
            assert result == ElectionPlan([], [("t", 0, 4)])
            return
        [planned] = result.writes
        leader = planned.write.state.leader
        assert planned.election.unclean and leader in alive
        assert set(planned.log_ends) == set(counted)
        rank = {b: (r[1], r[0]) for b, r in counted.items()}
        assert all(rank[b] <= rank.get(leader, (-1, -1)) for b in counted)

    def test_report_keys_round_trip_and_vanish(self) -> None:
        """The view keeps reports per partition and forgets them when the key goes."""
        view = self.unclean_view()
        report(view, 1, log_end=10, last_epoch=3, offline_epoch=4)
        assert view.log_ends == {("t", 0): {1: LogEndReport(10, 3, 4)}}
        assert LAYOUT.parse(LAYOUT.log_end("t", 0, 1)) == LogEndKey("t", 0, 1)
        view.delete(LAYOUT.log_end("t", 0, 1), revision=70)
        assert view.log_ends == {}


class ForcedElectionTests:
    CURRENT = PartitionState(0, 7, (0, 1))

    def test_moves_with_epoch_bump(self) -> None:
        state = forced_election(self.CURRENT, (0, 1, 2), 1, None, {0, 1, 2},
                                unclean_allowed=False)
        assert state == PartitionState(1, 8, (1, 0))

    @pytest.mark.parametrize(("leader", "isr", "alive", "error"), [
        (2, None, {0, 1, 2}, IneligibleLeader),   # outside the ISR, unclean off
        (1, None, {0, 2}, IneligibleLeader),      # not alive
        (5, None, {0, 1, 2, 5}, IneligibleLeader),  # not a replica
        (1, (0,), {0, 1, 2}, InvalidIsr),         # ISR without its leader
        (1, (1, 2), {0, 1, 2}, InvalidIsr),       # adds a replica missing committed data
    ])
    def test_refusals(self, leader: int, isr: tuple[int, ...] | None, alive: set[int],
                      error: type[Exception]) -> None:
        with pytest.raises(error):
            forced_election(self.CURRENT, (0, 1, 2), leader, isr, alive,
                            unclean_allowed=False)

    def test_unclean_allowed_leads_alone(self) -> None:
        state = forced_election(self.CURRENT, (0, 1, 2), 2, None, {2},
                                unclean_allowed=True)
        assert state == PartitionState(2, 8, (2,))


class PreferredLeaderTests:
    def _led_by(self, view: ClusterView, leader: int, isr: tuple[int, ...], epoch: int = 4,
                partition: int = 0) -> None:
        view.put(LAYOUT.partition("t", partition), PartitionState(leader, epoch, isr).encode(),
                 mod_revision=20, create_revision=5)

    def test_moves_back_to_the_first_replica_in_a_new_epoch(self) -> None:
        view = view_with(2, [0, 1, 2])
        self._led_by(view, 1, (1, 2, 0))
        moves = preferred_leader_moves(view)
        assert [(m.write.topic, m.write.partition, m.write.mod_revision) for m in moves] == [
            ("t", 0, 20)]  # partition 1 is led by broker 0 already
        assert moves[0].write.state == PartitionState(0, 5, (0, 1, 2))
        assert not moves[0].election.unclean

    @pytest.mark.parametrize("alive, leader, isr", [
        ([1, 2], 1, (1, 2, 0)),   # the preferred leader is dead
        ([0, 1, 2], 1, (1, 2)),   # alive but not in the committed ISR: it may lack offsets
        ([0, 1, 2], -1, (0,)),    # offline: plan's business, not this
    ])
    def test_leaves_it_where_a_move_is_not_safe(self, alive: list[int], leader: int,
                                                 isr: tuple[int, ...]) -> None:
        view = view_with(1, alive)
        self._led_by(view, leader, isr)
        assert preferred_leader_moves(view) == []
