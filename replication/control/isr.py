"""The leader's ISR when ISR changes go through etcd: committed and pending (Kafka KIP-497).

Owns: ``IsrView`` (the committed ISR as last read from or written to etcd, plus the one
proposal whose txn is in flight) and the rules that move it:

- **A shrink counts for ``hw`` and ``acks=all`` only once its txn committed.** Until then
  the leader still waits for the replica it wants to drop: if the txn loses (the controller
  moved the partition meanwhile), nothing was acknowledged on the smaller set.
- **An expansion counts as soon as it is proposed** (Kafka's "maximal ISR"): waiting for
  one more replica is always safe.
- **A follower is proposed for the ISR only when its progress reached ``hw``** (and the
  start of the leader's epoch, ``propose_expand``), so the committed ISR never names a
  replica that misses a committed offset.
- One proposal in flight per partition; its answer (``committed`` / ``abandoned``) clears it.

So the set the high watermark and ``acks=all`` wait for is ``committed | pending`` (the
*maximal* ISR). The min-ISR check of ``acks=all`` counts the committed ISR, as Kafka does.

Offsets are *last* offsets (inclusive, ``-1``: nothing), the unit of ``replication.partition``.

Must not import: Twisted, ``broker``, ``time``, sockets or files.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from replication.control.errors import InvalidIsr, IsrChangeInFlight, NotCaughtUp

__all__ = ["IsrView"]


@dataclass(frozen=True, slots=True)
class IsrView:
    """The leader's view of one partition's ISR. Immutable: every rule returns a new view.

    >>> v = IsrView(frozenset({0, 1, 2}))
    >>> shrinking = v.propose_shrink({2}, leader=0)
    >>> sorted(shrinking.maximal)           # 2 still counts while the txn is in flight
    [0, 1, 2]
    >>> sorted(shrinking.committed_as_proposed().maximal)
    [0, 1]
    """

    committed: frozenset[int]
    pending: frozenset[int] | None = None

    @property
    def maximal(self) -> frozenset[int]:
        """The replicas ``hw`` and ``acks=all`` wait for: committed plus a pending expansion
        (a pending shrink removes nobody yet)."""
        if self.pending is None:
            return self.committed
        return self.committed | self.pending

    @property
    def in_flight(self) -> bool:
        return self.pending is not None

    def min_isr_met(self, min_isr: int) -> bool:
        """``acks=all`` may be accepted: the committed ISR has at least ``min_isr`` members."""
        return len(self.committed) >= min_isr

    def propose_expand(self, replica: int, progress: int, high_watermark: int, *,
                       epoch_start_offset: int = -1) -> IsrView:
        """Propose ``replica`` for the ISR; it counts for ``hw`` at once.

        ``epoch_start_offset``: the leader's last offset when its epoch began. A new
        leader's ``hw`` can lag what its predecessor committed, so "progress >= hw" alone
        could admit a replica missing a committed offset; Kafka also requires the follower
        to reach the leader epoch's start (``Partition.isFollowerInSync``). The bar is
        ``max(high_watermark, epoch_start_offset)``.

        Raises ``NotCaughtUp`` when its progress (last offset it holds) is below the bar,
        ``IsrChangeInFlight`` when a proposal is pending, ``InvalidIsr`` when it is a member.
        """
        if self.pending is not None:
            raise IsrChangeInFlight(f"ISR change to {sorted(self.pending)} still in flight")
        if replica in self.committed:
            raise InvalidIsr(f"replica {replica} is already in the ISR")
        if progress < max(high_watermark, epoch_start_offset):
            raise NotCaughtUp(f"replica {replica} holds up to {progress}, below the high "
                              f"watermark {high_watermark} or the epoch's start "
                              f"{epoch_start_offset}")
        return IsrView(self.committed, self.committed | {replica})

    def propose_shrink(self, out: Collection[int], *, leader: int) -> IsrView:
        """Propose the ISR without ``out``; they still count until the txn commits.

        Raises ``InvalidIsr`` when ``out`` names the leader or a non-member, or empties the
        ISR; ``IsrChangeInFlight`` when a proposal is pending.
        """
        if self.pending is not None:
            raise IsrChangeInFlight(f"ISR change to {sorted(self.pending)} still in flight")
        gone = frozenset(out)
        if leader in gone:
            raise InvalidIsr(f"the leader {leader} cannot leave its own ISR")
        if not gone or not gone <= self.committed:
            raise InvalidIsr(f"{sorted(gone)} is not a non-empty subset of the ISR "
                             f"{sorted(self.committed)}")
        return IsrView(self.committed, self.committed - gone)

    def committed_as_proposed(self) -> IsrView:
        """The proposal's txn succeeded: the pending set is the committed ISR."""
        if self.pending is None:
            raise IsrChangeInFlight("no ISR change is in flight")
        return IsrView(self.pending)

    def abandoned(self) -> IsrView:
        """The txn lost its compare (or failed for sure): back to the committed ISR."""
        return IsrView(self.committed)

    def reread(self, isr: Iterable[int]) -> IsrView:
        """The key was read again (a watch event, a lost compare, an ambiguous timeout): the
        stored ISR is the committed one, and any proposal is dropped (propose again)."""
        return IsrView(frozenset(isr))
