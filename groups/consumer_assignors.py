"""Server-side assignors of KIP-848 consumer groups: pure functions from (members and their
subscribed topics, partitions per topic, the previous target assignment) to the next target
assignment. ``group.remote.assignor`` picks one by name.

Owns: ``assign_uniform`` (Kafka's default ``uniform``: balanced, then sticky),
``assign_range`` (Kafka's server-side ``range``: per topic, contiguous blocks), the
``CONSUMER_ASSIGNORS`` registry and ``DEFAULT_CONSUMER_ASSIGNOR``.

Topics are keys of any sortable type: the coordinator passes topic ids (``uuid.UUID``),
the examples below use names. Every assignor sorts members (by member id), topics and
partitions before it looks at them, so the output never depends on input order; every
member gets an entry (``{}`` when it receives nothing); a partition of a topic at least one
member subscribes to goes to exactly one such member; nothing goes to a member that does
not subscribe to its topic. The worked examples are doctests
(``tests/groups/test_consumer_assignors.py`` runs them).

Must not import: Twisted, ``broker``, anything with state, I/O or a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from typing import Any

__all__ = [
    "TargetAssignment",
    "ConsumerAssignor",
    "assign_uniform",
    "assign_range",
    "CONSUMER_ASSIGNORS",
    "DEFAULT_CONSUMER_ASSIGNOR",
]

TopicKey = Any
"""A topic: a ``uuid.UUID`` in the coordinator, a name in examples; sortable, hashable."""

TargetAssignment = dict[str, dict[TopicKey, list[int]]]
"""``{member_id: {topic: sorted partitions}}``; topics with no partition are left out."""

ConsumerAssignor = Callable[
    [Mapping[str, Collection[Hashable]], Mapping[Hashable, int],
     Mapping[str, Mapping[Hashable, Collection[int]]]],
    TargetAssignment,
]
"""``assignor(subscriptions, partitions, previous) -> target``: ``subscriptions`` maps each
member to the topics it subscribes to, ``partitions`` each existing topic to its partition
count, ``previous`` is the current target (ignored by ``range``)."""

_NONE: Mapping[str, Mapping[Hashable, Collection[int]]] = {}


def _shape(owned: Mapping[str, set[tuple[Any, int]]]) -> TargetAssignment:
    out: TargetAssignment = {}
    for member in sorted(owned):
        topics: dict[Any, list[int]] = {}
        for topic, partition in sorted(owned[member]):
            topics.setdefault(topic, []).append(partition)
        out[member] = topics
    return out


def assign_uniform(
    subscriptions: Mapping[str, Collection[Hashable]],
    partitions: Mapping[Hashable, int],
    previous: Mapping[str, Mapping[Hashable, Collection[int]]] = _NONE,
) -> TargetAssignment:
    """Balanced first, then sticky: members keep what they held in ``previous`` wherever
    balance allows, and with identical subscriptions every member's partition count is
    within one of every other's (Kafka's ``uniform``, the default).

    Rules, in order (ties always broken by member id, then topic, then partition):

    1. Keep: every member keeps the partitions it held in ``previous`` that still exist and
       that it still subscribes to (a partition claimed twice stays with the first member).
    2. Place: each partition nobody kept goes to the eligible member (one subscribing to
       its topic) with the fewest partitions; the partitions with the fewest eligible
       members are placed first.
    3. Balance: while some member holds a partition that an eligible member with at least
       two fewer partitions could take, the most loaded member gives its highest such
       partition to the least loaded eligible member. Each move lowers the sum of squared
       counts, so this ends; with identical subscriptions it ends within one, having moved
       only partitions that had to move.

    Worked example: C0 held ``t0: [0, 1, 2]`` and C1 ``t0: [3, 4, 5]``; C2 joins. Two
    partitions move, one from each, and everything else stays put::

        C0: t0 [0, 1]   C1: t0 [3, 4]   C2: t0 [2, 5]

    >>> subs = {"c0": ["t0"], "c1": ["t0"], "c2": ["t0"]}
    >>> assign_uniform(subs, {"t0": 6}, {"c0": {"t0": [0, 1, 2]}, "c1": {"t0": [3, 4, 5]}})
    {'c0': {'t0': [0, 1]}, 'c1': {'t0': [3, 4]}, 'c2': {'t0': [2, 5]}}

    C1 dies: C0 and C2 keep everything and share C1's partitions::

    >>> assign_uniform({"c0": ["t0"], "c2": ["t0"]}, {"t0": 6},
    ...                {"c0": {"t0": [0, 1]}, "c1": {"t0": [3, 4]}, "c2": {"t0": [2, 5]}})
    {'c0': {'t0': [0, 1, 3]}, 'c2': {'t0': [2, 4, 5]}}

    Different subscriptions: C1 alone reads t1, so balance is as even as they allow::

    >>> assign_uniform({"c0": ["t0"], "c1": ["t0", "t1"]}, {"t0": 2, "t1": 2})
    {'c0': {'t0': [0, 1]}, 'c1': {'t1': [0, 1]}}
    """
    members = sorted(set(subscriptions))
    eligible: dict[Any, list[str]] = {}
    for member in members:
        for topic in subscriptions[member]:
            if topic in partitions:
                eligible.setdefault(topic, []).append(member)
    owned: dict[str, set[tuple[Any, int]]] = {member: set() for member in members}
    taken: set[tuple[Any, int]] = set()
    for member in members:
        wanted = set(subscriptions[member])
        for topic, held in sorted(previous.get(member, {}).items(), key=lambda kv: kv[0]):
            if topic not in wanted or topic not in partitions:
                continue
            for partition in sorted(set(held)):
                key = (topic, partition)
                if 0 <= partition < partitions[topic] and key not in taken:
                    owned[member].add(key)
                    taken.add(key)
    free = [(len(eligible[topic]), topic, partition)
            for topic in sorted(eligible) for partition in range(partitions[topic])
            if (topic, partition) not in taken]
    for _, topic, partition in sorted(free):
        receiver = min(eligible[topic], key=lambda m: (len(owned[m]), m))
        owned[receiver].add((topic, partition))
    moved = True
    while moved:
        moved = False
        fewest = min(len(owned[m]) for m in members)
        for donor in sorted(members, key=lambda m: (-len(owned[m]), m)):
            if len(owned[donor]) - fewest < 2:
                break  # no member anywhere has two fewer: no move left
            for topic, partition in sorted(owned[donor], reverse=True):
                receivers = [m for m in eligible[topic]
                             if len(owned[m]) <= len(owned[donor]) - 2]
                if receivers:
                    receiver = min(receivers, key=lambda m: (len(owned[m]), m))
                    owned[donor].remove((topic, partition))
                    owned[receiver].add((topic, partition))
                    moved = True
                    break
            if moved:
                break
    return _shape(owned)


def assign_range(
    subscriptions: Mapping[str, Collection[Hashable]],
    partitions: Mapping[Hashable, int],
    previous: Mapping[str, Mapping[Hashable, Collection[int]]] = _NONE,
) -> TargetAssignment:
    """Per topic, the members subscribing to it (sorted by id) get contiguous blocks of
    ``floor(P/n)`` partitions, the first ``P mod n`` of them one more (Kafka's ``range``).
    Members with the same subscription get the same partition numbers of every topic
    (co-partitioning, for joins). ``previous`` is ignored: a member joining or leaving
    shifts the blocks, so more partitions move than with ``uniform``.

    Worked example, C0 and C1 on t0 (3 partitions) and t1 (3 partitions), C2 on t1 only::

        C0: t0 [0, 1]  t1 [0]   C1: t0 [2]  t1 [1]   C2: t1 [2]

    >>> assign_range({"c1": ["t0", "t1"], "c0": ["t0", "t1"], "c2": ["t1"]},
    ...              {"t0": 3, "t1": 3})
    {'c0': {'t0': [0, 1], 't1': [0]}, 'c1': {'t0': [2], 't1': [1]}, 'c2': {'t1': [2]}}
    """
    members = sorted(set(subscriptions))
    owned: dict[str, set[tuple[Any, int]]] = {member: set() for member in members}
    for topic in sorted(partitions):
        readers = [m for m in members if topic in set(subscriptions[m])]
        if not readers:
            continue
        quota, extra = divmod(partitions[topic], len(readers))
        start = 0
        for index, member in enumerate(readers):
            size = quota + (1 if index < extra else 0)
            owned[member].update((topic, p) for p in range(start, start + size))
            start += size
    return _shape(owned)


CONSUMER_ASSIGNORS: Mapping[str, ConsumerAssignor] = {
    "uniform": assign_uniform,
    "range": assign_range,
}
"""The names ``group.remote.assignor`` (the heartbeat's ServerAssignor) accepts."""

DEFAULT_CONSUMER_ASSIGNOR = "uniform"
"""The assignor of a group none of whose members names one (Kafka's default too)."""
