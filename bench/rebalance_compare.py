"""Rebalance cost side by side: classic eager, classic cooperative-sticky and KIP-848
(``group.protocol=consumer``), all with confluent-kafka members, on one broker, under the
same steady load: three members on a six-partition topic, a fourth joins, then one of the
first three is killed with SIGKILL.

For each event (the join, the death) it measures, from the members' own ``on_assign`` /
``on_revoke`` callbacks and consumed messages (timestamped, merged):

* **settle**: from the event (for the join: the first assignment callback of any member
  after the newcomer started, where the handover begins; the kill) until every partition is
  owned again and the group has its new shape (the newcomer owns some; the dead member
  none);
* **longest stop of a survivor**: the longest a message waited (consumed minus the
  broker's append timestamp) on a partition a member kept through the event, within the
  event's window: a member that stops for X leaves the messages appended meanwhile waiting
  about X, while a stall of the whole machine, which appends nothing either, does not
  count. The same measure over a steady second before the join is the load's own.

And for the whole run: that no partition was ever owned by two members at once, that
every produced message was consumed, and the duplicates (each one a message the killed
member consumed and did not commit, or not).

    .venv/bin/python -m bench.rebalance_compare --runs 3
    # and Java kafka-clients members too (mvn -q compile dependency:build-classpath
    # -Dmdep.outputFile=target/classpath.txt in tests/kafka/java first):
    .venv/bin/python -m bench.rebalance_compare --runs 3 \
        --modes classic-eager,classic-cooperative,kip848,kip848-java \
        --java-classpath "tests/kafka/java/target/classes:$(cat tests/kafka/java/target/classpath.txt)"

Members are ``tests/kafka/group_member.py`` child processes (the test
``tests/kafka/test_kip848_clients.py`` runs the same scenario once, KIP-848 only). The
death is seen after the session timeout (6 s for every mode: ``session.timeout.ms`` for
classic members, ``groups.consumer_session_timeout_ms`` for KIP-848), so "settle" after a
death includes it; the stop of survivors is what the protocols differ in.

Must not import: Twisted or the broker's runtime.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.kafka.harness import kafka_port_of
from tests.support import ROOT, BrokerProcess, V1Client

__all__ = ["MODES", "Outcome", "run_scenario", "analyse"]

PARTITIONS = 6
SESSION_MS = 6000
HEARTBEAT_MS = 500
MODES: dict[str, tuple[str, str]] = {
    "classic-eager": ("classic", "range"),
    "classic-cooperative": ("classic", "cooperative-sticky"),
    "kip848": ("consumer", ""),
}
"""Mode -> (group.protocol, partition.assignment.strategy) of confluent-kafka members."""
JAVA_MODES: dict[str, str] = {"kip848-java": "consumer"}
"""Modes of Java kafka-clients members (tests/kafka/java, GroupMemberDriver): the
group.protocol; they need ``java_classpath``."""


@dataclass
class Outcome:
    """What one run saw."""

    mode: str
    produced: int = 0
    consumed: int = 0
    missing: int = 0
    duplicates: int = 0
    unexplained_duplicates: int = 0
    """Duplicates that are not the killed member's uncommitted work."""
    overlaps: list[str] = field(default_factory=list)
    join_settle_s: float = float("nan")
    join_stop_s: float = float("nan")
    death_settle_s: float = float("nan")
    death_stop_s: float = float("nan")
    steady_stop_s: float = float("nan")
    """The same measure over a steady second before the join: the load's own gaps."""

    def line(self) -> str:
        return (f"{self.mode}: produced {self.produced}, consumed {self.consumed} distinct, "
                f"missing {self.missing}, duplicates {self.duplicates} "
                f"(unexplained {self.unexplained_duplicates}), overlaps {len(self.overlaps)}; "
                f"join: settle {self.join_settle_s:.3f} s, survivors' longest stop "
                f"{self.join_stop_s * 1000:.0f} ms; death: settle {self.death_settle_s:.3f} s, "
                f"survivors' longest stop {self.death_stop_s * 1000:.0f} ms; steady: "
                f"{self.steady_stop_s * 1000:.0f} ms")


_CACHE: dict[Path, tuple[int, list[dict[str, Any]]]] = {}


