"""Iggy system commands, authentication, users, permissions and personal access tokens,
driven with raw frames over an in-memory connection and checked byte for byte against
layouts written out by hand from the seed and spec/iggy-binary-notes.md."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import pytest

from tests.iggy.harness import WALL_START_US, Harness, err, ident, name8, ok, u32, u64

T0 = WALL_START_US
ROOT_PERMS = bytes([1] * 10) + b"\x00"


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def login_payload(username: str, password: str) -> bytes:
    return name8(username) + name8(password) + u32(0) + u32(0)


def create_user_payload(username: str, password: str, status: int = 1,
                        perms: bytes | None = None) -> bytes:
    body = name8(username) + name8(password) + bytes((status,))
    if perms is None:
        return body + b"\x00" + u32(0)
    return body + b"\x01" + u32(len(perms)) + perms


def user_bytes(id: int, created: int, status: int, username: str) -> bytes:
    return struct.pack("<IQB", id, created, status) + name8(username)


class AuthenticationTests:
    def test_ping_and_login_work_unauthenticated_everything_else_is_refused(self, h):
        """Before login only Ping and the two logins are served; every other command gets
        Iggy's Unauthenticated status (40) and the connection stays usable."""
        conn = h.connect()
        assert conn.request(1) == ok()
        for code, payload in ((201, b""), (10, b""), (20, b""), (200, ident(0)),
                              (101, b"\x00" * 8), (32, b""), (12, b""), (39, b"")):
            assert conn.request(code, payload) == err(40), code
        assert conn.request(1) == ok()

    def test_login_with_the_default_root_and_wrong_passwords(self, h):
        """Root is iggy/iggy on a loopback listener (id 0); a wrong password or unknown
        user gets InvalidCredentials (42); a logout ends the session."""
        conn = h.connect()
        assert conn.request(38, login_payload("iggy", "nope")) == err(42)
        assert conn.request(38, login_payload("nobody", "iggy")) == err(42)
        assert conn.request(38, login_payload("iggy", "iggy")) == ok(u32(0))
        assert conn.request(201)[:4] == u32(0)
        assert conn.request(39) == ok()
        assert conn.request(201) == err(40)

    def test_login_payload_with_version_and_context(self, h):
        """The real client's login (version "0.10.0", no context) is accepted."""
        conn = h.connect()
        payload = bytes.fromhex("0469676779046967677906000000302e31302e3000000000")
        assert conn.request(38, payload) == ok(u32(0))


class SystemTests:
    def test_get_me_clients_and_client(self, h):
        """GetMe and GetClient answer client id, user id (u32::MAX before login), transport
        1 (TCP), the address and the consumer groups; GetClients lists every client."""
        a = h.connect(login=True)
        b = h.connect()
        addr_a = b"127.0.0.1:40001"
        addr_b = b"127.0.0.1:40002"
        me = struct.pack("<IIB", 1, 0, 1) + u32(len(addr_a)) + addr_a + u32(0)
        other = struct.pack("<IIB", 2, 0xFFFFFFFF, 1) + u32(len(addr_b)) + addr_b + u32(0)
        assert a.request(20) == ok(me)
        assert a.request(21, u32(2)) == ok(other)
        assert a.request(21, u32(99)) == ok()
        assert a.request(22) == ok(me + other)
        b.close()
        assert a.request(22) == ok(me)

    def test_cluster_metadata_is_one_healthy_leader(self, h):
        """GetClusterMetadata: cluster "skerry" with one node, this listener's address,
        role leader (0) and status healthy (0)."""
        h.service.node.ip = "127.0.0.1"
        h.service.node.tcp_port = 8090
        conn = h.connect(login=True)
        expected = (u32(6) + b"skerry" + u32(1) + u32(8) + b"skerry-0" + u32(9) + b"127.0.0.1"
                    + struct.pack("<HHHH", 8090, 0, 0, 0) + b"\x00\x00")
        assert conn.request(12) == ok(expected)

    def test_stats_layout_and_counts(self, h):
        """GetStats follows the notes' layout: 108 bytes of numbers, five u32-length
        strings, semver, cache entries (0), threads, free and total disk; the counts
        describe the catalog and the connected clients."""
        conn = h.connect(login=True)
        conn.request(202, name8("s"))
        conn.request(302, ident("s") + u32(2) + b"\x01" + u64(0) + u64(0) + b"\x00" + name8("t"))
        h.connect()
        reply = conn.request(10)
        assert reply[:4] == u32(0)
        body = reply[8:]
        fields = struct.unpack_from("<IffQQQQQQQQIIIIQII", body)
        pid, _cpu, _total_cpu, mem, total_mem, _avail, run_time, start, _r, _w, size = fields[:11]
        streams, topics, partitions, segments, messages, clients, groups = fields[11:]
        assert pid > 0 and mem > 0 and total_mem >= mem and start == T0 and run_time == 0
        assert (streams, topics, partitions, segments, messages, clients, groups) == \
            (2, 1, 2, 2, 0, 2, 0) and size == 0
        pos = 108
        strings = []
        for _ in range(5):
            (n,) = struct.unpack_from("<I", body, pos)
            strings.append(body[pos + 4:pos + 4 + n].decode())
            pos += 4 + n
        assert strings[4] == "skerry 0.1.0 (iggy binary protocol 0.8)"
        semver, cache, threads, free, total = struct.unpack_from("<IIIQQ", body, pos)
        assert (semver, cache) == (1000, 0) and threads >= 1 and total >= free > 0
        assert pos + 28 == len(body)

    def test_snapshot_is_a_zip_with_the_catalog(self, h):
        """GetSnapshot answers a zip archive holding snapshot.json with the streams."""
        conn = h.connect(login=True)
        conn.request(202, name8("snap"))
        reply = conn.request(11, b"\x01\x01\x00")
        assert reply[:4] == u32(0)
        with zipfile.ZipFile(io.BytesIO(reply[8:])) as archive:
            doc = json.loads(archive.read("snapshot.json"))
        assert [s["name"] for s in doc["catalog"]["streams"]] == ["default", "snap"]


