"""The Kafka classic consumer-group coordinator: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, session expiry and the
join barrier, for every Kafka group of one broker.

Owns: the Kafka groups in memory, ``ClassicConfig``, the ``OffsetBook`` interface (with
``MemoryOffsetBook``) and the rules of ``spec/kafka-wire-notes.md`` sections 3.6-3.11
(Kafka 0.10's ``GroupCoordinator``, with the modern ``GroupMetadataManager``'s names).
Every operation takes the monotonic time ``now_ms`` it needs as an argument and either
raises a ``groups.kafka_errors`` refusal with nothing changed, or changes state and returns
``groups.effects.Result(reply, effects)``; the effects (``groups.classic_effects``) tell
the shell which held requests to answer, which timers to (re)arm and what to persist.

This is Kafka's client-side assignment: members join with their protocols (name + opaque
metadata), the coordinator picks a protocol all of them support and a leader, and relays
the leader's opaque assignments in SyncGroup. It shares nothing with V1's server-side
``groups.coordinator`` except the committed offsets (through the ``OffsetBook`` the shell
passes in) and a guard: ``protocol_of(group_id)`` names another protocol holding the
group live, and ``live_protocol`` answers the same question the other way round.

Must not import: Twisted, ``broker``, ``data`` or anything else that does I/O or reads a
clock (no ``time.time()``); the Kafka transport's handlers and shell come later.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol as TypingProtocol

from data.names import is_valid_name
from groups.classic_effects import (
    CancelTimer,
    ClassicEffect,
    CommittedOffset,
    Deliver,
    GroupView,
    Held,
    JoinReply,
    MemberView,
    PersistClassicGroups,
    PersistOffsets,
    ScheduleJoin,
    ScheduleSession,
    SyncReply,
    join_key,
    session_key,
)
from groups.classic_group import ClassicGroup, ClassicMember, Protocol
from groups.classic_state import ClassicGroupState
from groups.effects import Result
from groups.kafka_errors import (
    FencedInstanceId,
    GroupInUseByOtherProtocol,
    GroupNotEmpty,
    InconsistentGroupProtocol,
    InvalidGroupId,
    InvalidSessionTimeout,
    NotCoordinator,
    OffsetMetadataTooLarge,
    RebalanceInProgress,
    UnknownMemberId,
)

__all__ = [
    "ClassicConfig",
    "ClassicGroupCoordinator",
    "OffsetBook",
    "MemoryOffsetBook",
    "ProtocolOf",
    "TopicPartition",
    "KAFKA",
]

EMPTY = ClassicGroupState.EMPTY
PREPARING = ClassicGroupState.PREPARING_REBALANCE
AWAITING_SYNC = ClassicGroupState.AWAITING_SYNC
STABLE = ClassicGroupState.STABLE
DEAD = ClassicGroupState.DEAD

KAFKA = "kafka"
"""What ``live_protocol`` names when a group has live Kafka members."""

TopicPartition = tuple[str, int]

ProtocolOf = Callable[[str], str | None]
"""``protocol_of(group_id)``: the name of *another* protocol that holds the group id live
(V1 members on any topic: ``"v1"``), or None. Asked on every JoinGroup and simple commit."""



class OffsetBook(TypingProtocol):
    """Where committed offsets live: the shell passes an adapter over the store V1 shares
    (``offsets.json``, keyed by (group, topic, partition)); tests use ``MemoryOffsetBook``."""

    def committed(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        """The committed position, or None when nothing was committed (Kafka's -1)."""

    def commit(self, group_id: str, topic: str, partition: int,
               committed: CommittedOffset) -> None:
        """Store a committed position."""


class MemoryOffsetBook:
    """An ``OffsetBook`` in a dict: ``{(group, topic, partition): CommittedOffset}``."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, str, int], CommittedOffset] = {}

    def committed(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self.offsets.get((group_id, topic, partition))

    def commit(self, group_id: str, topic: str, partition: int,
               committed: CommittedOffset) -> None:
        self.offsets[(group_id, topic, partition)] = committed


@dataclass(frozen=True)
class ClassicConfig:
    """Timeouts and limits, validated. The defaults are Skerry's group range (the spec:
    100-3600000 ms; Kafka 0.10 used 6000-300000) and Kafka's metadata limit."""

    min_session_timeout_ms: int = 100
    """Smallest session timeout a JoinGroup may name (InvalidSessionTimeout below)."""
    max_session_timeout_ms: int = 3_600_000
    """Largest session timeout a JoinGroup may name (InvalidSessionTimeout above)."""
    max_metadata_bytes: int = 4096
    """Longest offset metadata, UTF-8 bytes (Kafka's ``offset.metadata.max.bytes``)."""

    def __post_init__(self) -> None:
        if not 1 <= self.min_session_timeout_ms <= self.max_session_timeout_ms:
            raise ValueError("need 1 <= min_session_timeout_ms <= max_session_timeout_ms")
        if self.max_metadata_bytes < 0:
            raise ValueError("max_metadata_bytes must be at least 0")


