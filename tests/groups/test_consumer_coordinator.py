"""Tests for groups.consumer_coordinator: KIP-848 reconciliation sequences (join, a second
member, death, static restart, regex subscriptions, partition growth, rebalance timeout),
the fencing refusals and the member-epoch checks of offset commits."""

from __future__ import annotations

import copy

from twisted.trial.unittest import SynchronousTestCase

from groups.classic_effects import CommittedOffset
from groups.consumer_coordinator import ConsumerConfig
from groups.consumer_effects import HeartbeatRequest
from groups.consumer_errors import (
    ConsumerGroupNotEmpty,
    FencedInstanceId,
    FencedMemberEpoch,
    GroupIdNotFound,
    GroupMaxSizeReached,
    InvalidConsumerGroupRequest,
    InvalidRegularExpression,
    StaleMemberEpoch,
    UnknownMemberId,
    UnreleasedInstanceId,
    UnsupportedAssignor,
)
from groups.consumer_state import ConsumerGroupState, MemberState
from groups.kafka_errors import InvalidGroupId
from tests.groups.consumer_helpers import (
    INTERVAL_MS,
    REBALANCE_MS,
    SESSION_MS,
    Consumer,
    Driver,
    topic_id,
)

T = topic_id("t")


def _owners(*consumers: Consumer, topic: str = "t") -> dict[int, list[int]]:
    """partition -> indexes of the consumers that own it (client side)."""
    out: dict[int, list[int]] = {}
    for index, consumer in enumerate(consumers):
        for partition in consumer.partitions(topic):
            out.setdefault(partition, []).append(index)
    return out


class JoinAndHandOverTests(SynchronousTestCase):
    def test_first_member_gets_every_partition_at_epoch_1(self) -> None:
        """A lone member's join answers group epoch 1 and all six partitions at once."""
        d = Driver()
        c0 = Consumer(d)
        reply = c0.heartbeat()
        self.assertEqual((reply.member_epoch, reply.heartbeat_interval_ms), (1, INTERVAL_MS))
        self.assertEqual(c0.partitions(), [0, 1, 2, 3, 4, 5])
        group = d.coordinator.group("g")
        assert group is not None
        self.assertEqual((group.group_epoch, group.assignment_epoch, group.state),
                         (1, 1, ConsumerGroupState.STABLE))

    def test_second_member_waits_for_the_revocation(self) -> None:
        """When a second member joins, the first is asked to revoke half its partitions,
        the joiner gets nothing until the owner's next heartbeat confirms, and then gets
        exactly those partitions: at no step do two consumers own one partition."""
        d = Driver()
        c0, c1 = Consumer(d), Consumer(d)
        c0.heartbeat()
        steps = [
            # (who, member epoch answered, c0 owns, c1 owns, c0 state, group state)
            (c1, 2, [0, 1, 2, 3, 4, 5], [], "STABLE", "Reconciling"),
            (c0, 1, [0, 1, 2], [], "UNREVOKED_PARTITIONS", "Reconciling"),
            (c1, 2, [0, 1, 2], [], "UNREVOKED_PARTITIONS", "Reconciling"),
            (c0, 2, [0, 1, 2], [], "STABLE", "Reconciling"),
            (c1, 2, [0, 1, 2], [3, 4, 5], "STABLE", "Stable"),
        ]
        for who, epoch, own0, own1, state0, group_state in steps:
            reply = who.heartbeat()
            self.assertEqual(reply.member_epoch, epoch)
            self.assertEqual((c0.partitions(), c1.partitions()), (own0, own1))
            self.assertTrue(all(len(v) == 1 for v in _owners(c0, c1).values()))
            view = d.coordinator.describe("g")
            self.assertEqual(view.members[0].state, state0)
            self.assertEqual(view.state, group_state)
        self.assertEqual(c1.member_id, "gen2")

    def test_joiner_state_is_unreleased_until_the_owner_confirms(self) -> None:
        """The joiner sits in UNRELEASED_PARTITIONS at the new epoch while the partitions
        it is meant to have are still held; its describe view shows the target."""
        d = Driver()
        c0, c1 = Consumer(d), Consumer(d)
        c0.heartbeat()
        c1.heartbeat()
        c0.heartbeat()  # asked to revoke
        c1.heartbeat()
        view = d.coordinator.describe("g").members[1]
        self.assertEqual((view.state, view.member_epoch), ("UNRELEASED_PARTITIONS", 2))
        self.assertEqual(view.target[0].partitions, (3, 4, 5))
        self.assertEqual(view.assignment, ())
        self.assertEqual(d.coordinator.describe("g").members[0].pending[0].partitions,
                         (3, 4, 5))

    def test_survivors_keep_their_partitions_when_a_member_leaves(self) -> None:
        """A member leaving (epoch -1): the epoch goes up and the survivors are *added*
        partitions without revoking any (uniform is sticky): they never stop."""
        d = Driver()
        cs = [Consumer(d) for _ in range(3)]
        for _ in range(3):
            for c in cs:
                c.heartbeat()
        before = [c.partitions() for c in cs]
        self.assertEqual(sorted(p for b in before for p in b), list(range(6)))
        reply = cs[1].leave()
        self.assertEqual(reply.member_epoch, -1)
        for c in (cs[0], cs[2]):
            c.heartbeat()
        self.assertTrue(set(before[0]) <= set(cs[0].partitions()))
        self.assertTrue(set(before[2]) <= set(cs[2].partitions()))
        self.assertEqual(sorted(cs[0].partitions() + cs[2].partitions()), list(range(6)))
        group = d.coordinator.group("g")
        assert group is not None
        self.assertEqual((group.group_epoch, group.state), (4, ConsumerGroupState.STABLE))


