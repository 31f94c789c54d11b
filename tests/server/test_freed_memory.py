"""The broker keeps freed heap for reuse (``broker.server.keep_freed_memory``): the buffers
of one large fetch, freed, serve the next without the kernel faulting fresh pages in."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

_FETCHES = """
import resource, sys
from broker.server import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def fetch():  # six 8 MiB record sets, as a 6-partition librdkafka fetch builds them
    parts = [b"x" * (8 << 20) for _ in range(6)]
    return sum(len(p) for p in parts)
fetch()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    fetch()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _FETCHES, mode], capture_output=True,
                         text=True, check=True, timeout=60)
    return int(out.stdout.strip())


_GLIBC = sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "mallopt")


@pytest.mark.skipif(not _GLIBC, reason="mallopt is glibc's: elsewhere nothing is changed")
def test_repeated_large_fetches_reuse_their_pages() -> None:
    pages = 5 * 6 * (8 << 20) // 4096  # every page of five more fetches, faulted afresh
    assert _faults("default") > pages // 2  # glibc hands the memory back by default
    assert _faults("keep") < pages // 20
