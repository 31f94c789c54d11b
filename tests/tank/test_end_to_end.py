"""Acceptance 2: a real broker process with ``tank_port`` on a free 127.0.0.1 port, driven
over TCP by the independent client (``broker.tank.client``), exactly as a TANK
application would: every bundle shape, every consume case of notes §4.3, the boundary
faults, discover, create, and replies out of order on one connection."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from broker.iggy.codec import DeleteSegments, Identifier
from broker.tank import client as tc
from tests.iggy.harness import RawClient, iggy_port_of
from tests.support import BrokerProcess
from tests.tank.harness import tank_port_of

TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    proc = BrokerProcess(tmp_path_factory.mktemp("tank-e2e"), {
        "tank_port": 0, "iggy_port": 0, "auto_create_topics": False,
        "storage": {"fsync": "never", "segment_bytes": 4096}})
    with proc:
        yield proc, tank_port_of(proc.log_text())


@pytest.fixture
def client(broker: tuple[BrokerProcess, int]) -> Iterator[tc.TankClient]:
    with tc.TankClient("127.0.0.1", broker[1], timeout=10.0) as c:  # reads the greeting ping
        yield c


_names = iter(range(10_000))


def topic(c: tc.TankClient, partitions: int = 1) -> bytes:
    name = f"e2e-{next(_names)}".encode()
    assert c.create_topic(name, partitions) is None
    return name


def produce_ok(c: tc.TankClient, entries) -> None:  # noqa: ANN001
    _rid, acks, faults = c.produce(entries)
    assert faults == [] and len(acks) == len(entries)


def produce_with_seqnum(c: tc.TankClient, entries):  # noqa: ANN001, ANN201
    rid = c.new_request_id()
    c.send(tc.build_produce_with_seqnum(rid, entries))
    msg_id, payload = c.wait_reply(rid)
    assert msg_id == 0x01  # §2.9: answered as a Produce
    return tc.decode_produce_reply(payload, [(t, p, m) for t, p, _b, m in entries])


def everything(c: tc.TankClient, name: bytes, partition: int = 0, seq: int = 0
               ) -> tc.PartitionData:
    got = c.consume([(name, partition, seq, 1 << 20)])
    assert got.faults == []
    return got.data[0]


class ProduceTests:
    def test_every_bundle_shape_reads_back(self, client: tc.TankClient) -> None:
        """Plain, keyed, 20-message (varint count), snappy (4 × 300 B keyed), then
        ProduceWithSeqnum with a dense bundle and a sparse one: seqs 1..30 in order with
        their keys and millisecond timestamps."""
        name = topic(client)
        plain = [tc.Msg(b"plain", ts=TS)]
        keyed = [tc.Msg(b"hello", b"k1", TS), tc.Msg(b"world", b"", TS)]
        twenty = [tc.Msg(f"m{i}".encode(), ts=TS + i // 5) for i in range(20)]
        snappy = [tc.Msg(b"x" * 300, b"kk", TS + 9)] * 4
        assert tc.bundle_for(snappy)[0] & 0x03 == 1  # the client compressed it
        for msgs in (plain, keyed, twenty, snappy):
            produce_ok(client, [(name, 0, msgs)])
        dense = [tc.Msg(b"d1", ts=TS), tc.Msg(b"d2", ts=TS)]
        assert produce_with_seqnum(client, [(name, 0, 28, dense)])[2] == []
        sparse = [tc.Msg(b"s1", ts=TS, seq=30), tc.Msg(b"s2", ts=TS, seq=31)]
        assert produce_with_seqnum(client, [(name, 0, 30, sparse)])[2] == []
        got = everything(client, name)
        sent = plain + keyed + twenty + snappy + dense + sparse
        assert [(m.seq, m.content, m.key, m.ts) for m in got.messages] == [
            (i + 1, m.content, m.key, m.ts) for i, m in enumerate(sent)]
        assert got.hw == 31 and got.next_seq == 32

    def test_produce_with_wrong_seqnums_writes_nothing(self, client: tc.TankClient) -> None:
        """Skerry's offsets are dense: a gap or a replay is InvalidReq (0x0a)."""
        name = topic(client)
        produce_ok(client, [(name, 0, [tc.Msg(b"a")])])
        for base, msgs in ((5, [tc.Msg(b"gap")]), (1, [tc.Msg(b"replay")]),
                           (2, [tc.Msg(b"s", seq=2), tc.Msg(b"t", seq=4)])):
            _rid, acks, faults = produce_with_seqnum(client, [(name, 0, base, msgs)])
            assert faults == [tc.Fault("InvalidReq", name, 0)]
        assert client.discover_partitions(name) == [tc.Discovered(0, 1, 1)]

    def test_unknown_topic_and_partition(self, client: tc.TankClient) -> None:
        name = topic(client, partitions=2)
        _rid, acks, faults = client.produce([(name, 0, [tc.Msg(b"a")]), (name, 2, [tc.Msg(b"b")]),
                                            (b"no-such-topic", 0, [tc.Msg(b"c")])])
        assert acks == [tc.ProduceAck(name, 0)]
        assert faults == [tc.Fault("UnknownPartition", name, 2),
                          tc.Fault("UnknownTopic", b"no-such-topic")]


