"""Which broker coordinates which group in a cluster, and handing groups over when that
changes: the coordinator of group id ``g`` is the leader of partition
``partition_for_group(g)`` of ``__skerry_groups``.

Owns: ``CoordinatorPartitions`` (watches the replication service's role changes for the
internal topic: a partition this broker starts leading is *loading* until its records are
read and its groups handed to the group services; one it stops leading is unloaded at once)
and its ``route(group_id)`` answer for the transports: ``Route.LOCAL`` (served here),
``Route.LOADING`` (here, soon: "coordinator loading"), or the id of the broker to forward to
(``Route.FORWARD`` with ``broker``), or ``Route.UNAVAILABLE`` (no leader right now).

Must not import: transports, the global reactor (time is the injected ``clock``).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.python.failure import Failure

from broker.errors import BadRequest
from broker.services.group_log import GroupStateLog, read_records
from groups.records import GROUPS_TOPIC

__all__ = ["CoordinatorPartitions", "LegacyImport", "Route", "Routing"]

log = logging.getLogger("skerry.groups")


class Route(enum.Enum):
    LOCAL = "local"
    LOADING = "loading"
    FORWARD = "forward"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class Routing:
    """Where a group's requests go: ``route``, and ``broker`` when it is FORWARD."""

    route: Route
    partition: int
    broker: int | None = None


class _Replication(Protocol):
    def is_leader(self, topic: str, partition: int) -> bool: ...

    def add_change_listener(self, listener: Callable[[str, int], None]) -> None: ...


class _Store(Protocol):
    def topic(self, name: str) -> Any: ...

    def partition(self, name: str, partition: int) -> Any: ...


class _Groups(Protocol):
    def load_groups(self, loaded: Any) -> None: ...

    def unload_groups(self, owned: Callable[[str], bool]) -> Any: ...


class _KafkaGroups(Protocol):
    def load_groups(self, groups: Any) -> None: ...

    def unload_groups(self, owned: Callable[[str], bool]) -> Any: ...


class _ConsumerGroups(Protocol):
    def load_groups(self, groups: Any) -> None: ...

    def unload_groups(self, owned: Callable[[str], bool]) -> Any: ...


class CoordinatorPartitions:
    """The coordinator partitions this broker leads, loaded into the group services."""

    def __init__(self, broker_id: int, state_log: GroupStateLog, store: _Store,
                 replication: _Replication, clock: IReactorTime, groups: _Groups,
                 kafka_groups: _KafkaGroups | None,
                 leader_of: Callable[[str, int], Any],
                 consumer_groups: _ConsumerGroups | None = None) -> None:
        self.broker_id = broker_id
        self._consumer_groups = consumer_groups
        self._log = state_log
        self._store = store
        self._replication = replication
        self._clock = clock
        self._groups = groups
        self._kafka_groups = kafka_groups
        self._leader_of = leader_of
        self.loading: set[int] = set()
        """Partitions this broker leads whose records are being read."""
        self.loads = 0
        """How many partitions were loaded since start (for tests and /metrics)."""
        replication.add_change_listener(self._changed)

    def start(self) -> None:
        """Look at every partition once (the topic may exist already at start)."""
        topic = self._store.topic(GROUPS_TOPIC)
        if topic is not None:
            for partition in range(topic.config.partitions):
                self._check(partition)

    def _changed(self, topic: str, partition: int) -> None:
        if topic == GROUPS_TOPIC:
            # Listeners must not re-enter the replication service: look on the next turn.
            self._clock.callLater(0, self._check, partition)

    def _check(self, partition: int) -> None:
        leading = self._replication.is_leader(GROUPS_TOPIC, partition)
        if leading and not self._log.owns(partition) and partition not in self.loading:
            self.loading.add(partition)
            self._clock.callLater(0, self._load, partition)
        elif not leading and (self._log.owns(partition) or partition in self.loading):
            self._unload(partition)

    def _load(self, partition: int) -> None:
        if partition not in self.loading:
            return
        if not self._replication.is_leader(GROUPS_TOPIC, partition):
            self.loading.discard(partition)
            return
        plog = self._store.partition(GROUPS_TOPIC, partition)
        try:
            loaded = self._log.lead(partition, read_records(plog))
        except ValueError as error:
            # A damaged record: never serve the partition's groups on a guess.
            log.error("cannot load %s/%d: %s", GROUPS_TOPIC, partition, error)
            self.loading.discard(partition)
            return
        self.loading.discard(partition)

        def owned(group_id: str) -> bool:
            return self._log.partition_of(group_id) == partition

        # State this broker made for the partition's groups while it did not lead it was
        # never written and gives way to the partition's records (every transport sends
        # its group commands to the coordinator, so there should be none).
        strays = self._groups.unload_groups(owned)
        if self._kafka_groups is not None:
            strays = [*strays, *self._kafka_groups.unload_groups(owned)]
        if self._consumer_groups is not None:
            strays = [*strays, *self._consumer_groups.unload_groups(owned)]
        if strays:
            log.warning("%s/%d: dropped group state made here before this broker led the "
                        "partition: %s", GROUPS_TOPIC, partition, strays)
        self._groups.load_groups(loaded)
        if self._kafka_groups is not None:
            self._kafka_groups.load_groups(loaded.classic_groups)
        if self._consumer_groups is not None:
            self._consumer_groups.load_groups(loaded.consumer_groups)
        self.loads += 1
        log.info("coordinator of %s/%d: loaded %d group(s), %d offset entries", GROUPS_TOPIC,
                 partition, len(loaded.groups) + len(loaded.classic_groups)
                 + len(loaded.consumer_groups),
                 sum(len(v) for v in loaded.offsets.values()))

    def _unload(self, partition: int) -> None:
        self.loading.discard(partition)
        if not self._log.owns(partition):
            return
        self._log.resign(partition)

        def owned(group_id: str) -> bool:
            return self._log.partition_of(group_id) == partition

        self._groups.unload_groups(owned)
        if self._kafka_groups is not None:
            self._kafka_groups.unload_groups(owned)
        if self._consumer_groups is not None:
            self._consumer_groups.unload_groups(owned)
        log.info("no longer the coordinator of %s/%d: its groups unloaded", GROUPS_TOPIC,
                 partition)

    def route(self, group_id: str) -> Routing:
        """Where requests for ``group_id`` are served."""
        partition = self._log.partition_of(group_id)
        if self._log.owns(partition):
            return Routing(Route.LOCAL, partition)
        if partition in self.loading:
            return Routing(Route.LOADING, partition)
        hint = self._leader_of(GROUPS_TOPIC, partition)
        leader = None if hint is None else getattr(hint, "leader", None)
        if leader is None or leader < 0:
            return Routing(Route.UNAVAILABLE, partition)
        if leader == self.broker_id:
            return Routing(Route.LOADING, partition)  # named leader, not confirmed yet
        return Routing(Route.FORWARD, partition, leader)


