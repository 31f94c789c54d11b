"""``__skerry_groups`` under a long commit load: 1,000,000 commits on 100 groups, the
internal topic's size on disk and how long a coordinator takes to load it.

Writes ``--commits`` offset commits (each the record a COMMIT appends: key
``[1,"offset",g,t,p]``, value ``{"v":1,"offset":n}``) round-robin over ``--groups`` groups
of three partitions each, plus one group record per group, into a store laid out as a
broker lays out ``__skerry_groups`` (``--partitions`` partitions, the topic's own
settings: compacted, ``groups.records.GROUPS_TOPIC_SETTINGS``; ``--segment-bytes``
overrides the segment size to show what it does), in batches of ``--batch``
records per append (the group log's writes: one batch per partition per write). The
broker's log cleaner runs every ``--clean-every`` commits (it runs in the background every
``storage.cleaner_interval_ms``; here in the same thread, between batches). Then prints:
bytes on disk (every file of the topic: logs and indexes), records read by a coordinator
loading each partition, and the load time (``GroupStateLog.lead``: read every record from
the partition's first offset, keep the latest value of each key, build the groups and
offsets) per partition (the worst one: what a new leader of that partition waits before
answering) and for all of them (a single broker's start). Checks that every group's loaded
offsets are the last ones committed.

    .venv/bin/python -m bench.group_state [--commits 1000000] [--groups 100]

Bounded: one pass of ``--commits`` appends; nothing loops on time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from twisted.internet.task import Clock

from broker.services.group_log import GroupStateLog, read_records
from data.format import key_header
from data.store import StorageConfig, Store, TopicConfig
from groups.group import Group, Member
from groups.records import (
    GROUPS_TOPIC,
    GROUPS_TOPIC_SEGMENT_BYTES,
    GROUPS_TOPIC_SETTINGS,
    encode_value,
    group_key,
    offset_key,
    partition_for_group,
)
from groups.store import groups_to_json

__all__ = ["run"]

TOPIC = "orders"
TOPIC_PARTITIONS = 3


def _disk_bytes(path: str) -> tuple[int, int]:
    """(bytes, files) of every file under ``path``."""
    total = files = 0
    for folder, _dirs, names in os.walk(path):
        for name in names:
            total += os.path.getsize(os.path.join(folder, name))
            files += 1
    return total, files


def _group_record(group: str) -> tuple[bytes, bytes]:
    """The record of a stable group with one member owning every partition."""
    g = Group(group, TOPIC, generation=1, partitions=TOPIC_PARTITIONS,
              members=[Member("m", 30_000)], assignment={"m": range(TOPIC_PARTITIONS)})
    doc = groups_to_json([g])["groups"][0]
    fields = {k: v for k, v in doc.items() if k not in ("group", "topic")}
    return group_key(group, TOPIC), encode_value(fields)


def _commits(groups: list[str], commits: int) -> Iterator[tuple[str, int, int]]:
    """``(group, partition, offset)`` of every commit: round-robin over groups and
    partitions, each commit of a (group, partition) one higher than its last."""
    slots = len(groups) * TOPIC_PARTITIONS
    for i in range(commits):
        slot = i % slots
        yield groups[slot // TOPIC_PARTITIONS], slot % TOPIC_PARTITIONS, i // slots + 1


def run(commits: int, groups: int, partitions: int, batch: int = 100,
        clean_every: int = 50_000, segment_bytes: int = GROUPS_TOPIC_SEGMENT_BYTES,
        quiet: bool = False) -> dict[str, Any]:
    """Write, clean, load; the figures (and the check) as a dict."""
    names = [f"group-{i:03d}" for i in range(groups)]
    with tempfile.TemporaryDirectory(prefix="skerry-group-state-") as root:
        store = Store(root, StorageConfig(fsync="never"))
        settings = {**GROUPS_TOPIC_SETTINGS, "segment_bytes": segment_bytes}
        store.create_topic(GROUPS_TOPIC, TopicConfig(partitions=partitions, **settings))
        pending: dict[int, tuple[list[bytes], list[bytes]]] = {}

        def flush() -> None:
            for p, (payloads, headers) in pending.items():
                store.partition(GROUPS_TOPIC, p).append(payloads, headers)
            pending.clear()

        def add(partition: int, key: bytes, value: bytes) -> None:
            payloads, headers = pending.setdefault(partition, ([], []))
            payloads.append(value)
            headers.append(key_header(key))
            if len(payloads) >= batch:
                store.partition(GROUPS_TOPIC, partition).append(payloads, headers)
                del pending[partition]

        started = time.perf_counter()
        for name in names:
            add(partition_for_group(name, partitions), *_group_record(name))
        last: dict[tuple[str, int], int] = {}
        clean_s = 0.0
        for i, (group, p, offset) in enumerate(_commits(names, commits), 1):
            add(partition_for_group(group, partitions), offset_key(group, TOPIC, p),
                encode_value({"offset": offset}))
            last[(group, p)] = offset
            if i % clean_every == 0:
                flush()
                t = time.perf_counter()
                store.clean()
                clean_s += time.perf_counter() - t
        flush()
        t = time.perf_counter()
        store.clean()
        clean_s += time.perf_counter() - t
        write_s = time.perf_counter() - started - clean_s
        on_disk, files = _disk_bytes(os.path.join(root, "topics", GROUPS_TOPIC))

        loads: list[float] = []
        read = 0
        offsets: dict[tuple[str, int], int] = {}
        state_log = GroupStateLog(store, root, Clock(), partitions=partitions, cluster=True)
        for p in range(partitions):
            plog = store.partition(GROUPS_TOPIC, p)
            t = time.perf_counter()
            records = list(read_records(plog))
            loaded = state_log.lead(p, records)
            loads.append(time.perf_counter() - t)
            read += len(records)
            for (group, _topic), by_partition in loaded.offsets.items():
                for part, offset in by_partition.items():
                    offsets[(group, part)] = offset
        store.close()
    assert offsets == last, "a committed offset was lost or moved back"
    figures = {"commits": commits, "groups": groups, "partitions": partitions,
               "bytes": on_disk, "files": files, "records_read": read,
               "load_max_s": max(loads), "load_all_s": sum(loads),
               "write_s": write_s, "clean_s": clean_s}
    if not quiet:
        print(f"__skerry_groups: {commits:,} commits on {groups} groups "
              f"({groups * TOPIC_PARTITIONS} offsets), {partitions} partitions, "
              f"segment_bytes {segment_bytes:,}")
        print(f"  written in {write_s:.1f} s; cleaner passes took {clean_s:.1f} s in all")
        print(f"  on disk: {on_disk:,} bytes in {files} files")
        print(f"  load: {read:,} records read; the slowest partition "
              f"{max(loads) * 1000:.0f} ms, all {partitions} partitions "
              f"{sum(loads) * 1000:.0f} ms; every loaded offset is the last committed")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--clean-every", type=int, default=50_000)
    parser.add_argument("--segment-bytes", type=int, default=GROUPS_TOPIC_SEGMENT_BYTES,
                        help="the topic's segment size (default: the broker's setting)")
    args = parser.parse_args(argv)
    run(args.commits, args.groups, args.partitions, args.batch, args.clean_every,
        args.segment_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
