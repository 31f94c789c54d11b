"""Skerry on Spark: the ``skerry`` data source (read and write topics through a broker) and
the ``skerry-log`` data source (read a data directory's segment files, no broker).

Owns: registering both sources with a SparkSession (``register(spark)``). The modules:
``client`` (a blocking V1 client), ``records`` (stored records -> Arrow), ``batches`` (Arrow
-> PRODUCE_BATCH requests), ``offsets`` (offset specs, ranges, admission control), ``source``
(``skerry``), ``logsource`` (``skerry-log``).

Must not import: Twisted or the broker's server side (executors only speak the wire protocol,
through the Python client ``broker.client``, or read files).
pyspark is imported lazily so that ``data`` stays importable without the ``spark`` extra.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Make ``format("skerry")`` and ``format("skerry-log")`` available on ``spark``."""
    from data.spark.logsource import SkerryLogDataSource
    from data.spark.source import SkerryDataSource

    spark.dataSource.register(SkerryDataSource)
    spark.dataSource.register(SkerryLogDataSource)
