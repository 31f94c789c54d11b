"""The broker core: the one place every transport goes through to reach the store, the
group coordinator and the replication layer.

Owns: topic lifecycle (auto-create, admin create/delete/add partitions, limits), the
produce path (per-partition batches collected over one reactor turn, one store append per
partition per turn, group commit, acks levels), the consume path (reads bounded by ``hw``
and long polls), and the periodic work of the store (fsync interval, retention).

Transports (the V1 line protocol, later Iggy and others) parse and format only: they call
the methods here with plain values and get plain values (or errors from
``broker.errors``) back. No transport touches files or timers itself.

Must not import: transports, sockets. Time comes from the injected ``clock``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from broker.config import Config, TopicSettings
from broker.core.durability import GroupCommitter
from broker.errors import BadRequest, NotLeader, SkerryError, StorageError
from data.errors import TopicQuarantined
from data.format import HeaderKind, decode_user_headers, encode_user_headers, key_header
from data.keys import fnv1a_32
from data.log import PartitionLog, RawReadResult, ReadResult
from data.store import Store, TopicConfig

__all__ = ["BatchProduceResult", "BrokerCore", "PartitionSummary", "ProduceResult", "ProduceSink",
           "fnv1a_32"]

log = logging.getLogger("skerry.core")

ProduceCallback = Callable[[Any], None]  # called with ProduceResult or a SkerryError


@dataclass(frozen=True, slots=True)
class ProduceResult:
    partition: int
    offset: int
    hw: int


@dataclass(frozen=True, slots=True)
class BatchProduceResult:
    """What ``produce_keyed_batch`` answers: the batch's first ``duplicates`` messages were
    already held (an idempotent resend: not appended again); the other ``count`` went to
    offsets ``offset .. offset + count - 1``. With ``count == 0``, ``offset`` is where the
    batch's first message went originally."""

    partition: int
    offset: int
    count: int
    duplicates: int
    hw: int


@dataclass(frozen=True, slots=True)
class PartitionSummary:
    """What ``partition_summary`` answers: the first retained offset, the next offset to
    be written, the number of segments and the record bytes they hold."""

    first_offset: int
    next_offset: int
    segment_count: int
    size_bytes: int


class ProduceSink(Protocol):
    """Where produce results go: a transport connection, answered in bulk.

    ``produced`` is called once per message (``error`` set when it failed, and then
    ``offset`` and ``hw`` are -1); ``flush`` once per sink after each group of results, so a
    connection writes all its replies of a batch at once.
    """

    def produced(self, token: Any, partition: int, offset: int, hw: int,
                 error: SkerryError | None) -> None: ...

    def flush(self) -> None: ...


class _CallbackSink:
    """Adapts ``produce(..., callback)`` (one callable per message) to the sink interface."""

    def produced(self, token: Any, partition: int, offset: int, hw: int,
                 error: SkerryError | None) -> None:
        token(error if error is not None else ProduceResult(partition, offset, hw))

    def flush(self) -> None:
        return None


_CALLBACK_SINK = _CallbackSink()


PID_HEADER = b"pid"
SEQ_HEADER = b"seq"
_PID_MARK = bytes([HeaderKind.STRING]) + (3).to_bytes(4, "little") + PID_HEADER


def producer_headers(key_headers: bytes, pid: str, seq: int) -> bytes:
    """User headers of an idempotent message: the key header (if any), then
    ``pid`` (string) and ``seq`` (uint64, little-endian)."""
    return key_headers + encode_user_headers([
        (HeaderKind.STRING, PID_HEADER, HeaderKind.STRING, pid.encode()),
        (HeaderKind.STRING, SEQ_HEADER, HeaderKind.UINT64, seq.to_bytes(8, "little")),
    ])


def producer_fields(user_headers: bytes) -> tuple[str, int] | None:
    """``(pid, seq)`` carried in a record's user headers, or None."""
    if _PID_MARK not in user_headers:
        return None
    try:
        headers = decode_user_headers(user_headers)
    except ValueError:
        return None
    pid = seq = None
    for _kk, name, vkind, value in headers:
        if name == PID_HEADER:
            pid = value.decode(errors="replace")
        elif name == SEQ_HEADER and vkind == HeaderKind.UINT64 and len(value) == 8:
            seq = int.from_bytes(value, "little")
    return None if pid is None or seq is None else (pid, seq)


