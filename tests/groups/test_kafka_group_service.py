"""Tests for broker/services/kafka_groups.py, the Twisted shell of the Kafka classic group
coordinator: held JoinGroup/SyncGroup as Deferreds, session and join timers on a
task.Clock, kafka-groups.json recovered at start, offsets shared with V1 groups (V1
OFFSET and DESCRIBE_GROUP see Kafka commits) and the cross-protocol refusals."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.defer import maybeDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from broker.errors import InvalidGroupRequest, Unavailable
from broker.services.groups import GroupService
from broker.services.kafka_groups import KafkaGroupService
from broker.v1.errors import code_for
from groups.classic_effects import CommittedOffset, JoinReply, SyncReply
from groups.coordinator import GroupCoordinator
from groups.kafka_errors import (
    GroupInUseByOtherProtocol,
    IllegalGeneration,
    RebalanceInProgress,
    UnknownMemberId,
)
from tests.groups.classic_helpers import RANGE, Counter


class _KafkaServiceTestCase(SynchronousTestCase):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path: Path) -> None:
        self.data_dir = str(tmp_path / "data")

    def setUp(self) -> None:
        self.clock = Clock()
        self.counts = {"t1": 3}
        self.hw = {0: 9, 1: -1, 2: 2}
        self.started: list[KafkaGroupService] = []

    def start(self) -> tuple[GroupService, KafkaGroupService]:
        """A V1 group service and a Kafka one over the same data directory (a broker
        start); the previous ones are closed first."""
        for old in self.started:
            old.close()
        coordinator = GroupCoordinator(lambda t: self.counts.get(t, 0))
        groups = GroupService(coordinator, self.clock, self.data_dir,
                              hw_for=lambda t, p: self.hw[p], earliest_for=lambda t, p: 0,
                              run_in_thread=maybeDeferred)
        kafka = KafkaGroupService(groups, self.clock, self.data_dir,
                                  run_in_thread=maybeDeferred, new_member_suffix=Counter())
        self.started.append(kafka)
        return groups, kafka

    def join(self, kafka: KafkaGroupService, member_id: str = "", *, group: str = "g",
             session: int = 6000, rebalance: int | None = 10_000) -> Any:
        return kafka.join(group, member_id, client_id="c", client_host="/127.0.0.1",
                          session_timeout_ms=session, rebalance_timeout_ms=rebalance,
                          protocol_type="consumer", protocols=RANGE)

    def stable_pair(self, kafka: KafkaGroupService) -> tuple[str, str, int]:
        """Two members joined and synced; their ids and the generation."""
        first = self.done(self.join(kafka))
        self.assertEqual(first.generation, 1)
        self.done(kafka.sync("g", 1, first.member_id, {first.member_id: b"a"}))
        second_d = self.join(kafka)
        rejoin_d = self.join(kafka, first.member_id)
        second, rejoin = self.done(second_d), self.done(rejoin_d)
        self.assertEqual((second.generation, rejoin.generation), (2, 2))
        follower_sync = kafka.sync("g", 2, second.member_id)
        self.assertNoResult(follower_sync)
        leader_sync = kafka.sync("g", 2, first.member_id,
                                 {first.member_id: b"A", second.member_id: b"B"})
        self.assertEqual(self.done(leader_sync), SyncReply(b"A"))
        self.assertEqual(self.done(follower_sync), SyncReply(b"B"))
        return first.member_id, second.member_id, 2

    def done(self, d: Any) -> Any:
        """The result of ``d`` once the writes of this reactor turn have run."""
        self.clock.advance(0)
        return self.successResultOf(d)

    def on_disk(self, name: str) -> Any:
        with open(os.path.join(self.data_dir, name)) as handle:
            return json.load(handle)


class BarrierTests(_KafkaServiceTestCase):
    def test_join_is_held_until_every_member_rejoins(self) -> None:
        """A new member's JoinGroup waits (no answer on the wire) until the current member
        rejoins; then both answers come together, only the leader's with the member list."""
        _, kafka = self.start()
        leader, _follower, _ = self.stable_pair(kafka)
        newcomer = self.join(kafka)
        self.assertNoResult(newcomer)
        self.assertIsInstance(kafka.heartbeat("g", 2, leader), RebalanceInProgress)
        self.assertNoResult(newcomer)

    def test_rebalance_timeout_drops_members_that_did_not_rejoin(self) -> None:
        """A member that never rejoins is dropped when the barrier's rebalance timeout
        fires on the clock; the held join is then answered with the next generation."""
        _, kafka = self.start()
        leader, follower, _ = self.stable_pair(kafka)
        # Both heartbeat to keep their sessions; only the leader rejoins.
        newcomer = self.join(kafka)
        rejoin = self.join(kafka, leader)
        for _ in range(4):
            self.clock.advance(2.4)
            kafka.heartbeat("g", 2, follower)
        self.assertNoResult(rejoin)
        self.clock.advance(0.5)  # 10.1 s: past the 10 s rebalance timeout
        reply = self.done(rejoin)
        self.assertIsInstance(reply, JoinReply)
        self.assertEqual(reply.generation, 3)
        self.assertEqual(sorted(m for m, _ in reply.members),
                         sorted([leader, self.done(newcomer).member_id]))
        self.assertNotIn(follower, kafka.coordinator.group("g").members)

    def test_session_timeout_removes_a_silent_member_on_the_clock(self) -> None:
        """A member that stops heartbeating is removed one session timeout (6 s) after its
        last request, and the survivor's next heartbeat answers REBALANCE_IN_PROGRESS."""
        _, kafka = self.start()
        leader, follower, _ = self.stable_pair(kafka)
        for _ in range(2):
            self.clock.advance(2.9)
            self.assertIsNone(kafka.heartbeat("g", 2, leader))
        self.assertIn(follower, kafka.coordinator.group("g").members)
        self.clock.advance(0.3)  # 6.1 s since the follower's last request
        self.assertNotIn(follower, kafka.coordinator.group("g").members)
        self.assertIsInstance(kafka.heartbeat("g", 2, leader), RebalanceInProgress)

    def test_rescheduling_replaces_the_session_timer(self) -> None:
        """Heartbeats re-arm one timer per member (the key replaces), so the clock never
        holds more than one session timer per member."""
        _, kafka = self.start()
        leader, follower, _ = self.stable_pair(kafka)
        for _ in range(20):
            self.clock.advance(1)
            kafka.heartbeat("g", 2, leader)
            kafka.heartbeat("g", 2, follower)
        keys = [c.args[0].key for c in self.clock.getDelayedCalls() if c.active()]
        self.assertEqual(len(keys), 2)
        self.assertEqual(len(set(keys)), 2)

    def test_stale_generation_is_refused_without_change(self) -> None:
        """A heartbeat or sync with an old generation is refused ILLEGAL_GENERATION; an
        unknown member UNKNOWN_MEMBER_ID."""
        _, kafka = self.start()
        leader, _, _ = self.stable_pair(kafka)
        self.assertRaises(IllegalGeneration, kafka.heartbeat, "g", 1, leader)
        self.assertRaises(UnknownMemberId, kafka.heartbeat, "g", 2, "nobody")

    def test_close_fails_held_requests_and_refuses_new_ones(self) -> None:
        """At shutdown a held JoinGroup fails with Unavailable (the transport's
        COORDINATOR_NOT_AVAILABLE) and later requests are refused the same way."""
        _, kafka = self.start()
        self.stable_pair(kafka)
        held = self.join(kafka)
        kafka.close()
        self.failureResultOf(held, Unavailable)
        self.assertRaises(Unavailable, self.join, kafka)
        self.assertEqual(self.clock.getDelayedCalls(), [])


