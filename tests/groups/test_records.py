"""Tests for groups.records and groups.loader: the records of ``__skerry_groups``, the
group id -> partition hash, and rebuilding a coordinator's state from a partition's
records (latest value per key, tombstones, versions, damaged records)."""

from __future__ import annotations

import json
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from groups.classic_store import classic_groups_to_json
from groups.coordinator import GroupCoordinator
from groups.loader import GroupLog
from groups.records import (
    TOMBSTONE,
    changes,
    decode_key,
    decode_value,
    encode_value,
    group_key,
    kafka_group_key,
    offset_key,
    partition_for_group,
    state_records,
)
from groups.store import groups_to_json
from tests.groups.classic_helpers import Driver


def _partitions(topic: str) -> int:
    return {"orders": 3, "payments": 2}[topic]


def _populated() -> GroupCoordinator:
    coordinator = GroupCoordinator(_partitions)
    coordinator.join("analytics", "orders", "c2", 0, assignor="range", session_timeout_ms=4000)
    coordinator.join("analytics", "orders", "c1", 0)
    coordinator.join("billing", "payments", "b1", 0)
    coordinator.leave("billing", "payments", "b1", 1)
    coordinator.commit("analytics", "orders", "c1", 2, 1, 17, 0)
    coordinator.admin_commit("billing", "payments", 0, 5)
    coordinator.record_offset("iggy.consumer.7", "orders", 2, 9, "from kafka")
    return coordinator


def _load(records: dict[int, dict[bytes, bytes]]) -> GroupLog:
    log = GroupLog()
    for partition, latest in sorted(records.items()):
        log.apply_all(partition, ((i, k, v) for i, (k, v) in enumerate(latest.items())))
    return log


class PartitionHashTests(SynchronousTestCase):
    def test_known_values(self) -> None:
        """The hash is FNV-1a 32 of the UTF-8 group id modulo the partition count: fixed
        values, the same in every process (a randomised hash would move groups between
        coordinators on every restart)."""
        table = [
            ("analytics", 50, 45),
            ("analytics", 1, 0),
            ("", 50, 0x811C9DC5 % 50),
            ("g", 3, 0xE20C2606 % 3),
            ("g", 7, 0xE20C2606 % 7),
            ("iggy.consumer.7", 50, 0xD4A5DFE6 % 50),
            ("é", 7, 0x1E9DE8C1 % 7),  # the UTF-8 bytes c3 a9
        ]
        for group, partitions, expected in table:
            self.assertEqual(partition_for_group(group, partitions), expected, group)
            self.assertTrue(0 <= partition_for_group(group, partitions) < partitions)

    def test_spreads(self) -> None:
        """1,000 group ids spread over every one of 50 partitions, none holding more than
        three times its share."""
        counts = [0] * 50
        for i in range(1000):
            counts[partition_for_group(f"group-{i}", 50)] += 1
        self.assertTrue(all(counts))
        self.assertLess(max(counts), 60)

    def test_refuses_no_partitions(self) -> None:
        """Zero partitions is a caller's bug, refused."""
        with self.assertRaises(ValueError):
            partition_for_group("g", 0)


class KeyValueTests(SynchronousTestCase):
    def test_keys(self) -> None:
        """Each kind of key has exact, deterministic bytes with its version first, and
        decodes back to its kind and names."""
        table = [
            (group_key("g", "t"), b'[1,"group","g","t"]', ("group", "g", "t")),
            (offset_key("g", "t", 3), b'[1,"offset","g","t",3]', ("offset", "g", "t", 3)),
            (kafka_group_key("g"), b'[1,"kafka_group","g"]', ("kafka_group", "g")),
        ]
        for key, raw, decoded in table:
            self.assertEqual(key, raw)
            self.assertEqual(decode_key(key), decoded)

    def test_bad_keys(self) -> None:
        """Keys that are not JSON arrays, of another version, of an unknown kind, with
        the wrong number of parts or wrong types are refused."""
        for raw in [b"", b"{}", b"[]", b"\xff", b'[2,"group","g","t"]',
                    b'["1","group","g","t"]', b'[1,"groups","g","t"]', b'[1,"group","g"]',
                    b'[1,"offset","g","t",-1]', b'[1,"offset","g","t","0"]',
                    b'[1,"group","g",5]', b'[true,"kafka_group","g"]']:
            with self.assertRaises(ValueError, msg=raw):
                decode_key(raw)

    def test_values(self) -> None:
        """A value carries its version; the tombstone is the empty value; other versions
        and non-objects are refused."""
        self.assertEqual(encode_value({"offset": 5}), b'{"v":1,"offset":5}')
        self.assertEqual(decode_value(b'{"v":1,"offset":5}'), {"offset": 5})
        self.assertIsNone(decode_value(TOMBSTONE))
        for raw in [b'{"offset":5}', b'{"v":2,"offset":5}', b"[1]", b"nope", b'{"v":"1"}',
                    b'{"v":1,"offset":05}']:
            with self.assertRaises(ValueError, msg=raw):
                decode_value(raw)

    def test_offset_values_read_without_the_parser_read_as_json_would(self) -> None:
        """The common offset value is read by a pattern (the loader's speed); every
        value, matching or not, gives what the JSON parser gives."""
        for raw in [b'{"v":1,"offset":0}', b'{"v":1,"offset":9223372036854775807}',
                    b'{"v":1,"offset":12345678901234567890123}', b'{"v":1, "offset":3}',
                    b'{"v":1,"offset":-1}', b'{"v":1,"offset":7,"metadata":"m"}']:
            fields = json.loads(raw)
            del fields["v"]
            self.assertEqual(decode_value(raw), fields, raw)


