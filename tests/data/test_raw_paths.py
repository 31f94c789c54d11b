"""The store's raw hot paths: ``PartitionLog.read_raw`` / ``reader.verify_run`` (a read that
hands out stored bytes and a count, no ``Record`` tuples) and ``PartitionLog.append_framed``
/ ``writer.stamp_framed`` (a single-pass append of messages already framed as records).

Each is checked against the decoding path it shortcuts: the same bytes, counts and offsets,
and never a record whose checksum fails.
"""

from __future__ import annotations

import logging
import uuid

import numpy as np
import pytest

from broker.errors import StorageError
from data import format as fmt
from data.log_reads import COMPILED_CHECKS
from data.reader import RunResult, decode_run, verify_run
from data.store import StorageConfig, Store, TopicConfig
from data.writer import build_batch, stamp_framed
from tests.data.support import FakeClock, flip_byte, segment_logs

SMALL = StorageConfig(segment_bytes=2048)


def _payload(i: int) -> bytes:
    return (f"message-{i}:".encode() + bytes(range(256)))[: 10 + i % 90]


def _framed(payloads: list[bytes], headers: list[bytes] | None = None, ids: list[int] | None = None,
            origins: list[int] | None = None) -> tuple[bytes, list[int]]:
    """Messages as an Iggy client frames them (checksum, offset, timestamp 0) and their ends."""
    parts = []
    ends = []
    pos = 0
    for i, payload in enumerate(payloads):
        uh = headers[i] if headers is not None else b""
        ident = ids[i] if ids is not None else 0
        origin = origins[i] if origins is not None else 0
        record = fmt.HEADER.pack(0, ident & fmt.MAX_U64, ident >> 64, 0, 0, origin, len(uh), len(payload), 0)
        record += payload + uh
        parts.append(record)
        pos += len(record)
        ends.append(pos)
    return b"".join(parts), ends


def _summary(run: RunResult) -> tuple[int, int, int, bool, bool]:
    return run.count, run.consumed, run.payload, run.over_budget, run.failed


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(tmp_path, clock):
    s = Store(str(tmp_path), SMALL, now_us=clock)
    yield s
    s.close()


class VerifyRunTests:

    def _run(self, n: int = 6) -> tuple[bytes, list[int]]:
        payloads = [_payload(i) for i in range(n)]
        headers = [fmt.key_header(b"k%d" % i) if i % 2 else b"" for i in range(n)]
        return build_batch(payloads, headers, None, None, 40, 123, 0)

    def test_matches_decode_run_for_every_budget(self):
        """For intact data, verify_run stops exactly where decode_run stops, for any payload
        budget, with and without the take-first rule, and never builds a record."""
        data, ends = self._run()
        for budget in range(0, sum(10 + i % 90 for i in range(6)) + 2, 3):
            for take_first in (True, False):
                out: list[fmt.Record] = []
                expected = decode_run(data, ends, 40, out, budget, take_first)
                got = verify_run(data, ends, 40, budget, take_first)
                assert _summary(got) == _summary(expected), (budget, take_first)

    def test_single_record_over_budget_is_taken_whole(self):
        """One record larger than the budget still comes back alone when it is the first."""
        data, ends = build_batch([b"x" * 500], None, None, None, 0, 1, 0)
        assert _summary(verify_run(data, ends, 0, 10, True)) == (1, len(data), 500, False, False)
        assert _summary(verify_run(data, ends, 0, 10, False)) == (0, 0, 0, True, False)

    def test_any_flipped_byte_is_never_counted(self):
        """Flipping any single byte of a run makes verify_run stop before the damaged record,
        exactly as decode_run does: a record that fails its checks is never counted."""
        data, ends = self._run(4)
        for pos in range(len(data)):
            bad = bytearray(data)
            bad[pos] ^= 0x5A
            damaged = bytes(bad)
            victim = next(i for i in range(len(ends) - 1) if ends[i] <= pos < ends[i + 1])
            out: list[fmt.Record] = []
            expected = decode_run(damaged, ends, 40, out, 1 << 30, True)
            got = verify_run(damaged, ends, 40, 1 << 30, True)
            assert _summary(got) == _summary(expected), pos
            assert got.failed and got.count == victim and got.consumed == ends[victim], pos

    def test_wrong_offsets_and_short_data_fail(self):
        """Offsets that are not dense from the expected one, and data shorter than the index
        says, end the run as failed after the intact records."""
        data, ends = self._run(5)
        assert _summary(verify_run(data, ends, 41, 1 << 30, True)) == (0, 0, 0, False, True)
        cut = data[: ends[3] + 10]
        got = verify_run(cut, ends, 40, 1 << 30, True)
        assert (got.count, got.consumed, got.failed) == (3, ends[3], True)


