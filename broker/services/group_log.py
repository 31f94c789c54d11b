"""The Twisted shell of the group state's source of truth: the internal topic
``__skerry_groups`` (``groups.records``), written through the broker's produce path and read
back at start.

Owns: ``GroupStateLog``. At construction it reads every record of the topic (when the data
directory has it) into a ``groups.loader.GroupLog`` and decides what the coordinators
restore; afterwards it is what the group services persist through, with the same two calls
the JSON files had: ``changed(scopes)`` (the state of these groups or offsets moved,
``groups.records.Scope``) and ``durable()`` (fires once the topic holds every change made so
far). A write builds the records of the scopes changed since the last one alone
(``groups.records.GroupRecords.records``) and appends those that differ from what the
partition holds (new values, tombstones for things gone), so its cost follows what changed,
not how many groups there are. ``changed()`` naming nothing (the migration, a legacy
import, a failed write: the safety net) makes the next write take the whole state's records
(``groups.records.state_records``) and append per partition every difference
(``groups.records.changes``). Writes go with ``acks=all``, one batch per partition and one
write in flight at a time; everything changed meanwhile goes into the next write. A reply that depends on a change is answered once its
records are at the high watermark, so on one broker exactly as durable as the broker's
``storage.fsync`` makes any acknowledged message.

**Migration** (data directories of brokers before the topic): when ``groups.json``,
``offsets.json`` or ``kafka-groups.json`` exists, those files are the state (they are newer
than anything in the topic: no broker writes them any more); the first write puts their
records into the topic, and once that is durable each file is renamed
``<name>.migrated`` (kept as a backup, read by nothing). A crash in between repeats the
migration at the next start, which appends nothing the topic already holds: idempotent.
A cluster member (etcd) holds only the partitions it leads: its files' state is cut by
partition (``legacy_pending``); each partition's part joins what the topic holds (the
topic's values win: they are newer) when this broker becomes its coordinator (``lead``),
or is sent to the partition's coordinator (``broker.services.coordinators.LegacyImport``);
the files are renamed once every part is in the topic.

Must not import: transports, the global reactor (time is the injected ``clock``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.python.failure import Failure

from broker.core.produce import ProduceRequest, ProduceResult
from broker.errors import SkerryError, StorageError
from data.atomic import read_json
from data.fs import OS_FS, FileLayer
from groups.classic_store import CLASSIC_GROUPS_FILE, classic_groups_from_json
from groups.loader import GroupLog, LoadedState
from groups.records import (
    GROUPS_TOPIC,
    GROUPS_TOPIC_SEGMENT_BYTES,
    KIND_CONSUMER_GROUP,
    TOMBSTONE,
    Scope,
    changes,
    consumer_group_of_key,
    partition_for_group,
)
from groups.store import (
    GROUPS_FILE,
    OFFSETS_FILE,
    groups_from_json,
    offset_metadata_from_json,
    offsets_from_json,
)

__all__ = ["GroupStateLog", "MIGRATED_SUFFIX", "LEGACY_FILES", "read_records",
           "split_by_partition", "with_missing"]

log = logging.getLogger("skerry.groups")

MIGRATED_SUFFIX = ".migrated"
LEGACY_FILES = (GROUPS_FILE, OFFSETS_FILE, CLASSIC_GROUPS_FILE)
"""The per-broker JSON files the topic replaced, migrated once at start."""

RunInThread = Callable[[Callable[[], None]], Deferred[None]]


class RecordSource(Protocol):
    """The coordinators' records (``groups.records.GroupRecords``)."""

    def snapshot(self, partitions: int) -> dict[int, dict[bytes, bytes]]:
        """The whole state's records, ``{partition: {key: value}}``."""
        ...

    def records(self, scope: Scope) -> dict[bytes, bytes]:
        """The records of one scope now (``TOMBSTONE`` for a single-key scope gone)."""
        ...


class StoreReader(Protocol):
    """What the loader reads: the store's topics and partition logs."""

    def topic(self, name: str) -> Any: ...

    def partition(self, name: str, partition: int) -> Any: ...


class Producer(Protocol):
    """What the writer needs of ``broker.core.BrokerCore``."""

    def topic_config(self, name: str) -> Any: ...

    def alter_topic(self, name: str, changes: Mapping[str, Any]) -> Any: ...

    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              min_insync_replicas: int) -> Any: ...

    def produce(self, request: ProduceRequest, answer: Callable[[ProduceResult], None]
                ) -> None: ...