class StateRecordsTests(SynchronousTestCase):
    def test_round_trip(self) -> None:
        """A coordinator's whole state (V1 groups with members and empty ones, offsets
        with Kafka metadata, Iggy consumer pseudo-groups, Kafka classic groups) written
        as records and loaded back is the same state, document for document."""
        coordinator = _populated()
        driver = Driver()
        driver.round(2)
        driver.join(group="h")
        classic = driver.coordinator.groups()
        records = state_records(coordinator.groups(), coordinator.committed(),
                                coordinator.committed_metadata(), classic, 50)
        loaded = _load(records).state()
        self.assertEqual(groups_to_json(loaded.groups), groups_to_json(coordinator.groups()))
        self.assertEqual(loaded.offsets, coordinator.committed())
        self.assertEqual(loaded.metadata, {("iggy.consumer.7", "orders"): {2: "from kafka"}})
        self.assertEqual(classic_groups_to_json(loaded.classic_groups),
                         classic_groups_to_json(classic))
        restored = GroupCoordinator(_partitions)
        restored.restore(loaded.groups, loaded.offsets, loaded.metadata)
        self.assertEqual(restored.offset("analytics", "orders", 1), 17)

    def test_records_go_to_their_groups_partition(self) -> None:
        """Every record of group id g, whatever its kind or topic, is in partition
        partition_for_group(g)."""
        coordinator = _populated()
        records = state_records(coordinator.groups(), coordinator.committed(),
                                coordinator.committed_metadata(), [], 50)
        for partition, latest in records.items():
            for key in latest:
                self.assertEqual(partition_for_group(decode_key(key)[1], 50), partition)
        self.assertEqual(
            set(records[partition_for_group("analytics", 50)]),
            {group_key("analytics", "orders"), offset_key("analytics", "orders", 1)})


class ChangesTests(SynchronousTestCase):
    def test_table(self) -> None:
        """changes() appends new and changed values, then a tombstone per key gone, and
        nothing for unchanged keys."""
        table: list[tuple[dict[bytes, bytes], dict[bytes, bytes], list[Any]]] = [
            ({}, {}, []),
            ({}, {b"a": b"1"}, [(b"a", b"1")]),
            ({b"a": b"1"}, {b"a": b"1"}, []),
            ({b"a": b"1"}, {b"a": b"2"}, [(b"a", b"2")]),
            ({b"a": b"1", b"b": b"1"}, {b"c": b"1"}, [(b"c", b"1"), (b"a", b""),
                                                      (b"b", b"")]),
        ]
        for previous, current, expected in table:
            self.assertEqual(changes(previous, current), expected)

    def test_replaying_changes_gives_the_latest_state(self) -> None:
        """A partition made of successive changes() loads as the latest state: a reset
        offset, a deleted group and an emptied Kafka group are gone or updated, not
        merged with what was there before."""
        coordinator = _populated()
        log = GroupLog()
        offset = 0
        previous: dict[bytes, bytes] = {}

        def write() -> None:
            nonlocal offset, previous
            current = state_records(coordinator.groups(), coordinator.committed(),
                                    coordinator.committed_metadata(), [], 1).get(0, {})
            for key, value in changes(previous, current):
                log.apply(0, offset, key, value)
                offset += 1
            previous = current

        write()
        coordinator.commit("analytics", "orders", "c1", 2, 1, 20, 0)
        coordinator.delete_group("billing", "payments")
        write()
        loaded = log.state()
        self.assertEqual(loaded.offsets[("analytics", "orders")], {1: 20})
        self.assertNotIn(("billing", "payments"), loaded.offsets)
        self.assertEqual([(g.group, g.topic) for g in loaded.groups], [("analytics", "orders")])
        self.assertEqual(log.latest, previous)


class DamagedRecordTests(SynchronousTestCase):
    def test_named_by_partition_and_offset(self) -> None:
        """A record that cannot be read is refused with its partition and offset named;
        a value that breaks the group document rules likewise, at state()."""
        log = GroupLog()
        with self.assertRaisesRegex(ValueError, r"__skerry_groups/4 offset 9: value version 9"):
            log.apply(4, 9, offset_key("g", "t", 0), b'{"v":9,"offset":1}')
        with self.assertRaisesRegex(ValueError, r"__skerry_groups/4 offset 10: key"):
            log.apply(4, 10, b"junk", b'{"v":1}')
        cases: list[tuple[bytes, dict[str, Any]]] = [
            (offset_key("g", "t", 0), {"offset": -1}),
            (offset_key("g", "t", 0), {"offset": 1, "extra": 2}),
            (offset_key("g", "t", 0), {"offset": 1, "metadata": ""}),
            (offset_key("g", "bad name", 0), {"offset": 1}),
            (group_key("g", "t"), {"generation": 1}),
            (kafka_group_key("g"), {"state": "Stable"}),
        ]
        for key, fields in cases:
            log = GroupLog()
            log.apply(2, 11, key, json.dumps({"v": 1, **fields}).encode())
            with self.assertRaisesRegex(ValueError, r"__skerry_groups/2 offset 11", msg=fields):
                log.state()