class ReadRawTests:

    def _fill(self, store, clock) -> object:
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        for batch in range(30):
            clock.advance(1000)
            plog.append([_payload(batch * 7 + i) for i in range(batch % 5 + 1)])
        assert plog.segment_count > 3
        return plog

    def test_same_bytes_count_and_next_offset_as_read(self, tmp_path, store, clock):
        """read_raw returns exactly read's bytes, its record count, its next offset and each
        record's end position in the bytes, for
        starts, message limits, payload budgets and upper bounds across segment rolls, before
        and after a reopen (sealed segments read through their index files)."""
        plog = self._fill(store, clock)
        end = plog.next_offset

        def check(log):
            for start in (0, 1, 9, 40, end - 1, end, end + 5):
                for max_messages in (1, 3, 1000):
                    for max_bytes in (0, 150, 1 << 20):
                        for upto in (None, start + 2):
                            full = log.read(start, max_messages, max_bytes, upto)
                            raw = log.read_raw(start, max_messages, max_bytes, upto)
                            assert raw.raw == full.raw
                            assert raw.count == len(full.records)
                            assert raw.next_offset == full.next_offset
                            # ends: where each record stops in raw, across segment joins
                            assert len(raw.ends) == raw.count
                            starts = [0, *raw.ends[:-1]] if raw.ends else []
                            assert [fmt.decode_record(raw.raw[a:b])[0].payload
                                    for a, b in zip(starts, raw.ends, strict=True)] == \
                                [r.payload for r in full.records]
                            # ends as an int64 array (a Kafka fetch): the same read
                            arr = log.read_raw(start, max_messages, max_bytes, upto,
                                               ends_array=True)
                            assert (arr.raw, arr.count, arr.next_offset, arr.gapped) == \
                                (raw.raw, raw.count, raw.next_offset, raw.gapped)
                            assert list(map(int, arr.ends)) == list(raw.ends)
                            if COMPILED_CHECKS:
                                assert isinstance(arr.ends, np.ndarray)
                                assert arr.ends.dtype == np.int64

        check(plog)
        store.close()
        reopened = Store(str(tmp_path), SMALL, now_us=clock)
        try:
            check(reopened.partition("t", 0))
        finally:
            reopened.close()

    def test_offsets_are_dense_and_bounded(self, store, clock):
        """The raw bytes hold ``count`` records with offsets dense from the (clamped) start,
        never at or past ``upto`` or ``next_offset``, at most ``max_messages`` of them."""
        plog = self._fill(store, clock)
        result = plog.read_raw(5, max_messages=17, upto=20)
        pos, offsets = 0, []
        while pos < len(result.raw):
            offsets.append(fmt.decode_header(result.raw, pos).offset)
            pos = fmt.verify_record(result.raw, pos)
        assert offsets == list(range(5, 20)) and result.count == 15 and result.next_offset == 20
        assert plog.read_raw(5, max_messages=4).count == 4
        past = plog.read_raw(plog.next_offset + 3)
        assert (past.raw, past.count, past.next_offset) == (b"", 0, plog.next_offset + 3)

    def test_checksum_failure_is_never_returned(self, tmp_path, store, caplog):
        """A record whose bytes changed on disk is never in read_raw's bytes: a read stops
        before it, a read starting at it raises StorageError naming the offset, the next
        offset still reads."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        for i in range(40):
            plog.append([_payload(i)])
        target = 7
        before_target = plog.read_raw(0, max_messages=target).raw
        flip_byte(segment_logs(str(tmp_path), "t", 0)[0], len(before_target) + 70)
        result = plog.read_raw(0, max_messages=100)
        assert result.raw == before_target and result.count == target and result.next_offset == target
        with caplog.at_level(logging.ERROR, logger="skerry.data"), pytest.raises(StorageError, match="offset 7"):
            plog.read_raw(target)
        assert "corrupt record at offset 7" in caplog.text
        assert plog.read_raw(target + 1, max_messages=1).next_offset == target + 2

    def test_closed_log_refuses(self, store):
        """A closed partition refuses raw reads like any read."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        plog.append([b"a"])
        plog.close()
        with pytest.raises(StorageError, match="closed"):
            plog.read_raw(0)


