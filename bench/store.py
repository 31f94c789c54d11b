"""Benchmark of the binary store alone (no sockets, no reactor): append and read rates per
fsync policy, and the time to reopen a large partition after a clean and an unclean stop.

Owns: the store benchmark behind ``docs/performance.md`` "## Store". Every phase is bounded
in time; everything is written to a temporary folder that is removed at the end. Run::

    .venv/bin/python bench/store.py                 # defaults: 100-byte payloads, batches of 1000
    .venv/bin/python bench/store.py --seconds 2 --reopen-gib 0.25 --profile

Policies, as the broker applies them: ``always`` = ``sync()`` after every batch;
``interval`` = a worker thread calls ``sync()`` every ``--interval-ms`` (the group
committer's timer); ``never`` = no fsync. Reads go through ``PartitionLog.read`` with the
broker's defaults (1000 messages, 1 MiB); checksums are verified on every read.

Must not import: Twisted, the broker (only ``data``).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import os
import platform
import pstats
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from data.reader import decode_run  # noqa: E402
from data.store import StorageConfig, Store, TopicConfig  # noqa: E402
from data.writer import build_batch  # noqa: E402


def _payloads(size: int, batch: int) -> list[bytes]:
    return [os.urandom(size) for _ in range(batch)]


def _profiled(enabled: bool, label: str, fn: Callable[[], tuple[int, float, float]]) -> tuple[int, float, float]:
    if not enabled:
        return fn()
    prof = cProfile.Profile()
    result = prof.runcall(fn)
    print(f"\n--- cProfile: {label} (top 8 by own time) ---")
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(8)
    return result


def bench_policy(base: str, policy: str, args: argparse.Namespace) -> tuple[float, float, float, float, int]:
    """Appended and read msgs/s (wall clock), the same per CPU second of this process, and
    the number of messages, for one fsync policy."""
    root = tempfile.mkdtemp(prefix=f"store-{policy}-", dir=base)
    store = Store(root, StorageConfig(fsync=policy, segment_bytes=args.segment_mib << 20))
    plog = store.create_topic("bench", TopicConfig(partitions=1)).partitions[0]
    batch = _payloads(args.payload_bytes, args.batch)
    stop = threading.Event()
    syncer: threading.Thread | None = None
    if policy == "interval":

        def tick() -> None:
            while not stop.wait(args.interval_ms / 1000):
                plog.sync()

        syncer = threading.Thread(target=tick, daemon=True)
        syncer.start()

    def append_phase() -> tuple[int, float, float]:
        count = 0
        cpu = time.process_time()
        start = time.perf_counter()
        deadline = start + args.seconds
        while True:
            plog.append(batch)
            if policy == "always":
                plog.sync()
            count += len(batch)
            if count >= args.max_messages or time.perf_counter() >= deadline:
                return count, time.perf_counter() - start, time.process_time() - cpu

    appended, append_time, append_cpu = _profiled(args.profile, f"append, fsync={policy}", append_phase)
    stop.set()
    if syncer is not None:
        syncer.join()
    plog.sync()

    def read_phase() -> tuple[int, float, float]:
        count = 0
        offset = 0
        cpu = time.process_time()
        start = time.perf_counter()
        deadline = start + args.seconds
        end = plog.next_offset
        while offset < end:
            result = plog.read(offset, 1000, 1 << 20)
            count += len(result.records)
            offset = result.next_offset
            if time.perf_counter() >= deadline:
                break
        return count, time.perf_counter() - start, time.process_time() - cpu

    read, read_time, read_cpu = _profiled(args.profile, f"read after fsync={policy}", read_phase)

    def raw_phase() -> tuple[int, float, float]:
        # read_raw: the same checks (framing, offsets, every checksum) without building a
        # Record per message: what Iggy polls and replication fetches use.
        count = 0
        offset = 0
        start = time.perf_counter()
        deadline = start + args.seconds
        end = plog.next_offset
        while offset < end:
            result = plog.read_raw(offset, 1000, 1 << 20)
            count += result.count
            offset = result.next_offset
            if time.perf_counter() >= deadline:
                break
        return count, time.perf_counter() - start, 0.0

    raw, raw_time, _ = _profiled(args.profile, f"read_raw after fsync={policy}", raw_phase)
    store.close()
    shutil.rmtree(root)
    return (appended / append_time, read / read_time, appended / append_cpu, read / read_cpu,
            appended, raw / raw_time)


def bench_codec(args: argparse.Namespace, rounds: int = 20) -> tuple[float, float]:
    """The per-record CPU ceiling without any I/O: (build_batch, decode_run) records per
    CPU second, best of ``rounds`` (the shared machine makes single rounds noisy)."""
    batch = _payloads(args.payload_bytes, args.batch)
    data, ends = build_batch(batch, None, None, None, 0, 1, 0)
    best_build = best_decode = float("inf")
    for _ in range(rounds):
        cpu = time.process_time()
        for _ in range(20):
            build_batch(batch, None, None, None, 0, 1, 0)
        best_build = min(best_build, time.process_time() - cpu)
        cpu = time.process_time()
        for _ in range(20):
            decode_run(data, ends, 0, [], 1 << 30, True)
        best_decode = min(best_decode, time.process_time() - cpu)
    n = 20 * len(batch)
    return n / best_build, n / best_decode


def bench_reopen(base: str, args: argparse.Namespace) -> tuple[int, int, float, float]:
    """(bytes, segments, clean reopen s, unclean reopen s) for a partition of --reopen-gib."""
    root = tempfile.mkdtemp(prefix="store-reopen-", dir=base)
    config = StorageConfig(fsync="never", segment_bytes=args.segment_mib << 20)
    store = Store(root, config)
    plog = store.create_topic("big", TopicConfig(partitions=1)).partitions[0]
    batch = _payloads(args.payload_bytes, args.batch)
    target = int(args.reopen_gib * (1 << 30))
    while plog.size_bytes() < target:
        plog.append(batch)
    size, segments, messages = plog.size_bytes(), plog.segment_count, plog.next_offset
    store.close()

    start = time.perf_counter()
    store = Store(root, config)
    clean = time.perf_counter() - start
    assert store.partition("big", 0).next_offset == messages
    # An unclean stop: files closed without the clean-shutdown marker (what SIGKILL leaves),
    # and the data directory's lock dropped, as the kernel drops it with the process.
    for p in store.topic("big").partitions:
        p.close(sync=False)
    store.lock.release()
    start = time.perf_counter()
    store = Store(root, config)
    unclean = time.perf_counter() - start
    assert store.partition("big", 0).next_offset == messages
    store.close()
    shutil.rmtree(root)
    return size, segments, clean, unclean


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--payload-bytes", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1000, help="messages per append")
    parser.add_argument("--seconds", type=float, default=3.0, help="time bound of each phase")
    parser.add_argument("--max-messages", type=int, default=5_000_000, help="cap per append phase")
    parser.add_argument("--interval-ms", type=int, default=1000, help="sync period for fsync=interval")
    parser.add_argument("--segment-mib", type=int, default=64)
    parser.add_argument("--policies", default="always,interval,never")
    parser.add_argument("--reopen-gib", type=float, default=1.0, help="partition size for the reopen test (0: skip)")
    parser.add_argument("--dir", default=None, help="where to create the temporary folders")
    parser.add_argument("--profile", action="store_true", help="cProfile the append and read phases")
    args = parser.parse_args(argv)

    base = tempfile.mkdtemp(prefix="skerry-bench-", dir=args.dir)
    try:
        print(
            f"# bench/store.py  {datetime.datetime.now().isoformat(timespec='seconds')}  "
            f"python {platform.python_version()}  {platform.machine()}  {os.cpu_count()} cpus  "
            f"{platform.platform()}  dir={base}"
        )
        print(f"# payload {args.payload_bytes} B, batches of {args.batch}, phases bounded to {args.seconds:g} s")
        print("# load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        print("# msgs/s = wall clock; per CPU-s = per second of CPU time of this process (the")
        print("# machine is shared: the gap between the two is time the CPU was busy elsewhere)")
        print(
            f"{'fsync':<10}{'appended msgs/s':>17}{'read msgs/s':>14}"
            f"{'appended/CPU-s':>16}{'read/CPU-s':>13}{'messages':>12}{'read_raw msgs/s':>17}"
        )
        for policy in args.policies.split(","):
            appended, read, appended_cpu, read_cpu, count, raw = bench_policy(base, policy, args)
            print(
                f"{policy:<10}{appended:>17,.0f}{read:>14,.0f}{appended_cpu:>16,.0f}{read_cpu:>13,.0f}"
                f"{count:>12,}{raw:>17,.0f}",
                flush=True,
            )
        build, decode = bench_codec(args)
        print(
            f"\nno I/O, best of 20 (CPU time): build_batch {build:,.0f} records/s, "
            f"decode_run (checksums verified) {decode:,.0f} records/s"
        )
        if args.reopen_gib > 0:
            size, segments, clean, unclean = bench_reopen(base, args)
            print(f"\nreopen of one partition: {size / (1 << 30):.2f} GiB in {segments} segments")
            print(f"{'after a clean stop':<28}{clean * 1000:>10.1f} ms")
            print(f"{'after an unclean stop':<28}{unclean * 1000:>10.1f} ms")
        print("# load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
