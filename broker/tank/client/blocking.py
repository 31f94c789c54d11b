"""A small blocking TANK client over one socket, for tests and tools.

Owns: ``TankClient``: connect (reading the broker's greeting ping, §1), send requests
with increasing request ids, and collect replies by request id, so replies may come back
out of order (a long-poll consume answered after a later produce). Pings are ignored.

Must not import: Twisted, ``broker.core``, the store, ``broker.tank.codec``.
"""

from __future__ import annotations

import socket
import ssl
from collections import deque
from collections.abc import Sequence

from broker.tank.client import api
from broker.tank.client.bundle import Msg
from broker.tank.client.wire import TankDecodeError, split_frames

__all__ = ["TankClient"]

_PING = 3


class TankClient:
    """``TankClient(host, port)``; ``expect_ping`` reads the greeting the 2017 Java client
    requires before anything else; ``ssl_context`` speaks TLS (a broker with ``tls.cert``)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 11011, *, timeout: float = 5.0,
                 expect_ping: bool = True, ssl_context: ssl.SSLContext | None = None) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if ssl_context is not None:  # a broker whose TANK listener speaks TLS
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname=host)
        self._buf = bytearray()
        self._frames: deque[tuple[int, bytes]] = deque()
        self._replies: dict[int, tuple[int, bytes]] = {}
        self._next_id = 1
        self.pings = 0
        if expect_ping:
            msg_id, _ = self._read_frame()
            if msg_id != _PING:
                raise TankDecodeError(f"expected the greeting ping, got 0x{msg_id:02x}")
            self.pings += 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> TankClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def new_request_id(self) -> int:
        rid = self._next_id
        self._next_id += 1
        return rid

    def _read_frame(self) -> tuple[int, bytes]:
        while not self._frames:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the broker closed the connection")
            self._buf += data
            self._frames.extend(split_frames(self._buf))
        return self._frames.popleft()

    def send(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def wait_reply(self, request_id: int) -> tuple[int, bytes]:
        """The ``(msg_id, payload)`` answering ``request_id``; others are kept for later."""
        while request_id not in self._replies:
            msg_id, payload = self._read_frame()
            rid = api.reply_request_id(msg_id, payload)
            if rid is None:
                self.pings += 1
                continue
            self._replies[rid] = (msg_id, payload)
        return self._replies.pop(request_id)

    def produce(self, entries: Sequence[tuple[bytes, int, Sequence[Msg]]]):
        rid = self.new_request_id()
        self.send(api.build_produce(rid, entries))
        _, payload = self.wait_reply(rid)
        return api.decode_produce_reply(payload, entries)

    def consume(self, entries: Sequence[tuple[bytes, int, int, int]], *, max_wait: int = 0,
                min_bytes: int = 0) -> api.ConsumeResult:
        rid = self.new_request_id()
        self.send(api.build_consume(rid, entries, max_wait=max_wait, min_bytes=min_bytes))
        _, payload = self.wait_reply(rid)
        return api.decode_consume_reply(payload, entries)

    def discover_partitions(self, topic: bytes, partitions: Sequence[int] = ()):
        rid = self.new_request_id()
        self.send(api.build_discover_partitions(rid, topic, partitions))
        _, payload = self.wait_reply(rid)
        return api.decode_discover_partitions_reply(payload, partitions)[2]

    def create_topic(self, topic: bytes, partitions: int, config: bytes = b""):
        rid = self.new_request_id()
        self.send(api.build_create_topic(rid, topic, partitions, config))
        _, payload = self.wait_reply(rid)
        return api.decode_create_topic_reply(payload)[2]
