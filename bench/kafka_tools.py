"""Kafka's own performance tools against Skerry's Kafka listener: ``kafka-producer-perf-test``
(``org.apache.kafka.tools.ProducerPerformance``) and ``kafka-consumer-perf-test``
(``org.apache.kafka.tools.ConsumerPerformance``) from kafka-tools 4.3.1, unmodified, run
on the JVM with the classpath of the Java test driver (tests/kafka/java, built with Maven;
its dependencies come from Maven Central once, then from ~/.m2).

Starts ``python -m broker serve`` with ``kafka_port`` on a free loopback port and a fresh
data directory, creates topic ``perf`` (``--partitions``) with kafka-topics, then:

* produce: ``ProducerPerformance --num-records N --record-size S --throughput -1`` at the
  producer's defaults (idempotence on, acks=all, linger.ms 5, batch.size 16 KiB);
* consume: ``ConsumerPerformance --num-records N`` (a group consumer from the earliest
  offset) reads them back.

It prints each tool's own summary figures. Run ``python -m bench.kafka_tools --help``.

Must not import: broker internals (the tools are Kafka's; the broker runs as a child).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.iggy import _cpu_per_msg, _cpu_seconds, machine
from bench.serve import REPO_ROOT, start_serve, stop_serve

__all__ = ["ProducerFigures", "ConsumerFigures", "Run", "build_classpath", "producer_perf",
           "consumer_perf", "run_bench", "main"]

DRIVER = REPO_ROOT / "tests" / "kafka" / "java"


@dataclass(frozen=True)
class ProducerFigures:
    """ProducerPerformance's final summary line."""

    records: int
    records_per_sec: float
    mb_per_sec: float
    avg_latency_ms: float
    max_latency_ms: float
    p50_ms: float
    p99_ms: float


@dataclass(frozen=True)
class ConsumerFigures:
    """ConsumerPerformance's summary row (its CSV columns)."""

    records: int
    records_per_sec: float
    mb_per_sec: float
    rebalance_ms: float
    fetch_records_per_sec: float


