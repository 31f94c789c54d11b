"""Throughput of the TANK transport: produce and consume, batches of 1,000 x 100 bytes,
with the project's independent TANK client, and the Iggy transport as the reference in
the same run.

Starts ``python -m broker serve`` with ``tank_port`` on a free loopback port and a fresh
data directory, creates topic ``bench`` (CreateTopic, one partition per connection), and
drives it with the independent client (``broker.tank.client``):

* produce: each connection sends Produce requests of one bundle of ``--batch`` messages of
  ``--size`` bytes (distinct random contents, so snappy gains nothing; built once by the
  client's encoder, as libtank would build it: snappy, since it holds more than 1 KiB) to
  its own partition, one request at a time, for ``--seconds``;
* consume: each connection then consumes its partition from seq 1 with a fetch size of
  ``--batch`` messages' worth of bytes plus 10 %, one request at a time, until it has read
  everything it produced; messages are counted from the bundle headers (the client's
  full decoder is checked on the first and last replies), and a cut last bundle is asked
  for again, as a TANK application does.

Then runs ``bench.iggy`` with the same settings on a fresh broker and prints both, with
TANK / Iggy ratios. Per phase: messages/s, MB/s of content, batch latency p50/p99, the
broker process's CPU time per message and the hypervisor's steal time.
``python -m bench.tank --help`` for the options.

Must not import: broker internals beyond the TANK client (and bench.iggy for the
reference and its measuring helpers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

from bench.iggy import (
    TARGET_MSGS_PER_S,
    Phase,
    _cpu_per_msg,
    _cpu_seconds,
    _machine_ticks,
    _percentile,
    _steal_percent,
    machine,
)
from bench.iggy import run_bench as run_iggy
from bench.serve import start_serve, stop_serve
from broker.tank import client as tc
from broker.tank.client.wire import In, split_frames

__all__ = ["run_bench", "main", "count_chunk"]

TOPIC = b"bench"


def count_chunk(chunk: bytes) -> int:
    """Messages in the whole bundles of a consume chunk (a cut last bundle counts none),
    read from the bundle headers only."""
    src = In(chunk)
    total = 0
    while src.left():
        try:
            length = src.var()
        except Exception:  # noqa: BLE001 - a varint cut by the fetch size
            break
        if src.pos + length > len(chunk):
            break
        flags = chunk[src.pos]
        count = (flags >> 2) & 15
        if not count:
            count = In(chunk, src.pos + 1).var()
        total += count
        src.pos += length
    return total


class _Conn:
    """The independent client's socket, with a reply reader that keeps one buffer."""

    def __init__(self, port: int) -> None:
        self.client = tc.TankClient("127.0.0.1", port, timeout=60)
        self.client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def call(self, frame: bytes) -> tuple[int, bytes]:
        sock = self.client.sock
        sock.sendall(frame)
        while True:
            frames = split_frames(self.buf)
            for msg_id, payload in frames:
                if msg_id != 3:  # pings are ignored
                    return msg_id, payload
            data = sock.recv(1 << 20)
            if not data:
                raise ConnectionError("broker closed the connection")
            self.buf += data

    def close(self) -> None:
        self.client.close()


def _produce_worker(port: int, partition: int, frame: bytes, entries: list, batch: int,
                    deadline: float, out: dict[int, tuple[int, list[float]]]) -> None:
    conn = _Conn(port)
    sent = 0
    latencies: list[float] = []
    while time.monotonic() < deadline:
        began = time.perf_counter()
        _msg_id, payload = conn.call(frame)
        latencies.append(time.perf_counter() - began)
        _rid, acks, faults = tc.decode_produce_reply(payload, entries)
        if faults:
            raise RuntimeError(f"produce faults: {faults}")
        sent += batch
    conn.close()
    out[partition] = (sent, latencies)


def _consume_worker(port: int, partition: int, total: int, fetch_size: int, deadline: float,
                    out: dict[int, tuple[int, int, list[float]]]) -> None:
    conn = _Conn(port)
    seq = 1
    read = 0
    chunk_bytes = 0
    latencies: list[float] = []
    rid = 0
    checked = False
    while read < total and time.monotonic() < deadline:
        rid += 1
        entries = [(TOPIC, partition, seq, fetch_size)]
        began = time.perf_counter()
        _msg_id, payload = conn.call(tc.build_consume(rid, entries))
        latencies.append(time.perf_counter() - began)
        header_length = int.from_bytes(payload[:4], "little")
        chunk = payload[4 + header_length:]
        count = count_chunk(chunk)
        if not checked or read + count >= total:  # the client's own decoder agrees
            got = tc.decode_consume_reply(payload, entries).data[0]
            assert got.messages[0].seq == seq and len(got.messages) >= count, (seq, count)
            checked = True
        if count == 0:
            fetch_size *= 2
            continue
        read += count
        chunk_bytes += len(chunk)
        seq += count
    conn.close()
    out[partition] = (read, chunk_bytes, latencies)


def _start_broker(workdir: Path, fsync: str, python: str) -> tuple[subprocess.Popen[bytes], int]:
    proc, port, _log = start_serve(workdir, {
        "data_dir": str(workdir / "data"), "port": 0, "tank_port": 0,
        "log_level": "warning", "storage": {"fsync": fsync}}, "tank", python)
    return proc, port


