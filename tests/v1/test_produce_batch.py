"""PRODUCE_BATCH and FETCH ``enc=raw`` over the real core and store, driven in memory
(StringTransport connections, task.Clock, a thread runner the test controls so "the fsync
returned" is an explicit step), plus one end-to-end run against a broker process.

They prove: a batch is one store append, answered only once as durable as PRODUCE would be;
a refused batch writes nothing; idempotent batches (pid/seq) are not appended twice, also
when resent cut differently, pipelined from another connection, or after a restart; and
FETCH ``enc=raw`` returns exactly the stored records.
"""

from __future__ import annotations

import base64
import struct
from pathlib import Path
from typing import Any

from twisted.internet.testing import StringTransport

from broker.client.codec import encode_batch
from broker.client.sync import Client
from data.spark.records import record_starts, to_batch
from tests.fakes.fs import RecordingFileLayer
from tests.reliability.inmemory import InMemoryBroker
from tests.support import BrokerProcess


def Harness(tmp_path: Path, fs: Any = None, **config: Any) -> InMemoryBroker:
    """One in-memory broker over ``tmp_path / "data"``."""
    return InMemoryBroker(tmp_path / "data", fs, **config)


def produce_batch(cid: str, topic: str, partition: int, keys: list[bytes], values: list[bytes],
                  extra: str = "") -> bytes:
    data = base64.b64encode(encode_batch(keys, values))
    return f"V1|{cid}|PRODUCE_BATCH|{topic} {partition}{extra} data=".encode() + data + b"\n"


def consume_all(proto: Any, tr: StringTransport, topic: str, partition: int) -> list[bytes]:
    """The stored values of a partition (CONSUME enc=b64), in offset order."""
    tr.clear()
    proto.dataReceived(f"V1|c|CONSUME|{topic} {partition} 0 enc=b64\n".encode())
    line = tr.value().decode().strip()
    tr.clear()
    items = line.split("messages=", 1)[1].split(" hw=")[0]
    return [base64.b64decode(item.split(":", 1)[1]) for item in items.split(",") if item]


VALUES = [b"a,b|c\nd\x00e", b"", b"\r\n", bytes(range(256))]


def test_a_batch_is_one_append_answered_after_its_fsync(tmp_path: Path) -> None:
    """fsync=always: the whole batch is written with one write to the log, and its single
    OK (first offset, count, hw) comes only after the fsync that covers it returned."""
    fs = RecordingFileLayer()
    h = Harness(tmp_path, fs=fs, storage={"fsync": "always", "group_commit": "thread"}, topics={"t": {"partitions": 2}})
    proto, tr = h.connect()
    writes_before = len(fs.ops("write", ".log"))
    proto.dataReceived(produce_batch("1", "t", 1, [b"k1", b"", b"k3", b"k4"], VALUES))
    h.clock.advance(0)
    assert len(fs.ops("write", ".log")) - writes_before == 1
    assert tr.value() == b""  # appended, not yet durable: no answer
    h.thread.run_all()
    assert tr.value() == b"V1|1|OK|partition=1 offset=0 count=4 hw=3\n"
    assert consume_all(proto, tr, "t", 1) == VALUES
    tr.clear()
    proto.dataReceived(b"V1|2|CONSUME|t 1 0 detail=true enc=b64\n")
    keys = [item.split(":")[2] for item in tr.value().decode().split("messages=")[1].split(" hw=")[0].split(",")]
    assert [base64.b64decode(k) for k in keys] == [b"k1", b"", b"k3", b"k4"]
    h.close()


