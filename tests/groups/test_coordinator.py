"""Tests for groups.coordinator: the consumer-group rules of spec/v1-protocol.md, driven
directly with explicit ``now_ms`` values (no clock, no Twisted)."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from broker.errors import (
    InvalidGroupRequest,
    PartitionNotOwned,
    StaleGeneration,
    TooManyGroups,
    UnknownGroup,
    UnknownMember,
)
from groups.coordinator import Assignment, GroupConfig, GroupCoordinator
from groups.effects import CancelExpiry, PersistGroups, PersistOffsets, Result, ScheduleExpiry
from groups.group import Group, Member
from groups.state import GroupState
from tests.groups.helpers import snapshot


def _coordinator(groups: list[Group] | None = None,
                 **limits: int) -> tuple[GroupCoordinator, dict[str, int]]:
    counts = {"orders": 3, "payments": 4}
    coordinator = GroupCoordinator(lambda topic: counts.get(topic, 0), **limits)
    if groups is not None:
        coordinator.restore(groups, {})
    return coordinator, counts


def _of(result: Result[object], kind: type) -> list[object]:
    return [effect for effect in result.effects if isinstance(effect, kind)]


class JoinTests(SynchronousTestCase):
    def test_first_join_creates_the_group(self) -> None:
        """The first JOIN creates the group with round_robin at generation 1, owns every
        partition, asks for groups.json to be written and arms a session timer of the
        default 10 s keyed heartbeat:<group>:<topic>:<member>."""
        coordinator, _ = _coordinator()
        result = coordinator.join("analytics", "orders", "consumer-a", 500)
        self.assertEqual(result.reply, Assignment(1, [0, 1, 2]))
        self.assertEqual(_of(result, PersistGroups), [PersistGroups("analytics", "orders")])
        [timer] = _of(result, ScheduleExpiry)
        self.assertEqual((timer.key, timer.group, timer.topic, timer.member_id,
                          timer.deadline_ms),
                         ("heartbeat:analytics:orders:consumer-a", "analytics", "orders",
                          "consumer-a", 10_500))
        group = coordinator.group("analytics", "orders")
        assert group is not None
        self.assertEqual((group.state, group.assignor), (GroupState.STABLE, "round_robin"))

    def test_new_member_rebalances(self) -> None:
        """A JOIN by a new member adds one to the generation and reassigns over the members
        sorted by id (round_robin: p -> p mod n)."""
        coordinator, _ = _coordinator()
        coordinator.join("g", "orders", "c2", 0)
        result = coordinator.join("g", "orders", "c1", 0)
        self.assertEqual(result.reply, Assignment(2, [0, 2]))
        self.assertEqual(coordinator.sync("g", "orders", "c2", 2, 0).reply, Assignment(2, [1]))

    def test_current_member_does_not_rebalance(self) -> None:
        """A JOIN by a current member keeps generation and assignment, writes nothing and
        re-arms its session timer from now with a new token."""
        coordinator, _ = _coordinator()
        first = coordinator.join("g", "orders", "c1", 0)
        coordinator.join("g", "orders", "c2", 0)
        again = coordinator.join("g", "orders", "c1", 4_000)
        self.assertEqual(again.reply, Assignment(2, [0, 2]))
        self.assertEqual(_of(again, PersistGroups), [])
        [timer] = _of(again, ScheduleExpiry)
        [old] = _of(first, ScheduleExpiry)
        self.assertEqual(timer.deadline_ms, 14_000)
        self.assertNotEqual(timer.token, old.token)

    def test_session_timeout_option(self) -> None:
        """session_timeout_ms sets the member's own timeout; a current member naming a new
        one keeps its generation but the change is written to groups.json."""
        coordinator, _ = _coordinator()
        [timer] = _of(coordinator.join("g", "orders", "c1", 0, session_timeout_ms=3000),
                      ScheduleExpiry)
        self.assertEqual(timer.deadline_ms, 3000)
        again = coordinator.join("g", "orders", "c1", 100, session_timeout_ms=5000)
        self.assertEqual(again.reply.generation, 1)
        self.assertEqual(_of(again, PersistGroups), [PersistGroups("g", "orders")])
        self.assertEqual(_of(again, ScheduleExpiry)[0].deadline_ms, 5100)
        # a later JOIN without the option keeps the member's timeout
        [timer] = _of(coordinator.join("g", "orders", "c1", 200), ScheduleExpiry)
        self.assertEqual(timer.deadline_ms, 5200)

    def test_session_timeout_bounds(self) -> None:
        """A session_timeout_ms outside the configured bounds is BAD_REQUEST naming them."""
        coordinator, _ = _coordinator(min_session_timeout_ms=100, max_session_timeout_ms=60_000)
        for value in (0, 99, 60_001):
            with self.assertRaises(InvalidGroupRequest) as caught:
                coordinator.join("g", "orders", "c1", 0, session_timeout_ms=value)
            self.assertIn("between 100 and 60000", caught.exception.message)
        self.assertEqual(coordinator.list_groups(), [])

    def test_config_validation(self) -> None:
        """Nonsensical timeouts or limits are refused when the coordinator is built; the
        defaults are 10 s sessions, options of 100 ms to 1 h, 10000 groups, 1000 members."""
        for bad in ({"session_timeout_ms": 0}, {"max_groups": 0}, {"max_members_per_group": 0},
                    {"min_session_timeout_ms": 0},
                    {"min_session_timeout_ms": 500, "max_session_timeout_ms": 400}):
            self.assertRaises(ValueError, GroupCoordinator, lambda t: 1, **bad)
        self.assertEqual(GroupCoordinator(lambda t: 1).config,
                         GroupConfig(10_000, 100, 3_600_000, 10_000, 1_000))

    def test_group_is_keyed_by_group_and_topic(self) -> None:
        """One group name on two topics is two groups with their own generations."""
        coordinator, _ = _coordinator()
        coordinator.join("g", "orders", "c1", 0)
        coordinator.join("g", "orders", "c2", 0)
        self.assertEqual(coordinator.join("g", "payments", "c1", 0).reply,
                         Assignment(1, [0, 1, 2, 3]))
        self.assertEqual(coordinator.list_groups(), [("g", "orders"), ("g", "payments")])

    def test_unknown_assignor(self) -> None:
        """An assignor name that does not exist is BAD_REQUEST listing the valid ones."""
        coordinator, _ = _coordinator()
        with self.assertRaises(InvalidGroupRequest) as caught:
            coordinator.join("g", "orders", "c1", 0, assignor="roundrobin")
        self.assertEqual(caught.exception.message,
                         "unknown assignor roundrobin; expected round_robin, range or sticky")


class AssignorSwitchTests(SynchronousTestCase):
    def test_new_group_takes_the_named_assignor_and_keeps_it(self) -> None:
        """A new group uses the assignor its first JOIN names; later JOINs without the
        option keep it."""
        coordinator, _ = _coordinator()
        coordinator.join("g", "orders", "c1", 0, assignor="range")
        self.assertEqual(coordinator.join("g", "orders", "c2", 0).reply, Assignment(2, [2]))
        self.assertEqual(coordinator.sync("g", "orders", "c1", 2, 0).reply,
                         Assignment(2, [0, 1]))

    def test_refused_while_another_member_is_live(self) -> None:
        """Naming another assignor while other members are live is BAD_REQUEST naming the
        group's assignor, for a new member and for a current one, with nothing changed."""
        coordinator, _ = _coordinator()
        coordinator.join("g", "orders", "c1", 0)
        coordinator.join("g", "orders", "c2", 0)
        for member in ("c1", "c3"):
            with self.assertRaises(InvalidGroupRequest) as caught:
                coordinator.join("g", "orders", member, 0, assignor="range")
            self.assertIn("uses assignor round_robin", caught.exception.message)
        group = coordinator.group("g", "orders")
        assert group is not None
        self.assertEqual((group.generation, group.assignor, sorted(group.members)),
                         (2, "round_robin", ["c1", "c2"]))

    def test_sole_member_switches_with_a_rebalance(self) -> None:
        """The only live member may switch the assignor: it takes effect at once with the
        next generation."""
        coordinator, _ = _coordinator()
        coordinator.join("g", "orders", "c1", 0)
        result = coordinator.join("g", "orders", "c1", 0, assignor="sticky")
        self.assertEqual(result.reply, Assignment(2, [0, 1, 2]))
        self.assertEqual(_of(result, PersistGroups), [PersistGroups("g", "orders")])
        group = coordinator.group("g", "orders")
        assert group is not None
        self.assertEqual(group.assignor, "sticky")
        # naming the assignor the group already has is not a switch
        self.assertEqual(coordinator.join("g", "orders", "c1", 0, assignor="sticky").reply,
                         Assignment(2, [0, 1, 2]))

    def test_empty_group_switches_on_join(self) -> None:
        """A JOIN into an empty group may name another assignor: one rebalance, one step."""
        coordinator, _ = _coordinator()
        coordinator.join("g", "orders", "c1", 0)
        coordinator.leave("g", "orders", "c1", 1)
        self.assertEqual(coordinator.join("g", "orders", "c9", 0, assignor="range").reply,
                         Assignment(3, [0, 1, 2]))


class MemberRequestTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.coordinator, self.counts = _coordinator()
        self.coordinator.join("g", "orders", "c1", 0)
        self.coordinator.join("g", "orders", "c2", 0)  # generation 2: c1 [0, 2], c2 [1]

    def test_sync_and_heartbeat_refresh(self) -> None:
        """SYNC answers the current assignment and, like HEARTBEAT, re-arms the timer."""
        sync = self.coordinator.sync("g", "orders", "c1", 2, 1000)
        self.assertEqual(sync.reply, Assignment(2, [0, 2]))
        self.assertEqual(_of(sync, ScheduleExpiry)[0].deadline_ms, 11_000)
        beat = self.coordinator.heartbeat("g", "orders", "c2", 2, 2500)
        self.assertEqual(beat.effects, (ScheduleExpiry("heartbeat:g:orders:c2", "g", "orders",
                                                       "c2", beat.effects[0].token, 12_500),))

    def test_fencing(self) -> None:
        """SYNC, HEARTBEAT, LEAVE and COMMIT refuse an unknown group, an unknown member and
        a stale generation with the matching GENERATION_MISMATCH subclass, and change
        nothing: no liveness refresh, no offset, no generation."""
        calls = {
            "sync": lambda g, t, m, n: self.coordinator.sync(g, t, m, n, 0),
            "heartbeat": lambda g, t, m, n: self.coordinator.heartbeat(g, t, m, n, 0),
            "leave": lambda g, t, m, n: self.coordinator.leave(g, t, m, n),
            "commit": lambda g, t, m, n: self.coordinator.commit(g, t, m, n, 0, 1, 0),
        }
        self.coordinator.commit("g", "orders", "c1", 2, 0, 3, 0)
        before = snapshot(self.coordinator)
        for name, call in calls.items():
            self.assertRaises(UnknownGroup, call, "other", "orders", "c1", 2)
            self.assertRaises(UnknownGroup, call, "g", "payments", "c1", 2)
            self.assertRaises(UnknownMember, call, "g", "orders", "c3", 2)
            self.assertRaises(StaleGeneration, call, "g", "orders", "c1", 1)
            self.assertRaises(StaleGeneration, call, "g", "orders", "c1", 3)
            self.assertEqual(snapshot(self.coordinator), before, name)

    def test_leave(self) -> None:
        """LEAVE removes the member at once: next generation, reassignment, its timer
        cancelled, groups.json written."""
        result = self.coordinator.leave("g", "orders", "c1", 2)
        self.assertEqual(set(result.effects),
                         {PersistGroups("g", "orders"), CancelExpiry("heartbeat:g:orders:c1")})
        self.assertEqual(self.coordinator.sync("g", "orders", "c2", 3, 0).reply,
                         Assignment(3, [0, 1, 2]))

    def test_empty_group_keeps_its_generation(self) -> None:
        """When the last member leaves the group is empty but keeps its generation and
        assignor; a later JOIN continues from there."""
        self.coordinator.leave("g", "orders", "c1", 2)
        self.coordinator.leave("g", "orders", "c2", 3)
        group = self.coordinator.group("g", "orders")
        assert group is not None
        self.assertEqual((group.state, group.generation), (GroupState.EMPTY, 4))
        self.assertEqual(self.coordinator.join("g", "orders", "c1", 0).reply,
                         Assignment(5, [0, 1, 2]))

    def test_commit(self) -> None:
        """COMMIT of an owned partition stores the next offset to read, asks for
        offsets.json to be written and re-arms the timer; OFFSET then returns it."""
        result = self.coordinator.commit("g", "orders", "c1", 2, 2, 42, 700)
        self.assertEqual(_of(result, PersistOffsets), [PersistOffsets("g", "orders", (2,))])
        self.assertEqual(_of(result, ScheduleExpiry)[0].deadline_ms, 10_700)
        self.assertEqual(self.coordinator.offset("g", "orders", 2), 42)
        self.assertEqual(self.coordinator.offset("g", "orders", 0), 0)
        self.assertEqual(self.coordinator.offset("nobody", "nothing", 0), 0)

    def test_commit_needs_ownership(self) -> None:
        """COMMIT of a partition another member owns is refused (PartitionNotOwned) and
        stores nothing."""
        with self.assertRaises(PartitionNotOwned):
            self.coordinator.commit("g", "orders", "c1", 2, 1, 5, 0)
        self.assertEqual(self.coordinator.committed(), {})

    def test_offsets_outlive_members(self) -> None:
        """Committed offsets stay when members leave, expire and the group empties."""
        self.coordinator.commit("g", "orders", "c1", 2, 0, 7, 0)
        self.coordinator.leave("g", "orders", "c1", 2)
        c2 = self.coordinator.group("g", "orders").members["c2"]  # type: ignore[union-attr]
        self.coordinator.expire("g", "orders", "c2", c2.token)
        self.assertEqual(self.coordinator.group("g", "orders").state,  # type: ignore[union-attr]
                         GroupState.EMPTY)
        self.assertEqual(self.coordinator.offset("g", "orders", 0), 7)


