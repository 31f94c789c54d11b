"""Prompt hand-back of leadership to a broker that registered: the controller's rule, pure.

Owns: ``LeaderReturns``. When a broker registers in etcd (it started, or came back with a
new lease), every partition whose preferred leader (first replica) it is and that another
broker leads is marked *pending*. Once that broker has been alive and in the partition's
committed ISR for ``delay_s`` without a break, the controller moves the leadership to it
(``leader_epoch + 1``, the ISR kept, the new leader first: the same move as the periodic
preferred-leader check, ``view.preferred_leader_moves``). The mark goes when the broker
leads the partition (by this move or by an election), when its registration goes, or when
the partition goes.

Why: a topic declared in the config is created in etcd by the first broker that starts, so
its first election sees only that broker alive, and it would lead every partition until the
periodic check (``leader_rebalance_check_ms``, 300 s by default). Kafka never starts that
way (CreateTopics needs the replication factor's worth of live brokers, and the first
leader is the first replica). Only partitions whose preferred broker *registered* are
marked, so a leader the operator placed elsewhere (``skerry cluster elect``) stays until
the periodic check, as in Kafka. Availability is never traded: a partition keeps its
current leader until the preferred one is in the committed ISR (it holds every committed
offset), and the move is an ordinary fenced controller write.

``observe`` is called with the view after every change and returns the moves due now and
when to look again (the earliest time a pending partition becomes due). Time is passed in
(``now``, seconds); this module never reads a clock.

Must not import: Twisted, ``broker``, ``time``, sockets or files.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from replication.control.election import Election
from replication.control.keys import NO_LEADER
from replication.control.txn import PartitionWrite
from replication.control.view import ClusterView, PlannedElection, forced_election

__all__ = ["LeaderReturns", "ReturnsDue"]


@dataclass(frozen=True, slots=True)
class ReturnsDue:
    """``LeaderReturns.observe``'s answer: the moves to write now, in (topic, partition)
    order, and when (seconds, the caller's clock) the next pending partition becomes due;
    None: nothing is waiting on time."""

    moves: list[PlannedElection]
    next_at: float | None


@dataclass
class LeaderReturns:
    """Pending hand-backs (module docstring). ``delay_s`` 0: off (``broker_joined`` marks
    nothing)."""

    delay_s: float
    pending: dict[tuple[str, int], int] = field(default_factory=dict)
    """(topic, partition) -> the preferred broker that registered."""
    eligible_since: dict[tuple[str, int], float] = field(default_factory=dict)
    """(topic, partition) -> since when its preferred broker is alive and in the committed
    ISR without a break (as observed)."""

    @property
    def enabled(self) -> bool:
        return self.delay_s > 0

    def broker_joined(self, view: ClusterView, broker_id: int) -> None:
        """``broker_id`` registered: mark the partitions it is the preferred leader of and
        that another broker leads or that have no leader yet (an election may still give
        them to another broker while it catches up)."""
        if not self.enabled:
            return
        for key, state in view.partitions.items():
            replicas = view.replicas(*key)
            if replicas and replicas[0] == broker_id and state.leader != broker_id:
                self.pending[key] = broker_id
                self.eligible_since.pop(key, None)

    def broker_left(self, broker_id: int) -> None:
        """``broker_id``'s registration is gone: its marks go (its next registration marks
        again)."""
        for key in [k for k, b in self.pending.items() if b == broker_id]:
            del self.pending[key]
            self.eligible_since.pop(key, None)

    def observe(self, view: ClusterView, now: float,
                alive: Collection[int] | None = None) -> ReturnsDue:
        """Update the marks from ``view`` at ``now``; the moves due and the next due time.

        >>> from replication.control.keys import KeyLayout, PartitionState, TopicRecord
        >>> from replication.control.keys import BrokerRegistration
        >>> layout = KeyLayout("c")
        >>> view = ClusterView(layout)
        >>> _ = view.put(layout.topic("t"), TopicRecord(1, 3, 2, ((1, 2, 0),), {}).encode(),
        ...              mod_revision=5, create_revision=5)
        >>> _ = view.put(layout.partition("t", 0), PartitionState(0, 1, (0, 2)).encode(),
        ...              mod_revision=6, create_revision=5)
        >>> for b in (0, 1, 2):
        ...     _ = view.put(layout.broker(b), BrokerRegistration(f"h:{b}", 1).encode(),
        ...                  mod_revision=7 + b, create_revision=7 + b, lease=b + 1)
        >>> returns = LeaderReturns(delay_s=3.0)
        >>> returns.broker_joined(view, 1)
        >>> returns.observe(view, now=100.0)          # 1 is not in the ISR yet
        ReturnsDue(moves=[], next_at=None)
        >>> _ = view.put(layout.partition("t", 0), PartitionState(0, 1, (0, 2, 1)).encode(),
        ...              mod_revision=20, create_revision=5)
        >>> returns.observe(view, now=101.0)          # in the ISR: due 3 s from now
        ReturnsDue(moves=[], next_at=104.0)
        >>> [m.write.state for m in returns.observe(view, now=104.0).moves]
        [PartitionState(leader=1, leader_epoch=2, isr=(1, 0, 2))]
        """
        live = view.alive if alive is None else frozenset(alive)
        moves: list[PlannedElection] = []
        next_at: float | None = None
        for key in sorted(self.pending):
            preferred = self.pending[key]
            state = view.partitions.get(key)
            replicas = view.replicas(*key)
            if state is None or not replicas or replicas[0] != preferred \
                    or preferred not in live or state.leader == preferred:
                del self.pending[key]          # gone, reassigned, left, or led by it already
                self.eligible_since.pop(key, None)
                continue
            if state.leader == NO_LEADER or preferred not in state.isr:
                self.eligible_since.pop(key, None)   # not safe (yet): the election's business
                continue
            since = self.eligible_since.setdefault(key, now)
            due = since + self.delay_s
            if now < due:
                next_at = due if next_at is None else min(next_at, due)
                continue
            moved = forced_election(state, replicas, preferred, None, live,
                                    unclean_allowed=False)
            topic, partition = key
            moves.append(PlannedElection(
                PartitionWrite(topic, partition, view.partition_mods.get(key, 0), moved),
                Election(moved, True, False), {}))
        return ReturnsDue(moves, next_at)
