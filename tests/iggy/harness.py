"""Test helpers for the Iggy transport.

``Harness``: a whole broker built in memory over ``task.Clock`` with a synchronous thread
runner, the Iggy service prepared on a loopback address, and ``Conn`` clients speaking raw
frames over ``StringTransport`` (no sockets, no real time). ``RawClient``: the same raw
frames over a real TCP socket (for the child-process tests, the fuzz test and the
benchmark). ``iggy_port_of``: the Iggy port from a child broker's "skerry listening on"
line. Expected reply bytes in the tests are written out by hand from the seed and
spec/iggy-binary-notes.md, never produced by the codec under test.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import re
import socket
import struct
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.iggy import codec
from broker.iggy.service import IggyService
from broker.server import Broker, build_broker
from broker.services.host_facts import HostFacts
from broker.services.iggy_catalog import Catalog
from broker.services.iggy_users import UserStore
from tests.support import ClockedHarness

__all__ = ["Harness", "Conn", "RawClient", "iggy_port_of", "run_isolated", "frame", "ok", "err",
           "u32", "u64", "ident", "name8", "SEED_CODES"]

_LISTEN_RE = re.compile(r"skerry listening on v1=\S+ iggy=([0-9.]+):([0-9]+)")
WALL_START_US = 1_700_000_000_000_000

# The request codes of seeds/iggy-binary-protocol.txt ("Request codes"), copied by hand so
# that the coverage checks do not trust broker.iggy.codec.Code.
SEED_CODES = frozenset({
    1, 10, 11, 12, 20, 21, 22, 31, 32, 33, 34, 35, 36, 37, 38, 39, 41, 42, 43, 44,
    100, 101, 102, 120, 121, 122, 200, 201, 202, 203, 204, 205, 300, 301, 302, 303, 304, 305,
    402, 403, 503, 600, 601, 602, 603, 604, 605,
})


def frame(code: int, payload: bytes = b"") -> bytes:
    """A request frame written out by hand: ``u32 length (4 + N), u32 code, payload``."""
    return struct.pack("<II", 4 + len(payload), code) + payload


def ok(payload: bytes = b"") -> bytes:
    """A success reply written out by hand: ``u32 0, u32 N, payload``."""
    return struct.pack("<II", 0, len(payload)) + payload


def err(status: int) -> bytes:
    """An error reply: ``u32 status, u32 0``."""
    return struct.pack("<II", status, 0)


def u32(value: int) -> bytes:
    return struct.pack("<I", value)


def u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def ident(value: int | str) -> bytes:
    """An Identifier by hand: ``kind u8, length u8, value``."""
    if isinstance(value, int):
        return b"\x01\x04" + u32(value)
    raw = value.encode()
    return bytes((2, len(raw))) + raw


def name8(value: str) -> bytes:
    raw = value.encode()
    return bytes((len(raw),)) + raw


class Conn:
    """One Iggy connection over a ``StringTransport``."""

    def __init__(self, harness: Harness, port: int) -> None:
        self.harness = harness
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", port))
        self.proto = harness.service.factory.buildProtocol(self.transport.getPeer())
        self.proto.makeConnection(self.transport)

    def send_raw(self, data: bytes) -> None:
        self.proto.dataReceived(data)
        self.harness.pump()

    def replies(self) -> list[bytes]:
        """Every complete reply frame written since the last call."""
        data = self.transport.value()
        out = []
        pos = 0
        while pos + 8 <= len(data):
            _status, length = struct.unpack_from("<II", data, pos)
            if pos + 8 + length > len(data):
                break
            out.append(data[pos:pos + 8 + length])
            pos += 8 + length
        self.transport.clear()
        if pos < len(data):
            self.transport.write(data[pos:])
        return out

    def request(self, code: int, payload: bytes = b"") -> bytes:
        """Send one frame and return its whole reply frame."""
        self.send_raw(frame(code, payload))
        got = self.replies()
        assert len(got) == 1, got
        return got[0]

    def call(self, cmd: codec.Command) -> bytes:
        """Send a command built with the codec; returns the reply frame."""
        self.send_raw(codec.encode_request(cmd))
        got = self.replies()
        assert len(got) == 1, got
        return got[0]

    def payload(self, cmd: codec.Command) -> bytes:
        """The payload of a successful reply (asserts status 0)."""
        reply = self.call(cmd)
        status, length = struct.unpack_from("<II", reply)
        assert status == 0, f"{type(cmd).__name__} -> status {status}"
        return reply[8:]

    def login(self, username: str = "iggy", password: str = "iggy") -> None:
        assert self.call(codec.LoginUser(username, password)) == ok(u32(
            self.harness.service.users.by_name(username).id))

    def close(self) -> None:
        self.proto.connectionLost(None)
        self.harness.pump()

    @property
    def closed(self) -> bool:
        return bool(self.transport.disconnecting)


class Harness(ClockedHarness):
    """A broker with the Iggy transport, in memory, on a ``task.Clock``."""

    def __init__(self, tmp_path: Path, config: dict[str, Any] | None = None, *,
                 environ: dict[str, str] | None = None, host: str = "127.0.0.1",
                 prepare: bool = True) -> None:
        self.clock = Clock()
        self.clock.advance(1000)
        self.wall_us = WALL_START_US
        # iggy_port stays null: build_broker then builds no Iggy service of its own; this
        # harness builds one with cheap scrypt and an injected environment.
        raw = {"data_dir": str(tmp_path / "data"), "port": 0,
               "storage": {"fsync": "never"}, **(config or {})}
        self.config = config_from_mapping(raw)
        self.broker: Broker = build_broker(self.config, self.clock, run_in_thread=synchronous,
                                           now_us=self.now_us)
        core, data_dir = self.broker.core, self.config["data_dir"]
        self.service = IggyService(
            core, self.config, self.clock, run_in_thread=synchronous, now_us=self.now_us,
            groups=core.groups, acls=self.broker.acls,
            catalog=Catalog(data_dir, store_topics=core.topic_names, now_us=self.now_us),
            users=UserStore(data_dir, now_us=self.now_us),
            system_info=HostFacts(data_dir, self.clock),
            environ=environ or {}, scrypt_n=1 << 4)
        self._ports = 40000
        if prepare:
            self.service.prepare(host)

    def connect(self, login: bool = False) -> Conn:
        self._ports += 1
        conn = Conn(self, self._ports)
        if login:
            conn.login()
        return conn

    def close(self) -> None:
        self.service.stop()
        d = self.broker.core.stop()
        for _ in range(50):
            if d.called:
                break
            self.advance(0.02)


class RawClient:
    """Raw Iggy frames over a blocking TCP socket (with a timeout so no test hangs)."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self._buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _need(self, n: int) -> None:
        while len(self._buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError(f"connection closed; buffered {self._buf[:64]!r}")
            self._buf += chunk

    def read_reply(self) -> bytes:
        self._need(8)
        _status, length = struct.unpack_from("<II", self._buf)
        self._need(8 + length)
        reply, self._buf = self._buf[:8 + length], self._buf[8 + length:]
        return reply

    def request(self, code: int, payload: bytes = b"") -> bytes:
        self.send(frame(code, payload))
        return self.read_reply()

    def call(self, cmd: codec.Command) -> bytes:
        self.send(codec.encode_request(cmd))
        return self.read_reply()

    def login(self, username: str = "iggy", password: str = "iggy") -> bytes:
        return self.call(codec.LoginUser(username, password))

    def shut_write(self) -> None:
        """``shutdown(SHUT_WR)``: the broker sees EOF; this side can still read."""
        self.sock.shutdown(socket.SHUT_WR)

    def read_to_eof(self) -> list[bytes]:
        """Every reply frame the broker sends until it closes the connection (a timeout
        raises; bytes that do not make a whole frame fail the caller's comparison)."""
        data, self._buf = self._buf, b""
        while True:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
        frames = []
        pos = 0
        while pos + 8 <= len(data):
            length = struct.unpack_from("<I", data, pos + 4)[0]
            frames.append(data[pos:pos + 8 + length])
            pos += 8 + length
        if pos < len(data):
            frames.append(data[pos:])
        return frames

    def closed_by_peer(self) -> bool:
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self._buf += chunk
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def iggy_port_of(log_text: str) -> int:
    """The Iggy port from a child broker's "skerry listening on v1=... iggy=..." line."""
    match = _LISTEN_RE.search(log_text)
    if match is None:
        raise AssertionError(f"no iggy listener in the log:\n{log_text}")
    return int(match.group(2))


def run_isolated(scenario: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    """Run an async scenario that uses the real apache-iggy client in a forked child and
    return its (picklable) result; a failure inside is re-raised here with its traceback.

    The client library's runtime can abort the process while the interpreter shuts down
    with its tasks pending; in a child that leaves with ``os._exit`` this never reaches
    the test run."""
    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            result = asyncio.run(asyncio.wait_for(scenario(), timeout))
            sender.send(("ok", result))
        except BaseException:  # the parent reports it
            sender.send(("error", traceback.format_exc()))
        finally:
            os._exit(0)

    process = ctx.Process(target=child)
    process.start()
    sender.close()
    try:
        if not receiver.poll(timeout + 10):
            raise AssertionError(f"the client scenario did not finish in {timeout} s")
        status, value = receiver.recv()
    finally:
        process.join(10)
        if process.is_alive():
            process.kill()
    if status == "error":
        raise AssertionError(f"in the client process:\n{value}")
    return value
