"""The store: topics on disk (create, delete, grow), the clean-shutdown marker, and what
recovery does with damaged or half-finished files."""

from __future__ import annotations

import errno
import json
import logging
import os

import pytest

from data import paths
from data.store import StorageConfig, Store, TopicConfig
from tests.data.support import (
    FakeClock,
    append_bytes,
    partition_path,
    segment_logs,
    stop_uncleanly,
    truncate_file,
)
from tests.fakes.fs import FaultyFileLayer

SMALL = StorageConfig(segment_bytes=1024)


def _fill(store: Store, topic: str, n: int, partition: int = 0) -> bytes:
    plog = store.partition(topic, partition)
    for i in range(n):
        plog.append([f"{topic}-{i}".encode() * 5])
    return plog.read(0, max_messages=10_000).raw


class TopicTests:

    def test_create_reopen_and_config(self, tmp_path):
        """A created topic, its config and its partitions' data are all there after reopen."""
        root = str(tmp_path)
        store = Store(root, SMALL)
        cfg = TopicConfig(partitions=3, replication_factor=3, min_insync_replicas=2, retention_ms=60_000)
        store.create_topic("orders", cfg)
        raw = _fill(store, "orders", 20, partition=1)
        store.close()
        with open(os.path.join(root, "topics", "orders", "topic.json")) as f:
            assert json.load(f)["min_insync_replicas"] == 2
        reopened = Store(root, SMALL)
        try:
            assert set(reopened.topics) == {"orders"}
            assert reopened.topic("orders").config == cfg
            assert len(reopened.topic("orders").partitions) == 3
            assert reopened.partition("orders", 1).read(0, max_messages=100).raw == raw
            assert reopened.partition("orders", 0).next_offset == 0
        finally:
            reopened.close()

    def test_create_refuses_bad_input(self, tmp_path):
        """Existing topics, invalid names and inconsistent configs are ValueError."""
        store = Store(str(tmp_path))
        store.create_topic("a", TopicConfig(partitions=1))
        for name, cfg in [
            ("a", TopicConfig(partitions=1)),
            ("..", TopicConfig(partitions=1)),
            ("bad/name", TopicConfig(partitions=1)),
            ("~x", TopicConfig(partitions=1)),
            ("b", TopicConfig(partitions=0)),
            ("b", TopicConfig(partitions=1, replication_factor=1, min_insync_replicas=2)),
            ("b", TopicConfig(partitions=1, retention_bytes=-1)),
        ]:
            with pytest.raises(ValueError):
                store.create_topic(name, cfg)
        assert set(store.topics) == {"a"}
        store.close()

    def test_lookup_errors_and_read_only_view(self, tmp_path):
        """partition() raises KeyError/IndexError; topic() returns None; topics is read-only."""
        store = Store(str(tmp_path))
        store.create_topic("a", TopicConfig(partitions=2))
        with pytest.raises(KeyError):
            store.partition("missing", 0)
        with pytest.raises(IndexError):
            store.partition("a", 2)
        with pytest.raises(IndexError):
            store.partition("a", -1)
        assert store.topic("missing") is None
        with pytest.raises(TypeError):
            store.topics["x"] = None  # type: ignore[index]
        store.close()

    def test_delete_topic(self, tmp_path):
        """A deleted topic is gone from memory and disk; it can be created again, empty."""
        root = str(tmp_path)
        store = Store(root, SMALL)
        store.create_topic("gone", TopicConfig(partitions=2))
        _fill(store, "gone", 30)
        store.delete_topic("gone")
        assert store.topic("gone") is None
        assert not os.path.exists(paths.topic_dir(root, "gone"))
        with pytest.raises(KeyError):
            store.delete_topic("gone")
        assert store.create_topic("gone", TopicConfig(partitions=1)).partitions[0].next_offset == 0
        store.close()

    def test_add_partitions(self, tmp_path):
        """add_partitions grows a topic to the new total, durably; shrinking is ValueError."""
        root = str(tmp_path)
        store = Store(root)
        store.create_topic("t", TopicConfig(partitions=2))
        store.partition("t", 0).append([b"keep"])
        topic = store.add_partitions("t", 5)
        assert len(topic.partitions) == 5 and topic.config.partitions == 5
        assert topic.partitions[4].append([b"new"]) == 0
        with pytest.raises(ValueError):
            store.add_partitions("t", 5)
        with pytest.raises(KeyError):
            store.add_partitions("nope", 9)
        store.close()
        reopened = Store(root)
        try:
            assert len(reopened.topic("t").partitions) == 5
            assert reopened.partition("t", 4).read(0).records[0].payload == b"new"
            assert reopened.partition("t", 0).read(0).records[0].payload == b"keep"
        finally:
            reopened.close()


    def test_message_timestamp_type_is_kept_and_alterable(self, tmp_path):
        """Kafka's message.timestamp.type: CreateTime by default, LogAppendTime when set or
        altered, kept across a reopen; anything else is refused."""
        root = str(tmp_path)
        store = Store(root)
        assert store.create_topic("t", TopicConfig(partitions=1)).config.message_timestamp_type \
            == "CreateTime"
        store.alter_topic("t", {"message_timestamp_type": "LogAppendTime"})
        with pytest.raises(ValueError):
            store.alter_topic("t", {"message_timestamp_type": "WallClock"})
        store.close()
        reopened = Store(root)
        try:
            assert reopened.topic("t").config.message_timestamp_type == "LogAppendTime"
        finally:
            reopened.close()


