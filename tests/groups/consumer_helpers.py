"""Drivers for the KIP-848 consumer-group tests: a coordinator with a fake clock whose
timers follow the effects, and simulated consumers that behave like Kafka's (they drop
revoked partitions as soon as an answer takes them away, report what they own, and take
new partitions when an answer gives them)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from groups.classic_effects import CancelTimer
from groups.consumer_coordinator import ConsumerConfig, ConsumerGroupCoordinator
from groups.consumer_effects import (
    HeartbeatReply,
    HeartbeatRequest,
    ScheduleRebalanceTimeout,
    ScheduleSessionTimeout,
)
from groups.consumer_group import TopicMeta

SESSION_MS = 45_000
INTERVAL_MS = 5_000
REBALANCE_MS = 30_000


def topic_id(name: str) -> uuid.UUID:
    """A fixed topic id per name (uuid5), so tests can write expected ids."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"skerry-test/{name}")


class Driver:
    """One coordinator, the topics it sees, a clock and the armed timers."""

    def __init__(self, topics: dict[str, int] | None = None,
                 config: ConsumerConfig | None = None) -> None:
        self.meta: dict[str, TopicMeta] = {}
        for name, count in (topics or {"t": 6}).items():
            self.set_topic(name, count)
        counter = iter(range(1, 1_000_000))
        self.coordinator = ConsumerGroupCoordinator(
            topics=lambda: self.meta, new_member_id=lambda: f"gen{next(counter)}",
            config=config or ConsumerConfig(session_timeout_ms=SESSION_MS,
                                            heartbeat_interval_ms=INTERVAL_MS))
        self.now = 0
        self.timers: dict[str, Any] = {}
        self.persisted: list[str] = []
        self.fired: list[str] = []

    def set_topic(self, name: str, partitions: int) -> None:
        self.meta[name] = TopicMeta(topic_id(name), partitions)

    def apply(self, effects: tuple[Any, ...]) -> None:
        for effect in effects:
            if isinstance(effect, ScheduleSessionTimeout | ScheduleRebalanceTimeout):
                self.timers[effect.key] = effect
            elif isinstance(effect, CancelTimer):
                self.timers.pop(effect.key, None)
            elif hasattr(effect, "group_id"):
                self.persisted.append(effect.group_id)

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatReply:
        result = self.coordinator.heartbeat(request, self.now)
        self.apply(result.effects)
        return result.reply

    def metadata_changed(self) -> list[str]:
        result = self.coordinator.metadata_changed(self.now)
        self.apply(result.effects)
        return result.reply

    def advance(self, ms: int) -> None:
        """Move the clock, firing due timers in deadline order (as the shell would)."""
        end = self.now + ms
        while True:
            due = sorted((t.deadline_ms, key) for key, t in self.timers.items()
                         if t.deadline_ms <= end)
            if not due:
                break
            deadline, key = due[0]
            timer = self.timers.pop(key)
            self.now = max(self.now, deadline)
            if isinstance(timer, ScheduleSessionTimeout):
                result = self.coordinator.expire_session(timer.group_id, timer.member_id,
                                                         timer.token, self.now)
            else:
                result = self.coordinator.expire_rebalance(
                    timer.group_id, timer.member_id, timer.member_epoch, timer.token,
                    self.now)
            if result.reply:
                self.fired.append(key)
            self.apply(result.effects)
        self.now = end


@dataclass
class Consumer:
    """A simulated KIP-848 consumer of group ``group``."""

    driver: Driver
    group: str = "g"
    topics: tuple[str, ...] | None = ("t",)
    regex: str | None = None
    instance_id: str | None = None
    assignor: str | None = None
    member_id: str = ""
    epoch: int = 0
    owned: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    joined: bool = False
    _report: bool = True

    def owned_wire(self) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
        return tuple((t, tuple(sorted(ps))) for t, ps in sorted(self.owned.items()) if ps)

    def request(self, *, full: bool = False) -> HeartbeatRequest:
        if not self.joined:
            return HeartbeatRequest(self.group, self.member_id, 0,
                                    instance_id=self.instance_id,
                                    rebalance_timeout_ms=REBALANCE_MS,
                                    topic_names=self.topics, topic_regex=self.regex,
                                    server_assignor=self.assignor, owned=())
        owned = self.owned_wire() if (self._report or full) else None
        return HeartbeatRequest(self.group, self.member_id, self.epoch,
                                instance_id=self.instance_id, owned=owned)

    def heartbeat(self, *, full: bool = False, revoke: bool = True) -> HeartbeatReply:
        """Send one heartbeat and act on the answer. ``revoke=False`` models a consumer
        slow to revoke: it keeps partitions an answer takes away (and keeps reporting
        them)."""
        reply = self.driver.heartbeat(self.request(full=full))
        self.joined = True
        self.member_id, self.epoch = reply.member_id, reply.member_epoch
        self._report = False
        if reply.assignment is not None:
            new = {t: set(ps) for t, ps in reply.assignment}
            kept = {t: set(ps) & self.owned.get(t, set()) for t, ps in new.items()}
            if not revoke:
                for t, ps in self.owned.items():
                    kept.setdefault(t, set()).update(ps)
                for t, ps in new.items():
                    kept.setdefault(t, set()).update(ps)
                new = kept
            if new != self.owned:
                self._report = True
            self.owned = {t: ps for t, ps in new.items() if ps}
        return reply

    def leave(self, *, static: bool = False) -> HeartbeatReply:
        reply = self.driver.heartbeat(HeartbeatRequest(
            self.group, self.member_id, -2 if static else -1, instance_id=self.instance_id))
        self.owned = {}
        self.joined = False
        self.epoch = 0
        return reply

    def restart(self) -> None:
        """A new process: new member id (as Kafka 4 clients make one), nothing owned."""
        self.owned, self.joined, self.epoch, self.member_id = {}, False, 0, ""
        self._report = True

    def partitions(self, name: str = "t") -> list[int]:
        return sorted(self.owned.get(topic_id(name), set()))
