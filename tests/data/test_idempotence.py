"""Tests for data/idempotence.py: the producer fields a record id carries, and stamping a
framed batch with them."""

from __future__ import annotations

import uuid

import pytest

from data.format import decode_header, encode_record
from data.idempotence import (
    ProducerMark,
    batch_ids,
    parse_record_id,
    producer_record_id,
    stamp_ids,
)


class RecordIdTests:

    @pytest.mark.parametrize("pid, epoch, seq, first, last", [
        (0, 0, 0, True, True),
        (1, 0, 5, True, False),
        (2**63 - 1, 2**15 - 1, 2**31 - 1, False, True),
        (123456789, 17, 1000, False, False),
    ])
    def test_round_trip(self, pid: int, epoch: int, seq: int, first: bool, last: bool) -> None:
        """Every field comes back; the id is a valid UUIDv8 (RFC 9562 variant)."""
        record_id = producer_record_id(pid, epoch, seq, first, last)
        assert parse_record_id(record_id) == ProducerMark(pid, epoch, seq, first, last)
        as_uuid = uuid.UUID(int=record_id)
        assert as_uuid.version == 8 and as_uuid.variant == uuid.RFC_4122

    @pytest.mark.parametrize("record_id", [0, 1, uuid.uuid4().int, uuid.UUID(int=(8 << 76) | (2 << 62)).int,
                                           2**128 - 1])
    def test_other_ids_are_not_producer_ids(self, record_id: int) -> None:
        """The store's UUIDv4s, small client ids and a UUIDv8 without the mark parse as None."""
        assert parse_record_id(record_id) is None

    @pytest.mark.parametrize("pid, epoch, seq", [(-1, 0, 0), (2**63, 0, 0), (0, -1, 0),
                                                 (0, 2**15, 0), (0, 0, -1), (0, 0, 2**31)])
    def test_out_of_range_is_refused(self, pid: int, epoch: int, seq: int) -> None:
        """Fields outside Kafka's ranges cannot be stored."""
        with pytest.raises(ValueError):
            producer_record_id(pid, epoch, seq, True, True)


class StampTests:

    def test_batch_ids_number_and_mark_the_records(self) -> None:
        """Consecutive sequences (wrapping), first on the first record, last on the last."""
        ids = batch_ids(9, 1, 2**31 - 2, 3)
        marks = [parse_record_id(int.from_bytes(bytes(row), "little")) for row in ids]
        assert marks == [ProducerMark(9, 1, 2**31 - 2, True, False),
                         ProducerMark(9, 1, 2**31 - 1, False, False),
                         ProducerMark(9, 1, 0, False, True)]
        rest = batch_ids(9, 1, 4, 1, first=False)
        assert parse_record_id(int.from_bytes(bytes(rest[0]), "little")) == \
            ProducerMark(9, 1, 4, False, True)

    @pytest.mark.parametrize("pid, epoch, base, count, first", [
        (0, 0, 0, 1, True), (2**63 - 1, 2**15 - 1, 2**31 - 1, 1, False),
        (123456789, 17, 1000, 150, True), (5, 3, 2**31 - 10, 150, False),
        (1, 1, 2**31 - 150, 150, True),
    ])
    def test_batch_ids_are_the_records_ids_one_by_one(self, pid: int, epoch: int, base: int,
                                                      count: int, first: bool) -> None:
        """Each row is ``producer_record_id`` of its record (the scalar reference), also
        across the sequence wrap."""
        ids = batch_ids(pid, epoch, base, count, first=first)
        expected = [producer_record_id(pid, epoch, (base + i) % 2**31, first and i == 0,
                                       i == count - 1).to_bytes(16, "little")
                    for i in range(count)]
        assert [bytes(row) for row in ids] == expected

    @pytest.mark.parametrize("pid, epoch, base", [(-1, 0, 0), (2**63, 0, 0), (0, 2**15, 0),
                                                  (0, -1, 0), (0, 0, 2**31), (0, 0, -1)])
    def test_batch_ids_refuse_fields_out_of_range(self, pid: int, epoch: int, base: int) -> None:
        with pytest.raises(ValueError, match="out of range"):
            batch_ids(pid, epoch, base, 3)

    def test_stamp_ids_sets_only_the_id_fields(self) -> None:
        """Framed records keep every other byte; their ids become the batch's."""
        records = [encode_record(0, 0, 0, 0, b"v%d" % i * i, b"") for i in range(4)]
        framed = b"".join(records)
        starts = [sum(map(len, records[:i])) for i in range(4)]
        stamped = stamp_ids(framed, starts, batch_ids(3, 0, 10, 4))
        for i, start in enumerate(starts):
            mark = parse_record_id(decode_header(bytes(stamped), start).id)
            assert mark is not None and mark.sequence == 10 + i
            assert stamped[start:start + 8] == records[i][:8]
            assert stamped[start + 24:start + len(records[i])] == records[i][24:]
