"""Kafka's idempotent producer over the Kafka transport, in memory: a produce request whose
record batch v2 carries a producer id, epoch and base sequence is written once however many
times it is sent (the retry is answered with the first base offset), fenced epochs and
sequence gaps get Kafka's error codes, and a restart keeps it so. Batches are built by
kafka-python's own batch builder, not by the codec under test."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.kafka.codec import ApiKey
from broker.kafka.handlers.data import VERSIONS
from tests.kafka.harness import Harness, i16, i32, string
from tests.kafka.test_data import produce_reply

PRODUCE_VERSION = min(VERSIONS[ApiKey.PRODUCE][1], 8)
"""The newest Produce this broker serves, up to v8 (the last non-flexible layout)."""


def batch(values: list[bytes], pid: int, epoch: int, seq: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=pid, producer_epoch=epoch,
                                        base_sequence=seq, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce(conn, records: bytes, topic: str = "t") -> tuple[int, int]:  # noqa: ANN001
    """(error, base offset) of a Produce (acks=-1) of ``records`` to partition 0."""
    head = string(None) if PRODUCE_VERSION >= 3 else b""  # transactional_id
    body = (head + i16(-1) + i32(30000) + i32(1) + string(topic) + i32(1) + i32(0)
            + i32(len(records)) + records)
    return produce_reply(conn.call(0, PRODUCE_VERSION, body), min(PRODUCE_VERSION, 2))[0]


def stored(h: Harness) -> list[bytes]:
    plog = h.broker.core.resolve("t", 0, False).partitions[0]
    return [r.payload for r in plog.read(0, 1 << 20, 1 << 30).records]


@pytest.fixture
def h(tmp_path: Path):  # noqa: ANN201
    harness = Harness(tmp_path, {"topics": {"t": {"partitions": 1}}})
    yield harness
    harness.close()


class IdempotentProduceTests:

    def test_the_same_request_twice_is_written_once(self, h: Harness) -> None:
        """A retried request (the same bytes again) gets the first base offset, no error,
        and the log holds its records once."""
        conn = h.connect()
        request = batch([b"a", b"b", b"c"], 4000, 0, 0)
        assert produce(conn, request) == (0, 0)
        assert produce(conn, request) == (0, 0)
        assert produce(conn, batch([b"d"], 4000, 0, 3)) == (0, 3)
        assert produce(h.connect(), request) == (0, 0)  # also from another connection
        assert stored(h) == [b"a", b"b", b"c", b"d"]

    @pytest.mark.parametrize("pid, epoch, seq, code", [
        (4000, 0, 5, 45),   # a gap: OUT_OF_ORDER_SEQUENCE_NUMBER
        (4000, 0, 1, 45),   # behind, not one of the kept batches
        (4000, 1, 3, 45),   # a new epoch must start at 0
    ])
    def test_sequence_refusals(self, h: Harness, pid: int, epoch: int, seq: int,
                               code: int) -> None:
        """Kafka's codes for the partition; nothing written."""
        conn = h.connect()
        produce(conn, batch([b"a", b"b", b"c"], 4000, 0, 0))
        assert produce(conn, batch([b"x"], pid, epoch, seq)) == (code, -1)
        assert stored(h) == [b"a", b"b", b"c"]

    def test_an_older_epoch_is_fenced(self, h: Harness) -> None:
        """After epoch 1 wrote, epoch 0 gets INVALID_PRODUCER_EPOCH (47)."""
        conn = h.connect()
        assert produce(conn, batch([b"a"], 9, 0, 0)) == (0, 0)
        assert produce(conn, batch([b"b"], 9, 1, 0)) == (0, 1)
        assert produce(conn, batch([b"c"], 9, 0, 1)) == (47, -1)
        assert stored(h) == [b"a", b"b"]

    def test_a_restart_keeps_the_producer_state(self, tmp_path: Path) -> None:
        """After a restart the retry of a batch written before is still not written again."""
        config = {"topics": {"t": {"partitions": 1}}}
        first = Harness(tmp_path, config)
        request = batch([b"a", b"b"], 12, 0, 0)
        assert produce(first.connect(), request) == (0, 0)
        first.close()
        again = Harness(tmp_path, config)
        assert produce(again.connect(), request) == (0, 0)
        assert produce(again.connect(), batch([b"c"], 12, 0, 2)) == (0, 2)
        assert stored(again) == [b"a", b"b", b"c"]
        again.close()
