"""One segment of a partition log: what is known about it, and which fds it holds.

Owns: the ``Segment`` value object (base offset, record count, byte size, timestamps, file
paths), its in-memory indexes while it is the active segment, and the bookkeeping of its
file descriptors:

* ``log_fd``/``index_fd``/``timeindex_fd`` are *write* fds. The active segment has them;
  a sealed segment keeps them until a ``sync()`` has fsynced them (then that sync closes
  them), so a sync running in a worker thread never sees one closed under it.
* ``read_fd``/``index_read_fd`` are read-only fds of a sealed segment, opened lazily by the
  reader on the reactor thread and never touched by a sync.

Must not import: Twisted, anything of the broker. No I/O here (the owner does the I/O).
"""

from __future__ import annotations

import os
from array import array

from data import paths

__all__ = ["Segment", "WRITE_FLAGS"]

WRITE_FLAGS = os.O_RDWR | os.O_APPEND
"""Flags of a segment's write fds (plus ``O_CREAT | O_TRUNC`` when a roll creates them).
``O_APPEND``: after a truncation the next write lands at the new end of the file, whatever
the fd's position was."""


class Segment:
    """A ``<base>.log`` with its ``.index`` and ``.timeindex``.

    ``count`` records with offsets ``base_offset .. base_offset + count - 1`` fill the
    first ``size`` bytes of the log. A *compacted* segment (one the cleaner wrote, or a
    follower copied from a compacted leader) is sealed for good and may have gaps: it
    covers offsets ``base_offset .. base_offset + span - 1`` (``span`` is not None), holds
    ``count <= span`` records in offset order, and has a ``.sindex`` instead of an
    ``.index`` (``rel_offsets[i]``/``spositions[i]``: relative offset and file position of
    record ``i``, loaded on first use). ``max_timestamp`` is the largest record timestamp in
    the segment (``None`` while unknown or empty); ``first_timestamp`` is the timestamp of
    its first record (the segment's age for ``segment_ms``).
    """

    __slots__ = (
        "base_offset",
        "count",
        "size",
        "log_path",
        "index_path",
        "timeindex_path",
        "max_timestamp",
        "first_timestamp",
        "time_entries",
        "log_fd",
        "index_fd",
        "timeindex_fd",
        "read_fd",
        "index_read_fd",
        "positions",
        "index_on_disk",
        "time_on_disk",
        "time_ts",
        "time_rel",
        "span",
        "sindex_path",
        "rel_offsets",
        "spositions",
    )

    def __init__(self, partition_path: str, base_offset: int) -> None:
        self.base_offset = base_offset
        self.count = 0
        self.size = 0
        self.log_path = paths.log_path(partition_path, base_offset)
        self.index_path = paths.index_path(partition_path, base_offset)
        self.timeindex_path = paths.timeindex_path(partition_path, base_offset)
        self.max_timestamp: int | None = None
        self.first_timestamp: int | None = None
        self.time_entries = 0
        self.log_fd: int | None = None
        self.index_fd: int | None = None
        self.timeindex_fd: int | None = None
        self.read_fd: int | None = None
        self.index_read_fd: int | None = None
        # Active segment only: record positions (entry i = file position of base + i) and
        # the time index entries (running max timestamp, relative offset).
        self.positions: array[int] | None = None
        self.time_ts: array[int] | None = None
        self.time_rel: array[int] | None = None
        # Active segment only: how many of those entries its .index and .timeindex files
        # hold; the rest are written behind (``PartitionLog._flush_indexes``).
        self.index_on_disk = 0
        self.time_on_disk = 0
        # Compacted segments only (see the class doc).
        self.span: int | None = None
        self.sindex_path = paths.sindex_path(partition_path, base_offset)
        self.rel_offsets: array[int] | None = None
        self.spositions: array[int] | None = None

    @property
    def end_offset(self) -> int:
        """The offset after the last offset this segment covers (after its last record,
        unless compaction removed the records at its end)."""
        return self.base_offset + (self.count if self.span is None else self.span)

    @property
    def compacted(self) -> bool:
        """True for a compacted segment (gaps allowed, ``.sindex``, never active)."""
        return self.span is not None

    def files(self) -> tuple[str, ...]:
        """Every file of this segment, log first."""
        if self.span is None:
            return (self.log_path, self.index_path, self.timeindex_path)
        return (self.log_path, self.sindex_path, self.timeindex_path)

    @property
    def name(self) -> str:
        """The log file's name, as recovery reports and log lines show it."""
        return paths.segment_name(self.base_offset)

    def write_fds(self) -> list[int]:
        """The open write fds (log first, so data is fsynced before its indexes)."""
        return [fd for fd in (self.log_fd, self.index_fd, self.timeindex_fd) if fd is not None]

    def take_write_fds(self) -> list[int]:
        """Forget the write fds and return them (the caller closes them)."""
        fds = self.write_fds()
        self.log_fd = self.index_fd = self.timeindex_fd = None
        return fds

    def take_read_fds(self) -> list[int]:
        """Forget the read-only fds and return them (the caller closes them)."""
        fds = [fd for fd in (self.read_fd, self.index_read_fd) if fd is not None]
        self.read_fd = self.index_read_fd = None
        return fds

    def __repr__(self) -> str:
        span = "" if self.span is None else f", span={self.span}"
        return f"Segment({self.name}, count={self.count}{span}, size={self.size})"