def test_a_refused_batch_writes_nothing(tmp_path: Path) -> None:
    """A batch refused by the codec (bad lengths) or by the core (partition out of range,
    unknown topic: never auto-created) appends nothing at all."""
    h = Harness(tmp_path, storage={"fsync": "interval"}, topics={"t": {"partitions": 1}})
    proto, tr = h.connect()
    good = encode_batch([b"k", b"k"], [b"v1", b"v2"])
    bad = base64.b64encode(good[:-1]).decode()
    proto.dataReceived(f"V1|1|PRODUCE_BATCH|t 0 data={bad}\n".encode())
    proto.dataReceived(produce_batch("2", "t", 1, [b"k"], [b"v"]))
    proto.dataReceived(produce_batch("3", "nope", 0, [b"k"], [b"v"]))
    h.settle()
    replies = tr.value().splitlines()
    assert [r.split(b"|")[2:4] for r in replies] == [[b"ERR", b"BAD_REQUEST"]] * 3
    assert b"partition 1 out of range" in replies[1]
    tr.clear()
    proto.dataReceived(b"V1|4|METADATA|\n")
    assert b"topics=[t]" in tr.value()
    assert consume_all(proto, tr, "t", 0) == []
    h.close()


def test_idempotent_batches_are_not_appended_twice(tmp_path: Path) -> None:
    """With pid/seq: a resent batch adds nothing and answers the original offset; a resend
    cut differently (part held, part new) appends only the new part; a gap is refused; the
    per-message PRODUCE pid/seq continues the same numbering; after a restart the broker
    still recognises what it holds."""
    h = Harness(tmp_path, storage={"fsync": "interval"}, topics={"t": {"partitions": 1}})
    proto, tr = h.connect()
    values = [b"m%d" % i for i in range(8)]

    def send(line: bytes) -> bytes:
        tr.clear()
        proto.dataReceived(line)
        h.settle()
        return tr.value().strip()

    assert send(produce_batch("1", "t", 0, [b""] * 5, values[:5], " pid=p seq=0")) == (
        b"V1|1|OK|partition=0 offset=0 count=5 hw=4 duplicates=0")
    assert send(produce_batch("2", "t", 0, [b""] * 5, values[:5], " pid=p seq=0")) == (
        b"V1|2|OK|partition=0 offset=0 count=0 hw=4 duplicates=5")
    assert send(produce_batch("3", "t", 0, [b""] * 5, values[3:8], " pid=p seq=3")) == (
        b"V1|3|OK|partition=0 offset=5 count=3 hw=7 duplicates=2")
    assert send(produce_batch("4", "t", 0, [b""], [b"x"], " pid=p seq=10")).startswith(
        b"V1|4|ERR|BAD_REQUEST|out of order sequence 10 for producer p")
    assert send(b"V1|5|PRODUCE|t k:m8 partition=0 pid=p seq=8\n") == b"V1|5|OK|partition=0 offset=8 hw=8"
    assert send(b"V1|6|PRODUCE|t k:m7 partition=0 pid=p seq=7\n") == b"V1|6|OK|partition=0 offset=7 hw=8"
    assert consume_all(proto, tr, "t", 0) == values + [b"m8"]
    h.close()
    h = Harness(tmp_path, storage={"fsync": "interval"})
    proto, tr = h.connect()
    assert send(produce_batch("7", "t", 0, [b""] * 3, values[6:8] + [b"m8"], " pid=p seq=6")) == (
        b"V1|7|OK|partition=0 offset=6 count=0 hw=8 duplicates=3")
    assert consume_all(proto, tr, "t", 0) == values + [b"m8"]
    h.close()


def test_a_held_batch_waits_for_the_originals_durability(tmp_path: Path) -> None:
    """fsync=always: a resend (from another connection) of a batch whose original is
    appended but not yet fsynced is answered only after that fsync, like the original."""
    h = Harness(tmp_path, storage={"fsync": "always", "group_commit": "thread"}, topics={"t": {"partitions": 1}})
    (p1, t1), (p2, t2) = h.connect(), h.connect()
    line = produce_batch("1", "t", 0, [b"a", b"b"], [b"1", b"2"], " pid=q seq=0")
    p1.dataReceived(line)
    h.clock.advance(0)
    p2.dataReceived(line)
    h.clock.advance(0)
    h.clock.advance(0)
    assert (t1.value(), t2.value()) == (b"", b"")
    h.thread.run_all()
    h.clock.advance(0)
    assert t1.value() == b"V1|1|OK|partition=0 offset=0 count=2 hw=1 duplicates=0\n"
    assert t2.value() == b"V1|1|OK|partition=0 offset=0 count=0 hw=1 duplicates=2\n"
    h.close()


