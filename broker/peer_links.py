"""The broker's V1 links to the other brokers of a cluster: the cluster commands' requests and
reply parsers (on the shared client codec), ``PeerProtocol`` (pipelined V1 requests, replies
in order), ``tcp_connector`` (TCP or verified TLS), ``authenticating`` (``AUTH`` as the peer
user first), ``Peers`` (one shared connection per broker, dedicated ones for long polls; the
group forwarding uses it too) and ``V1ReplicaLinks``, which fills the follower's port
``replication.follower.links.ReplicaLinks`` with ``REPLICA_EPOCH`` and ``REPLICA_PULL`` and
turns the answers into the domain's values and errors (the one place V1 codes from a peer
become ``replication.errors`` classes).

Must not import: the global reactor (the clock and the ``Connector`` are injected), the
store, ``broker.services.replication``, the server side of V1 (``broker.v1``).
"""

from __future__ import annotations

import binascii
import itertools
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from twisted.internet.defer import Deferred, fail, maybeDeferred, succeed
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import Factory
from twisted.internet.protocol import Protocol as TwistedProtocol
from twisted.python.failure import Failure

from broker.client.codec import (
    BrokerError,
    BrokerInternalError,
    NotLeaderError,
    ProtocolViolation,
    Reply,
    UnauthenticatedError,
    UnavailableError,
    bool_field,
    encode_request,
    int_field,
    int_list_field,
    list_field,
    parse_reply,
    payload_fields,
)
from replication.cluster import BrokerAddress, ClusterConfig
from replication.epochs import EpochEntry
from replication.errors import (
    MalformedPeerReply,
    NotLeader,
    PeerCannotAnswer,
    PeerError,
    PeerNotAuthenticated,
    PeerRefusal,
)
from replication.roles import Role
from replication.wire import EpochReply, PullReply

__all__ = ["MAX_REPLY_BYTES", "Connector", "PeerProtocol", "PeerRefused", "Peers",
           "V1ReplicaLinks", "authenticating", "epoch_request", "parse_epoch_reply",
           "RawReply", "parse_pull_raw_reply", "parse_pull_reply", "pull_request",
           "tcp_connector"]

log = logging.getLogger("skerry.follower")


MAX_REPLY_BYTES = 256 * 1024 * 1024
"""A reply line longer than this drops the connection (a pull answer is a few MiB)."""


# ---------------------------------------------------------------------------- cluster commands
# Requests and replies on the shared client codec (``broker.client.codec``); the broker's side
# of both is ``broker.v1.codec``.


def pull_request(cid: str, topic: str, partition: int, replica_id: int, offset: int,
                 epoch: int, *, wait_ms: int | None = None,
                 max_bytes: int | None = None, raw: bool = False) -> bytes:
    """A ``REPLICA_PULL`` request line, with its ``\\n`` (``raw``: asks ``enc=raw``, the
    records as raw bytes after the reply line)."""
    options = ""
    if wait_ms is not None:
        options += f" wait_ms={wait_ms}"
    if max_bytes is not None:
        options += f" max_bytes={max_bytes}"
    if raw:
        options += " enc=raw"
    return encode_request(cid, "REPLICA_PULL",
                          f"{topic} {partition} {replica_id} {offset} {epoch}{options}")


def epoch_request(cid: str, topic: str, partition: int, replica_id: int, epoch: int,
                  last_epoch: int | None) -> bytes:
    """A ``REPLICA_EPOCH`` request line, with its ``\\n`` (no ``last_epoch=`` when the
    asker's log has no history)."""
    option = "" if last_epoch is None or last_epoch < 0 else f" last_epoch={last_epoch}"
    return encode_request(cid, "REPLICA_EPOCH",
                          f"{topic} {partition} {replica_id} {epoch}{option}")


def parse_pull_reply(payload: str | bytes) -> PullReply:
    """A leader's REPLICA_PULL payload; ``ProtocolViolation`` when a field is missing or the
    data does not match its count."""
    text = payload.decode() if isinstance(payload, bytes) else payload
    head, sep, data = text.partition(" data=")
    if not sep:
        raise ProtocolViolation("REPLICA_PULL reply without data=")
    try:
        raw = binascii.a2b_base64(data, strict_mode=True) if data else b""
    except binascii.Error as exc:
        raise ProtocolViolation(f"REPLICA_PULL data= is not base64: {exc}") from None
    return _pull_fields(head, raw)