class TimeoutTests(SynchronousTestCase):
    def test_session_timeout_fences_a_dead_member(self) -> None:
        """A member that stops heartbeating is removed one session timeout after its last
        heartbeat; the survivor is then given its partitions."""
        d = Driver()
        c0, c1 = Consumer(d), Consumer(d)
        for _ in range(3):
            c0.heartbeat()
            c1.heartbeat()
        self.assertEqual((c0.partitions(), c1.partitions()), ([0, 1, 2], [3, 4, 5]))
        for _ in range(SESSION_MS // INTERVAL_MS - 1):
            d.advance(INTERVAL_MS)
            c0.heartbeat()
        self.assertEqual(d.fired, [])
        d.advance(INTERVAL_MS)
        c0.heartbeat()
        self.assertEqual(d.fired, ["consumer-session:1:g:gen2"])
        self.assertEqual(c0.partitions(), [0, 1, 2, 3, 4, 5])
        self.assertEqual(c0.epoch, 3)

    def test_heartbeats_keep_the_session(self) -> None:
        """Heartbeats every interval keep a member for many session timeouts."""
        d = Driver()
        c0 = Consumer(d)
        for _ in range(40):
            c0.heartbeat()
            d.advance(INTERVAL_MS)
        self.assertEqual(d.fired, [])
        self.assertEqual(c0.partitions(), list(range(6)))

    def test_a_member_that_does_not_revoke_in_time_is_fenced(self) -> None:
        """A member asked to revoke that keeps reporting the partitions is fenced at its
        rebalance timeout (even though it heartbeats), and the joiner then gets them."""
        d = Driver()
        c0, c1 = Consumer(d), Consumer(d)
        c0.heartbeat()
        c1.heartbeat()
        for _ in range(REBALANCE_MS // INTERVAL_MS - 1):
            c0.heartbeat(revoke=False, full=True)
            c1.heartbeat()
            d.advance(INTERVAL_MS)
        self.assertEqual(c1.partitions(), [])
        d.advance(INTERVAL_MS)
        self.assertEqual(d.fired, ["consumer-rebalance:1:g:gen1"])
        with self.assertRaises(UnknownMemberId):
            c0.heartbeat(full=True)
        c1.heartbeat()
        self.assertEqual(c1.partitions(), list(range(6)))

    def test_revoking_in_time_cancels_the_rebalance_timer(self) -> None:
        """Once the revocation is confirmed the rebalance timer is cancelled."""
        d = Driver()
        c0, c1 = Consumer(d), Consumer(d)
        c0.heartbeat()
        c1.heartbeat()
        c0.heartbeat()
        self.assertIn("consumer-rebalance:1:g:gen1", d.timers)
        c0.heartbeat()
        self.assertNotIn("consumer-rebalance:1:g:gen1", d.timers)

    def test_stale_timer_firings_change_nothing(self) -> None:
        """A session firing with an old token, or a rebalance firing after the member moved
        on, removes nobody."""
        d = Driver()
        c0, c1 = Consumer(d), Consumer(d)
        c0.heartbeat()
        c1.heartbeat()
        c0.heartbeat()
        coordinator = d.coordinator
        self.assertFalse(coordinator.expire_session("g", c0.member_id, 1, d.now).reply)
        self.assertFalse(coordinator.expire_rebalance("g", c0.member_id, 0, 99, d.now).reply)
        self.assertFalse(coordinator.expire_session("nope", "x", 1, d.now).reply)
        group = coordinator.group("g")
        assert group is not None
        self.assertEqual(len(group.members), 2)


class StaticMemberTests(SynchronousTestCase):
    def _two(self) -> tuple[Driver, Consumer, Consumer]:
        d = Driver()
        a = Consumer(d, instance_id="a")
        b = Consumer(d, instance_id="b")
        for _ in range(3):
            a.heartbeat()
            b.heartbeat()
        return d, a, b

    def test_restarted_static_member_gets_its_partitions_back_without_a_rebalance(self) -> None:
        """A static member leaving with -2 keeps its partitions reserved; its restart (new
        member id, same instance id) gets them back at the same group epoch, and the other
        member's assignment never moves."""
        d, a, b = self._two()
        group = d.coordinator.group("g")
        assert group is not None
        epoch = group.group_epoch
        mine, old_id = a.partitions(), a.member_id
        self.assertEqual(a.leave(static=True).member_epoch, -2)
        self.assertEqual(group.state, ConsumerGroupState.RECONCILING)
        b.heartbeat()
        self.assertEqual(b.partitions(), [3, 4, 5])
        a.restart()
        a.heartbeat()
        self.assertNotEqual(a.member_id, old_id)
        self.assertEqual(a.partitions(), mine)
        self.assertEqual(group.group_epoch, epoch)
        self.assertEqual(group.state, ConsumerGroupState.STABLE)
        with self.assertRaises(FencedInstanceId):
            d.heartbeat(HeartbeatRequest("g", old_id, a.epoch, instance_id="a"))

    def test_instance_id_held_by_a_live_member_is_refused(self) -> None:
        """A second process with a live member's instance id: UNRELEASED_INSTANCE_ID."""
        d, a, _ = self._two()
        with self.assertRaises(UnreleasedInstanceId):
            Consumer(d, instance_id="a").heartbeat()

    def test_away_static_member_is_removed_after_its_session_timeout(self) -> None:
        """A static member that left with -2 and does not come back within the session
        timeout is removed; its partitions go to the other member."""
        d, a, b = self._two()
        a.leave(static=True)
        for _ in range(SESSION_MS // INTERVAL_MS + 1):
            d.advance(INTERVAL_MS)
            b.heartbeat()
        self.assertEqual(b.partitions(), list(range(6)))
        group = d.coordinator.group("g")
        assert group is not None
        self.assertEqual(list(group.static), ["b"])


class SubscriptionTests(SynchronousTestCase):
    def test_regex_subscription_follows_topic_creation(self) -> None:
        """A member subscribed by regex gets a matching topic created later (after the
        shell reports the metadata change), never a non-matching or internal one."""
        d = Driver({"orders-eu": 2, "payments": 2})
        c = Consumer(d, topics=None, regex="orders-.*")
        c.heartbeat()
        self.assertEqual(c.partitions("orders-eu"), [0, 1])
        d.set_topic("orders-us", 3)
        d.set_topic("__orders-internal", 3)
        d.set_topic("payments-orders-x", 1)
        self.assertEqual(d.metadata_changed(), ["g"])
        c.heartbeat()
        self.assertEqual(c.partitions("orders-us"), [0, 1, 2])
        self.assertEqual(c.partitions("payments"), [])
        self.assertEqual(c.partitions("payments-orders-x"), [])
        self.assertEqual(c.partitions("__orders-internal"), [])

    def test_switching_from_names_to_regex_revokes_then_assigns(self) -> None:
        """Changing the subscription bumps the group epoch; partitions of a topic no longer
        subscribed are revoked and the new ones assigned."""
        d = Driver({"a": 2, "b": 2})
        c = Consumer(d, topics=("a",))
        c.heartbeat()
        reply = d.heartbeat(HeartbeatRequest("g", c.member_id, c.epoch, topic_names=(),
                                             topic_regex="b"))
        self.assertEqual((reply.member_epoch, reply.assignment), (1, ()))
        group = d.coordinator.group("g")
        assert group is not None
        self.assertEqual(group.group_epoch, 2)
        self.assertEqual(group.owner(topic_id("b"), 0), None)
        reply = d.heartbeat(HeartbeatRequest("g", c.member_id, 1, owned=()))
        self.assertEqual((reply.member_epoch, reply.assignment),
                         (2, ((topic_id("b"), (0, 1)),)))

    def test_partition_growth_is_assigned(self) -> None:
        """A subscribed topic gaining partitions bumps the epoch; the new partitions are
        spread without moving the old ones."""
        d = Driver({"t": 4})
        c0, c1 = Consumer(d), Consumer(d)
        for _ in range(3):
            c0.heartbeat()
            c1.heartbeat()
        before = (c0.partitions(), c1.partitions())
        d.set_topic("t", 8)
        self.assertEqual(d.metadata_changed(), ["g"])
        c0.heartbeat()
        c1.heartbeat()
        self.assertTrue(set(before[0]) <= set(c0.partitions()))
        self.assertTrue(set(before[1]) <= set(c1.partitions()))
        self.assertEqual(sorted(c0.partitions() + c1.partitions()), list(range(8)))
        self.assertEqual(d.metadata_changed(), [])

    def test_range_assignor_is_chosen_by_the_members(self) -> None:
        """``group.remote.assignor=range`` picks range; an unknown name is refused."""
        d = Driver({"t": 4})
        c = Consumer(d, assignor="range")
        c.heartbeat()
        self.assertEqual(d.coordinator.describe("g").assignor, "range")
        with self.assertRaises(UnsupportedAssignor):
            Consumer(d, assignor="cooperative-sticky").heartbeat()


class RefusalTests(SynchronousTestCase):
    def _group(self) -> tuple[Driver, Consumer, Consumer]:
        d = Driver()
        c0, c1 = Consumer(d), Consumer(d)
        for _ in range(3):
            c0.heartbeat()
            c1.heartbeat()
        return d, c0, c1

    def test_refusals_change_nothing(self) -> None:
        """Each refused heartbeat raises its domain error and leaves the group as it was
        (epochs, members, ownership, timers)."""
        d, c0, c1 = self._group()
        m0 = c0.member_id
        cases = [
            (HeartbeatRequest("", m0, 1), InvalidGroupId),
            (HeartbeatRequest("g", m0, -3), InvalidConsumerGroupRequest),
            (HeartbeatRequest("g", m0, -2), InvalidConsumerGroupRequest),
            (HeartbeatRequest("g", "", 3), InvalidConsumerGroupRequest),
            (HeartbeatRequest("g", "new", 0, topic_names=("t",)), InvalidConsumerGroupRequest),
            (HeartbeatRequest("g", "new", 0, rebalance_timeout_ms=1),
             InvalidConsumerGroupRequest),
            (HeartbeatRequest("g", "new", 0, rebalance_timeout_ms=1, topic_names=("t",),
                              owned=((T, (1,)),)), InvalidConsumerGroupRequest),
            (HeartbeatRequest("nope", m0, 3), GroupIdNotFound),
            (HeartbeatRequest("nope", m0, -1), GroupIdNotFound),
            (HeartbeatRequest("g", "ghost", 3), UnknownMemberId),
            (HeartbeatRequest("g", "ghost", -1), UnknownMemberId),
            (HeartbeatRequest("g", m0, 99), FencedMemberEpoch),
            (HeartbeatRequest("g", m0, 1, owned=((T, (0, 1, 2, 3)),)), FencedMemberEpoch),
            (HeartbeatRequest("g", m0, 0, rebalance_timeout_ms=1, topic_names=("t",),
                              topic_regex="(a)\\1"), InvalidRegularExpression),
            (HeartbeatRequest("g", m0, 0, rebalance_timeout_ms=1, topic_names=("t",),
                              server_assignor="sticky"), UnsupportedAssignor),
            (HeartbeatRequest("g", "new", 0, rebalance_timeout_ms=1, topic_names=("t",),
                              instance_id=""), InvalidConsumerGroupRequest),
        ]
        group = d.coordinator.group("g")
        assert group is not None
        before = (copy.deepcopy(group.members), group.group_epoch, group.assignment_epoch,
                  group.owners(), dict(d.timers))
        for request, error in cases:
            with self.assertRaises(error, msg=repr(request)):
                d.heartbeat(request)
            self.assertEqual((group.members, group.group_epoch, group.assignment_epoch,
                              group.owners(), d.timers), before, repr(request))

    def test_previous_epoch_with_a_subset_is_forgiven(self) -> None:
        """A heartbeat at the member's previous epoch whose owned partitions are within its
        assignment is accepted (the answer that moved its epoch was lost)."""
        d, c0, _ = self._group()
        reply = d.heartbeat(HeartbeatRequest("g", c0.member_id, 1, owned=((T, (0, 1)),)))
        self.assertEqual(reply.member_epoch, 2)

    def test_join_from_a_held_member_id_is_a_rejoin(self) -> None:
        """Epoch 0 from a member id the group holds (the member gave everything up): no
        new group epoch, the member keeps its epoch and gets its partitions back; the
        other member is untouched (docs/groups.md, the decision)."""
        d, c0, c1 = self._group()
        group = d.coordinator.group("g")
        assert group is not None
        epoch, mine = group.group_epoch, c0.partitions()
        c0.restart()
        c0.member_id = group.members["gen1"].member_id
        reply = c0.heartbeat()
        self.assertEqual((reply.member_epoch, group.group_epoch), (epoch, epoch))
        self.assertEqual(c0.partitions(), mine)
        self.assertEqual(sorted(c0.partitions() + c1.partitions()), list(range(6)))

    def test_another_protocol_holds_the_group(self) -> None:
        """A group id live under another protocol is not found as a consumer group."""
        d = Driver()
        d.coordinator._protocol_of = lambda g: "kafka-classic"  # noqa: SLF001
        with self.assertRaises(GroupIdNotFound):
            Consumer(d).heartbeat()

    def test_group_max_size(self) -> None:
        """The member beyond ``max_size`` is refused; a current member rejoining is not."""
        d = Driver(config=ConsumerConfig(max_size=1))
        c = Consumer(d)
        c.heartbeat()
        with self.assertRaises(GroupMaxSizeReached):
            Consumer(d).heartbeat()
        rejoin = d.heartbeat(HeartbeatRequest("g", c.member_id, 0, rebalance_timeout_ms=1,
                                              topic_names=("t",), owned=()))
        self.assertEqual(rejoin.assignment, ((T, (0, 1, 2, 3, 4, 5)),))


class OffsetEpochTests(SynchronousTestCase):
    def test_commit_needs_the_current_member_epoch(self) -> None:
        """OffsetCommit: the current epoch is stored; an older one is STALE_MEMBER_EPOCH;
        an unknown member UNKNOWN_MEMBER_ID; epoch -1 only while the group is empty."""
        d = Driver()
        c0, c1 = Consumer(d), Consumer(d)
        c0.heartbeat()
        c1.heartbeat()
        coordinator = d.coordinator
        offsets = {("t", 0): CommittedOffset(5)}
        cases = [
            (c0.member_id, 1, None),
            (c1.member_id, 2, None),
            (c1.member_id, 1, StaleMemberEpoch),
            (c0.member_id, 2, StaleMemberEpoch),
            ("ghost", 2, UnknownMemberId),
            ("", -1, UnknownMemberId),
        ]
        for member_id, epoch, error in cases:
            if error is None:
                result = coordinator.commit_offsets("g", member_id, epoch, offsets)
                self.assertEqual(result.reply, {("t", 0): None})
            else:
                with self.assertRaises(error, msg=(member_id, epoch)):
                    coordinator.commit_offsets("g", member_id, epoch, offsets)
        coordinator.validate_offset_fetch("g", None, -1)
        with self.assertRaises(StaleMemberEpoch):
            coordinator.validate_offset_fetch("g", c1.member_id, 7)
        with self.assertRaises(GroupIdNotFound):
            coordinator.validate_offset_fetch("other", c1.member_id, 1)
        c0.leave()
        c1.leave()
        coordinator.commit_offsets("g", "", -1, offsets)
        self.assertEqual(coordinator.offsets.committed("g", "t", 0), CommittedOffset(5))


class AdminTests(SynchronousTestCase):
    def test_delete_and_list(self) -> None:
        """ListGroups shows type and state; an empty group can be deleted, one with
        members cannot."""
        d = Driver()
        c = Consumer(d)
        c.heartbeat()
        self.assertEqual(d.coordinator.list_groups(), [("g", "consumer", "Stable")])
        self.assertEqual(d.coordinator.live_protocol("g"), "KIP-848")
        with self.assertRaises(ConsumerGroupNotEmpty):
            d.coordinator.delete_group("g")
        c.leave()
        self.assertEqual(d.coordinator.list_groups(), [("g", "consumer", "Empty")])
        self.assertIsNone(d.coordinator.live_protocol("g"))
        self.assertTrue(d.coordinator.delete_group("g").reply)
        self.assertEqual(d.coordinator.list_groups(), [])
        with self.assertRaises(GroupIdNotFound):
            d.coordinator.describe("g")

    def test_restart_arms_fresh_timers(self) -> None:
        """``start`` after ``restore`` arms a session timer per member and a rebalance
        timer for a member still revoking."""
        d = Driver()
        c0, c1 = Consumer(d), Consumer(d)
        c0.heartbeat()
        c1.heartbeat()
        c0.heartbeat()
        group = d.coordinator.group("g")
        assert group is not None
        fresh = Driver()
        fresh.coordinator.restore([group])
        fresh.apply(fresh.coordinator.start(1000).effects)
        self.assertEqual(sorted(fresh.timers), [
            "consumer-rebalance:1:g:gen1", "consumer-session:1:g:gen1",
            "consumer-session:1:g:gen2"])
        self.assertEqual(fresh.timers["consumer-session:1:g:gen1"].deadline_ms,
                         1000 + SESSION_MS)
        self.assertEqual(group.members["gen1"].state, MemberState.UNREVOKED_PARTITIONS)