def test_fetch_raw_returns_the_stored_records(tmp_path: Path) -> None:
    """FETCH enc=raw answers a line with size=<n> followed by exactly the bytes FETCH's
    base64 form carries, and a reader can walk them back into the produced messages."""
    h = Harness(tmp_path, storage={"fsync": "interval"}, topics={"t": {"partitions": 1}})
    proto, tr = h.connect()
    proto.dataReceived(produce_batch("1", "t", 0, [b"k"] * 4, VALUES))
    h.settle()
    tr.clear()
    proto.dataReceived(b"V1|2|FETCH|t 0 1 max=2\nV1|3|FETCH|t 0 1 max=2 enc=raw\n")
    b64_line, _, rest = tr.value().partition(b"\n")
    head, _, raw = rest.partition(b"\n")
    data = base64.b64decode(b64_line.split(b"data=")[1])
    assert head == b"V1|3|OK|hw=3 start=0 next=3 count=2 size=%d" % len(data)
    assert raw == data
    rows = to_batch(raw, record_starts(raw), "t", 0, False)
    assert rows.column("value").to_pylist() == VALUES[1:3]
    assert rows.column("offset").to_pylist() == [1, 2]
    h.close()


def test_end_to_end_pipelined_batches_and_raw_fetches(tmp_path: Path) -> None:
    """Against a broker process over TCP: pipelined PRODUCE_BATCHes of binary values land
    in order, and pipelined FETCH enc=raw reads them back exactly, newlines and all."""
    with BrokerProcess(tmp_path) as broker:
        with Client(f"127.0.0.1:{broker.port}") as client:
            client.request("ADMIN_CREATE_TOPIC", "e 2 1")
            values = [struct.pack("<I", i) + b"\n|," * (i % 5) for i in range(3000)]
            batches = [(i % 2, encode_batch([b"key%d" % i] * 500, values[i * 500:(i + 1) * 500]), 500)
                       for i in range(6)]
            acks = client.produce_batches("e", batches, pid="e2e")
            assert [(a.partition, a.offset, a.count) for a in acks] == [
                (0, 0, 500), (1, 0, 500), (0, 500, 500), (1, 500, 500), (0, 1000, 500), (1, 1000, 500)]
            got: list[bytes] = []
            for offset in (0, 700):
                client.send_fetch("e", 1, offset, 700)
            for _ in range(2):
                fetched = client.receive_fetch()
                rows = to_batch(fetched.data, record_starts(fetched.data), "e", 1, False)
                got.extend(rows.column("value").to_pylist())
            assert got == [v for i in range(6) if i % 2 == 1 for v in values[i * 500:(i + 1) * 500]][:1400]


