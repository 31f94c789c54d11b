"""A small blocking V1 client for data tools (the Spark source and sink run it in executors).

Owns: one TCP connection to a broker, request/reply framing (also the raw bytes that follow
a FETCH ``enc=raw`` reply line), pipelined produce (PRODUCE per message, or PRODUCE_BATCH
with the batch layout ``encode_batch`` writes; both idempotent with a producer id), pipelined
FETCH, OFFSETS, METADATA and ADMIN_COMMIT, and turning ``ERR`` replies into
``BrokerError``. Speaks only the documented wire protocol (docs/protocol.md).

Must not import: Twisted, the broker, pyspark (it runs inside Spark's Python workers).
"""

from __future__ import annotations

import binascii
import socket
import sys
from array import array
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from data.keys import fnv1a_32

__all__ = ["BatchAck", "BrokerError", "Fetched", "SkerryClient", "encode_batch", "fnv1a_32",
           "parse_bootstrap", "payload_fields"]

MAX_BATCH_BYTES = 512 * 1024
"""The default size limit of one PRODUCE_BATCH's batch before base64: its line (a third
longer) stays under the broker's default ``limits.max_line_bytes`` of 1 MiB."""


class BrokerError(RuntimeError):
    """An ``ERR`` reply: ``code`` (BAD_REQUEST, NOT_LEADER, ...) and the broker's message."""

    def __init__(self, code: str, message: str, request: str = "") -> None:
        super().__init__(f"{code}: {message}" + (f" (request: {request[:200]})" if request else ""))
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Fetched:
    """One FETCH answer: ``count`` records as on-disk bytes in ``data``."""

    hw: int
    start: int
    next_offset: int
    count: int
    data: bytes | bytearray


@dataclass(frozen=True)
class BatchAck:
    """One PRODUCE_BATCH answer: ``count`` messages appended at ``offset`` onwards after
    ``duplicates`` the partition already held (idempotent resend)."""

    partition: int
    offset: int
    count: int
    duplicates: int


def encode_batch(keys: Sequence[bytes], values: Sequence[bytes]) -> bytes:
    """The PRODUCE_BATCH batch of ``(keys[i], values[i])`` (docs/protocol.md): count u32,
    key lengths (u8 each), value lengths (u32 each), the keys, the values; little-endian.
    An empty key is no key; a key has at most 255 bytes."""
    count = len(values)
    if len(keys) != count or count == 0:
        raise ValueError(f"a batch needs one key per value and at least one message ({len(keys)} keys, "
                         f"{count} values)")
    key_lengths = bytes(map(len, keys))  # ValueError for a key over 255 bytes
    value_lengths = array("I", map(len, values))
    if sys.byteorder == "big":  # pragma: no cover
        value_lengths.byteswap()
    return b"".join((count.to_bytes(4, "little"), key_lengths, value_lengths.tobytes(), *keys, *values))


def parse_bootstrap(text: str) -> tuple[str, int]:
    """``host:port`` (the first of a comma list) as ``(host, port)``."""
    first = text.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bootstrap must be host:port, got {text!r}")
    return host, int(port)


def payload_fields(payload: str) -> dict[str, str]:
    """``key=value`` pairs of an OK payload (lists keep their brackets)."""
    out: dict[str, str] = {}
    key = None
    parts: list[str] = []
    for token in payload.split(" "):
        if key is not None and "=" not in token:
            parts.append(token)
            continue
        if key is not None:
            out[key] = " ".join(parts)
        key, _, value = token.partition("=")
        parts = [value]
    if key is not None:
        out[key] = " ".join(parts)
    return out


def _list(text: str) -> list[str]:
    inner = text.strip()[1:-1].strip()
    return inner.split(" ") if inner else []


