"""The console's HTTP side: the JSON API under ``/api/``, the static pages, and the listener.

Owns: ``ConsoleService`` (builds the console of a broker, listens on ``console.host`` and
``console_port`` with twisted.web, starts and stops the lag/rate sampler), the API resource
(routing ``/api/...`` paths to ``ConsoleData``, query checks, JSON answers, the token check)
and the static resource (``index.html``, ``console.js``, ``console.css``, ``favicon.svg``
from ``broker/console/static/``, read once at startup: no directory listing, no file
outside that list is ever served).

Security, the same rules as ``/metrics``: with ``tls.cert``/``tls.key`` the listener speaks
HTTPS only; with ``auth.tokens_file`` every ``/api/`` request needs a V1 user's token
(``Authorization: Bearer <token>`` or HTTP Basic ``<user>:<token>``, checked by
``broker.metrics.HttpAuth``) and a refusal is a 401 answered after
``broker.auth.FIRST_DELAY_S``; without authentication the console refuses a non-loopback
``console.host``. The pages themselves hold no data and are served to anyone who reaches the
port; they ask for the token with a login form and keep it in ``sessionStorage``. Every
answer carries a Content-Security-Policy allowing scripts, styles and requests from the
console itself only (no inline script can run even if a value were ever rendered as HTML;
the pages build the DOM with ``textContent``).

Must not import: transports, the store. Time comes from the injected clock.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from broker.auth import FIRST_DELAY_S, TokenStore, bind_refusal, is_loopback
from broker.console.cluster import ClusterView, LocalClusterView, ReplicaStatusSource
from broker.console.history import History, Sampler, TrafficCounters
from broker.console.views import ApiError, BrokerFacts, ConsoleData, CoreView, GroupsView
from broker.metrics import HttpAuth
from broker.version import skerry_version

__all__ = ["ConsoleService", "SECURITY_HEADERS", "STATIC_FILES", "broker_version"]

log = logging.getLogger("skerry.console")

STATIC_DIR = Path(__file__).resolve().parent / "static"
STATIC_FILES = {
    b"": ("index.html", b"text/html; charset=utf-8"),
    b"index.html": ("index.html", b"text/html; charset=utf-8"),
    b"console.js": ("console.js", b"text/javascript; charset=utf-8"),
    b"console.css": ("console.css", b"text/css; charset=utf-8"),
    b"favicon.svg": ("favicon.svg", b"image/svg+xml"),
}
"""URL path (under ``/``) -> (file in ``static/``, content type): everything the pages need."""

SECURITY_HEADERS = {
    b"content-security-policy": b"default-src 'none'; script-src 'self'; style-src 'self'; "
                                b"img-src 'self'; connect-src 'self'; base-uri 'none'; "
                                b"form-action 'self'; frame-ancestors 'none'",
    b"x-content-type-options": b"nosniff",
    b"referrer-policy": b"no-referrer",
    b"x-frame-options": b"DENY",
}


def broker_version() -> str:
    """The installed ``skerry`` distribution's version (``unknown`` when not installed)."""
    return skerry_version()


VERSION_MARK = b"@SKERRY_VERSION@"
"""Where ``index.html`` shows the version (its footer); replaced when the page is loaded."""


def _secure(request: Any) -> None:
    for name, value in SECURITY_HEADERS.items():
        request.setHeader(name, value)


class _Static(Resource):
    isLeaf = True

    def __init__(self, body: bytes, content_type: bytes) -> None:
        super().__init__()
        self._body = body
        self._type = content_type

    def render_GET(self, request: Any) -> bytes:
        _secure(request)
        request.setHeader(b"content-type", self._type)
        request.setHeader(b"cache-control", b"no-cache")
        return self._body

    def render_HEAD(self, request: Any) -> bytes:
        return self.render_GET(request)


class _NotFound(Resource):
    isLeaf = True

    def render(self, request: Any) -> bytes:
        _secure(request)
        request.setResponseCode(404)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        return b"not found\n"


