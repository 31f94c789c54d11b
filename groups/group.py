"""One consumer group on one topic: members, generation, assignment, fencing.

Owns: ``Member`` and ``Group``. ``Group.transition_to`` is the only way to change ``state``
(checked against ``groups.state``), ``Group.init_next_generation`` is the only way to
change ``generation`` (it increments, reassigns, then transitions, like Kafka's
``ClassicGroup.initNextGeneration``), and ``Group.validate_member`` is the one fencing check
every member-scoped request goes through (Kafka's ``validateOffsetCommit``).

Must not import: Twisted, the broker's shell, anything that does I/O or reads a clock. Time
arrives as ``now_ms`` arguments in ``groups.coordinator``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR
from groups.errors import PartitionNotOwned, StaleGeneration, UnknownMember
from groups.state import GroupState, check_transition

__all__ = ["Member", "Group"]


@dataclass(slots=True)
class Member:
    """A consumer in a group. ``deadline_ms`` and ``token`` describe its armed session timer
    (monotonic milliseconds; a timer firing with another token is stale) and are not
    persisted: a restored member gets a fresh session timeout."""

    member_id: str
    session_timeout_ms: int
    deadline_ms: int = 0
    token: int = 0


class Group:
    """The state of one (group, topic) pair. Mutated only by ``groups.coordinator``."""

    __slots__ = ("group", "topic", "state", "generation", "assignor", "partitions",
                 "members", "assignment")

    def __init__(self, group: str, topic: str, *, assignor: str = DEFAULT_ASSIGNOR,
                 generation: int = 0, partitions: int = 0, members: Iterable[Member] = (),
                 assignment: Mapping[str, Sequence[int]] | None = None) -> None:
        self.group = group
        self.topic = topic
        self.assignor = assignor
        self.generation = generation
        self.partitions = partitions  # the partition count the assignment was computed for
        self.members: dict[str, Member] = {member.member_id: member for member in members}
        self.assignment: dict[str, list[int]] = {
            member_id: sorted(assignment.get(member_id, ())) if assignment else []
            for member_id in self.members
        }
        self.state = GroupState.STABLE if self.members else GroupState.EMPTY

    @property
    def name(self) -> str:
        """``group/topic``, for log and error messages."""
        return f"{self.group}/{self.topic}"

    def __repr__(self) -> str:
        return (f"Group({self.name!r}, state={self.state.value}, generation={self.generation}, "
                f"assignor={self.assignor}, assignment={self.assignment})")

    def transition_to(self, target: GroupState) -> None:
        """Move to ``target``; ``IllegalStateError`` (state unchanged) if the table forbids it."""
        check_transition(self.name, self.state, target)
        self.state = target

    def init_next_generation(self, partitions: int) -> None:
        """Start the next generation over the current members and ``partitions``.

        Increments the generation, recomputes the assignment with the group's assignor (the
        current assignment is the sticky assignor's starting point), then moves to STABLE
        (members left) or EMPTY (none). The transition is checked first, so an illegal one
        raises ``IllegalStateError`` with nothing changed.
        """
        target = GroupState.STABLE if self.members else GroupState.EMPTY
        check_transition(self.name, self.state, target)
        self.generation += 1
        self.partitions = partitions
        self.assignment = ASSIGNORS[self.assignor](list(self.members), partitions,
                                                   self.assignment)
        self.transition_to(target)

    def validate_member(self, member_id: str, generation: int, *,
                        partition: int | None = None) -> Member:
        """The fencing check of SYNC, HEARTBEAT, LEAVE and COMMIT.

        Raises ``UnknownMember`` when ``member_id`` is not in the group, ``StaleGeneration``
        when ``generation`` is not the current one and, when ``partition`` is given,
        ``PartitionNotOwned`` unless the member holds it in this generation. All three are
        GENERATION_MISMATCH on the wire. Returns the member.
        """
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMember(f"{member_id} is not a member of group {self.group} "
                                f"on topic {self.topic}; join first")
        if generation != self.generation:
            raise StaleGeneration(f"generation {generation} is not the current generation "
                                  f"{self.generation} of group {self.group} on topic "
                                  f"{self.topic}; rejoin")
        if partition is not None and partition not in self.assignment.get(member_id, ()):
            raise PartitionNotOwned(f"partition {partition} of topic {self.topic} is not "
                                    f"assigned to {member_id} in generation {generation}")
        return member

    def assigned(self, member_id: str) -> list[int]:
        """A copy of the member's partitions in the current generation."""
        return list(self.assignment.get(member_id, ()))
