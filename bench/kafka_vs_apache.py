"""Skerry's Kafka face against Apache Kafka itself, on the same machine in the same run.

Starts, in turn and each round on fresh data directories and free loopback ports (Skerry
first in the first round, Kafka first in the second, and so on, ``round_order``: neither
always runs just after the other's teardown has freed a gigabyte of memory and page cache):

* **Apache Kafka 4.3.1** (``org.apache.kafka:kafka_2.13`` from Maven Central, classpath
  from ``mvn dependency:build-classpath`` on ``bench/apache/pom.xml``): one KRaft process,
  combined controller + broker, the settings of Kafka's shipped single-node
  ``config/server.properties`` (everything else default: no fsync per write), the JVM
  options of ``kafka-server-start.sh`` (``-Xmx1G -Xms1G``, G1);
* **Skerry**: one broker, ``storage.fsync: interval`` (the nearest durability: Kafka
  leaves writes in the page cache and never fsyncs a segment before it rolls).

Against each it runs, with ``--messages`` 100-byte records per row:

* produce, 1 and 6 partitions, acks=1 and acks=all, with librdkafka (confluent-kafka,
  ``produce_batch``, as ``bench.kafka``) and with Kafka's ``ProducerPerformance``;
* consume the full topic from the start with librdkafka (``assign``) and with Kafka's
  ``ConsumerPerformance`` (a consumer group; its fetch rate, without the group join);
* end-to-end latency p50/p99/p99.9 at a fixed 20,000 msgs/s for ``--latency-seconds``: a
  librdkafka producer stamps the send time into each value and a librdkafka consumer in
  the same process reads it back (the first second is warm-up and not counted);
* the broker's CPU seconds per million messages for every row (``/proc/<pid>/stat``) and
  its peak resident memory (``VmHWM``).

Prints one table: medians over ``--rounds`` with ranges, and Skerry/Kafka per row. With
``--write-doc`` it rewrites the text between ``<!-- apache:begin -->`` and
``<!-- apache:end -->`` in docs/performance.md. ``--cluster`` adds two rows per round on
three brokers (RF 3, acks=all, min ISR 2; librdkafka produce to 3 partitions and consume them
back): Skerry's brokers on one etcd member (``cluster.etcd``, the topic declared in their
configuration) against three combined KRaft nodes with static voters; CPU summed over the
three.

Must not import: broker internals (both brokers are driven as a user would).
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.iggy import _cpu_seconds, machine
from bench.kafka import _consume as rdkafka_consume
from bench.kafka import _produce as rdkafka_produce
from bench.report import MarkerError
from bench.serve import REPO_ROOT, start_serve, stop_serve
from bench.servers import free_port

__all__ = ["Row", "Sample", "run", "render", "write_doc", "main", "kafka_classpath", "cluster_id"]

POM_DIR = REPO_ROOT / "bench" / "apache"
BEGIN = "<!-- apache:begin -->"
END = "<!-- apache:end -->"
DOC = REPO_ROOT / "docs" / "performance.md"
SIZE = 100
LATENCY_RATE = 20_000
BATCH_BYTES = 1_000_000
"""librdkafka's batch.size for both: under Kafka's default message.max.bytes (1 MiB)."""

# kafka-server-start.sh: KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS as Kafka ships them.
JVM_OPTS = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true"]
TOOL_OPTS = ["-Xmx512M"]  # kafka-run-class.sh's heap for the tools


@dataclass
class Sample:
    """One row's figure in one round: a rate (msgs/s, MB/s) or a latency (ms)."""

    value: float
    mb_s: float | None = None
    cpu_s_per_m: float | None = None


@dataclass
class Row:
    name: str
    unit: str  # "msgs/s" or "ms"
    skerry: list[Sample] = field(default_factory=list)
    kafka: list[Sample] = field(default_factory=list)


# ------------------------------------------------------------------------------ the brokers


