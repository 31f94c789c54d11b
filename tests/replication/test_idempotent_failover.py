"""Kafka's idempotent producer across a leader failover, with real brokers replicating in
memory (``cluster_harness``: iosim connections, one task.Clock each): a batch acknowledged
by the old leader and retried against the promoted follower (a client that never saw the
answer) is not written twice, and the producer's sequence goes on where it was."""

from __future__ import annotations

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
