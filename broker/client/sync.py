"""The blocking face of the Python client: one V1 connection on a plain socket.

Owns: ``Client`` (connect with ``AUTH`` and TLS; produce with acks, keys and binary values,
single, pipelined or as PRODUCE_BATCH batches, idempotent with a producer id; consume and
long poll; FETCH, also ``enc=raw`` with the bytes after the reply line; OFFSETS and
METADATA; the group member's JOIN/SYNC/HEARTBEAT/COMMIT/LEAVE/OFFSET; the admin commands)
and the small typed answers it returns. Lines are encoded and parsed by
``broker.client.codec``; an ``ERR`` answer raises the ``BrokerError`` of its code. The group
commands (``broker.client.sync_groups``) and the admin commands (``broker.client.sync_admin``)
are their own parts of ``Client``.

The Spark source and sink run it in executors, so it must stay light.

Must not import: Twisted, asyncio, pyspark, or anything of the broker's server side
(``broker.v1``, ``broker.core``, ``broker.errors``...), ``groups``, ``replication``.
"""

from __future__ import annotations

import binascii
import os
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from broker.client.codec import (
    MAX_BATCH_BYTES,
    MAX_LINE_BYTES,
    BatchAck,
    BrokerError,
    ClientError,
    ClusterMap,
    ConnectionLost,
    Fetched,
    GroupHeartbeat,
    InvalidArgumentError,
    Message,
    MessageTooLargeError,
    NotLeaderError,
    Reply,
    check_acks,
    check_key,
    check_name,
    check_number,
    encode_batch,
    encode_request,
    fnv1a_32,
    int_field,
    is_plain_value,
    parse_fetch,
    parse_leader_hint,
    parse_messages,
    parse_reply,
    split_batch,
)
from broker.client.sync_admin import AdminCalls
from broker.client.sync_groups import Assignment, GroupCalls

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_LINE_BYTES",
    "Assignment",
    "GroupHeartbeat",
    "BatchAck",
    "BrokerError",
    "Client",
    "ClientError",
    "Consumed",
    "Fetched",
    "InvalidArgumentError",
    "Message",
    "MessageTooLargeError",
    "Produced",
    "RoutedProducer",
    "encode_batch",
    "fnv1a_32",
    "parse_bootstrap",
]