class ExpiryTests(SynchronousTestCase):
    def test_current_token_evicts(self) -> None:
        """A session timer firing with the member's current token removes it: next
        generation, reassignment, groups.json written."""
        coordinator, _ = _coordinator()
        coordinator.join("g", "orders", "c1", 0)
        [timer] = _of(coordinator.join("g", "orders", "c2", 0), ScheduleExpiry)
        result = coordinator.expire("g", "orders", "c2", timer.token)
        self.assertEqual((result.reply, result.effects), (True, (PersistGroups("g", "orders"),)))
        self.assertEqual(coordinator.sync("g", "orders", "c1", 3, 0).reply,
                         Assignment(3, [0, 1, 2]))

    def test_stale_token_does_nothing(self) -> None:
        """A timer armed before the member's latest refresh, or for a member that has left
        and rejoined, or for a group that is gone, changes nothing."""
        coordinator, _ = _coordinator()
        [old] = _of(coordinator.join("g", "orders", "c1", 0), ScheduleExpiry)
        coordinator.heartbeat("g", "orders", "c1", 1, 10)
        self.assertEqual(coordinator.expire("g", "orders", "c1", old.token), Result(False))
        [current] = _of(coordinator.heartbeat("g", "orders", "c1", 1, 20), ScheduleExpiry)
        coordinator.leave("g", "orders", "c1", 1)
        coordinator.join("g", "orders", "c1", 30)
        self.assertEqual(coordinator.expire("g", "orders", "c1", current.token), Result(False))
        self.assertEqual(coordinator.expire("zz", "orders", "c1", current.token), Result(False))
        self.assertEqual(coordinator.group("g", "orders").generation, 3)  # type: ignore[union-attr]


