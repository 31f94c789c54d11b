"""bench/spark.py (docs/performance.md's Spark figures): a tiny run through the broker, the
sink and the offline reader prints each rate with where the CPU went (broker, JVM, Python
workers), and the figures add up (the reads and writes check their own row counts). 200,000
rows, so that the broker's share of a read (about 0.3 us a row) spans several of /proc's 10 ms
CPU ticks: with a few thousand rows it can read 0.00."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support import ROOT

pytest.importorskip("pyspark")


@pytest.mark.slow
def test_a_tiny_spark_bench_prints_rates_and_cpu_by_process() -> None:
    proc = subprocess.run(
        [sys.executable, "bench/spark.py", "--messages", "200000", "--partitions", "2",
         "--warmup", "0", "--runs", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {}
    for line in proc.stdout.splitlines():
        found = re.match(r"\s+(.+?)\s+([\d,]+) rows/s(?:\s+CPU s per 1M rows: (.*))?$", line)
        if found:
            rows[found.group(1)] = (int(found.group(2).replace(",", "")), found.group(3))
    assert set(rows) == {"load (pipelined PRODUCE_BATCH, one connection)", "read through broker (skerry)",
                         "write (skerry sink, idempotent, acks=1)", "offline read (skerry-log)"}, proc.stdout
    assert all(rate > 0 for rate, _cpu in rows.values())
    for label in ("read through broker (skerry)", "write (skerry sink, idempotent, acks=1)"):
        cpu = dict(part.rsplit(" ", 1) for part in rows[label][1].split(", "))
        assert set(cpu) == {"broker", "JVM", "Python workers"}, rows[label]
        assert float(cpu["broker"]) > 0 and float(cpu["JVM"]) > 0, rows[label]
    offline = dict(part.rsplit(" ", 1) for part in rows["offline read (skerry-log)"][1].split(", "))
    assert float(offline["broker"]) == 0, offline  # the broker is stopped for the offline read
