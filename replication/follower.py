"""The network side of a multi-broker cluster: fetch loops, leader probes, peer connections.

Owns:

- ``PeerProtocol``: a V1 client connection to another broker (pipelined requests, replies
  matched in order by correlation id), ``tcp_connector`` (TCP, or TLS verifying the
  peer's certificate) and ``authenticating`` (``AUTH`` as this broker's peer user before a
  connection is used), and ``Peers``, one shared connection per broker for short requests
  plus dedicated ones for long polls;
- ``PartitionFetcher``: the fetch loop of one follower replica. A *session* starts by
  asking every other replica for its epoch (``REPLICA_EPOCH``), choosing the leader (the
  replica in leader role with the highest epoch, never older than one this replica knows),
  truncating the local log where it diverges from that leader (KIP-101: the leader says
  where this replica's latest epoch ends), then pulling (``REPLICA_PULL``, long-polling with
  ``wait_ms``) and appending the leader's records unchanged. Each pull reports the fetch
  position, so the leader's ISR and ``hw`` move; each answer carries the leader's ``hw``.
  Any error, a NOT_LEADER or a newer epoch ends the session; a new one starts at once, or
  after ``retry_backoff_ms`` when no leader answered;
- ``LeaderProbe``: what a leader does about its epoch. It tells every other replica its
  epoch (fencing a deposed leader, waking followers) and, for a leadership restored from
  disk, confirms it once every other replica answered without a newer epoch; one with a
  newer epoch fences this broker instead. A replica it cannot reach that has not fetched
  since the promotion leaves the ISR at once (the old leader, usually, after a failover).
  Another replica leading the same epoch (an operator mistake) makes this one refuse
  writes until the conflict is gone;
- ``ReplicaManager``: one fetcher per follower partition and one probe per new leader
  epoch, kept in step with the partitions' roles.

The state machine of a fetcher is ``FetcherState`` with its table ``FETCHER_TRANSITIONS``.
Every timer and reply callback captures the session generation and ignores stale firings.

This is the only Twisted module of ``replication``. Must not import: the global reactor
(the clock and the ``Connector`` are injected), the store, ``broker.services.replication``
(it codes against ``ReplicaView`` and ``ReplicaDirectory`` below).
"""

from __future__ import annotations

import binascii
import enum
import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from twisted.internet.defer import Deferred, DeferredList, fail, maybeDeferred, succeed
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.protocol import Factory
from twisted.internet.protocol import Protocol as TwistedProtocol
from twisted.python.failure import Failure

from broker.client.codec import (
    NotLeaderError,
    ProtocolViolation,
    Reply,
    bool_field,
    encode_request,
    int_field,
    int_list_field,
    list_field,
    parse_reply,
    payload_fields,
)
from broker.errors import BadRequest, InvalidReplicaRequest, NotLeader, SkerryError
from replication.cluster import BrokerAddress, ClusterConfig
from replication.epochs import EpochEntry, EpochLookup, PeerEpoch, choose_leader
from replication.roles import Role
from replication.wire import EpochReply, PullReply

__all__ = [
    "PeerProtocol",
    "Connector",
    "tcp_connector",
    "authenticating",
    "PeerRefused",
    "Peers",
    "FetcherState",
    "FETCHER_TRANSITIONS",
    "IllegalFetcherTransition",
    "PartitionFetcher",
    "LeaderProbe",
    "ReplicaManager",
    "ReplicaView",
    "ReplicaDirectory",
    "FetchSettings",
    "epoch_request",
    "parse_epoch_reply",
    "parse_pull_reply",
    "pull_request",
]

log = logging.getLogger("skerry.follower")

MAX_REPLY_BYTES = 256 * 1024 * 1024
"""A reply line longer than this drops the connection (a pull answer is a few MiB)."""


# ---------------------------------------------------------------------------- cluster commands
# Requests and replies on the shared client codec (``broker.client.codec``); the broker's side
# of both is ``broker.v1.codec``.


