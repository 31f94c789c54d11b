"""Tests for groups.consumer_records: a consumer group written as records and read back is
the same group (epochs, members, owned and revoking partitions, target, static ids), the
bytes are deterministic, and damaged records are refused with the key named."""

from __future__ import annotations

import json

from twisted.trial.unittest import SynchronousTestCase

from groups.consumer_coordinator import ConsumerGroupCoordinator
from groups.consumer_group import ConsumerGroup
from groups.consumer_records import (
    consumer_group_key,
    consumer_group_records,
    consumer_groups_from_records,
    consumer_member_key,
    consumer_state_records,
    consumer_target_key,
    decode_consumer_key,
)
from tests.groups.consumer_helpers import Consumer, Driver


def _snapshot(group: ConsumerGroup) -> tuple[object, ...]:
    return (group.group_id, group.group_epoch, group.assignment_epoch, group.assignor,
            group.topics, group.target, group.static, group.state, group.owners(),
            {m: (x.instance_id, x.topic_names, x.topic_regex, x.member_epoch,
                 x.previous_member_epoch, x.state, x.assigned, x.revoking,
                 x.rebalance_timeout_ms, x.client_id)
             for m, x in group.members.items()})


def _mid_handover() -> tuple[Driver, ConsumerGroup]:
    """A group caught mid-reconciliation: one member revoking, a static one, a regex."""
    d = Driver({"t": 6, "u": 2})
    c0 = Consumer(d, instance_id="a")
    c1 = Consumer(d, topics=None, regex="t|u")
    c0.heartbeat()
    c1.heartbeat()
    c0.heartbeat()
    group = d.coordinator.group("g")
    assert group is not None
    return d, group


class RoundTripTests(SynchronousTestCase):
    def test_a_group_survives_records(self) -> None:
        """Records of a group in the middle of a hand-over rebuild exactly that group, and
        a coordinator restored from them carries on the reconciliation."""
        d, group = _mid_handover()
        records = consumer_group_records(group)
        self.assertEqual(sorted(decode_consumer_key(k)[0] for k in records),
                         ["consumer_group", "consumer_member", "consumer_member",
                          "consumer_target", "consumer_target"])
        [loaded] = consumer_groups_from_records(records)
        self.assertEqual(_snapshot(loaded), _snapshot(group))
        self.assertEqual(consumer_group_records(loaded), records)
        fresh = ConsumerGroupCoordinator(topics=lambda: d.meta)
        fresh.restore([loaded])
        self.assertEqual(fresh.describe("g"), d.coordinator.describe("g"))

    def test_key_and_value_shape(self) -> None:
        """Keys are versioned JSON arrays without spaces; values carry "v": 1."""
        _, group = _mid_handover()
        records = consumer_group_records(group)
        self.assertIn(b'[1,"consumer_group","g"]', records)
        self.assertEqual(consumer_member_key("g", "m"), b'[1,"consumer_member","g","m"]')
        head = json.loads(records[consumer_group_key("g")])
        self.assertEqual((head["v"], head["epoch"], head["assignment_epoch"]), (1, 2, 2))
        member = json.loads(records[consumer_member_key("g", "gen1")])
        self.assertEqual((member["state"], member["instance_id"]),
                         ("UNREVOKED_PARTITIONS", "a"))


class PartitionTests(SynchronousTestCase):
    def test_records_go_to_the_group_ids_partition(self) -> None:
        """All records of group g sit on fnv1a_32(g) % partitions, beside V1's and Kafka
        classic groups' records of the same id (``analytics`` -> 45 of 50)."""
        _, group = _mid_handover()
        group.group_id = "analytics"
        by_partition = consumer_state_records([group], 50)
        self.assertEqual(list(by_partition), [45])
        self.assertEqual(by_partition[45], consumer_group_records(group))
        with self.assertRaises(ValueError):
            consumer_state_records([group], 0)