def parse_pull_raw_reply(payload: str | bytes, body: bytes) -> PullReply:
    """A leader's REPLICA_PULL ``enc=raw`` payload (its line, ending ``size=<n>``) and the
    ``body`` of raw bytes that followed it; ``ProtocolViolation`` when a field is missing,
    ``size`` is not the body's length or the data does not match its count."""
    text = payload.decode() if isinstance(payload, bytes) else payload
    head, sep, size = text.rpartition(" size=")
    if not sep:
        raise ProtocolViolation("REPLICA_PULL enc=raw reply without size=")
    if not (size.isascii() and size.isdigit()) or int(size) != len(body):
        raise ProtocolViolation(f"REPLICA_PULL size={size[:20]!r} with {len(body)} bytes")
    return _pull_fields(head, body)


def _pull_fields(head: str, raw: bytes) -> PullReply:
    fields = payload_fields(head)
    count = int_field(fields, "count")
    if (count == 0) != (not raw):
        raise ProtocolViolation(f"REPLICA_PULL count={count} with {len(raw)} data bytes")
    epochs = []
    for item in list_field(fields, "epochs"):
        epoch, colon, start = item.partition(":")
        if not (colon and epoch.isdigit() and start.isdigit()):
            raise ProtocolViolation(f"bad epoch entry {item!r}")
        epochs.append(EpochEntry(int(epoch), int(start)))
    return PullReply(int_field(fields, "epoch"), int_field(fields, "hw"),
                     int_field(fields, "leo"), int_field(fields, "start"),
                     int_list_field(fields, "isr"), tuple(epochs), count, raw)


def parse_epoch_reply(payload: str | bytes) -> EpochReply:
    """A replica's REPLICA_EPOCH payload; ``ProtocolViolation`` for an unknown role, a
    missing field or a non-boolean ``confirmed``."""
    fields = payload_fields(payload)
    role = fields.get("role")
    if role not in ("leader", "follower"):
        raise ProtocolViolation(f"REPLICA_EPOCH reply with role={role!r}")
    return EpochReply(Role(role), int_field(fields, "epoch"), bool_field(fields, "confirmed"),
                      int_field(fields, "end_epoch"), int_field(fields, "end_offset"),
                      int_field(fields, "leo"), int_field(fields, "hw"))


# ---------------------------------------------------------------------------- connections


class RawReply(NamedTuple):
    """A reply to an ``enc=raw`` request: the reply line and the raw bytes after it."""

    reply: Reply
    body: bytes


def _tail_size(payload: str) -> int | None:
    """The ``size=<n>`` that ends a raw reply's line; None when it is missing, not a
    number or more than ``MAX_REPLY_BYTES``."""
    _head, sep, size = payload.rpartition(" size=")
    if not sep or not size.isdigit() or not size.isascii():
        return None
    n = int(size)
    return n if n <= MAX_REPLY_BYTES else None


