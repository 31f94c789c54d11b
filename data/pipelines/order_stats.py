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
from dataclasses import dataclass
from typing import Any

__all__ = ["MalformedOrder", "Seeded", "build_session", "run", "seed", "sink_ends",
           "windows_written", "describe_windows"]

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


@dataclass(frozen=True)
class Seeded:
    """What ``seed`` produced: how many orders, and the event times of the first and last."""

    count: int
    first_ms: int
    last_ms: int
    continued: bool
    """True when the orders continue after the newest order already in the topic."""


def seed(bootstrap: str, topic: str, count: int) -> Seeded:
    """Produce ``count`` sample orders (keys customer0..customer9, amounts 1..100), one a
    second of event time: into an empty topic, ending now; into a topic that holds orders
    already, starting one second after the newest of them. So a second seed always moves
    event time (and the pipeline's watermark) forward by ``count`` seconds, and the
    windows it passes close, instead of its orders landing among the old ones (and
    behind the watermark, where Spark drops them)."""
    import time

    from broker.client.sync import Client, fnv1a_32

    with Client(bootstrap) as client:
        partitions = client.partitions(topic)  # created on the first seed
        newest = _newest_event_ms(client, topic)
        start = int(time.time() * 1000) - count * 1000 if newest is None else newest + 1000
        msgs = []
        for i in range(count):
            key = b"customer%d" % (i % 10)
            msgs.append((key, b"%d,%d" % (start + i * 1000, i % 100 + 1),
                         fnv1a_32(key) % partitions))
        produced = len(client.produce_many(topic, msgs))
    return Seeded(produced, start, start + (count - 1) * 1000, newest is not None)


def _newest_event_ms(client: Any, topic: str) -> int | None:
    """The newest event time among the orders of ``topic`` (None: it holds none). Each
    partition's last message is its newest: seeds append in event-time order."""
    meta = client.metadata(topic)
    newest: int | None = None
    for partition, (earliest, hw) in enumerate(zip(meta["earliest"], meta["hw"], strict=True)):
        if hw < earliest:
            continue  # empty
        for message in client.consume(topic, partition, hw, max_messages=1).messages:
            try:
                event_ms = int(message.value.split(b",", 1)[0])
            except ValueError:
                continue  # not an order: the pipeline will say so
            newest = event_ms if newest is None else max(newest, event_ms)
    return newest


def sink_ends(bootstrap: str, sink_topic: str) -> list[int]:
    """The next offset of each partition of ``sink_topic`` ([] while it does not exist),
    taken before a run so that ``windows_written`` can tell what the run added."""
    from broker.client.codec import BrokerError
    from broker.client.sync import Client

    with Client(bootstrap) as client:
        try:
            meta = client.metadata(sink_topic)
        except BrokerError:
            return []
    return [hw + 1 for hw in meta["hw"]]  # type: ignore[union-attr]


def windows_written(bootstrap: str, sink_topic: str, ends: list[int]) -> list[str]:
    """The values (``<window start>,<customer>,<count>,<sum>``) written to ``sink_topic``
    after ``ends`` (``sink_ends`` before the run), partition by partition."""
    from broker.client.codec import BrokerError
    from broker.client.sync import Client

    values: list[str] = []
    with Client(bootstrap) as client:
        try:
            hws = client.metadata(sink_topic)["hw"]
        except BrokerError:
            return values  # nothing was ever written
        assert isinstance(hws, list)
        for partition, hw in enumerate(hws):
            offset = ends[partition] if partition < len(ends) else 0
            while offset <= hw:
                read = client.consume(sink_topic, partition, offset)
                if not read.messages:
                    break
                values.extend(m.value.decode() for m in read.messages)
                offset = read.next_offset
    return values


def describe_windows(values: list[str]) -> str:
    """One line saying which windows a run wrote, from the values it wrote: their minutes
    (all of them up to six, else the first and the last) and the rows."""
    if not values:
        return ("no window closed since the last run: a one-minute window is written once "
                "orders a minute past its end have come in (seed more, then run again)")
    minutes = sorted({value.split(",", 1)[0] for value in values})
    shown = ", ".join(minutes) if len(minutes) <= 6 else f"{minutes[0]} to {minutes[-1]}"
    plural = "s" if len(minutes) > 1 else ""
    return f"wrote {len(minutes)} window{plural} ({len(values)} rows): {shown}"


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
