"""Topic lifecycle and the refusals every write starts with.

Owns: the topics of the ``topics:`` configuration section (created or grown at start),
resolving a topic by name (auto-creating it with the defaults when allowed), the admin
operations (create, delete, add partitions, alter or override retention, delete oldest
segments), the limits they are held to (``limits.max_topics``,
``limits.max_partitions_per_topic``, replica placement in a cluster), and the one place
that refuses a write to a partition this broker does not lead (``NotLeader``) or that
failed after an I/O error (``StorageError``).

Topic changes are announced to the replication and group services passed in at
construction, and to the listeners added since (``listeners``: the KIP-848 consumer groups,
whose subscriptions follow topic names and partition counts). Flushing queued produces before a delete is the caller's job (the facade,
``broker.core.BrokerCore``): this module knows nothing of the produce pipeline.

Must not import: transports, Twisted, the other core modules but ``ports``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from access import NotAuthorized
from broker.config import TOPIC_EXTRA_KEYS, Config, TopicSettings
from broker.core.ports import GroupEvents, ReplicationView, StoreView
from broker.errors import (
    BadRequest,
    InvalidTopicName,
    NotLeader,
    StorageError,
    UnknownPartition,
    UnknownTopic,
)
from data.errors import TopicQuarantined
from data.log import PartitionLog
from data.names import INTERNAL_PREFIX, is_valid_name
from data.store import Topic, TopicConfig
from groups.records import GROUPS_TOPIC_SETTINGS

__all__ = ["Topics"]

log = logging.getLogger("skerry.core")


class Topics:
    """Topic lifecycle over one store, with the limits of one configuration."""

    def __init__(self, config: Config, store: StoreView, replication: ReplicationView,
                 groups: GroupEvents) -> None:
        self._config = config
        self._store = store
        self._replication = replication
        self._groups = groups
        self.remote_create: Callable[[str, TopicSettings], None] | None = None
        """With the control plane on etcd: auto-creation asks it (the topic appears on
        every broker from etcd's watch) instead of creating a local topic."""
        self.listeners: list[Callable[[str], None]] = []
        """Called with a topic's name once it was created, deleted or grew (on every
        path: admin requests of any transport, auto-creation, the configuration at start,
        and etcd's watch applying another broker's change)."""
        self.by_name: Mapping[str, Topic] = store.topics
        """Every topic by name: the store's live, read-only mapping (the produce hot path
        looks a topic up here before it needs ``resolve``)."""

    # ---------------------------------------------------------------- start

    def ensure_configured(self) -> None:
        """Create the topics of the configuration that do not exist yet, and grow those
        that have fewer partitions than configured (partitions are never removed)."""
        for name, settings in self._config.topics.items():
            existing = self._store.topic(name)
            if existing is None:
                try:
                    self._create(name, settings)
                except BadRequest as error:
                    if not isinstance(error.__cause__, TopicQuarantined):
                        raise
                    # The broker starts with everything else, as it does after quarantining.
                    log.error("topic %s of the configuration not created: %s", name,
                              error.message)
            elif settings.partitions > existing.config.partitions:
                self.add_partitions(name, settings.partitions)
            elif settings.partitions < existing.config.partitions:
                log.warning("topic %s: config asks for %d partitions but it has %d; partitions "
                            "are never removed", name, settings.partitions,
                            existing.config.partitions)

    # ---------------------------------------------------------------- lookups

    def resolve(self, name: str, partition: int | None, create: bool,
                may_create: Callable[[], bool] | None = None) -> Topic:
        """The topic, after checking ``partition`` against its count: the one place a
        request's topic is resolved and the auto-create policy applied, whatever the
        transport.

        A missing topic is auto-created with the defaults when ``create`` (the request and
        its transport allow it) and ``auto_create_topics`` allow it, but only once the
        request passed its checks: a partition beyond the would-be count is refused first
        (``UnknownPartition``) and creates nothing. ``InvalidTopicName`` for a missing
        topic whose name no topic may have, else ``UnknownTopic`` when it may not be
        created (both ``BadRequest``: V1 answers them so). ``may_create``: the transport's
        own permission to create, asked only once the policy would create (Kafka's
        Metadata: Create on the cluster or the topic); ``access.NotAuthorized`` when it
        says no.
        """
        topic = self._store.topic(name)
        if topic is None:
            if not is_valid_name(name):
                raise InvalidTopicName(f"invalid topic name {name!r}")
            if not (create and self._config["auto_create_topics"]):
                raise UnknownTopic("unknown topic")
            defaults = self._config.topic_defaults
            if partition is not None and partition >= defaults.partitions:
                raise UnknownPartition(f"partition {partition} out of range; topic {name} "
                                       f"would have {defaults.partitions} partitions")
            if may_create is not None and not may_create():
                raise NotAuthorized(operation="Create", resource=f"Topic:{name}")
            if self.remote_create is not None:
                self.remote_create(name, defaults)
                raise NotLeader(f"topic {name} is being created across the cluster; retry "
                                "in a moment")
            return self._create(name, defaults)
        if partition is not None and partition >= topic.config.partitions:
            raise UnknownPartition(f"partition {partition} out of range; topic {name} has "
                                   f"{topic.config.partitions} partitions")
        return topic

    def require(self, name: str) -> Topic:
        """The topic; ``UnknownTopic`` when there is none (never creates)."""
        topic = self._store.topic(name)
        if topic is None:
            raise UnknownTopic("unknown topic")
        return topic

    def topic_names(self) -> list[str]:
        """The name of every user topic: internal topics (``__skerry_``...: group state)
        are the broker's own and listed nowhere."""
        return [name for name in self._store.topics if not name.startswith(INTERNAL_PREFIX)]

    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              min_insync_replicas: int) -> Topic:
        """Create one of the broker's own topics: compacted, no retention whatever the
        defaults say, outside ``limits.max_topics`` (a user's topic count does not make room
        for it)."""
        if not name.startswith(INTERNAL_PREFIX):
            raise ValueError(f"{name} is not an internal topic name")
        try:
            # Compacted: the latest record of each key is all a coordinator needs; small
            # segments, so the cleaner reaches all but the last few MiB (what a loading
            # coordinator reads beyond the latest records).
            topic = self._store.create_topic(name, TopicConfig(
                partitions=partitions, replication_factor=replication_factor,
                min_insync_replicas=min_insync_replicas, **GROUPS_TOPIC_SETTINGS))
        except OSError as exc:
            raise StorageError(f"cannot create topic {name}: {exc.strerror}") from exc
        log.info("created internal topic %s (partitions=%d replication_factor=%d)", name,
                 partitions, replication_factor)
        return topic

    def topic_config(self, name: str) -> TopicConfig | None:
        """A topic's settings; None when there is no such topic."""
        topic = self._store.topic(name)
        return None if topic is None else topic.config

    # ---------------------------------------------------------------- write refusals

    def check_leader(self, topic: str, partition: int) -> None:
        """``NotLeader`` unless this broker accepts writes for the partition."""
        if not self._replication.is_leader(topic, partition):
            raise self._replication.not_leader_error(topic, partition)

    @staticmethod
    def check_healthy(topic: str, partition: int, plog: PartitionLog) -> None:
        """``StorageError`` when the partition refuses writes after an I/O error."""
        if plog.failed is not None:
            raise StorageError(f"partition {partition} of {topic} refuses writes "
                               f"after an I/O error: {plog.failed.message}")

    def check_writable(self, topic: str, partition: int, plog: PartitionLog) -> None:
        """The refusals of every write that change nothing: ``NotLeader``, then a failed
        partition's ``StorageError``."""
        self.check_leader(topic, partition)
        self.check_healthy(topic, partition, plog)

    # ---------------------------------------------------------------- admin

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     min_insync_replicas: int | None, retention_ms: int | None,
                     retention_bytes: int | None,
                     extra: Mapping[str, Any] | None = None,
                     topic_id: str | None = None) -> Topic:
        """Create a topic; the settings not given come from ``topic_defaults``. ``extra``:
        the other settings given (``TOPIC_EXTRA_KEYS``: cleanup policy, segment limits);
        ``topic_id`` (32 hex digits) when the cluster chose it, else a new random one."""
        if self._store.topic(name) is not None:
            raise BadRequest("topic already exists")
        if partitions < 1 or replication_factor < 1:
            raise BadRequest("partitions and replication_factor must be at least 1")
        if replication_factor > 1 and self._config.cluster is None:
            # Kafka's rule (replication factor larger than available brokers). The V1
            # contract's stand-in followers (REPLICA_FETCH reports) stay available for
            # topics an operator declares in the config, where that setup is deliberate.
            raise BadRequest(
                f"replication factor {replication_factor} is larger than the number of "
                f"brokers (1): a single broker has no follower to copy it to; declare the "
                f"topic in the config's topics: section to have REPLICA_FETCH reports stand "
                f"in for its followers (docs/protocol.md, Replication)")
        defaults = self._config.topic_defaults
        extra = dict(extra or {})
        unknown = set(extra) - set(TOPIC_EXTRA_KEYS)
        if unknown:
            raise BadRequest(f"unknown topic settings {sorted(unknown)}")
        return self._create(name, replace(defaults, **extra,
            partitions=partitions,
            replication_factor=replication_factor,
            min_insync_replicas=min(replication_factor, defaults.min_insync_replicas)
            if min_insync_replicas is None else min_insync_replicas,
            retention_ms=defaults.retention_ms if retention_ms is None else retention_ms,
            retention_bytes=defaults.retention_bytes if retention_bytes is None else retention_bytes,
        ), topic_id)

    def delete_topic(self, name: str) -> None:
        """Delete a topic and tell the replication and group services (flush the produce
        pipeline first: nothing may still be queued for it)."""
        self.require(name)
        self._store.delete_topic(name)
        self._replication.forget_topic(name)
        self._groups.topic_deleted(name)
        log.info("deleted topic %s", name)
        self._announce(name)

    def add_partitions(self, name: str, count: int) -> Topic:
        """Grow a topic to ``count`` partitions (never fewer than it has)."""
        topic = self.require(name)
        if count <= topic.config.partitions:
            raise BadRequest(f"topic {name} already has {topic.config.partitions} partitions; "
                             "the new count must be larger")
        self._check_partition_limit(count)
        topic = self._store.add_partitions(name, count)
        self._replication.partitions_added(name)
        self._groups.partitions_changed(name)
        log.info("topic %s now has %d partitions", name, count)
        self._announce(name)
        return topic

    def alter_topic(self, name: str, changes: Mapping[str, Any]) -> Topic:
        """Change a topic's retention (``retention_ms``, ``retention_bytes``; None: no
        limit), cleanup policy, compaction and segment settings, kept in its
        ``topic.json``; the next retention or cleaning pass applies them. ``BadRequest``
        for an invalid value."""
        self.require(name)
        try:
            topic = self._store.alter_topic(name, changes)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        log.info("topic %s altered: %s", name,
                 " ".join(f"{key}={value}" for key, value in sorted(changes.items())))
        return topic

    def set_topic_retention(self, name: str, retention_ms: int | None,
                            retention_bytes: int | None) -> None:
        """Change a topic's retention for this process (``topic.json`` keeps the values
        the topic was created with; a transport that changes them re-applies its own
        record at start). The next retention pass applies them."""
        topic = self.require(name)
        topic.config = replace(topic.config, retention_ms=retention_ms,
                               retention_bytes=retention_bytes)

    def delete_oldest_segments(self, name: str, partition: int, count: int) -> int:
        """Delete up to ``count`` of a partition's oldest sealed segments (never the active
        one); returns how many went. Their messages are gone; offsets do not change."""
        plog = self.resolve(name, partition, False).partitions[partition]
        removed = 0
        while removed < count and plog.segment_count > 1:
            # now_us=0: no time-based roll or expiry, only the size rule, which removes
            # exactly the oldest sealed segment when the limit is one byte under the size.
            gone = plog.enforce_retention(0, None, plog.size_bytes() - 1)
            if not gone:
                break
            removed += len(gone)
        if removed:
            log.info("deleted %d segment(s) of %s/%d", removed, name, partition)
        return removed

    # ---------------------------------------------------------------- creation

    def _check_partition_limit(self, count: int) -> None:
        limit = self._config["limits.max_partitions_per_topic"]
        if count > limit:
            raise BadRequest(f"at most {limit} partitions per topic")

    def _create(self, name: str, settings: TopicSettings, topic_id: str | None = None) -> Topic:
        max_topics = self._config["limits.max_topics"]
        if len(self._store.topics) >= max_topics:
            raise BadRequest(f"topic limit reached (limits.max_topics={max_topics})")
        self._check_partition_limit(settings.partitions)
        if settings.min_insync_replicas > settings.replication_factor:
            raise BadRequest("min_isr is greater than the replication factor")
        self._check_placement(name, settings)
        config = TopicConfig(
            partitions=settings.partitions,
            replication_factor=settings.replication_factor,
            min_insync_replicas=settings.min_insync_replicas,
            retention_ms=settings.retention_ms,
            retention_bytes=settings.retention_bytes,
            **{key: getattr(settings, key) for key in TOPIC_EXTRA_KEYS},
            topic_id=topic_id or uuid.uuid4().hex,
        )
        try:
            config.validate()
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        try:
            topic = self._store.create_topic(name, config)
        except OSError as exc:
            raise StorageError(f"cannot create topic {name}: {exc.strerror}") from exc
        except TopicQuarantined as exc:
            raise BadRequest(f"{exc}: repair or remove it first (docs/operations.md, "
                             "Recovering a damaged log)") from exc
        log.info("created topic %s (partitions=%d replication_factor=%d)", name,
                 settings.partitions, settings.replication_factor)
        self._announce(name)
        return topic

    def _announce(self, name: str) -> None:
        """Tell the listeners; one failing is logged (the change itself is done)."""
        for listener in self.listeners:
            try:
                listener(name)
            except Exception:
                log.exception("topic listener failed after a change to %s", name)

    def _check_placement(self, name: str, settings: TopicSettings) -> None:
        """In a cluster, ``BadRequest`` unless every partition's replica list can be built:
        no more replicas than brokers, and as many as an explicit ``cluster.replicas`` list
        names (the rule the ``topics:`` section is held to at startup). A single broker
        takes any factor: REPLICA_FETCH reports stand in for its followers (V1 spec,
        Replication)."""
        cluster = self._config.cluster
        if cluster is None:
            return
        rf = settings.replication_factor
        brokers = len(cluster.brokers)
        if rf > brokers:
            raise BadRequest(f"replication factor {rf} is larger than the number of brokers "
                             f"({brokers})")
        for partition in range(settings.partitions):
            try:
                cluster.replicas(name, partition, rf)
            except ValueError as exc:
                raise BadRequest(str(exc)) from None
