"""Tests for groups.classic: join/sync rounds, the join barrier and its rebalance timeout,
session expiry on an injected clock, stale timer firings, heartbeats during a rebalance,
generation fencing, leave, protocol choice, the cross-protocol guard, offsets and views."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from groups.classic_effects import (
    CommittedOffset,
    Held,
    JoinReply,
    PersistClassicGroups,
    PersistOffsets,
    ScheduleJoin,
    ScheduleSession,
    SyncReply,
    join_key,
    session_key,
)
from groups.classic_state import ClassicGroupState
from groups.kafka_errors import (
    GroupInUseByOtherProtocol,
    GroupNotEmpty,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidGroupId,
    InvalidSessionTimeout,
    OffsetMetadataTooLarge,
    RebalanceInProgress,
    UnknownMemberId,
)
from tests.groups.classic_helpers import RANGE, Driver

EMPTY = ClassicGroupState.EMPTY
PREPARING = ClassicGroupState.PREPARING_REBALANCE
AWAITING = ClassicGroupState.AWAITING_SYNC
STABLE = ClassicGroupState.STABLE


def _state(driver: Driver, group: str = "g") -> tuple[ClassicGroupState, int]:
    grp = driver.coordinator.group(group)
    assert grp is not None
    return grp.state, grp.generation


class JoinSyncRoundTests(SynchronousTestCase):
    def test_one_member(self) -> None:
        """A lone new member completes the barrier itself: generation 1, it leads and sees
        its own metadata for the chosen protocol; its SyncGroup installs the assignment."""
        d = Driver()
        reply = d.join(client="app")
        self.assertEqual(reply, JoinReply(1, "range", "app-1", "app-1",
                                          (("app-1", b"meta-range"),)))
        self.assertEqual(_state(d), (AWAITING, 1))
        self.assertEqual(d.sync("app-1", 1, {"app-1": b"A"}), SyncReply(b"A"))
        self.assertEqual(_state(d), (STABLE, 1))
        self.assertIsNone(d.heartbeat("app-1", 1))
        self.assertEqual(d.sync("app-1", 1), SyncReply(b"A"))  # again, Stable: same bytes

    def test_two_members(self) -> None:
        """A second member's join is held until the first rejoins; the leader gets every
        member's metadata, the follower none; the follower's sync waits for the leader's."""
        d = Driver()
        d.join()
        d.sync("c-1", 1, {"c-1": b"all"})
        held = d.join()
        self.assertEqual(held, Held(held.ticket, "c-2"))
        self.assertEqual(_state(d), (PREPARING, 1))
        self.assertIsInstance(d.heartbeat("c-1", 1), RebalanceInProgress)
        leader = d.join("c-1")
        self.assertEqual(leader, JoinReply(2, "range", "c-1", "c-1",
                                           (("c-1", b"meta-range"), ("c-2", b"meta-range"))))
        self.assertEqual(d.answer(held), JoinReply(2, "range", "c-1", "c-2", ()))
        waiting = d.sync("c-2", 2)
        self.assertIsInstance(waiting, Held)
        self.assertEqual(d.sync("c-1", 2, {"c-1": b"p0", "c-2": b"p1", "x": b"?"}),
                         SyncReply(b"p0"))
        self.assertEqual(d.answer(waiting), SyncReply(b"p1"))
        self.assertEqual(_state(d), (STABLE, 2))
        self.assertEqual(d.outstanding, set())

    def test_three_members(self) -> None:
        """Three members end in one generation with the leader's three assignments, each
        handed to its own member."""
        d = Driver()
        members, generation = d.round(3)
        self.assertEqual(members, ["c-1", "c-2", "c-3"])
        self.assertEqual(_state(d), (STABLE, generation))
        for member in members:
            self.assertEqual(d.sync(member, generation), SyncReply(member.encode()))
        self.assertEqual(d.outstanding, set())

    def test_leader_leaves_nothing_for_a_member(self) -> None:
        """A member the leader's assignment leaves out gets empty bytes."""
        d = Driver()
        members, generation = d.round(2)
        d.join()  # c-3
        d.join("c-1")
        d.join("c-2")
        d.sync("c-1", generation + 1, {"c-1": b"x"})
        self.assertEqual(d.sync("c-3", generation + 1), SyncReply(b""))

    def test_join_during_stable_triggers_rebalance(self) -> None:
        """A new member in a Stable group starts a rebalance: heartbeats answer
        REBALANCE_IN_PROGRESS until the members rejoin, then the generation moves."""
        d = Driver()
        _, generation = d.round(2)
        d.join()
        self.assertEqual(_state(d), (PREPARING, generation))
        for member in ("c-1", "c-2"):
            self.assertIsInstance(d.heartbeat(member, generation), RebalanceInProgress)
        d.join("c-1")
        self.assertEqual(_state(d), (PREPARING, generation))
        d.join("c-2")
        self.assertEqual(_state(d), (AWAITING, generation + 1))

    def test_follower_rejoin_unchanged_is_no_rebalance(self) -> None:
        """A follower that rejoins a Stable group with the same protocols (a lost answer)
        gets the current generation back; nothing rebalances. The leader's rejoin does
        rebalance (it may want to reassign)."""
        d = Driver()
        _, generation = d.round(2)
        self.assertEqual(d.join("c-2"), JoinReply(generation, "range", "c-1", "c-2", ()))
        self.assertEqual(_state(d), (STABLE, generation))
        self.assertIsInstance(d.join("c-1"), Held)
        self.assertEqual(_state(d), (PREPARING, generation))

    def test_lost_join_answer_while_awaiting_sync(self) -> None:
        """Awaiting sync, a rejoin with unchanged protocols returns the same generation
        (with the member list, for the leader); changed protocols rebalance."""
        d = Driver()
        first = d.join()
        self.assertEqual(d.join("c-1"), first)
        self.assertEqual(_state(d), (AWAITING, 1))
        reply = d.join("c-1", protocols=(("roundrobin", b"m"),))
        self.assertEqual(reply.generation, 2)
        self.assertEqual(reply.protocol, "roundrobin")

    def test_superseded_join_is_answered(self) -> None:
        """A member's second JoinGroup while its first is held replaces it; the first is
        answered REBALANCE_IN_PROGRESS, so no request is left hanging."""
        d = Driver()
        d.round(2)
        first = d.join("c-1")
        second = d.join("c-1")
        self.assertIsInstance(d.answer(first), RebalanceInProgress)
        self.assertIsNone(d.answer(second))
        d.join("c-2")
        self.assertIsInstance(d.answer(second), JoinReply)