class ProducerState:
    """Idempotent produce (KIP-98, simplified) for one partition: per producer id, the
    sequence numbers it wrote and their offsets, as runs ``[first_seq, first_offset, count]``
    (a run grows while both numbers go up by one, so a producer writing alone costs one run).

    ``last_seq`` also counts messages queued for this turn's append, so a pipelined producer
    is checked against what it already sent. Rebuilt from the log (``scan``) the first time a
    partition sees an idempotent produce after a start, so it survives restarts.
    """

    __slots__ = ("log", "runs", "last_seq", "high", "start")

    def __init__(self, plog: PartitionLog) -> None:
        self.log = plog
        self.runs: dict[str, list[list[int]]] = {}
        self.last_seq: dict[str, int] = {}
        self.high = -1  # the newest offset recorded
        self.start = plog.first_offset  # the log start offset when producers were last pruned

    def forget_removed(self) -> None:
        """Forget the producers whose every recorded message retention has removed (Kafka's
        rule: a producer's state goes once the log start passes its last batch), so that a
        long-running writer with a new producer id per task and micro-batch (the Spark sink)
        does not grow this state without bound. A producer with messages queued this turn is
        kept. A later resend from a forgotten producer is appended as new: its originals are
        gone from the log anyway."""
        start = self.log.first_offset
        if start <= self.start:
            return
        self.start = start
        last_seq = self.last_seq
        gone = [pid for pid, runs in self.runs.items()
                if runs[-1][1] + runs[-1][2] <= start
                and last_seq.get(pid) == runs[-1][0] + runs[-1][2] - 1]
        for pid in gone:
            del self.runs[pid]
            last_seq.pop(pid, None)

    @classmethod
    def scan(cls, plog: PartitionLog) -> ProducerState:
        """The state a partition's log implies (reads every retained record once)."""
        state = cls(plog)
        at = plog.first_offset
        while at < plog.next_offset:
            result = plog.read(at, 65536, 64 << 20)
            if not result.records:
                break
            for record in result.records:
                if record.user_headers:
                    fields = producer_fields(record.user_headers)
                    if fields is not None:
                        pid, seq = fields
                        state.record(pid, seq, record.offset)
                        state.last_seq[pid] = max(state.last_seq.get(pid, -1), seq)
            at = result.next_offset
        return state

    def record(self, pid: str, seq: int, offset: int) -> None:
        """Remember that ``pid``'s message ``seq`` is at ``offset``."""
        runs = self.runs.setdefault(pid, [])
        if offset > self.high:
            self.high = offset
        if runs:
            last = runs[-1]
            if last[0] + last[2] == seq and last[1] + last[2] == offset:
                last[2] += 1
                return
        runs.append([seq, offset, 1])

    def record_run(self, pid: str, first_seq: int, first_offset: int, count: int) -> None:
        """``record`` for ``count`` consecutive messages (a batch) at once."""
        if count <= 0:
            return
        runs = self.runs.setdefault(pid, [])
        self.high = max(self.high, first_offset + count - 1)
        if runs:
            last = runs[-1]
            if last[0] + last[2] == first_seq and last[1] + last[2] == first_offset:
                last[2] += count
                return
        runs.append([first_seq, first_offset, count])

    def offset_of(self, pid: str, seq: int) -> int | None:
        """The offset ``pid``'s message ``seq`` went to (None: not appended yet, or unknown)."""
        for first_seq, first_offset, count in reversed(self.runs.get(pid, ())):
            if first_seq <= seq < first_seq + count:
                return first_offset + seq - first_seq
        return None


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


