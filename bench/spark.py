"""Spark throughput: rows/s of a batch read of N messages through the broker (``skerry``),
of the same data dir read offline (``skerry-log``), and of a batch write (``skerry`` sink).

Usage: ``.venv/bin/python bench/spark.py [--messages 1000000] [--partitions 4]``. Starts its
own broker (fsync interval) on a free loopback port and a local[2] SparkSession. The sources
run with their default options: one Spark partition per topic partition through the broker,
segments packed into partitions like Spark's file sources offline. The load step writes
the messages with pipelined PRODUCE_BATCH requests (about 4,000 messages each) from one
connection. Each read is the query ``sum(length(value)), count(*)`` (every row and every
value is read; it must return exactly N rows and N * value bytes); each measurement is the
median of ``--runs`` timed runs after ``--warmup`` untimed runs of the same work (Python
workers started, imports done, the JVM's JIT past the first compiles: a session's steady
state). Writes go to a fresh topic each run and must leave exactly N messages. The broker's
data directory is removed at the end.

Besides each rate it prints where the CPU went during the timed runs, in core-seconds per
million rows: the broker process, Spark's JVM and its Python workers (``/proc/<pid>/stat`` of
every process under this one; the machine's other load moves the rates far more than these).

Spark and Arrow run with their defaults; ``--arrow-unchecked`` adds the tuning docs/spark.md
describes, Arrow's ``-Darrow.enable_unsafe_memory_access=true`` (no bounds check on each Arrow
buffer access while Spark copies the Python batches into rows).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support import BrokerProcess  # noqa: E402

from broker.client.sync import Client, encode_batch  # noqa: E402

ROLES = ("broker", "JVM", "Python workers")


def cpu_by_role(broker_pid: int | None) -> dict[str, float]:
    """CPU seconds (user + system) so far of the processes under this one, by role: the
    broker, Spark's JVM (java), and every other descendant (Spark's Python workers)."""
    me, tick = os.getpid(), os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, float, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                name, rest = f.read().rsplit(")", 1)
        except OSError:  # gone meanwhile
            continue
        fields = rest.split()
        procs[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick,
                             name.split("(", 1)[1])

    def under_me(pid: int) -> bool:
        while pid > 1:
            pid = procs[pid][0] if pid in procs else 0
            if pid == me:
                return True
        return False

    out = dict.fromkeys(ROLES, 0.0)
    for pid, (_parent, seconds, comm) in procs.items():
        if pid == me or not under_me(pid):
            continue
        role = "broker" if pid == broker_pid else "JVM" if comm == "java" else "Python workers"
        out[role] += seconds
    return out


LOAD_BATCH = 4000
"""Messages per PRODUCE_BATCH of the load step (about 450 KiB: under the line limit)."""


def load_batches(n: int, parts: int, value: bytes) -> Iterator[tuple[int, bytes, int]]:
    """Message ``i`` (key ``user<i % 1000>``) goes to partition ``i % parts``, in order."""
    for base in range(0, n, LOAD_BATCH * parts):
        top = min(n, base + LOAD_BATCH * parts)
        for p in range(parts):
            ids = range(base + p, top, parts)
            if len(ids):
                yield p, encode_batch([b"user%d" % (i % 1000) for i in ids], [value] * len(ids)), len(ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs before the timed ones")
    parser.add_argument("--runs", type=int, default=3, help="timed runs; the median is reported")
    parser.add_argument("--arrow-unchecked", action="store_true",
                        help="run the JVM with -Darrow.enable_unsafe_memory_access=true")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from data.spark import register

    work = Path(tempfile.mkdtemp(prefix="skerry-bench-spark-"))
    broker = BrokerProcess(work, {"storage": {"fsync": "interval"}}).start()
    try:
        bs = f"127.0.0.1:{broker.port}"
        builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                   .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
                   .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g")
                   .config("spark.ui.showConsoleProgress", "false"))
        if args.arrow_unchecked:  # local mode: the executors are the driver's JVM
            builder = builder.config("spark.driver.extraJavaOptions", "-Darrow.enable_unsafe_memory_access=true")
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        n, parts = args.messages, args.partitions
        value = b"x" * args.value_bytes
        t0 = time.perf_counter()
        with Client(bs) as c:
            c.request("ADMIN_CREATE_TOPIC", f"bench {parts} 1")
            loaded = sum(a.count for a in c.produce_batches("bench", load_batches(n, parts, value), window=4))
        load = time.perf_counter() - t0
        assert loaded == n, loaded
        results = {"load (pipelined PRODUCE_BATCH, one connection)": n / load}
        cpu: dict[str, dict[str, float]] = {}

        def measure(label: str, run: Callable[[int], None]) -> None:
            for i in range(args.warmup):
                run(-1 - i)
            took = []
            pid = broker.proc.pid if broker.proc is not None and broker.proc.poll() is None else None
            before = cpu_by_role(pid)
            for i in range(args.runs):
                t = time.perf_counter()
                run(i)
                took.append(time.perf_counter() - t)
            after = cpu_by_role(pid)
            results[label] = n / statistics.median(took)
            cpu[label] = {role: (after[role] - before[role]) / args.runs * 1e6 / n for role in ROLES}

        def read(df: object) -> Callable[[int], None]:
            def run(_: int) -> None:
                row = df.selectExpr("sum(length(value))", "count(*)").collect()[0]  # type: ignore[attr-defined]
                assert (row[0], row[1]) == (n * args.value_bytes, n), row
            return run

        measure("read through broker (skerry)", read(spark.read.format("skerry").option("bootstrap", bs)
                                                      .option("topic", "bench").load()))
        df = spark.range(n).selectExpr("cast(concat('user', id % 1000) as binary) as key",
                                       f"cast(repeat('y', {args.value_bytes}) as binary) as value")

        def write(i: int) -> None:
            topic = f"bench-out{i + args.warmup}"
            df.write.format("skerry").option("bootstrap", bs).option("topic", topic).mode("append").save()
            with Client(bs) as c:
                hws = c.metadata(topic)["hw"]
                assert isinstance(hws, list) and sum(h + 1 for h in hws) == n, hws
                c.request("ADMIN_DELETE_TOPIC", topic)

        measure("write (skerry sink, idempotent, acks=1)", write)
        broker.stop()
        measure("offline read (skerry-log)", read(spark.read.format("skerry-log").option("topic", "bench")
                                                  .load(str(broker.data_dir))))
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"spark bench: {n} messages of {args.value_bytes} bytes, {parts} partitions, local[2], "
          f"{os.cpu_count()} cores; median of {args.runs} runs after {args.warmup} warm-up runs; "
          f"Arrow bounds checks {'off' if args.arrow_unchecked else 'on'}")
    for label, rate in results.items():
        where = ", ".join(f"{role} {seconds:.2f}" for role, seconds in cpu[label].items()) \
            if label in cpu else ""
        print(f"  {label:47s} {rate:12,.0f} rows/s" + (f"   CPU s per 1M rows: {where}" if where else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