def parse_bootstrap(text: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` (the first of a comma list) as ``(host, port)``;
    ``InvalidArgumentError`` (a ``ClientError``) for anything else."""
    first = text.split(",")[0].strip() if isinstance(text, str) else ""
    host, _, port = first.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgumentError("bootstrap", f"bootstrap must be host:port (such as "
                                                f"127.0.0.1:9092), not {text!r}")
    return host, int(port)


@dataclass(frozen=True)
class Produced:
    """A PRODUCE answer: where the message went and the partition's high watermark then."""

    partition: int
    offset: int
    hw: int


@dataclass(frozen=True)
class Consumed:
    """A CONSUME answer: the messages (with keys and timestamps) and the partition's ``hw``.
    ``next_offset`` is where the next CONSUME continues."""

    messages: list[Message]
    hw: int
    next_offset: int




def _sum_acks(before: BatchAck | None, ack: BatchAck) -> BatchAck:
    """The answer of a batch sent as pieces, so far: counts summed; the offset of its
    first appended message (or, with none appended, where its first message went)."""
    if before is None:
        return ack
    offset = before.offset if before.count or not ack.count else ack.offset
    return BatchAck(before.partition, offset, before.count + ack.count,
                    before.duplicates + ack.duplicates)


def _value_arg(key: bytes, value: bytes) -> tuple[bytes, bool]:
    """``key:value`` as sent, and whether it needed ``enc=b64``."""
    check_key(key)
    if is_plain_value(value):
        return key + b":" + value, False
    return key + b":" + binascii.b2a_base64(value, newline=False), True


def _bytes(data: bytes | str, argument: str = "value") -> bytes:
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise InvalidArgumentError(argument, f"{argument} must be bytes or str, not "
                                         f"{type(data).__name__}")




class Client(GroupCalls, AdminCalls):
    """One blocking V1 connection. Not thread-safe: use one per thread or task.

    ``bootstrap`` is ``host:port``; ``user`` and ``token`` send ``AUTH`` first; ``tls`` wraps
    the socket. Every call waits at most ``timeout`` seconds for the broker.
    ``max_line_bytes`` is the broker's ``limits.max_line_bytes`` (default: the broker's
    default, 1 MiB): a PRODUCE_BATCH that would not fit it is sent as several.

    Every method checks its arguments with the broker's own rules (``data.names`` for
    topics, groups and member ids; ``data.plaintext`` for keys) before sending anything:
    ``InvalidArgumentError`` names the argument that breaks them."""

    def __init__(self, bootstrap: str, timeout: float = 60.0, *, user: str | None = None,
                 token: str | None = None, tls: ssl.SSLContext | None = None,
                 max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_line_bytes = check_number("max_line_bytes", max_line_bytes)
        host, port = parse_bootstrap(bootstrap)
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except socket.gaierror as exc:
            raise ClientError(f"cannot connect to the broker at {self.address}: the host "
                              f"name {host} cannot be resolved ({exc.strerror})") from None
        except OSError as exc:
            why = os.strerror(exc.errno) if exc.errno else (str(exc) or "timed out")
            raise ClientError(f"cannot connect to the broker at {self.address}: {why}") \
                from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            try:
                sock = tls.wrap_socket(sock, server_hostname=host)
            except ssl.SSLError as exc:
                sock.close()
                raise ClientError(f"TLS with the broker at {self.address} failed: "
                                  f"{exc.reason or exc}") from None
        self.sock = sock
        self._buf = bytearray()
        self._at = 0  # where the unread part of _buf starts
        self._cid = 0
        self._sent: deque[tuple[str, bool]] = deque()  # FETCHes sent, not yet answered
        if user is not None:
            reply = self.call("AUTH", f"{user} {token or ''}", check=False)
            if not reply.ok:
                self.close()
                raise reply.error(f"AUTH as {user}")

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ framing

    def _readline(self) -> bytes:
        buf = self._buf
        at = self._at
        start = at
        while True:
            end = buf.find(b"\n", start)
            if end >= 0:
                line = bytes(buf[at:end])
                self._at = end + 1
                if self._at > 1 << 20 and self._at * 2 > len(buf):  # compact now and then
                    del buf[: self._at]
                    self._at = 0
                return line
            start = len(buf)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionLost(f"the broker at {self.address} closed the connection")
            buf += chunk

    def _read_exact(self, size: int) -> bytearray:
        """The next ``size`` bytes of the stream (after a reply line announcing them)."""
        buf = self._buf
        have = len(buf) - self._at
        out = bytearray(size)
        take = min(have, size)
        out[:take] = buf[self._at:self._at + take]
        self._at += take
        if self._at == len(buf):
            del buf[:]
            self._at = 0
        view = memoryview(out)
        got = take
        while got < size:
            n = self.sock.recv_into(view[got:], min(size - got, 1 << 22))
            if not n:
                raise ConnectionLost(f"the broker at {self.address} closed the connection")
            got += n
        return out

    def _next_cid(self) -> int:
        self._cid += 1
        return self._cid

    def send(self, command: str, args: str | bytes = "") -> None:
        """Write one request without waiting; ``receive`` reads the answers in order."""
        self.sock.sendall(encode_request(self._next_cid(), command, args))

    def receive(self, command: str = "", *, check: bool = True) -> Reply:
        """The answer to the oldest request sent and not yet received."""
        reply = parse_reply(self._readline())
        return reply.check(command) if check else reply

    def call(self, command: str, args: str | bytes = "", *, check: bool = True) -> Reply:
        """Send one request and wait for its ``Reply`` (``BrokerError`` on ERR when ``check``)."""
        self.send(command, args)
        return self.receive(command, check=check)

    def request(self, command: str, args: str | bytes = "") -> str:
        """Send one request and return its OK payload (``BrokerError`` on ERR)."""
        return self.call(command, args).payload

    # ------------------------------------------------------------ produce

    def ping(self) -> None:
        self.call("PING")

    def produce(self, topic: str, value: bytes | str, key: bytes | str = b"", *,
                acks: str = "1", partition: int | None = None) -> Produced:
        """Append one message (``acks`` ``0``, ``1`` or ``all``). Without ``partition`` the
        broker picks it by the key's hash. Values that are not plain travel in base64."""
        check_name("topic", topic)
        acks = check_acks(acks)
        body, b64 = _value_arg(_bytes(key, "key"), _bytes(value))
        args = b"%b %b acks=%b" % (topic.encode(), body, acks.encode())
        if b64:
            args += b" enc=b64"
        if partition is not None:
            args += b" partition=%d" % check_number("partition", partition)
        reply = self.call("PRODUCE", args)
        return Produced(reply.number("partition"), reply.number("offset"), reply.number("hw"))

    def produce_many(self, topic: str, messages: Iterable[tuple[bytes, bytes, int]],
                     acks: str = "1", pid: str | None = None,
                     first_seq: dict[int, int] | None = None,
                     window: int = 2000) -> list[tuple[int, int]]:
        """Pipelined PRODUCE of ``(key, value, partition)`` triples; values travel as base64.

        With ``pid`` every message carries ``pid=<pid> seq=<n>``, ``n`` counting per partition
        from ``first_seq`` (default 0): the broker drops what it already holds and answers
        with the original offsets. Returns ``(partition, offset)`` per message, in order.
        """
        check_name("topic", topic)
        acks = check_acks(acks)
        seqs = dict(first_seq or {})
        results: list[tuple[int, int]] = []
        pending: list[bytes] = []
        b2a = binascii.b2a_base64
        suffix = f" acks={acks}".encode()
        name = topic.encode()
        for key, value, partition in messages:
            check_key(key)
            extra = b""
            if pid is not None:
                seq = seqs.get(partition, 0)
                seqs[partition] = seq + 1
                extra = b" pid=%b seq=%d" % (pid.encode(), seq)
            pending.append(encode_request(self._next_cid(), "PRODUCE", b"%b %b:%b enc=b64 "
                                          b"partition=%d%b%b" % (name, key,
                                                                 b2a(value, newline=False),
                                                                 partition, suffix, extra)))
            if len(pending) >= window:
                self._send_and_collect(pending, results)
                pending = []
        if pending:
            self._send_and_collect(pending, results)
        return results

    def _send_and_collect(self, lines: Sequence[bytes], results: list[tuple[int, int]]) -> None:
        self.sock.sendall(b"".join(lines))
        error: BrokerError | None = None
        for line in lines:
            try:
                reply = self.receive(line[:200].decode(errors="replace").rstrip("\n"))
                results.append((reply.number("partition"), reply.number("offset")))
            except BrokerError as exc:
                error = error or exc
        if error is not None:
            raise error

    def produce_batch(self, topic: str, partition: int, keys: Sequence[bytes],
                      values: Sequence[bytes], *, acks: str = "1", pid: str | None = None,
                      seq: int = 0) -> BatchAck:
        """PRODUCE_BATCH of ``(keys[i], values[i])`` to one partition (an empty key is
        no key); with ``pid`` the messages are numbered ``seq``, ``seq + 1``, ... A batch
        over ``max_line_bytes`` goes as several requests (``produce_batches``)."""
        return self.produce_batches(topic, [(partition, encode_batch(keys, values),
                                             len(values))], acks, pid,
                                    {partition: seq} if pid is not None else None)[0]

    def produce_batches(self, topic: str, batches: Iterable[tuple[int, bytes, int]],
                        acks: str = "1", pid: str | None = None,
                        first_seq: dict[int, int] | None = None,
                        window: int = 4, raw: bool = True) -> list[BatchAck]:
        """PRODUCE_BATCH for each ``(partition, batch, count)`` (``batch`` from
        ``encode_batch``), up to ``window`` requests in flight; one answer per batch, in
        order. ``raw``: each batch follows its line as it is (``enc=raw size=<n>``), else it
        is base64 in the line (``data=``, for a broker from before ``enc=raw``).

        A batch whose request would not fit ``max_line_bytes`` (the broker refuses it and
        closes the connection) is sent as several PRODUCE_BATCH requests in order, each as
        full as the limit allows; its answer then sums theirs (``count``, ``duplicates``;
        ``offset`` is that of its first appended message). A single message that cannot
        fit a request alone raises ``MessageTooLargeError`` before anything of its batch
        is sent (the answers to the batches before it are read first).

        With ``pid`` each request carries ``pid=<pid> seq=<n>``, ``n`` counting messages
        per partition from ``first_seq`` (default 0) across the pieces of a batch too, so a
        resend of the same messages is not appended twice. An ``ERR`` answer raises
        ``BrokerError`` once the requests in flight are answered.
        """
        check_name("topic", topic)
        acks = check_acks(acks)
        seqs = dict(first_seq or {})
        acks_out: list[BatchAck | None] = []
        in_flight: deque[tuple[str, int]] = deque()  # (what was asked, its batch's index)
        error: BrokerError | None = None
        b2a = binascii.b2a_base64

        def collect() -> None:
            nonlocal error
            head, index = in_flight.popleft()
            try:
                ack = BatchAck.from_reply(self.receive(head))
            except BrokerError as exc:
                error = error or exc
                return
            acks_out[index] = _sum_acks(acks_out[index], ack)

        for partition, batch, count in batches:
            try:
                pieces = self._batch_pieces(topic, partition, acks, pid, batch, count, raw)
            except MessageTooLargeError:
                while in_flight:
                    collect()
                raise
            acks_out.append(None)
            for piece, piece_count in pieces:
                extra = ""
                if pid is not None:
                    seq = seqs.get(partition, 0)
                    seqs[partition] = seq + piece_count
                    extra = f" pid={pid} seq={seq}"
                if raw:
                    head = f"{topic} {partition} acks={acks}{extra} enc=raw size={len(piece)}"
                    self.sock.sendall(encode_request(self._next_cid(), "PRODUCE_BATCH", head))
                    self.sock.sendall(piece)
                else:
                    head = f"{topic} {partition} acks={acks}{extra} data="
                    self.send("PRODUCE_BATCH", head.encode() + b2a(piece, newline=False))
                in_flight.append((f"PRODUCE_BATCH {head}...", len(acks_out) - 1))
                if len(in_flight) >= window:
                    collect()
        while in_flight:
            collect()
        if error is not None:
            raise error
        return [ack for ack in acks_out if ack is not None]

    def _batch_pieces(self, topic: str, partition: int, acks: str, pid: str | None,
                      batch: bytes, count: int, raw: bool) -> list[tuple[bytes, int]]:
        """``batch`` as it goes on the wire: whole when its request fits
        ``max_line_bytes``, else cut (``split_batch``) so that each piece's does. The
        line's length is counted with the widest numbers it can carry."""
        wide = 10 ** 19
        extra = f" pid={pid} seq={wide}" if pid is not None else ""
        line = encode_request(wide, "PRODUCE_BATCH", f"{topic} {partition} acks={acks}{extra}"
                              f" {'enc=raw size=' + str(wide) if raw else 'data='}")
        room = self.max_line_bytes - (len(line) - 1)  # without its \n
        if raw:
            if len(batch) <= room:
                return [(batch, count)]
            return split_batch(batch, max(room, 0), self.max_line_bytes)
        room = max(room, 0) // 4 * 3  # base64: 4 characters per 3 bytes
        if len(batch) <= room:
            return [(batch, count)]
        return split_batch(batch, room, self.max_line_bytes)

    # ------------------------------------------------------------ read

    def consume(self, topic: str, partition: int, offset: int, *, max_messages: int | None = None,
                wait_ms: int | None = None) -> Consumed:
        """Committed messages from ``offset`` on, with keys, timestamps (the broker's append
        time and the producer's own) and headers (``enc=b64 detail=true headers=true``, so
        every value can be read). ``wait_ms``: long poll, the broker answers as soon as a
        message is committed or after ``wait_ms`` with none."""
        args = (f"{check_name('topic', topic)} {check_number('partition', partition)} "
                f"{check_number('offset', offset)} enc=b64 detail=true headers=true")
        if max_messages is not None:
            args += f" max={max_messages}"
        if wait_ms is not None:
            args += f" wait_ms={wait_ms}"
        reply = self.call("CONSUME", args)
        messages = parse_messages(reply, partition, b64=True, detail=True, headers=True)
        return Consumed(messages, reply.number("hw"),
                        messages[-1].offset + 1 if messages else offset)

    def fetch(self, topic: str, partition: int, offset: int, max_messages: int = 100_000,
              max_bytes: int = 16 << 20, raw: bool = True) -> Fetched:
        """Committed records from ``offset`` on, as on-disk bytes (the FETCH command; ``raw``:
        ``enc=raw``, the bytes follow the reply line as they are, else base64 in it)."""
        self.send_fetch(topic, partition, offset, max_messages, max_bytes, raw)
        return self.receive_fetch()

    def send_fetch(self, topic: str, partition: int, offset: int, max_messages: int = 100_000,
                   max_bytes: int = 16 << 20, raw: bool = True) -> None:
        """Send a FETCH without waiting: ``receive_fetch`` reads the answers in order, so a
        reader can keep the next FETCH in flight while it decodes the last one."""
        check_name("topic", topic)
        check_number("partition", partition)
        check_number("offset", offset)
        args = (f"{topic} {partition} {offset} max={max_messages} max_bytes={max_bytes}"
                f"{' enc=raw' if raw else ''}")
        self.send("FETCH", args)
        self._sent.append((f"FETCH {args}", raw))

    def receive_fetch(self) -> Fetched:
        """The answer to the oldest FETCH sent with ``send_fetch``."""
        what, _raw = self._sent.popleft()
        fetched, size = parse_fetch(self.receive(what))
        if size is None:
            return fetched
        return Fetched(fetched.hw, fetched.start, fetched.next_offset, fetched.count,
                       self._read_exact(size))

    def offsets(self, topic: str, partition: int,
                ts_ms: int | None = None) -> tuple[int, int, int | None]:
        """``(earliest, latest, offset for ts)``; latest is ``hw + 1``."""
        args = f"{check_name('topic', topic)} {check_number('partition', partition)}" + (
            f" ts={check_number('ts_ms', ts_ms)}" if ts_ms is not None else "")
        fields = self.call("OFFSETS", args).fields()
        found = int_field(fields, "offset") if "offset" in fields else None
        return int_field(fields, "earliest"), int_field(fields, "latest"), found

    def metadata(self, topic: str) -> dict[str, list[int] | int]:
        """``partitions``, ``hw``, ``earliest`` and ``next`` of a topic."""
        reply = self.call("METADATA", check_name("topic", topic))
        return {"partitions": reply.number("partitions"), "hw": reply.ints("hw"),
                "earliest": reply.ints("earliest"), "next": reply.ints("next")}

    def partitions(self, topic: str) -> int:
        """The topic's partition count, creating the topic first when the broker does not
        know it (a CONSUME auto-creates, where the broker allows; ``enc=b64`` so that no
        stored value can make it refuse)."""
        check_name("topic", topic)
        try:
            return self.call("METADATA", topic).number("partitions")
        except BrokerError:
            self.call("CONSUME", f"{topic} 0 0 max=1 enc=b64")
            return self.call("METADATA", topic).number("partitions")

    def topics(self) -> list[str]:
        return self.call("METADATA").items("topics")

    # ------------------------------------------------------------ group member

    # ------------------------------------------------------------ admin



class RoutedProducer:
    """Produces to the leader of each partition of a cluster (a single broker works too).

    ``bootstrap`` is one ``host:port`` or a comma-separated list. The partition count and
    the leaders come from ``METADATA`` (asked of every broker known, the newest epoch per
    partition winning); a message goes to its partition's leader (the key's hash, as the
    broker would pick it, unless ``partition`` is given). A ``NOT_LEADER`` answer moves the
    message to the leader it names, or, without a name, to whatever a fresh ``METADATA``
    says; a lost connection likewise. At most ``retries`` sends per message, ``backoff``
    seconds apart when nothing new is known. A message sent again after a lost connection
    or a ``REPLICATION_TIMEOUT`` may be stored twice (at-least-once, as Kafka without
    idempotence)."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, *, user: str | None = None,
                 token: str | None = None, tls: ssl.SSLContext | None = None,
                 retries: int = 10, backoff: float = 0.2,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._seeds = [part.strip() for part in bootstrap.split(",") if part.strip()]
        if not self._seeds:
            raise InvalidArgumentError("bootstrap", "bootstrap must name at least one "
                                                    "host:port")
        self._timeout = timeout
        self._auth = (user, token, tls)
        self._retries = retries
        self._backoff = backoff
        self._sleep = sleep
        self._clients: dict[str, Client] = {}
        self._maps: dict[str, ClusterMap] = {}
        self.sends = 0
        """Every PRODUCE sent (retries included): for tests and curious callers."""

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def __enter__(self) -> RoutedProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _client(self, address: str) -> Client:
        client = self._clients.get(address)
        if client is None:
            user, token, tls = self._auth
            client = Client(address, self._timeout, user=user, token=token, tls=tls)
            self._clients[address] = client
        return client

    def _drop(self, address: str) -> None:
        client = self._clients.pop(address, None)
        if client is not None:
            client.close()

    def refresh(self, topic: str) -> ClusterMap:
        """Ask every known broker for ``topic``'s partitions and leaders."""
        found = ClusterMap(topic)
        old = self._maps.get(topic)
        addresses = list(dict.fromkeys([*self._seeds, *(old.brokers.values() if old else ())]))
        answered = 0
        last: ClientError | None = None
        for address in addresses:
            try:
                client = self._client(address)
                found.update_brokers(client.call("METADATA"))
                try:
                    found.update_topic(client.call("METADATA", topic))
                except BrokerError:
                    client.partitions(topic)  # creates it where the broker auto-creates
                    found.update_topic(client.call("METADATA", topic))
                answered += 1
            except (ClientError, OSError) as exc:
                self._drop(address)
                last = exc if isinstance(exc, ClientError) else ClientError(str(exc))
                continue
            for extra in found.brokers.values():
                if extra not in addresses:
                    addresses.append(extra)
        if not answered:
            raise last or ClientError("no broker answered METADATA")
        self._maps[topic] = found
        return found

    def produce(self, topic: str, value: bytes | str, key: bytes | str = b"", *,
                acks: str = "1", partition: int | None = None) -> Produced:
        """Send one message to its partition's leader, following leadership changes."""
        check_name("topic", topic)
        check_key(_bytes(key, "key"))
        routes = self._maps.get(topic) or self.refresh(topic)
        target = partition if partition is not None else routes.partition_for(_bytes(key))
        error: ClientError | None = None
        for attempt in range(self._retries + 1):
            address = routes.leader_address(target)
            if address is None:  # nobody named: try the brokers in turn, as the seed SDK
                known = list(dict.fromkeys([*self._seeds, *routes.brokers.values()]))
                address = known[attempt % len(known)]
            try:
                self.sends += 1
                return self._client(address).produce(topic, value, key, acks=acks,
                                                     partition=target)
            except NotLeaderError as exc:
                error = exc
                if not routes.note_hint(target, parse_leader_hint(exc.broker_message)):
                    self._sleep(self._backoff)
                    routes = self._refresh_quietly(topic, routes)
            except BrokerError:
                raise
            except (ClientError, OSError) as exc:
                error = exc if isinstance(exc, ClientError) else ClientError(str(exc))
                self._drop(address)
                routes.note_hint(target, None)
                self._sleep(self._backoff)
                routes = self._refresh_quietly(topic, routes)
        assert error is not None
        raise error

    def _refresh_quietly(self, topic: str, routes: ClusterMap) -> ClusterMap:
        try:
            return self.refresh(topic)
        except ClientError:
            return routes
