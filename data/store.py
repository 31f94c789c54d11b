"""The store: topics, their partition logs, and the data directory that holds them.

Owns: ``StorageConfig``/``TopicConfig``, the ``Topic`` objects, topic creation, deletion
and growth (each made atomic on disk), opening every topic at start-up with recovery (and
the ``recovery_report``), retention across topics, ``sync_all`` for the interval fsync
policy, and the clean-shutdown marker.

On disk (``data.paths`` builds every name): ``<root>/.lock``, held for as long as the store
is open (``data.lock``: a second store on the same directory, in any process, is refused
with ``DataDirLocked`` before recovery reads anything), ``<root>/topics/<topic>/topic.json``
and one folder per partition. A topic is created in ``~new-<topic>`` and renamed into place, and
deleted by renaming it to ``~del-<topic>`` before removing it; whatever an interrupted
create or delete leaves behind is removed on the next open. A topic whose ``topic.json``
cannot be read is moved to ``~bad-<topic>`` for the operator, and its name cannot be
created again while that folder exists. ``~clean-shutdown`` is written
by ``close()`` and removed by the next open: its absence means the tail of every partition
is checked again.

Creating, deleting and growing a topic are logged by the caller (the broker core, which
knows the replication factor and why), not here, so that each is logged once.

The store schedules nothing (no threads, no timers): the broker shell calls ``sync()`` /
``sync_all()`` per its fsync policy, and ``enforce_retention()`` periodically.

Must not import: Twisted, anything of the broker except ``broker.errors``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from types import MappingProxyType
from typing import Any

from data import paths
from data.atomic import read_json, write_atomic, write_json_atomic
from data.cleaner import CleanPolicy, CleanStats
from data.errors import StorageError, TopicQuarantined
from data.format import HEADER_SIZE, MAX_U32
from data.fs import OS_FS, FileLayer
from data.lock import DataDirLock
from data.log import MIN_CLEANABLE_DIRTY_RATIO, PartitionLog, ReadResult, Record, RemovedSegment
from data.recovery import RecoveryEvent, create_segments, open_segments

__all__ = [
    "StorageConfig",
    "TopicConfig",
    "CLEANUP_POLICIES",
    "Topic",
    "Store",
    "RecoveryEvent",
    "RemovedSegment",
    "PartitionLog",
    "ReadResult",
    "Record",
]

FSYNC_POLICIES = ("always", "interval", "never")


@dataclass(frozen=True)
class StorageConfig:
    """Store-wide settings. ``fsync`` is recorded here; the broker shell acts on it."""

    fsync: str = "always"  # "always" | "interval" | "never"
    fsync_interval_ms: int = 1000
    segment_bytes: int = 64 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000

    def __post_init__(self) -> None:
        if self.fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync must be one of {', '.join(FSYNC_POLICIES)}; got {self.fsync!r}")
        if self.fsync_interval_ms <= 0:
            raise ValueError("fsync_interval_ms must be positive")
        if not HEADER_SIZE < self.segment_bytes <= MAX_U32:
            raise ValueError(f"segment_bytes must be between {HEADER_SIZE + 1} and {MAX_U32}")
        if self.segment_ms <= 0:
            raise ValueError("segment_ms must be positive")


CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
"""``cleanup_policy`` values (Kafka's ``cleanup.policy``): ``delete`` removes old segments
by retention (the default, as before); ``compact`` keeps the latest record of every key
(``data.cleaner``) and never applies retention; ``compact,delete`` does both."""

_COMPACTION_DEFAULTS = {"cleanup_policy": "delete", "min_compaction_lag_ms": 0,
                        "delete_retention_ms": 86_400_000, "segment_bytes": None, "segment_ms": None}


@dataclass(frozen=True)
class TopicConfig:
    """A topic's settings, stored in its ``topic.json``.

    ``cleanup_policy`` (``CLEANUP_POLICIES``), ``min_compaction_lag_ms`` (a record is not
    compacted away before it is that old; Kafka's ``min.compaction.lag.ms``) and
    ``delete_retention_ms`` (how long a tombstone stays after it became the latest record
    of its key; Kafka's ``delete.retention.ms``) drive compaction. ``segment_bytes`` and
    ``segment_ms`` override the store's for this topic (None: the store's).
    """

    partitions: int
    replication_factor: int = 1
    min_insync_replicas: int = 1
    retention_ms: int | None = None
    retention_bytes: int | None = None
    topic_id: str | None = None
    """A random UUID (32 hex digits) naming this incarnation of the topic, as Kafka's topic
    ids do (a topic deleted and created again gets a new one); None for topics created
    before topic ids existed. Chosen by whoever creates the topic; the store keeps it."""
    cleanup_policy: str = "delete"
    min_compaction_lag_ms: int = 0
    delete_retention_ms: int = 86_400_000
    segment_bytes: int | None = None
    segment_ms: int | None = None

    @property
    def compacted(self) -> bool:
        """True when the topic keeps the latest record per key (``compact`` in the policy)."""
        return "compact" in self.cleanup_policy

    @property
    def deletes(self) -> bool:
        """True when retention applies (``delete`` in the policy)."""
        return "delete" in self.cleanup_policy

    def to_json(self) -> dict[str, Any]:
        """The ``topic.json`` document: every setting, but the compaction and segment
        settings only where they differ from their defaults (a data directory of a topic
        that never set them reads the same as before they existed)."""
        doc = asdict(self)
        for name, default in _COMPACTION_DEFAULTS.items():
            if doc[name] == default:
                del doc[name]
        return doc

    def validate(self) -> None:
        """``ValueError`` when the settings are inconsistent."""
        for name in ("partitions", "replication_factor", "min_insync_replicas"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError(
                f"min_insync_replicas ({self.min_insync_replicas}) is greater than "
                f"replication_factor ({self.replication_factor})"
            )
        for name in ("retention_ms", "retention_bytes"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 0):
                raise ValueError(f"{name} must be a non-negative integer or None; got {value!r}")
        if self.cleanup_policy not in CLEANUP_POLICIES:
            raise ValueError(f"cleanup_policy must be one of {', '.join(CLEANUP_POLICIES)}; "
                             f"got {self.cleanup_policy!r}")
        for name in ("min_compaction_lag_ms", "delete_retention_ms"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} must be a non-negative integer; got {value!r}")
        if self.segment_bytes is not None and (type(self.segment_bytes) is not int
                                               or not HEADER_SIZE < self.segment_bytes <= MAX_U32):
            raise ValueError(f"segment_bytes must be between {HEADER_SIZE + 1} and {MAX_U32}; "
                             f"got {self.segment_bytes!r}")
        if self.segment_ms is not None and (type(self.segment_ms) is not int or self.segment_ms <= 0):
            raise ValueError(f"segment_ms must be a positive integer; got {self.segment_ms!r}")
        tid = self.topic_id
        if tid is not None and (type(tid) is not str or len(tid) != 32
                                or any(ch not in "0123456789abcdef" for ch in tid)):
            raise ValueError(f"topic_id must be 32 lowercase hex digits or None; got {tid!r}")

    @classmethod
    def from_json(cls, obj: Any) -> TopicConfig:
        """Parse a ``topic.json`` document (``ValueError`` when malformed)."""
        if not isinstance(obj, dict):
            raise ValueError("topic.json must hold a JSON object")
        known = {"partitions", "replication_factor", "min_insync_replicas", "retention_ms",
                 "retention_bytes", "topic_id", *_COMPACTION_DEFAULTS}
        unknown = set(obj) - known
        if unknown:
            raise ValueError(f"topic.json has unknown keys {sorted(unknown)}")
        if "partitions" not in obj:
            raise ValueError("topic.json has no 'partitions'")
        config = cls(**obj)
        config.validate()
        return config


@dataclass
class Topic:
    """A topic: its name, its settings and one log per partition (index = partition id)."""

    name: str
    config: TopicConfig
    partitions: list[PartitionLog] = field(default_factory=list)


@contextmanager
def _storage_errors(what: str) -> Iterator[None]:
    """Turn an ``OSError`` of a topic operation into ``StorageError`` (STORAGE_ERROR)."""
    try:
        yield
    except OSError as exc:
        raise StorageError(f"{what} failed: {exc}") from exc


def wall_clock_us() -> int:
    """Microseconds since the epoch (record timestamps are wall-clock, as in Iggy)."""
    return time.time_ns() // 1000


class Store:
    """Every topic under ``<root>/topics``; opening it recovers what a crash left behind."""

    def __init__(
        self,
        root: str,
        config: StorageConfig = StorageConfig(),  # noqa: B008 - frozen, so sharing it is safe
        *,
        fs: FileLayer = OS_FS,
        now_us: Callable[[], int] = wall_clock_us,
        logger: logging.Logger | None = None,
    ) -> None:
        self.root = root
        self.config = config
        self._fs = fs
        self._now_us = now_us
        self._log = logger or logging.getLogger("skerry.data")
        self._topics: dict[str, Topic] = {}
        self.topics: Mapping[str, Topic] = MappingProxyType(self._topics)
        self.recovery_report: list[RecoveryEvent] = []
        self._closed = False
        # Before recovery touches anything: a second process on this directory would
        # truncate tails the first is writing and leave a clean-shutdown marker under it.
        self.lock = DataDirLock.acquire(root)
        """The data directory's lock: released by ``close``, or by the kernel when the
        process dies (a test simulating a crash releases it by hand)."""
        try:
            self._open()
        except BaseException:
            self.lock.release()
            raise

    # --- opening --------------------------------------------------------------------------

    def _open(self) -> None:
        fs = self._fs
        tdir = paths.topics_dir(self.root)
        new = not fs.exists(tdir)
        fs.makedirs(tdir)
        marker = paths.clean_marker_path(self.root)
        clean = fs.exists(marker)
        changed = False
        for name in sorted(fs.listdir(tdir)):
            full = os.path.join(tdir, name)
            if name == paths.CLEAN_MARKER:
                continue
            if name.startswith((paths.DELETED_PREFIX, paths.NEW_PREFIX)):
                fs.rmtree(full)
                self._log.info("store: removed %s (an interrupted topic create or delete)", full)
                changed = True
            elif name.endswith(".tmp"):
                fs.remove(full)
                changed = True
            elif not paths.is_valid_topic_name(name):
                self._log.warning("store: ignoring %s (not a topic)", full)
            else:
                changed |= self._open_topic(name, clean)
        if clean:
            fs.remove(marker)
            changed = True
        if changed:
            fs.fsync_dir(tdir)
        if new:
            how = "new data directory"
        elif clean:
            how = "clean stop"
        else:
            how = "no clean-shutdown marker: tails checked"
        self._log.info("store: opened %d topic(s) from %s (%s)", len(self._topics), tdir, how)

    def _open_topic(self, name: str, clean: bool) -> bool:
        """Open one topic; returns True when the topics folder changed (quarantine)."""
        fs = self._fs
        tpath = paths.topic_dir(self.root, name)
        try:
            config = TopicConfig.from_json(read_json(paths.topic_config_path(tpath), None, fs))
        except (ValueError, TypeError, OSError) as exc:
            bad = paths.quarantined_topic_dir(self.root, name)
            self.recovery_report.append(RecoveryEvent(name, -1, paths.TOPIC_CONFIG, 0, range(0), f"topic quarantined as {bad}: {exc}"))
            self._log.error("store: topic %s has no readable %s (%s); moving it to %s", name, paths.TOPIC_CONFIG, exc, bad)
            if fs.exists(bad):
                self._log.error("store: %s exists already; leaving %s where it is", bad, tpath)
                return False
            fs.replace(tpath, bad)
            return True
        topic = Topic(name, config)
        for p in range(config.partitions):
            ppath = paths.partition_dir(tpath, p)
            segments = open_segments(
                fs, ppath, name, p, clean=clean, logger=self._log, events=self.recovery_report
            )
            topic.partitions.append(self._make_log(name, p, ppath, segments, config))
        self._topics[name] = topic
        return False

    def _make_log(self, topic: str, partition: int, path: str, segments: list,
                  config: TopicConfig | None = None) -> PartitionLog:
        seg_bytes, seg_ms = self._segment_limits(config)
        plog = PartitionLog(
            topic,
            partition,
            path,
            segments,
            fs=self._fs,
            now_us=self._now_us,
            segment_bytes=seg_bytes,
            segment_ms=seg_ms,
            fsync_policy=self.config.fsync,
            logger=self._log,
        )
        if config is not None and config.compacted:
            plog.accept_gaps = True
        return plog

    def _segment_limits(self, config: TopicConfig | None) -> tuple[int, int]:
        """``(segment_bytes, segment_ms)`` of a topic: its own, else the store's."""
        seg_bytes = self.config.segment_bytes
        seg_ms = self.config.segment_ms
        if config is not None:
            seg_bytes = config.segment_bytes or seg_bytes
            seg_ms = config.segment_ms or seg_ms
        return seg_bytes, seg_ms

    # --- topics ---------------------------------------------------------------------------

    def topic(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def partition(self, name: str, partition: int) -> PartitionLog:
        """``KeyError`` for an unknown topic, ``IndexError`` for a partition out of range."""
        topic = self._topics[name]
        if partition < 0:
            raise IndexError(f"partition {partition} of {name}")
        return topic.partitions[partition]

    def create_topic(self, name: str, config: TopicConfig) -> Topic:
        """Create a topic atomically (built in ``~new-<name>``, then renamed into place).
        ``ValueError`` for an invalid name or config, or when the topic exists;
        ``TopicQuarantined`` while a quarantined topic of that name (``~bad-<name>``)
        waits for the operator."""
        self._check_open()
        if not paths.is_valid_topic_name(name):
            raise ValueError(f"invalid topic name {name!r}")
        config.validate()
        fs = self._fs
        tpath = paths.topic_dir(self.root, name)
        if name in self._topics or fs.exists(tpath):
            raise ValueError(f"topic {name} exists")
        quarantined = paths.quarantined_topic_dir(self.root, name)
        if fs.exists(quarantined):
            raise TopicQuarantined(name, quarantined)
        staging = paths.new_topic_dir(self.root, name)
        topic = Topic(name, config)
        try:
            self._build_topic(topic, staging, tpath)
        except StorageError:
            for plog in topic.partitions:
                plog.close(sync=False)
            raise
        self._topics[name] = topic  # logged by the caller (the broker core), which knows why
        return topic

    def _build_topic(self, topic: Topic, staging: str, tpath: str) -> None:
        fs = self._fs
        name, config = topic.name, topic.config
        with _storage_errors(f"creating topic {name}"):
            if fs.exists(staging):
                fs.rmtree(staging)
            fs.makedirs(staging)
            for p in range(config.partitions):
                create_segments(fs, paths.partition_dir(staging, p))
            write_json_atomic(paths.topic_config_path(staging), config.to_json(), fs)
            fs.replace(staging, tpath)
            fs.fsync_dir(paths.topics_dir(self.root))
            for p in range(config.partitions):
                ppath = paths.partition_dir(tpath, p)
                segments = open_segments(fs, ppath, name, p, clean=True, logger=self._log, events=self.recovery_report)
                topic.partitions.append(self._make_log(name, p, ppath, segments, config))

    def delete_topic(self, name: str) -> None:
        """Delete a topic: rename it to ``~del-<name>``, then remove it. ``KeyError`` if missing."""
        self._check_open()
        topic = self._topics.pop(name)
        fs = self._fs
        for plog in topic.partitions:
            plog.close(sync=False)
        tdir = paths.topics_dir(self.root)
        doomed = paths.deleted_topic_dir(self.root, name)
        with _storage_errors(f"deleting topic {name}"):
            if fs.exists(doomed):
                fs.rmtree(doomed)
            fs.replace(paths.topic_dir(self.root, name), doomed)
            fs.fsync_dir(tdir)
            fs.rmtree(doomed)
            fs.fsync_dir(tdir)

    def add_partitions(self, name: str, count: int) -> Topic:
        """Grow a topic to ``count`` partitions in total. ``KeyError`` for an unknown topic,
        ``ValueError`` when ``count`` is not larger than the current count."""
        self._check_open()
        topic = self._topics[name]
        old = len(topic.partitions)
        if count <= old:
            raise ValueError(f"topic {name} has {old} partitions; {count} is not more")
        tpath = paths.topic_dir(self.root, name)
        new_logs: list[PartitionLog] = []
        config = replace(topic.config, partitions=count)
        try:
            self._grow_topic(name, tpath, old, config, new_logs)
        except StorageError:
            for plog in new_logs:
                plog.close(sync=False)
            raise
        topic.config = config
        topic.partitions.extend(new_logs)
        return topic

    def _grow_topic(self, name: str, tpath: str, old: int, config: TopicConfig, new_logs: list[PartitionLog]) -> None:
        fs = self._fs
        with _storage_errors(f"adding partitions to {name}"):
            for p in range(old, config.partitions):
                ppath = paths.partition_dir(tpath, p)
                if not fs.exists(ppath):
                    create_segments(fs, ppath)
                # A folder left by an interrupted add_partitions holds no acknowledged data.
                segments = open_segments(
                    fs, ppath, name, p, clean=False, logger=self._log, events=self.recovery_report
                )
                new_logs.append(self._make_log(name, p, ppath, segments, config))
            fs.fsync_dir(tpath)
            write_json_atomic(paths.topic_config_path(tpath), config.to_json(), fs)

    ALTERABLE = frozenset({"retention_ms", "retention_bytes", "cleanup_policy", "min_compaction_lag_ms",
                           "delete_retention_ms", "segment_bytes", "segment_ms"})
    """The settings ``alter_topic`` changes; the others are fixed when a topic is made."""

    def alter_topic(self, name: str, changes: Mapping[str, int | str | None]) -> Topic:
        """Change settings of an existing topic (``ALTERABLE``; None: no limit). The new
        settings are in its ``topic.json`` (atomic replace) before they take effect, so a
        restart keeps them. ``KeyError`` for an unknown topic, ``ValueError`` for another
        setting or an invalid value."""
        self._check_open()
        topic = self._topics[name]
        other = set(changes) - self.ALTERABLE
        if other:
            raise ValueError(f"cannot alter {sorted(other)}; only {sorted(self.ALTERABLE)}")
        config = replace(topic.config, **changes)
        config.validate()
        with _storage_errors(f"altering topic {name}"):
            write_json_atomic(paths.topic_config_path(paths.topic_dir(self.root, name)),
                              config.to_json(), self._fs)
        topic.config = config
        seg_bytes, seg_ms = self._segment_limits(config)
        for plog in topic.partitions:
            plog.set_segment_limits(seg_bytes, seg_ms)
            plog.accept_gaps = plog.accept_gaps or config.compacted
        return topic

    # --- maintenance ----------------------------------------------------------------------

    def enforce_retention(self, now_us: int | None = None) -> list[RemovedSegment]:
        """Roll active segments older than ``segment_ms``, then delete whole sealed segments
        by each topic's ``retention_ms`` (record timestamps) and ``retention_bytes``; never
        an active segment. Returns what was removed."""
        now = self._now_us() if now_us is None else now_us
        removed: list[RemovedSegment] = []
        for topic in list(self._topics.values()):
            cfg = topic.config
            retention_ms, retention_bytes = (cfg.retention_ms, cfg.retention_bytes) if cfg.deletes else (None, None)
            for plog in topic.partitions:
                removed.extend(plog.enforce_retention(now, retention_ms, retention_bytes))
        return removed

    def now_us(self) -> int:
        """The store's clock: wall-clock microseconds, as record timestamps are."""
        return self._now_us()

    def clean_policy(self, name: str) -> CleanPolicy | None:
        """How a topic's partitions are cleaned; None when it is not compacted."""
        topic = self._topics.get(name)
        if topic is None or not topic.config.compacted:
            return None
        return CleanPolicy(topic.config.delete_retention_ms, self._segment_limits(topic.config)[0])

    def clean(self, upto: Callable[[str, int], int] | None = None, now_us: int | None = None,
              *, min_dirty_ratio: float = MIN_CLEANABLE_DIRTY_RATIO) -> list[CleanStats]:
        """One cleaning pass over every partition of every compacted topic, in the calling
        thread (a tool or a test; the broker builds passes in a worker thread, see
        ``broker.core.periodic``). ``upto(topic, partition)`` bounds what may be cleaned
        (the high watermark + 1; default: the log end). Returns the passes installed."""
        now = self._now_us() if now_us is None else now_us
        done: list[CleanStats] = []
        for topic in list(self._topics.values()):
            policy = self.clean_policy(topic.name)
            if policy is None:
                continue
            for p, plog in enumerate(topic.partitions):
                limit = plog.next_offset if upto is None else upto(topic.name, p)
                stats = plog.clean(now, limit, policy, min_compaction_lag_ms=topic.config.min_compaction_lag_ms,
                                   min_dirty_ratio=min_dirty_ratio)
                if stats is not None:
                    done.append(stats)
        return done

    def sync_all(self) -> None:
        """fsync every partition with unsynced data (the ``interval`` policy's tick).

        Safe in a worker thread. Tries every partition; a failure is raised afterwards as one
        ``StorageError`` naming the partitions (each is then failed on its own)."""
        errors: list[str] = []
        for topic in list(self._topics.values()):
            for plog in list(topic.partitions):
                if plog.failed is not None or plog.closed or not plog.has_unsynced():
                    continue
                try:
                    plog.sync()
                except StorageError as exc:
                    errors.append(exc.message)
        if errors:
            raise StorageError("; ".join(errors))

    def close(self) -> None:
        """Flush and fsync every partition, close every file, write the clean-shutdown
        marker (only when no partition failed: then the next open checks every tail), and
        release the data directory's lock, last."""
        if self._closed:
            return
        self._closed = True
        try:
            ok = True
            for topic in self._topics.values():
                for plog in topic.partitions:
                    plog.close()
                    if plog.failed is not None:
                        ok = False
            if ok:
                write_atomic(paths.clean_marker_path(self.root), b"clean\n", self._fs)
            else:
                self._log.error("store: closed with failed partitions; the next start runs recovery")
        finally:
            self.lock.release()

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("store is closed")