class PeerProtocol(TwistedProtocol):
    """A V1 client connection: ``request`` writes one line and returns a Deferred for its
    reply. Replies come back in request order; each must echo its correlation id. A reply
    that does not, or a connection loss, fails every outstanding request and closes the
    connection. Cancelling a request closes the connection too (a late reply would be
    matched to the wrong request otherwise)."""

    def __init__(self) -> None:
        self._pending: deque[tuple[str, Deferred[Any], bool]] = deque()
        self._parts: list[bytes] = []
        self._size = 0
        self._tail: tuple[Reply, Deferred[Any]] | None = None
        """An OK reply whose ``size`` raw bytes are still arriving, and its Deferred."""
        self._tail_parts: list[bytes] = []
        self._tail_need = 0
        self._seq = itertools.count(1)
        self.lost = False
        self.on_lost: Callable[[PeerProtocol], None] | None = None
        self.cid_prefix = ""
        """Put before every correlation id this connection sends (forwarded group
        commands: ``fwd-``, which the receiving broker never forwards again)."""

    def connectionMade(self) -> None:
        set_no_delay = getattr(self.transport, "setTcpNoDelay", None)
        if set_no_delay is not None:
            try:
                set_no_delay(True)
            except OSError:
                pass

    def request(self, build: Callable[[str], bytes]) -> Deferred[Reply]:
        """Send ``build(cid)`` (a whole line with its newline) and wait for its reply."""
        if self.lost:
            return fail(ConnectionDone("connection to the peer is closed"))
        cid = self.cid_prefix + str(next(self._seq))
        d: Deferred[Reply] = Deferred(lambda _d: self.close(abort=True))
        self._pending.append((cid, d, False))
        self.transport.write(build(cid))
        return d

    def request_raw(self, build: Callable[[str], bytes]) -> Deferred[RawReply]:
        """``request`` for a command asked with ``enc=raw``: an OK reply line ends with
        ``size=<n>`` and exactly ``n`` raw bytes follow it (they may arrive over many
        reads); the answer is the reply with those bytes (``b""`` for an ERR reply, which
        has none). A size that is missing or too big drops the connection."""
        if self.lost:
            return fail(ConnectionDone("connection to the peer is closed"))
        cid = self.cid_prefix + str(next(self._seq))
        d: Deferred[RawReply] = Deferred(lambda _d: self.close(abort=True))
        self._pending.append((cid, d, True))
        self.transport.write(build(cid))
        return d

    def dataReceived(self, data: bytes) -> None:
        start = 0
        while not self.lost:
            if self._tail is not None:
                start = self._take_tail(data, start)
                if self._tail is not None:
                    return
                continue
            end = data.find(b"\n", start)
            if end < 0:
                break
            if self._parts:
                self._parts.append(data[start:end])
                line = b"".join(self._parts)
                self._parts.clear()
                self._size = 0
            else:
                line = data[start:end]
            start = end + 1
            self._line(line)
        if start < len(data) and not self.lost:
            rest = data[start:]
            self._parts.append(rest)
            self._size += len(rest)
            if self._size > MAX_REPLY_BYTES:
                log.error("reply from peer longer than %d bytes; closing", MAX_REPLY_BYTES)
                self.close(abort=True)

    def _line(self, line: bytes) -> None:
        if not self._pending:
            log.error("unexpected reply from peer: %r", line[:80])
            self.close(abort=True)
            return
        try:
            reply = parse_reply(line)
        except ProtocolViolation as exc:
            log.error("bad reply from peer: %s", exc)
            self.close(abort=True)
            return
        cid, d, raw = self._pending[0]
        if reply.cid != cid:
            log.error("reply for cid %s while waiting for %s; closing", reply.cid, cid)
            self.close(abort=True)
            return
        self._pending.popleft()
        if not raw:
            d.callback(reply)
        elif not reply.ok:
            d.callback(RawReply(reply, b""))
        else:
            size = _tail_size(reply.payload)
            if size is None:
                log.error("raw reply from peer without a valid size=: %r", line[:120])
                self._pending.appendleft((cid, d, raw))  # failed by the close below
                self.close(abort=True)
                return
            self._tail = (reply, d)
            self._tail_need = size
            if size == 0:
                self._take_tail(b"", 0)

    def _take_tail(self, data: bytes, start: int) -> int:
        """Take the raw bytes the current reply still needs from ``data[start:]``; answer
        it once they are all there. Returns where the next reply starts in ``data``."""
        need = self._tail_need
        stop = min(len(data), start + need)
        if stop > start:
            self._tail_parts.append(data[start:stop] if start or stop < len(data) else data)
            self._tail_need = need - (stop - start)
        if self._tail_need == 0 and self._tail is not None:
            reply, d = self._tail
            parts = self._tail_parts
            body = parts[0] if len(parts) == 1 else b"".join(parts)
            self._tail = None
            self._tail_parts = []
            d.callback(RawReply(reply, body))
        return stop

    def close(self, *, abort: bool = False) -> None:
        """Close the connection; outstanding requests fail."""
        if self.transport is None:
            return
        if abort and hasattr(self.transport, "abortConnection"):
            self.transport.abortConnection()
        else:
            self.transport.loseConnection()
        self._lose(ConnectionDone("connection closed by this broker"))

    def connectionLost(self, reason: Failure | None = None) -> None:
        self._lose(reason.value if reason is not None else ConnectionDone())

    def _lose(self, error: BaseException) -> None:
        if self.lost:
            return
        self.lost = True
        pending, self._pending = self._pending, deque()
        if self._tail is not None:
            tail_d = self._tail[1]
            self._tail = None
            self._tail_parts = []
            if not tail_d.called:
                tail_d.errback(Failure(error))
        for _cid, d, _raw in pending:
            if not d.called:
                d.errback(Failure(error))
        if self.on_lost is not None:
            self.on_lost(self)