class ConsumeTests:
    def test_from_zero_and_from_the_middle(self, client: tc.TankClient) -> None:
        name = topic(client)
        produce_ok(client, [(name, 0, [tc.Msg(f"v{i}".encode(), ts=TS) for i in range(10)])])
        assert [m.seq for m in everything(client, name, seq=0).messages] == list(range(1, 11))
        middle = everything(client, name, seq=6)
        assert [(m.seq, m.content) for m in middle.messages] == [
            (i, f"v{i - 1}".encode()) for i in range(6, 11)]

    def test_tail_wait_returns_when_a_message_arrives(self, broker, client) -> None:  # noqa: ANN001
        name = topic(client)
        produce_ok(client, [(name, 0, [tc.Msg(b"old")])])

        def later() -> None:
            time.sleep(0.15)
            with tc.TankClient("127.0.0.1", broker[1]) as other:
                produce_ok(other, [(name, 0, [tc.Msg(b"new", ts=TS)])])

        thread = threading.Thread(target=later)
        started = time.monotonic()
        thread.start()
        got = client.consume([(name, 0, 2, 4096)], max_wait=5000).data[0]
        elapsed = time.monotonic() - started
        thread.join()
        assert [(m.seq, m.content) for m in got.messages] == [(2, b"new")]
        assert 0.1 < elapsed < 3.0

    def test_tail_wait_ends_after_max_wait(self, client: tc.TankClient) -> None:
        """max_wait 100 ms is normalised to 320 ms (§2.7); then EOF: drained, next hw + 1."""
        name = topic(client)
        produce_ok(client, [(name, 0, [tc.Msg(b"only")])])
        started = time.monotonic()
        got = client.consume([(name, 0, tc.SEQ_TAIL, 4096)], max_wait=100).data[0]
        elapsed = time.monotonic() - started
        assert got.messages == [] and got.drained and got.next_seq == 2 and got.hw == 1
        assert 0.3 <= elapsed < 2.0

    def test_fetch_size_cuts_a_bundle(self, client: tc.TankClient) -> None:
        """A chunk that ends inside the second bundle: the client keeps its complete
        messages and goes on from ``next_seq`` with ``min_fetch_size`` until it has all."""
        name = topic(client)
        first = [tc.Msg(b"a" * 10, ts=TS)] * 2
        second = [tc.Msg(f"b{i:02d}".encode(), ts=TS + 1) for i in range(20)]
        produce_ok(client, [(name, 0, first)])
        produce_ok(client, [(name, 0, second)])
        fetch = 1 + len(tc.bundle_for(first)) + 20  # the first bundle and 20 bytes more
        got = client.consume([(name, 0, 1, fetch)]).data[0]
        assert 2 < len(got.messages) < 22
        assert got.min_fetch_size >= fetch and not got.drained
        read = list(got.messages)
        while read[-1].seq < 22:  # as a TANK application goes on: next seq, min fetch size
            got = client.consume([(name, 0, got.next_seq, got.min_fetch_size)]).data[0]
            assert got.messages and got.messages[0].seq == read[-1].seq + 1
            read += got.messages
        assert [m.content for m in read] == [m.content for m in first + second]

    def test_boundary_faults(self, broker, client) -> None:  # noqa: ANN001
        """Above hw + 1, and below the first available once the oldest segment is gone:
        fault BoundaryCheck with first available and hw; seq 0 reads from the first."""
        name = topic(client)
        for i in range(60):  # ~7 KiB of records: more than one 4 KiB segment
            produce_ok(client, [(name, 0, [tc.Msg(b"%03d" % i + b"." * 40, ts=TS)])])
        got = client.consume([(name, 0, 62, 4096)])
        assert got.faults == [tc.Fault("BoundaryCheck", name, 0, first_available=1, hw=60)]
        iggy = RawClient(iggy_port_of(broker[0].log_text()))
        iggy.login()
        reply = iggy.call(DeleteSegments(Identifier("default"), Identifier(name.decode()), 0, 1))
        assert reply[:4] == b"\0\0\0\0", reply
        (found,) = client.discover_partitions(name)
        assert 1 < found.first_available <= 60 and found.hw == 60
        got = client.consume([(name, 0, 1, 4096)])
        assert got.faults == [tc.Fault("BoundaryCheck", name, 0,
                                       first_available=found.first_available, hw=60)]
        assert tc.clamp_seq(1, found.first_available, 60) == found.first_available
        assert everything(client, name, seq=0).messages[0].seq == found.first_available

    def test_unknown_topic_and_partition(self, client: tc.TankClient) -> None:
        name = topic(client)
        got = client.consume([(name, 3, 1, 4096), (b"no-such-topic", 0, 1, 4096)])
        assert got.faults == [tc.Fault("UnknownPartition", name, 3),
                              tc.Fault("UnknownTopic", b"no-such-topic")]

    def test_pipelined_consumes_answer_out_of_order(self, client: tc.TankClient) -> None:
        """On one connection: a long-polling consume, then a consume with data, then a
        produce. The second consume and the produce are answered first; the produce's
        message ends the first consume's wait."""
        name = topic(client)
        produce_ok(client, [(name, 0, [tc.Msg(b"one", ts=TS)])])
        waiting = [(name, 0, 2, 4096)]
        ready = [(name, 0, 1, 4096)]
        client.send(tc.build_consume(101, waiting, max_wait=5000))
        client.send(tc.build_consume(102, ready))
        order = []
        msg_id, payload = client.wait_reply(102)
        order.append(102)
        assert [m.content for m in tc.decode_consume_reply(payload, ready).data[0].messages] \
            == [b"one"]
        assert 101 not in client._replies  # still waiting
        entries = [(name, 0, [tc.Msg(b"two", ts=TS)])]
        client.send(tc.build_produce(103, entries))
        _, payload = client.wait_reply(103)
        assert tc.decode_produce_reply(payload, entries)[2] == []
        _, payload = client.wait_reply(101)
        got = tc.decode_consume_reply(payload, waiting).data[0]
        assert [(m.seq, m.content) for m in got.messages] == [(2, b"two")]


