"""The fetch loop of one follower replica (``PartitionFetcher``, its states ``FetcherState``
and table ``FETCHER_TRANSITIONS``) and what it codes against: ``ReplicaView``,
``ReplicaDirectory``, ``FetchSettings`` (the package docstring tells the session).

Must not import: ``broker`` (it talks to other brokers through the ``ReplicaLinks`` port
it is given), the global reactor (the clock is injected), the store.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.python.failure import Failure

from data.refusal import SkerryError
from replication.epochs import EpochLookup, PeerEpoch, choose_leader
from replication.errors import (
    InvalidReplicaRequest,
    MalformedPeerReply,
    NotLeader,
    PeerNotAuthenticated,
    PeerRefusal,
)
from replication.follower.links import LeaderLink, ReplicaLinks
from replication.roles import Role
from replication.wire import EpochReply, PullReply

log = logging.getLogger("skerry.follower")


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
    def handle(self, topic: str, partition: int) -> Any:
        """The partition's view; None when this broker has no such topic or partition."""
        ...
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

    def __init__(self, view: ReplicaView, links: ReplicaLinks, clock: IReactorTime,
                 settings: FetchSettings) -> None:
        self.view = view
        self._links = links
        self._clock = clock
        self._settings = settings
        self.state = FetcherState.STOPPED
        self.leader: int | None = None
        self.session_epoch = -1
        self.sessions = 0
        self.pulls = 0
        self._gen = 0
        self._conn: LeaderLink | None = None
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
            self._links.epoch(bid, view.topic, view.partition, view.local_replica, known,
                              last if last >= 0 else None)
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
            if ok:
                answers[bid] = result
            elif result.check(PeerNotAuthenticated, MalformedPeerReply):
                # Not taken for a broker (cluster.peer_users), or a reply that does not
                # parse: worth seeing, unlike a passing NOT_LEADER.
                log.warning("%s: broker %d: %s", self._name, bid, result.getErrorMessage())
            elif result.check(NotLeader, PeerRefusal):
                log.debug("%s: broker %d answered %s", self._name, bid,
                          result.getErrorMessage())
            else:
                log.debug("%s: broker %d did not answer: %s", self._name, bid,
                          result.getErrorMessage())
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
        self._links.open(chosen.broker_id).addCallbacks(
            self._connected, self._connect_failed, callbackArgs=(gen,), errbackArgs=(gen,))

    def _connected(self, conn: LeaderLink, gen: int) -> None:
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
        d = conn.pull(view.topic, view.partition, view.local_replica, offset, known,
                      wait_ms=settings.wait_ms, max_bytes=settings.max_bytes)
        d.addTimeout((settings.wait_ms + settings.request_timeout_ms) / 1000.0, self._clock)
        self.pulls += 1
        d.addCallbacks(self._pulled, self._pull_failed, callbackArgs=(gen, offset),
                       errbackArgs=(gen,))

    def _pulled(self, pulled: PullReply, gen: int, offset: int) -> None:
        if gen != self._gen or self.state is not FetcherState.FETCHING:
            return
        view = self.view
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
        if failure.check(ValueError, InvalidReplicaRequest):
            self._backoff(f"the leader's records do not continue the local log "
                          f"({failure.getErrorMessage()}); a new session truncates first")
        elif failure.check(NotLeader):
            self.stop()
        else:
            self._backoff(f"cannot append: {failure.getErrorMessage()}")

    def _pull_failed(self, failure: Failure, gen: int) -> None:
        if gen != self._gen or self.state is not FetcherState.FETCHING:
            return
        why = failure.getErrorMessage() or failure.type.__name__
        if failure.check(NotLeader):
            log.info("%s: broker %s: %s", self._name, self.leader, why)
            self._discover()
        elif failure.check(PeerRefusal):
            self._backoff(f"broker {self.leader} refused the fetch: {why}")
        elif failure.check(MalformedPeerReply):
            self._backoff(f"bad fetch answer from broker {self.leader}: {why}")
        else:
            self._backoff(f"fetch from broker {self.leader} failed: {why}")

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
