"""The Twisted shell of the consumer-group coordinator: session timers and durable state.

The broker persists through ``broker.services.group_log.GroupStateLog`` (the internal topic
``__skerry_groups``), handed in as ``state_log``; without one (a cluster member, for now,
and unit tests) the service keeps the two JSON files described here.

Owns: ``GroupService`` (what the handlers call for JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT,
OFFSET and the group admin commands), the per-member session timers (``clock.callLater``
keyed by ``groups.effects.expiry_key``, replaced on every refresh), and the two files
``groups.json`` and ``offsets.json`` in the data directory. Each file is replaced atomically
(``data.atomic.write_json_atomic`` through the injected ``FileLayer``, off the reactor via
``run_in_thread``), at most one write per file in flight; every change made in the same
reactor turn or while a write is in flight goes into one next write, and each reply waits
for a write that includes its change. The rules themselves live in ``groups.coordinator``;
this module only performs the effects it returns.

Must not import: the global reactor (time comes from the injected ``clock``, whose
``seconds()`` the broker makes monotonic), transports or the handlers. Wire formatting is
the handlers' job: this module returns plain values and raises ``broker.errors``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Protocol, TypeVar

from twisted.internet import threads
from twisted.internet.defer import Deferred, DeferredList, maybeDeferred, succeed
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.python.failure import Failure

from broker.errors import StorageError, Unavailable
from data.atomic import read_json, write_json_atomic
from data.fs import OS_FS, FileLayer
from groups.coordinator import (
    Assignment,
    GroupCoordinator,
    GroupDescription,
    GroupKey,
    OffsetLookup,
    ResetTarget,
)
from groups.effects import CancelExpiry, Effect, PersistGroups, PersistOffsets, ScheduleExpiry
from groups.group import Group
from groups.loader import LoadedState
from groups.records import Scope, group_scope, offset_scope
from groups.store import (
    GROUPS_FILE,
    OFFSETS_FILE,
    groups_from_json,
    groups_to_json,
    offset_metadata_from_json,
    offsets_from_json,
    offsets_to_json,
)

__all__ = ["GroupService", "RunInThread", "JsonFile", "StateLog", "all_done"]

log = logging.getLogger("skerry.groups")

T = TypeVar("T")


class StateLog(Protocol):
    """Where group state is kept instead of the JSON files
    (``broker.services.group_log.GroupStateLog``): what it loaded, and the two calls the
    files have."""

    @property
    def loaded(self) -> LoadedState: ...

    def changed(self, scopes: Iterable[Scope] | None = None) -> None: ...

    def durable(self) -> Deferred[None]: ...

RunInThread = Callable[[Callable[[], None]], Deferred[None]]


class _JsonFile:
    """One state file written in batches: ``changed()`` records that the document is out
    of date, ``durable()`` fires once the file holds every change recorded so far."""

    def __init__(self, path: str, snapshot: Callable[[], Any], clock: IReactorTime,
                 run_in_thread: RunInThread, fs: FileLayer) -> None:
        self.path = path
        self._snapshot = snapshot
        self._clock = clock
        self._run = run_in_thread
        self._fs = fs
        self._version = 0  # one more for every change
        self._on_disk = 0  # the newest version the file is known to hold
        self._in_flight = False
        self._call: IDelayedCall | None = None
        self._waiters: list[tuple[int, Deferred[None]]] = []

    def changed(self, scopes: Iterable[Scope] | None = None) -> None:
        """The document is out of date (``scopes``, what changed, matters not: the file
        is written whole)."""
        self._version += 1
        self._schedule()

    def durable(self) -> Deferred[None]:
        if self._on_disk >= self._version:
            return succeed(None)
        waiter: Deferred[None] = Deferred()
        self._waiters.append((self._version, waiter))
        self._schedule()
        return waiter

    def _schedule(self) -> None:
        # callLater(0): everything changed in this reactor turn shares the write.
        if self._call is None and not self._in_flight:
            self._call = self._clock.callLater(0, self._write)

    def _write(self) -> None:
        self._call = None
        self._in_flight = True
        version = self._version
        d = maybeDeferred(self._snapshot)
        d.addCallback(lambda doc: self._run(partial(write_json_atomic, self.path, doc, self._fs)))
        d.addCallbacks(self._written, self._failed, callbackArgs=(version,),
                       errbackArgs=(version,))

    def _written(self, _: object, version: int) -> None:
        self._on_disk = version
        self._finish(version, None)

    def _failed(self, failure: Failure, version: int) -> None:
        log.error("could not write %s: %s", self.path, failure.getTraceback())
        name = os.path.basename(self.path)
        self._finish(version, StorageError(f"could not write {name}: {failure.getErrorMessage()}"))

    def _finish(self, version: int, error: StorageError | None) -> None:
        self._in_flight = False
        ready = [waiter for covered, waiter in self._waiters if covered <= version]
        self._waiters = [(covered, w) for covered, w in self._waiters if covered > version]
        if self._version > version:
            self._schedule()  # changes made while this write ran go into the next one
        for waiter in ready:
            if error is None:
                waiter.callback(None)
            else:
                waiter.errback(error)


class GroupService:
    """Consumer groups for the broker: the coordinator plus timers and persistence.

    Refusals (``broker.errors``) are raised synchronously with nothing changed. Replies that
    depend on ``groups.json`` or ``offsets.json`` come as Deferreds that fire once the file
    holds the change, or fail with ``StorageError`` when the write failed.

    ``hw_for(topic, partition)`` is a partition's high watermark (DESCRIBE_GROUP lag);
    ``earliest_for``/``latest_for`` resolve ADMIN_RESET_OFFSETS ``earliest``/``latest``
    (``latest_for`` defaults to ``hw + 1``: the next offset after everything committed).
    """

    def __init__(self, coordinator: GroupCoordinator, clock: IReactorTime, data_dir: str, *,
                 hw_for: OffsetLookup, earliest_for: OffsetLookup,
                 latest_for: OffsetLookup | None = None, fs: FileLayer = OS_FS,
                 run_in_thread: RunInThread | None = None,
                 state_log: StateLog | None = None) -> None:
        """Restore ``groups.json`` and ``offsets.json`` from ``data_dir`` into
        ``coordinator`` (which must hold no state yet; missing files mean no state) and
        start serving: every restored member gets a fresh session timeout from now. A
        damaged file raises ``ValueError`` naming it and what is wrong. Reading happens
        here, on the calling thread: construct the service before the reactor serves.

        With ``state_log`` (what the broker passes: the topic ``__skerry_groups``) the state
        comes from it and every change is written to it instead of the files."""
        fs.makedirs(data_dir)
        groups_path = os.path.join(data_dir, GROUPS_FILE)
        offsets_path = os.path.join(data_dir, OFFSETS_FILE)
        if state_log is not None:
            loaded = state_log.loaded
            coordinator.restore(loaded.groups, loaded.offsets, loaded.metadata)
        else:
            offsets_doc = read_json(offsets_path, None, fs)
            coordinator.restore(
                groups_from_json(read_json(groups_path, None, fs), groups_path),
                offsets_from_json(offsets_doc, offsets_path),
                offset_metadata_from_json(offsets_doc, offsets_path),
            )
        self.coordinator = coordinator
        self._clock = clock
        self.data_dir = data_dir
        self._hw_for = hw_for
        self._earliest_for = earliest_for
        self._latest_for = latest_for or (lambda topic, p: hw_for(topic, p) + 1)
        run = run_in_thread if run_in_thread is not None else threads.deferToThread
        self._groups_file: _JsonFile | StateLog
        self._offsets_file: _JsonFile | StateLog
        if state_log is not None:
            # One topic holds both: a change of either is one write of its records.
            self._groups_file = self._offsets_file = state_log
        else:
            self._groups_file = _JsonFile(
                groups_path, lambda: groups_to_json(coordinator.groups()), clock, run, fs)
            self._offsets_file = _JsonFile(
                offsets_path, lambda: offsets_to_json(coordinator.committed(),
                                                      coordinator.committed_metadata()),
                clock, run, fs)
        self._timers: dict[str, IDelayedCall] = {}
        self._closed = False
        now = self._now_ms()
        self._perform(coordinator.start(now).effects, now)

    # ------------------------------------------------------------------ member requests

    def join(self, group: str, topic: str, member_id: str, assignor: str | None = None,
             session_timeout_ms: int | None = None) -> Deferred[Assignment]:
        """JOIN: ``(generation, assigned)`` once ``groups.json`` holds that generation."""
        now = self._open_now()
        result = self.coordinator.join(group, topic, member_id, now, assignor=assignor,
                                       session_timeout_ms=session_timeout_ms)
        self._perform(result.effects, now)
        return _then(self._groups_file.durable(), result.reply)

    def sync(self, group: str, topic: str, member_id: str,
             generation: int) -> Deferred[Assignment]:
        """SYNC: ``(generation, assigned)``; never before ``groups.json`` holds the
        generation (after an eviction, it waits for the pending write)."""
        now = self._open_now()
        result = self.coordinator.sync(group, topic, member_id, generation, now)
        self._perform(result.effects, now)
        return _then(self._groups_file.durable(), result.reply)

    def heartbeat(self, group: str, topic: str, member_id: str, generation: int) -> None:
        """HEARTBEAT: refreshes the member's session timer."""
        now = self._open_now()
        self._perform(self.coordinator.heartbeat(group, topic, member_id, generation, now).effects,
                      now)

    def leave(self, group: str, topic: str, member_id: str, generation: int) -> Deferred[None]:
        """LEAVE: fires once ``groups.json`` holds the next generation."""
        now = self._open_now()
        self._perform(self.coordinator.leave(group, topic, member_id, generation).effects, now)
        return self._groups_file.durable()

    def commit(self, group: str, topic: str, member_id: str, generation: int, partition: int,
               offset: int) -> Deferred[None]:
        """COMMIT: fires once ``offsets.json`` holds the offset (and ``groups.json`` the
        generation it was committed in)."""
        now = self._open_now()
        result = self.coordinator.commit(group, topic, member_id, generation, partition,
                                         offset, now)
        self._perform(result.effects, now)
        return all_done([self._offsets_file.durable(), self._groups_file.durable()])

    def offset(self, group: str, topic: str, partition: int) -> int:
        """OFFSET: the committed offset, 0 when none."""
        return self.coordinator.offset(group, topic, partition)

    # ------------------------------------------------------------------ other protocols

    def committed_offset(self, group: str, topic: str,
                         partition: int) -> tuple[int, str] | None:
        """``(offset, metadata)`` committed by any protocol, None when nothing was."""
        return self.coordinator.committed_offset(group, topic, partition)

    def record_offset(self, group: str, topic: str, partition: int, offset: int,
                      metadata: str = "") -> None:
        """Store an offset another protocol's coordinator accepted (Kafka OffsetCommit);
        ``offsets_durable()`` fires once ``offsets.json`` holds it."""
        self._perform(self.coordinator.record_offset(group, topic, partition, offset,
                                                     metadata).effects, self._now_ms())

    def offsets_durable(self) -> Deferred[None]:
        """Fires once ``offsets.json`` holds every change made so far."""
        return self._offsets_file.durable()

    def live_protocol(self, group: str) -> str | None:
        """``"v1"`` while the group id has live V1 or Iggy members on any topic."""
        return self.coordinator.live_protocol(group)

    def set_protocol_guard(self, protocol_of: Callable[[str], str | None]) -> None:
        """Refuse JOIN (BAD_REQUEST) into a group id ``protocol_of`` names as live under
        another protocol (the Kafka group service passes its ``live_protocol``)."""
        self.coordinator.protocol_of = protocol_of

    # ------------------------------------------------------------------ admin commands

    def admin_commit(self, group: str, topic: str, partition: int,
                     offset: int) -> Deferred[None]:
        """ADMIN_COMMIT (reply ``committed=true``): fires once ``offsets.json`` holds it."""
        now = self._open_now()
        self._perform(self.coordinator.admin_commit(group, topic, partition, offset).effects,
                      now)
        return self._offsets_file.durable()

    def reset_offsets(self, group: str, topic: str, target: ResetTarget,
                      partition: int | None = None) -> Deferred[dict[int, int]]:
        """ADMIN_RESET_OFFSETS: ``{partition: new offset}`` once ``offsets.json`` holds it."""
        now = self._open_now()
        result = self.coordinator.reset_offsets(group, topic, target, partition,
                                                earliest_for=self._earliest_for,
                                                latest_for=self._latest_for)
        self._perform(result.effects, now)
        return _then(self._offsets_file.durable(), result.reply)

    def delete_group(self, group: str, topic: str) -> Deferred[None]:
        """ADMIN_DELETE_GROUP (reply ``deleted=true``): fires once both files forgot it."""
        now = self._open_now()
        self._perform(self.coordinator.delete_group(group, topic).effects, now)
        return all_done([self._groups_file.durable(), self._offsets_file.durable()])

    def delete_offsets(self, group: str, topic: str,
                       partitions: Iterable[int]) -> Deferred[list[int]]:
        """Kafka's OffsetDelete: the partitions whose committed offset was forgotten, once
        ``offsets.json`` no longer holds them."""
        now = self._open_now()
        result = self.coordinator.delete_offsets(group, topic, partitions)
        self._perform(result.effects, now)
        return _then(self._offsets_file.durable(), result.reply)

    def committed(self) -> dict[tuple[str, str], dict[int, int]]:
        """Every committed offset: ``{(group, topic): {partition: offset}}``."""
        return self.coordinator.committed()

    def offset_keys(self) -> list[tuple[str, str]]:
        """Every ``(group, topic)`` with a committed offset, sorted, without the offsets
        (what DeleteGroups, ListGroups and OffsetDelete ask; ``committed`` copies all)."""
        return self.coordinator.offset_keys()

    def describe(self, group: str, topic: str) -> GroupDescription:
        """DESCRIBE_GROUP: state, generation, assignor, members, per-partition offsets."""
        return self.coordinator.describe(group, topic, hw_for=self._hw_for)

    def list_groups(self) -> list[GroupKey]:
        """LIST_GROUPS: every (group, topic) pair with state or committed offsets."""
        return self.coordinator.list_groups()

    def group(self, group: str, topic: str) -> Group | None:
        """The group's live state, to read only (members, generation, assignment), or None:
        what a transport acting for its members needs, without ``describe``'s offsets."""
        return self.coordinator.group(group, topic)

    def partitions_changed(self, topic: str) -> None:
        """The topic's partition count changed: its groups with members rebalance now."""
        if self._closed:
            return
        now = self._now_ms()
        result = self.coordinator.partitions_changed(topic)
        for group, _ in result.reply:
            log.info("group %s on topic %s rebalances: the topic has new partitions",
                     group, topic)
        self._perform(result.effects, now)

    def topic_deleted(self, topic: str) -> None:
        """The topic was deleted: forget its groups, members and offsets (written to
        groups.json and offsets.json in the next batch)."""
        if self._closed:
            return
        result = self.coordinator.topic_deleted(topic)
        for group, _ in result.reply:
            log.info("group %s on deleted topic %s forgotten", group, topic)
        self._perform(result.effects, self._now_ms())

    def load_groups(self, loaded: LoadedState) -> None:
        """Take over the V1/Iggy groups and offsets of a coordinator partition this broker
        now leads: its members get a fresh session timeout from now."""
        now = self._now_ms()
        self._perform(self.coordinator.load(loaded.groups, loaded.offsets, loaded.metadata,
                                            now).effects, now)

    def unload_groups(self, owned: Callable[[str], bool]) -> list[GroupKey]:
        """Forget the groups and offsets of a coordinator partition this broker no longer
        leads (their timers stop); they live on in the partition's records."""
        result = self.coordinator.unload(owned)
        self._perform(result.effects, self._now_ms())
        return result.reply

    def close(self) -> Deferred[None]:
        """Stop the session timers and flush pending writes. Requests after this are
        refused with UNAVAILABLE."""
        self._closed = True
        for call in self._timers.values():
            if call.active():
                call.cancel()
        self._timers.clear()
        return all_done([self._groups_file.durable(), self._offsets_file.durable()])

    # ------------------------------------------------------------------ effects

    def _now_ms(self) -> int:
        return round(self._clock.seconds() * 1000)

    def _open_now(self) -> int:
        if self._closed:
            raise Unavailable("group coordinator is shutting down")
        return self._now_ms()

    def _perform(self, effects: tuple[Effect, ...], now_ms: int) -> None:
        for effect in effects:
            if isinstance(effect, ScheduleExpiry):
                self._cancel(effect.key)
                # Relative to the now_ms the coordinator saw: exactly the session timeout.
                delay = max(0.0, (effect.deadline_ms - now_ms) / 1000.0)
                self._timers[effect.key] = self._clock.callLater(
                    delay, self._expire, effect.key, effect.group, effect.topic,
                    effect.member_id, effect.token)
            elif isinstance(effect, CancelExpiry):
                self._cancel(effect.key)
            elif isinstance(effect, PersistGroups):
                self._groups_file.changed((group_scope(effect.group, effect.topic),))
            elif isinstance(effect, PersistOffsets):
                if effect.group:
                    self._offsets_file.changed(
                        [offset_scope(effect.group, effect.topic, p)
                         for p in effect.partitions])
                else:  # names nothing: the whole state is compared
                    self._offsets_file.changed()

    def _cancel(self, key: str) -> None:
        call = self._timers.pop(key, None)
        if call is not None and call.active():
            call.cancel()

    def _expire(self, key: str, group: str, topic: str, member_id: str, token: int) -> None:
        call = self._timers.get(key)
        if call is not None and not call.active():
            del self._timers[key]  # the call firing now; a newer armed timer stays
        result = self.coordinator.expire(group, topic, member_id, token)
        if result.reply:
            log.info("group %s on topic %s: member %s evicted (session timeout)",
                     group, topic, member_id)
        self._perform(result.effects, self._now_ms())


JsonFile = _JsonFile
"""One JSON state file written in batches, for the other group shells
(``broker.services.kafka_groups`` writes ``kafka-groups.json`` with it)."""


def _then(d: Deferred[None], value: T) -> Deferred[T]:
    return d.addCallback(lambda _: value)


def all_done(waits: list[Deferred[Any]]) -> Deferred[None]:
    """Fires when every Deferred has; fails with the first failure (all are consumed).
    Shared with the Iggy handlers, which wait on several group and catalog writes."""
    if not waits:
        return succeed(None)

    def first_failure(results: list[tuple[bool, Any]]) -> Failure | None:
        for ok, value in results:
            if not ok:
                return value  # type: ignore[no-any-return]
        return None

    return DeferredList(waits, consumeErrors=True).addCallback(first_failure)
