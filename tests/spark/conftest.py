"""One local[2] SparkSession for every Spark test (JVM start-up is the expensive part), and a
real broker on a loopback port shared by the tests of a module."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")

from tests.support import BrokerProcess  # noqa: E402  (after the pyspark skip)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The shared session, with both Skerry sources registered."""
    from pyspark.sql import SparkSession

    from data.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("skerry-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker child process (fsync interval, so the big loads stay quick)."""
    proc = BrokerProcess(tmp_path_factory.mktemp("broker"),
                         {"storage": {"fsync": "interval", "fsync_interval_ms": 200}})
    proc.start()
    yield proc
    proc.stop()
