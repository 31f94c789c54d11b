"""``LeaderProbe``: what a leader does about its epoch (the package docstring).

Must not import: ``broker`` (it talks to other brokers through the ``ReplicaLinks`` port
it is given), the global reactor (the clock is injected), the store.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from twisted.internet.defer import DeferredList
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from replication.errors import MalformedPeerReply, NotLeader, PeerCannotAnswer, PeerRefusal
from replication.follower.fetcher import (
    FetchSettings,
    ReplicaView,
    _others,
)
from replication.follower.links import ReplicaLinks
from replication.roles import Role

log = logging.getLogger("skerry.follower")


class LeaderProbe:
    """Tells every other replica this leader's epoch, and learns theirs (see the module
    docstring). ``done`` once every other replica answered (or this broker was fenced)."""

    def __init__(self, view: ReplicaView, links: ReplicaLinks, clock: IReactorTime,
                 settings: FetchSettings) -> None:
        self.view = view
        self.epoch = view.known_epoch
        self._links = links
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
            self._links.epoch(bid, view.topic, view.partition, view.local_replica, self.epoch,
                              last if last >= 0 else None)
            for bid in targets
        ]
        DeferredList(requests, consumeErrors=True).addCallback(self._answered, targets)

    def _answered(self, results: Iterable[tuple[bool, Any]], targets: list[int]) -> None:
        if self.done:
            return
        view = self.view
        for (ok, result), bid in zip(results, targets, strict=True):
            if not ok:
                if result.check(PeerCannotAnswer):
                    continue  # no answer about its epoch (not authenticated: not a peer)
                if result.check(MalformedPeerReply):
                    log.warning("%s: broker %d: %s", self._name, bid,
                                result.getErrorMessage())
                    continue
                if result.check(PeerRefusal, NotLeader):
                    # A live broker with no replica state for this partition holds no
                    # newer epoch of it either.
                    log.warning("%s: broker %d answered %s", self._name, bid,
                                result.getErrorMessage())
                    self._pending.discard(bid)
                    continue
                view.unreachable(bid)
                continue
            answer = result
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