def _events(log: Path) -> list[dict[str, Any]]:
    """The complete lines of a member's log, read incrementally (the waits poll often)."""
    if not log.exists():
        return []
    offset, events = _CACHE.get(log, (0, []))
    with open(log, "rb") as f:
        f.seek(offset)
        chunk = f.read()
    end = chunk.rfind(b"\n") + 1
    for line in chunk[:end].splitlines():
        if line.endswith(b"}"):
            events.append(json.loads(line))
    _CACHE[log] = (offset + end, events)
    return events


def _owned(logs: dict[str, Path], until: float, dead: dict[str, float]
           ) -> dict[str, set[int]]:
    """Each member's partitions as of ``until`` from its callbacks (a dead member owns
    nothing after its kill)."""
    owned: dict[str, set[int]] = {}
    for name, log in logs.items():
        held: set[int] = set()
        for e in _events(log):
            if e.get("t", 0) > until:
                break
            if e["e"] == "assign":
                held |= set(e["parts"])
            elif e["e"] == "revoke":
                held -= set(e["parts"])
        if name in dead and dead[name] <= until:
            held = set()
        owned[name] = held
    return owned


def _member(port: int, topic: str, group: str, log: Path, name: str, mode: str,
            stop: Path, java_classpath: str | None = None) -> subprocess.Popen[bytes]:
    if mode in JAVA_MODES:
        if java_classpath is None:
            raise ValueError(f"{mode} needs java_classpath")
        return subprocess.Popen(
            ["java", "-cp", java_classpath, "skerry.GroupMemberDriver", f"127.0.0.1:{port}",
             topic, group, str(log), name, str(stop), JAVA_MODES[mode]],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    protocol, assignor = MODES[mode]
    args = [sys.executable, "-m", "tests.kafka.group_member", "--client", "ck",
            "--bootstrap", f"127.0.0.1:{port}", "--topic", topic, "--group", group,
            "--log", str(log), "--name", name, "--session-ms", str(SESSION_MS),
            "--heartbeat-ms", str(HEARTBEAT_MS), "--max-seconds", "120", "--stop", str(stop),
            "--batch-timeout", "0.01",
            "--protocol", protocol]
    if assignor:
        args += ["--assignor", assignor]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(args, cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _wait(predicate: Any, timeout: float, what: str) -> float:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return time.time()
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


class _Producer:
    """A child process producing ``rate`` messages a second round-robin over the
    partitions (V1 PRODUCE; a process of its own, so that the waits here never slow it)."""

    def __init__(self, port: int, topic: str, rate: int, workdir: Path) -> None:
        self.stop_file = workdir / "stop-producer"
        self.count_file = workdir / "produced"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.rebalance_compare", "--produce",
             f"{port},{topic},{rate},{self.stop_file},{self.count_file}"],
            cwd=str(ROOT), env=env)

    def stop(self) -> int:
        self.stop_file.touch()
        self.proc.wait(30)
        return int(self.count_file.read_text())


def _produce(spec: str) -> int:
    port, topic, rate, stop_file, count_file = spec.split(",")
    v1 = V1Client(int(port))
    start, count = time.time(), 0
    while not os.path.exists(stop_file):
        due = int((time.time() - start) * int(rate))
        while count < due:
            reply = v1.request(f"V1|1|PRODUCE|{topic} k{count}:m{count} "
                               f"partition={count % PARTITIONS}")
            if "|OK|" not in reply:
                raise RuntimeError(reply)
            count += 1
        time.sleep(0.002)
    Path(count_file).write_text(str(count))
    return 0


