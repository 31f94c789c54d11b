"""The replication scenario: three real brokers on loopback, RF=3, min ISR 2, a pipelined
``acks=all`` load of random binary values, a follower killed and restarted, the leader
killed and a follower promoted, and byte-for-byte checks of every replica's log.

Run it (from the repository root)::

    .venv/bin/python -m bench.replication_scenario                  # 100,000 messages each
    .venv/bin/python -m bench.replication_scenario --messages 20000 --scenario leader-crash

Scenarios (``--scenario all`` runs them in this order, each on a fresh cluster):

- ``steady``: produce; every follower's log is byte-identical to the leader's up to ``hw``.
- ``follower-crash``: kill -9 a follower a third of the way in; producing goes on (acks=all
  requests wait, or time out, until the ISR shrinks to two after the replica lag timeout);
  the follower restarts two thirds of the way in, catches up and rejoins the ISR.
- ``leader-crash``: half-way, the followers are frozen (SIGSTOP, a network partition) while
  one window of requests reaches the leader, which appends it but cannot replicate it; the
  leader is killed with those requests unanswered and the followers thawed (SIGCONT); the
  follower with the longest log is promoted (``SET_PARTITION_ROLE leader``) and the load
  moves to it; the old leader restarts, is fenced by the newer epoch, truncates the
  unacknowledged tail and follows. Every message acknowledged with acks=all is on the new leader exactly once,
  in order, and all three logs end byte-identical.

The brokers are separate processes (``tests.support.BrokerProcess``) driven over the V1
protocol only. Logs are compared after the brokers stopped, by reading their data
directories with ``data.store`` (the exact record bytes, ``read().raw``).

Must not import: Twisted or the broker's runtime (``broker.server``, the replication
service); ``data.store`` is used only on stopped brokers' directories.
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.cli.devcluster import free_ports
from data.store import StorageConfig, Store
from tests.support import BrokerProcess

__all__ = [
    "ClusterSpec",
    "Cluster",
    "Producer",
    "ScenarioResult",
    "run_steady",
    "run_follower_crash",
    "run_leader_crash",
    "main",
]

TOPIC = "repl"
_FIELD = re.compile(r"([a-z_]+)=(\[[^\]]*\]|[^ ]*)")


def fields(payload: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _FIELD.finditer(payload)}


@dataclass
class ClusterSpec:
    """How the three brokers are configured."""

    brokers: int = 3
    replica_lag_timeout_ms: int = 1000
    ack_timeout_ms: int = 3000
    fetch_wait_ms: int = 200
    fsync: str = "always"
    segment_bytes: int = 4 * 1024 * 1024


class Cluster:
    """``spec.brokers`` broker processes forming one cluster, one topic with one partition."""

    def __init__(self, workdir: Path, spec: ClusterSpec | None = None) -> None:
        self.spec = spec or ClusterSpec()
        self.workdir = workdir
        ports = free_ports(self.spec.brokers)
        self.ports = dict(enumerate(ports))
        brokers = {i: f"127.0.0.1:{port}" for i, port in self.ports.items()}
        self.procs: dict[int, BrokerProcess] = {}
        for i, port in self.ports.items():
            config = {
                "log_level": "info",
                "auto_create_topics": False,
                "storage": {"fsync": self.spec.fsync, "segment_bytes": self.spec.segment_bytes},
                "replication": {
                    "replica_lag_timeout_ms": self.spec.replica_lag_timeout_ms,
                    "ack_timeout_ms": self.spec.ack_timeout_ms,
                    "fetch_wait_ms": self.spec.fetch_wait_ms,
                    "retry_backoff_ms": 100,
                    "request_timeout_ms": 2000,
                },
                "topics": {TOPIC: {"partitions": 1, "replication_factor": 3,
                                   "min_insync_replicas": 2}},
                "cluster": {"broker_id": i, "brokers": brokers},
            }
            self.procs[i] = BrokerProcess(workdir / f"broker{i}", config, port=port)

    # ------------------------------------------------------------------ processes

    def start(self, broker_id: int | None = None) -> None:
        """Start one broker, or all of them at once (each waits for its listen line)."""
        ids = [broker_id] if broker_id is not None else list(self.procs)
        with ThreadPoolExecutor(len(ids)) as pool:
            for future in [pool.submit(self.procs[i].start) for i in ids]:
                future.result()

    def kill9(self, broker_id: int) -> None:
        self.procs[broker_id].kill9()

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.stop()

    def close(self) -> None:
        for proc in self.procs.values():
            proc.__exit__(None, None, None)

    def alive(self, broker_id: int) -> bool:
        proc = self.procs[broker_id].proc
        return proc is not None and proc.poll() is None

    # ------------------------------------------------------------------ V1 requests

    def request(self, broker_id: int, line: str, timeout: float = 5.0) -> str:
        client = self.procs[broker_id].client(timeout=timeout)
        try:
            return client.request(f"V1|1|{line}")
        finally:
            client.close()

    def status(self, broker_id: int) -> dict[str, str]:
        reply = self.request(broker_id, f"REPLICA_STATUS|{TOPIC} 0")
        if "|OK|" not in reply:
            raise RuntimeError(f"broker {broker_id}: {reply}")
        return fields(reply.split("|OK|", 1)[1])

    def leader(self) -> int | None:
        """The broker that leads with its leadership confirmed (None: none yet)."""
        for i in self.procs:
            if not self.alive(i):
                continue
            try:
                info = self.status(i)
            except (OSError, RuntimeError):
                continue
            if info["role"] == "leader" and info["confirmed"] == "true":
                return i
        return None

    def wait(self, condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = condition()
            except (OSError, RuntimeError, KeyError):
                value = None
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(f"timed out waiting for {what}")

    def wait_for_leader(self, timeout: float = 60.0) -> int:
        return self.wait(lambda: (lambda b: b + 1 if b is not None else None)(self.leader()),
                         "a confirmed leader", timeout) - 1

    def isr(self, broker_id: int) -> list[int]:
        return [int(x) for x in self.status(broker_id)["isr"][1:-1].split()]

    def wait_caught_up(self, leader: int, timeout: float = 120.0) -> int:
        """Until every broker has the leader's log end and hw == log end everywhere."""
        def done() -> int | None:
            lead = self.status(leader)
            leo = int(lead["leo"])
            if int(lead["hw"]) != leo - 1:
                return None
            for i in self.procs:
                info = self.status(i)
                if int(info["leo"]) != leo or int(info["hw"]) != leo - 1:
                    return None
            return leo + 1

        return self.wait(done, "every replica caught up", timeout) - 1

    # ------------------------------------------------------------------ logs on disk

    def read_log(self, broker_id: int) -> tuple[bytes, list[bytes]]:
        """(exact record bytes, payloads) of a stopped broker's partition log."""
        store = Store(str(self.procs[broker_id].data_dir), StorageConfig(fsync="never"))
        try:
            plog = store.partition(TOPIC, 0)
            raws: list[bytes] = []
            payloads: list[bytes] = []
            at = plog.first_offset
            while at < plog.next_offset:
                result = plog.read(at, 100_000, 1 << 24)
                if not result.records:
                    break
                raws.append(result.raw)
                payloads.extend(r.payload for r in result.records)
                at = result.next_offset
            return b"".join(raws), payloads
        finally:
            store.close()


