"""The cluster-wide operations the transports' admin commands and the CLI call: create, delete, grow and alter a topic, the operator's forced election, and auto-create.

Must not import: the global reactor, the transports, the store's modules.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from broker.errors import BadRequest, Unavailable
from broker.services.control.base import log, run_logged
from broker.services.etcd import (
    OutcomeUnknown,
)
from replication.control.errors import ControlError
from replication.control.keys import (
    PartitionState,
    TopicRecord,
)
from replication.control.txn import (
    Compare,
    Get,
    PartitionWrite,
    Put,
    Target,
    Txn,
    alter_topic,
    create_topic,
    delete_topic,
    grow_topic,
    write_partitions,
)
from replication.control.view import (
    forced_election,
)


class TopicOperations:
    """Part of ``ControlPlane``: the public cluster-wide operations (package docstring)."""

    async def create_topic(self, name: str, partitions: int, replication_factor: int, *,
                           min_isr: int | None = None,
                           settings: Mapping[str, Any] | None = None) -> tuple[int, int]:
        """Create a topic cluster-wide (package docstring)."""
        try:
            self.layout.topic(name)
        except ControlError as exc:
            raise BadRequest(str(exc)) from None
        brokers = len(self.cluster.brokers)
        if partitions < 1 or replication_factor < 1:
            raise BadRequest("partitions and replication_factor must be at least 1")
        if replication_factor > brokers:
            raise BadRequest(f"replication factor {replication_factor} is larger than the "
                             f"number of brokers ({brokers})")
        if min_isr is None:
            min_isr = min(replication_factor, self.default_min_isr)
        if not 1 <= min_isr <= replication_factor:
            raise BadRequest("min_isr is greater than the replication factor")
        try:
            replicas = tuple(self.cluster.replicas(name, p, replication_factor)
                             for p in range(partitions))
            # The topic's id is chosen once, here, so every broker stores the same one.
            record = TopicRecord(partitions, replication_factor, min_isr, replicas,
                                 {**(settings or {}), "topic_id": uuid.uuid4().hex})
        except (ValueError, ControlError) as exc:
            raise BadRequest(str(exc)) from None
        result = await self._call(self.client.txn(create_topic(self.layout, name, record)))
        if not result.succeeded:
            raise BadRequest("topic already exists")
        rev = result.header.revision
        self.view.put(self.layout.topic(name), record.encode(), mod_revision=rev,
                      create_revision=rev)
        for p, replica_list in enumerate(replicas):
            self.view.put(self.layout.partition(name, p),
                          PartitionState.initial(replica_list).encode(), mod_revision=rev,
                          create_revision=rev)
        self._apply_topic(name)
        log.info("created topic %s through etcd (partitions=%d replication_factor=%d "
                 "min_isr=%d) at revision %d", name, partitions, replication_factor,
                 min_isr, rev)
        self._schedule_reconcile()
        return result.header.raft_term, rev

    async def delete_topic(self, name: str) -> tuple[int, int]:
        """Delete a topic cluster-wide; every broker deletes its logs from the watch."""
        mod = self.view.topic_mods.get(name)
        if mod is None:
            raise BadRequest("unknown topic")
        result = await self._call(self.client.txn(delete_topic(self.layout, name, mod)))
        if not result.succeeded:
            self._absorb(result.reads)
            raise Unavailable(f"topic {name} changed meanwhile; retry")
        self.view.delete(self.layout.topic(name), revision=result.header.revision)
        for p in [p for (t, p) in self.view.partitions if t == name]:
            self.view.delete(self.layout.partition(name, p), revision=result.header.revision)
        self._apply_topic(name)
        return result.header.raft_term, result.header.revision

    async def add_partitions(self, name: str, count: int) -> tuple[int, int]:
        """Grow a topic to ``count`` partitions cluster-wide."""
        before = self.view.topics.get(name)
        mod = self.view.topic_mods.get(name)
        if before is None or mod is None:
            raise BadRequest("unknown topic")
        if count <= before.partitions:
            raise BadRequest(f"topic {name} already has {before.partitions} partitions; the "
                             "new count must be larger")
        rf = before.replication_factor
        try:
            replicas = before.replicas + tuple(self.cluster.replicas(name, p, rf)
                                               for p in range(before.partitions, count))
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        after = TopicRecord(count, rf, before.min_isr, replicas, before.settings)
        result = await self._call(self.client.txn(grow_topic(self.layout, name, mod, before,
                                                             after)))
        if not result.succeeded:
            self._absorb(result.reads)
            raise Unavailable(f"topic {name} changed meanwhile; retry")
        rev = result.header.revision
        self.view.put(self.layout.topic(name), after.encode(), mod_revision=rev,
                      create_revision=rev)
        for p in range(before.partitions, count):
            self.view.put(self.layout.partition(name, p),
                          PartitionState.initial(replicas[p]).encode(), mod_revision=rev,
                          create_revision=rev)
        self._apply_topic(name)
        self._schedule_reconcile()
        return result.header.raft_term, rev

    async def alter_topic(self, name: str, changes: Mapping[str, Any]) -> tuple[int, int]:
        """Change a topic's settings cluster-wide (docs/cluster.md, "Topic settings"): the
        ``settings`` of its ``topics/<t>`` record (None: no limit), in a txn comparing the
        record's mod revision; every broker applies them from the watch (``alter_local``),
        this one before the call returns. ``BadRequest`` for an unknown topic or a value
        the store refuses."""
        before = self.view.topics.get(name)
        mod = self.view.topic_mods.get(name)
        if before is None or mod is None:
            raise BadRequest("unknown topic")
        self.topics.check_alter(name, changes)
        settings = dict(before.settings)
        settings.update(changes)
        after = TopicRecord(before.partitions, before.replication_factor, before.min_isr,
                            before.replicas, settings)
        result = await self._call(self.client.txn(alter_topic(self.layout, name, mod, after)))
        if not result.succeeded:
            self._absorb(result.reads)
            raise Unavailable(f"topic {name} changed meanwhile; retry")
        rev = result.header.revision
        self.view.put(self.layout.topic(name), after.encode(), mod_revision=rev,
                      create_revision=rev)
        self._apply_topic(name)
        log.info("altered topic %s through etcd (%s) at revision %d", name,
                 " ".join(f"{k}={v}" for k, v in sorted(changes.items())), rev)
        return result.header.raft_term, rev

    async def elect(self, topic: str, partition: int, leader: int,
                    isr: tuple[int, ...] | None = None) -> tuple[int, int]:
        """The operator's forced election (package docstring)."""
        key = (topic, partition)
        state = self.view.partitions.get(key)
        record = self.view.topics.get(topic)
        if state is None or record is None:
            raise BadRequest(f"unknown partition {topic}/{partition}")
        unclean = record.settings.get("unclean_leader_election")
        allowed = unclean if isinstance(unclean, bool) else self.cluster.unclean_leader_election
        try:
            new = forced_election(state, record.replicas[partition], leader, isr,
                                  self.view.alive, unclean_allowed=allowed)
        except ControlError as exc:
            raise BadRequest(str(exc)) from None
        mod = self.view.partition_mods.get(key, 0)
        pkey = self.layout.partition(topic, partition)
        write = PartitionWrite(topic, partition, mod, new)
        if self.is_controller:
            txn = write_partitions(self.layout, self.view.controller_epoch, [write])
        else:
            txn = Txn((Compare(pkey, Target.MOD, mod),), (Put(pkey, new.encode()),),
                      (Get(pkey),))
        result = await self._call(self.client.txn(txn))
        if not result.succeeded:
            self._absorb(result.reads)
            raise Unavailable(f"partition {topic}/{partition} changed meanwhile; retry")
        rev = result.header.revision
        self.view.put(pkey, new.encode(), mod_revision=rev, create_revision=0)
        log.warning("%s/%d: forced election: broker %d leads epoch %d, isr %s", topic,
                    partition, new.leader, new.leader_epoch, list(new.isr))
        self.elections += 1
        self._apply_partition(topic, partition)
        return result.header.raft_term, rev

    def request_topic(self, name: str, partitions: int, replication_factor: int,
                      min_isr: int | None, settings: Mapping[str, Any]) -> None:
        """Auto-create: start creating the topic cluster-wide (once; errors are logged)."""
        if name in self._creating or name in self.view.topics:
            return
        self._creating.add(name)

        async def create() -> None:
            try:
                await self.create_topic(name, partitions, replication_factor,
                                        min_isr=min_isr, settings=settings)
            except BadRequest as exc:
                if exc.message != "topic already exists":
                    log.warning("auto-create of %s through etcd refused: %s", name,
                                exc.message)
            except (Unavailable, OutcomeUnknown) as exc:
                log.warning("auto-create of %s through etcd failed: %s", name, exc)
            finally:
                self._creating.discard(name)

        run_logged(create())
