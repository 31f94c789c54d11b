"""Throughput of the Kafka transport with a real client: confluent-kafka (librdkafka)
producing and consuming 100-byte messages through Skerry's Kafka listener.

Starts ``python -m broker serve`` with ``kafka_port`` (and ``iggy_port``, for the reference)
on free loopback ports and a fresh data directory, then:

* produce: one confluent-kafka ``Producer`` sends ``--messages`` values of ``--size``
  bytes with ``produce_batch`` (10,000 per call), in turn to ``--partitions`` partitions
  of topic ``bench`` (no keys, ``acks`` as ``--acks``, librdkafka batching: ``linger.ms``
  5, up to 10,000 messages per request), and flushes; the rate is messages over the time
  from the first call to the end of ``flush()``;
* consume: one ``Consumer`` is ``assign()``ed every partition from the beginning and reads
  until it has every message (``consume(num_messages=10000)``), or time is up.

The reference, in the same run on the same broker: ``bench.iggy``'s raw-frame send and
poll (batches of 1,000 x ``--size`` bytes, one connection), printed with the Kafka figures
as a ratio. Both also report the broker's CPU time per message (from ``/proc``), steadier
than the rate on a small shared machine.

Run ``python -m bench.kafka --help`` for the options.

Must not import: broker internals (the client is the real one; the reference is
``bench.iggy``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.iggy import _cpu_per_msg, _cpu_seconds, _machine_ticks, _steal_percent, machine
from bench.iggy import run_bench as run_iggy_bench
from bench.serve import start_serve, stop_serve

__all__ = ["Phase", "run_bench", "main"]


TARGETS = {"produce": 500_000, "consume": 1_000_000}
"""The issue's targets (msgs/s, 100-byte messages)."""


@dataclass
class Phase:
    name: str
    messages: int
    seconds: float
    payload_bytes: int
    server_cpu_us_per_msg: float | None = None
    steal_percent: float | None = None
    client_cpu_us_per_msg: float | None = None
    """CPU time of the benchmark process itself (confluent-kafka's Python calls and
    librdkafka's threads): on a 2-core machine the client and the broker share the cores."""

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0


def _start_broker(workdir: Path, fsync: str, python: str) -> tuple[subprocess.Popen[bytes], int]:
    proc, port, _log = start_serve(workdir, {
        "data_dir": str(workdir / "data"), "port": 0, "kafka_port": 0, "log_level": "warning",
        "storage": {"fsync": fsync}, "limits": {"max_pending_output_bytes": 8 << 20},
    }, "kafka", python)
    return proc, port


def _produce(port: int, messages: int, size: int, partitions: int, acks: str,
             topic: str = "bench", batch_bytes: int = 4 << 20) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 5,
                         "batch.num.messages": 10000, "batch.size": batch_bytes,
                         "queue.buffering.max.messages": 2_000_000,
                         "queue.buffering.max.kbytes": 2 << 20, "acks": acks,
                         "message.max.bytes": 8 << 20,
                         # reports for failed messages only: a Python callback per message
                         # would cost the client more than the broker's work per message
                         "delivery.report.only.error": True})
    value = (bytes(range(256)) * (size // 256 + 1))[:size]
    errors: list[object] = []

    def report(err: object, _msg: object) -> None:
        errors.append(err)

    producer.list_topics(topic, timeout=10)  # metadata first: not part of the rate
    # produce_batch: one Python call per 10,000 messages (librdkafka still batches them
    # per partition itself), so the client's Python cost does not hide the broker's.
    chunk = 10_000
    batches = {p: [{"value": value}] * chunk for p in range(partitions)}
    began = time.monotonic()
    sent = 0
    turn = 0
    while sent < messages:
        n = min(chunk, messages - sent)
        batch = batches[turn % partitions][:n]
        queued = producer.produce_batch(topic, batch, partition=turn % partitions,
                                        on_delivery=report)
        while queued < n:  # the local queue was full: wait for deliveries, send the rest
            producer.poll(0.05)
            queued += producer.produce_batch(topic, batch[queued:],
                                             partition=turn % partitions, on_delivery=report)
        sent += n
        turn += 1
        producer.poll(0)
    left = producer.flush(120)
    elapsed = time.monotonic() - began
    if left or errors:
        raise RuntimeError(f"{left} messages not delivered; errors: {errors[:3]}")
    return elapsed


def _consume(port: int, messages: int, partitions: int, timeout: float,
             topic: str = "bench") -> tuple[int, int, float]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "bench",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                         "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 8 << 20,
                         "queued.max.messages.kbytes": 1 << 20,
                         # librdkafka stops fetching a partition whose local queue holds
                         # more than queued.min.messages (100,000) and looks again only
                         # after fetch.queue.backoff.ms (1,000 ms by default): a consumer
                         # that drains its queue in 0.1 s then waits 0.9 s for the next
                         # fetch. librdkafka's docs advise lowering it in that case.
                         "fetch.queue.backoff.ms": 10})
    # Metadata first, as the producer does: a partition assigned before the client knows
    # its leader waits for librdkafka's 500 ms offset-query timer before its first fetch.
    consumer.list_topics(topic, timeout=10)
    read = 0
    began = time.monotonic()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    deadline = began + timeout
    while read < messages and time.monotonic() < deadline:
        batch = consumer.consume(num_messages=10000, timeout=0.5)
        if batch and (batch[0].error() is not None or batch[-1].error() is not None):
            raise RuntimeError(f"consume error: {batch[0].error() or batch[-1].error()}")
        read += len(batch)
    elapsed = time.monotonic() - began
    last = len(batch[-1].value()) if read else 0
    consumer.close()
    return read, read * last, elapsed


