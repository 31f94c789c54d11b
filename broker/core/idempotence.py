"""Kafka's idempotent producer state in the core: one ``ProducerStateManager``
(``replication.producer_state``) per partition this broker writes to, loaded when first
needed and kept across restarts.

Owns: ``ProducerBatch`` (the producer fields of one produced batch), ``ProducerStateStore``
(where snapshots are kept: the interface issue 27 swaps for its replicated internal topic)
and its implementation beside the segments (``LogSnapshotStore``), and ``ProducerStates``:

* **load**: the newest snapshot at or below the log end, then the records after it replayed
  (each record's id carries its batch's producer fields, ``data.idempotence``); with no
  usable snapshot, the whole retained log. The same happens on a follower that becomes
  leader (``forget`` runs on every role change), so a batch retried after a failover is
  recognised from the replicated records.
* **catch-up**: a state behind the log end (records appended without this class: plain
  produces between idempotent ones) replays the difference before it answers.
* **followers**: every replica keeps the state of its own log, as Kafka's do. A follower
  applies the records it copies (``copied``: the producer runs of the copied bytes, found
  by the compiled scan ``data.idempotence.producer_runs``) and snapshots at its own rolls,
  so a follower that becomes leader loads the snapshot of its last roll and replays at most
  its active segment.
* **housekeeping**: producers whose batches retention removed, or idle for
  ``idle_ms`` (Kafka's ``producer.id.expiration.ms``, one day), are forgotten.
* **snapshots**: written when the log rolls a segment (as Kafka does), on a leader and on
  a follower, and at a clean stop.

``replayed`` counts the records read back from the log to rebuild states (tests, benches).

Must not import: transports, Twisted's reactor, sockets, files (the snapshot bytes go
through the ``ProducerStateStore``; ``LogSnapshotStore`` reaches them through the
partition log's own methods).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from data.idempotence import producer_runs
from data.log import PartitionLog
from replication.producer_state import ProducerStateManager, decode_snapshot, encode_snapshot

__all__ = ["ProducerBatch", "ProducerStateStore", "LogSnapshotStore", "ProducerStates",
           "PRODUCER_IDLE_MS"]

log = logging.getLogger("skerry.core")

PRODUCER_IDLE_MS = 86_400_000
"""Kafka's ``producer.id.expiration.ms`` default: a producer idle this long is forgotten."""

_EXPIRE_EVERY_MS = 60_000
_READ_CHUNK = 8_192


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """The producer fields of one batch (Kafka record batch v2): its producer id, epoch and
    the sequence number of its first record."""

    producer_id: int
    epoch: int
    base_sequence: int


class ProducerStateStore(Protocol):
    """Where a partition's producer snapshot is kept."""

    def load(self, topic: str, partition: int, plog: PartitionLog) -> tuple[int, bytes] | None:
        """The newest snapshot ``(offset, bytes)`` at or below the log end, or None."""
        ...

    def save(self, topic: str, partition: int, plog: PartitionLog, offset: int,
             data: bytes) -> None:
        """Keep ``data`` as the state as of ``offset``."""
        ...


class LogSnapshotStore:
    """Snapshots as ``<offset>.producers`` files beside the partition's segments
    (``PartitionLog.save_producer_snapshot``)."""

    def load(self, topic: str, partition: int, plog: PartitionLog) -> tuple[int, bytes] | None:
        return plog.load_producer_snapshot()

    def save(self, topic: str, partition: int, plog: PartitionLog, offset: int,
             data: bytes) -> None:
        plog.save_producer_snapshot(offset, data)


class _Slot:
    __slots__ = ("log", "state", "segments", "expired_at", "log_start")

    def __init__(self, plog: PartitionLog, state: ProducerStateManager, now_ms: int) -> None:
        self.log = plog
        self.state = state
        self.segments = plog.segment_count
        self.expired_at = now_ms
        self.log_start = -1  # the log start producers were last pruned at