class ProtocolTests(SynchronousTestCase):
    def test_chosen_protocol_is_supported_by_all(self) -> None:
        """The chosen protocol is one every member supports, even if most prefer another."""
        d = Driver()
        d.join(protocols=(("range", b"a"), ("roundrobin", b"b")))
        d.join(protocols=(("roundrobin", b"c"),))
        reply = d.join("c-1", protocols=(("range", b"a"), ("roundrobin", b"b")))
        self.assertEqual(reply.protocol, "roundrobin")
        self.assertEqual(reply.members, (("c-1", b"b"), ("c-2", b"c")))

    def test_inconsistent_protocols_refused_unchanged(self) -> None:
        """No common protocol, or another protocol type: INCONSISTENT_GROUP_PROTOCOL with
        nothing changed. An empty list or type cannot start a group either."""
        d = Driver()
        d.round(1)
        before = (_state(d), list(d.coordinator.group("g").members))  # type: ignore[union-attr]
        with self.assertRaises(InconsistentGroupProtocol):
            d.join(protocols=(("sticky", b""),))
        with self.assertRaises(InconsistentGroupProtocol):
            d.join(protocol_type="connect")
        self.assertEqual((_state(d), list(d.coordinator.group("g").members)), before)  # type: ignore[union-attr]
        with self.assertRaises(InconsistentGroupProtocol):
            d.join(group="h", protocols=())
        self.assertIsNone(d.coordinator.group("h"))

    def test_join_refusals(self) -> None:
        """Unknown member ids (also of an unknown group), bad group ids and session
        timeouts outside the configured range are refused and create nothing."""
        d = Driver()
        with self.assertRaises(UnknownMemberId):
            d.join("ghost")
        d.round(1)
        with self.assertRaises(UnknownMemberId):
            d.join("ghost")
        for bad in ("", "a b", ".", "x" * 250):
            with self.assertRaises(InvalidGroupId):
                d.join(group=bad)
        for timeout in (99, 3_600_001):
            with self.assertRaises(InvalidSessionTimeout):
                d.join(group="h", session=timeout)
        self.assertEqual([g.group_id for g in d.coordinator.groups()], ["g"])

    def test_cross_protocol_guard(self) -> None:
        """A group live under V1 is refused (INCONSISTENT_GROUP_PROTOCOL's subclass), as is
        a simple commit into it; live_protocol tells V1 when Kafka holds a group."""
        live_v1 = {"v1group"}
        d = Driver(protocol_of=lambda g: "v1" if g in live_v1 else None)
        with self.assertRaises(GroupInUseByOtherProtocol) as caught:
            d.join(group="v1group")
        self.assertIsInstance(caught.exception, InconsistentGroupProtocol)
        with self.assertRaises(UnknownMemberId):
            d.coordinator.commit_offsets("v1group", -1, "", {("t", 0): CommittedOffset(1)}, 0)
        self.assertIsNone(d.coordinator.group("v1group"))
        self.assertIsNone(d.coordinator.live_protocol("g"))
        d.round(1)
        self.assertEqual(d.coordinator.live_protocol("g"), "kafka")
        d.leave("c-1")
        self.assertIsNone(d.coordinator.live_protocol("g"))