class InterruptedOperationTests:

    def test_interrupted_delete_and_create_are_finished_on_open(self, tmp_path):
        """Folders left by a delete (~del-) or a create (~new-) that a crash interrupted are
        removed on the next open; other topics are untouched."""
        root = str(tmp_path)
        store = Store(root)
        store.create_topic("doomed", TopicConfig(partitions=1))
        store.create_topic("kept", TopicConfig(partitions=1))
        store.partition("kept", 0).append([b"x"])
        stop_uncleanly(store)
        os.rename(paths.topic_dir(root, "doomed"), paths.deleted_topic_dir(root, "doomed"))
        os.makedirs(os.path.join(paths.new_topic_dir(root, "half"), "0"))
        reopened = Store(root)
        try:
            assert set(reopened.topics) == {"kept"}
            assert sorted(os.listdir(paths.topics_dir(root))) == ["kept"]
            assert reopened.partition("kept", 0).read(0).records[0].payload == b"x"
        finally:
            reopened.close()

    def test_unreadable_topic_config_is_quarantined(self, tmp_path):
        """A topic whose topic.json does not parse is moved aside (~bad-<name>) and reported;
        the store still opens with its other topics."""
        root = str(tmp_path)
        store = Store(root)
        store.create_topic("broken", TopicConfig(partitions=1))
        store.create_topic("fine", TopicConfig(partitions=1))
        store.close()
        with open(paths.topic_config_path(paths.topic_dir(root, "broken")), "w") as f:
            f.write("{not json")
        reopened = Store(root)
        try:
            assert set(reopened.topics) == {"fine"}
            assert os.path.isdir(os.path.join(paths.topics_dir(root), "~bad-broken"))
            assert [e.topic for e in reopened.recovery_report] == ["broken"]
        finally:
            reopened.close()

    def test_quarantined_name_cannot_be_created_until_repaired(self, tmp_path):
        """While ~bad-<name> exists, creating <name> raises TopicQuarantined naming that
        folder and creates nothing, so the documented fix (repair topic.json, rename the
        folder back) never collides with a new empty topic. After the fix the topic opens
        with its messages."""
        from data.errors import TopicQuarantined

        root = str(tmp_path)
        store = Store(root)
        store.create_topic("orders", TopicConfig(partitions=2))
        store.partition("orders", 1).append([b"kept"])
        store.close()
        config_path = paths.topic_config_path(paths.topic_dir(root, "orders"))
        with open(config_path) as f:
            good = f.read()
        with open(config_path, "w") as f:
            f.write("{not json")
        reopened = Store(root)
        bad = os.path.join(paths.topics_dir(root), "~bad-orders")
        try:
            assert reopened.topic("orders") is None
            with pytest.raises(TopicQuarantined) as caught:
                reopened.create_topic("orders", TopicConfig(partitions=1))
            assert (caught.value.topic, caught.value.path) == ("orders", bad)
            assert bad in str(caught.value)
            assert reopened.topic("orders") is None
            assert sorted(os.listdir(paths.topics_dir(root))) == ["~bad-orders"]
            reopened.create_topic("other", TopicConfig(partitions=1))  # other names still work
        finally:
            reopened.close()
        with open(os.path.join(bad, paths.TOPIC_CONFIG), "w") as f:
            f.write(good)
        os.rename(bad, paths.topic_dir(root, "orders"))
        repaired = Store(root)
        try:
            assert repaired.topic("orders").config.partitions == 2
            assert repaired.partition("orders", 1).read(0).records[0].payload == b"kept"
        finally:
            repaired.close()


