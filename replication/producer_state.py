"""Idempotent producer state of one partition (KIP-98), as Kafka's ProducerStateManager
keeps it: per producer id, its epoch and the metadata of its last five batches.

Owns: the rules a batch from an idempotent producer is checked against (``check``), the
bookkeeping of an appended batch (``append``), rebuilding the state from stored records
(``replay``, ``apply_runs``: the producer fields each record's id carries, found as runs
of one batch by ``data.idempotence``), dropping
producers the log no longer holds or that went idle (``remove_before``, ``expire``), and
the snapshot bytes (``encode_snapshot``, ``decode_snapshot``).

The rules, as a Kafka broker of the current version answers them
(``ProducerAppendInfo.checkSequence`` / ``checkProducerEpoch``,
``UnifiedLog.analyzeAndValidateProducerState``):

1. A batch whose epoch equals the producer's and whose (first, last) sequence range equals
   one of the last five batches is a *duplicate*: it is not appended again and is answered
   with success and the original's base offset (Kafka brokers no longer answer
   DUPLICATE_SEQUENCE_NUMBER; clients treat that code as success anyway).
2. An epoch older than the producer's: ``InvalidProducerEpoch`` (the producer was fenced by
   a newer instance of itself).
3. A newer epoch (an epoch bump) must start at sequence 0 unless the partition knows no
   epoch of this producer; it resets the batches kept.
4. The same epoch: the first sequence must follow the last one
   (``last + 1``, or ``0`` after ``2**31 - 1``): otherwise ``OutOfOrderSequence`` (a gap,
   or a retry older than the five batches kept).
5. An unknown producer (never seen, or removed once the log no longer held its batches) may
   start at any sequence (KIP-360; older brokers answered UNKNOWN_PRODUCER_ID here).

One refinement of Skerry's own: replication copies records, not batches, so a follower
that became leader may hold only the beginning of a batch (its last record is not marked
``last``). A retry of that batch (same epoch and first sequence, a longer range) is
answered as a *continuation*: only the records not yet held are appended, and the answer
carries the original base offset, so no record is written twice.

Must not import: Twisted, ``broker``, files, ``time``. Time is passed in as ``now_ms``.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import xxhash

from data.idempotence import SEQUENCE_MODULUS, ProducerRun, producer_runs_of
from replication.errors import InvalidProducerEpoch, OutOfOrderSequence

__all__ = [
    "BATCHES_RETAINED",
    "NO_EPOCH",
    "NO_SEQUENCE",
    "BatchMetadata",
    "Continuation",
    "ProducerEntry",
    "ProducerStateManager",
    "add_sequence",
    "in_sequence",
    "decode_snapshot",
    "encode_snapshot",
]

BATCHES_RETAINED = 5
"""Batches remembered per producer for deduplication (Kafka's NUM_BATCHES_TO_RETAIN; a
producer keeps at most five requests in flight per partition with idempotence on)."""

NO_EPOCH = -1
NO_SEQUENCE = -1
MAX_SEQUENCE = SEQUENCE_MODULUS - 1


def add_sequence(sequence: int, delta: int) -> int:
    """``sequence + delta`` in Kafka's sequence space (wraps to 0 after ``2**31 - 1``)."""
    return (sequence + delta) % SEQUENCE_MODULUS


def in_sequence(last: int, following: int) -> bool:
    """Does ``following`` come right after ``last``?"""
    return following == last + 1 or (following == 0 and last == MAX_SEQUENCE)


def _span(first_seq: int, last_seq: int) -> int:
    """How many sequence numbers ``first_seq .. last_seq`` covers (wrapping)."""
    return (last_seq - first_seq) % SEQUENCE_MODULUS + 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch: its sequence range, where it went, when (ms), and whether the
    log holds all of it (``complete``) or only its beginning."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int
    complete: bool = True


@dataclass(frozen=True, slots=True)
class Continuation:
    """``check``'s answer for the retry of a batch the log holds only the beginning of:
    ``held`` records are stored already (from ``first_offset``); append the rest."""

    batch: BatchMetadata

    @property
    def held(self) -> int:
        return self.batch.last_offset - self.batch.first_offset + 1