def pull_request(cid: str, topic: str, partition: int, replica_id: int, offset: int,
                 epoch: int, *, wait_ms: int | None = None,
                 max_bytes: int | None = None) -> bytes:
    """A ``REPLICA_PULL`` request line, with its ``\\n``."""
    options = ""
    if wait_ms is not None:
        options += f" wait_ms={wait_ms}"
    if max_bytes is not None:
        options += f" max_bytes={max_bytes}"
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
    fields = payload_fields(head)
    try:
        raw = binascii.a2b_base64(data, strict_mode=True) if data else b""
    except binascii.Error as exc:
        raise ProtocolViolation(f"REPLICA_PULL data= is not base64: {exc}") from None
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


class PeerProtocol(TwistedProtocol):
    """A V1 client connection: ``request`` writes one line and returns a Deferred for its
    reply. Replies come back in request order; each must echo its correlation id. A reply
    that does not, or a connection loss, fails every outstanding request and closes the
    connection. Cancelling a request closes the connection too (a late reply would be
    matched to the wrong request otherwise)."""

    def __init__(self) -> None:
        self._pending: deque[tuple[str, Deferred[Reply]]] = deque()
        self._parts: list[bytes] = []
        self._size = 0
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
        self._pending.append((cid, d))
        self.transport.write(build(cid))
        return d

    def dataReceived(self, data: bytes) -> None:
        start = 0
        while not self.lost:
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
        cid, d = self._pending[0]
        if reply.cid != cid:
            log.error("reply for cid %s while waiting for %s; closing", reply.cid, cid)
            self.close(abort=True)
            return
        self._pending.popleft()
        d.callback(reply)

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
        for _cid, d in pending:
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


# ---------------------------------------------------------------------------- the replica


class ReplicaView(Protocol):
    """One partition as the fetch loop sees it (``ReplicationService.handle``)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def replicas(self) -> tuple[int, ...]: ...
    @property
    def is_replica(self) -> bool: ...
    @property
    def gone(self) -> bool: ...
    @property
    def local_replica(self) -> int: ...
    @property
    def role(self) -> Role: ...
    @property
    def confirmed(self) -> bool: ...
    @property
    def known_epoch(self) -> int: ...
    @property
    def last_epoch(self) -> int: ...
    @property
    def log_end(self) -> int: ...

    def observe_epoch(self, epoch: int) -> bool: ...
    def set_leader(self, broker_id: int) -> None: ...
    def truncate_for(self, answer: EpochLookup) -> int: ...
    def truncate_to(self, offset: int) -> None: ...
    def apply(self, reply: PullReply) -> Deferred[None]: ...
    def confirm(self, epoch: int) -> bool: ...
    def unreachable(self, broker_id: int) -> None: ...
    def conflict(self, epoch: int) -> None: ...


class ReplicaDirectory(Protocol):
    """Every partition of this broker (``ReplicationService``)."""

    def handles(self) -> list[Any]: ...
    def handle(self, topic: str, partition: int) -> Any: ...
    def add_change_listener(self, listener: Callable[[str, int], None]) -> None: ...


class FetchSettings:
    """Knobs of the fetch loop (``replication.*`` config keys)."""

    __slots__ = ("wait_ms", "max_bytes", "retry_backoff_ms", "request_timeout_ms")

    def __init__(self, *, wait_ms: int = 500, max_bytes: int = 1048576,
                 retry_backoff_ms: int = 250, request_timeout_ms: int = 5000) -> None:
        self.wait_ms = wait_ms
        self.max_bytes = max_bytes
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms


def _others(view: ReplicaView) -> list[tuple[int, int]]:
    """(replica id, broker id) of every other replica."""
    return [(pos, bid) for pos, bid in enumerate(view.replicas) if pos != view.local_replica]


class IllegalFetcherTransition(Exception):
    """A fetcher state change the table does not allow: a bug, never a peer's doing."""


class FetcherState(enum.Enum):
    """Where one follower partition's fetch loop is."""

    STOPPED = "stopped"
    """Actions: none; no connection, no timer.
    Transitions: to DISCOVERING on ``start``."""

    DISCOVERING = "discovering"
    """Actions: REPLICA_EPOCH to every other replica; remembers the newest epoch heard;
    chooses the leader; truncates the local log to the divergence point.
    Transitions: to FETCHING once a leader is chosen and a connection to it is open; to
    BACKOFF when no replica leads an epoch at least as new as this replica knows; to
    STOPPED on ``stop``."""

    FETCHING = "fetching"
    """Actions: REPLICA_PULL from the log end, long-polling; appends the records; takes the
    leader's ``hw``; repeats.
    Transitions: to DISCOVERING on NOT_LEADER, a newer epoch, or records that do not fit;
    to BACKOFF on a connection error, a timeout or a storage error; to STOPPED on
    ``stop``."""

    BACKOFF = "backoff"
    """Actions: waits ``retry_backoff_ms``.
    Transitions: to DISCOVERING when the wait ends; to STOPPED on ``stop``."""