class CleanMarkerTests:

    def test_marker_written_by_close_and_consumed_by_open(self, tmp_path):
        """close() leaves the clean-shutdown marker; opening removes it, so a crash after
        the open is seen as unclean."""
        root = str(tmp_path)
        marker = paths.clean_marker_path(root)
        store = Store(root)
        assert not os.path.exists(marker)
        store.close()
        assert os.path.exists(marker)
        again = Store(root)
        assert not os.path.exists(marker)
        stop_uncleanly(again)
        assert not os.path.exists(marker)

    def test_open_tells_a_new_directory_from_a_clean_or_unclean_stop(self, tmp_path, caplog):
        """The open line says "new data directory" on a first start (an existing empty
        folder included), not "tails checked" as after a crash; then "clean stop" after
        close and "tails checked" after an unclean stop."""
        root = tmp_path / "data"
        root.mkdir()  # `mkdir data && skerry serve --data-dir data`

        def opened() -> str:
            [line] = [r.getMessage() for r in caplog.records if "store: opened" in r.getMessage()]
            caplog.clear()
            return line

        with caplog.at_level(logging.INFO, logger="skerry.data"):
            store = Store(str(root))
            assert opened() == f"store: opened 0 topic(s) from {root / 'topics'} (new data directory)"
            store.create_topic("t", TopicConfig(partitions=1))
            store.close()
            store = Store(str(root))
            assert opened().endswith("(clean stop)")
            stop_uncleanly(store)
            Store(str(root)).close()
            assert opened().endswith("(no clean-shutdown marker: tails checked)")

    def test_clean_open_still_checks_index_sizes(self, tmp_path):
        """Even after a clean stop a missing or short index is noticed and rebuilt."""
        root = str(tmp_path)
        store = Store(root, SMALL)
        store.create_topic("t", TopicConfig(partitions=1))
        raw = _fill(store, "t", 40)
        store.close()
        logs = segment_logs(root, "t", 0)
        os.remove(logs[0][:-4] + ".index")
        truncate_file(logs[-1][:-4] + ".index", 6)
        os.remove(logs[1][:-4] + ".timeindex")
        reopened = Store(root, SMALL)
        try:
            plog = reopened.partition("t", 0)
            assert plog.read(0, max_messages=1000).raw == raw
            assert reopened.recovery_report == []
            assert plog.append([b"more"]) == 40
        finally:
            reopened.close()


