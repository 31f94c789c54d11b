"""``ReplicaManager``: one fetcher per follower partition and one probe per new leader
epoch, kept in step with the partitions' roles.

Must not import: ``broker`` (the ``ReplicaLinks`` to other brokers and the
``ReplicaDirectory`` are given to it), the global reactor (the clock is injected), the store.
"""

from __future__ import annotations

import logging
from typing import Any

from twisted.internet.interfaces import IDelayedCall, IReactorTime

from replication.follower.fetcher import (
    FetcherState,
    FetchSettings,
    PartitionFetcher,
    ReplicaDirectory,
)
from replication.follower.links import ReplicaLinks
from replication.follower.probe import LeaderProbe
from replication.roles import Role

log = logging.getLogger("skerry.follower")


class ReplicaManager:
    """Keeps one ``PartitionFetcher`` per follower partition and one ``LeaderProbe`` per new
    leader epoch, following the partitions' role changes."""

    def __init__(self, directory: ReplicaDirectory, links: ReplicaLinks,
                 clock: IReactorTime, settings: FetchSettings) -> None:
        self._directory = directory
        self._clock = clock
        self._settings = settings
        self.links = links
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
        self.links.close()

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
            view = self._directory.handle(topic, partition)
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
                fetcher = self.fetchers[key] = PartitionFetcher(view, self.links, self._clock,
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
            probe = self.probes[key] = LeaderProbe(view, self.links, self._clock,
                                                   self._settings)
            probe.start()