def _json(request: Any, status: int, doc: Any) -> bytes:
    _secure(request)
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"application/json")
    request.setHeader(b"cache-control", b"no-store")
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def _int_arg(request: Any, name: str, default: int | None) -> int | None:
    values = request.args.get(name.encode())
    if not values or values[-1] == b"":
        return default
    raw = values[-1]
    try:
        return int(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, f"{name} must be a whole number") from None


def _bool_arg(request: Any, name: str) -> bool:
    """A yes/no query parameter: ``1``/``true``/``yes`` or ``0``/``false``/``no`` (absent or
    empty: no)."""
    values = request.args.get(name.encode())
    if not values or values[-1] == b"":
        return False
    raw = values[-1].lower()
    if raw in (b"1", b"true", b"yes"):
        return True
    if raw in (b"0", b"false", b"no"):
        return False
    raise ApiError(400, f"{name} must be 1 or 0 (true or false)")


class _Api(Resource):
    """``/api/<...>``: one JSON document per GET (see ``docs/console.md``)."""

    isLeaf = True
    CHALLENGE = b'Bearer realm="skerry console"'

    def __init__(self, data: ConsoleData, auth: HttpAuth | None, clock: IReactorTime) -> None:
        super().__init__()
        self._data = data
        self._auth = auth
        self._clock = clock

    def render_GET(self, request: Any) -> Any:
        if self._auth is not None and \
                self._auth.user_for(request.getHeader(b"authorization")) is None:
            return self._refuse(request)
        # How often a page should poll: the sampling interval (new samples come no faster).
        request.setHeader(b"x-skerry-poll-ms",
                          b"%d" % round(self._data.history.interval_s * 1000))
        try:
            parts = [p.decode("utf-8") for p in request.postpath]
            while parts and parts[-1] == "":
                parts.pop()  # /api/topics/ is /api/topics
            return _json(request, 200, self._route(parts, request))
        except ApiError as exc:
            return _json(request, exc.status, {"error": exc.message})
        except UnicodeDecodeError:
            return _json(request, 400, {"error": "the path is not UTF-8"})
        except Exception:  # a bug: logged, answered, and the console keeps serving
            log.exception("console: %s failed", request.path.decode("latin-1"))
            return _json(request, 500, {"error": "internal error (see the broker log)"})

    def _route(self, parts: list[str], request: Any) -> Any:
        data = self._data
        match parts:
            case ["overview"]:
                return data.overview()
            case ["topics"]:
                return data.topics(_bool_arg(request, "internal"))
            case ["topics", name]:
                return data.topic(name, _bool_arg(request, "internal"))
            case ["topics", name, "messages"]:
                partition = _int_arg(request, "partition", 0)
                limit = _int_arg(request, "limit", 20)
                assert partition is not None and limit is not None
                return data.messages(name, partition, _int_arg(request, "offset", None),
                                     _int_arg(request, "timestamp_ms", None), limit)
            case ["groups"]:
                return data.group_rows(_bool_arg(request, "internal"))
            case ["groups", group, topic]:
                return data.group(group, topic)
            case ["cluster"]:
                return data.cluster_doc(_bool_arg(request, "internal"))
            case ["acls"]:
                return data.acls_doc()
        raise ApiError(404, "no such endpoint; see docs/console.md for the API")

    def _refuse(self, request: Any) -> Any:
        """401 after the failed-attempt delay (on the reactor clock), as /metrics does."""
        peer = request.getClientAddress()
        log.warning("console: refused a request for %s from %s: %s",
                    request.path.decode("latin-1"), getattr(peer, "host", "?"),
                    "bad credentials" if request.getHeader(b"authorization")
                    else "no credentials")
        body = _json(request, 401, {"error": "authentication required"})
        request.setHeader(b"www-authenticate", self.CHALLENGE)

        def answer() -> None:
            request.write(body)
            request.finish()

        call = self._clock.callLater(FIRST_DELAY_S, answer)
        request.notifyFinish().addErrback(lambda _: call.cancel() if call.active() else None)
        return NOT_DONE_YET


class _Root(Resource):
    def __init__(self, api: Resource, static: dict[bytes, Resource]) -> None:
        super().__init__()
        self._api = api
        self._static = static

    def getChild(self, path: bytes, request: Any) -> Resource:
        if path == b"api":
            return self._api
        if request.postpath:  # /console.js/x, /topics/x: nothing lives below a file
            return _NotFound()
        return self._static.get(path) or _NotFound()

    def render_GET(self, request: Any) -> bytes:
        return self._static[b""].render(request)  # type: ignore[no-any-return]