class ProducerEntry:
    """One producer id's state on the partition."""

    __slots__ = ("producer_id", "epoch", "batches", "last_timestamp")

    def __init__(self, producer_id: int, epoch: int = NO_EPOCH) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_RETAINED)
        self.last_timestamp = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The kept batch with exactly this epoch and sequence range (Kafka's
        ``findDuplicateBatch``)."""
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq and batch.complete:
                return batch
        return None

    def add(self, epoch: int, batch: BatchMetadata) -> None:
        """Record an appended batch; an epoch change forgets the older epoch's batches."""
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch
        if self.batches and not self.batches[-1].complete and \
                self.batches[-1].first_offset == batch.first_offset:
            self.batches.pop()  # the continuation of a batch held in part replaces it
        self.batches.append(batch)
        self.last_timestamp = batch.timestamp

    def __repr__(self) -> str:
        return f"ProducerEntry({self.producer_id}, epoch={self.epoch}, {list(self.batches)})"


class ProducerStateManager:
    """The producer state of one partition, valid for the log below ``end_offset`` (the
    offset after the last record applied)."""

    def __init__(self, end_offset: int = 0) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.end_offset = end_offset

    # ------------------------------------------------------------------ the rules

    def check(self, producer_id: int, epoch: int, first_seq: int,
              last_seq: int) -> BatchMetadata | Continuation | None:
        """Check a client's batch before it is appended (module docstring, rules 1-5).

        None: append it. A ``BatchMetadata``: a duplicate of that batch, answer with its
        offsets and append nothing. A ``Continuation``: append only the records after the
        ones held. Raises ``InvalidProducerEpoch`` or ``OutOfOrderSequence``."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return None  # rule 5: any sequence
        duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
        if duplicate is not None:
            return duplicate
        if epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"epoch {epoch} of producer {producer_id} is older than the partition's "
                f"epoch {entry.epoch}")
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_EPOCH:
                raise OutOfOrderSequence(
                    f"sequence {first_seq} for new epoch {epoch} of producer {producer_id}; "
                    f"a new epoch starts at 0")
            return None
        if entry.batches:
            tail = entry.batches[-1]
            if (not tail.complete and first_seq == tail.first_seq
                    and _span(first_seq, last_seq) > _span(tail.first_seq, tail.last_seq)):
                return Continuation(tail)
        if not in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequence(
                f"sequence {first_seq} of producer {producer_id} epoch {epoch}; expected "
                f"{add_sequence(entry.last_seq, 1)}")
        return None

    def append(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp: int,
               complete: bool = True) -> None:
        """Record a batch the log now holds at ``first_offset .. last_offset`` (after
        ``check``, or while replaying records: no rule is checked here, as Kafka does not
        check what it replicates or recovers)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        entry.add(epoch, BatchMetadata(first_seq, last_seq, first_offset, last_offset,
                                       timestamp, complete))
        if last_offset >= self.end_offset:
            self.end_offset = last_offset + 1

    def last_entry(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    # ------------------------------------------------------------------ housekeeping

    def remove_before(self, log_start: int) -> list[int]:
        """Forget the producers whose every batch is below ``log_start`` (retention or a
        deletion removed them; Kafka's rule). Their ids, sorted."""
        gone = sorted(pid for pid, entry in self.producers.items()
                      if entry.last_offset < log_start)
        for pid in gone:
            del self.producers[pid]
        return gone

    def expire(self, now_ms: int, idle_ms: int) -> list[int]:
        """Forget the producers that appended nothing for ``idle_ms`` (Kafka's
        ``producer.id.expiration.ms``, a day by default). Their ids, sorted."""
        gone = sorted(pid for pid, entry in self.producers.items()
                      if entry.last_timestamp < now_ms - idle_ms)
        for pid in gone:
            del self.producers[pid]
        return gone

    # ------------------------------------------------------------------ rebuilding

    def replay(self, records: Iterable[tuple[int, int, int]]) -> None:
        """Apply stored records ``(offset, id, timestamp_ms)``, in offset order from
        ``end_offset`` (``apply_runs`` of their ``data.idempotence.producer_runs_of``)."""
        runs, _count, end = producer_runs_of(records)
        self.apply_runs(runs, end)

    def apply_runs(self, runs: Iterable[ProducerRun], end: int, *,
                   timestamp_us: bool = False) -> None:
        """Apply the producer runs of stored records (``data.idempotence.producer_runs``),
        in offset order from ``end_offset``; ``end`` is the offset after the last record
        (records without producer ids move it too). A run that ``ends`` is a whole batch,
        one that does not a batch held in part; a run that does not start and continues
        the last batch held in part of its producer (a continuation appended after a
        failover) extends that batch. ``timestamp_us``: the runs carry stored timestamps
        (microseconds), kept in milliseconds."""
        producers = self.producers
        for first_off, last_off, pid, epoch, first_seq, last_seq, starts, ends, ts in runs:
            if not starts:
                entry = producers.get(pid)
                if entry is not None and entry.batches and entry.epoch == epoch:
                    tail = entry.batches[-1]
                    if (not tail.complete and tail.last_offset + 1 == first_off
                            and in_sequence(tail.last_seq, first_seq)):
                        first_seq, first_off = tail.first_seq, tail.first_offset
            self.append(pid, epoch, first_seq, last_seq, first_off, last_off,
                        ts // 1000 if timestamp_us else ts, ends)
        if end > self.end_offset:
            self.end_offset = end

    # ------------------------------------------------------------------ snapshots

    def __iter__(self) -> Iterator[ProducerEntry]:
        return iter(self.producers.values())


_SNAP_HEAD = struct.Struct("<4sHQI")  # magic, version, end_offset, producers
_SNAP_ENTRY = struct.Struct("<qhqB")  # producer id, epoch, last timestamp, batches
_SNAP_BATCH = struct.Struct("<iiqqqB")  # first/last seq, first/last offset, timestamp, complete
_SNAP_SUM = struct.Struct("<Q")
_SNAP_MAGIC = b"SKPS"
_SNAP_VERSION = 1


def encode_snapshot(state: ProducerStateManager) -> bytes:
    """The state as snapshot bytes (little-endian)::

        "SKPS" version:u16 end_offset:u64 producers:u32
        ( producer_id:i64 epoch:i16 last_timestamp:i64 batches:u8
          ( first_seq:i32 last_seq:i32 first_offset:i64 last_offset:i64 timestamp:i64
            complete:u8 ){batches} ){producers}
        checksum:u64                  -- xxh3_64 of every byte before it
    """
    parts = [_SNAP_HEAD.pack(_SNAP_MAGIC, _SNAP_VERSION, state.end_offset,
                             len(state.producers))]
    for entry in sorted(state.producers.values(), key=lambda e: e.producer_id):
        parts.append(_SNAP_ENTRY.pack(entry.producer_id, entry.epoch, entry.last_timestamp,
                                      len(entry.batches)))
        for b in entry.batches:
            parts.append(_SNAP_BATCH.pack(b.first_seq, b.last_seq, b.first_offset,
                                          b.last_offset, b.timestamp, int(b.complete)))
    body = b"".join(parts)
    return body + _SNAP_SUM.pack(xxhash.xxh3_64_intdigest(body))


def decode_snapshot(raw: bytes) -> ProducerStateManager:
    """The state a snapshot holds; ``ValueError`` for bytes that are not one (wrong magic
    or version, a bad checksum, a short or long body)."""
    if len(raw) < _SNAP_HEAD.size + _SNAP_SUM.size:
        raise ValueError("producer snapshot too short")
    body, (checksum,) = raw[:-_SNAP_SUM.size], _SNAP_SUM.unpack(raw[-_SNAP_SUM.size:])
    if xxhash.xxh3_64_intdigest(body) != checksum:
        raise ValueError("producer snapshot checksum mismatch")
    magic, version, end_offset, count = _SNAP_HEAD.unpack_from(body, 0)
    if magic != _SNAP_MAGIC or version != _SNAP_VERSION:
        raise ValueError(f"not a producer snapshot of version {_SNAP_VERSION}")
    state = ProducerStateManager(end_offset)
    pos = _SNAP_HEAD.size
    try:
        for _ in range(count):
            pid, epoch, last_ts, nbatches = _SNAP_ENTRY.unpack_from(body, pos)
            pos += _SNAP_ENTRY.size
            entry = state.producers[pid] = ProducerEntry(pid, epoch)
            for _ in range(nbatches):
                fs, ls, fo, lo, ts, complete = _SNAP_BATCH.unpack_from(body, pos)
                pos += _SNAP_BATCH.size
                entry.batches.append(BatchMetadata(fs, ls, fo, lo, ts, bool(complete)))
            entry.last_timestamp = last_ts
    except struct.error as exc:
        raise ValueError(f"producer snapshot truncated: {exc}") from None
    if pos != len(body):
        raise ValueError("producer snapshot has trailing bytes")
    return state
