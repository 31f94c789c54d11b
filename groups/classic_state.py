"""The Kafka classic consumer-group state machine: the states and the one table of legal
transitions.

Owns: ``ClassicGroupState`` (each member documented with its *actions* and *transitions*,
after Kafka's ``ClassicGroupState``), ``CLASSIC_VALID_PREVIOUS_STATES`` (target state ->
the states a group may move to it from) and ``check_classic_transition``. Everything that
decides whether a transition is legal lives here and nowhere else (h11 ``_state.py``,
"Rule 1"). An illegal transition raises ``groups.state.IllegalStateError``, the same bug
class V1's machine raises, so the shell catches one kind of bug.

The values are the state names DescribeGroups v0 reports (Kafka 0.10 spelled
COMPLETING_REBALANCE "AwaitingSync").

Must not import: Twisted, the broker, the stores, anything that does I/O or reads a clock.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from groups.state import IllegalStateError

__all__ = [
    "ClassicGroupState",
    "CLASSIC_VALID_PREVIOUS_STATES",
    "IllegalStateError",
    "check_classic_transition",
]


class ClassicGroupState(enum.Enum):
    """The states of one Kafka group (keyed by group id, all topics together)."""

    EMPTY = "Empty"
    """The group has no members; it keeps its generation (and its offsets live on in the
    shared offsets store).

    action: JoinGroup with an empty member id adds a member and starts a rebalance.
            JoinGroup with a member id, SyncGroup, Heartbeat, LeaveGroup: unknown member.
            OffsetCommit with generation -1 (a simple consumer) is stored.
            OffsetFetch is served. An admin may delete the group.
    transition: a member joins -> PREPARING_REBALANCE
                the group is deleted by an admin -> DEAD
    """

    PREPARING_REBALANCE = "PreparingRebalance"
    """A rebalance is under way: the join barrier waits for every known member to rejoin.

    action: JoinGroup is held until the barrier completes (all known members have
            rejoined, or the rebalance timeout fires and removes those that have not).
            Heartbeat refreshes the session and answers REBALANCE_IN_PROGRESS.
            SyncGroup answers REBALANCE_IN_PROGRESS.
            OffsetCommit from a member of the current generation is stored (members
            commit what they consumed before rejoining).
            LeaveGroup and session expiry remove the member, which may complete the
            barrier.
    transition: the barrier completes with members -> AWAITING_SYNC (generation + 1)
                the barrier completes without members -> EMPTY (generation + 1)
                the group is deleted -> DEAD
    """

    AWAITING_SYNC = "AwaitingSync"
    """The barrier completed: every member has its JoinGroup answer for the new generation
    and the coordinator waits for the leader's assignment (Kafka: COMPLETING_REBALANCE).

    action: SyncGroup from a follower is held until the leader's arrives.
            SyncGroup from the leader stores the assignment and answers every held one.
            Heartbeat, OffsetCommit: REBALANCE_IN_PROGRESS.
            JoinGroup with unchanged protocols gets the current generation again; a
            new member, changed protocols, LeaveGroup or session expiry start a rebalance
            (held SyncGroups are answered REBALANCE_IN_PROGRESS).
    transition: the leader's SyncGroup arrives -> STABLE
                a membership change -> PREPARING_REBALANCE
                the group is deleted -> DEAD
    """

    STABLE = "Stable"
    """Every member has the leader's assignment for the current generation.

    action: Heartbeat and OffsetCommit from a current member are served and refresh its
            session. SyncGroup returns the member's assignment again.
            JoinGroup by a follower with unchanged protocols returns the current
            generation; a new member, the leader, changed protocols, LeaveGroup or session
            expiry start a rebalance.
    transition: a membership change or the leader rejoining -> PREPARING_REBALANCE
                the group is deleted -> DEAD
    """

    DEAD = "Dead"
    """The group is gone; the coordinator forgets it (DescribeGroups reports unknown
    groups as Dead too).

    action: none; the object is dropped. A later JoinGroup creates a new group.
    transition: none (DEAD -> DEAD is tolerated, as in Kafka)
    """


CLASSIC_VALID_PREVIOUS_STATES: Mapping[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.PREPARING_REBALANCE: frozenset({
        ClassicGroupState.EMPTY,
        ClassicGroupState.AWAITING_SYNC,
        ClassicGroupState.STABLE,
    }),
    ClassicGroupState.AWAITING_SYNC: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.AWAITING_SYNC}),
    ClassicGroupState.DEAD: frozenset(ClassicGroupState),
}
"""Target state -> the states from which a group may move to it (Kafka's
``validPreviousStates``, the same table)."""


def check_classic_transition(name: str, current: ClassicGroupState,
                             target: ClassicGroupState) -> None:
    """Raise ``IllegalStateError`` unless ``current -> target`` is in the table."""
    allowed = CLASSIC_VALID_PREVIOUS_STATES[target]
    if current not in allowed:
        expected = ", ".join(sorted(state.value for state in allowed))
        raise IllegalStateError(
            f"group {name} should be in one of {{{expected}}} before moving to "
            f"{target.value}; is in {current.value}"
        )
