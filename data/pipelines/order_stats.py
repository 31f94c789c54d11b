"""The example pipeline: per-key order counts and sums per one-minute window.

Reads topic ``orders`` (values ``<event time ms>,<amount>`` as text, keys = customer),
groups by key and one-minute event-time windows with a watermark (a window is written once
the watermark, the newest event time minus ``watermark``, has passed its end), and writes each finished window both to a
topic (``order-stats``, value ``<window start>,<key>,<count>,<sum>``) and to Parquet.
Exactly once end to end: source offsets live in the checkpoint, the topic sink is
idempotent (data/spark/source.py) and the Parquet sink is Spark's own file sink.

Must not import: Twisted, the broker.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["build_session", "run", "seed"]


def build_session(master: str = "local[2]") -> Any:
    from pyspark.sql import SparkSession

    from data.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(master).appName("skerry-order-stats")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def seed(bootstrap: str, topic: str, count: int) -> int:
    """Produce ``count`` sample orders (keys customer0..customer9, amounts 1..100), one a
    second of event time, ending now."""
    import time

    from data.spark.client import SkerryClient, fnv1a_32

    with SkerryClient(bootstrap) as client:
        client.request("CONSUME", f"{topic} 0 0 max=1")  # auto-creates the topic
        partitions = int(client.metadata(topic)["partitions"])  # type: ignore[arg-type]
        msgs = []
        now_ms = int(time.time() * 1000)
        for i in range(count):
            key = b"customer%d" % (i % 10)
            event_ms = now_ms - (count - i) * 1000
            msgs.append((key, b"%d,%d" % (event_ms, i % 100 + 1), fnv1a_32(key) % partitions))
        return len(client.produce_many(topic, msgs))


def run(bootstrap: str, source: str, sink_topic: str, output: str, checkpoint: str,
        watermark: str = "1 minute", once: bool = True, spark: Any = None) -> list[Any]:
    """Run the pipeline (``once``: Trigger.AvailableNow, else continuously); returns the queries."""
    from pyspark.sql import functions as F

    spark = spark or build_session()
    orders = (spark.readStream.format("skerry").option("bootstrap", bootstrap).option("topic", source)
              .option("startingOffsets", "earliest").option("groupId", "order-stats").load())
    parts = F.split(F.col("value").cast("string"), ",")
    stats = (orders.select(F.col("key").cast("string").alias("customer"),
                           F.timestamp_millis(parts[0].cast("long")).alias("event_time"),
                           parts[1].cast("double").alias("amount"))
             .withWatermark("event_time", watermark)
             .groupBy(F.window("event_time", "1 minute").alias("w"), "customer")
             .agg(F.count("*").alias("orders"), F.sum("amount").alias("total"))
             .select(F.col("w.start").alias("window_start"), "customer", "orders", "total"))
    to_topic = stats.select(
        F.col("customer").alias("key"),
        F.concat_ws(",", F.date_format("window_start", "yyyy-MM-dd'T'HH:mm"), "customer",
                    F.col("orders").cast("string"), F.col("total").cast("string")).alias("value"))
    trigger = {"availableNow": True} if once else {"processingTime": "10 seconds"}
    q1 = (to_topic.writeStream.format("skerry").option("bootstrap", bootstrap).option("topic", sink_topic)
          .option("checkpointLocation", os.path.join(checkpoint, "topic")).outputMode("append")
          .trigger(**trigger).start())
    q2 = (stats.writeStream.format("parquet").option("path", output)
          .option("checkpointLocation", os.path.join(checkpoint, "parquet")).outputMode("append")
          .trigger(**trigger).start())
    if once:
        q1.awaitTermination()
        q2.awaitTermination()
    return [q1, q2]