class DamageTests(SynchronousTestCase):
    def test_damaged_records_are_refused(self) -> None:
        """Each defect is a ValueError that says what is wrong."""
        _, group = _mid_handover()
        good = consumer_group_records(group)
        head = consumer_group_key("g")
        member = consumer_member_key("g", "gen1")

        def edit(key: bytes, **changes: object) -> dict[bytes, bytes]:
            fields = json.loads(good[key])
            fields.update(changes)
            return {**good, key: json.dumps(fields).encode()}

        cases = [
            ({**good, b'[2,"consumer_group","g"]': b"{}"}, "key version"),
            ({**good, b'[1,"group","g","t"]': b"{}"}, "not a consumer-group key"),
            ({**good, head: b"nope"}, "not a JSON object"),
            (edit(head, v=2), "value version"),
            (edit(head, assignment_epoch=9), "assignment epoch"),
            (edit(member, state="LOST"), "unknown member state"),
            (edit(member, epoch="x"), "epoch must be an integer"),
            (edit(member, assigned=[{"id": "zz", "partitions": [0]}]), "not a topic id"),
            ({k: v for k, v in good.items() if k != head}, "without the group's record"),
            ({**good, consumer_target_key("g", "ghost"): b'{"v":1,"partitions":[]}'},
             "target of unknown members"),
        ]
        for records, message in cases:
            with self.assertRaises(ValueError, msg=message) as caught:
                consumer_groups_from_records(records)
            self.assertIn(message, str(caught.exception))

    def test_two_owners_in_records_are_refused(self) -> None:
        """Records in which two members own one partition do not load."""
        _, group = _mid_handover()
        good = consumer_group_records(group)
        key = consumer_member_key("g", "gen2")
        first = json.loads(good[consumer_member_key("g", "gen1")])
        fields = json.loads(good[key])
        fields["assigned"] = first["assigned"]
        with self.assertRaises(ValueError) as caught:
            consumer_groups_from_records({**good, key: json.dumps(fields).encode()})
        self.assertIn("is held by", str(caught.exception))


class GroupLogTests(SynchronousTestCase):
    """``groups.loader.GroupLog`` reads consumer-group records beside the classic ones."""

    def test_the_loader_rebuilds_consumer_groups_beside_offsets(self) -> None:
        """A partition holding a consumer group's records and an offset loads both; a later
        tombstone of a member (it left) removes it from the loaded group."""
        from groups.loader import GroupLog
        from groups.records import TOMBSTONE, encode_value, offset_key

        _, group = _mid_handover()
        log = GroupLog()
        records = sorted(consumer_group_records(group).items())
        records.append((offset_key("g", "t", 0), encode_value({"offset": 7})))
        log.apply_all(3, [(i, k, v) for i, (k, v) in enumerate(records)])
        loaded = log.state()
        self.assertEqual([_snapshot(g) for g in loaded.consumer_groups], [_snapshot(group)])
        self.assertEqual(loaded.offsets, {("g", "t"): {0: 7}})

        leaver = sorted(group.members)[0]
        log.apply(3, 100, consumer_member_key("g", leaver), TOMBSTONE)
        log.apply(3, 101, consumer_target_key("g", leaver), TOMBSTONE)
        [reloaded] = log.state().consumer_groups
        self.assertEqual(sorted(reloaded.members), sorted(group.members)[1:])

    def test_a_damaged_consumer_record_names_its_partition(self) -> None:
        """A member record whose group record is missing refuses the load, naming the
        partition and the group (state the broker cannot read is never dropped)."""
        from groups.loader import GroupLog

        _, group = _mid_handover()
        log = GroupLog()
        for i, (k, v) in enumerate(sorted(consumer_group_records(group).items())):
            if k != consumer_group_key("g"):
                log.apply(5, i, k, v)
        with self.assertRaises(ValueError) as caught:
            log.state()
        self.assertIn("__skerry_groups/5", str(caught.exception))
        self.assertIn("consumer group g", str(caught.exception))