def test_producers_whose_messages_retention_removed_are_forgotten(tmp_path: Path) -> None:
    """Producer state does not outlive the messages: once retention has removed every message
    of a producer id, the broker forgets it (a resend of its numbers is appended as new, its
    originals being gone), while a producer with retained messages still gets duplicates
    dropped. A writer with a new producer id per task (the Spark sink) so keeps a bounded
    state."""
    h = Harness(tmp_path, storage={"fsync": "interval", "segment_bytes": 4096},
                topics={"t": {"partitions": 1, "retention_bytes": 8192}})
    proto, tr = h.connect()
    big = [b"x" * 900] * 3

    def send(line: bytes) -> bytes:
        tr.clear()
        proto.dataReceived(line)
        h.settle()
        return tr.value().strip()

    assert send(produce_batch("1", "t", 0, [b""] * 3, big, " pid=old seq=0")).endswith(b"duplicates=0")
    for i in range(8):  # about 22 KiB more: old's segment is no longer among the newest 8 KiB
        assert b"|OK|" in send(produce_batch(str(10 + i), "t", 0, [b""] * 3, big))
    assert send(produce_batch("2", "t", 0, [b""] * 3, big, " pid=new seq=0")).endswith(b"duplicates=0")
    h.clock.advance(60)  # the retention pass
    h.settle()
    tr.clear()
    proto.dataReceived(b"V1|3|OFFSETS|t 0\n")
    h.settle()
    assert b"earliest=0 " not in tr.value()  # retention did remove old's segment
    assert send(produce_batch("4", "t", 0, [b""] * 3, big, " pid=new seq=0")).endswith(
        b"count=0 hw=29 duplicates=3")
    assert send(produce_batch("5", "t", 0, [b""] * 3, big, " pid=old seq=0")).endswith(
        b"offset=30 count=3 hw=32 duplicates=0")
    h.close()


def test_a_resend_woken_by_the_original_is_still_a_duplicate(tmp_path: Path) -> None:
    """A producer's resend waiting on another connection behind a long poll runs the moment
    the original's append wakes that poll: it must already see the original (one copy in the
    log, the resend answered as duplicates)."""
    h = Harness(tmp_path, storage={"fsync": "interval"}, topics={"t": {"partitions": 1}})
    a, ta = h.connect()
    b, tb = h.connect()
    batch = produce_batch("{cid}", "t", 0, [b""] * 2, [b"x", b"y"], " pid=p seq=0").decode()
    b.dataReceived(b"V1|1|CONSUME|t 0 0 wait_ms=5000\n" + batch.format(cid=2).encode())
    h.settle()
    assert tb.value() == b""  # the poll waits; the resend is held behind it
    a.dataReceived(batch.format(cid=3).encode())
    h.settle()
    assert ta.value().strip() == b"V1|3|OK|partition=0 offset=0 count=2 hw=1 duplicates=0"
    replies = tb.value().splitlines()
    assert replies[0].startswith(b"V1|1|OK|messages=0:x,1:y")
    assert replies[1] == b"V1|2|OK|partition=0 offset=0 count=0 hw=1 duplicates=2"
    assert consume_all(a, ta, "t", 0) == [b"x", b"y"]
    h.close()


def test_producer_state_is_rebuilt_after_leading_again(tmp_path: Path) -> None:
    """A partition that was a follower while another leader rewrote its log (a truncation,
    then that leader's records) forgets what its producers wrote before: once leader again,
    a resend whose originals were truncated away is appended, not answered from stale
    offsets that now hold other messages."""
    h = Harness(tmp_path, storage={"fsync": "interval"}, topics={"t": {"partitions": 1}})
    proto, tr = h.connect()

    def send(line: bytes) -> bytes:
        tr.clear()
        proto.dataReceived(line)
        h.settle()
        return tr.value().strip()

    resend = produce_batch("{cid}", "t", 0, [b""] * 2, [b"x", b"y"], " pid=p seq=0").decode()
    assert send(resend.format(cid=1).encode()).endswith(b"count=2 hw=1 duplicates=0")
    assert b"|OK|" in send(b"V1|2|SET_PARTITION_ROLE|t 0 follower\n")
    plog = h.broker.core.store.partition("t", 0)
    plog.truncate_to(0)  # what the replication layer does when the new leader's log diverges
    plog.append([b"a", b"b", b"c"])  # ... and the new leader's records it copies
    assert b"|OK|" in send(b"V1|3|SET_PARTITION_ROLE|t 0 leader\n")
    assert send(resend.format(cid=4).encode()).endswith(b"offset=3 count=2 hw=4 duplicates=0")
    assert consume_all(proto, tr, "t", 0) == [b"a", b"b", b"c", b"x", b"y"]
    h.close()