class RecoveryTests:

    def test_torn_tail_is_dropped_and_reported(self, tmp_path):
        """After an unclean stop, a partial last record is cut off; the report says which
        segment, how many bytes and which offsets went."""
        root = str(tmp_path)
        store = Store(root, SMALL)
        store.create_topic("t", TopicConfig(partitions=1))
        _fill(store, "t", 10)
        stop_uncleanly(store)
        last = segment_logs(root, "t", 0)[-1]
        size = os.path.getsize(last)
        truncate_file(last, size - 3)
        reopened = Store(root, SMALL)
        try:
            plog = reopened.partition("t", 0)
            assert plog.next_offset == 9
            (event,) = reopened.recovery_report
            assert event.topic == "t" and event.partition == 0
            assert event.segment == os.path.basename(last)
            assert event.offsets_dropped == range(9, 10)
            assert 0 < event.bytes_dropped < 100
            assert plog.append([b"after"]) == 9
        finally:
            reopened.close()

    def test_garbage_after_the_last_record_is_dropped(self, tmp_path):
        """Bytes after the last intact record (a half-written batch) are cut; no record is lost."""
        root = str(tmp_path)
        store = Store(root, SMALL)
        store.create_topic("t", TopicConfig(partitions=1))
        raw = _fill(store, "t", 10)
        stop_uncleanly(store)
        append_bytes(segment_logs(root, "t", 0)[-1], b"\x01" * 77)
        reopened = Store(root, SMALL)
        try:
            assert reopened.partition("t", 0).read(0, max_messages=100).raw == raw
            assert [e.bytes_dropped for e in reopened.recovery_report] == [77]
        finally:
            reopened.close()

    def test_gap_between_segments_quarantines_the_rest(self, tmp_path):
        """A segment that lost records (an unsynced sealed tail) ends the log: later segments
        are renamed .bad and reported, so offsets stay dense."""
        root = str(tmp_path)
        store = Store(root, SMALL)
        store.create_topic("t", TopicConfig(partitions=1))
        _fill(store, "t", 40)
        stop_uncleanly(store)
        logs = segment_logs(root, "t", 0)
        assert len(logs) >= 3
        first_size = os.path.getsize(logs[0])
        truncate_file(logs[0], first_size - 1)
        reopened = Store(root, SMALL)
        try:
            plog = reopened.partition("t", 0)
            assert plog.segment_count == 1
            assert plog.next_offset == plog.read(0, max_messages=100).records[-1].offset + 1
            bad = [n for n in os.listdir(partition_path(root, "t", 0)) if n.endswith(".bad")]
            assert len(bad) == len(logs) - 1
            reasons = [e.reason for e in reopened.recovery_report]
            assert any("torn" in r for r in reasons) and any("gap" in r for r in reasons)
        finally:
            reopened.close()

    def test_unreadable_segment_is_quarantined(self, tmp_path):
        """A segment whose log cannot be read (EIO) at open is renamed .bad and reported,
        with every later segment (offsets must stay dense); the store still opens and the
        partition continues from the end of what is readable."""
        root = str(tmp_path)
        store = Store(root, SMALL)
        store.create_topic("t", TopicConfig(partitions=1))
        _fill(store, "t", 40)
        store.close()
        logs = segment_logs(root, "t", 0)
        assert len(logs) >= 3
        victim = os.path.basename(logs[1])
        fs = FaultyFileLayer(op="pread", path_contains=victim, error=errno.EIO, sticky=True)
        reopened = Store(root, SMALL, fs=fs)
        try:
            plog = reopened.partition("t", 0)
            assert plog.segment_count == 1
            assert plog.next_offset == int(victim[:-4])
            bad = sorted(n for n in os.listdir(partition_path(root, "t", 0)) if n.endswith(".bad"))
            assert bad == [os.path.basename(p) + ".bad" for p in logs[1:]]
            assert [e.segment for e in reopened.recovery_report] == [os.path.basename(p) for p in logs[1:]]
            assert "unreadable" in reopened.recovery_report[0].reason
            assert plog.append([b"continues"]) == int(victim[:-4])
        finally:
            reopened.close()

    def test_orphan_index_files_are_removed(self, tmp_path):
        """Index files whose log is gone (a retention interrupted between removals) are
        removed on open and do not count as a segment."""
        root = str(tmp_path)
        store = Store(root, SMALL)
        store.create_topic("t", TopicConfig(partitions=1))
        _fill(store, "t", 5)
        store.close()
        pdir = partition_path(root, "t", 0)
        for suffix in (".index", ".timeindex"):
            with open(os.path.join(pdir, paths.segment_name(0, suffix)).replace("000000.", "000999."), "wb") as f:
                f.write(b"\0" * 8)
        reopened = Store(root, SMALL)
        try:
            assert reopened.partition("t", 0).next_offset == 5
            assert not any("999" in n for n in os.listdir(pdir))
        finally:
            reopened.close()

    def test_unclean_open_makes_everything_durable(self, tmp_path):
        """After recovery, everything the log holds counts as durable (it was fsynced)."""
        root = str(tmp_path)
        clock = FakeClock()
        store = Store(root, SMALL, now_us=clock)
        store.create_topic("t", TopicConfig(partitions=1))
        _fill(store, "t", 25)
        assert store.partition("t", 0).durable_offset == 0
        stop_uncleanly(store)
        reopened = Store(root, SMALL, now_us=clock)
        try:
            plog = reopened.partition("t", 0)
            assert plog.durable_offset == plog.next_offset == 25
        finally:
            reopened.close()
