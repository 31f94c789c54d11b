"""The ``skerry`` PySpark data source: batch and streaming reads of topics through a broker,
batch and streaming writes into a topic (modelled on Spark's Kafka connector).

Owns: the options, the driver-side planning (which topic partitions, which offset ranges,
micro-batch end offsets, checkpointed offsets), the executor-side reads (pipelined FETCH
``enc=raw``: the stored record bytes, decoded to Arrow by ``data.spark.records``) and writes
(Arrow batches cut into idempotent PRODUCE_BATCH requests by ``data.spark.batches``, so a
replayed micro-batch or a retried task is not written twice).

Must not import: Twisted, the broker's server side (only the wire protocol, via the
Python client ``broker.client.sync``).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from broker.client.sync import MAX_BATCH_BYTES, Client, ClientError, Fetched
from data.spark.batches import requests
from data.spark.offsets import (
    DataLoss,
    OffsetRange,
    from_json_offsets,
    parse_spec,
    rate_limit,
    resolve,
    split_min_partitions,
    split_ranges,
    to_json_offsets,
)
from data.spark.records import HEADERS_DDL, SCHEMA_DDL, to_batch, walk_records

__all__ = ["SkerryDataSource", "SkerryOptions", "read_range"]

log = logging.getLogger("skerry.spark")

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
FETCH_MAX_RECORDS = 100_000
"""Records asked for per FETCH (the broker's limit)."""
FETCHES_IN_FLIGHT = 2
"""FETCHes a reader keeps sent ahead: the broker reads the next chunk while this one is
decoded."""
_TRUE = ("true", "1", "yes")
TEST_KILL_EXIT_CODE = 86
"""The exit status of a Python worker that ``testKillAfterRecords`` kills."""


class SkerryOptions:
    """The source's options, parsed once on the driver (picklable plain values)."""

    def __init__(self, options: Any) -> None:
        get = options.get
        self.bootstrap: str = get("bootstrap", DEFAULT_BOOTSTRAP)
        topic = get("topic") or get("subscribe") or ""
        self.topics: list[str] = [t.strip() for t in topic.split(",") if t.strip()]
        parts = get("partitions")
        self.partitions: set[int] | None = (
            {int(p) for p in parts.split(",") if p.strip()} if parts else None)
        self.starting = get("startingOffsets")
        self.ending = get("endingOffsets")
        ts = get("startingTimestamp")
        self.starting_ts: int | None = int(ts) if ts else None
        self.fail_on_data_loss = str(get("failOnDataLoss", "true")).lower() in _TRUE
        mrp = get("maxRecordsPerPartition")
        self.max_records: int | None = int(mrp) if mrp else None
        mp = get("minPartitions")
        self.min_partitions: int | None = int(mp) if mp else None
        self.batch_bytes = int(get("batchBytes", str(MAX_BATCH_BYTES)))
        self.include_headers = str(get("includeHeaders", "false")).lower() in _TRUE
        mot = get("maxOffsetsPerTrigger")
        self.max_per_trigger: int | None = int(mot) if mot else None
        self.group: str | None = get("groupId") or None
        self.fetch_max_bytes = int(get("fetchMaxBytes", str(16 << 20)))
        self.acks: str = get("acks", "1")
        self.producer_id: str | None = get("producerId") or None
        kill = get("testKillAfterRecords")  # fault injection for tests: see SkerryStreamWriter
        self.test_kill_after: int | None = int(kill) if kill else None

    def schema(self) -> str:
        return SCHEMA_DDL + (HEADERS_DDL if self.include_headers else "")


class SkerryDataSource(DataSource):
    """``spark.read.format("skerry")`` / ``readStream`` / ``write`` / ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "skerry"

    def schema(self) -> str:
        return SkerryOptions(self.options).schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        return SkerryBatchReader(SkerryOptions(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SkerryStreamReader(SkerryOptions(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return SkerryBatchWriter(SkerryOptions(self.options), schema, uuid.uuid4().hex[:16])

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return SkerryStreamWriter(SkerryOptions(self.options), schema)


# ----------------------------------------------------------------------------- reading


class RangePartition(InputPartition):
    def __init__(self, r: OffsetRange) -> None:
        super().__init__(r)
        self.range = r


def _bounds(client: Client, opts: SkerryOptions) -> dict[str, dict[int, tuple[int, int]]]:
    """``{topic: {partition: (earliest, latest)}}`` for the selected partitions."""
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for topic in opts.topics:
        meta = client.metadata(topic)
        hws, earliest = meta["hw"], meta["earliest"]
        assert isinstance(hws, list) and isinstance(earliest, list)
        out[topic] = {p: (earliest[p], hws[p] + 1) for p in range(len(hws))
                      if opts.partitions is None or p in opts.partitions}
    return out


def _starts(client: Client, opts: SkerryOptions, bounds: dict[str, dict[int, tuple[int, int]]],
            default: str) -> dict[str, dict[int, int]]:
    if opts.starting_ts is not None and not opts.starting:
        out: dict[str, dict[int, int]] = {}
        for topic, parts in bounds.items():
            out[topic] = {}
            for p, (_e, latest) in parts.items():
                found = client.offsets(topic, p, opts.starting_ts)[2]
                out[topic][p] = latest if found is None or found < 0 else found
        return out
    spec = parse_spec(opts.starting, default)
    return {t: {p: resolve(spec, t, p, e, lt, opts.fail_on_data_loss, -2) for p, (e, lt) in parts.items()}
            for t, parts in bounds.items()}


def _ends(opts: SkerryOptions, bounds: dict[str, dict[int, tuple[int, int]]]) -> dict[str, dict[int, int]]:
    spec = parse_spec(opts.ending, "latest")
    return {t: {p: resolve(spec, t, p, e, lt, False, -1) for p, (e, lt) in parts.items()}
            for t, parts in bounds.items()}


def read_range(opts: SkerryOptions, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The rows of offsets ``[r.start, r.end)`` (executor side), one batch per FETCH."""
    if r.end <= r.start:
        return
    with Client(opts.bootstrap) as client:
        for got in _fetches(client, opts, r):
            # max= bounds the answer to the range; the guard keeps it so
            limit = got.count - max(0, got.next_offset - r.end)
            pos, heads = walk_records(got.data, limit=limit)
            yield to_batch(got.data, pos, r.topic, r.partition, opts.include_headers, heads)


def _fetches(client: Client, opts: SkerryOptions, r: OffsetRange) -> Iterator[Fetched]:
    """The FETCH answers covering ``[r.start, r.end)`` in offset order, with up to
    ``FETCHES_IN_FLIGHT`` requests sent ahead for the next windows (``FETCH_MAX_RECORDS``
    records at first).

    An answer that ends short of its window (its byte budget) or skips offsets (retention)
    moves the read position; answers to windows sent before that are then dropped and the
    windows are asked for again from the new position. A window cut short by the byte budget
    also sizes the next ones: they ask for as many records as that answer carried, so the
    answers fill their windows and the ones sent ahead are not wasted.
    """
    at = r.start  # everything before is read
    planned = r.start  # everything before is asked for
    window = FETCH_MAX_RECORDS
    windows: deque[tuple[int, int]] = deque()  # (start, size) of each FETCH in flight
    while at < r.end:
        while planned < r.end and len(windows) < FETCHES_IN_FLIGHT:
            size = min(window, r.end - planned)
            client.send_fetch(r.topic, r.partition, planned, size, opts.fetch_max_bytes)
            windows.append((planned, size))
            planned += size
        start, size = windows.popleft()
        got = client.receive_fetch()
        if start != at:
            continue  # asked for before the position moved
        if got.count == 0:
            if got.hw + 1 < r.end and at < got.start:
                _lost(opts, r, at, got.start)
                at = planned = got.start
                continue
            if got.hw + 1 < r.end:
                raise DataLoss(f"{r.topic}/{r.partition}: offsets {at}..{r.end - 1} are not "
                               f"committed on the broker (hw {got.hw})")
            return
        first = int.from_bytes(got.data[24:32], "little")
        if first > at:
            _lost(opts, r, at, first)
        yield got
        at = got.next_offset
        if at != start + size:
            if first == start and got.count < size:
                window = got.count  # the byte budget's worth of these records
            planned = at  # short of its window: ask again from here
        else:
            planned = max(planned, at)


def _lost(opts: SkerryOptions, r: OffsetRange, at: int, first: int) -> None:
    message = (f"{r.topic}/{r.partition}: offsets {at}..{first - 1} are no longer retained; "
               "set failOnDataLoss=false to skip them")
    if opts.fail_on_data_loss:
        raise DataLoss(message)
    log.warning("%s", message)


class SkerryBatchReader(DataSourceReader):
    def __init__(self, opts: SkerryOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        with Client(self.opts.bootstrap) as client:
            bounds = _bounds(client, self.opts)
            starts = _starts(client, self.opts, bounds, "earliest")
        ends = _ends(self.opts, bounds)
        ranges = [OffsetRange(t, p, starts[t][p], ends[t][p]) for t in bounds for p in sorted(bounds[t])]
        pieces = split_min_partitions(split_ranges(ranges, self.opts.max_records), self.opts.min_partitions)
        return [RangePartition(r) for r in pieces] or [RangePartition(OffsetRange(self.opts.topics[0], 0, 0, 0))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        yield from read_range(self.opts, partition.range)


class SkerryStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets in the checkpoint are ``{topic: {"<partition>": <next offset>}}``."""

    def __init__(self, opts: SkerryOptions) -> None:
        self.opts = opts
        self._until: dict[str, dict[int, int]] | None = None  # Trigger.AvailableNow's end

    def _latest(self) -> dict[str, dict[int, int]]:
        with Client(self.opts.bootstrap) as client:
            return {t: {p: lt for p, (_e, lt) in parts.items()} for t, parts in _bounds(client, self.opts).items()}

    def initialOffset(self) -> dict:
        with Client(self.opts.bootstrap) as client:
            bounds = _bounds(client, self.opts)
            return to_json_offsets(_starts(client, self.opts, bounds, "latest"))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_per_trigger:
            return ReadMaxRows(self.opts.max_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._until = self._latest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json_offsets(start)
        latest = self._until if self._until is not None else self._latest()
        for topic, parts in latest.items():  # partitions added since: from their earliest (0)
            for p in parts:
                begin.setdefault(topic, {}).setdefault(p, 0)
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = rate_limit(begin, latest, cap)
        for topic, parts in end.items():
            for p, offset in parts.items():
                parts[p] = max(offset, begin[topic][p])
        return to_json_offsets(end)

    def reportLatestOffset(self) -> dict | None:
        return to_json_offsets(self._latest())

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = from_json_offsets(start), from_json_offsets(end)
        ranges = [OffsetRange(t, p, begin.get(t, {}).get(p, 0), o) for t, parts in sorted(stop.items())
                  for p, o in sorted(parts.items())]
        pieces = split_ranges(ranges, self.opts.max_records)
        return [RangePartition(r) for r in split_min_partitions(pieces, self.opts.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        yield from read_range(self.opts, partition.range)

    def commit(self, end: dict) -> None:
        """Publish progress as the ``groupId`` consumer group's offsets (DESCRIBE_GROUP lag)."""
        if not self.opts.group:
            return
        try:
            with Client(self.opts.bootstrap) as client:
                for topic, parts in from_json_offsets(end).items():
                    for p, offset in parts.items():
                        client.admin_commit(self.opts.group, topic, p, offset)
        except (ClientError, OSError) as exc:  # progress publication is best effort
            log.warning("could not publish offsets to group %s: %s", self.opts.group, exc)


# ----------------------------------------------------------------------------- writing


class SkerryCommit(WriterCommitMessage):
    def __init__(self, count: int) -> None:
        self.count = count


def _limit(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The first ``rows`` rows of a stream of batches."""
    for batch in batches:
        if rows <= 0:
            return
        yield batch.slice(0, rows)
        rows -= batch.num_rows


def write_batches(opts: SkerryOptions, batches: Iterator[pa.RecordBatch], pid: str) -> int:
    """Executor side: produce every row with ``pid`` and per-partition sequence numbers 0, 1, ...
    (a retried task or a replayed micro-batch resends the same numbers; the broker drops them),
    in PRODUCE_BATCH requests of at most ``batchBytes``. With ``testKillAfterRecords=n`` the
    process dies once the first ``n`` rows are acknowledged (see ``SkerryStreamWriter``)."""
    if len(opts.topics) != 1:
        raise ValueError("writing needs exactly one topic option")
    topic = opts.topics[0]
    with Client(opts.bootstrap) as client:
        partitions = client.partitions(topic)
        if opts.test_kill_after is not None:
            batches = _limit(batches, opts.test_kill_after)
        sent = (request for batch in batches for request in requests(batch, partitions, opts.batch_bytes))
        acks = client.produce_batches(topic, sent, opts.acks, pid)
        if opts.test_kill_after is not None:
            # Fault injection: the worker process dies here, as if killed. No exception, no
            # cleanup (the connection is not closed, Spark gets no answer from the task).
            os._exit(TEST_KILL_EXIT_CODE)
        return sum(a.count + a.duplicates for a in acks)


def _task_ids() -> tuple[int, str | None, str | None]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return 0, None, None
    return (ctx.partitionId(), ctx.getLocalProperty("streaming.sql.batchId"),
            ctx.getLocalProperty("sql.streaming.queryId"))


class SkerryBatchWriter(DataSourceArrowWriter):
    """Spark hands each task its rows as Arrow batches (no Row object per message)."""

    def __init__(self, opts: SkerryOptions, schema: StructType, job: str) -> None:
        self.opts, self.schema, self.job = opts, schema, job

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        partition_id, _batch, _query = _task_ids()
        pid = f"{self.opts.producer_id or 'spark-' + self.job}.{partition_id}"
        return SkerryCommit(write_batches(self.opts, iterator, pid))


class SkerryStreamWriter(DataSourceStreamArrowWriter):
    """Exactly once per micro-batch: producer id ``<query id>.<batch id>.<task partition>``,
    so a batch Spark replays after a failure resends the same ids and sequence numbers.

    Fault injection, for tests only (not a user option): ``testKillAfterRecords=n`` makes
    every writing task send its first ``n`` rows as usual (the same PRODUCE_BATCH requests
    as without the option, the last one cut at row ``n``), wait until the broker has
    acknowledged all of them, and then end its Python worker process at once with
    ``os._exit(TEST_KILL_EXIT_CODE)``: no exception, no cleanup, the connection left open
    for the kernel to close. Spark sees a crashed worker ("Python worker exited
    unexpectedly") and fails the task; restarted from its checkpoint, the query replays the
    micro-batch. The batch sink (``SkerryBatchWriter``) honours the option too.
    """

    def __init__(self, opts: SkerryOptions, schema: StructType) -> None:
        self.opts, self.schema = opts, schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        partition_id, batch_id, query_id = _task_ids()
        if batch_id is None:
            raise RuntimeError("streaming write outside a micro-batch (no streaming.sql.batchId)")
        base = self.opts.producer_id or (query_id or "spark").replace("-", "")
        pid = f"{base}.{batch_id}.{partition_id}"
        return SkerryCommit(write_batches(self.opts, iterator, pid))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None

