"""Starting and stopping the servers a benchmark run needs, and describing the machine.

Owns: launching Skerry (``python -m broker serve --config FILE`` from the repository root,
ready when it logs ``skerry listening on v1=127.0.0.1:<port>``), Redis (``redis-server``
with every setting on the command line, so no config file from /etc is read; bound to
127.0.0.1, ``--save ''``) and the canned-reply responder, each on a free loopback port with
its own temporary data directory; stopping them (SIGTERM, then SIGKILL), also when the run
dies (the children get SIGTERM if this process goes away: PR_SET_PDEATHSIG); and the
machine description printed with the results.

Must not import: broker internals; Skerry is started as a separate process like Redis.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "REPO_ROOT",
    "ServerError",
    "ServerProcess",
    "free_port",
    "start_skerry",
    "start_redis",
    "start_responder",
    "build_c_responder",
    "build_c_tool",
    "run_refclient",
    "machine_info",
    "filesystem_of",
    "skerry_config",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"

SkerryFsync = Literal["always", "interval", "never"]
RedisPersistence = Literal["none", "always", "everysec"]

_READY = re.compile(r"skerry listening on v1=127\.0\.0\.1:(\d+)")
_PR_SET_PDEATHSIG = 1


class ServerError(RuntimeError):
    """A server did not start, or died."""


@dataclass
class ServerProcess:
    """A running server: its process, port, data directory and log file."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    data_dir: Path
    log_path: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM, wait up to ``timeout_s``, then SIGKILL; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def free_port(host: str = HOST) -> int:
    """A TCP port that was free a moment ago on ``host``."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _child_setup(cpus: Sequence[int] | None) -> Callable[[], None]:
    def setup() -> None:
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if cpus:
            os.sched_setaffinity(0, cpus)

    return setup


def _spawn(args: Sequence[str], log_path: Path, cpus: Sequence[int] | None,
           cwd: Path | None = None) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            list(args), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            cwd=cwd, start_new_session=True, preexec_fn=_child_setup(cpus))


def _wait_until(server: ServerProcess, ready: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not server.alive():
            raise ServerError(f"{server.name} exited with code {server.proc.returncode}:\n"
                              f"{server.log_tail()}")
        if ready():
            return
        time.sleep(0.05)
    server.stop()
    raise ServerError(f"{server.name} not ready after {timeout_s:.0f} s:\n{server.log_tail()}")


def _answers(port: int, request: bytes, expect: bytes) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as sock:
            sock.sendall(request)
            got = b""
            while not got.endswith(b"\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                got += chunk
            return got.startswith(expect)
    except OSError:
        return False


def skerry_config(data_dir: Path, fsync: SkerryFsync, topics: Sequence[str],
                  fsync_interval_ms: int = 1000) -> dict[str, object]:
    """The broker configuration of a benchmark run: free port, one partition per topic."""
    return {
        "host": HOST,
        "port": 0,
        "data_dir": str(data_dir),
        "log_level": "info",
        "storage": {"fsync": fsync, "fsync_interval_ms": fsync_interval_ms},
        "topics": {name: {"partitions": 1, "replication_factor": 1} for name in topics},
    }


def start_skerry(workdir: Path, fsync: SkerryFsync, topics: Sequence[str], *,
                 python: str = sys.executable, fsync_interval_ms: int = 1000,
                 cpus: Sequence[int] | None = None, timeout_s: float = 60.0,
                 reactor: str | None = None) -> ServerProcess:
    """Start a broker with a fresh data directory under ``workdir``; wait until it listens
    (``reactor``: the broker's ``reactor`` setting, None for its default)."""
    data_dir = workdir / f"skerry-{fsync}"
    data_dir.mkdir(parents=True)
    config = workdir / f"skerry-{fsync}.yaml"
    # JSON is YAML: the broker's YAML loader reads this file as is.
    settings = skerry_config(data_dir, fsync, topics, fsync_interval_ms)
    if reactor is not None:
        settings["reactor"] = reactor
    config.write_text(json.dumps(settings, indent=2))
    log_path = workdir / f"skerry-{fsync}.log"
    proc = _spawn([python, "-m", "broker", "serve", "--config", str(config)], log_path, cpus,
                  cwd=REPO_ROOT)
    server = ServerProcess(f"skerry (fsync={fsync})", proc, 0, data_dir, log_path)

    def listening() -> bool:
        match = _READY.search(log_path.read_text(errors="replace"))
        if match is None:
            return False
        server.port = int(match.group(1))
        return True

    _wait_until(server, listening, timeout_s)
    if not _answers(server.port, b"V1|1|PING|\n", b"V1|1|OK"):
        server.stop()
        raise ServerError(f"{server.name} listens on {server.port} but does not answer PING:\n"
                          f"{server.log_tail()}")
    return server


def _redis_args(port: int, data_dir: Path, persistence: RedisPersistence) -> list[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise ServerError("redis-server is not installed (bench/run_all installs it)")
    args = [binary, "--port", str(port), "--bind", HOST, "--protected-mode", "yes",
            "--daemonize", "no", "--dir", str(data_dir), "--save", "",
            "--logfile", "", "--io-threads", "1"]
    if persistence == "none":
        args += ["--appendonly", "no"]
    else:
        args += ["--appendonly", "yes", "--appendfsync", persistence]
    return args


def start_redis(workdir: Path, persistence: RedisPersistence, *,
                cpus: Sequence[int] | None = None, timeout_s: float = 20.0) -> ServerProcess:
    """Start ``redis-server`` with a fresh data directory under ``workdir``."""
    data_dir = workdir / f"redis-{persistence}"
    data_dir.mkdir(parents=True)
    log_path = workdir / f"redis-{persistence}.log"
    last: ServerError | None = None
    for _ in range(3):  # the free port may be taken between probe and bind: try another
        port = free_port()
        proc = _spawn(_redis_args(port, data_dir, persistence), log_path, cpus)
        server = ServerProcess(f"redis (persistence={persistence})", proc, port, data_dir,
                               log_path)
        try:
            _wait_until(server, lambda p=port: _answers(p, b"PING\r\n", b"+PONG"), timeout_s)
            return server
        except ServerError as exc:
            server.stop()
            last = exc
    assert last is not None
    raise last


def build_c_tool(workdir: Path, name: str) -> Path | None:
    """Compile ``bench/<name>.c`` into ``workdir`` (once); None without a C compiler."""
    binary = workdir / name
    if binary.exists():
        return binary
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        return None
    built = subprocess.run([compiler, "-O2", "-o", str(binary),
                            str(REPO_ROOT / "bench" / f"{name}.c")],
                           capture_output=True, text=True)
    if built.returncode != 0:
        print(f"bench: could not build bench/{name}.c:\n{built.stderr}", file=sys.stderr)
        return None
    return binary


def build_c_responder(workdir: Path) -> Path | None:
    """Compile ``bench/responder.c`` into ``workdir`` (once); None without a C compiler."""
    return build_c_tool(workdir, "responder")


def run_refclient(workdir: Path, port: int, protocol: str, request: bytes, *,
                  connections: int, warmup_s: float, duration_s: float,
                  cpus: Sequence[int] | None = None) -> dict[str, float]:
    """Run the C request/response client (``bench/refclient.c``) against ``port`` and
    return its JSON result (``requests``, ``window_s``, ``messages_per_s``).

    Raises ServerError when there is no C compiler, or when the client fails (an error
    reply, a lost connection) or outlives its own time bound by 30 s.
    """
    binary = build_c_tool(workdir, "refclient")
    if binary is None:
        raise ServerError("no C compiler for bench/refclient.c")
    request_path = workdir / f"refclient-{protocol}.req"
    request_path.write_bytes(request)
    args = [str(binary), str(port), str(connections), f"{warmup_s:g}", f"{duration_s:g}",
            str(request_path), protocol]
    try:
        done = subprocess.run(args, capture_output=True, text=True,
                              timeout=warmup_s + duration_s + 30, preexec_fn=_child_setup(cpus))
    except subprocess.TimeoutExpired as exc:
        raise ServerError("the C reference client did not finish") from exc
    if done.returncode != 0:
        raise ServerError(f"the C reference client failed: {done.stderr.strip()[:200]}")
    return json.loads(done.stdout)


def start_responder(workdir: Path, protocol: str, mode: str, *, batch: int, value_size: int,
                    python: str = sys.executable, cpus: Sequence[int] | None = None,
                    timeout_s: float = 20.0) -> ServerProcess:
    """Start the canned-reply responder on a free port: the C one (``bench/responder.c``)
    when a C compiler is present, else ``python -m bench.echo``."""
    from bench.echo import canned_reply, request_marker

    reply_path = workdir / f"reply-{protocol}-{mode}.bin"
    reply_path.write_bytes(canned_reply(protocol, mode, batch, value_size))
    marker = request_marker(protocol, mode).hex()
    binary = build_c_responder(workdir)
    log_path = workdir / f"responder-{protocol}-{mode}.log"
    last: ServerError | None = None
    for _ in range(3):
        port = free_port()
        if binary is not None:
            args = [str(binary), str(port), marker, str(reply_path)]
            kind = "C"
        else:
            args = [python, "-m", "bench.echo", "--protocol", protocol, "--mode", mode,
                    "--port", str(port), "--batch", str(batch), "--value-size", str(value_size)]
            kind = "Python"
        proc = _spawn(args, log_path, cpus, cwd=REPO_ROOT)
        server = ServerProcess(f"{kind} responder ({protocol} {mode})", proc, port, workdir,
                               log_path)

        def listening() -> bool:
            return "responder listening" in log_path.read_text(errors="replace")

        try:
            _wait_until(server, listening, timeout_s)
            return server
        except ServerError as exc:
            server.stop()
            last = exc
    assert last is not None
    raise last


def start_twisted_ceiling(workdir: Path, mode: str, *, batch: int, value_size: int,
                          python: str = sys.executable, cpus: Sequence[int] | None = None,
                          timeout_s: float = 20.0) -> ServerProcess:
    """Start the do-nothing Twisted line responder (``bench/twisted_ceiling.py``) on a free
    port: the reactor's own ceiling for a V1 load of this mode."""
    log_path = workdir / f"twisted-ceiling-{mode}.log"
    last: ServerError | None = None
    for _ in range(3):
        port = free_port()
        proc = _spawn([python, "-m", "bench.twisted_ceiling", "--mode", mode, "--port", str(port),
                       "--batch", str(batch), "--value-size", str(value_size)],
                      log_path, cpus, cwd=REPO_ROOT)
        server = ServerProcess(f"Twisted line responder ({mode})", proc, port, workdir, log_path)

        def listening() -> bool:
            return "responder listening" in log_path.read_text(errors="replace")

        try:
            _wait_until(server, listening, timeout_s)
            return server
        except ServerError as exc:
            server.stop()
            last = exc
    assert last is not None
    raise last


def _first_line(path: str, prefix: str) -> str | None:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def filesystem_of(path: Path) -> str:
    """The type of the filesystem ``path`` is on (from /proc/mounts), e.g. ``ext4``."""
    best, kind = "", "unknown"
    target = str(path.resolve())
    try:
        with open("/proc/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) < 3:
                    continue
                mount = fields[1]
                inside = target == mount or target.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) > len(best):
                    best, kind = mount, fields[2]
    except OSError:
        pass
    return kind


def machine_info(data_root: Path | None = None) -> dict[str, str]:
    """CPU model, cores, memory, OS, Python and Redis versions, the load average now, and
    the filesystem the servers' data directories go to (fsync costs nothing on tmpfs)."""
    mem_kb = _first_line("/proc/meminfo", "MemTotal")
    mem = f"{int(mem_kb.split()[0]) / 1024 / 1024:.1f} GiB" if mem_kb else "unknown"
    redis = "not installed"
    binary = shutil.which("redis-server")
    if binary:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
        match = re.search(r"v=(\S+)", out)
        redis = match.group(1) if match else out.strip()
    load1, load5, _ = os.getloadavg()
    return {
        "cpu": _first_line("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "cores": str(os.cpu_count()),
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "redis": redis,
        "loadavg": f"{load1:.2f} (1 min), {load5:.2f} (5 min)",
        "data_fs": filesystem_of(data_root or Path(tempfile.gettempdir())),
        "data_root": str(data_root or tempfile.gettempdir()),
    }
