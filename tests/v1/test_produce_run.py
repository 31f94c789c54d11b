"""A pipelined read of plain PRODUCEs goes to the core as one request (``BrokerCore.produce``): the
same answers, in the same order, as one message at a time, including refusals and keys
spread over partitions. In process: ``V1Protocol`` over a fake transport, a real store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.server import build_broker
from data.keys import fnv1a_32


def _connection(tmp_path: Path, **config: Any) -> tuple[Any, StringTransport, Clock]:
    clock = Clock()
    broker = build_broker(config_from_mapping({"data_dir": str(tmp_path / "data"), **config}),
                          clock, run_in_thread=synchronous)
    proto = broker.v1_factory.buildProtocol(("127.0.0.1", 1))
    transport = StringTransport()
    proto.makeConnection(transport)
    return proto, transport, clock


def _replies(proto: Any, transport: StringTransport, clock: Clock, data: bytes) -> list[bytes]:
    transport.clear()
    proto.dataReceived(data)
    clock.advance(0)
    return transport.value().splitlines()


def test_a_run_over_several_partitions_answers_in_order(tmp_path: Path) -> None:
    proto, transport, clock = _connection(tmp_path, topics={"t": {"partitions": 3}})
    keys = [b"user%d" % (i % 5) for i in range(12)]
    data = b"".join(b"V1|%d|PRODUCE|t %s:v%d\n" % (i, key, i) for i, key in enumerate(keys))
    replies = _replies(proto, transport, clock, data)
    assert [r.split(b"|")[1] for r in replies] == [b"%d" % i for i in range(12)]
    next_offset = [0, 0, 0]
    for key, reply in zip(keys, replies, strict=True):
        partition = fnv1a_32(key) % 3
        assert reply.startswith(b"V1|")
        assert b"|OK|partition=%d offset=%d " % (partition, next_offset[partition]) in reply
        next_offset[partition] += 1
    for partition in range(3):
        [consumed] = _replies(proto, transport, clock, b"V1|c|CONSUME|t %d 0 max=100\n" % partition)
        expected = [b"%d:v%d" % (n, i) for n, i in enumerate(
            i for i, key in enumerate(keys) if fnv1a_32(key) % 3 == partition)]
        assert consumed.startswith(b"V1|c|OK|messages=" + b",".join(expected) + b" hw=")


def test_a_refused_run_is_answered_message_by_message(tmp_path: Path) -> None:
    """Unknown topic with auto-create off: the run's call refuses, nothing was queued, and
    each message gets its own error with its own correlation id, in order."""
    proto, transport, clock = _connection(tmp_path, auto_create_topics=False,
                                          topics={"t": {"partitions": 1}})
    data = b"".join(b"V1|%d|PRODUCE|nope k:v\n" % i for i in range(4)) + b"V1|9|PRODUCE|t k:v\n"
    replies = _replies(proto, transport, clock, data)
    assert [r.split(b"|")[1:3] for r in replies] == [
        [b"0", b"ERR"], [b"1", b"ERR"], [b"2", b"ERR"], [b"3", b"ERR"], [b"9", b"OK"]]


def test_a_run_of_two_topics_and_acks_levels(tmp_path: Path) -> None:
    proto, transport, clock = _connection(tmp_path, topics={"a": {"partitions": 1},
                                                            "b": {"partitions": 1}})
    data = (b"V1|1|PRODUCE|a k:1\nV1|2|PRODUCE|b k:2\nV1|3|PRODUCE|a k:3 acks=0\n"
            b"V1|4|PRODUCE|a k:4\n")
    replies = _replies(proto, transport, clock, data)
    assert [r.split(b"|OK|")[1].split(b" hw")[0] for r in replies] == [
        b"partition=0 offset=0", b"partition=0 offset=0", b"partition=0 offset=1",
        b"partition=0 offset=2"]
