"""Single rows of ``bench.kafka_vs_apache`` against one broker, with what the client saw.

``python -m bench.kafka_rows skerry|kafka [--rows crd1,crd6,cpp1,cpp6,...] [--messages N]
[--repeat R]`` starts one broker as ``bench.kafka_vs_apache`` does (Skerry from this
checkout, or Apache Kafka 4.3.1), fills the topics a row reads, runs the rows and prints one
JSON line per row and repeat: the rate, the broker's CPU seconds per million messages, and
for ``ConsumerPerformance`` its own fetch metrics (``--print-metrics``: fetches, bytes and
records per fetch response, mean fetch latency), the same driver against both brokers.

Rows: ``crd1``/``crd6`` librdkafka consume of 1/6 partitions, ``cpp1``/``cpp6``
``ConsumerPerformance``, ``prd<P>a<acks>`` librdkafka produce (``prd6a1``, ``prd1aall``),
``ppp<P>a<acks>`` ``ProducerPerformance`` (with the latency it printed), ``cluster`` the 3-broker row (RF 3, min ISR 2,
librdkafka produce acks=all to 3 partitions; Skerry on etcd or Kafka's KRaft cluster, as
``--cluster`` of ``bench.kafka_vs_apache`` starts them; CPU summed over the three and per
broker, the cores they kept busy, and ``pids`` printed for py-spy; run it alone). ``--trace-fetches`` adds, for ``crd`` rows,
each Fetch round trip librdkafka logged (``debug=fetch,protocol``): its response size and
``rtt``, and the client's time from a response to its next request. ``--set
section.key=value`` (repeatable) changes one Skerry setting, e.g. ``--set
kafka.fetch_max_bytes=33554432``; ``--fill-config name=value`` (repeatable) creates the
topics the consume rows read with that topic config, e.g. ``--fill-config
message.timestamp.type=LogAppendTime``. Consume rows also print the minor page faults of
the broker (``broker_minflt``) and of this process, the librdkafka client
(``client_minflt``), over the row.

Used for docs/performance.md, "Where the time goes: the rows behind Kafka". Must not
import: broker internals (both brokers are driven as a user would).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import resource
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from bench import kafka_vs_apache as vs
from bench.kafka import _consume as rdkafka_consume
from bench.kafka import _produce as rdkafka_produce

__all__ = ["main", "FETCH_METRICS"]

FETCH_METRICS = ("fetch-total", "fetch-size-avg", "records-per-request-avg", "fetch-latency-avg",
                 "bytes-consumed-total")
"""ConsumerPerformance's consumer-fetch-manager metrics printed per row."""

_RTT = re.compile(r"Received FetchResponse \(v\d+, (\d+) bytes, CorrId \d+, rtt ([\d.]+)ms\)")


def consumer_performance(classpath: str, bootstrap: str, topic: str, messages: int
                         ) -> tuple[float, dict[str, float]]:
    """Kafka's ConsumerPerformance with ``--print-metrics``: its fetch rate and metrics."""
    out = vs._java_tool(classpath, "org.apache.kafka.tools.ConsumerPerformance", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(messages),
        "--timeout", "60000", "--group", f"perf-{uuid.uuid4().hex[:8]}", "--print-metrics"], 600)
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("start.time"))
    row = dict(zip([h.strip() for h in lines[at].split(",")],
                   [v.strip() for v in lines[at + 1].split(",")], strict=False))
    metrics: dict[str, float] = {}
    for line in lines:
        if line.startswith("consumer-fetch-manager-metrics:") and "topic" not in line:
            name = line.split(":")[1].split("{")[0]
            if name in FETCH_METRICS:
                metrics[name] = float(line.rsplit(":", 1)[1].strip())
    return float(row["fetch.nMsg.sec"]), metrics


_PP_LATENCY = re.compile(r"([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, "
                         r"(\d+) ms 95th, (\d+) ms 99th")


def producer_performance(classpath: str, bootstrap: str, topic: str, messages: int, acks: str
                         ) -> tuple[float, dict[str, float]]:
    """Kafka's ProducerPerformance as ``bench.kafka_vs_apache`` runs it: its rate, and the
    send-to-ack latency it printed for the whole run (avg, max, p50, p95, p99 in ms)."""
    out = vs._java_tool(classpath, "org.apache.kafka.tools.ProducerPerformance", [
        "--topic", topic, "--num-records", str(messages), "--record-size", str(vs.SIZE),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
        f"acks={acks}"], 600)
    return producer_performance_summary(out)


