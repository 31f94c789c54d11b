"""The consumer-group coordinator: JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, OFFSET, session
expiry, partition-count changes and the admin commands, for every (group, topic) pair.

Owns: the groups and the committed offsets in memory, ``GroupConfig`` (timeouts, limits),
the reply records (``Assignment``, ``GroupDescription``...) and the rules of
``spec/v1-protocol.md`` "Consumer groups". Every operation takes the monotonic time
``now_ms`` it needs as an argument and either raises a ``broker.errors`` refusal with
nothing changed, or changes state and returns ``Result(reply, effects)``; the effects
(``groups.effects``) tell the shell what to write and which session timers to arm.

Must not import: Twisted, the broker's shell, ``data`` or anything else that does I/O or
reads a clock (no ``time.time()``): ``broker/services/groups.py`` is the shell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, assignor_choices
from groups.effects import (
    CancelExpiry,
    Effect,
    PersistGroups,
    PersistOffsets,
    Result,
    ScheduleExpiry,
    expiry_key,
)
from groups.errors import InvalidGroupRequest, TooManyGroups, TooManyMembers, UnknownGroup
from groups.group import Group, Member
from groups.state import GroupState

__all__ = [
    "GroupConfig",
    "GroupCoordinator",
    "Assignment",
    "GroupDescription",
    "ResetTarget",
    "GroupKey",
    "OffsetLookup",
    "ProtocolGuard",
    "V1",
]

GroupKey = tuple[str, str]
"""``(group, topic)``: the key of all group state (spec: state is keyed by the pair)."""

ResetTarget = Literal["earliest", "latest"] | int
"""Where ADMIN_RESET_OFFSETS moves a committed offset."""

OffsetLookup = Callable[[str, int], int]
"""``lookup(topic, partition) -> offset`` (high watermark, earliest or latest offset)."""

ProtocolGuard = Callable[[str], str | None]
"""``protocol_of(group) -> name``: another protocol holding the group id live (Kafka's
classic coordinator answers ``"kafka"`` while the group has Kafka members), or None."""

V1 = "v1"
"""What ``live_protocol`` names when a group id has live V1 (or Iggy) members."""


@dataclass(frozen=True)
class GroupConfig:
    """Timeouts and limits, validated. The broker passes ``groups.session_timeout_ms``,
    ``limits.max_groups`` and ``limits.max_members_per_group`` to the coordinator."""

    session_timeout_ms: int = 10_000
    """A member's session timeout when its JOIN names none."""
    min_session_timeout_ms: int = 100
    """Smallest ``session_timeout_ms=`` a JOIN may name (BAD_REQUEST below)."""
    max_session_timeout_ms: int = 3_600_000
    """Largest ``session_timeout_ms=`` a JOIN may name (BAD_REQUEST above)."""
    max_groups: int = 10_000
    """Most (group, topic) pairs LIST_GROUPS can show; a JOIN or admin command that would
    add one more is refused with UNAVAILABLE."""
    max_members_per_group: int = 1_000
    """Most members of one (group, topic); a JOIN by one more is refused with BAD_REQUEST."""

    def __post_init__(self) -> None:
        if self.session_timeout_ms < 1:
            raise ValueError("session_timeout_ms must be at least 1")
        if not 1 <= self.min_session_timeout_ms <= self.max_session_timeout_ms:
            raise ValueError("need 1 <= min_session_timeout_ms <= max_session_timeout_ms")
        if self.max_groups < 1 or self.max_members_per_group < 1:
            raise ValueError("max_groups and max_members_per_group must be at least 1")


