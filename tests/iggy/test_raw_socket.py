"""What the apache-iggy 0.8.0 Python client cannot send, over a real socket to a real
broker process, with a raw-frame client built from the seed and the notes: user headers,
MessagesKey and Balanced partitioning, users (every user command), personal access tokens
and stats; each
reply is checked byte for byte (or field by field where the broker decides a value: time,
random ids, process facts)."""

from __future__ import annotations

import platform
import socket
import struct
from collections.abc import Iterator

import pytest
import xxhash

from broker.core import fnv1a_32
from tests.iggy.harness import RawClient, err, frame, ident, iggy_port_of, name8, ok, u32, u64
from tests.support import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    proc = BrokerProcess(tmp_path_factory.mktemp("iggy-raw"), {"iggy_port": 0})
    with proc:
        yield proc, iggy_port_of(proc.log_text())


def login(port: int, username: str = "iggy", password: str = "iggy") -> RawClient:
    client = RawClient(port)
    reply = client.request(38, name8(username) + name8(password) + u32(0) + u32(0))
    assert reply[:8] == struct.pack("<II", 0, 4)
    return client


def message(payload: bytes, headers: bytes = b"", id: int = 0, origin: int = 0) -> bytes:
    return struct.pack("<QQQQQQIIQ", 0, id, 0, 0, 0, origin, len(headers), len(payload), 0) \
        + payload + headers


def send_payload(stream: str, topic: str, kind: int, value: bytes, msgs: list[bytes]) -> bytes:
    meta = ident(stream) + ident(topic) + bytes((kind, len(value))) + value + u32(len(msgs))
    index = b""
    end = 0
    for m in msgs:
        end += len(m)
        index += struct.pack("<IIQ", 0, end, 0)
    return u32(len(meta)) + meta + index + b"".join(msgs)


def poll(client: RawClient, stream: str, topic: str, partition: int) -> bytes:
    return client.request(100, b"\x01" + ident(1) + ident(stream) + ident(topic) + b"\x01"
                          + u32(partition) + b"\x01" + u64(0) + u32(100) + b"\x00")


def expected_record(offset: int, ts: int, id: int, origin: int, payload: bytes,
                    headers: bytes) -> bytes:
    rest = struct.pack("<16sQQQIIQ", id.to_bytes(16, "little"), offset, ts, origin,
                       len(headers), len(payload), 0) + payload + headers
    return u64(xxhash.xxh3_64_intdigest(rest)) + rest


def make_topic(client: RawClient, stream: str, partitions: int) -> None:
    assert client.request(202, name8(stream))[:4] == u32(0)
    body = ident(stream) + u32(partitions) + b"\x01" + u64(0) + u64(0) + b"\x00" + name8("t")
    assert client.request(302, body)[:4] == u32(0)