def build_classpath(mvn: str = "mvn") -> str:
    """Compile the Java driver and resolve kafka-clients / kafka-tools; its classpath."""
    out = subprocess.run(
        [mvn, "-B", "-q", "compile", "dependency:build-classpath",
         "-Dmdep.outputFile=target/classpath.txt"],
        cwd=DRIVER, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(out.stdout[-4000:] + out.stderr[-4000:])
    deps = (DRIVER / "target" / "classpath.txt").read_text().strip()
    return f"{DRIVER / 'target' / 'classes'}{os.pathsep}{deps}"


def _java(java: str, classpath: str, main: str, *args: str, timeout: float) -> str:
    out = subprocess.run([java, "-cp", classpath, main, *args], capture_output=True,
                         text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{main} exited {out.returncode}:\n{out.stdout[-3000:]}"
                           f"{out.stderr[-3000:]}")
    return out.stdout


def parse_producer(stdout: str) -> ProducerFigures:
    """The last line of ProducerPerformance: ``N records sent, R records/sec (M MB/sec),
    A ms avg latency, X ms max latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, ...``."""
    lines = [line for line in stdout.splitlines() if " records sent, " in line]
    if not lines:
        raise RuntimeError(f"no summary in ProducerPerformance's output:\n{stdout[-3000:]}")
    cells = [cell.strip() for cell in lines[-1].replace("(", ",").replace(")", "").split(",")]
    first = [cell.split()[0] for cell in cells]
    return ProducerFigures(records=int(first[0]), records_per_sec=float(first[1]),
                           mb_per_sec=float(first[2]), avg_latency_ms=float(first[3]),
                           max_latency_ms=float(first[4]), p50_ms=float(first[5]),
                           p99_ms=float(first[7]))


def parse_consumer(stdout: str) -> ConsumerFigures:
    """ConsumerPerformance's header line and its one row of figures."""
    lines = [line for line in stdout.splitlines() if line.count(",") >= 9]
    header = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
    if header is None or header + 1 >= len(lines):
        raise RuntimeError(f"no summary in ConsumerPerformance's output:\n{stdout[-3000:]}")
    row = dict(zip((c.strip() for c in lines[header].split(",")),
                   (c.strip() for c in lines[header + 1].split(",")), strict=True))
    return ConsumerFigures(records=int(row["data.consumed.in.nMsg"]),
                           records_per_sec=float(row["nMsg.sec"]),
                           mb_per_sec=float(row["MB.sec"]),
                           rebalance_ms=float(row["rebalance.time.ms"]),
                           fetch_records_per_sec=float(row["fetch.nMsg.sec"]))


def producer_perf(java: str, classpath: str, port: int, topic: str, records: int,
                  size: int, *props: str) -> ProducerFigures:
    """kafka-producer-perf-test: ``records`` values of ``size`` bytes, as fast as it can."""
    stdout = _java(java, classpath, "org.apache.kafka.tools.ProducerPerformance",
                   "--topic", topic, "--num-records", str(records), "--record-size",
                   str(size), "--throughput", "-1", "--command-property",
                   f"bootstrap.servers=127.0.0.1:{port}", *props,
                   timeout=max(120.0, records / 2000))
    return parse_producer(stdout)


def consumer_perf(java: str, classpath: str, port: int, topic: str, records: int,
                  group: str) -> ConsumerFigures:
    """kafka-consumer-perf-test: a group consumer reads ``records`` from the earliest."""
    stdout = _java(java, classpath, "org.apache.kafka.tools.ConsumerPerformance",
                   "--bootstrap-server", f"127.0.0.1:{port}", "--topic", topic,
                   "--num-records", str(records), "--group", group, "--timeout", "60000",
                   timeout=max(120.0, records / 2000))
    return parse_consumer(stdout)


def create_topic(java: str, classpath: str, port: int, topic: str, partitions: int) -> None:
    """kafka-topics --create."""
    _java(java, classpath, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
          f"127.0.0.1:{port}", "--create", "--topic", topic, "--partitions", str(partitions),
          timeout=120)


@dataclass(frozen=True)
class Run:
    """One run: each tool's figures and the broker's CPU time per record in each phase
    (from ``/proc``; None without it), which the machine's load moves less than rates."""

    produce: ProducerFigures
    consume: ConsumerFigures
    broker_us_per_produced: float | None
    broker_us_per_consumed: float | None


def run_bench(*, records: int, size: int, partitions: int, fsync: str, java: str = "java",
              classpath: str | None = None, python: str = sys.executable,
              producer_props: tuple[str, ...] = ()) -> Run:
    """A fresh broker; the producer perf test, then the consumer perf test."""
    classpath = classpath or build_classpath()
    workdir = Path(tempfile.mkdtemp(prefix="skerry-kafka-tools-bench-"))
    proc, port, _log = start_serve(workdir, {
        "data_dir": str(workdir / "data"), "port": 0, "kafka_port": 0,
        "log_level": "warning", "storage": {"fsync": fsync}}, "kafka", python)
    try:
        create_topic(java, classpath, port, "perf", partitions)
        before = _cpu_seconds(proc.pid)
        produced = producer_perf(java, classpath, port, "perf", records, size,
                                 *producer_props)
        middle = _cpu_seconds(proc.pid)
        consumed = consumer_perf(java, classpath, port, "perf", records, "perf-group")
        after = _cpu_seconds(proc.pid)
        return Run(produced, consumed, _cpu_per_msg(before, middle, produced.records),
                   _cpu_per_msg(middle, after, consumed.records))
    finally:
        stop_serve(proc)
        shutil.rmtree(workdir, ignore_errors=True)


def _cpu(us: float | None) -> str:
    return "" if us is None else f"  broker CPU {us:.2f} us/record"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--fsync", choices=("always", "interval", "never"), default="never")
    parser.add_argument("--repeat", type=int, default=1, help="runs, each on a fresh broker")
    parser.add_argument("--producer-property", action="append", default=[],
                        metavar="KEY=VALUE", help="a producer setting on top of the "
                        "tool's defaults (repeatable), e.g. batch.size=1048576")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    classpath = build_classpath()
    runs = [run_bench(records=args.records, size=args.size, partitions=args.partitions,
                      fsync=args.fsync, classpath=classpath,
                      producer_props=tuple(args.producer_property))
            for _ in range(max(1, args.repeat))]
    if args.json:
        print(json.dumps({"machine": machine(), "runs": [asdict(run) for run in runs]},
                         indent=2))
        return 0
    print(f"# {machine()}; Kafka 4.3.1 perf tools, {args.records:,} x {args.size} B, "
          f"{args.partitions} partition(s), storage.fsync={args.fsync}; producer settings: "
          f"{' '.join(args.producer_property) or 'defaults'}")
    for run in runs:
        p, c = run.produce, run.consume
        print(f"kafka-producer-perf-test  {p.records:,} records  {p.records_per_sec:,.0f} "
              f"records/s  {p.mb_per_sec:.2f} MB/s  latency avg {p.avg_latency_ms:.0f} ms, "
              f"p50 {p.p50_ms:.0f} ms, p99 {p.p99_ms:.0f} ms, max {p.max_latency_ms:.0f} ms"
              f"{_cpu(run.broker_us_per_produced)}")
        print(f"kafka-consumer-perf-test  {c.records:,} records  {c.records_per_sec:,.0f} "
              f"records/s  {c.mb_per_sec:.2f} MB/s  (fetch {c.fetch_records_per_sec:,.0f} "
              f"records/s; rebalance {c.rebalance_ms:.0f} ms){_cpu(run.broker_us_per_consumed)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
