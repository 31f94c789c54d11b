"""A loopback TCP forwarder for the bench tools: cut and restored like a network link
(``bench.cluster_scenario``: a broker losing etcd alone), or recording what its clients send
(``bench.kafka_produce_cpu``: a real producer's bytes to replay).

Must not import: Twisted or the broker (it sits between processes).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from typing import BinaryIO

__all__ = ["TcpProxy"]


class TcpProxy:
    """A loopback TCP forwarder to ``target`` (host, port; read at each accept, so it may be
    set once the target is up); ``cut`` closes the listener and every connection (a broker
    losing etcd alone), ``restore`` listens again on the same port. With ``record``, what
    each client sends is also written to ``conn<NN>.bin`` in that folder (NN in accept
    order; ``join`` waits until every copy is written)."""

    def __init__(self, target: tuple[str, int], record: Path | None = None) -> None:
        self.target = target
        self.record = record
        self.port = 0
        self.accepted = 0
        self._conns: list[socket.socket] = []
        self._pipes: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self.restore()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            if self._listener is not None:
                # shutdown first: on Linux close() alone does not wake a thread blocked in
                # accept(), which would take one more connection (one more keepalive).
                with contextlib.suppress(OSError):  # not connected or already shut
                    self._listener.shutdown(socket.SHUT_RDWR)
                self._listener.close()
                self._listener = None
            for conn in self._conns:
                with contextlib.suppress(OSError):  # the peer already went
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self._conns.clear()

    def join(self, timeout: float = 10.0) -> None:
        """Wait for every connection's copies to end (after ``cut``, or once the peers closed)."""
        for pipe in list(self._pipes):
            pipe.join(timeout)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=2)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns += [client, upstream]
                self.accepted += 1
                sink = None if self.record is None else \
                    open(self.record / f"conn{self.accepted:02d}.bin", "wb")  # noqa: SIM115
            for a, b, copy in ((client, upstream, sink), (upstream, client, None)):
                pipe = threading.Thread(target=self._pipe, args=(a, b, copy), daemon=True)
                pipe.start()
                self._pipes.append(pipe)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, sink: BinaryIO | None) -> None:
        # An error on either side (the proxy cut, a broker died) ends the pipe.
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if sink is not None:
                    sink.write(data)
                dst.sendall(data)
        if sink is not None:
            sink.close()
        for s in (src, dst):
            with contextlib.suppress(OSError):  # already shut by the other direction's pipe
                s.shutdown(socket.SHUT_RDWR)