class GroupStateLog:
    """Group state on this broker, kept in ``__skerry_groups``."""

    def __init__(self, store: StoreReader, data_dir: str, clock: IReactorTime, *,
                 partitions: int, fs: FileLayer = OS_FS,
                 run_in_thread: RunInThread | None = None, cluster: bool = False) -> None:
        """Read the topic (and any legacy JSON files) from ``store`` and ``data_dir``:
        ``loaded`` is the state to restore. A damaged record or file raises ``ValueError``
        naming it. Construct before the reactor serves (the reading happens here).

        ``cluster``: this broker is one of several, and holds only the partitions it leads
        (``lead``/``resign``); nothing is loaded here, and nothing is written for a
        partition it does not lead."""
        self._clock = clock
        self._fs = fs
        self._run = run_in_thread
        self.data_dir = data_dir
        topic = store.topic(GROUPS_TOPIC)
        self.partitions = partitions if topic is None else topic.config.partitions
        """The topic's partition count (an existing topic's count wins over the config)."""
        self._held: dict[int, dict[bytes, bytes]] = {}
        self._consumer_keys: dict[str, set[bytes]] = {}
        """The keys each KIP-848 consumer group has in ``_held`` (one per member: a member
        gone needs its tombstone, and only the topic remembers it had a key)."""
        everything = GroupLog()
        self._owned: set[int] | None = set() if cluster else None
        if topic is not None and not cluster:
            for partition in range(self.partitions):
                book = GroupLog()
                book.apply_all(partition, read_records(store.partition(GROUPS_TOPIC, partition)))
                if book.latest:
                    self._held[partition] = dict(book.latest)
                    self._index(self._held[partition])
                    everything.merge(book)
        self.legacy = [name for name in LEGACY_FILES
                       if fs.exists(os.path.join(data_dir, name))]
        """The legacy JSON files found at start (migrated by the first write)."""
        self.legacy_pending: dict[int, LoadedState] = {}
        """(Cluster) The legacy files' state of each partition not imported yet: imported
        by ``lead`` when this broker becomes the partition's coordinator, or through the
        coordinator (``legacy_forwarded``); the files are renamed once none is left."""
        if cluster and self.legacy:
            self.legacy_pending = split_by_partition(self._legacy_state(), self.partition_of)
            log.warning("%s in %s: this cluster member's own group files from before %s; "
                        "their groups and offsets are imported into it once (where the "
                        "topic holds nothing newer), as each group's coordinator loads",
                        ", ".join(self.legacy), data_dir, GROUPS_TOPIC)
        self._cluster = cluster
        self.loaded = (self._legacy_state() if self.legacy and not cluster
                       else everything.state())
        """What the coordinators restore."""
        self._core: Producer | None = None
        self._source: RecordSource | None = None
        self._dirty: set[Scope] = set()
        self._full = False
        """The next write takes the whole state (``changed()`` named no scope)."""
        self._version = 0
        self._written = 0
        self._in_flight = False
        self._call: IDelayedCall | None = None
        self._waiters: list[tuple[int, Deferred[None]]] = []

    def _legacy_state(self) -> LoadedState:
        def path(name: str) -> str:
            return os.path.join(self.data_dir, name)

        offsets_doc = read_json(path(OFFSETS_FILE), None, self._fs)
        return LoadedState(
            groups=groups_from_json(read_json(path(GROUPS_FILE), None, self._fs),
                                    path(GROUPS_FILE)),
            offsets=offsets_from_json(offsets_doc, path(OFFSETS_FILE)),
            metadata=offset_metadata_from_json(offsets_doc, path(OFFSETS_FILE)),
            classic_groups=classic_groups_from_json(
                read_json(path(CLASSIC_GROUPS_FILE), None, self._fs), path(CLASSIC_GROUPS_FILE)),
        )

    # ------------------------------------------------------------------ wiring

    def attach(self, core: Producer, source: RecordSource) -> None:
        """Start writing through ``core``; ``source`` gives the state's records (all, or
        a scope's). Migrates the legacy files (their records, then the rename) when there
        are any."""
        self._core = core
        self._source = source
        config = core.topic_config(GROUPS_TOPIC)
        if self._owned is None and config is not None and config.segment_bytes is None:
            # Created before the topic had its own segment size: give it one (the
            # segments already written are cleaned as they are).
            try:
                core.alter_topic(GROUPS_TOPIC, {"segment_bytes": GROUPS_TOPIC_SEGMENT_BYTES})
            except SkerryError as error:
                log.warning("could not set %s's segment_bytes: %s", GROUPS_TOPIC, error)
        if self._cluster:
            if self.legacy and not self.legacy_pending:  # files that held nothing
                self._migrated(None)
            elif self._version:
                self._schedule()
        elif self.legacy:
            self.changed()
            self.durable().addCallbacks(self._migrated, self._migration_failed)
        elif self._version:
            self._schedule()

    def _migrated(self, _: object) -> Deferred[None]:
        def rename() -> None:
            for name in self.legacy:
                src = os.path.join(self.data_dir, name)
                self._fs.replace(src, src + MIGRATED_SUFFIX)

        run = self._run
        d = succeed(rename()) if run is None else run(rename)

        def done(_: object) -> None:
            log.info("migrated %s into the topic %s (the files are kept as *%s)",
                     ", ".join(self.legacy), GROUPS_TOPIC, MIGRATED_SUFFIX)
            self.legacy = []

        return d.addCallbacks(done, self._migration_failed)

    def _migration_failed(self, failure: Failure) -> None:
        log.error("could not migrate %s into %s (tried again at the next start): %s",
                  ", ".join(self.legacy), GROUPS_TOPIC, failure.getErrorMessage())

    # ------------------------------------------------------------------ persistence

    def changed(self, scopes: Iterable[Scope] | None = None) -> None:
        """The state of ``scopes`` changed: the next write includes their records. None:
        anything may have changed, the next write compares the whole state."""
        self._version += 1
        if scopes is None:
            self._full = True
        else:
            self._dirty.update(scopes)
        self._schedule()

    def durable(self) -> Deferred[None]:
        """Fires once the topic holds every change made so far (``StorageError`` when the
        write failed; the next write tries again)."""
        if self._written >= self._version:
            return succeed(None)
        waiter: Deferred[None] = Deferred()
        self._waiters.append((self._version, waiter))
        self._schedule()
        return waiter

    def lead(self, partition: int, records: Iterable[tuple[int, bytes, bytes]]
             ) -> LoadedState:
        """(Cluster) This broker now leads ``partition``: its records (every one, in offset
        order) become what the partition holds, and the state they describe is returned
        for the coordinators to load. ``ValueError`` naming a damaged record."""
        assert self._owned is not None
        book = GroupLog()
        book.apply_all(partition, records)
        loaded = book.state()
        self._held[partition] = dict(book.latest)
        self._index(self._held[partition])
        self._owned.add(partition)
        legacy = self.legacy_pending.pop(partition, None)
        if legacy is not None:
            loaded = with_missing(loaded, legacy)
            # Written by the next write, once the coordinators hold the merged state.
            self._clock.callLater(0, self._import_written, partition)
        return loaded

    def _import_written(self, partition: int) -> None:
        self.changed()
        self._await_import(partition)

    def _await_import(self, partition: int) -> None:
        def done(_: object) -> None:
            log.info("imported this broker's old group files' state of %s/%d",
                     GROUPS_TOPIC, partition)
            self._legacy_progress()

        def failed(failure: Failure) -> None:
            if not self.owns(partition):  # the next start imports again (idempotent)
                log.warning("the old group files' state of %s/%d was not written before "
                            "this broker stopped leading it; the files are kept",
                            GROUPS_TOPIC, partition)
                return
            log.info("the old group files' state of %s/%d is not written yet (%s); "
                     "waiting", GROUPS_TOPIC, partition, failure.getErrorMessage())
            self._clock.callLater(1.0, self._await_import, partition)

        self.durable().addCallbacks(done, failed)

    def legacy_forwarded(self, partition: int) -> None:
        """(Cluster) The legacy state of ``partition`` went to its coordinator."""
        if self.legacy_pending.pop(partition, None) is not None:
            log.info("sent this broker's old group files' offsets of %s/%d to their "
                     "coordinator", GROUPS_TOPIC, partition)
            self._legacy_progress()

    def _legacy_progress(self) -> None:
        if self.legacy and not self.legacy_pending:
            self._migrated(None)

    def resign(self, partition: int) -> None:
        """(Cluster) This broker no longer leads ``partition``: nothing is written to it
        any more (its groups are unloaded by the caller)."""
        assert self._owned is not None
        self._owned.discard(partition)
        self._held.pop(partition, None)
        for group in [g for g in self._consumer_keys if self.partition_of(g) == partition]:
            del self._consumer_keys[group]

    def owns(self, partition: int) -> bool:
        """True when this broker holds the partition's groups: always on a single broker;
        in a cluster, once it has loaded the partition it leads."""
        return self._owned is None or partition in self._owned

    def partition_of(self, group_id: str) -> int:
        """The partition of the topic holding ``group_id``."""
        return partition_for_group(group_id, self.partitions)

    def held(self) -> Mapping[int, Mapping[bytes, bytes]]:
        """The latest record of every key the topic holds, per partition."""
        return self._held

    def _schedule(self) -> None:
        # callLater(0): everything changed in this reactor turn shares the write.
        if self._core is not None and self._call is None and not self._in_flight:
            self._call = self._clock.callLater(0, self._write)

    def _write(self) -> None:
        self._call = None
        assert self._core is not None and self._source is not None
        version = self._version
        full, self._full = self._full, False
        dirty, self._dirty = self._dirty, set()
        try:
            if full:
                batches = self._full_batches()
            else:
                batches = self._scoped_batches(dirty)
            if batches and self._owned is None \
                    and self._core.topic_config(GROUPS_TOPIC) is None:
                self._core.create_internal_topic(GROUPS_TOPIC, self.partitions, 1, 1)
        except SkerryError as error:
            self._full = True  # what was not written is found by comparing everything
            self._finish(version, _storage_error(error))
            return
        if not batches:
            self._finish(version, None)
            return
        self._in_flight = True
        waits = [self._append(p, batch, replace) for p, (batch, replace) in batches.items()]
        DeferredList(waits, consumeErrors=True).addCallback(self._appended, version)

    def _full_batches(self) -> dict[int, tuple[list[tuple[bytes, bytes]],
                                               dict[bytes, bytes] | None]]:
        """Every partition's differences from the whole state; each partition then holds
        exactly the state's records (the second element: what replaces ``_held``)."""
        assert self._source is not None
        current = self._source.snapshot(self.partitions)
        if self._owned is not None:  # a cluster member writes the partitions it leads
            strays = sorted(set(current) - self._owned)
            if strays:
                log.warning("group state for %s partitions %s this broker does not lead "
                            "is not written", GROUPS_TOPIC, strays)
            current = {p: v for p, v in current.items() if p in self._owned}
        out: dict[int, tuple[list[tuple[bytes, bytes]], dict[bytes, bytes] | None]] = {}
        for p in set(current) | set(self._held):
            batch = changes(self._held.get(p, {}), current.get(p, {}))
            if batch:
                out[p] = (batch, current.get(p, {}))
        return out

    def _scoped_batches(self, dirty: set[Scope]) -> dict[
            int, tuple[list[tuple[bytes, bytes]], dict[bytes, bytes] | None]]:
        """The records of ``dirty`` that differ from what their partitions hold (values,
        tombstones for things gone), per partition in ``changes``' order."""
        assert self._source is not None
        wanted: dict[int, dict[bytes, bytes]] = {}
        for scope in dirty:
            p = self.partition_of(scope.group)
            if not self.owns(p):  # resigned since: its new coordinator writes it
                continue
            held = self._held.get(p, {})
            records = self._source.records(scope)
            if scope.kind == KIND_CONSUMER_GROUP:  # members gone get tombstones
                records = dict(records)
                for key in self._consumer_keys.get(scope.group, ()):
                    records.setdefault(key, TOMBSTONE)
            out = wanted.setdefault(p, {})
            for key, value in records.items():
                if value == TOMBSTONE:
                    if key in held:
                        out[key] = TOMBSTONE
                elif held.get(key) != value:
                    out[key] = value
        batches: dict[int, tuple[list[tuple[bytes, bytes]], dict[bytes, bytes] | None]] = {}
        for p, out in wanted.items():
            if out:
                batch = [(k, out[k]) for k in sorted(out) if out[k] != TOMBSTONE]
                batch += [(k, TOMBSTONE) for k in sorted(out) if out[k] == TOMBSTONE]
                batches[p] = (batch, None)
        return batches

    def _append(self, partition: int, batch: list[tuple[bytes, bytes]],
                replace: dict[bytes, bytes] | None) -> Deferred[None]:
        """Append ``batch``; once acknowledged the partition holds ``replace`` (a full
        write), or what it held with ``batch`` applied."""
        assert self._core is not None
        d: Deferred[None] = Deferred()

        def answered(result: ProduceResult) -> None:
            if result.error is not None:
                d.errback(result.error)
            else:
                if self.owns(partition):  # not resigned while the write was in flight
                    self._applied(partition, batch, replace)
                d.callback(None)

        try:
            self._core.produce(ProduceRequest(GROUPS_TOPIC, partition, "all",
                                              [k for k, _ in batch], [v for _, v in batch],
                                              whole=True), answered)
        except SkerryError as error:
            d.errback(error)
        return d

    def _applied(self, partition: int, batch: list[tuple[bytes, bytes]],
                 replace: dict[bytes, bytes] | None) -> None:
        if replace is not None:
            for group in [g for g in self._consumer_keys
                          if self.partition_of(g) == partition]:
                del self._consumer_keys[group]
            if replace:
                self._held[partition] = replace
                self._index(replace)
            else:
                self._held.pop(partition, None)
            return
        held = self._held.setdefault(partition, {})
        for key, value in batch:
            group = consumer_group_of_key(key)
            if value == TOMBSTONE:
                held.pop(key, None)
                if group is not None:
                    keys = self._consumer_keys.get(group)
                    if keys is not None:
                        keys.discard(key)
                        if not keys:
                            del self._consumer_keys[group]
            else:
                held[key] = value
                if group is not None:
                    self._consumer_keys.setdefault(group, set()).add(key)
        if not held:
            del self._held[partition]

    def _index(self, records: Mapping[bytes, bytes]) -> None:
        """Note the consumer groups' keys among ``records`` (what a partition holds)."""
        for key in records:
            group = consumer_group_of_key(key)
            if group is not None:
                self._consumer_keys.setdefault(group, set()).add(key)

    def _appended(self, results: list[tuple[bool, Any]], version: int) -> None:
        self._in_flight = False
        failures = [value for ok, value in results if not ok]
        if failures:
            self._full = True  # what was not written is found by comparing everything
            self._finish(version, _storage_error(failures[0].value))
        else:
            self._finish(version, None)

    def _finish(self, version: int, error: StorageError | None) -> None:
        if error is None:
            self._written = version
        else:
            log.error("could not write group state to %s: %s", GROUPS_TOPIC, error)
        ready = [waiter for covered, waiter in self._waiters if covered <= version]
        self._waiters = [(covered, w) for covered, w in self._waiters if covered > version]
        if self._version > version or (error is not None and self._waiters):
            self._schedule()
        for waiter in ready:
            if error is None:
                waiter.callback(None)
            else:
                waiter.errback(error)