def make_value(rng: random.Random, seq: int) -> bytes:
    """A unique binary value: the sequence number, then random bytes that include the
    characters the line protocol cares about (``,``, ``|``, newlines, spaces, NUL)."""
    body = bytes(rng.getrandbits(8) for _ in range(rng.randint(8, 120)))
    return seq.to_bytes(8, "big") + b",|\n \x00" + body


@dataclass
class Producer:
    """Pipelined acks=all PRODUCE with ``enc=b64`` to whichever broker ``target()`` names.

    ``acked`` lists the sequence numbers acknowledged (in acknowledgement order) and their
    offsets; requests whose connection died are neither acknowledged nor retried."""

    target: Callable[[], int]
    cluster: Cluster
    window: int = 500
    seed: int = 7
    acked: list[tuple[int, int]] = field(default_factory=list)
    values: dict[int, bytes] = field(default_factory=dict)
    timeouts: int = 0
    not_leader: int = 0
    unanswered: int = 0
    sent: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._client: Any = None
        self._broker: int | None = None

    def _connect(self) -> Any:
        broker = self.target()
        if self._client is None or broker != self._broker:
            self.close()
            self._client = self.cluster.procs[broker].client(timeout=30)
            self._broker = broker
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None

    def send_window(self, count: int, before_replies: Callable[[], None] | None = None) -> None:
        """Send ``count`` requests in one write, optionally run ``before_replies`` (a kill),
        then read every reply that arrives."""
        client = self._connect()
        first = self.sent
        lines = []
        for seq in range(first, first + count):
            value = make_value(self._rng, seq)
            self.values[seq] = value
            lines.append(f"V1|{seq}|PRODUCE|{TOPIC} k:{base64.b64encode(value).decode()} "
                         "acks=all enc=b64 partition=0")
        self.sent += count
        try:
            client.send(("\n".join(lines) + "\n").encode())
        except OSError:
            self.unanswered += count
            self.close()
            return
        if before_replies is not None:
            before_replies()
        for seq in range(first, first + count):
            try:
                reply = client.readline().decode()
            except (OSError, ConnectionError):
                self.unanswered += first + count - seq
                self.close()
                return
            if "|OK|" in reply:
                self.acked.append((seq, int(fields(reply)["offset"])))
            elif "REPLICATION_TIMEOUT" in reply:
                self.timeouts += 1
            elif "NOT_LEADER" in reply:
                self.not_leader += 1
            else:
                raise RuntimeError(f"unexpected reply {reply}")


