"""A Twisted client of etcd v3's JSON gateway: leases, range, txn and watch, over several
endpoints.

Owns: ``EtcdClient`` (unary calls with endpoint rotation and the three outcomes of a write:
done, refused by etcd, or *unknown*), ``LeaseKeeper`` (keepalive every ttl/3 on the injected
clock, the last good keepalive for ``fence_writes_on_session_loss``), ``Watch`` (a streamed
watch that resumes from the revision after the last one it delivered when its member dies,
and reports compaction), the gateway encoding of ``replication.control.txn`` values, and
``TreqTransport`` (the real HTTP transport over ``treq``). The contract: the spec's "Why
etcd, and how to reach it".

Gateway quirks handled here, and only here: keys and values are base64; 64-bit ints arrive
as JSON strings; false and zero fields are omitted (``succeeded`` missing = false, a
keepalive without ``TTL`` = the lease is gone); a watch from a compacted revision is
answered ``canceled`` with ``compact_revision``; a write whose answer never came may have
committed (``OutcomeUnknown``: read again before retrying).

Retry rule: a call that certainly did not reach etcd (connection refused, DNS, no route)
or that etcd answered with a 5xx (no leader, not capable...) moves to the next endpoint and
is sent again, at most ``rounds`` times round the list with ``retry_delay`` between rounds.
A *write* (txn, put, revoke) that timed out or lost its connection after sending is never
resent: it raises ``OutcomeUnknown``. Reads and keepalives are resent.

Must not import: the global reactor (``clock`` and the transport are injected), the
transports (``broker.v1``...), the store. The control plane's decisions live in
``replication.control``; this module only carries them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from OpenSSL import SSL
from twisted.internet import protocol
from twisted.internet.defer import Deferred, succeed
from twisted.internet.error import ConnectError, DNSLookupError
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.task import LoopingCall, deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.client import (
    PotentialDataLoss,
    RequestTransmissionFailed,
    ResponseDone,
    ResponseNeverReceived,
)

from replication.control.keys import prefix_range_end
from replication.control.txn import Compare, Delete, Get, Op, Put, Target, Txn

__all__ = [
    "EtcdError",
    "EtcdUnavailable",
    "OutcomeUnknown",
    "LeaseNotFound",
    "HttpTransport",
    "KeyValue",
    "Header",
    "RangeResult",
    "TxnResult",
    "WatchEvent",
    "EtcdClient",
    "LeaseKeeper",
    "Watch",
    "TreqTransport",
    "encode_txn",
]

_log = Logger()


class EtcdError(Exception):
    """etcd answered and refused (a 4xx, or an error document): ``code`` is the gRPC code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"etcd: {message} (code {code})")
        self.code = code
        self.message = message


class LeaseNotFound(EtcdError):
    """The lease does not exist (expired or revoked)."""


class EtcdUnavailable(Exception):
    """No endpoint answered the call (each one refused, failed or answered 5xx); the call
    certainly was not applied, or was a read."""


class OutcomeUnknown(Exception):
    """A write was sent and no answer came (timeout, connection lost): it may have
    committed. Read the keys again before deciding to retry."""


class HttpTransport(Protocol):
    """What the client needs of HTTP: a POST answered with (status, body), and a POST whose
    body streams to ``on_chunk``. ``stream`` returns (a Deferred firing when the stream
    ends, a cancel function). ``TreqTransport`` is the real one; tests use a fake."""

    def post(self, url: str, body: bytes) -> Deferred[tuple[int, bytes]]: ...

    def stream(self, url: str, body: bytes, on_chunk: Callable[[bytes], None]
               ) -> tuple[Deferred[None], Callable[[], None]]: ...


# --- decoding ---------------------------------------------------------------------------

def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: Any) -> bytes:
    return base64.b64decode(text) if text else b""


def _int(value: Any) -> int:
    """A gateway int: a JSON string (64-bit), a number, or omitted (zero)."""
    return int(value) if value not in (None, "") else 0


@dataclass(frozen=True, slots=True)
class Header:
    """The response header: the store ``revision`` after the call and etcd's Raft term
    (the admin replies' ``index`` and ``term``)."""

    revision: int
    raft_term: int
    member_id: int

    @classmethod
    def from_json(cls, doc: Any) -> Header:
        doc = doc or {}
        return cls(_int(doc.get("revision")), _int(doc.get("raft_term")),
                   _int(doc.get("member_id")))


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> KeyValue:
        return cls(_unb64(doc.get("key")).decode(), _unb64(doc.get("value")),
                   _int(doc.get("create_revision")), _int(doc.get("mod_revision")),
                   _int(doc.get("version")), _int(doc.get("lease")))


