"""The KIP-848 consumer-group coordinator (``group.protocol=consumer``): the heartbeat that
joins, reconciles and leaves, session and rebalance timeouts, topic changes,
ConsumerGroupDescribe, and the member-epoch checks of OffsetCommit/OffsetFetch, for every
consumer group of one coordinator.

Owns: ``ConsumerConfig`` and ``ConsumerGroupCoordinator``. Every operation takes the
monotonic time ``now_ms`` as an argument and either raises a ``groups.consumer_errors``
refusal with nothing changed, or changes state and returns ``groups.effects.Result(reply,
effects)``; the effects (``groups.consumer_effects``) name the timers to (re)arm or cancel
and the group whose records to persist. The coordinator computes every assignment itself
(``groups.consumer_assignors``) and hands partitions over one member at a time
(``groups.consumer_group.reconcile``): a partition is revoked, its owner's next heartbeat
confirms, and only then is it given to its new owner.

Topic metadata comes from the injected ``topics()`` callable (name -> ``TopicMeta``: the
topic id and partition count), read once per operation. Committed offsets live in the
``OffsetBook`` shared with the classic and V1 coordinators.

Must not import: Twisted, ``broker``, anything that does I/O or reads a clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from data.names import is_valid_name
from groups.classic import MemoryOffsetBook, OffsetBook, ProtocolOf, TopicPartition
from groups.classic_effects import CancelTimer, CommittedOffset
from groups.consumer_assignors import CONSUMER_ASSIGNORS
from groups.consumer_effects import (
    ConsumerEffect,
    ConsumerGroupView,
    ConsumerMemberView,
    HeartbeatReply,
    HeartbeatRequest,
    OwnedPartitions,
    PersistConsumerGroup,
    PersistOffsets,
    ScheduleRebalanceTimeout,
    ScheduleSessionTimeout,
    TopicPartitionsView,
    consumer_rebalance_key,
    consumer_session_key,
)
from groups.consumer_errors import (
    ConsumerGroupNotEmpty,
    FencedInstanceId,
    FencedMemberEpoch,
    GroupIdInUseByOtherProtocol,
    GroupIdNotFound,
    GroupMaxSizeReached,
    InvalidConsumerGroupRequest,
    StaleMemberEpoch,
    UnknownMemberId,
    UnreleasedInstanceId,
    UnsupportedAssignor,
)
from groups.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    Partitions,
    TopicMeta,
    compile_subscription_regex,
    freeze,
    reconcile,
)
from groups.consumer_state import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupState,
    MemberState,
)
from groups.effects import Result
from groups.kafka_errors import InvalidGroupId, OffsetMetadataTooLarge

__all__ = ["ConsumerConfig", "ConsumerGroupCoordinator", "TopicsOf", "CONSUMER", "KIP848",
           "owned_of"]

CONSUMER = "consumer"
"""The group type ListGroups reports (Kafka's ``consumer`` type, beside ``classic``)."""
KIP848 = "KIP-848"
"""What ``live_protocol`` names when a group has members: the protocol the other
coordinators' refusals mention."""

TopicsOf = Callable[[], Mapping[str, TopicMeta]]
"""``topics()``: every topic by name with its id and partition count, as of now."""


@dataclass(frozen=True)
class ConsumerConfig:
    """The coordinator's settings, after Kafka's ``group.consumer.*`` broker configs."""

    session_timeout_ms: int = 45_000
    """A member not heard from for this long is fenced (``group.consumer.session.timeout.ms``:
    in KIP-848 the coordinator, not the client, sets it)."""
    heartbeat_interval_ms: int = 5_000
    """How often members heartbeat (``group.consumer.heartbeat.interval.ms``)."""
    max_size: int = 1000
    """Most members of one group (``group.consumer.max.size``)."""
    assignors: tuple[str, ...] = ("uniform", "range")
    """Assignors members may name; the first is the default (``group.consumer.assignors``)."""
    max_metadata_bytes: int = 4096
    """Longest offset metadata (``offset.metadata.max.bytes``)."""

    def __post_init__(self) -> None:
        if not 1 <= self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ValueError("need 1 <= heartbeat_interval_ms < session_timeout_ms")
        if self.max_size < 1:
            raise ValueError("max_size must be at least 1")
        if not self.assignors or any(a not in CONSUMER_ASSIGNORS for a in self.assignors):
            raise ValueError(f"assignors must be among {sorted(CONSUMER_ASSIGNORS)}")


def owned_of(partitions: Partitions) -> OwnedPartitions:
    """``Partitions`` as the sorted wire shape ``((topic_id, (p, ...)), ...)``."""
    return tuple((topic, tuple(sorted(ps))) for topic, ps in sorted(partitions.items()) if ps)


def _fingerprint(group: ConsumerGroup, member: ConsumerMember | None) -> tuple[object, ...]:
    """Everything persisted that one heartbeat may change."""
    if member is None:
        return (group.group_epoch, group.assignment_epoch)
    return (group.group_epoch, group.assignment_epoch, member.member_id, member.instance_id,
            member.rack_id, member.client_id, member.client_host, member.topic_names,
            member.topic_regex, member.server_assignor, member.rebalance_timeout_ms,
            member.member_epoch, member.previous_member_epoch, member.state,
            owned_of(member.assigned), owned_of(member.revoking))


class ConsumerGroupCoordinator:
    """Every consumer group of one coordinator.

    ``topics`` reads the topic metadata; ``protocol_of`` names *another* protocol that holds
    a group id live (a classic Kafka group, V1 members), which makes the id unavailable to
    consumer groups; ``offsets`` holds committed offsets; ``new_member_id()`` makes the id
    of a member that joins without one (default: a random UUID, as Kafka).
    """

    def __init__(self, *, topics: TopicsOf, protocol_of: ProtocolOf | None = None,
                 offsets: OffsetBook | None = None,
                 new_member_id: Callable[[], str] | None = None,
                 config: ConsumerConfig | None = None) -> None:
        self._topics = topics
        self._protocol_of: ProtocolOf = protocol_of or (lambda group_id: None)
        self.offsets: OffsetBook = offsets if offsets is not None else MemoryOffsetBook()
        self._new_member_id = new_member_id or (lambda: str(uuid.uuid4()))
        self.config = config or ConsumerConfig()
        self._groups: dict[str, ConsumerGroup] = {}
        self._last_token = 0

    # ------------------------------------------------------------------ state in, views out

    def restore(self, groups: Iterable[ConsumerGroup]) -> None:
        """Load saved groups into a coordinator that holds none (``ValueError`` otherwise,
        or for a group id given twice)."""
        if self._groups:
            raise ValueError("restore() needs a coordinator without groups")
        restored: dict[str, ConsumerGroup] = {}
        for group in groups:
            if group.group_id in restored:
                raise ValueError(f"group {group.group_id} given twice")
            restored[group.group_id] = group
        self._groups = restored

    def start(self, now_ms: int) -> Result[None]:
        """Arm a full session timer for every restored member and a full rebalance timer
        for each one that still has partitions to revoke (deadlines are not persisted)."""
        effects: list[ConsumerEffect] = []
        for group in self.groups():
            for member in group.members.values():
                effects.append(self._refresh(group, member, now_ms))
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    effects.append(self._arm_rebalance(group, member, now_ms))
        return Result(None, tuple(effects))

    def load(self, groups: Iterable[ConsumerGroup], now_ms: int) -> Result[list[str]]:
        """Take over groups read back from the group-state topic (a coordinator partition
        this broker now leads): each replaces any group of that id held here, and its
        members get timers as ``start`` arms them. The reply lists the ids taken."""
        effects: list[ConsumerEffect] = []
        taken: list[str] = []
        for group in groups:
            old = self._groups.get(group.group_id)
            if old is not None:
                effects += self._cancel_all(old)
            self._groups[group.group_id] = group
            taken.append(group.group_id)
            for member in group.members.values():
                effects.append(self._refresh(group, member, now_ms))
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    effects.append(self._arm_rebalance(group, member, now_ms))
        return Result(taken, tuple(effects))

    def unload(self, owned: Callable[[str], bool]) -> Result[list[str]]:
        """Forget every group whose id ``owned`` says belongs to a coordinator partition
        this broker no longer leads (their timers stop; the records keep them). The reply
        lists the ids forgotten."""
        gone = [group_id for group_id in sorted(self._groups) if owned(group_id)]
        effects: list[ConsumerEffect] = []
        for group_id in gone:
            effects += self._cancel_all(self._groups.pop(group_id))
        return Result(gone, tuple(effects))

    @staticmethod
    def _cancel_all(group: ConsumerGroup) -> list[ConsumerEffect]:
        return [CancelTimer(key(group.group_id, member_id)) for member_id in group.members
                for key in (consumer_session_key, consumer_rebalance_key)]

    def group(self, group_id: str) -> ConsumerGroup | None:
        """The live ``ConsumerGroup`` (do not mutate it), or None."""
        return self._groups.get(group_id)

    def groups(self) -> list[ConsumerGroup]:
        """Every group, sorted by id."""
        return [self._groups[key] for key in sorted(self._groups)]

    def live_protocol(self, group_id: str) -> str | None:
        """``"KIP-848"`` while the group has members (away static members count): what the
        classic and V1 coordinators ask before letting the same id in."""
        group = self._groups.get(group_id)
        return KIP848 if group is not None and group.members else None

    def list_groups(self) -> list[tuple[str, str, str]]:
        """ListGroups: ``(group_id, "consumer", state)`` for every group, sorted."""
        return [(g.group_id, CONSUMER, g.state.value) for g in self.groups()]

    def describe(self, group_id: str) -> ConsumerGroupView:
        """ConsumerGroupDescribe of one group; ``GroupIdNotFound`` if there is none."""
        group = self._groups.get(group_id)
        if group is None:
            raise GroupIdNotFound(f"consumer group {group_id} does not exist")
        names = {meta.topic_id: name for name, meta in self._topics().items()}

        def view(partitions: Partitions) -> tuple[TopicPartitionsView, ...]:
            return tuple(TopicPartitionsView(topic, names.get(topic, ""), ps)
                         for topic, ps in owned_of(partitions))

        members = tuple(
            ConsumerMemberView(m.member_id, m.instance_id, m.rack_id, m.member_epoch,
                               m.client_id, m.client_host, m.topic_names, m.topic_regex,
                               m.state.value, view(m.assigned), view(m.revoking),
                               view(group.target.get(m.member_id, {})))
            for m in group.members.values())
        return ConsumerGroupView(group.group_id, group.state.value, group.group_epoch,
                                 group.assignment_epoch, group.assignor, members)

    # ------------------------------------------------------------------ the heartbeat

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> Result[HeartbeatReply]:
        """ConsumerGroupHeartbeat: join (epoch 0), heartbeat (epoch > 0), leave (-1), leave
        temporarily (-2, static members).

        Refusals, checked in this order with nothing changed: ``InvalidGroupId``,
        ``InvalidConsumerGroupRequest``, ``GroupIdNotFound`` (another protocol holds the id;
        no such group for a non-join), ``UnsupportedAssignor``,
        ``InvalidRegularExpression``, ``UnknownMemberId``, ``FencedInstanceId``,
        ``UnreleasedInstanceId``, ``FencedMemberEpoch``, ``GroupMaxSizeReached``.
        """
        self._validate(request)
        group_id = request.group_id
        other = self._protocol_of(group_id)
        if other is not None:
            raise GroupIdInUseByOtherProtocol(f"group {group_id} is not a consumer group: it has live "
                                  f"{other} members")
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request, now_ms)
        group = self._groups.get(group_id)
        if group is None:
            if request.member_epoch != JOIN_EPOCH:
                raise GroupIdNotFound(f"consumer group {group_id} does not exist")
            group = ConsumerGroup(group_id, assignor=self.config.assignors[0])
        if request.server_assignor and request.server_assignor not in self.config.assignors:
            raise UnsupportedAssignor(f"assignor {request.server_assignor!r} is not one of "
                                      f"{', '.join(self.config.assignors)}")
        if request.topic_regex:
            compile_subscription_regex(request.topic_regex)
        member, replaced = self._find_member(group, request)
        topics = self._topics()

        # Nothing has changed so far; from here on the heartbeat is accepted.
        self._groups.setdefault(group_id, group)
        effects: list[ConsumerEffect] = []
        before = _fingerprint(group, member)
        was_revoking = member.state is MemberState.UNREVOKED_PARTITIONS if member else False
        before_owned = (member.assigned, member.revoking) if member else ({}, {})
        bump = False
        if member is None or replaced is not None:
            new = self._new_member(request)
            if replaced is not None:
                old = group.members[replaced]
                new.topic_names, new.topic_regex = old.topic_names, old.topic_regex
                new.server_assignor = old.server_assignor
                group.replace_static(replaced, new)
                effects += [CancelTimer(consumer_session_key(group_id, replaced)),
                            CancelTimer(consumer_rebalance_key(group_id, replaced))]
                before = ()  # the member id changed: always persisted
            else:
                group.add(new)
                bump = True
            member = new
        bump = self._apply_fields(member, request) or bump
        subscribed = group.subscribed_topics(topics)
        if subscribed != group.topics:
            group.topics = subscribed
            bump = True
        if bump:
            group.bump_epoch()
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, topics)
        owned = None if request.owned is None else {t: ps for t, ps in request.owned}
        ids = frozenset(topics[name].topic_id for name in member.subscribed_topics(topics))
        reconcile(group, member, owned, ids)
        group.update_state()

        effects.append(self._refresh(group, member, now_ms))
        revoking = member.state is MemberState.UNREVOKED_PARTITIONS
        if revoking and (member.assigned, member.revoking) != before_owned:
            effects.append(self._arm_rebalance(group, member, now_ms))
        elif was_revoking and not revoking:
            effects.append(CancelTimer(consumer_rebalance_key(group_id, member.member_id)))
        if _fingerprint(group, member) != before:
            effects.append(PersistConsumerGroup(group_id))
        send = (request.owned is not None or request.member_epoch == JOIN_EPOCH
                or member.assigned != before_owned[0])
        reply = HeartbeatReply(member.member_id, member.member_epoch,
                               self.config.heartbeat_interval_ms,
                               owned_of(member.assigned) if send else None)
        return Result(reply, tuple(effects))

    def _validate(self, request: HeartbeatRequest) -> None:
        if not is_valid_name(request.group_id):
            raise InvalidGroupId(f"group id {request.group_id!r} is not a name of 1-249 "
                                 f"characters from [A-Za-z0-9._-]")
        epoch = request.member_epoch
        if epoch < STATIC_LEAVE_EPOCH:
            raise InvalidConsumerGroupRequest(f"member epoch {epoch} is not valid")
        if epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
            raise InvalidConsumerGroupRequest("member epoch -2 (a temporary leave) needs a "
                                              "group.instance.id")
        if epoch != JOIN_EPOCH and not request.member_id:
            raise InvalidConsumerGroupRequest("a member id is required after the join")
        if epoch == JOIN_EPOCH:
            if request.rebalance_timeout_ms < 0:
                raise InvalidConsumerGroupRequest("the first heartbeat must carry the "
                                                  "rebalance timeout")
            if request.topic_names is None and request.topic_regex is None:
                raise InvalidConsumerGroupRequest("the first heartbeat must carry topic "
                                                  "names or a topic regex")
            if request.owned:
                raise InvalidConsumerGroupRequest("owned partitions must be empty when "
                                                  "(re)joining")
        if request.instance_id == "":
            raise InvalidConsumerGroupRequest("group.instance.id may not be empty")

    def _find_member(self, group: ConsumerGroup, request: HeartbeatRequest
                     ) -> tuple[ConsumerMember | None, str | None]:
        """``(member, replaced)``: the existing member (None: a new one joins), and the
        member id of an away static member the joiner takes over (else None)."""
        epoch, member_id, instance = (request.member_epoch, request.member_id,
                                      request.instance_id)
        member: ConsumerMember | None = None
        replaced: str | None = None
        if instance is not None:
            holder = group.static.get(instance)
            if epoch == JOIN_EPOCH:
                if holder is not None and holder == member_id:
                    member = group.members[holder]
                elif holder is not None and group.members[holder].is_away():
                    replaced = holder
                elif holder is not None:
                    raise UnreleasedInstanceId(f"instance {instance} of group "
                                               f"{group.group_id} is still held by a live "
                                               f"member")
            elif holder is None:
                raise UnknownMemberId(f"instance {instance} is not a member of group "
                                      f"{group.group_id}")
            elif holder != member_id:
                raise FencedInstanceId(f"instance {instance} of group {group.group_id} now "
                                       f"belongs to another member id")
            else:
                member = group.members[holder]
        else:
            member = group.members.get(member_id) if member_id else None
            if epoch != JOIN_EPOCH and member is None:
                raise UnknownMemberId(f"{member_id!r} is not a member of consumer group "
                                      f"{group.group_id}")
        if member is not None and epoch != JOIN_EPOCH:
            self._check_epoch(member, epoch, request.owned)
        if member is None and replaced is None and len(group.members) >= self.config.max_size:
            raise GroupMaxSizeReached(f"consumer group {group.group_id} has reached its "
                                      f"maximum size of {self.config.max_size} members")
        if member is None and member_id and member_id in group.members:
            raise FencedInstanceId(f"member id {member_id} of group {group.group_id} is "
                                   f"already used by another member")
        return member, replaced

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int,
                     owned: OwnedPartitions | None) -> None:
        """Kafka's ``throwIfMemberEpochIsInvalid``: ahead is fenced; behind is fenced unless
        it is the previous epoch with owned partitions within the current assignment (the
        answer that bumped the epoch was lost)."""
        if epoch > member.member_epoch:
            raise FencedMemberEpoch(f"member epoch {epoch} is ahead of the coordinator's "
                                    f"{member.member_epoch}; give up all partitions and "
                                    f"rejoin")
        if epoch < member.member_epoch:
            within = owned is not None and all(
                set(ps) <= member.assigned.get(topic, frozenset()) for topic, ps in owned)
            if epoch != member.previous_member_epoch or not within:
                raise FencedMemberEpoch(f"member epoch {epoch} is behind the coordinator's "
                                        f"{member.member_epoch}; give up all partitions and "
                                        f"rejoin")

    def _new_member(self, request: HeartbeatRequest) -> ConsumerMember:
        member_id = request.member_id or self._new_member_id()
        return ConsumerMember(member_id, instance_id=request.instance_id,
                              rebalance_timeout_ms=request.rebalance_timeout_ms)

    @staticmethod
    def _apply_fields(member: ConsumerMember, request: HeartbeatRequest) -> bool:
        """Copy the request's non-null fields into the member; True when the subscription
        (names, regex, assignor) changed, which needs a new group epoch."""
        changed = False
        if request.topic_names is not None:
            names = tuple(sorted(set(request.topic_names)))
            changed |= names != member.topic_names
            member.topic_names = names
        if request.topic_regex is not None:
            regex = request.topic_regex or None
            changed |= regex != member.topic_regex
            member.topic_regex = regex
        if request.server_assignor is not None:
            assignor = request.server_assignor or None
            changed |= assignor != member.server_assignor
            member.server_assignor = assignor
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.rack_id is not None:
            member.rack_id = request.rack_id or None
        if request.client_id or request.client_host:
            member.client_id, member.client_host = request.client_id, request.client_host
        return changed

    def _assign(self, group: ConsumerGroup, topics: Mapping[str, TopicMeta]) -> None:
        """Compute the target for the current group epoch with the preferred assignor.

        Topic ids are handed to the assignor as their rank among the group's sorted topic
        ids (same order, so the same result) because small ints hash and compare far
        faster than UUIDs; members with the same subscription share one resolution."""
        name = group.preferred_assignor(self.config.assignors[0])
        ids = sorted(meta.topic_id for meta in group.topics.values())
        rank = {topic: index for index, topic in enumerate(ids)}
        resolved: dict[tuple[tuple[str, ...], str | None], list[int]] = {}
        subscriptions: dict[str, list[int]] = {}
        for member in group.members.values():
            key = (member.topic_names, member.topic_regex)
            if key not in resolved:
                resolved[key] = sorted(rank[topics[n].topic_id]
                                       for n in member.subscribed_topics(topics)
                                       if topics[n].topic_id in rank)
            subscriptions[member.member_id] = resolved[key]
        counts = {rank[meta.topic_id]: meta.partitions for meta in group.topics.values()}
        previous = {m: {rank[t]: ps for t, ps in held.items() if t in rank}
                    for m, held in group.target.items()}
        target = CONSUMER_ASSIGNORS[name](subscriptions, counts, previous)
        group.set_target({m: freeze({ids[i]: ps for i, ps in held.items()})
                          for m, held in target.items()}, name)

    def _leave(self, request: HeartbeatRequest, now_ms: int) -> Result[HeartbeatReply]:
        group = self._groups.get(request.group_id)
        if group is None:
            raise GroupIdNotFound(f"consumer group {request.group_id} does not exist")
        member_id = request.member_id
        if request.instance_id is not None:
            holder = group.static.get(request.instance_id)
            if holder is None:
                raise UnknownMemberId(f"instance {request.instance_id} is not a member of "
                                      f"group {group.group_id}")
            if holder != member_id:
                raise FencedInstanceId(f"instance {request.instance_id} of group "
                                       f"{group.group_id} belongs to another member id")
        elif member_id not in group.members:
            raise UnknownMemberId(f"{member_id!r} is not a member of consumer group "
                                  f"{group.group_id}")
        interval = self.config.heartbeat_interval_ms
        if request.member_epoch == LEAVE_EPOCH:
            effects = self._remove_member(group, member_id)
            return Result(HeartbeatReply(member_id, LEAVE_EPOCH, interval), tuple(effects))
        member = group.members[member_id]
        group.set_member_assignment(member, member.assigned, {})
        group.set_member_state(member, MemberState.STABLE, STATIC_LEAVE_EPOCH)
        group.update_state()
        return Result(HeartbeatReply(member_id, STATIC_LEAVE_EPOCH, interval), (
            CancelTimer(consumer_rebalance_key(group.group_id, member_id)),
            self._refresh(group, member, now_ms), PersistConsumerGroup(group.group_id)))

    def _remove_member(self, group: ConsumerGroup, member_id: str) -> list[ConsumerEffect]:
        """Remove a member (leave, fenced by a timer): its partitions are free, the group
        epoch goes up and the target is recomputed for those left."""
        group.remove(member_id)
        group.bump_epoch()
        if group.members:
            self._assign(group, self._topics())
        return [CancelTimer(consumer_session_key(group.group_id, member_id)),
                CancelTimer(consumer_rebalance_key(group.group_id, member_id)),
                PersistConsumerGroup(group.group_id)]

    # ------------------------------------------------------------------ timers and topics

    def expire_session(self, group_id: str, member_id: str, token: int,
                       now_ms: int) -> Result[bool]:
        """A session timer fired: the member has not heartbeated for the session timeout and
        is fenced (removed; the group epoch goes up). A stale firing changes nothing. The
        reply says whether the member was removed."""
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.session_token != token:
            return Result(False)
        return Result(True, tuple(self._remove_member(group, member_id)))

    def expire_rebalance(self, group_id: str, member_id: str, member_epoch: int, token: int,
                         now_ms: int) -> Result[bool]:
        """A rebalance timer fired: a member asked to revoke partitions has not confirmed
        within its rebalance timeout and is fenced. Stale firings (it revoked, moved to
        another epoch, left) change nothing. The reply says whether it was removed."""
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.rebalance_token != token \
                or member.member_epoch != member_epoch \
                or member.state is not MemberState.UNREVOKED_PARTITIONS:
            return Result(False)
        return Result(True, tuple(self._remove_member(group, member_id)))

    def metadata_changed(self, now_ms: int) -> Result[list[str]]:
        """Topics were created, deleted or gained partitions: every group whose subscribed
        topics' metadata changed gets a new group epoch and a new target (its members learn
        it at their next heartbeat). The reply lists those groups."""
        topics = self._topics()
        changed: list[str] = []
        effects: list[ConsumerEffect] = []
        for group in self.groups():
            if not group.members:
                continue
            subscribed = group.subscribed_topics(topics)
            if subscribed == group.topics:
                continue
            group.topics = subscribed
            group.bump_epoch()
            self._assign(group, topics)
            changed.append(group.group_id)
            effects.append(PersistConsumerGroup(group.group_id))
        return Result(changed, tuple(effects))

    # ------------------------------------------------------------------ offsets

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int) -> None:
        """OffsetCommit v9+ against a consumer group (Kafka's
        ``ConsumerGroup.validateOffsetCommit``): epoch < 0 from a tool is accepted while the
        group has no members; otherwise the member must exist (``UnknownMemberId``) and the
        epoch must be exactly its current one (``StaleMemberEpoch``)."""
        group = self._groups.get(group_id)
        if member_epoch < 0 and (group is None or not group.members):
            return
        if group is None:
            raise UnknownMemberId(f"{member_id!r} is not a member of consumer group "
                                  f"{group_id}: there is no such group")
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberId(f"{member_id!r} is not a member of consumer group "
                                  f"{group_id}")
        if member_epoch != member.member_epoch:
            raise StaleMemberEpoch(f"member epoch {member_epoch} is not {member_id}'s "
                                   f"current epoch {member.member_epoch}")

    def validate_offset_fetch(self, group_id: str, member_id: str | None,
                              member_epoch: int) -> None:
        """OffsetFetch v9+: with member epoch -1 (or no member id) anyone may read; else
        as ``validate_offset_commit`` but an unknown group is ``GroupIdNotFound``."""
        if member_id is None or member_epoch < 0:
            return
        if group_id not in self._groups:
            raise GroupIdNotFound(f"consumer group {group_id} does not exist")
        self.validate_offset_commit(group_id, member_id, member_epoch)

    def commit_offsets(self, group_id: str, member_id: str, member_epoch: int,
                       offsets: Mapping[TopicPartition, CommittedOffset]
                       ) -> Result[dict[TopicPartition, OffsetMetadataTooLarge | None]]:
        """OffsetCommit with a member epoch: validated as ``validate_offset_commit``, then
        each partition stored or refused ``OffsetMetadataTooLarge``. (A commit does not
        refresh the session: in KIP-848 only heartbeats do.)"""
        if not is_valid_name(group_id):
            raise InvalidGroupId(f"group id {group_id!r} is not a valid name")
        self.validate_offset_commit(group_id, member_id, member_epoch)
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
        return Result(reply, (PersistOffsets(),) if stored else ())

    # ------------------------------------------------------------------ admin

    def delete_group(self, group_id: str) -> Result[bool]:
        """Forget an empty group (it goes Dead); ``ConsumerGroupNotEmpty`` while it has
        members. Replies whether there was a group."""
        group = self._groups.get(group_id)
        if group is None:
            return Result(False)
        if group.members:
            raise ConsumerGroupNotEmpty(f"consumer group {group_id} has "
                                        f"{len(group.members)} members")
        group.transition_to(ConsumerGroupState.DEAD)
        del self._groups[group_id]
        return Result(True, (PersistConsumerGroup(group_id),))

    # ------------------------------------------------------------------ helpers

    def _next_token(self) -> int:
        self._last_token += 1
        return self._last_token

    def _refresh(self, group: ConsumerGroup, member: ConsumerMember,
                 now_ms: int) -> ScheduleSessionTimeout:
        member.session_token = self._next_token()
        return ScheduleSessionTimeout(consumer_session_key(group.group_id, member.member_id),
                                      group.group_id, member.member_id, member.session_token,
                                      now_ms + self.config.session_timeout_ms)

    def _arm_rebalance(self, group: ConsumerGroup, member: ConsumerMember,
                       now_ms: int) -> ScheduleRebalanceTimeout:
        member.rebalance_token = self._next_token()
        return ScheduleRebalanceTimeout(
            consumer_rebalance_key(group.group_id, member.member_id), group.group_id,
            member.member_id, member.member_epoch, member.rebalance_token,
            now_ms + member.rebalance_timeout_ms)