class BrokerCore:
    """Everything a transport may ask of the broker."""

    def __init__(self, config: Config, store: Store, clock: IReactorTime,
                 replication: Any, groups: Any,
                 run_in_thread: Callable[[Callable[[], Any]], Deferred[Any]]) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.replication = replication
        self.groups = groups
        self._run_in_thread = run_in_thread
        self._fsync = config["storage.fsync"]
        self.committer = GroupCommitter(self._run_sync, self._after_sync)
        self._batches: dict[tuple[str, int], _Batch] = {}
        self._flush_call: Any = None
        self._hw_watchers: dict[tuple[str, int], list[tuple[int, Callable[[], None]]]] = {}
        self._loops: list[LoopingCall] = []
        self._key_cache: dict[bytes, tuple[int, bytes]] = {}
        self.closing = False
        self.stats = {"produced": 0, "batches": 0}
        self._producers: dict[tuple[str, int], ProducerState] = {}
        self.metrics: Any = None
        """``broker.metrics.BrokerMetrics`` when ``metrics_port`` is set: fed per batch."""

    def _run_sync(self, sync: Callable[[], Any]) -> Deferred[Any]:
        """The group committer's thread runner; times each fsync when metrics are on."""
        metrics = self.metrics
        return self._run_in_thread(sync if metrics is None else metrics.timed_fsync(sync))

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Create configured topics and start periodic work (fsync interval, retention)."""
        for name, settings in self.config.topics.items():
            existing = self.store.topic(name)
            if existing is None:
                try:
                    self._create(name, settings)
                except BadRequest as error:
                    if not isinstance(error.__cause__, TopicQuarantined):
                        raise
                    # The broker starts with everything else, as it does after quarantining.
                    log.error("topic %s of the configuration not created: %s", name,
                              error.message)
            elif settings.partitions > existing.config.partitions:
                self.add_partitions(name, settings.partitions)
            elif settings.partitions < existing.config.partitions:
                log.warning("topic %s: config asks for %d partitions but it has %d; partitions "
                            "are never removed", name, settings.partitions,
                            existing.config.partitions)
        if self._fsync == "interval":
            self._loop(self._fsync_interval, self.config["storage.fsync_interval_ms"] / 1000.0)
        self._loop(self._retention, 60.0)

    def _loop(self, function: Callable[[], Any], seconds: float) -> None:
        loop = LoopingCall(function)
        loop.clock = self.clock
        loop.start(seconds, now=False).addErrback(
            lambda failure: log.error("periodic task failed: %s", failure.getTraceback()))
        self._loops.append(loop)

    def _fsync_interval(self) -> Deferred[Any]:
        return self._run_in_thread(self.store.sync_all).addErrback(
            lambda failure: log.error("interval fsync failed: %s", failure.getErrorMessage()))

    def _retention(self) -> None:
        removed = self.store.enforce_retention()
        if removed:
            log.info("retention removed %d segment(s)", len(removed))

    def stop(self) -> Deferred[None]:
        """Flush pending produces, wait for their fsyncs, stop timers, close the store."""
        self.closing = True
        self.flush()
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()
        waits: list[Deferred[Any]] = []
        for key in list(self._hw_watchers):
            for _, wake in self._hw_watchers.pop(key):
                wake()

        def drained() -> Deferred[Any]:
            if self.committer.idle():
                return succeed(None)
            d: Deferred[Any] = Deferred()
            self.clock.callLater(0.01, lambda: drained().chainDeferred(d))
            return d

        waits.append(drained())

        def close_groups(_: object) -> Deferred[Any] | None:
            # The last group writes (COMMITs already answered are on disk; this flushes
            # liveness changes) finish before the store closes.
            return self.groups.close() if self.groups is not None else None

        def close_store(_: object) -> None:
            if self.replication is not None:
                self.replication.close()
            self.store.close()

        return DeferredList(waits).addCallback(close_groups).addCallback(close_store)

    # ---------------------------------------------------------------- topics

    def _create(self, name: str, settings: TopicSettings) -> Any:
        if len(self.store.topics) >= self.config["limits.max_topics"]:
            raise BadRequest(f"topic limit reached (limits.max_topics={self.config['limits.max_topics']})")
        if settings.partitions > self.config["limits.max_partitions_per_topic"]:
            raise BadRequest(f"at most {self.config['limits.max_partitions_per_topic']} partitions per topic")
        if settings.min_insync_replicas > settings.replication_factor:
            raise BadRequest("min_isr is greater than the replication factor")
        self._check_placement(name, settings)
        try:
            topic = self.store.create_topic(name, TopicConfig(
                partitions=settings.partitions,
                replication_factor=settings.replication_factor,
                min_insync_replicas=settings.min_insync_replicas,
                retention_ms=settings.retention_ms,
                retention_bytes=settings.retention_bytes,
            ))
        except OSError as exc:
            raise StorageError(f"cannot create topic {name}: {exc.strerror}") from exc
        except TopicQuarantined as exc:
            raise BadRequest(f"{exc}: repair or remove it first (docs/operations.md, "
                             "Recovering a damaged log)") from exc
        log.info("created topic %s (partitions=%d replication_factor=%d)", name,
                 settings.partitions, settings.replication_factor)
        return topic

    def _check_placement(self, name: str, settings: TopicSettings) -> None:
        """In a cluster, ``BadRequest`` unless every partition's replica list can be built:
        no more replicas than brokers, and as many as an explicit ``cluster.replicas`` list
        names (the rule the ``topics:`` section is held to at startup). A single broker
        takes any factor: REPLICA_FETCH reports stand in for its followers (V1 spec,
        Replication)."""
        cluster = self.config.cluster
        if cluster is None:
            return
        rf = settings.replication_factor
        brokers = len(cluster.brokers)
        if rf > brokers:
            raise BadRequest(f"replication factor {rf} is larger than the number of brokers "
                             f"({brokers})")
        for partition in range(settings.partitions):
            try:
                cluster.replicas(name, partition, rf)
            except ValueError as exc:
                raise BadRequest(str(exc)) from None

    def resolve(self, name: str, partition: int | None, create: bool) -> Any:
        """The topic, after checking ``partition`` against its count.

        A missing topic is auto-created with the defaults when ``create`` and
        ``auto_create_topics`` allow it, but only once the request passed its checks: a
        partition beyond the would-be count is refused first and creates nothing.
        """
        topic = self.store.topic(name)
        if topic is None:
            if not (create and self.config["auto_create_topics"]):
                raise BadRequest("unknown topic")
            defaults = self.config.topic_defaults
            if partition is not None and partition >= defaults.partitions:
                raise BadRequest(f"partition {partition} out of range; topic {name} would "
                                 f"have {defaults.partitions} partitions")
            return self._create(name, defaults)
        if partition is not None and partition >= topic.config.partitions:
            raise BadRequest(f"partition {partition} out of range; topic {name} has "
                             f"{topic.config.partitions} partitions")
        return topic

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     min_insync_replicas: int | None, retention_ms: int | None,
                     retention_bytes: int | None) -> Any:
        if self.store.topic(name) is not None:
            raise BadRequest("topic already exists")
        if partitions < 1 or replication_factor < 1:
            raise BadRequest("partitions and replication_factor must be at least 1")
        defaults = self.config.topic_defaults
        return self._create(name, TopicSettings(
            partitions=partitions,
            replication_factor=replication_factor,
            min_insync_replicas=min(replication_factor, defaults.min_insync_replicas)
            if min_insync_replicas is None else min_insync_replicas,
            retention_ms=defaults.retention_ms if retention_ms is None else retention_ms,
            retention_bytes=defaults.retention_bytes if retention_bytes is None else retention_bytes,
        ))

    def delete_topic(self, name: str) -> None:
        if self.store.topic(name) is None:
            raise BadRequest("unknown topic")
        self.flush()
        self.store.delete_topic(name)
        if self.replication is not None:
            self.replication.forget_topic(name)
        if self.groups is not None:
            self.groups.topic_deleted(name)
        log.info("deleted topic %s", name)

    def add_partitions(self, name: str, count: int) -> Any:
        topic = self.store.topic(name)
        if topic is None:
            raise BadRequest("unknown topic")
        if count <= topic.config.partitions:
            raise BadRequest(f"topic {name} already has {topic.config.partitions} partitions; "
                             "the new count must be larger")
        if count > self.config["limits.max_partitions_per_topic"]:
            raise BadRequest(f"at most {self.config['limits.max_partitions_per_topic']} partitions per topic")
        topic = self.store.add_partitions(name, count)
        if self.replication is not None:
            self.replication.partitions_added(name)
        if self.groups is not None:
            self.groups.partitions_changed(name)
        log.info("topic %s now has %d partitions", name, count)
        return topic

    def alter_topic(self, name: str, changes: dict[str, int | None]) -> Any:
        """Change a topic's retention (``retention_ms``, ``retention_bytes``; None: no
        limit), kept in its ``topic.json``; the next retention pass applies it."""
        if self.store.topic(name) is None:
            raise BadRequest("unknown topic")
        topic = self.store.alter_topic(name, changes)
        log.info("topic %s altered: %s", name,
                 " ".join(f"{key}={value}" for key, value in sorted(changes.items())))
        return topic

    # ---------------------------------------------------------------- produce

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
        return self._key_info(key)[0] % partitions

    def produce(self, topic_name: str, partition: int | None, key: bytes, value: bytes,
                acks: str, callback: ProduceCallback) -> None:
        """Queue one message; ``callback`` gets a ``ProduceResult`` or a ``SkerryError``."""
        self.produce_to(topic_name, partition, key, value, acks, _CALLBACK_SINK, callback)

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
            self._idempotent(topic_name, partition, key, value, acks, sink, token, pid, seq)
            return
        topic = self.store.topics.get(topic_name)
        if topic is None or partition is not None:
            topic = self.resolve(topic_name, partition, True)
        hashed, header = self._key_info(key)
        if partition is None:
            partition = hashed % topic.config.partitions
        batch = self._batches.get((topic_name, partition))
        if batch is None:
            if self.replication is not None and not self.replication.is_leader(topic_name, partition):
                raise NotLeader(f"partition {partition} of {topic_name} is a follower on this broker")
            plog = topic.partitions[partition]
            if plog.failed is not None:
                raise StorageError(f"partition {partition} of {topic_name} refuses writes "
                                   f"after an I/O error: {plog.failed.message}")
            batch = self._batches[(topic_name, partition)] = _Batch(topic_name, partition, plog, acks)
            if self._flush_call is None:
                self._flush_call = self.clock.callLater(0, self.flush)
        elif not batch.mixed and batch.acks[0] != acks:
            batch.mixed = True
        batch.payloads.append(value)
        batch.headers.append(header)
        batch.acks.append(acks)
        batch.sinks.append(sink)
        batch.tokens.append(token)

    def _idempotent(self, topic_name: str, partition: int | None, key: bytes, value: bytes,
                    acks: str, sink: ProduceSink, token: Any, pid: str, seq: int) -> None:
        """Queue one idempotent produce, or answer it as a duplicate of what the log holds."""
        topic = self.resolve(topic_name, partition, True)
        if partition is None:
            partition = self._key_info(key)[0] % topic.config.partitions
        if self.replication is not None and not self.replication.is_leader(topic_name, partition):
            raise NotLeader(f"partition {partition} of {topic_name} is a follower on this broker")
        plog = topic.partitions[partition]
        state = self._producer_state(topic_name, partition, plog)
        last = state.last_seq.get(pid)
        if last is not None and seq > last + 1:
            raise BadRequest(f"out of order sequence {seq} for producer {pid} on partition "
                             f"{partition} of {topic_name}; expected {last + 1}")
        if last is None or seq == last + 1:
            if plog.failed is not None:
                raise StorageError(f"partition {partition} of {topic_name} refuses writes "
                                   f"after an I/O error: {plog.failed.message}")
            header = producer_headers(self._key_info(key)[1], pid, seq)
            batch = self._batches.get((topic_name, partition))
            if batch is None:
                batch = self._batches[(topic_name, partition)] = _Batch(topic_name, partition,
                                                                        plog, acks)
                if self._flush_call is None:
                    self._flush_call = self.clock.callLater(0, self.flush)
            elif not batch.mixed and batch.acks[0] != acks:
                batch.mixed = True
            state.last_seq[pid] = seq
            batch.idem.append((len(batch.payloads), pid, seq))
            batch.payloads.append(value)
            batch.headers.append(header)
            batch.acks.append(acks)
            batch.sinks.append(sink)
            batch.tokens.append(token)
            return
        offset = state.offset_of(pid, seq)
        if offset is None:  # the original is still queued for this turn's append
            self.flush()
            offset = state.offset_of(pid, seq)
        if offset is None:
            raise BadRequest(f"sequence {seq} of producer {pid} on partition {partition} of "
                             f"{topic_name} is no longer retained")
        self.clock.callLater(0, self._answer_duplicate, topic_name, partition, plog, offset,
                             acks, sink, token)

    def _producer_state(self, topic_name: str, partition: int, plog: PartitionLog) -> ProducerState:
        """The partition's idempotent-produce state (scanned from the log when it has none
        yet, when the log was replaced, or when the log was truncated below it)."""
        state = self._producers.get((topic_name, partition))
        if state is None or state.log is not plog or plog.next_offset <= state.high:
            state = self._producers[(topic_name, partition)] = ProducerState.scan(plog)
        state.forget_removed()
        return state

    def _answer_duplicate(self, topic: str, partition: int, plog: PartitionLog, offset: int,
                          acks: str, sink: ProduceSink, token: Any) -> None:
        """Answer a duplicate as its original is answered: once as durable as ``acks`` asks."""

        def answer(error: SkerryError | None) -> None:
            if error is not None:
                sink.produced(token, partition, -1, -1, error)
            else:
                sink.produced(token, partition, offset, self.hw(topic, partition), None)
            sink.flush()

        def failed(failure: Any) -> None:
            value = failure.value
            answer(value if isinstance(value, SkerryError) else StorageError(failure.getErrorMessage()))

        if acks == "all" and self.replication is not None:
            self.replication.wait_for_all(topic, partition, offset).addCallbacks(
                lambda _hw: answer(None), failed)
        elif acks != "0" and self._fsync == "always":
            self.committer.wait(plog, offset + 1, answer)
        else:
            answer(None)

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
        plog = batch.log
        count = len(batch.payloads)
        try:
            first = plog.append(batch.payloads, batch.headers)
        except SkerryError as error:
            log.error("append to %s/%d failed: %s", batch.topic, batch.partition, error.message)
            self._answer(batch, -1, range(count), error)
            return
        self.stats["produced"] += count
        self.stats["batches"] += 1
        if self.metrics is not None:
            self.metrics.appended(batch.topic, batch.payloads, batch.headers)
        topic, partition = batch.topic, batch.partition
        if batch.idem:
            state = self._producers.get((topic, partition))
            if state is not None:
                for index, pid, seq in batch.idem:
                    state.record(pid, seq, first + index)
        if self.replication is not None:
            self.replication.on_appended(topic, partition)
        always = self._fsync == "always"
        if batch.mixed:
            acks = batch.acks
            quick = [i for i in range(count) if acks[i] == "0" or (acks[i] == "1" and not always)]
            later = [i for i in range(count) if acks[i] == "1" and always]
            waiting_all = [i for i in range(count) if acks[i] == "all"]
        else:
            level = batch.acks[0]
            everyone = range(count)
            quick = everyone if level == "0" or (level == "1" and not always) else ()
            later = everyone if level == "1" and always else ()
            waiting_all = everyone if level == "all" else ()
        if quick:
            self._answer(batch, first, quick, None)
        if not later and not waiting_all:
            self._hw_changed(topic, partition)
            return

        def durable(error: SkerryError | None) -> None:
            if later:
                self._answer(batch, first, later, error)
            if waiting_all:
                if error is not None:
                    self._answer(batch, first, waiting_all, error)
                else:
                    self._wait_all(batch, first, waiting_all)

        if always:
            self.committer.wait(plog, first + count, durable)
        else:
            self._hw_changed(topic, partition)
            durable(None)

    def _wait_all(self, batch: _Batch, first: int, group: Sequence[int]) -> None:
        d = self.replication.wait_for_all(batch.topic, batch.partition, first + group[-1])
        d.addCallbacks(lambda _hw: self._answer(batch, first, group, None),
                       lambda failure: self._answer(
                           batch, first, group,
                           failure.value if isinstance(failure.value, SkerryError)
                           else StorageError(failure.getErrorMessage())))

    def _answer(self, batch: _Batch, first: int, group: Sequence[int],
                error: SkerryError | None) -> None:
        """Hand each message's result to its sink, then flush each sink once."""
        partition = batch.partition
        sinks, tokens = batch.sinks, batch.tokens
        if error is not None:
            offset = hw = -1
        else:
            hw = self.hw(batch.topic, partition)
        touched: dict[int, ProduceSink] = {}
        for index in group:
            sink = sinks[index]
            if error is None:
                offset = first + index
            sink.produced(tokens[index], partition, offset, hw, error)
            touched[id(sink)] = sink
        for sink in touched.values():
            sink.flush()

    def _after_sync(self, plog: PartitionLog) -> None:
        if self.replication is not None:
            self.replication.on_durable(plog.topic, plog.partition)
        self._hw_changed(plog.topic, plog.partition)

    # ---------------------------------------------------------------- consume

    def hw(self, topic: str, partition: int) -> int:
        if self.replication is not None:
            return self.replication.hw(topic, partition)
        return self.store.partition(topic, partition).next_offset - 1

    def _read_bounds(self, topic_name: str, partition: int, max_messages: int | None,
                     create: bool) -> tuple[PartitionLog, int, int, int]:
        """(log, message limit, byte limit, hw) of a consume-style read: the topic checked
        (or auto-created), ``max_messages`` capped by the configured limit."""
        topic = self.resolve(topic_name, partition, create)
        limit = self.config["limits.consume_max_messages"]
        if max_messages is not None:
            limit = min(limit, max_messages)
        return (topic.partitions[partition], limit, self.config["limits.consume_max_bytes"],
                self.hw(topic_name, partition))

    def read(self, topic_name: str, partition: int, offset: int,
             max_messages: int | None, create: bool = True) -> tuple[ReadResult, int]:
        """Committed messages from ``offset`` (``<= hw``), bounded by the configured limits."""
        plog, limit, max_bytes, hw = self._read_bounds(topic_name, partition, max_messages, create)
        result = plog.read(offset, limit, max_bytes, hw + 1)
        if self.metrics is not None and result.records:
            self.metrics.consumed(topic_name, len(result.records), len(result.raw))
        return result, hw

    def read_raw(self, topic_name: str, partition: int, offset: int,
                 max_messages: int | None, create: bool = True) -> tuple[RawReadResult, int]:
        """``read`` without decoding: the stored bytes and a count (``PartitionLog.read_raw``)."""
        plog, limit, max_bytes, hw = self._read_bounds(topic_name, partition, max_messages, create)
        result = plog.read_raw(offset, limit, max_bytes, hw + 1)
        if self.metrics is not None and result.count:
            self.metrics.consumed(topic_name, result.count, len(result.raw))
        return result, hw

    def wait_for_data(self, topic: str, partition: int, offset: int,
                      timeout_ms: int) -> Deferred[None]:
        """Fires when a committed message at ``offset`` may exist, or after ``timeout_ms``."""
        d: Deferred[None] = Deferred()
        key = (topic, partition)
        watchers = self._hw_watchers.setdefault(key, [])
        timer: Any = None

        def wake() -> None:
            if timer is not None and timer.active():
                timer.cancel()
            if not d.called:
                d.callback(None)

        def expire() -> None:
            entries = self._hw_watchers.get(key)
            if entries is not None:
                entries[:] = [e for e in entries if e[1] is not wake]
                if not entries:
                    del self._hw_watchers[key]
            if not d.called:
                d.callback(None)

        watchers.append((offset, wake))
        timer = self.clock.callLater(timeout_ms / 1000.0, expire)
        return d

    def _hw_changed(self, topic: str, partition: int) -> None:
        watchers = self._hw_watchers.get((topic, partition))
        if not watchers:
            return
        hw = self.hw(topic, partition)
        ready = [wake for offset, wake in watchers if offset <= hw]
        if not ready:
            return
        remaining = [(offset, wake) for offset, wake in watchers if offset > hw]
        if remaining:
            self._hw_watchers[(topic, partition)] = remaining
        else:
            del self._hw_watchers[(topic, partition)]
        for wake in ready:
            wake()

    def forget_producers(self, topic: str, partition: int) -> None:
        """Replication changed the partition (its role, its epoch, a confirmed leadership):
        drop its idempotent-produce state, rebuilt from the log at its next use. While it
        was not leading, the log may have taken another leader's records or been truncated;
        a state kept across that would miss those producers (appending their resends
        again) or point at offsets that now hold other messages (dropping a resend)."""
        self._producers.pop((topic, partition), None)

    def notify_hw(self, topic: str, partition: int) -> None:
        """Tell long polls that ``hw`` of a partition may have moved (replication events)."""
        self._hw_changed(topic, partition)

    # ---------------------------------------------------------------- batch produce (Iggy)

    def produce_batch(self, topic_name: str, partition: int, payloads: Sequence[bytes],
                      user_headers: Sequence[bytes] | None, ids: Sequence[int] | None,
                      origin_timestamps: Sequence[int] | None, acks: str,
                      callback: Callable[[Any], None]) -> None:
        """Append a whole batch to one partition in one store append; answer once.

        For transports whose requests are batches already (Iggy's SendMessages). The
        messages get consecutive offsets in order; ``ids`` of 0 become UUIDv4s; messages
        ``produce`` queued earlier in this turn for the same partition land first.
        ``callback`` gets one ``ProduceResult`` (``offset`` = the first message's) once the
        batch is as durable as ``acks`` asks (the same rules as ``produce``), or a
        ``SkerryError``. Refusals that change nothing raise at once: unknown topic (never
        auto-created here), partition out of range, NOT_LEADER, a failed partition, and
        ``BadRequest`` for input the store refuses.
        """
        plog = self._batch_target(topic_name, partition)
        first = self._append_batch(topic_name, partition, plog, payloads, user_headers, ids,
                                   origin_timestamps, callback)
        if first is not None:
            self._batch_appended(topic_name, partition, plog, first, len(payloads), acks, callback)

    def _append_batch(self, topic_name: str, partition: int, plog: PartitionLog,
                      payloads: Sequence[bytes], user_headers: Sequence[bytes] | None,
                      ids: Sequence[int] | None, origin_timestamps: Sequence[int] | None,
                      callback: Callable[[Any], None]) -> int | None:
        """The store append of ``produce_batch``: the first offset, or None after answering
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
                       callback: Callable[[Any], None]) -> None:
        """``produce_batch`` for messages already framed as records (Iggy's SendMessages
        message area, ``ends`` its index table's end positions): the store stamps them in
        one pass (``PartitionLog.append_framed``) instead of rebuilding every record.

        The same offsets, ids, answers and refusals as ``produce_batch`` with the messages
        split apart; ``BadRequest`` when the store refuses the framing.
        """
        plog = self._batch_target(topic_name, partition)
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
        self._batch_appended(topic_name, partition, plog, first, count, acks, callback)

    def produce_keyed_batch(self, topic_name: str, partition: int, keys: Sequence[bytes],
                            payloads: Sequence[bytes], acks: str, callback: Callable[[Any], None],
                            pid: str | None = None, seq: int | None = None) -> None:
        """``produce_batch`` for V1 messages (the additive PRODUCE_BATCH): each non-empty key
        is stored as the key header, as ``produce`` stores it, and ``callback`` gets one
        ``BatchProduceResult`` (or a ``SkerryError``) once the batch is as durable as
        ``acks`` asks. The batch is appended with one store append, after every message was
        built (nothing is written when one is refused). Never creates a topic.

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
        # Keys repeat: one key header per distinct key, then C-level lookups per message.
        by_key = {key: self._key_info(key)[1] if key else b"" for key in dict.fromkeys(keys)}
        skip = 0
        state: ProducerState | None = None
        if pid is not None and seq is not None:
            state = self._producer_state(topic_name, partition, plog)
            last = state.last_seq.get(pid)
            if last is not None and seq > last + 1:
                raise BadRequest(f"out of order sequence {seq} for producer {pid} on partition "
                                 f"{partition} of {topic_name}; expected {last + 1}")
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
                callback(BatchProduceResult(partition, result.offset, appended, skip, result.hw))

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
                           callback: Callable[[Any], None]) -> None:
        """A batch the partition holds entirely: answered with its original first offset once
        its last message is as durable as ``acks`` asks (as ``_answer_duplicate`` does)."""
        first = state.offset_of(pid, seq)
        last = state.offset_of(pid, seq + count - 1)
        if first is None or last is None:
            raise BadRequest(f"sequence {seq} of producer {pid} on partition {partition} of "
                             f"{topic_name} is no longer retained")

        def held(result: Any) -> None:
            if isinstance(result, SkerryError):
                callback(result)
            else:
                callback(BatchProduceResult(partition, first, 0, count, result.hw))

        self.clock.callLater(0, self._answer_duplicate, topic_name, partition, plog, last, acks,
                             _CALLBACK_SINK, held)

    def _batch_target(self, topic_name: str, partition: int) -> PartitionLog:
        """The partition a batch goes to, after the refusals that change nothing."""
        topic = self.resolve(topic_name, partition, False)
        if self.replication is not None and not self.replication.is_leader(topic_name, partition):
            raise NotLeader(f"partition {partition} of {topic_name} is a follower on this broker")
        plog = topic.partitions[partition]
        if plog.failed is not None:
            raise StorageError(f"partition {partition} of {topic_name} refuses writes "
                               f"after an I/O error: {plog.failed.message}")
        if (topic_name, partition) in self._batches:
            self.flush()
        return plog

    def _batch_appended(self, topic_name: str, partition: int, plog: PartitionLog, first: int,
                        count: int, acks: str, callback: Callable[[Any], None]) -> None:
        """Count an appended batch and answer ``callback`` once it is as durable as ``acks``."""
        self.stats["produced"] += count
        self.stats["batches"] += 1
        if self.replication is not None:
            self.replication.on_appended(topic_name, partition)

        def answer(error: SkerryError | None) -> None:
            callback(error if error is not None
                     else ProduceResult(partition, first, self.hw(topic_name, partition)))

        def durable(error: SkerryError | None) -> None:
            if error is not None or acks != "all" or self.replication is None:
                answer(error)
                return
            d = self.replication.wait_for_all(topic_name, partition, first + count - 1)
            d.addCallbacks(lambda _hw: answer(None),
                           lambda failure: answer(
                               failure.value if isinstance(failure.value, SkerryError)
                               else StorageError(failure.getErrorMessage())))

        if acks != "0" and self._fsync == "always":
            self.committer.wait(plog, first + count, durable)
        else:
            self._hw_changed(topic_name, partition)
            durable(None)

    def set_topic_retention(self, name: str, retention_ms: int | None,
                            retention_bytes: int | None) -> None:
        """Change a topic's retention for this process (``topic.json`` keeps the values
        the topic was created with; a transport that changes them re-applies its own
        record at start). The next retention pass applies them."""
        topic = self.store.topic(name)
        if topic is None:
            raise BadRequest("unknown topic")
        from dataclasses import replace  # local: keeps this additive method self-contained

        topic.config = replace(topic.config, retention_ms=retention_ms,
                               retention_bytes=retention_bytes)

    def delete_oldest_segments(self, name: str, partition: int, count: int) -> int:
        """Delete up to ``count`` of a partition's oldest sealed segments (never the active
        one); returns how many went. Their messages are gone; offsets do not change."""
        plog = self.resolve(name, partition, False).partitions[partition]
        self.flush()
        removed = 0
        while removed < count and plog.segment_count > 1:
            # now_us=0: no time-based roll or expiry, only the size rule, which removes
            # exactly the oldest sealed segment when the limit is one byte under the size.
            gone = plog.enforce_retention(0, None, plog.size_bytes() - 1)
            if not gone:
                break
            removed += len(gone)
        if removed:
            log.info("deleted %d segment(s) of %s/%d", removed, name, partition)
        return removed

    # ---------------------------------------------------------------- views for transports

    def topic_names(self) -> list[str]:
        """The name of every topic."""
        return list(self.store.topics)

    def topic_config(self, name: str) -> TopicConfig | None:
        """A topic's settings (partition count, replication, retention); None when there is
        no such topic."""
        topic = self.store.topic(name)
        return None if topic is None else topic.config

    def partition_summary(self, name: str, partition: int) -> PartitionSummary:
        """A partition's offsets and size (``KeyError``/``IndexError`` when it does not exist)."""
        plog = self.store.partition(name, partition)
        return PartitionSummary(plog.first_offset, plog.next_offset, plog.segment_count,
                                plog.size_bytes())

    def offset_for_timestamp(self, name: str, partition: int, timestamp_us: int) -> int | None:
        """The first offset whose record timestamp is ``>= timestamp_us`` (None if none)."""
        return self.store.partition(name, partition).offset_for_timestamp(timestamp_us)

    def wait_synced(self, name: str, partition: int,
                    callback: Callable[[SkerryError | None], None]) -> None:
        """Call ``callback(None)`` once everything appended to the partition so far is
        fsynced, ``callback(error)`` when the fsync failed."""
        plog = self.store.partition(name, partition)
        self.committer.wait(plog, plog.next_offset, callback)