@dataclass
class ScenarioResult:
    name: str
    messages: int
    acked: int
    timeouts: int
    not_leader: int
    unanswered: int
    seconds: float
    log_end: int
    notes: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    """Machine-readable findings (the tests check them)."""

    def line(self) -> str:
        rate = self.acked / self.seconds if self.seconds else 0.0
        return (f"{self.name:15} sent={self.messages:7d} acked={self.acked:7d} "
                f"timeouts={self.timeouts:5d} not_leader={self.not_leader:5d} "
                f"unanswered={self.unanswered:5d} log_end={self.log_end:7d} {self.seconds:6.1f}s "
                f"({rate:,.0f} acked/s)  " + "; ".join(self.notes))


def _produce(producer: Producer, total: int, hooks: dict[int, Callable[[], None]],
             kill_at: dict[int, Callable[[], None]] | None = None) -> None:
    """Send ``total`` messages window by window; ``hooks[w]`` runs before window ``w`` and
    ``kill_at[w]`` right after window ``w`` was written, before its replies are read."""
    windows = (total + producer.window - 1) // producer.window
    for w in range(windows):
        if w in hooks:
            hooks[w]()
        count = min(producer.window, total - producer.sent)
        producer.send_window(count, (kill_at or {}).get(w))


def _check_identical(cluster: Cluster, leader: int) -> list[str]:
    """Stop the (caught-up) cluster and compare every follower's log bytes with the
    leader's: every replica holds the leader's log up to ``hw``, which is its end."""
    cluster.stop()
    lead_raw, _ = cluster.read_log(leader)
    notes = []
    for i in cluster.procs:
        if i == leader:
            continue
        raw, _ = cluster.read_log(i)
        if raw != lead_raw:
            raise AssertionError(f"broker {i}'s log differs from the leader's (broker {leader})"
                                 f": {len(raw)} vs {len(lead_raw)} bytes")
        notes.append(f"broker {i} identical ({len(raw)} bytes)")
    return notes


