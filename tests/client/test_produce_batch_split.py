"""``Client.produce_batch``/``produce_batches`` never send a PRODUCE_BATCH the broker must
refuse: against a real ``skerry serve`` on a free loopback port with a small
``limits.max_line_bytes``, a batch far over the limit goes as several requests and is
stored whole, in order, at contiguous offsets; an idempotent resend of it stores nothing
twice; a message too large to fit any request raises before anything is sent (the
connection stays usable); the base64 form splits too."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.client.codec import encode_batch, split_batch
from broker.client.sync import Client, MessageTooLargeError
from tests.support import BrokerProcess

LIMIT = 16_384


def _messages(n: int) -> tuple[list[bytes], list[bytes]]:
    keys = [b"k%d" % i if i % 3 else b"" for i in range(n)]
    values = [b"value-%05d|" % i + bytes(range(i % 40)) for i in range(n)]
    return keys, values


def _consume_all(client: Client, topic: str, partition: int) -> list[tuple[int, bytes, bytes]]:
    out: list[tuple[int, bytes, bytes]] = []
    offset = 0
    while True:
        read = client.consume(topic, partition, offset, max_messages=1000)
        if not read.messages:
            return out
        out += [(m.offset, m.key or b"", m.value) for m in read.messages]
        offset = read.next_offset


@pytest.fixture
def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    with BrokerProcess(tmp_path / "b", {"limits": {"max_line_bytes": LIMIT},
                                        "storage": {"fsync": "interval"}}) as running:
        yield running


def test_a_batch_over_the_limit_is_stored_whole_and_in_order(broker: BrokerProcess) -> None:
    keys, values = _messages(5000)
    assert len(encode_batch(keys, values)) > 10 * LIMIT
    with Client(f"127.0.0.1:{broker.port}", timeout=30, max_line_bytes=LIMIT) as client:
        client.create_topic("big", partitions=2)
        ack = client.produce_batch("big", 1, keys, values, acks="all")
        assert (ack.partition, ack.offset, ack.count, ack.duplicates) == (1, 0, 5000, 0)
        stored = _consume_all(client, "big", 1)
        assert [offset for offset, _, _ in stored] == list(range(5000))
        assert [(k, v) for _, k, v in stored] == list(zip(keys, values, strict=True))
        client.ping()  # the connection was never closed on a refusal


def test_an_idempotent_resend_of_a_split_batch_stores_nothing_twice(
        broker: BrokerProcess) -> None:
    keys, values = _messages(3000)
    with Client(f"127.0.0.1:{broker.port}", timeout=30, max_line_bytes=LIMIT) as client:
        client.create_topic("idem", partitions=1)
        first = client.produce_batch("idem", 0, keys, values, pid="loader", seq=0)
        again = client.produce_batch("idem", 0, keys, values, pid="loader", seq=0)
        more = client.produce_batch("idem", 0, [b"x"], [b"after"], pid="loader", seq=3000)
        assert (first.offset, first.count, first.duplicates) == (0, 3000, 0)
        assert (again.offset, again.count, again.duplicates) == (0, 0, 3000)
        assert (more.offset, more.count) == (3000, 1)
        stored = _consume_all(client, "idem", 0)
        assert [v for _, _, v in stored] == [*values, b"after"]


def test_batches_in_flight_split_and_answer_one_ack_each(broker: BrokerProcess) -> None:
    keys, values = _messages(2000)
    with Client(f"127.0.0.1:{broker.port}", timeout=30, max_line_bytes=LIMIT) as client:
        client.create_topic("many", partitions=2)
        batches = [(i % 2, encode_batch(keys[i::4], values[i::4]), 500) for i in range(4)]
        acks = client.produce_batches("many", batches, pid="p", window=3)
        assert [(a.partition, a.offset, a.count) for a in acks] == [
            (0, 0, 500), (1, 0, 500), (0, 500, 500), (1, 500, 500)]
        base64_acks = client.produce_batches("many", batches[:1], raw=False)
        assert [(a.offset, a.count) for a in base64_acks] == [(1000, 500)]
        stored = [v for _, _, v in _consume_all(client, "many", 0)]
        assert stored == [*values[0::4], *values[2::4], *values[0::4]]


def test_a_message_too_large_for_any_request_raises_before_sending(
        broker: BrokerProcess) -> None:
    with Client(f"127.0.0.1:{broker.port}", timeout=30, max_line_bytes=LIMIT) as client:
        client.create_topic("huge", partitions=1)
        with pytest.raises(MessageTooLargeError) as raised:
            client.produce_batch("huge", 0, [b"a", b"b", b"c"], [b"small", b"x" * LIMIT, b"z"])
        assert raised.value.index == 1 and raised.value.limit == LIMIT
        assert "limits.max_line_bytes" in raised.value.message
        assert client.offsets("huge", 0)[1] == 0  # nothing of the batch was stored
        assert client.produce_batch("huge", 0, [b""], [b"fine"]).offset == 0


def test_without_the_client_knowing_the_limit_the_broker_refuses(
        broker: BrokerProcess) -> None:
    """What the split avoids: the same batch from a client assuming the default limit."""
    keys, values = _messages(5000)
    with Client(f"127.0.0.1:{broker.port}", timeout=30) as client:
        client.create_topic("refused", partitions=1)
        with pytest.raises(Exception, match="PRODUCE_BATCH body size"):
            client.produce_batch("refused", 0, keys, values)


def test_split_batch_keeps_every_message_in_order() -> None:
    keys, values = _messages(700)
    pieces = split_batch(encode_batch(keys, values), 1000)
    assert len(pieces) > 10 and all(len(piece) <= 1000 for piece, _ in pieces)
    at = 0
    for piece, count in pieces:
        assert piece == encode_batch(keys[at:at + count], values[at:at + count])
        at += count
    assert at == 700
