"""Static membership (KIP-345, ``group.instance.id``) in groups.classic: a static member's
restart takes its place back without a rebalance, its old incarnation is fenced, it can
be named by instance id to leave, and its instance id survives the group file."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from groups.classic_effects import Held, JoinReply, SyncReply
from groups.classic_state import ClassicGroupState
from groups.classic_store import classic_groups_from_json, classic_groups_to_json
from groups.kafka_errors import FencedInstanceId, UnknownMemberId
from tests.groups.classic_helpers import Driver

STABLE = ClassicGroupState.STABLE


def _stable_pair(d: Driver) -> None:
    """Two static members, "a" (leader, c-1) and "b" (c-2), Stable at generation 2."""
    d.join(instance="a")
    d.sync("a-1", 1, {"a-1": b"all"})
    held = d.join(instance="b")
    d.join("a-1", instance="a")
    assert d.answer(held) == JoinReply(2, "range", "a-1", "b-2", ())
    d.sync("a-1", 2, {"a-1": b"p0", "b-2": b"p1"}, instance="a")
    d.sync("b-2", 2, instance="b")


class StaticMembershipTests(SynchronousTestCase):
    def test_the_leader_sees_instance_ids(self) -> None:
        """The leader's JoinGroup answer names each member's instance id (v5+ shows it)."""
        d = Driver()
        reply = d.join(instance="a")
        self.assertEqual(reply.instance_ids, ("a",))
        self.assertEqual(reply.member_id, "a-1")

    def test_a_restarted_follower_gets_its_assignment_back_without_a_rebalance(self) -> None:
        """Follower "b" restarts (joins with no member id): a new member id, the same
        generation and assignment, the group stays Stable; its old id is fenced."""
        d = Driver()
        _stable_pair(d)
        reply = d.join(instance="b")
        self.assertEqual(reply, JoinReply(2, "range", "a-1", "b-3", ()))
        group = d.coordinator.group("g")
        assert group is not None
        self.assertEqual((group.state, group.generation), (STABLE, 2))
        self.assertEqual(d.sync("b-3", 2, instance="b"), SyncReply(b"p1"))
        with self.assertRaises(FencedInstanceId):
            d.heartbeat("b-2", 2, instance="b")
        self.assertIsNone(d.heartbeat("b-3", 2, instance="b"))

    def test_a_restarted_leader_rebalances(self) -> None:
        """The leader restarting must assign again: a rebalance, which it leads under its
        new member id."""
        d = Driver()
        _stable_pair(d)
        held = d.join(instance="a")
        self.assertIsInstance(held, Held)
        d.join("b-2", instance="b")
        reply = d.answer(held)
        self.assertEqual((reply.generation, reply.leader, reply.member_id), (3, "a-3", "a-3"))

    def test_a_member_id_that_does_not_hold_the_instance_is_fenced(self) -> None:
        d = Driver()
        _stable_pair(d)
        with self.assertRaises(FencedInstanceId):
            d.join("a-1", instance="b")
        with self.assertRaises(FencedInstanceId):
            d.sync("a-1", 2, instance="b")

    def test_leave_by_instance_id(self) -> None:
        """LeaveGroup v3+ may name a static member by instance id alone (what
        kafka-consumer-groups and the admin client do); an unknown instance is refused."""
        d = Driver()
        _stable_pair(d)
        d.leave("", instance="b")
        group = d.coordinator.group("g")
        assert group is not None
        self.assertEqual(list(group.members), ["a-1"])
        with self.assertRaises(UnknownMemberId):
            d.leave("", instance="zz")

    def test_instance_ids_survive_the_group_file(self) -> None:
        """``kafka-groups.json`` keeps a member's instance id (and omits it for dynamic
        members, so older files still load)."""
        d = Driver()
        _stable_pair(d)
        doc = classic_groups_to_json(d.coordinator.groups())
        (group,) = classic_groups_from_json(doc)
        self.assertEqual([m.group_instance_id for m in group.members.values()], ["a", "b"])
        d2 = Driver()
        d2.join()
        doc2 = classic_groups_to_json(d2.coordinator.groups())
        self.assertNotIn("group_instance_id", doc2["groups"][0]["members"][0])
