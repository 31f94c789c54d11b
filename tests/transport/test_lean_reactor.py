"""broker/reactor.py: the reactor ``skerry serve`` runs (``reactor: lean``) serves
connections as Twisted's does: every request answered, a half-close answered before the
close, a failing connection closed alone (and logged), large requests and replies whole;
a read takes at most 64 KiB even though the connection's output cap (``bufferSize``,
which Twisted also uses as its read size) is 1 MiB, unless the previous read filled 64 KiB.

The reactor runs in this process on real loopback sockets, driven by ``iterate()``; it is
not installed as the global reactor.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import pytest
from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.python import log
from zope.interface import implementer

from broker.reactor import READ_BYTES, LeanEPollReactor


@implementer(IHalfCloseableProtocol)
class Lines(Protocol):
    """Answers ``ok <n> <len>`` per line; ``boom`` raises; says ``bye`` after a half-close."""

    def __init__(self, reads: list[int]) -> None:
        self.buffer = b""
        self.count = 0
        self.reads = reads
        self.write_closed = False

    def connectionMade(self) -> None:
        self.transport.bufferSize = 1 << 20  # as broker.connection.Connection sets it

    def dataReceived(self, data: bytes) -> None:
        self.reads.append(len(data))
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            if line == b"boom":
                raise RuntimeError("boom from the handler")
            self.count += 1
            if line.startswith(b"big"):
                self.transport.write(b"x" * 4_000_000 + b"\n")
            else:
                self.transport.write(b"ok %d %d\n" % (self.count, len(line)))

    def readConnectionLost(self) -> None:
        self.transport.write(b"bye\n")
        self.transport.loseConnection()

    def writeConnectionLost(self) -> None:
        self.write_closed = True  # IHalfCloseableProtocol's other half: recorded only


@pytest.fixture
def served() -> Iterator[tuple[LeanEPollReactor, int, list[int]]]:
    reactor = LeanEPollReactor()
    reads: list[int] = []
    factory = Factory.forProtocol(lambda: Lines(reads))
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    port.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)  # accepted: inherited
    try:
        yield reactor, port.getHost().port, reads
    finally:
        port.stopListening()
        for _ in range(5):
            reactor.iterate(0)
        reactor.disconnectAll()
        reactor._poller.close()


def _client(reactor: LeanEPollReactor, port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)  # room for 600 KB unread
    sock.connect(("127.0.0.1", port))
    for _ in range(5):
        reactor.iterate(0.01)  # accept
    sock.setblocking(False)
    return sock


def _read_until(reactor: LeanEPollReactor, sock: socket.socket,
                done: Callable[[bytes], bool], timeout: float = 10.0) -> bytes:
    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reactor.iterate(0.005)
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            continue
        if not chunk:
            return got + b"<EOF>"
        got += chunk
        if done(got):
            return got
    raise AssertionError(f"timed out; got {got[-200:]!r}")


def _send(reactor: LeanEPollReactor, sock: socket.socket, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view):]
        except BlockingIOError:
            reactor.iterate(0.005)


def test_pipelined_requests_are_answered_in_order_and_a_half_close_after_them(
        served: tuple[LeanEPollReactor, int, list[int]]) -> None:
    reactor, port, _ = served
    sock = _client(reactor, port)
    sock.sendall(b"a\nbb\nccc\n")
    sock.shutdown(socket.SHUT_WR)  # like nc -N: every request sent, then EOF
    got = _read_until(reactor, sock, lambda b: b.endswith(b"<EOF>"))
    assert got == b"ok 1 1\nok 2 2\nok 3 3\nbye\n<EOF>"


def test_a_failing_connection_is_closed_and_logged_and_the_others_are_served(
        served: tuple[LeanEPollReactor, int, list[int]]) -> None:
    reactor, port, _ = served
    seen: list[dict] = []
    log.addObserver(seen.append)
    try:
        bad, good = _client(reactor, port), _client(reactor, port)
        bad.sendall(b"boom\n")
        assert _read_until(reactor, bad, lambda b: b.endswith(b"<EOF>")) == b"<EOF>"
        good.sendall(b"still\n")
        assert _read_until(reactor, good, lambda b: b.endswith(b"\n")) == b"ok 1 5\n"
    finally:
        log.removeObserver(seen.append)
    failures = [e for e in seen if e.get("isError") and e.get("failure") is not None]
    assert failures and "boom from the handler" in str(failures[0]["failure"].value)
    good.close()
    bad.close()


def test_small_requests_are_read_64_kib_at_most_and_a_large_one_in_large_reads(
        served: tuple[LeanEPollReactor, int, list[int]]) -> None:
    reactor, port, reads = served
    sock = _client(reactor, port)
    sock.sendall(b"a\n" * 100)
    assert _read_until(reactor, sock, lambda b: b.count(b"\n") == 100).endswith(b"ok 100 1\n")
    assert max(reads) <= READ_BYTES == 65536  # not the 1 MiB of bufferSize
    del reads[:]
    # 600 KB waiting in the kernel before the reactor reads: the first read takes 64 KiB,
    # the next ones up to bufferSize (1 MiB), as Twisted's would
    line = b"y" * 600_000 + b"\n"
    sock.setblocking(True)
    sock.sendall(line)
    sock.setblocking(False)
    assert _read_until(reactor, sock, lambda b: b.endswith(b"\n")) == b"ok 101 600000\n"
    assert sum(reads) == len(line)
    assert reads[0] == READ_BYTES
    assert READ_BYTES < max(reads) <= 1 << 20, reads
    sock.close()


def test_a_reply_larger_than_the_socket_takes_is_written_whole(
        served: tuple[LeanEPollReactor, int, list[int]]) -> None:
    reactor, port, _ = served
    sock = _client(reactor, port)
    sock.sendall(b"big\nsmall\n")  # the second reply queues behind the 4 MB one (doWrite)
    got = _read_until(reactor, sock, lambda b: b.endswith(b"ok 2 5\n"))
    assert got == b"x" * 4_000_000 + b"\nok 2 5\n"
    sock.close()
