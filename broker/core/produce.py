"""The produce pipeline: where every transport's produce ends, from the call to the answer
once the messages are as durable as ``acks`` asks.

Every entry resolves the topic the same way (``Topics.resolve``: auto-created when the
transport's request may create and ``auto_create_topics`` allows), checks the write
refusals once (``Topics.check_writable``: NotLeader, a failed partition; refusals that
change nothing raise at once), makes one store append per partition, and is answered by
one rule, ``_when_durable``: ``0`` (and ``1`` unless ``storage.fsync`` is ``always``) at
once; ``1`` with fsync ``always`` once the group committer's fsync covers the messages
(``durability.py``: one fsync per partition covers every append waiting at that moment);
``all`` once the replication service reports them committed by the in-sync replicas. Every
answer carries a ``ProduceResult``'s fields.

Messages one at a time (``produce_to``: a V1 PRODUCE; ``produce_run``: the V1 fast path's
run of one topic and acks level): the partition is picked by the key's FNV-1a hash unless
given; the message joins its partition's ``_Batch`` for this reactor turn (whatever
connection sent it), and the first message of a turn schedules ``flush`` with
``callLater(0)``; ``flush`` appends each partition's batch (``PartitionLog.append``).
Answers go to the ``ProduceSink`` (the connection), one ``drain`` per sink per group of
answers.

Whole batches (``produce_framed``: Kafka's Produce, Iggy's SendMessages, TANK's produce,
records already framed; ``produce_keyed_batch``: V1 PRODUCE_BATCH) skip the per-turn batch:
one store append per request, answered once through a ``ProduceCallback``. Idempotent produces (``pid``/``seq``) consult ``producers.Producers``; a
framed batch of a Kafka idempotent producer (``produce_framed`` with a ``ProducerBatch``)
is checked against and recorded in ``idempotence.ProducerStates`` (KIP-98: fencing,
sequence checks, the last five batches deduplicated), its records' ids carrying its
producer fields (``data.idempotence``).

Must not import: transports, sockets, files (the store's logs are reached through the
``Topics`` passed in). Time comes from the injected ``clock``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from operator import itemgetter
from typing import Any

from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.python.failure import Failure

from broker.core.idempotence import ProducerBatch, ProducerStates
from broker.core.ports import Committer, CoreMetrics, ProduceSink, ReplicationView
from broker.core.producers import (
    Producers,
    ProducerState,
    check_next,
    no_longer_retained,
    producer_headers,
)
from broker.core.topics import Topics
from broker.errors import BadRequest, SkerryError, StorageError
from data.errors import KeyRequired
from data.format import HEADER, HEADER_SIZE, key_header, keyless_framed
from data.idempotence import batch_ids, stamp_ids
from data.keys import fnv1a_32
from data.log import PartitionLog
from replication.producer_state import BatchMetadata, Continuation, add_sequence

__all__ = ["ProduceCallback", "ProducePipeline", "ProduceResult", "fnv1a_32"]

log = logging.getLogger("skerry.core")

@dataclass(frozen=True, slots=True)
class ProduceResult:
    """What every produce answers: ``count`` messages went to offsets ``offset .. offset +
    count - 1`` of ``partition`` and the high watermark was ``hw`` when it was answered.
    ``duplicates``: an idempotent resend's first messages the partition already held (not
    appended again); with ``count == 0`` (a resend held entirely) ``offset`` is where its
    first message went originally."""

    partition: int
    offset: int
    hw: int
    count: int = 1
    duplicates: int = 0


ProduceCallback = Callable[[ProduceResult | SkerryError], None]
"""How a whole batch is answered (``produce_framed``, ``produce_keyed_batch``): once, with a
``ProduceResult`` or the ``SkerryError`` that failed it, once it is as durable as ``acks``
asks. The per-message entries (``produce_to``, ``produce_run``) answer the same fields
through a ``ProduceSink`` instead (``produced(token, partition, offset, hw, error)``, then
``drain``): its answers for one connection come in bulk, without a callable per message."""


class _Batch:
    """Messages for one partition collected during one reactor turn."""

    __slots__ = ("topic", "partition", "log", "payloads", "headers", "acks", "sinks",
                 "tokens", "mixed", "idem")

    def __init__(self, topic: str, partition: int, plog: PartitionLog, acks: str) -> None:
        self.topic = topic
        self.partition = partition
        self.log = plog
        self.payloads: list[bytes] = []
        self.headers: list[bytes] = []
        self.acks: list[str] = []
        self.sinks: list[ProduceSink] = []
        self.tokens: list[Any] = []
        self.mixed = False  # True once two acks levels share the batch
        self.idem: list[tuple[int, str, int]] = []  # (index, pid, seq) of idempotent ones

    def add(self, value: bytes, header: bytes, acks: str, sink: ProduceSink,
            token: Any) -> None:
        """Queue one message."""
        if not self.mixed and self.acks and self.acks[0] != acks:
            self.mixed = True
        self.payloads.append(value)
        self.headers.append(header)
        self.acks.append(acks)
        self.sinks.append(sink)
        self.tokens.append(token)


class ProducePipeline:
    """Appends produced messages and answers them by ``acks``."""

    def __init__(self, topics: Topics, clock: IReactorTime, replication: ReplicationView,
                 committer: Committer, producers: Producers, *, fsync: str,
                 hw: Callable[[str, int], int],
                 notify_hw: Callable[[str, int], None],
                 producer_states: ProducerStates | None = None) -> None:
        """``hw`` reads a partition's high watermark; ``notify_hw`` wakes the long polls
        of a partition whose ``hw`` may have moved; ``fsync`` is ``storage.fsync``."""
        self._topics = topics
        self._by_name = topics.by_name
        self._clock = clock
        self._replication = replication
        self._committer = committer
        self._producers = producers
        self._producer_states = producer_states
        self._fsync = fsync
        self._hw = hw
        self._hw_changed = notify_hw
        self._batches: dict[tuple[str, int], _Batch] = {}
        self._flush_call: IDelayedCall | None = None
        self._key_cache: dict[bytes, tuple[int, bytes]] = {}
        self.metrics: CoreMetrics | None = None

    # ---------------------------------------------------------------- one message at a time

    def _key_info(self, key: bytes) -> tuple[int, bytes]:
        """(FNV-1a hash, user-header bytes) of a key, cached: keys repeat."""
        cache = self._key_cache
        info = cache.get(key)
        if info is None:
            if len(cache) > 65536:
                cache.clear()
            info = cache[key] = (fnv1a_32(key), key_header(key) if key else b"")
        return info

    def partition_for_key(self, key: bytes, partitions: int) -> int:
        """The partition a key goes to among ``partitions`` (FNV-1a, as V1 clients hash)."""
        return self._key_info(key)[0] % partitions

    def produce_to(self, topic_name: str, partition: int | None, key: bytes, value: bytes,
                   acks: str, sink: ProduceSink, token: Any, pid: str | None = None,
                   seq: int | None = None) -> None:
        """Queue one message for this turn's append; the result goes to ``sink``.

        Refusals that change nothing (unknown topic with auto-create off, partition out of
        range, NOT_LEADER, a failed partition) raise at once instead.

        With ``pid`` and ``seq`` (idempotent produce) a sequence number the partition already
        holds for that producer is not appended again: the sink gets the original offset, once
        that message is as durable as ``acks`` asks. A sequence beyond the next one expected
        (a gap) is BAD_REQUEST; an unknown producer may start at any sequence.
        """
        if pid is not None and seq is not None:
            if not key:
                self._refuse_keyless(topic_name)
            self._idempotent(topic_name, partition, key, value, acks, sink, token, pid, seq)
            return
        topic = self._by_name.get(topic_name)
        if topic is None or partition is not None:
            topic = self._topics.resolve(topic_name, partition, True)
        if not key and topic.config.cleanup_policy != "delete":  # compacted: needs keys
            self._refuse_keyless(topic_name)
        hashed, header = self._key_info(key)
        if partition is None:
            partition = hashed % topic.config.partitions
        batch = self._batches.get((topic_name, partition))
        if batch is None:
            plog = topic.partitions[partition]
            self._topics.check_writable(topic_name, partition, plog)
            batch = self._new_batch(topic_name, partition, plog, acks)
        elif not batch.mixed and batch.acks[0] != acks:
            batch.mixed = True
        # _Batch.add inlined: this runs once per message.
        batch.payloads.append(value)
        batch.headers.append(header)
        batch.acks.append(acks)
        batch.sinks.append(sink)
        batch.tokens.append(token)

    def produce_run(self, topic_name: str, keys: Sequence[bytes], values: Sequence[bytes],
                    acks: str, sink: ProduceSink, tokens: Sequence[Any]) -> None:
        """``produce_to`` for each message of a run, in order, in one call: one topic, one
        ``acks``, partitions by key, no ``pid``/``seq`` (a pipelined client's read).

        Every refusal is checked before anything is queued: when one raises, no message of
        the run was queued (the caller then goes message by message, so each gets its own
        answer, as ``produce_to`` gives it)."""
        topic = self._by_name.get(topic_name)
        if topic is None:
            topic = self._topics.resolve(topic_name, None, True)
        if topic.config.compacted and not all(keys):
            self._refuse_keyless(topic_name)
        infos = list(map(self._key_cache.get, keys))  # keys repeat: C-level lookups
        if None in infos:
            key_info = self._key_info
            infos = [key_info(key) if info is None else info for info, key in zip(infos, keys, strict=True)]
        count = topic.config.partitions
        if count == 1:
            runs = {0: (values, list(map(itemgetter(1), infos)), tokens)}
        else:
            split: dict[int, tuple[list[bytes], list[bytes], list[Any]]] = {}
            for (hashed, header), value, token in zip(infos, values, tokens, strict=True):
                part = split.get(hashed % count)
                if part is None:
                    part = split[hashed % count] = ([], [], [])
                part[0].append(value)
                part[1].append(header)
                part[2].append(token)
            runs = split  # type: ignore[assignment]
        batches = self._batches
        for partition in runs:
            if (topic_name, partition) not in batches:
                self._topics.check_writable(topic_name, partition, topic.partitions[partition])
        for partition, (payloads, headers, run_tokens) in runs.items():
            batch = batches.get((topic_name, partition))
            if batch is None:
                batch = self._new_batch(topic_name, partition, topic.partitions[partition], acks)
            elif not batch.mixed and batch.acks[0] != acks:
                batch.mixed = True
            n = len(payloads)
            batch.payloads.extend(payloads)
            batch.headers.extend(headers)
            batch.acks.extend(repeat(acks, n))
            batch.sinks.extend(repeat(sink, n))
            batch.tokens.extend(run_tokens)

    def _refuse_keyless(self, topic_name: str) -> None:
        """``KeyRequired`` when ``topic_name`` is compacted (a keyless message is coming)."""
        topic = self._by_name.get(topic_name)
        if topic is not None and topic.config.compacted:
            raise KeyRequired(f"topic {topic_name} is compacted (cleanup_policy "
                              f"{topic.config.cleanup_policy}): every message needs a key")

    def _new_batch(self, topic_name: str, partition: int, plog: PartitionLog,
                   acks: str) -> _Batch:
        """Start this turn's batch of a partition (and the turn's flush, if not yet)."""
        batch = self._batches[(topic_name, partition)] = _Batch(topic_name, partition, plog, acks)
        if self._flush_call is None:
            self._flush_call = self._clock.callLater(0, self.flush)
        return batch

    def _idempotent(self, topic_name: str, partition: int | None, key: bytes, value: bytes,
                    acks: str, sink: ProduceSink, token: Any, pid: str, seq: int) -> None:
        """Queue one idempotent produce, or answer it as a duplicate of what the log holds."""
        topic = self._topics.resolve(topic_name, partition, True)
        if partition is None:
            partition = self._key_info(key)[0] % topic.config.partitions
        self._topics.check_leader(topic_name, partition)
        plog = topic.partitions[partition]
        state = self._producers.state(topic_name, partition, plog)
        last = check_next(state, topic_name, partition, pid, seq)
        if last is None or seq == last + 1:
            # Only a new message meets a failed partition's refusal; a resend is answered
            # as its original is.
            self._topics.check_healthy(topic_name, partition, plog)
            header = producer_headers(self._key_info(key)[1], pid, seq)
            batch = self._batches.get((topic_name, partition))
            if batch is None:
                batch = self._new_batch(topic_name, partition, plog, acks)
            state.last_seq[pid] = seq
            batch.idem.append((len(batch.payloads), pid, seq))
            batch.add(value, header, acks, sink, token)
            return
        offset = state.offset_of(pid, seq)
        if offset is None:  # the original is still queued for this turn's append
            self.flush()
            offset = state.offset_of(pid, seq)
        if offset is None:
            raise no_longer_retained(topic_name, partition, pid, seq)
        self._clock.callLater(0, self._answer_duplicate, topic_name, partition, plog, offset,
                              acks, sink, token)

    def _answer_duplicate(self, topic: str, partition: int, plog: PartitionLog, offset: int,
                          acks: str, sink: ProduceSink, token: Any) -> None:
        """Answer a duplicate as its original is answered: once as durable as ``acks`` asks."""

        def answer(error: SkerryError | None) -> None:
            if error is not None:
                sink.produced(token, partition, -1, -1, error)
            else:
                sink.produced(token, partition, offset, self._hw(topic, partition), None)
            sink.drain()

        self._when_durable(topic, partition, plog, offset + 1, acks, answer)

    # ---------------------------------------------------------------- durable enough for acks

    def _when_durable(self, topic: str, partition: int, plog: PartitionLog, end: int,
                      acks: str, then: Callable[[SkerryError | None], None],
                      ack_timeout_ms: int | None = None) -> None:
        """The one rule every produce is answered by: ``then(None)`` once the partition's
        messages below offset ``end`` are as durable as ``acks`` asks, or ``then(error)``.

        ``0``, and ``1`` unless ``storage.fsync`` is ``always``: at once. ``1`` with
        ``always``: once the group committer's fsync covers them (``durability.py``).
        ``all``: once the in-sync replicas hold them (after that fsync, with ``always``);
        ``ack_timeout_ms`` bounds that wait (None: ``replication.ack_timeout_ms``).
        """
        if acks != "0" and self._fsync == "always":
            if acks == "all":
                def synced(error: SkerryError | None) -> None:
                    if error is not None:
                        then(error)
                    else:
                        self._wait_all(topic, partition, end, then, ack_timeout_ms)

                self._committer.wait(plog, end, synced)
            else:
                self._committer.wait(plog, end, then)
        elif acks == "all":
            self._wait_all(topic, partition, end, then, ack_timeout_ms)
        else:
            then(None)

    def _wait_all(self, topic: str, partition: int, end: int,
                  then: Callable[[SkerryError | None], None],
                  ack_timeout_ms: int | None) -> None:
        """``then`` once the in-sync replicas hold the messages below ``end``."""
        d = self._replication.wait_for_all(topic, partition, end - 1, ack_timeout_ms)
        d.addCallbacks(lambda _hw: then(None), lambda failure: then(_as_error(failure)))

    def _appended(self, topic: str, partition: int, waits_for_fsync: bool) -> None:
        """After a store append: replication learns of it, and the long polls of the
        partition wake unless an fsync is awaited first (the committer wakes them then)."""
        self._replication.on_appended(topic, partition)
        if not waits_for_fsync:
            self._hw_changed(topic, partition)

    # ---------------------------------------------------------------- this turn's append

    def flush(self) -> None:
        """Append every partition's queued messages: one store append per partition."""
        if self._flush_call is not None:
            if self._flush_call.active():
                self._flush_call.cancel()
            self._flush_call = None
        if not self._batches:
            return
        batches, self._batches = self._batches, {}
        for batch in batches.values():
            self._append(batch)

    def _append(self, batch: _Batch) -> None:
        """One partition's turn: one store append, then the answers by ``acks``."""
        plog = batch.log
        count = len(batch.payloads)
        try:
            first = plog.append(batch.payloads, batch.headers)
        except SkerryError as error:
            log.error("append to %s/%d failed: %s", batch.topic, batch.partition, error.message)
            self._answer(batch, -1, range(count), error)
            return
        if self.metrics is not None:
            self.metrics.appended(batch.topic, batch.payloads, batch.headers)
        topic, partition = batch.topic, batch.partition
        if batch.idem:
            state = self._producers.known(topic, partition)
            if state is not None:
                for index, pid, seq in batch.idem:
                    state.record(pid, seq, first + index)
        if batch.mixed:  # one group per acks level, in message order within each
            levels: dict[str, list[int]] = {}
            for index, level in enumerate(batch.acks):
                levels.setdefault(level, []).append(index)
            groups: dict[str, Sequence[int]] = dict(levels)
        else:
            groups = {batch.acks[0]: range(count)}
        self._appended(topic, partition,
                       self._fsync == "always" and any(level != "0" for level in groups))
        for level, group in groups.items():
            self._when_durable(topic, partition, plog, first + group[-1] + 1, level,
                               partial(self._answer, batch, first, group))

    def _answer(self, batch: _Batch, first: int, group: Sequence[int],
                error: SkerryError | None) -> None:
        """Hand each message's result to its sink, then drain each sink once."""
        partition = batch.partition
        sinks, tokens = batch.sinks, batch.tokens
        if error is not None:
            offset = hw = -1
        else:
            hw = self._hw(batch.topic, partition)
        if error is None and type(group) is range and len(group) > 1:
            # The pipelined case: one connection's run of messages, answered in one call.
            start, stop = group.start, group.stop
            sink = sinks[start]
            same = sinks if start == 0 and stop == len(sinks) else sinks[start:stop]
            run = getattr(sink, "produced_run", None)  # optional (ports.ProduceSink)
            if run is not None and same.count(sink) == stop - start:  # C-level count
                run(tokens[start:stop], partition, first + start, hw)
                sink.drain()
                return
        touched: dict[int, ProduceSink] = {}
        for index in group:
            sink = sinks[index]
            if error is None:
                offset = first + index
            sink.produced(tokens[index], partition, offset, hw, error)
            touched[id(sink)] = sink
        for sink in touched.values():
            sink.drain()

    # ---------------------------------------------------------------- whole batches

    def _append_batch(self, topic_name: str, partition: int, plog: PartitionLog,
                      payloads: Sequence[bytes], user_headers: Sequence[bytes] | None,
                      ids: Sequence[int] | None, origin_timestamps: Sequence[int] | None,
                      callback: ProduceCallback) -> int | None:
        """The store append of ``produce_keyed_batch``: the first offset, or None after answering
        ``callback`` with the partition's failure; ``BadRequest`` for input the store refuses
        (nothing written)."""
        try:
            first = plog.append(payloads, user_headers, ids=ids,
                                origin_timestamps=origin_timestamps)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        except SkerryError as error:
            log.error("append to %s/%d failed: %s", topic_name, partition, error.message)
            callback(error)
            return None
        if self.metrics is not None:
            self.metrics.appended(topic_name, payloads, user_headers)
        return first

    def produce_framed(self, topic_name: str, partition: int, messages: bytes,
                       ends: Sequence[int] | None, acks: str,
                       callback: ProduceCallback,
                       ack_timeout_ms: int | None = None,
                       producer: ProducerBatch | None = None, *, create: bool = False) -> None:
        """Append a whole batch to one partition in one store append; answer once. The
        messages come framed as records (Iggy's SendMessages message area, ``ends`` its
        index table's end positions; Kafka's and TANK's batches mapped to records): the
        store stamps them in one pass (``PartitionLog.append_framed``).

        The messages get consecutive offsets in order; ids of 0 become UUIDv4s; messages
        ``produce_to`` queued earlier in this turn for the same partition land first.
        ``callback`` gets one ``ProduceResult`` (``offset`` = the first message's) once the
        batch is as durable as ``acks`` asks, or a ``SkerryError``. Refusals that change
        nothing raise at once: ``UnknownTopic`` (auto-created instead when ``create`` and
        ``auto_create_topics`` allow, as ``Topics.resolve`` says), ``InvalidTopicName``,
        ``UnknownPartition``, NOT_LEADER, a failed partition, and ``BadRequest`` when the
        store refuses the framing. ``ack_timeout_ms``: how long ``acks=all`` waits (None:
        ``replication.ack_timeout_ms``; Kafka's produce carries the client's own).

        With ``producer`` (one batch of a Kafka idempotent producer) the batch is checked
        first: ``InvalidProducerEpoch`` / ``OutOfOrderSequence`` raise at once (nothing
        written); a duplicate of one of the producer's last five batches is not appended and
        is answered with the original's first offset once that batch is as durable as
        ``acks`` asks; otherwise the records are appended with ids carrying the producer
        fields, and the batch is recorded.
        """
        plog = self._batch_target(topic_name, partition, create)
        if self._by_name[topic_name].config.compacted and keyless_framed(messages, ends):
            self._refuse_keyless(topic_name)
        if producer is not None and self._producer_states is not None:
            self._produce_idempotent(topic_name, partition, plog, messages, ends, acks,
                                     callback, ack_timeout_ms, producer)
            return
        try:
            first = plog.append_framed(messages, ends)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        except SkerryError as error:
            log.error("append to %s/%d failed: %s", topic_name, partition, error.message)
            callback(error)
            return
        count = plog.next_offset - first
        if self.metrics is not None:
            self.metrics.produced(topic_name, count, len(messages))
        # _batch_appended inlined: the common path of three transports, one frame less.
        self._appended(topic_name, partition, acks != "0" and self._fsync == "always")
        self._when_durable(topic_name, partition, plog, first + count, acks,
                           self._result_to(callback, topic_name, partition, first, count),
                           ack_timeout_ms)

    def _produce_idempotent(self, topic_name: str, partition: int, plog: PartitionLog,
                            messages: bytes, ends: Sequence[int] | None, acks: str,
                            callback: ProduceCallback, ack_timeout_ms: int | None,
                            producer: ProducerBatch) -> None:
        """``produce_framed`` for one batch of an idempotent producer."""
        assert self._producer_states is not None
        ends = list(ends) if ends is not None else _framed_ends(messages)
        count = len(ends)
        if count == 0:
            callback(ProduceResult(partition, plog.next_offset, self._hw(topic_name, partition),
                                   0))
            return
        pid, epoch, base = producer.producer_id, producer.epoch, producer.base_sequence
        last_seq = add_sequence(base, count - 1)
        state = self._producer_states.state(topic_name, partition, plog)
        verdict = state.check(pid, epoch, base, last_seq)
        if isinstance(verdict, BatchMetadata):
            self._batch_appended(topic_name, partition, plog, verdict.first_offset,
                                 verdict.last_offset - verdict.first_offset + 1, acks,
                                 callback, ack_timeout_ms, appended=False)
            return
        skip = verdict.held if isinstance(verdict, Continuation) else 0
        starts = [0, *ends[:-1]]
        if skip:
            cut = starts[skip]
            messages = messages[cut:]
            starts = [at - cut for at in starts[skip:]]
            ends = [at - cut for at in ends[skip:]]
        ids = batch_ids(pid, epoch, add_sequence(base, skip), count - skip, first=not skip)
        try:
            stamped = stamp_ids(messages, starts, ids)
            first = plog.append_framed(stamped, ends)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        except SkerryError as error:
            log.error("append to %s/%d failed: %s", topic_name, partition, error.message)
            callback(error)
            return
        answer_first = verdict.batch.first_offset if isinstance(verdict, Continuation) else first
        # Recorded before anything is answered or woken: an answer can run this producer's
        # next request (or its retry) at once.
        state.append(pid, epoch, base, last_seq, answer_first, plog.next_offset - 1,
                     int(self._clock.seconds() * 1000))
        self._producer_states.appended(topic_name, partition, plog)
        if self.metrics is not None:
            self.metrics.produced(topic_name, count - skip, len(messages))

        def done(result: Any) -> None:
            if type(result) is ProduceResult and skip:
                result = ProduceResult(partition, answer_first, result.hw, result.count, skip)
            callback(result)

        self._batch_appended(topic_name, partition, plog, first, count - skip, acks, done,
                             ack_timeout_ms)

    def produce_keyed_batch(self, topic_name: str, partition: int, keys: Sequence[bytes],
                            payloads: Sequence[bytes], acks: str, callback: ProduceCallback,
                            pid: str | None = None, seq: int | None = None) -> None:
        """A whole batch of V1 messages (the additive PRODUCE_BATCH): each non-empty key
        is stored as the key header, as ``produce`` stores it, and ``callback`` gets one
        ``ProduceResult`` with ``count`` and ``duplicates`` (or a ``SkerryError``) once the
        batch is as durable as ``acks`` asks. The batch is appended with one store append,
        after every message was built (nothing is written when one is refused). Never
        creates a topic.

        With ``pid`` and ``seq`` the messages carry sequence numbers ``seq, seq + 1, ...``
        (as ``produce_to`` with pid/seq would give them one by one): messages whose number
        the partition already holds for that producer form a prefix of the batch that is not
        appended again (a resend after a failure, also one that was cut short), the rest is
        appended; a first number beyond the next one expected is ``BadRequest``.
        """
        plog = self._batch_target(topic_name, partition)  # refusals; queued produces land first
        count = len(payloads)
        if len(keys) != count:
            raise BadRequest(f"{len(keys)} keys for {count} messages")
        if not all(keys):
            self._refuse_keyless(topic_name)
        # Keys repeat: one key header per distinct key, then C-level lookups per message.
        by_key = {key: self._key_info(key)[1] if key else b"" for key in dict.fromkeys(keys)}
        skip = 0
        state: ProducerState | None = None
        if pid is not None and seq is not None:
            state = self._producers.state(topic_name, partition, plog)
            last = check_next(state, topic_name, partition, pid, seq)
            if last is not None and seq <= last:
                skip = min(count, last + 1 - seq)
            if skip == count:
                self._answer_held_batch(topic_name, partition, plog, state, pid, seq, count, acks,
                                        callback)
                return
            tail = producer_headers(b"", pid, 0)[:-8]  # the pid and seq headers but seq's value
            left = count - skip
            by_key = {key: header + tail for key, header in by_key.items()}
            seqs = map(int.to_bytes, range(seq + skip, seq + count), [8] * left, ["little"] * left)
            headers = list(map(bytes.__add__, map(by_key.__getitem__, keys[skip:]), seqs))
            payloads = payloads[skip:]
        else:
            headers = list(map(by_key.__getitem__, keys))
        appended = count - skip

        def done(result: Any) -> None:
            if isinstance(result, SkerryError):
                callback(result)
            else:
                callback(ProduceResult(partition, result.offset, result.hw, appended, skip))

        first = self._append_batch(topic_name, partition, plog, payloads, headers, None, None, done)
        if first is None:
            return
        if state is not None and pid is not None and seq is not None:
            # Recorded before anything is answered or woken: an answer or a woken long poll
            # can run another connection's held request at once, maybe this producer's resend.
            state.record_run(pid, seq + skip, first, appended)
            state.last_seq[pid] = seq + count - 1
        self._batch_appended(topic_name, partition, plog, first, appended, acks, done)

    def _answer_held_batch(self, topic_name: str, partition: int, plog: PartitionLog,
                           state: ProducerState, pid: str, seq: int, count: int, acks: str,
                           callback: ProduceCallback) -> None:
        """A batch the partition holds entirely: answered with its original first offset once
        its last message is as durable as ``acks`` asks (as a duplicate message is)."""
        first = state.offset_of(pid, seq)
        last = state.offset_of(pid, seq + count - 1)
        if first is None or last is None:
            raise no_longer_retained(topic_name, partition, pid, seq)

        def held(result: Any) -> None:
            if isinstance(result, SkerryError):
                callback(result)
            else:
                callback(ProduceResult(partition, first, result.hw, 0, count))

        self._clock.callLater(0, self._batch_appended, topic_name, partition, plog, last, 1,
                              acks, held, appended=False)

    def _batch_target(self, topic_name: str, partition: int, create: bool = False
                      ) -> PartitionLog:
        """The partition a batch goes to, after the refusals that change nothing (the topic
        auto-created first when ``create`` and ``auto_create_topics`` allow)."""
        plog = self._topics.resolve(topic_name, partition, create).partitions[partition]
        self._topics.check_writable(topic_name, partition, plog)
        if (topic_name, partition) in self._batches:
            self.flush()
        return plog

    def _batch_appended(self, topic_name: str, partition: int, plog: PartitionLog, first: int,
                        count: int, acks: str, callback: ProduceCallback,
                        ack_timeout_ms: int | None = None, *, appended: bool = True) -> None:
        """Answer ``callback`` with a ``ProduceResult`` once an appended batch is as durable
        as ``acks`` asks (``appended=False``: a batch appended earlier, whose duplicate is
        being answered)."""
        if appended:
            self._appended(topic_name, partition, acks != "0" and self._fsync == "always")
        self._when_durable(topic_name, partition, plog, first + count, acks,
                           self._result_to(callback, topic_name, partition, first, count),
                           ack_timeout_ms)

    def _result_to(self, callback: ProduceCallback, topic_name: str, partition: int,
                   first: int, count: int) -> Callable[[SkerryError | None], None]:
        """What ``_when_durable`` calls to answer a batch: ``callback`` gets the error, or a
        ``ProduceResult`` with the batch's first offset and the high watermark then."""

        def answer(error: SkerryError | None) -> None:
            callback(error if error is not None
                     else ProduceResult(partition, first, self._hw(topic_name, partition), count))

        return answer


def _framed_ends(messages: bytes) -> list[int]:
    """The end of each record framed back to back in ``messages`` (from their headers)."""
    ends: list[int] = []
    at, size = 0, len(messages)
    while at < size:
        if at + HEADER_SIZE > size:
            raise BadRequest(f"record at byte {at} is cut short")
        fields = HEADER.unpack_from(messages, at)
        at += HEADER_SIZE + fields[6] + fields[7]
        if at > size:
            raise BadRequest(f"record ending at byte {at} runs past the data")
        ends.append(at)
    return ends


def _as_error(failure: Failure) -> SkerryError:
    """A failed wait's error as produce answers carry it."""
    value = failure.value
    return value if isinstance(value, SkerryError) else StorageError(failure.getErrorMessage())
