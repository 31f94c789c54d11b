"""The Twisted shell of the Kafka classic group coordinator: timers, held requests and
``kafka-groups.json``.

Owns: ``KafkaGroupService`` (what the Kafka transport's group handlers call for JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups and
ListGroups) and ``SharedOffsetBook``. The rules live in ``groups.classic``; this module
performs the effects it returns:

* **timers** on the injected clock, keyed by the effect's key (``kafka-session:...``,
  ``kafka-join:...``): arming a key again replaces its timer; a firing calls
  ``expire_session``/``expire_join`` with the generation and token the timer was armed
  with, so a stale firing changes nothing;
* **held requests**: a JoinGroup waiting for the join barrier, or a follower's SyncGroup
  waiting for the leader's, is a ``Deferred`` kept under its ticket and fired when a later
  operation or timer delivers its reply (a refusal fails it with the
  ``groups.kafka_errors`` instance);
* **persistence**: ``kafka-groups.json`` in the data directory (``groups.classic_store``'s
  document), written in batches like ``groups.json`` and recovered at start. A reply that
  reveals a generation or an assignment waits until the file holds it;
* **offsets**: shared with V1 groups through ``SharedOffsetBook`` over the
  ``GroupService``: a Kafka commit for group ``g`` on t/p is the ``offsets.json`` entry V1
  ``OFFSET g t p`` reads and ``DESCRIBE_GROUP`` shows lag for, with Kafka's metadata kept
  beside it. OffsetCommit answers once ``offsets.json`` holds the commit;
* **the cross-protocol guard**: this coordinator asks the ``GroupService`` whether V1 (or
  Iggy) members hold a group id live, and tells the ``GroupService`` to ask it the same.

Must not import: the global reactor (time comes from the injected ``clock``), transports or
their handlers. Wire codes are the transport's: refusals travel as ``groups.kafka_errors``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from twisted.internet import threads
from twisted.internet.defer import Deferred, gatherResults, succeed
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from broker.errors import Unavailable
from broker.services.group_log import GroupStateLog
from broker.services.groups import GroupService, JsonFile, RunInThread
from data.atomic import read_json
from data.fs import OS_FS, FileLayer
from groups.classic import ClassicConfig, ClassicGroupCoordinator, TopicPartition
from groups.classic_effects import (
    CancelTimer,
    ClassicEffect,
    CommittedOffset,
    Deliver,
    GroupView,
    Held,
    JoinReply,
    PersistClassicGroups,
    PersistOffsets,
    ScheduleJoin,
    ScheduleSession,
    SyncReply,
)
from groups.classic_group import ClassicGroup, Protocol
from groups.classic_store import (
    CLASSIC_GROUPS_FILE,
    classic_groups_from_json,
    classic_groups_to_json,
)
from groups.effects import Result
from groups.errors import InvalidGroupRequest
from groups.kafka_errors import (
    GroupIdNotFound,
    GroupNotEmpty,
    OffsetMetadataTooLarge,
    RebalanceInProgress,
)
from groups.records import kafka_group_scope

__all__ = ["KafkaGroupService", "SharedOffsetBook"]

log = logging.getLogger("skerry.kafka.groups")


class SharedOffsetBook:
    """The classic coordinator's ``OffsetBook`` over the V1 ``GroupService``: one store of
    committed offsets (the next offset to read) for both protocols."""

    def __init__(self, groups: GroupService) -> None:
        self._groups = groups

    def committed(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        found = self._groups.committed_offset(group_id, topic, partition)
        return None if found is None else CommittedOffset(*found)

    def commit(self, group_id: str, topic: str, partition: int,
               committed: CommittedOffset) -> None:
        self._groups.record_offset(group_id, topic, partition, committed.offset,
                                   committed.metadata)


class KafkaGroupService:
    """Kafka consumer groups for the broker: the classic coordinator plus its timers, held
    requests and ``kafka-groups.json``.

    Refusals (``groups.kafka_errors``) are raised synchronously with nothing changed, or
    fail a held request's Deferred later. After ``close()`` every request is refused with
    ``broker.errors.Unavailable`` (the transport answers COORDINATOR_NOT_AVAILABLE) and the
    held ones fail with it.
    """

    def __init__(self, groups: GroupService, clock: IReactorTime, data_dir: str, *,
                 config: ClassicConfig | None = None, fs: FileLayer = OS_FS,
                 run_in_thread: RunInThread | None = None,
                 new_member_suffix: Callable[[], str] | None = None,
                 state_log: GroupStateLog | None = None) -> None:
        """Restore ``kafka-groups.json`` from ``data_dir`` (a damaged file raises
        ``ValueError`` naming it and what is wrong) and start serving: every restored member
        gets a fresh session timeout from now. Installs the cross-protocol guard on
        ``groups``. Construct before the reactor serves (the file is read here)."""
        fs.makedirs(data_dir)
        path = os.path.join(data_dir, CLASSIC_GROUPS_FILE)
        coordinator = ClassicGroupCoordinator(protocol_of=groups.live_protocol,
                                              offsets=SharedOffsetBook(groups),
                                              new_member_suffix=new_member_suffix,
                                              config=config)
        if state_log is not None:
            coordinator.restore(state_log.loaded.classic_groups)
        else:
            coordinator.restore(classic_groups_from_json(read_json(path, None, fs), path))
        self.coordinator = coordinator
        self.groups = groups
        self._clock = clock
        run = run_in_thread if run_in_thread is not None else threads.deferToThread
        self._file: JsonFile | GroupStateLog = (
            state_log if state_log is not None else
            JsonFile(path, lambda: classic_groups_to_json(coordinator.groups()), clock, run, fs))
        self._timers: dict[str, IDelayedCall] = {}
        self._held: dict[int, Deferred[Any]] = {}
        self._closed = False
        groups.set_protocol_guard(coordinator.live_protocol)
        now = self._now_ms()
        self._perform(coordinator.start(now), now)

    # ------------------------------------------------------------------ member requests

    def join(self, group_id: str, member_id: str, *, client_id: str, client_host: str,
             session_timeout_ms: int, rebalance_timeout_ms: int | None, protocol_type: str,
             protocols: Sequence[Protocol], group_instance_id: str | None = None
             ) -> Deferred[JoinReply]:
        """JoinGroup v0/v1 (v0: ``rebalance_timeout_ms=None``): the ``JoinReply`` once the
        join barrier completes and ``kafka-groups.json`` holds the generation."""
        now = self._open_now()
        result = self.coordinator.join(
            group_id, member_id, now, client_id=client_id, client_host=client_host,
            session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=protocol_type, protocols=protocols,
            group_instance_id=group_instance_id)
        return self._perform(result, now)

    def sync(self, group_id: str, generation: int, member_id: str,
             assignments: Mapping[str, bytes] | None = None,
             group_instance_id: str | None = None) -> Deferred[SyncReply]:
        """SyncGroup v0: this member's assignment once the leader's has arrived and
        ``kafka-groups.json`` holds it."""
        now = self._open_now()
        return self._perform(self.coordinator.sync(group_id, generation, member_id, now,
                                                   assignments, group_instance_id), now)

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  group_instance_id: str | None = None) -> RebalanceInProgress | None:
        """Heartbeat v0: None, or the ``RebalanceInProgress`` to report (rejoin)."""
        now = self._open_now()
        result = self.coordinator.heartbeat(group_id, generation, member_id, now,
                                            group_instance_id)
        self._perform(result, now)
        return result.reply

    def leave(self, group_id: str, member_id: str,
              group_instance_id: str | None = None) -> Deferred[None]:
        """LeaveGroup v0: fires once ``kafka-groups.json`` no longer holds the member."""
        now = self._open_now()
        return self._perform(self.coordinator.leave(group_id, member_id, now,
                                                    group_instance_id), now)

    def commit_offsets(self, group_id: str, generation: int, member_id: str,
                       offsets: Mapping[TopicPartition, CommittedOffset],
                       group_instance_id: str | None = None
                       ) -> Deferred[dict[TopicPartition, OffsetMetadataTooLarge | None]]:
        """OffsetCommit v0-v2 (generation -1 and member ``""`` for a simple commit): each
        partition's outcome once ``offsets.json`` holds the stored ones."""
        now = self._open_now()
        return self._perform(self.coordinator.commit_offsets(group_id, generation, member_id,
                                                             offsets, now,
                                                             group_instance_id), now)

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                      ) -> dict[TopicPartition, CommittedOffset | None]:
        """OffsetFetch v0/v1: None where nothing is committed (the wire's -1)."""
        self._open_now()
        return self.coordinator.fetch_offsets(group_id, partitions)

    def delete_group(self, group_id: str) -> Deferred[None]:
        """Kafka's DeleteGroups: an Empty group goes with every offset it committed (on
        every topic). ``GroupNotEmpty`` while it has members (Kafka or V1 ones),
        ``GroupIdNotFound`` when there is neither a group nor an offset."""
        now = self._open_now()
        topics = sorted(t for g, t in self.groups.offset_keys() if g == group_id)
        group = self.coordinator.group(group_id)
        if group is None and not topics:
            raise GroupIdNotFound(f"no group {group_id}")
        if group is not None and group.members:
            raise GroupNotEmpty(f"group {group_id} has {len(group.members)} members")
        waits: list[Deferred[Any]] = []
        if group is not None:
            waits.append(self._perform(self.coordinator.delete_group(group_id), now))
        for topic in topics:
            try:
                waits.append(self.groups.delete_group(group_id, topic))
            except InvalidGroupRequest as refusal:  # V1 members live on that topic
                raise GroupNotEmpty(str(refusal)) from None
        return gatherResults(waits).addCallback(lambda _: None)

    def delete_offsets(self, group_id: str, topic: str,
                       partitions: Iterable[int]) -> Deferred[list[int]]:
        """Kafka's OffsetDelete for one topic: the partitions that had an offset.
        ``GroupNotEmpty`` while the Kafka group has members (they may be reading it)."""
        self._open_now()
        group = self.coordinator.group(group_id)
        if group is not None and group.members:
            raise GroupNotEmpty(f"group {group_id} has {len(group.members)} members")
        try:
            return self.groups.delete_offsets(group_id, topic, partitions)
        except InvalidGroupRequest as refusal:
            raise GroupNotEmpty(str(refusal)) from None

    def describe(self, group_id: str) -> GroupView:
        """DescribeGroups for one group."""
        self._open_now()
        return self.coordinator.describe(group_id)

    def list_groups(self) -> list[tuple[str, str]]:
        """ListGroups: ``(group_id, protocol_type)`` pairs."""
        self._open_now()
        return self.coordinator.list_groups()

    def live_protocol(self, group_id: str) -> str | None:
        """``"kafka"`` while the group has Kafka members (the V1 side's guard)."""
        return self.coordinator.live_protocol(group_id)

    def load_groups(self, groups: Iterable[ClassicGroup]) -> None:
        """Take over the Kafka groups of a coordinator partition this broker now leads
        (fresh session timers)."""
        now = self._now_ms()
        self._perform(self.coordinator.load(groups, now), now).addErrback(_log_failure)

    def unload_groups(self, owned: Callable[[str], bool]) -> list[str]:
        """Forget the groups of a coordinator partition this broker no longer leads: their
        timers stop, their held requests are answered NOT_COORDINATOR."""
        now = self._now_ms()
        result = self.coordinator.unload(owned)
        self._perform(result, now).addErrback(_log_failure)
        return result.reply

    def close(self) -> Deferred[None]:
        """Stop the timers, fail the held requests with ``Unavailable`` and flush the
        pending write of ``kafka-groups.json``."""
        self._closed = True
        for call in self._timers.values():
            if call.active():
                call.cancel()
        self._timers.clear()
        held, self._held = self._held, {}
        for d in held.values():
            d.errback(Unavailable("group coordinator is shutting down"))
        return self._file.durable()

    # ------------------------------------------------------------------ effects

    def _now_ms(self) -> int:
        return round(self._clock.seconds() * 1000)

    def _open_now(self) -> int:
        if self._closed:
            raise Unavailable("group coordinator is shutting down")
        return self._now_ms()

    def _perform(self, result: Result[Any], now_ms: int) -> Deferred[Any]:
        """Perform ``result``'s effects; the reply as a Deferred that fires once the files
        the effects changed hold the change (a ``Held`` reply: once it is delivered)."""
        waits: list[Callable[[], Deferred[None]]] = []
        deliveries: list[Deliver] = []
        reply = result.reply
        mine: Deferred[Any] | None = None
        if isinstance(reply, Held):
            mine = Deferred()
            self._held[reply.ticket] = mine
        for effect in result.effects:
            self._perform_one(effect, now_ms, waits, deliveries)
        for delivery in deliveries:
            self._deliver(delivery)
        if mine is not None:
            return mine
        if not waits:
            return succeed(reply)
        return _after(waits, reply)

    def _perform_one(self, effect: ClassicEffect, now_ms: int,
                     waits: list[Callable[[], Deferred[None]]],
                     deliveries: list[Deliver]) -> None:
        if isinstance(effect, ScheduleSession | ScheduleJoin):
            self._cancel(effect.key)
            # Relative to the now_ms the coordinator saw: exactly the timeout it meant.
            delay = max(0.0, (effect.deadline_ms - now_ms) / 1000.0)
            self._timers[effect.key] = self._clock.callLater(delay, self._fire, effect)
        elif isinstance(effect, CancelTimer):
            self._cancel(effect.key)
        elif isinstance(effect, PersistClassicGroups):
            self._file.changed((kafka_group_scope(effect.group_id),))
            waits.append(self._file.durable)
        elif isinstance(effect, PersistOffsets):
            # The offset book wrote through the GroupService, which marked offsets.json.
            waits.append(self.groups.offsets_durable)
        elif isinstance(effect, Deliver):
            deliveries.append(effect)

    def _deliver(self, delivery: Deliver) -> None:
        """Answer a held request: a join or sync reply once ``kafka-groups.json`` holds
        what it reveals, a refusal at once."""
        d = self._held.pop(delivery.ticket, None)
        if d is None:
            log.error("no held request for ticket %d (%r)", delivery.ticket, delivery.reply)
            return
        reply = delivery.reply
        if isinstance(reply, Exception):
            d.errback(reply)
            return
        self._file.durable().addCallback(lambda _: reply).chainDeferred(d)

    def _cancel(self, key: str) -> None:
        call = self._timers.pop(key, None)
        if call is not None and call.active():
            call.cancel()

    def _fire(self, timer: ScheduleSession | ScheduleJoin) -> None:
        call = self._timers.get(timer.key)
        if call is not None and not call.active():
            del self._timers[timer.key]  # the call firing now; a newer armed timer stays
        if self._closed:
            return
        now = self._now_ms()
        if isinstance(timer, ScheduleSession):
            result = self.coordinator.expire_session(timer.group_id, timer.member_id,
                                                     timer.generation, timer.token, now)
            if result.reply:
                log.info("kafka group %s: member %s removed (session timeout)",
                         timer.group_id, timer.member_id)
        else:
            result = self.coordinator.expire_join(timer.group_id, timer.generation,
                                                  timer.token, now)
            if result.reply:
                log.info("kafka group %s: join barrier completed by its rebalance timeout",
                         timer.group_id)
        self._perform(result, now).addErrback(_log_failure)


def _after(waits: list[Callable[[], Deferred[None]]], reply: Any) -> Deferred[Any]:
    """``reply`` once every wait has fired (the first failure fails it)."""
    d: Deferred[Any] = succeed(None)
    for wait in waits:
        d.addCallback(lambda _, wait=wait: wait())
    return d.addCallback(lambda _: reply)


def _log_failure(failure: Any) -> None:
    log.error("kafka group state could not be written: %s", failure.getErrorMessage())