class ClassicGroupCoordinator:
    """All Kafka groups of one broker.

    ``protocol_of`` is the cross-protocol guard (default: no other protocol).
    ``offsets`` holds committed offsets (default: a fresh ``MemoryOffsetBook``).
    ``new_member_suffix()`` makes the unique part of a generated member id,
    ``<client_id>-<suffix>`` (default: a random UUID; tests pass a counter).
    State saved by ``groups.classic_store`` comes back through ``restore``;
    ``start(now_ms)`` then arms the timers.
    """

    def __init__(self, *, protocol_of: ProtocolOf | None = None,
                 offsets: OffsetBook | None = None,
                 new_member_suffix: Callable[[], str] | None = None,
                 config: ClassicConfig | None = None) -> None:
        self._protocol_of: ProtocolOf = protocol_of or (lambda group_id: None)
        self.offsets: OffsetBook = offsets if offsets is not None else MemoryOffsetBook()
        self._suffix = new_member_suffix or (lambda: str(uuid.uuid4()))
        self.config = config or ClassicConfig()
        self._groups: dict[str, ClassicGroup] = {}
        self._last_token = 0
        self._last_ticket = 0

    # ------------------------------------------------------------------ state in, views out

    def restore(self, groups: Iterable[ClassicGroup]) -> None:
        """Load saved groups into a coordinator that holds none yet (``ValueError`` if it
        does, or if a group id comes twice)."""
        if self._groups:
            raise ValueError("restore() needs a coordinator without groups")
        restored: dict[str, ClassicGroup] = {}
        for group in groups:
            if group.group_id in restored:
                raise ValueError(f"group {group.group_id} given twice")
            restored[group.group_id] = group
        self._groups = restored

    def load(self, groups: Iterable[ClassicGroup], now_ms: int) -> Result[None]:
        """Take over groups this coordinator did not hold (a coordinator partition it now
        leads) and ``start`` them alone. ``ValueError``, with nothing changed, if one is
        held already."""
        groups = list(groups)
        clash = sorted({g.group_id for g in groups} & self._groups.keys())
        if clash:
            raise ValueError(f"load(): group {clash[0]} is held already")
        for group in groups:
            self._groups[group.group_id] = group
        return self.start(now_ms, only={g.group_id for g in groups}.__contains__)

    def unload(self, owned: Callable[[str], bool]) -> Result[list[str]]:
        """Forget every group whose id ``owned`` says (its partition has another leader
        now): the reply is the ids forgotten; the effects cancel their timers and answer
        their held requests ``NotCoordinator`` (the clients find the new coordinator)."""
        forgotten = sorted(g for g in self._groups if owned(g))
        effects: list[ClassicEffect] = []
        for group_id in forgotten:
            group = self._groups.pop(group_id)
            effects.append(CancelTimer(join_key(group_id)))
            for member in group.members.values():
                effects.append(CancelTimer(session_key(group_id, member.member_id)))
                for ticket in (member.join_ticket, member.sync_ticket):
                    if ticket is not None:
                        effects.append(Deliver(ticket, NotCoordinator(
                            f"group {group_id} moved to another coordinator")))
        return Result(forgotten, tuple(effects))

    def start(self, now_ms: int, only: Callable[[str], bool] | None = None) -> Result[None]:
        """Arm a fresh session timer for every restored member; a group saved in the middle
        of a rebalance starts a new one (its members rejoin when their heartbeats answer
        REBALANCE_IN_PROGRESS, or are dropped at the rebalance timeout). ``only``: the
        group ids to start (default all)."""
        effects: list[ClassicEffect] = []
        for group in self.groups():
            if only is not None and not only(group.group_id):
                continue
            for member in group.members.values():
                effects.append(self._refresh(group, member, now_ms))
            if group.state is AWAITING_SYNC:
                effects += self._prepare_rebalance(group, now_ms)
            elif group.state is PREPARING:
                effects.append(self._arm_join(group, now_ms))
        return Result(None, tuple(effects))

    def group(self, group_id: str) -> ClassicGroup | None:
        """The live ``ClassicGroup`` (do not mutate it), or None."""
        return self._groups.get(group_id)

    def groups(self) -> list[ClassicGroup]:
        """Every group, sorted by id."""
        return [self._groups[key] for key in sorted(self._groups)]

    def live_protocol(self, group_id: str) -> str | None:
        """``"kafka"`` while the group has Kafka members, else None: what V1's guard asks
        before it lets a JOIN into the same group id (V1 answers BAD_REQUEST then)."""
        group = self._groups.get(group_id)
        return KAFKA if group is not None and group.members else None

    def list_groups(self) -> list[tuple[str, str]]:
        """ListGroups: ``(group_id, protocol_type)`` for every group, sorted (an Empty group
        has protocol type ``""``)."""
        return [(g.group_id, g.protocol_type or "") for g in self.groups()]

    def describe(self, group_id: str) -> GroupView:
        """DescribeGroups for one group; an unknown one is ``Dead`` with no members. The
        protocol, member metadata and assignments are shown only while Stable."""
        group = self._groups.get(group_id)
        if group is None:
            return GroupView(group_id, DEAD.value, "", "", ())
        stable = group.state is STABLE
        protocol = group.protocol if stable and group.protocol is not None else ""
        members = tuple(
            MemberView(m.member_id, m.client_id, m.client_host,
                       m.metadata(protocol) if stable else b"",
                       m.assignment if stable else b"", m.group_instance_id)
            for m in group.members.values())
        return GroupView(group_id, group.state.value, group.protocol_type or "", protocol,
                         members)

    # ------------------------------------------------------------------ member requests

    def join(self, group_id: str, member_id: str, now_ms: int, *, client_id: str,
             client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int | None,
             protocol_type: str, protocols: Sequence[Protocol],
             group_instance_id: str | None = None) -> Result[JoinReply | Held]:
        """JoinGroup (v0 has no rebalance timeout: pass None, the session timeout is
        used). ``member_id`` is ``""`` for a new member, which gets a generated id.

        Static membership (KIP-345, ``group_instance_id``): a member joining with an
        instance id another member holds and no member id is that member's new
        incarnation: it takes over the member's place, protocols and assignment under a
        new member id (the old id is fenced: its held requests are answered
        ``FencedInstanceId``) and, in a Stable group with its protocols unchanged and not
        the leader, gets the current generation without a rebalance. A member id that
        does not hold the instance id it names: ``FencedInstanceId``.

        Replies a ``JoinReply`` at once when the barrier completes with this join or when
        a current member rejoins unchanged outside a rebalance; otherwise ``Held``.
        Refusals: ``InvalidGroupId``, ``InvalidSessionTimeout``,
        ``GroupInUseByOtherProtocol``, ``InconsistentGroupProtocol``, ``UnknownMemberId``,
        ``FencedInstanceId``.
        """
        self._check_group_id(group_id)
        low, high = self.config.min_session_timeout_ms, self.config.max_session_timeout_ms
        if not low <= session_timeout_ms <= high:
            raise InvalidSessionTimeout(f"session timeout {session_timeout_ms} ms is not "
                                        f"between {low} and {high} ms")
        rebalance_ms = session_timeout_ms if rebalance_timeout_ms is None \
            else max(0, rebalance_timeout_ms)
        other = self._protocol_of(group_id)
        if other is not None:
            raise GroupInUseByOtherProtocol(f"group {group_id} has live {other} members")
        group = self._groups.get(group_id)
        if group is None and member_id:
            raise UnknownMemberId(f"{member_id!r} is not a member of group {group_id}: "
                                  f"there is no such group")
        if group is None:
            group = ClassicGroup(group_id)
        names = [name for name, _ in protocols]
        if not group.supports_protocols(protocol_type, names):
            raise InconsistentGroupProtocol(
                f"group {group_id} uses protocol type {group.protocol_type!r} and needs a "
                f"protocol every member supports; got {protocol_type!r} with {names}")
        effects: list[ClassicEffect] = []
        holder = group.static_member(group_instance_id) if group_instance_id else None
        if holder is not None and not member_id:
            # A static member's new incarnation: the old member id is fenced.
            old = holder.member_id
            member_id = self._new_member_id(group, group_instance_id or client_id)
            group.replace_member_id(old, member_id)
            effects.append(CancelTimer(session_key(group_id, old)))
            for ticket in (holder.join_ticket, holder.sync_ticket):
                if ticket is not None:
                    effects.append(Deliver(ticket, FencedInstanceId(
                        f"group instance {group_instance_id!r} rejoined as {member_id!r}")))
            holder.join_ticket = holder.sync_ticket = None
            effects.append(PersistClassicGroups(group_id))
        elif holder is not None and holder.member_id != member_id:
            raise FencedInstanceId(f"group instance {group_instance_id!r} of group "
                                   f"{group_id} is member {holder.member_id!r} now")
        if member_id and member_id not in group.members:
            raise UnknownMemberId(f"{member_id!r} is not a member of group {group_id}")
        self._groups.setdefault(group_id, group)
        if not member_id:
            member_id = self._new_member_id(group, group_instance_id or client_id)
            member = ClassicMember(member_id, client_id, client_host, session_timeout_ms,
                                   rebalance_ms, tuple(protocols),
                                   group_instance_id=group_instance_id)
            group.add(member, protocol_type)
        else:
            member = group.members[member_id]
            unchanged = member.protocols == tuple(protocols)
            if group.state is AWAITING_SYNC and unchanged or \
                    group.state is STABLE and unchanged and member_id != group.leader:
                # A lost JoinGroup answer, or a follower's rejoin with nothing new: the
                # current generation again, no rebalance (Kafka does the same).
                effects.append(self._refresh(group, member, now_ms))
                return Result(self._join_reply(group, member_id), tuple(effects))
            member.protocols = tuple(protocols)
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_ms
            member.client_id, member.client_host = client_id, client_host
        ticket = self._next_ticket()
        if member.join_ticket is not None:
            effects.append(Deliver(member.join_ticket, RebalanceInProgress(
                f"superseded by a newer JoinGroup from {member_id}")))
        member.join_ticket = ticket
        effects.append(self._refresh(group, member, now_ms))
        if group.state is not PREPARING:
            effects += self._prepare_rebalance(group, now_ms)
        effects += self._maybe_complete_join(group, now_ms)
        return self._answer(ticket, member_id, effects)

    def sync(self, group_id: str, generation: int, member_id: str, now_ms: int,
             assignments: Mapping[str, bytes] | None = None,
             group_instance_id: str | None = None) -> Result[SyncReply | Held]:
        """SyncGroup v0. The leader passes ``assignments`` (member id -> opaque bytes; a
        member it leaves out gets ``b""``, ids that are not members are ignored); a
        follower passes none. A follower's sync is held until the leader's arrives.
        Refusals: ``UnknownMemberId``, ``IllegalGeneration``, ``RebalanceInProgress``."""
        group = self._require(group_id, member_id)
        group.validate_instance(member_id, group_instance_id)
        member = group.validate_member(member_id, generation)
        if group.state is PREPARING:
            raise RebalanceInProgress(f"group {group_id} is rebalancing; rejoin")
        if group.state is STABLE:
            return Result(SyncReply(member.assignment),
                          (self._refresh(group, member, now_ms),))
        effects: list[ClassicEffect] = []
        ticket = self._next_ticket()
        if member.sync_ticket is not None:
            effects.append(Deliver(member.sync_ticket, RebalanceInProgress(
                f"superseded by a newer SyncGroup from {member_id}")))
        member.sync_ticket = ticket
        effects.append(self._refresh(group, member, now_ms))
        if member_id == group.leader:
            given = assignments or {}
            for other_id, other in group.members.items():
                other.assignment = bytes(given.get(other_id, b""))
            group.transition_to(STABLE)
            for other in group.members.values():
                if other.sync_ticket is not None:
                    effects.append(Deliver(other.sync_ticket, SyncReply(other.assignment)))
                    other.sync_ticket = None
                    if other is not member:
                        effects.append(self._refresh(group, other, now_ms))
            effects.append(PersistClassicGroups(group_id))
        return self._answer(ticket, member_id, effects)

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  now_ms: int, group_instance_id: str | None = None
                  ) -> Result[RebalanceInProgress | None]:
        """Heartbeat v0. The reply is None (carry on) or a ``RebalanceInProgress`` to
        report (rejoin): while the barrier waits the heartbeat still refreshes the session,
        so that refusal travels as the reply beside its effect. Refusals raised:
        ``UnknownMemberId``, ``IllegalGeneration``."""
        group = self._require(group_id, member_id)
        group.validate_instance(member_id, group_instance_id)
        member = group.validate_member(member_id, generation)
        if group.state is AWAITING_SYNC:
            return Result(RebalanceInProgress(f"group {group_id} awaits its leader's "
                                              f"assignment"))
        refresh = (self._refresh(group, member, now_ms),)
        if group.state is PREPARING:
            return Result(RebalanceInProgress(f"group {group_id} is rebalancing; rejoin"),
                          refresh)
        return Result(None, refresh)

    def leave(self, group_id: str, member_id: str, now_ms: int,
              group_instance_id: str | None = None) -> Result[None]:
        """LeaveGroup: the member goes and a rebalance starts (completing at once when
        nobody is left). A static member may be named by its ``group_instance_id`` alone
        (``member_id`` ""), as Kafka's admin tools do. Refusals: ``UnknownMemberId``,
        ``FencedInstanceId`` (the member id does not hold that instance id)."""
        group = self._require(group_id, member_id)
        if group_instance_id is not None:
            holder = group.static_member(group_instance_id)
            if holder is not None and not member_id:
                member_id = holder.member_id
            group.validate_instance(member_id, group_instance_id)
        if member_id not in group.members:
            raise UnknownMemberId(f"{member_id!r} is not a member of group {group_id}")
        return Result(None, _dedupe(self._remove_member(group, member_id, now_ms)))

    def commit_offsets(self, group_id: str, generation: int, member_id: str,
                       offsets: Mapping[TopicPartition, CommittedOffset],
                       now_ms: int, group_instance_id: str | None = None
                       ) -> Result[dict[TopicPartition, OffsetMetadataTooLarge | None]]:
        """OffsetCommit v0-v2: ``offsets`` maps (topic, partition) to the next offset to read
        and its metadata. A simple consumer commits with generation -1 and member ``""``,
        accepted while the group is Empty or unknown. Kafka 0.10's order: simple commit
        into an Empty group -> stored; AwaitingSync -> ``RebalanceInProgress``; not a member
        -> ``UnknownMemberId``; other generation -> ``IllegalGeneration``; else stored (and
        the member's session refreshed). The reply maps each partition to None (stored) or
        ``OffsetMetadataTooLarge``. The handler checks topics and offset ranges first."""
        self._check_group_id(group_id)
        group = self._groups.get(group_id)
        effects: list[ClassicEffect] = []
        if generation < 0 and (group is None or group.state is EMPTY):
            other = self._protocol_of(group_id)
            if other is not None:
                raise UnknownMemberId(f"group {group_id} has live {other} members; a "
                                      f"simple commit needs a group without members")
        else:
            if group is None:
                raise UnknownMemberId(f"{member_id!r} is not a member of group {group_id}: "
                                      f"there is no such group")
            group.validate_instance(member_id, group_instance_id)
            if group.state is AWAITING_SYNC:
                raise RebalanceInProgress(f"group {group_id} awaits its leader's assignment")
            member = group.validate_member(member_id, generation)
            effects.append(self._refresh(group, member, now_ms))
        reply: dict[TopicPartition, OffsetMetadataTooLarge | None] = {}
        stored = False
        for (topic, partition), committed in sorted(offsets.items()):
            size = len(committed.metadata.encode("utf-8"))
            if size > self.config.max_metadata_bytes:
                reply[(topic, partition)] = OffsetMetadataTooLarge(
                    f"metadata of {size} bytes for {topic}/{partition}; at most "
                    f"{self.config.max_metadata_bytes}")
                continue
            self.offsets.commit(group_id, topic, partition, committed)
            reply[(topic, partition)] = None
            stored = True
        if stored:
            effects.append(PersistOffsets())
        return Result(reply, tuple(effects))

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                      ) -> dict[TopicPartition, CommittedOffset | None]:
        """OffsetFetch v0/v1: each partition's committed position, None when nothing was
        committed (the transport answers offset -1, metadata ``""``). Refusal:
        ``InvalidGroupId``."""
        self._check_group_id(group_id)
        return {(topic, partition): self.offsets.committed(group_id, topic, partition)
                for topic, partition in partitions}

    # ------------------------------------------------------------------ timers

    def expire_session(self, group_id: str, member_id: str, generation: int, token: int,
                       now_ms: int) -> Result[bool]:
        """A session timer fired. A stale firing (the member refreshed, left or rejoined, or
        the generation moved since the timer was armed) changes nothing. A member with a
        held JoinGroup or SyncGroup is alive (it is waiting for us): its timer is re-armed.
        Otherwise the member is removed and a rebalance starts. The reply says whether
        the member was removed."""
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.token != token \
                or group.generation != generation:
            return Result(False)
        if member.join_ticket is not None or member.sync_ticket is not None:
            return Result(False, (self._refresh(group, member, now_ms),))
        return Result(True, _dedupe(self._remove_member(group, member_id, now_ms)))

    def expire_join(self, group_id: str, generation: int, token: int,
                    now_ms: int) -> Result[bool]:
        """The join barrier's rebalance timeout fired: members that have not rejoined are
        removed and the barrier completes. A stale firing changes nothing. The reply says
        whether the barrier completed."""
        group = self._groups.get(group_id)
        if group is None or group.state is not PREPARING or group.join_token != token \
                or group.generation != generation:
            return Result(False)
        return Result(True, _dedupe(self._complete_join(group, now_ms)))

    # ------------------------------------------------------------------ admin

    def delete_group(self, group_id: str) -> Result[bool]:
        """Forget an Empty group (it goes Dead). ``GroupNotEmpty`` while it has members.
        Its committed offsets stay in the offset store (the shell's call). Replies whether
        there was a group to delete."""
        group = self._groups.get(group_id)
        if group is None:
            return Result(False)
        if group.members:
            raise GroupNotEmpty(f"group {group_id} has {len(group.members)} members")
        group.transition_to(DEAD)
        del self._groups[group_id]
        return Result(True, (PersistClassicGroups(group_id),))

    # ------------------------------------------------------------------ the rebalance

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> list[ClassicEffect]:
        """Enter PREPARING_REBALANCE: held SyncGroups are answered REBALANCE_IN_PROGRESS and
        the join barrier's timer is armed for the largest rebalance timeout."""
        effects: list[ClassicEffect] = []
        group.transition_to(PREPARING)
        for member in group.members.values():
            if member.sync_ticket is not None:
                effects.append(Deliver(member.sync_ticket, RebalanceInProgress(
                    f"group {group.group_id} started another rebalance")))
                member.sync_ticket = None
        effects.append(self._arm_join(group, now_ms))
        return effects

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int) -> list[ClassicEffect]:
        if group.state is PREPARING and not group.not_yet_rejoined():
            return self._complete_join(group, now_ms)
        return []

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> list[ClassicEffect]:
        """The barrier completes: drop members that did not rejoin, start the next
        generation and answer every held JoinGroup (Kafka's ``onCompleteJoin``)."""
        effects: list[ClassicEffect] = [CancelTimer(join_key(group.group_id))]
        for member_id in group.not_yet_rejoined():
            group.remove(member_id)
            effects.append(CancelTimer(session_key(group.group_id, member_id)))
        group.init_next_generation()
        for member_id, member in group.members.items():
            assert member.join_ticket is not None
            effects.append(Deliver(member.join_ticket, self._join_reply(group, member_id)))
            member.join_ticket = None
            effects.append(self._refresh(group, member, now_ms))
        effects.append(PersistClassicGroups(group.group_id))
        return effects

    def _remove_member(self, group: ClassicGroup, member_id: str,
                       now_ms: int) -> list[ClassicEffect]:
        """Remove a member (LeaveGroup, session expiry): its held requests are answered
        UNKNOWN_MEMBER_ID, the group rebalances, and the saved membership is rewritten so
        a restart does not bring the member back."""
        member = group.remove(member_id)
        effects: list[ClassicEffect] = [CancelTimer(session_key(group.group_id, member_id)),
                                        PersistClassicGroups(group.group_id)]
        for ticket in (member.join_ticket, member.sync_ticket):
            if ticket is not None:
                effects.append(Deliver(ticket, UnknownMemberId(
                    f"{member_id!r} left group {group.group_id}")))
        if group.state in (STABLE, AWAITING_SYNC):
            effects += self._prepare_rebalance(group, now_ms)
        effects += self._maybe_complete_join(group, now_ms)
        return effects

    def _join_reply(self, group: ClassicGroup, member_id: str) -> JoinReply:
        assert group.protocol is not None and group.leader is not None
        members: tuple[tuple[str, bytes], ...] = ()
        instances: tuple[str | None, ...] = ()
        if member_id == group.leader:
            members = tuple((m.member_id, m.metadata(group.protocol))
                            for m in group.members.values())
            if any(m.group_instance_id for m in group.members.values()):
                instances = tuple(m.group_instance_id for m in group.members.values())
        return JoinReply(group.generation, group.protocol, group.leader, member_id, members,
                         instances)

    # ------------------------------------------------------------------ helpers

    def _require(self, group_id: str, member_id: str) -> ClassicGroup:
        group = self._groups.get(group_id)
        if group is None:
            raise UnknownMemberId(f"{member_id!r} is not a member of group {group_id}: "
                                  f"there is no such group")
        return group

    @staticmethod
    def _check_group_id(group_id: str) -> None:
        if not is_valid_name(group_id):
            raise InvalidGroupId(f"group id {group_id!r} is not a name of 1-249 characters "
                                 f"from [A-Za-z0-9._-]")

    def _new_member_id(self, group: ClassicGroup, client_id: str) -> str:
        while True:
            member_id = f"{client_id}-{self._suffix()}"
            if member_id not in group.members:
                return member_id

    def _next_ticket(self) -> int:
        self._last_ticket += 1
        return self._last_ticket

    def _next_token(self) -> int:
        self._last_token += 1
        return self._last_token

    def _refresh(self, group: ClassicGroup, member: ClassicMember,
                 now_ms: int) -> ScheduleSession:
        """Arm the member's session timer from ``now_ms`` with a new token."""
        member.token = self._next_token()
        member.deadline_ms = now_ms + member.session_timeout_ms
        return ScheduleSession(session_key(group.group_id, member.member_id), group.group_id,
                               member.member_id, group.generation, member.token,
                               member.deadline_ms)

    def _arm_join(self, group: ClassicGroup, now_ms: int) -> ScheduleJoin:
        group.join_token = self._next_token()
        return ScheduleJoin(join_key(group.group_id), group.group_id, group.generation,
                            group.join_token, now_ms + group.rebalance_timeout_ms())

    @staticmethod
    def _answer(ticket: int, member_id: str,
                effects: list[ClassicEffect]) -> Result[JoinReply | SyncReply | Held]:
        """This request's own ``Deliver``, if the same call produced it, becomes the reply;
        otherwise the request is held."""
        for index, effect in enumerate(effects):
            if isinstance(effect, Deliver) and effect.ticket == ticket:
                del effects[index]
                assert not isinstance(effect.reply, Exception), effect
                return Result(effect.reply, _dedupe(effects))
        return Result(Held(ticket, member_id), _dedupe(effects))


def _dedupe(effects: list[ClassicEffect]) -> tuple[ClassicEffect, ...]:
    """Keep only the last schedule/cancel per timer key and one of each equal Persist
    effect; Deliver effects all stay, in order."""
    last_for_key: dict[str, int] = {}
    seen: set[ClassicEffect] = set()
    keep: list[bool] = []
    for index, effect in enumerate(effects):
        if isinstance(effect, ScheduleSession | ScheduleJoin | CancelTimer):
            if effect.key in last_for_key:
                keep[last_for_key[effect.key]] = False
            last_for_key[effect.key] = index
            keep.append(True)
        elif isinstance(effect, PersistClassicGroups | PersistOffsets):
            keep.append(effect not in seen)
            seen.add(effect)
        else:
            keep.append(True)
    return tuple(effect for effect, kept in zip(effects, keep, strict=True) if kept)
