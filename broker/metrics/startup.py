"""``StartupResponder``: answers 503 ``starting`` (HTTP, or HTTPS with the broker's certificate)
from a plain thread while the store recovers and the reactor is not running yet, then hands
its socket to ``MetricsService``.

Must not import: Twisted (it runs before the reactor).
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from typing import Any

from broker.version import skerry_version


class StartupResponder:
    """Answers every HTTP request with 503 ``starting`` from a daemon thread, on a socket
    bound before the store opens (recovery blocks the reactor's thread, and the reactor is
    not running yet). ``hand_over`` stops the thread and returns the listening socket, so
    the reactor can adopt it without a gap. With ``tls`` every connection must complete a
    TLS handshake first (a plain-text client is dropped)."""

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._tls = tls
        self._sock = socket.create_server((host, port), family=family, backlog=128)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="skerry-startup-http",
                                        daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._sock.getsockname()[:2]
        return host, port

    def _serve(self) -> None:
        # poll(), not select(): a broker opening many segment files has descriptors above
        # FD_SETSIZE (1024), where select() raises and the responder went silent.
        poller = select.poll()
        poller.register(self._sock, select.POLLIN)
        while not self._stop.is_set():
            try:
                readable = poller.poll(50)
            except OSError:
                return
            if not readable or self._stop.is_set():
                continue
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionError):
                continue
            except OSError:
                return
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(0.5)
        head = b""
        try:
            if self._tls is not None:
                conn = self._tls.wrap_socket(conn, server_side=True)
            while b"\r\n\r\n" not in head and b"\n\n" not in head and len(head) < 8192:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                head += chunk
            path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b"/"
            known = path.split(b"?", 1)[0] in (b"/health", b"/metrics", b"/")
            body = b"starting\nskerry %s\n" % skerry_version().encode() if known \
                else b"not found\n"
            status = b"503 Service Unavailable" if known else b"404 Not Found"
            conn.sendall(b"HTTP/1.1 %b\r\ncontent-type: text/plain; charset=utf-8\r\n"
                         b"content-length: %d\r\nconnection: close\r\n\r\n%b"
                         % (status, len(body), body))
        except OSError:  # ssl.SSLError too: a plain-text client on an HTTPS port
            pass
        finally:
            conn.close()  # the TLS wrapper, when there is one (the caller closes the rest)

    def hand_over(self) -> socket.socket:
        """Stop answering and return the listening socket (non-blocking)."""
        self._stop.set()
        self._thread.join()
        self._sock.setblocking(False)
        return self._sock

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


def startup_tls_context(cert_path: str, key_path: str) -> ssl.SSLContext:
    """The startup responder's TLS settings: the broker's certificate, TLS 1.2 at least."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_path, key_path)
    return context


def open_startup_listener(config: Any) -> StartupResponder | None:
    """A ``StartupResponder`` on ``host:metrics_port`` (HTTPS when ``tls.cert`` is set), or
    None when metrics are off. ``OSError`` when the port cannot be bound or the certificate
    not used (the caller reports it and exits)."""
    port = config["metrics_port"]
    if port is None:
        return None
    tls = None
    if config["tls.cert"] is not None:
        tls = startup_tls_context(config["tls.cert"], config["tls.key"])
    return StartupResponder(config["host"], port, tls)
