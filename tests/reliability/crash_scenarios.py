"""Crash trials against a real broker process (SIGKILL, or SIGSTOP then SIGCONT) while
clients produce, shared by tests/reliability/test_crash_matrix.py and bench/reliability.py.

Must not import: the broker's modules (the broker runs in a child process).
"""

from __future__ import annotations

import random
import re
import signal
import threading
import time
from pathlib import Path

from tests.reliability.ledger import AckLedger, LedgerReport
from tests.support import BrokerProcess, V1Client

__all__ = ["crash_trial", "consume_all"]

_OK_RE = re.compile(r"V1\|(\d+)\|OK\|partition=(\d+) offset=(\d+)")
PARTITIONS = 2


def consume_all(client: V1Client, topic: str) -> tuple[dict, dict]:
    """Every message of every partition via CONSUME, and each partition's hw."""
    out: dict = {}
    hws: dict = {}
    cid = 0
    for partition in range(PARTITIONS):
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
