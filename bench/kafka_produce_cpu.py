"""Broker CPU per produced record on the Kafka listener, in process, from a real client's bytes.

Owns: recording what a real Kafka producer sends (Kafka's ``ProducerPerformance``, the
Java client at its defaults, or librdkafka as ``bench.kafka`` drives it) to a Skerry broker
through a ``bench.tcp_proxy.TcpProxy`` the broker advertises as its Kafka address, one file
per connection; then
replaying those bytes into a fresh in-process broker (``build_broker``, a
``StringTransport`` per connection, a ``task.Clock``, ``storage.fsync: never``) in reads
of 256 KiB, timing the CPU the broker spends per record (best of ``--rounds`` replays).
Each replay must append every record the client sent: an idempotent producer's id comes
from the broker's first ``InitProducerId``, the same in a fresh data directory.

Why: the produce rows of ``bench.kafka_vs_apache`` share two cores between the client and
the broker, so their rates move with the run; this figure does not (no sockets, no client,
no other process), so two trees can be compared on a loaded machine, as
``bench.kafka_cpu`` does for the consume path. ``python -m bench.kafka_produce_cpu``
records ``ProducerPerformance`` with acks=all to 6 partitions (the shape of the table's
``produce 6p acks=all, ProducerPerformance`` row: 16 KiB batches, idempotent); ``--client
rdkafka`` records librdkafka's large batches instead; ``--keep DIR`` keeps the recording
and ``--replay DIR`` replays one without recording again (Java not needed then).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from bench.tcp_proxy import TcpProxy
from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.server import build_broker

TOPIC = "recorded"
READ = 256 * 1024
"""Bytes per ``dataReceived`` of a replay (what a socket read hands the protocol)."""


def record(out: Path, client: str, messages: int, partitions: int, acks: str) -> float:
    """Run the producer against a real Skerry through a recording ``TcpProxy``; return its msgs/s."""
    import bench.kafka_vs_apache as vs
    from bench.kafka import _produce as rdkafka_produce

    out.mkdir(parents=True, exist_ok=True)
    proxy = TcpProxy(("127.0.0.1", 0), record=out)  # its target is the broker, once up
    work = Path(tempfile.mkdtemp(prefix="skerry-kafka-produce-cpu-"))
    try:
        settings = {"kafka": {"advertised": f"127.0.0.1:{proxy.port}"}}
        with vs.skerry(work, settings=settings) as broker:
            proxy.target = ("127.0.0.1", broker.port)
            vs._create_topics(broker.bootstrap, {TOPIC: partitions})
            if client == "ppp":
                rate, _mb = vs.producer_performance(
                    vs.kafka_classpath(), f"127.0.0.1:{proxy.port}", TOPIC, messages, acks)
            else:
                elapsed = rdkafka_produce(proxy.port, messages, vs.SIZE, partitions, acks,
                                          topic=TOPIC, batch_bytes=vs.BATCH_BYTES)
                rate = messages / elapsed
    finally:
        proxy.cut()
        proxy.join()
        shutil.rmtree(work, ignore_errors=True)
    (out / "meta.json").write_text(json.dumps({
        "client": client, "messages": messages, "partitions": partitions, "acks": acks}))
    return rate


def replay(recording: Path) -> tuple[int, float]:
    """Feed every recorded connection to a fresh in-process broker; (records appended, CPU
    seconds spent on the connections' bytes)."""
    meta = json.loads((recording / "meta.json").read_text())
    streams = [p.read_bytes() for p in sorted(recording.glob("conn*.bin"))]
    with tempfile.TemporaryDirectory(prefix="skerry-kafka-replay-") as tmp:
        clock = Clock()
        broker = build_broker(config_from_mapping({
            "data_dir": tmp, "storage.fsync": "never", "kafka_port": 0,
            "topics": {TOPIC: {"partitions": meta["partitions"]}}}), clock,
            run_in_thread=synchronous)
        spent = 0.0
        try:
            for data in streams:
                protocol = broker.kafka.factory.buildProtocol(("127.0.0.1", 2))
                out = StringTransport()
                protocol.makeConnection(out)
                start = time.process_time()
                for at in range(0, len(data), READ):
                    protocol.dataReceived(data[at:at + READ])
                    clock.advance(0)
                    out.clear()
                spent += time.process_time() - start
                protocol.connectionLost(None)  # type: ignore[arg-type]
            topic = broker.store.topic(TOPIC)
            assert topic is not None
            appended = sum(p.next_offset for p in topic.partitions)
        finally:
            broker.store.close()
    return appended, spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_produce_cpu",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", choices=["ppp", "rdkafka"], default="ppp")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--acks", default="all")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="record into this folder and keep it")
    parser.add_argument("--replay", type=Path, help="replay this recording (no recording)")
    opts = parser.parse_args(argv)
    scratch = None
    if opts.replay is not None:
        recording = opts.replay
    else:
        recording = opts.keep or Path(scratch := tempfile.mkdtemp(prefix="skerry-recorded-"))
        rate = record(recording, opts.client, opts.messages, opts.partitions, opts.acks)
        print(f"recorded {opts.client} at {rate:,.0f} msgs/s into {recording}")
    try:
        meta = json.loads((recording / "meta.json").read_text())
        per_record = []
        for _ in range(opts.rounds):
            appended, spent = replay(recording)
            if appended != meta["messages"]:
                print(f"replay appended {appended} of {meta['messages']} records", file=sys.stderr)
                return 1
            per_record.append(spent / appended * 1e6)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"Kafka produce, {meta['client']} acks={meta['acks']} to {meta['partitions']} "
          f"partitions, {meta['messages']:,} records of 100 bytes replayed in process: "
          f"{min(per_record):.3f} us CPU a record (best of {opts.rounds}; rounds "
          f"{', '.join(f'{x:.3f}' for x in per_record)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
