"""The Skerry-vs-Redis-Streams workload suite: what is measured, against which servers.

Owns: the workload table (a-e), which server configuration each workload needs (Skerry
``storage.fsync`` against Redis persistence), running every workload on both systems one
after the other with the same load generator, filling the partition / stream the consume
workload reads, measuring the generator's own ceiling against the canned-reply responder
for every load shape, the C reference client (``bench/refclient.c``) on the
request/response load (against the responder and both servers, with and without
persistence: what any client could get on this machine), and the command line behind
``bench/run_all``.

Must not import: broker internals; both servers are driven over the wire only.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shlex
import signal
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench import report
from bench.loadgen import (
    LoadResult,
    LoadSpec,
    make_value,
    resp_xadd_request,
    run,
    v1_produce_request,
)
from bench.servers import (
    RedisPersistence,
    ServerError,
    ServerProcess,
    SkerryFsync,
    machine_info,
    run_refclient,
    start_redis,
    start_responder,
    start_skerry,
    start_twisted_ceiling,
)

__all__ = ["Workload", "WORKLOADS", "SuiteOptions", "SuiteResult", "Measurement",
           "REFERENCE_WORKLOAD", "SERVER_REFERENCE_WORKLOADS", "reference_key",
           "median_measurement", "shape_name", "run_suite", "main"]

PRODUCE_TOPIC = "bench"
CONSUME_TOPIC = "bench-consume"
System = Literal["skerry", "redis"]


@dataclass(frozen=True)
class Workload:
    """One row of the comparison."""

    key: str
    title: str
    mode: Literal["produce", "consume"]
    connections: int
    inflight: int
    skerry_fsync: SkerryFsync
    redis_persistence: RedisPersistence
    skerry_setting: str
    redis_setting: str

    @property
    def shape(self) -> tuple[str, int, int]:
        """Workloads with the same shape put the same work on the load generator."""
        return (self.mode, self.connections, self.inflight)


WORKLOADS: tuple[Workload, ...] = (
    Workload("a", "produce, request/response, 50 connections", "produce", 50, 1,
             "never", "none", "never", "without persistence (`--appendonly no`)"),
    Workload("b", "produce, pipelined, 1 connection x 1000 in flight", "produce", 1, 1000,
             "never", "none", "never", "without persistence (`--appendonly no`)"),
    Workload("c", "consume, batches of 1000 from one full partition / stream", "consume", 1, 1,
             "never", "none", "never", "without persistence (`--appendonly no`)"),
    Workload("d", "durable produce, request/response, 50 connections", "produce", 50, 1,
             "always", "always", "always", "`--appendonly yes --appendfsync always`"),
    Workload("e", "periodic-fsync produce, request/response, 50 connections", "produce", 50, 1,
             "interval", "everysec", "interval` with `fsync_interval_ms: 1000",
             "`--appendonly yes --appendfsync everysec`"),
)


@dataclass
class SuiteOptions:
    """How long and how hard; ``quick`` shortens every load to about two seconds."""

    duration_s: float = 6.0
    warmup_s: float = 1.0
    value_size: int = 100
    batch: int = 1000
    fill: int = 200_000
    max_requests: int = 100_000_000
    workloads: tuple[str, ...] = tuple(w.key for w in WORKLOADS)
    systems: tuple[System, ...] = ("skerry", "redis")
    ceiling: bool = True
    twisted: bool = True
    reference: bool = True
    load_processes: int = 2
    repeat: int = 1
    loop: Literal["auto", "uvloop", "asyncio"] = "auto"
    pin: bool = False
    python: str = sys.executable
    reactor: str | None = None
    """Skerry's ``reactor`` setting (None: the broker's default), for A/B runs."""

    @classmethod
    def quick(cls, **overrides: Any) -> SuiteOptions:
        return cls(**{"duration_s": 2.0, "warmup_s": 0.5, "fill": 50_000, **overrides})

    def load_cpus(self) -> tuple[int, ...] | None:
        return (0,) if self.pin and (os.cpu_count() or 1) >= 2 else None

    def server_cpus(self) -> tuple[int, ...] | None:
        return (1,) if self.pin and (os.cpu_count() or 1) >= 2 else None


@dataclass
class Measurement:
    """One system on one workload: a result, or why there is none."""

    result: LoadResult | None = None
    error: str | None = None
    rates: list[float] = field(default_factory=list)  # every repetition's msg/s

    def to_dict(self) -> dict[str, Any]:
        return {"result": None if self.result is None else self.result.to_dict(),
                "error": self.error, "rates": self.rates}


def median_measurement(runs: Sequence[Measurement]) -> Measurement:
    """The repetition with the median rate (the lower one of two middles), carrying every
    repetition's rate; the first failed repetition when any failed."""
    for m in runs:
        if m.error or m.result is None:
            return m
    ordered = sorted(runs, key=lambda m: m.result.messages_per_s)  # type: ignore[union-attr]
    chosen = ordered[(len(ordered) - 1) // 2]
    rates = [m.result.messages_per_s for m in runs]  # type: ignore[union-attr]
    return Measurement(result=chosen.result, rates=rates)


@dataclass
class SuiteResult:
    """Everything one run measured, plus what it needs to describe itself."""

    options: SuiteOptions
    machine: dict[str, str]
    command: str
    started: str
    measurements: dict[str, dict[str, Measurement]] = field(default_factory=dict)
    runs: dict[str, dict[str, list[Measurement]]] = field(default_factory=dict)
    ceilings: dict[str, dict[str, Measurement]] = field(default_factory=dict)
    ceiling_runs: dict[str, dict[str, list[Measurement]]] = field(default_factory=dict)
    twisted: dict[str, Measurement] = field(default_factory=dict)
    """The do-nothing Twisted line responder with each workload's load (V1), keyed by
    workload: the reactor's ceiling, measured in the same run."""
    twisted_runs: dict[str, list[Measurement]] = field(default_factory=dict)
    fill: dict[str, int] = field(default_factory=dict)
    reference: dict[str, Measurement] = field(default_factory=dict)
    """The C reference client on the request/response load: keyed ``skerry``, ``redis``
    (workload (a)'s servers), ``skerry d`` ... ``redis e`` (the servers of the other
    ``SERVER_REFERENCE_WORKLOADS``; ``reference_key``), ``twisted`` and ``responder v1`` /
    ``responder resp``."""
    reference_runs: dict[str, list[Measurement]] = field(default_factory=dict)
    loadavg_after: str = ""
    responder: str = ""
    implementation: str = ""
    """What the Skerry servers logged about their per-message loops ("per-message loops:
    compiled (...)" or "... pure Python (why)"): which implementation the figures used."""

    def failures(self) -> list[str]:
        out = []
        for key, by_system in self.measurements.items():
            for system, m in by_system.items():
                if m.error:
                    out.append(f"({key}) {system}: {m.error.splitlines()[0]}")
        for shape, by_proto in self.ceilings.items():
            for proto, m in by_proto.items():
                if m.error:
                    out.append(f"ceiling \"{shape}\" {proto}: {m.error.splitlines()[0]}")
        return out

    def to_dict(self) -> dict[str, Any]:
        opts = dataclasses.asdict(self.options)
        return {
            "options": opts, "machine": self.machine, "command": self.command,
            "started": self.started, "loadavg_after": self.loadavg_after, "fill": self.fill,
            "responder": self.responder, "implementation": self.implementation,
            "measurements": {k: {s: m.to_dict() for s, m in v.items()}
                             for k, v in self.measurements.items()},
            "runs": {k: {s: [m.to_dict() for m in ms] for s, ms in v.items()}
                     for k, v in self.runs.items()},
            "ceilings": {k: {p: m.to_dict() for p, m in v.items()}
                         for k, v in self.ceilings.items()},
            "reference": {k: m.to_dict() for k, m in self.reference.items()},
            "twisted": {k: m.to_dict() for k, m in self.twisted.items()},
        }


def shape_name(shape: tuple[str, int, int]) -> str:
    mode, conns, inflight = shape
    if mode == "consume":
        return f"consume, {conns} connection, 1 batch outstanding"
    if inflight == 1:
        return f"produce, {conns} connections, request/response"
    return f"produce, {conns} connection, {inflight} in flight"


def _spec(opts: SuiteOptions, protocol: str, port: int, mode: str, connections: int,
          inflight: int, topic: str) -> LoadSpec:
    return LoadSpec(
        protocol=protocol, port=port, mode=mode, connections=connections,  # type: ignore[arg-type]
        inflight=inflight, duration_s=opts.duration_s, warmup_s=opts.warmup_s,
        max_requests=opts.max_requests, value_size=opts.value_size, topic=topic,
        batch=opts.batch, processes=min(opts.load_processes, connections), loop=opts.loop,
        cpus=opts.load_cpus())


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _measure(spec: LoadSpec) -> Measurement:
    try:
        result = run(spec)
    except (OSError, TimeoutError) as exc:
        return Measurement(error=f"load failed: {exc!r}")
    if result.errors:
        return Measurement(result=result, error=result.first_error or "error replies")
    if result.requests == 0:
        return Measurement(result=result, error="no reply inside the measurement window")
    return Measurement(result=result)


def _fill(opts: SuiteOptions, protocol: str, port: int) -> tuple[int, str | None]:
    """Write ``opts.fill`` messages to the consume topic / stream; returns how many."""
    spec = dataclasses.replace(
        _spec(opts, protocol, port, "produce", 1, 1000, CONSUME_TOPIC),
        warmup_s=0.0, duration_s=300.0, max_requests=opts.fill, processes=1)
    try:
        result = run(spec)
    except (OSError, TimeoutError) as exc:
        return 0, f"fill failed: {exc!r}"
    if result.errors:
        return result.requests, f"fill failed: {result.first_error}"
    return result.requests, None


REFERENCE_WORKLOAD = "a"
"""The workload the C reference client repeats on the responders (request/response, no
persistence)."""

SERVER_REFERENCE_WORKLOADS = ("a", "d", "e")
"""The request/response workloads the C reference client also repeats on both servers: (a)
and the two with persistence, whose Python-generator figures sit close to the generator's
own ceiling on this load shape."""


def reference_key(system: str, workload: str) -> str:
    """``SuiteResult.reference``'s key for the C client on ``system`` under ``workload``:
    the system's name for (a), ``"<system> <workload>"`` for the others."""
    return system if workload == REFERENCE_WORKLOAD else f"{system} {workload}"


def _reference(opts: SuiteOptions, workdir: Path, protocol: str, port: int,
               connections: int) -> Measurement:
    """The C reference client's request/response produce load on ``port``: the same
    request bytes, connections and window as the Python generator's."""
    value = make_value(opts.value_size)
    request = (v1_produce_request("1", PRODUCE_TOPIC, "k1", value) if protocol == "v1"
               else resp_xadd_request(PRODUCE_TOPIC, value))
    try:
        got = run_refclient(workdir, port, protocol, request, connections=connections,
                            warmup_s=opts.warmup_s, duration_s=opts.duration_s,
                            cpus=opts.load_cpus())
    except ServerError as exc:
        return Measurement(error=str(exc))
    requests = int(got["requests"])
    result = LoadResult(protocol=protocol, mode="produce", connections=connections, inflight=1,
                        processes=1, loop="C", window_s=got["window_s"], requests=requests,
                        messages=requests, requests_per_s=got["messages_per_s"],
                        messages_per_s=got["messages_per_s"])
    if requests == 0:
        return Measurement(result=result, error="no reply inside the measurement window")
    return Measurement(result=result)


def _start(system: System, workdir: Path, wl: Workload, opts: SuiteOptions) -> ServerProcess:
    if system == "skerry":
        return start_skerry(workdir, wl.skerry_fsync, [PRODUCE_TOPIC, CONSUME_TOPIC],
                            python=opts.python, cpus=opts.server_cpus(), reactor=opts.reactor)
    return start_redis(workdir, wl.redis_persistence, cpus=opts.server_cpus())


def _groups(workloads: Sequence[Workload]) -> list[list[Workload]]:
    """Workloads that can share one server per system, in table order."""
    groups: dict[tuple[str, str], list[Workload]] = {}
    for wl in workloads:
        groups.setdefault((wl.skerry_fsync, wl.redis_persistence), []).append(wl)
    return list(groups.values())


def _run_group(system: System, group: Sequence[Workload], opts: SuiteOptions, workdir: Path,
               out: SuiteResult) -> None:
    """Start one server for ``group``, run its workloads in order, stop it."""
    protocol = "v1" if system == "skerry" else "resp"
    try:
        server = _start(system, workdir, group[0], opts)
    except ServerError as exc:
        _log(f"[{system}] could not start: {exc}")
        for wl in group:
            out.runs[wl.key][system].append(Measurement(error=f"server did not start: {exc}"))
        return
    try:
        _log(f"[{system}] {server.name} on 127.0.0.1:{server.port}")
        for wl in group:
            topic = PRODUCE_TOPIC
            if wl.mode == "consume":
                topic = CONSUME_TOPIC
                count, err = _fill(opts, protocol, server.port)
                out.fill[system] = count
                _log(f"[{system}] filled {CONSUME_TOPIC} with {count} messages")
                if err:
                    out.runs[wl.key][system].append(Measurement(error=err))
                    continue
            m = _measure(_spec(opts, protocol, server.port, wl.mode, wl.connections,
                               wl.inflight, topic))
            if m.error is None and not server.alive():
                m = Measurement(result=m.result, error="server died during the load")
            out.runs[wl.key][system].append(m)
            _log(f"[{system}] ({wl.key}) {report.describe(m.result, m.error)}")
            if opts.reference and wl.key in SERVER_REFERENCE_WORKLOADS:
                ref = _reference(opts, workdir, protocol, server.port, wl.connections)
                out.reference_runs.setdefault(reference_key(system, wl.key), []).append(ref)
                _log(f"[{system}] ({wl.key}) C reference client: "
                     f"{report.describe(ref.result, ref.error)}")
    finally:
        if system == "skerry":
            for line in server.log_path.read_text(errors="replace").splitlines():
                if "per-message loops:" in line:
                    loops = line[line.index("per-message loops:"):].strip()
                    if out.implementation and out.implementation != loops:
                        loops = f"{out.implementation}; then {loops}"
                    out.implementation = loops
        code = server.stop()
        if code not in (0, None, -15):
            _log(f"[{system}] {server.name} exited with code {code}:\n{server.log_tail()}")


def _run_ceilings(workloads: Sequence[Workload], opts: SuiteOptions, workdir: Path,
                  out: SuiteResult) -> None:
    shapes = []
    for wl in workloads:
        if wl.shape not in shapes:
            shapes.append(wl.shape)
    for shape in shapes:
        mode, conns, inflight = shape
        name = shape_name(shape)
        out.ceiling_runs.setdefault(name, {"v1": [], "resp": []})
        for protocol in ("v1", "resp"):
            try:
                server = start_responder(workdir, protocol, mode, batch=opts.batch,
                                         value_size=opts.value_size, python=opts.python,
                                         cpus=opts.server_cpus())
            except ServerError as exc:
                out.ceiling_runs[name][protocol].append(Measurement(error=str(exc)))
                continue
            out.responder = "the C responder `bench/responder.c`" \
                if server.name.startswith("C ") else "the Python responder `bench/echo.py`"
            ref: Measurement | None = None
            try:
                topic = CONSUME_TOPIC if mode == "consume" else PRODUCE_TOPIC
                m = _measure(_spec(opts, protocol, server.port, mode, conns, inflight, topic))
                if opts.reference and mode == "produce" and inflight == 1 and any(
                        w.key == REFERENCE_WORKLOAD and w.shape == shape for w in workloads):
                    ref = _reference(opts, workdir, protocol, server.port, conns)
            finally:
                server.stop()
            out.ceiling_runs[name][protocol].append(m)
            _log(f"[ceiling] {name} / {protocol}: {report.describe(m.result, m.error)}")
            if ref is not None:
                out.reference_runs.setdefault(f"responder {protocol}", []).append(ref)
                _log(f"[ceiling] {name} / {protocol} C reference client: "
                     f"{report.describe(ref.result, ref.error)}")


def _run_twisted(workloads: Sequence[Workload], opts: SuiteOptions, workdir: Path,
                 out: SuiteResult) -> None:
    """The Twisted ceiling: each load shape once against the do-nothing Twisted responder;
    every workload of that shape gets the figure."""
    done: dict[tuple[str, int, int], Measurement] = {}
    for wl in workloads:
        if wl.shape not in done:
            try:
                server = start_twisted_ceiling(workdir, wl.mode, batch=opts.batch,
                                               value_size=opts.value_size, python=opts.python,
                                               cpus=opts.server_cpus())
            except ServerError as exc:
                done[wl.shape] = Measurement(error=str(exc))
            else:
                try:
                    topic = CONSUME_TOPIC if wl.mode == "consume" else PRODUCE_TOPIC
                    done[wl.shape] = _measure(_spec(opts, "v1", server.port, wl.mode,
                                                    wl.connections, wl.inflight, topic))
                    if opts.reference and wl.key == REFERENCE_WORKLOAD:
                        ref = _reference(opts, workdir, "v1", server.port, wl.connections)
                        out.reference_runs.setdefault("twisted", []).append(ref)
                        _log(f"[twisted] ({wl.key}) C reference client: "
                             f"{report.describe(ref.result, ref.error)}")
                finally:
                    server.stop()
            _log(f"[twisted] {shape_name(wl.shape)}: "
                 f"{report.describe(done[wl.shape].result, done[wl.shape].error)}")
        out.twisted_runs.setdefault(wl.key, []).append(done[wl.shape])


def run_suite(opts: SuiteOptions, command: str) -> SuiteResult:
    """Run the selected workloads on both systems (and the ceilings); start-to-stop."""
    workloads = [w for w in WORKLOADS if w.key in opts.workloads]
    out = SuiteResult(options=opts, machine=machine_info(), command=command,
                      started=datetime.datetime.now(datetime.UTC).strftime(
                          "%Y-%m-%d %H:%M UTC"))
    for wl in workloads:
        out.runs[wl.key] = {system: [] for system in opts.systems}
    with tempfile.TemporaryDirectory(prefix="skerry-bench-") as tmp:
        workdir = Path(tmp)
        for rep in range(opts.repeat):
            if opts.repeat > 1:
                _log(f"--- repetition {rep + 1} of {opts.repeat}")
            rep_dir = workdir / f"run{rep + 1}"
            rep_dir.mkdir()
            for group in _groups(workloads):
                for system in opts.systems:
                    _run_group(system, group, opts, rep_dir, out)
            if opts.twisted:
                _run_twisted(workloads, opts, rep_dir, out)
            if opts.ceiling:
                _run_ceilings(workloads, opts, workdir, out)
    for key, by_system in out.runs.items():
        out.measurements[key] = {system: median_measurement(runs)
                                 for system, runs in by_system.items() if runs}
    for name, by_proto in out.ceiling_runs.items():
        out.ceilings[name] = {proto: median_measurement(runs)
                              for proto, runs in by_proto.items() if runs}
    for name, runs in out.reference_runs.items():
        out.reference[name] = median_measurement(runs)
    for key, runs in out.twisted_runs.items():
        out.twisted[key] = median_measurement(runs)
    load1, load5, _ = os.getloadavg()
    out.loadavg_after = f"{load1:.2f} (1 min), {load5:.2f} (5 min)"
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench/run_all",
        description="Benchmark Skerry against Redis Streams on this machine and record the "
                    "results in docs/performance.md (between the bench markers).")
    p.add_argument("--quick", action="store_true", help="about 2 s per load instead of 6 s")
    p.add_argument("--duration", type=float, help="measured seconds per load")
    p.add_argument("--warmup", type=float, help="unmeasured seconds before each load")
    p.add_argument("--repeat", type=int, default=1,
                   help="run everything N times (fresh servers each time) and report the "
                        "median run with the range")
    p.add_argument("--value-size", type=int, default=100, help="bytes per message value")
    p.add_argument("--fill", type=int, help="messages written before the consume workload")
    p.add_argument("--max-requests", type=int, default=100_000_000,
                   help="count bound of every load")
    p.add_argument("--only", default=",".join(w.key for w in WORKLOADS),
                   help="comma-separated workloads to run (a-e)")
    p.add_argument("--systems", default="skerry,redis", help="skerry,redis or one of them")
    p.add_argument("--no-ceiling", action="store_true",
                   help="skip measuring the load generator against the canned responder")
    p.add_argument("--no-twisted", action="store_true",
                   help="skip the Twisted ceiling (a do-nothing Twisted line responder with "
                        "each workload's load)")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the C reference client on the request/response load")
    p.add_argument("--load-processes", type=int, default=2,
                   help="load generator processes for loads with several connections "
                        "(connections are split between them; default 2)")
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    p.add_argument("--pin", action="store_true",
                   help="pin the load generator to CPU 0 and the servers to CPU 1")
    p.add_argument("--docs", type=Path, default=report.DEFAULT_DOC,
                   help="Markdown file whose bench section is rewritten")
    p.add_argument("--no-docs", action="store_true", help="print only; leave docs/ alone")
    p.add_argument("--json", type=Path, help="also write the raw results here")
    p.add_argument("--reactor", choices=("lean", "twisted"),
                   help="Skerry's reactor setting (default: the broker's default, lean)")
    return p


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds the finally blocks that stop the servers


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    keys = tuple(k.strip() for k in args.only.split(",") if k.strip())
    unknown = set(keys) - {w.key for w in WORKLOADS}
    systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
    if unknown or not keys or not set(systems) <= {"skerry", "redis"} or not systems:
        print("bench/run_all: --only takes a-e, --systems takes skerry and/or redis",
              file=sys.stderr)
        return 2
    overrides: dict[str, Any] = {
        "value_size": args.value_size, "max_requests": args.max_requests, "workloads": keys,
        "repeat": max(args.repeat, 1),
        "systems": systems, "ceiling": not args.no_ceiling, "twisted": not args.no_twisted,
        "reference": not args.no_reference,
        "load_processes": args.load_processes, "loop": args.loop, "pin": args.pin,
        "reactor": args.reactor}
    for name, value in (("duration_s", args.duration), ("warmup_s", args.warmup),
                        ("fill", args.fill)):
        if value is not None:
            overrides[name] = value
    opts = SuiteOptions.quick(**overrides) if args.quick else SuiteOptions(**overrides)
    command = os.environ.get("BENCH_COMMAND") or shlex.join(
        ["python", "-m", "bench.suite", *(sys.argv[1:] if argv is None else argv)])
    try:
        result = run_suite(opts, command)
    except KeyboardInterrupt:
        print("bench/run_all: interrupted; every server it started is stopped", file=sys.stderr)
        return 130
    print(report.render_terminal(result))
    if args.json:
        args.json.write_text(json.dumps(result.to_dict(), indent=2))
    if not args.no_docs:
        charts = report.draw_charts(result, args.docs.parent)
        report.update_doc(args.docs, report.render_section(result, args.docs.parent, charts))
        print(f"wrote the bench section of {args.docs}"
              + (f" and {', '.join(str(c) for c in charts)}" if charts else ""))
    failures = result.failures()
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