def producer_performance_summary(out: str) -> tuple[float, dict[str, float]]:
    """The rate and latencies of ProducerPerformance's last "records sent" line (the
    whole run's)."""
    line = [ln for ln in out.splitlines() if "records sent" in ln][-1]
    rate = float(line.split(",")[1].split()[0])
    m = _PP_LATENCY.search(line)
    if m is None:
        return rate, {}
    names = ("latency_avg_ms", "latency_max_ms", "latency_p50_ms", "latency_p95_ms",
             "latency_p99_ms")
    return rate, {name: float(v) for name, v in zip(names, m.groups(), strict=True)}


def traced_consume(port: int, messages: int, partitions: int, topic: str
                   ) -> tuple[float, dict[str, Any]]:
    """``bench.kafka``'s librdkafka consume with the fetch round trips logged."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    events: list[tuple[float, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            events.append((time.monotonic(), record.getMessage()))

    log = logging.getLogger(f"bench.kafka_rows.{uuid.uuid4().hex}")
    log.addHandler(Keep())
    log.setLevel(logging.DEBUG)
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "bench",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                         "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 8 << 20,
                         "queued.max.messages.kbytes": 1 << 20, "fetch.queue.backoff.ms": 10,
                         "debug": "fetch,protocol"}, logger=log)
    consumer.list_topics(topic, timeout=10)
    began = time.monotonic()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    read = 0
    while read < messages and time.monotonic() < began + 120:
        read += len(consumer.consume(num_messages=10000, timeout=0.5))
    elapsed = time.monotonic() - began
    consumer.close()
    fetches, gaps, last = [], [], None
    for at, text in events:
        if (m := _RTT.search(text)) is not None:
            fetches.append((int(m.group(1)), float(m.group(2))))
            last = at
        elif "Sent FetchRequest" in text and last is not None:
            gaps.append(round((at - last) * 1000, 1))
            last = None
    return read / elapsed, {"fetches": len(fetches),
                            "response_bytes": [b for b, _ in fetches],
                            "rtt_ms": [r for _, r in fetches], "client_gap_ms": gaps}


def run_row(broker: vs.Broker, classpath: str, row: str, messages: int, trace: bool
            ) -> tuple[float, dict[str, Any]]:
    if row in ("cpp1", "cpp6"):
        return consumer_performance(classpath, broker.bootstrap, f"fill{row[-1]}", messages)
    if row in ("crd1", "crd6"):
        parts = int(row[-1])
        if trace:
            return traced_consume(broker.port, messages, parts, f"fill{parts}")
        read, _payload, elapsed = rdkafka_consume(broker.port, messages, parts, 120,
                                                  topic=f"fill{parts}")
        return read / elapsed, {}
    parts, acks = int(row[3]), row[5:]
    topic = f"{row}-{uuid.uuid4().hex[:6]}"
    vs._create_topics(broker.bootstrap, {topic: parts})
    if row.startswith("ppp"):
        return producer_performance(classpath, broker.bootstrap, topic, messages, acks)
    elapsed = rdkafka_produce(broker.port, messages, vs.SIZE, parts, acks, topic=topic,
                              batch_bytes=vs.BATCH_BYTES)
    return messages / elapsed, {}


def cluster_rows(broker: str, messages: int, repeat: int) -> int:
    """The 3-broker produce row, ``repeat`` times on one cluster (one topic)."""
    classpath = vs.kafka_classpath() if broker == "kafka" else ""
    workdir = Path(tempfile.mkdtemp(prefix=f"skerry-kafka-rows-cluster-{broker}-"))
    try:
        start = vs.skerry_cluster(workdir) if broker == "skerry" \
            else vs.apache_kafka_cluster(workdir, classpath)
        with start as cluster:
            if broker == "kafka":
                vs._create_topics(cluster.bootstrap, {vs.CLUSTER_TOPIC: 3}, replicas=3,
                                  config={"min.insync.replicas": "2"})
            vs._wait_whole_isr(cluster.bootstrap, vs.CLUSTER_TOPIC, 3)
            for _ in range(repeat):
                cpu = [b.cpu() for b in cluster.members]
                elapsed = rdkafka_produce(cluster.port, messages, vs.SIZE, 3, "all",
                                          topic=vs.CLUSTER_TOPIC, batch_bytes=vs.BATCH_BYTES)
                used = [b.cpu() - c for b, c in zip(cluster.members, cpu, strict=True)]
                print(json.dumps({"broker": broker, "row": "cluster",
                                  "msgs_s": round(messages / elapsed),
                                  "cpu_s_per_m": round(sum(used) / messages * 1e6, 3),
                                  "cpu_s_per_m_each": [round(u / messages * 1e6, 3)
                                                       for u in used],
                                  "cpu_cores": round(sum(used) / elapsed, 2),
                                  "load": round(os.getloadavg()[0], 1),
                                  "pids": [b.proc.pid for b in cluster.members]}), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _minflt(pid: int) -> int:
    """Minor page faults of process ``pid`` so far (``/proc/<pid>/stat``; 0 without it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[7])
    except (OSError, ValueError, IndexError):
        return 0


