"""The etcd-managed ISR of one partition's replication state: in a cluster with etcd the ISR is
what etcd holds (committed), plus at most one pending proposal; the lag rule only says
which ISR it wants (``desired_isr``), and the shell proposes it.

Must not import: Twisted, the store, sockets, ``time``.
"""

from __future__ import annotations

from collections.abc import Collection

from replication.roles import Role


class ManagedIsr:
    """Part of ``PartitionReplication`` (``replication.partition``): the ISR when etcd manages it."""

    @property
    def managed(self) -> bool:
        """The ISR is the control plane's (``manage_isr``)."""
        return self._managed

    def manage_isr(self, committed: Collection[int]) -> None:
        """From now on the ISR is the control plane's: ``committed`` (replica ids, this one
        included or not) is the ISR etcd holds. The lag rule keeps running but only moves
        ``desired_isr``; ``set_isr`` moves the ISR."""
        self._managed = True
        self.set_isr(committed)

    def set_isr(self, committed: Collection[int], pending: Collection[int] | None = None) -> bool:
        """The committed ISR (as etcd holds it) and the proposal in flight, if any
        (Kafka KIP-497). ``hw`` waits for the *maximal* ISR, committed | pending: a shrink
        counts only once committed, an expansion as soon as proposed. The min-ISR check of
        acks=all counts the committed ISR. True when ``hw`` advanced."""
        self._committed = frozenset(r for r in committed if r in self._followers)
        self._pending = None if pending is None else \
            frozenset(r for r in pending if r in self._followers)
        self._recompute_bounds()
        return self._advance_hw() if self._role is Role.LEADER else False

    def grant_lag_window(self, now_ms: int) -> None:
        """Committed ISR members the lag rule does not count yet (no report since this
        leadership began) get a fresh lag window from ``now_ms``, as Kafka's ``makeLeader``
        does: a new leader must not shrink the ISR before its followers had time to fetch."""
        for replica in self._committed:
            follower = self._followers[replica]
            if not follower.in_isr:
                follower.in_isr = True
                follower.caught_up_ms = now_ms

    @property
    def committed_isr(self) -> tuple[int, ...]:
        """The committed ISR with this replica, sorted (managed mode)."""
        return tuple(sorted(self._committed | {self._local}))

    def isr_settled(self) -> bool:
        """The lag rule wants exactly the committed ISR (no proposal needed)."""
        followers = self._followers
        return all(followers[r].in_isr == (r in self._committed) for r in followers)

    def desired_isr(self) -> tuple[int, ...]:
        """What the lag rule says the ISR should be now (this replica included, sorted):
        the followers caught up within the lag timeout."""
        return tuple(sorted({self._local} | {r for r, f in self._followers.items()
                                             if f.in_isr}))

    def epoch_start_last_offset(self) -> int:
        """The leader's last offset when its current epoch began (-1: none), the second bar
        a follower must pass to be proposed for the ISR (``IsrView.propose_expand``)."""
        for entry in reversed(self._history.entries):
            if entry.epoch == self._epoch:
                return entry.start_offset - 1
        return self._leader_end - 1