class ProducerStates:
    """The producer state of every partition an idempotent producer wrote to since start."""

    def __init__(self, store: ProducerStateStore, now_ms: Callable[[], int], *,
                 idle_ms: int = PRODUCER_IDLE_MS) -> None:
        self._store = store
        self._now_ms = now_ms
        self._idle_ms = idle_ms
        self._slots: dict[tuple[str, int], _Slot] = {}
        self.replayed = 0
        """Records read back from the logs to rebuild or catch up states, since start."""

    def state(self, topic: str, partition: int, plog: PartitionLog) -> ProducerStateManager:
        """The partition's state, valid up to the log end (loaded, caught up, tidied)."""
        key = (topic, partition)
        slot = self._slots.get(key)
        now = self._now_ms()
        if slot is None or slot.log is not plog or slot.state.end_offset > plog.next_offset:
            slot = self._slots[key] = _Slot(plog, self._load(topic, partition, plog), now)
        state = slot.state
        if state.end_offset < plog.next_offset:
            self.replayed += _replay(state, plog)
        if now - slot.expired_at >= _EXPIRE_EVERY_MS:
            slot.expired_at = now
            state.expire(now, self._idle_ms)
        if plog.first_offset != slot.log_start:  # retention moved the start: prune
            slot.log_start = plog.first_offset
            state.remove_before(plog.first_offset)
        return state

    def _load(self, topic: str, partition: int, plog: PartitionLog) -> ProducerStateManager:
        found = self._store.load(topic, partition, plog)
        if found is not None:
            offset, data = found
            try:
                state = decode_snapshot(data)
            except ValueError as exc:
                log.warning("%s/%d: producer snapshot at %d unusable (%s); rebuilding from "
                            "the log", topic, partition, offset, exc)
            else:
                if state.end_offset == offset and offset <= plog.next_offset:
                    return state
        return ProducerStateManager(plog.first_offset)

    def appended(self, topic: str, partition: int, plog: PartitionLog) -> None:
        """After an append: snapshot the state when the log rolled a segment."""
        slot = self._slots.get((topic, partition))
        if slot is None or slot.log is not plog or plog.segment_count == slot.segments:
            return
        slot.segments = plog.segment_count
        self._save(topic, partition, slot)

    def _save(self, topic: str, partition: int, slot: _Slot) -> None:
        state = slot.state
        if state.end_offset < slot.log.next_offset:
            self.replayed += _replay(state, slot.log)
        try:
            self._store.save(topic, partition, slot.log, state.end_offset,
                             encode_snapshot(state))
        except (OSError, ValueError) as exc:  # a snapshot is an optimisation: log, go on
            log.warning("%s/%d: producer snapshot not written: %s", topic, partition, exc)

    def copied(self, topic: str, partition: int, plog: PartitionLog, first: int,
               data: bytes) -> None:
        """A follower appended ``data`` (stored records, the first at offset ``first``)
        copied from its leader: keep the state current, and snapshot it when the log rolled
        a segment. A state that does not end at ``first`` is behind (it catches up from the
        log) or was left past a truncation (it is loaded again)."""
        key = (topic, partition)
        slot = self._slots.get(key)
        if slot is None or slot.log is not plog or slot.state.end_offset > first:
            slot = self._slots[key] = _Slot(plog, self._load(topic, partition, plog),
                                            self._now_ms())
        state = slot.state
        if state.end_offset == first:
            runs, _count, end = producer_runs(data)
            state.apply_runs(runs, end, timestamp_us=True)
        if state.end_offset < plog.next_offset:
            self.replayed += _replay(state, plog)
        if plog.segment_count != slot.segments:
            slot.segments = plog.segment_count
            self._save(topic, partition, slot)

    def save_all(self) -> None:
        """Snapshot every state whose log is still open (a clean stop)."""
        for (topic, partition), slot in list(self._slots.items()):
            if not slot.log.closed and slot.log.failed is None:
                self._save(topic, partition, slot)

    def forget(self, topic: str, partition: int) -> None:
        """Drop the partition's state (its role changed: the log may have taken another
        leader's records or been truncated); loaded again at its next use."""
        self._slots.pop((topic, partition), None)

    def forget_topic(self, topic: str) -> None:
        """Drop the states of a deleted topic's partitions."""
        for key in [key for key in self._slots if key[0] == topic]:
            del self._slots[key]


def _replay(state: ProducerStateManager, plog: PartitionLog) -> int:
    """Apply the records from the state's end to the log end; how many were read."""
    at = max(state.end_offset, plog.first_offset)
    state.end_offset = max(state.end_offset, at)
    read = 0
    while at < plog.next_offset:
        result = plog.read_raw(at, _READ_CHUNK, 64 << 20, ends_array=True)
        if not result.count:
            break
        runs, count, _end = producer_runs(result.raw)
        state.apply_runs(runs, result.next_offset, timestamp_us=True)
        read += count
        at = result.next_offset
    return read