class UserTests:
    def test_create_get_update_delete_user(self, h):
        """CreateUser answers the user's details (permissions included); GetUser by id and
        name; GetUsers lists users; UpdateUser renames and deactivates; DeleteUser removes;
        duplicates, bad names and the root's protections are refused."""
        conn = h.connect(login=True)
        perms = bytes([0, 0, 0, 0, 0, 1, 0, 1, 1, 0]) + b"\x01" + u32(1) + bytes(
            [0, 1, 0, 0, 0, 1]) + b"\x00\x00"
        h.wall_us += 7
        created = conn.request(33, create_user_payload("alice", "secret", 1, perms))
        details = user_bytes(1, T0 + 7, 1, "alice") + b"\x01" + u32(len(perms)) + perms
        assert created == ok(details)
        # GetUser reads the permissions back from the ACL bindings they became
        # (docs/iggy.md): the stream grant had no topic to bind, Describe Cluster reads
        # back as read_servers and read_users.
        perms = bytes([0, 1, 0, 1, 0, 1, 0, 1, 1, 0]) + b"\x00"
        details = user_bytes(1, T0 + 7, 1, "alice") + b"\x01" + u32(len(perms)) + perms
        assert conn.request(31, ident(1)) == ok(details)
        assert conn.request(31, ident("alice")) == ok(details)
        assert conn.request(31, ident(0)) == ok(user_bytes(0, T0, 1, "iggy") + b"\x01"
                                                + u32(len(ROOT_PERMS)) + ROOT_PERMS)
        assert conn.request(31, ident(5)) == ok()
        assert conn.request(32) == ok(user_bytes(0, T0, 1, "iggy") + user_bytes(1, T0 + 7, 1, "alice"))
        assert conn.request(33, create_user_payload("alice", "secret")) == err(46)
        assert conn.request(33, create_user_payload("al", "secret")) == err(43)
        assert conn.request(33, create_user_payload("bob", "pw")) == err(44)
        assert conn.request(33, create_user_payload("bob", "pw123", 9)) == err(45)
        assert conn.request(35, ident(1) + b"\x01" + name8("alicia") + b"\x01\x02") == ok()
        assert conn.request(31, ident(1)) == ok(user_bytes(1, T0 + 7, 2, "alicia") + b"\x01"
                                                + u32(len(perms)) + perms)
        assert conn.request(36, ident(1) + b"\x00" + u32(0)) == ok()
        assert conn.request(31, ident(1)) == ok(user_bytes(1, T0 + 7, 2, "alicia") + b"\x00")
        assert conn.request(34, ident(0)) == err(48)
        assert conn.request(36, ident(0) + b"\x00" + u32(0)) == err(49)
        assert conn.request(34, ident("alicia")) == ok()
        assert conn.request(31, ident(1)) == ok()
        assert conn.request(34, ident(1)) == err(20)

    def test_users_persist_with_scrypt_hashes(self, tmp_path):
        """Users survive a restart; the file holds scrypt hashes, never the password."""
        h = Harness(tmp_path)
        conn = h.connect(login=True)
        conn.request(33, create_user_payload("carol", "hunter22"))
        h.close()
        text = (tmp_path / "data" / "iggy-users.json").read_text()
        assert "hunter22" not in text and "scrypt$" in text
        h2 = Harness(tmp_path)
        conn2 = h2.connect()
        assert conn2.request(38, login_payload("carol", "hunter22")) == ok(u32(1))
        h2.close()

    def test_change_password(self, h):
        """A user changes their own password with the current one; a wrong current
        password is InvalidCredentials; changing someone else's needs manage_users."""
        root = h.connect(login=True)
        root.request(33, create_user_payload("dave", "first1"))
        root.request(33, create_user_payload("erin", "other1"))
        dave = h.connect()
        assert dave.request(38, login_payload("dave", "first1")) == ok(u32(1))
        assert dave.request(37, ident("dave") + name8("wrong") + name8("second2")) == err(42)
        assert dave.request(37, ident("dave") + name8("first1") + name8("second2")) == ok()
        assert dave.request(37, ident("erin") + name8("other1") + name8("x" * 5)) == err(41)
        fresh = h.connect()
        assert fresh.request(38, login_payload("dave", "first1")) == err(42)
        assert fresh.request(38, login_payload("dave", "second2")) == ok(u32(1))

    def test_inactive_and_deleted_users_cannot_work(self, h):
        """An inactive user cannot log in (UserInactive, 47); a user deactivated or
        deleted while connected is unauthenticated from the next command on."""
        root = h.connect(login=True)
        root.request(33, create_user_payload("frank", "pass12", perms=ROOT_PERMS))
        frank = h.connect()
        assert frank.request(38, login_payload("frank", "pass12")) == ok(u32(1))
        assert frank.request(201)[:4] == u32(0)
        root.request(35, ident("frank") + b"\x00" + b"\x01\x02")
        assert frank.request(201) == err(40)
        assert frank.request(38, login_payload("frank", "pass12")) == err(47)
        root.request(35, ident("frank") + b"\x00" + b"\x01\x01")
        assert frank.request(38, login_payload("frank", "pass12")) == ok(u32(1))
        root.request(34, ident("frank"))
        assert frank.request(201) == err(40)