def _check_acked(producer: Producer, payloads: list[bytes]) -> None:
    """Every acknowledged message is in ``payloads`` exactly once, in acknowledgement order,
    at the offset its acknowledgement named."""
    position: dict[int, list[int]] = {}
    for offset, payload in enumerate(payloads):
        position.setdefault(int.from_bytes(payload[:8], "big"), []).append(offset)
    last = -1
    for seq, offset in producer.acked:
        found = position.get(seq, [])
        if len(found) != 1:
            raise AssertionError(f"acknowledged message {seq} found {len(found)} times")
        if payloads[found[0]] != producer.values[seq] or found[0] != offset:
            raise AssertionError(f"acknowledged message {seq} differs or moved")
        if found[0] <= last:
            raise AssertionError(f"acknowledged message {seq} out of order")
        last = found[0]


def run_steady(workdir: Path, messages: int, spec: ClusterSpec | None = None,
               window: int = 500) -> ScenarioResult:
    """Acceptance 2: produce; every follower's log equals the leader's up to hw."""
    cluster = Cluster(workdir, spec)
    try:
        cluster.start()
        leader = cluster.wait_for_leader()
        producer = Producer(lambda: leader, cluster, window=window)
        started = time.monotonic()
        _produce(producer, messages, {})
        seconds = time.monotonic() - started
        producer.close()
        log_end = cluster.wait_caught_up(leader)
        notes = _check_identical(cluster, leader)
        _check_acked(producer, cluster.read_log(leader)[1])
        if len(producer.acked) != messages:
            raise AssertionError(f"only {len(producer.acked)} of {messages} acknowledged")
        return ScenarioResult("steady", messages, len(producer.acked), producer.timeouts,
                              producer.not_leader, producer.unanswered, seconds, log_end, notes)
    finally:
        cluster.close()


