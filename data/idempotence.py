"""The producer fields a stored record's id carries: Kafka's idempotent producer (KIP-98)
needs each batch's producer id, epoch and sequence numbers kept with the records, so that
producer state can be rebuilt from the log after a restart and on a follower that becomes
leader (it holds the same records, ids included: replication copies records unchanged).

Owns: the layout of a *producer id* (``producer_record_id``, ``parse_record_id``), finding
the producers' batches in stored records (``producer_runs``: compiled, ``data/_cspeedups.c``,
with its pure-Python twin ``_producer_runs_py``; ``producer_runs_of`` for decoded records),
and the numpy helpers that stamp a framed batch with them (``batch_ids``; ``stamp_ids``, the
reference the produce path's one-pass ``data.writer.stamp_framed_with_ids`` is tested
against). Nothing else in a record changes: ``reserved`` stays 0, user headers stay the
user's.

The id is a UUIDv8 (RFC 9562, "custom") as a u128 in ``uuid.UUID(int=...)`` layout:
version nibble 8 in bits 76..79, variant ``0b10`` in bits 62..63 (the store's own ids are
UUIDv4, so the two never meet). The 122 other bits hold, from the least significant::

    last:1  first:1  sequence:31  epoch:16  producer_id:64  mark:9 (= 0x1a5)

spread over the free bits in order: bits 0..61, then 64..75, then 80..127. ``first`` marks
a batch's first record and ``last`` its last one (one record: both), so a batch's extent is
known from its records alone, and a batch cut short (a follower that copied part of a
batch, then became leader) is told apart from a whole one.

Must not import: Twisted, anything of ``broker``, any data module but ``data.speedups``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from data import speedups

__all__ = ["ProducerMark", "ProducerRun", "producer_record_id", "parse_record_id",
           "producer_runs", "producer_runs_of", "batch_ids", "stamp_ids", "SEQUENCE_MODULUS"]

SEQUENCE_MODULUS = 1 << 31
"""Sequence numbers are non-negative int32s and wrap to 0 after ``2**31 - 1``."""

_MARK = 0x1A5
_LOW_BITS = 62
_MID_BITS = 12
_VERSION_VARIANT = (8 << 76) | (0b10 << 62)
_FIXED_MASK = (0xF << 76) | (0b11 << 62)
_LOW_MASK = (1 << _LOW_BITS) - 1
_MID_MASK = (1 << _MID_BITS) - 1
_ID_OFFSET = 8  # data.format.ID_OFFSET (kept literal: this module is a leaf too)
_HEAD = struct.Struct("<8xQQQQ8xII8x")  # data.format's record header: id, offset, timestamp, lengths
_HEADER_SIZE = 64
_ONE, _TWO, _MODULUS = np.uint64(1), np.uint64(2), np.uint64(SEQUENCE_MODULUS)


class ProducerMark(NamedTuple):
    """What a producer-stamped record id says."""

    producer_id: int
    epoch: int
    sequence: int
    first: bool
    last: bool


def _payload(producer_id: int, epoch: int, sequence: int, first: bool, last: bool) -> int:
    return ((((_MARK << 64 | producer_id) << 16 | epoch) << 31 | sequence) << 2
            | (2 if first else 0) | (1 if last else 0))


def _spread(payload: int) -> int:
    low = payload & _LOW_MASK
    mid = (payload >> _LOW_BITS) & _MID_MASK
    high = payload >> (_LOW_BITS + _MID_BITS)
    return high << 80 | mid << 64 | low | _VERSION_VARIANT


def producer_record_id(producer_id: int, epoch: int, sequence: int, first: bool,
                       last: bool) -> int:
    """The u128 id of a record that producer ``producer_id`` (0..2**63-1) wrote with epoch
    ``epoch`` (0..32767) and sequence number ``sequence`` (0..2**31-1)."""
    if not (0 <= producer_id < 1 << 63 and 0 <= epoch < 1 << 15
            and 0 <= sequence < SEQUENCE_MODULUS):
        raise ValueError(f"producer fields out of range: id {producer_id}, epoch {epoch}, "
                         f"sequence {sequence}")
    return _spread(_payload(producer_id, epoch, sequence, first, last))


def parse_record_id(record_id: int) -> ProducerMark | None:
    """The producer fields of a record id, or None when the id is not a producer id (a
    random UUIDv4, a client's own id)."""
    if record_id & _FIXED_MASK != _VERSION_VARIANT:
        return None
    payload = ((record_id >> 80) << (_LOW_BITS + _MID_BITS)
               | ((record_id >> 64) & _MID_MASK) << _LOW_BITS | (record_id & _LOW_MASK))
    if payload >> 113 != _MARK:
        return None
    return ProducerMark((payload >> 49) & ((1 << 64) - 1), (payload >> 33) & 0xFFFF,
                        (payload >> 2) & (SEQUENCE_MODULUS - 1), bool(payload & 2),
                        bool(payload & 1))


def batch_ids(producer_id: int, epoch: int, base_sequence: int, count: int, *,
              first: bool = True) -> np.ndarray:
    """The ids of ``count`` consecutive records of one batch as a ``(count, 16)`` uint8
    array (little-endian u128s): sequences ``base_sequence, base_sequence + 1, ...``
    wrapping at ``2**31``, the first record marked ``first`` (unless ``first=False``: the
    rest of a batch whose beginning is already stored) and the last one ``last``."""
    if count <= 0:
        return np.zeros((0, 16), np.uint8)
    if not (0 <= producer_id < 1 << 63 and 0 <= epoch < 1 << 15
            and 0 <= base_sequence < SEQUENCE_MODULUS):
        producer_record_id(producer_id, epoch, base_sequence, False, False)  # raises
    base = _spread(_payload(producer_id, epoch, 0, False, False))
    # Sequence and flags live in the low 33 bits, all inside the low u64 (few numpy calls:
    # this runs once per idempotent batch on the produce path).
    words = np.empty((count, 2), "<u8")
    low = words[:, 0]
    end = base_sequence + count
    if end <= SEQUENCE_MODULUS:
        low[:] = np.arange(base_sequence, end, dtype=np.uint64)
    else:
        low[:] = (np.arange(count, dtype=np.uint64) + np.uint64(base_sequence)) % _MODULUS
    low <<= _TWO
    low |= np.uint64(base & ((1 << 64) - 1))
    words[:, 1] = base >> 64
    if first:
        low[0] |= _TWO
    low[-1] |= _ONE
    return words.view(np.uint8).reshape(count, 16)


def stamp_ids(messages: bytes | bytearray, starts: Sequence[int] | np.ndarray,
              ids: np.ndarray) -> bytearray:
    """A copy of framed records ``messages`` (records starting at ``starts``) whose id
    fields are ``ids`` (``batch_ids``' shape). The checksum is left for the store to
    compute, as it is for every framed batch."""
    out = bytearray(messages)
    view = np.frombuffer(out, np.uint8)
    at = np.asarray(starts, dtype=np.int64)[:, None] + _ID_OFFSET + np.arange(16)
    view[at] = ids
    return out


ProducerRun = tuple[int, int, int, int, int, int, bool, bool, int]
"""One run of records that continue each other (``producer_runs``): ``(first_offset,
last_offset, producer_id, epoch, first_seq, last_seq, starts, ends, timestamp)``: ``starts``
when its first record is marked ``first``, ``ends`` when its last one is marked ``last``,
``timestamp`` the last record's."""


def producer_runs_of(records: Iterable[tuple[int, int, int]]
                     ) -> tuple[list[ProducerRun], int, int]:
    """The runs of producer batches in records ``(offset, id, timestamp)`` given in offset
    order, with how many records there were and the last one's offset + 1 (0 for none).

    A run is as long as each record continues the one before it: both carry producer ids,
    of the same producer and epoch, at consecutive offsets and sequences, the earlier not
    marked ``last`` and the later not marked ``first``. Records without a producer id end
    a run and are otherwise only counted. A whole batch is one run that ``starts`` and
    ``ends``; a batch cut short (a follower that copied part of it) is a run that does not
    end; the rest of it, appended after a failover, a run that does not start."""
    runs: list[ProducerRun] = []
    run: list[int] | None = None  # [first_off, last_off, pid, epoch, first_seq, last_seq, ts]
    starts = ends = False
    count = end = 0
    for offset, record_id, timestamp in records:
        count += 1
        end = offset + 1
        mark = parse_record_id(record_id)
        if run is not None and (
                mark is None or mark.first or mark.producer_id != run[2]
                or mark.epoch != run[3] or offset != run[1] + 1
                or mark.sequence != (run[5] + 1) % SEQUENCE_MODULUS):
            runs.append((run[0], run[1], run[2], run[3], run[4], run[5], starts, ends, run[6]))
            run = None
        if mark is None:
            continue
        if run is None:
            run = [offset, offset, mark.producer_id, mark.epoch, mark.sequence, mark.sequence,
                   timestamp]
            starts = mark.first
        run[1], run[5], run[6] = offset, mark.sequence, timestamp
        ends = mark.last
        if ends:
            runs.append((run[0], run[1], run[2], run[3], run[4], run[5], starts, ends, run[6]))
            run = None
    if run is not None:
        runs.append((run[0], run[1], run[2], run[3], run[4], run[5], starts, ends, run[6]))
    return runs, count, end


def _producer_runs_py(data: bytes | bytearray | memoryview
                      ) -> tuple[list[ProducerRun], int, int]:
    """``producer_runs_of`` over stored records (``data.format``'s layout, already checked:
    only their framing is looked at). ``ValueError`` for a partial record."""
    view = memoryview(data)
    total, pos = len(view), 0
    rows: list[tuple[int, int, int]] = []
    while pos < total:
        if total - pos < _HEADER_SIZE:
            raise ValueError(f"partial record header at byte {pos}")
        lo, hi, offset, timestamp, headers_len, payload_len = _HEAD.unpack_from(view, pos)
        size = _HEADER_SIZE + headers_len + payload_len
        if size > total - pos:
            raise ValueError(f"partial record at byte {pos}")
        rows.append((offset, hi << 64 | lo, timestamp))
        pos += size
    return producer_runs_of(rows)


producer_runs = (speedups.compiled.producer_runs if speedups.compiled is not None
                 and hasattr(speedups.compiled, "producer_runs") else _producer_runs_py)
"""``(runs, count, end)`` of the stored records ``data`` (``producer_runs_of``'s answer;
compiled when ``data.speedups`` allows, else ``_producer_runs_py``)."""