class AppendFramedTests:

    def test_same_bytes_as_append(self, tmp_path, clock):
        """append_framed writes exactly what append writes for the same messages split apart
        (ids given, user headers, origin timestamps kept), across segment rolls."""
        a = Store(str(tmp_path / "a"), SMALL, now_us=clock)
        b = Store(str(tmp_path / "b"), SMALL, now_us=clock)
        try:
            pa = a.create_topic("t", TopicConfig(partitions=1)).partitions[0]
            pb = b.create_topic("t", TopicConfig(partitions=1)).partitions[0]
            for batch in range(25):
                clock.advance(1000)
                n = batch % 6 + 1
                payloads = [_payload(batch * 6 + i) for i in range(n)]
                headers = [fmt.key_header(b"k%d" % i) if i % 3 else b"" for i in range(n)]
                ids = [(batch << 70) + i + 1 for i in range(n)]
                origins = [batch * 100 + i for i in range(n)]
                area, ends = _framed(payloads, headers, ids, origins)
                assert pa.append(payloads, headers, ids=ids, origin_timestamps=origins) == pb.append_framed(
                    area, ends if batch % 2 else None
                )
            assert pa.segment_count == pb.segment_count > 3
            assert pa.next_offset == pb.next_offset
            assert pa.read(0, max_messages=10_000).raw == pb.read(0, max_messages=10_000).raw
        finally:
            a.close()
            b.close()

    def test_zero_ids_become_uuid4_and_fields_are_stamped(self, store, clock):
        """Messages with id 0 get distinct UUIDv4 ids; a non-zero id is kept; offsets are
        dense and the batch gets the store's timestamp; checksums verify."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        plog.append([b"before"])
        area, ends = _framed([b"a", b"b", b"c", b"d"], ids=[0, 7 << 100, 0, 0], origins=[1, 2, 3, 4])
        assert plog.append_framed(area, ends) == 1
        records = plog.read(1).records
        assert [r.offset for r in records] == [1, 2, 3, 4]
        assert [r.timestamp for r in records] == [clock.now] * 4
        assert [r.origin_timestamp for r in records] == [1, 2, 3, 4]
        assert [r.payload for r in records] == [b"a", b"b", b"c", b"d"]
        assert records[1].id == 7 << 100
        generated = [records[i].id for i in (0, 2, 3)]
        assert len(set(generated)) == 3
        assert all(uuid.UUID(int=i).version == 4 for i in generated)

    @pytest.mark.parametrize(
        "mangle",
        [
            pytest.param(lambda area, ends: (area, [e + 1 for e in ends]), id="ends-disagree"),
            pytest.param(lambda area, ends: (area[:-1], None), id="cut-short"),
            pytest.param(lambda area, ends: (area + b"\0" * 10, None), id="partial-header"),
            pytest.param(lambda area, ends: (area[:56] + b"\1" + area[57:], ends), id="reserved-set"),
            pytest.param(lambda area, ends: (b"", []), id="empty"),
        ],
    )
    def test_bad_framing_is_refused_and_nothing_written(self, store, mangle):
        """Framing the store cannot trust is ValueError and leaves the log unchanged."""
        plog = store.create_topic("t", TopicConfig(partitions=1)).partitions[0]
        area, ends = _framed([b"one", b"two"])
        bad_area, bad_ends = mangle(area, ends)
        with pytest.raises(ValueError):
            plog.append_framed(bad_area, bad_ends)
        assert plog.next_offset == 0 and plog.size_bytes() == 0
        assert plog.append_framed(area, ends) == 0
        assert [r.payload for r in plog.read(0).records] == [b"one", b"two"]

    def test_stamp_framed_positions_and_offset_range(self):
        """stamp_framed's positions start at the write position and end after the batch; an
        offset past u64 is refused."""
        area, ends = _framed([b"x" * 10, b"y" * 20])
        data, positions = stamp_framed(area, ends, 5, 9, 1000)
        assert positions == [1000, 1000 + ends[0], 1000 + ends[1]]
        assert fmt.verify_record(data, 0) == ends[0]
        with pytest.raises(ValueError):
            stamp_framed(area, ends, fmt.MAX_U64, 9, 0)
