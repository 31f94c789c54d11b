"""Property test of KIP-848 reconciliation: random sequences of joins, heartbeats (prompt
or slow to revoke), leaves, static restarts, kills, subscription changes, partition growth
and clock jumps. After every step no partition is owned by two members - neither in the
coordinator's books nor on the consumers' side - and, once the members heartbeat steadily,
every subscribed partition is owned by exactly one live consumer and the group is Stable."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from groups.consumer_errors import FencedMemberEpoch, UnknownMemberId
from groups.consumer_state import ConsumerGroupState
from tests.groups.consumer_helpers import INTERVAL_MS, SESSION_MS, Consumer, Driver, topic_id

SUBSCRIPTIONS = [(("t",), None), (("t", "u"), None), (None, "t|u"), (None, "u"), ((), "t")]


class ReconciliationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.driver = Driver({"t": 6, "u": 3})
        self.live: list[Consumer] = []
        self.away: list[Consumer] = []
        self.next_instance = 0
        self.last_epoch = 0

    # ------------------------------------------------------------------ helpers

    def _beat(self, consumer: Consumer, *, full: bool = False, revoke: bool = True) -> None:
        """A heartbeat as a Kafka consumer sends it; when fenced, the consumer drops
        everything it owns and rejoins with epoch 0, as Kafka's clients do."""
        try:
            consumer.heartbeat(full=full, revoke=revoke)
        except (FencedMemberEpoch, UnknownMemberId):
            consumer.owned, consumer.joined, consumer.epoch = {}, False, 0
            consumer.heartbeat()

    def _recognised(self) -> list[Consumer]:
        """Live consumers the coordinator still counts as members (a consumer fenced by a
        timer does not know yet; its next heartbeat is refused and it drops everything)."""
        group = self.driver.coordinator.group("g")
        members = group.members if group is not None else {}
        return [c for c in self.live if c.member_id in members]

    # ------------------------------------------------------------------ rules

    @precondition(lambda self: len(self.live) < 5)
    @rule(subscription=st.sampled_from(SUBSCRIPTIONS), static=st.booleans())
    def join(self, subscription: tuple[tuple[str, ...] | None, str | None],
             static: bool) -> None:
        names, regex = subscription
        instance = None
        if static:
            self.next_instance += 1
            instance = f"i{self.next_instance}"
        consumer = Consumer(self.driver, topics=names, regex=regex, instance_id=instance)
        consumer.heartbeat()
        self.live.append(consumer)

    @precondition(lambda self: self.live)
    @rule(data=st.data(), full=st.booleans(),
          revoke=st.sampled_from([True, True, True, False]))
    def heartbeat(self, data: st.DataObject, full: bool, revoke: bool) -> None:
        consumer = data.draw(st.sampled_from(self.live))
        self._beat(consumer, full=full, revoke=revoke)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        consumer = data.draw(st.sampled_from(self.live))
        self.live.remove(consumer)
        try:
            consumer.leave(static=consumer.instance_id is not None)
        except UnknownMemberId:
            return  # it had been fenced already
        if consumer.instance_id is not None:
            self.away.append(consumer)

    @precondition(lambda self: self.away)
    @rule(data=st.data())
    def static_restart(self, data: st.DataObject) -> None:
        consumer = data.draw(st.sampled_from(self.away))
        self.away.remove(consumer)
        consumer.restart()
        consumer.heartbeat()
        self.live.append(consumer)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def kill(self, data: st.DataObject) -> None:
        self.live.remove(data.draw(st.sampled_from(self.live)))

    @precondition(lambda self: self.live)
    @rule(data=st.data(), subscription=st.sampled_from(SUBSCRIPTIONS))
    def resubscribe(self, data: st.DataObject,
                    subscription: tuple[tuple[str, ...] | None, str | None]) -> None:
        consumer = data.draw(st.sampled_from(self.live))
        consumer.topics = subscription[0] if subscription[0] is not None else ()
        consumer.regex = subscription[1] or ""
        if consumer.joined:
            from groups.consumer_effects import HeartbeatRequest

            try:
                reply = self.driver.heartbeat(HeartbeatRequest(
                    "g", consumer.member_id, consumer.epoch, instance_id=consumer.instance_id,
                    topic_names=consumer.topics, topic_regex=consumer.regex,
                    owned=consumer.owned_wire()))
            except (FencedMemberEpoch, UnknownMemberId):
                consumer.owned, consumer.joined, consumer.epoch = {}, False, 0
                consumer.heartbeat()
                return
            consumer.epoch = reply.member_epoch
            if reply.assignment is not None:
                new = {t: set(ps) for t, ps in reply.assignment}
                consumer.owned = {t: ps for t, ps in new.items() if ps}
                consumer._report = True  # noqa: SLF001

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def stale_heartbeat(self, data: st.DataObject) -> None:
        """A heartbeat one epoch behind (a lost answer): forgiven only at the previous
        epoch with owned partitions within the assignment, else fenced."""
        consumer = data.draw(st.sampled_from(self.live))
        if not consumer.joined or consumer.epoch <= 1:
            return
        from groups.consumer_effects import HeartbeatRequest

        try:
            reply = self.driver.heartbeat(HeartbeatRequest(
                "g", consumer.member_id, consumer.epoch - 1,
                instance_id=consumer.instance_id, owned=consumer.owned_wire()))
        except (FencedMemberEpoch, UnknownMemberId):
            consumer.owned, consumer.joined, consumer.epoch = {}, False, 0
            consumer.heartbeat()
            return
        consumer.epoch = reply.member_epoch
        if reply.assignment is not None:
            consumer.owned = {t: set(ps) for t, ps in reply.assignment if ps}
            consumer._report = True  # noqa: SLF001

    @rule(ms=st.sampled_from([500, INTERVAL_MS, 20_000, SESSION_MS + 1]))
    def advance(self, ms: int) -> None:
        self.driver.advance(ms)

    @rule(extra=st.integers(1, 3), name=st.sampled_from(["t", "u"]))
    def grow(self, extra: int, name: str) -> None:
        self.driver.set_topic(name, self.driver.meta[name].partitions + extra)
        self.driver.metadata_changed()

    @rule()
    def settle(self) -> None:
        """Everyone alive heartbeats every interval until the dead and the away are timed
        out; then the group must be Stable with every subscribed partition owned once."""
        for _ in range(SESSION_MS // INTERVAL_MS + 3):
            for consumer in list(self.live):
                self._beat(consumer, full=True)
            self.driver.advance(INTERVAL_MS)
        for _ in range(4):
            for consumer in list(self.live):
                self._beat(consumer, full=True)
        self.away.clear()
        group = self.driver.coordinator.group("g")
        if group is None:
            return
        expected = ConsumerGroupState.STABLE if self.live else ConsumerGroupState.EMPTY
        assert group.state is expected, (group, [m for m in group.members.values()])
        wanted: set[tuple[object, int]] = set()
        for consumer in self.live:
            names = set(consumer.topics or ())
            if consumer.regex:
                names |= {n for n in self.driver.meta if n in consumer.regex.split("|")}
            for name in names & set(self.driver.meta):
                wanted |= {(topic_id(name), p)
                           for p in range(self.driver.meta[name].partitions)}
        owned = [(t, p) for c in self.live for t, ps in c.owned.items() for p in ps]
        assert sorted(owned) == sorted(wanted), (owned, wanted)
        for consumer in self.live:
            member = group.members[consumer.member_id]
            assert {t: frozenset(ps) for t, ps in consumer.owned.items()} == \
                group.target[consumer.member_id] == member.assigned

    # ------------------------------------------------------------------ invariants

    @invariant()
    def never_two_owners(self) -> None:
        """The coordinator's books give each partition at most one holder, and every
        consumer it counts as a member owns only what the books give it."""
        group = self.driver.coordinator.group("g")
        if group is None:
            return
        seen: dict[tuple[object, int], str] = {}
        for member in group.members.values():
            for t, ps in (*member.assigned.items(), *member.revoking.items()):
                for p in ps:
                    assert (t, p) not in seen, (t, p, seen[(t, p)], member.member_id)
                    seen[(t, p)] = member.member_id
        assert seen == group.owners()
        client_side: dict[tuple[object, int], str] = {}
        for consumer in self._recognised():
            member = group.members[consumer.member_id]
            for t, ps in consumer.owned.items():
                for p in ps:
                    assert seen.get((t, p)) == member.member_id, (t, p, consumer.member_id)
                    assert (t, p) not in client_side
                    client_side[(t, p)] = consumer.member_id

    @invariant()
    def epochs_only_move_forward(self) -> None:
        group = self.driver.coordinator.group("g")
        if group is None:
            return
        assert group.group_epoch >= self.last_epoch
        assert group.assignment_epoch <= group.group_epoch
        for member in group.members.values():
            assert member.member_epoch <= group.assignment_epoch
        self.last_epoch = group.group_epoch


TestReconciliation = ReconciliationMachine.TestCase
TestReconciliation.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                       suppress_health_check=[HealthCheck.too_slow])