def kafka_classpath() -> str:
    """Kafka's broker and tools (4.3.1) from ~/.m2 (Maven Central the first time)."""
    out = POM_DIR / "target" / "classpath.txt"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mvn", "-B", "-q", "dependency:build-classpath",
                               f"-Dmdep.outputFile={out}"], cwd=POM_DIR, capture_output=True,
                              text=True, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(done.stdout[-3000:] + done.stderr[-3000:])
    return out.read_text().strip()


@dataclass
class Broker:
    name: str
    proc: subprocess.Popen[bytes]
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu(self) -> float:
        return _cpu_seconds(self.proc.pid) or 0.0

    def peak_rss_mb(self) -> float | None:
        try:
            with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return None


def cluster_id() -> str:
    """A KRaft cluster id as ``kafka-storage random-uuid`` makes them: 16 random bytes in
    URL-safe base64, never starting with ``-`` (``kafka-storage format -t -xyz`` reads that
    as an option and fails: one start in 64 did)."""
    while True:
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster.startswith("-"):
            return cluster


def _server_properties(data: Path, port: int, controller: int) -> str:
    # Kafka 4.3's config/server.properties, the single-node combined mode it ships
    return "\n".join([
        "process.roles=broker,controller", "node.id=1",
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "inter.broker.listener.name=PLAINTEXT",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "num.network.threads=3", "num.io.threads=8", "socket.send.buffer.bytes=102400",
        "socket.receive.buffer.bytes=102400", "socket.request.max.bytes=104857600",
        f"log.dirs={data}", "num.partitions=1", "num.recovery.threads.per.data.dir=1",
        "offsets.topic.replication.factor=1", "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1", "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1", "log.retention.hours=168",
        "log.segment.bytes=1073741824", "log.retention.check.interval.ms=300000", ""])


def _wait_port(proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"not listening after {timeout:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def apache_kafka(workdir: Path, classpath: str) -> Iterator[Broker]:
    port, controller = free_port(), free_port()
    props = workdir / "server.properties"
    props.write_text(_server_properties(workdir / "kafka-logs", port, controller))
    cluster = cluster_id()
    fmt = subprocess.run(["java", *TOOL_OPTS, "-cp", classpath, "kafka.tools.StorageTool",
                          "format", "--standalone", "-t", cluster, "-c", str(props)],
                         capture_output=True, text=True, timeout=180)
    if fmt.returncode != 0:
        raise RuntimeError(f"kafka-storage format failed:\n{fmt.stdout}\n{fmt.stderr}")
    log = workdir / "kafka.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["java", *JVM_OPTS, "-cp", classpath, "kafka.Kafka", str(props)],
                                stdout=out, stderr=out, stdin=subprocess.DEVNULL)
    try:
        _wait_port(proc, port, log, 180)
        yield Broker("kafka", proc, port)
    finally:
        _stop(proc)


@contextmanager
def skerry(workdir: Path, python: str = sys.executable,
           settings: dict[str, dict[str, Any]] | None = None) -> Iterator[Broker]:
    """One Skerry broker as the table runs it; ``settings`` (section -> key -> value) is
    laid over that configuration (``bench.kafka_rows --set``)."""
    config: dict[str, Any] = {
        "data_dir": str(workdir / "data"), "port": 0, "kafka_port": 0, "log_level": "warning",
        "storage": {"fsync": "interval"}, "limits": {"max_pending_output_bytes": 8 << 20},
    }
    for section, values in (settings or {}).items():
        config.setdefault(section, {}).update(values)
    proc, port, _log = start_serve(workdir, config, "kafka", python)
    try:
        yield Broker("skerry", proc, port)
    finally:
        stop_serve(proc)


@dataclass
class Cluster:
    """Three brokers measured as one: CPU summed, peak RSS the largest."""

    name: str
    members: list[Broker]

    @property
    def port(self) -> int:
        return self.members[0].port

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.members)

    def cpu(self) -> float:
        return sum(b.cpu() for b in self.members)

    def peak_rss_mb(self) -> float | None:
        return max((b.peak_rss_mb() or 0.0) for b in self.members) or None


