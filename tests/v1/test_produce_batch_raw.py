"""PRODUCE_BATCH ``enc=raw size=<n>``: the batch follows its line as raw bytes.

Driven in memory (StringTransport connections over the real core and store) and once over
TCP against a broker process. They prove: the raw form stores exactly what the base64 form
stores; a body that arrives in pieces (down to one byte a read) is waited for, and its
bytes are never run as requests (newlines and ``V1|`` inside it included), also when the
line itself is refused; a size that cannot be read answers with the line's cid and closes
the connection (nothing after it runs); a body cut short by a half-close is answered, not
written; the line and its body together must fit ``limits.max_line_bytes``.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from broker.client.codec import encode_batch
from broker.client.sync import Client
from tests.reliability.inmemory import InMemoryBroker
from tests.support import BrokerProcess
from tests.v1.test_produce_batch import consume_all, produce_batch

VALUES = [b"a,b|c\nd\x00e", b"", b"\r\nV1|9|PING|\n", bytes(range(256))]
KEYS = [b"k1", b"", b"k3", b"k4"]


def raw_batch(cid: str, topic: str, partition: int, keys: list[bytes], values: list[bytes],
              extra: str = "") -> bytes:
    body = encode_batch(keys, values)
    return f"V1|{cid}|PRODUCE_BATCH|{topic} {partition}{extra} enc=raw size={len(body)}\n".encode() + body


def harness(tmp_path: Path, **config: Any) -> InMemoryBroker:
    config.setdefault("storage", {"fsync": "interval"})
    config.setdefault("topics", {"t": {"partitions": 2}})
    return InMemoryBroker(tmp_path / "data", None, **config)


def lines(h: InMemoryBroker, tr: Any) -> list[bytes]:
    h.settle()
    out = tr.value().splitlines()
    tr.clear()
    return out


def test_raw_stores_what_base64_stores(tmp_path: Path) -> None:
    """The same batch sent both ways lands as the same messages, keys and values, and both
    answers have the same shape."""
    h = harness(tmp_path)
    proto, tr = h.connect()
    proto.dataReceived(raw_batch("1", "t", 0, KEYS, VALUES) + produce_batch("2", "t", 1, KEYS, VALUES))
    assert lines(h, tr) == [b"V1|1|OK|partition=0 offset=0 count=4 hw=3",
                            b"V1|2|OK|partition=1 offset=0 count=4 hw=3"]
    assert consume_all(proto, tr, "t", 0) == consume_all(proto, tr, "t", 1) == VALUES
    proto.dataReceived(b"V1|3|CONSUME|t 0 0 detail=true enc=b64\n")
    keys = [item.split(":")[2] for item in tr.value().decode().split("messages=")[1].split(" hw=")[0].split(",")]
    assert [base64.b64decode(k) for k in keys] == KEYS
    h.close()


def test_a_body_across_reads_is_waited_for_and_never_run_as_requests(tmp_path: Path) -> None:
    """Reads of one to a few bytes: no answer until the last byte of the batch; the
    ``V1|9|PING|`` line inside a value is data, and the PING after the body is answered
    after the batch."""
    h = harness(tmp_path)
    proto, tr = h.connect()
    stream = raw_batch("1", "t", 0, KEYS, VALUES, " pid=p seq=0") + b"V1|2|PING|\n"
    at = 0
    while at < len(stream) - 12:
        step = min(1 if at < 120 else 5, len(stream) - 12 - at)
        proto.dataReceived(stream[at:at + step])
        at += step
        h.clock.advance(0)
        assert tr.value() == b"", at
    proto.dataReceived(stream[at:])
    got = lines(h, tr)
    assert got[0] == b"V1|1|OK|partition=0 offset=0 count=4 hw=3 duplicates=0"
    assert got[1].startswith(b"V1|2|OK") and len(got) == 2
    assert consume_all(proto, tr, "t", 0) == VALUES
    h.close()


def test_a_refused_line_still_skips_its_body(tmp_path: Path) -> None:
    """A line refused before its batch is looked at (unknown topic, bad acks, data= with
    enc=raw, a bad batch) answers with its cid; its body is skipped, not read as requests,
    and the next request runs; nothing is written."""
    h = harness(tmp_path)
    proto, tr = h.connect()
    body = encode_batch([b"k"], [b"V1|7|PING|\nV1|8|PING|\n"])
    size = len(body)
    stream = b"".join([
        f"V1|1|PRODUCE_BATCH|nope 0 enc=raw size={size}\n".encode() + body,
        f"V1|2|PRODUCE_BATCH|t 0 acks=2 enc=raw size={size}\n".encode() + body,
        f"V1|3|PRODUCE_BATCH|t 0 data=AAAA enc=raw size={size}\n".encode() + body,
        f"V1|4|PRODUCE_BATCH|t 0 size={size}\n".encode() + body,
        b"V1|5|PRODUCE_BATCH|t 0 enc=raw size=4\n\x00\x00\x00\x00",
        b"V1|6|PING|\n",
    ])
    got = lines(h, tr)
    assert got == []  # nothing fed yet
    proto.dataReceived(stream)
    got = lines(h, tr)
    assert [line.split(b"|")[1:3] for line in got] == [
        [b"1", b"ERR"], [b"2", b"ERR"], [b"3", b"ERR"], [b"4", b"ERR"], [b"5", b"ERR"], [b"6", b"OK"]]
    assert got[2] == b"V1|3|ERR|BAD_REQUEST|PRODUCE_BATCH takes data= or enc=raw size=<n>, not both"
    assert got[4] == b"V1|5|ERR|BAD_REQUEST|a batch holds at least one message"
    assert consume_all(proto, tr, "t", 0) == []
    h.close()


def test_an_unreadable_size_answers_and_closes(tmp_path: Path) -> None:
    """``size=`` not a number, given twice, or over what the line limit leaves: the batch's
    end is unknown, so the line is answered with its cid and the connection closes without
    running what follows (which could be the body)."""
    for size in ("x", "12 size=12", "-1", "2000"):
        h = harness(tmp_path / size.replace(" ", "_"), limits={"max_line_bytes": 1024})
        proto, tr = h.connect()
        proto.dataReceived(b"V1|0|PING|\n" + f"V1|1|PRODUCE_BATCH|t 0 enc=raw size={size}\n".encode()
                           + b"V1|2|PING|\n" * 5)
        h.settle()
        got = tr.value().splitlines()
        assert got[0].startswith(b"V1|0|OK")
        assert got[1].startswith(b"V1|1|ERR|BAD_REQUEST|unreadable PRODUCE_BATCH body size"), got
        assert len(got) == 2, got
        assert tr.disconnecting
        h.close()


def test_a_body_cut_short_by_a_half_close_is_answered_not_written(tmp_path: Path) -> None:
    h = harness(tmp_path)
    proto, tr = h.connect()
    stream = raw_batch("1", "t", 0, KEYS, VALUES)
    cut = len(stream) - 10
    proto.dataReceived(stream[:cut])
    h.settle()
    assert tr.value() == b""
    proto.readConnectionLost()
    h.settle()
    body = len(encode_batch(KEYS, VALUES))
    assert tr.value() == (f"V1|1|ERR|BAD_REQUEST|the connection was shut down after {body - 10} of "
                          f"the {body} bytes of the batch after the PRODUCE_BATCH line; it was not "
                          "executed\n").encode()
    assert tr.disconnecting
    proto2, tr2 = h.connect()
    assert consume_all(proto2, tr2, "t", 0) == []
    h.close()


def test_the_line_and_its_body_fit_the_line_limit(tmp_path: Path) -> None:
    """With ``max_line_bytes`` 1024, a line and body of exactly 1024 bytes is served, one
    byte more is refused (and closes)."""
    line = b"V1|1|PRODUCE_BATCH|t 0 enc=raw size=0000"
    room = 1024 - len(line)
    ok_body = encode_batch([b""], [b"x" * (room - 9)])
    assert len(ok_body) == room
    h = harness(tmp_path / "a", limits={"max_line_bytes": 1024})
    proto, tr = h.connect()
    proto.dataReceived(f"V1|1|PRODUCE_BATCH|t 0 enc=raw size={room:04d}\n".encode() + ok_body)
    assert lines(h, tr) == [b"V1|1|OK|partition=0 offset=0 count=1 hw=0"]
    h.close()
    big = encode_batch([b""], [b"x" * (room - 8)])
    h = harness(tmp_path / "b", limits={"max_line_bytes": 1024})
    proto, tr = h.connect()
    proto.dataReceived(f"V1|1|PRODUCE_BATCH|t 0 enc=raw size={room + 1:04d}\n".encode() + big)
    got = lines(h, tr)
    assert len(got) == 1 and got[0].startswith(b"V1|1|ERR|BAD_REQUEST|unreadable"), got
    assert tr.disconnecting
    h.close()


def test_end_to_end_the_client_sends_raw_batches(tmp_path: Path) -> None:
    """Over TCP: ``Client.produce_batches`` sends raw batches by default (and base64 ones
    with ``raw=False``), pipelined; both land in order with their bytes intact."""
    values = [bytes([i % 256]) * (i % 7) + b"\nV1|1|PING|\n" for i in range(2000)]
    with BrokerProcess(tmp_path) as broker:
        with Client(f"127.0.0.1:{broker.port}") as client:
            client.request("ADMIN_CREATE_TOPIC", "e 1 1")
            batches = [(0, encode_batch([b"k"] * 500, values[i:i + 500]), 500)
                       for i in range(0, 2000, 500)]
            acks = client.produce_batches("e", batches[:2], pid="x")
            acks += client.produce_batches("e", batches[2:], pid="x", first_seq={0: 1000}, raw=False)
            assert [(a.offset, a.count) for a in acks] == [(0, 500), (500, 500), (1000, 500), (1500, 500)]
            again = client.produce_batches("e", batches[:1], pid="x")  # a resend: held
            assert (again[0].count, again[0].duplicates) == (0, 500)
            got: list[bytes] = []
            while len(got) < len(values):
                got += [m.value for m in client.consume("e", 0, len(got)).messages]
            assert got == values
