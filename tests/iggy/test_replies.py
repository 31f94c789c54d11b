"""Golden reply bytes for every request code of the seed, in one table: each code is sent
(raw frames, in-memory connection, fixed clock and host facts) and its whole reply frame
is compared with bytes written out here by hand from the seed and
spec/iggy-binary-notes.md. The request side of every code is in test_codec.py."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import xxhash

from broker.iggy.handlers import SystemInfo
from tests.iggy.harness import (
    SEED_CODES,
    WALL_START_US,
    Conn,
    Harness,
    err,
    ident,
    name8,
    ok,
    u32,
    u64,
)

T0 = WALL_START_US
ROOT_PERMS = bytes([1] * 10) + b"\x00"  # ten global flags set, no stream map
HOST = SystemInfo(process_id=4242, cpu_usage=1.5, total_cpu_usage=12.25, memory_usage=1000,
                  total_memory=8000, available_memory=5000, hostname="host", os_name="Linux",
                  os_version="#1 SMP", kernel_version="6.1.0", threads_count=3,
                  free_disk_space=10**9, total_disk_space=2 * 10**9)
ST = ident("shop") + ident("t")
HEADERS = b"\x02" + u32(3) + b"key" + b"\x02" + u32(2) + b"k1"


def stream(id: int, topics: int, size: int, messages: int, name: str) -> bytes:
    """id u32, created_at u64, topics_count u32, size u64, messages_count u64, name u8."""
    return u32(id) + u64(T0) + u32(topics) + u64(size) + u64(messages) + name8(name)


def topic(id: int, partitions: int, compression: int, rf: int, size: int, messages: int,
          name: str) -> bytes:
    """id u32, created_at u64, partitions u32, expiry u64, compression u8, max size u64,
    replication factor u8, size u64, messages u64, name u8."""
    return (u32(id) + u64(T0) + u32(partitions) + u64(0) + bytes((compression,)) + u64(0)
            + bytes((rf,)) + u64(size) + u64(messages) + name8(name))


def partition(id: int, current: int = 0, size: int = 0, messages: int = 0) -> bytes:
    """40 bytes: id u32, created_at u64, segments u32, current offset u64, size u64,
    messages u64."""
    return u32(id) + u64(T0) + u32(1) + u64(current) + u64(size) + u64(messages)


def client(id: int, user: int, groups: bytes = b"", count: int = 0) -> bytes:
    """id u32, user id u32, transport u8 (1 TCP), address (u32 len), groups count u32."""
    address = b"127.0.0.1:%d" % (40000 + id)
    return u32(id) + u32(user) + b"\x01" + u32(len(address)) + address + u32(count) + groups


def user(id: int, status: int, name: str) -> bytes:
    return u32(id) + u64(T0) + bytes((status,)) + name8(name)


def message(payload: bytes, headers: bytes, id: int, origin: int) -> bytes:
    """As the client sends it: checksum, id, offset, timestamp, origin, lengths, reserved;
    payload; user headers."""
    return (u64(0) + id.to_bytes(16, "little") + u64(0) + u64(0) + u64(origin)
            + u32(len(headers)) + u32(len(payload)) + u64(0) + payload + headers)


def record(offset: int, payload: bytes, headers: bytes, id: int, origin: int) -> bytes:
    """As stored: the server's offset and timestamp, xxh3-64 of the rest as checksum."""
    rest = (id.to_bytes(16, "little") + u64(offset) + u64(T0) + u64(origin)
            + u32(len(headers)) + u32(len(payload)) + u64(0) + payload + headers)
    return u64(xxhash.xxh3_64_intdigest(rest)) + rest


MSG_A = message(b"hello", b"", 11, 111)
MSG_B = message(b"world", HEADERS, 12, 222)
SEND = (u32(9 + 6 + 4) + ST + b"\x02\x04" + u32(0) + u32(2)  # metadata: ids, partitioning, count
        + u32(0) + u32(len(MSG_A)) + u64(0) + u32(0) + u32(len(MSG_A) + len(MSG_B)) + u64(0)
        + MSG_A + MSG_B)
