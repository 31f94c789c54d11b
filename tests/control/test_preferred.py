"""``replication.control.preferred``: a broker that registers gets back the partitions it is
the preferred leader of, once it has been in their committed ISR for the delay; time is the
``now`` the tests pass."""

from __future__ import annotations

from replication.control.keys import BrokerRegistration, KeyLayout, PartitionState, TopicRecord
from replication.control.preferred import LeaderReturns
from replication.control.view import ClusterView

LAYOUT = KeyLayout("c")
ROTATED = ((0, 1, 2), (1, 2, 0), (2, 0, 1))


def fresh_view(leaders: tuple[int, ...] = (0, 0, 0),
               isrs: tuple[tuple[int, ...], ...] = ((0,), (0,), (0,)),
               alive: tuple[int, ...] = (0,)) -> ClusterView:
    """Topic ``t``, 3 partitions with rotated replica lists, as a cluster whose first broker
    started alone looks: broker 0 leads them all."""
    view = ClusterView(LAYOUT)
    view.put(LAYOUT.topic("t"), TopicRecord(3, 3, 2, ROTATED, {}).encode(),
             mod_revision=5, create_revision=5)
    for p, (leader, isr) in enumerate(zip(leaders, isrs, strict=True)):
        set_state(view, p, PartitionState(leader, 1, isr), 6)
    for b in alive:
        register(view, b)
    return view


def set_state(view: ClusterView, partition: int, state: PartitionState, rev: int) -> None:
    view.put(LAYOUT.partition("t", partition), state.encode(), mod_revision=rev,
             create_revision=5)


def register(view: ClusterView, broker: int) -> None:
    view.put(LAYOUT.broker(broker), BrokerRegistration(f"h:{broker}", 1).encode(),
             mod_revision=10 + broker, create_revision=10 + broker, lease=100 + broker)


def moved(due: object) -> list[tuple[int, int, int]]:
    return [(m.write.partition, m.write.state.leader, m.write.state.leader_epoch)
            for m in due.moves]  # type: ignore[attr-defined]


class LeaderReturnsTests:
    def test_a_joining_broker_gets_its_partition_once_in_the_isr_for_the_delay(self) -> None:
        """Broker 1 registers while 0 leads partition 1 (whose first replica is 1): nothing
        moves while 1 is outside the ISR; once it is in, the move is due after the delay
        and not before; the move keeps the ISR with 1 first, epoch + 1, fenced on the
        key's revision."""
        view = fresh_view()
        returns = LeaderReturns(delay_s=3.0)
        register(view, 1)
        returns.broker_joined(view, 1)
        assert returns.observe(view, 10.0).moves == []
        set_state(view, 1, PartitionState(0, 1, (0, 1)), 20)
        due = returns.observe(view, 11.0)
        assert (due.moves, due.next_at) == ([], 14.0)
        assert returns.observe(view, 13.9).moves == []
        due = returns.observe(view, 14.0)
        assert moved(due) == [(1, 1, 2)]
        assert due.moves[0].write.state.isr == (1, 0)
        assert due.moves[0].write.mod_revision == 20

    def test_only_the_joining_brokers_partitions_move(self) -> None:
        """Broker 2 joins a cluster where 0 leads everything and every ISR is whole: only
        partition 2 (first replica 2) is handed back; partition 1's preferred broker 1 did
        not register, so it waits for the periodic check."""
        whole = ((0, 1, 2),) * 3
        view = fresh_view(isrs=whole, alive=(0, 1, 2))
        returns = LeaderReturns(delay_s=1.0)
        returns.broker_joined(view, 2)
        returns.observe(view, 0.0)
        assert moved(returns.observe(view, 1.0)) == [(2, 2, 2)]

    def test_a_break_in_the_isr_restarts_the_delay(self) -> None:
        """The preferred broker drops out of the ISR before the delay is up: the delay
        starts again from its return, so a broker that flaps in and out never leads."""
        view = fresh_view(isrs=((0,), (0, 1), (0,)), alive=(0, 1))
        returns = LeaderReturns(delay_s=3.0)
        returns.broker_joined(view, 1)
        returns.observe(view, 0.0)
        set_state(view, 1, PartitionState(0, 1, (0,)), 21)
        assert returns.observe(view, 2.0).next_at is None
        set_state(view, 1, PartitionState(0, 1, (0, 1)), 22)
        assert returns.observe(view, 2.5).next_at == 5.5
        assert returns.observe(view, 3.0).moves == []
        assert moved(returns.observe(view, 5.5)) == [(1, 1, 2)]

    def test_the_mark_goes_once_it_leads_or_leaves(self) -> None:
        """Once the preferred broker leads (here by an election), nothing is pending: a
        later move of the leader elsewhere (the operator's) is left alone. A broker whose
        registration goes loses its marks."""
        view = fresh_view(isrs=((0,), (0, 1), (0, 2)), alive=(0, 1, 2))
        returns = LeaderReturns(delay_s=1.0)
        returns.broker_joined(view, 1)
        returns.broker_joined(view, 2)
        set_state(view, 1, PartitionState(1, 2, (1, 0)), 30)
        returns.observe(view, 0.0)
        assert set(returns.pending) == {("t", 2)}
        set_state(view, 1, PartitionState(0, 3, (0, 1)), 31)   # moved away by the operator
        assert moved(returns.observe(view, 5.0)) == [(2, 2, 2)]   # 1 stays with 0
        returns.broker_left(2)
        assert returns.pending == {}
        assert returns.observe(view, 10.0).moves == []

    def test_a_dead_preferred_broker_or_no_leader_moves_nothing(self) -> None:
        """The preferred broker's registration is gone from the view, or the partition has
        no leader (the election decides that one): no move, the first drops the mark."""
        view = fresh_view(isrs=((0,), (0, 1), (0,)), alive=(0, 1))
        returns = LeaderReturns(delay_s=1.0)
        returns.broker_joined(view, 1)
        set_state(view, 1, PartitionState(-1, 2, (0, 1)), 40)
        assert returns.observe(view, 0.0).moves == []
        assert returns.observe(view, 9.0).moves == []
        set_state(view, 1, PartitionState(0, 3, (0, 1)), 41)
        assert returns.observe(view, 10.0, alive={0}).moves == []
        assert returns.pending == {}

    def test_off(self) -> None:
        """``delay_s`` 0: a registration marks nothing, nothing ever moves."""
        view = fresh_view(isrs=((0, 1, 2),) * 3, alive=(0, 1, 2))
        returns = LeaderReturns(delay_s=0)
        for b in (1, 2):
            returns.broker_joined(view, b)
        assert returns.pending == {}
        assert returns.observe(view, 100.0).moves == []