def run_scenario(workdir: Path, mode: str, *, rate: int = 300, steady_s: float = 3.0,
                 java_classpath: str | None = None) -> Outcome:
    """One run of ``mode`` in ``workdir`` (a broker of its own)."""
    config = {"kafka_port": 0, "storage": {"fsync": "never"},
              "groups": {"consumer_session_timeout_ms": SESSION_MS,
                         "consumer_heartbeat_interval_ms": HEARTBEAT_MS}}
    topic, group = "rebalance", f"g-{mode}"
    stop = workdir / "stop"
    logs = {f"m{i}": workdir / f"m{i}.jsonl" for i in range(4)}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    dead: dict[str, float] = {}
    with BrokerProcess(workdir / "broker", config) as broker:
        port = kafka_port_of(broker.log_text())
        v1 = V1Client(broker.port)
        reply = v1.request(f"V1|0|ADMIN_CREATE_TOPIC|{topic} {PARTITIONS} 1")
        assert "|OK|" in reply, reply
        producer = _Producer(broker.port, topic, rate, workdir)
        produced = -1
        try:
            for name in ("m0", "m1", "m2"):
                procs[name] = _member(port, topic, group, logs[name], name, mode, stop,
                                      java_classpath)

            def shape(members: set[str]) -> bool:
                owned = _owned(logs, time.time(), dead)
                union = set().union(*owned.values())
                return union == set(range(PARTITIONS)) and all(
                    owned[m] for m in members) and not any(
                    owned[m] for m in owned if m not in members)

            _wait(lambda: shape({"m0", "m1", "m2"}), 60, "three members to share the topic")
            _wait(lambda: all(any(e["e"] == "msg" for e in _events(logs[m]))
                              for m in ("m0", "m1", "m2")), 60, "messages to flow")
            time.sleep(steady_s)
            procs["m3"] = _member(port, topic, group, logs["m3"], "m3", mode, stop,
                                  java_classpath)
            _wait(lambda: any(e["e"] == "start" for e in _events(logs["m3"])), 60,
                  "the fourth member to start")
            joined = next(e["t"] for e in _events(logs["m3"]) if e["e"] == "start")
            join_done = _wait(lambda: shape({"m0", "m1", "m2", "m3"}), 60,
                              "the fourth member to get partitions")
            # the handover starts with the first callback after the newcomer started
            # (a JVM may take seconds from its first line to its first heartbeat)
            joined = min(e["t"] for log in logs.values() for e in _events(log)
                         if e["e"] in ("assign", "revoke") and e["t"] >= joined)
            time.sleep(steady_s)
            owned = _owned(logs, time.time(), dead)
            victim = next(m for m in ("m0", "m1", "m2") if owned[m])
            procs[victim].send_signal(signal.SIGKILL)
            procs[victim].wait()
            killed = dead[victim] = time.time()
            survivors = {"m0", "m1", "m2", "m3"} - {victim}
            death_done = _wait(lambda: shape(survivors), 60,
                               "the survivors to take the dead member's partitions")
            time.sleep(steady_s)
        finally:
            produced = producer.stop()

        def consumed() -> set[str]:
            return {e["v"] for log in logs.values() for e in _events(log) if e["e"] == "msg"}

        try:
            _wait(lambda: len(consumed()) >= produced, 60, "every message to be consumed")
        except TimeoutError:
            pass
        stop.touch()
        for proc in procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    out = analyse(mode, logs, produced, dead, victim, (joined, join_done),
                  (killed, death_done))
    return out


