"""A fetch of megabytes to a client that reads slowly: the broker sends the record sets of
a Fetch response as they are (``Connection.write_chunks``: one ``sendmsg``, only what the
socket leaves joined for later), and the client gets every byte, in order, with the
responses pipelined behind it intact."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

from broker.kafka import codec as c
from tests.kafka.harness import i32, i64, kafka_port_of, request, string
from tests.kafka.test_data import message, produce_body
from tests.support import BrokerProcess

PARTITIONS = 3
PER_PARTITION = 30_000
"""About 3.9 MB of magic-1 messages per partition: a fetch of all three is ~12 MB, several
times what a loopback socket buffers before its reader reads."""


def _value(partition: int, offset: int) -> bytes:
    return (b"p%d-o%d-" % (partition, offset)).ljust(100, b"x")


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        got = sock.recv(min(n, 1 << 16))
        assert got, "the broker closed the connection"
        chunks.append(got)
        n -= len(got)
    return b"".join(chunks)


def _frame(sock: socket.socket) -> tuple[int, bytes]:
    size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
    body = _recv_exactly(sock, size)
    return struct.unpack(">i", body[:4])[0], body[4:]


def _fetch_v3_all(topic: str, max_bytes: int) -> bytes:
    parts = b"".join(i32(p) + i64(0) + i32(max_bytes) for p in range(PARTITIONS))
    return (i32(-1) + i32(0) + i32(1) + i32(64 << 20) + i32(1) + string(topic)
            + i32(PARTITIONS) + parts)


def _records_by_partition(body: bytes) -> dict[int, bytes]:
    """Fetch v3 response body (after the correlation id) -> partition -> record bytes."""
    pos = 4  # throttle_time_ms
    (topics,) = struct.unpack_from(">i", body, pos)
    pos += 4
    assert topics == 1
    (name_len,) = struct.unpack_from(">h", body, pos)
    pos += 2 + name_len
    (count,) = struct.unpack_from(">i", body, pos)
    pos += 4
    out = {}
    for _ in range(count):
        index, error, _hw, size = struct.unpack_from(">ihqi", body, pos)
        pos += 18
        assert error == 0
        out[index] = body[pos:pos + size]
        pos += size
    assert pos == len(body)
    return out


def _fill(port: int) -> None:
    """Topic "big" (auto-created), PER_PARTITION records in each of its partitions."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request(3, 0, 1, i32(1) + string("big")))
        _frame(sock)
        for p in range(PARTITIONS):
            mset = b"".join(message(0, None, _value(p, o), magic=1, timestamp=1)
                            for o in range(PER_PARTITION))
            sock.sendall(request(0, 2, 10 + p, produce_body("big", p, mset, acks=1)))
            cid, body = _frame(sock)
            assert cid == 10 + p
            assert struct.unpack_from(">h", body, 4 + 2 + 3 + 4 + 4)[0] == 0  # no error


def _assert_every_record(body: bytes) -> None:
    """A Fetch v3 response body holds every partition, each with all its records in order."""
    records = _records_by_partition(body)
    assert sorted(records) == list(range(PARTITIONS))
    for p, data in records.items():
        got = c.decode_message_set(data)
        assert [r.offset for r in got] == list(range(PER_PARTITION))
        assert all(r.value == _value(p, r.offset) for r in got)


def test_a_fetch_of_megabytes_reaches_a_slow_reader_whole(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "b", {"kafka_port": 0,
                                        "limits": {"max_pending_output_bytes": 64 << 20}}
                       ) as proc:
        port = kafka_port_of(proc.log_text())
        _fill(port)

        with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
            # The fetch, and an ApiVersions pipelined behind it.
            slow.sendall(request(1, 3, 21, _fetch_v3_all("big", 8 << 20)) + request(18, 0, 22))
            time.sleep(0.5)  # the broker's send stops at a full socket: the rest waits
            cid, body = _frame(slow)
            assert cid == 21
            _assert_every_record(body)
            cid, body = _frame(slow)
            assert cid == 22
            assert struct.unpack_from(">h", body)[0] == 0  # ApiVersions v0: no error