Connector = Callable[[BrokerAddress], "Deferred[PeerProtocol]"]
"""Opens a ``PeerProtocol`` connection to a broker (TCP in the broker, in memory in tests)."""


class _PeerFactory(Factory):
    protocol = PeerProtocol

    def buildProtocol(self, addr: Any) -> PeerProtocol:
        return PeerProtocol()


def tcp_connector(reactor: Any, timeout_s: float,
                  tls_for: Callable[[str], Any] | None = None) -> Connector:
    """A ``Connector`` over TCP with a connect timeout; over TLS when ``tls_for`` is given
    (``tls_for(host)``: the client TLS options verifying that broker's certificate, e.g.
    ``broker.tls.client_options``). A certificate that does not verify fails the first
    request on the connection (the handshake runs when it is written)."""
    from twisted.internet.endpoints import SSL4ClientEndpoint, TCP4ClientEndpoint

    def connect(address: BrokerAddress) -> Deferred[PeerProtocol]:
        if tls_for is None:
            endpoint: Any = TCP4ClientEndpoint(reactor, address.host, address.port,
                                               timeout=timeout_s)
        else:
            endpoint = SSL4ClientEndpoint(reactor, address.host, address.port,
                                          tls_for(address.host), timeout=timeout_s)
        return endpoint.connect(_PeerFactory())

    return connect


class PeerRefused(ConnectionError):
    """Another broker refused this one's ``AUTH`` as its peer user, or the connection
    failed before the answer (a certificate that did not verify, usually)."""


def authenticating(connect: Connector, user: str, token: str, clock: IReactorTime, *,
                   log_every_s: float = 30.0, hold_off_s: float = 5.0) -> Connector:
    """A ``Connector`` whose connections have sent ``AUTH <user> <token>`` and been answered
    OK before anyone else uses them (docs/replication.md, Security between brokers).

    A refusal closes the connection and fails it with ``PeerRefused``; the fetch loop backs
    off and tries again. After an ``AUTH`` answered with an error, connections to that
    broker fail at once for ``hold_off_s`` seconds (the token will not get better by
    itself; this spares both logs a line per retry). Refusals are logged once per broker
    every ``log_every_s`` seconds. The token is never logged."""
    last_logged: dict[int, float] = {}
    held_until: dict[int, float] = {}

    def report(address: BrokerAddress, why: str) -> None:
        now = clock.seconds()
        if now - last_logged.get(address.broker_id, -log_every_s) >= log_every_s:
            last_logged[address.broker_id] = now
            log.error("broker %d (%s) refused this broker as peer user %s: %s; replication "
                      "from and to it stops until this is fixed (cluster.peer_user, "
                      "cluster.peer_token_file, cluster.tls.ca)", address.broker_id,
                      address, user, why)

    def log_in(proto: PeerProtocol, address: BrokerAddress) -> Deferred[PeerProtocol]:
        d = proto.request(lambda cid: encode_request(cid, "AUTH", f"{user} {token}"))

        def answered(reply: Reply) -> PeerProtocol:
            if not reply.ok:
                proto.close()
                why = f"{reply.code} {reply.message}"
                report(address, why)
                held_until[address.broker_id] = clock.seconds() + hold_off_s
                raise PeerRefused(f"broker {address.broker_id}: {why}")
            last_logged.pop(address.broker_id, None)
            return proto

        def failed(failure: Failure) -> Failure:
            proto.close()
            why = failure.getErrorMessage() or failure.type.__name__
            report(address, f"connection failed during AUTH ({why})")
            return Failure(PeerRefused(f"broker {address.broker_id}: {why}"))

        return d.addCallbacks(answered, failed)

    def connect_and_log_in(address: BrokerAddress) -> Deferred[PeerProtocol]:
        if clock.seconds() < held_until.get(address.broker_id, 0.0):
            return fail(PeerRefused(f"broker {address.broker_id} refused this broker's "
                                    f"AUTH moments ago"))
        return maybeDeferred(connect, address).addCallback(log_in, address)

    return connect_and_log_in


