"""The V1 broker's own throughput targets (issue "V1 broker", acceptance 5), measured with
the shared load generator against a fresh broker per durability setting.

    .venv/bin/python -m bench.v1 [--duration 5] [--repeat 3]

Workloads, 100-byte values, one topic with one partition:
- pipelined: 1 connection, 1,000 PRODUCE in flight, ``storage.fsync: interval`` (target
  >= 150,000 msgs/s);
- request/response: 50 connections, one PRODUCE outstanding each, ``fsync: interval``
  (target >= 25,000 msgs/s);
- durable request/response: the same 50 connections with ``fsync: always`` and group commit
  (target >= 10,000 msgs/s).

Prints a table (median of the repeats, with the range) and the targets. Bounded in time:
each run lasts ``--duration`` seconds after a 1 s warm-up. Only 127.0.0.1 is used.

Must not import: broker internals; the broker is driven over the wire only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.loadgen import LoadSpec, run
from bench.servers import machine_info, start_skerry


@dataclass(frozen=True)
class Case:
    name: str
    fsync: str
    connections: int
    inflight: int
    processes: int
    target: float


CASES = (
    Case("pipelined, 1 conn x 1000 in flight, fsync=interval", "interval", 1, 1000, 1, 150_000),
    Case("request/response, 50 conns, fsync=interval", "interval", 50, 1, 2, 25_000),
    Case("request/response, 50 conns, fsync=always", "always", 50, 1, 2, 10_000),
)


def measure(case: Case, duration: float, workdir: Path) -> tuple[float, dict[str, float]]:
    server = start_skerry(workdir, case.fsync, ["bench"])  # type: ignore[arg-type]
    try:
        result = run(LoadSpec(protocol="v1", port=server.port, connections=case.connections,
                              inflight=case.inflight, processes=case.processes,
                              duration_s=duration, warmup_s=1.0, topic="bench"))
        if result.errors:
            raise SystemExit(f"{case.name}: error reply {result.first_error}")
        try:
            latency = result.percentiles()
        except ImportError:  # hdrhistogram is in the bench extra only
            latency = {}
        return result.messages_per_s, latency
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per workload")
    args = parser.parse_args(argv)
    info = machine_info()
    print(f"# {info.get('cpu', '?')}, {info.get('cores', '?')} cores; "
          f"{args.repeat} x {args.duration:g} s per workload")
    print("| workload | msgs/s (median, range) | p50 / p99 ms | target | met |")
    print("|---|---|---|---|---|")
    failed = 0
    for case in CASES:
        rates: list[float] = []
        latencies: list[dict[str, float]] = []
        for i in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="skerry-bench-v1-") as tmp:
                workdir = Path(tmp) / f"run{i}"
                workdir.mkdir()
                rate, latency = measure(case, args.duration, workdir)
            rates.append(rate)
            latencies.append(latency)
        median = statistics.median(rates)
        lat = latencies[rates.index(min(rates, key=lambda r: abs(r - median)))]
        lat_text = f"{lat['p50']:.2f} / {lat['p99']:.2f}" if lat else "-"
        met = median >= case.target
        failed += not met
        print(f"| {case.name} | {median:,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) | "
              f"{lat_text} | {case.target:,.0f} | {'yes' if met else 'no'} |")
        sys.stdout.flush()
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