class LegacyImport:
    """A cluster member's old JSON group files, for the groups another broker coordinates:
    every ``retry_s`` the committed offsets of each partition still pending
    (``GroupStateLog.legacy_pending``) are sent to the partition's coordinator through
    ``router`` (a ``GroupRouter``), once their topic exists here: for each partition of each
    group an ``OFFSET``, then an ``ADMIN_COMMIT`` when the coordinator holds none and the
    group has no live members (what the topic holds is newer than any old file). The
    groups' old memberships are not sent: their members join again. A refused offset is
    tried again up to ``attempts`` times, then left out with a warning. Partitions this
    broker comes to lead are imported by ``GroupStateLog.lead`` instead."""

    def __init__(self, state_log: GroupStateLog, router: Any, clock: IReactorTime, *,
                 has_topic: Callable[[str], bool], retry_s: float = 2.0,
                 attempts: int = 30) -> None:
        self._log = state_log
        self._router = router
        self._has_topic = has_topic
        self._busy: set[int] = set()
        self._tries: dict[tuple[str, str, int], int] = {}
        self._attempts = attempts
        self._loop = LoopingCall(self.tick)
        self._loop.clock = clock
        self._retry_s = retry_s

    def start(self) -> None:
        if self._log.legacy_pending:
            self._loop.start(self._retry_s, now=False).addErrback(
                lambda f: log.error("legacy group import loop failed: %s", f.getTraceback()))

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()

    def tick(self) -> None:
        pending = self._log.legacy_pending
        if not pending:
            self.stop()
            return
        for partition, state in list(pending.items()):
            if partition in self._busy or self._log.owns(partition):
                continue
            if not state.offsets:  # only memberships: nothing to send
                self._log.legacy_forwarded(partition)
                continue
            if not all(self._has_topic(topic) for _group, topic in state.offsets):
                continue
            self._busy.add(partition)
            sends = [self._send(state, group, topic, p, offset)
                     for (group, topic), offsets in sorted(state.offsets.items())
                     for p, offset in sorted(offsets.items())]
            DeferredList(sends, consumeErrors=True).addCallback(self._sent, partition)

    def _send(self, state: Any, group: str, topic: str, partition: int,
              offset: int) -> Deferred[Any]:
        router = self._router

        def held(current: int) -> Any:
            if current:
                return None
            return router.view(group, topic).addCallback(seen)

        def seen(view: Any) -> Any:
            if view is not None and view.members:
                log.info("old offset of %s on %s/%d not imported: the group has live "
                         "members", group, topic, partition)
                return None
            return router.admin_commit(group, topic, partition, offset)

        def done(result: Any) -> Any:
            if isinstance(result, Failure) and result.check(BadRequest):
                tried = self._tries.get((group, topic, partition), 0) + 1
                self._tries[(group, topic, partition)] = tried
                if tried >= self._attempts:
                    log.warning("old offset %d of %s on %s/%d not imported: %s", offset,
                                group, topic, partition, result.getErrorMessage())
                    state.offsets[(group, topic)].pop(partition, None)
                    return None
            return result

        return router.offset(group, topic, partition).addCallback(held).addBoth(done)

    def _sent(self, results: list[tuple[bool, Any]], partition: int) -> None:
        self._busy.discard(partition)
        failures = [value for ok, value in results if not ok]
        if failures:
            log.info("old group offsets of %s/%d not sent yet (retrying): %s", GROUPS_TOPIC,
                     partition, failures[0].getErrorMessage())
            return
        self._log.legacy_forwarded(partition)
