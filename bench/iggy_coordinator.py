"""What the extra hop costs an Iggy client: one etcd member and three brokers with an Iggy
listener each (``bench.group_coordinator.GroupCluster``, RF 3), one Iggy client connected
to the coordinator of the group holding its offsets and one connected to another broker,
which sends the group operations to the coordinator over the broker link.

Requests one at a time on one connection, after a warm-up, for each side:

* ``StoreConsumerOffset`` (a consumer's offset: written into ``__skerry_groups`` with
  acks=all at the coordinator before the answer);
* ``GetConsumerOffset`` (a read at the coordinator);
* ``PollMessages`` as a consumer-group member with the ``next`` strategy and no
  auto-commit (the member's partitions and its group's offset come from the coordinator:
  two round trips one hop away).

Prints median and p99 of each, and what the hop adds.

    .venv/bin/python -m bench.iggy_coordinator --requests 1000

Must not import: Twisted or the broker's runtime.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.group_coordinator import GroupCluster, wait
from broker.iggy import codec
from broker.iggy.codec import Consumer, ConsumerKind, Identifier, PollingKind
from tests.iggy.harness import RawClient, iggy_port_of

__all__ = ["measure"]

STREAM, TOPIC = Identifier("default"), Identifier("hop")


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _timed(client: RawClient, make: Callable[[int], codec.Command], count: int) -> list[float]:
    took = []
    for i in range(count):
        cmd = make(i)
        start = time.perf_counter()
        reply = client.call(cmd)
        took.append(time.perf_counter() - start)
        assert reply[:4] == b"\0\0\0\0", (cmd, reply[:64])
    return took


def measure(c: GroupCluster, requests: int) -> dict[str, float]:
    """Latency of the Iggy offset and group requests at the coordinator and one hop away."""
    consumer_id = 1
    group = f"iggy.consumer.{consumer_id}"  # the group holding consumer 1's offsets
    wait(lambda: c.coordinator(group) is not None, "a coordinator", 30)
    coordinator = c.coordinator(group)
    assert coordinator is not None
    other = next(b for b in c.procs if b != coordinator)
    c.fill("hop", 2 * requests + 200, 0)
    figures: dict[str, float] = {}
    consumer = Consumer(ConsumerKind.CONSUMER, Identifier(consumer_id))
    for name, broker in (("direct", coordinator), ("forwarded", other)):
        client = RawClient(iggy_port_of(c.procs[broker].log_text()), timeout=30)
        client.login()
        # Each store moves the offset (an unchanged offset writes nothing).
        base = 0 if name == "direct" else requests + 50

        def store(i: int, base: int = base) -> codec.Command:
            return codec.StoreConsumerOffset(consumer, STREAM, TOPIC, 0, base + i)

        _timed(client, store, 50)
        took = _timed(client, lambda i, base=base: store(i + 50, base), requests)
        figures[f"store_{name}_p50_ms"] = _ms(took, 0.5)
        figures[f"store_{name}_p99_ms"] = _ms(took, 0.99)
        took = _timed(client, lambda i: codec.GetConsumerOffset(consumer, STREAM, TOPIC, 0),
                      requests)
        figures[f"get_{name}_p50_ms"] = _ms(took, 0.5)
        figures[f"get_{name}_p99_ms"] = _ms(took, 0.99)
        member_group = f"hop-{name}"
        client.call(codec.CreateConsumerGroup(STREAM, TOPIC, member_group))
        assert client.call(codec.JoinConsumerGroup(STREAM, TOPIC, Identifier(member_group))
                           )[:4] == b"\0\0\0\0"
        member = Consumer(ConsumerKind.CONSUMER_GROUP, Identifier(member_group))
        took = _timed(client, lambda i, m=member: codec.PollMessages(
            m, STREAM, TOPIC, None, PollingKind.NEXT, 0, 1, False), requests)
        figures[f"poll_{name}_p50_ms"] = _ms(took, 0.5)
        figures[f"poll_{name}_p99_ms"] = _ms(took, 0.99)
        client.close()
    for what in ("store", "get", "poll"):
        figures[f"{what}_hop_adds_p50_ms"] = (figures[f"{what}_forwarded_p50_ms"]
                                              - figures[f"{what}_direct_p50_ms"])
    return {k: round(v, 3) for k, v in figures.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="skerry-iggy-hop-"))
    c = GroupCluster(workdir, extra={"iggy_port": 0})
    try:
        c.start()
        c.ready()
        c.create_topic("hop", 1)
        figures = measure(c, args.requests)
    finally:
        c.close()
    print(json.dumps(figures, indent=2))
    print()
    print("| request | at the coordinator, p50 / p99 | one hop away, p50 / p99 |")
    print("| --- | --- | --- |")
    for what, label in (("get", "GetConsumerOffset"), ("store", "StoreConsumerOffset"),
                        ("poll", "PollMessages (group member, next)")):
        print(f"| {label} | {figures[f'{what}_direct_p50_ms']:.2f} / "
              f"{figures[f'{what}_direct_p99_ms']:.2f} ms | "
              f"{figures[f'{what}_forwarded_p50_ms']:.2f} / "
              f"{figures[f'{what}_forwarded_p99_ms']:.2f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
