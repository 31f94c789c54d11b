"""A test driver for groups.classic (not tests themselves): it performs the coordinator's
effects the way the shell will - held requests answered by ``Deliver``, timers kept by key
(rescheduling replaces) and fired in deadline order by ``advance`` - on an injected clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groups.classic import ClassicGroupCoordinator, ProtocolOf
from groups.classic_effects import (
    CancelTimer,
    Deliver,
    Held,
    JoinReply,
    ScheduleJoin,
    ScheduleSession,
)
from groups.effects import Result

RANGE = (("range", b"meta-range"), ("roundrobin", b"meta-rr"))


class Counter:
    """``new_member_suffix``: 1, 2, 3... so generated member ids are predictable."""

    def __init__(self) -> None:
        self.value = 0

    def __call__(self) -> str:
        self.value += 1
        return str(self.value)


class Driver:
    """One coordinator, its timers and the answers to its held requests."""

    def __init__(self, protocol_of: ProtocolOf | None = None) -> None:
        self.coordinator = ClassicGroupCoordinator(protocol_of=protocol_of,
                                                   new_member_suffix=Counter())
        self.now = 0
        self.timers: dict[str, ScheduleSession | ScheduleJoin] = {}
        self.outstanding: set[int] = set()
        self.delivered: dict[int, Any] = {}
        self.fired: list[tuple[str, bool]] = []

    def perform(self, result: Result[Any]) -> Any:
        """Perform the effects; return the reply."""
        if isinstance(result.reply, Held):
            assert result.reply.ticket not in self.outstanding
            self.outstanding.add(result.reply.ticket)
        for effect in result.effects:
            if isinstance(effect, Deliver):
                assert effect.ticket in self.outstanding, effect
                self.outstanding.remove(effect.ticket)
                self.delivered[effect.ticket] = effect.reply
            elif isinstance(effect, ScheduleSession | ScheduleJoin):
                self.timers[effect.key] = effect
            elif isinstance(effect, CancelTimer):
                self.timers.pop(effect.key, None)
        return result.reply

    def answer(self, reply: Any) -> Any:
        """A reply, or what was delivered for it if it was held (None while still held)."""
        if isinstance(reply, Held):
            return self.delivered.get(reply.ticket)
        return reply

    # ------------------------------------------------------------------ requests

    def join(self, member_id: str = "", *, group: str = "g", client: str = "c",
             session: int = 10_000, rebalance: int | None = 30_000,
             protocols: Sequence[tuple[str, bytes]] = RANGE,
             protocol_type: str = "consumer", instance: str | None = None) -> Any:
        return self.perform(self.coordinator.join(
            group, member_id, self.now, client_id=client, client_host="/127.0.0.1",
            session_timeout_ms=session, rebalance_timeout_ms=rebalance,
            protocol_type=protocol_type, protocols=protocols, group_instance_id=instance))

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             *, group: str = "g", instance: str | None = None) -> Any:
        return self.perform(self.coordinator.sync(group, generation, member_id, self.now,
                                                  assignments, instance))

    def heartbeat(self, member_id: str, generation: int, *, group: str = "g",
                  instance: str | None = None) -> Any:
        return self.perform(self.coordinator.heartbeat(group, generation, member_id, self.now,
                                                       instance))

    def leave(self, member_id: str, *, group: str = "g", instance: str | None = None) -> Any:
        return self.perform(self.coordinator.leave(group, member_id, self.now, instance))

    # ------------------------------------------------------------------ time

    def advance(self, ms: int) -> None:
        """Move the clock ``ms`` forward, firing due timers in deadline order (each firing
        may arm or cancel others)."""
        target = self.now + ms
        while True:
            due = [t for t in self.timers.values() if t.deadline_ms <= target]
            if not due:
                break
            timer = min(due, key=lambda t: (t.deadline_ms, t.key))
            del self.timers[timer.key]
            self.now = max(self.now, timer.deadline_ms)
            self.fired.append((timer.key, self.fire(timer)))
        self.now = target

    def fire(self, timer: ScheduleSession | ScheduleJoin) -> bool:
        """Fire one timer as the shell would; the coordinator's verdict."""
        if isinstance(timer, ScheduleSession):
            result = self.coordinator.expire_session(timer.group_id, timer.member_id,
                                                     timer.generation, timer.token, self.now)
        else:
            result = self.coordinator.expire_join(timer.group_id, timer.generation,
                                                  timer.token, self.now)
        return bool(self.perform(result))

    # ------------------------------------------------------------------ rounds

    def round(self, count: int, *, group: str = "g") -> tuple[list[str], int]:
        """``count`` new members join and sync in one generation: the leader assigns
        ``b"<member>"`` to each. Returns the member ids (join order) and the generation."""
        members: list[str] = []
        held = []
        for _ in range(count):
            reply = self.join(group=group)
            member_id = reply.member_id
            members.append(member_id)
            held.append(reply)
            # Every earlier member must rejoin for the barrier to complete.
            for earlier in members[:-1]:
                self.join(earlier, group=group)
        replies = [self.answer(r) for r in held]
        last = self.coordinator.group(group)
        assert last is not None
        generation = last.generation
        leader = last.leader
        assert leader is not None
        for member_id in members:
            if member_id != leader:
                self.sync(member_id, generation, group=group)
        self.sync(leader, generation, {m: m.encode() for m in members}, group=group)
        assert all(isinstance(r, JoinReply | Held) for r in replies)
        return members, generation