STORED = record(0, b"hello", b"", 11, 111) + record(1, b"world", HEADERS, 12, 222)
SIZE = 2 * 64 + 10 + len(HEADERS)
CONSUMER_7 = b"\x01" + ident(7) + ST + b"\x01" + u32(0)
GROUP = u32(0) + u32(3) + u32(1) + name8("g")
MEMBER = u32(1) + u32(3) + u32(0) + u32(1) + u32(2)
STATS = (u32(4242) + struct.pack("<ff", 1.5, 12.25) + u64(1000) + u64(8000) + u64(5000)
         + u64(2_000_000) + u64(T0) + u64(len(STORED)) + u64(len(MSG_A) + len(MSG_B))
         + u64(SIZE)
         + u32(2) + u32(1) + u32(3) + u32(3) + u64(2) + u32(1) + u32(1)
         + u32(4) + b"host" + u32(5) + b"Linux" + u32(6) + b"#1 SMP" + u32(5) + b"6.1.0"
         + u32(39) + b"skerry 0.1.0 (iggy binary protocol 0.8)"
         + u32(1000) + u32(0) + u32(3) + u64(10**9) + u64(2 * 10**9))
ALICE_PERMS = bytes([0, 1, 0, 0, 0, 1, 0, 1, 1, 0]) + b"\x00"


def _snapshot(reply: bytes) -> None:
    """A zip holding snapshot.json (no seed layout: checked by its contents)."""
    assert reply[:8] == u32(0) + u32(len(reply) - 8)
    with zipfile.ZipFile(io.BytesIO(reply[8:])) as archive:
        doc = json.loads(archive.read("snapshot.json"))
    assert [s["name"] for s in doc["catalog"]["streams"]] == ["default", "shop"]
    assert doc["stats"]["process_id"] == 4242


def _token(state: dict[str, bytes]) -> Callable[[bytes], None]:
    def check(reply: bytes) -> None:
        """A random token, answered once: u8 length, token."""
        token = reply[9:]
        assert reply == ok(bytes((len(token),)) + token) and len(token) >= 32
        state["token"] = token
    return check


