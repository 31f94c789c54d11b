"""The ``skerry-log`` PySpark data source: read a Skerry data directory's segment files
directly, with no broker running (``spark.read.format("skerry-log").load("<data_dir>")``).

Owns: finding topics, partitions and segments under ``<data_dir>/topics`` (names from
``data.paths``), locating records (the dense ``.index``, then a walk of any unindexed tail),
checksum verification of every record, and what happens to a corrupted one: the query fails
naming file, byte and offset (``failOnDataLoss=true``, the default), or the record is skipped
and reported in the executor log (``false``). ``corruption_report(data_dir)`` lists them all.

Same row schema as the ``skerry`` source. Reads everything in the files, also offsets beyond
a partition's high watermark (the files do not know it); read a stopped broker's directory.

Must not import: Twisted, the broker.
"""

from __future__ import annotations

import logging
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
from data.spark.records import (
    HEADERS_DDL,
    SCHEMA_DDL,
    Corruption,
    check_records,
    record_starts,
    to_batch,
)

__all__ = ["SkerryLogDataSource", "Segment", "corruption_report", "find_segments", "read_segment"]

log = logging.getLogger("skerry.spark.log")

BATCH_RECORDS = 65536
_TRUE = ("true", "1", "yes")


@dataclass(frozen=True)
class Segment:
    topic: str
    partition: int
    base_offset: int
    log_path: str
    index_path: str


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
                out.append(Segment(topic, partition, parsed[0], paths.log_path(pdir, parsed[0]),
                                   paths.index_path(pdir, parsed[0])))
    return sorted(out, key=lambda s: (s.topic, s.partition, s.base_offset))


def _positions(data: bytes, index: bytes) -> np.ndarray:
    """Record starts: the dense index where it is consistent, then a walk of the rest."""
    n = len(data)
    pos = np.frombuffer(index[: len(index) // 4 * 4], dtype="<u4").astype(np.int64)
    if len(pos) and (pos[0] != 0 or np.any(np.diff(pos) <= 0) or pos[-1] + HEADER_SIZE > n):
        pos = np.zeros(0, dtype=np.int64)  # not trustworthy: walk the log instead
    if len(pos) == 0:
        return record_starts(data)
    last = int(pos[-1])
    end = last + HEADER_SIZE + int.from_bytes(data[last + USER_HEADERS_LENGTH_OFFSET:last + USER_HEADERS_LENGTH_OFFSET + 4], "little") \
        + int.from_bytes(data[last + PAYLOAD_LENGTH_OFFSET:last + PAYLOAD_LENGTH_OFFSET + 4], "little")
    if end >= n:
        return pos
    return np.concatenate([pos, record_starts(data, end)])


def _load(segment: Segment) -> tuple[bytes, np.ndarray]:
    with open(segment.log_path, "rb") as f:
        data = f.read()
    try:
        with open(segment.index_path, "rb") as f:
            index = f.read()
    except FileNotFoundError:
        index = b""
    return data, _positions(data, index)


def _describe(segment: Segment, bad: Corruption) -> str:
    return (f"corrupted record in {segment.log_path} at byte {bad.position} (topic {segment.topic} "
            f"partition {segment.partition}, offset field {bad.offset}): {bad.reason}")


def read_segment(segment: Segment, include_headers: bool, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    """The rows of one segment, every checksum verified."""
    data, pos = _load(segment)
    bad = check_records(data, pos, len(data))
    if bad:
        if fail_on_data_loss:
            raise OSError(_describe(segment, bad[0]) + "; set failOnDataLoss=false to skip such records")
        for b in bad:
            log.warning("%s (skipped)", _describe(segment, b))
        pos = pos[~np.isin(pos, np.asarray([b.position for b in bad], dtype=np.int64))]
    for i in range(0, len(pos), BATCH_RECORDS):
        yield to_batch(data, pos[i:i + BATCH_RECORDS], segment.topic, segment.partition, include_headers)


def corruption_report(data_dir: str) -> list[str]:
    """One line per corrupted record in the data directory (empty when every checksum holds)."""
    out: list[str] = []
    for segment in find_segments(data_dir):
        data, pos = _load(segment)
        out.extend(_describe(segment, b) for b in check_records(data, pos, len(data)))
    return out


class SegmentPartition(InputPartition):
    def __init__(self, segment: Segment) -> None:
        super().__init__(segment)
        self.segment = segment


class SkerryLogDataSource(DataSource):
    """``spark.read.format("skerry-log").load(data_dir)``; options ``topic`` (comma list),
    ``partitions``, ``includeHeaders``, ``failOnDataLoss``."""

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

    def partitions(self) -> Sequence[InputPartition]:
        return [SegmentPartition(s) for s in find_segments(self.path, self.topics, self.partitions_filter)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SegmentPartition)
        yield from read_segment(partition.segment, self.include_headers, self.fail_on_data_loss)