class SkerryClient:
    """One connection. Not thread-safe; use one per task."""

    def __init__(self, bootstrap: str, timeout: float = 60.0) -> None:
        host, port = parse_bootstrap(bootstrap)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = bytearray()
        self._at = 0  # where the unread part of _buf starts
        self._cid = 0
        self._sent: deque[tuple[str, bool]] = deque()  # FETCHes sent, not yet answered

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> SkerryClient:
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
                raise ConnectionError("broker closed the connection")
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
                raise ConnectionError("broker closed the connection")
            got += n
        return out

    def _payload(self, line: bytes, request: str = "") -> bytes:
        parts = line.split(b"|", 4)
        if len(parts) >= 3 and parts[2] == b"OK":
            return parts[3] if len(parts) > 3 else b""
        if len(parts) >= 5 and parts[2] == b"ERR":
            raise BrokerError(parts[3].decode(), parts[4].decode(errors="replace"), request)
        raise BrokerError("INTERNAL", f"unreadable reply {line[:200]!r}", request)

    def request(self, command: str, args: str = "") -> str:
        """Send one request and return its OK payload (``BrokerError`` on ERR)."""
        self._cid += 1
        line = f"V1|{self._cid}|{command}|{args}\n"
        self.sock.sendall(line.encode())
        return self._payload(self._readline(), line).decode()

    # ------------------------------------------------------------ commands

    def metadata(self, topic: str) -> dict[str, list[int] | int]:
        """``partitions``, ``hw``, ``earliest`` and ``next`` of a topic."""
        fields = payload_fields(self.request("METADATA", topic))
        return {
            "partitions": int(fields["partitions"]),
            "hw": [int(x) for x in _list(fields["hw"])],
            "earliest": [int(x) for x in _list(fields["earliest"])],
            "next": [int(x) for x in _list(fields["next"])],
        }

    def partitions(self, topic: str) -> int:
        """The topic's partition count, creating the topic first when the broker does not
        know it (a CONSUME auto-creates, where the broker allows; ``enc=b64`` so that no
        stored value can make it refuse)."""
        try:
            return int(self.metadata(topic)["partitions"])  # type: ignore[arg-type]
        except BrokerError:
            self.request("CONSUME", f"{topic} 0 0 max=1 enc=b64")
            return int(self.metadata(topic)["partitions"])  # type: ignore[arg-type]

    def topics(self) -> list[str]:
        return _list(payload_fields(self.request("METADATA"))["topics"])

    def offsets(self, topic: str, partition: int, ts_ms: int | None = None) -> tuple[int, int, int | None]:
        """``(earliest, latest, offset for ts)``; latest is ``hw + 1``."""
        args = f"{topic} {partition}" + (f" ts={ts_ms}" if ts_ms is not None else "")
        fields = payload_fields(self.request("OFFSETS", args))
        found = int(fields["offset"]) if "offset" in fields else None
        return int(fields["earliest"]), int(fields["latest"]), found

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
        self._cid += 1
        line = (f"V1|{self._cid}|FETCH|{topic} {partition} {offset} max={max_messages} "
                f"max_bytes={max_bytes}{' enc=raw' if raw else ''}\n")
        self.sock.sendall(line.encode())
        self._sent.append((line, raw))

    def receive_fetch(self) -> Fetched:
        """The answer to the oldest FETCH sent with ``send_fetch``."""
        line, raw = self._sent.popleft()
        payload = self._payload(self._readline(), line)
        if not raw:
            return _fetched(payload)
        fields = payload_fields(payload.decode())
        return Fetched(int(fields["hw"]), int(fields["start"]), int(fields["next"]), int(fields["count"]),
                       self._read_exact(int(fields["size"])))

    def admin_commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        self.request("ADMIN_COMMIT", f"{group} {topic} {partition} {offset}")

    def produce_many(self, topic: str, messages: Iterable[tuple[bytes, bytes, int]], acks: str = "1",
                     pid: str | None = None, first_seq: dict[int, int] | None = None,
                     window: int = 2000) -> list[tuple[int, int]]:
        """Pipelined PRODUCE of ``(key, value, partition)`` triples; values travel as base64.

        With ``pid`` every message carries ``pid=<pid> seq=<n>``, ``n`` counting per partition
        from ``first_seq`` (default 0): the broker drops what it already holds and answers
        with the original offsets. Returns ``(partition, offset)`` per message, in order.
        """
        seqs = dict(first_seq or {})
        results: list[tuple[int, int]] = []
        pending: list[bytes] = []
        b2a = binascii.b2a_base64
        suffix = f" acks={acks}".encode()
        for key, value, partition in messages:
            self._cid += 1
            extra = b""
            if pid is not None:
                seq = seqs.get(partition, 0)
                seqs[partition] = seq + 1
                extra = b" pid=%b seq=%d" % (pid.encode(), seq)
            pending.append(b"V1|%d|PRODUCE|%b %b:%b enc=b64 partition=%d%b%b\n" % (
                self._cid, topic.encode(), key, b2a(value, newline=False), partition, suffix, extra))
            if len(pending) >= window:
                self._send_and_collect(pending, results)
                pending = []
        if pending:
            self._send_and_collect(pending, results)
        return results

    def produce_batches(self, topic: str, batches: Iterable[tuple[int, bytes, int]], acks: str = "1",
                        pid: str | None = None, first_seq: dict[int, int] | None = None,
                        window: int = 4) -> list[BatchAck]:
        """PRODUCE_BATCH for each ``(partition, batch, count)`` (``batch`` from
        ``encode_batch``), up to ``window`` requests in flight; the answers in order.

        With ``pid`` each batch carries ``pid=<pid> seq=<n>``, ``n`` counting messages per
        partition from ``first_seq`` (default 0), so a resend of the same messages is not
        appended twice. An ``ERR`` answer raises ``BrokerError`` once the requests in flight
        are answered.
        """
        seqs = dict(first_seq or {})
        acks_out: list[BatchAck] = []
        in_flight: deque[str] = deque()
        error: BrokerError | None = None
        b2a = binascii.b2a_base64

        def collect() -> None:
            nonlocal error
            line = in_flight.popleft()
            try:
                fields = payload_fields(self._payload(self._readline(), line).decode())
            except BrokerError as exc:
                error = error or exc
                return
            acks_out.append(BatchAck(int(fields["partition"]), int(fields["offset"]),
                                     int(fields["count"]), int(fields.get("duplicates", "0"))))

        for partition, batch, count in batches:
            self._cid += 1
            extra = ""
            if pid is not None:
                seq = seqs.get(partition, 0)
                seqs[partition] = seq + count
                extra = f" pid={pid} seq={seq}"
            head = f"V1|{self._cid}|PRODUCE_BATCH|{topic} {partition} acks={acks}{extra} data="
            self.sock.sendall(b"%b%b\n" % (head.encode(), b2a(batch, newline=False)))
            in_flight.append(head + "...")
            if len(in_flight) >= window:
                collect()
        while in_flight:
            collect()
        if error is not None:
            raise error
        return acks_out

    def _send_and_collect(self, lines: Sequence[bytes], results: list[tuple[int, int]]) -> None:
        self.sock.sendall(b"".join(lines))
        error: BrokerError | None = None
        for line in lines:
            try:
                fields = payload_fields(self._payload(self._readline(), line.decode(errors="replace")).decode())
                results.append((int(fields["partition"]), int(fields["offset"])))
            except BrokerError as exc:
                error = error or exc
        if error is not None:
            raise error


def _fetched(payload: bytes) -> Fetched:
    head, _, data = payload.partition(b" data=")
    fields = payload_fields(head.decode())
    return Fetched(int(fields["hw"]), int(fields["start"]), int(fields["next"]), int(fields["count"]),
                   binascii.a2b_base64(data) if data else b"")