class PermissionTests:
    def test_permissions_are_enforced_per_user(self, h):
        """A user without permissions may ping and see itself only; global and stream
        permissions open exactly what Iggy's rules say (Unauthorized, 41, otherwise)."""
        root = h.connect(login=True)
        root.request(202, name8("s1"))
        root.request(202, name8("s2"))
        for s in ("s1", "s2"):
            root.request(302, ident(s) + u32(1) + b"\x01" + u64(0) + u64(0) + b"\x00" + name8("t"))
        root.request(33, create_user_payload("gina", "pass12"))
        gina = h.connect()
        gina.request(38, login_payload("gina", "pass12"))
        from tests.iggy.test_messages import message, poll_payload, send_payload

        send_s1 = send_payload("s1", "t", 2, u32(0), [message(b"x")])
        assert gina.request(1) == ok()
        assert gina.request(20)[:4] == u32(0)
        assert gina.request(201) == ok()
        assert gina.request(202, name8("mine")) == err(41)
        assert gina.request(101, send_s1) == err(41)
        assert gina.request(10) == err(41)
        assert gina.request(32) == err(41)
        assert gina.request(31, ident("gina"))[:4] == u32(0)
        # Stream 1: read + send; nothing on stream 2.
        perms = bytes(10) + b"\x01" + u32(1) + bytes([0, 1, 0, 0, 0, 1]) + b"\x00\x00"
        assert root.request(36, ident("gina") + b"\x01" + u32(len(perms)) + perms) == ok()
        assert gina.request(101, send_s1) == ok()
        assert gina.request(100, poll_payload("s1", "t", 0, 1, 0, 1, False))[:4] == u32(0)
        assert gina.request(101, send_payload("s2", "t", 2, u32(0), [message(b"x")])) == err(41)
        assert gina.request(100, poll_payload("s2", "t", 0, 1, 0, 1, False)) == err(41)
        listed = gina.request(201)
        assert listed[:4] == u32(0) and b"s1" in listed and b"s2" not in listed
        assert gina.request(303, ident("s1") + ident("t")) == err(41)
        # Global read_servers opens the server commands.
        perms = bytes([0, 1] + [0] * 8) + b"\x00"
        root.request(36, ident("gina") + b"\x01" + u32(len(perms)) + perms)
        assert gina.request(10)[:4] == u32(0)
        assert gina.request(22)[:4] == u32(0)


class TokenTests:
    def test_tokens_create_list_login_delete_expire(self, h):
        """A personal access token is answered once (u8 length + token), listed by name
        and expiry, logs in as its user, is stored only as a hash, expires, and stops
        working once deleted."""
        conn = h.connect(login=True)
        reply = conn.request(42, name8("ci-token") + u64(0))
        assert reply[:4] == u32(0)
        token = reply[9:9 + reply[8]].decode()
        assert len(reply) == 9 + len(token)
        reply2 = conn.request(42, name8("short") + u64(60_000_000))
        short = reply2[9:].decode()
        assert conn.request(41) == ok(name8("ci-token") + u64(0) + name8("short")
                                      + u64(T0 + 60_000_000))
        other = h.connect()
        assert other.request(44, name8(token)) == ok(u32(0))
        assert other.request(201)[:4] == u32(0)
        text = (h.service.users.path and Path(h.service.users.path)).read_text()
        assert token not in text and short not in text
        assert conn.request(42, name8("ci-token") + u64(0)) == err(51)
        assert conn.request(42, name8("ab") + u64(0)) == err(50)
        h.wall_us += 60_000_001
        assert h.connect().request(44, name8(short)) == err(54)
        assert conn.request(41) == ok(name8("ci-token") + u64(0))
        assert conn.request(43, name8("ci-token")) == ok()
        assert conn.request(43, name8("ci-token")) == err(20)
        assert h.connect().request(44, name8(token)) == err(53)
        assert h.connect().request(44, name8("x" * 40)) == err(53)
