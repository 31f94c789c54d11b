"""Markers by what a test file uses, so ``pytest -m "not system"`` is the quick inner loop.

- ``system``: needs a program from outside the Python environment (etcd, kcat, nc, Chromium,
  Java and Maven, Go, Apache Kafka's jars, Spark's JVM), found through
  ``tests.support.debian_tool`` and friends and installed by ``.ci/install-tools``.
- ``integration``: starts a broker process or another subprocess, or a real server on a
  loopback port. Every ``system`` test is ``integration`` too (the program runs as a
  process), so ``-m "not integration"`` leaves only in-process tests.

A test module is marked by the helpers its source names (the tables below), and takes the
marks of the test modules it imports from: one test of a file that starts a process marks
the whole file, which errs on the side of the quick loop
staying quick. A module that knows better sets ``MARKERS = (...)`` (names of the markers it
takes, possibly none) and is not scanned. Spark's fixtures mark by use: ``spark`` (a JVM) is
``system``, its ``broker`` fixture ``integration``. ``tests/test_markers.py`` holds the
scan to a few files whose marks are known.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Names whose use means an external program (or a JVM) is needed.
SYSTEM = re.compile(
    r"\bdebian_tool\(|\betcd_binary\b|\bEtcdCluster\b|\breal_etcd\b"
    r"|shutil\.which\(\"(go|etcd)\"\)|\bpyspark\b"
    r"|\bGroupCluster\b|\brun_target\b"  # bench/'s etcd-backed clusters
)
#: Names whose use means a subprocess or a real loopback server is started (bench/'s
#: cluster and server helpers included).
INTEGRATION = re.compile(
    r"\bsubprocess\b|\bPopen\b|\bBrokerProcess\b|\bFaultyBrokerProcess\b|\bLoadProcess\b"
    r"|\bcrash_trial\b|\bgroup_crash_trial\b|\bprocess_fault_trial\b|\bConsoleBroker\b"
    r"|\bstart_kafka_broker\b|\biggy_port_of\b|\btank_port_of\b|\blistenTCP\b"
    r"|\bserverFromString\b|\bTCP4ServerEndpoint\b|\bHTTPServer\b|\bmultiprocessing\b"
    r"|\.bind\(\(|\bClusterSpec\b|\bstart_responder\b"
    r"|\brun_refclient\b|\brun_(steady|leader_crash|follower_crash)\b"
)

#: ``from tests.<...>.test_x import ...``: a test module that uses another one's helpers.
_TEST_IMPORT = re.compile(r"^from (tests(?:\.\w+)*\.test_\w+) import", re.M)
TESTS = Path(__file__).resolve().parent

_by_module: dict[str, tuple[str, ...]] = {}


@functools.cache
def markers_of(path: Path, declared: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The markers a test module takes: ``declared`` (its ``MARKERS``) when it says, else
    what its source names."""
    if declared is not None:
        return tuple(declared)
    source = path.read_text(encoding="utf-8")
    found = set()
    if SYSTEM.search(source):
        found |= {"system", "integration"}
    elif INTEGRATION.search(source):
        found.add("integration")
    # What it runs of another test module (docs pages replayed in order, say) counts too.
    for dotted in set(_TEST_IMPORT.findall(source)):
        other = TESTS.parent.joinpath(*dotted.split(".")).with_suffix(".py")
        if other.is_file() and other != path:
            found |= set(markers_of(other))
    return tuple(sorted(found, reverse=True))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if module is None or getattr(module, "__file__", None) is None:
            continue
        key = module.__name__
        if key not in _by_module:
            _by_module[key] = markers_of(Path(module.__file__), getattr(module, "MARKERS", None))
        names = set(_by_module[key])
        fixtures = set(getattr(item, "fixturenames", ()))
        if "tests/spark/" in Path(module.__file__).as_posix():
            if "spark" in fixtures:
                names |= {"system", "integration"}
            if "broker" in fixtures:
                names.add("integration")
        for name in sorted(names):
            item.add_marker(getattr(pytest.mark, name))


@pytest.fixture(autouse=True)
def _close_in_memory_clusters() -> Iterator[None]:
    """After each test, close the stores of the in-memory clusters it built
    (``tests/replication/cluster_harness.py``): left open, their segment files and locks
    pile up in the test process, past 1,024 descriptors by the end of the suite."""
    yield
    harness = sys.modules.get("tests.replication.cluster_harness")
    if harness is not None:
        for network in list(harness.Network.unclosed):
            network.close()
