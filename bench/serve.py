"""One ``skerry serve`` child for the transport benchmarks (``bench.iggy``, ``bench.kafka``,
``bench.tank``): started with a given configuration in a work directory, ready once its
start-up line names the listener's port, stopped with SIGTERM (kill after 30 s).

Must not import: broker internals (a benchmark drives the broker as a user would).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["start_serve", "stop_serve", "REPO_ROOT"]

REPO_ROOT = Path(__file__).resolve().parent.parent


def start_serve(workdir: Path, config: Mapping[str, Any], listener: str,
                python: str = sys.executable, timeout: float = 60.0
                ) -> tuple[subprocess.Popen[bytes], int, Path]:
    """``python -m broker serve`` with ``config`` (written as JSON, which the YAML loader
    reads) and its log in ``workdir/broker.log``; returns ``(process, the port of
    listener, log path)`` once the start-up line names ``listener`` (``"iggy"``,
    ``"kafka"``, ``"tank"``) on 127.0.0.1. ``RuntimeError`` with the log when it does not
    start."""
    ready = re.compile(rf"skerry listening on .*\b{re.escape(listener)}=127\.0\.0\.1:(\d+)")
    path = workdir / "skerry.yaml"
    path.write_text(json.dumps(dict(config)))
    log_path = workdir / "broker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([python, "-m", "broker", "serve", "--config", str(path),
                                 "--log-level", "info"], cwd=str(REPO_ROOT), stdout=log,
                                stderr=log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = ready.search(log_path.read_text(errors="replace"))
        if match:
            return proc, int(match.group(1)), log_path
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError("broker did not start:\n" + log_path.read_text(errors="replace"))


def stop_serve(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