class PersistenceTests(_KafkaServiceTestCase):
    def test_generation_survives_a_restart_and_members_rejoin(self) -> None:
        """kafka-groups.json holds the generation and members; after a restart the group
        is recovered, never reuses a generation, and its members get a full session."""
        _, kafka = self.start()
        leader, follower, generation = self.stable_pair(kafka)
        self.clock.advance(0)
        doc = self.on_disk("kafka-groups.json")
        self.assertEqual(doc["groups"][0]["generation"], generation)
        _, again = self.start()
        group = again.coordinator.group("g")
        self.assertEqual(group.generation, generation)
        self.assertEqual(sorted(group.members), sorted([leader, follower]))
        self.assertIsNone(again.heartbeat("g", generation, leader))
        newcomer = self.join(again)
        self.assertNoResult(newcomer)
        self.join(again, leader)
        self.join(again, follower)
        self.assertEqual(self.done(newcomer).generation, generation + 1)


class SharedOffsetTests(_KafkaServiceTestCase):
    def test_kafka_commit_shows_in_v1_offset_and_describe_lag(self) -> None:
        """A Kafka simple commit of 7 on t1/0 is V1 OFFSET g t1 0 = 7 and DESCRIBE_GROUP
        lag hw + 1 - 7; the metadata is kept in offsets.json and survives a restart."""
        groups, kafka = self.start()
        d = kafka.commit_offsets("g", -1, "", {("t1", 0): CommittedOffset(7, "md-x")})
        self.clock.advance(0)
        self.assertEqual(self.done(d), {("t1", 0): None})
        self.assertEqual(groups.offset("g", "t1", 0), 7)
        described = groups.describe("g", "t1")
        self.assertEqual(described.committed, (7, 0, 0))
        self.assertEqual(described.lag[0], 9 + 1 - 7)
        self.assertIn(("g", "t1"), groups.list_groups())
        doc = self.on_disk("offsets.json")
        self.assertEqual(doc["version"], 2)
        self.assertEqual(doc["offsets"][0]["metadata"], {"0": "md-x"})
        _, again = self.start()
        self.assertEqual(again.fetch_offsets("g", [("t1", 0), ("t1", 1)]),
                         {("t1", 0): CommittedOffset(7, "md-x"), ("t1", 1): None})

    def test_v1_commit_is_read_by_offset_fetch(self) -> None:
        """An offset stored over V1 (ADMIN_COMMIT) is what Kafka's OffsetFetch answers,
        with empty metadata; nothing committed stays None (the wire's -1), not 0."""
        groups, kafka = self.start()
        groups.admin_commit("g", "t1", 2, 3)
        self.assertEqual(kafka.fetch_offsets("g", [("t1", 2), ("t1", 0)]),
                         {("t1", 2): CommittedOffset(3, ""), ("t1", 0): None})

    def test_member_commit_waits_for_offsets_json(self) -> None:
        """A group member's commit answers only once offsets.json holds it."""
        groups, kafka = self.start()
        leader, _, generation = self.stable_pair(kafka)
        self.clock.advance(0)
        d = kafka.commit_offsets("g", generation, leader, {("t1", 1): CommittedOffset(0)})
        self.assertEqual(self.done(d), {("t1", 1): None})
        self.assertEqual(self.on_disk("offsets.json")["offsets"][0]["committed"], {"1": 0})


