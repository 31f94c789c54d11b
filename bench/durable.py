"""Where a durable produce's time goes: the bench suite's (d) load (50 connections, one
request in flight each, 100-byte values) against Skerry with ``storage.fsync: always``
(or ``interval``, the (e) row), printing what the group committer did meanwhile.

The broker runs with ``metrics_port`` on, and its ``/metrics`` is read before and after the
measured window: ``skerry_fsync_seconds`` (one observation per group-commit fsync, timed in
the fsync thread) and ``skerry_messages_in``. From them: fsyncs per second, messages per
fsync (the group-commit batch), the mean fsync time and the share of the window the fsync
thread (``thread``) or the reactor (``turn``) spent in fsync. ``--profile FILE`` also runs
py-spy over the broker for the window (raw folded stacks) and prints the functions with the
most samples. ``--client c [--pin]`` drives the same request bytes with the C reference
client (``bench/refclient.c``) instead of ``bench.loadgen``; pinned, the server runs flat out
on CPU 0 and the client on CPU 1, so the server's rate is its CPU per message, which the
Python generator sharing a 2-core machine blurs.

The metrics cost the broker something per request (each is timed), so the rate here runs
under the suite's (d) figure; the point is the shape (batch size, fsync time), not the rate.
``--no-metrics`` runs the broker as the suite does (no ``metrics_port``; the committer's
figures are then not printed, the fsync syscalls still are).

Must not import: broker internals (the broker is a separate process).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench.loadgen import LoadSpec, run
from bench.loadgen_wire import make_value, resp_xadd_request, v1_produce_request
from bench.serve import start_serve, stop_serve
from bench.servers import free_port, run_refclient, start_redis

__all__ = ["FsyncStats", "scrape", "main"]


@dataclass
class FsyncStats:
    fsyncs: float
    fsync_seconds: float
    messages: float


def scrape(port: int) -> FsyncStats:
    """The committer's fsync count and time, and messages appended so far."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    fsyncs = seconds = messages = 0.0
    for line in text.splitlines():
        if line.startswith("skerry_fsync_seconds_count"):
            fsyncs += float(line.split()[-1])
        elif line.startswith("skerry_fsync_seconds_sum"):
            seconds += float(line.split()[-1])
        elif line.startswith("skerry_messages_in_total"):
            messages += float(line.split()[-1])
    return FsyncStats(fsyncs, seconds, messages)


def _top(path: Path, n: int = 20) -> list[str]:
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        total += int(count)
        own[stack.split(";")[-1]] += int(count)
    return [f"  {c / total * 100:5.1f}%  {f}" for f, c in own.most_common(n)] if total else []


_NO_PERF = "perf is not installed: apt-get install linux-perf (Debian) or linux-tools-generic (Ubuntu)"