class PartitionChangeTests(SynchronousTestCase):
    def test_groups_with_members_rebalance(self) -> None:
        """When a topic grows, each of its groups with members starts the next generation
        over the new count; empty groups and groups on other topics are untouched, and a
        second call with the same count does nothing."""
        coordinator, counts = _coordinator()
        coordinator.join("a", "orders", "c1", 0)
        coordinator.join("b", "orders", "c1", 0)
        coordinator.leave("b", "orders", "c1", 1)
        coordinator.join("c", "payments", "c1", 0)
        counts["orders"] = 5
        result = coordinator.partitions_changed("orders")
        self.assertEqual((result.reply, result.effects), ([("a", "orders")], (PersistGroups("a", "orders"),)))
        self.assertEqual(coordinator.sync("a", "orders", "c1", 2, 0).reply,
                         Assignment(2, [0, 1, 2, 3, 4]))
        self.assertEqual(coordinator.group("b", "orders").generation, 2)  # type: ignore[union-attr]
        self.assertEqual(coordinator.group("c", "payments").generation, 1)  # type: ignore[union-attr]
        self.assertEqual(coordinator.partitions_changed("orders"), Result([]))


class StartTests(SynchronousTestCase):
    def test_restored_members_get_a_fresh_timeout(self) -> None:
        """start(now) arms every restored member's timer a full session timeout from now
        and writes nothing when the partition counts still match."""
        group = Group("g", "orders", generation=4, partitions=3,
                      members=[Member("c1", 2000), Member("c2", 3000)],
                      assignment={"c1": [0, 2], "c2": [1]})
        coordinator, _ = _coordinator([group])
        result = coordinator.start(50_000)
        self.assertEqual(sorted((e.member_id, e.deadline_ms) for e in _of(result, ScheduleExpiry)),
                         [("c1", 52_000), ("c2", 53_000)])
        self.assertEqual(_of(result, PersistGroups), [])
        self.assertEqual(coordinator.sync("g", "orders", "c1", 4, 0).reply,
                         Assignment(4, [0, 2]))

    def test_partition_count_changed_while_down(self) -> None:
        """A restored group whose assignment was for another partition count rebalances."""
        group = Group("g", "orders", generation=4, partitions=2, members=[Member("c1", 2000)],
                      assignment={"c1": [0, 1]})
        coordinator, _ = _coordinator([group])
        result = coordinator.start(0)
        self.assertEqual(_of(result, PersistGroups), [PersistGroups("g", "orders")])
        self.assertEqual(coordinator.sync("g", "orders", "c1", 5, 0).reply,
                         Assignment(5, [0, 1, 2]))

    def test_restore_checks(self) -> None:
        """Two restored groups with the same (group, topic) are refused, and so is restoring
        into a coordinator that already holds state."""
        with self.assertRaises(ValueError):
            _coordinator([Group("g", "orders"), Group("g", "orders")])
        coordinator, _ = _coordinator()
        coordinator.join("g", "orders", "c1", 0)
        self.assertRaises(ValueError, coordinator.restore, [], {})


