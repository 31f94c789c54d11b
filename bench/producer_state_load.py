"""What a new leader pays to rebuild a partition's idempotent-producer state
(``broker.core.idempotence.ProducerStates``), with and without a snapshot: the figures
behind docs/cluster.md's "Idempotent producers and the internal topic".

Writes ``--records`` records (``--value-bytes`` each) of ``--producers`` idempotent
producers, in batches of 100 records carrying their producer ids and sequences as the
produce path stamps them, into one partition (the store's default segments). Then times:

* **replay**: the state rebuilt from the whole log, no snapshot (a follower that becomes
  leader and never wrote a snapshot of its own);
* **snapshot**: the state loaded from a snapshot at the log end (what a snapshot kept
  anywhere, beside the segments or in ``__skerry_groups``, would give a new leader), and its
  size.

    .venv/bin/python -m bench.producer_state_load [--records 1000000] [--producers 20]

Must not import: Twisted, transports.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

from broker.core.idempotence import LogSnapshotStore, ProducerStates
from data.idempotence import batch_ids
from data.store import StorageConfig, Store, TopicConfig

__all__ = ["run"]

BATCH = 100


def run(records: int, producers: int, value_bytes: int = 100,
        quiet: bool = False) -> dict[str, Any]:
    value = b"x" * value_bytes
    with tempfile.TemporaryDirectory(prefix="skerry-producer-state-") as root:
        store = Store(root, StorageConfig(fsync="never"))
        store.create_topic("t", TopicConfig(partitions=1))
        plog = store.partition("t", 0)
        sequences = [0] * producers
        for n, first in enumerate(range(0, records, BATCH)):
            count = min(BATCH, records - first)
            pid = n % producers
            ids = batch_ids(1000 + pid, 0, sequences[pid], count)
            sequences[pid] += count
            plog.append([value] * count,
                        ids=[int.from_bytes(bytes(row), "little") for row in ids])
        now = int(time.time() * 1000)
        started = time.perf_counter()
        state = ProducerStates(LogSnapshotStore(), lambda: now).state("t", 0, plog)
        replay_s = time.perf_counter() - started
        assert len(state.producers) == producers, len(state.producers)
        snapshots = ProducerStates(LogSnapshotStore(), lambda: now)
        snapshots.state("t", 0, plog)
        snapshots.save_all()
        snapshot_bytes = sum(os.path.getsize(os.path.join(plog.path, name))
                             for name in os.listdir(plog.path) if name.endswith(".producers"))
        started = time.perf_counter()
        loaded = ProducerStates(LogSnapshotStore(), lambda: now).state("t", 0, plog)
        snapshot_s = time.perf_counter() - started
        assert len(loaded.producers) == producers
        segments = plog.segment_count
        store.close()
    figures = {"records": records, "producers": producers, "segments": segments,
               "replay_s": replay_s, "snapshot_s": snapshot_s,
               "snapshot_bytes": snapshot_bytes}
    if not quiet:
        print(f"producer state of one partition: {records:,} records of {producers} "
              f"idempotent producers ({value_bytes}-byte values, {segments} segments)")
        print(f"  rebuilt from the whole log: {replay_s * 1000:.0f} ms "
              f"({records / replay_s:,.0f} records/s)")
        print(f"  loaded from a snapshot at the log end: {snapshot_s * 1000:.1f} ms "
              f"(snapshot {snapshot_bytes:,} bytes)")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--producers", type=int, default=20)
    parser.add_argument("--value-bytes", type=int, default=100)
    args = parser.parse_args(argv)
    run(args.records, args.producers, args.value_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
