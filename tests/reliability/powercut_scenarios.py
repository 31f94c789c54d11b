"""Power-cut trials, shared by tests/reliability/test_powercut.py (a few) and
bench/reliability.py (hundreds): each trial loses power at a random file-system call,
cuts every file to what was fsynced (sometimes leaving a torn tail), reopens and checks.

Must not import: the real reactor. Uses the store directly, or the whole broker core
in-process over ``task.Clock`` (``InMemoryBroker``).
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

from broker.errors import SkerryError
from data.atomic import read_json, write_json_atomic
from data.store import StorageConfig, Store, TopicConfig
from groups.store import offsets_from_json, offsets_to_json
from tests.fakes.powercut import PowerCutFileLayer
from tests.reliability.inmemory import InMemoryBroker
from tests.reliability.ledger import AckLedger, LedgerReport

__all__ = ["store_trial", "broker_trial", "json_trial", "read_everything"]

_OK_RE = re.compile(rb"V1\|(\d+)\|OK\|partition=(\d+) offset=(\d+)")


def read_everything(store: Store, topic: str) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
    """Every readable record of every partition of ``topic``, in offset order."""
    out: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    found = store.topic(topic)
    if found is None:
        return out
    for partition in range(found.config.partitions):
        plog = store.partition(topic, partition)
        records: list[tuple[int, bytes]] = []
        offset = plog.first_offset
        while offset < plog.next_offset:
            result = plog.read(offset, max_messages=1000)
            if not result.records:
                break
            records += [(r.offset, bytes(r.payload)) for r in result.records]
            offset = result.next_offset
        out[(topic, partition)] = records
    return out


def store_trial(root: Path, seed: int, rounds: int = 3) -> LedgerReport:
    """Append batches to 2 partitions (4 KiB segments, so rolls happen), fsync most of
    them (those count as acknowledged), lose power at a random call; repeat ``rounds``
    times on the same data, then check every acknowledged record survived every cut."""
    rng = random.Random(seed)
    fs = PowerCutFileLayer()
    config = StorageConfig(fsync="always", segment_bytes=4096)
    ledger = AckLedger()
    n = 0
    for _ in range(rounds):
        store = Store(str(root), config, fs=fs)
        if store.topic("t") is None:
            store.create_topic("t", TopicConfig(partitions=2))
        fs.crash_at = fs.ops + rng.randint(1, 120)
        try:
            while True:
                partition = rng.randrange(2)
                plog = store.partition("t", partition)
                batch = [f"s{seed}-{n + i}-".encode() + b"x" * rng.randint(0, 300)
                         for i in range(rng.randint(1, 8))]
                n += len(batch)
                for value in batch:
                    ledger.sent_value(value)
                first = plog.append(batch)
                if rng.random() < 0.7:
                    plog.sync()
                    for i, value in enumerate(batch):
                        ledger.ack("t", partition, first + i, value)
        except (OSError, SkerryError):
            pass  # the power went off
        store.lock.release()  # with the process, as the kernel drops it
        fs.cut(rng, torn=rng.random() < 0.5)
    store = Store(str(root), config, fs=fs)
    report = ledger.check(read_everything(store, "t"))
    store.close()
    return report


def broker_trial(root: Path, seed: int, acks: str = "1") -> LedgerReport:
    """The broker core in-process (fsync=always, group commit through a thread runner the
    trial drives) taking pipelined PRODUCEs from 3 connections; power goes at a random
    call; the broker restarted on the cut files must hold every message it said OK to."""
    rng = random.Random(seed)
    fs = PowerCutFileLayer()
    ledger = AckLedger()
    settings = {"storage": {"fsync": "always", "segment_bytes": 4096},
                "topics": {"t": {"partitions": 3}}}
    h = InMemoryBroker(root / "data", fs=fs, **settings)
    conns = [h.connect() for _ in range(3)]
    sent: dict[bytes, bytes] = {}
    fs.crash_at = fs.ops + rng.randint(1, 150)
    cid = 0
    for _ in range(40):
        for proto, _tr in conns:
            lines = []
            for _ in range(rng.randint(1, 6)):
                cid += 1
                value = f"b{seed}-{cid}-{'y' * rng.randint(0, 200)}".encode()
                sent[str(cid).encode()] = value
                ledger.sent_value(value)
                lines.append(b"V1|%d|PRODUCE|t k%d:%b acks=%b\n" % (cid, cid % 7, value,
                                                                    acks.encode()))
            proto.dataReceived(b"".join(lines))
        h.settle(2)
        if fs.dead:
            break
    h.settle(3)
    for _proto, tr in conns:
        for match in _OK_RE.finditer(tr.value()):
            value = sent[match.group(1)]
            ledger.ack("t", int(match.group(2)), int(match.group(3)), value)
    h.broker.core.store.lock.release()  # with the process, as the kernel drops it
    fs.cut(rng, torn=rng.random() < 0.5)
    store = Store(str(root / "data"), StorageConfig(fsync="always", segment_bytes=4096), fs=fs)
    report = ledger.check(read_everything(store, "t"))
    store.close()
    return report


def json_trial(root: Path, seed: int) -> tuple[bool, str]:
    """Rewrite offsets.json (write_json_atomic, as the group service does) with power lost
    at a random call; after the cut it must load and equal the last or the previous
    version, never be empty or half written. Returns (ok, what was found)."""
    rng = random.Random(seed)
    fs = PowerCutFileLayer()
    root.mkdir(parents=True, exist_ok=True)
    path = str(root / "offsets.json")
    versions: list[dict] = [offsets_to_json({})]
    write_json_atomic(path, versions[0], fs)
    fs.cut(rng)  # the starting version is durable
    fs.crash_at = fs.ops + rng.randint(1, 40)
    done = 0
    try:
        for version in range(1, 100):
            doc = offsets_to_json({("g", "t"): {p: version * 10 + p for p in range(3)}})
            versions.append(doc)
            write_json_atomic(path, doc, fs)
            done = version
    except OSError:
        pass
    fs.cut(rng, torn=rng.random() < 0.5)
    try:
        loaded = read_json(path, fs=fs)
        offsets_from_json(loaded)
    except ValueError as exc:
        return False, f"unreadable: {exc}"
    allowed = versions[done:done + 2]  # the last completed write, or the one in flight
    if loaded not in allowed:
        return False, f"found {loaded!r}; expected version {done} or {done + 1}"
    if os.path.getsize(path) == 0:
        return False, "empty"
    return True, f"version {versions.index(loaded)}"
