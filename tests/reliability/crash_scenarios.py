"""Crash trials against a real broker process (SIGKILL, or SIGSTOP then SIGCONT) while
clients produce (``crash_trial``), or while group members COMMIT offsets and other members
JOIN, SYNC, HEARTBEAT and LEAVE (``group_crash_trial``), shared by
tests/reliability/test_crash_matrix.py and bench/reliability.py.

Must not import: the broker's modules (the broker runs in a child process), except the
pure ``groups.store`` loaders, to check that the state files parse after a crash.
"""

from __future__ import annotations

import random
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.groups.helpers import state_on_disk
from tests.reliability.ledger import AckLedger, LedgerReport
from tests.support import BrokerProcess, V1Client

__all__ = ["crash_trial", "consume_all", "group_crash_trial", "GroupCrashReport"]

_OK_RE = re.compile(r"V1\|(\d+)\|OK\|partition=(\d+) offset=(\d+)")
PARTITIONS = 2


def consume_all(client: V1Client, topic: str, partitions: int = PARTITIONS
                ) -> tuple[dict, dict]:
    """Every message of every partition via CONSUME, and each partition's hw."""
    out: dict = {}
    hws: dict = {}
    cid = 0
    for partition in range(partitions):
        records: list[tuple[int, bytes]] = []
        offset = 0
        while True:
            cid += 1
            reply = client.request(f"V1|{cid}|CONSUME|{topic} {partition} {offset} max=1000")
            assert "|OK|" in reply, reply
            body = reply.split("|OK|", 1)[1]
            messages, _, hw = body.rpartition(" hw=")
            hws[(topic, partition)] = int(hw)
            items = messages[len("messages="):]
            if not items:
                break
            for item in items.split(","):
                off, _, value = item.partition(":")
                records.append((int(off), value.encode()))
            offset = records[-1][0] + 1
        out[(topic, partition)] = records
    return out, hws


def _producer(port: int, acks: str, ledger: AckLedger, stop: threading.Event,
              tag: str, rng: random.Random) -> None:
    try:
        client = V1Client(port, timeout=5)
    except OSError:
        return
    cid = 0
    try:
        while not stop.is_set():
            batch = {}
            lines = []
            for _ in range(rng.randint(1, 20)):
                cid += 1
                value = f"{tag}-{cid}-{'z' * rng.randint(0, 120)}"
                batch[str(cid)] = value.encode()
                ledger.sent_value(value.encode())
                lines.append(f"V1|{cid}|PRODUCE|t k{cid % 5}:{value} acks={acks}\n")
            client.send("".join(lines).encode())
            for _ in lines:
                match = _OK_RE.match(client.readline().decode())
                if match:
                    ledger.ack("t", int(match.group(2)), int(match.group(3)),
                               batch[match.group(1)])
    except (OSError, ConnectionError):
        pass
    finally:
        client.close()


def crash_trial(workdir: Path, seed: int, *, fsync: str = "always", acks: str = "1",
                how: str = "kill", clients: int = 2, run_s: float = 0.6,
                segment_bytes: int = 4096, retention_bytes: int | None = None
                ) -> tuple[LedgerReport, float]:
    """Start a broker, produce from ``clients`` connections, then SIGKILL it (``how=kill``)
    or SIGSTOP it for a moment and SIGCONT (``how=stop``); restart, read everything back.
    Returns the ledger report and the seconds the restart took to answer PING."""
    rng = random.Random(seed)
    topic_cfg: dict = {"partitions": PARTITIONS}
    if retention_bytes is not None:
        topic_cfg["retention_bytes"] = retention_bytes
    config = {"storage": {"fsync": fsync, "fsync_interval_ms": 50,
                          "segment_bytes": segment_bytes},
              "topics": {"t": topic_cfg}}
    broker = BrokerProcess(workdir, config)
    broker.start()
    ledger = AckLedger()
    stop = threading.Event()
    threads = [threading.Thread(target=_producer, daemon=True,
                                args=(broker.port, acks, ledger, stop, f"c{seed}x{i}",
                                      random.Random(seed * 100 + i)))
               for i in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(run_s * rng.uniform(0.5, 1.5))
    assert broker.proc is not None
    if how == "stop":
        broker.proc.send_signal(signal.SIGSTOP)
        time.sleep(0.3)
        broker.proc.send_signal(signal.SIGCONT)
        time.sleep(0.2)
        stop.set()
        for thread in threads:
            thread.join(10)
        broker.kill9()
    else:
        broker.kill9()
        stop.set()
        for thread in threads:
            thread.join(10)
    started = time.monotonic()
    broker.start()
    client = broker.client()
    client.request("V1|0|PING|")
    recover_s = time.monotonic() - started
    read, hws = consume_all(client, "t")
    client.close()
    broker.stop()
    if retention_bytes is not None:
        # Retention deletes whole old segments: acknowledged offsets below the first one
        # still readable are expected to be gone.
        for key, acked in ledger.acked.items():
            first = read[key][0][0] if read.get(key) else 0
            for offset in [o for o in acked if o < first]:
                del acked[offset]
    return ledger.check(read, hws), recover_s


# ------------------------------------------------------------------ COMMIT and group churn

GROUP_PARTITIONS = 4
COMMIT_LIMIT = 3000
"""Messages per partition produced before a group trial: COMMIT needs offset <= hw + 1."""
_GEN_RE = re.compile(r"generation=(\d+) assigned=\[([0-9 ]*)\]")


@dataclass
class GroupCrashReport:
    """One group crash trial. A commit is *acknowledged* when the broker answered
    ``committed=true``; per partition the values a client sends only grow, so the last
    acknowledged one is the largest."""

    commits_acked: int = 0
    generations_acked: int = 0
    lost: list[tuple[int, int, int]] = field(default_factory=list)
    """(partition, committed after restart, last acknowledged) with committed < acked."""
    wrong: list[tuple[int, int, int]] = field(default_factory=list)
    """(partition, committed after restart, last acknowledged): a value never sent, one the
    broker refused, or not the last acknowledged although nothing later was sent."""
    exact: int = 0
    """Partitions where nothing was sent after the last acknowledged COMMIT (their committed
    offset must equal it)."""
    generation_regressions: list[tuple[int, int]] = field(default_factory=list)
    """(generation after restart, largest generation a JOIN/SYNC answered before)."""
    bad_files: list[str] = field(default_factory=list)
    """The group state (its topic) that did not load after the crash."""
    recover_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.wrong or self.generation_regressions or self.bad_files)

    def summary(self) -> str:
        return (f"commits_acked={self.commits_acked} generations_acked="
                f"{self.generations_acked} lost={len(self.lost)} wrong={len(self.wrong)} "
                f"exact={self.exact} generation_regressions={len(self.generation_regressions)} "
                f"bad_files={len(self.bad_files)} recover={self.recover_s:.2f}s")