CLUSTER_TOPIC = "cluster"


@contextmanager
def apache_kafka_cluster(workdir: Path, classpath: str) -> Iterator[Cluster]:
    """Three combined KRaft nodes (static voters), the shipped settings otherwise."""
    ports = [(free_port(), free_port()) for _ in range(3)]
    voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_p, c) in enumerate(ports))
    cluster = cluster_id()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, (port, controller) in enumerate(ports):
            node = workdir / f"node{i + 1}"
            node.mkdir()
            props = node / "server.properties"
            text = _server_properties(node / "kafka-logs", port, controller)
            text = text.replace("node.id=1", f"node.id={i + 1}").replace(
                f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
                f"controller.quorum.voters={voters}")
            for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                        "share.coordinator.state.topic.replication.factor"):
                text = text.replace(f"{key}=1", f"{key}=3")
            props.write_text(text)
            fmt = subprocess.run(["java", *TOOL_OPTS, "-cp", classpath, "kafka.tools.StorageTool",
                                  "format", "-t", cluster, "-c", str(props)],
                                 capture_output=True, text=True, timeout=180)
            if fmt.returncode != 0:
                raise RuntimeError(f"kafka-storage format failed:\n{fmt.stdout}\n{fmt.stderr}")
            with open(node / "kafka.log", "wb") as out:
                procs.append(subprocess.Popen(
                    ["java", *JVM_OPTS, "-cp", classpath, "kafka.Kafka", str(props)],
                    stdout=out, stderr=out, stdin=subprocess.DEVNULL))
        for i, proc in enumerate(procs):
            _wait_port(proc, ports[i][0], workdir / f"node{i + 1}" / "kafka.log", 240)
        yield Cluster("kafka", [Broker("kafka", proc, port)
                                for proc, (port, _c) in zip(procs, ports, strict=True)])
    finally:
        for proc in procs:
            _stop(proc)


@contextmanager
def skerry_cluster(workdir: Path) -> Iterator[Cluster]:
    """One etcd member and three brokers (``cluster.etcd``, Kafka listeners), fsync interval;
    the topic is declared in the configuration: 3 partitions, RF 3, min ISR 2."""
    from bench.replication_scenario import free_ports
    from tests.control.real_etcd import EtcdCluster
    from tests.support import BrokerProcess

    (workdir / "etcd").mkdir()
    etcd = EtcdCluster(workdir / "etcd", 1)
    procs: dict[int, BrokerProcess] = {}
    try:
        ports = free_ports(6)
        brokers = {i: f"127.0.0.1:{ports[i]}" for i in range(3)}
        kafka = {i: f"127.0.0.1:{ports[3 + i]}" for i in range(3)}
        for i in range(3):
            procs[i] = BrokerProcess(workdir / f"broker{i}", {
                "log_level": "warning", "auto_create_topics": False, "kafka_port": ports[3 + i],
                "storage": {"fsync": "interval"},
                "limits": {"max_pending_output_bytes": 8 << 20},
                "topics": {CLUSTER_TOPIC: {"partitions": 3, "replication_factor": 3,
                                           "min_insync_replicas": 2}},
                "cluster": {"broker_id": i, "brokers": brokers, "kafka_brokers": kafka,
                            "id": f"bench-{ports[0]}",
                            "etcd": {"endpoints": etcd.endpoints, "lease_ttl_ms": 5000}},
            }, port=ports[i])
        for proc in procs.values():
            proc.start(timeout=90)
        members = []
        for i, proc in procs.items():
            assert proc.proc is not None
            members.append(Broker("skerry", proc.proc, ports[3 + i]))
        yield Cluster("skerry", members)
    finally:
        for proc in procs.values():
            proc.stop()
        etcd.stop()