class CrossProtocolTests(_KafkaServiceTestCase):
    def test_v1_join_refused_while_kafka_members_live(self) -> None:
        """V1 JOIN into a group id with live Kafka members is BAD_REQUEST with a message
        that names Kafka; once the Kafka members left, V1 may join."""
        groups, kafka = self.start()
        member = self.done(self.join(kafka)).member_id
        with self.assertRaises(InvalidGroupRequest) as caught:
            groups.join("g", "t1", "v1-member")
        self.assertEqual(code_for(caught.exception), "BAD_REQUEST")
        self.assertIn("kafka", str(caught.exception))
        self.assertRaises(InvalidGroupRequest, groups.admin_commit, "g", "t1", 0, 1)
        self.done(kafka.leave("g", member))
        self.done(groups.join("g", "t1", "v1-member"))

    def test_kafka_join_refused_while_v1_members_live(self) -> None:
        """JoinGroup into a group id with live V1 members on any topic is refused
        (INCONSISTENT_GROUP_PROTOCOL); so is a simple commit (UNKNOWN_MEMBER_ID)."""
        groups, kafka = self.start()
        self.done(groups.join("g", "other-topic", "v1-member"))
        self.assertRaises(GroupInUseByOtherProtocol, self.join, kafka)
        self.assertRaises(UnknownMemberId, kafka.commit_offsets, "g", -1, "",
                          {("t1", 0): CommittedOffset(1)})
        self.assertIsNone(kafka.coordinator.group("g"))