def run_follower_crash(workdir: Path, messages: int, spec: ClusterSpec | None = None,
                       window: int = 500) -> ScenarioResult:
    """Acceptance 3: kill -9 a follower during the load; it restarts, catches up and
    rejoins the ISR; producing never stops."""
    cluster = Cluster(workdir, spec)
    try:
        cluster.start()
        leader = cluster.wait_for_leader()
        victim = max(i for i in cluster.procs if i != leader)
        producer = Producer(lambda: leader, cluster, window=window)
        windows = (messages + window - 1) // window
        notes: list[str] = []
        isr_seen: dict[str, list[int]] = {}

        def kill() -> None:
            cluster.kill9(victim)
            notes.append(f"killed follower {victim} at message {producer.sent}")

        def restart() -> None:
            isr_seen["while down"] = cluster.isr(leader)
            cluster.start(victim)
            notes.append(f"restarted it at message {producer.sent}")

        started = time.monotonic()
        _produce(producer, messages, {max(1, windows // 3): kill,
                                      max(2, 2 * windows // 3): restart})
        seconds = time.monotonic() - started
        producer.close()
        cluster.wait(lambda: len(cluster.isr(leader)) == 3, "the follower to rejoin the ISR")
        notes.append(f"ISR while it was down {isr_seen.get('while down')}, "
                     f"then {cluster.isr(leader)}")
        if victim in isr_seen.get("while down", [victim]):
            raise AssertionError("the killed follower never left the ISR")
        log_end = cluster.wait_caught_up(leader)
        notes += _check_identical(cluster, leader)
        _check_acked(producer, cluster.read_log(leader)[1])
        return ScenarioResult("follower-crash", messages, len(producer.acked),
                              producer.timeouts, producer.not_leader, producer.unanswered, seconds,
                              log_end, notes)
    finally:
        cluster.close()


def run_leader_crash(workdir: Path, messages: int, spec: ClusterSpec | None = None,
                     window: int = 500) -> ScenarioResult:
    """Acceptance 4: kill -9 the leader with requests in flight, promote the follower with
    the longest log, restart the old leader as a follower."""
    cluster = Cluster(workdir, spec)
    try:
        cluster.start()
        old = cluster.wait_for_leader()
        current = {"leader": old}
        producer = Producer(lambda: current["leader"], cluster, window=window)
        windows = (messages + window - 1) // window
        notes: list[str] = []

        followers = [i for i in cluster.procs if i != old]
        facts: dict[str, Any] = {}

        def freeze() -> None:
            for i in followers:
                os.kill(cluster.procs[i].proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]
            # The followers' pending long polls take one more answer into their socket
            # buffers: spend it on one acks=1 message, so the window after it stays on the
            # leader alone.
            bait = base64.b64encode(make_value(random.Random(0), 10**9)).decode()
            reply = cluster.request(old, f"PRODUCE|{TOPIC} k:{bait} acks=1 enc=b64 partition=0")
            if "|OK|" not in reply:
                raise RuntimeError(reply)

        def kill() -> None:
            target = producer.sent + 1  # the acks=1 bait is in the log too
            cluster.wait(lambda: int(cluster.status(old)["leo"]) >= target,
                         "the leader to append the window", timeout=10)
            cluster.kill9(old)
            for i in followers:
                os.kill(cluster.procs[i].proc.pid, signal.SIGCONT)  # type: ignore[union-attr]
            facts["old_log_end"] = target
            notes.append(f"killed leader {old} with {producer.window} unreplicated requests "
                         f"in flight (log end {target})")

        def failover() -> None:
            live = [i for i in cluster.procs if i != old]
            ends = {i: int(cluster.status(i)["leo"]) for i in live}
            chosen = max(live, key=lambda i: (ends[i], -i))
            reply = cluster.request(chosen, f"SET_PARTITION_ROLE|{TOPIC} 0 leader")
            if "|OK|" not in reply:
                raise RuntimeError(reply)
            current["leader"] = chosen
            facts["promoted_log_end"] = ends[chosen]
            notes.append(f"promoted broker {chosen} (log ends {ends})")

        def restart_old() -> None:
            cluster.start(old)
            notes.append(f"restarted old leader {old} at message {producer.sent}")

        half = max(1, windows // 2)
        started = time.monotonic()
        _produce(producer, messages,
                 {half: freeze, half + 1: failover,
                  max(half + 2, 3 * windows // 4): restart_old},
                 kill_at={half: kill})
        seconds = time.monotonic() - started
        producer.close()
        leader = current["leader"]
        cluster.wait(lambda: cluster.status(old)["role"] == "follower",
                     "the old leader to follow")
        log_end = cluster.wait_caught_up(leader)
        epochs = cluster.status(leader)["epochs"]
        notes += _check_identical(cluster, leader)
        truncated = [(int(a), int(b)) for a, b in re.findall(
            r"truncated the divergent tail (\d+)\.\.(\d+)", cluster.procs[old].log_text())]
        facts["truncated"] = truncated
        facts["epochs"] = epochs
        notes.append("old leader truncated " + (", ".join(f"{a}..{b}" for a, b in truncated)
                                                 or "nothing"))
        _check_acked(producer, cluster.read_log(leader)[1])
        notes.append(f"epochs {epochs}")
        return ScenarioResult("leader-crash", messages, len(producer.acked),
                              producer.timeouts, producer.not_leader, producer.unanswered, seconds,
                              log_end, notes, facts)
    finally:
        cluster.close()


SCENARIOS = {
    "steady": run_steady,
    "follower-crash": run_follower_crash,
    "leader-crash": run_leader_crash,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=500, help="requests in flight")
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--fsync", choices=["always", "interval", "never"], default="always")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    args = parser.parse_args(argv)
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    spec = ClusterSpec(fsync=args.fsync)
    root = Path(tempfile.mkdtemp(prefix="skerry-replication-"))
    print(f"3 brokers on 127.0.0.1, RF=3, min ISR 2, fsync={args.fsync}, "
          f"{args.messages} messages per scenario, {args.window} in flight; data in {root}")
    failed = False
    for name in names:
        try:
            result = SCENARIOS[name](root / name, args.messages, spec, args.window)
        except Exception as exc:  # noqa: BLE001 - report every scenario, then fail
            failed = True
            print(f"{name:15} FAILED: {type(exc).__name__}: {exc}")
        else:
            print(result.line())
        sys.stdout.flush()
    if not args.keep and not failed:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