def _wait_whole_isr(bootstrap: str, topic: str, partitions: int, timeout: float = 120) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        meta = admin.list_topics(timeout=10).topics.get(topic)
        # Each partition led by its first replica (Kafka: at creation; Skerry: once the
        # controller handed it back, leader_return_delay_ms), so the load is spread alike.
        if meta is not None and len(meta.partitions) == partitions and all(
                pm.leader >= 0 and len(pm.isrs) == 3 and pm.leader == pm.replicas[0]
                for pm in meta.partitions.values()):
            return
        time.sleep(0.5)
    raise RuntimeError(f"{topic}: no preferred leader with the whole ISR on every partition")


def cluster_round(cluster: Cluster, messages: int) -> dict[str, Sample]:
    """Produce acks=all to 3 partitions (RF 3, min ISR 2) with librdkafka, then read back."""
    if cluster.name == "kafka":
        _create_topics(cluster.bootstrap, {CLUSTER_TOPIC: 3}, replicas=3,
                       config={"min.insync.replicas": "2"})
    _wait_whole_isr(cluster.bootstrap, CLUSTER_TOPIC, 3)
    got: dict[str, Sample | None] = {}

    def produce() -> tuple[float, float]:
        elapsed = rdkafka_produce(cluster.port, messages, SIZE, 3, "all", topic=CLUSTER_TOPIC,
                                  batch_bytes=BATCH_BYTES)
        return messages / elapsed, messages * SIZE / elapsed / 1e6

    def consume() -> tuple[float, float]:
        read, payload, elapsed = rdkafka_consume(cluster.port, messages, 3, 120,
                                                 topic=CLUSTER_TOPIC)
        if read != messages:
            raise RuntimeError(f"librdkafka read {read} of {messages}")
        return read / elapsed, payload / elapsed / 1e6

    got["3 brokers RF 3 min ISR 2: produce 3p acks=all, librdkafka"] = _measure(
        cluster, messages, produce)  # type: ignore[arg-type]
    got["3 brokers RF 3 min ISR 2: consume 3p, librdkafka"] = _measure(
        cluster, messages, consume)  # type: ignore[arg-type]
    return {name: sample for name, sample in got.items() if sample is not None}


# --------------------------------------------------------------------------------- workloads