def run_bench(*, messages: int, size: int, partitions: int, acks: str, fsync: str,
              python: str = sys.executable) -> list[Phase]:
    """Start a broker, produce then consume through its Kafka listener; both phases."""
    workdir = Path(tempfile.mkdtemp(prefix="skerry-kafka-bench-"))
    proc, port = _start_broker(workdir, fsync, python)
    try:
        # The topic is auto-created by the producer's first Metadata request, with the
        # broker's default partition count (3): --partitions uses the first ones.
        cpu, ticks, mine = _cpu_seconds(proc.pid), _machine_ticks(), time.process_time()
        elapsed = _produce(port, messages, size, partitions, acks)
        cpu2, ticks2, mine2 = _cpu_seconds(proc.pid), _machine_ticks(), time.process_time()
        phases = [Phase("produce", messages, elapsed, messages * size,
                        _cpu_per_msg(cpu, cpu2, messages), _steal_percent(ticks, ticks2),
                        _cpu_per_msg(mine, mine2, messages))]
        cpu, ticks, mine = _cpu_seconds(proc.pid), _machine_ticks(), time.process_time()
        read, payload, elapsed = _consume(port, messages, partitions, 120)
        cpu2, ticks2, mine2 = _cpu_seconds(proc.pid), _machine_ticks(), time.process_time()
        phases.append(Phase("consume", read, elapsed, payload,
                            _cpu_per_msg(cpu, cpu2, read), _steal_percent(ticks, ticks2),
                            _cpu_per_msg(mine, mine2, read)))
        if read != messages:
            raise RuntimeError(f"consumed {read} messages of {messages} produced")
        return phases
    finally:
        stop_serve(proc)
        shutil.rmtree(workdir, ignore_errors=True)


def _line(p: Phase, reference: float | None) -> str:
    cpu = "" if p.server_cpu_us_per_msg is None else f"  broker CPU {p.server_cpu_us_per_msg:.2f} us/msg"
    if p.client_cpu_us_per_msg is not None:
        cpu += f"  client CPU {p.client_cpu_us_per_msg:.2f} us/msg"
    if p.steal_percent is not None:
        cpu += f"  steal {p.steal_percent:.0f}%"
    ratio = "" if not reference else f"  ({p.rate / reference:.2f}x the Iggy reference)"
    return (f"{p.name:8} {p.rate:>11,.0f} msgs/s  {p.payload_bytes / p.seconds / 1e6:7.1f} MB/s  "
            f"({p.messages:,} msgs in {p.seconds:.2f} s){cpu}{ratio}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per message")
    parser.add_argument("--partitions", type=int, default=1,
                        help="partitions used (the topic is auto-created with the broker's "
                             "default of 3, so at most 3)")
    parser.add_argument("--acks", choices=("0", "1", "all"), default="1")
    parser.add_argument("--fsync", choices=("always", "interval", "never"), default="never")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs, each on a fresh broker; medians are reported")
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the Iggy reference run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    runs = [run_bench(messages=args.messages, size=args.size, partitions=args.partitions,
                      acks=args.acks, fsync=args.fsync) for _ in range(max(1, args.repeat))]
    medians = {p.name: statistics.median(run[i].rate for run in runs)
               for i, p in enumerate(runs[0])}
    reference: dict[str, float] = {}
    if not args.no_reference:
        iggy = run_iggy_bench(seconds=3.0, connections=1, batch=1000, size=args.size,
                              fsync=args.fsync)
        reference = {"produce": iggy[0].rate, "consume": iggy[1].rate}
    if args.json:
        print(json.dumps({"machine": machine(), "fsync": args.fsync, "acks": args.acks,
                          "size": args.size, "median_rate": medians, "reference": reference,
                          "runs": [[asdict(p) | {"rate": p.rate} for p in run] for run in runs]},
                         indent=2))
        return 0
    print(f"# {machine()}; confluent-kafka producer/consumer, {args.messages:,} x {args.size} B, "
          f"{args.partitions} partition(s), acks={args.acks}, storage.fsync={args.fsync}")
    for i, run in enumerate(runs):
        if len(runs) > 1:
            print(f"run {i + 1}:")
        for p in run:
            print(_line(p, reference.get(p.name)))
    if reference:
        print(f"reference (bench.iggy, raw frames, batches of 1,000): send "
              f"{reference['produce']:,.0f} msgs/s, poll {reference['consume']:,.0f} msgs/s")
    print(f"median of {len(runs)} run(s):")
    for name, rate in medians.items():
        verdict = "met" if rate >= TARGETS[name] else "missed"
        print(f"  {name:8} {rate:>11,.0f} msgs/s  target {TARGETS[name]:,}: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
