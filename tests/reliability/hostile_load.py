"""Load for the hostile-client runs, each kind in its own child process so that the load
generators never share a GIL (or a scheduler slot) with the well-behaved client whose
latency is measured.

Owns:

- the roles a child process plays (``python -m tests.reliability.hostile_load <role> ...``):
  ``active`` (N well-behaved clients, each sending one PRODUCE at a fixed, paced rate and
  waiting for its reply), ``idle`` (N connections that never send anything), ``slowloris``
  (N connections that send a PING one byte at a time, a byte per interval), ``overlong``
  (connections that send an endless line without a newline until the broker cuts them off,
  at a paced rate), ``random`` (sessions of random bytes, at a paced rate) and
  ``nonreader`` (N connections with a small receive buffer that pipeline CONSUMEs and never
  read a reply). Each prints ``ready`` once its connections are open;
- ``LoadProcess``: starts a role and stops it (SIGTERM);
- ``good_client_p99``: the p99 latency of one blocking client's requests.

Must not import: the broker (it talks to one over TCP only).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO

from tests.support import ROOT, V1Client

__all__ = ["LoadProcess", "good_client_p99", "main"]


class LoadProcess:
    """One role in a child process; ``start`` waits for its ``ready`` line."""

    def __init__(self, role: str, port: int, **options: float | int) -> None:
        self.argv = [sys.executable, "-m", "tests.reliability.hostile_load", role, str(port)]
        for name, value in options.items():
            self.argv += [f"--{name.replace('_', '-')}", str(value)]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> LoadProcess:
        self.proc = subprocess.Popen(self.argv, cwd=str(ROOT), stdout=subprocess.PIPE,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
        assert self.proc.stdout is not None
        ready = _readline_within(self.proc.stdout, timeout)
        if ready.strip() != b"ready":
            self.stop()
            raise RuntimeError(f"{self.argv[3]} load did not start: {ready!r}")
        return self

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> LoadProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _readline_within(stream: IO[bytes], timeout: float) -> bytes:
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            return b"<timeout>"
        return stream.readline()
    finally:
        sel.close()


def good_client_p99(port: int, samples: int = 1000, gap_s: float = 0.002,
                    command: str = "PRODUCE|t good:v") -> float:
    """Seconds: the 99th percentile of ``samples`` request/reply round trips of one
    blocking client, ``gap_s`` apart (a well-behaved client, not a load of its own)."""
    client = V1Client(port, timeout=30)
    try:
        for i in range(20):  # warm up: connection accepted, topic known
            client.request(f"V1|w{i}|{command}")
        times = []
        for i in range(samples):
            started = time.perf_counter()
            reply = client.request(f"V1|{i}|{command}")
            times.append(time.perf_counter() - started)
            if "|OK" not in reply:
                raise RuntimeError(f"good client refused: {reply}")
            time.sleep(gap_s)
    finally:
        client.close()
    times.sort()
    return times[min(len(times) - 1, int(len(times) * 0.99))]


# ---------------------------------------------------------------------- the roles

def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _active(port: int, clients: int, rate: float, stop: threading.Event) -> None:
    """``clients`` threads, each one PRODUCE per 1/rate s (a fixed schedule, not flat out)."""
    ready = threading.Barrier(clients + 1)

    def one(k: int) -> None:
        client = V1Client(port, timeout=30)
        ready.wait()
        period = 1.0 / rate
        due = time.monotonic() + random.Random(k).uniform(0, period)
        i = 0
        try:
            while not stop.is_set():
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                due += period
                i += 1
                client.request(f"V1|{i}|PRODUCE|t a{k}:v{i}")
        except OSError:
            pass
        finally:
            client.close()

    threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(clients)]
    for thread in threads:
        thread.start()
    ready.wait()
    _ready()
    stop.wait()


def _idle(port: int, clients: int, stop: threading.Event) -> None:
    held = [_connect(port) for _ in range(clients)]
    _ready()
    stop.wait()
    for sock in held:
        sock.close()


def _slowloris(port: int, clients: int, interval: float, stop: threading.Event) -> None:
    """Each connection sends ``V1|s|PING|\\n`` one byte per ``interval`` seconds (spread
    out), reading and dropping the replies."""
    line = b"V1|s|PING|\n"
    socks = [_connect(port) for _ in range(clients)]
    for sock in socks:
        sock.setblocking(False)
    _ready()
    position = 0
    while not stop.wait(interval / max(1, clients)):
        slot = position % clients
        index = (position // clients) % len(line)
        position += 1
        try:
            socks[slot].send(line[index:index + 1])
            socks[slot].recv(4096)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:  # closed (it should not be: it is not idle); open another
            socks[slot].close()
            socks[slot] = _connect(port)
            socks[slot].setblocking(False)


def _overlong(port: int, rate: float, chunk: int, stop: threading.Event) -> None:
    """``rate`` times a second: a connection that sends ``chunk`` bytes of one endless line
    at a time until the broker closes it."""
    _ready()
    filler = b"x" * chunk
    while not stop.wait(1.0 / rate):
        sock = _connect(port)
        sock.settimeout(5)
        try:
            for _ in range(10_000):
                sock.sendall(filler)
        except OSError:
            pass  # closed by the broker: what should happen
        finally:
            sock.close()


def _random(port: int, rate: float, stop: threading.Event) -> None:
    """``rate`` times a second: a session of 1-3,000 random bytes, then a short read."""
    rng = random.Random(7)
    _ready()
    while not stop.wait(1.0 / rate):
        sock = _connect(port)
        sock.settimeout(0.05)
        try:
            sock.sendall(rng.randbytes(rng.randint(1, 3000)))
            sock.recv(65536)
        except OSError:
            pass
        finally:
            sock.close()


def _nonreader(port: int, clients: int, stop: threading.Event) -> None:
    """Connections with a 4 KiB receive buffer that pipeline CONSUMEs 20 times a second
    and never read: the broker must stop reading from them, not buffer their replies."""
    burst = b"".join(b"V1|%d|CONSUME|t 0 0 max=1000\n" % i for i in range(200))
    socks = []
    for _ in range(clients):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.setblocking(False)
        socks.append(sock)
    _ready()
    while not stop.wait(0.05):
        for sock in socks:
            try:
                sock.send(burst)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                pass


def _ready() -> None:
    sys.stdout.write("ready\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hostile-client load roles")
    parser.add_argument("role", choices=("active", "idle", "slowloris", "overlong", "random",
                                         "nonreader"))
    parser.add_argument("port", type=int)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--chunk", type=int, default=8192)
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if args.role == "active":
        _active(args.port, args.clients, args.rate, stop)
    elif args.role == "idle":
        _idle(args.port, args.clients, stop)
    elif args.role == "slowloris":
        _slowloris(args.port, args.clients, args.interval, stop)
    elif args.role == "overlong":
        _overlong(args.port, args.rate, args.chunk, stop)
    elif args.role == "random":
        _random(args.port, args.rate, stop)
    else:
        _nonreader(args.port, args.clients, stop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
