"""The metrics HTTP endpoint on the broker's reactor: ``/metrics`` (Prometheus text format,
behind ``HttpAuth`` when configured) and ``/health``; ``MetricsService`` listens, adopting
the startup responder's socket.

Must not import: the store, groups or replication modules directly, ``broker.v1.protocol``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client.exposition import choose_encoder
from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.web.resource import Resource
from twisted.web.server import Site

from broker.auth import TokenStore, bind_refusal, is_loopback
from broker.metrics.auth import HttpAuth
from broker.metrics.health import Health, health_answer
from broker.metrics.registry import BrokerMetrics, GroupsView, ReplicationStatusView
from broker.metrics.startup import StartupResponder

if TYPE_CHECKING:
    from broker.core import BrokerCore


class _Page(Resource):
    isLeaf = True

    def __init__(self, answer: Callable[[], tuple[int, bytes, bytes]]) -> None:
        super().__init__()
        self._answer = answer

    def render_GET(self, request: Any) -> bytes:
        status, content_type, body = self._answer()
        request.setResponseCode(status)
        request.setHeader(b"content-type", content_type)
        request.setHeader(b"cache-control", b"no-store")
        return body


class _MetricsPage(Resource):
    """``/metrics`` in the format the scraper's Accept header asks for (Prometheus text by
    default, OpenMetrics on request), as ``prometheus_client``'s own handlers do."""

    isLeaf = True

    def __init__(self, metrics: BrokerMetrics, auth: HttpAuth | None = None) -> None:
        super().__init__()
        self._metrics = metrics
        self._auth = auth

    def render_GET(self, request: Any) -> Any:
        if self._auth is not None and \
                self._auth.user_for(request.getHeader(b"authorization")) is None:
            return self._auth.refuse(request)
        accept = request.getHeader(b"accept")
        encoder, content_type = choose_encoder(accept.decode("latin-1") if accept else "")
        request.setHeader(b"content-type", content_type.encode())
        request.setHeader(b"cache-control", b"no-store")
        return encoder(self._metrics.registry)


class _Root(Resource):
    def render_GET(self, request: Any) -> bytes:
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        return b"skerry: /metrics (Prometheus), /health\n"

    def getChild(self, path: bytes, request: Any) -> Resource:
        if path == b"":
            return self
        return super().getChild(path, request)


class MetricsService:
    """The HTTP endpoint of one broker: ``/metrics`` and ``/health`` over twisted.web;
    ``auth`` guards ``/metrics`` (None: open, loopback only)."""

    def __init__(self, metrics: BrokerMetrics, auth: HttpAuth | None = None) -> None:
        self.metrics = metrics
        self.health = metrics.health
        self.auth = auth
        self.startup: StartupResponder | None = None
        """Set by the shell when a ``StartupResponder`` holds the socket during startup."""
        root = _Root()
        root.putChild(b"metrics", _MetricsPage(metrics, auth))
        root.putChild(b"health", _Page(lambda: health_answer(self.health)))
        self.site = Site(root, timeout=30)
        self.site.noisy = False
        self._port: Any = None

    @classmethod
    def for_broker(cls, core: BrokerCore, factory: Any, clock: IReactorTime, *,
                   groups: GroupsView | None = None,
                   replication: ReplicationStatusView | None = None,
                   tokens: TokenStore | None = None) -> MetricsService:
        """Build the metrics of a broker and hook them into its core and V1 factory;
        with ``tokens`` (the V1 users), ``/metrics`` needs their credentials."""
        metrics = BrokerMetrics(clock)
        metrics.bind(core, factory, groups, replication)
        core.metrics = metrics
        factory.metrics = metrics
        return cls(metrics, None if tokens is None else HttpAuth(tokens, clock))

    def listen(self, reactor: Any, host: str, port: int, tls: Any = None) -> str:
        """Serve on ``host:port`` (taking over the startup socket if there is one), over
        TLS when ``tls`` (``broker.tls.server_options``) is given, and report ready: call it
        after every other listener is up. Returns ``metrics=<host>:<port>``. Refuses a
        non-loopback ``host`` without authentication (``RuntimeError``)."""
        if self.auth is None and not is_loopback(host):
            raise RuntimeError(f"metrics: {bind_refusal(host, False)}")
        factory: Any = self.site
        if tls is not None:
            from twisted.protocols.tls import TLSMemoryBIOFactory

            factory = TLSMemoryBIOFactory(tls, False, self.site)
        if self.startup is not None:
            sock = self.startup.hand_over()
            self.startup = None
            try:
                self._port = reactor.adoptStreamPort(sock.fileno(), sock.family, factory)
            finally:
                sock.close()  # the reactor holds its own duplicate
        else:
            self._port = reactor.listenTCP(port, factory, interface=host)
        self.health.state = Health.READY
        address = self._port.getHost()
        return f"metrics={address.host}:{address.port}"

    def stopping(self) -> None:
        """Shutdown began: ``/health`` answers 503 ``stopping`` from now on."""
        self.health.state = Health.STOPPING

    def stop(self, passthrough: Any = None) -> Deferred[Any]:
        """Stop listening; fires with ``passthrough`` (chain it after the shutdown)."""
        port, self._port = self._port, None
        if self.startup is not None:
            self.startup.close()
            self.startup = None
        if port is None:
            return succeed(passthrough)
        return maybeDeferred(port.stopListening).addBoth(lambda _: passthrough)
