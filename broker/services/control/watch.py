"""The control plane's read of etcd: every key read at one revision, then watched from the next, applied to this broker's topics and partitions.

Must not import: the global reactor, the transports, the store's modules.
"""

from __future__ import annotations

from broker.errors import BadRequest, Unavailable
from broker.services.control.base import log, run_logged
from broker.services.etcd import (
    KeyValue,
    OutcomeUnknown,
    WatchEvent,
)
from replication.control.keys import (
    BrokerKey,
    ControllerKey,
    LogEndKey,
    PartitionKey,
    TopicKey,
)
from replication.control.view import (
    ClusterView,
)


class ClusterWatch:
    """Part of ``ControlPlane``: reading and watching the keys and applying them locally."""

    async def _load(self) -> None:
        """Read every key at one revision, apply them, and watch from the next one."""
        result = await self._retrying(
            lambda: self.client.range(self.layout.prefix, prefix=True), "reading etcd")
        self._note(result.header)
        view = ClusterView(self.layout)
        for kv in result.kvs:
            view.put(kv.key, kv.value, mod_revision=kv.mod_revision,
                     create_revision=kv.create_revision, lease=kv.lease)
        view.revision = result.header.revision
        gone = [t for t in self.view.topics if t not in view.topics]
        self.view = view
        for name in gone:
            self._apply_topic(name)
        for name in sorted(view.topics):
            self._apply_topic(name)
        if self._watch is not None:
            self._watch.cancel()
        self._watch = self.client.watch(self.layout.prefix, self._on_events, prefix=True,
                                        start_revision=result.header.revision + 1,
                                        on_compacted=self._compacted)

    def _compacted(self, revision: int) -> None:
        log.warning("etcd compacted revision %d before the watch read it; reading again",
                    revision)
        run_logged(self._load())

    async def _publish_local_topics(self) -> None:
        """Topics this broker has (its ``topics:`` section) that etcd does not: create them
        cluster-wide, so a config-declared topic is the cluster's."""
        for name in self.topics.names():
            if name in self.view.topics:
                continue
            local = self.topics.local_record(name)
            if local is None:
                continue
            partitions, rf, min_isr, settings = local
            try:
                await self.create_topic(name, partitions, rf, min_isr=min_isr,
                                        settings=settings)
            except BadRequest as exc:
                if exc.message != "topic already exists":
                    log.warning("topic %s not published to etcd: %s", name, exc.message)
            except (Unavailable, OutcomeUnknown) as exc:
                log.warning("topic %s not published to etcd: %s", name, exc)

    def _on_events(self, events: list[WatchEvent]) -> None:
        topics: set[str] = set()
        partitions: set[tuple[str, int]] = set()
        controller_gone = brokers_changed = reports = False
        joined: list[int] = []
        left: list[int] = []
        for event in events:
            kv = event.kv
            if event.deleted:
                parsed = self.view.delete(kv.key, revision=kv.mod_revision)
            else:
                parsed = self.view.put(kv.key, kv.value, mod_revision=kv.mod_revision,
                                       create_revision=kv.create_revision, lease=kv.lease)
            match parsed:
                case TopicKey(topic):
                    topics.add(topic)
                case PartitionKey(topic, p) if not event.deleted:
                    partitions.add((topic, p))
                case ControllerKey():
                    if event.deleted:
                        controller_gone = True
                    else:
                        log.info("controller is broker %s (epoch %d)", self.view.controller,
                                 self.view.controller_epoch)
                case LogEndKey():
                    reports = True
                case BrokerKey(broker_id):
                    brokers_changed = True
                    (left if event.deleted else joined).append(broker_id)
                    log.info("broker %d %s", broker_id, "left (lease gone)" if event.deleted
                             else "registered")
        for topic in sorted(topics):
            self._apply_topic(topic)
        for topic, p in sorted(partitions):
            if topic not in topics:
                self._apply_partition(topic, p)
        if controller_gone:
            self._try_claim()
        if brokers_changed:     # a broker back: the partitions led here may take it again
            for (topic, p), state in sorted(self.view.partitions.items()):
                if state.leader == self.broker_id:
                    self._isr_wanted(topic, p)
        if brokers_changed or topics or partitions or reports:
            self._schedule_reconcile()
        for broker_id in left:
            self.returns.broker_left(broker_id)
        for broker_id in joined:
            if broker_id in self.view.brokers:
                self.returns.broker_joined(self.view, broker_id)
        if brokers_changed or partitions or topics:
            self._review_returns()

    def _apply_topic(self, name: str) -> None:
        record = self.view.topics.get(name)
        local = self.topics.partitions_of(name)
        try:
            if record is None:
                for key in [k for k in self._reported if k[0] == name]:
                    del self._reported[key]     # the topic's deletion took the reports
                if local is not None:
                    self.topics.delete_local(name)
                return
            if local is None:
                self.topics.create_local(name, record)
            elif local < record.partitions:
                self.topics.grow_local(name, record.partitions)
            if local is not None:
                self.topics.alter_local(name, record)
        except Exception as exc:  # noqa: BLE001 - one topic's failure must not stop the rest
            log.error("topic %s from etcd not applied locally: %s", name, exc)
            return
        for p in range(record.partitions):
            self._apply_partition(name, p)

    def _apply_partition(self, topic: str, partition: int) -> None:
        state = self.view.partitions.get((topic, partition))
        if state is None or self.topics.partitions_of(topic) is None:
            return
        try:
            self.replication.apply_stored(topic, partition, state.leader, state.leader_epoch,
                                          state.isr)
        except Exception as exc:  # noqa: BLE001 - logged; the next event applies again
            log.error("%s/%d: etcd state not applied: %s", topic, partition, exc)
            return
        self._sync_log_end(topic, partition)

    def _absorb(self, reads: tuple[tuple[KeyValue, ...] | None, ...]) -> None:
        """A txn lost its compare: take what its failure branch read."""
        for kvs in reads:
            for kv in kvs or ():
                self.view.put(kv.key, kv.value, mod_revision=kv.mod_revision,
                              create_revision=kv.create_revision, lease=kv.lease)