def _create_topics(bootstrap: str, topics: dict[str, int], replicas: int = 1,
                   config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, p, replicas, config=config or {})
                                   for t, p in topics.items()],
                                  operation_timeout=60, request_timeout=60)
    for future in futures.values():
        future.result(timeout=90)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every partition has a leader
        meta = admin.list_topics(timeout=10).topics
        if all(t in meta and len(meta[t].partitions) == p
               and all(pm.leader >= 0 for pm in meta[t].partitions.values())
               for t, p in topics.items()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topics {sorted(topics)} have no leaders")


def _java_tool(classpath: str, main: str, args: Sequence[str], timeout: float) -> str:
    done = subprocess.run(["java", *TOOL_OPTS, "-cp", classpath, main, *args],
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{main} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def producer_performance(classpath: str, bootstrap: str, topic: str, messages: int,
                         acks: str) -> tuple[float, float]:
    """Kafka's ProducerPerformance, unthrottled; its own (msgs/s, MB/s)."""
    out = _java_tool(classpath, "org.apache.kafka.tools.ProducerPerformance", [
        "--topic", topic, "--num-records", str(messages), "--record-size", str(SIZE),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
        f"acks={acks}"], 600)
    # "N records sent, X records/sec (Y MB/sec), ..." -- the last such line is the total
    line = [ln for ln in out.splitlines() if "records sent" in ln][-1]
    rate = float(line.split(",")[1].split()[0])
    mb = float(line.split("(")[1].split()[0])
    return rate, mb


def consumer_performance(classpath: str, bootstrap: str, topic: str,
                         messages: int) -> tuple[float, float]:
    """Kafka's ConsumerPerformance; its fetch rate (msgs/s, MB/s), the group join left out."""
    out = _java_tool(classpath, "org.apache.kafka.tools.ConsumerPerformance", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(messages),
        "--timeout", "60000", "--group", f"perf-{uuid.uuid4().hex[:8]}"], 600)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    header = [h.strip() for h in lines[-2].split(",")]
    values = [v.strip() for v in lines[-1].split(",")]
    row = dict(zip(header, values, strict=False))
    if int(row["data.consumed.in.nMsg"]) < messages:
        raise RuntimeError(f"ConsumerPerformance read {row['data.consumed.in.nMsg']} of {messages}")
    return float(row["fetch.nMsg.sec"]), float(row["fetch.MB.sec"])


def e2e_latency(bootstrap: str, topic: str, seconds: float, rate: int = LATENCY_RATE
                ) -> tuple[float, float, float]:
    """p50/p99/p99.9 ms from librdkafka send to librdkafka receive at ``rate`` msgs/s."""
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                         "fetch.min.bytes": 1})
    consumer.list_topics(topic, timeout=10)
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    consumer.consume(num_messages=1, timeout=1.0)  # the assignment's offset is known
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "1"})
    producer.list_topics(topic, timeout=10)
    pad = b"x" * (SIZE - 20)
    samples: list[float] = []
    stop = threading.Event()
    warm_until = time.perf_counter_ns() + 1_000_000_000
    total = int(rate * (seconds + 1))

    def read() -> None:
        got = 0
        while got < total and not stop.is_set():
            for msg in consumer.consume(num_messages=1000, timeout=0.1):
                if msg.error() is not None:
                    continue
                now = time.perf_counter_ns()
                sent = int(msg.value()[:20])
                got += 1
                if sent >= warm_until:
                    samples.append((now - sent) / 1e6)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    began = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - began) * rate))
        while sent < due:
            try:
                producer.produce(topic, b"%020d" % time.perf_counter_ns() + pad, partition=0)
            except BufferError:  # the broker is behind: wait for deliveries (it shows as latency)
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0)
        time.sleep(0.0005)
    producer.flush(30)
    reader.join(timeout=30)
    stop.set()
    consumer.close()
    if len(samples) < rate * seconds * 0.9:
        raise RuntimeError(f"latency run received {len(samples)} of ~{int(rate * seconds)} samples")
    samples.sort()

    def pct(q: float) -> float:
        return samples[min(len(samples) - 1, int(q * len(samples)))]

    return pct(0.50), pct(0.99), pct(0.999)


# ------------------------------------------------------------------------------- one round


PRODUCE = [(p, acks) for p in (1, 6) for acks in ("1", "all")]


def _measure(broker: Broker, messages: int, step: Callable[[], tuple[float, float | None]]
             ) -> Sample | None:
    """One row; a row that fails is reported on stderr and left out of this round (its
    cell shows the other rounds, or "-"), so one bad row does not lose the whole run."""
    cpu = broker.cpu()
    try:
        value, mb = step()
    except Exception as exc:  # noqa: BLE001 - any failure of a client or tool: report, go on
        print(f"{broker.name}: a row failed: {exc!r}"[:2000], file=sys.stderr, flush=True)
        return None
    used = broker.cpu() - cpu
    return Sample(value, mb, used / messages * 1e6 if messages else None)