class BarrierAndSessionTests(SynchronousTestCase):
    def test_late_member_times_out_of_the_barrier(self) -> None:
        """A member that does not rejoin is dropped when the rebalance timeout (the largest
        of the members') fires, not a millisecond before; the others get the new generation."""
        d = Driver()
        _, generation = d.round(2)
        newcomer = d.join(rebalance=20_000)
        d.join("c-1", rebalance=30_000)
        for _ in range(29):  # c-2 keeps heartbeating but never rejoins
            d.advance(1_000)
            self.assertIsInstance(d.heartbeat("c-2", generation), RebalanceInProgress)
        d.advance(999)
        self.assertEqual(_state(d), (PREPARING, generation))
        d.advance(1)
        self.assertEqual(_state(d), (AWAITING, generation + 1))
        self.assertEqual(d.answer(newcomer).generation, generation + 1)
        self.assertEqual(list(d.coordinator.group("g").members), ["c-1", "c-3"])  # type: ignore[union-attr]
        with self.assertRaises(UnknownMemberId):
            d.heartbeat("c-2", generation)
        self.assertNotIn(session_key("g", "c-2"), d.timers)
        self.assertNotIn(join_key("g"), d.timers)

    def test_session_expiry_evicts_and_bumps_generation(self) -> None:
        """On the injected clock: a lone member silent for its session timeout is evicted,
        the group goes Empty at the next generation (and saves it)."""
        d = Driver()
        d.round(1)
        d.advance(9_999)
        self.assertEqual(_state(d), (STABLE, 1))
        d.advance(1)
        self.assertEqual(_state(d), (EMPTY, 2))
        self.assertEqual(d.fired, [(session_key("g", "c-1"), True)])
        with self.assertRaises(UnknownMemberId):
            d.heartbeat("c-1", 1)

    def test_heartbeats_keep_a_member_and_expiry_rebalances_the_rest(self) -> None:
        """Heartbeats push the deadline; the silent member goes, the other must rejoin and
        then gets the next generation without it."""
        d = Driver()
        _, generation = d.round(2)
        for _ in range(2):
            d.advance(4_000)
            self.assertIsNone(d.heartbeat("c-2", generation))
        d.advance(2_000)  # c-1's deadline: 10 s after the round
        self.assertIsInstance(d.heartbeat("c-2", generation), RebalanceInProgress)
        self.assertEqual(list(d.coordinator.group("g").members), ["c-2"])  # type: ignore[union-attr]
        self.assertEqual(_state(d), (PREPARING, generation))
        reply = d.join("c-2")
        self.assertEqual((reply.generation, reply.leader), (generation + 1, "c-2"))

    def test_held_requests_keep_a_member_alive(self) -> None:
        """A member waiting in a held JoinGroup or SyncGroup is not expired: its timer is
        re-armed (the member is waiting for us, not gone)."""
        d = Driver()
        _, generation = d.round(2)
        held = d.join("c-1", session=1_000)  # the leader rejoins: held until c-2 does
        d.advance(5_000)
        self.assertEqual(list(d.coordinator.group("g").members), ["c-1", "c-2"])  # type: ignore[union-attr]
        self.assertEqual(d.fired, [(session_key("g", "c-1"), False)] * 5)
        d.advance(5_000)  # c-2, silent and not held, expires; the barrier completes
        self.assertEqual(list(d.coordinator.group("g").members), ["c-1"])  # type: ignore[union-attr]
        self.assertEqual(d.answer(held).generation, generation + 1)
        waiting = d.sync("c-1", generation + 1)
        self.assertEqual(d.answer(waiting), SyncReply(b""))

    def test_stale_firings_are_ignored(self) -> None:
        """A session timer armed before a heartbeat, before a rebalance or for a member that
        left, and a join timer of an earlier rebalance, change nothing when they fire."""
        d = Driver()
        _, generation = d.round(2)
        old_session = d.timers[session_key("g", "c-1")]
        d.heartbeat("c-1", generation)
        self.assertFalse(d.fire(old_session))
        d.join()
        old_join = d.timers[join_key("g")]
        before_rebalance = d.timers[session_key("g", "c-2")]
        d.join("c-1")
        d.join("c-2")
        self.assertEqual(_state(d), (AWAITING, generation + 1))
        self.assertFalse(d.fire(old_join))
        self.assertFalse(d.fire(before_rebalance))
        assert isinstance(old_session, ScheduleSession)
        wrong_generation = ScheduleSession(old_session.key, "g", "c-1", generation,
                                           d.coordinator.group("g").members["c-1"].token, 0)  # type: ignore[union-attr]
        self.assertFalse(d.fire(wrong_generation))
        self.assertEqual(_state(d), (AWAITING, generation + 1))
        self.assertEqual(len(d.coordinator.group("g").members), 3)  # type: ignore[union-attr]
        d.sync("c-1", generation + 1, {})
        d.leave("c-3")
        gone = ScheduleSession(session_key("g", "c-3"), "g", "c-3", generation + 1, 1, 0)
        self.assertFalse(d.fire(gone))
        self.assertFalse(d.fire(ScheduleJoin(join_key("x"), "x", 0, 1, 0)))