FETCHER_TRANSITIONS: Mapping[FetcherState, frozenset[FetcherState]] = {
    FetcherState.STOPPED: frozenset({FetcherState.DISCOVERING}),
    FetcherState.DISCOVERING: frozenset({FetcherState.FETCHING, FetcherState.BACKOFF,
                                         FetcherState.DISCOVERING, FetcherState.STOPPED}),
    FetcherState.FETCHING: frozenset({FetcherState.DISCOVERING, FetcherState.BACKOFF,
                                      FetcherState.STOPPED}),
    FetcherState.BACKOFF: frozenset({FetcherState.DISCOVERING, FetcherState.STOPPED}),
}
"""Legal fetcher state changes (DISCOVERING -> DISCOVERING: a newer epoch was heard while
discovering, so the round starts over)."""


class PartitionFetcher:
    """The fetch loop of one follower replica (see the module docstring)."""

    def __init__(self, view: ReplicaView, peers: Peers, clock: IReactorTime,
                 settings: FetchSettings) -> None:
        self.view = view
        self._peers = peers
        self._clock = clock
        self._settings = settings
        self.state = FetcherState.STOPPED
        self.leader: int | None = None
        self.session_epoch = -1
        self.sessions = 0
        self.pulls = 0
        self._gen = 0
        self._conn: PeerProtocol | None = None
        self._timer: IDelayedCall | None = None
        self._name = f"{view.topic}/{view.partition}"

    # ------------------------------------------------------------------ control

    def start(self) -> None:
        if self.state is FetcherState.STOPPED:
            self._discover()

    def stop(self) -> None:
        if self.state is FetcherState.STOPPED:
            return
        self._transition(FetcherState.STOPPED)
        self._end_session()

    def poke(self) -> None:
        """The replica learnt a newer epoch: a session with an older leader ends now."""
        if self.state is FetcherState.FETCHING and self.view.known_epoch > self.session_epoch:
            log.info("%s: epoch %d is newer than the session's (%d); looking for the leader",
                     self._name, self.view.known_epoch, self.session_epoch)
            self._discover()

    def _transition(self, state: FetcherState) -> None:
        if state not in FETCHER_TRANSITIONS[self.state]:
            raise IllegalFetcherTransition(
                f"fetcher {self._name} should be in one of "
                f"{{{', '.join(s.value for s in FETCHER_TRANSITIONS if state in FETCHER_TRANSITIONS[s])}}} "
                f"before moving to {state.value}; is in {self.state.value}")
        self.state = state

    def _end_session(self) -> None:
        self._gen += 1
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

    def _usable(self) -> bool:
        view = self.view
        return not view.gone and view.is_replica and view.role is Role.FOLLOWER

    # ------------------------------------------------------------------ discovery

    def _discover(self) -> None:
        self._end_session()
        self._transition(FetcherState.DISCOVERING)
        if not self._usable():
            self.stop()
            return
        gen = self._gen
        view = self.view
        others = _others(view)
        hint = getattr(view, "leader_hint", -1)
        if hint >= 0:
            # The control plane (etcd) names the leader of the known epoch: ask it alone,
            # rather than waiting for a dead replica's answer to time out.
            others = [(pos, bid) for pos, bid in others if bid == hint] or others
        known, last = view.known_epoch, view.last_epoch
        requests = [
            self._peers.request(bid, lambda cid: epoch_request(
                cid, view.topic, view.partition, view.local_replica, known,
                last if last >= 0 else None))
            for _pos, bid in others
        ]
        DeferredList(requests, consumeErrors=True).addCallback(
            self._discovered, gen, others, last)

    def _discovered(self, results: list[tuple[bool, Any]], gen: int,
                    others: list[tuple[int, int]], asked_last: int) -> None:
        if gen != self._gen or self.state is not FetcherState.DISCOVERING:
            return
        view = self.view
        answers: dict[int, EpochReply] = {}
        for (ok, result), (_pos, bid) in zip(results, others, strict=True):
            if not ok:
                log.debug("%s: broker %d did not answer: %s", self._name, bid,
                          result.getErrorMessage())
                continue
            if not result.ok:
                # UNAUTHENTICATED: that broker does not take this one for a broker
                # (cluster.peer_users); worth seeing, unlike a passing NOT_LEADER.
                level = logging.WARNING if result.code == "UNAUTHENTICATED" else logging.DEBUG
                log.log(level, "%s: broker %d answered %s %s", self._name, bid, result.code,
                        result.message)
                continue
            try:
                answers[bid] = parse_epoch_reply(result.payload)
            except ProtocolViolation as exc:
                log.warning("%s: broker %d: %s", self._name, bid, exc)
        newest = max((a.epoch for a in answers.values()), default=-1)
        if newest > view.known_epoch:
            view.observe_epoch(newest)
        if not self._usable():
            self.stop()
            return
        if view.last_epoch != asked_last:
            self._discover()
            return
        chosen = choose_leader([PeerEpoch(bid, a.leader, a.epoch) for bid, a in answers.items()],
                               view.known_epoch)
        if chosen is None:
            self._backoff(f"no replica leads epoch {view.known_epoch} or newer "
                          f"({len(answers)} of {len(others)} answered)")
            return
        answer = answers[chosen.broker_id]
        before = view.log_end
        try:
            after = view.truncate_for(EpochLookup(answer.end_epoch, answer.end_offset))
        except SkerryError as error:
            self._backoff(f"truncation failed: {error.message}")
            return
        if after < before:
            log.info("%s: truncated to offset %d where the log diverges from broker %d "
                     "(epoch %d)", self._name, after, chosen.broker_id, chosen.epoch)
        self.leader = chosen.broker_id
        self.session_epoch = chosen.epoch
        view.set_leader(chosen.broker_id)
        self._peers.open(chosen.broker_id).addCallbacks(
            self._connected, self._connect_failed, callbackArgs=(gen,), errbackArgs=(gen,))

    def _connected(self, conn: PeerProtocol, gen: int) -> None:
        if gen != self._gen or self.state is not FetcherState.DISCOVERING:
            conn.close()
            return
        self._conn = conn
        self._transition(FetcherState.FETCHING)
        self.sessions += 1
        log.info("%s: following broker %s (epoch %d) from offset %d", self._name, self.leader,
                 self.session_epoch, self.view.log_end)
        self._pull(gen)

    def _connect_failed(self, failure: Failure, gen: int) -> None:
        if gen == self._gen and self.state is FetcherState.DISCOVERING:
            self._backoff(f"cannot connect to broker {self.leader}: "
                          f"{failure.getErrorMessage()}")

    # ------------------------------------------------------------------ fetching

    def _pull(self, gen: int) -> None:
        if gen != self._gen or self.state is not FetcherState.FETCHING:
            return
        view = self.view
        if not self._usable():
            self.stop()
            return
        if view.known_epoch > self.session_epoch:
            self._discover()
            return
        conn = self._conn
        if conn is None or conn.lost:
            self._backoff("connection to the leader lost")
            return
        offset = view.log_end
        settings = self._settings
        known = view.known_epoch
        d = conn.request(lambda cid: pull_request(
            cid, view.topic, view.partition, view.local_replica, offset, known,
            wait_ms=settings.wait_ms, max_bytes=settings.max_bytes))
        d.addTimeout((settings.wait_ms + settings.request_timeout_ms) / 1000.0, self._clock)
        self.pulls += 1
        d.addCallbacks(self._pulled, self._pull_failed, callbackArgs=(gen, offset),
                       errbackArgs=(gen,))

    def _pulled(self, reply: Reply, gen: int, offset: int) -> None:
        if gen != self._gen or self.state is not FetcherState.FETCHING:
            return
        view = self.view
        if not reply.ok:
            error = reply.error()
            if isinstance(error, NotLeaderError):
                log.info("%s: broker %s: %s", self._name, self.leader, error.broker_message)
                self._discover()
            else:
                self._backoff(f"broker {self.leader} refused the fetch: {error.code} "
                              f"{error.broker_message}")
            return
        try:
            pulled = parse_pull_reply(reply.payload)
        except ProtocolViolation as exc:
            self._backoff(f"bad fetch answer from broker {self.leader}: {exc}")
            return
        if pulled.epoch > view.known_epoch:
            view.observe_epoch(pulled.epoch)
        if pulled.epoch != self.session_epoch:
            self._discover()
            return
        if pulled.leo < offset:
            # The leader's log ends before ours (it lost an unsynced tail): what we hold
            # beyond its end was never committed.
            try:
                view.truncate_to(pulled.leo)
            except SkerryError as error:
                self._backoff(f"truncation failed: {error.message}")
                return
            self._clock.callLater(0, self._pull, gen)
            return
        if pulled.count == 0 and offset < pulled.start:
            self._backoff(f"offset {offset} is below the leader's log start {pulled.start}; "
                          "this replica cannot catch up by fetching (retention removed it)")
            return
        d = maybeDeferred(view.apply, pulled)
        d.addCallbacks(lambda _: self._pull(gen), self._apply_failed, errbackArgs=(gen,))

    def _apply_failed(self, failure: Failure, gen: int) -> None:
        if gen != self._gen or self.state is not FetcherState.FETCHING:
            return
        if failure.check(ValueError, BadRequest, InvalidReplicaRequest):
            self._backoff(f"the leader's records do not continue the local log "
                          f"({failure.getErrorMessage()}); a new session truncates first")
        elif failure.check(NotLeader):
            self.stop()
        else:
            self._backoff(f"cannot append: {failure.getErrorMessage()}")

    def _pull_failed(self, failure: Failure, gen: int) -> None:
        if gen == self._gen and self.state is FetcherState.FETCHING:
            self._backoff(f"fetch from broker {self.leader} failed: "
                          f"{failure.getErrorMessage() or failure.type.__name__}")

    # ------------------------------------------------------------------ waiting

    def _backoff(self, reason: str) -> None:
        if self.state is FetcherState.BACKOFF:
            return
        log.info("%s: %s; retrying in %d ms", self._name, reason,
                 self._settings.retry_backoff_ms)
        self._end_session()
        self._transition(FetcherState.BACKOFF)
        gen = self._gen
        self._timer = self._clock.callLater(self._settings.retry_backoff_ms / 1000.0,
                                            self._retry, gen)

    def _retry(self, gen: int) -> None:
        self._timer = None
        if gen == self._gen and self.state is FetcherState.BACKOFF:
            self._discover()


