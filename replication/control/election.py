"""The controller's leader election for one partition, as a pure function.

Owns: ``elect_leader`` and its answer ``Election``. The controller calls it for every
partition a change touches (a broker key deleted, a broker back with a new incarnation, a
partition found offline) and writes the new state with a controller txn
(``replication.control.txn.write_partitions``) when ``changed``.

The rule (the spec's "Election"):

1. The leader is alive and in the committed ISR: it stays; dead brokers leave the ISR;
   the leader epoch does not move (an ISR change is fenced by the key's mod revision).
2. Otherwise the new leader is the first replica *in replica-list order* that is in the
   committed ISR and alive; ``leader_epoch + 1``; the ISR keeps its live members.
3. No such replica: ``leader = -1`` (offline) and the ISR is kept as it was, so the last
   in-sync replica is still electable when it comes back; the epoch moves when a real
   leader is taken away (the old leader, if it is only cut off, is fenced by it).
4. ...unless unclean election is on for the topic: then the live replica with the largest
   log end leads ``leader_epoch + 1`` alone in the ISR, and the answer is flagged
   ``unclean`` (the caller warns and counts it). Committed data may be lost: that is what
   "unclean" means. When the replicas' last leader epochs are known they rank first (the
   highest epoch of the last record, then the largest log end, then replica-list order:
   Raft's "most up-to-date log", Kafka KIP-966's unclean recovery), because a longer log
   whose tail was written by a deposed leader holds nothing the newer epoch committed; with
   equal last epochs this is the largest log end. A live replica whose log end is unknown
   ranks below every replica that reported one (all unknown: replica-list order).

The log ends come from the replicas (the controller gathers them while the partition is
offline: ``replication.control.view.plan``); this function only ranks them.

Why rule 2 never loses a committed offset: an offset is committed (``hw`` passed it) only
once every member of the committed ISR holds it (``replication.control.isr``: a shrink
counts only once committed), so any live member of the committed ISR holds every committed
offset.

Must not import: Twisted, ``broker``, ``time``, sockets or files.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from replication.control.keys import NO_LEADER, PartitionState

__all__ = ["Election", "elect_leader", "unclean_rank"]


@dataclass(frozen=True, slots=True)
class Election:
    """The partition's state after an election. ``changed``: it differs from the state the
    election started from (write it, comparing the key's mod revision); ``offline``: no
    leader; ``unclean``: the leader came from outside the committed ISR."""

    state: PartitionState
    changed: bool
    offline: bool
    unclean: bool = False


def elect_leader(current: PartitionState, replicas: Sequence[int], alive: Collection[int], *,
                 unclean_allowed: bool = False,
                 log_end_by_replica: Mapping[int, int] | None = None,
                 last_epoch_by_replica: Mapping[int, int] | None = None) -> Election:
    """The partition's next state given which brokers are ``alive`` (module docstring).

    ``replicas`` is the partition's replica list (preference order); ``log_end_by_replica``
    and ``last_epoch_by_replica`` are only read for an unclean election (``unclean_rank``).

    >>> s = PartitionState(leader=1, leader_epoch=4, isr=(1, 2, 0))
    >>> elect_leader(s, [1, 2, 0], alive={0, 2}).state
    PartitionState(leader=2, leader_epoch=5, isr=(2, 0))
    >>> elect_leader(s, [1, 2, 0], alive={1, 2}).state      # a follower died
    PartitionState(leader=1, leader_epoch=4, isr=(1, 2))
    >>> elect_leader(PartitionState(1, 4, (1,)), [1, 2, 0], alive={0, 2}).state
    PartitionState(leader=-1, leader_epoch=5, isr=(1,))
    """
    isr_alive = tuple(r for r in current.isr if r in alive)
    if current.leader != NO_LEADER and current.leader in isr_alive:
        state = PartitionState(current.leader, current.leader_epoch, isr_alive)
        return Election(state, state != current, offline=False)

    in_isr = set(current.isr)
    for replica in replicas:
        if replica in in_isr and replica in alive:
            ordered = (replica, *(r for r in isr_alive if r != replica))
            return Election(PartitionState(replica, current.leader_epoch + 1, ordered),
                            changed=True, offline=False)

    if unclean_allowed:
        live = [r for r in replicas if r in alive]
        if live:
            best = unclean_rank(replicas, live, log_end_by_replica or {},
                                last_epoch_by_replica or {})[0]
            return Election(PartitionState(best, current.leader_epoch + 1, (best,)),
                            changed=True, offline=False, unclean=True)

    if current.leader == NO_LEADER:
        return Election(current, changed=False, offline=True)
    return Election(PartitionState(NO_LEADER, current.leader_epoch + 1, current.isr),
                    changed=True, offline=True)


def unclean_rank(replicas: Sequence[int], candidates: Collection[int],
                 log_end_by_replica: Mapping[int, int],
                 last_epoch_by_replica: Mapping[int, int]) -> list[int]:
    """``candidates`` best first for an unclean election: the highest last epoch, then the
    largest log end, then replica-list order; unknown values rank lowest (-1).

    >>> unclean_rank([0, 1, 2], [1, 2], {1: 5, 2: 9}, {})
    [2, 1]
    >>> unclean_rank([0, 1, 2], [1, 2], {1: 5, 2: 9}, {1: 4, 2: 3})   # 2's tail is stale
    [1, 2]
    >>> unclean_rank([0, 1, 2], [2, 1], {}, {})
    [1, 2]
    """
    order = {r: i for i, r in enumerate(replicas)}
    return sorted(candidates, key=lambda r: (-last_epoch_by_replica.get(r, -1),
                                             -log_end_by_replica.get(r, -1),
                                             order.get(r, len(order))))
