"""The codec, format and store tests again on the pure-Python twins (``SKERRY_NO_EXTENSIONS=1``).

The choice of implementation is made once, when ``data``, ``broker.v1.codec`` and
``broker.kafka.mapping`` are first
imported (``data.speedups``), and bound to module-level names deep in the store and the
framer; so the twin run is a fresh interpreter with the variable set, running the same test
modules, rather than a parametrization that would have to patch every binding (and could
miss one). What it runs is what a machine without a C compiler runs.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import ROOT

TWIN_MODULES = (
    "tests/v1/test_codec.py",
    "tests/v1/test_codec_data.py",
    "tests/v1/test_codec_fast.py",
    "tests/v1/test_codec_framing.py",
    "tests/v1/test_codec_properties.py",
    "tests/v1/test_protocol.py",
    "tests/v1/test_produce_batch_raw.py",
    "tests/data/test_format.py",
    "tests/data/test_store.py",
    "tests/data/test_log.py",
    "tests/data/test_raw_paths.py",
    "tests/kafka/test_mapping.py",
    "tests/kafka/test_data.py",
    "tests/kafka/test_batches.py",
    "tests/core/test_idempotent_produce.py",
    "tests/replication/test_idempotent_failover.py",
)


@pytest.mark.slow
def test_codec_format_and_store_tests_pass_on_the_python_twin() -> None:
    if os.environ.get("SKERRY_NO_EXTENSIONS", "") not in ("", "0"):
        pytest.skip("this run is already on the twin")
    env = {**os.environ, "SKERRY_NO_EXTENSIONS": "1", "PYTHONPATH": str(ROOT)}
    check = subprocess.run(
        [sys.executable, "-c", "from data import speedups; import broker.v1.codec, broker.kafka.mapping; "
         "print(speedups.implementation())"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert check.stdout.strip() == "python", check.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *TWIN_MODULES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
