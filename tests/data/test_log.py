"""Appending and reading a partition log: round trips across segment rolls, reads by offset
and by timestamp, read limits, replicated appends, truncation, the state file."""

from __future__ import annotations

import logging
import os

import pytest

from broker.errors import StorageError
from data import format as fmt
from data.store import StorageConfig, Store, TopicConfig
from tests.data.support import FakeClock, flip_byte, segment_logs, stop_uncleanly, truncate_file

SMALL = StorageConfig(segment_bytes=2048)


def _payload(i: int) -> bytes:
    return (f"message-{i}:".encode() + bytes(range(256)))[: 10 + i % 90]


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(tmp_path, clock):
    s = Store(str(tmp_path), SMALL, now_us=clock)
    yield s
    s.close()


class RoundTripTests:

    def test_offsets_are_dense_from_zero_per_partition(self, store):
        """Each partition numbers its messages 0, 1, 2... on its own."""
        topic = store.create_topic("t", TopicConfig(partitions=3))
        assert topic.partitions[0].append([b"a", b"b"]) == 0
        assert topic.partitions[1].append([b"c"]) == 0
        assert topic.partitions[0].append([b"d"]) == 2
        assert topic.partitions[2].next_offset == 0
        assert [r.offset for r in topic.partitions[0].read(0).records] == [0, 1, 2]
        assert [r.payload for r in topic.partitions[0].read(0).records] == [b"a", b"b", b"d"]
        assert [r.payload for r in topic.partitions[1].read(0).records] == [b"c"]

    def test_round_trip_across_rolls_and_reopen(self, tmp_path, store, clock):
        """Hundreds of messages over many small segments read back identical, headers bit
        for bit, from any start offset, before and after a clean reopen."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        sent = []
        for batch in range(40):
            clock.advance(1000)
            payloads = [_payload(batch * 10 + i) for i in range(batch % 7 + 1)]
            headers = [fmt.key_header(f"k{batch}-{i}".encode()) if i % 2 else b"" for i in range(len(payloads))]
            first = plog.append(payloads, headers)
            sent.extend((first + i, clock.now, p, h) for i, (p, h) in enumerate(zip(payloads, headers, strict=True)))
        assert plog.segment_count > 5
        assert plog.next_offset == len(sent)

        def check(log):
            everything = log.read(0, max_messages=10_000)
            assert [(r.offset, r.timestamp, r.payload, r.user_headers) for r in everything.records] == sent
            assert everything.raw == b"".join(r.to_bytes() for r in everything.records)
            for start in (1, 17, 55, len(sent) - 1):
                part = log.read(start, max_messages=13)
                assert [r.offset for r in part.records] == list(range(start, min(start + 13, len(sent))))
                assert part.next_offset == part.records[-1].offset + 1
            assert log.read(2, max_messages=1).records[0].key == b"k1-1"
            assert log.read(1, max_messages=1).records[0].key is None
            return everything.raw

        raw = check(plog)
        store.close()
        reopened = Store(str(tmp_path), SMALL, now_us=clock)
        try:
            assert reopened.recovery_report == []
            assert check(reopened.partition("t", 0)) == raw
        finally:
            reopened.close()

    def test_empty_batch_and_bad_input(self, store):
        """An empty batch appends nothing; mismatched lengths and non-bytes payloads are
        ValueError and leave the log unchanged."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        assert plog.append([]) == 0
        with pytest.raises(ValueError):
            plog.append([b"a", b"b"], [b""])
        with pytest.raises(ValueError):
            plog.append(["text"])  # type: ignore[list-item]
        with pytest.raises(ValueError):
            plog.append([b"a"], ids=[1 << 128])
        assert plog.next_offset == 0
        assert plog.append([b"ok"]) == 0

    def test_a_batch_that_would_not_fit_the_active_segment_rolls_and_bad_input_still_does_not(
            self, tmp_path):
        """The size check that rolls a segment is the built batch's own length: a batch
        that would pass the segment size rolls first and lands at position 0 of the next
        segment; one that would end past 4 GiB in the active segment (its size pretended
        here) rolls too, where it fits; bad input rolls nothing and writes nothing."""
        store = Store(str(tmp_path), StorageConfig(segment_bytes=1 << 30))
        try:
            plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
            plog.append([b"x" * 100])
            real = plog._active.size
            plog._active.size = fmt.MAX_U32 - 100  # the next batch cannot end below 4 GiB
            with pytest.raises(ValueError):
                plog.append([b"a", b"b"], [b""])
            assert plog.segment_count == 1 and plog.next_offset == 1
            assert plog.append([b"y" * 100, b"z"]) == 1
            assert plog.segment_count == 2 and plog._active.size == 2 * fmt.HEADER_SIZE + 101
            plog._segments[0].size = real
            assert [r.payload for r in plog.read(0).records] == [b"x" * 100, b"y" * 100, b"z"]
        finally:
            store.close()

    def test_the_segment_rolls_on_the_batch_that_would_pass_its_size(self, tmp_path):
        store = Store(str(tmp_path), StorageConfig(segment_bytes=1000))
        try:
            plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
            record = fmt.HEADER_SIZE + 100
            for i in range(1000 // record):  # 6 records of 164 bytes fit 1,000
                plog.append([bytes([i]) * 100])
            assert plog.segment_count == 1 and plog._active.size == 6 * record
            plog.append([b"\xff" * 100])
            assert plog.segment_count == 2 and plog._active.size == record
            assert plog.read(6).records[0].payload == b"\xff" * 100
        finally:
            store.close()


class ReadLimitTests:

    @pytest.fixture
    def plog(self, store):
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        plog.append([b"x" * 100 for _ in range(30)])
        return plog

    def test_max_messages_and_upto(self, plog):
        """max_messages caps the count; upto is an exclusive upper offset bound."""
        assert [r.offset for r in plog.read(5, max_messages=3).records] == [5, 6, 7]
        result = plog.read(5, upto=8)
        assert [r.offset for r in result.records] == [5, 6, 7]
        assert result.next_offset == 8
        empty = plog.read(8, upto=8)
        assert empty.records == [] and empty.raw == b"" and empty.next_offset == 8

    def test_max_bytes_bounds_payloads_but_one_record_always_comes(self, plog):
        """max_bytes bounds the sum of payload sizes; a record larger than the bound still
        comes back alone so a consumer is never stuck."""
        assert len(plog.read(0, max_bytes=350).records) == 3
        assert len(plog.read(0, max_bytes=300).records) == 3
        assert len(plog.read(0, max_bytes=299).records) == 2
        assert len(plog.read(0, max_bytes=10).records) == 1
        assert len(plog.read(0, max_bytes=0).records) == 1

    def test_reads_past_the_end(self, plog):
        """Reading at or past the log end returns nothing, with next_offset at the start."""
        result = plog.read(30)
        assert result.records == [] and result.next_offset == 30
        assert plog.read(99).next_offset == 99


class TimestampTests:

    def test_offset_for_timestamp_across_segments(self, store, clock):
        """offset_for_timestamp returns the first offset whose timestamp is >= the target,
        in the active and in sealed segments, and None past the newest message."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        stamps = {}
        for i in range(50):
            clock.advance(1_000_000)
            first = plog.append([_payload(i)] * 3)
            stamps[first] = clock.now
        assert plog.segment_count > 3
        for first, ts in stamps.items():
            assert plog.offset_for_timestamp(ts) == first
            assert plog.offset_for_timestamp(ts - 1) == first
        assert plog.offset_for_timestamp(0) == 0
        assert plog.offset_for_timestamp(clock.now + 1) is None

    def test_clock_going_backwards(self, store, clock):
        """A batch stamped earlier than a previous one (the wall clock stepped back) is
        still found by the first-offset-at-or-after rule."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        clock.now = 5_000
        plog.append([b"a"])  # offset 0 @ 5000
        clock.now = 3_000
        plog.append([b"b"])  # offset 1 @ 3000
        clock.now = 4_000
        plog.append([b"c"])  # offset 2 @ 4000
        clock.now = 6_000
        plog.append([b"d"])  # offset 3 @ 6000
        assert plog.offset_for_timestamp(3_500) == 0
        assert plog.offset_for_timestamp(5_500) == 3
        assert plog.offset_for_timestamp(2_000) == 0


class AppendRecordsTests:

    def test_follower_copy_is_byte_identical(self, store):
        """Records copied with append_records (as a follower does) are stored unchanged:
        the follower's reads return the leader's exact bytes, across its own rolls."""
        topic = store.create_topic("t", TopicConfig(partitions=2))
        leader, follower = topic.partitions
        for i in range(20):
            leader.append([_payload(i), _payload(i + 1)], [fmt.key_header(b"k"), b""])
        at = 0
        while at < leader.next_offset:
            chunk = leader.read(at, max_messages=7)
            assert follower.append_records(chunk.raw) == at
            at = chunk.next_offset
        assert follower.read(0, max_messages=1000).raw == leader.read(0, max_messages=1000).raw
        assert follower.segment_count > 1

    def test_bad_stamped_records_are_refused(self, store):
        """append_records refuses a wrong first offset, a gap, a bad checksum, a non-zero
        reserved field and partial bytes, with ValueError and nothing written."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        good0 = fmt.encode_record(0, 1, 2, 3, b"zero")
        good1 = fmt.encode_record(1, 1, 2, 3, b"one")
        bad_checksum = good1[:-1] + bytes([good1[-1] ^ 1])
        reserved = bytearray(fmt.encode_record(1, 1, 2, 3, b"r"))
        reserved[fmt.RESERVED_OFFSET] = 1
        cases = [
            fmt.encode_record(5, 1, 2, 3, b"wrong start"),
            good0 + fmt.encode_record(2, 1, 2, 3, b"gap"),
            good0 + bad_checksum,
            good0 + bytes(reserved),
            good0 + good1[:-3],
            b"",
        ]
        for raw in cases:
            with pytest.raises(ValueError):
                plog.append_records(raw)
            assert plog.next_offset == 0
        assert plog.append_records(good0 + good1) == 0
        assert [r.payload for r in plog.read(0).records] == [b"zero", b"one"]


class TruncateTests:

    def test_truncate_within_and_across_segments(self, tmp_path, store):
        """truncate_to drops every record >= offset, across segment boundaries; the next
        append reuses the offset; the result survives an unclean restart."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        for i in range(60):
            plog.append([_payload(i)])
        segments_before = plog.segment_count
        plog.truncate_to(45)
        assert plog.next_offset == 45 and plog.durable_offset <= 45
        plog.truncate_to(13)
        assert plog.next_offset == 13
        assert plog.segment_count < segments_before
        assert [r.offset for r in plog.read(0, max_messages=100).records] == list(range(13))
        assert plog.append([b"new"]) == 13
        plog.truncate_to(99)  # past the end: nothing to do
        stop_uncleanly(store)
        reopened = Store(str(tmp_path), SMALL)
        try:
            again = reopened.partition("t", 0)
            records = again.read(0, max_messages=100).records
            assert [r.offset for r in records] == list(range(14))
            assert records[-1].payload == b"new"
            assert records[5].payload == _payload(5)
        finally:
            reopened.close()

    def test_truncate_below_log_start_empties_the_log(self, store):
        """Truncating to an offset at or below first_offset leaves an empty log starting there."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        plog.append([b"a", b"b", b"c"])
        plog.truncate_to(0)
        assert (plog.first_offset, plog.next_offset, plog.segment_count) == (0, 0, 1)
        assert plog.read(0).records == []
        assert plog.append([b"again"]) == 0


class CorruptReadTests:

    def test_flipped_byte_is_never_returned(self, tmp_path, store, caplog):
        """A record whose bytes changed on disk is never handed out: a read stops before it,
        a read starting at it raises StorageError naming the offset, and the log says so."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        for i in range(40):
            plog.append([_payload(i)])
        target = 7
        rec = plog.read(target, max_messages=1)
        first_log = segment_logs(str(tmp_path), "t", 0)[0]
        whole = plog.read(0, max_messages=target).raw
        assert len(whole) + len(rec.raw) <= os.path.getsize(first_log)
        flip_byte(first_log, len(whole) + 70)
        before = plog.read(0, max_messages=100)
        assert [r.offset for r in before.records] == list(range(target))
        with caplog.at_level(logging.ERROR, logger="skerry.data"), pytest.raises(StorageError, match="offset 7"):
            plog.read(target)
        assert "corrupt record at offset 7" in caplog.text
        assert plog.read(target + 1).records[0].offset == target + 1

    def test_damaged_sealed_index_is_rebuilt_on_read(self, tmp_path, store):
        """A sealed segment whose .index no longer matches its log (damaged in the middle,
        where the cheap open check does not look) is rebuilt from the log on first read."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        for i in range(60):
            plog.append([_payload(i)])
        expected = plog.read(0, max_messages=100).raw
        store.close()
        index = segment_logs(str(tmp_path), "t", 0)[0][: -len(".log")] + ".index"
        flip_byte(index, 5)
        reopened = Store(str(tmp_path), SMALL)
        try:
            assert reopened.partition("t", 0).read(0, max_messages=100).raw == expected
        finally:
            reopened.close()


    def test_index_cut_while_open_is_rebuilt(self, tmp_path, store):
        """A sealed segment's .index cut short behind the store's back is rebuilt from the
        log at the next read that needs it; the read returns every record."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        for i in range(60):
            plog.append([_payload(i)])
        expected = plog.read(0, max_messages=100).raw
        index = segment_logs(str(tmp_path), "t", 0)[0][: -len(".log")] + ".index"
        truncate_file(index, 6)
        assert plog.read(0, max_messages=100).raw == expected
        assert os.path.getsize(index) % 4 == 0 and os.path.getsize(index) > 6


class StateFileTests:

    def test_state_round_trip(self, tmp_path, store):
        """save_state/load_state keep a small JSON document beside the partition."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        assert plog.load_state() == {}
        plog.save_state({"role": "leader", "leader_epoch": 3, "hw": 41})
        assert plog.load_state() == {"role": "leader", "leader_epoch": 3, "hw": 41}
        store.close()
        reopened = Store(str(tmp_path), SMALL)
        try:
            assert reopened.partition("t", 0).load_state()["leader_epoch"] == 3
        finally:
            reopened.close()
