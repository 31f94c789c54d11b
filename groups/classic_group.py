"""One Kafka classic consumer group: its members, generation, protocol, leader and the
leader's assignment; the fencing check.

Owns: ``ClassicMember`` and ``ClassicGroup``. ``ClassicGroup.transition_to`` is the only way
to change ``state`` (checked against ``groups.classic_state``),
``ClassicGroup.init_next_generation`` the only way to change ``generation`` (it increments,
selects the protocol, then transitions, like Kafka's ``ClassicGroup.initNextGeneration``),
and ``ClassicGroup.validate_member`` the one fencing check member-scoped requests go
through (Kafka's ``validateOffsetCommit``/``validateSyncGroup``). Protocol metadata and
assignments are opaque bytes: the broker never decodes them.

Must not import: Twisted, ``broker``, anything that does I/O or reads a clock. Time arrives
as ``now_ms`` arguments in ``groups.classic``, which alone mutates these objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from groups.classic_state import ClassicGroupState, check_classic_transition
from groups.kafka_errors import FencedInstanceId, IllegalGeneration, UnknownMemberId

__all__ = ["Protocol", "ClassicMember", "ClassicGroup"]

Protocol = tuple[str, bytes]
"""``(name, metadata)``: one assignment strategy a member supports (``range``,
``roundrobin``...), in its order of preference, with its opaque subscription metadata."""


@dataclass(slots=True)
class ClassicMember:
    """A Kafka consumer in a group.

    ``join_ticket``/``sync_ticket`` name the member's held JoinGroup/SyncGroup (None: none
    is held); ``deadline_ms`` and ``token`` describe its armed session timer (monotonic ms;
    a firing with another token is stale). Tickets, deadline and token are not persisted.
    """

    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    join_ticket: int | None = None
    sync_ticket: int | None = None
    deadline_ms: int = 0
    token: int = 0
    group_instance_id: str | None = None
    """A static member's id (KIP-345: ``group.instance.id``), kept across its restarts;
    None for a dynamic member."""

    def protocol_names(self) -> list[str]:
        """The member's protocol names in its order of preference."""
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        """The member's metadata for ``protocol`` (``KeyError`` if it does not support it)."""
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)