def test_every_seed_code_has_a_golden_reply(tmp_path: Path) -> None:
    """Every request code of the seed is answered with the bytes the seed and the notes
    describe: details for Get/Create, an empty payload for changes, an error status for
    DeletePartitions (refused), user_id for the logins, the token once, the stats with the
    host facts given, the snapshot as a zip."""
    h = Harness(tmp_path)
    h.service.handlers.system_info = lambda: HOST
    h.service.node.ip, h.service.node.tcp_port = "127.0.0.1", 8090
    conns: dict[str, Conn] = {"a": h.connect()}
    state: dict[str, bytes] = {}
    steps: list[tuple[str, int, bytes | Callable[[], bytes], bytes | Callable[[bytes], None]]] = [
        ("a", 1, b"", ok()),
        ("a", 38, name8("iggy") + name8("iggy") + u32(0) + u32(0), ok(u32(0))),
        ("a", 12, b"", ok(u32(6) + b"skerry" + u32(1) + u32(8) + b"skerry-0" + u32(9)
                          + b"127.0.0.1" + struct.pack("<HHHH", 8090, 0, 0, 0) + b"\x00\x00")),
        ("a", 20, b"", ok(client(1, 0))),
        ("a", 21, u32(1), ok(client(1, 0))),
        ("a", 22, b"", ok(client(1, 0))),
        ("a", 202, name8("s"), ok(stream(1, 0, 0, 0, "s"))),
        ("a", 204, ident(1) + name8("shop"), ok()),
        ("a", 302, ident("shop") + u32(2) + b"\x01" + u64(0) + u64(0) + b"\x00" + name8("t"),
         ok(topic(0, 2, 1, 0, 0, 0, "t") + partition(0) + partition(1))),
        ("a", 304, ST + b"\x02" + u64(0) + u64(0) + b"\x01" + name8("t"), ok()),
        ("a", 402, ST + u32(1), ok()),
        ("a", 403, ST + u32(1), err(5)),
        ("a", 101, SEND, ok()),
        ("a", 102, ST + u32(0) + b"\x01", ok()),
        ("a", 100, CONSUMER_7 + b"\x01" + u64(0) + u32(10) + b"\x01",
         ok(u32(0) + u64(1) + u32(2) + STORED)),
        ("a", 300, ident(1) + ident(0),
         ok(topic(0, 3, 2, 1, SIZE, 2, "t") + partition(0, 1, SIZE, 2) + partition(1)
            + partition(2))),
        ("a", 301, ident("shop"), ok(topic(0, 3, 2, 1, SIZE, 2, "t"))),
        ("a", 200, ident("shop"), ok(stream(1, 1, SIZE, 2, "shop")
                                     + topic(0, 3, 2, 1, SIZE, 2, "t"))),
        ("a", 201, b"", ok(stream(0, 0, 0, 0, "default") + stream(1, 1, SIZE, 2, "shop"))),
        ("a", 120, CONSUMER_7, ok(u32(0) + u64(1) + u64(1))),
        ("a", 121, CONSUMER_7 + u64(0), ok()),
        ("a", 120, CONSUMER_7, ok(u32(0) + u64(1) + u64(0))),
        ("a", 122, CONSUMER_7, ok()),
        ("a", 120, CONSUMER_7, ok()),
        ("a", 602, ST + name8("g"), ok(u32(0) + u32(3) + u32(0) + name8("g"))),
        ("a", 604, ST + ident("g"), ok()),
        ("a", 600, ST + ident(0), ok(GROUP + MEMBER)),
        ("a", 601, ST, ok(GROUP)),
        ("a", 20, b"", ok(client(1, 0, u32(1) + u32(0) + u32(0), 1))),
        ("a", 503, ST + u32(0) + u32(1), ok()),
        ("a", 10, b"", ok(STATS)),
        ("a", 11, b"", _snapshot),
        ("a", 605, ST + ident("g"), ok()),
        ("a", 603, ST + ident("g"), ok()),
        ("a", 31, ident(0), ok(user(0, 1, "iggy") + b"\x01" + u32(11) + ROOT_PERMS)),
        ("a", 33, name8("alice") + name8("secret1") + b"\x01\x01" + u32(11) + ALICE_PERMS,
         ok(user(1, 1, "alice") + b"\x01" + u32(11) + ALICE_PERMS)),
        ("a", 32, b"", ok(user(0, 1, "iggy") + user(1, 1, "alice"))),
        ("a", 35, ident("alice") + b"\x01" + name8("alicia") + b"\x01\x02", ok()),
        ("a", 36, ident(1) + b"\x00" + u32(0), ok()),
        ("a", 31, ident("alicia"), ok(user(1, 2, "alicia") + b"\x00")),
        ("a", 37, ident(1) + name8("secret1") + name8("secret2"), ok()),
        ("a", 42, name8("tok") + u64(0), _token(state)),
        ("a", 41, b"", ok(name8("tok") + u64(0))),
        ("b", 44, lambda: bytes((len(state["token"]),)) + state["token"], ok(u32(0))),
        ("a", 43, name8("tok"), ok()),
        ("a", 41, b"", ok()),
        ("a", 34, ident("alicia"), ok()),
        ("a", 305, ST, ok()),
        ("a", 205, ident("shop"), ok()),
        ("a", 200, ident(1), ok(stream(1, 1, 0, 0, "shop") + topic(0, 3, 2, 1, 0, 0, "t"))),
        ("a", 303, ST, ok()),
        ("a", 203, ident("shop"), ok()),
        ("a", 201, b"", ok(stream(0, 0, 0, 0, "default"))),
        ("a", 39, b"", ok()),
        ("a", 201, b"", err(40)),
    ]
    try:
        for index, (who, code, payload, expected) in enumerate(steps):
            if code == 10:
                h.clock.advance(2.0)  # run_time 2 s; the wall clock (created_at) stays
            if who not in conns:
                conns[who] = h.connect()
            body = payload() if callable(payload) else payload
            reply = conns[who].request(code, body)
            if callable(expected):
                expected(reply)
            else:
                assert reply == expected, f"step {index}: code {code}"
        answered = {code for _who, code, _p, expected in steps
                    if callable(expected) or expected[:4] == u32(0)}
        assert answered | {403} == SEED_CODES
    finally:
        h.close()