class FencingTests(SynchronousTestCase):
    def test_sync_fencing(self) -> None:
        """SyncGroup: unknown member, stale generation, and a rebalance in progress are
        refused with nothing changed."""
        d = Driver()
        _, generation = d.round(2)
        with self.assertRaises(UnknownMemberId):
            d.sync("ghost", generation)
        with self.assertRaises(UnknownMemberId):
            d.sync("c-1", generation, group="nope")
        with self.assertRaises(IllegalGeneration):
            d.sync("c-1", generation - 1)
        d.join()
        with self.assertRaises(RebalanceInProgress):
            d.sync("c-1", generation)

    def test_heartbeat_fencing(self) -> None:
        """Heartbeat: unknown member and stale generation raise; awaiting sync answers
        REBALANCE_IN_PROGRESS without refreshing the session."""
        d = Driver()
        d.join()
        with self.assertRaises(IllegalGeneration):
            d.heartbeat("c-1", 0)
        with self.assertRaises(UnknownMemberId):
            d.heartbeat("ghost", 1)
        before = d.timers[session_key("g", "c-1")]
        self.assertIsInstance(d.heartbeat("c-1", 1), RebalanceInProgress)
        self.assertEqual(d.timers[session_key("g", "c-1")], before)

    def test_held_sync_answered_when_a_rebalance_starts(self) -> None:
        """A follower's held SyncGroup is answered REBALANCE_IN_PROGRESS when a new member
        arrives before the leader's assignment."""
        d = Driver()
        d.join()
        d.join()
        d.join("c-1")
        waiting = d.sync("c-2", 2)
        d.join()
        self.assertIsInstance(d.answer(waiting), RebalanceInProgress)

    def test_commit_fencing(self) -> None:
        """OffsetCommit: stored for a current member (refreshing its session), also while
        the barrier waits; REBALANCE_IN_PROGRESS awaiting sync; stale generation and unknown
        members refused; simple commits only into an Empty or unknown group."""
        d = Driver()
        c = d.coordinator
        one = {("t", 0): CommittedOffset(5, "m")}
        result = c.commit_offsets("fresh", -1, "", one, 0)
        self.assertEqual(result.reply, {("t", 0): None})
        self.assertEqual(result.effects, (PersistOffsets(),))
        self.assertIsNone(c.group("fresh"))
        _, generation = d.round(2)
        result = c.commit_offsets("g", generation, "c-2", one, 7)
        self.assertEqual(result.reply, {("t", 0): None})
        self.assertIn(PersistOffsets(), result.effects)
        self.assertEqual(c.group("g").members["c-2"].deadline_ms, 7 + 10_000)  # type: ignore[union-attr]
        with self.assertRaises(IllegalGeneration):
            c.commit_offsets("g", generation + 1, "c-2", one, 0)
        with self.assertRaises(UnknownMemberId):
            c.commit_offsets("g", -1, "", one, 0)
        with self.assertRaises(UnknownMemberId):
            c.commit_offsets("nope", 3, "c-9", one, 0)
        d.join()
        c.commit_offsets("g", generation, "c-1", {("t", 1): CommittedOffset(9)}, 0)
        d.join("c-1")
        d.join("c-2")
        with self.assertRaises(RebalanceInProgress):
            c.commit_offsets("g", generation + 1, "c-1", one, 0)
        self.assertEqual(c.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)]),
                         {("t", 0): CommittedOffset(5, "m"), ("t", 1): CommittedOffset(9),
                          ("t", 2): None})

    def test_metadata_too_large_is_per_partition(self) -> None:
        """Metadata over the limit refuses that partition only."""
        d = Driver()
        offsets = {("t", 0): CommittedOffset(1, "x" * 4097), ("t", 1): CommittedOffset(2, "é" * 2048)}
        reply = d.coordinator.commit_offsets("g", -1, "", offsets, 0).reply
        self.assertIsInstance(reply[("t", 0)], OffsetMetadataTooLarge)
        self.assertIsNone(reply[("t", 1)])
        self.assertEqual(d.coordinator.fetch_offsets("g", [("t", 0)]), {("t", 0): None})


