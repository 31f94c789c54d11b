"""The ``skerry-log`` PySpark data source: read a Skerry data directory's segment files
directly, with no broker running (``spark.read.format("skerry-log").load("<data_dir>")``).

Owns: finding topics, partitions and segments under ``<data_dir>/topics`` (names from
``data.paths``), planning Spark partitions the way Spark's file sources do (segments cut
into slices of at most ``maxPartitionBytes`` at record boundaries, slices packed into
partitions next-fit-decreasing with an open cost per slice, ``minPartitions`` to ask for
more), locating records (the dense ``.index``, then a walk of any unindexed tail),
checksum verification of every record, and what happens to a corrupted one: the query fails
naming file, byte and offset (``failOnDataLoss=true``, the default), or the record is skipped
and reported in the executor log (``false``). ``corruption_report(data_dir)`` lists them all.

Same row schema as the ``skerry`` source. Reads everything in the files, also offsets beyond
a partition's high watermark (the files do not know it); read a stopped broker's directory.

Must not import: Twisted, the broker.
"""

from __future__ import annotations

import logging
import math
import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from data import paths
from data.format import HEADER_SIZE, PAYLOAD_LENGTH_OFFSET, USER_HEADERS_LENGTH_OFFSET
from data.index import POSITION_SIZE
from data.spark.records import (
    HEADERS_DDL,
    SCHEMA_DDL,
    Corruption,
    check_records,
    read_heads,
    record_starts,
    to_batch,
)

__all__ = ["SkerryLogDataSource", "Segment", "Slice", "corruption_report", "find_segments",
           "plan_partitions", "read_segment", "read_slice"]

log = logging.getLogger("skerry.spark.log")

BATCH_RECORDS = 65536
"""Rows per Arrow batch handed to Spark."""
MAX_PARTITION_BYTES = 128 << 20
"""Default ``maxPartitionBytes``: Spark's ``spark.sql.files.maxPartitionBytes``."""
OPEN_COST_BYTES = 4 << 20
"""What opening one more slice costs when packing, in bytes (Spark's
``spark.sql.files.openCostInBytes``): many small segments share a partition."""
_TRUE = ("true", "1", "yes")


@dataclass(frozen=True)
class Segment:
    topic: str
    partition: int
    base_offset: int
    log_path: str
    index_path: str
    size: int = 0
    """Bytes in the log file when it was found (planning only)."""
    indexed: int = 0
    """Records the index file listed when it was found (planning only)."""


@dataclass(frozen=True)
class Slice:
    """Records ``first .. end - 1`` of a segment, counted from its first record (``end`` None:
    to the last record in the file, the unindexed tail included)."""

    segment: Segment
    first: int
    end: int | None
    size: int
    """Estimated bytes (for packing)."""


