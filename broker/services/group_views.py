"""One read-only view of every group a broker coordinates, whatever its protocol, per
(group, topic) pair as V1 and the tools show groups: the classic groups (V1 JOIN/SYNC,
Iggy, with the offsets Kafka groups share) and KIP-848 consumer groups (GROUP_HEARTBEAT).

Owns: ``GroupTopicView`` (DESCRIBE_GROUP's figures plus the group type and, for a consumer
group, its group and assignment epochs, each member's epoch and the partitions each member
waits for) and ``GroupViews`` (``list_groups`` and ``describe``, what V1 DESCRIBE_GROUP,
the console and ``/metrics`` read).

A consumer group is keyed by its name alone and may consume several topics; it is shown on
each topic it subscribes to (and on each topic it has committed offsets on). Its
``generation`` is its group epoch, its ``members`` every member with the partitions of that
topic it owns now, ``pending`` the partitions of its target it does not own yet (another
member is still giving them up).

Must not import: transports, the global reactor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.services.consumer_groups import ConsumerGroupService, topic_id_for
from broker.services.groups import GroupService
from groups.errors import UnknownGroup

__all__ = ["CLASSIC", "CONSUMER", "GroupTopicView", "GroupViews"]

CLASSIC = "classic"
CONSUMER = "consumer"

Members = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class GroupTopicView:
    """A group on one topic. The first fields are ``groups.coordinator.GroupDescription``'s
    (same meaning); ``type`` is ``classic`` or ``consumer``; the rest is set for consumer
    groups only."""

    group: str
    topic: str
    state: str
    generation: int
    assignor: str
    members: Members
    partitions: tuple[int, ...]
    committed: tuple[int, ...]
    hw: tuple[int, ...]
    lag: tuple[int, ...]
    type: str = CLASSIC
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    member_epochs: tuple[tuple[str, int], ...] = ()
    pending: Members = ()
    """``(member_id, partitions)`` for each member with target partitions of this topic
    it does not own yet."""


class GroupViews:
    """``list_groups()`` and ``describe(group, topic)`` over both kinds of group."""

    def __init__(self, groups: GroupService, consumer: ConsumerGroupService | None, *,
                 hw_for: Callable[[str, int], int],
                 partitions_for: Callable[[str], int]) -> None:
        self.groups = groups
        self.consumer = consumer
        self._hw_for = hw_for
        self._partitions_for = partitions_for

    def list_groups(self) -> list[tuple[str, str]]:
        """Every (group, topic) pair of either kind, sorted."""
        pairs = set(self.groups.list_groups())
        if self.consumer is not None:
            for group in self.consumer.coordinator.groups():
                pairs.update((group.group_id, topic) for topic in group.topics)
        return sorted(pairs)

    def consumer_topics(self, group_id: str) -> list[str] | None:
        """The topics a consumer group is shown on (None: not a consumer group)."""
        if self.consumer is None:
            return None
        group = self.consumer.coordinator.group(group_id)
        if group is None:
            return None
        return sorted(set(group.topics) | {t for g, t in self.groups.list_groups()
                                           if g == group_id})

    def _is_consumer(self, group_id: str, topic: str) -> bool:
        # A consumer group with members owns the name; an empty one gives way to a classic
        # group JOINed on the topic since (the name is free once a group has no members).
        group = None if self.consumer is None else self.consumer.coordinator.group(group_id)
        if group is None:
            return False
        return bool(group.members) or self.groups.group(group_id, topic) is None

    def describe(self, group_id: str, topic: str) -> GroupTopicView:
        """The group on ``topic``; ``UnknownGroup`` for a pair ``list_groups`` does not
        show."""
        topics = self.consumer_topics(group_id) if self._is_consumer(group_id, topic) \
            else None
        if topics is None:
            info = self.groups.describe(group_id, topic)
            return GroupTopicView(info.group, info.topic, info.state, info.generation,
                                  info.assignor, info.members, info.partitions,
                                  info.committed, info.hw, info.lag)
        if topic not in topics:
            raise UnknownGroup(f"no group {group_id} on topic {topic}")
        assert self.consumer is not None
        group = self.consumer.coordinator.group(group_id)
        assert group is not None
        meta = group.topics.get(topic)
        topic_id = meta.topic_id if meta is not None else topic_id_for(topic)
        partitions = tuple(range(self._partitions_for(topic)))
        committed = tuple(self._committed(group_id, topic, p) for p in partitions)
        hw = tuple(self._hw_for(topic, p) for p in partitions)
        members: list[tuple[str, tuple[int, ...]]] = []
        pending: list[tuple[str, tuple[int, ...]]] = []
        epochs: list[tuple[str, int]] = []
        for member_id in sorted(group.members):
            member = group.members[member_id]
            owned = member.assigned.get(topic_id, frozenset())
            target = group.target.get(member_id, {}).get(topic_id, frozenset())
            members.append((member_id, tuple(sorted(owned))))
            epochs.append((member_id, member.member_epoch))
            if target - owned:
                pending.append((member_id, tuple(sorted(target - owned))))
        return GroupTopicView(
            group_id, topic, group.state.value.lower(), group.group_epoch, group.assignor,
            tuple(members), partitions, committed, hw,
            tuple(max(0, h + 1 - c) for h, c in zip(hw, committed, strict=True)),
            type=CONSUMER, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch, member_epochs=tuple(epochs),
            pending=tuple(pending))

    def _committed(self, group_id: str, topic: str, partition: int) -> int:
        found = self.groups.committed_offset(group_id, topic, partition)
        return 0 if found is None else found[0]