def test_a_half_closed_slow_reader_gets_every_fetch_in_order_then_the_close(
        tmp_path: Path) -> None:
    """Two 12 MB fetches and an ApiVersions pipelined, then the client shuts down its
    sending side and reads only later. The first reply's unsent rest waits in the
    connection's backlog (over the 1 MiB output cap: the broker stops reading), the
    requests behind it are read once it drains, and every reply arrives whole, in order,
    before the broker closes."""
    with BrokerProcess(tmp_path / "b", {"kafka_port": 0,
                                        "limits": {"max_pending_output_bytes": 1 << 20}}
                       ) as proc:
        port = kafka_port_of(proc.log_text())
        _fill(port)

        with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
            slow.sendall(request(1, 3, 31, _fetch_v3_all("big", 8 << 20))
                         + request(1, 3, 32, _fetch_v3_all("big", 8 << 20))
                         + request(18, 0, 33))
            slow.shutdown(socket.SHUT_WR)
            time.sleep(0.5)  # the first reply fills the socket; the rest waits unsent
            for cid in (31, 32):
                got_cid, body = _frame(slow)
                assert got_cid == cid
                _assert_every_record(body)
            got_cid, body = _frame(slow)
            assert got_cid == 33
            assert struct.unpack_from(">h", body)[0] == 0
            assert slow.recv(1) == b"", "the broker closes once every reply is sent"


def _fetch_v3(topic: str, offsets: dict[int, int], *, max_wait_ms: int = 0,
              min_bytes: int = 1, max_bytes: int = 64 << 20,
              partition_max_bytes: int = 8 << 20) -> bytes:
    parts = b"".join(i32(p) + i64(o) + i32(partition_max_bytes) for p, o in offsets.items())
    return (i32(-1) + i32(max_wait_ms) + i32(min_bytes) + i32(max_bytes) + i32(1)
            + string(topic) + i32(len(offsets)) + parts)


def test_the_broker_bounds_a_fetch_answer_below_what_the_client_asks(tmp_path: Path) -> None:
    """``kafka.fetch_max_bytes`` (1 MiB here) bounds a Fetch answer whatever the client asks
    (64 MiB): the first partition's records up to the bound, whole messages, the others
    empty. The answer comes at once even with ``min_bytes`` above the bound and a 5 s wait
    (waiting could not make it larger), and fetching on from where each answer ended reads
    every record of every partition, in order."""
    with BrokerProcess(tmp_path / "b", {"kafka_port": 0,
                                        "kafka": {"fetch_max_bytes": 1 << 20}}) as proc:
        port = kafka_port_of(proc.log_text())
        _fill(port)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            began = time.monotonic()
            sock.sendall(request(1, 3, 31, _fetch_v3("big", dict.fromkeys(range(PARTITIONS), 0),
                                                     max_wait_ms=5000, min_bytes=64 << 20)))
            cid, body = _frame(sock)
            assert cid == 31 and time.monotonic() - began < 2.5
            records = _records_by_partition(body)
            assert (1 << 20) - 200 < len(records[0]) <= 1 << 20
            assert records[1] == records[2] == b""

            offsets = dict.fromkeys(range(PARTITIONS), 0)
            values: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
            for cid in range(40, 80):
                sock.sendall(request(1, 3, cid, _fetch_v3("big", offsets)))
                got, body = _frame(sock)
                assert got == cid
                answer = _records_by_partition(body)
                assert sum(map(len, answer.values())) <= 1 << 20
                for p, data in answer.items():
                    messages = c.decode_message_set(data)
                    assert [m.offset for m in messages] == list(
                        range(offsets[p], offsets[p] + len(messages)))
                    values[p] += [m.value for m in messages]
                    offsets[p] += len(messages)
                if all(o == PER_PARTITION for o in offsets.values()):
                    break
            assert values == {p: [_value(p, o) for o in range(PER_PARTITION)]
                              for p in range(PARTITIONS)}
