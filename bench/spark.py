"""Spark throughput: rows/s of a batch read of N messages through the broker (``skerry``),
of the same data dir read offline (``skerry-log``), and of a batch write (``skerry`` sink).

Usage: ``.venv/bin/python bench/spark.py [--messages 1000000] [--partitions 4]``. Starts its
own broker (fsync interval) on a free loopback port and a local[2] SparkSession.
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
sys.path.insert(0, str(ROOT / "tests"))

from support import BrokerProcess  # noqa: E402

from data.spark.client import SkerryClient  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from data.spark import register

    work = Path(tempfile.mkdtemp(prefix="skerry-bench-spark-"))
    broker = BrokerProcess(work, {"storage": {"fsync": "interval"}}).start()
    bs = f"127.0.0.1:{broker.port}"
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    n, parts = args.messages, args.partitions
    value = b"x" * args.value_bytes
    t0 = time.perf_counter()
    with SkerryClient(bs) as c:
        c.request("ADMIN_CREATE_TOPIC", f"bench {parts} 1")
        c.produce_many("bench", ((b"user%d" % (i % 1000), value, i % parts) for i in range(n)), window=5000)
    load = time.perf_counter() - t0
    results = {"load (pipelined PRODUCE, one connection)": n / load}

    def timed(label: str, df: object) -> None:
        df.count()  # type: ignore[attr-defined]  # warm-up: python workers, JIT
        t = time.perf_counter()
        rows = df.selectExpr("sum(length(value))", "count(*)").collect()[0][1]  # type: ignore[attr-defined]
        took = time.perf_counter() - t
        assert rows == n, (label, rows)
        results[label] = n / took

    timed("read through broker (skerry)", spark.read.format("skerry").option("bootstrap", bs)
          .option("topic", "bench").option("maxRecordsPerPartition", str(n // (2 * parts) + 1)).load())
    df = spark.range(n).selectExpr("cast(concat('user', id % 1000) as binary) as key",
                                   f"cast(repeat('y', {args.value_bytes}) as binary) as value")
    t = time.perf_counter()
    df.write.format("skerry").option("bootstrap", bs).option("topic", "bench-out").mode("append").save()
    results["write (skerry sink, idempotent, acks=1)"] = n / (time.perf_counter() - t)
    broker.stop()
    timed("offline read (skerry-log)", spark.read.format("skerry-log").option("topic", "bench")
          .load(str(broker.data_dir)))
    spark.stop()
    print(f"spark bench: {n} messages of {args.value_bytes} bytes, {parts} partitions, local[2], "
          f"{os.cpu_count()} cores")
    for label, rate in results.items():
        print(f"  {label:45s} {rate:12,.0f} rows/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
