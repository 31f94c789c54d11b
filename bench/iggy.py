"""Throughput of the Iggy binary transport: send and poll, batches of 1,000 x 100 bytes.

Starts ``python -m broker serve`` with ``iggy_port`` on a free loopback port and a fresh
data directory, creates stream ``bench`` / topic ``t`` (one partition per connection), and
drives it with raw Iggy frames built once and reused (the client does next to no work per
message, so the broker is what is measured):

* send: each connection sends SendMessages frames of ``--batch`` messages of ``--size``
  bytes to its own partition, one request at a time (as Iggy clients do), for
  ``--seconds``;
* poll: each connection then polls its partition from offset 0 with ``count = --batch``
  (Offset strategy, no auto-commit) until it has read everything it sent, or time is up.

Prints one line per phase (messages/s, MB/s of payload, batch latency p50/p99, and the
broker process's CPU time per message, read from ``/proc`` where there is one: on a small
shared machine that figure is steadier than the rate) and, with ``--json``, the figures as
JSON. Run ``python -m bench.iggy --help`` for the options.

Must not import: broker internals beyond the codec (frames are built with it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.serve import start_serve, stop_serve
from broker.iggy import codec
from broker.iggy.codec import Consumer, ConsumerKind, Identifier, PartitioningKind, PollingKind

__all__ = ["Phase", "run_bench", "main"]

_REPLY = struct.Struct("<II")
_POLLED = struct.Struct("<IQI")


@dataclass
class Phase:
    name: str
    connections: int
    messages: int
    seconds: float
    payload_bytes: int
    p50_ms: float
    p99_ms: float
    server_cpu_us_per_msg: float | None = None
    steal_percent: float | None = None
    """CPU time the hypervisor took from this VM during the phase (``/proc/stat`` steal), as
    a share of all CPU time: when it is high, the machine was slow, not the broker."""

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0


class _Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray(8 << 20)
        self.view = memoryview(self.buf)

    def call(self, request: bytes) -> tuple[int, memoryview]:
        self.sock.sendall(request)
        got = 0
        need = 8
        length = -1
        while got < need:
            n = self.sock.recv_into(self.view[got:], len(self.buf) - got)
            if n == 0:
                raise ConnectionError("broker closed the connection")
            got += n
            if length < 0 and got >= 8:
                status, length = _REPLY.unpack_from(self.buf)
                if status:
                    raise RuntimeError(f"status {status}")
                need = 8 + length
                if need > len(self.buf):
                    self.buf.extend(bytes(need - len(self.buf)))
                    self.view = memoryview(self.buf)
        return length, self.view[8:8 + length]

    def close(self) -> None:
        self.sock.close()


def _machine_ticks() -> tuple[int, int] | None:
    """``(steal, total)`` CPU ticks of the whole machine so far (None without /proc)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def _steal_percent(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[1] <= before[1]:
        return None
    return 100.0 * (after[0] - before[0]) / (after[1] - before[1])


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (``None`` without ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _cpu_per_msg(before: float | None, after: float | None, messages: int) -> float | None:
    if before is None or after is None or not messages:
        return None
    return (after - before) / messages * 1e6


def _percentile(samples: list[float], q: float) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


def _send_worker(port: int, partition: int, frame: bytes, batch: int, deadline: float,
                 out: dict[int, tuple[int, list[float]]]) -> None:
    conn = _Conn(port)
    conn.call(codec.encode_request(codec.LoginUser("iggy", "iggy")))
    sent = 0
    latencies: list[float] = []
    while time.monotonic() < deadline:
        began = time.perf_counter()
        conn.call(frame)
        latencies.append(time.perf_counter() - began)
        sent += batch
    conn.close()
    out[partition] = (sent, latencies)


def _poll_worker(port: int, partition: int, total: int, batch: int, deadline: float,
                 out: dict[int, tuple[int, int, list[float]]]) -> None:
    conn = _Conn(port)
    conn.call(codec.encode_request(codec.LoginUser("iggy", "iggy")))
    consumer = Consumer(ConsumerKind.CONSUMER, Identifier(1))
    stream, topic = Identifier("bench"), Identifier("t")
    offset = 0
    read = 0
    payload = 0
    latencies: list[float] = []
    while offset < total and time.monotonic() < deadline:
        request = codec.encode_request(codec.PollMessages(consumer, stream, topic, partition,
                                                          PollingKind.OFFSET, offset, batch, False))
        began = time.perf_counter()
        length, body = conn.call(request)
        latencies.append(time.perf_counter() - began)
        _part, _current, count = _POLLED.unpack_from(body)
        if count == 0:
            break
        read += count
        payload += length - 16 - 64 * count
        offset += count
    conn.close()
    out[partition] = (read, payload, latencies)


def _start_broker(workdir: Path, fsync: str, python: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    return start_serve(workdir, {
        "data_dir": str(workdir / "data"), "port": 0, "iggy_port": 0, "log_level": "warning",
        "storage": {"fsync": fsync}, "limits": {"consume_max_bytes": 64 << 20},
    }, "iggy", python)


def run_bench(*, seconds: float, connections: int, batch: int, size: int, fsync: str,
              python: str = sys.executable) -> list[Phase]:
    """Start a broker, run the send then the poll phase, stop it; returns both phases."""
    workdir = Path(tempfile.mkdtemp(prefix="skerry-iggy-bench-"))
    proc, port, _log = _start_broker(workdir, fsync, python)
    try:
        admin = _Conn(port)
        admin.call(codec.encode_request(codec.LoginUser("iggy", "iggy")))
        admin.call(codec.encode_request(codec.CreateStream("bench")))
        admin.call(codec.encode_request(codec.CreateTopic(Identifier("bench"), connections, 1, 0,
                                                          0, 1, "t")))
        admin.close()
        payload = bytes(range(256)) * (size // 256 + 1)
        messages = codec.encode_messages([payload[:size]] * batch)
        frames = [codec.encode_request(codec.SendMessages(
            Identifier("bench"), Identifier("t"), PartitioningKind.PARTITION_ID,
            struct.pack("<I", p), batch, messages)) for p in range(connections)]
        sent: dict[int, tuple[int, list[float]]] = {}
        cpu_began = _cpu_seconds(proc.pid)
        ticks_began = _machine_ticks()
        began = time.monotonic()
        threads = [threading.Thread(target=_send_worker,
                                    args=(port, p, frames[p], batch, began + seconds, sent))
                   for p in range(connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        send_elapsed = time.monotonic() - began
        cpu_sent = _cpu_seconds(proc.pid)
        ticks_sent = _machine_ticks()
        send_latencies = [x for _, lat in sent.values() for x in lat]
        total_sent = sum(n for n, _ in sent.values())
        phases = [Phase("send", connections, total_sent, send_elapsed, total_sent * size,
                        _percentile(send_latencies, 0.5), _percentile(send_latencies, 0.99),
                        _cpu_per_msg(cpu_began, cpu_sent, total_sent),
                        _steal_percent(ticks_began, ticks_sent))]
        polled: dict[int, tuple[int, int, list[float]]] = {}
        cpu_began = _cpu_seconds(proc.pid)
        ticks_began = _machine_ticks()
        began = time.monotonic()
        threads = [threading.Thread(target=_poll_worker,
                                    args=(port, p, sent[p][0], batch, began + 4 * seconds, polled))
                   for p in range(connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        poll_elapsed = time.monotonic() - began
        cpu_polled = _cpu_seconds(proc.pid)
        poll_latencies = [x for _, _, lat in polled.values() for x in lat]
        total_read = sum(n for n, _, _ in polled.values())
        phases.append(Phase("poll", connections, total_read, poll_elapsed,
                            sum(b for _, b, _ in polled.values()),
                            _percentile(poll_latencies, 0.5), _percentile(poll_latencies, 0.99),
                            _cpu_per_msg(cpu_began, cpu_polled, total_read),
                            _steal_percent(ticks_began, _machine_ticks())))
        if total_read != total_sent:
            raise RuntimeError(f"polled {total_read} messages of {total_sent} sent")
        return phases
    finally:
        stop_serve(proc)
        shutil.rmtree(workdir, ignore_errors=True)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


TARGET_MSGS_PER_S = 500_000
"""The issue's target for send and for poll, with batches of 1,000 x 100 bytes."""


def _line(p: Phase) -> str:
    cpu = "" if p.server_cpu_us_per_msg is None else f"  broker CPU {p.server_cpu_us_per_msg:.2f} us/msg"
    if p.steal_percent is not None:
        cpu += f"  steal {p.steal_percent:.0f}%"
    return (f"{p.name:5} {p.connections} conn  {p.rate:>11,.0f} msgs/s  "
            f"{p.payload_bytes / p.seconds / 1e6:7.1f} MB/s  batch p50 {p.p50_ms:6.2f} ms  "
            f"p99 {p.p99_ms:6.2f} ms  ({p.messages:,} msgs in {p.seconds:.2f} s){cpu}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="send phase length")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1000, help="messages per send / poll")
    parser.add_argument("--size", type=int, default=100, help="payload bytes per message")
    parser.add_argument("--fsync", choices=("always", "interval", "never"), default="never")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs, each on a fresh broker; the median of each phase is reported")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    runs = [run_bench(seconds=args.seconds, connections=args.connections, batch=args.batch,
                      size=args.size, fsync=args.fsync) for _ in range(max(1, args.repeat))]
    names = [p.name for p in runs[0]]
    medians = {name: statistics.median(run[i].rate for run in runs) for i, name in enumerate(names)}
    if args.json:
        print(json.dumps({"machine": machine(), "fsync": args.fsync, "batch": args.batch,
                          "size": args.size, "median_rate": medians,
                          "runs": [[asdict(p) | {"rate": p.rate} for p in run] for run in runs]},
                         indent=2))
        return 0
    print(f"# {machine()}; storage.fsync={args.fsync}; batches of {args.batch} x {args.size} B")
    for i, run in enumerate(runs):
        if len(runs) > 1:
            print(f"run {i + 1}:")
        for p in run:
            print(_line(p))
    stolen = [p.steal_percent for run in runs for p in run if p.steal_percent is not None]
    if stolen and max(stolen) > 5:
        print(f"note: the hypervisor took up to {max(stolen):.0f}% of this VM's CPU time during "
              "these runs (steal); such runs measure the machine, not the broker: rerun")
    if len(runs) > 1 or (args.batch, args.size) == (1000, 100):
        print(f"median of {len(runs)} run(s):")
        for name, rate in medians.items():
            verdict = "met" if rate >= TARGET_MSGS_PER_S else "missed"
            print(f"  {name:5} {rate:>11,.0f} msgs/s  target {TARGET_MSGS_PER_S:,}: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