@dataclass(frozen=True, slots=True)
class RangeResult:
    header: Header
    kvs: tuple[KeyValue, ...]

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RangeResult:
        return cls(Header.from_json(doc.get("header")),
                   tuple(KeyValue.from_json(kv) for kv in doc.get("kvs", [])))


@dataclass(frozen=True, slots=True)
class TxnResult:
    """``succeeded``: the compares held. ``reads[i]``: the kvs of the i-th op of the branch
    taken when it was a ``Get`` (``None`` for puts and deletes)."""

    header: Header
    succeeded: bool
    reads: tuple[tuple[KeyValue, ...] | None, ...]


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """``kv.value`` is empty for a deletion; ``kv.mod_revision`` is the event's revision."""

    deleted: bool
    kv: KeyValue


# --- encoding ---------------------------------------------------------------------------

def _key_range(key: str, prefix: bool) -> dict[str, str]:
    raw = key.encode()
    doc = {"key": _b64(raw)}
    if prefix:
        doc["range_end"] = _b64(prefix_range_end(raw))
    return doc


_COMPARE_FIELD = {Target.VERSION: "version", Target.CREATE: "create_revision",
                  Target.MOD: "mod_revision", Target.VALUE: "value", Target.LEASE: "lease"}


def _encode_compare(c: Compare) -> dict[str, str]:
    value = _b64(c.value) if isinstance(c.value, bytes) else str(c.value)
    return {"key": _b64(c.key.encode()), "target": c.target.value, "result": c.op.value,
            _COMPARE_FIELD[c.target]: value}


def _encode_op(op: Op) -> dict[str, Any]:
    match op:
        case Put(key, value, lease):
            put = {"key": _b64(key.encode()), "value": _b64(value)}
            if lease:
                put["lease"] = str(lease)
            return {"request_put": put}
        case Get(key, prefix):
            return {"request_range": _key_range(key, prefix)}
        case Delete(key, prefix):
            return {"request_delete_range": _key_range(key, prefix)}
    raise TypeError(f"not a txn op: {op!r}")


def encode_txn(txn: Txn) -> dict[str, Any]:
    """The gateway's ``TxnRequest`` JSON for ``txn``."""
    return {"compare": [_encode_compare(c) for c in txn.compare],
            "success": [_encode_op(op) for op in txn.success],
            "failure": [_encode_op(op) for op in txn.failure]}


def _decode_txn(doc: dict[str, Any]) -> TxnResult:
    reads: list[tuple[KeyValue, ...] | None] = []
    for response in doc.get("responses", []):
        rng = response.get("response_range")
        reads.append(None if rng is None else RangeResult.from_json(rng).kvs)
    return TxnResult(Header.from_json(doc.get("header")), bool(doc.get("succeeded")),
                     tuple(reads))


_HANDSHAKE_REFUSALS = ("certificate", "unknown ca", "handshake failure")
"""Words of OpenSSL errors that only a TLS handshake raises (a certificate refused by
either side): no request byte was sent yet."""


def _sure_not_sent(failure: Failure) -> bool:
    """The request never reached etcd: the connection was not made, or its TLS handshake
    failed (a wrong CA or a missing client certificate)."""
    if failure.check(ConnectError, DNSLookupError) is not None:
        return True
    reasons = getattr(failure.value, "reasons", None)
    if failure.check(ResponseNeverReceived, RequestTransmissionFailed) is None or not reasons:
        return False
    return all(r.check(SSL.Error) is not None
               and any(w in str(r.value).lower() for w in _HANDSHAKE_REFUSALS)
               for r in reasons)


# --- the client -------------------------------------------------------------------------

