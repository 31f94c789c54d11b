"""The quick loop leaves out what it promises to (tests/conftest.py): ``-m "not system"``
drops the tests that need Java, kcat or etcd and keeps the in-process ones;
``-m "not integration"`` also drops those that start a broker process."""

from __future__ import annotations

import subprocess
import sys

from tests.support import ROOT

FILES = [
    "tests/v1/test_codec_fast.py",          # in process: no marker
    "tests/server/test_port_clash.py",      # starts `skerry serve`: integration
    "tests/kafka/test_clients_kcat.py",     # kcat: system
    "tests/control/test_etcd_real.py",      # etcd processes: system
    "tests/test_support_tools.py",          # names debian_tool, declares MARKERS = ()
]


def collected(marker_expression: str) -> set[str]:
    """The files of FILES that still have tests under ``-m marker_expression``."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", marker_expression, *FILES],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 5), out.stdout + out.stderr
    return {line.split("::")[0] for line in out.stdout.splitlines() if "::" in line}


def test_not_system_keeps_in_process_and_process_tests() -> None:
    assert collected("not system") == {
        "tests/v1/test_codec_fast.py", "tests/server/test_port_clash.py",
        "tests/test_support_tools.py"}


def test_not_integration_keeps_only_in_process_tests() -> None:
    assert collected("not system and not integration") == {
        "tests/v1/test_codec_fast.py", "tests/test_support_tools.py"}


def test_system_selects_the_external_programs() -> None:
    assert collected("system") == {
        "tests/kafka/test_clients_kcat.py", "tests/control/test_etcd_real.py"}
