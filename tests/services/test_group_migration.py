"""Old group files (from before ``__skerry_groups``): the pure rules of a cluster member's
import (``split_by_partition``, ``with_missing``: what the topic holds wins), and a single
broker without etcd, as a real process, opening a data directory in the old layout with
its V1 group, its offsets and an Iggy consumer's stored offset exactly as before."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from broker.iggy import codec
from broker.iggy.codec import Consumer, ConsumerKind, Identifier
from broker.services.group_log import split_by_partition, with_missing
from data.store import Store, TopicConfig
from groups.group import Group
from groups.loader import LoadedState
from tests.iggy.harness import RawClient, iggy_port_of
from tests.support import BrokerProcess


class ImportRuleTests(SynchronousTestCase):
    def test_split_by_partition_keeps_each_group_whole(self) -> None:
        """Each group's membership and offsets go to the partition of its group id."""
        state = LoadedState(groups=[Group("a", "t"), Group("b", "t")],
                            offsets={("a", "t"): {0: 3}, ("b", "u"): {1: 4}},
                            metadata={("a", "t"): {0: "m"}})
        parts = split_by_partition(state, lambda group: 0 if group == "a" else 5)
        self.assertEqual(sorted(parts), [0, 5])
        self.assertEqual([g.group for g in parts[0].groups], ["a"])
        self.assertEqual(parts[0].offsets, {("a", "t"): {0: 3}})
        self.assertEqual(parts[0].metadata, {("a", "t"): {0: "m"}})
        self.assertEqual(parts[5].offsets, {("b", "u"): {1: 4}})

    def test_the_topics_values_win(self) -> None:
        """An old file adds the groups and partition offsets the topic lacks; where both
        hold one, the topic's (newer) value stays."""
        topic = LoadedState(groups=[Group("a", "t", generation=7)],
                            offsets={("a", "t"): {0: 10}})
        old = LoadedState(groups=[Group("a", "t", generation=2), Group("b", "t")],
                          offsets={("a", "t"): {0: 3, 1: 4}, ("b", "t"): {0: 1}},
                          metadata={("a", "t"): {0: "old", 1: "kept"}})
        merged = with_missing(topic, old)
        self.assertEqual(sorted((g.group, g.generation) for g in merged.groups),
                         [("a", 7), ("b", 0)])
        self.assertEqual(merged.offsets, {("a", "t"): {0: 10, 1: 4}, ("b", "t"): {0: 1}})
        self.assertEqual(merged.metadata, {("a", "t"): {1: "kept"}})
        self.assertEqual(topic.offsets, {("a", "t"): {0: 10}})  # the input is not changed


def test_single_broker_opens_an_old_data_directory(tmp_path: Path) -> None:
    """``skerry serve`` without a cluster on a data directory in the old layout (a topic,
    ``groups.json`` and ``offsets.json``): OFFSET, SYNC and Iggy's GetConsumerOffset
    answer what the files held; the files become ``*.migrated`` and a restart answers
    the same from the topic."""
    data = tmp_path / "b" / "skerry-data"
    store = Store(str(data))
    store.create_topic("t", TopicConfig(partitions=2))
    store.close()
    (data / "groups.json").write_text(json.dumps({"version": 1, "groups": [
        {"group": "old", "topic": "t", "generation": 2, "assignor": "range", "partitions": 2,
         "members": [{"member_id": "c1", "session_timeout_ms": 60000,
                      "assigned": [0, 1]}]}]}))
    (data / "offsets.json").write_text(json.dumps({"version": 2, "offsets": [
        {"group": "old", "topic": "t", "committed": {"0": 1, "1": 1}},
        {"group": "iggy.consumer.7", "topic": "t", "committed": {"1": 1}}]}))
    proc = BrokerProcess(tmp_path / "b", {"iggy_port": 0})
    try:
        for round_ in (1, 2):
            proc.start()
            client = proc.client()
            for p in range(2):  # room for the offsets below
                assert "|OK|" in client.request(f"V1|p|PRODUCE|t k:v partition={p}")
            if round_ == 1:
                assert client.request("V1|c|ADMIN_COMMIT|iggy.consumer.7 t 1 1") \
                    .startswith("V1|c|ERR|BAD_REQUEST")  # reserved over V1, as before
            assert client.request("V1|1|OFFSET|old t 1") == "V1|1|OK|offset=1"
            assert client.request("V1|2|SYNC|old t c1 2") == \
                "V1|2|OK|generation=2 assigned=[0 1]"
            last_start = proc.log_text().rsplit("skerry listening on", 1)[1]
            iggy = RawClient(iggy_port_of("skerry listening on" + last_start))
            iggy.login()
            consumer = Consumer(ConsumerKind.CONSUMER, Identifier(7))
            reply = iggy.call(codec.GetConsumerOffset(consumer, Identifier("default"),
                                                      Identifier("t"), 1))
            # Iggy's stored offset is the last one consumed: V1's next-to-read minus one.
            assert struct.unpack_from("<IQQ", reply, 8)[::2] == (1, 0), reply
            iggy.close()
            client.close()
            proc.stop()
            assert sorted(p.name for p in data.glob("*.json*")
                          if "groups" in p.name or "offsets" in p.name) == [
                "groups.json.migrated", "offsets.json.migrated"]
    finally:
        proc.__exit__(None, None, None)
