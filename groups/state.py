"""The consumer-group state machine: the states and the one table of legal transitions.

Owns: ``GroupState`` (each member documented with its *actions* and *transitions*, as
Kafka's ``ClassicGroupState`` does), ``VALID_PREVIOUS_STATES`` (target state -> the states
a group may move to it from) and ``IllegalStateError``. Everything that decides whether a
transition is legal lives here and nowhere else (h11 ``_state.py``, "Rule 1").

Skerry's JOIN rebalances at once (there is no join barrier and no leader-side assignment
round), so Kafka's PREPARING_REBALANCE and COMPLETING_REBALANCE collapse into the step
``Group.init_next_generation()`` takes from one state to the next.

Must not import: Twisted, the broker, the store, anything that does I/O or reads a clock.
``docs/groups.md`` carries the same table; ``tests/groups/test_docs.py`` checks they agree.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = ["GroupState", "VALID_PREVIOUS_STATES", "IllegalStateError", "check_transition"]


class IllegalStateError(Exception):
    """A transition the table does not allow was attempted: a bug in Skerry, never a
    client error (client mistakes are refused with ``broker.errors`` before any move)."""


class GroupState(enum.Enum):
    """The states of one (group, topic) pair."""

    EMPTY = "empty"
    """The group has no members. It keeps its generation, assignor and committed offsets.

    action: JOIN by a new member starts the next generation (generation + 1).
            SYNC/HEARTBEAT/LEAVE/COMMIT are refused (unknown member).
            Admin commands (delete, reset offsets, admin commit) are allowed.
    transition: a member joins -> STABLE
                the group is deleted by an admin -> DEAD
    """

    STABLE = "stable"
    """The group has at least one member and an assignment for the current generation.

    action: JOIN by a current member refreshes its liveness, no rebalance.
            JOIN by a new member, LEAVE, session expiry and a partition-count change start
            the next generation (generation + 1) with a fresh assignment.
            SYNC/HEARTBEAT/COMMIT from a current member with the current generation are
            served and refresh its liveness.
            Admin commands that change offsets or delete the group are refused.
    transition: a membership or partition-count change leaves members -> STABLE
                the last member leaves or expires -> EMPTY
    """

    DEAD = "dead"
    """The group was deleted by an admin; the coordinator has forgotten it and its offsets.

    action: none; the object is dropped. A later JOIN creates a new group at generation 1.
    transition: none
    """


VALID_PREVIOUS_STATES: Mapping[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.STABLE}),
    GroupState.STABLE: frozenset({GroupState.EMPTY, GroupState.STABLE}),
    GroupState.DEAD: frozenset({GroupState.EMPTY}),
}
"""Target state -> the states from which a group may move to it (Kafka's
``validPreviousStates``)."""


def check_transition(name: str, current: GroupState, target: GroupState) -> None:
    """Raise ``IllegalStateError`` unless ``current -> target`` is in the table."""
    allowed = VALID_PREVIOUS_STATES[target]
    if current not in allowed:
        expected = ", ".join(sorted(state.value for state in allowed)) or "nothing"
        raise IllegalStateError(
            f"group {name} should be in one of {{{expected}}} before moving to "
            f"{target.value}; is in {current.value}"
        )
