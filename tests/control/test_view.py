"""``replication.control.view``: the cluster view fed from etcd, the controller's batched
elections and the operator's forced election."""

from __future__ import annotations

import pytest

from replication.control.errors import IneligibleLeader, InvalidIsr
from replication.control.keys import (
    BrokerRegistration,
    KeyLayout,
    PartitionState,
    TopicRecord,
)
from replication.control.view import (
    MAX_WRITES_PER_TXN,
    ClusterView,
    batches,
    forced_election,
    plan_elections,
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
        planned = plan_elections(on)[0]
        assert planned.election.unclean and planned.write.state.leader == 2


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
