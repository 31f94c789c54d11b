"""One real Kafka group consumer, run as a child process by the group tests:
``python -m tests.kafka.group_member --client kp|ck [--api 0.9|0.10.1|default] ...``.

It subscribes to one topic with a group id (kafka-python's ``KafkaConsumer`` or
confluent-kafka's ``Consumer``), commits synchronously after every batch it processed, and
appends one JSON line per event to ``--log`` (flushed at once, so a ``kill -9`` loses
nothing written before it):

* ``{"e": "assign", "member": id, "gen": n|null, "parts": [..], "t": wall seconds}`` and
  ``{"e": "revoke", ...}``: every rebalance callback (kafka-python reports the generation;
  confluent-kafka does not expose it, ``gen`` is null);
* ``{"e": "msg", "p": partition, "o": offset, "v": value}``: every message consumed;
* ``{"e": "commit", "offsets": {partition: next offset}}``: after each synchronous commit;
* ``{"e": "done", "count": n}``: a clean exit after ``--expect`` distinct messages, or once
  the file ``--stop`` exists (the consumer is closed, which leaves the group).

Not a test module: tests/kafka/test_group_clients.py runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

_LOG: Any = None


def emit(event: dict[str, Any]) -> None:
    _LOG.write(json.dumps(event) + "\n")
    _LOG.flush()


def kafka_python(args: argparse.Namespace) -> int:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata

    options: dict[str, Any] = {}
    poll_interval_ms = args.poll_interval_ms
    if args.api != "default":
        options["api_version"] = tuple(int(x) for x in args.api.split("."))
        if options["api_version"] < (0, 10, 1):
            poll_interval_ms = args.session_ms  # JoinGroup v0 has no rebalance timeout
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.name,
        auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
        max_poll_interval_ms=poll_interval_ms, fetch_max_wait_ms=200, **options)

    def generation() -> int | None:
        gen = getattr(getattr(consumer, "_coordinator", None), "_generation", None)
        return getattr(gen, "generation_id", None)

    def member() -> str | None:
        gen = getattr(getattr(consumer, "_coordinator", None), "_generation", None)
        return getattr(gen, "member_id", None)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit({"e": "revoke", "member": member(), "gen": generation(),
                  "parts": sorted(tp.partition for tp in revoked), "t": time.time()})

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit({"e": "assign", "member": member(), "gen": generation(),
                  "parts": sorted(tp.partition for tp in assigned), "t": time.time()})

    consumer.subscribe([args.topic], listener=Listener())
    seen: set[tuple[int, int]] = set()
    deadline = time.monotonic() + args.max_seconds
    while time.monotonic() < deadline:
        if args.stop and os.path.exists(args.stop):
            break
        # A long poll timeout on purpose: kafka-python 3.0.12 never completes a rejoin
        # started by a metadata change if poll()'s timer expires while its JoinGroup is in
        # flight (join_group_async returns False, the leader's assignment then clears
        # need_rejoin, so on_join_complete never runs and heartbeats stay off). Seen with
        # api_version=None, which joins before it has the topic's metadata.
        batches = consumer.poll(timeout_ms=1000)
        offsets = {}
        for tp, records in batches.items():
            for record in records:
                emit({"e": "msg", "p": tp.partition, "o": record.offset,
                      "v": record.value.decode()})
                seen.add((tp.partition, record.offset))
            offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
        if offsets:
            consumer.commit(offsets)
            emit({"e": "commit", "offsets": {str(tp.partition): m.offset
                                             for tp, m in offsets.items()}})
        if args.expect and len(seen) >= args.expect:
            break
    consumer.close()
    emit({"e": "done", "count": len(seen)})
    return 0 if not args.expect or len(seen) >= args.expect else 3


def confluent(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, TopicPartition

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.name,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "session.timeout.ms": args.session_ms, "heartbeat.interval.ms": args.heartbeat_ms,
        "max.poll.interval.ms": args.poll_interval_ms, "fetch.wait.max.ms": 200,
        "log_level": 3,
    }
    if args.api != "default":
        config.update({"api.version.request": False, "broker.version.fallback": args.api})
    if args.protocol == "consumer":  # KIP-848: the coordinator sets session and heartbeat
        del config["session.timeout.ms"], config["heartbeat.interval.ms"]
        config["group.protocol"] = "consumer"
    if args.assignor:
        config["partition.assignment.strategy"] = args.assignor
    consumer = Consumer(config)

    def on_assign(c: Any, partitions: list[Any]) -> None:
        emit({"e": "assign", "member": c.memberid(), "gen": None,
              "parts": sorted(tp.partition for tp in partitions), "t": time.time()})

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        emit({"e": "revoke", "member": c.memberid(), "gen": None,
              "parts": sorted(tp.partition for tp in partitions), "t": time.time()})

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    seen: set[tuple[int, int]] = set()
    deadline = time.monotonic() + args.max_seconds
    while time.monotonic() < deadline:
        if args.stop and os.path.exists(args.stop):
            break
        messages = consumer.consume(num_messages=500, timeout=args.batch_timeout)
        offsets: dict[int, int] = {}
        for message in messages:
            if message.error():
                continue
            emit({"e": "msg", "p": message.partition(), "o": message.offset(),
                  "v": message.value().decode(), "t": time.time(),
                  "ts": message.timestamp()[1] / 1000.0})
            seen.add((message.partition(), message.offset()))
            offsets[message.partition()] = message.offset() + 1
        if offsets:
            try:
                consumer.commit(offsets=[TopicPartition(args.topic, p, o)
                                         for p, o in offsets.items()], asynchronous=False)
            except Exception as error:  # noqa: BLE001 - a commit refused by a rebalance
                emit({"e": "commit-failed", "error": str(error)})
            else:
                emit({"e": "commit", "offsets": {str(p): o for p, o in offsets.items()}})
        if args.expect and len(seen) >= args.expect:
            break
    consumer.close()
    emit({"e": "done", "count": len(seen)})
    return 0 if not args.expect or len(seen) >= args.expect else 3


def main() -> int:
    global _LOG
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=["kp", "ck"], required=True)
    parser.add_argument("--api", default="default",
                        help="kafka-python api_version (0.9, 0.10.1) or confluent-kafka "
                             "broker.version.fallback (0.9.0); default: the client's own")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--name", default="member")
    parser.add_argument("--log", required=True)
    parser.add_argument("--expect", type=int, default=0)
    parser.add_argument("--stop", default="")
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--poll-interval-ms", type=int, default=10000)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--batch-timeout", type=float, default=0.2,
                        help="confluent-kafka: how long one consume() waits for a batch")
    parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic",
                        help="confluent-kafka's group.protocol (consumer: KIP-848)")
    parser.add_argument("--assignor", default="",
                        help="confluent-kafka's partition.assignment.strategy (classic)")
    args = parser.parse_args()
    _LOG = open(args.log, "a")  # noqa: SIM115 - kept open for the process's life
    emit({"e": "start", "client": args.client, "api": args.api, "pid": os.getpid(),
          "t": time.time()})
    return kafka_python(args) if args.client == "kp" else confluent(args)


if __name__ == "__main__":
    sys.exit(main())