class _CommitLedger:
    """Per partition: every COMMIT value sent, refused and acknowledged (thread-safe), and
    the largest generation any JOIN or SYNC answered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = [0] * GROUP_PARTITIONS
        self.sent: list[set[int]] = [set() for _ in range(GROUP_PARTITIONS)]
        self.refused: list[set[int]] = [set() for _ in range(GROUP_PARTITIONS)]
        self.acked: list[int | None] = [None] * GROUP_PARTITIONS
        self.commits_acked = 0
        self.generations_acked = 0
        self.max_generation = 0

    def take(self, partition: int) -> int | None:
        """The next value to commit on ``partition`` (None once the limit is reached)."""
        with self._lock:
            if self._next[partition] >= COMMIT_LIMIT:
                return None
            self._next[partition] += 1
            value = self._next[partition]
            self.sent[partition].add(value)
            return value

    def answered(self, partition: int, value: int, reply: str) -> bool:
        """Record a COMMIT's answer; False when it was GENERATION_MISMATCH (rejoin)."""
        with self._lock:
            if reply.endswith("|OK|committed=true"):
                self.commits_acked += 1
                last = self.acked[partition]
                self.acked[partition] = value if last is None else max(last, value)
                return True
            self.refused[partition].add(value)
            return "GENERATION_MISMATCH" not in reply

    def generation(self, reply: str) -> tuple[int, list[int]] | None:
        match = _GEN_RE.search(reply)
        if match is None or "|OK|" not in reply:
            return None
        with self._lock:
            self.generations_acked += 1
            self.max_generation = max(self.max_generation, int(match.group(1)))
        return int(match.group(1)), [int(p) for p in match.group(2).split()]


def _committer(port: int, ledger: _CommitLedger, stop: threading.Event, member: str,
               rng: random.Random) -> None:
    """A member of group g that commits ever larger offsets for the partitions it owns,
    several pipelined at a time, and rejoins when its generation is stale."""
    try:
        client = V1Client(port, timeout=5)
    except OSError:
        return
    cid = 0
    try:
        while not stop.is_set():
            cid += 1
            joined = ledger.generation(client.request(f"V1|{cid}|JOIN|g t {member}"))
            if joined is None:
                continue
            generation, assigned = joined
            current = True
            while current and not stop.is_set():
                batch = []
                for partition in assigned * rng.randint(1, 3):
                    value = ledger.take(partition)
                    if value is not None:
                        cid += 1
                        batch.append((partition, value, f"V1|{cid}|COMMIT|g t {member} "
                                                        f"{generation} {partition} {value}\n"))
                if not batch:
                    cid += 1
                    current = client.request(f"V1|{cid}|HEARTBEAT|g t {member} "
                                             f"{generation}").endswith("heartbeat=ok")
                    time.sleep(0.01)
                    continue
                client.send("".join(line for _, _, line in batch).encode())
                for partition, value, _ in batch:
                    current &= ledger.answered(partition, value, client.readline().decode())
                if rng.random() < 0.3:  # quiet moments: a crash then finds nothing in flight
                    time.sleep(rng.uniform(0, 0.05))
    except (OSError, ConnectionError):
        pass
    finally:
        client.close()


