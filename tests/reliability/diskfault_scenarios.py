"""Disk faults under load: ENOSPC or EIO on a write, or a failed fsync, hitting one
partition's files while several V1 clients produce to every partition and another consumes.
Shared by tests/reliability/test_disk_faults.py (in memory, deterministic) and
bench/reliability.py (a real ``skerry`` process over TCP, see tests/reliability/faulty_broker.py).

What every trial checks (``FaultReport``):

- every PRODUCE is answered, either ``OK`` or an error in the V1 shape
  ``V1|<cid>|ERR|STORAGE_ERROR|<message>``, and errors come only for the faulted partition,
  which stays fenced: on a connection that got an error for it, no later PRODUCE to it is
  answered ``OK``;
- nothing unacknowledged is reported stored: a CONSUME, during the run or right after it,
  never returns a value that was not acknowledged, nor one answered with an error;
- the other partitions keep accepting produces and serving consumes after the fault, and
  the faulted one keeps serving what it acknowledged;
- after a restart, the ack ledger finds every acknowledged message once, intact, in order.

Must not import: Twisted directly (the in-memory broker and the process helpers wrap it).
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from data import paths
from tests.fakes.fs import FaultyFileLayer
from tests.reliability.crash_scenarios import consume_all
from tests.reliability.inmemory import InMemoryBroker
from tests.reliability.ledger import AckLedger, LedgerReport
from tests.support import ROOT, BrokerProcess, V1Client

__all__ = ["FAULTS", "FaultReport", "inmemory_fault_trial", "process_fault_trial",
           "FaultyBrokerProcess"]

PARTITIONS = 4
FAULTED = 1
"""The partition whose files fail."""

FAULTS: dict[str, dict[str, Any]] = {
    "ENOSPC on write": {"op": "write", "error": errno.ENOSPC, "partial": True, "sticky": True},
    "EIO on write": {"op": "write", "error": errno.EIO},
    "failed fsync": {"op": "fsync", "error": errno.EIO},
}
"""``FaultyFileLayer.arm`` arguments of each fault (the path is the faulted partition's)."""

TARGETS = (".log", ".index", "")
"""Which of the faulted partition's files a trial hits (by seed): its segment logs, its
offset indexes, or any file (the nth matching call of any kind)."""

_OK_RE = re.compile(rb"V1\|([^|]+)\|OK\|partition=(\d+) offset=(\d+) hw=(-?\d+)$")
_ERR_RE = re.compile(rb"V1\|([^|]+)\|ERR\|STORAGE_ERROR\|[^|\r\n]+$")
_CONSUME_RE = re.compile(rb"V1\|([^|]+)\|OK\|messages=(.*) hw=(-?\d+)$")


@dataclass
class FaultReport:
    """The outcome of one trial; ``ok`` when every rule in the module docstring held."""

    fault: str
    fired: bool = False
    ledger: LedgerReport = field(default_factory=LedgerReport)
    errors: int = 0
    """PRODUCEs answered STORAGE_ERROR (in the V1 shape, for the faulted partition)."""
    bad_replies: list[bytes] = field(default_factory=list)
    """Replies that are neither OK nor STORAGE_ERROR for the faulted partition, and OKs for
    it after an error on the same connection."""
    unanswered: int = 0
    unacked_reported: list[bytes] = field(default_factory=list)
    """Values a CONSUME returned that were not acknowledged (or were answered an error)."""
    others_ok_after: int = 0
    """OKs for the other partitions sent after the first error."""
    consumes_after: int = 0
    """CONSUMEs of the other partitions answered after the first error."""
    faulted_consumes_after: int = 0
    """CONSUMEs of the faulted partition answered after the first error."""
    restart_ok: bool = False
    """After a restart the faulted partition accepts writes again."""

    @property
    def ok(self) -> bool:
        return (self.fired and self.ledger.ok and self.errors > 0 and not self.bad_replies
                and not self.unanswered and not self.unacked_reported
                and self.others_ok_after > 0 and self.consumes_after > 0
                and self.faulted_consumes_after > 0 and self.restart_ok)

    def summary(self) -> str:
        return (f"{self.fault}: fired={self.fired} errors={self.errors} "
                f"bad={len(self.bad_replies)} unanswered={self.unanswered} "
                f"unacked_reported={len(self.unacked_reported)} "
                f"others_ok_after={self.others_ok_after} consumes_after={self.consumes_after} "
                f"faulted_consumes_after={self.faulted_consumes_after} "
                f"restart_ok={self.restart_ok} {self.ledger.summary()}")


def partition_dir(data_dir: str | Path, partition: int = FAULTED) -> str:
    """The directory of partition ``partition`` of topic ``t`` (with a trailing separator,
    so that it names the files inside, not the directory itself)."""
    return paths.partition_dir(paths.topic_dir(str(data_dir), "t"), partition) + os.sep


class _Bookkeeper:
    """Turns replies into ledger entries and report counters (thread-safe)."""

    def __init__(self, report: FaultReport) -> None:
        self.report = report
        self.ledger = AckLedger()
        self.failed_values: set[bytes] = set()
        self.error_seen = False
        self._fenced: set[object] = set()  # connections that got an error for FAULTED
        self._reported: list[tuple[int, bytes]] = []
        self._acked_values: dict[int, set[bytes]] = {}
        self._lock = threading.Lock()

    def produced(self, conn: object, reply: bytes, partition: int, value: bytes) -> None:
        """The reply, on connection ``conn``, to a PRODUCE of ``value`` to ``partition``."""
        with self._lock:
            ok = _OK_RE.match(reply)
            if ok is not None and int(ok.group(2)) == partition:
                self.ledger.ack("t", partition, int(ok.group(3)), value)
                if self.error_seen and partition != FAULTED:
                    self.report.others_ok_after += 1
                if partition == FAULTED and conn in self._fenced:
                    self.report.bad_replies.append(b"OK after an error: " + reply)
            elif _ERR_RE.match(reply) is not None and partition == FAULTED:
                self.report.errors += 1
                self.error_seen = True
                self._fenced.add(conn)
                self.failed_values.add(value)
            else:
                self.report.bad_replies.append(reply)

    def consumed(self, partition: int, values: list[bytes]) -> None:
        """A CONSUME of ``partition`` answered ``values``. They are checked in ``finish``:
        over TCP the consumer may read a record before its producer has read the OK."""
        with self._lock:
            self._reported.extend((partition, value) for value in values)
            if self.error_seen:
                if partition == FAULTED:
                    self.report.faulted_consumes_after += 1
                else:
                    self.report.consumes_after += 1

    def finish(self) -> None:
        """Every value a CONSUME returned must have been acknowledged, for that partition,
        and never answered with an error."""
        with self._lock:
            for partition, value in self._reported:
                acked = self._acked_values.setdefault(
                    partition, set(self.ledger.acked.get(("t", partition), {}).values()))
                if value not in acked or value in self.failed_values:
                    self.report.unacked_reported.append(value)


def _parse_consume(reply: bytes) -> tuple[list[tuple[int, bytes]], int] | None:
    match = _CONSUME_RE.match(reply)
    if match is None:
        return None
    items = match.group(2)
    records = []
    if items:
        for item in items.split(b","):
            offset, _, value = item.partition(b":")
            records.append((int(offset), value))
    return records, int(match.group(3))


# ------------------------------------------------------------------------- in memory

def inmemory_fault_trial(tmp_path: Path, seed: int, fault: str, *, fsync: str = "always",
                         clients: int = 4, rounds: int = 24) -> FaultReport:
    """Clients pipeline 1-8 PRODUCEs each to random partitions per reactor turn while a
    consumer follows every partition; a third of the way in, ``fault`` is armed for one of
    the next few matching calls on partition 1's files. Then a restart and a full read."""
    rng = random.Random(seed)
    report = FaultReport(fault)
    book = _Bookkeeper(report)
    data = tmp_path / "data"
    fs = FaultyFileLayer(armed=False)
    config: dict[str, Any] = {"storage": {"fsync": fsync, "fsync_interval_ms": 50,
                                          "segment_bytes": 8192},
                              "topics": {"t": {"partitions": PARTITIONS}}}
    h = InMemoryBroker(data, fs=fs, **config)
    producers = [h.connect() for _ in range(clients)]
    consumer, consumer_tr = h.connect()
    next_read = [0] * PARTITIONS
    sent: dict[tuple[int, bytes], tuple[int, bytes]] = {}
    cid = 0
    for round_no in range(rounds):
        if round_no == rounds // 3:
            fs.arm(path_contains=partition_dir(data), nth=rng.randint(1, 4),
                   path_endswith=TARGETS[seed % len(TARGETS)], **FAULTS[fault])
        for i, (proto, _tr) in enumerate(producers):
            lines = []
            for _ in range(rng.randint(1, 8)):
                cid += 1
                partition = rng.randrange(PARTITIONS)
                value = f"c{i}-{cid}-{'v' * rng.randint(0, 200)}".encode()
                book.ledger.sent_value(value)
                sent[(i, str(cid).encode())] = (partition, value)
                lines.append(b"V1|%d|PRODUCE|t k:%b partition=%d\n" % (cid, value, partition))
            proto.dataReceived(b"".join(lines))
        h.settle()
        h.clock.advance(0.05)  # the interval fsync's period
        h.settle()
        for i, (_proto, tr) in enumerate(producers):
            for reply in tr.value().splitlines():
                key = (i, reply.split(b"|")[1])
                partition, value = sent.pop(key)
                book.produced(i, reply, partition, value)
            tr.clear()
        consumer_tr.clear()
        consumer.dataReceived(b"".join(b"V1|r%d|CONSUME|t %d %d max=1000\n" % (p, p, next_read[p])
                                       for p in range(PARTITIONS)))
        h.settle()
        for p, reply in enumerate(consumer_tr.value().splitlines()):
            parsed = _parse_consume(reply)
            if parsed is None:
                report.bad_replies.append(reply)
                continue
            records, _hw = parsed
            book.consumed(p, [value for _, value in records])
            if records:
                next_read[p] = records[-1][0] + 1
    report.unanswered = len(sent)
    report.fired = fs.failures > 0
    book.finish()
    h.close()
    restarted = InMemoryBroker(data, **config)
    proto, tr = restarted.connect()
    read: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    hws: dict[tuple[str, int], int] = {}
    for p in range(PARTITIONS):
        records: list[tuple[int, bytes]] = []
        while True:
            (reply,) = restarted.request(proto, tr, f"V1|x|CONSUME|t {p} "
                                         f"{records[-1][0] + 1 if records else 0} max=1000")
            parsed = _parse_consume(reply)
            assert parsed is not None, reply
            if not parsed[0]:
                hws[("t", p)] = parsed[1]
                break
            records += parsed[0]
        read[("t", p)] = records
    (reply,) = restarted.request(proto, tr, f"V1|y|PRODUCE|t k:again partition={FAULTED}")
    report.restart_ok = _OK_RE.match(reply) is not None
    restarted.close()
    report.ledger = book.ledger.check(read, hws)
    return report


# ------------------------------------------------------------------------- over TCP

class FaultyBrokerProcess(BrokerProcess):
    """``tests.reliability.faulty_broker`` in a child process: the broker over a
    ``FaultyFileLayer`` that SIGUSR1 arms with ``fault`` (a ``FAULTS`` entry plus
    ``path_contains``). ``start_plain`` restarts the same data dir as ``skerry serve``."""

    def __init__(self, workdir: Path, config: dict[str, Any], fault: dict[str, Any]) -> None:
        super().__init__(workdir, config)
        self.fault = fault

    def start(self, timeout: float = 30.0) -> FaultyBrokerProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "skerry.yaml"
        cfg.write_text(yaml.safe_dump(self.config))
        spec = self.workdir / "fault.json"
        spec.write_text(json.dumps(self.fault))
        log = open(self.log_path, "ab")
        offset = log.tell()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.faulty_broker", str(cfg), str(spec)],
            cwd=str(ROOT), stdout=log, stderr=log, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[offset:]
            match = re.search(rb"skerry listening on v1=[0-9.]+:([0-9]+)", text)
            if match:
                self.port = int(match.group(1))
                self.config["port"] = self.port
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"faulty broker exited with {self.proc.returncode}:\n"
                                   f"{text.decode(errors='replace')}")
            time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("faulty broker did not start in time:\n" + self.log_text())

    def arm(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGUSR1)

    def start_plain(self) -> BrokerProcess:
        return BrokerProcess(self.workdir, dict(self.config)).start()