class EtcdClient:
    """Unary gateway calls over ``endpoints`` (``http://host:port``), on ``clock``.

    The endpoint in use stays until a call to it fails; then the next one is used.
    """

    def __init__(self, endpoints: Sequence[str], clock: IReactorTime,
                 transport: HttpTransport, *, request_timeout: float = 2.0,
                 rounds: int = 3, retry_delay: float = 0.25) -> None:
        if not endpoints:
            raise ValueError("etcd needs at least one endpoint")
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.clock = clock
        self.transport = transport
        self.request_timeout = request_timeout
        self.rounds = rounds
        self.retry_delay = retry_delay
        self._current = 0

    @property
    def endpoint(self) -> str:
        """The endpoint the next call goes to."""
        return self.endpoints[self._current]

    def rotate(self) -> None:
        self._current = (self._current + 1) % len(self.endpoints)

    async def call(self, path: str, body: dict[str, Any], *, write: bool) -> dict[str, Any]:
        """POST ``body`` to ``path``; the answer's JSON document (module docstring for the
        retry rule)."""
        payload = json.dumps(body).encode()
        last = "no attempt"
        for attempt in range(self.rounds * len(self.endpoints)):
            if attempt and attempt % len(self.endpoints) == 0:
                await deferLater(self.clock, self.retry_delay, lambda: None)
            url = self.endpoint + path
            d = self.transport.post(url, payload)
            d.addTimeout(self.request_timeout, self.clock)
            try:
                status, raw = await d
            except Exception:  # noqa: BLE001 - sorted into not-sent / maybe-sent below
                failure = Failure()
                self.rotate()
                last = f"{url}: {failure.getErrorMessage() or failure.type.__name__}"
                if write and not _sure_not_sent(failure):
                    raise OutcomeUnknown(f"no answer from {url} to a write: {last}") from None
                continue
            if status >= 500:
                self.rotate()
                last = f"{url}: HTTP {status} {raw[:200]!r}"
                continue
            try:
                doc = json.loads(raw)
            except ValueError:
                raise EtcdError(2, f"{url}: not JSON: {raw[:200]!r}") from None
            error = doc.get("error") if isinstance(doc, dict) else None
            if status >= 400 or error:
                code = _int(doc.get("code"))
                message = doc.get("message") or str(error)
                cls = LeaseNotFound if "lease not found" in message else EtcdError
                raise cls(code, message)
            return doc
        raise EtcdUnavailable(f"no etcd endpoint answered {path}; last: {last}")

    # --- leases ---

    async def grant(self, ttl: int, lease_id: int = 0) -> tuple[int, int]:
        """A new lease: (its id, its TTL in seconds as etcd granted it, >= 2)."""
        body: dict[str, Any] = {"TTL": str(ttl)}
        if lease_id:
            body["ID"] = str(lease_id)
        doc = await self.call("/v3/lease/grant", body, write=True)
        return _int(doc.get("ID")), _int(doc.get("TTL"))

    async def keepalive(self, lease_id: int) -> int:
        """Refresh the lease; its remaining TTL. ``LeaseNotFound`` when it is gone."""
        doc = await self.call("/v3/lease/keepalive", {"ID": str(lease_id)}, write=False)
        result = doc.get("result", doc)
        ttl = _int(result.get("TTL"))
        if ttl <= 0:
            raise LeaseNotFound(5, f"lease {lease_id:x} expired")
        return ttl

    async def revoke(self, lease_id: int) -> Header:
        """Revoke the lease: its keys are deleted at once. ``LeaseNotFound`` if it is gone."""
        doc = await self.call("/v3/lease/revoke", {"ID": str(lease_id)}, write=True)
        return Header.from_json(doc.get("header"))

    # --- keys ---

    async def range(self, key: str, *, prefix: bool = False) -> RangeResult:
        """The key (or every key under the prefix) and the revision it was read at."""
        doc = await self.call("/v3/kv/range", _key_range(key, prefix), write=False)
        return RangeResult.from_json(doc)

    async def put(self, key: str, value: bytes, lease: int = 0) -> Header:
        body = {"key": _b64(key.encode()), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        return Header.from_json((await self.call("/v3/kv/put", body, write=True)).get("header"))

    async def txn(self, txn: Txn) -> TxnResult:
        """Run the txn. ``OutcomeUnknown``: it may or may not have been applied. A txn
        without puts or deletes is a read, and is resent like one."""
        write = any(not isinstance(op, Get) for op in (*txn.success, *txn.failure))
        return _decode_txn(await self.call("/v3/kv/txn", encode_txn(txn), write=write))

    def watch(self, key: str, on_events: Callable[[list[WatchEvent]], None], *,
              prefix: bool = False, start_revision: int = 0,
              on_compacted: Callable[[int], None] | None = None) -> Watch:
        """Start a ``Watch`` (its docstring) of ``key`` or of its prefix."""
        watch = Watch(self, key, prefix, start_revision, on_events, on_compacted)
        watch.start()
        return watch


class Watch:
    """A watch that outlives the member serving it.

    It delivers events in revision order to ``on_events`` and remembers the revision after
    the last one delivered; when the stream ends or fails (the member died, a proxy cut it),
    it moves to the next endpoint and opens the watch again from that revision, so no event
    is lost or repeated. Reopening waits ``retry_delay`` (doubling up to 2 s) on the clock.

    A start revision etcd has compacted is answered ``canceled`` with ``compact_revision``:
    the watch stops and ``on_compacted(compact_revision)`` runs (read the keys again, then
    watch from the read's revision + 1).
    """

    MAX_DELAY = 2.0

    def __init__(self, client: EtcdClient, key: str, prefix: bool, start_revision: int,
                 on_events: Callable[[list[WatchEvent]], None],
                 on_compacted: Callable[[int], None] | None) -> None:
        self.client = client
        self.key = key
        self.prefix = prefix
        self.next_revision = start_revision
        self.on_events = on_events
        self.on_compacted = on_compacted
        self.reopened = 0
        self.stopped = False
        self.compacted_at = 0
        self._buffer = b""
        self._close_requested = False
        self._cancel: Callable[[], None] = self._request_close
        self._delay = client.retry_delay
        self._pending: IDelayedCall | None = None

    def start(self) -> None:
        self._cancel = self._request_close
        request: dict[str, Any] = _key_range(self.key, self.prefix)
        if self.next_revision:
            request["start_revision"] = str(self.next_revision)
        self._buffer = b""
        url = self.client.endpoint + "/v3/watch"
        self._close_requested = False
        done, cancel = self.client.transport.stream(
            url, json.dumps({"create_request": request}).encode(), self._chunk)
        self._cancel = cancel
        done.addBoth(self._ended, url)
        if self._close_requested:   # the answer came before the transport handed us cancel
            cancel()

    def cancel(self) -> None:
        """Stop watching (idempotent)."""
        self.stopped = True
        if self._pending is not None and self._pending.active():
            self._pending.cancel()
        self._cancel()

    def _chunk(self, data: bytes) -> None:
        self._buffer += data
        while not self.stopped and b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            if line.strip():
                self._line(line)

    def _line(self, line: bytes) -> None:
        doc = json.loads(line)
        if "error" in doc:
            _log.warn("etcd watch of {key} failed: {error}", key=self.key, error=doc["error"])
            self._cancel()      # ends the stream; _ended reopens it elsewhere
            return
        result = doc.get("result", {})
        if result.get("created") and not self.next_revision:
            self.next_revision = Header.from_json(result.get("header")).revision + 1
        if result.get("canceled"):
            compact = _int(result.get("compact_revision"))
            if compact:
                self.compacted_at = compact
                self.stopped = True
                self._cancel()
                if self.on_compacted is not None:
                    self.on_compacted(compact)
                return
            self._cancel()
            return
        events = []
        for ev in result.get("events", []):
            kv = KeyValue.from_json(ev.get("kv", {}))
            if kv.mod_revision < self.next_revision:
                continue    # already delivered before a reconnection
            events.append(WatchEvent(ev.get("type") == "DELETE", kv))
        if events:
            self._delay = self.client.retry_delay
            self.next_revision = events[-1].kv.mod_revision + 1
            self.on_events(events)

    def _ended(self, result: Any, url: str) -> None:
        if self.stopped:
            return
        reason = result.getErrorMessage() if isinstance(result, Failure) else "stream ended"
        _log.info("etcd watch of {key} via {url} ended ({reason}); reopening from {rev}",
                  key=self.key, url=url, reason=reason, rev=self.next_revision)
        self.client.rotate()
        self.reopened += 1
        self._pending = self.client.clock.callLater(self._delay, self._reopen)
        self._delay = min(self._delay * 2, self.MAX_DELAY)

    def _request_close(self) -> None:
        self._close_requested = True

    def _reopen(self) -> None:
        self._pending = None
        if not self.stopped:
            self.start()


class LeaseKeeper:
    """Keeps one lease alive: a keepalive every ``ttl / 3`` seconds on the client's clock.

    ``last_good`` is when the last keepalive answered (clock seconds); ``expires_by`` is
    ``last_good + ttl``, after which etcd may have expired the lease (what
    ``fence_writes_on_session_loss`` compares with). A keepalive that finds the lease gone
    stops the keeper and calls ``on_lost`` once; failures to reach etcd are logged and the
    next tick tries again (the lease is then "frozen", not lost).
    """

    def __init__(self, client: EtcdClient, lease_id: int, ttl: int,
                 on_lost: Callable[[int], None]) -> None:
        self.client = client
        self.lease_id = lease_id
        self.ttl = ttl
        self.on_lost = on_lost
        self.last_good = client.clock.seconds()
        self.failures = 0
        self.lost = False
        self._loop = LoopingCall(self._tick)
        self._loop.clock = client.clock

    @property
    def expires_by(self) -> float:
        return self.last_good + self.ttl

    def start(self) -> None:
        self._loop.start(self.ttl / 3, now=False)

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()

    async def _keepalive(self) -> None:
        try:
            await self.client.keepalive(self.lease_id)
        except LeaseNotFound:
            self.lost = True
            self.stop()
            self.on_lost(self.lease_id)
        except Exception as exc:  # noqa: BLE001 - unreachable etcd: try at the next tick
            self.failures += 1
            _log.warn("etcd keepalive of lease {lease:x} failed: {exc}",
                      lease=self.lease_id, exc=exc)
        else:
            self.last_good = self.client.clock.seconds()

    def _tick(self) -> Deferred[None]:
        return Deferred.fromCoroutine(self._keepalive())


# --- the real transport -----------------------------------------------------------------

class TreqTransport:
    """``HttpTransport`` over ``treq`` on ``reactor``, one TCP connection per call.

    Why not a persistent pool: a pooled connection to a member that just died fails *after*
    the request was written (``ResponseNeverReceived``), which for a write is an unknown
    outcome; a fresh connection to a dead member is refused, which is certainly "not sent"
    and moves on to the next endpoint. etcd calls are few (a keepalive every ttl/3, ISR and
    leadership changes), so the extra handshake costs nothing that matters.

    TLS (``https://`` endpoints): ``ca`` is the CA file etcd's server certificates chain to
    (each endpoint's certificate must name its host, DNS name or IP address); ``cert`` and
    ``key`` are this broker's client certificate for etcd's ``--client-cert-auth``.

    etcd authentication (``user`` and ``password``, for a role limited to the cluster's
    prefix): the JSON gateway ignores the client certificate's CN (and etcd 3.4 refuses a
    certificate *with* a CN once authentication is on), so the broker logs in with
    ``/v3/auth/authenticate`` and sends the token in ``Authorization``. A call answered
    "invalid auth token" (the token expired, ``--auth-token-ttl``) logs in again and is
    sent once more: etcd refused it before applying anything. The password and the token
    are never logged.
    """

    def __init__(self, reactor: Any, *, ca: str | None = None, cert: str | None = None,
                 key: str | None = None, user: str | None = None,
                 password: str | None = None) -> None:
        import treq
        from twisted.web.client import Agent, HTTPConnectionPool

        self._pool = HTTPConnectionPool(reactor, persistent=False)
        self._pool.retryAutomatically = False   # a resent write is our decision, not theirs
        if ca is not None or cert is not None:
            from broker.tls import ClientTLS, HttpsPolicy, TLSConfigError

            if ca is None:
                raise TLSConfigError("cluster.etcd.ca: required with a client certificate "
                                     "(the CA that signed etcd's server certificates)")
            agent = Agent(reactor, pool=self._pool, contextFactory=HttpsPolicy(
                ClientTLS(ca, cert, key, what="cluster.etcd.ca")))
        else:
            agent = Agent(reactor, pool=self._pool)
        self._http = treq.client.HTTPClient(agent)
        if (user is None) != (password is None):
            raise ValueError("etcd authentication needs both a user and a password")
        self._login = None if user is None else json.dumps(
            {"name": user, "password": password}).encode()
        self._token: str | None = None
        self.logins = 0
        """Successful logins so far (one, plus one per expired token)."""
        self._logging_in: list[Deferred[str | None]] | None = None

    def _headers(self, token: str | None) -> dict[bytes, list[bytes]]:
        headers = {b"Content-Type": [b"application/json"]}
        if token is not None:
            headers[b"Authorization"] = [token.encode("ascii")]
        return headers

    def _token_for(self, url: str) -> Deferred[str | None]:
        """The auth token (logging in at ``url``'s member when there is none); None without
        authentication."""
        if self._login is None or self._token is not None:
            return succeed(self._token)
        waiter: Deferred[str | None] = Deferred()
        if self._logging_in is not None:
            self._logging_in.append(waiter)
            return waiter
        self._logging_in = [waiter]
        base = url.split("/v3/", 1)[0]
        d = self._http.post(base + "/v3/auth/authenticate", data=self._login,
                            headers=self._headers(None))

        def read(response: Any) -> Deferred[tuple[int, bytes]]:
            return response.content().addCallback(lambda raw: (response.code, raw))

        def done(result: Any) -> None:
            waiters, self._logging_in = self._logging_in or [], None
            if not isinstance(result, Failure):
                status, raw = result
                try:
                    doc = json.loads(raw)
                except ValueError:
                    doc = {}
                token = doc.get("token") if isinstance(doc, dict) else None
                if status == 200 and token:
                    self._token = token
                    self.logins += 1
                    result = token
                else:   # etcd's own answer (wrong password...), for the caller to read
                    result = Failure(_LoginRefused(status, raw))
            for w in waiters:
                w.errback(result) if isinstance(result, Failure) else w.callback(result)

        d.addCallback(read).addBoth(done)
        return waiter

    def post(self, url: str, body: bytes) -> Deferred[tuple[int, bytes]]:
        def send(token: str | None) -> Deferred[tuple[int, bytes]]:
            return self._http.post(url, data=body, headers=self._headers(token)) \
                .addCallback(read)

        def read(response: Any) -> Deferred[tuple[int, bytes]]:
            return response.content().addCallback(lambda raw: (response.code, raw))

        def again_if_expired(result: tuple[int, bytes], token: str | None
                             ) -> Any:
            status, raw = result
            if status == 401 and self._login is not None and b"invalid auth token" in raw:
                if self._token == token:
                    self._token = None
                return self._token_for(url).addCallback(send)
            return result

        def refused(failure: Failure) -> tuple[int, bytes]:
            failure.trap(_LoginRefused)
            return failure.value.status, failure.value.body

        return self._token_for(url).addCallback(
            lambda token: send(token).addCallback(again_if_expired, token)
        ).addErrback(refused)

    def stream(self, url: str, body: bytes, on_chunk: Callable[[bytes], None]
               ) -> tuple[Deferred[None], Callable[[], None]]:
        done: Deferred[None] = Deferred()
        body_reader = _StreamBody(on_chunk, done)
        requests: list[Deferred[Any]] = []

        def receive(response: Any) -> None:
            if response.code != 200:
                if response.code == 401:
                    self._token = None      # log in again before the watch reopens
                body_reader.fail_status(response.code)
            response.deliverBody(body_reader)

        def failed(failure: Failure) -> None:
            if not done.called:
                done.errback(failure)

        def start(token: str | None) -> None:
            if body_reader.cancelled:
                return
            request = self._http.post(url, data=body, unbuffered=True,
                                      headers=self._headers(token))
            requests.append(request)
            request.addCallbacks(receive, failed)

        self._token_for(url).addCallbacks(start, failed)

        def cancel() -> None:
            body_reader.cancelled = True
            for request in requests:
                if not request.called:
                    request.cancel()
            body_reader.stop()
            if not done.called:
                done.callback(None)

        return done, cancel

    def close(self) -> Deferred[None]:
        return self._pool.closeCachedConnections()


class _LoginRefused(Exception):
    """etcd answered ``/v3/auth/authenticate`` without a token: its answer is handed on as
    the answer to the call that needed the login (``EtcdClient`` raises its error)."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"etcd refused the login (HTTP {status})")
        self.status = status
        self.body = body


class _StreamBody(protocol.Protocol):
    """A streamed response body handed chunk by chunk to ``on_chunk``; ``stop`` closes the
    connection."""

    def __init__(self, on_chunk: Callable[[bytes], None], done: Deferred[None]) -> None:
        self.on_chunk = on_chunk
        self.done = done
        self.cancelled = False
        self._status = 0

    def fail_status(self, status: int) -> None:
        self._status = status

    def dataReceived(self, data: bytes) -> None:
        if self._status or self.cancelled:
            return
        self.on_chunk(data)

    def stop(self) -> None:
        if self.transport is not None:
            self.transport.stopProducing()

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        if self.done.called:
            return
        if self._status:
            self.done.errback(Failure(EtcdError(14, f"watch answered HTTP {self._status}")))
        elif self.cancelled or reason.check(ResponseDone, PotentialDataLoss):
            self.done.callback(None)
        else:
            self.done.errback(reason)