class CatalogTests:
    def test_discover_partitions(self, client: tc.TankClient) -> None:
        name = topic(client, partitions=3)
        produce_ok(client, [(name, 1, [tc.Msg(b"a"), tc.Msg(b"b")])])
        assert client.discover_partitions(name) == [
            tc.Discovered(0, 0, 0), tc.Discovered(1, 1, 2), tc.Discovered(2, 0, 0)]
        assert client.discover_partitions(name, [1]) == [tc.Discovered(1, 1, 2)]
        assert client.discover_partitions(b"no-such-topic") == [
            tc.Fault("UnknownTopic", b"no-such-topic")]

    def test_create_topic(self, client: tc.TankClient) -> None:
        assert client.create_topic(b"e2e-created", 4, b"retention.logs.max_age=1") is None
        assert len(client.discover_partitions(b"e2e-created")) == 4
        assert client.create_topic(b"e2e-created", 4) == tc.Fault("AlreadyExists",
                                                                  b"e2e-created")
        assert client.create_topic(b"bad/name", 1) == tc.Fault("InvalidReq", b"bad/name")
        assert client.create_topic(b"e2e-zero", 0) == tc.Fault("InvalidReq", b"e2e-zero")


class ConnectionTests:
    def test_malformed_frame_closes_only_that_connection(self, broker, client) -> None:  # noqa: ANN001
        """An unknown message id closes the connection, as TANK does; others carry on."""
        bad = socket.create_connection(("127.0.0.1", broker[1]), timeout=5)
        assert bad.recv(5) == b"\x03\0\0\0\0"
        bad.sendall(b"\x42\x00\x00\x00\x00")
        assert bad.recv(10) == b""
        bad.close()
        name = topic(client)
        produce_ok(client, [(name, 0, [tc.Msg(b"still fine")])])
