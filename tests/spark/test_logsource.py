"""The ``skerry-log`` reader's planning and slice reading, without Spark: segments cut into
slices and packed into partitions like Spark's file sources, every record read exactly once
whatever the cut, index trouble handled by walking the log, corruption located exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from data.format import key_header
from data.spark.logsource import (
    Segment,
    Slice,
    corruption_report,
    find_segments,
    plan_partitions,
    read_slice,
)
from data.store import StorageConfig, Store, TopicConfig

MB = 1 << 20


def make_data_dir(root: Path, partitions: int = 2, batches: int = 30, per_batch: int = 20) -> Path:
    """A data dir of topic ``t`` with small segments (several per partition); message ``i`` of
    partition ``p`` is ``b"p<p>-<i>"`` with key ``k<i % 3>`` (none for ``i % 3 == 0``)."""
    store = Store(str(root), StorageConfig(fsync="never", segment_bytes=4096))
    store.create_topic("t", TopicConfig(partitions=partitions))
    for p in range(partitions):
        plog = store.partition("t", p)
        for b in range(batches):
            ids = range(b * per_batch, (b + 1) * per_batch)
            plog.append([b"p%d-%d" % (p, i) for i in ids],
                        [key_header(b"k%d" % (i % 3)) if i % 3 else b"" for i in ids])
    store.close()
    return root


def rows(slices: list[Slice]) -> list[tuple[int, int, bytes | None, bytes]]:
    out = []
    for piece in slices:
        for batch in read_slice(piece, False, True):
            out.extend(zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist(),
                           batch.column("key").to_pylist(), batch.column("value").to_pylist(), strict=True))
    return out


def expected(partitions: int = 2, count: int = 600) -> list[tuple[int, int, bytes | None, bytes]]:
    return [(p, i, b"k%d" % (i % 3) if i % 3 else None, b"p%d-%d" % (p, i))
            for p in range(partitions) for i in range(count)]


def seg(size: int, indexed: int = 1000, partition: int = 0, base: int = 0) -> Segment:
    return Segment("t", partition, base, f"/x/{partition}/{base}.log", f"/x/{partition}/{base}.index",
                   size, indexed)


class PlanTests:
    def test_segments_are_packed_like_spark_files(self) -> None:
        """Four 46 MB segments with the default 128 MB slice size make two partitions of two
        segments each (46 + 4 MB open cost + 46 fits; a third does not), in topic,
        partition, offset order within each."""
        plan = plan_partitions([seg(46 * MB, partition=p) for p in range(4)])
        assert [[s.segment.partition for s in part] for part in plan] == [[0, 1], [2, 3]]
        assert all(s.first == 0 and s.end is None for part in plan for s in part)

    def test_large_segment_is_cut_at_record_boundaries(self) -> None:
        """A segment larger than the slice size is cut into equal record ranges that cover
        every record once, the last one open-ended (it also takes any unindexed tail)."""
        plan = plan_partitions([seg(300 * MB, indexed=999)], max_partition_bytes=100 * MB)
        pieces = [s for part in plan for s in part]
        assert [(s.first, s.end) for s in pieces] == [(0, 333), (333, 666), (666, None)]
        assert len(plan) == 3

    def test_min_partitions_lowers_the_slice_size(self) -> None:
        """minPartitions asks for at least that many partitions by shrinking the slices; a
        segment without an index (no record count) is never cut."""
        plan = plan_partitions([seg(40 * MB, partition=0), seg(40 * MB, indexed=0, partition=1)],
                               min_partitions=4)
        cuts = sorted((s.segment.partition, s.first, s.end) for part in plan for s in part)
        assert cuts == [(0, 0, 500), (0, 500, None), (1, 0, None)]
        assert len(plan) == 3

    def test_no_segments_no_partitions(self) -> None:
        """An empty selection plans nothing (the reader then hands Spark one empty partition)."""
        assert plan_partitions([]) == []


class SliceReadTests:
    @pytest.mark.parametrize(("max_bytes", "min_partitions"), [(128 * MB, None), (3000, None), (128 * MB, 7)])
    def test_every_record_exactly_once_whatever_the_cut(self, tmp_path: Path, max_bytes: int,
                                                        min_partitions: int | None) -> None:
        """However the segments are cut and packed, the slices together give every record of
        every segment exactly once, with its key and value."""
        root = make_data_dir(tmp_path)
        segments = find_segments(str(root))
        assert len(segments) > 4  # several segments per partition
        plan = plan_partitions(segments, max_bytes, min_partitions)
        got = rows([s for part in plan for s in part])
        assert sorted(got, key=lambda r: (r[0], r[1])) == expected()
        if max_bytes == 3000:
            assert len(plan) > len(segments)  # segments were cut

    def test_bad_or_missing_index_falls_back_to_walking_the_log(self, tmp_path: Path) -> None:
        """A slice of a segment whose index is missing or does not check out still reads its
        records (the log is walked); cut slices keep their record ranges."""
        root = make_data_dir(tmp_path, partitions=1)
        segments = find_segments(str(root))
        Path(segments[0].index_path).unlink()
        Path(segments[1].index_path).write_bytes(b"\x05\x00\x00\x00" * 3)
        plan = plan_partitions(segments, max_partition_bytes=2000)
        assert sorted(rows([s for part in plan for s in part]), key=lambda r: r[1]) == expected(1)

    def test_corruption_is_located_in_the_file(self, tmp_path: Path) -> None:
        """A flipped byte in a slice that does not start at the file's beginning is reported
        with its byte position in the file, fails the read (failOnDataLoss) or is skipped."""
        root = make_data_dir(tmp_path, partitions=1)
        segment = find_segments(str(root))[0]
        pieces = [s for part in plan_partitions([segment], max_partition_bytes=1500) for s in part]
        assert len(pieces) >= 2 and pieces[1].first > 0
        assert len(rows(pieces[:1])) == pieces[1].first and pieces[1].end is not None
        # The second slice's first record starts where the index says; flip a payload byte.
        index = Path(segment.index_path).read_bytes()
        at = int.from_bytes(index[4 * pieces[1].first:4 * pieces[1].first + 4], "little")
        data = bytearray(Path(segment.log_path).read_bytes())
        data[at + 64] ^= 0x01
        Path(segment.log_path).write_bytes(bytes(data))
        with pytest.raises(OSError, match=f"at byte {at} .*checksum mismatch"):
            rows(pieces[1:2])
        kept = [r for piece in pieces[1:2] for b in read_slice(piece, False, False)
                for r in b.column("offset").to_pylist()]
        assert kept == list(range(pieces[1].first + 1, pieces[1].end))
        assert len(corruption_report(str(root))) == 1