def analyse(mode: str, logs: dict[str, Path], produced: int, dead: dict[str, float],
            victim: str, join: tuple[float, float], death: tuple[float, float]) -> Outcome:
    """The outcome of a run from the members' logs (see the module doc)."""
    out = Outcome(mode, produced=produced)
    by_member = {name: _events(log) for name, log in logs.items()}
    # ownership: merge the callbacks in time order; the victim releases at its kill
    timeline: list[tuple[float, int, str, str, list[int]]] = []
    for name, events in by_member.items():
        for e in events:
            if e["e"] in ("assign", "revoke"):
                # a revoke sorts before an assign at the same instant
                timeline.append((e["t"], 0 if e["e"] == "revoke" else 1, name, e["e"],
                                 e["parts"]))
    for name, t in dead.items():
        timeline.append((t, 0, name, "revoke", list(range(PARTITIONS))))
    owner: dict[int, str] = {}
    for t, _, name, kind, parts in sorted(timeline):
        for p in parts:
            if kind == "revoke":
                if owner.get(p) == name:
                    del owner[p]
            elif owner.get(p, name) != name:
                out.overlaps.append(f"{t:.3f}: partition {p} assigned to {name} while "
                                    f"{owner[p]} owns it")
            else:
                owner[p] = name
    # messages, duplicates
    seen: dict[str, int] = {}
    for events in by_member.values():
        for e in events:
            if e["e"] == "msg":
                seen[e["v"]] = seen.get(e["v"], 0) + 1
    out.consumed = len(seen)
    out.missing = sum(1 for i in range(produced) if f"m{i}" not in seen)
    out.duplicates = sum(n - 1 for n in seen.values() if n > 1)
    committed: dict[int, int] = {}
    victim_msgs: set[tuple[int, int]] = set()
    for e in by_member[victim]:
        if e["e"] == "commit":
            for p, o in e["offsets"].items():
                committed[int(p)] = max(committed.get(int(p), 0), o)
        elif e["e"] == "msg":
            victim_msgs.add((e["p"], e["o"]))
    uncommitted = {(p, o) for p, o in victim_msgs if o >= committed.get(p, 0)}
    for events in by_member.values():
        for e in events:
            if e["e"] == "msg" and seen[e["v"]] > 1 and (e["p"], e["o"]) not in uncommitted:
                out.unexplained_duplicates += 1
    out.unexplained_duplicates //= 2  # each such message is counted at both consumers
    out.join_settle_s = join[1] - join[0]
    out.death_settle_s = death[1] - death[0]
    out.join_stop_s = _longest_stop(logs, by_member, join, dead, exclude={"m3"})
    out.death_stop_s = _longest_stop(logs, by_member, death, dead, exclude={victim})
    out.steady_stop_s = _longest_stop(logs, by_member, (join[0] - 2.0, join[0] - 2.0), dead,
                                      exclude={"m3"}, before_s=0.0, after_s=1.5)
    return out


def _longest_stop(logs: dict[str, Path], by_member: dict[str, list[dict[str, Any]]],
                  window: tuple[float, float], dead: dict[str, float],
                  exclude: set[str], before_s: float = 0.0, after_s: float = 2.0) -> float:
    """The longest a message waited for a member that owned partitions before and after
    the event: consumed minus appended (the broker's timestamp), over the messages consumed
    from ``before_s`` before the event (default: from the event) to ``after_s`` after it settled. A member that stops
    consuming for X leaves the messages appended meanwhile waiting about X; a stall of the
    whole machine (nothing appended either) does not count."""
    start, end = window[0] - before_s, window[1] + after_s
    before = _owned(logs, window[0] - 0.001, dead)
    after = _owned(logs, window[1] + 0.5, dead)
    longest = 0.0
    for name, events in by_member.items():
        if name in exclude or not before.get(name) or not after.get(name):
            continue
        kept = before[name] & after[name]
        for e in events:
            if e["e"] == "msg" and e["p"] in kept and start <= e["t"] <= end:
                longest = max(longest, e["t"] - e["ts"])
    return longest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=int, default=300, help="messages per second")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--java-classpath", default="",
                        help="kafka-clients' classpath (tests/kafka/java) for kip848-java")
    parser.add_argument("--produce", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.produce:
        return _produce(args.produce)
    results: dict[str, list[Outcome]] = {}
    for run in range(args.runs):
        for mode in args.modes.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                outcome = run_scenario(Path(tmp), mode, rate=args.rate,
                                       java_classpath=args.java_classpath or None)
            print(f"run {run + 1}: {outcome.line()}", flush=True)
            results.setdefault(mode, []).append(outcome)
    print(f"\nmedians over {args.runs} runs ({args.rate} msg/s, 6 partitions, session "
          f"timeout {SESSION_MS} ms, KIP-848 heartbeat interval {HEARTBEAT_MS} ms):")
    print("| mode | join: all owned again | join: survivors' longest stop | "
          "death: all owned again | death: survivors' longest stop |")
    print("| --- | --- | --- | --- | --- |")
    for mode, outcomes in results.items():
        def med(attr: str, outcomes: list[Outcome] = outcomes) -> float:
            return statistics.median(getattr(o, attr) for o in outcomes)
        print(f"| {mode} | {med('join_settle_s'):.2f} s | {med('join_stop_s') * 1000:.0f} ms "
              f"| {med('death_settle_s'):.2f} s | {med('death_stop_s') * 1000:.0f} ms |")
    bad = [o for os_ in results.values() for o in os_
           if o.overlaps or o.missing or o.unexplained_duplicates]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
