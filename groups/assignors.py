"""Partition assignors: pure functions from (members, partition count, previous assignment)
to a new assignment.

Owns: ``assign_round_robin``, ``assign_range`` (the spec's two, exact), ``assign_sticky``
(additive: balanced first, then as few moves as possible, after Kafka's StickyAssignor),
the ``ASSIGNORS`` registry the JOIN ``assignor=`` option names, and ``DEFAULT_ASSIGNOR``.

Every assignor sorts its members (by consumer id) and partitions before it looks at them,
so the output never depends on the order of its inputs (Kafka's ``RangeAssignor`` and
``RoundRobinAssignor`` do the same). Every member gets an entry, ``[]`` when it receives
nothing; every partition goes to exactly one member when there is at least one member.
The worked examples below are doctests (``tests/groups/test_assignors.py`` runs them).

Must not import: Twisted, the broker, anything with state, I/O or a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

__all__ = [
    "Assignor",
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR",
    "assign_round_robin",
    "assign_range",
    "assign_sticky",
    "assignor_choices",
]

Assignment = dict[str, list[int]]
Assignor = Callable[[Collection[str], int, Mapping[str, Collection[int]]], Assignment]
"""``assignor(members, partitions, previous) -> {member_id: sorted partitions}``."""

_NO_PREVIOUS: Mapping[str, Collection[int]] = {}


def assign_round_robin(
    members: Collection[str], partitions: int,
    previous: Mapping[str, Collection[int]] = _NO_PREVIOUS,
) -> Assignment:
    """Partition ``p`` goes to the member at position ``p mod n`` (members sorted by id).

    ``previous`` is ignored. Worked example, 3 members and 7 partitions::

        C0: [0, 3, 6]  C1: [1, 4]  C2: [2, 5]

    >>> assign_round_robin(["c2", "c0", "c1"], 7)
    {'c0': [0, 3, 6], 'c1': [1, 4], 'c2': [2, 5]}
    >>> assign_round_robin(["c0", "c1", "c2"], 2)
    {'c0': [0], 'c1': [1], 'c2': []}
    """
    ordered = sorted(set(members))
    result: Assignment = {member: [] for member in ordered}
    if ordered:
        for partition in range(partitions):
            result[ordered[partition % len(ordered)]].append(partition)
    return result


def assign_range(
    members: Collection[str], partitions: int,
    previous: Mapping[str, Collection[int]] = _NO_PREVIOUS,
) -> Assignment:
    """Contiguous blocks of ``floor(P/n)`` partitions; the first ``P mod n`` members (sorted
    by id) get one extra.

    ``previous`` is ignored. Worked example, 3 members and 7 partitions
    (``7 = 3 * 2 + 1``, so C0 gets one extra)::

        C0: [0, 1, 2]  C1: [3, 4]  C2: [5, 6]

    >>> assign_range(["c2", "c0", "c1"], 7)
    {'c0': [0, 1, 2], 'c1': [3, 4], 'c2': [5, 6]}
    >>> assign_range(["c0", "c1", "c2"], 2)
    {'c0': [0], 'c1': [1], 'c2': []}
    """
    ordered = sorted(set(members))
    result: Assignment = {}
    if not ordered:
        return result
    quota, extra = divmod(partitions, len(ordered))
    start = 0
    for index, member in enumerate(ordered):
        size = quota + (1 if index < extra else 0)
        result[member] = list(range(start, start + size))
        start += size
    return result


def assign_sticky(
    members: Collection[str], partitions: int,
    previous: Mapping[str, Collection[int]] = _NO_PREVIOUS,
) -> Assignment:
    """Balanced first, then sticky: every member's count is within one of every other's,
    and, among all balanced assignments, as many partitions as possible stay with the member
    that held them in ``previous``.

    Rules, in order (all ties broken by consumer id, so the result is deterministic):

    1. ``previous`` is cleaned: partitions ``>= P``, members that are gone and second claims
       on a partition (the member first by id keeps it) are dropped.
    2. Quotas: ``floor(P/n)`` each; the ``P mod n`` extra slots go to the members that held
       the most partitions before. This choice keeps the most partitions in place.
    3. A member over its quota keeps its lowest-numbered partitions up to the quota.
    4. The freed and never-owned partitions, lowest first, fill the members below their
       quota, in consumer-id order.

    With no ``previous`` this is the range assignment. Worked example: C0 held
    ``[0, 1, 2]`` and C1 held ``[3, 4, 5]``; C2 joins (6 partitions, quota 2 each). C0 and
    C1 keep two each, C2 gets the two they gave up, and only two partitions move::

        C0: [0, 1]  C1: [3, 4]  C2: [2, 5]

    >>> assign_sticky(["c0", "c1", "c2"], 6, {"c0": [0, 1, 2], "c1": [3, 4, 5]})
    {'c0': [0, 1], 'c1': [3, 4], 'c2': [2, 5]}

    C1 then leaves: C0 and C2 keep everything they had and share C1's partitions::

    >>> assign_sticky(["c0", "c2"], 6, {"c0": [0, 1], "c1": [3, 4], "c2": [2, 5]})
    {'c0': [0, 1, 3], 'c2': [2, 4, 5]}
    """
    ordered = sorted(set(members))
    result: Assignment = {}
    if not ordered:
        return result
    claimed: set[int] = set()
    held: dict[str, list[int]] = {}
    for member in ordered:
        mine = [p for p in sorted(set(previous.get(member, ()))) if 0 <= p < partitions]
        held[member] = [p for p in mine if p not in claimed]
        claimed.update(held[member])
    quota, extra = divmod(partitions, len(ordered))
    by_holding = sorted(ordered, key=lambda member: (-len(held[member]), member))
    target = {member: quota + (1 if rank < extra else 0) for rank, member in enumerate(by_holding)}
    taken: set[int] = set()
    for member in ordered:
        result[member] = held[member][: target[member]]
        taken.update(result[member])
    free = iter(p for p in range(partitions) if p not in taken)
    for member in ordered:
        mine = result[member]
        while len(mine) < target[member]:
            mine.append(next(free))
        mine.sort()
    return result


ASSIGNORS: Mapping[str, Assignor] = {
    "round_robin": assign_round_robin,
    "range": assign_range,
    "sticky": assign_sticky,
}
"""The names JOIN's ``assignor=`` option accepts."""

DEFAULT_ASSIGNOR = "round_robin"
"""A new group's assignor when its first JOIN names none (spec: Consumer groups)."""


def assignor_choices() -> str:
    """``"round_robin, range or sticky"``: the accepted names, for error messages."""
    names = list(ASSIGNORS)
    return ", ".join(names[:-1]) + " or " + names[-1]
