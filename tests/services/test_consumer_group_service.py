"""Tests for broker.services.consumer_groups: the shell arms and replaces timers on the
injected clock (session expiry fences a silent member, a revocation not confirmed within
the rebalance timeout fences its member, a re-armed timer's old firing changes nothing),
refuses after close, and guards group ids against V1 groups both ways."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from twisted.internet.defer import maybeDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from broker.errors import InvalidGroupRequest
from broker.services.consumer_groups import ConsumerGroupService, topic_id_for
from broker.services.groups import GroupService
from groups.consumer_coordinator import ConsumerConfig
from groups.consumer_effects import HeartbeatRequest
from groups.consumer_errors import GroupIdInUseByOtherProtocol
from groups.coordinator import GroupCoordinator

T = topic_id_for("t")


class ServiceTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1000)
        # Not trial's mktemp(): under pytest it creates its folders in the working
        # directory (the checkout) and leaves them there.
        data = Path(tempfile.mkdtemp(prefix="skerry-consumer-groups-"))
        self.addCleanup(shutil.rmtree, data, True)
        self.groups = GroupService(GroupCoordinator(lambda t: 4), self.clock, str(data),
                                   hw_for=lambda t, p: -1, earliest_for=lambda t, p: 0,
                                   run_in_thread=maybeDeferred)
        self.counts = {"t": 4}
        self.service = ConsumerGroupService(
            self.groups, self.clock, lambda: self.counts,
            config=ConsumerConfig(session_timeout_ms=3000, heartbeat_interval_ms=1000))

    def _join(self, member: str, timeout: int = 10_000):  # type: ignore[no-untyped-def]
        return self.service.heartbeat(HeartbeatRequest(
            "g", member, 0, rebalance_timeout_ms=timeout, topic_names=("t",), owned=()))

    def test_silent_member_is_fenced_at_its_session_timeout(self) -> None:
        """A member that stops heartbeating is gone 3 s (the session timeout) after its
        last heartbeat, not before; the other member's heartbeats keep it."""
        epoch = self._join("a").member_epoch
        self._join("b")
        for _ in range(2):
            self.clock.advance(1.0)
            owned = ((T, tuple(p for _, p in self.service.assignment_of("g", "a")[0])),)
            epoch = self.service.heartbeat(HeartbeatRequest("g", "a", epoch,
                                                            owned=owned)).member_epoch
        self.assertEqual(epoch, 2)
        self.clock.advance(0.9)
        group = self.service.coordinator.group("g")
        assert group is not None
        self.assertEqual(sorted(group.members), ["a", "b"])
        self.clock.advance(0.2)
        self.assertEqual(sorted(group.members), ["a"])
        self.assertEqual(group.group_epoch, 3)

    def test_unconfirmed_revocation_is_fenced_at_the_rebalance_timeout(self) -> None:
        """A member asked to revoke that keeps heartbeating without confirming is fenced
        at its rebalance timeout; the joiner then gets every partition."""
        self._join("a", timeout=2000)
        self._join("b")
        self.service.heartbeat(HeartbeatRequest("g", "a", 1))  # asked to revoke
        for _ in range(2):
            self.service.heartbeat(HeartbeatRequest("g", "a", 1))
            self.service.heartbeat(HeartbeatRequest("g", "b", 2))
            self.clock.advance(1.0)
        group = self.service.coordinator.group("g")
        assert group is not None
        self.assertEqual(sorted(group.members), ["b"])
        reply = self.service.heartbeat(HeartbeatRequest("g", "b", 2))
        self.assertEqual(self.service.assignment_of("g", "b")[0],
                         [("t", 0), ("t", 1), ("t", 2), ("t", 3)])
        self.assertEqual(reply.member_epoch, 3)

    def test_rearmed_session_timer_replaces_the_old_one(self) -> None:
        """Each heartbeat replaces the member's one session timer (one pending call)."""
        self._join("a")
        for _ in range(5):
            self.clock.advance(1.0)
            self.service.heartbeat(HeartbeatRequest("g", "a", 1))
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)

    def test_close_refuses_and_cancels(self) -> None:
        """After close: no timer left, and a heartbeat is UNAVAILABLE."""
        from broker.errors import Unavailable

        self._join("a")
        self.service.close()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        with self.assertRaises(Unavailable):
            self._join("b")

    def test_group_ids_are_guarded_both_ways(self) -> None:
        """A V1 JOIN into a live consumer group is refused; a consumer-group join into a
        group with live V1 members is refused too."""
        self._join("a")
        with self.assertRaises(InvalidGroupRequest):
            self.groups.join("g", "t", "c1")
        self.groups.join("v1group", "t", "c1")
        with self.assertRaises(GroupIdInUseByOtherProtocol):
            self.service.heartbeat(HeartbeatRequest(
                "v1group", "m", 0, rebalance_timeout_ms=1, topic_names=("t",)))

    def test_topics_carry_stand_in_ids(self) -> None:
        """Topic metadata: the store's partition counts with uuid5 ids by name."""
        self.counts["u"] = 2
        topics = self.service.topics()
        self.assertEqual((topics["t"].topic_id, topics["t"].partitions), (T, 4))
        self.assertEqual(topics["u"].topic_id, topic_id_for("u"))
        self.assertNotEqual(topic_id_for("u"), T)

    def test_a_partition_being_revoked_can_still_be_committed(self) -> None:
        """Between the answer that takes a partition away and the heartbeat that confirms,
        its member may commit it (what it consumed before giving it up); afterwards not,
        and a partition it never held never."""
        from groups.errors import PartitionNotOwned

        self._join("a")
        self._join("b")
        self.service.heartbeat(HeartbeatRequest("g", "a", 1))  # asked to revoke 2, 3
        self.service.commit("g", "a", 1, "t", 3, 5)
        self.assertEqual(self.groups.committed_offset("g", "t", 3)[0], 5)
        self.service.heartbeat(HeartbeatRequest("g", "a", 1, owned=((T, (0, 1)),)))
        with self.assertRaises(PartitionNotOwned):
            self.service.commit("g", "a", 2, "t", 3, 6)
        with self.assertRaises(PartitionNotOwned):
            self.service.commit("g", "b", 2, "t", 0, 6)
