"""The asyncio face of the Python client: one pipelined V1 connection (what the ``skerry``
commands and the harness use).

Owns: ``Connection`` (requests written at once and matched to replies in request order, a
timeout on every answer, every waiter failed when the broker goes away, the send and answer
times of every request), the broker's ``Address`` (with the ``AUTH`` credentials and TLS
context of its connections) and the messages that tell a wrong address apart (nothing
there, a name that does not resolve, an HTTP port, a TLS port, and the broker's Kafka,
Iggy and TANK ports, told by what they answer). Lines are encoded and
parsed by ``broker.client.codec``; its ``Reply``, ``Message`` and exceptions are re-exported
here (``ToolError`` is the codec's ``ClientError``: the one exception the tools print as a
single line).

Must not import: Twisted, or the broker's server side (core, handlers, store, groups,
replication). The tools are clients and judge the broker by its wire answers only.
"""

from __future__ import annotations

import asyncio
import binascii
import os
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from broker.client.codec import (
    BrokerError,
    ClientError,
    ClusterMap,
    ConnectionLost,
    Message,
    ProtocolViolation,
    Reply,
    check_acks,
    check_key,
    check_name,
    encode_request,
    parse_leader_hint,
    parse_messages,
    parse_reply,
)

__all__ = [
    "Address",
    "BrokerError",
    "ClientError",
    "Connection",
    "ConnectionLost",
    "Message",
    "Reply",
    "RoutedProducer",
    "ToolError",
    "parse_address",
    "parse_detail_messages",
]

T = TypeVar("T")
_LINE_LIMIT = 64 * 1024 * 1024
"""Longest reply line read (a CONSUME reply of 1 MiB of values in base64 is ~1.4 MB)."""

ToolError = ClientError
"""The tools' name for ``ClientError``: a failure told in one line, then ``exit_code``."""


@dataclass(frozen=True)
class Address:
    """Where the broker is and how to get in: ``user``/``token`` send ``AUTH`` first on
    every connection; ``tls`` wraps the connection (the broker's ``tls.cert``)."""

    host: str
    port: int
    user: str | None = None
    token: str | None = field(default=None, repr=False, compare=False)
    tls: ssl.SSLContext | None = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(text: str) -> Address:
    """``host:port`` or ``[v6 address]:port``; ``ToolError`` (exit 2) otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ToolError(f"--bootstrap must be host:port, not {text!r}", 2)
    return Address(host, int(port))


def parse_detail_messages(reply: Reply, partition: int, headers: bool = False) -> list[Message]:
    """The ``messages=`` of a ``detail=true enc=b64`` CONSUME answer: items split on ``,``,
    each ``<offset>:<timestamp_ms>:<key b64>:<value b64>``; asked with ``headers=true``,
    ``<offset>:<timestamp_ms>:<producer_timestamp_ms>:<headers>:<key b64>:<value b64>``."""
    return parse_messages(reply, partition, b64=True, detail=True, headers=headers)


_TLS_RECORDS = (b"\x15\x03", b"\x16\x03")
"""The first two bytes of a TLS alert and of a TLS handshake record (RFC 8446 5.1)."""


_V1_PORT_HINT = "see --bootstrap (the V1 port is the broker's `port`, 9092 by default)"


def _http_port(address: Address) -> str:
    return (f"{address} answered in HTTP: this is an HTTP port (metrics?), not a Skerry V1 "
            f"port; {_V1_PORT_HINT}")


def _other_port(address: Address, protocol: str, setting: str) -> str:
    return (f"{address} answered in {protocol}'s protocol: this is a {protocol} port (the "
            f"broker's `{setting}`?), not a Skerry V1 port; {_V1_PORT_HINT}")


_TANK_PING = b"\x03\x00\x00\x00\x00"
"""What a TANK broker writes first on every connection: a ping frame (``msg_id:u8`` 3,
``payload_size:u32`` 0; spec/tank-notes.md 1), before it reads anything, and then it
closes on our line (an unknown message id)."""


def _iggy_refusal(data: bytes) -> bool:
    """An Iggy response header refusing the request: ``status:u32`` not 0, ``length:u32``
    0, and nothing else (an Iggy server reads ``V1|1`` as a frame length and refuses it)."""
    return len(data) == 8 and data[:4] != b"\0\0\0\0" and data[4:] == b"\0\0\0\0"


_KAFKA_PROBE_CID = b"skry"
_KAFKA_PROBE = (b"\x00\x00\x00\x10"  # size: the 16 bytes after it
                b"\x00\x12\x00\x00" + _KAFKA_PROBE_CID  # ApiVersions v0, correlation id
                + b"\x00\x06skerry")  # client id
"""A Kafka ApiVersions v0 request: any Kafka broker answers it, echoing the correlation id."""


async def _answers_kafka(address: Address, timeout: float) -> bool:
    """True when ``address`` answers a Kafka ApiVersions request as a Kafka broker does
    (asked on a new connection, only after it closed ours without a word: a Kafka broker
    reads ``V1|1`` as a request size and drops the connection)."""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(address.host, address.port)
            try:
                writer.write(_KAFKA_PROBE)
                head = await reader.readexactly(8)
            finally:
                writer.close()
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return False
    return head[4:] == _KAFKA_PROBE_CID


def _fail(future: asyncio.Future[Any], exc: ToolError) -> None:
    """Fail ``future`` with ``exc`` for whoever awaits it. A request nobody waits for any
    more (its waiter was cancelled by Ctrl-C) is simply dropped: no "Future exception was
    never retrieved" traceback at exit."""
    future.set_exception(exc)
    future.exception()  # marks it retrieved; an awaiting caller still gets the exception