def _tcp_producer(port: int, book: _Bookkeeper, stop: threading.Event, tag: str,
                  rng: random.Random) -> None:
    client = V1Client(port, timeout=10)
    cid = 0
    try:
        while not stop.is_set():
            batch: dict[bytes, tuple[int, bytes]] = {}
            lines = []
            for _ in range(rng.randint(1, 20)):
                cid += 1
                partition = rng.randrange(PARTITIONS)
                value = f"{tag}-{cid}-{'v' * rng.randint(0, 200)}".encode()
                book.ledger.sent_value(value)
                batch[str(cid).encode()] = (partition, value)
                lines.append(b"V1|%d|PRODUCE|t k:%b partition=%d\n" % (cid, value, partition))
            client.send(b"".join(lines))
            for _ in lines:
                reply = client.readline()
                partition, value = batch.pop(reply.split(b"|")[1])
                book.produced(tag, reply, partition, value)
            time.sleep(rng.uniform(0, 0.005))  # paced: the broker must not be saturated
    except (OSError, ConnectionError, KeyError) as exc:
        book.report.bad_replies.append(f"producer {tag}: {exc!r}".encode())
    finally:
        client.close()


def _tcp_consumer(port: int, book: _Bookkeeper, stop: threading.Event) -> None:
    client = V1Client(port, timeout=10)
    next_read = [0] * PARTITIONS
    try:
        while not stop.is_set():
            for p in range(PARTITIONS):
                reply = client.request(f"V1|c{p}|CONSUME|t {p} {next_read[p]} max=1000")
                parsed = _parse_consume(reply.encode())
                if parsed is None:
                    book.report.bad_replies.append(reply.encode())
                    continue
                records = parsed[0]
                book.consumed(p, [value for _, value in records])
                if records:
                    next_read[p] = records[-1][0] + 1
            time.sleep(0.01)
    except (OSError, ConnectionError) as exc:
        book.report.bad_replies.append(f"consumer: {exc!r}".encode())
    finally:
        client.close()


