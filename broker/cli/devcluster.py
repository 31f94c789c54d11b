"""``skerry dev-cluster``: a cluster on this machine in one command, for trying things out.

Owns: choosing free loopback ports, writing one YAML configuration per broker under one
folder, starting a local etcd when the ``etcd`` binary is installed (else the brokers run in
the operator-driven mode, said in one line), starting the brokers as child processes
(``python -m broker serve``), printing how to reach them, and stopping every child on
Ctrl-C or SIGTERM (SIGTERM, then SIGKILL after a grace period): the brokers first, etcd
once they have all exited (a broker revokes its etcd lease on the way out).

Must not import: Twisted or the broker's server side: the brokers are separate processes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

__all__ = ["DevClusterOptions", "run_dev_cluster"]

_LISTEN_RE = re.compile(rb"skerry listening on v1=([^\s:]+):(\d+)")


@dataclass(frozen=True)
class DevClusterOptions:
    brokers: int = 3
    directory: Path = Path("skerry-dev-cluster")
    topic: str = "demo"
    partitions: int = 3
    etcd: bool = True
    """Start etcd when the binary is there (False: always the operator-driven mode)."""
    startup_timeout: float = 60.0


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (held open together while choosing)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def etcd_is_healthy(endpoint: str, context: ssl.SSLContext | None = None) -> bool:
    """One probe of an etcd member's ``/health``: True when it answers healthy. A member
    that is not listening yet (or is gone) is simply not healthy: ``OSError`` is False."""
    try:
        with urllib.request.urlopen(endpoint + "/health", timeout=1,
                                    context=context) as answer:
            return bool(json.loads(answer.read()).get("health") == "true")
    except OSError:
        return False


def _wait_etcd(endpoint: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"etcd exited with status {proc.returncode}")
        if etcd_is_healthy(endpoint):
            return
        time.sleep(0.1)
    raise RuntimeError(f"etcd did not become healthy within {timeout:g} s")


def _wait_listening(log: Path, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and _LISTEN_RE.search(log.read_bytes()):
            return
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"a broker exited with status {proc.returncode}:\n{tail}")
        time.sleep(0.05)
    raise RuntimeError(f"a broker did not start within {timeout:g} s (log: {log})")


def _stop_all(procs: list[subprocess.Popen[bytes]], grace: float = 15.0,
              etcd: subprocess.Popen[bytes] | None = None) -> None:
    """Stop the brokers (SIGTERM, SIGKILL after ``grace``), then, once every one of them has
    exited, etcd: a broker leaving revokes its etcd lease, which needs etcd still up."""
    _terminate([p for p in procs if p is not etcd], grace)
    if etcd is not None:
        _terminate([etcd], grace)


def _terminate(procs: list[subprocess.Popen[bytes]], grace: float) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_dev_cluster(options: DevClusterOptions, out: TextIO,
                    stop_requested: Callable[[], bool]) -> int:
    """Start etcd (maybe) and the brokers, print where they are, run until
    ``stop_requested()`` or a child dies, then stop everything. Exit status: 0 after a
    requested stop, 1 when startup failed. A child that dies later is reported and the
    others keep running (killing a broker is how one watches a failover)."""
    root = options.directory.resolve()
    root.mkdir(parents=True, exist_ok=True)
    ports = free_ports(options.brokers + 2)
    broker_ports = ports[:options.brokers]
    book = {i: f"127.0.0.1:{port}" for i, port in enumerate(broker_ports)}
    procs: list[subprocess.Popen[bytes]] = []
    etcd_binary = shutil.which("etcd") if options.etcd else None
    etcd: subprocess.Popen[bytes] | None = None
    endpoint = None
    try:
        if etcd_binary is not None:
            endpoint = f"http://127.0.0.1:{ports[-2]}"
            peer = f"http://127.0.0.1:{ports[-1]}"
            log = open(root / "etcd.log", "ab")
            # Its own session, like the brokers': the terminal's Ctrl-C (SIGINT to the whole
            # foreground process group) must not reach it; it is stopped last, by us.
            etcd = subprocess.Popen(
                [etcd_binary, "--name", "dev", "--data-dir", str(root / "etcd"),
                 "--listen-client-urls", endpoint, "--advertise-client-urls", endpoint,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", f"dev={peer}", "--logger", "zap",
                 "--log-level", "error"], stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
            procs.append(etcd)
            log.close()
            _wait_etcd(endpoint, procs[-1], options.startup_timeout)
            print(f"etcd: {endpoint} (data in {root / 'etcd'})", file=out, flush=True)
        else:
            why = "etcd is not installed (apt-get install etcd-server)" if options.etcd \
                else "--no-etcd"
            print(f"{why}: the brokers run in the operator-driven mode (failover with "
                  "`skerry cluster elect`)", file=out, flush=True)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        logs = []
        for broker_id, port in enumerate(broker_ports):
            folder = root / f"broker{broker_id}"
            folder.mkdir(exist_ok=True)
            cluster: dict[str, Any] = {"broker_id": broker_id, "brokers": book}
            config: dict[str, Any] = {
                "port": port, "data_dir": str(folder / "data"), "log_level": "info",
                "cluster": cluster,
                "replication": {"replica_lag_timeout_ms": 3000, "fetch_wait_ms": 200,
                                "retry_backoff_ms": 100},
            }
            rf = min(3, options.brokers)
            topic = {"partitions": options.partitions, "replication_factor": rf,
                     "min_insync_replicas": min(2, rf)}
            if endpoint is not None:
                cluster["id"] = "dev"
                cluster["etcd"] = {"endpoints": [endpoint], "lease_ttl_ms": 2000}
                config["defaults"] = topic
            else:
                config["auto_create_topics"] = False
                config["topics"] = {options.topic: topic}
            path = folder / "skerry.yaml"
            path.write_text(yaml.safe_dump(config, sort_keys=False))
            log_path = folder / "broker.log"
            log = open(log_path, "ab")
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "broker", "serve", "--config", str(path)],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
            log.close()
            logs.append((log_path, procs[-1]))
        for log_path, proc in logs:
            _wait_listening(log_path, proc, options.startup_timeout)
    except (RuntimeError, OSError) as exc:
        print(f"skerry dev-cluster: {exc}", file=sys.stderr, flush=True)
        _stop_all(procs, etcd=etcd)
        return 1
    bootstrap = ",".join(book.values())
    for broker_id, address in book.items():
        print(f"broker {broker_id}: {address} (config, data and log in "
              f"{root / f'broker{broker_id}'})", file=out)
    topic_line = (f"topic {options.topic}: {options.partitions} partitions, replicated "
                  f"{min(3, options.brokers)} times" if endpoint is None else
                  "topics: created cluster-wide on first use (or skerry topics create)")
    print(topic_line, file=out)
    print(f"try:  export SKERRY_BOOTSTRAP={book[0]}\n"
          f"      seq 100 | sed 's/.*/k&:v&/' | skerry produce {options.topic} --acks all\n"
          f"      skerry cluster status\n"
          f"all brokers: {bootstrap}; Ctrl-C stops them all", file=out, flush=True)
    told: set[int] = set()
    try:
        while not stop_requested():
            for index, proc in enumerate(procs):
                # a broker killed on purpose (to watch a failover) is reported, not fatal
                if proc.poll() is not None and index not in told:
                    told.add(index)
                    print(f"skerry dev-cluster: process {proc.pid} exited (status "
                          f"{proc.returncode}); the others keep running", file=out,
                          flush=True)
            time.sleep(0.1)
    finally:
        _stop_all(procs, etcd=etcd)
    print("dev-cluster stopped", file=out, flush=True)
    return 0