class ConsoleService:
    """The web console of one broker (see the module docstring)."""

    def __init__(self, data: ConsoleData, history: History, clock: IReactorTime,
                 auth: HttpAuth | None = None) -> None:
        self.data = data
        self.history = history
        self.auth = auth
        self.sampler = Sampler(history, clock)
        static: dict[bytes, Resource] = {}
        for path, (name, content_type) in STATIC_FILES.items():
            body = (STATIC_DIR / name).read_bytes()
            if name == "index.html":
                body = body.replace(VERSION_MARK, skerry_version().encode())
            static[path] = _Static(body, content_type)
        self.site = Site(_Root(_Api(data, auth, clock), static), timeout=30)
        self.site.noisy = False
        self.site.displayTracebacks = False
        self._port: Any = None

    @classmethod
    def for_broker(cls, core: CoreView, factory: Any, clock: IReactorTime, *, config: Any,
                   groups: GroupsView | None, replication: ReplicaStatusSource,
                   tokens: TokenStore | None = None, counters: TrafficCounters | None = None,
                   cluster: ClusterView | None = None) -> ConsoleService:
        """The console of a broker. ``counters``: the ``broker.metrics.BrokerMetrics`` of
        ``/metrics`` when it is on; otherwise the console makes one and hooks it into the
        core and the V1 factory, as ``/metrics`` would (its rates come from those
        counters). ``cluster``: the control plane's view; by default what this broker
        knows (``LocalClusterView``)."""
        if counters is None:
            from broker.metrics import BrokerMetrics

            metrics = BrokerMetrics(clock)
            metrics.bind(core, factory, groups, replication)  # type: ignore[arg-type]
            core.metrics = metrics  # type: ignore[attr-defined]
            factory.metrics = metrics
            counters = metrics
        now: Callable[[], float] = clock.seconds
        history = History(config["console.sample_interval_ms"] / 1000.0, now, counters, groups)
        facts = BrokerFacts(
            version=broker_version(), fsync=config["storage.fsync"],
            fsync_interval_ms=config["storage.fsync_interval_ms"],
            data_dir=config["data_dir"], started=now(),
            auth=tokens is not None, tls=config["tls.cert"] is not None)
        listeners: dict[str, str] = {}
        if cluster is None:
            cluster = LocalClusterView(replication, lambda: listeners.get("v1", "?"))
        data = ConsoleData(core, groups, cluster, history, facts, now,
                           connections=lambda: len(factory.connections), listeners=listeners)
        return cls(data, history, clock, None if tokens is None else HttpAuth(tokens, clock))

    def listen(self, reactor: Any, host: str, port: int, tls: Any = None) -> str:
        """Serve on ``host:port`` (HTTPS when ``tls``, ``broker.tls.server_options``, is
        given) and start sampling. Returns ``console=<host>:<port>``. Refuses a
        non-loopback ``host`` without authentication (``RuntimeError``)."""
        if self.auth is None and not is_loopback(host):
            raise RuntimeError(f"console: {bind_refusal(host, False)}")
        factory: Any = self.site
        if tls is not None:
            from twisted.protocols.tls import TLSMemoryBIOFactory

            factory = TLSMemoryBIOFactory(tls, False, self.site)
        self._port = reactor.listenTCP(port, factory, interface=host)
        self.sampler.start()
        address = self._port.getHost()
        return f"console={address.host}:{address.port}"

    def set_listeners(self, addresses: list[str]) -> None:
        """The broker's ``name=host:port`` listener descriptions, for the overview."""
        self.data.listeners.clear()
        self.data.listeners.update(a.split("=", 1) for a in addresses if "=" in a)

    def stop(self, passthrough: Any = None) -> Deferred[Any]:
        """Stop sampling and listening; fires with ``passthrough``."""
        self.sampler.stop()
        port, self._port = self._port, None
        if port is None:
            return succeed(passthrough)
        return maybeDeferred(port.stopListening).addBoth(lambda _: passthrough)