def process_fault_trial(workdir: Path, seed: int, fault: str, *, clients: int = 4,
                        before_s: float = 1.0, after_s: float = 1.5,
                        log: Callable[[str], None] = lambda _: None) -> FaultReport:
    """A real broker process (fsync=always) over TCP: ``clients`` pipelining producers and a
    consumer for ``before_s``, then SIGUSR1 arms ``fault`` on partition 1's files (it hits
    one of the next few matching calls), ``after_s`` more, a live read, SIGTERM, a restart
    as plain ``skerry serve``, and the ledger check."""
    rng = random.Random(seed)
    report = FaultReport(fault)
    book = _Bookkeeper(report)
    data_dir = workdir / "skerry-data"
    spec = {**FAULTS[fault], "nth": rng.randint(1, 4), "path_contains": partition_dir(data_dir),
            "path_endswith": TARGETS[seed % len(TARGETS)]}
    config = {"storage": {"fsync": "always", "segment_bytes": 65536},
              "topics": {"t": {"partitions": PARTITIONS}}}
    broker = FaultyBrokerProcess(workdir, config, spec)
    broker.start()
    stop = threading.Event()
    threads = [threading.Thread(target=_tcp_producer, daemon=True,
                                args=(broker.port, book, stop, f"s{seed}c{i}",
                                      random.Random(seed * 100 + i)))
               for i in range(clients)]
    threads.append(threading.Thread(target=_tcp_consumer, daemon=True,
                                    args=(broker.port, book, stop)))
    try:
        for thread in threads:
            thread.start()
        time.sleep(before_s)
        broker.arm()
        time.sleep(after_s)
        stop.set()
        for thread in threads:
            thread.join(30)
        live = broker.client()
        read, _ = consume_all(live, "t", PARTITIONS)
        live.close()
        for p in range(PARTITIONS):
            book.consumed(p, [value for _, value in read.get(("t", p), [])])
        book.finish()
        report.fired = "fault injected" in broker.log_text() and report.errors > 0
        code = broker.stop()
        if code != 0:
            report.bad_replies.append(f"faulty broker exited with {code}".encode())
        started = time.monotonic()
        plain = broker.start_plain()
        log(f"restart took {time.monotonic() - started:.2f}s")
        try:
            client = plain.client()
            read, hws = consume_all(client, "t", PARTITIONS)
            reply = client.request(f"V1|y|PRODUCE|t k:again partition={FAULTED}")
            report.restart_ok = _OK_RE.match(reply.encode()) is not None
            client.close()
        finally:
            plain.stop()
    finally:
        stop.set()
        if broker.proc is not None and broker.proc.poll() is None:
            broker.proc.kill()
            broker.proc.wait()
    report.ledger = book.ledger.check(read, hws)
    return report