class LeaveTests(SynchronousTestCase):
    def test_leave_rebalances_the_rest(self) -> None:
        """A member's LeaveGroup starts a rebalance the others complete by rejoining."""
        d = Driver()
        _, generation = d.round(3)
        self.assertIsNone(d.leave("c-1"))
        self.assertEqual(_state(d), (PREPARING, generation))
        self.assertNotIn(session_key("g", "c-1"), d.timers)
        d.join("c-2")
        reply = d.join("c-3")
        self.assertEqual((reply.generation, reply.leader), (generation + 1, "c-2"))

    def test_last_member_leaving_empties_the_group(self) -> None:
        """The last member's leave completes the barrier at once: Empty, next generation,
        saved; a simple commit is then accepted."""
        d = Driver()
        d.round(1)
        result = d.coordinator.leave("g", "c-1", 0)
        self.assertIn(PersistClassicGroups("g"), result.effects)
        self.assertEqual(_state(d), (EMPTY, 2))
        d.coordinator.commit_offsets("g", -1, "", {("t", 0): CommittedOffset(1)}, 0)
        with self.assertRaises(UnknownMemberId):
            d.leave("c-1")

    def test_leaving_with_a_held_join(self) -> None:
        """A member that leaves while its JoinGroup is held gets that join answered
        UNKNOWN_MEMBER_ID."""
        d = Driver()
        d.round(2)
        held = d.join("c-1")  # the leader's rejoin rebalances: held for c-2
        d.leave("c-1")
        self.assertIsInstance(d.answer(held), UnknownMemberId)
        self.assertEqual(d.outstanding, set())


class ViewTests(SynchronousTestCase):
    def test_describe_and_list(self) -> None:
        """DescribeGroups shows metadata and assignments only while Stable; unknown groups
        are Dead; ListGroups lists every group with its protocol type."""
        d = Driver()
        d.round(2)
        view = d.coordinator.describe("g")
        self.assertEqual((view.state, view.protocol_type, view.protocol), ("Stable", "consumer",
                                                                           "range"))
        self.assertEqual([(m.member_id, m.metadata, m.assignment) for m in view.members],
                         [("c-1", b"meta-range", b"c-1"), ("c-2", b"meta-range", b"c-2")])
        d.join()
        view = d.coordinator.describe("g")
        self.assertEqual((view.state, view.protocol), ("PreparingRebalance", ""))
        self.assertEqual({m.assignment for m in view.members}, {b""})
        self.assertEqual(d.coordinator.describe("zz").state, "Dead")
        d.join(group="h", protocols=RANGE)
        d.leave("c-4", group="h")
        self.assertEqual(d.coordinator.list_groups(), [("g", "consumer"), ("h", "")])

    def test_delete_group(self) -> None:
        """Only an Empty group can be deleted; it goes Dead and is forgotten."""
        d = Driver()
        d.round(1)
        with self.assertRaises(GroupNotEmpty):
            d.coordinator.delete_group("g")
        d.leave("c-1")
        group = d.coordinator.group("g")
        self.assertTrue(d.coordinator.delete_group("g").reply)
        self.assertIs(group.state, ClassicGroupState.DEAD)  # type: ignore[union-attr]
        self.assertIsNone(d.coordinator.group("g"))
        self.assertFalse(d.coordinator.delete_group("g").reply)