def _storage_error(error: BaseException) -> StorageError:
    if isinstance(error, StorageError):
        return error
    return StorageError(f"could not write group state: {error}")


def read_records(plog: Any) -> Iterator[tuple[int, bytes, bytes]]:
    """Every ``(offset, key, value)`` of a partition log, from its first offset."""
    offset = plog.first_offset
    end = plog.next_offset
    while offset < end:
        result = plog.read(offset, 10_000, 16 << 20)
        for record in result.records:
            yield record.offset, record.key or b"", record.payload
        if result.next_offset <= offset:
            break
        offset = result.next_offset


def split_by_partition(state: LoadedState, partition_of: Callable[[str], int]
                       ) -> dict[int, LoadedState]:
    """``state`` cut into the partitions of ``__skerry_groups`` holding each group."""
    parts: dict[int, LoadedState] = {}

    def part(group: str) -> LoadedState:
        return parts.setdefault(partition_of(group), LoadedState())

    for grp in state.groups:
        part(grp.group).groups.append(grp)
    for key, offsets in state.offsets.items():
        part(key[0]).offsets[key] = dict(offsets)
    for key, metadata in state.metadata.items():
        part(key[0]).metadata[key] = dict(metadata)
    for classic in state.classic_groups:
        part(classic.group_id).classic_groups.append(classic)
    return parts


def with_missing(loaded: LoadedState, legacy: LoadedState) -> LoadedState:
    """``loaded`` (the topic's state) plus what ``legacy`` holds that it does not: a
    group, a Kafka group, or one partition's committed offset. The topic's records are
    newer than any old file, so they win wherever both have a value."""
    groups = {(g.group, g.topic) for g in loaded.groups}
    classic = {g.group_id for g in loaded.classic_groups}
    offsets = {key: dict(value) for key, value in loaded.offsets.items()}
    metadata = {key: dict(value) for key, value in loaded.metadata.items()}
    for key, value in legacy.offsets.items():
        held = offsets.setdefault(key, {})
        for partition, offset in value.items():
            if partition not in held:
                held[partition] = offset
                meta = legacy.metadata.get(key, {}).get(partition)
                if meta:
                    metadata.setdefault(key, {})[partition] = meta
    return LoadedState(
        groups=[*loaded.groups, *(g for g in legacy.groups if (g.group, g.topic) not in groups)],
        offsets=offsets, metadata=metadata,
        classic_groups=[*loaded.classic_groups,
                        *(g for g in legacy.classic_groups if g.group_id not in classic)])