class RawSocketTests:
    def test_user_headers_and_keyed_and_balanced_partitioning(self, broker):
        """User headers come back byte for byte after the payload; MessagesKey sends land
        on FNV-1a(key) mod partitions; Balanced sends go round robin."""
        _proc, port = broker
        c = login(port)
        make_topic(c, "raw-a", 3)
        headers = (b"\x02" + u32(3) + b"key" + b"\x02" + u32(2) + b"k1"
                   + b"\x02" + u32(4) + b"span" + b"\x0c" + u32(8) + u64(77))
        msgs = [message(b"keyed-1", headers, id=1, origin=10), message(b"keyed-2", b"", id=2,
                                                                        origin=20)]
        assert c.request(101, send_payload("raw-a", "t", 3, b"order-9", msgs)) == ok()
        target = fnv1a_32(b"order-9") % 3
        reply = poll(c, "raw-a", "t", target)
        ts = struct.unpack_from("<Q", reply, 8 + 16 + 32)[0]
        body = (struct.pack("<IQI", target, 1, 2)
                + expected_record(0, ts, 1, 10, b"keyed-1", headers)
                + expected_record(1, ts, 2, 20, b"keyed-2", b""))
        assert reply == ok(body)
        for i in range(3):
            assert c.request(101, send_payload("raw-a", "t", 1, b"", [message(b"b%d" % i, id=5)])) \
                == ok()
        counts = [struct.unpack_from("<I", poll(c, "raw-a", "t", p), 8 + 12)[0] for p in range(3)]
        assert sorted(counts) == sorted([1 + 2 * (p == target) for p in range(3)])

    def test_users_tokens_and_stats(self, broker):
        """Create a user with permissions (details echoed), log in as them, create a token,
        log in with it, list and delete it; GetStats has the notes' layout."""
        _proc, port = broker
        root = login(port)
        perms = bytes([0, 1, 0, 0, 0, 1, 0, 1, 1, 1]) + b"\x00"
        reply = root.request(33, name8("rawuser") + name8("rawpass") + b"\x01" + b"\x01"
                             + u32(len(perms)) + perms)
        assert reply[:4] == u32(0)
        user_id, created, status = struct.unpack_from("<IQB", reply, 8)
        assert reply == ok(struct.pack("<IQB", user_id, created, 1) + name8("rawuser") + b"\x01"
                           + u32(len(perms)) + perms)
        # GetUser reads them back from the ACLs: Describe Cluster is read_servers and
        # read_users both (docs/iggy.md).
        back = bytes([0, 1, 0, 1, 0, 1, 0, 1, 1, 1]) + b"\x00"
        assert root.request(31, ident("rawuser")) == ok(
            struct.pack("<IQB", user_id, created, 1) + name8("rawuser") + b"\x01"
            + u32(len(back)) + back)
        user = login(port, "rawuser", "rawpass")
        token_reply = user.request(42, name8("raw-token") + u64(0))
        token = token_reply[9:]
        assert token_reply == ok(bytes((len(token),)) + token)
        assert user.request(41) == ok(name8("raw-token") + u64(0))
        fresh = RawClient(port)
        assert fresh.request(44, bytes((len(token),)) + token) == ok(u32(user_id))
        assert fresh.request(10)[:4] == u32(0)
        assert fresh.request(202, name8("not-allowed")) == err(41)
        assert user.request(43, name8("raw-token")) == ok()
        assert RawClient(port).request(44, bytes((len(token),)) + token) == err(53)
        stats = root.request(10)
        body = stats[8:]
        assert stats[:8] == struct.pack("<II", 0, len(body))
        fields = struct.unpack_from("<IffQQQQQQQQIIIIQII", body)
        assert fields[0] == _proc.proc.pid and fields[11] >= 2 and fields[16] >= 3
        uname = platform.uname()
        strings = b"".join(u32(len(v)) + v for v in (
            socket.gethostname().encode(), uname.system.encode(), uname.version.encode(),
            uname.release.encode(), b"skerry 0.1.0 (iggy binary protocol 0.8)"))
        assert body[108:108 + len(strings)] == strings
        pos = 108 + len(strings)
        assert struct.unpack_from("<II", body, pos) == (1000, 0) and len(body) == pos + 28

    def test_user_management_and_logout(self, broker):
        """GetUsers, UpdateUser (name, status), UpdatePermissions, ChangePassword,
        DeleteUser and LogoutUser, each reply byte for byte."""
        _proc, port = broker
        root = login(port)
        reply = root.request(33, name8("mgmt-user") + name8("first-pw") + b"\x01\x00" + u32(0))
        user_id, created = struct.unpack_from("<IQ", reply, 8)
        record = struct.pack("<IQB", user_id, created, 1) + name8("mgmt-user")
        assert user_id > 0 and reply == ok(record + b"\x00")
        root_record = root.request(31, ident(0))[8:8 + 18]
        assert root_record[:4] == u32(0) and root_record[12:] == b"\x01" + name8("iggy")
        users = root.request(32)
        assert users[:8] == struct.pack("<II", 0, len(users) - 8)
        assert users[8:8 + 18] == root_record and record in users
        assert root.request(35, ident(user_id) + b"\x01" + name8("mgmt-renamed") + b"\x01\x02") \
            == ok()
        assert root.request(31, ident("mgmt-renamed")) == ok(
            struct.pack("<IQB", user_id, created, 2) + name8("mgmt-renamed") + b"\x00")
        payload = name8("mgmt-renamed") + name8("first-pw") + u32(0) + u32(0)
        assert RawClient(port).request(38, payload) == err(47)
        assert root.request(35, ident(user_id) + b"\x00" + b"\x01\x01") == ok()
        perms = bytes([0, 0, 0, 0, 0, 1, 0, 0, 0, 0]) + b"\x00"  # read_streams
        assert root.request(36, ident(user_id) + b"\x01" + u32(len(perms)) + perms) == ok()
        back = bytes([0, 1, 0, 1, 0, 1, 0, 1, 1, 0]) + b"\x00"  # as the ACLs read back
        assert root.request(31, ident(user_id)) == ok(
            struct.pack("<IQB", user_id, created, 1) + name8("mgmt-renamed") + b"\x01"
            + u32(len(back)) + back)
        user = login(port, "mgmt-renamed", "first-pw")
        assert user.request(37, ident(user_id) + name8("first-pw") + name8("second-pw")) == ok()
        assert RawClient(port).request(38, payload) == err(42)
        assert user.request(201)[:4] == u32(0)
        assert user.request(39) == ok()
        assert user.request(201) == err(40)
        assert login(port, "mgmt-renamed", "second-pw").request(34, ident(0)) == err(41)
        assert root.request(34, ident(user_id)) == ok()
        assert root.request(31, ident(user_id)) == ok()

    def test_unauthenticated_and_malformed_over_the_socket(self, broker):
        """Before login: 40 for known codes, 3 for unknown ones; after login a malformed
        frame gets its status and the connection keeps working; an oversized length
        closes only that connection."""
        _proc, port = broker
        c = RawClient(port)
        assert c.request(201) == err(40)
        assert c.request(4321) == err(3)
        assert c.request(1) == ok()
        c = login(port)
        assert c.request(200, b"\x01\x04\x00") == err(4)
        assert c.request(1) == ok()
        big = RawClient(port)
        big.send(struct.pack("<II", 1 << 30, 1))
        assert big.read_reply() == err(3)
        assert big.closed_by_peer()
        c.send(frame(1) + frame(1))
        assert c.read_reply() == ok() and c.read_reply() == ok()

    def test_half_closed_client_gets_every_reply_then_eof(self, broker):
        """Ping, login, create stream and topic, send and poll in one write, then
        shutdown(SHUT_WR): every reply comes back in order (the login waits for its
        password hash, the send for its fsync), then EOF."""
        _proc, port = broker
        c = RawClient(port)
        topic = ident("raw-hc") + u32(1) + b"\x01" + u64(0) + u64(0) + b"\x00" + name8("t")
        c.send(frame(1)
               + frame(38, name8("iggy") + name8("iggy") + u32(0) + u32(0))
               + frame(202, name8("raw-hc"))
               + frame(302, topic)
               + frame(101, send_payload("raw-hc", "t", 1, b"", [message(b"half", id=7)]))
               + frame(100, b"\x01" + ident(1) + ident("raw-hc") + ident("t") + b"\x01"
                       + u32(0) + b"\x01" + u64(0) + u32(100) + b"\x00")
               + frame(1))
        c.shut_write()
        replies = c.read_to_eof()
        assert [r[:4] for r in replies] == [u32(0)] * 7, replies
        assert replies[0] == ok() and replies[1] == ok(u32(0)) and replies[4] == ok()
        assert replies[5][8:24] == struct.pack("<IQI", 0, 0, 1) and b"half" in replies[5]
        assert replies[6] == ok()
