"""The long reliability runs and their scorecard (docs/reliability.md).

Runs, each bounded: the crash matrix against real broker processes (SIGKILL and
SIGSTOP/SIGCONT x acks 0/1/all x fsync always/interval/never, plus retention), power-cut
trials (store, broker core in-process, offsets.json), a mutation fuzz loop over every parser
(>= 1,000,000 inputs each), and hostile-client load (5,000 idle + 50 active connections;
10 clients that never read). Usage:

    .venv/bin/python -m bench.reliability [--crash N] [--powercut N] [--fuzz N] [--only PART]

Must not import: the broker's internals beyond what the test scenarios use.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.reliability.crash_scenarios import crash_trial  # noqa: E402
from tests.reliability.fuzz_targets import TARGETS, mutate  # noqa: E402
from tests.reliability.powercut_scenarios import broker_trial, json_trial, store_trial  # noqa: E402
from tests.support import BrokerProcess  # noqa: E402

PARTS = ("crash", "powercut", "fuzz", "hostile")


def _results_path(part: str) -> Path:
    """One file per part, so parts can run in parallel and be rerun alone."""
    return ROOT / "bench" / f"reliability-{part}.json"


def run_crash(trials: int) -> list[dict]:
    combos = [(fsync, acks, how) for fsync in ("always", "interval", "never")
              for acks in ("0", "1", "all") for how in ("kill", "stop")]
    rows: dict[tuple, dict] = {}
    for i in range(trials):
        fsync, acks, how = combos[i % len(combos)]
        retention = 8192 if i % 10 == 9 else None
        with tempfile.TemporaryDirectory() as tmp:
            report, recover = crash_trial(Path(tmp), i, fsync=fsync, acks=acks, how=how,
                                          run_s=0.4, retention_bytes=retention)
        key = (f"crash {how} fsync={fsync} acks={acks}",)
        row = rows.setdefault(key, {"scenario": key[0], "trials": 0, "acked": 0, "lost": 0,
                                    "dup": 0, "reordered": 0, "corrupt": 0, "crashes": 0,
                                    "recover_s": 0.0})
        row["trials"] += 1
        row["acked"] += report.acknowledged
        row["lost"] += len(report.lost)
        row["dup"] += len(report.duplicated)
        row["reordered"] += len(report.reordered)
        row["corrupt"] += len(report.corrupted) + len(report.above_hw)
        row["recover_s"] = max(row["recover_s"], recover)
        print(f"crash {i} {key[0]} {report.summary()} recover={recover:.2f}s", flush=True)
    return list(rows.values())


def run_powercut(trials: int) -> list[dict]:
    out = []
    for name, trial in (("power cut: store (3 cuts/trial)", store_trial),
                        ("power cut: broker core, acks=1", lambda p, s: broker_trial(p, s, "1")),
                        ("power cut: broker core, acks=all",
                         lambda p, s: broker_trial(p, s, "all"))):
        row = {"scenario": name, "trials": 0, "acked": 0, "lost": 0, "dup": 0,
               "reordered": 0, "corrupt": 0, "crashes": 0}
        for seed in range(trials):
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    report = trial(Path(tmp), seed)
                except Exception as exc:  # noqa: BLE001 - counted as a crash
                    row["crashes"] += 1
                    print(f"{name} seed {seed}: {exc!r}", flush=True)
                    continue
            row["trials"] += 1
            row["acked"] += report.acknowledged
            row["lost"] += len(report.lost)
            row["dup"] += len(report.duplicated)
            row["reordered"] += len(report.reordered)
            row["corrupt"] += len(report.corrupted)
        print(row, flush=True)
        out.append(row)
    row = {"scenario": "power cut: offsets.json rewrite", "trials": 0, "acked": 0, "lost": 0,
           "dup": 0, "reordered": 0, "corrupt": 0, "crashes": 0}
    for seed in range(trials):
        with tempfile.TemporaryDirectory() as tmp:
            ok, _ = json_trial(Path(tmp), seed)
        row["trials"] += 1
        row["corrupt"] += 0 if ok else 1
    out.append(row)
    return out


def run_fuzz(count: int) -> list[dict]:
    out = []
    for name, target in TARGETS.items():
        rng = random.Random(name)
        crashes = 0
        worst = 0.0
        started = time.perf_counter()
        for _ in range(count):
            data = mutate(rng, rng.choice(target.seeds)) if rng.random() < 0.8 \
                else rng.randbytes(rng.randint(0, 200))
            t0 = time.perf_counter()
            try:
                target.run(data)
            except target.allowed:
                pass
            except Exception as exc:  # noqa: BLE001 - that is the finding
                crashes += 1
                if crashes < 5:
                    print(f"fuzz {name}: {type(exc).__name__}: {exc} on {data[:80]!r}")
            worst = max(worst, time.perf_counter() - t0)
        row = {"scenario": f"fuzz {name}", "inputs": count, "crashes": crashes,
               "slowest_ms": round(worst * 1000, 2),
               "seconds": round(time.perf_counter() - started, 1)}
        print(row, flush=True)
        out.append(row)
    return out


def _rss_mib(broker: BrokerProcess) -> float:
    return broker.rss_bytes() / 2**20


def run_hostile() -> list[dict]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    out = []
    with tempfile.TemporaryDirectory() as tmp, \
            BrokerProcess(Path(tmp), {"storage": {"fsync": "never"},
                                      "topics": {"t": {"partitions": 3}}}) as broker:
        client = broker.client()

        def p99(n: int = 1000) -> float:
            samples = []
            for i in range(n):
                t0 = time.perf_counter()
                client.request(f"V1|{i}|PRODUCE|t k:v{i}")
                samples.append(time.perf_counter() - t0)
            return sorted(samples)[int(n * 0.99)] * 1000

        base = p99()
        rss0 = _rss_mib(broker)
        idle = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(5000)]
        stop = threading.Event()

        def active(k: int) -> None:
            c = broker.client()
            i = 0
            while not stop.is_set():
                i += 1
                c.request(f"V1|{i}|PRODUCE|t a{k}:v{i}")
            c.close()

        workers = [threading.Thread(target=active, args=(k,), daemon=True) for k in range(50)]
        for w in workers:
            w.start()
        time.sleep(3)
        loaded = p99()
        rss1 = _rss_mib(broker)
        stop.set()
        for w in workers:
            w.join(10)
        for s in idle:
            s.close()
        out.append({"scenario": "5,000 idle + 50 active connections", "trials": 1,
                    "memory_growth_mib": round(rss1 - rss0, 1),
                    "p99_ms_baseline": round(base, 3), "p99_ms_loaded": round(loaded, 3)})
        rss0 = _rss_mib(broker)
        readers = []
        for _ in range(10):
            s = socket.create_connection(("127.0.0.1", broker.port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.setblocking(False)
            readers.append(s)
        request = b"".join(b"V1|%d|CONSUME|t 0 0 max=1000\n" % i for i in range(200))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for s in readers:
                try:
                    s.send(request)
                except (BlockingIOError, OSError):
                    pass
            time.sleep(0.05)
        rss1 = _rss_mib(broker)
        after = p99(300)
        for s in readers:
            s.close()
        out.append({"scenario": "10 clients that never read (10 s of pipelined CONSUME)",
                    "trials": 1, "memory_growth_mib": round(rss1 - rss0, 1),
                    "p99_ms_baseline": round(base, 3), "p99_ms_loaded": round(after, 3)})
        client.close()
    print(out, flush=True)
    return out


def write_markdown(results: dict) -> str:
    lines = ["# Reliability scorecard", "",
             "Generated by `python -m bench.reliability` (the long runs); the fast versions "
             "of every suite run in CI from `tests/reliability/`. See the notes below the "
             "tables for what each scenario does and what it cannot show.", ""]
    fault_rows = results.get("crash", []) + results.get("powercut", [])
    if fault_rows:
        lines += ["## Crash matrix and power cuts", "",
                  "| scenario | trials | acknowledged | lost | duplicated | reordered | "
                  "corrupt / above hw | crashes | worst restart (s) |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in fault_rows:
            lines.append(f"| {r['scenario']} | {r['trials']} | {r['acked']} | {r['lost']} | "
                         f"{r['dup']} | {r['reordered']} | {r['corrupt']} | {r['crashes']} | "
                         f"{r.get('recover_s', 0):.2f} |")
        crash_trials = sum(r["trials"] for r in results.get("crash", []))
        always = sum(r["lost"] for r in results.get("crash", []) if "always" in r["scenario"])
        lines += ["", f"Crash matrix: {crash_trials} trials, {always} acknowledged messages "
                  "lost under fsync=always.", ""]
    if results.get("fuzz"):
        lines += ["## Fuzzing", "", "| parser | inputs | crashes | slowest input (ms) | "
                  "seconds |", "| --- | ---: | ---: | ---: | ---: |"]
        for r in results["fuzz"]:
            lines.append(f"| {r['scenario']} | {r['inputs']:,} | {r['crashes']} | "
                         f"{r['slowest_ms']} | {r['seconds']} |")
        lines.append("")
    if results.get("hostile"):
        lines += ["## Hostile clients", "", "| scenario | broker memory growth (MiB) | "
                  "p99 of a good client, baseline (ms) | p99 under load (ms) |",
                  "| --- | ---: | ---: | ---: |"]
        for r in results["hostile"]:
            lines.append(f"| {r['scenario']} | {r['memory_growth_mib']} | "
                         f"{r['p99_ms_baseline']} | {r['p99_ms_loaded']} |")
        lines.append("")
    lines.append(NOTES)
    return "\n".join(lines)


NOTES = """## What the scenarios do, and what they cannot show

