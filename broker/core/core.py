"""``BrokerCore``: the one object every transport goes through, composed of the core's
parts.

Owns: building the parts over the collaborators the shell passes in (``topics.Topics``,
``reads.Reads``, ``produce.ProducePipeline``, ``producers.Producers``,
``durability.GroupCommitter``, ``periodic.Periodic``), the public methods transports call
(each a delegation to one part, or a short sequence where two parts meet: a delete
flushes the produce pipeline first), start and the orderly stop.

Transports (V1, Iggy) parse and format only: they call the methods here with plain values
and get plain values (or errors from ``broker.errors``) back. The group and replication
services are not reached through the core: the shell hands them to the transports that
need them.

Must not import: transports, sockets. Time comes from the injected ``clock``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.internet.interfaces import IReactorTime

from access import Authorizer, Operation, ResourceType
from broker.config import Config
from broker.core.access import AccessGate
from broker.core.durability import GroupCommitter, synchronous
from broker.core.idempotence import (
    LogSnapshotStore,
    ProducerStates,
    ProducerStateStore,
)
from broker.core.periodic import Periodic
from broker.core.ports import (
    CommitWaiter,
    CoreMetrics,
    GroupEvents,
    ReplicationView,
    StoreView,
)
from broker.core.produce import ProducePipeline
from broker.core.producers import Producers
from broker.core.read_api import ReadApi
from broker.core.reads import Reads, Watermarks
from broker.core.topics import Topics
from broker.errors import SkerryError
from data.log import PartitionLog
from data.store import Topic, TopicConfig

log = logging.getLogger("skerry.core")

__all__ = ["BrokerCore"]

RunInThread = Callable[[Callable[[], Any]], Deferred[Any]]


class BrokerCore(ReadApi):
    """Everything a transport may ask of the broker."""

    def __init__(self, config: Config, store: StoreView, clock: IReactorTime, *,
                 replication: ReplicationView, groups: GroupEvents,
                 run_in_thread: RunInThread,
                 producer_store: ProducerStateStore | None = None) -> None:
        """``producer_store``: where idempotent producers' state snapshots are kept
        (default: beside each partition's segments)."""
        self.config = config
        self.clock = clock
        self.store = store
        """The store, for the shell and tests; transports use the methods below."""
        self.replication = replication
        """The replication service, for the shell and tests (transports get it from the
        shell)."""
        self.groups = groups
        """The group service, for the shell and tests (transports get it from the shell)."""
        self.closing = False
        self._run_in_thread = run_in_thread
        self._metrics: CoreMetrics | None = None
        per_turn = config["storage.group_commit"] == "turn"
        self.committer = GroupCommitter(
            self._run_sync_inline if per_turn else self._run_sync, self._after_sync,
            end_of_turn=(lambda sync_turn: clock.callLater(0, sync_turn)) if per_turn else None)
        """Group commit, for the shell and tests (``syncs``): with ``storage.group_commit:
        turn`` its fsyncs run on the reactor thread once per turn, after the produce
        pipeline's flush (``before_sync``, set below); with ``thread``, on a worker thread."""
        self._topics = Topics(config, store, replication, groups)
        marks = self._marks = Watermarks(store, replication)
        self._reads = Reads(config, store, self._topics, marks, clock)
        self._producers = Producers()
        self._producer_states = ProducerStates(
            producer_store or LogSnapshotStore(), lambda: int(clock.seconds() * 1000))
        self._produce = ProducePipeline(
            self._topics, clock, replication, self.committer, self._producers,
            fsync=config["storage.fsync"], hw=marks.hw, notify_hw=self._reads.notify_hw,
            producer_states=self._producer_states)
        self.committer.before_sync = self._produce.flush
        self._periodic = Periodic(config, store, clock, run_in_thread, hw=marks.hw)
        self.produce = self._produce.produce
        """The one produce entry every transport calls: ``produce(request, answer)`` with a
        ``ProduceRequest`` (keyed values or framed records, producer fields) and a
        ``ProduceCallback`` (``ProducePipeline.produce``: topic resolution and auto-create,
        refusals, idempotence, this turn's merged append or a batch's own, acks). The
        pipeline's method itself: the hot path skips a delegation frame."""

        self.access = AccessGate(Authorizer(enabled=False))
        """Who may do what (``broker/core/access.py``): the shell puts the configured
        authorizer in; without authentication everything is allowed."""

    def check_access(self, requester: Any, operation: Operation,
                     resource_type: ResourceType, name: str) -> None:
        """Raise ``access.NotAuthorized`` unless the requester's principal may do
        ``operation`` on the resource (logged once per connection, counted)."""
        self.access.check(requester, operation, resource_type, name)

    def allowed(self, requester: Any, operation: Operation, resource_type: ResourceType,
                name: str) -> bool:
        """``check_access`` without raising, logging or counting: for filtering lists."""
        return self.access.allowed(requester, operation, resource_type, name)

    @property
    def metrics(self) -> CoreMetrics | None:
        """``broker.metrics.BrokerMetrics`` when ``metrics_port`` is set: fed per append,
        per read and per fsync."""
        return self._metrics

    @metrics.setter
    def metrics(self, metrics: CoreMetrics | None) -> None:
        self._metrics = self._produce.metrics = self._reads.metrics = metrics

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Create configured topics and start periodic work (fsync interval, retention)."""
        self._topics.ensure_configured()
        self._periodic.start()

    def stop(self) -> Deferred[None]:
        """Flush pending produces, wait for their fsyncs, stop timers, close the store."""
        self.closing = True
        self.flush()
        cleaner_stopped = self._periodic.stop()
        self._reads.wake_all()

        def drained() -> Deferred[Any]:
            if self.committer.idle():
                return succeed(None)
            d: Deferred[Any] = Deferred()
            self.clock.callLater(0.01, lambda: drained().chainDeferred(d))
            return d

        def close_groups(_: object) -> Deferred[None]:
            # The last group writes (COMMITs already answered are on disk; this flushes
            # liveness changes) finish before the store closes.
            return self.groups.close()

        def close_store(_: object) -> None:
            self._producer_states.save_all()
            self.replication.close()
            self.store.close()

        return DeferredList([drained(), cleaner_stopped]).addCallback(close_groups).addCallback(close_store)

    def clean_now(self, min_dirty_ratio: float | None = 0.0) -> Deferred[int]:
        """Run the log cleaner over every compacted topic now (tests, tools): fires with
        the number of partitions cleaned. ``min_dirty_ratio`` 0 (the default here) cleans
        every sealed segment below the high watermark; None: the cleaner's own ratio."""
        return self._periodic.clean_now(min_dirty_ratio)

    def idle(self) -> bool:
        """True when no produce waits for an fsync (the shell's drain check)."""
        return self.committer.idle()

    # ---------------------------------------------------------------- durability

    def _run_sync(self, sync: Callable[[], Any]) -> Deferred[Any]:
        """The group committer's thread runner; times each fsync when metrics are on."""
        metrics = self._metrics
        return self._run_in_thread(sync if metrics is None else metrics.timed_fsync(sync))

    def _run_sync_inline(self, sync: Callable[[], Any]) -> Deferred[Any]:
        """The group committer's turn runner: the fsync on the reactor thread, timed when
        metrics are on."""
        metrics = self._metrics
        return synchronous(sync if metrics is None else metrics.timed_fsync(sync))

    def _after_sync(self, plog: PartitionLog) -> None:
        """An fsync of ``plog`` finished: ``hw`` may move, and long polls may wake."""
        self.replication.on_durable(plog.topic, plog.partition)
        self._reads.notify_hw(plog.topic, plog.partition)

    def wait_synced(self, name: str, partition: int, callback: CommitWaiter) -> None:
        """Call ``callback(None)`` once everything appended to the partition so far is
        fsynced, ``callback(error)`` when the fsync failed."""
        plog = self.store.partition(name, partition)
        self.committer.wait(plog, plog.next_offset, callback)

    def when_durable(self, plog: PartitionLog, upto: int) -> Deferred[None]:
        """A Deferred that fires once ``plog``'s offsets ``< upto`` are fsynced and fails
        with the fsync's error (the replication service's log syncer)."""
        d: Deferred[None] = Deferred()

        def waiter(error: SkerryError | None) -> None:
            if error is None:
                d.callback(None)
            else:
                d.errback(error)

        self.committer.wait(plog, upto, waiter)
        return d

    # ---------------------------------------------------------------- topics

    def resolve(self, name: str, partition: int | None, create: bool,
                may_create: Callable[[], bool] | None = None) -> Topic:
        """The topic, after checking ``partition`` against its count (``Topics.resolve``:
        auto-created with the defaults when ``create`` and the configuration allow it, and
        ``may_create``, the transport's own permission, when given)."""
        return self._topics.resolve(name, partition, create, may_create)

    def topic_names(self) -> list[str]:
        """The name of every topic."""
        return self._topics.topic_names()

    def topic_config(self, name: str) -> TopicConfig | None:
        """A topic's settings (partition count, replication, retention); None when there is
        no such topic."""
        return self._topics.topic_config(name)

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     min_insync_replicas: int | None, retention_ms: int | None,
                     retention_bytes: int | None,
                     extra: Mapping[str, Any] | None = None,
                     topic_id: str | None = None) -> Topic:
        """Create a topic; the settings not given come from ``topic_defaults`` (``extra``:
        ``TOPIC_EXTRA_KEYS``, the cleanup policy and segment limits); its id is ``topic_id``
        (a cluster's choice, the same on every broker) or a new random one."""
        return self._topics.create_topic(name, partitions, replication_factor,
                                         min_insync_replicas, retention_ms, retention_bytes,
                                         extra, topic_id)

    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              min_insync_replicas: int) -> Topic:
        """Create one of the broker's own topics (``Topics.create_internal_topic``)."""
        return self._topics.create_internal_topic(name, partitions, replication_factor,
                                                  min_insync_replicas)

    def set_remote_create(self, create: Any) -> None:
        """With the control plane on etcd: ``create(name, settings)`` starts creating an
        auto-created topic cluster-wide (``Topics.remote_create``)."""
        self._topics.remote_create = create

    def delete_topic(self, name: str) -> None:
        """Delete a topic, once the messages queued for it this turn were appended."""
        self._topics.require(name)
        self.flush()
        self._topics.delete_topic(name)
        self._producer_states.forget_topic(name)

    def add_topic_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(name)`` after each topic is created, deleted or grows, whatever
        the path (``Topics.listeners``)."""
        self._topics.listeners.append(listener)

    def add_partitions(self, name: str, count: int) -> Topic:
        """Grow a topic to ``count`` partitions."""
        return self._topics.add_partitions(name, count)

    def alter_topic(self, name: str, changes: Mapping[str, Any]) -> Topic:
        """Change a topic's settings (``data.store.Store.ALTERABLE``), kept in its
        ``topic.json``."""
        return self._topics.alter_topic(name, changes)

    def set_topic_retention(self, name: str, retention_ms: int | None,
                            retention_bytes: int | None) -> None:
        """Change a topic's retention for this process only (``Topics.set_topic_retention``)."""
        self._topics.set_topic_retention(name, retention_ms, retention_bytes)

    def delete_oldest_segments(self, name: str, partition: int, count: int) -> int:
        """Delete up to ``count`` of a partition's oldest sealed segments, once the messages
        queued for it this turn were appended; returns how many went."""
        self._topics.resolve(name, partition, False)
        self.flush()
        return self._topics.delete_oldest_segments(name, partition, count)

    # ---------------------------------------------------------------- produce

    def partition_for_key(self, key: bytes, partitions: int) -> int:
        """The partition a key goes to among ``partitions`` (FNV-1a)."""
        return self._produce.partition_for_key(key, partitions)

    def flush(self) -> None:
        """Append every partition's queued messages now."""
        self._produce.flush()

    def forget_producers(self, topic: str, partition: int) -> None:
        """Replication changed the partition (its role, its epoch, a confirmed leadership):
        drop its idempotent-produce state, rebuilt from the log at its next use. While it
        was not leading, the log may have taken another leader's records or been truncated;
        a state kept across that would miss those producers (appending their resends
        again) or point at offsets that now hold other messages (dropping a resend).
        Kafka's idempotent producer state goes the same way (``ProducerStates.forget``)."""
        self._producers.forget(topic, partition)
        self._producer_states.forget(topic, partition)

    def replica_copied(self, topic: str, partition: int, plog: PartitionLog, first: int,
                       data: bytes) -> None:
        """A follower appended ``data`` (its leader's stored records from offset ``first``)
        to ``plog``: its idempotent producer state follows, and is snapshotted at the log's
        rolls, so that the broker, once leader, replays at most its active segment
        (``ProducerStates.copied``). A state that cannot follow (a read or snapshot error)
        is dropped, rebuilt from the log at its next use."""
        try:
            self._producer_states.copied(topic, partition, plog, first, data)
        except (SkerryError, OSError, ValueError) as exc:
            log.warning("%s/%d: producer state not kept on this follower: %s", topic,
                        partition, exc)
            self._producer_states.forget(topic, partition)