class Peers:
    """Connections to the other brokers: one shared per broker for short requests (epoch
    queries; never long polls, which would hold up the replies behind them), and dedicated
    ones a fetcher owns for its pulls."""

    def __init__(self, cluster: ClusterConfig, connect: Connector, clock: IReactorTime, *,
                 request_timeout_ms: int) -> None:
        self._cluster = cluster
        self._connect = connect
        self._clock = clock
        self._timeout_s = request_timeout_ms / 1000.0
        self._shared: dict[int, PeerProtocol] = {}
        self._connecting: dict[int, list[Deferred[PeerProtocol]]] = {}
        self._owned: set[PeerProtocol] = set()
        self._closed = False

    def open(self, broker_id: int) -> Deferred[PeerProtocol]:
        """A new connection to ``broker_id`` for the caller alone (close it when done)."""
        if self._closed:
            return fail(ConnectionDone("peers closed"))
        d = maybeDeferred(self._connect, self._cluster.address(broker_id))
        d.addTimeout(self._timeout_s, self._clock)

        def opened(proto: PeerProtocol) -> PeerProtocol:
            if self._closed:
                proto.close()
                raise ConnectionDone("peers closed")
            self._owned.add(proto)
            chained = proto.on_lost

            def forget(p: PeerProtocol) -> None:
                self._owned.discard(p)
                if chained is not None:
                    chained(p)

            proto.on_lost = forget
            return proto

        return d.addCallback(opened)

    def request(self, broker_id: int, build: Callable[[str], bytes]) -> Deferred[Reply]:
        """Send one short request on the shared connection to ``broker_id``; fails after
        the request timeout (and then drops that connection)."""
        if self._closed:
            return fail(ConnectionDone("peers closed"))
        d = self._shared_connection(broker_id).addCallback(lambda proto: proto.request(build))
        d.addTimeout(self._timeout_s, self._clock)
        return d

    def _shared_connection(self, broker_id: int) -> Deferred[PeerProtocol]:
        proto = self._shared.get(broker_id)
        if proto is not None and not proto.lost:
            return succeed(proto)
        waiting = self._connecting.get(broker_id)
        d: Deferred[PeerProtocol] = Deferred()
        if waiting is not None:
            waiting.append(d)
            return d
        self._connecting[broker_id] = [d]

        def opened(result: PeerProtocol | Failure) -> None:
            waiters = self._connecting.pop(broker_id, [])
            if isinstance(result, PeerProtocol):
                if self._closed:
                    result.close()
                    result = Failure(ConnectionDone("peers closed"))
                else:
                    self._shared[broker_id] = result
                    result.on_lost = lambda p: self._shared.pop(broker_id, None) \
                        if self._shared.get(broker_id) is p else None
            for waiter in waiters:
                waiter.callback(result) if isinstance(result, PeerProtocol) \
                    else waiter.errback(result)

        connecting = maybeDeferred(self._connect, self._cluster.address(broker_id))
        connecting.addTimeout(self._timeout_s, self._clock)
        connecting.addBoth(opened)
        return d

    def close(self) -> None:
        """Close every connection; later requests fail."""
        self._closed = True
        for proto in list(self._shared.values()) + list(self._owned):
            proto.close()
        self._shared.clear()
        self._owned.clear()


# ---------------------------------------------------------------------------- the follower's port


def peer_error(error: BrokerError) -> PeerError | NotLeader:
    """A peer's ERR answer as the domain's error: NOT_LEADER is ``NotLeader``; UNAVAILABLE
    and INTERNAL say nothing about the partition (``PeerCannotAnswer``); UNAUTHENTICATED
    means it does not take this broker for a peer; any other code refuses."""
    text = f"{error.code} {error.broker_message}"
    if isinstance(error, NotLeaderError):
        return NotLeader(error.broker_message)
    if isinstance(error, UnauthenticatedError):
        return PeerNotAuthenticated(text)
    if isinstance(error, UnavailableError | BrokerInternalError):
        return PeerCannotAnswer(text)
    return PeerRefusal(text)