def _churner(port: int, ledger: _CommitLedger, stop: threading.Event, tag: str,
             rng: random.Random) -> None:
    """Members that come and go: JOIN, SYNC, a few HEARTBEATs, LEAVE (or just vanish)."""
    try:
        client = V1Client(port, timeout=5)
    except OSError:
        return
    cid = 0
    try:
        while not stop.is_set():
            cid += 1
            member = f"{tag}-{cid}"
            joined = ledger.generation(client.request(f"V1|{cid}|JOIN|g t {member}"))
            if joined is None:
                continue
            generation = joined[0]
            cid += 1
            synced = ledger.generation(client.request(f"V1|{cid}|SYNC|g t {member} {generation}"))
            if synced is not None:
                generation = synced[0]
            for _ in range(rng.randint(0, 3)):
                time.sleep(rng.uniform(0, 0.01))
                cid += 1
                client.request(f"V1|{cid}|HEARTBEAT|g t {member} {generation}")
            if rng.random() < 0.8:
                cid += 1
                client.request(f"V1|{cid}|LEAVE|g t {member} {generation}")
    except (OSError, ConnectionError):
        pass
    finally:
        client.close()


def _check_state_files(data_dir: Path, report: GroupCrashReport) -> None:
    """The group state the crash left (the topic __skerry_groups) must load."""
    try:
        state_on_disk(str(data_dir))
    except ValueError as exc:
        report.bad_files.append(f"__skerry_groups: {exc}")


def group_crash_trial(workdir: Path, seed: int, *, how: str = "kill", churn: bool = False,
                      committers: int = 2, churners: int = 2, run_s: float = 0.6
                      ) -> GroupCrashReport:
    """A broker with topic t (4 partitions, COMMIT_LIMIT messages each); ``committers``
    members of group g COMMIT pipelined, ever larger offsets; with ``churn`` other members
    JOIN, SYNC, HEARTBEAT and LEAVE meanwhile, so g rebalances all the time. Then SIGKILL
    (``kill``), or SIGSTOP for 0.3 s, SIGCONT and a SIGKILL (``stop``); the state files must
    parse; a restart must answer PING; every partition's committed offset must be at least
    its last acknowledged COMMIT (and exactly it when nothing later was sent), and g's
    generation at least the largest a JOIN or SYNC answered."""
    rng = random.Random(seed)
    report = GroupCrashReport()
    config = {"storage": {"fsync": "always"},
              "topics": {"t": {"partitions": GROUP_PARTITIONS}}}
    broker = BrokerProcess(workdir, config)
    broker.start()
    setup = broker.client()
    for partition in range(GROUP_PARTITIONS):
        setup.send("".join(f"V1|{i}|PRODUCE|t k:m{i} partition={partition}\n"
                           for i in range(COMMIT_LIMIT)).encode())
        replies = setup.readlines(COMMIT_LIMIT)
        assert all("|OK|" in r.decode() for r in replies), replies[-1]
    setup.close()
    ledger = _CommitLedger()
    stop = threading.Event()
    threads = [threading.Thread(target=_committer, daemon=True,
                                args=(broker.port, ledger, stop, f"m{i}",
                                      random.Random(seed * 100 + i)))
               for i in range(committers)]
    if churn:
        threads += [threading.Thread(target=_churner, daemon=True,
                                     args=(broker.port, ledger, stop, f"x{i}",
                                           random.Random(seed * 100 + 50 + i)))
                    for i in range(churners)]
    for thread in threads:
        thread.start()
    time.sleep(run_s * rng.uniform(0.5, 1.5))
    assert broker.proc is not None
    if how == "stop":
        broker.proc.send_signal(signal.SIGSTOP)
        time.sleep(0.3)
        broker.proc.send_signal(signal.SIGCONT)
        time.sleep(0.2)
    broker.kill9()
    stop.set()
    for thread in threads:
        thread.join(10)
    _check_state_files(broker.data_dir, report)
    started = time.monotonic()
    broker.start()
    client = broker.client()
    client.request("V1|0|PING|")
    report.recover_s = time.monotonic() - started
    for partition in range(GROUP_PARTITIONS):
        reply = client.request(f"V1|o{partition}|OFFSET|g t {partition}")
        committed = int(reply.rpartition("offset=")[2])
        acked = ledger.acked[partition]
        later = {v for v in ledger.sent[partition] if acked is None or v > acked}
        allowed = (later - ledger.refused[partition]) | {0 if acked is None else acked}
        if acked is not None and committed < acked:
            report.lost.append((partition, committed, acked))
        elif committed not in allowed:
            report.wrong.append((partition, committed, -1 if acked is None else acked))
        if not later:
            report.exact += 1
    described = client.request("V1|d|DESCRIBE_GROUP|g t")
    match = re.search(r"generation=(\d+)", described)
    generation = int(match.group(1)) if match else -1
    if generation < ledger.max_generation:
        report.generation_regressions.append((generation, ledger.max_generation))
    client.close()
    broker.stop()
    report.commits_acked = ledger.commits_acked
    report.generations_acked = ledger.generations_acked
    return report
