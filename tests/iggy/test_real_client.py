"""The real apache-iggy 0.8.0 Python client against a real broker process: connect (also
by connection string), login (and a wrong password), ping, streams and topics, send to a
partition, polls by every strategy with and without auto-commit, the consumer-group
consumer (callback and iterator, automatic and manual offsets) storing and resuming
offsets, and calls made without logging in."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from apache_iggy import (
    AutoCommit,
    AutoCommitWhen,
    IggyClient,
    PollingStrategy,
    SendMessage,
)

from broker.iggy import codec
from broker.iggy.codec import Consumer, ConsumerKind, Identifier
from tests.iggy.harness import RawClient, iggy_port_of, run_isolated
from tests.support import ROOT, BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    proc = BrokerProcess(tmp_path_factory.mktemp("iggy-real"), {"iggy_port": 0})
    with proc:
        yield proc, iggy_port_of(proc.log_text())


def run(scenario: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    return run_isolated(scenario, timeout)


async def connected(port: int, login: bool = True) -> IggyClient:
    client = IggyClient(f"127.0.0.1:{port}")
    await client.connect()
    if login:
        await client.login_user("iggy", "iggy")
    return client


class ConnectionTests:
    def test_connect_login_ping_and_wrong_password(self, broker):
        """connect() and ping() work before login; a wrong password raises
        InvalidCredentials; the default iggy/iggy logs in on a loopback listener."""
        _proc, port = broker

        async def scenario() -> None:
            client = await connected(port, login=False)
            await client.ping()
            with pytest.raises(RuntimeError, match="InvalidCredentials"):
                await client.login_user("iggy", "not-the-password")
            await client.login_user("iggy", "iggy")
            await client.ping()

        run(scenario)

    def test_connection_string_logs_in(self, broker):
        """from_connection_string() logs in while connecting; a wrong password in it makes
        connect() raise InvalidCredentials."""
        _proc, port = broker

        async def scenario() -> None:
            client = IggyClient.from_connection_string(f"iggy://iggy:iggy@127.0.0.1:{port}")
            await client.connect()
            assert (await client.get_stream("default")).id == 0
            bad = IggyClient.from_connection_string(f"iggy://iggy:wrong@127.0.0.1:{port}")
            with pytest.raises(RuntimeError, match="InvalidCredentials"):
                await bad.connect()

        run(scenario)

    def test_calls_without_login_are_unauthenticated(self, broker):
        """Without login, stream, topic, send and poll calls raise Unauthenticated."""
        _proc, port = broker

        async def scenario() -> None:
            client = await connected(port, login=False)
            for call in (client.get_stream("default"), client.create_stream("nope"),
                         client.get_topic("default", "x"),
                         client.send_messages("default", "x", 0, [SendMessage(b"a")]),
                         client.poll_messages("default", "x", 0, PollingStrategy.First(), 1,
                                              False)):
                with pytest.raises(RuntimeError, match="Unauthenticated"):
                    await call

        run(scenario)


class StreamTopicTests:
    def test_create_and_get_streams_and_topics(self, broker):
        """create_stream/create_topic succeed; get_stream/get_topic return their details
        (0-based ids, counts); unknown ones return None; stream default exists."""
        _proc, port = broker

        async def scenario() -> None:
            client = await connected(port)
            assert await client.get_stream("st-none") is None
            await client.create_stream("st-a")
            stream = await client.get_stream("st-a")
            assert stream is not None and stream.name == "st-a" and stream.topics_count == 0
            assert (await client.get_stream(stream.id)).name == "st-a"
            default = await client.get_stream("default")
            assert default.id == 0 and default.name == "default"
            await client.create_topic("st-a", "orders", 3, compression_algorithm="none",
                                      replication_factor=1,
                                      message_expiry=timedelta(hours=1), max_topic_size=1 << 30)
            topic = await client.get_topic("st-a", "orders")
            assert topic.id == 0 and topic.name == "orders" and topic.partitions_count == 3
            assert topic.messages_count == 0
            assert (await client.get_topic(stream.id, 0)).name == "orders"
            assert await client.get_topic("st-a", "missing") is None
            with pytest.raises(RuntimeError):
                await client.create_stream("st-a")
            assert (await client.get_stream("st-a")).topics_count == 1

        run(scenario)


class SendPollTests:
    def test_send_to_a_partition_and_poll_by_every_strategy(self, broker):
        """Messages sent to a partition are polled back (offsets, payloads, partition,
        ids, checksums) by Offset, First, Last, Next and Timestamp, with and without
        auto-commit (which moves Next)."""
        _proc, port = broker

        async def scenario() -> None:
            client = await connected(port)
            await client.create_stream("st-b")
            await client.create_topic("st-b", "t", 2)
            await client.send_messages("st-b", "t", 1, [SendMessage(f"m{i}") for i in range(5)])
            await client.send_messages("st-b", "t", 1, [SendMessage(b"\x00\xffbinary")])

            async def poll(strategy: Any, count: int, auto: bool) -> list[tuple[int, bytes]]:
                got = await client.poll_messages("st-b", "t", 1, strategy, count, auto)
                assert all(m.partition_id() == 1 for m in got)
                return [(m.offset(), m.payload()) for m in got]

            everything = await poll(PollingStrategy.Offset(0), 100, False)
            assert everything == [(i, f"m{i}".encode()) for i in range(5)] + [(5, b"\x00\xffbinary")]
            assert await poll(PollingStrategy.Offset(4), 1, False) == [(4, b"m4")]
            assert await poll(PollingStrategy.First(), 2, False) == [(0, b"m0"), (1, b"m1")]
            assert await poll(PollingStrategy.Last(), 2, False) == [(4, b"m4"), (5, b"\x00\xffbinary")]
            assert await poll(PollingStrategy.Next(), 2, False) == [(0, b"m0"), (1, b"m1")]
            assert await poll(PollingStrategy.Next(), 2, True) == [(0, b"m0"), (1, b"m1")]
            assert await poll(PollingStrategy.Next(), 2, True) == [(2, b"m2"), (3, b"m3")]
            assert await poll(PollingStrategy.Next(), 10, False) == [(4, b"m4"), (5, b"\x00\xffbinary")]
            first = (await client.poll_messages("st-b", "t", 1, PollingStrategy.First(), 1, False))[0]
            assert await poll(PollingStrategy.Timestamp(first.timestamp()), 1, False) == [(0, b"m0")]
            assert await poll(PollingStrategy.Timestamp(first.timestamp() + 10**12), 1, False) == []
            assert await poll(PollingStrategy.First(), 1, True) == [(0, b"m0")]
            assert await poll(PollingStrategy.Next(), 1, False) == [(1, b"m1")]
            assert first.id() != 0 and first.checksum() != 0 and first.length() == 2
            assert await client.poll_messages("st-b", "t", 0, PollingStrategy.First(), 5,
                                              False) == []

        run(scenario)

    def test_auto_commit_with_every_strategy(self, broker):
        """With auto_commit every strategy stores the offset of the last message it
        returned for the client's consumer (numeric id 0): GetConsumerOffset answers it
        byte for byte and Next continues after it; polls without auto_commit move nothing."""
        _proc, port = broker

        async def scenario() -> list[tuple[list[int], list[int], bytes]]:
            client = await connected(port)
            await client.create_stream("st-d")
            await client.create_topic("st-d", "t", 1)
            await client.send_messages("st-d", "t", 0, [SendMessage(f"d{i}") for i in range(6)])
            raw = RawClient(port)
            raw.login()
            stored = codec.GetConsumerOffset(Consumer(ConsumerKind.CONSUMER, Identifier(0)),
                                             Identifier("st-d"), Identifier("t"), 0)

            async def offsets(strategy: Any, count: int, auto: bool) -> list[int]:
                got = await client.poll_messages("st-d", "t", 0, strategy, count, auto)
                return [m.offset() for m in got]

            ts = (await client.poll_messages("st-d", "t", 0, PollingStrategy.First(), 1,
                                             False))[0].timestamp()
            out = []
            for strategy, count in ((PollingStrategy.Offset(2), 2), (PollingStrategy.Timestamp(ts), 1),
                                    (PollingStrategy.Last(), 1), (PollingStrategy.First(), 3),
                                    (PollingStrategy.Next(), 2)):
                polled = await offsets(strategy, count, True)
                await offsets(PollingStrategy.Offset(0), 6, False)
                await offsets(PollingStrategy.Last(), 1, False)
                out.append((polled, await offsets(PollingStrategy.Next(), 1, False),
                            raw.call(stored)))
            raw.close()
            return out

        def offset_reply(value: int) -> bytes:
            return struct.pack("<IIIQQ", 0, 20, 0, 5, value)

        assert run(scenario) == [([2, 3], [4], offset_reply(3)), ([0], [1], offset_reply(0)),
                                 ([5], [], offset_reply(5)), ([0, 1, 2], [3], offset_reply(2)),
                                 ([3, 4], [5], offset_reply(4))]

    def test_topic_counts_follow_the_messages(self, broker):
        """get_topic and get_stream report the messages sent."""
        _proc, port = broker

        async def scenario() -> None:
            client = await connected(port)
            await client.create_stream("st-c")
            await client.create_topic("st-c", "t", 1)
            await client.send_messages("st-c", "t", 0, [SendMessage(b"x")] * 7)
            assert (await client.get_topic("st-c", "t")).messages_count == 7
            assert (await client.get_stream("st-c")).messages_count == 7

        run(scenario)


def _group_consumer(port: int, stream: str, commit: str, expect: int) -> list[tuple[int, int, bytes]]:
    """Run the real client's consumer-group consumer in a child process (its exit closes
    the connection, so it leaves the group) and return what it consumed."""
    out = subprocess.run(
        [sys.executable, "-m", "tests.iggy.group_consumer", str(port), stream, "t", "workers",
         commit, str(expect)], cwd=str(ROOT), capture_output=True, timeout=60, check=True)
    return [(p, o, bytes.fromhex(h)) for p, o, h in map(json.loads, out.stdout.splitlines())]


class ConsumerGroupTests:
    @pytest.mark.parametrize("commit", ["when_polling", "after_each"])
    def test_consumer_group_consumer_stores_and_resumes(self, broker, commit):
        """The client's consumer-group consumer creates and joins the group, reads every
        partition, stores offsets on the broker (server-side auto-commit, or its own
        StoreConsumerOffset calls); a new consumer in a new client resumes after them."""
        proc, port = broker
        stream = f"st-g-{commit}"

        async def produce(tag: str, count: int) -> None:
            client = await connected(port)
            if tag == "a":
                await client.create_stream(stream)
                await client.create_topic(stream, "t", 3)
            for p in range(3):
                await client.send_messages(stream, "t", p, [SendMessage(f"{tag}{p}-{i}")
                                                            for i in range(count)])

        run(lambda: produce("a", 4))
        first = _group_consumer(port, stream, commit, 12)
        assert sorted(first) == sorted((p, i, f"a{p}-{i}".encode()) for p in range(3)
                                       for i in range(4))
        run(lambda: produce("b", 1))
        second = _group_consumer(port, stream, commit, 3)
        assert sorted(second) == [(p, 4, f"b{p}-0".encode()) for p in range(3)]
        raw = RawClient(port)
        assert raw.login()[:4] == b"\x00\x00\x00\x00"
        for p in range(3):
            reply = raw.call(codec.GetConsumerOffset(
                Consumer(ConsumerKind.CONSUMER_GROUP, Identifier("workers")), Identifier(stream),
                Identifier("t"), p))
            assert reply == struct.pack("<IIIQQ", 0, 20, p, 4, 4)
        raw.close()
        assert proc.proc.poll() is None

    def test_iterator_consumer_with_manual_offsets_resumes(self, broker):
        """A consumer bound to one partition, read with iter_messages(): without
        auto-commit it stores an offset itself (store_offset), which the broker answers to
        GetConsumerOffset; a new consumer in a new client resumes after it with auto-commit
        on polling, and delete_offset() forgets the stored offset."""
        _proc, port = broker
        target = codec.GetConsumerOffset(Consumer(ConsumerKind.CONSUMER_GROUP,
                                                  Identifier("manual")),
                                         Identifier("st-h"), Identifier("t"), 1)

        async def consume(auto: Any, take: int, setup: bool) -> tuple[Any, ...]:
            client = await connected(port)
            if setup:
                await client.create_stream("st-h")
                await client.create_topic("st-h", "t", 2)
                await client.send_messages("st-h", "t", 1, [SendMessage(f"h{i}")
                                                            for i in range(5)])
            consumer = await client.consumer_group(
                "manual", "st-h", "t", partition_id=1, polling_strategy=PollingStrategy.Next(),
                batch_length=2, auto_commit=auto, poll_interval=timedelta(milliseconds=20))
            got = []
            async for message in consumer.iter_messages():
                got.append((message.partition_id(), message.offset(), message.payload()))
                if len(got) == take:
                    break
            raw = RawClient(port)
            raw.login()
            if setup:
                await consumer.store_offset(1, 1)
                return (got, consumer.get_last_stored_offset(1), raw.call(target),
                        (consumer.name(), consumer.stream(), consumer.topic()))
            before = raw.call(target)
            await consumer.delete_offset(1)
            return got, before, raw.call(target)

        got, last_stored, stored, names = run(lambda: consume(AutoCommit.Disabled(), 2, True))
        assert got == [(1, 0, b"h0"), (1, 1, b"h1")] and last_stored == 1
        assert stored == struct.pack("<IIIQQ", 0, 20, 1, 4, 1)
        assert names == ("manual", "st-h", "t")
        got, before, after = run(lambda: consume(AutoCommit.When(AutoCommitWhen.PollingMessages()),
                                                 3, False))
        assert got == [(1, 2, b"h2"), (1, 3, b"h3"), (1, 4, b"h4")]
        assert before == struct.pack("<IIIQQ", 0, 20, 1, 4, 4)
        assert after == struct.pack("<II", 0, 0)
