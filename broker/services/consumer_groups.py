"""The Twisted shell of the KIP-848 consumer-group coordinator: timers, topic metadata and
the cross-protocol guard, for the V1 ``GROUP_HEARTBEAT`` command (and later the Kafka
ConsumerGroupHeartbeat handler).

Owns: ``ConsumerGroupService``. The rules live in ``groups.consumer_coordinator``; this
module performs the effects it returns:

* **timers** on the injected clock, keyed by the effect's key (``consumer-session:...``,
  ``consumer-rebalance:...``): arming a key again replaces its timer; a firing calls
  ``expire_session``/``expire_rebalance`` with the token it was armed with, so a stale
  firing changes nothing;
* **topic metadata**: ``topics()`` reads the store's topics and partition counts; until the
  topic-id issue gives topics real ids, a topic's id is ``uuid5`` of its name (a topic
  deleted and created again under the same name keeps its id);
* **offsets**: shared with V1 and Kafka classic groups (``SharedOffsetBook``);
* **the cross-protocol guard**: a group id live under V1 (or Kafka classic) is refused to
  consumer groups, and V1's JOIN refuses a group id live here.

* **persistence**: a ``PersistConsumerGroup`` effect marks the group-state log
  (``broker.services.group_log.GroupStateLog``) changed; its next write takes every
  consumer group's records (``groups.consumer_records``) beside the classic groups' and
  offsets. ``durable()`` fires once they are in ``__skerry_groups``: a heartbeat that
  changed the group is answered only then, so an answer a member acts on survives a
  restart or a coordinator failover. ``load_groups``/``unload_groups`` take over and
  forget the groups of a coordinator partition (at start, and as leadership moves).

Must not import: the global reactor (time comes from the injected ``clock``), transports.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from broker.errors import Unavailable
from broker.services.group_log import GroupStateLog
from broker.services.groups import GroupService
from broker.services.kafka_groups import SharedOffsetBook
from groups.classic_effects import CancelTimer, CommittedOffset
from groups.consumer_coordinator import ConsumerConfig, ConsumerGroupCoordinator
from groups.consumer_effects import (
    ConsumerGroupView,
    HeartbeatReply,
    HeartbeatRequest,
    PersistConsumerGroup,
    PersistOffsets,
    ScheduleRebalanceTimeout,
    ScheduleSessionTimeout,
)
from groups.consumer_group import ConsumerGroup, TopicMeta
from groups.effects import Result
from groups.errors import PartitionNotOwned
from groups.records import consumer_group_scope

__all__ = ["ConsumerGroupService", "topic_id_for"]

log = logging.getLogger("skerry.consumer_groups")

_TOPIC_NAMESPACE = uuid.UUID("5c1e7a2e-9d3b-4f0e-8a61-0b6f3c2d9e48")


def topic_id_for(name: str) -> uuid.UUID:
    """The stand-in topic id of a topic name (``uuid5``), until topics carry real ids."""
    return uuid.uuid5(_TOPIC_NAMESPACE, name)


class ConsumerGroupService:
    """Consumer groups (KIP-848) for the broker: the coordinator plus its timers.

    ``topic_counts()`` returns every topic's partition count by name. Refusals
    (``groups.consumer_errors``) are raised synchronously with nothing changed. After
    ``close()`` every request is refused with ``Unavailable``.
    """

    def __init__(self, groups: GroupService, clock: IReactorTime,
                 topic_counts: Callable[[], Mapping[str, int]], *,
                 config: ConsumerConfig | None = None,
                 other_protocol: Callable[[str], str | None] | None = None,
                 state_log: GroupStateLog | None = None,
                 topic_id: Callable[[str], uuid.UUID | None] | None = None) -> None:
        self._state_log = state_log
        self._topic_counts = topic_counts
        self._topic_id = topic_id or (lambda name: None)
        """A topic's own id (what Kafka's Metadata v10+ tells clients), None for a topic
        without one: then the stand-in ``topic_id_for(name)``."""
        self._ids: dict[str, uuid.UUID] = {}
        other = other_protocol or (lambda group_id: None)
        self.coordinator = ConsumerGroupCoordinator(
            topics=self.topics, offsets=SharedOffsetBook(groups), config=config,
            protocol_of=lambda g: groups.live_protocol(g) or other(g))
        self.groups = groups
        self._clock = clock
        self._timers: dict[str, IDelayedCall] = {}
        self._closed = False
        self.persist_count = 0
        groups.set_protocol_guard(
            lambda g: other(g) or self.coordinator.live_protocol(g))

    def topics(self) -> dict[str, TopicMeta]:
        """Every topic's metadata by name."""
        out = {}
        for name, count in self._topic_counts().items():
            topic = self._topic_id(name) or self._ids.get(name)
            if topic is None:
                topic = self._ids[name] = topic_id_for(name)
            out[name] = TopicMeta(topic, count)
        return out

    def name_of(self) -> dict[uuid.UUID, str]:
        """Topic id -> name, for the transports that speak names."""
        return {meta.topic_id: name for name, meta in self.topics().items()}

    # ------------------------------------------------------------------ requests

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatReply:
        """A consumer-group heartbeat (join, heartbeat, leave): the reply at once."""
        now = self._open_now()
        return self._perform(self.coordinator.heartbeat(request, now), now)

    def describe(self, group_id: str) -> ConsumerGroupView:
        """ConsumerGroupDescribe of one group (``GroupIdNotFound`` when unknown)."""
        return self.coordinator.describe(group_id)

    def live_protocol(self, group_id: str) -> str | None:
        """``"KIP-848"`` while the group has members."""
        return self.coordinator.live_protocol(group_id)

    def validate_commit(self, group_id: str, member_id: str, member_epoch: int,
                        topic: str, partition: int) -> None:
        """A V1 COMMIT into a consumer group: the member's current epoch, and a partition
        it holds - assigned, or being revoked and not yet confirmed, so that a member can
        commit what it consumed before it gives a partition up (else
        ``UnknownMemberId``/``StaleMemberEpoch``/``PartitionNotOwned``)."""
        self.coordinator.validate_offset_commit(group_id, member_id, member_epoch)
        group = self.coordinator.group(group_id)
        member = group.members[member_id] if group is not None else None
        meta = self.topics().get(topic)
        held = frozenset() if member is None or meta is None else \
            member.assigned.get(meta.topic_id, frozenset()) | \
            member.revoking.get(meta.topic_id, frozenset())
        if partition not in held:
            raise PartitionNotOwned(f"partition {partition} of {topic} is not held by "
                                    f"{member_id} at epoch {member_epoch}")

    def durable(self) -> Deferred[None]:
        """Fires once the group-state topic holds every consumer-group change made so far
        (at once without a state log)."""
        return succeed(None) if self._state_log is None else self._state_log.durable()

    def load_groups(self, groups: list[ConsumerGroup]) -> None:
        """Take over consumer groups read back from ``__skerry_groups`` (at start, or a
        coordinator partition this broker now leads): each member gets a full session
        timeout from now, as after a Kafka coordinator failover."""
        if self._closed or not groups:
            return
        now = self._now_ms()
        self._perform(self.coordinator.load(groups, now), now)

    def unload_groups(self, owned: Callable[[str], bool]) -> list[str]:
        """Forget the consumer groups ``owned`` names (a coordinator partition this broker
        no longer leads); their timers stop. Returns their ids."""
        result = self.coordinator.unload(owned)
        self._perform(result, self._now_ms())
        return list(result.reply)

    def is_consumer_group(self, group_id: str) -> bool:
        """Whether this coordinator holds ``group_id`` (with or without members)."""
        return self.coordinator.group(group_id) is not None

    def assignment_of(self, group_id: str, member_id: str
                      ) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """A member's ``(assigned, target)`` partitions as sorted ``(topic, partition)``
        pairs (topics by name; a topic gone since is left out); empty for a member that
        is not (or no longer) in the group."""
        group = self.coordinator.group(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return [], []
        names = self.name_of()

        def named(partitions: Mapping[uuid.UUID, frozenset[int]]) -> list[tuple[str, int]]:
            return sorted((names[t], p) for t, ps in partitions.items() if t in names
                          for p in ps)

        return named(member.assigned), named(group.target.get(member_id, {}))

    def commit(self, group_id: str, member_id: str, member_epoch: int, topic: str,
               partition: int, offset: int) -> Deferred[None]:
        """Store a V1 COMMIT of a consumer-group member (checked as ``validate_commit``);
        fires once the shared offsets store holds it."""
        self._open_now()
        self.validate_commit(group_id, member_id, member_epoch, topic, partition)
        self.coordinator.commit_offsets(group_id, member_id, member_epoch,
                                        {(topic, partition): CommittedOffset(offset)})
        return self.groups.offsets_durable()

    def commit_offsets(self, group_id: str, member_id: str, member_epoch: int,
                       offsets: Mapping[tuple[str, int], CommittedOffset]
                       ) -> Deferred[dict[tuple[str, int], Any]]:
        """Kafka's OffsetCommit v9+ into a consumer group (``validate_offset_commit`` of the
        coordinator; Kafka checks no partition ownership): each partition's outcome (None:
        stored, else ``OffsetMetadataTooLarge``) once the shared offsets store holds them."""
        now = self._open_now()
        result = self.coordinator.commit_offsets(group_id, member_id, member_epoch, offsets)
        outcomes = self._perform(result, now)
        if any(isinstance(e, PersistOffsets) for e in result.effects):
            return self.groups.offsets_durable().addCallback(lambda _: outcomes)
        return succeed(outcomes)

    def validate_offset_fetch(self, group_id: str, member_id: str | None,
                              member_epoch: int) -> None:
        """Kafka's OffsetFetch v9+ from a member (see the coordinator's method)."""
        self._open_now()
        self.coordinator.validate_offset_fetch(group_id, member_id, member_epoch)

    def list_groups(self) -> list[tuple[str, str, str]]:
        """``(group_id, "consumer", state)`` of every consumer group, sorted."""
        return self.coordinator.list_groups()

    def metadata_changed(self) -> list[str]:
        """Topics were created, deleted or grew: groups whose subscription changed get a
        new target (the core calls this)."""
        if self._closed:
            return []
        now = self._now_ms()
        changed: list[str] = self._perform(self.coordinator.metadata_changed(now), now)
        for group_id in changed:
            log.info("consumer group %s: subscribed topics changed, new target", group_id)
        return changed

    def close(self) -> None:
        """Stop the timers; later requests are refused with ``Unavailable``."""
        self._closed = True
        for call in self._timers.values():
            if call.active():
                call.cancel()
        self._timers.clear()

    # ------------------------------------------------------------------ effects

    def _now_ms(self) -> int:
        return round(self._clock.seconds() * 1000)

    def _open_now(self) -> int:
        if self._closed:
            raise Unavailable("consumer group coordinator is shutting down")
        return self._now_ms()

    def _perform(self, result: Result[Any], now_ms: int) -> Any:
        for effect in result.effects:
            if isinstance(effect, ScheduleSessionTimeout | ScheduleRebalanceTimeout):
                self._cancel(effect.key)
                delay = max(0.0, (effect.deadline_ms - now_ms) / 1000.0)
                self._timers[effect.key] = self._clock.callLater(delay, self._fire, effect)
            elif isinstance(effect, CancelTimer):
                self._cancel(effect.key)
            elif isinstance(effect, PersistConsumerGroup):
                self.persist_count += 1
                if self._state_log is not None:
                    self._state_log.changed((consumer_group_scope(effect.group_id),))
        return result.reply

    def _cancel(self, key: str) -> None:
        call = self._timers.pop(key, None)
        if call is not None and call.active():
            call.cancel()

    def _fire(self, timer: ScheduleSessionTimeout | ScheduleRebalanceTimeout) -> None:
        call = self._timers.get(timer.key)
        if call is not None and not call.active():
            del self._timers[timer.key]  # the call firing now; a newer armed timer stays
        if self._closed:
            return
        now = self._now_ms()
        if isinstance(timer, ScheduleSessionTimeout):
            result = self.coordinator.expire_session(timer.group_id, timer.member_id,
                                                     timer.token, now)
            why = "session timeout"
        else:
            result = self.coordinator.expire_rebalance(timer.group_id, timer.member_id,
                                                       timer.member_epoch, timer.token, now)
            why = "rebalance timeout: partitions not revoked in time"
        if result.reply:
            log.info("consumer group %s: member %s fenced (%s)", timer.group_id,
                     timer.member_id, why)
        self._perform(result, now)