class LeaderProbe:
    """Tells every other replica this leader's epoch, and learns theirs (see the module
    docstring). ``done`` once every other replica answered (or this broker was fenced)."""

    def __init__(self, view: ReplicaView, peers: Peers, clock: IReactorTime,
                 settings: FetchSettings) -> None:
        self.view = view
        self.epoch = view.known_epoch
        self._peers = peers
        self._clock = clock
        self._settings = settings
        self._pending = {bid for _pos, bid in _others(view)}
        self._timer: IDelayedCall | None = None
        self.done = False
        self.rounds = 0
        self._name = f"{view.topic}/{view.partition}"

    def start(self) -> None:
        self._round()

    def stop(self) -> None:
        self.done = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _round(self) -> None:
        self._timer = None
        if self.done:
            return
        view = self.view
        if view.gone or view.role is not Role.LEADER or view.known_epoch != self.epoch:
            self.stop()
            return
        if not self._pending:
            self._finish()
            return
        self.rounds += 1
        targets = sorted(self._pending)
        last = view.last_epoch
        requests = [
            self._peers.request(bid, lambda cid: epoch_request(
                cid, view.topic, view.partition, view.local_replica, self.epoch,
                last if last >= 0 else None))
            for bid in targets
        ]
        DeferredList(requests, consumeErrors=True).addCallback(self._answered, targets)

    def _answered(self, results: Iterable[tuple[bool, Any]], targets: list[int]) -> None:
        if self.done:
            return
        view = self.view
        for (ok, result), bid in zip(results, targets, strict=True):
            if not ok:
                view.unreachable(bid)
                continue
            if not result.ok:
                if result.code in ("UNAVAILABLE", "INTERNAL", "UNAUTHENTICATED"):
                    continue  # no answer about its epoch (UNAUTHENTICATED: not a peer)
                # A live broker with no replica state for this partition holds no newer
                # epoch of it either.
                log.warning("%s: broker %d answered %s %s", self._name, bid, result.code,
                            result.message)
                self._pending.discard(bid)
                continue
            try:
                answer = parse_epoch_reply(result.payload)
            except ProtocolViolation as exc:
                log.warning("%s: broker %d: %s", self._name, bid, exc)
                continue
            if answer.epoch > self.epoch:
                log.warning("%s: broker %d knows epoch %d, newer than this leader's %d",
                            self._name, bid, answer.epoch, self.epoch)
                view.observe_epoch(answer.epoch)
                self.stop()
                return
            if answer.leader and answer.epoch == self.epoch:
                log.error("%s: broker %d also claims leadership of epoch %d; refusing writes "
                          "until one of them is demoted or another is promoted", self._name,
                          bid, self.epoch)
                view.conflict(self.epoch)
                continue
            self._pending.discard(bid)
        if self._pending:
            self._timer = self._clock.callLater(self._settings.retry_backoff_ms / 1000.0,
                                                self._round)
        else:
            self._finish()

    def _finish(self) -> None:
        if self.view.role is Role.LEADER and not self.view.gone:
            self.view.confirm(self.epoch)
        self.done = True