class _Batch:
    """The replies of one ``send_batch``, in order; ``future`` fires when all arrived."""

    __slots__ = ("replies", "expected", "future")

    def __init__(self, expected: int, future: asyncio.Future[list[Reply]]) -> None:
        self.replies: list[Reply] = []
        self.expected = expected
        self.future = future


class Connection:
    """One V1 connection. ``send`` writes a request at once and returns a future for its
    reply, so many can be in flight; ``send_batch`` writes many in one write with one
    future for all their replies; ``request`` sends one and waits for it. Replies come in
    request order (the protocol's promise) and are matched by correlation id.

    Every ``Reply`` carries the ``clock`` times its request was sent and answered.
    ``on_reply``, when set, sees every reply as it arrives, also those whose waiter gave up;
    ``unanswered`` lists the requests still waiting (the harness judges sessions by both).
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 address: Address, timeout: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._reader = reader
        self._writer = writer
        self.address = address
        self.timeout = timeout
        self.clock = clock
        self.on_reply: Callable[[str, Reply], None] | None = None
        self._pending: deque[tuple[bytes, str, Any, float]] = deque()
        self._next_cid = 0
        self._probed = False
        self._answered = False
        self.closed = False
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(cls, address: Address, timeout: float = 10.0,
                   clock: Callable[[], float] = time.monotonic) -> Connection:
        """Connect; ``ToolError`` naming the address when nothing answers there."""
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    address.host, address.port, limit=_LINE_LIMIT, ssl=address.tls,
                    server_hostname=address.host if address.tls is not None else None)
        except ssl.SSLError as exc:
            why = exc.reason or str(exc)
            hint = " (a plain port, not TLS? then drop --tls/--cafile)" \
                if why == "WRONG_VERSION_NUMBER" else ""
            raise ToolError(f"TLS with the broker at {address} failed: {why}{hint}") from None
        except socket.gaierror as exc:
            raise ToolError(f"cannot connect to the broker at {address}: the host name "
                            f"{address.host} cannot be resolved ({exc.strerror}); see "
                            "--bootstrap") from None
        except (TimeoutError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno:
                why = os.strerror(exc.errno)  # asyncio's own text repeats the address
            else:
                why = str(exc) or "timed out"
            raise ToolError(f"cannot connect to the broker at {address}: {why} "
                            "(is `skerry serve` running there? see --bootstrap)") from None
        conn = cls(reader, writer, address, timeout, clock)
        if address.user is not None:
            reply = await conn.request("AUTH", f"{address.user} {address.token or ''}",
                                       check=False)
            if not reply.ok:
                await conn.close()
                raise reply.error(f"AUTH as {address.user}")
        return conn

    def send(self, command: str, args: str | bytes = "") -> asyncio.Future[Reply]:
        """Write one request now; the future gets its ``Reply`` (or ``ToolError``)."""
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        if self.closed:
            _fail(future, ConnectionLost(f"connection to {self.address} is closed"))
            return future
        self._next_cid += 1
        cid = b"%d" % self._next_cid
        self._pending.append((cid, command, future, self.clock()))
        self._write(encode_request(self._next_cid, command, args))
        return future

    def send_batch(self, command: str, args: Sequence[bytes]) -> asyncio.Future[list[Reply]]:
        """Write many requests of one command in a single write; the future gets their
        replies, in order, once the last one arrived."""
        future: asyncio.Future[list[Reply]] = asyncio.get_running_loop().create_future()
        if self.closed:
            _fail(future, ConnectionLost(f"connection to {self.address} is closed"))
            return future
        if not args:
            future.set_result([])
            return future
        batch = _Batch(len(args), future)
        lines = []
        pending = self._pending
        cid = self._next_cid
        sent = self.clock()
        for body in args:
            cid += 1
            pending.append((b"%d" % cid, command, batch, sent))
            lines.append(encode_request(cid, command, body))
        self._next_cid = cid
        self._write(b"".join(lines))
        return future

    def _write(self, data: bytes) -> None:
        if not self._probed:
            # Two empty lines after the first request: V1 ignores them, while an HTTP
            # server (the metrics port given by mistake) takes them as the end of a bad
            # request and answers at once, so the mistake is told at once, not after the
            # timeout.
            self._probed = True
            data += b"\r\n\r\n"
        self._writer.write(data)

    async def drain(self) -> None:
        """Wait until the socket took what was written (flow control for big batches)."""
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            why = f"lost the connection to {self.address}: {exc}"
            self.abort(why)  # closed before the reader notices: every waiter learns why
            raise ConnectionLost(why) from None

    async def result(self, future: asyncio.Future[T], what: str = "",
                     timeout: float | None = None) -> T:
        """``future``'s result, or ``ToolError`` (and the connection dropped) when no answer
        came within ``timeout`` (default: the connection's). The future itself is never
        cancelled: after a timeout it holds the ``ConnectionLost`` of the dropped connection
        (with a batch's answers that did arrive)."""
        if not future.done():
            limit = self.timeout if timeout is None else timeout
            await asyncio.wait((future,), timeout=limit)
            if not future.done():
                self.abort()
                raise ToolError(f"no answer from {self.address} to {what or 'a request'} "
                                f"within {limit:g} s")
        return future.result()

    async def wait(self, future: asyncio.Future[Reply], command: str = "",
                   timeout: float | None = None, *, check: bool = True) -> Reply:
        """The reply of ``future``; ``BrokerError`` for ``ERR`` when ``check``."""
        reply = await self.result(future, command, timeout)
        if check and not reply.ok:
            raise reply.error(command)
        return reply

    async def request(self, command: str, args: str | bytes = "", *,
                      timeout: float | None = None, check: bool = True) -> Reply:
        """Send one request and wait for its reply (see ``wait``)."""
        return await self.wait(self.send(command, args), command, timeout, check=check)

    def unanswered(self) -> list[tuple[str, float]]:
        """``(command, sent time)`` of every request still waiting for its answer."""
        return [(command, sent) for _cid, command, _target, sent in self._pending]

    async def settle(self, timeout: float) -> None:
        """Wait (at most ``timeout``) until every request sent has its answer."""
        deadline = self.clock() + timeout
        while self._pending and not self.closed and self.clock() < deadline:
            await asyncio.sleep(0.005)

    def abort(self, why: str | None = None) -> None:
        """Drop the connection at once, failing every request still waiting (with ``why``)."""
        if self.closed:
            return
        self.closed = True
        self._writer.transport.abort()
        self._reader_task.cancel()
        self._fail_all(why or f"connection to {self.address} dropped")

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._reader_task.cancel()
        self._writer.close()
        try:
            async with asyncio.timeout(1.0):
                await self._writer.wait_closed()
        except (TimeoutError, OSError):
            pass
        self._fail_all(f"connection to {self.address} closed")

    def _fail_all(self, why: str) -> None:
        while self._pending:
            target = self._pending.popleft()[2]
            if type(target) is _Batch:
                if not target.future.done():
                    _fail(target.future, ConnectionLost(why, target.replies))
            elif not target.done():
                _fail(target, ConnectionLost(why))

    async def _read_loop(self) -> None:
        why = f"the broker at {self.address} closed the connection"
        partial: list[bytes] = []
        size = 0
        try:
            while True:
                data = await self._reader.read(1 << 16)
                if not data:
                    if not self._answered:
                        seen = b"".join(partial)
                        why = self._closed_unanswered(seen)
                        if not seen and self.address.tls is None and \
                                await _answers_kafka(self.address, min(self.timeout, 3.0)):
                            why = _other_port(self.address, "Kafka", "kafka_port")
                    break
                if not self._answered and data[:2] in _TLS_RECORDS:
                    raise ToolError(self._closed_unanswered(data))
                if b"\n" not in data:
                    partial.append(data)
                    size += len(data)
                    if size > _LINE_LIMIT:
                        raise ToolError(f"an answer from {self.address} is longer than "
                                        f"{_LINE_LIMIT} bytes")
                    continue
                if partial:
                    partial.append(data)
                    data = b"".join(partial)
                    partial, size = [], 0
                lines = data.split(b"\n")
                rest = lines.pop()
                if rest:
                    partial, size = [rest], len(rest)
                answer = self._answer
                for line in lines:
                    answer(line)
        except asyncio.CancelledError:
            return
        except (OSError, ValueError) as exc:
            why = f"lost the connection to {self.address}: {exc}"
        except ToolError as exc:
            why = exc.message
        if not self.closed:
            self.closed = True
            self._writer.transport.abort()
            self._fail_all(why)

    def _closed_unanswered(self, data: bytes) -> str:
        """Why a connection ended before its first answer, judged by what came."""
        if data[:2] in _TLS_RECORDS:  # a TLS alert or handshake record
            return (f"{self.address} answered with TLS: it is a TLS port; add --tls, or "
                    "--cafile for a certificate your system does not trust")
        if data.startswith(b"HTTP/"):
            return _http_port(self.address)
        if data == _TANK_PING:
            return _other_port(self.address, "TANK", "tank_port")
        if _iggy_refusal(data):
            return _other_port(self.address, "Iggy", "iggy_port")
        return (f"the broker at {self.address} closed the connection before answering "
                "(a TLS port? then add --tls)")

    def _answer(self, line: bytes) -> None:
        if not self._answered:
            if line.startswith(b"HTTP/1.") or line.startswith(b"HTTP/2"):
                raise ToolError(_http_port(self.address))
            self._answered = True
        if not self._pending:
            raise ToolError(f"unexpected line from the broker: {line[:200]!r}")
        cid, command, target, sent = self._pending.popleft()
        try:
            reply = parse_reply(line, sent, self.clock())
        except ProtocolViolation:
            reply = None
        # cid 0: the broker could not read the request at all (e.g. line too long).
        if reply is None or (reply.cid != cid.decode() and reply.cid != "0"):
            raise ToolError(f"answer {line[:200]!r} does not match request {cid.decode()} "
                            f"({command})")
        if self.on_reply is not None:
            self.on_reply(command, reply)
        if type(target) is _Batch:
            target.replies.append(reply)
            if len(target.replies) == target.expected and not target.future.done():
                target.future.set_result(target.replies)
        elif not target.done():
            target.set_result(reply)


class RoutedProducer:
    """The asyncio twin of ``broker.client.sync.RoutedProducer``: each message to its
    partition's leader (``METADATA`` of every broker known, newest epoch per partition),
    again to the leader a ``NOT_LEADER`` names or a fresh ``METADATA`` says, at most
    ``retries`` times ``backoff`` seconds apart when nothing new was learnt. ``bootstrap``
    carries the way in (``AUTH``, TLS) for every broker; ``seeds`` adds more addresses to
    ask. At-least-once: a message sent again after a lost connection may be stored twice."""

    def __init__(self, bootstrap: Address, timeout: float = 10.0, *,
                 seeds: Sequence[str] = (), retries: int = 10, backoff: float = 0.2) -> None:
        self._bootstrap = bootstrap
        self._seeds = list(dict.fromkeys([str(bootstrap), *seeds]))
        self._timeout = timeout
        self._retries = retries
        self._backoff = backoff
        self._conns: dict[str, Connection] = {}
        self._maps: dict[str, ClusterMap] = {}
        self.sends = 0

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.close()
        self._conns.clear()

    async def _conn(self, address: str) -> Connection:
        conn = self._conns.get(address)
        if conn is None or conn.closed:
            base = parse_address(address)
            target = Address(base.host, base.port, self._bootstrap.user, self._bootstrap.token,
                             self._bootstrap.tls)
            conn = await Connection.open(target, self._timeout)
            self._conns[address] = conn
        return conn

    async def refresh(self, topic: str) -> ClusterMap:
        """Ask every known broker for ``topic``'s partitions and leaders."""
        found = ClusterMap(topic)
        old = self._maps.get(topic)
        addresses = list(dict.fromkeys([*self._seeds, *(old.brokers.values() if old else ())]))
        answered = False
        for address in addresses:
            try:
                conn = await self._conn(address)
                listing = await conn.request("METADATA", check=False)
                if listing.ok:
                    found.update_brokers(listing)
                reply = await conn.request("METADATA", topic, check=False)
                if not reply.ok:  # a CONSUME creates it where auto-create is on
                    await conn.request("CONSUME", f"{topic} 0 0 max=1 enc=b64", check=False)
                    reply = await conn.request("METADATA", topic, check=False)
                if reply.ok:
                    found.update_topic(reply)
                    answered = True
            except ToolError:
                continue
            addresses.extend(a for a in found.brokers.values() if a not in addresses)
        if not answered:
            raise ToolError(f"no broker answered METADATA {topic}")
        self._maps[topic] = found
        return found

    async def produce(self, topic: str, value: bytes, key: bytes = b"", *, acks: str = "1",
                      partition: int | None = None) -> Reply:
        """Send one message to its partition's leader; the OK ``Reply`` (``partition=``,
        ``offset=``, ``hw=``). ``BrokerError`` for a refusal other than NOT_LEADER;
        ``InvalidArgumentError`` before anything is sent for a topic, key or ``acks`` the
        broker would refuse."""
        check_name("topic", topic)
        check_key(key)
        acks = check_acks(acks)
        routes = self._maps.get(topic) or await self.refresh(topic)
        target = partition if partition is not None else routes.partition_for(key)
        args = b"%b %b:%b enc=b64 acks=%b partition=%d" % (
            topic.encode(), key, binascii.b2a_base64(value, newline=False), acks.encode(),
            target)
        error: ClientError | None = None
        for attempt in range(self._retries + 1):
            address = routes.leader_address(target)
            if address is None:
                known = list(dict.fromkeys([*self._seeds, *routes.brokers.values()]))
                address = known[attempt % len(known)]
            self.sends += 1  # attempts, a connection that could not be made included
            try:
                conn = await self._conn(address)
                reply = await conn.request("PRODUCE", args, check=False)
            except ToolError as exc:
                error = exc
                self._conns.pop(address, None)
                routes.note_hint(target, None)
                await asyncio.sleep(self._backoff)
                routes = await self._refresh_quietly(topic, routes)
                continue
            if reply.ok:
                return reply
            if reply.code != "NOT_LEADER":
                raise reply.error("PRODUCE")
            error = reply.error("PRODUCE")
            if not routes.note_hint(target, parse_leader_hint(reply.payload)):
                await asyncio.sleep(self._backoff)
                routes = await self._refresh_quietly(topic, routes)
        assert error is not None
        raise error

    async def _refresh_quietly(self, topic: str, routes: ClusterMap) -> ClusterMap:
        try:
            return await self.refresh(topic)
        except ToolError:
            return routes