* **Ack ledger** (`tests/reliability/ledger.py`): every fault run records each acknowledged
  `(topic, partition, offset, value)` (values are unique), then reads everything back and
  counts lost, duplicated, reordered and corrupted messages and reads above hw. A message
  sent but not acknowledged may or may not survive; if it does it must be whole and once.
* **Crash matrix** (real `skerry serve` processes, 2 pipelining clients, 4 KiB segments so
  that segments roll during the run, every tenth trial with `retention_bytes` so retention
  deletes segments during the run): SIGKILL, or SIGSTOP for 0.3 s then SIGCONT (then a
  SIGKILL to end the trial), for every fsync policy and acks level, then a restart and a
  full read. SIGKILL does not lose the page cache, so 0 loss is expected for *every* fsync
  policy, not only `always`; this matrix proves the process-crash path (recovery, torn
  writes of a batch, index rebuild), not durability against power loss. With acks=0 the
  broker still answers with the offset it assigned, and the ledger counts those answers as
  acknowledgements too.
* **Power cuts** (`tests/fakes/powercut.py`): a file layer that remembers what each fsync
  covered and which directory entries an fsync of the directory made durable; at the cut
  every file shrinks to its fsynced length (half the trials leave a torn tail of random
  bytes), unsynced new files vanish and unsynced renames are undone. Power goes at a random
  file-system call, inside appends, rolls, syncs and atomic JSON writes. Under
  `fsync=always` an OK is only sent after the fsync covering the message, so 0 loss is
  required. Under `fsync=interval` the loss is bounded by what was appended since the last
  periodic fsync: at most `fsync_interval_ms` of traffic (plus the batch in flight); under
  `never` it is whatever the OS had not written back. These two policies are not run
  through the power-cut simulator here: the simulator would simply drop everything after
  the last periodic fsync, which is the documented behaviour.
