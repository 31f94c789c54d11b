"""Log compaction: 1,000,000 keyed records on 100 keys, cleaned; size on disk and times.

Writes ``--records`` records (values of ``--value-bytes`` bytes) round-robin over ``--keys``
keys into one partition of a compacted topic (``segment_bytes`` 1 MiB: the active segment,
never cleaned, stays small), then runs the cleaner (``PartitionLog.clean``, the pass the
broker builds in a worker thread) and prints: bytes on disk before and after (every file
of the partition: logs and indexes), the pass's time and records per second, and how long a
reader takes to load the whole partition from offset 0 afterwards (what a coordinator
loading a compacted topic does). Usage:

    .venv/bin/python -m bench.compaction [--records N] [--keys K] [--value-bytes B]

Must not import: the broker (this measures the store alone).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data.format import key_header  # noqa: E402
from data.store import StorageConfig, Store, TopicConfig  # noqa: E402

SEGMENT_BYTES = 1 << 20
BATCH = 1000


def _disk_bytes(path: str) -> tuple[int, int]:
    """(bytes, files) of every file under ``path``."""
    total = files = 0
    for folder, _dirs, names in os.walk(path):
        for name in names:
            total += os.path.getsize(os.path.join(folder, name))
            files += 1
    return total, files


def _load(plog) -> tuple[int, dict[bytes | None, bytes]]:
    """Read the partition from offset 0 as a loading coordinator does: (records, latest)."""
    latest: dict[bytes | None, bytes] = {}
    at = 0
    count = 0
    while at < plog.next_offset:
        result = plog.read(at, 10_000, 16 << 20)
        for record in result.records:
            latest[record.key] = record.payload
        count += len(result.records)
        if result.next_offset <= at:
            break
        at = result.next_offset
    return count, latest


def run(records: int, keys: int, value_bytes: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="skerry-compaction-") as root:
        store = Store(root, StorageConfig(fsync="never"))
        store.create_topic("c", TopicConfig(partitions=1, cleanup_policy="compact",
                                            segment_bytes=SEGMENT_BYTES))
        plog = store.partition("c", 0)
        headers = [key_header(b"group-%03d" % k) for k in range(keys)]
        started = time.perf_counter()
        for first in range(0, records, BATCH):
            n = min(BATCH, records - first)
            plog.append([b"%0*d" % (value_bytes, first + i) for i in range(n)],
                        [headers[(first + i) % keys] for i in range(n)])
        write_s = time.perf_counter() - started
        part = os.path.join(root, "topics", "c", "0")
        before, files_before = _disk_bytes(part)
        segments_before = plog.segment_count
        started = time.perf_counter()
        stats = store.clean(min_dirty_ratio=0)
        clean_s = time.perf_counter() - started
        after, files_after = _disk_bytes(part)
        started = time.perf_counter()
        loaded, latest = _load(plog)
        load_s = time.perf_counter() - started
        expected = {b"group-%03d" % k: b"%0*d" % (value_bytes, max(i for i in range(records - keys, records)
                                                                  if i % keys == k))
                    for k in range(keys)}
        assert latest == expected, "the latest value of some key was lost"
        read = sum(s.records_read for s in stats)
        kept = sum(s.records_kept for s in stats)
        print(f"compaction: {records:,} records on {keys} keys, {value_bytes}-byte values, "
              f"segment_bytes {SEGMENT_BYTES:,}")
        print(f"  written in {write_s:.2f} s; on disk {before:,} bytes in {segments_before} "
              f"segments ({files_before} files)")
        print(f"  cleaned {read:,} records in {clean_s:.2f} s ({read / clean_s:,.0f} records/s), "
              f"kept {kept:,}")
        written = sum(s.bytes_written for s in stats)
        print(f"  on disk after: {after:,} bytes in {plog.segment_count} segments "
              f"({files_after} files), {before / after:,.0f}x smaller: the compacted "
              f"segment's log is {written:,} bytes, the rest is the active segment (never "
              f"cleaned, at most segment_bytes)")
        print(f"  load from offset 0: {loaded:,} records in {load_s * 1000:.1f} ms; latest "
              f"value of every key as written")
        store.close()
        return {"before": before, "after": after, "clean_s": clean_s, "load_s": load_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--value-bytes", type=int, default=32)
    args = parser.parse_args()
    run(args.records, args.keys, args.value_bytes)


if __name__ == "__main__":
    main()
