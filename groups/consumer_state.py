"""The state machines of a KIP-848 consumer group (Kafka's ``group.protocol=consumer``): the
group's states, each member's reconciliation states, the tables of legal transitions and
the reconciliation rules, all in this one file.

Owns: ``ConsumerGroupState`` and ``CONSUMER_GROUP_VALID_PREVIOUS_STATES`` (after Kafka's
``ConsumerGroup.ConsumerGroupState``), ``MemberState`` and ``MEMBER_VALID_PREVIOUS_STATES``
(after Kafka's ``MemberState``), ``RECONCILIATION_RULES`` (what one heartbeat does to a
member in each state: Kafka's ``CurrentAssignmentBuilder``, written as a table) and the two
checks ``check_group_transition`` / ``check_member_transition``. An illegal move raises
``groups.state.IllegalStateError``, the bug class every Skerry machine raises.

The group state is never set by hand: ``ConsumerGroup.update_state`` derives it from the
epochs (as Kafka's ``maybeUpdateGroupState``) and then moves through the table, so a
derivation that would break the table is caught as a bug.

Must not import: Twisted, ``broker``, anything that does I/O or reads a clock.
``docs/groups.md`` ("Consumer groups (KIP-848)") carries the same tables;
``tests/groups/test_consumer_docs.py`` checks they agree.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from groups.state import IllegalStateError

__all__ = [
    "ConsumerGroupState",
    "CONSUMER_GROUP_VALID_PREVIOUS_STATES",
    "MemberState",
    "MEMBER_VALID_PREVIOUS_STATES",
    "ReconciliationRule",
    "RECONCILIATION_RULES",
    "IllegalStateError",
    "check_group_transition",
    "check_member_transition",
    "JOIN_EPOCH",
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
]

JOIN_EPOCH = 0
"""The member epoch of a heartbeat that joins (or rejoins after being fenced)."""
LEAVE_EPOCH = -1
"""The member epoch of a heartbeat that leaves the group for good."""
STATIC_LEAVE_EPOCH = -2
"""The member epoch of a static member's heartbeat that leaves *temporarily*: it keeps its
assignment until its session timeout, so a restart with the same ``group.instance.id``
takes it back without a rebalance."""


class ConsumerGroupState(enum.Enum):
    """The states of one consumer group. The values are the names Kafka's
    ConsumerGroupDescribe and ListGroups report."""

    EMPTY = "Empty"
    """The group has no members. It keeps its group epoch and its committed offsets.

    action: a heartbeat with epoch 0 adds a member (group epoch + 1). Other heartbeats:
            GROUP_ID_NOT_FOUND for an unknown group, UNKNOWN_MEMBER_ID here.
            OffsetCommit with member epoch -1 (a tool, not a member) is accepted.
    transition: a member joins -> ASSIGNING
                the group is deleted by an admin -> DEAD
    """

    ASSIGNING = "Assigning"
    """The group epoch moved ahead of the assignment epoch: a member joined, left or changed
    its subscription, or a subscribed topic changed. Skerry computes the new target
    assignment in the same operation, so this state is never seen between requests; it
    exists so that every epoch bump passes the table.

    action: compute the target assignment with the group's assignor (assignment epoch :=
            group epoch).
    transition: target computed, some member not yet reconciled -> RECONCILING
                target computed, every member already on it -> STABLE
                the last member leaves in the same operation -> EMPTY
    """

    RECONCILING = "Reconciling"
    """A target assignment exists and at least one member is not on it yet: it still has
    partitions to revoke (UNREVOKED_PARTITIONS), waits for partitions another member still
    holds (UNRELEASED_PARTITIONS), has not heartbeated since the target changed, or is a
    static member away (epoch -2).

    action: each heartbeat reconciles its member one step (RECONCILATION_RULES).
            OffsetCommit from a member at its current member epoch is accepted.
    transition: the last member reaches the target -> STABLE
                the group epoch is bumped -> ASSIGNING
                the last member leaves -> EMPTY
    """

    STABLE = "Stable"
    """Every member is STABLE at the assignment epoch: every partition of the target is
    owned by its target member, and by nobody else.

    action: heartbeats refresh sessions and answer the member's epoch; nothing moves.
    transition: a membership, subscription or topic change -> ASSIGNING
                a static member leaves temporarily (epoch -2) -> RECONCILING
                the last member leaves -> EMPTY
    """

    DEAD = "Dead"
    """The group is gone (deleted by an admin while empty); the coordinator forgets it.

    action: none; the object is dropped. A later heartbeat with epoch 0 creates a new
            group at group epoch 1.
    transition: none
    """


CONSUMER_GROUP_VALID_PREVIOUS_STATES: Mapping[ConsumerGroupState,
                                              frozenset[ConsumerGroupState]] = {
    ConsumerGroupState.EMPTY: frozenset({ConsumerGroupState.ASSIGNING,
                                         ConsumerGroupState.RECONCILING,
                                         ConsumerGroupState.STABLE}),
    ConsumerGroupState.ASSIGNING: frozenset({ConsumerGroupState.EMPTY,
                                             ConsumerGroupState.RECONCILING,
                                             ConsumerGroupState.STABLE}),
    ConsumerGroupState.RECONCILING: frozenset({ConsumerGroupState.ASSIGNING,
                                               ConsumerGroupState.STABLE}),
    ConsumerGroupState.STABLE: frozenset({ConsumerGroupState.ASSIGNING,
                                          ConsumerGroupState.RECONCILING}),
    ConsumerGroupState.DEAD: frozenset({ConsumerGroupState.EMPTY}),
}
"""Target state -> the states from which a consumer group may move to it."""


class MemberState(enum.Enum):
    """Where one member is in its reconciliation towards its target assignment (Kafka's
    ``MemberState``; the values are Kafka's names)."""

    STABLE = "STABLE"
    """The member owns exactly what the coordinator gave it at its member epoch; when that
    epoch is the assignment epoch, it is on the target.

    action: a heartbeat with a newer target starts the next step (RECONCILIATION_RULES).
    transition: the new target takes partitions away that the member still owns
                -> UNREVOKED_PARTITIONS
                the new target gives partitions another member still holds
                -> UNRELEASED_PARTITIONS
                anything else -> STABLE at the assignment epoch
    """

    UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
    """The member was asked to give partitions up and has not confirmed yet. It keeps its
    member epoch; the partitions stay *its* (nobody else may be given them) until a
    heartbeat's owned partitions no longer list them. A rebalance timer runs: a member
    that has not revoked within its rebalance timeout is fenced.

    action: a heartbeat still listing a revoked partition (or not listing owned
            partitions at all) changes nothing; one that no longer lists any moves on.
    transition: revocation confirmed -> STABLE or UNRELEASED_PARTITIONS at the assignment
                epoch, or UNREVOKED_PARTITIONS again if the target moved meanwhile
    """

    UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"
    """The member is at the assignment epoch but some of its target partitions are still
    held by another member that has not revoked them yet.

    action: each heartbeat gives it whichever of those partitions are free by now.
    transition: all of them free -> STABLE
                the target moved and takes partitions away -> UNREVOKED_PARTITIONS
    """


MEMBER_VALID_PREVIOUS_STATES: Mapping[MemberState, frozenset[MemberState]] = {
    MemberState.STABLE: frozenset(MemberState),
    MemberState.UNREVOKED_PARTITIONS: frozenset(MemberState),
    MemberState.UNRELEASED_PARTITIONS: frozenset(MemberState),
}
"""Target member state -> the states a member may move to it from. Every move is legal (the
rules below decide which one happens); the table exists so that a new state added later
must be placed in it."""


class ReconciliationRule(tuple[MemberState, str, MemberState, str]):
    """One row: (state, condition, next state, what the member's epoch becomes)."""

    __slots__ = ()

    @property
    def state(self) -> MemberState:
        return self[0]

    @property
    def condition(self) -> str:
        return self[1]

    @property
    def next_state(self) -> MemberState:
        return self[2]

    @property
    def epoch(self) -> str:
        return self[3]


def _rule(state: MemberState, condition: str, next_state: MemberState,
          epoch: str) -> ReconciliationRule:
    return ReconciliationRule((state, condition, next_state, epoch))


_S, _UR, _UL = (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
                MemberState.UNRELEASED_PARTITIONS)

RECONCILIATION_RULES: tuple[ReconciliationRule, ...] = (
    _rule(_S, "member epoch = assignment epoch", _S, "kept"),
    _rule(_S, "target drops partitions the member owns", _UR, "kept"),
    _rule(_S, "target adds partitions, all free", _S, "assignment epoch"),
    _rule(_S, "target adds partitions, some still held by another member", _UL,
          "assignment epoch"),
    _rule(_UR, "owned partitions still list a revoked one, or are not sent", _UR, "kept"),
    _rule(_UR, "revocation confirmed, remaining target partitions free", _S,
          "assignment epoch"),
    _rule(_UR, "revocation confirmed, some target partitions still held", _UL,
          "assignment epoch"),
    _rule(_UL, "every target partition free now", _S, "assignment epoch"),
    _rule(_UL, "some target partitions still held", _UL, "assignment epoch"),
    _rule(_UL, "target moved and drops partitions the member owns", _UR, "kept"),
)
"""What one heartbeat does to its member (``groups.consumer_group.reconcile``). "Free"
means no member holds the partition as assigned or pending revocation; "kept" means the
member epoch does not change. Partitions being added are never given while another member
holds them: that is the rule that keeps every partition with at most one owner."""


def check_group_transition(name: str, current: ConsumerGroupState,
                           target: ConsumerGroupState) -> None:
    """Raise ``IllegalStateError`` unless ``current -> target`` is in the group table.
    Staying in the same state is not a move and is always allowed."""
    if current is target:
        return
    allowed = CONSUMER_GROUP_VALID_PREVIOUS_STATES[target]
    if current not in allowed:
        expected = ", ".join(sorted(state.value for state in allowed)) or "nothing"
        raise IllegalStateError(
            f"consumer group {name} should be in one of {{{expected}}} before moving to "
            f"{target.value}; is in {current.value}")


def check_member_transition(name: str, current: MemberState, target: MemberState) -> None:
    """Raise ``IllegalStateError`` unless a member may move ``current -> target``."""
    if current not in MEMBER_VALID_PREVIOUS_STATES[target]:
        raise IllegalStateError(f"member {name} may not move from {current.value} to "
                                f"{target.value}")
