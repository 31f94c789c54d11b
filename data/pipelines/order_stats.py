"""The example pipeline: per-key order counts and sums per one-minute window.

Reads a topic of orders (``skerry pipeline``'s default: ``pipeline-orders``; values
``<event time ms>,<amount>`` as text, keys = customer), groups by key and one-minute
event-time windows with a watermark (a window is written once the watermark, the newest
event time minus ``watermark``, has passed its end), and writes each finished window both
to a topic (default ``pipeline-order-stats``, value ``<window start>,<key>,<count>,<sum>``)
and to Parquet. Exactly once end to end: source offsets live in the checkpoint, the topic
sink is idempotent (data/spark/source.py) and the Parquet sink is Spark's own file sink.

A record that is not an order stops the pipeline with ``MalformedOrder``: one line naming
the record, instead of Spark's cast error and its Java traces.

Must not import: Twisted, the broker's server side (the Python client ``broker.client``
is fine).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["MalformedOrder", "build_session", "run", "seed"]

_MALFORMED = "skerry-malformed-order:"
"""Prefix of the message the query fails with when a record is not an order; ``run`` turns
that failure into ``MalformedOrder``."""
_MAX_EVENT_MS = 253_402_300_799_999
"""The last millisecond of year 9999: a larger event time is not an order's."""
_MALFORMED_RE = re.compile(re.escape(_MALFORMED) +
                           r'([^\s%]+ partition \d+ offset \d+ .*?: \["(?:[^"\\]|\\.)*"\])')


class MalformedOrder(ValueError):
    """A record of the source topic is not ``<event time ms>,<amount>`` with a customer key.
    The message is one line: topic, partition, offset and the value."""


def build_session(master: str = "local[2]") -> Any:
    from pyspark.sql import SparkSession

    from data.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(master).appName("skerry-order-stats")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    # Errors reach the caller as exceptions (``run`` raises them); Spark's own log would
    # print each failed task's Java trace a few times over before that.
    spark.sparkContext.setLogLevel("OFF")
    register(spark)
    return spark


def seed(bootstrap: str, topic: str, count: int) -> int:
    """Produce ``count`` sample orders (keys customer0..customer9, amounts 1..100), one a
    second of event time, ending now."""
    import time

    from broker.client.sync import Client, fnv1a_32

    with Client(bootstrap) as client:
        partitions = client.partitions(topic)  # created on the first seed
        msgs = []
        now_ms = int(time.time() * 1000)
        for i in range(count):
            key = b"customer%d" % (i % 10)
            event_ms = now_ms - (count - i) * 1000
            msgs.append((key, b"%d,%d" % (event_ms, i % 100 + 1), fnv1a_32(key) % partitions))
        return len(client.produce_many(topic, msgs))


def run(bootstrap: str, source: str, sink_topic: str, output: str, checkpoint: str,
        watermark: str = "1 minute", once: bool = True, spark: Any = None) -> list[Any]:
    """Run the pipeline and return its two queries: ``once``, with Trigger.AvailableNow,
    when both have processed what was there; else (every 10 seconds) when one of them
    stops, raising its error if it failed (``MalformedOrder`` for a record of ``source``
    that is not an order)."""
    from pyspark.sql import functions as F

    spark = spark or build_session()
    orders = (spark.readStream.format("skerry").option("bootstrap", bootstrap).option("topic", source)
              .option("startingOffsets", "earliest").option("groupId", "order-stats").load())
    value = F.col("value").cast("string")
    parts = F.split(value, ",")
    # Nothing here may fail on a record that is not an order (ANSI mode fails casts and
    # array indexes): ``malformed`` is the one error such a record gets.
    event_ms, amount = F.get(parts, 0).try_cast("long"), F.get(parts, 1).try_cast("double")
    is_order = (F.col("key").isNotNull() & (F.size(parts) == 2)
                & event_ms.between(0, _MAX_EVENT_MS) & amount.isNotNull())
    malformed = F.raise_error(F.format_string(
        f"{_MALFORMED}%s partition %d offset %d is not an order (<event time ms>,<amount> "
        f"with a customer key): %s", "topic", "partition", "offset",
        F.to_json(F.array(F.substring(F.coalesce(value, F.lit("")), 1, 80)))))
    stats = (orders.select(F.when(is_order, F.col("key").cast("string")).otherwise(malformed)
                           .alias("customer"),
                           F.when(is_order, F.timestamp_millis(event_ms)).alias("event_time"),
                           F.when(is_order, amount).alias("amount"))
             .withWatermark("event_time", watermark)
             .groupBy(F.window("event_time", "1 minute").alias("w"), "customer")
             .agg(F.count("*").alias("orders"), F.sum("amount").alias("total"))
             .select(F.col("w.start").alias("window_start"), "customer", "orders", "total"))
    to_topic = stats.select(
        F.col("customer").alias("key"),
        F.concat_ws(",", F.date_format("window_start", "yyyy-MM-dd'T'HH:mm"), "customer",
                    F.col("orders").cast("string"), F.col("total").cast("string")).alias("value"))
    trigger = {"availableNow": True} if once else {"processingTime": "10 seconds"}
    with _one_line_if_malformed():
        q1 = (to_topic.writeStream.format("skerry").option("bootstrap", bootstrap).option("topic", sink_topic)
              .option("checkpointLocation", os.path.join(checkpoint, "topic")).outputMode("append")
              .trigger(**trigger).start())
        # The second query starts once the first has run (once) or has made its first trigger
        # (continuously), never together with it. Every function Spark makes from a registered
        # Python data source shares one java.util.HashMap of environment variables, and the
        # driver-side Python runners add their entries to it when they first run in a JVM: a
        # query starting then can serialize its tasks while the other query's runner grows that
        # map, and its tasks fail with java.io.OptionalDataException (measured on 2 cores: 5 of
        # 16 restarts in a fresh process when both queries started at once, 0 of 12 this way).
        if once:
            q1.awaitTermination()
        else:
            _await_first_trigger(q1)
        q2 = (stats.writeStream.format("parquet").option("path", output)
              .option("checkpointLocation", os.path.join(checkpoint, "parquet")).outputMode("append")
              .trigger(**trigger).start())
        if once:
            q2.awaitTermination()
        else:
            spark.streams.awaitAnyTermination()  # raises the error of a query that failed
        return [q1, q2]


def _await_first_trigger(query: Any, timeout_s: float = 60.0) -> None:
    """Wait until ``query`` has reported progress (its first trigger ran), has stopped, or
    ``timeout_s`` has passed."""
    import time

    deadline = time.monotonic() + timeout_s
    while query.isActive and query.lastProgress is None and time.monotonic() < deadline:
        time.sleep(0.2)


@contextmanager
def _one_line_if_malformed() -> Iterator[None]:
    """Turn a query failure raised by the pipeline's order check into ``MalformedOrder``
    with the check's one-line message (other failures pass through unchanged), and keep
    PySpark from logging that failure's query context to stderr on the way."""
    from pyspark.logger import PySparkLogger

    logger = PySparkLogger.getLogger("DataFrameQueryContextLogger")
    was_disabled, logger.disabled = logger.disabled, True
    try:
        yield
    except Exception as exc:
        # The error's text also holds the query plan, with the check's unformatted message.
        found = _MALFORMED_RE.search(str(exc))
        if found is None:
            raise
        raise MalformedOrder(found.group(1)) from None
    finally:
        logger.disabled = was_disabled
