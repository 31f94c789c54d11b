"""The TANK Consume request (0x02; client versions 0, 2 and 3): spec/tank-notes.md §4.

Owns: ``ConsumeHandlers``: per partition, where the read starts (seq 0 = first
available, 2^64-1 = hw + 1, else seq - 1 as an offset), the boundary fault (seq below the
first available or above hw + 1: 0x01 with first available and hw), the data (committed
records from that offset through ``BrokerCore.fetch_raw``, turned into bundles in bulk by
``codec.records_to_bundles`` with ``base_seq`` = the requested seq, the chunk cut at the
partition's fetch size by ``codec.chunk_within``), unknown topic (u16 0xFFFF) and
partition (0xff), a follower partition (0xfd; 0xfc once ``Context.leader_of`` knows the
leader; served anyway when op_flags bit 0, prefer_local_node, is set), and a storage
failure (0xfb).

The long poll (§4.3): when no partition has data or a fault and ``max_wait`` (normalised
as TANK does: 0 stays 0, else 64 ms steps, at least 320 ms, at most 1 h) is not 0, the
reply waits on the core's long-poll facility (``BrokerCore.wait_for_data``) until the new
data of the waiting partitions reaches ``min_bytes`` (at least one message when 0), or
``max_wait``; partitions still at their end are then answered "EOF, no data" (0x00,
base_seq = first available, hw, no chunk). The handler returns a ``Deferred`` for it, so
the connection goes on serving the requests that follow (replies matched by request id).
A waiting consume holds core watchers of at most one second at a time: a cancelled one
(its connection closed) leaves nothing behind for longer.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

import logging
from typing import Any

from twisted.internet.defer import Deferred

from broker.errors import NotLeader, SkerryError
from broker.tank.codec import (
    U64_MAX,
    Consume,
    ConsumeFlag,
    ConsumePartition,
    ConsumePartitionReply,
    ConsumeReply,
    ConsumeTopicReply,
    UnknownConsumeTopic,
    cap_bytes,
    chunk_within,
    normalise_max_wait,
    records_to_bundles,
)
from broker.tank.errors import consume_flag
from broker.tank.handlers.context import Context
from data.format import dense_prefix

__all__ = ["ConsumeHandlers"]

log = logging.getLogger("skerry.tank")

_PREFER_LOCAL = 0x01
_NO_PARTITION = 0xFFFF
_MAX_READ_MESSAGES = 8192
_WATCH_SLICE_S = 1.0

Wait = tuple[str, int, int]
"""A partition at its end: (topic, partition, the offset to wait for)."""
Entry = ConsumePartitionReply | Wait


class ConsumeHandlers:
    """Consume, now or after a long poll."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.core = ctx.core
        self._sizes: dict[tuple[str, int], int] = {}
        """A partition's stored bytes per record less its header, as last read."""

    def consume(self, req: Consume) -> ConsumeReply | Deferred[ConsumeReply]:
        local = bool(req.op_flags & _PREFER_LOCAL)
        plan: list[tuple[str, int] | None] = []
        entries: list[list[Entry]] = []
        waits: list[tuple[int, int, Wait]] = []
        for t, topic in enumerate(req.topics):
            found = self.ctx.topic(topic.name)
            if any(p.partition == _NO_PARTITION for p in topic.partitions):
                found = None  # 65535 is the reply's unknown-topic marker: no such partition
            plan.append(found)
            row: list[Entry] = []
            if found is not None:
                for p, part in enumerate(topic.partitions):
                    entry = self._partition(found, part, local)
                    if type(entry) is tuple:
                        waits.append((t, p, entry))
                    row.append(entry)
            entries.append(row)
        wait_ms = normalise_max_wait(req.max_wait_ms)
        ready = sum(len(row) for row in entries) - len(waits)
        if not waits or ready or wait_ms == 0 or self.core.closing:
            return self._reply(req, plan, entries)
        return _LongPoll(self, req, plan, entries, waits, wait_ms,
                         cap_bytes(req.min_bytes)).deferred

    # ---------------------------------------------------------------- partitions

    def _partition(self, found: tuple[str, int], part: ConsumePartition, local: bool) -> Entry:
        """One partition's answer now, or a ``Wait`` when it is at its end."""
        name, count = found
        partition = part.partition
        if partition >= count:
            return ConsumePartitionReply(partition, ConsumeFlag.UNKNOWN_PARTITION)
        try:
            if not local and not self.ctx.is_leader(name, partition):
                raise NotLeader(f"{name}/{partition}")
            marks = self.ctx.marks(name, partition)
            seq = part.seq_num
            if seq == 0:
                start = marks.first_offset
            elif seq == U64_MAX:
                start = marks.hw_offset + 1
            else:
                start = seq - 1
            if start == marks.hw_offset + 1:
                return (name, partition, start)
            if start > marks.hw_offset + 1 or start < marks.first_offset:
                return ConsumePartitionReply.boundary_fault(
                    partition, first_available=marks.first_available, hw=marks.hw)
            return self._data(name, partition, start, part.fetch_size)
        except SkerryError as error:
            return self._fault(name, partition, error)
        except (KeyError, IndexError):  # deleted while we looked
            return ConsumePartitionReply(partition, ConsumeFlag.UNKNOWN_PARTITION)

    def _fault(self, name: str, partition: int, error: BaseException) -> ConsumePartitionReply:
        flag = consume_flag(error)
        if flag == ConsumeFlag.NO_LEADER:
            leader = self.ctx.leader_of(name, partition)
            if leader is not None:
                return ConsumePartitionReply(partition, ConsumeFlag.OTHER_LEADER, leader=leader)
        else:
            log.warning("tank: consume of %s/%d failed: %s", name, partition, error)
        return ConsumePartitionReply(partition, flag)

    def _data(self, name: str, partition: int, start: int, fetch_size: int
              ) -> ConsumePartitionReply:
        fetch_size = cap_bytes(fetch_size)
        # A message takes at least its content and 2 bytes in a bundle: the records whose
        # contents fit the fetch size are all a chunk can hold (uncompressed) and a bit more.
        # How many records to look at: from the partition's recent message size when known
        # (the store's index lookup costs per record asked for, not per record read).
        most = min(fetch_size // 2 + 1, _MAX_READ_MESSAGES)
        size = self._sizes.get((name, partition))
        if size is not None:
            most = min(most, 2 * fetch_size // max(size, 1) + 16)
        result, hw, _first = self.core.fetch_raw(
            name, partition, start, most, min(fetch_size, self.ctx.max_read_bytes))
        raw, ends = result.raw, result.ends
        if result.count:
            self._sizes[(name, partition)] = (len(raw) // result.count) - 64
            if result.gapped or result.next_offset - result.count != start:
                # A compacted topic: TANK's plain bundles number messages one after the
                # other from the chunk's base, so the chunk is the first gap-free run.
                start, raw, ends = dense_prefix(raw, ends)
        bundles = records_to_bundles(raw, ends, fetch_size)
        if bundles and len(bundles[0]) >= fetch_size and len(ends) > 1:
            # not even the first bundle fits: send its first message alone, whole
            bundles = records_to_bundles(raw[:ends[0]], ends[:1])
        chunk, _ = chunk_within(bundles, fetch_size)
        return ConsumePartitionReply(partition, ConsumeFlag.OK, start + 1, hw + 1, chunk)

    def eof(self, wait: Wait) -> ConsumePartitionReply:
        """A partition still at its end when the reply goes out."""
        name, partition, _ = wait
        marks = self.ctx.marks(name, partition)
        return ConsumePartitionReply(partition, ConsumeFlag.OK, marks.first_available,
                                     marks.hw)

    def _reply(self, req: Consume, plan: list[tuple[str, int] | None],
               entries: list[list[Entry]], *, again: bool = False) -> ConsumeReply:
        topics: list[ConsumeTopicReply | UnknownConsumeTopic] = []
        for topic, found, row in zip(req.topics, plan, entries, strict=True):
            if found is None:
                topics.append(UnknownConsumeTopic(topic.name, len(topic.partitions)))
                continue
            parts = []
            for part, entry in zip(topic.partitions, row, strict=True):
                if type(entry) is tuple:
                    if again:  # at the end of a long poll: data may have come
                        entry = self._partition(found, part,
                                                bool(req.op_flags & _PREFER_LOCAL))
                    if type(entry) is tuple:
                        entry = self.eof(entry)
                parts.append(entry)
            topics.append(ConsumeTopicReply(topic.name, tuple(parts)))
        return ConsumeReply(req.request_id, tuple(topics))

    def new_bytes(self, wait: Wait, enough: int) -> int:
        """Roughly the bundle bytes committed since a waiting partition's end (stored record
        bytes less their 64-byte headers), counted up to about ``enough``."""
        name, partition, offset = wait
        result, hw, _first = self.core.fetch_raw(name, partition, offset, _MAX_READ_MESSAGES,
                                                 min(enough, self.ctx.max_read_bytes))
        if result.next_offset <= hw:  # the read stopped at its budget: there is enough
            return enough
        return len(result.raw) - 64 * result.count + result.count * 2


class _LongPoll:
    """One consume waiting for data (see the module doc)."""

    def __init__(self, handlers: ConsumeHandlers, req: Consume,
                 plan: list[tuple[str, int] | None], entries: list[list[Entry]],
                 waits: list[tuple[int, int, Wait]], wait_ms: int, min_bytes: int) -> None:
        self.handlers = handlers
        self.core = handlers.core
        self.clock = handlers.ctx.clock
        self.req = req
        self.plan = plan
        self.entries = entries
        self.waits = [w for _, _, w in waits]
        self.min_bytes = max(min_bytes, 1)
        self.done = False
        self.deferred: Deferred[ConsumeReply] = Deferred(self._cancel)
        self.deadline = self.clock.seconds() + wait_ms / 1000.0
        self.timer = self.clock.callLater(wait_ms / 1000.0, self._finish)
        for wait in self.waits:
            self._watch(wait)

    def _watch(self, wait: Wait) -> None:
        remaining = self.deadline - self.clock.seconds()
        if self.done or remaining <= 0:
            return
        name, partition, offset = wait
        ms = max(1, int(min(remaining, _WATCH_SLICE_S) * 1000))
        try:
            d = self.core.wait_for_data(name, partition, offset, ms)
        except Exception:  # noqa: BLE001 - the partition went away: answer now
            self._finish()
            return
        d.addCallback(self._woke, wait)

    def _woke(self, _: Any, wait: Wait) -> None:
        if self.done:
            return
        if self.core.closing:
            self._finish()
            return
        name, partition, offset = wait
        try:
            hw = self.core.hw(name, partition)
            if hw < offset:  # a watch slice ended
                self._watch(wait)
                return
            total = sum(self.handlers.new_bytes(w, self.min_bytes) for w in self.waits)
        except Exception:  # noqa: BLE001 - answered by the final reply's own checks
            self._finish()
            return
        if total >= self.min_bytes:
            self._finish()
        else:
            self._watch((name, partition, hw + 1))

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        if self.timer.active():
            self.timer.cancel()
        try:
            reply = self.handlers._reply(self.req, self.plan, self.entries, again=True)
        except Exception as exc:  # noqa: BLE001 - the dispatcher's boundary answers it
            self.deferred.errback(exc)
            return
        self.deferred.callback(reply)

    def _cancel(self, _: Deferred[ConsumeReply]) -> None:
        self.done = True
        if self.timer.active():
            self.timer.cancel()