class ReplicaManager:
    """Keeps one ``PartitionFetcher`` per follower partition and one ``LeaderProbe`` per new
    leader epoch, following the partitions' role changes."""

    def __init__(self, directory: ReplicaDirectory, cluster: ClusterConfig,
                 clock: IReactorTime, connect: Connector, settings: FetchSettings) -> None:
        self._directory = directory
        self._clock = clock
        self._settings = settings
        self.peers = Peers(cluster, connect, clock,
                           request_timeout_ms=settings.request_timeout_ms)
        self.fetchers: dict[tuple[str, int], PartitionFetcher] = {}
        self.probes: dict[tuple[str, int], LeaderProbe] = {}
        self._due: set[tuple[str, int]] = set()
        self._call: IDelayedCall | None = None
        self._running = False

    def start(self) -> None:
        """Start a fetcher or probe for every partition and follow their changes."""
        self._running = True
        self._directory.add_change_listener(self._changed)
        for view in self._directory.handles():
            self._reconcile(view)

    def stop(self) -> None:
        """Stop every fetcher and probe and close every connection."""
        self._running = False
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        for fetcher in self.fetchers.values():
            fetcher.stop()
        for probe in self.probes.values():
            probe.stop()
        self.fetchers.clear()
        self.probes.clear()
        self.peers.close()

    def _changed(self, topic: str, partition: int) -> None:
        if not self._running:
            return
        self._due.add((topic, partition))
        if self._call is None:
            self._call = self._clock.callLater(0, self._run_due)

    def _run_due(self) -> None:
        self._call = None
        due, self._due = self._due, set()
        for topic, partition in sorted(due):
            try:
                view = self._directory.handle(topic, partition)
            except (BadRequest, KeyError, IndexError):
                view = None
            if view is None:
                self._drop((topic, partition))
            else:
                self._reconcile(view)

    def _drop(self, key: tuple[str, int]) -> None:
        fetcher = self.fetchers.pop(key, None)
        if fetcher is not None:
            fetcher.stop()
        probe = self.probes.pop(key, None)
        if probe is not None:
            probe.stop()

    def _reconcile(self, view: Any) -> None:
        if not self._running:
            return
        key = (view.topic, view.partition)
        if view.gone or not view.is_replica:
            self._drop(key)
            return
        if view.role is Role.FOLLOWER:
            probe = self.probes.pop(key, None)
            if probe is not None:
                probe.stop()
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                fetcher = self.fetchers[key] = PartitionFetcher(view, self.peers, self._clock,
                                                                self._settings)
            if fetcher.state is FetcherState.STOPPED:
                fetcher.start()
            else:
                fetcher.poke()
            return
        fetcher = self.fetchers.pop(key, None)
        if fetcher is not None:
            fetcher.stop()
        probe = self.probes.get(key)
        if probe is None or probe.epoch != view.known_epoch:
            if probe is not None:
                probe.stop()
            probe = self.probes[key] = LeaderProbe(view, self.peers, self._clock,
                                                   self._settings)
            probe.start()