def _answer(reply: Reply) -> Reply:
    if not reply.ok:
        raise peer_error(reply.error())
    return reply


def _parsed_epoch(reply: Reply) -> EpochReply:
    try:
        return parse_epoch_reply(_answer(reply).payload)
    except ProtocolViolation as exc:
        raise MalformedPeerReply(f"REPLICA_EPOCH: {exc}") from None


def _parsed_pull(reply: Reply) -> PullReply:
    try:
        return parse_pull_reply(_answer(reply).payload)
    except ProtocolViolation as exc:
        raise MalformedPeerReply(f"REPLICA_PULL: {exc}") from None


def _parsed_raw_pull(answer: RawReply) -> PullReply:
    try:
        return parse_pull_raw_reply(_answer(answer.reply).payload, answer.body)
    except ProtocolViolation as exc:
        raise MalformedPeerReply(f"REPLICA_PULL: {exc}") from None


def _refuses_raw(reply: Reply) -> bool:
    """A leader older than ``enc=raw`` refuses the option as a bad request."""
    return (not reply.ok and reply.code == "BAD_REQUEST" and "unknown option" in reply.payload
            and "enc" in reply.payload)


class _V1LeaderLink:
    """``replication.follower.links.LeaderLink`` on one ``PeerProtocol`` connection: pulls
    ask ``enc=raw`` (the records as raw bytes after the reply line) unless this leader
    refused it once (an older broker), then base64 in the line."""

    __slots__ = ("_proto", "_b64_only", "_broker_id")

    def __init__(self, proto: PeerProtocol, b64_only: set[int] | None = None,
                 broker_id: int = -1) -> None:
        self._proto = proto
        self._b64_only = b64_only if b64_only is not None else set()
        self._broker_id = broker_id

    @property
    def lost(self) -> bool:
        return self._proto.lost

    def pull(self, topic: str, partition: int, replica_id: int, offset: int, epoch: int, *,
             wait_ms: int, max_bytes: int) -> Deferred[PullReply]:
        if self._broker_id in self._b64_only:
            d = self._proto.request(lambda cid: pull_request(
                cid, topic, partition, replica_id, offset, epoch, wait_ms=wait_ms,
                max_bytes=max_bytes))
            return d.addCallback(_parsed_pull)
        raw = self._proto.request_raw(lambda cid: pull_request(
            cid, topic, partition, replica_id, offset, epoch, wait_ms=wait_ms,
            max_bytes=max_bytes, raw=True))

        def parsed(answer: RawReply) -> PullReply:
            if _refuses_raw(answer.reply):
                log.info("broker %d does not answer REPLICA_PULL enc=raw (%s); its pulls "
                         "use base64 from now on", self._broker_id, answer.reply.payload)
                self._b64_only.add(self._broker_id)
            return _parsed_raw_pull(answer)

        return raw.addCallback(parsed)

    def close(self) -> None:
        self._proto.close()


class V1ReplicaLinks:
    """``replication.follower.links.ReplicaLinks`` over ``Peers``: epoch queries on the shared
    connections, pulls on connections of their own."""

    def __init__(self, peers: Peers) -> None:
        self.peers = peers
        self._b64_only: set[int] = set()
        """Brokers that refused ``REPLICA_PULL enc=raw`` (older ones): pulled in base64."""

    def epoch(self, broker_id: int, topic: str, partition: int, replica_id: int, epoch: int,
              last_epoch: int | None) -> Deferred[EpochReply]:
        d = self.peers.request(broker_id, lambda cid: epoch_request(
            cid, topic, partition, replica_id, epoch, last_epoch))
        return d.addCallback(_parsed_epoch)

    def open(self, broker_id: int) -> Deferred[_V1LeaderLink]:
        return self.peers.open(broker_id).addCallback(_V1LeaderLink, self._b64_only,
                                                      broker_id)

    def close(self) -> None:
        self.peers.close()