def run_bench(*, seconds: float, connections: int, batch: int, size: int, fsync: str,
              python: str = sys.executable) -> list[Phase]:
    """Start a broker, run the produce then the consume phase, stop it."""
    workdir = Path(tempfile.mkdtemp(prefix="skerry-tank-bench-"))
    proc, port = _start_broker(workdir, fsync, python)
    try:
        admin = tc.TankClient("127.0.0.1", port)
        fault = admin.create_topic(TOPIC, connections)
        admin.close()
        if fault is not None:
            raise RuntimeError(f"create topic: {fault}")
        ts = int(time.time() * 1000)
        msgs = [tc.Msg(os.urandom(size), b"", ts) for _ in range(batch)]
        entries = [[(TOPIC, p, msgs)] for p in range(connections)]
        frames = [tc.build_produce(1, entries[p]) for p in range(connections)]
        sent: dict[int, tuple[int, list[float]]] = {}
        cpu_began, ticks_began = _cpu_seconds(proc.pid), _machine_ticks()
        began = time.monotonic()
        threads = [threading.Thread(target=_produce_worker, args=(
            port, p, frames[p], entries[p], batch, began + seconds, sent))
            for p in range(connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - began
        cpu_sent, ticks_sent = _cpu_seconds(proc.pid), _machine_ticks()
        lat = [x for _, ls in sent.values() for x in ls]
        total_sent = sum(n for n, _ in sent.values())
        phases = [Phase("produce", connections, total_sent, elapsed, total_sent * size,
                        _percentile(lat, 0.5), _percentile(lat, 0.99),
                        _cpu_per_msg(cpu_began, cpu_sent, total_sent),
                        _steal_percent(ticks_began, ticks_sent))]
        fetch_size = int(batch * (size + 2) * 1.1)
        read: dict[int, tuple[int, int, list[float]]] = {}
        cpu_began, ticks_began = _cpu_seconds(proc.pid), _machine_ticks()
        began = time.monotonic()
        threads = [threading.Thread(target=_consume_worker, args=(
            port, p, sent[p][0], fetch_size, began + 4 * seconds, read))
            for p in range(connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - began
        lat = [x for _, _, ls in read.values() for x in ls]
        total_read = sum(n for n, _, _ in read.values())
        phases.append(Phase("consume", connections, total_read, elapsed, total_read * size,
                            _percentile(lat, 0.5), _percentile(lat, 0.99),
                            _cpu_per_msg(cpu_began, _cpu_seconds(proc.pid), total_read),
                            _steal_percent(ticks_began, _machine_ticks())))
        if total_read != total_sent:
            raise RuntimeError(f"consumed {total_read} messages of {total_sent} produced")
        return phases
    finally:
        stop_serve(proc)
        shutil.rmtree(workdir, ignore_errors=True)


def _line(p: Phase) -> str:
    cpu = "" if p.server_cpu_us_per_msg is None else \
        f"  broker CPU {p.server_cpu_us_per_msg:.2f} us/msg"
    if p.steal_percent is not None:
        cpu += f"  steal {p.steal_percent:.0f}%"
    return (f"{p.name:8} {p.connections} conn  {p.rate:>11,.0f} msgs/s  "
            f"{p.payload_bytes / p.seconds / 1e6:7.1f} MB/s  batch p50 {p.p50_ms:6.2f} ms  "
            f"p99 {p.p99_ms:6.2f} ms  ({p.messages:,} msgs in {p.seconds:.2f} s){cpu}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="produce phase length")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1000, help="messages per bundle")
    parser.add_argument("--size", type=int, default=100, help="content bytes per message")
    parser.add_argument("--fsync", choices=("always", "interval", "never"), default="never")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each, on fresh brokers; medians are reported")
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the Iggy reference runs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    settings = {"seconds": args.seconds, "connections": args.connections, "batch": args.batch,
                "size": args.size, "fsync": args.fsync}
    tank_runs, iggy_runs = [], []
    for _ in range(max(1, args.repeat)):  # alternated, so both see the same machine
        tank_runs.append(run_bench(**settings))
        if not args.no_reference:
            iggy_runs.append(run_iggy(**settings))
    tank = {p.name: statistics.median(run[i].rate for run in tank_runs)
            for i, p in enumerate(tank_runs[0])}
    iggy = {p.name: statistics.median(run[i].rate for run in iggy_runs)
            for i, p in enumerate(iggy_runs[0])} if iggy_runs else {}
    if args.json:
        print(json.dumps({"machine": machine(), **settings, "tank_median": tank,
                          "iggy_median": iggy,
                          "tank_runs": [[asdict(p) | {"rate": p.rate} for p in r]
                                        for r in tank_runs],
                          "iggy_runs": [[asdict(p) | {"rate": p.rate} for p in r]
                                        for r in iggy_runs]}, indent=2))
        return 0
    print(f"# {machine()}; storage.fsync={args.fsync}; batches of {args.batch} x {args.size} B")
    for i, run in enumerate(tank_runs):
        print(f"run {i + 1}:")
        for p in run:
            print("  tank " + _line(p))
        if iggy_runs:
            for p in iggy_runs[i]:
                print("  iggy " + _line(p))
    print(f"median of {len(tank_runs)} run(s):")
    print("| | TANK msgs/s | Iggy msgs/s (reference) | TANK / Iggy | target 500,000 |")
    print("| --- | ---: | ---: | ---: | --- |")
    for (name, rate), ref in zip(tank.items(), (iggy.get("send"), iggy.get("poll")),
                                 strict=True):
        ratio = f"{rate / ref:.2f}" if ref else "-"
        verdict = "met" if rate >= TARGET_MSGS_PER_S else "missed"
        print(f"| {name} | {rate:,.0f} | {f'{ref:,.0f}' if ref else '-'} | {ratio} | {verdict} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
