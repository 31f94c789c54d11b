"""bench/durable.py: a short (d) load against a real broker with fsync always prints the
group committer's batch size and fsync time, read from the broker's /metrics."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import durable


@pytest.mark.slow
def test_a_short_durable_run_prints_messages_per_fsync(capsys: pytest.CaptureFixture[str]) -> None:
    # Without perf stat: in three fresh-clone runs, a perf attached to the broker as the
    # suite's first user of it did not stop on SIGINT, and the broker's fsyncs took 1.4 s
    # each meanwhile (no message in the window); the fsync count is a side figure.
    assert durable.main(["--seconds", "1", "--connections", "8", "--no-perf"]) == 0
    out = capsys.readouterr().out
    assert "fsync syscalls of the broker: not counted (--no-perf)" in out
    rate = re.search(r"([\d,]+) msgs/s", out)
    assert rate and int(rate.group(1).replace(",", "")) > 0, out
    batch = re.search(r"([\d.]+) msgs per fsync, mean fsync ([\d.]+) ms", out)
    assert batch, out
    # with 8 connections one fsync covers between 1 and 8 requests on average
    assert 1.0 <= float(batch.group(1)) <= 8.0, out
    assert float(batch.group(2)) > 0, out
    # the broker's CPU per message over the window, from /proc (steadier than the rate)
    cpu = re.search(r"broker CPU: ([\d.]+) s in the window, ([\d.]+) us per message", out)
    assert cpu and float(cpu.group(2)) > 0, out


@pytest.mark.slow
def test_the_c_client_pinned_drives_the_same_load(capsys: pytest.CaptureFixture[str]) -> None:
    """``--client c --pin``: the C reference client's rate, and the broker's CPU per message,
    which pinned is what sets that rate."""
    assert durable.main(["--fsync", "interval", "--seconds", "1", "--connections", "8",
                         "--client", "c", "--pin"]) == 0
    out = capsys.readouterr().out
    rate = re.search(r"\(C client, pinned\): ([\d,]+) msgs/s", out)
    assert rate and int(rate.group(1).replace(",", "")) > 0, out
    cpu = re.search(r"broker CPU: ([\d.]+) s in the window, ([\d.]+) us per message", out)
    assert cpu and float(cpu.group(2)) > 0, out


def test_a_counter_that_ignores_sigint_is_killed_not_waited_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A perf that does not stop on SIGINT (seen once on a loaded machine) is killed after
    the grace time and its count reported as not used; the bench goes on."""
    stuck = subprocess.Popen([sys.executable, "-c",
                              "import signal, sys, time; signal.signal(signal.SIGINT, "
                              "signal.SIG_IGN); print(flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE)
    assert stuck.stdout is not None and stuck.stdout.readline() == b"\n"  # handler set
    assert durable.counted_fsyncs(stuck, tmp_path / "perf.txt", stop_within=0.3) == 0.0
    assert stuck.poll() is not None
    stuck.stdout.close()
    assert "perf stat did not stop within 0.3 s of SIGINT: killed" in capsys.readouterr().out
