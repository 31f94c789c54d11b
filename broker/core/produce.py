"""The produce pipeline: where every transport's produce ends, from the call to the answer
once the messages are as durable as ``acks`` asks.

One door: ``ProducePipeline.produce(request, answer)``. Every transport hands it a
``ProduceRequest`` (a topic, a partition or None, ``acks``, and either keyed values or records
already framed, plus its producer fields for idempotence): the V1 fast scan's run of plain
PRODUCEs, a V1 PRODUCE, a V1 PRODUCE_BATCH, Kafka's Produce, Iggy's SendMessages, TANK's
produce, and the group log's writes. Every request is answered through ``answer``, a
``ProduceCallback``, with one ``ProduceResult`` per partition it reached (``error`` set when
it failed); refusals that change nothing (an unknown topic with auto-create off, a partition
out of range, NOT_LEADER, a failed partition, a compacted topic's keyless message) raise
``SkerryError`` at once instead, before anything of the request is queued.

Every request resolves its topic the same way (``Topics.resolve``: auto-created when the
request's ``create`` and ``auto_create_topics`` allow), checks the write refusals once
(``Topics.check_writable``), makes one store append per partition, and is answered by one
rule, ``_when_durable``: ``0`` (and ``1`` unless ``storage.fsync`` is ``always``) at once;
``1`` with fsync ``always`` once the group committer's fsync covers the messages
(``durability.py``: one fsync per partition covers every append waiting at that moment);
``all`` once the replication service reports them committed by the in-sync replicas.

``produce`` makes the one choice of how a request is appended:

- keyed values (V1 PRODUCE and its fast path) join their partition's ``_Batch`` for this
  reactor turn, whatever connection sent them (the partition is picked by the key's FNV-1a
  hash unless given); the first of a turn schedules ``flush`` with ``callLater(0)``, which
  makes one store append per partition and answers each request's part with one
  ``ProduceResult`` carrying its ``tokens``;
- a whole batch (``framed`` records: Kafka, Iggy, TANK; or keyed values with ``whole``:
  V1 PRODUCE_BATCH, the group log) is appended on its own, in one store append, and
  answered once.

Idempotent produces: V1's (``pid``/``seq``) consult ``producers.Producers``; a framed batch of
a Kafka idempotent producer (``producer``, a ``ProducerBatch``) is checked against and
recorded in ``idempotence.ProducerStates`` (KIP-98: fencing, sequence checks, the last five
batches deduplicated), its records' ids carrying its producer fields (``data.idempotence``).

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
from broker.core.ports import Committer, CoreMetrics, ReplicationView
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
from data.format import HEADER, HEADER_SIZE, key_header, keyed_headers, keyless_framed
from data.idempotence import batch_ids
from data.keys import fnv1a_32
from data.log import PartitionLog
from replication.producer_state import BatchMetadata, Continuation, add_sequence

__all__ = ["ProduceCallback", "ProducePipeline", "ProduceRequest", "ProduceResult", "fnv1a_32"]

log = logging.getLogger("skerry.core")

@dataclass(slots=True)
class ProduceResult:
    """What every produce is answered with: ``count`` messages went to offsets ``offset ..
    offset + count - 1`` of ``partition`` and the high watermark was ``hw`` when it was
    answered. ``duplicates``: an idempotent resend's first messages the partition already
    held (not appended again); with ``count == 0`` (a resend held entirely) ``offset`` is
    where its first message went originally. ``error``: the ``SkerryError`` that failed
    them (``offset`` and ``hw`` are then -1). ``tokens``: the request's tokens these
    messages carried, in offset order (a keyed request spread over partitions by key is
    answered once per partition, each answer with its own tokens)."""

    partition: int
    offset: int
    hw: int
    count: int = 1
    duplicates: int = 0
    error: SkerryError | None = None
    tokens: Sequence[Any] = ()


ProduceCallback = Callable[[ProduceResult], None]
"""How every produce is answered: once per partition the request reached, with a
``ProduceResult``, once its messages are as durable as ``acks`` asks (or failed)."""


@dataclass(slots=True)
class ProduceRequest:
    """One produce, as every transport hands it to ``ProducePipeline.produce``.

    ``partition``: None picks each message's partition by its key (FNV-1a, keyed values
    only). The messages are either ``keys``/``values`` (V1: each non-empty key is stored as
    the key header) or ``framed``: records already framed back to back (``ends``: their end
    positions, None to read them from the headers; Kafka's, Iggy's and TANK's batches).
    ``tokens``: none, or one per keyed value, handed back in the ``ProduceResult`` (the V1
    reply slots).
    ``whole``: keyed values appended on their own and answered once (V1 PRODUCE_BATCH), not
    merged into this turn's append. ``create``: an unknown topic is auto-created when
    ``auto_create_topics`` allows. ``pid``/``seq``: a V1 idempotent producer and the
    sequence number of the first message; ``producer``: a Kafka idempotent producer's batch
    fields. ``ack_timeout_ms``: how long ``acks=all`` waits (None:
    ``replication.ack_timeout_ms``)."""

    topic: str
    partition: int | None
    acks: str
    keys: Sequence[bytes] = ()
    values: Sequence[bytes] = ()
    tokens: Sequence[Any] = ()
    create: bool = False
    framed: bytes | None = None
    ends: Sequence[int] | None = None
    whole: bool = False
    pid: str | None = None
    seq: int | None = None
    producer: ProducerBatch | None = None
    ack_timeout_ms: int | None = None


class _Batch:
    """Messages for one partition collected during one reactor turn; ``parts``: one
    ``[start, stop, acks, answer, tokens]`` per request's run of messages (consecutive runs
    with the same ``answer`` and ``acks`` share one)."""

    __slots__ = ("topic", "partition", "log", "payloads", "headers", "parts", "mixed", "idem")

    def __init__(self, topic: str, partition: int, plog: PartitionLog) -> None:
        self.topic = topic
        self.partition = partition
        self.log = plog
        self.payloads: list[bytes] = []
        self.headers: list[bytes] = []
        self.parts: list[list[Any]] = []
        self.mixed = False  # True once two acks levels share the batch
        self.idem: list[tuple[int, str, int]] = []  # (index, pid, seq) of idempotent ones

    def add(self, payloads: Sequence[bytes], headers: Sequence[bytes], acks: str,
            answer: ProduceCallback, tokens: Sequence[Any]) -> None:
        """Queue one request's messages for this partition."""
        start = len(self.payloads)
        self.payloads.extend(payloads)
        self.headers.extend(headers)
        parts = self.parts
        if parts:
            last = parts[-1]
            if last[2] == acks and last[3] == answer:
                last[1] = len(self.payloads)
                last[4].extend(tokens)
                return
            if not self.mixed and parts[0][2] != acks:
                self.mixed = True
        parts.append([start, len(self.payloads), acks, answer, list(tokens)])


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
        self._key_headers: dict[bytes, bytes] = {b"": b""}  # key -> its user header (whole batches)
        self.metrics: CoreMetrics | None = None

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

    # ---------------------------------------------------------------- the one door

    def produce(self, request: ProduceRequest, answer: ProduceCallback) -> None:
        """Append ``request``'s messages and answer ``answer`` once they are as durable as
        ``request.acks`` asks (see the module doc). Refusals that change nothing raise
        ``SkerryError`` at once, before anything of the request is queued or appended.

        Keyed values with an idempotent producer (``pid``/``seq``, one message): a sequence
        number the partition already holds for that producer is not appended again (the
        answer carries the original offset and ``duplicates`` 1); a
        number beyond the next one expected (a gap) is BAD_REQUEST; an unknown producer may
        start at any number.

        Framed records get consecutive offsets in order; ids of 0 become UUIDv4s; messages
        queued earlier in this turn for the same partition land first; ``BadRequest`` when
        the store refuses the framing (nothing written). With ``producer`` see
        ``_produce_idempotent``.
        """
        messages = request.framed
        if messages is not None:
            # A whole batch of framed records (Kafka, Iggy, TANK), inlined: one frame less on
            # three transports' path.
            topic_name, partition, acks, ends = (request.topic, request.partition,
                                                 request.acks, request.ends)
            if partition is None:
                raise BadRequest("a framed batch names its partition")
            plog = self._batch_target(topic_name, partition, request.create)
            if self._by_name[topic_name].config.compacted and keyless_framed(messages, ends):
                self._refuse_keyless(topic_name)
            if request.producer is not None and self._producer_states is not None:
                self._produce_idempotent(topic_name, partition, plog, messages, ends, acks,
                                         answer, request.ack_timeout_ms, request.producer)
                return
            try:
                first = plog.append_framed(messages, ends)
            except ValueError as exc:
                raise BadRequest(str(exc)) from exc
            except SkerryError as error:
                log.error("append to %s/%d failed: %s", topic_name, partition, error.message)
                answer(ProduceResult(partition, -1, -1, 0, 0, error))
                return
            count = plog.next_offset - first
            if self.metrics is not None:
                self.metrics.produced(topic_name, count, len(messages))
            self._appended(topic_name, partition, acks != "0" and self._fsync == "always")
            if self._when_durable(topic_name, partition, plog, first + count, acks,
                                  self._result_to(answer, topic_name, partition, first, count),
                                  request.ack_timeout_ms):
                answer(ProduceResult(partition, first, self._hw(topic_name, partition), count))
            return
        if request.whole:
            self._produce_whole(request, answer)
            return
        if request.pid is not None and request.seq is not None:
            self._idempotent(request, answer)
            return
        # This turn's merged append: the V1 hot path, inlined.
        topic_name, partition, keys = request.topic, request.partition, request.keys
        topic = self._by_name.get(topic_name)
        if topic is None or partition is not None:
            topic = self._topics.resolve(topic_name, partition, request.create)
        values = request.values
        if len(values) == 1:  # one message (request/response): the shortest way
            key = keys[0]
            hashed, header = self._key_cache.get(key) or self._key_info(key)
            if not key and topic.config.compacted:
                self._refuse_keyless(topic_name)
            if partition is None:
                partition = hashed % topic.config.partitions
            batch = self._batches.get((topic_name, partition))
            if batch is None:
                plog = topic.partitions[partition]
                self._topics.check_writable(topic_name, partition, plog)
                batch = self._new_batch(topic_name, partition, plog)
            # _Batch.add inlined for one message.
            payloads, parts, acks = batch.payloads, batch.parts, request.acks
            start = len(payloads)
            payloads.append(values[0])
            batch.headers.append(header)
            if parts:
                last = parts[-1]
                if last[3] == answer and last[2] == acks:
                    last[1] = start + 1
                    last[4].extend(request.tokens)
                    return
                if not batch.mixed and parts[0][2] != acks:
                    batch.mixed = True
            parts.append([start, start + 1, acks, answer, list(request.tokens)])
            return
        if topic.config.compacted and not all(keys):
            self._refuse_keyless(topic_name)
        infos = list(map(self._key_cache.get, keys))  # keys repeat: C-level lookups
        if None in infos:
            key_info = self._key_info
            infos = [key_info(key) if info is None else info
                     for info, key in zip(infos, keys, strict=True)]
        count = topic.config.partitions
        tokens = request.tokens
        if partition is not None or count == 1:
            runs = {partition or 0: (values, list(map(itemgetter(1), infos)), tokens)}
        else:
            split: dict[int, tuple[list[bytes], list[bytes], list[Any]]] = {}
            for (hashed, header), value, token in zip(infos, values,  # noqa: B905
                                                      tokens or repeat(None)):
                part = split.get(hashed % count)
                if part is None:
                    part = split[hashed % count] = ([], [], [])
                part[0].append(value)
                part[1].append(header)
                part[2].append(token)
            runs = split  # type: ignore[assignment]
        batches = self._batches
        for index in runs:
            if (topic_name, index) not in batches:
                self._topics.check_writable(topic_name, index, topic.partitions[index])
        acks = request.acks
        for index, (payloads, headers, run_tokens) in runs.items():
            batch = batches.get((topic_name, index))
            if batch is None:
                batch = self._new_batch(topic_name, index, topic.partitions[index])
            batch.add(payloads, headers, acks, answer, run_tokens)

    def _refuse_keyless(self, topic_name: str) -> None:
        """``KeyRequired`` when ``topic_name`` is compacted (a keyless message is coming)."""
        topic = self._by_name.get(topic_name)
        if topic is not None and topic.config.compacted:
            raise KeyRequired(f"topic {topic_name} is compacted (cleanup_policy "
                              f"{topic.config.cleanup_policy}): every message needs a key")

    def _new_batch(self, topic_name: str, partition: int, plog: PartitionLog) -> _Batch:
        """Start this turn's batch of a partition (and the turn's flush, if not yet)."""
        batch = self._batches[(topic_name, partition)] = _Batch(topic_name, partition, plog)
        if self._flush_call is None:
            self._flush_call = self._clock.callLater(0, self.flush)
        return batch

    def _idempotent(self, request: ProduceRequest, answer: ProduceCallback) -> None:
        """Queue one idempotent V1 produce, or answer it as a duplicate of what the log
        holds."""
        topic_name, partition, acks = request.topic, request.partition, request.acks
        pid, seq = request.pid, request.seq
        assert pid is not None and seq is not None
        if len(request.values) != 1:
            raise BadRequest("an idempotent PRODUCE carries one message")
        key, value = request.keys[0], request.values[0]
        if not key:
            self._refuse_keyless(topic_name)
        topic = self._topics.resolve(topic_name, partition, request.create)
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
                batch = self._new_batch(topic_name, partition, plog)
            state.last_seq[pid] = seq
            batch.idem.append((len(batch.payloads), pid, seq))
            batch.add((value,), (header,), acks, answer, request.tokens)
            return
        offset = state.offset_of(pid, seq)
        if offset is None:  # the original is still queued for this turn's append
            self.flush()
            offset = state.offset_of(pid, seq)
        if offset is None:
            raise no_longer_retained(topic_name, partition, pid, seq)
        self._clock.callLater(0, self._batch_appended, topic_name, partition, plog, offset, 1,
                              acks, answer, appended=False, duplicates=1,
                              tokens=request.tokens)

    # ---------------------------------------------------------------- durable enough for acks

    def _when_durable(self, topic: str, partition: int, plog: PartitionLog, end: int,
                      acks: str, then: Callable[[SkerryError | None], None],
                      ack_timeout_ms: int | None = None) -> bool:
        """The one rule every produce is answered by: True when the partition's messages
        below offset ``end`` are as durable as ``acks`` asks now (``then`` is not called:
        the caller answers at once); else False, and ``then(None)`` once they are, or
        ``then(error)``.

        ``0``, and ``1`` unless ``storage.fsync`` is ``always``: now. ``1`` with ``always``:
        once the group committer's fsync covers them (``durability.py``). ``all``: once the
        in-sync replicas hold them (after that fsync, with ``always``); ``ack_timeout_ms``
        bounds that wait (None: ``replication.ack_timeout_ms``).
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
            return False
        if acks == "all":
            self._wait_all(topic, partition, end, then, ack_timeout_ms)
            return False
        return True

    def _wait_all(self, topic: str, partition: int, end: int,
                  then: Callable[[SkerryError | None], None],
                  ack_timeout_ms: int | None) -> None:
        """``then`` once the in-sync replicas hold the messages below ``end`` (at once when
        they already do: on one broker, always; no Deferred then)."""
        if self._replication.committed(topic, partition, end - 1):
            then(None)
            return
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
        """Append every partition's queued messages: one store append per partition, then
        each request's part answered by ``acks``."""
        if self._flush_call is not None:
            if self._flush_call.active():
                self._flush_call.cancel()
            self._flush_call = None
        if not self._batches:
            return
        batches, self._batches = self._batches, {}
        for batch in batches.values():
            plog = batch.log
            topic, partition, parts = batch.topic, batch.partition, batch.parts
            try:
                first = plog.append(batch.payloads, batch.headers)
            except SkerryError as error:
                log.error("append to %s/%d failed: %s", topic, partition, error.message)
                self._answer(partition, -1, parts, error)
                continue
            if self.metrics is not None:
                self.metrics.appended(topic, batch.payloads, batch.headers)
            if batch.idem:
                state = self._producers.known(topic, partition)
                if state is not None:
                    for index, pid, seq in batch.idem:
                        state.record(pid, seq, first + index)
            if batch.mixed:
                self._answer_levels(batch, first)
                continue
            acks = parts[0][2]
            self._appended(topic, partition, acks != "0" and self._fsync == "always")
            if self._when_durable(topic, partition, plog, first + parts[-1][1], acks,
                                  partial(self._answered, topic, partition, first, parts)):
                # Durable enough now (the common case): answered here, one result a part.
                hw = self._hw(topic, partition)
                for start, stop, _acks, answer, tokens in parts:
                    answer(ProduceResult(partition, first + start, hw, stop - start, 0, None,
                                         tokens))

    def _answer_levels(self, batch: _Batch, first: int) -> None:
        """A batch whose parts ask for different ``acks``: each level answered on its own,
        in message order within it."""
        topic, partition, plog = batch.topic, batch.partition, batch.log
        levels: dict[str, list[list[Any]]] = {}
        for part in batch.parts:
            levels.setdefault(part[2], []).append(part)
        self._appended(topic, partition,
                       self._fsync == "always" and any(level != "0" for level in levels))
        for level, parts in levels.items():
            if self._when_durable(topic, partition, plog, first + parts[-1][1], level,
                                  partial(self._answered, topic, partition, first, parts)):
                self._answered(topic, partition, first, parts, None)

    def _answered(self, topic: str, partition: int, first: int, parts: Sequence[list[Any]],
                  error: SkerryError | None) -> None:
        """``_when_durable``'s answer for parts of an appended batch."""
        self._answer(partition, first, parts,
                     error, -1 if error is not None else self._hw(topic, partition))

    def _answer(self, partition: int, first: int, parts: Sequence[list[Any]],
                error: SkerryError | None, hw: int = -1) -> None:
        """One ``ProduceResult`` per part (``error``: each failed, offsets -1)."""
        for start, stop, _acks, answer, tokens in parts:
            answer(ProduceResult(partition, -1 if error is not None else first + start, hw,
                                 stop - start, 0, error, tokens))

    # ---------------------------------------------------------------- whole batches

    def _produce_idempotent(self, topic_name: str, partition: int, plog: PartitionLog,
                            messages: bytes, ends: Sequence[int] | None, acks: str,
                            callback: ProduceCallback, ack_timeout_ms: int | None,
                            producer: ProducerBatch) -> None:
        """A framed batch of a Kafka idempotent producer (``produce`` with ``producer``):
        checked first (``InvalidProducerEpoch`` / ``OutOfOrderSequence`` raise at once,
        nothing written); a duplicate of one of the producer's last five batches is not
        appended and is answered with the original's first offset once that batch is as
        durable as ``acks`` asks; otherwise the records are appended with ids carrying the
        producer fields, and the batch is recorded."""
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
        if skip:
            cut = ends[skip - 1]
            messages = messages[cut:]
            ends = [at - cut for at in ends[skip:]]
        # The producer fields go in as the records' ids in the store's one stamping pass
        # (no copy of the batch before it).
        ids = batch_ids(pid, epoch, add_sequence(base, skip), count - skip, first=not skip)
        try:
            first = plog.append_framed(messages, ends, ids.tobytes())
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        except SkerryError as error:
            log.error("append to %s/%d failed: %s", topic_name, partition, error.message)
            callback(ProduceResult(partition, -1, -1, 0, 0, error))
            return
        answer_first = verdict.batch.first_offset if isinstance(verdict, Continuation) else first
        # Recorded before anything is answered or woken: an answer can run this producer's
        # next request (or its retry) at once.
        state.append(pid, epoch, base, last_seq, answer_first, plog.next_offset - 1,
                     int(self._clock.seconds() * 1000))
        self._producer_states.appended(topic_name, partition, plog)
        if self.metrics is not None:
            self.metrics.produced(topic_name, count - skip, len(messages))

        def done(result: ProduceResult) -> None:
            if result.error is None and skip:
                result = ProduceResult(partition, answer_first, result.hw, result.count, skip)
            callback(result)

        self._batch_appended(topic_name, partition, plog, first, count - skip, acks, done,
                             ack_timeout_ms)

    def _produce_whole(self, request: ProduceRequest, callback: ProduceCallback) -> None:
        """Keyed values appended on their own (V1 PRODUCE_BATCH, the group log): each
        non-empty key is stored as the key header, as a PRODUCE stores it, and ``callback``
        gets one ``ProduceResult`` with ``count`` and ``duplicates``. One store append,
        after every message was built (nothing is written when one is refused).

        With ``pid`` and ``seq`` the messages carry sequence numbers ``seq, seq + 1, ...``
        (as PRODUCEs with pid/seq would give them one by one): messages whose number the
        partition already holds for that producer form a prefix of the batch that is not
        appended again (a resend after a failure, also one that was cut short), the rest is
        appended; a first number beyond the next one expected is ``BadRequest``.
        """
        topic_name, partition, acks = request.topic, request.partition, request.acks
        keys, payloads, pid, seq = request.keys, request.values, request.pid, request.seq
        if partition is None:
            raise BadRequest("a whole batch names its partition")
        plog = self._batch_target(topic_name, partition, request.create)
        count = len(payloads)
        if len(keys) != count:
            raise BadRequest(f"{len(keys)} keys for {count} messages")
        if not all(keys):
            self._refuse_keyless(topic_name)
        skip = 0
        state: ProducerState | None = None
        tail: bytes | None = None  # with pid/seq: the pid and seq headers but seq's value
        first_seq = 0
        if pid is not None and seq is not None:
            state = self._producers.state(topic_name, partition, plog)
            last = check_next(state, topic_name, partition, pid, seq)
            if last is not None and seq <= last:
                skip = min(count, last + 1 - seq)
            if skip == count:
                self._answer_held_batch(topic_name, partition, plog, state, pid, seq, count, acks,
                                        callback)
                return
            tail = producer_headers(b"", pid, 0)[:-8]
            first_seq = seq + skip
            if skip:
                keys, payloads = keys[skip:], payloads[skip:]
        # Keys repeat: each message's headers in one compiled call (``keyed_headers``; its
        # twin the reference) from the header of every key seen before (kept); a key not
        # seen yet (KeyError) gets its header once, then the call is made again.
        by_key = self._key_headers
        try:
            headers = keyed_headers(keys, by_key, tail, first_seq)
        except KeyError:
            new = set(keys).difference(by_key)
            if len(by_key) + len(new) > 65536:
                by_key.clear()
                by_key[b""] = b""
                new = set(keys)
                new.discard(b"")
            by_key.update({key: key_header(key) for key in new})
            headers = keyed_headers(keys, by_key, tail, first_seq)
        appended = count - skip
        try:
            first = plog.append(payloads, headers)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        except SkerryError as error:
            log.error("append to %s/%d failed: %s", topic_name, partition, error.message)
            callback(ProduceResult(partition, -1, -1, 0, 0, error))
            return
        if self.metrics is not None:
            self.metrics.appended(topic_name, payloads, headers)
        if state is not None and pid is not None and seq is not None:
            # Recorded before anything is answered or woken: an answer or a woken long poll
            # can run another connection's held request at once, maybe this producer's resend.
            state.record_run(pid, seq + skip, first, appended)
            state.last_seq[pid] = seq + count - 1
        self._batch_appended(topic_name, partition, plog, first, appended, acks, callback,
                             duplicates=skip)

    def _answer_held_batch(self, topic_name: str, partition: int, plog: PartitionLog,
                           state: ProducerState, pid: str, seq: int, count: int, acks: str,
                           callback: ProduceCallback) -> None:
        """A batch the partition holds entirely: answered with its original first offset once
        its last message is as durable as ``acks`` asks (as a duplicate message is)."""
        first = state.offset_of(pid, seq)
        last = state.offset_of(pid, seq + count - 1)
        if first is None or last is None:
            raise no_longer_retained(topic_name, partition, pid, seq)

        def held(result: ProduceResult) -> None:
            if result.error is None:
                result = ProduceResult(partition, first, result.hw, 0, count)
            callback(result)

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
                        ack_timeout_ms: int | None = None, *, appended: bool = True,
                        duplicates: int = 0, tokens: Sequence[Any] = ()) -> None:
        """Answer ``callback`` with a ``ProduceResult`` once an appended batch is as durable
        as ``acks`` asks (``appended=False``: messages appended earlier, whose duplicate is
        being answered)."""
        if appended:
            self._appended(topic_name, partition, acks != "0" and self._fsync == "always")
        then = self._result_to(callback, topic_name, partition, first, count, duplicates,
                               tokens)
        if self._when_durable(topic_name, partition, plog, first + count, acks, then,
                              ack_timeout_ms):
            then(None)

    def _result_to(self, callback: ProduceCallback, topic_name: str, partition: int,
                   first: int, count: int, duplicates: int = 0, tokens: Sequence[Any] = ()
                   ) -> Callable[[SkerryError | None], None]:
        """What ``_when_durable`` calls to answer a batch: ``callback`` gets a
        ``ProduceResult`` with the batch's first offset and the high watermark then, or with
        the error."""

        def answer(error: SkerryError | None) -> None:
            if error is not None:
                callback(ProduceResult(partition, -1, -1, count, duplicates, error, tokens))
            else:
                callback(ProduceResult(partition, first, self._hw(topic_name, partition), count,
                                       duplicates, None, tokens))

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