def _own_minflt() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("broker", choices=["skerry", "kafka"])
    parser.add_argument("--rows", default="crd1,crd6,cpp1,cpp6")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--trace-fetches", action="store_true")
    parser.add_argument("--set", dest="sets", action="append", default=[],
                        metavar="SECTION.KEY=VALUE", help="a Skerry setting (repeatable)")
    parser.add_argument("--fill-config", action="append", default=[], metavar="NAME=VALUE",
                        help="topic config of the consume rows' topics (repeatable)")
    args = parser.parse_args(argv)
    args.settings = {}
    for item in args.sets:
        key, eq, value = item.partition("=")
        section, dot, name = key.partition(".")
        if not eq or not dot:
            parser.error(f"--set takes section.key=value, not {item!r}")
        args.settings.setdefault(section, {})[name] = yaml.safe_load(value)
    args.fill_config = dict(item.split("=", 1) for item in args.fill_config if "=" in item)
    rows = args.rows.split(",")
    for row in rows:
        if not re.fullmatch(r"c(rd|pp)[16]|p(rd|pp)[16]a(1|all)|cluster", row):
            parser.error(f"unknown row {row!r}")
    if "cluster" in rows:
        if rows != ["cluster"]:
            parser.error("the cluster row runs alone")
        return cluster_rows(args.broker, args.messages, args.repeat)
    java = any(r.startswith(("cpp", "ppp")) for r in rows) or args.broker == "kafka"
    classpath = vs.kafka_classpath() if java else ""
    workdir = Path(tempfile.mkdtemp(prefix=f"skerry-kafka-rows-{args.broker}-"))
    try:
        start = vs.skerry(workdir, settings=args.settings) if args.broker == "skerry" \
            else vs.apache_kafka(workdir, classpath)
        with start as broker:
            fills = sorted({int(r[-1]) for r in rows if r.startswith("c")})
            if fills:  # produce rows alone fill nothing (and create their own topics)
                vs._create_topics(broker.bootstrap, {f"fill{p}": p for p in fills},
                                  config=args.fill_config)
            for p in fills:
                rdkafka_produce(broker.port, args.messages, vs.SIZE, p, "1", topic=f"fill{p}",
                                batch_bytes=vs.BATCH_BYTES)
            for _ in range(args.repeat):
                for row in rows:
                    cpu = broker.cpu()
                    faults = _minflt(broker.proc.pid), _own_minflt()
                    rate, extra = run_row(broker, classpath, row, args.messages,
                                          args.trace_fetches)
                    used = broker.cpu() - cpu
                    if row.startswith("c"):
                        extra["broker_minflt"] = _minflt(broker.proc.pid) - faults[0]
                        extra["client_minflt"] = _own_minflt() - faults[1]
                    print(json.dumps({"broker": args.broker, "row": row, "msgs_s": round(rate),
                                      "cpu_s_per_m": round(used / args.messages * 1e6, 3),
                                      "load": round(os.getloadavg()[0], 1), **extra}),
                          flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
