"""Leader epochs of one partition replica: the epoch history and the divergence rules.

Owns: ``EpochHistory``, the ordered ``(epoch, start_offset)`` pairs that say which leader
epoch wrote which offsets of this replica's log (Kafka's ``leader-epoch-checkpoint``), the
leader-side lookup of KIP-101 / KIP-279 (``OffsetsForLeaderEpoch``: "the end offset of
epoch e") and the follower-side ``divergence_offset`` that turns the leader's answer into
the offset to truncate the local log to. Also ``choose_leader``: which of the replicas'
answers names the current leader.

Records carry no epoch on disk (the record header has none), so the history is the only
place epochs live: a leader appends ``(epoch, log end)`` when it is promoted, a follower
copies the leader's entries for the records it appends, and both drop entries that a
truncation emptied.

Must not import: Twisted, the store, sockets, ``time``. Pure values in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EpochEntry",
    "EpochHistory",
    "EpochLookup",
    "divergence_offset",
    "PeerEpoch",
    "choose_leader",
]

NO_EPOCH = -1
"""``latest_epoch`` of an empty history, and the ``epoch`` of a lookup that found none."""


@dataclass(frozen=True, slots=True, order=True)
class EpochEntry:
    """Epoch ``epoch`` wrote the offsets from ``start_offset`` up to the next entry's start
    (or the log end, for the last entry)."""

    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class EpochLookup:
    """The answer to "where does epoch e end?" (KIP-279).

    ``epoch`` is the largest epoch ``<= e`` in the history (``-1``: none) and ``end_offset``
    the first offset *after* it: the next entry's start, or the log end for the latest
    epoch. With no epoch ``<= e``, ``end_offset`` is the start of the first entry (nothing
    this replica holds can match).
    """

    epoch: int
    end_offset: int


class EpochHistory:
    """Ordered ``(epoch, start_offset)`` entries: epochs strictly increase, start offsets
    never decrease (an epoch that wrote nothing is replaced by the next one at the same
    start).

    >>> h = EpochHistory([(0, 0), (2, 990)])
    >>> h.lookup(0, log_end=1200)
    EpochLookup(epoch=0, end_offset=990)
    >>> h.lookup(1, log_end=1200)
    EpochLookup(epoch=0, end_offset=990)
    >>> h.lookup(2, log_end=1200)
    EpochLookup(epoch=2, end_offset=1200)
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[tuple[int, int] | EpochEntry] = ()) -> None:
        self._entries: list[EpochEntry] = []
        for item in entries:
            entry = item if isinstance(item, EpochEntry) else EpochEntry(int(item[0]),
                                                                         int(item[1]))
            if entry.epoch < 0 or entry.start_offset < 0:
                raise ValueError(f"epoch entry {entry.epoch}:{entry.start_offset} is negative")
            if self._entries:
                last = self._entries[-1]
                if entry.epoch <= last.epoch or entry.start_offset < last.start_offset:
                    raise ValueError(
                        f"epoch entries out of order: {last.epoch}:{last.start_offset} then "
                        f"{entry.epoch}:{entry.start_offset}")
            self._entries.append(entry)

    # ------------------------------------------------------------------ views

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The epoch of the last entry; ``-1`` for an empty history."""
        return self._entries[-1].epoch if self._entries else NO_EPOCH

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EpochHistory) and other._entries == self._entries

    def __repr__(self) -> str:
        return f"EpochHistory({[(e.epoch, e.start_offset) for e in self._entries]})"

    def to_json(self) -> list[list[int]]:
        return [[e.epoch, e.start_offset] for e in self._entries]

    @classmethod
    def from_json(cls, data: Any) -> EpochHistory:
        """Parse ``to_json`` output; ``ValueError`` for anything else."""
        if data is None:
            return cls()
        if not isinstance(data, list):
            raise ValueError(f"bad epochs {data!r}")
        pairs: list[tuple[int, int]] = []
        for item in data:
            if not (isinstance(item, list) and len(item) == 2
                    and all(isinstance(v, int) and not isinstance(v, bool) for v in item)):
                raise ValueError(f"bad epochs entry {item!r}")
            pairs.append((item[0], item[1]))
        return cls(pairs)

    # ------------------------------------------------------------------ changes

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` writes from ``start_offset`` on. True when it changed.

        The same epoch again changes nothing (it keeps its first start). An entry at the
        start offset of the last one replaces it (that epoch wrote nothing). An older epoch,
        or a start before the last entry's, is a ``ValueError``: it would reorder history.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"epoch entry {epoch}:{start_offset} is negative")
        entries = self._entries
        if entries:
            last = entries[-1]
            if epoch == last.epoch:
                return False
            if epoch < last.epoch:
                raise ValueError(f"epoch {epoch} is older than the latest epoch {last.epoch}")
            if start_offset < last.start_offset:
                raise ValueError(f"epoch {epoch} would start at {start_offset}, before epoch "
                                 f"{last.epoch} (at {last.start_offset})")
            if start_offset == last.start_offset:
                entries.pop()
        entries.append(EpochEntry(epoch, start_offset))
        return True

    def truncate_from(self, offset: int) -> bool:
        """Drop the entries starting at or after ``offset`` (the log now ends there, so those
        epochs hold nothing). True when it changed."""
        entries = self._entries
        count = len(entries)
        while entries and entries[-1].start_offset >= offset:
            entries.pop()
        return len(entries) != count

    # ------------------------------------------------------------------ queries

    def lookup(self, epoch: int, log_end: int) -> EpochLookup:
        """KIP-279 ``OffsetsForLeaderEpoch`` on this history, for a log ending at ``log_end``
        (exclusive). See ``EpochLookup``."""
        entries = self._entries
        found = -1
        for index, entry in enumerate(entries):
            if entry.epoch <= epoch:
                found = index
            else:
                break
        if found < 0:
            return EpochLookup(NO_EPOCH, entries[0].start_offset if entries else log_end)
        end = entries[found + 1].start_offset if found + 1 < len(entries) else log_end
        return EpochLookup(entries[found].epoch, end)

    def covering(self, start: int, end: int) -> list[EpochEntry]:
        """The entries whose ranges overlap offsets ``[start, end)``: what a follower needs
        to label the records it copies."""
        entries = self._entries
        out: list[EpochEntry] = []
        for index, entry in enumerate(entries):
            next_start = entries[index + 1].start_offset if index + 1 < len(entries) else None
            if entry.start_offset >= end:
                break
            if next_start is not None and next_start <= start:
                continue
            out.append(entry)
        return out

    def adopt(self, entries: Sequence[EpochEntry]) -> bool:
        """A follower labels copied records with the leader's entries (those from
        ``covering``): entries newer than the latest are appended, older ones are already
        known. ``ValueError`` if an entry would reorder the history (the logs disagree: the
        caller starts a new fetch session, which truncates first). True when it changed."""
        changed = False
        for entry in entries:
            if entry.epoch > self.latest_epoch:
                changed |= self.assign(entry.epoch, entry.start_offset)
        return changed


def divergence_offset(local: EpochHistory, local_end: int, answer: EpochLookup) -> int:
    """Where a follower's log stops agreeing with the leader's (KIP-101 with KIP-279).

    The follower asked the leader for the end of its own latest epoch and got ``answer``.
    If the leader knows that epoch, the logs agree up to ``answer.end_offset``. If the
    leader's answer is an older epoch, the follower's later epochs never existed on the
    leader, so the follower also stops at its own end of ``answer.epoch``. Never beyond the
    local log end.

    >>> divergence_offset(EpochHistory([(0, 0)]), 1000, EpochLookup(0, 990))
    990
    >>> divergence_offset(EpochHistory([(0, 0), (2, 50)]), 80, EpochLookup(1, 70))
    50
    >>> divergence_offset(EpochHistory([(0, 0)]), 10, EpochLookup(0, 30))
    10
    """
    if answer.epoch == NO_EPOCH or answer.epoch >= local.latest_epoch:
        return min(answer.end_offset, local_end)
    own = local.lookup(answer.epoch, local_end)
    return min(answer.end_offset, own.end_offset, local_end)


@dataclass(frozen=True, slots=True)
class PeerEpoch:
    """What one replica said about itself (a REPLICA_EPOCH answer)."""

    broker_id: int
    leader: bool
    epoch: int


def choose_leader(answers: Iterable[PeerEpoch], known_epoch: int) -> PeerEpoch | None:
    """The current leader among the replicas' answers: a replica in leader role with the
    highest epoch, and not older than ``known_epoch`` (an older one is a deposed leader).
    Two leaders claiming the same highest epoch is an operator mistake: neither is chosen.

    >>> choose_leader([PeerEpoch(0, True, 1), PeerEpoch(2, True, 3)], 1)
    PeerEpoch(broker_id=2, leader=True, epoch=3)
    >>> choose_leader([PeerEpoch(0, True, 1)], 2) is None
    True
    """
    best: PeerEpoch | None = None
    tied = False
    for answer in answers:
        if not answer.leader or answer.epoch < known_epoch:
            continue
        if best is None or answer.epoch > best.epoch:
            best, tied = answer, False
        elif answer.epoch == best.epoch:
            tied = True
    return None if tied else best