* **offsets.json** (the same atomic write groups.json uses): after a cut the file always
  parses and is the last completed version or the one being written; never empty.
* **Fuzzing**: a mutation loop (bit flips, inserts, deletes, splices, separator bytes,
  random buffers) over valid seeds of each parser; only the documented exception may
  escape (V1: none escape `Codec.parse_command` but `CommandError`; records: `ValueError`;
  JSON loaders: `ValueError`; Iggy: `IggyError`). "slowest input" bounds hangs. CI runs
  hypothesis on the same targets plus a split-buffer check of the V1 transport (the same
  bytes split at random points across reads give the same replies).
* **Hostile clients**: 5,000 idle connections plus 50 clients producing in a loop, then 10
  clients that pipeline CONSUMEs with a 4 KiB receive buffer and never read (the broker stops
  reading from a client once `limits.max_pending_output_bytes` of replies are unsent, so
  each costs at most about that much). Memory is the broker's RSS growth. Idle connections
  are closed after `limits.idle_timeout_ms` (CI test with a fake clock), over-long lines
  close the connection, and slowloris clients keep their connection only while they send.
* **Wall clock**: group session timers, idle timers and ack timeouts run on the reactor's
  monotonic clock (`broker/server.py` sets `reactor.seconds = time.monotonic`), so a wall
  clock jump does not evict members. Record timestamps come from the wall clock: when it
  goes back, new records carry smaller timestamps than older ones; time-based retention
  then keeps a segment until its *newest* record is old enough (so it keeps data longer,
  never deletes early), and `OFFSETS ts=` returns the first offset, in offset order, whose
  timestamp is at least `ts`, which across a backward jump may be a record written before
  the jump. A *forward* jump makes retention see every segment as older by the size of the
  jump, so `retention_ms` can delete segments early by that much. (These wall-clock points
  come from reading `data/log.py`; no long run exercises them yet.)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--crash", type=int, default=216)
    parser.add_argument("--powercut", type=int, default=500)
    parser.add_argument("--fuzz", type=int, default=1_000_000)
    parser.add_argument("--only", choices=("crash", "powercut", "fuzz", "hostile"))
    parser.add_argument("--markdown-only", action="store_true",
                        help="rewrite docs/reliability.md from the saved results")
    args = parser.parse_args()
    if not args.markdown_only:
        parts = [args.only] if args.only else list(PARTS)
        for part in parts:
            results: dict = {}
            if part == "crash":
                results["crash"] = run_crash(args.crash)
            elif part == "powercut":
                results["powercut"] = run_powercut(args.powercut)
            elif part == "fuzz":
                results["fuzz"] = run_fuzz(args.fuzz)
            else:
                results["hostile"] = run_hostile()
            _results_path(part).write_text(json.dumps(results[part], indent=1))
    results = {part: json.loads(_results_path(part).read_text()) for part in PARTS
               if _results_path(part).exists()}
    (ROOT / "docs" / "reliability.md").write_text(write_markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
