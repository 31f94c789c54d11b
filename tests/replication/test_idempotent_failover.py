"""Kafka's idempotent producer across a leader failover, with real brokers replicating in
memory (``cluster_harness``: iosim connections, one task.Clock each): a batch acknowledged
by the old leader and retried against the promoted follower (a client that never saw the
answer) is not written twice, and the producer's sequence goes on where it was."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from broker.core import ProducerBatch, ProduceRequest, ProduceResult
from data.format import encode_record
from replication.roles import Role
from tests.replication.cluster_harness import TOPIC, Network


def framed(values: list[bytes]) -> tuple[bytes, list[int]]:
    records = [encode_record(0, 0, 0, 0, v, b"") for v in values]
    ends, at = [], 0
    for r in records:
        at += len(r)
        ends.append(at)
    return b"".join(records), ends


def produce(net: Network, broker: int, values: list[bytes], seq: int) -> list[Any]:
    """An acks=all produce of producer 31 epoch 0 to ``broker``; its answers so far."""
    answers: list[Any] = []
    messages, ends = framed(values)
    net.broker(broker).core.produce(ProduceRequest(TOPIC, 0, "all", framed=messages, ends=ends,
                                                   producer=ProducerBatch(31, 0, seq)),
                                    answers.append)
    net.advance(0.3)
    return answers


def values(net: Network, broker: int) -> list[bytes]:
    plog = net.plog(broker)
    return [r.payload for r in plog.read(plog.first_offset, 100_000, 1 << 24).records]


def test_a_retry_after_failover_is_not_written_twice(tmp_path: Path) -> None:
    """Acked by broker 0 and replicated; broker 0 dies; broker 1 is promoted; the retry of
    the last batch there is answered with its original offset; the next batch follows."""
    net = Network(tmp_path)
    net.run_until(lambda: net.confirmed_leader(0), within=5)
    first = produce(net, 0, [b"a", b"b"], 0)
    second = produce(net, 0, [b"c", b"d", b"e"], 2)
    assert [type(a) for a in first + second] == [ProduceResult, ProduceResult]
    assert (first[0].offset, second[0].offset) == (0, 2)
    net.crash(0)
    assert "role=leader" in net.client(1).request(f"SET_PARTITION_ROLE|{TOPIC} 0 leader")
    net.run_until(lambda: net.status(1).role is Role.LEADER, within=2)
    retry = produce(net, 1, [b"c", b"d", b"e"], 2)
    assert len(retry) == 1 and type(retry[0]) is ProduceResult and retry[0].offset == 2
    after = produce(net, 1, [b"f"], 5)
    assert after[0].offset == 5
    assert values(net, 1) == [b"a", b"b", b"c", b"d", b"e", b"f"]
    net.run_until(lambda: net.plog(2).next_offset == 6, within=3)
    assert values(net, 2) == values(net, 1)


def _snapshots(net: Network, broker: int) -> list[int]:
    path = Path(net.plog(broker).path)
    return sorted(int(name.split(".")[0]) for name in os.listdir(path)
                  if name.endswith(".producers"))


def test_a_promoted_follower_replays_only_its_active_segment(tmp_path: Path) -> None:
    """Followers keep the producer state of what they copy and snapshot it at their own
    rolls: after 60 batches over several 4 KiB segments, broker 1 (a follower that never
    led) holds a snapshot inside its active segment. Promoted, its first idempotent produce
    replays only the records after that snapshot, and still answers a retry of a batch
    acknowledged before the failover with the original offset."""
    net = Network(tmp_path, storage={"segment_bytes": 4096})
    net.run_until(lambda: net.confirmed_leader(0), within=5)
    batches = 60
    for i in range(batches):
        answers = produce(net, 0, [b"v%03d" % i + b"x" * 96] * 2, 2 * i)
        assert [type(a) for a in answers] == [ProduceResult]
    end = 2 * batches
    net.run_until(lambda: net.plog(1).next_offset == end, within=3)
    follower = net.plog(1)
    assert follower.segment_count >= 4
    snapshots = _snapshots(net, 1)
    assert len(snapshots) == 1, snapshots  # one at its last roll, older ones removed
    assert follower.segment_bases[-1] <= snapshots[0] <= end
    states = net.broker(1).core._producer_states
    assert states.replayed == 0  # followed the copies without reading the log back
    net.crash(0)
    assert "role=leader" in net.client(1).request(f"SET_PARTITION_ROLE|{TOPIC} 0 leader")
    net.run_until(lambda: net.status(1).role is Role.LEADER, within=2)
    retry = produce(net, 1, [b"v%03d" % (batches - 1) + b"x" * 96] * 2, end - 2)
    assert len(retry) == 1 and type(retry[0]) is ProduceResult and retry[0].offset == end - 2
    assert states.replayed == end - snapshots[0] < end // 2
    older = produce(net, 1, [b"v%03d" % (batches - 3) + b"x" * 96] * 2, end - 6)
    assert older[0].offset == end - 6  # the fifth-newest batch is still known
    after = produce(net, 1, [b"next"], end)
    assert after[0].offset == end
    assert net.plog(1).next_offset == end + 1