class Assignment(NamedTuple):
    """The reply to JOIN and SYNC: ``generation=<n> assigned=[<partitions>]``."""

    generation: int
    assigned: list[int]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """The reply to DESCRIBE_GROUP, in the columns of its wire form (docs/groups.md):
    ``members`` is ``((member_id, partitions), ...)`` sorted by id; ``partitions``,
    ``committed``, ``hw`` and ``lag`` are parallel, one entry per partition of the topic,
    with ``lag = max(0, hw + 1 - committed)``."""

    group: str
    topic: str
    state: str
    generation: int
    assignor: str
    members: tuple[tuple[str, tuple[int, ...]], ...]
    partitions: tuple[int, ...]
    committed: tuple[int, ...]
    hw: tuple[int, ...]
    lag: tuple[int, ...]


_NO_EFFECTS: tuple[Effect, ...] = ()


class GroupCoordinator:
    """All groups and committed offsets of one broker.

    ``partitions_for(topic)`` returns the topic's current partition count (0 for a topic
    that does not exist). The keyword arguments are ``GroupConfig``'s fields. State saved
    by ``groups.store`` comes back through ``restore``; ``start(now_ms)`` then arms the
    members' session timers.
    """

    def __init__(self, partitions_for: Callable[[str], int], *,
                 session_timeout_ms: int = GroupConfig.session_timeout_ms,
                 min_session_timeout_ms: int = GroupConfig.min_session_timeout_ms,
                 max_session_timeout_ms: int = GroupConfig.max_session_timeout_ms,
                 max_groups: int = GroupConfig.max_groups,
                 max_members_per_group: int = GroupConfig.max_members_per_group) -> None:
        self._partitions_for = partitions_for
        self.config = GroupConfig(session_timeout_ms, min_session_timeout_ms,
                                  max_session_timeout_ms, max_groups, max_members_per_group)
        self._groups: dict[GroupKey, Group] = {}
        self._offsets: dict[GroupKey, dict[int, int]] = {}
        self._metadata: dict[GroupKey, dict[int, str]] = {}
        self._last_token = 0
        self.protocol_of: ProtocolGuard = lambda group: None
        """The cross-protocol guard (the shell sets it to the Kafka coordinator's
        ``live_protocol``): a JOIN into a group id another protocol holds live is refused,
        and so are the admin commands that refuse while members are live."""

    def restore(self, groups: Iterable[Group],
                offsets: Mapping[GroupKey, Mapping[int, int]],
                metadata: Mapping[GroupKey, Mapping[int, str]] | None = None) -> None:
        """Load saved state into a coordinator that holds none yet (``ValueError`` if it
        does, or if a (group, topic) pair comes twice). ``metadata`` is the Kafka offset
        metadata kept beside some committed offsets."""
        if self._groups or self._offsets:
            raise ValueError("restore() needs a coordinator without state")
        restored: dict[GroupKey, Group] = {}
        for group in groups:
            key = (group.group, group.topic)
            if key in restored:
                raise ValueError(f"group {group.group} on topic {group.topic} given twice")
            restored[key] = group
        self._groups = restored
        self._offsets = {key: dict(committed) for key, committed in offsets.items() if committed}
        self._metadata = {key: {p: text for p, text in texts.items()
                                if text and p in self._offsets.get(key, {})}
                          for key, texts in (metadata or {}).items()}
        self._metadata = {key: texts for key, texts in self._metadata.items() if texts}

    def load(self, groups: Iterable[Group],
             offsets: Mapping[GroupKey, Mapping[int, int]],
             metadata: Mapping[GroupKey, Mapping[int, str]] | None = None,
             now_ms: int = 0) -> Result[None]:
        """Take over the state of group ids this coordinator did not hold (the groups of a
        coordinator partition it now leads, read from that partition's records): their
        members get a fresh session timeout from ``now_ms`` (``start`` for those groups
        alone). ``ValueError``, with nothing changed, if any (group, topic) is held
        already."""
        groups = list(groups)
        clash = sorted({(g.group, g.topic) for g in groups} & self._groups.keys()
                       | offsets.keys() & self._offsets.keys())
        if clash:
            raise ValueError(f"load(): group {clash[0][0]} on topic {clash[0][1]} is held "
                             f"already")
        for group in groups:
            self._groups[(group.group, group.topic)] = group
        for key, committed in offsets.items():
            if committed:
                self._offsets[key] = dict(committed)
        for key, texts in (metadata or {}).items():
            kept = {p: t for p, t in texts.items() if t and p in self._offsets.get(key, {})}
            if kept:
                self._metadata[key] = kept
        names = {g.group for g in groups}
        return self.start(now_ms, only=names.__contains__)

    def unload(self, owned: Callable[[str], bool]) -> Result[list[GroupKey]]:
        """Forget every group and committed offset whose group id ``owned`` says (a
        coordinator partition this broker no longer leads: its new leader holds them). The
        reply is the (group, topic) pairs forgotten; the effects cancel their members'
        session timers. Nothing is persisted: the state stays in the partition's records."""
        forgotten = sorted({key for key in self._groups.keys() | self._offsets.keys()
                            if owned(key[0])})
        effects: list[Effect] = []
        for key in forgotten:
            group = self._groups.pop(key, None)
            if group is not None:
                effects += [CancelExpiry(expiry_key(key[0], key[1], m))
                            for m in sorted(group.members)]
            self._offsets.pop(key, None)
            self._metadata.pop(key, None)
        return Result(forgotten, tuple(effects))

    # ------------------------------------------------------------------ read-only views

    def group(self, group: str, topic: str) -> Group | None:
        """The live ``Group`` object (do not mutate it), or None."""
        return self._groups.get((group, topic))

    def groups(self) -> list[Group]:
        """Every group, sorted by (group, topic)."""
        return [self._groups[key] for key in sorted(self._groups)]

    def committed(self) -> dict[GroupKey, dict[int, int]]:
        """A copy of every committed offset: ``{(group, topic): {partition: offset}}``."""
        return {key: dict(self._offsets[key]) for key in sorted(self._offsets)}

    def offset_keys(self) -> list[GroupKey]:
        """Every ``(group, topic)`` with a committed offset, sorted; the offsets themselves
        are not copied (``committed`` copies them all)."""
        return sorted(self._offsets)

    def offset(self, group: str, topic: str, partition: int) -> int:
        """OFFSET: the committed offset (the next one to read), 0 when none was committed."""
        return self._offsets.get((group, topic), {}).get(partition, 0)

    def committed_metadata(self) -> dict[GroupKey, dict[int, str]]:
        """A copy of every non-empty Kafka offset metadata string:
        ``{(group, topic): {partition: metadata}}``."""
        return {key: dict(self._metadata[key]) for key in sorted(self._metadata)}

    def committed_offset(self, group: str, topic: str,
                         partition: int) -> tuple[int, str] | None:
        """``(offset, metadata)`` committed for a partition by any protocol, or None when
        nothing was (Kafka's OffsetFetch -1, where V1 OFFSET says 0)."""
        offset = self._offsets.get((group, topic), {}).get(partition)
        if offset is None:
            return None
        return offset, self._metadata.get((group, topic), {}).get(partition, "")

    def record_offset(self, group: str, topic: str, partition: int, offset: int,
                      metadata: str = "") -> Result[None]:
        """Store an offset another protocol's coordinator accepted (Kafka's OffsetCommit:
        that coordinator has fenced the member or checked the group has none), with its
        metadata. The same entry V1 OFFSET, COMMIT and DESCRIBE_GROUP use."""
        self._set_offset((group, topic), partition, offset, metadata)
        return Result(None, (PersistOffsets(group, topic, (partition,)),))

    def live_protocol(self, group: str) -> str | None:
        """``"v1"`` while the group id has live members on any topic (V1 or Iggy
        clients), else None: what the Kafka coordinator asks before a JoinGroup."""
        if any(key[0] == group and grp.members for key, grp in self._groups.items()):
            return V1
        return None

    def list_groups(self) -> list[GroupKey]:
        """LIST_GROUPS: every (group, topic) with group state or committed offsets, sorted."""
        return sorted(self._groups.keys() | self._offsets.keys())

    def describe(self, group: str, topic: str, *, hw_for: OffsetLookup) -> GroupDescription:
        """DESCRIBE_GROUP; ``UnknownGroup`` for a pair LIST_GROUPS does not show. A pair
        known only by its offsets describes as empty at generation 0."""
        key = (group, topic)
        grp = self._groups.get(key)
        if grp is None and key not in self._offsets:
            raise UnknownGroup(f"no group {group} on topic {topic}")
        offsets = self._offsets.get(key, {})
        partitions = tuple(range(self._partitions_for(topic)))
        committed = tuple(offsets.get(p, 0) for p in partitions)
        hw = tuple(hw_for(topic, p) for p in partitions)
        return GroupDescription(
            group=group,
            topic=topic,
            state=(grp.state if grp is not None else GroupState.EMPTY).value,
            generation=grp.generation if grp is not None else 0,
            assignor=grp.assignor if grp is not None else DEFAULT_ASSIGNOR,
            members=tuple((m, tuple(grp.assignment.get(m, ()))) for m in sorted(grp.members))
            if grp is not None else (),
            partitions=partitions,
            committed=committed,
            hw=hw,
            lag=tuple(max(0, h + 1 - c) for h, c in zip(hw, committed, strict=True)),
        )

    # ------------------------------------------------------------------ lifecycle

    def start(self, now_ms: int, only: Callable[[str], bool] | None = None) -> Result[None]:
        """Arm a fresh session timer for every member (restored members get a full session
        timeout from ``now_ms``) and rebalance any group whose assignment was computed for
        another partition count than the topic has now (a crash between adding partitions
        and writing ``groups.json``). ``only``: the group ids to start (default all)."""
        effects: list[Effect] = []
        for group in self.groups():
            if not group.members or (only is not None and not only(group.group)):
                continue
            partitions = self._partitions_for(group.topic)
            if partitions != group.partitions:
                group.init_next_generation(partitions)
                effects.append(PersistGroups(group.group, group.topic))
            for member_id in sorted(group.members):
                effects.append(self._refresh(group, group.members[member_id], now_ms))
        return Result(None, _dedupe(effects))

    # ------------------------------------------------------------------ member requests

    def join(self, group: str, topic: str, member_id: str, now_ms: int, *,
             assignor: str | None = None,
             session_timeout_ms: int | None = None) -> Result[Assignment]:
        """JOIN. A new member starts the next generation; a current member only refreshes
        its liveness (and takes a new ``session_timeout_ms`` if it names one). Naming an
        assignor other than the group's switches it, with a rebalance, when no other member
        is live, and is BAD_REQUEST otherwise."""
        if assignor is not None and assignor not in ASSIGNORS:
            raise InvalidGroupRequest(f"unknown assignor {assignor}; expected {assignor_choices()}")
        if session_timeout_ms is not None:
            low, high = self.config.min_session_timeout_ms, self.config.max_session_timeout_ms
            if not low <= session_timeout_ms <= high:
                raise InvalidGroupRequest(f"session_timeout_ms must be between {low} and {high}")
        other = self.protocol_of(group)
        if other is not None:
            raise InvalidGroupRequest(f"group {group} is in use by {other} clients (a {other} "
                                      f"consumer group with live members); use another group "
                                      f"name or stop those clients first")
        key = (group, topic)
        grp = self._groups.get(key)
        created = grp is None
        if grp is None:
            self._check_room_for(key)
            grp = Group(group, topic, assignor=assignor or DEFAULT_ASSIGNOR)
        member = grp.members.get(member_id)
        switching = assignor is not None and assignor != grp.assignor
        others = len(grp.members) - (member is not None)
        if switching and others:
            raise InvalidGroupRequest(f"group {group} on topic {topic} uses assignor {grp.assignor}; "
                                      f"another assignor is accepted only when no other member is live")
        if member is None and len(grp.members) >= self.config.max_members_per_group:
            raise TooManyMembers(f"group {group} on topic {topic} is full "
                                 f"({self.config.max_members_per_group} members)")
        rebalance = member is None or switching
        partitions = self._partitions_for(topic) if rebalance else grp.partitions
        effects: list[Effect] = []
        if session_timeout_ms is not None and member is not None \
                and session_timeout_ms != member.session_timeout_ms:
            member.session_timeout_ms = session_timeout_ms
            effects.append(PersistGroups(group, topic))
        if member is not None and not rebalance:
            effects.append(self._refresh(grp, member, now_ms))
            return Result(Assignment(grp.generation, grp.assigned(member_id)), tuple(effects))
        if member is None:
            member = Member(member_id, session_timeout_ms if session_timeout_ms is not None
                            else self.config.session_timeout_ms)
            grp.members[member_id] = member
        if assignor is not None:
            grp.assignor = assignor
        grp.init_next_generation(partitions)
        if created:
            self._groups[key] = grp
        effects += [PersistGroups(group, topic), self._refresh(grp, member, now_ms)]
        return Result(Assignment(grp.generation, grp.assigned(member_id)), _dedupe(effects))

    def sync(self, group: str, topic: str, member_id: str, generation: int,
             now_ms: int) -> Result[Assignment]:
        """SYNC: the member's assignment in the current generation."""
        grp = self._require(group, topic)
        member = grp.validate_member(member_id, generation)
        return Result(Assignment(grp.generation, grp.assigned(member_id)),
                      (self._refresh(grp, member, now_ms),))

    def heartbeat(self, group: str, topic: str, member_id: str, generation: int,
                  now_ms: int) -> Result[None]:
        """HEARTBEAT: refreshes the member's liveness."""
        grp = self._require(group, topic)
        member = grp.validate_member(member_id, generation)
        return Result(None, (self._refresh(grp, member, now_ms),))

    def leave(self, group: str, topic: str, member_id: str, generation: int) -> Result[None]:
        """LEAVE: removes the member; the next generation starts at once."""
        grp = self._require(group, topic)
        grp.validate_member(member_id, generation)
        return Result(None, self._remove(grp, member_id)
                      + (CancelExpiry(expiry_key(group, topic, member_id)),))

    def commit(self, group: str, topic: str, member_id: str, generation: int, partition: int,
               offset: int, now_ms: int) -> Result[None]:
        """COMMIT: store ``offset`` (the next offset to read) for a partition the member
        owns in the current generation. The handler has checked ``0 <= offset <= hw + 1``."""
        grp = self._require(group, topic)
        member = grp.validate_member(member_id, generation, partition=partition)
        self._set_offset((group, topic), partition, offset)
        return Result(None, (PersistOffsets(group, topic, (partition,)),
                             self._refresh(grp, member, now_ms)))

    def expire(self, group: str, topic: str, member_id: str, token: int) -> Result[bool]:
        """A session timer fired. Removes the member (next generation) if ``token`` is the
        member's current timer; a stale firing (the member refreshed, left or rejoined since
        the timer was armed) changes nothing. The reply says whether the member was removed.
        """
        grp = self._groups.get((group, topic))
        member = grp.members.get(member_id) if grp is not None else None
        if grp is None or member is None or member.token != token:
            return Result(False)
        return Result(True, self._remove(grp, member_id))

    def partitions_changed(self, topic: str) -> Result[list[GroupKey]]:
        """The topic's partition count changed: every group on it with members and an
        assignment for another count starts its next generation. Replies with the
        rebalanced (group, topic) pairs."""
        partitions = self._partitions_for(topic)
        changed = [
            key for key in sorted(self._groups)
            if key[1] == topic and self._groups[key].members
            and self._groups[key].partitions != partitions
        ]
        for key in changed:
            self._groups[key].init_next_generation(partitions)
        return Result(changed, tuple(PersistGroups(*key) for key in changed))

    # ------------------------------------------------------------------ admin commands

    def admin_commit(self, group: str, topic: str, partition: int, offset: int) -> Result[None]:
        """ADMIN_COMMIT: a tool that is not a member stores the group's offset; refused
        (BAD_REQUEST) while the group has live members."""
        key = (group, topic)
        self._require_no_members(key, "ADMIN_COMMIT")
        self._check_room_for(key)
        self._set_offset(key, partition, offset)
        return Result(None, (PersistOffsets(group, topic, (partition,)),))

    def reset_offsets(self, group: str, topic: str, target: ResetTarget,
                      partition: int | None = None, *, earliest_for: OffsetLookup,
                      latest_for: OffsetLookup) -> Result[dict[int, int]]:
        """ADMIN_RESET_OFFSETS: move the committed offset of one partition (or of every
        partition of the topic) to ``earliest``, ``latest`` or a given offset, which is
        clamped into ``[earliest_for(t, p), latest_for(t, p)]``. Refused (BAD_REQUEST) while
        the group has live members. Replies ``{partition: new offset}``."""
        if not isinstance(target, int) and target not in ("earliest", "latest"):
            raise InvalidGroupRequest("reset target must be earliest, latest or an offset")
        key = (group, topic)
        self._require_no_members(key, "ADMIN_RESET_OFFSETS")
        partitions = range(self._partitions_for(topic)) if partition is None else (partition,)
        if not partitions:
            return Result({})
        self._check_room_for(key)
        moved: dict[int, int] = {}
        for p in partitions:
            earliest = earliest_for(topic, p)
            if target == "earliest":
                moved[p] = earliest
            elif target == "latest":
                moved[p] = latest_for(topic, p)
            else:
                moved[p] = max(earliest, min(target, latest_for(topic, p)))
        for p, offset in moved.items():
            self._set_offset(key, p, offset)
        return Result(moved, (PersistOffsets(group, topic, tuple(sorted(moved))),))

    def delete_group(self, group: str, topic: str) -> Result[None]:
        """ADMIN_DELETE_GROUP: forget the group and its committed offsets. Refused
        (BAD_REQUEST) while it has live members; UnknownGroup when there is nothing to
        delete. A later JOIN creates a new group at generation 1."""
        key = (group, topic)
        if key not in self._groups and key not in self._offsets:
            raise UnknownGroup(f"no group {group} on topic {topic}")
        self._require_no_members(key, "ADMIN_DELETE_GROUP")
        effects: list[Effect] = []
        grp = self._groups.pop(key, None)
        if grp is not None:
            grp.transition_to(GroupState.DEAD)
            effects.append(PersistGroups(group, topic))
        self._metadata.pop(key, None)
        gone = self._offsets.pop(key, None)
        if gone is not None:
            effects.append(PersistOffsets(group, topic, tuple(sorted(gone))))
        return Result(None, tuple(effects))

    def delete_offsets(self, group: str, topic: str,
                       partitions: Iterable[int]) -> Result[list[int]]:
        """Forget the committed offsets of some partitions of ``(group, topic)`` (Kafka's
        OffsetDelete). Refused (BAD_REQUEST) while the group has live members on the
        topic. Replies with the partitions that had one."""
        key = (group, topic)
        self._require_no_members(key, "OffsetDelete")
        committed = self._offsets.get(key, {})
        gone = [p for p in partitions if committed.pop(p, None) is not None]
        for p in gone:
            self._metadata.get(key, {}).pop(p, None)
        if key in self._offsets and not self._offsets[key]:
            del self._offsets[key]
            self._metadata.pop(key, None)
        return Result(gone, (PersistOffsets(group, topic, tuple(sorted(gone))),) if gone else ())

    def topic_deleted(self, topic: str) -> Result[list[GroupKey]]:
        """The topic was deleted: every group on it is forgotten with its members and
        committed offsets (as Kafka drops a deleted topic's offsets), so a topic created
        again under the same name starts clean. Replies with the forgotten pairs."""
        keys = sorted({k for k in self._groups if k[1] == topic}
                      | {k for k in self._offsets if k[1] == topic})
        effects: list[Effect] = []
        persist: list[Effect] = []
        for group, _ in keys:
            grp = self._groups.pop((group, topic), None)
            if grp is not None:
                effects.extend(CancelExpiry(expiry_key(group, topic, member_id))
                               for member_id in sorted(grp.members))
                if grp.state is GroupState.STABLE:  # its members go with the topic
                    grp.members.clear()
                    grp.transition_to(GroupState.EMPTY)
                grp.transition_to(GroupState.DEAD)
                persist.append(PersistGroups(group, topic))
            gone = self._offsets.pop((group, topic), None)
            if gone:
                persist.append(PersistOffsets(group, topic, tuple(sorted(gone))))
            self._metadata.pop((group, topic), None)
        return Result(keys, tuple(effects + persist))

    # ------------------------------------------------------------------ helpers

    def _require(self, group: str, topic: str) -> Group:
        grp = self._groups.get((group, topic))
        if grp is None:
            raise UnknownGroup(f"no group {group} on topic {topic}; join first")
        return grp

    def _set_offset(self, key: GroupKey, partition: int, offset: int,
                    metadata: str = "") -> None:
        """The one place committed offsets change; a V1 write clears Kafka's metadata."""
        self._offsets.setdefault(key, {})[partition] = offset
        if metadata:
            self._metadata.setdefault(key, {})[partition] = metadata
        elif key in self._metadata:
            self._metadata[key].pop(partition, None)
            if not self._metadata[key]:
                del self._metadata[key]

    def _require_no_members(self, key: GroupKey, command: str) -> None:
        other = self.protocol_of(key[0])
        if other is not None:
            raise InvalidGroupRequest(f"{command} refused: group {key[0]} has live {other} "
                                      f"members; stop them first")
        grp = self._groups.get(key)
        if grp is not None and grp.members:
            count = len(grp.members)
            raise InvalidGroupRequest(f"{command} refused: group {key[0]} on topic {key[1]} has "
                                      f"{count} live member{'s' if count > 1 else ''}; stop them first")

    def _check_room_for(self, key: GroupKey) -> None:
        if key in self._groups or key in self._offsets:
            return
        groups, offsets = self._groups, self._offsets
        if len(groups) + len(offsets) < self.config.max_groups:
            return  # the pairs are at most that many: no need to count them one by one
        if len(groups.keys() | offsets.keys()) >= self.config.max_groups:
            raise TooManyGroups(f"too many groups: at most {self.config.max_groups} "
                                f"group/topic pairs")

    def _refresh(self, group: Group, member: Member, now_ms: int) -> ScheduleExpiry:
        """Arm the member's session timer from ``now_ms`` with a new token."""
        self._last_token += 1
        member.token = self._last_token
        member.deadline_ms = now_ms + member.session_timeout_ms
        return ScheduleExpiry(expiry_key(group.group, group.topic, member.member_id),
                              group.group, group.topic, member.member_id, member.token,
                              member.deadline_ms)

    def _remove(self, group: Group, member_id: str) -> tuple[Effect, ...]:
        del group.members[member_id]
        group.init_next_generation(self._partitions_for(group.topic))
        return (PersistGroups(group.group, group.topic),)


def _dedupe(effects: list[Effect]) -> tuple[Effect, ...]:
    """Drop repeated Persist* effects (one write covers them all), keeping order."""
    seen: set[Effect] = set()
    out: list[Effect] = []
    for effect in effects:
        if isinstance(effect, PersistGroups | PersistOffsets):
            if effect in seen:
                continue
            seen.add(effect)
        out.append(effect)
    return tuple(out)
