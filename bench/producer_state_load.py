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
  size;
* **failover**: the same records copied into a follower's log as replication copies them
  (``append_records`` of 1 MiB pulls, each followed by ``ProducerStates.copied``, the
  follower keeping the state and snapshotting at its rolls), then the state a first
  idempotent produce builds once that follower is leader (its state forgotten, as a role
  change does): the snapshot of its last roll and the records after it. Also what the
  follower paid per record to keep the state.

    .venv/bin/python -m bench.producer_state_load [--records 1000000] [--producers 20]
        [--value-bytes 100] [--segment-bytes 67108864]

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


def run(records: int, producers: int, value_bytes: int = 100, quiet: bool = False,
        segment_bytes: int = StorageConfig.segment_bytes) -> dict[str, Any]:
    value = b"x" * value_bytes
    storage = StorageConfig(fsync="never", segment_bytes=segment_bytes)
    with tempfile.TemporaryDirectory(prefix="skerry-producer-state-") as root:
        store = Store(root, storage)
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
        failover = _failover(root, storage, plog, producers, now)
        store.close()
    figures = {"records": records, "producers": producers, "segments": segments,
               "replay_s": replay_s, "snapshot_s": snapshot_s,
               "snapshot_bytes": snapshot_bytes, **failover}
    if not quiet:
        print(f"producer state of one partition: {records:,} records of {producers} "
              f"idempotent producers ({value_bytes}-byte values, {segments} segments)")
        print(f"  rebuilt from the whole log: {replay_s * 1000:.0f} ms "
              f"({records / replay_s:,.0f} records/s)")
        print(f"  loaded from a snapshot at the log end: {snapshot_s * 1000:.1f} ms "
              f"(snapshot {snapshot_bytes:,} bytes)")
        print(f"  a follower that copied the log, once leader: {failover['failover_s'] * 1000:.1f}"
              f" ms (snapshot at its last roll, offset {failover['snapshot_offset']:,}; "
              f"{failover['failover_replayed']:,} records replayed)")
        print(f"  the follower's cost of keeping the state: "
              f"{failover['follower_ns_per_record']:.0f} ns a record copied (its append_records: "
              f"{failover['append_ns_per_record']:.0f} ns)")
    return figures


def _failover(root: str, storage: StorageConfig, leader: Any, producers: int,
              now: int) -> dict[str, Any]:
    """Copy ``leader``'s log into a follower's as replication does, keeping the state;
    then time the state its first idempotent produce as leader builds."""
    store = Store(os.path.join(root, "follower"), storage)
    store.create_topic("t", TopicConfig(partitions=1))
    plog = store.partition("t", 0)
    states = ProducerStates(LogSnapshotStore(), lambda: now)
    kept = appending = 0.0
    at = leader.first_offset
    while at < leader.next_offset:
        pulled = leader.read_raw(at, 1 << 20, 1 << 20)  # a 1 MiB REPLICA_PULL
        started = time.perf_counter()
        first = plog.append_records(pulled.raw)
        appending += time.perf_counter() - started
        started = time.perf_counter()
        states.copied("t", 0, plog, first, pulled.raw)
        kept += time.perf_counter() - started
        at = pulled.next_offset
    copied = plog.next_offset - leader.first_offset
    snapshot = plog.load_producer_snapshot()
    states.forget("t", 0)  # the role change
    replayed = states.replayed
    started = time.perf_counter()
    state = states.state("t", 0, plog)
    failover_s = time.perf_counter() - started
    assert len(state.producers) == producers, len(state.producers)
    store.close()
    return {"failover_s": failover_s, "failover_replayed": states.replayed - replayed,
            "snapshot_offset": -1 if snapshot is None else snapshot[0],
            "follower_ns_per_record": kept / max(1, copied) * 1e9,
            "append_ns_per_record": appending / max(1, copied) * 1e9}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--producers", type=int, default=20)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--segment-bytes", type=int, default=StorageConfig.segment_bytes)
    args = parser.parse_args(argv)
    run(args.records, args.producers, args.value_bytes, segment_bytes=args.segment_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