class LimitTests(SynchronousTestCase):
    def test_max_groups(self) -> None:
        """A JOIN or admin command that would add a (group, topic) pair beyond max_groups is
        UNAVAILABLE; pairs that already exist (with state or only offsets) still work."""
        coordinator, _ = _coordinator(max_groups=2)
        coordinator.join("a", "orders", "c1", 0)
        coordinator.admin_commit("b", "orders", 0, 5)
        with self.assertRaises(TooManyGroups) as caught:
            coordinator.join("c", "orders", "c1", 0)
        self.assertIn("at most 2", caught.exception.message)
        self.assertRaises(TooManyGroups, coordinator.admin_commit, "c", "orders", 0, 1)
        self.assertRaises(TooManyGroups, coordinator.reset_offsets, "c", "orders", "earliest",
                          earliest_for=lambda t, p: 0, latest_for=lambda t, p: 0)
        self.assertEqual(coordinator.join("b", "orders", "c1", 0).reply.generation, 1)
        self.assertEqual(coordinator.list_groups(), [("a", "orders"), ("b", "orders")])

    def test_a_pair_with_members_and_offsets_counts_once(self) -> None:
        """max_groups counts (group, topic) pairs, not the records kept of them: a pair
        with live members and committed offsets is one of the allowed pairs."""
        coordinator, _ = _coordinator(max_groups=2)
        coordinator.admin_commit("a", "orders", 0, 5)
        coordinator.join("a", "orders", "c1", 0)
        self.assertEqual(coordinator.join("b", "orders", "c1", 0).reply.generation, 1)
        self.assertRaises(TooManyGroups, coordinator.admin_commit, "c", "orders", 0, 1)

    def test_offset_keys_name_the_pairs_with_offsets(self) -> None:
        """``offset_keys``: the (group, topic) pairs that committed an offset, sorted, the
        same pairs ``committed`` copies, and not a group that only has members."""
        coordinator, _ = _coordinator()
        coordinator.admin_commit("b", "orders", 0, 5)
        coordinator.admin_commit("a", "payments", 1, 7)
        coordinator.join("c", "orders", "c1", 0)
        self.assertEqual(coordinator.offset_keys(), [("a", "payments"), ("b", "orders")])
        self.assertEqual(coordinator.offset_keys(), list(coordinator.committed()))

    def test_max_members(self) -> None:
        """A JOIN by one member more than max_members_per_group is BAD_REQUEST; current
        members may still rejoin."""
        coordinator, _ = _coordinator(max_members_per_group=2)
        coordinator.join("g", "orders", "c1", 0)
        coordinator.join("g", "orders", "c2", 0)
        with self.assertRaises(InvalidGroupRequest) as caught:
            coordinator.join("g", "orders", "c3", 0)
        self.assertIn("is full (2 members)", caught.exception.message)
        self.assertEqual(coordinator.join("g", "orders", "c2", 0).reply.generation, 2)


class AdminTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.coordinator, _ = _coordinator()
        self.coordinator.join("g", "orders", "c1", 0)
        self.coordinator.commit("g", "orders", "c1", 1, 1, 4, 0)

    def _leave(self) -> None:
        self.coordinator.leave("g", "orders", "c1", 1)

    def test_refused_while_members_are_live(self) -> None:
        """ADMIN_COMMIT, ADMIN_RESET_OFFSETS and ADMIN_DELETE_GROUP are BAD_REQUEST while
        the group has live members, and change nothing."""
        calls = [
            lambda: self.coordinator.admin_commit("g", "orders", 0, 1),
            lambda: self.coordinator.reset_offsets("g", "orders", "earliest",
                                                   earliest_for=lambda t, p: 0,
                                                   latest_for=lambda t, p: 9),
            lambda: self.coordinator.delete_group("g", "orders"),
        ]
        for call in calls:
            with self.assertRaises(InvalidGroupRequest) as caught:
                call()
            self.assertIn("has 1 live member; stop them first", caught.exception.message)
        self.assertEqual(self.coordinator.committed(), {("g", "orders"): {1: 4}})

    def test_admin_commit(self) -> None:
        """ADMIN_COMMIT stores an offset for an empty group, or creates the pair."""
        self._leave()
        self.assertEqual(self.coordinator.admin_commit("g", "orders", 2, 9).effects,
                         (PersistOffsets("g", "orders", (2,)),))
        self.coordinator.admin_commit("tool", "payments", 0, 3)
        self.assertEqual(self.coordinator.committed(),
                         {("g", "orders"): {1: 4, 2: 9}, ("tool", "payments"): {0: 3}})
        self.assertEqual(self.coordinator.list_groups(), [("g", "orders"), ("tool", "payments")])

    def test_reset_offsets(self) -> None:
        """ADMIN_RESET_OFFSETS resolves earliest and latest through the callbacks, clamps
        an explicit offset into [earliest, latest], and applies to one partition or all."""
        self._leave()
        earliest = {0: 2, 1: 0, 2: 5}
        latest = {0: 10, 1: 7, 2: 5}
        lookups = {"earliest_for": lambda t, p: earliest[p], "latest_for": lambda t, p: latest[p]}
        cases = [
            (("earliest", None), {0: 2, 1: 0, 2: 5}),
            (("latest", None), {0: 10, 1: 7, 2: 5}),
            ((6, None), {0: 6, 1: 6, 2: 5}),
            ((0, 0), {0: 2}),
            ((99, 1), {1: 7}),
        ]
        for (target, partition), expected in cases:
            result = self.coordinator.reset_offsets("g", "orders", target, partition, **lookups)
            self.assertEqual(result.reply, expected, (target, partition))
            self.assertEqual(result.effects,
                             (PersistOffsets("g", "orders", tuple(sorted(expected))),))
            for p, offset in expected.items():
                self.assertEqual(self.coordinator.offset("g", "orders", p), offset)
        with self.assertRaises(InvalidGroupRequest):
            self.coordinator.reset_offsets("g", "orders", "middle", **lookups)  # type: ignore[arg-type]

    def test_delete_group(self) -> None:
        """ADMIN_DELETE_GROUP forgets the group and its offsets (both files written); a later
        JOIN starts a new group at generation 1; deleting nothing is UnknownGroup."""
        self._leave()
        group = self.coordinator.group("g", "orders")
        result = self.coordinator.delete_group("g", "orders")
        self.assertEqual(result.effects, (PersistGroups("g", "orders"),
                                          PersistOffsets("g", "orders", (1,))))
        self.assertIs(group.state, GroupState.DEAD)  # type: ignore[union-attr]
        self.assertEqual((self.coordinator.list_groups(), self.coordinator.offset("g", "orders", 1)),
                         ([], 0))
        self.assertRaises(UnknownGroup, self.coordinator.delete_group, "g", "orders")
        self.assertEqual(self.coordinator.join("g", "orders", "c1", 0).reply.generation, 1)

    def test_describe(self) -> None:
        """DESCRIBE_GROUP gives state, generation, assignor, members sorted by id with
        their partitions, and per partition the committed offset, hw and
        lag = max(0, hw + 1 - committed)."""
        self.coordinator.join("g", "orders", "c3", 0)
        self.coordinator.join("g", "orders", "c2", 0)
        hw = {0: 9, 1: -1, 2: 2}
        description = self.coordinator.describe("g", "orders", hw_for=lambda t, p: hw[p])
        self.assertEqual((description.state, description.generation, description.assignor),
                         ("stable", 3, "round_robin"))
        self.assertEqual(description.members, (("c1", (0,)), ("c2", (1,)), ("c3", (2,))))
        self.assertEqual((description.partitions, description.committed, description.hw,
                          description.lag), ((0, 1, 2), (0, 4, 0), (9, -1, 2), (10, 0, 3)))

    def test_describe_without_group_state(self) -> None:
        """A pair known only by its offsets describes as empty at generation 0; a pair
        LIST_GROUPS does not show is UnknownGroup."""
        self.coordinator.admin_commit("tool", "payments", 0, 3)
        description = self.coordinator.describe("tool", "payments", hw_for=lambda t, p: 4)
        self.assertEqual((description.state, description.generation, description.members),
                         ("empty", 0, ()))
        self.assertEqual((description.partitions, description.committed, description.lag),
                         ((0, 1, 2, 3), (3, 0, 0, 0), (2, 5, 5, 5)))
        self.assertRaises(UnknownGroup, self.coordinator.describe, "x", "orders",
                          hw_for=lambda t, p: 0)