def one_round(broker: Broker, classpath: str, messages: int, latency_s: float
              ) -> dict[str, Sample]:
    topics = {f"{tool}-p{p}-a{acks}": p for tool in ("rd", "pp") for p, acks in PRODUCE}
    topics["lat"] = 1
    _create_topics(broker.bootstrap, topics)
    got: dict[str, Sample | None] = {}
    for p, acks in PRODUCE:
        def rd(p: int = p, acks: str = acks) -> tuple[float, float]:
            elapsed = rdkafka_produce(broker.port, messages, SIZE, p, acks, topic=f"rd-p{p}-a{acks}",
                                      batch_bytes=BATCH_BYTES)
            return messages / elapsed, messages * SIZE / elapsed / 1e6

        got[f"produce {p}p acks={acks}, librdkafka"] = _measure(broker, messages, rd)
        got[f"produce {p}p acks={acks}, ProducerPerformance"] = _measure(
            broker, messages, lambda p=p, acks=acks: producer_performance(
                classpath, broker.bootstrap, f"pp-p{p}-a{acks}", messages, acks))
    for p in (1, 6):
        def rdc(p: int = p) -> tuple[float, float]:
            read, payload, elapsed = rdkafka_consume(broker.port, messages, p, 120,
                                                     topic=f"rd-p{p}-a1")
            if read != messages:
                raise RuntimeError(f"librdkafka read {read} of {messages}")
            return read / elapsed, payload / elapsed / 1e6

        got[f"consume {p}p, librdkafka"] = _measure(broker, messages, rdc)
        got[f"consume {p}p, ConsumerPerformance"] = _measure(
            broker, messages, lambda p=p: consumer_performance(
                classpath, broker.bootstrap, f"pp-p{p}-a1", messages))
    latency: list[float] = []

    def lat() -> tuple[float, None]:
        latency.extend(e2e_latency(broker.bootstrap, "lat", latency_s))
        return latency[0], None

    total = int(LATENCY_RATE * (latency_s + 1))
    if (first := _measure(broker, total, lat)) is not None:
        for name, value in zip(("p50", "p99", "p99.9"), latency, strict=True):
            got[f"end-to-end {name} at 20k msgs/s, ms"] = Sample(value, None, first.cpu_s_per_m)
    rss = broker.peak_rss_mb()
    if rss is not None:
        got["broker peak RSS, MB"] = Sample(rss)
    return {name: sample for name, sample in got.items() if sample is not None}


def round_order(r: int) -> tuple[str, str]:
    """Which system runs first in round ``r`` (from 0): they take turns."""
    return ("skerry", "kafka") if r % 2 == 0 else ("kafka", "skerry")


def run(*, rounds: int, messages: int, latency_s: float, python: str = sys.executable,
        cluster: bool = False, progress: Callable[[str], None] = lambda _s: None) -> list[Row]:
    classpath = kafka_classpath()
    rows: dict[str, Row] = {}
    singles = {"skerry": lambda w: skerry(w, python), "kafka": lambda w: apache_kafka(w, classpath)}
    clusters = {"skerry": skerry_cluster, "kafka": lambda w: apache_kafka_cluster(w, classpath)}
    for r in range(rounds):
        for name in round_order(r):
            start = singles[name]
            workdir = Path(tempfile.mkdtemp(prefix=f"skerry-vs-apache-{name}-"))
            try:
                with start(workdir) as broker:
                    progress(f"round {r + 1}/{rounds}: {name} on {broker.bootstrap}")
                    for row, sample in one_round(broker, classpath, messages, latency_s).items():
                        entry = rows.setdefault(row, Row(row, "ms" if "ms" in row or "MB" in row
                                                         else "msgs/s"))
                        getattr(entry, name).append(sample)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
        if not cluster:
            continue
        for name in round_order(r):
            start_cluster = clusters[name]
            workdir = Path(tempfile.mkdtemp(prefix=f"skerry-vs-apache-{name}-cluster-"))
            try:
                with start_cluster(workdir) as members:
                    progress(f"round {r + 1}/{rounds}: {name}, 3 brokers on {members.bootstrap}")
                    for row, sample in cluster_round(members, messages).items():
                        getattr(rows.setdefault(row, Row(row, "msgs/s")), name).append(sample)
            except Exception as exc:  # noqa: BLE001 - the cluster row is optional: report it
                progress(f"round {r + 1}/{rounds}: {name} 3-broker cluster failed: {exc!r}"[:3000])
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
    return list(rows.values())


# ----------------------------------------------------------------------------------- table


def _fmt(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e4:
        return f"{v / 1e3:.0f}k"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}"


