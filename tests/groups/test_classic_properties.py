"""Property tests for groups.classic: random sequences of JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, clock advances (firing session and join timers) and stale timer
firings, with the invariants checked after every step: no two members are handed the same
partition in one generation, generations never decrease, every held request is answered
exactly once, refusals change nothing, and the armed timers match the members."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from twisted.trial.unittest import SynchronousTestCase

from groups.classic_effects import (
    CommittedOffset,
    Held,
    JoinReply,
    ScheduleJoin,
    ScheduleSession,
    SyncReply,
    join_key,
    session_key,
)
from groups.classic_state import ClassicGroupState
from groups.kafka_errors import KafkaGroupError, RebalanceInProgress
from tests.groups.classic_helpers import RANGE, Driver

GROUPS = ["g", "h"]
PARTITIONS = 6
PROTOCOLS = st.sampled_from([RANGE, RANGE, RANGE, (("roundrobin", b"rr"),),
                             (("sticky", b"s"),)])
SHIFT = st.sampled_from([0, 0, 0, -1, 1])


def _snapshot(driver: Driver) -> Any:
    """Everything observable about the coordinator and the driver's view of it."""
    groups = {
        g.group_id: (g.state, g.generation, g.protocol_type, g.protocol, g.leader, g.join_token,
                     {m: (x.protocols, x.assignment, x.join_ticket, x.sync_ticket, x.token,
                          x.deadline_ms) for m, x in g.members.items()})
        for g in driver.coordinator.groups()
    }
    offsets = dict(driver.coordinator.offsets.offsets)  # type: ignore[attr-defined]
    return groups, offsets, dict(driver.timers), set(driver.outstanding)


def _decode(assignment: bytes) -> set[int]:
    return {int(p) for p in assignment.decode().split(",") if p}