class ClassicGroup:
    """The state of one Kafka group. Mutated only by ``groups.classic``.

    ``members`` keeps join order (the first member becomes the leader, and the next one
    when the leader goes). ``join_token`` identifies the armed join-barrier timer.
    """

    __slots__ = ("group_id", "state", "generation", "protocol_type", "protocol", "leader",
                 "members", "join_token")

    def __init__(self, group_id: str, *, generation: int = 0, protocol_type: str | None = None,
                 protocol: str | None = None, leader: str | None = None,
                 members: Iterable[ClassicMember] = (),
                 state: ClassicGroupState | None = None) -> None:
        self.group_id = group_id
        self.generation = generation
        self.protocol_type = protocol_type
        self.protocol = protocol
        self.members: dict[str, ClassicMember] = {m.member_id: m for m in members}
        self.leader = leader if leader is not None else next(iter(self.members), None)
        self.join_token = 0
        if state is None:
            state = ClassicGroupState.STABLE if self.members else ClassicGroupState.EMPTY
        if (state is ClassicGroupState.EMPTY) != (not self.members) \
                or state is ClassicGroupState.DEAD:
            raise ValueError(f"group {group_id}: state {state.value} does not fit "
                             f"{len(self.members)} members")
        if self.members and self.leader not in self.members:
            raise ValueError(f"group {group_id}: leader {self.leader} is not a member")
        self.state = state

    def __repr__(self) -> str:
        return (f"ClassicGroup({self.group_id!r}, state={self.state.value}, "
                f"generation={self.generation}, protocol={self.protocol}, "
                f"leader={self.leader}, members={list(self.members)})")

    # ------------------------------------------------------------------ the machine

    def transition_to(self, target: ClassicGroupState) -> None:
        """Move to ``target``; ``IllegalStateError`` (state unchanged) if the table forbids it."""
        check_classic_transition(self.group_id, self.state, target)
        self.state = target

    def init_next_generation(self) -> None:
        """Start the next generation over the current members (the join barrier completed).

        Increments the generation, forgets the previous assignment, selects the protocol,
        then moves to AWAITING_SYNC (members left) or EMPTY (none). The transition is
        checked first, so an illegal one raises ``IllegalStateError`` with nothing changed.
        """
        target = (ClassicGroupState.AWAITING_SYNC if self.members
                  else ClassicGroupState.EMPTY)
        check_classic_transition(self.group_id, self.state, target)
        self.generation += 1
        self.protocol = self.select_protocol() if self.members else None
        if not self.members:
            self.protocol_type = None
        for member in self.members.values():
            member.assignment = b""
        self.transition_to(target)

    # ------------------------------------------------------------------ members

    def add(self, member: ClassicMember, protocol_type: str) -> None:
        """Add a new member; the first one of an empty group sets the protocol type and
        becomes the leader."""
        if not self.members:
            self.protocol_type = protocol_type
            self.leader = member.member_id
        self.members[member.member_id] = member

    def remove(self, member_id: str) -> ClassicMember:
        """Remove a member; if it led, the earliest remaining member leads."""
        member = self.members.pop(member_id)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        return member

    def not_yet_rejoined(self) -> list[str]:
        """Members without a held JoinGroup, in join order (Kafka's
        ``notYetRejoinedMembers``): the barrier waits for them."""
        return [m for m, member in self.members.items() if member.join_ticket is None]

    def rebalance_timeout_ms(self) -> int:
        """How long the join barrier waits: the largest rebalance timeout of any member."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def static_member(self, group_instance_id: str) -> ClassicMember | None:
        """The member holding ``group_instance_id`` now (None: no such static member)."""
        for member in self.members.values():
            if member.group_instance_id == group_instance_id:
                return member
        return None

    def validate_instance(self, member_id: str, group_instance_id: str | None) -> None:
        """A static member's fencing (KIP-345): ``FencedInstanceId`` when another member
        id holds ``group_instance_id`` now (the request comes from an older incarnation),
        ``UnknownMemberId`` when nobody holds it. Nothing for a dynamic member (None)."""
        if group_instance_id is None:
            return
        holder = self.static_member(group_instance_id)
        if holder is None:
            raise UnknownMemberId(f"no member of group {self.group_id} has group instance "
                                  f"id {group_instance_id!r}")
        if holder.member_id != member_id:
            raise FencedInstanceId(f"group instance {group_instance_id!r} of group "
                                   f"{self.group_id} is member {holder.member_id!r} now, "
                                   f"not {member_id!r}")

    def replace_member_id(self, old: str, new: str) -> ClassicMember:
        """A static member's new incarnation: the member keeps its place in join order,
        its protocols and assignment (and the leadership), under the member id ``new``."""
        members = list(self.members.items())
        member = self.members[old]
        member.member_id = new
        self.members = {new if k == old else k: v for k, v in members}
        if self.leader == old:
            self.leader = new
        return member

    def validate_member(self, member_id: str, generation: int) -> ClassicMember:
        """The fencing check of SyncGroup, Heartbeat and OffsetCommit.

        Raises ``UnknownMemberId`` when ``member_id`` is not in the group and
        ``IllegalGeneration`` when ``generation`` is not the current one. Returns the member.
        """
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberId(f"{member_id!r} is not a member of group {self.group_id}; "
                                  f"join again without a member id")
        if generation != self.generation:
            raise IllegalGeneration(f"generation {generation} is not the current generation "
                                    f"{self.generation} of group {self.group_id}; rejoin")
        return member

    # ------------------------------------------------------------------ protocols

    def supports_protocols(self, protocol_type: str, names: Sequence[str]) -> bool:
        """Whether a member with this protocol type and these protocols may join: any
        non-empty type and list for an empty group, else the group's type and at least one
        protocol every current member supports (Kafka's ``supportsProtocols``)."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self._candidates() & set(names))

    def select_protocol(self) -> str:
        """The protocol for this generation: among those every member supports, the one
        most members name first (each member votes for its most preferred candidate); ties
        go to the smaller name, so the choice never depends on dict order.

        ``ValueError`` if no protocol is common to all members (the joins prevent that).
        """
        candidates = self._candidates()
        if not candidates:
            raise ValueError(f"group {self.group_id}: no protocol common to all members")
        votes: dict[str, int] = dict.fromkeys(candidates, 0)
        for member in self.members.values():
            vote = next(name for name in member.protocol_names() if name in candidates)
            votes[vote] += 1
        return min(votes, key=lambda name: (-votes[name], name))

    def _candidates(self) -> set[str]:
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        common = set(first.protocol_names())
        for member in members:
            common &= set(member.protocol_names())
        return common
