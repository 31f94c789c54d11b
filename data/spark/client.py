"""A small blocking V1 client for data tools (the Spark source and sink run it in executors).

Owns: one TCP connection to a broker, request/reply framing, pipelined idempotent produce,
FETCH (raw record bytes), OFFSETS, METADATA and ADMIN_COMMIT, and turning ``ERR`` replies
into ``BrokerError``. Speaks only the documented wire protocol (docs/protocol.md).

Must not import: Twisted, the broker, pyspark (it runs inside Spark's Python workers).
"""

from __future__ import annotations

import binascii
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["BrokerError", "Fetched", "SkerryClient", "fnv1a_32", "parse_bootstrap", "payload_fields"]


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
    data: bytes


def fnv1a_32(data: bytes) -> int:
    """FNV-1a 32-bit: the broker's key-to-partition hash (the same as ``broker.core``)."""
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


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

    def topics(self) -> list[str]:
        return _list(payload_fields(self.request("METADATA"))["topics"])

    def offsets(self, topic: str, partition: int, ts_ms: int | None = None) -> tuple[int, int, int | None]:
        """``(earliest, latest, offset for ts)``; latest is ``hw + 1``."""
        args = f"{topic} {partition}" + (f" ts={ts_ms}" if ts_ms is not None else "")
        fields = payload_fields(self.request("OFFSETS", args))
        found = int(fields["offset"]) if "offset" in fields else None
        return int(fields["earliest"]), int(fields["latest"]), found

    def fetch(self, topic: str, partition: int, offset: int, max_messages: int = 100_000,
              max_bytes: int = 16 << 20) -> Fetched:
        """Committed records from ``offset`` on, as on-disk bytes (the FETCH command)."""
        payload = self._fetch_payload(topic, partition, offset, max_messages, max_bytes)
        return _fetched(payload)

    def _fetch_payload(self, topic: str, partition: int, offset: int, max_messages: int,
                       max_bytes: int) -> bytes:
        self._cid += 1
        line = f"V1|{self._cid}|FETCH|{topic} {partition} {offset} max={max_messages} max_bytes={max_bytes}\n"
        self.sock.sendall(line.encode())
        return self._payload(self._readline(), line)

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