class ClassicMachine(RuleBasedStateMachine):
    """Drives one coordinator through a ``Driver``; the model keeps what the invariants
    need: every member id ever generated, the answers received, the highest generation."""

    @initialize()
    def setup(self) -> None:
        self.d = Driver()
        self.ids: dict[str, list[str]] = {g: [] for g in GROUPS}
        self.highest = dict.fromkeys(GROUPS, 0)
        self.sync_requests: dict[int, tuple[str, str, int]] = {}  # ticket -> group, member, gen
        self.join_replies: dict[tuple[str, str], JoinReply] = {}
        self.handed: dict[tuple[str, int], dict[str, set[int]]] = {}
        self.old_timers: list[ScheduleSession | ScheduleJoin] = []
        self.seen_tickets: set[int] = set()

    # ---------------------------------------------------------------- helpers

    def _member(self, group: str, index: int) -> str:
        ids = self.ids[group]
        return ids[index % len(ids)] if ids else "nobody"

    def _generation(self, group: str) -> int:
        grp = self.d.coordinator.group(group)
        return grp.generation if grp is not None else 0

    def _call(self, call: Any) -> Any:
        """Run a request; a raised refusal must change nothing. Returns the reply or the
        refusal."""
        before = _snapshot(self.d)
        self.old_timers.extend(self.d.timers.values())
        try:
            return call()
        except KafkaGroupError as error:
            assert _snapshot(self.d) == before, error
            return error

    def _collect(self) -> None:
        """Turn every answer delivered so far into model facts."""
        for ticket, reply in list(self.d.delivered.items()):
            assert ticket not in self.seen_tickets, f"ticket {ticket} answered twice"
            self.seen_tickets.add(ticket)
            del self.d.delivered[ticket]
            if isinstance(reply, JoinReply):
                self.join_replies[(self._group_of(reply.member_id), reply.member_id)] = reply
            elif isinstance(reply, SyncReply):
                group, member, generation = self.sync_requests[ticket]
                self._handed(group, member, generation, reply)

    def _group_of(self, member_id: str) -> str:
        return next(g for g in GROUPS if member_id in self.ids[g])

    def _handed(self, group: str, member: str, generation: int, reply: SyncReply) -> None:
        handed = self.handed.setdefault((group, generation), {})
        partitions = _decode(reply.assignment)
        if member in handed:
            assert handed[member] == partitions, "a member's assignment changed in a generation"
        handed[member] = partitions

    # ---------------------------------------------------------------- rules

    @rule(group=st.sampled_from(GROUPS), protocols=PROTOCOLS,
          session=st.sampled_from([1_000, 10_000]), rebalance=st.sampled_from([None, 5_000]))
    def new_member(self, group: str, protocols: Any, session: int,
                   rebalance: int | None) -> None:
        reply = self._call(lambda: self.d.join(group=group, protocols=protocols,
                                               session=session, rebalance=rebalance))
        if isinstance(reply, Held):
            self.ids[group].append(reply.member_id)
        elif isinstance(reply, JoinReply):
            self.ids[group].append(reply.member_id)
            self.join_replies[(group, reply.member_id)] = reply
        self._collect()

    @rule(group=st.sampled_from(GROUPS), index=st.integers(0, 5), protocols=PROTOCOLS)
    def rejoin(self, group: str, index: int, protocols: Any) -> None:
        member = self._member(group, index)
        reply = self._call(lambda: self.d.join(member, group=group, protocols=protocols))
        if isinstance(reply, JoinReply):
            self.join_replies[(group, member)] = reply
        self._collect()

    @rule(group=st.sampled_from(GROUPS), index=st.integers(0, 5), shift=SHIFT)
    def sync(self, group: str, index: int, shift: int) -> None:
        member = self._member(group, index)
        generation = self._generation(group) + shift
        known = self.join_replies.get((group, member))
        assignments = None
        if known is not None and known.leader == member and known.generation == generation:
            # The leader's client-side assignor: round robin over the members it was told of.
            ids = [m for m, _ in known.members]
            assignments = {m: ",".join(str(p) for p in range(PARTITIONS)
                                       if p % len(ids) == i).encode()
                           for i, m in enumerate(ids)}
        reply = self._call(lambda: self.d.sync(member, generation, assignments, group=group))
        if isinstance(reply, Held):
            self.sync_requests[reply.ticket] = (group, member, generation)
        elif isinstance(reply, SyncReply):
            self._handed(group, member, generation, reply)
        self._collect()

    @rule(group=st.sampled_from(GROUPS), index=st.integers(0, 5), shift=SHIFT)
    def heartbeat(self, group: str, index: int, shift: int) -> None:
        member = self._member(group, index)
        reply = self._call(lambda: self.d.heartbeat(member, self._generation(group) + shift,
                                                    group=group))
        grp = self.d.coordinator.group(group)
        if reply is None:
            assert grp is not None and grp.state is ClassicGroupState.STABLE
        elif isinstance(reply, RebalanceInProgress):
            assert grp is not None and grp.state is not ClassicGroupState.STABLE

    @rule(group=st.sampled_from(GROUPS), index=st.integers(0, 5))
    def leave(self, group: str, index: int) -> None:
        self._call(lambda: self.d.leave(self._member(group, index), group=group))
        self._collect()

    @rule(group=st.sampled_from(GROUPS), index=st.integers(0, 5), shift=st.sampled_from(
        [0, 0, -1, 1, None]), offset=st.integers(0, 50))
    def commit(self, group: str, index: int, shift: int | None, offset: int) -> None:
        simple = shift is None
        member = "" if simple else self._member(group, index)
        generation = -1 if shift is None else self._generation(group) + shift
        grp = self.d.coordinator.group(group)
        state_before = grp.state if grp is not None else None
        reply = self._call(lambda: self.d.perform(self.d.coordinator.commit_offsets(
            group, generation, member, {("t", 0): CommittedOffset(offset)}, self.d.now)))
        if isinstance(reply, dict):
            if generation < 0:  # Kafka ignores the member id of any negative generation
                assert state_before in (None, ClassicGroupState.EMPTY)
            else:
                assert generation == self._generation(group)
                assert state_before is not ClassicGroupState.AWAITING_SYNC

    @rule(delta=st.sampled_from([1, 500, 1_000, 5_000, 10_000]))
    def tick(self, delta: int) -> None:
        before = dict(self.highest)
        self.old_timers.extend(self.d.timers.values())
        self.d.advance(delta)
        self._collect()
        assert all(self._generation(g) >= before[g] for g in GROUPS)

    @rule(pick=st.integers(0, 10_000))
    def stale_firing(self, pick: int) -> None:
        """Fire a timer that has since been replaced or cancelled: nothing changes."""
        stale = [t for t in self.old_timers if self.d.timers.get(t.key) != t]
        if not stale:
            return
        timer = stale[pick % len(stale)]
        before = _snapshot(self.d)
        assert self.d.fire(timer) is False
        after = _snapshot(self.d)
        # A stale firing may only re-arm nothing: identical state and timers.
        assert after == before

    # ---------------------------------------------------------------- invariants

    @invariant()
    def no_partition_handed_twice_in_a_generation(self) -> None:
        for (group, generation), handed in self.handed.items():
            owner: dict[int, str] = {}
            for member, partitions in handed.items():
                for p in partitions:
                    assert p not in owner, (group, generation, p, owner[p], member)
                    owner[p] = member

    @invariant()
    def generation_never_decreases(self) -> None:
        if not hasattr(self, "d"):
            return
        for group in GROUPS:
            generation = self._generation(group)
            assert generation >= self.highest[group]
            self.highest[group] = generation

    @invariant()
    def state_matches_members_and_timers(self) -> None:
        if not hasattr(self, "d"):
            return
        session_keys = set()
        for grp in self.d.coordinator.groups():
            assert (grp.state is ClassicGroupState.EMPTY) == (not grp.members), grp
            if grp.members:
                assert grp.leader in grp.members
            if grp.state is ClassicGroupState.PREPARING_REBALANCE:
                timer = self.d.timers[join_key(grp.group_id)]
                assert isinstance(timer, ScheduleJoin) and timer.token == grp.join_token
            else:
                assert join_key(grp.group_id) not in self.d.timers
            if grp.state is ClassicGroupState.STABLE:
                for member in grp.members.values():
                    assert member.join_ticket is None and member.sync_ticket is None
            for member in grp.members.values():
                key = session_key(grp.group_id, member.member_id)
                session_keys.add(key)
                timer = self.d.timers[key]
                assert isinstance(timer, ScheduleSession)
                assert (timer.token, timer.generation) == (member.token, grp.generation)
        assert {k for k in self.d.timers if k.startswith("kafka-session:")} == session_keys

    @invariant()
    def held_requests_are_the_members_tickets(self) -> None:
        if not hasattr(self, "d"):
            return
        tickets = {t for grp in self.d.coordinator.groups() for m in grp.members.values()
                   for t in (m.join_ticket, m.sync_ticket) if t is not None}
        assert tickets == self.d.outstanding


class ClassicPropertyTests(SynchronousTestCase):
    def test_random_event_sequences(self) -> None:
        """Random interleavings of every request, clock advances and stale timer firings
        keep the coordinator's invariants."""
        run_state_machine_as_test(
            ClassicMachine,
            settings=settings(max_examples=150, stateful_step_count=40, deadline=None,
                              database=None))