def _cell(samples: list[Sample]) -> str:
    if not samples:
        return "-"
    values = [s.value for s in samples]
    med = statistics.median(values)
    text = _fmt(med)
    if len(values) > 1:
        text += f" ({_fmt(min(values))}–{_fmt(max(values))})"
    mbs = [s.mb_s for s in samples if s.mb_s is not None]
    if mbs:
        text += f", {statistics.median(mbs):.1f} MB/s"
    return text


def _cpu(samples: list[Sample]) -> str:
    cpus = [s.cpu_s_per_m for s in samples if s.cpu_s_per_m is not None]
    return f"{statistics.median(cpus):.1f}" if cpus else "-"


def _ratio(value: float) -> str:
    """Two decimals, or three where two would print 1.00: a row level with Kafka shows on
    which side of 1 it is (0.998, 1.003)."""
    text = f"{value:.2f}"
    return f"{value:.3f}" if text == "1.00" and value != 1.0 else text


def render(rows: list[Row], header: str) -> str:
    lines = [header, "",
             "| row | Skerry | Apache Kafka | Skerry/Kafka | broker CPU s per M msgs, Skerry / Kafka |",
             "|---|---|---|---|---|"]
    for row in rows:
        s = statistics.median(x.value for x in row.skerry) if row.skerry else 0.0
        k = statistics.median(x.value for x in row.kafka) if row.kafka else 0.0
        ratio = _ratio(s / k) if k and row.skerry else "-"
        lines.append(f"| {row.name} | {_cell(row.skerry)} | {_cell(row.kafka)} | {ratio} | "
                     f"{_cpu(row.skerry)} / {_cpu(row.kafka)} |")
    return "\n".join(lines) + "\n"


def _header(rounds: int, messages: int, latency_s: float, command: str) -> str:
    load = os.getloadavg()
    return (f"Command: `{command}`.\n\n"
            f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine()} "
            f"(Apache Kafka 4.3.1 on {_java_version()}); load average {load[0]:.1f} (1 min) "
            f"when the table was printed. {rounds} round(s), {messages:,} x {SIZE}-byte records per row, "
            f"latency {latency_s:g} s at {LATENCY_RATE:,} msgs/s; medians (min–max). Skerry "
            f"`storage.fsync: interval`; Kafka defaults (no fsync: the page cache only). "
            f"Throughput rows: higher is better; latency, CPU and RSS rows: lower is better.")


def _java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
        return out.stderr.splitlines()[0].replace('"', "")
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "java"


def write_doc(table: str, path: Path = DOC) -> None:
    """Replace the text between the apache markers of ``path`` with ``table``."""
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    begins = [i for i, ln in enumerate(lines) if ln.strip() == BEGIN]
    ends = [i for i, ln in enumerate(lines) if ln.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or begins[0] > ends[0]:
        raise MarkerError(f"expected one {BEGIN} line followed by one {END} line in {path}")
    block = BEGIN + "\n" + table.strip("\n") + "\n" + END + "\n"
    path.write_text("".join(lines[:begins[0]]) + block + "".join(lines[ends[0] + 1:]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=1_000_000,
                        help="records per produce/consume row")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--cluster", action="store_true",
                        help="also the 3-broker rows (RF 3, acks=all, min ISR 2): Skerry on "
                             "etcd against a 3-node KRaft cluster")
    parser.add_argument("--write-doc", action="store_true",
                        help="rewrite the Apache Kafka table in docs/performance.md")
    args = parser.parse_args(argv)
    rows = run(rounds=max(1, args.rounds), messages=args.messages, latency_s=args.latency_seconds,
               cluster=args.cluster, progress=lambda s: print(s, file=sys.stderr, flush=True))
    command = " ".join([".venv/bin/python -m bench.kafka_vs_apache", *(argv if argv is not None
                                                                       else sys.argv[1:])])
    table = render(rows, _header(args.rounds, args.messages, args.latency_seconds, command))
    print(table)
    if args.write_doc:
        write_doc(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