def count_fsyncs(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    """Start ``perf stat`` counting the ``fdatasync`` and ``fsync`` syscalls of ``pid``
    (every thread) into ``out``; None when perf is not installed."""
    perf = shutil.which("perf")
    if perf is None:
        return None
    return subprocess.Popen(
        [perf, "stat", "-x", ",", "-o", str(out), "-e",
         "syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync", "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def counted_fsyncs(counter: subprocess.Popen[bytes] | None, out: Path,
                   stop_within: float = 10.0) -> float:
    """Stop the counter and read how many fsync syscalls it saw (0 when none could be: no
    perf, no access to the tracepoints, or a perf that did not stop on SIGINT within
    ``stop_within`` seconds, which is then killed: a stuck measuring tool must not fail or
    hang the bench)."""
    if counter is None:
        return 0.0
    counter.send_signal(2)
    try:
        counter.wait(stop_within)
    except subprocess.TimeoutExpired:
        counter.kill()
        counter.wait()
        print(f"perf stat did not stop within {stop_within:g} s of SIGINT: killed, its "
              f"count not used")
        return 0.0
    syncs = 0.0
    if out.exists():
        for line in out.read_text().splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[2].startswith("syscalls:") and fields[0].isdigit():
                syncs += float(fields[0])
    return syncs


def _cpu_seconds(pid: int) -> tuple[float, float] | None:
    """User and system CPU seconds of process ``pid`` so far (None without /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick
    except (OSError, ValueError, IndexError):
        return None


def _cpu_line(who: str, before: tuple[float, float] | None,
              after: tuple[float, float] | None, messages: int) -> str:
    """The server's CPU (``/proc/<pid>/stat``) per message over the window, and its
    user/system split: steadier than the rate on a shared machine."""
    if before is None or after is None or not messages:
        return f"{who} CPU: not measured (no /proc)"
    user, system = after[0] - before[0], after[1] - before[1]
    return (f"{who} CPU: {user + system:.2f} s in the window, "
            f"{(user + system) / messages * 1e6:.1f} us per message "
            f"(user {user / messages * 1e6:.1f}, system {system / messages * 1e6:.1f})")


@dataclass
class Window:
    """What the measured window's load did: messages answered, their rate, the p50 (ms,
    None from the C client, which keeps no latencies)."""

    messages: int
    messages_per_s: float
    p50_ms: float | None


def _load(args: argparse.Namespace, workdir: Path, protocol: str, port: int,
          seconds: float) -> Window:
    """The request/response load for ``seconds`` on ``port``: ``bench.loadgen`` (Python,
    ``--load-processes``), or with ``--client c`` the C reference client
    (``bench/refclient.c``, one process, the same request bytes; on CPU 1 with ``--pin``)."""
    if args.client == "c":
        value = make_value(100)
        request = (v1_produce_request("1", "bench", "k1", value) if protocol == "v1"
                   else resp_xadd_request("bench", value))
        got = run_refclient(workdir, port, protocol, request, connections=args.connections,
                            warmup_s=0.0, duration_s=seconds,
                            cpus=[1] if args.pin else None)
        return Window(int(got["requests"]), float(got["messages_per_s"]), None)
    result = run(LoadSpec(protocol=protocol, port=port, connections=args.connections,
                          inflight=1, duration_s=seconds, warmup_s=0.0,
                          processes=args.load_processes))
    return Window(result.messages, result.messages_per_s,
                  result.percentiles().get("p50", 0.0))


def _pin_server(args: argparse.Namespace, pid: int) -> None:
    """``--pin``: the server on CPU 0 (the C client takes CPU 1)."""
    if args.pin and hasattr(os, "sched_setaffinity"):
        for task in os.listdir(f"/proc/{pid}/task"):  # every thread of the server
            os.sched_setaffinity(int(task), {0})


def _rate_line(who: str, args: argparse.Namespace, window: Window) -> str:
    client = "C client" + (", pinned" if args.pin else "") if args.client == "c" else \
        f"bench.loadgen x{args.load_processes}"
    p50 = f", p50 {window.p50_ms:.2f} ms" if window.p50_ms is not None else ""
    return (f"{who}, {args.connections} connections x 1 request in flight ({client}): "
            f"{window.messages_per_s:,.0f} msgs/s{p50}")


def redis_run(args: argparse.Namespace) -> int:
    """The same load against Redis (``appendfsync always``, or ``everysec`` for
    ``interval``), its fsyncs counted by ``perf stat`` on the ``fdatasync`` and ``fsync``
    syscall tracepoints of the server process over the window: Redis's messages per fsync
    beside Skerry's."""
    if shutil.which("redis-server") is None:
        print("redis: not run: redis-server is not installed (apt-get install redis-server)",
              file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="skerry-durable-redis-"))
    server = start_redis(workdir, "always" if args.fsync == "always" else "everysec")
    stat = workdir / "perf.txt"
    _pin_server(args, server.proc.pid)
    try:
        _load(args, workdir, "resp", server.port, 1.0)  # warm-up
        counter = count_fsyncs(server.proc.pid, stat)
        time.sleep(0.2)
        cpu0 = _cpu_seconds(server.proc.pid)
        result = _load(args, workdir, "resp", server.port, args.seconds)
        cpu1 = _cpu_seconds(server.proc.pid)
        syncs = counted_fsyncs(counter, stat)
    finally:
        server.stop()
    print(_rate_line(f"redis appendfsync={'always' if args.fsync == 'always' else 'everysec'}",
                     args, result))
    print(_cpu_line("redis", cpu0, cpu1, result.messages))
    if syncs:
        print(f"redis fsyncs: {syncs:,.0f} in the window (perf stat), "
              f"{result.messages / syncs:.1f} msgs per fsync")
    else:
        print(f"redis fsyncs: not counted ({_NO_PERF if shutil.which('perf') is None else 'perf has no access to the syscall tracepoints'})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fsync", choices=("always", "interval"), default="always")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--load-processes", type=int, default=2,
                        help="load generator processes the connections are split between")
    parser.add_argument("--group-commit", choices=("turn", "thread"), default=None,
                        help="storage.group_commit (default: the broker's default)")
    parser.add_argument("--reactor", choices=("lean", "twisted"), default=None,
                        help="the broker's reactor setting (default: the broker's default)")
    parser.add_argument("--profile", type=Path, help="py-spy raw output for the window")
    parser.add_argument("--redis", action="store_true",
                        help="run the load against Redis instead (fsyncs counted by perf)")
    parser.add_argument("--client", choices=("python", "c"), default="python",
                        help="the load: bench.loadgen (the suite's) or the C reference client")
    parser.add_argument("--no-metrics", action="store_true",
                        help="the broker without metrics_port, as the suite runs it (the "
                             "metrics time every request; the group commit then goes unseen)")
    parser.add_argument("--no-perf", action="store_true",
                        help="do not count the fsync syscalls with perf stat (tests: in three "
                             "fresh-clone runs a perf attaching to the broker never stopped, "
                             "and the broker's fsyncs took 1.4 s meanwhile)")
    parser.add_argument("--pin", action="store_true",
                        help="with --client c: the server on CPU 0, the client on CPU 1 (the "
                             "server then runs flat out: its rate is its CPU per message)")
    args = parser.parse_args(argv)
    if args.redis:
        return redis_run(args)
    workdir = Path(tempfile.mkdtemp(prefix="skerry-durable-"))
    metrics = None if args.no_metrics else free_port()
    proc, port, _log = start_serve(workdir, {
        "data_dir": str(workdir / "data"), "port": 0,
        **({"metrics_port": metrics} if metrics is not None else {}),
        "log_level": "warning", **({"reactor": args.reactor} if args.reactor else {}),
        "storage": {"fsync": args.fsync, "fsync_interval_ms": 1000,
                                            **({"group_commit": args.group_commit}
                                               if args.group_commit else {})},
        "topics": {"bench": {"partitions": 1, "replication_factor": 1}}}, "v1")
    spy = None
    _pin_server(args, proc.pid)
    try:
        _load(args, workdir, "v1", port, 1.0)  # warm-up, then the measured window
        if args.profile:
            spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record",
                                    "--pid", str(proc.pid), "--format", "raw", "--rate", "250",
                                    "--threads", "-o", str(args.profile), "--nonblocking"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        counter = None if args.no_perf else count_fsyncs(proc.pid, workdir / "perf.txt")
        time.sleep(0.2)
        t0 = time.monotonic()
        before = scrape(metrics) if metrics is not None else None
        cpu0 = _cpu_seconds(proc.pid)
        result = _load(args, workdir, "v1", port, args.seconds)
        cpu1 = _cpu_seconds(proc.pid)
        after = scrape(metrics) if metrics is not None else None
        window = time.monotonic() - t0
        syscalls = counted_fsyncs(counter, workdir / "perf.txt")
    finally:
        if spy is not None:
            spy.send_signal(2)
            spy.wait(60)
        stop_serve(proc)
    if before is not None and after is not None:
        fsyncs = after.fsyncs - before.fsyncs
        busy = after.fsync_seconds - before.fsync_seconds
        msgs = after.messages - before.messages
    else:  # --no-metrics: the committer's figures are not known
        fsyncs, busy, msgs = 0.0, 0.0, float(result.messages)
    mode = f", group_commit={args.group_commit}" if args.group_commit else ""
    mode += f", reactor={args.reactor}" if args.reactor else ""
    print(_rate_line(f"storage.fsync={args.fsync}{mode}", args, result))
    print(_cpu_line("broker", cpu0, cpu1, result.messages))
    if metrics is None:
        print("group commit: not observed (--no-metrics)")
    elif fsyncs:
        print(f"group commit: {fsyncs / window:,.0f} fsyncs/s, {msgs / fsyncs:.1f} msgs per fsync, "
              f"mean fsync {busy / fsyncs * 1000:.3f} ms, in fsync {busy / window:.0%} "
              f"of the window")
    else:
        print(f"group commit: no fsync by the committer in the window ({msgs:,.0f} messages)")
    if args.no_perf:
        print("fsync syscalls of the broker: not counted (--no-perf)")
    elif counter is None:
        print(f"fsync syscalls of the broker: not counted ({_NO_PERF})")
    elif syscalls:
        print(f"fsync syscalls of the broker (perf stat, every thread, the window and "
              f"~0.2 s before it): {syscalls:,.0f}, {msgs / syscalls:.1f} msgs per fsync syscall")
    if args.profile and args.profile.exists():
        print("py-spy, own samples (all threads):")
        print("\n".join(_top(args.profile)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