def find_segments(data_dir: str, topics: set[str] | None = None,
                  partitions: set[int] | None = None) -> list[Segment]:
    """Every segment of every (selected) topic partition, in topic, partition, offset order."""
    root = paths.topics_dir(data_dir)
    if not os.path.isdir(root):
        raise FileNotFoundError(f"{data_dir} is not a Skerry data directory (no {root})")
    out: list[Segment] = []
    for topic in sorted(os.listdir(root)):
        if not paths.is_valid_topic_name(topic) or (topics and topic not in topics):
            continue
        tdir = paths.topic_dir(data_dir, topic)
        for name in os.listdir(tdir):
            partition = paths.parse_partition_name(name)
            if partition is None or (partitions is not None and partition not in partitions):
                continue
            pdir = paths.partition_dir(tdir, partition)
            for fname in os.listdir(pdir):
                parsed = paths.parse_segment_name(fname)
                if parsed is None or parsed[1] != paths.LOG_SUFFIX:
                    continue
                log_path = paths.log_path(pdir, parsed[0])
                index_path = paths.index_path(pdir, parsed[0])
                out.append(Segment(topic, partition, parsed[0], log_path, index_path,
                                   _file_size(log_path), _file_size(index_path) // POSITION_SIZE))
    return sorted(out, key=lambda s: (s.topic, s.partition, s.base_offset))


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def plan_partitions(segments: Sequence[Segment], max_partition_bytes: int = MAX_PARTITION_BYTES,
                    min_partitions: int | None = None,
                    open_cost: int = OPEN_COST_BYTES) -> list[list[Slice]]:
    """Spark partitions for reading ``segments``, as Spark plans file scans.

    The slice size is ``maxPartitionBytes``, or less when ``minPartitions`` asks for more
    partitions than that gives (``total / minPartitions``). A segment larger than it is cut
    into equal record ranges (boundaries from the index's record count; a segment without
    an index stays whole). Slices are packed largest first into partitions of at most the
    slice size, each slice also counting ``open_cost``. Within a partition slices are in
    topic, partition, offset order.
    """
    total = sum(s.size for s in segments)
    target = max(1, max_partition_bytes)
    if min_partitions and min_partitions > 0 and total:
        target = max(1, min(target, math.ceil(total / min_partitions)))
    slices: list[Slice] = []
    for seg in segments:
        pieces = min(math.ceil(seg.size / target), seg.indexed) if seg.size > target else 1
        if pieces <= 1:
            slices.append(Slice(seg, 0, None, seg.size))
            continue
        cuts = [round(i * seg.indexed / pieces) for i in range(pieces)]
        for lo, hi in zip(cuts, cuts[1:] + [None], strict=True):
            slices.append(Slice(seg, lo, hi, seg.size // pieces))
    partitions: list[list[Slice]] = []
    current: list[Slice] = []
    size = 0
    for piece in sorted(slices, key=lambda x: -x.size):
        if current and size + piece.size > target:
            partitions.append(current)
            current, size = [], 0
        current.append(piece)
        size += piece.size + open_cost
    if current:
        partitions.append(current)
    order = lambda x: (x.segment.topic, x.segment.partition, x.segment.base_offset, x.first)  # noqa: E731
    return sorted((sorted(p, key=order) for p in partitions), key=lambda p: order(p[0]))


def _index_positions(index: bytes, size: int) -> np.ndarray | None:
    """Record starts from a dense index, or None when it does not check out against a log
    of ``size`` bytes (then the log is walked instead)."""
    pos = np.frombuffer(index[: len(index) // 4 * 4], dtype="<u4").astype(np.int64)
    if len(pos) == 0 or pos[0] != 0 or np.any(np.diff(pos) <= 0) or pos[-1] + HEADER_SIZE > size:
        return None
    return pos


def _record_end(data: bytes | mmap.mmap, at: int) -> int:
    return (at + HEADER_SIZE
            + int.from_bytes(data[at + USER_HEADERS_LENGTH_OFFSET:at + USER_HEADERS_LENGTH_OFFSET + 4], "little")
            + int.from_bytes(data[at + PAYLOAD_LENGTH_OFFSET:at + PAYLOAD_LENGTH_OFFSET + 4], "little"))


def _read_index(segment: Segment) -> bytes:
    try:
        with open(segment.index_path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def _map(f: Any, lo: int, hi: int) -> tuple[bytes | mmap.mmap, int]:
    """Bytes ``lo .. hi - 1`` of an open file, memory-mapped (no copy: pages are read as
    they are touched), from the page boundary at or before ``lo``; and that boundary."""
    start = lo - lo % mmap.ALLOCATIONGRANULARITY
    if hi <= start:
        return b"", start
    return mmap.mmap(f.fileno(), hi - start, access=mmap.ACCESS_READ, offset=start), start


def _load_slice(piece: Slice) -> tuple[bytes | mmap.mmap, np.ndarray, int]:
    """``(bytes, record starts in them, file position of the bytes)`` of a slice: only its
    byte range is mapped when the index checks out; else the whole log is walked. The
    files are mapped, not copied: read a stopped broker's directory (a file truncated under
    a reader, as a replica's truncation does, fails that task)."""
    seg = piece.segment
    with open(seg.log_path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        pos = _index_positions(_read_index(seg), size)
        if pos is None or piece.first >= len(pos):
            data, at = _map(f, 0, size)
            starts = record_starts(data)
            return data, starts[piece.first:piece.end], at
        lo = int(pos[piece.first])
        hi = int(pos[piece.end]) if piece.end is not None and piece.end < len(pos) else size
        data, at = _map(f, lo, hi)
    starts = pos[piece.first:piece.end] - at
    if hi != size:
        return data, starts, at
    last = int(starts[-1])
    if last + HEADER_SIZE > len(data) or _record_end(data, last) >= len(data):
        return data, starts, at
    return data, np.concatenate([starts, record_starts(data, _record_end(data, last))]), at


def _describe(segment: Segment, bad: Corruption) -> str:
    return (f"corrupted record in {segment.log_path} at byte {bad.position} (topic {segment.topic} "
            f"partition {segment.partition}, offset field {bad.offset}): {bad.reason}")


def read_slice(piece: Slice, include_headers: bool, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    """The rows of one slice of a segment, every checksum verified."""
    seg = piece.segment
    data, pos, at = _load_slice(piece)
    for i in range(0, len(pos), BATCH_RECORDS):
        # Checked and decoded a batch at a time: its bytes are still in cache for the second
        # pass, the header fields are gathered once for both, and Spark gets the first rows
        # without waiting for the whole slice to be checked.
        chunk = pos[i:i + BATCH_RECORDS]
        heads = read_heads(data, chunk) if len(data) and chunk[-1] + HEADER_SIZE <= len(data) else None
        bad = check_records(data, chunk, len(data), heads)
        if bad:
            bad = [Corruption(b.position + at, b.offset, b.reason) for b in bad]
            if fail_on_data_loss:
                raise OSError(_describe(seg, bad[0]) + "; set failOnDataLoss=false to skip such records")
            for b in bad:
                log.warning("%s (skipped)", _describe(seg, b))
            chunk = chunk[~np.isin(chunk + at, np.asarray([b.position for b in bad], dtype=np.int64))]
            heads = None
        yield to_batch(data, chunk, seg.topic, seg.partition, include_headers, heads)


def read_segment(segment: Segment, include_headers: bool, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    """The rows of one whole segment, every checksum verified."""
    yield from read_slice(Slice(segment, 0, None, segment.size), include_headers, fail_on_data_loss)


def corruption_report(data_dir: str) -> list[str]:
    """One line per corrupted record in the data directory (empty when every checksum holds)."""
    out: list[str] = []
    for segment in find_segments(data_dir):
        data, pos, _at = _load_slice(Slice(segment, 0, None, segment.size))
        out.extend(_describe(segment, b) for b in check_records(data, pos, len(data)))
    return out


class SlicesPartition(InputPartition):
    def __init__(self, slices: list[Slice]) -> None:
        super().__init__(slices)
        self.slices = slices


class SkerryLogDataSource(DataSource):
    """``spark.read.format("skerry-log").load(data_dir)``; options ``topic`` (comma list),
    ``partitions``, ``includeHeaders``, ``failOnDataLoss``, ``maxPartitionBytes``,
    ``minPartitions``."""

    @classmethod
    def name(cls) -> str:
        return "skerry-log"

    def schema(self) -> str:
        headers = str(self.options.get("includeHeaders", "false")).lower() in _TRUE
        return SCHEMA_DDL + (HEADERS_DDL if headers else "")

    def reader(self, schema: StructType) -> DataSourceReader:
        return SkerryLogReader(self.options)


class SkerryLogReader(DataSourceReader):
    def __init__(self, options: Any) -> None:
        path = options.get("path")
        if not path:
            raise ValueError('skerry-log needs a data directory: .load("<data_dir>")')
        self.path = path
        topic = options.get("topic") or ""
        self.topics = {t.strip() for t in topic.split(",") if t.strip()} or None
        parts = options.get("partitions")
        self.partitions_filter = {int(p) for p in parts.split(",") if p.strip()} if parts else None
        self.include_headers = str(options.get("includeHeaders", "false")).lower() in _TRUE
        self.fail_on_data_loss = str(options.get("failOnDataLoss", "true")).lower() in _TRUE
        self.max_partition_bytes = int(options.get("maxPartitionBytes", str(MAX_PARTITION_BYTES)))
        mp = options.get("minPartitions")
        self.min_partitions: int | None = int(mp) if mp else None

    def partitions(self) -> Sequence[InputPartition]:
        segments = find_segments(self.path, self.topics, self.partitions_filter)
        planned = plan_partitions(segments, self.max_partition_bytes, self.min_partitions)
        return [SlicesPartition(p) for p in planned] or [SlicesPartition([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SlicesPartition)
        for piece in partition.slices:
            yield from read_slice(piece, self.include_headers, self.fail_on_data_loss)
