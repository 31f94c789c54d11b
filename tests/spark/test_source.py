"""The ``skerry`` and ``skerry-log`` Spark sources against a real broker on a loopback port,
in one shared local[2] session."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from broker.client.sync import Client

pytest.importorskip("pyspark")


def _bs(broker: Any) -> str:
    return f"127.0.0.1:{broker.port}"


def _create(broker: Any, topic: str, partitions: int) -> None:
    with Client(_bs(broker)) as c:
        c.request("ADMIN_CREATE_TOPIC", f"{topic} {partitions} 1")


def _produce(broker: Any, topic: str, messages: list[tuple[bytes, bytes, int]]) -> list[tuple[int, int]]:
    with Client(_bs(broker)) as c:
        return c.produce_many(topic, messages)


def _read(spark: Any, broker: Any, topic: str, **options: str) -> Any:
    reader = spark.read.format("skerry").option("bootstrap", _bs(broker)).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _rows(df: Any) -> list[tuple[Any, ...]]:
    pdf = df.select("partition", "offset", "key", "value").toPandas()
    return sorted(zip(pdf["partition"], pdf["offset"],
                      [None if k is None else bytes(k) for k in pdf["key"]],
                      [bytes(v) for v in pdf["value"]], strict=True))


class BatchReadTests:
    def test_hundred_thousand_messages_arrive_exactly(self, spark: Any, broker: Any) -> None:
        """A batch read of 100,000 messages returns each one once, with its partition,
        offset, key and value exactly as produced."""
        _create(broker, "big", 3)
        msgs = [(b"user%d" % (i % 97), b"order-%d" % i, i % 3) for i in range(100_000)]
        acks = _produce(broker, "big", msgs)
        expected = sorted((p, o, k, v) for (k, v, _), (p, o) in zip(msgs, acks, strict=True))
        assert _rows(_read(spark, broker, "big")) == expected
        # Short FETCH answers (a small byte budget) and split ranges give the same rows.
        df = _read(spark, broker, "big", fetchMaxBytes="60000", minPartitions="5")
        assert df.rdd.getNumPartitions() >= 5
        assert _rows(df) == expected

    def test_binary_values_and_headers_intact(self, spark: Any, broker: Any) -> None:
        """Values with ',', '|', newlines and zero bytes arrive byte for byte, keys come back,
        and includeHeaders exposes the key header."""
        _create(broker, "bin", 1)
        values = [b"a,b|c\nd\x00e", b"\x00" * 5, b"", b"|||", b"\r\n,,\xff\xfe", bytes(range(256))]
        _produce(broker, "bin", [(b"k%d" % i if i % 2 else b"", v, 0) for i, v in enumerate(values)])
        df = _read(spark, broker, "bin", includeHeaders="true")
        rows = sorted(df.collect(), key=lambda r: r["offset"])
        assert [bytes(r["value"]) for r in rows] == values
        assert [None if r["key"] is None else bytes(r["key"]) for r in rows] == [
            None, b"k1", None, b"k3", None, b"k5"]
        assert [[(h["key"], bytes(h["value"])) for h in r["headers"]] for r in rows][1] == [("key", b"k1")]
        assert rows[0]["headers"] == []

    def test_offset_ranges_partitions_and_splits(self, spark: Any, broker: Any) -> None:
        """startingOffsets/endingOffsets JSON (with -2 earliest, -1 latest), a partition subset and
        maxRecordsPerPartition select exactly the asked offsets, one Spark partition per piece."""
        _create(broker, "ranges", 2)
        _produce(broker, "ranges", [(b"", b"v%d" % i, i % 2) for i in range(40)])  # 20 per partition
        df = _read(spark, broker, "ranges", startingOffsets='{"ranges": {"0": 5, "1": -2}}',
                   endingOffsets='{"ranges": {"0": 15, "1": -1}}')
        got = {(p, o) for p, o, _k, _v in _rows(df)}
        assert got == {(0, o) for o in range(5, 15)} | {(1, o) for o in range(20)}
        df = _read(spark, broker, "ranges", partitions="1", maxRecordsPerPartition="6")
        assert df.rdd.getNumPartitions() == 4
        assert [o for _p, o, _k, _v in _rows(df)] == list(range(20))
        assert _read(spark, broker, "ranges", startingOffsets="latest").count() == 0

    def test_timestamps_and_starting_timestamp(self, spark: Any, broker: Any) -> None:
        """Rows carry the broker's append time; startingTimestamp starts each partition at the
        first message at or after it."""
        _create(broker, "times", 1)
        before = time.time()
        _produce(broker, "times", [(b"", b"early", 0)])
        after = time.time()
        time.sleep(0.05)  # the two batches must get distinct append timestamps
        middle_ms = int(time.time() * 1000)
        time.sleep(0.05)
        _produce(broker, "times", [(b"", b"late", 0)])
        rows = sorted(_read(spark, broker, "times").collect(), key=lambda r: r["offset"])
        assert before - 1 <= rows[0]["timestamp"].timestamp() <= after + 1
        assert rows[0]["timestamp"] < rows[1]["timestamp"]
        late = _read(spark, broker, "times", startingTimestamp=str(middle_ms)).collect()
        assert [bytes(r["value"]) for r in late] == [b"late"]


class WriteTests:
    def test_sink_routes_rows_and_keeps_bytes(self, spark: Any, broker: Any) -> None:
        """A batch write sends each row to its partition column's partition, or where the
        broker's key hash sends it when that is null (a null key is no key), and values with
        ',', '|', newlines and zero bytes are stored byte for byte."""
        from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

        from broker.client.codec import fnv1a_32

        _create(broker, "w_out", 3)
        data = [(None if i % 4 == 0 else f"key{i % 5}", b"v%d,|\n\x00" % i, i % 3 if i % 2 else None)
                for i in range(300)]
        schema = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                             StructField("partition", IntegerType())])
        (spark.createDataFrame(data, schema).repartition(2).write.format("skerry")
         .option("bootstrap", _bs(broker)).option("topic", "w_out").mode("append").save())
        got = {(p, k, v) for p, _o, k, v in _rows(_read(spark, broker, "w_out"))}
        want = {(part if part is not None else fnv1a_32((k or "").encode()) % 3,
                 None if k is None else k.encode(), v) for k, v, part in data}
        assert got == want


class StreamingTests:
    def test_available_now_batches_and_restart_exactly_once(self, spark: Any, broker: Any,
                                                            tmp_path: Path) -> None:
        """AvailableNow with maxOffsetsPerTrigger=250 reads 600 messages as 250+250+100; after 300
        more and a restart from the checkpoint the sink topic holds all 900 exactly once, and
        the groupId's committed offsets follow the source's progress."""
        _create(broker, "s_in", 2)
        _produce(broker, "s_in", [(b"", b"m%d" % i, i % 2) for i in range(600)])

        def run() -> list[int]:
            q = (spark.readStream.format("skerry").option("bootstrap", _bs(broker))
                 .option("topic", "s_in").option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", "250").option("groupId", "spark-s")
                 .load().selectExpr("value")
                 .writeStream.format("skerry").option("bootstrap", _bs(broker)).option("topic", "s_out")
                 .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
            q.awaitTermination()
            return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]

        assert run() == [250, 250, 100]
        _produce(broker, "s_in", [(b"", b"m%d" % i, i % 2) for i in range(600, 900)])
        assert run() == [250, 50]
        out = sorted(bytes(r["value"]) for r in _read(spark, broker, "s_out").collect())
        assert out == sorted(b"m%d" % i for i in range(900))
        with Client(_bs(broker)) as c:
            # Spark commits a micro-batch's source offsets when it plans the next one, so the
            # group trails by the last batch (50 offsets: 25 per partition).
            assert "committed=[425 425] hw=[449 449] lag=[25 25]" in c.request(
                "DESCRIBE_GROUP", "spark-s s_in")

    def test_sink_killed_mid_batch_leaves_each_row_once(self, spark: Any, broker: Any,
                                                        tmp_path: Path) -> None:
        """A streaming sink whose Python worker process dies (os._exit, testKillAfterRecords)
        between two PRODUCE_BATCH requests of a micro-batch, after the broker acknowledged
        the ones before, fails the query and leaves exactly that prefix in the topic;
        restarted from its checkpoint, Spark replays the batch and the topic holds every row
        exactly once (the broker drops the resent sequence numbers)."""
        import pyarrow as pa

        from broker.client.codec import MAX_BATCH_BYTES
        from data.spark.batches import requests

        _create(broker, "k_in", 1)
        values = [b"r%05d:" % i + b"x" * 993 for i in range(3000)]  # 1000 bytes each
        _produce(broker, "k_in", [(b"", v, 0) for v in values])
        # The micro-batch (one partition, one Arrow batch) goes out as PRODUCE_BATCH requests
        # of at most batchBytes (default 512 KiB), cut as here: the worker dies right after
        # the third is acknowledged, before the fourth is sent.
        cuts = [n for _p, _b, n in requests(pa.RecordBatch.from_pydict({"value": values}), 1,
                                            MAX_BATCH_BYTES)]
        assert len(cuts) >= 5
        kill_after = sum(cuts[:3])

        def start(**extra: str) -> Any:
            w = (spark.readStream.format("skerry").option("bootstrap", _bs(broker))
                 .option("topic", "k_in").option("startingOffsets", "earliest").load()
                 .selectExpr("value").writeStream.format("skerry").option("bootstrap", _bs(broker))
                 .option("topic", "k_out").option("checkpointLocation", str(tmp_path / "ck")))
            for k, v in extra.items():
                w = w.option(k, v)
            return w.trigger(availableNow=True).start()

        q = start(testKillAfterRecords=str(kill_after))
        with pytest.raises(Exception, match="Python worker exited unexpectedly"):
            q.awaitTermination()
        assert [v for _p, _o, _k, v in _rows(_read(spark, broker, "k_out"))] == values[:kill_after]
        q = start()
        q.awaitTermination()
        assert [v for _p, _o, _k, v in _rows(_read(spark, broker, "k_out"))] == values


class OfflineReaderTests:
    def test_offline_matches_broker_and_detects_flipped_byte(self, spark: Any,
                                                             tmp_path_factory: Any) -> None:
        """With the broker stopped, skerry-log reads the data dir row for row as the broker
        did; a flipped byte in a segment fails the query (failOnDataLoss) or is skipped."""
        from tests.support import BrokerProcess

        proc = BrokerProcess(tmp_path_factory.mktemp("offline")).start()
        try:
            _create(proc, "off", 2)
            _produce(proc, "off", [(b"k%d" % (i % 3), b"x,|\n\x00%d" % i, i % 2) for i in range(3000)])
            online = _rows(_read(spark, proc, "off"))
        finally:
            proc.stop()
        offline = spark.read.format("skerry-log").option("topic", "off").load(str(proc.data_dir))
        assert _rows(offline) == online
        sliced = (spark.read.format("skerry-log").option("topic", "off").option("minPartitions", "5")
                  .load(str(proc.data_dir)))
        assert sliced.rdd.getNumPartitions() >= 5
        assert _rows(sliced) == online
        seg = proc.data_dir / "topics" / "off" / "1" / ("0" * 20 + ".log")
        data = bytearray(seg.read_bytes())
        data[64 * 10 + 500] ^= 0x40
        seg.write_bytes(bytes(data))
        with pytest.raises(Exception, match="checksum mismatch|bad length"):
            spark.read.format("skerry-log").load(str(proc.data_dir)).count()
        kept = spark.read.format("skerry-log").option("failOnDataLoss", "false").load(str(proc.data_dir))
        assert kept.count() == 2999
