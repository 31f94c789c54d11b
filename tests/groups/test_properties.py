"""Property tests for groups.coordinator: random sequences of JOIN, SYNC, HEARTBEAT,
LEAVE, COMMIT, session expiry, assignor changes, partition growth and admin commands, with
the group invariants checked after every step."""

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

from broker.errors import (
    GenerationMismatch,
    InvalidGroupRequest,
    PartitionNotOwned,
    StaleGeneration,
    UnknownGroup,
    UnknownMember,
)
from groups.assignors import ASSIGNORS
from groups.coordinator import GroupCoordinator
from groups.state import GroupState
from tests.groups.helpers import snapshot

KEYS = [("g", "t"), ("h", "t"), ("g", "u")]
KEY = st.sampled_from([("g", "t"), ("g", "t"), ("g", "t"), ("h", "t"), ("g", "u")])
MEMBERS = ["c0", "c1", "c2", "c3"]
ASSIGNOR_OPTION = st.sampled_from([None, None, "round_robin", "range", "sticky"])
GENERATION_SHIFT = st.sampled_from([0, 0, 0, -1, 1, -5])


class CoordinatorMachine(RuleBasedStateMachine):
    """Drives one coordinator; the model keeps only what the invariants need."""

    @initialize(t=st.integers(0, 5), u=st.integers(1, 4),
                first=st.lists(st.sampled_from(MEMBERS), unique=True, max_size=3))
    def setup(self, t: int, u: int, first: list[str]) -> None:
        self.counts = {"t": t, "u": u}
        self.coordinator = GroupCoordinator(lambda topic: self.counts[topic])
        self.now = 0
        self.highest: dict[tuple[str, str], int] = {}
        self.old_tokens: dict[tuple[str, str, str], list[int]] = {}
        for member in first:
            self.coordinator.join("g", "t", member, self.now)

    # ---------------------------------------------------------------- helpers

    def _generation(self, key: tuple[str, str]) -> int:
        group = self.coordinator.group(*key)
        return group.generation if group is not None else 0

    def _expect_refusal(self, call: Any, expected: type[Exception]) -> None:
        """The call is refused with ``expected`` and changes nothing at all."""
        before = snapshot(self.coordinator)
        try:
            call()
        except GenerationMismatch as error:
            assert isinstance(error, expected), (error, expected)
        except InvalidGroupRequest as error:
            assert expected is InvalidGroupRequest, error
        else:
            raise AssertionError(f"expected {expected.__name__}")
        assert snapshot(self.coordinator) == before

    def _member_error(self, key: tuple[str, str], member: str,
                      generation: int) -> type[Exception] | None:
        group = self.coordinator.group(*key)
        if group is None:
            return UnknownGroup
        if member not in group.members:
            return UnknownMember
        if generation != group.generation:
            return StaleGeneration
        return None

    # ---------------------------------------------------------------- rules

    @rule(delta=st.integers(0, 20_000))
    def tick(self, delta: int) -> None:
        self.now += delta

    @rule(key=KEY, member=st.sampled_from(MEMBERS), assignor=ASSIGNOR_OPTION,
          timeout=st.sampled_from([None, None, 1_000, 30_000]))
    def join(self, key: tuple[str, str], member: str, assignor: str | None,
             timeout: int | None) -> None:
        group = self.coordinator.group(*key)
        before = self._generation(key)
        current = group is not None and member in group.members
        others = (len(group.members) - current) if group is not None else 0
        switching = group is not None and assignor is not None and assignor != group.assignor
        if switching and others:
            self._expect_refusal(lambda: self.coordinator.join(
                *key, member, self.now, assignor=assignor, session_timeout_ms=timeout),
                InvalidGroupRequest)
            return
        if current:
            self.old_tokens.setdefault((*key, member), []).append(group.members[member].token)  # type: ignore[union-attr]
        reply = self.coordinator.join(*key, member, self.now, assignor=assignor,
                                      session_timeout_ms=timeout).reply
        rebalanced = not current or switching
        assert reply.generation == before + rebalanced
        if assignor is not None:
            assert self.coordinator.group(*key).assignor == assignor  # type: ignore[union-attr]

    @rule(key=KEY, member=st.sampled_from(MEMBERS + ["stranger"]),
          shift=GENERATION_SHIFT, kind=st.sampled_from(["sync", "heartbeat", "leave"]))
    def member_request(self, key: tuple[str, str], member: str, shift: int, kind: str) -> None:
        generation = self._generation(key) + shift
        calls = {
            "sync": lambda: self.coordinator.sync(*key, member, generation, self.now),
            "heartbeat": lambda: self.coordinator.heartbeat(*key, member, generation, self.now),
            "leave": lambda: self.coordinator.leave(*key, member, generation),
        }
        error = self._member_error(key, member, generation)
        if error is not None:
            self._expect_refusal(calls[kind], error)
            return
        group = self.coordinator.group(*key)
        assert group is not None
        owned = group.assigned(member)
        old_token = group.members[member].token
        result = calls[kind]()
        if kind == "leave":
            assert member not in group.members
            assert group.generation == generation + 1
        else:
            assert group.generation == generation
            assert group.members[member].deadline_ms == self.now + \
                group.members[member].session_timeout_ms
            self.old_tokens.setdefault((*key, member), []).append(old_token)
            if kind == "sync":
                assert result.reply == (generation, owned)

    @rule(key=KEY, member=st.sampled_from(MEMBERS), shift=GENERATION_SHIFT,
          partition=st.integers(0, 5), offset=st.integers(0, 100))
    def commit(self, key: tuple[str, str], member: str, shift: int, partition: int,
               offset: int) -> None:
        generation = self._generation(key) + shift
        call = lambda: self.coordinator.commit(*key, member, generation, partition,  # noqa: E731
                                               offset, self.now)
        error = self._member_error(key, member, generation)
        group = self.coordinator.group(*key)
        if error is None and partition not in group.assigned(member):  # type: ignore[union-attr]
            error = PartitionNotOwned
        if error is not None:
            self._expect_refusal(call, error)
            return
        call()
        assert self.coordinator.offset(*key, partition) == offset

    @rule(key=KEY, member=st.sampled_from(MEMBERS), stale=st.booleans())
    def expire(self, key: tuple[str, str], member: str, stale: bool) -> None:
        group = self.coordinator.group(*key)
        if group is None or member not in group.members:
            return
        if stale:
            tokens = self.old_tokens.get((*key, member))
            if not tokens:
                return
            before = snapshot(self.coordinator)
            assert self.coordinator.expire(*key, member, tokens[-1]).reply is False
            assert snapshot(self.coordinator) == before
            return
        generation = group.generation
        assert self.coordinator.expire(*key, member, group.members[member].token).reply is True
        assert member not in group.members and group.generation == generation + 1

    @rule(topic=st.sampled_from(["t", "u"]), grow=st.integers(1, 3))
    def add_partitions(self, topic: str, grow: int) -> None:
        self.counts[topic] += grow
        with_members = {k for k in KEYS if k[1] == topic and self.coordinator.group(*k)
                        and self.coordinator.group(*k).members}  # type: ignore[union-attr]
        before = {k: self._generation(k) for k in KEYS}
        rebalanced = self.coordinator.partitions_changed(topic).reply
        assert set(rebalanced) == with_members
        for k in KEYS:
            assert self._generation(k) == before[k] + (k in with_members)

    @rule(key=KEY, action=st.sampled_from(["delete", "commit"]))
    def admin(self, key: tuple[str, str], action: str) -> None:
        group = self.coordinator.group(*key)
        call = (lambda: self.coordinator.delete_group(*key)) if action == "delete" else \
            (lambda: self.coordinator.admin_commit(*key, 0, 1))
        if group is not None and group.members:
            self._expect_refusal(call, InvalidGroupRequest)
        elif action == "delete" and key not in self.coordinator.list_groups():
            self._expect_refusal(call, UnknownGroup)
        else:
            call()
            if action == "delete":
                self.highest.pop(key, None)  # an admin delete is the one way back to 0

    # ---------------------------------------------------------------- invariants

    @invariant()
    def assignment_is_exclusive_and_complete(self) -> None:
        for group in self.coordinator.groups():
            count = self.counts[group.topic]
            assert set(group.assignment) == set(group.members)
            flat = [p for parts in group.assignment.values() for p in parts]
            assert len(flat) == len(set(flat)), "a partition assigned twice"
            if group.members:
                assert group.state is GroupState.STABLE
                assert sorted(flat) == list(range(count)), "a partition left unassigned"
                if group.assignor != "sticky":
                    assert group.assignment == ASSIGNORS[group.assignor](
                        list(group.members), count, {})
            else:
                assert group.state is GroupState.EMPTY and flat == []

    @invariant()
    def generations_never_go_backwards(self) -> None:
        for key in KEYS:
            generation = self._generation(key)
            if self.coordinator.group(*key) is not None:
                assert generation >= self.highest.get(key, 0)
                self.highest[key] = generation

    @invariant()
    def members_have_armed_timers(self) -> None:
        for group in self.coordinator.groups():
            for member in group.members.values():
                assert member.token > 0 and member.deadline_ms >= member.session_timeout_ms


class CoordinatorPropertyTests(SynchronousTestCase):
    def test_random_sequences(self) -> None:
        """Over random sequences of member requests, expiries (current and stale tokens),
        assignor changes, partition growth and admin commands: no partition is ever assigned
        to two members, every partition is assigned while the group has a member, a refused
        request (GENERATION_MISMATCH subclass or BAD_REQUEST) changes nothing, a stale timer
        changes nothing, and generations never go backwards (except through an admin
        delete)."""
        run_state_machine_as_test(
            CoordinatorMachine,
            settings=settings(max_examples=150, stateful_step_count=40, deadline=None))
