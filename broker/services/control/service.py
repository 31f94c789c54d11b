"""``ControlPlane``: one broker's session with etcd, its controller loop, its ISR proposals,
and the cluster-wide topic operations (the package docstring lists the public API).

What runs, in order (the spec's "Cluster control plane on etcd"):

1. **Session.** The lease id of the previous run is read from ``<data_dir>/
   cluster-session.json`` and revoked (its keys vanish at once: a kill -9 + restart fails
   over without waiting for the TTL); a new lease is granted and kept alive every ttl/3
   (``LeaseKeeper``); ``brokers/<id>`` is created with it (``CREATE == 0``; a live holder of
   the id makes this broker wait and retry). The lease id and a growing ``incarnation`` go
   back into the session file.
2. **Read, then watch.** Every key under the prefix is read at one revision and watched from
   the next, into a ``ClusterView``. Topics create, grow and delete the local logs;
   partition keys make this broker lead exactly the stored epoch or follow it
   (``ReplicaControl.apply_stored``). A partition takes no write before its key was read.
3. **Controller.** Every broker tries ``claim_controller`` when there is none; the winner's
   epoch is the key's create_revision. After any change it runs the election rule over
   every partition (``plan_elections``) and writes what changed in batched txns fenced by
   its epoch and each key's mod revision. A lost compare updates the view from the txn's
   failure reads and decides again.
4. **ISR.** When the lag rule on a leader wants another ISR, the leader proposes it with
   ``write_isr`` (its lease and the key's mod revision compared): a shrink counts once
   committed, an expansion at once (``IsrView``); a follower is proposed only when its
   progress reached ``hw`` and the epoch's start.
5. **Unclean election by log end.** A replica of an offline partition publishes its log
   end and the epoch of its last record (``logends/<t>/<p>/<me>``, bound to its lease) and
   withdraws it once the partition has a leader again. With unclean election on, the
   controller first takes the partition offline (epoch + 1: nobody takes writes, so the log
   ends stop moving), then waits for every live replica's report, at most one lease TTL
   (``unclean_wait_s``), and elects the best ranked (``plan``); reports missing at the
   deadline rank last, none at all is replica-list order, logged as such.
6. **etcd unreachable.** Leadership and ISR freeze; writes go on (Kafka's rule) unless
   ``fence_writes_on_session_loss``: then none once the last good keepalive + TTL passed.
   A lease etcd says is gone (the broker was cut off longer than the TTL) refuses writes at
   once, renews the session and reads every key again.

Must not import: the global reactor, the transports, the store's modules.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater

from broker.errors import BadRequest, Unavailable
from broker.services.etcd import (
    EtcdClient,
    EtcdError,
    EtcdUnavailable,
    Header,
    KeyValue,
    LeaseKeeper,
    LeaseNotFound,
    OutcomeUnknown,
    Watch,
    WatchEvent,
)
from broker.services.replication.results import IsrFacts
from replication.cluster import ClusterConfig
from replication.control.errors import ControlError, NotCaughtUp
from replication.control.isr import IsrView
from replication.control.keys import (
    NO_LEADER,
    BrokerKey,
    BrokerRegistration,
    ControllerKey,
    KeyLayout,
    LogEndKey,
    LogEndReport,
    PartitionKey,
    PartitionState,
    TopicKey,
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
    claim_controller,
    create_topic,
    delete_topic,
    grow_topic,
    register_broker,
    report_log_end,
    withdraw_log_end,
    write_isr,
    write_partitions,
)
from replication.control.view import (
    ClusterView,
    PlannedElection,
    batches,
    forced_election,
    plan,
    preferred_leader_moves,
)

__all__ = ["ControlPlane", "ClusterMetadata", "PartitionInfo", "LocalTopics",
           "ReplicaControl", "SESSION_FILE"]

log = logging.getLogger("skerry.control")

SESSION_FILE = "cluster-session.json"
"""In the data dir: ``{"lease": id, "incarnation": n}`` of the current session."""

RETRY_S = 0.5
"""Pause before retrying an etcd call that could not be made (etcd unreachable)."""

_ETCD_FAILURES = (EtcdUnavailable, OutcomeUnknown, EtcdError)


class ReplicaControl(Protocol):
    """What the control plane drives on this broker's replicas
    (``broker.services.replication.ReplicationService``)."""

    def apply_stored(self, topic: str, partition: int, leader: int, epoch: int,
                     isr: tuple[int, ...]) -> None: ...
    def set_isr(self, topic: str, partition: int, committed: tuple[int, ...],
                pending: tuple[int, ...] | None = None) -> None: ...
    def isr_facts(self, topic: str, partition: int) -> IsrFacts: ...
    def add_isr_listener(self, listener: Callable[[str, int], None]) -> None: ...
    def set_write_fence(self, fence: Callable[[], str | None]) -> None: ...


class LocalTopics(Protocol):
    """This broker's own topics (``broker.services.control.topics.CoreTopics``)."""

    def partitions_of(self, name: str) -> int | None: ...
    def names(self) -> list[str]: ...
    def local_record(self, name: str) -> tuple[int, int, int, dict[str, Any]] | None: ...
    def create_local(self, name: str, record: TopicRecord) -> None: ...
    def grow_local(self, name: str, count: int) -> None: ...
    def alter_local(self, name: str, record: TopicRecord) -> None: ...
    def check_alter(self, name: str, changes: Mapping[str, Any]) -> None: ...
    def delete_local(self, name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """A partition as etcd holds it: ``leader`` (-1: offline) and its address, the leader
    epoch, the committed ISR and the replica list (broker ids)."""

    leader: int
    leader_addr: str | None
    epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """``ControlPlane.metadata()``: live brokers (id -> host:port), the controller (None:
    none now) and its epoch, topics, partitions, and etcd's ``term`` / ``index``."""

    brokers: Mapping[int, str]
    controller: int | None
    controller_epoch: int
    topics: Mapping[str, TopicRecord]
    partitions: Mapping[tuple[str, int], PartitionInfo]
    term: int
    index: int

    @property
    def under_replicated(self) -> list[tuple[str, int]]:
        return sorted(k for k, p in self.partitions.items()
                      if p.leader == NO_LEADER or len(p.isr) < len(p.replicas))


def _run(coro: Coroutine[Any, Any, Any]) -> Deferred[Any]:
    d = Deferred.fromCoroutine(coro)
    d.addErrback(lambda f: log.error("control plane: %s", f.getTraceback()))
    return d


class ControlPlane:
    """A broker's member of the control plane (module docstring)."""

    def __init__(self, cluster: ClusterConfig, clock: IReactorTime, client: EtcdClient,
                 replication: ReplicaControl, topics: LocalTopics, data_dir: str | Path, *,
                 default_min_isr: int = 1) -> None:
        if cluster.etcd is None:
            raise ValueError("the control plane needs cluster.etcd")
        self.cluster = cluster
        self.settings = cluster.etcd
        self.clock = clock
        self.client = client
        self.replication = replication
        self.topics = topics
        self.data_dir = Path(data_dir)
        self.default_min_isr = default_min_isr
        self.layout = KeyLayout(cluster.cluster_id)
        self.view = ClusterView(self.layout)
        self.broker_id = cluster.broker_id
        self.lease = 0
        self.incarnation = 0
        self.keeper: LeaseKeeper | None = None
        self.ready: Deferred[None] = Deferred()
        self.elections = 0
        self.unclean_elections = 0
        self.offline = 0
        self.preferred_elections = 0
        """Partitions handed back to their preferred leader (``leader_rebalance_check_ms``)."""
        self._rebalance_call: Any = None
        self._session_ok = False
        self._session_lost = False
        self._term = 0
        self._watch: Watch | None = None
        self._stopped = False
        self._claiming = False
        self._reconciling = False
        self._reconcile_again = False
        self._isr_inflight: set[tuple[str, int]] = set()
        self._isr_again: set[tuple[str, int]] = set()
        self._creating: set[str] = set()
        self._reported: dict[tuple[str, int], tuple[int, int]] = {}
        """(topic, partition) -> (offline epoch, lease) of this broker's log-end report."""
        self._unclean_deadlines: dict[tuple[str, int, int], float] = {}
        self.unclean_wait_s: float = float(self.settings.lease_ttl_s)
        """How long the controller waits for the live replicas' log ends (one lease TTL)."""
        replication.add_isr_listener(self._isr_wanted)
        replication.set_write_fence(self.write_refusal)

    # ================================================================ public API

    @property
    def is_controller(self) -> bool:
        return self._session_ok and self.view.controller == self.broker_id

    @property
    def controller(self) -> int | None:
        return self.view.controller

    def registration(self, broker_id: int) -> BrokerRegistration | None:
        """The broker's registration as this broker last saw it (None: not alive)."""
        return self.view.brokers.get(broker_id)

    def term_index(self) -> tuple[int, int]:
        """(etcd's Raft term, the newest revision seen)."""
        return self._term, self.view.revision

    async def fetch_term_index(self) -> tuple[int, int]:
        """Ask etcd for its term and revision now."""
        result = await self._call(self.client.range(self.layout.controller))
        self._note(result.header)
        return result.header.raft_term, result.header.revision

    def leader_of(self, topic: str, partition: int) -> tuple[int, str, int] | None:
        state = self.view.partitions.get((topic, partition))
        if state is None or state.leader == NO_LEADER:
            return None
        return state.leader, self._address(state.leader), state.leader_epoch

    def metadata(self) -> ClusterMetadata:
        view = self.view
        parts = {}
        for (topic, p), state in sorted(view.partitions.items()):
            leader = state.leader
            parts[(topic, p)] = PartitionInfo(
                leader, None if leader == NO_LEADER else self._address(leader),
                state.leader_epoch, state.isr, view.replicas(topic, p))
        return ClusterMetadata(
            {b: r.addr for b, r in sorted(view.brokers.items())}, view.controller,
            view.controller_epoch, dict(sorted(view.topics.items())), parts, self._term,
            view.revision)

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

        _run(create())

    def write_refusal(self) -> str | None:
        """Why this broker takes no write now (None: it may): its etcd session is lost, or
        (``fence_writes_on_session_loss``) no keepalive answered within the TTL."""
        if self._session_lost:
            return "this broker's etcd session (lease) was lost; it is registering again"
        keeper = self.keeper
        if self.settings.fence_writes_on_session_loss and keeper is not None \
                and self.clock.seconds() > keeper.expires_by:
            return ("no etcd keepalive answered within the lease TTL "
                    "(fence_writes_on_session_loss)")
        return None

    # ================================================================ lifecycle

    def start(self) -> Deferred[None]:
        """Register, read every key, watch, compete for controller; ``ready`` fires then."""
        return _run(self._start())

    async def _start(self) -> None:
        await self._open_session()
        await self._load()
        self._session_ok = True
        await self._publish_local_topics()
        self._try_claim()
        self._arm_rebalance()
        if not self.ready.called:
            self.ready.callback(None)

    def stop(self) -> Deferred[None]:
        """Clean shutdown: stop watching and revoke the lease (its keys vanish at once, so
        the controller moves this broker's partitions within a second)."""
        return Deferred.fromCoroutine(self._stop())

    async def _stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._session_ok = False
        if self._rebalance_call is not None and self._rebalance_call.active():
            self._rebalance_call.cancel()
        if self._watch is not None:
            self._watch.cancel()
        if self.keeper is not None:
            self.keeper.stop()
        if self.lease:
            try:
                await self.client.revoke(self.lease)
                log.info("revoked etcd lease %x", self.lease)
            except (LeaseNotFound, *_ETCD_FAILURES) as exc:
                log.warning("could not revoke etcd lease %x: %s", self.lease, exc)

    # ================================================================ session

    def _session_path(self) -> Path:
        return self.data_dir / SESSION_FILE

    def _read_session(self) -> tuple[int, int]:
        try:
            doc = json.loads(self._session_path().read_text())
            return int(doc.get("lease", 0)), int(doc.get("incarnation", 0))
        except (OSError, ValueError, TypeError, AttributeError):
            return 0, 0

    def _write_session(self) -> None:
        path = self._session_path()
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"lease": self.lease, "incarnation": self.incarnation}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    async def _call(self, d: Deferred[Any]) -> Any:
        """One etcd call; unreachable etcd is ``Unavailable`` for the callers of the API."""
        try:
            result = await d
        except EtcdUnavailable as exc:
            raise Unavailable(f"etcd unreachable: {exc}") from None
        except OutcomeUnknown as exc:
            raise Unavailable(f"etcd did not answer; the change may or may not have been "
                              f"applied (read before retrying): {exc}") from None
        header = getattr(result, "header", None)
        if isinstance(header, Header):
            self._note(header)
        return result

    def _note(self, header: Header) -> None:
        if header.raft_term:
            self._term = max(self._term, header.raft_term)
        self.view.revision = max(self.view.revision, header.revision)

    async def _retrying(self, make: Callable[[], Deferred[Any]], what: str) -> Any:
        """Run ``make()`` until etcd answers (startup and session renewal)."""
        while not self._stopped:
            try:
                return await make()
            except (EtcdUnavailable, OutcomeUnknown) as exc:
                log.warning("%s: %s; retrying", what, exc)
            await deferLater(self.clock, RETRY_S, lambda: None)
        raise Unavailable("control plane stopped")

    async def _open_session(self) -> None:
        old_lease, incarnation = self._read_session()
        if old_lease:
            try:
                await self._retrying(lambda: self.client.revoke(old_lease),
                                     "revoking the previous etcd lease")
                log.info("revoked the previous run's etcd lease %x", old_lease)
            except LeaseNotFound:
                pass  # already expired or revoked: nothing left to revoke
        self.incarnation = incarnation + 1
        lease, ttl = await self._retrying(
            lambda: self.client.grant(self.settings.lease_ttl_s), "granting an etcd lease")
        self.lease = lease
        self._reported.clear()      # the old lease's reports went with it
        self._write_session()
        self.keeper = LeaseKeeper(self.client, lease, ttl, self._lease_lost)
        self.keeper.start()
        registration = BrokerRegistration(str(self.cluster.address(self.broker_id)),
                                          self.incarnation)
        txn = register_broker(self.layout, self.broker_id, registration, lease)
        while not self._stopped:
            result = await self._retrying(lambda: self.client.txn(txn),
                                          "registering in etcd")
            self._note(result.header)
            holder = result.reads[0] if result.reads else None
            if result.succeeded or (holder and holder[0].lease == lease):
                log.info("registered as broker %d in etcd (lease %x, ttl %d s, incarnation "
                         "%d)", self.broker_id, lease, ttl, self.incarnation)
                return
            log.warning("broker id %d is registered in etcd by another lease; waiting for "
                        "it to expire", self.broker_id)
            await deferLater(self.clock, 1.0, lambda: None)

    def _lease_lost(self, lease_id: int) -> None:
        if self._stopped or lease_id != self.lease:
            return
        log.warning("etcd lease %x is gone (this broker was cut off longer than the TTL); "
                    "refusing writes and registering again", lease_id)
        self._session_ok = False
        self._session_lost = True
        _run(self._renew())

    async def _renew(self) -> None:
        await self._open_session()
        await self._load()
        self._session_lost = False
        self._session_ok = True
        self._try_claim()

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
        _run(self._load())

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

    # ================================================================ watch

    def _on_events(self, events: list[WatchEvent]) -> None:
        topics: set[str] = set()
        partitions: set[tuple[str, int]] = set()
        controller_gone = brokers_changed = reports = False
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

    # ================================================================ log-end reports

    def _sync_log_end(self, topic: str, partition: int) -> None:
        """Publish this replica's log end while the partition is offline (once per offline
        epoch and lease), withdraw it once the partition has a leader."""
        key = (topic, partition)
        state = self.view.partitions.get(key)
        if state is None or self._stopped or not self.lease \
                or self.broker_id not in self.view.replicas(topic, partition):
            return
        if state.leader != NO_LEADER:
            if self._reported.pop(key, None) is not None:
                _run(self._withdraw_log_end(topic, partition))
            return
        if self._reported.get(key) == (state.leader_epoch, self.lease):
            return
        try:
            facts = self.replication.isr_facts(topic, partition)
        except Exception:  # noqa: BLE001 - the topic went away meanwhile
            return
        report = LogEndReport(facts.log_end, facts.last_epoch, state.leader_epoch)
        self._reported[key] = (state.leader_epoch, self.lease)
        _run(self._publish_log_end(topic, partition, report, self.lease))

    async def _publish_log_end(self, topic: str, partition: int, report: LogEndReport,
                               lease: int) -> None:
        key = (topic, partition)
        try:
            result = await self.client.txn(report_log_end(self.layout, self.broker_id, lease,
                                                          topic, partition, report))
        except (LeaseNotFound, *_ETCD_FAILURES) as exc:
            result = None
            log.warning("%s/%d: log end not reported to etcd: %s", topic, partition, exc)
        if result is not None:
            self._note(result.header)
            if result.succeeded:
                log.info("%s/%d is offline (epoch %d): reported log end %d, last epoch %d",
                         topic, partition, report.offline_epoch, report.log_end,
                         report.last_epoch)
                return
        if self._reported.get(key) == (report.offline_epoch, lease):
            del self._reported[key]
            if result is None:      # etcd unreachable: try again (a lost lease re-reports)
                self.clock.callLater(RETRY_S, self._sync_log_end, topic, partition)

    async def _withdraw_log_end(self, topic: str, partition: int) -> None:
        try:
            await self.client.txn(withdraw_log_end(self.layout, self.broker_id, topic,
                                                   partition))
        except _ETCD_FAILURES as exc:   # it goes with the lease anyway
            log.info("%s/%d: log-end report not withdrawn: %s", topic, partition, exc)

    def _absorb(self, reads: tuple[tuple[KeyValue, ...] | None, ...]) -> None:
        """A txn lost its compare: take what its failure branch read."""
        for kvs in reads:
            for kv in kvs or ():
                self.view.put(kv.key, kv.value, mod_revision=kv.mod_revision,
                              create_revision=kv.create_revision, lease=kv.lease)

    def _address(self, broker_id: int) -> str:
        registration = self.view.brokers.get(broker_id)
        if registration is not None:
            return registration.addr
        try:
            return str(self.cluster.address(broker_id))
        except KeyError:
            return "unknown"

    # ================================================================ controller

    def _try_claim(self) -> None:
        if self._claiming or not self._session_ok or self.view.controller is not None \
                or self._stopped:
            return
        self._claiming = True
        _run(self._claim())

    async def _claim(self) -> None:
        try:
            result = await self.client.txn(claim_controller(self.layout, self.broker_id,
                                                            self.lease))
        except _ETCD_FAILURES as exc:
            log.warning("claiming the controller failed: %s", exc)
            self._claiming = False
            self.clock.callLater(RETRY_S, self._try_claim)
            return
        self._claiming = False
        self._note(result.header)
        if result.succeeded:
            rev = result.header.revision
            self.view.put(self.layout.controller, b'{"broker":%d}' % self.broker_id,
                          mod_revision=rev, create_revision=rev, lease=self.lease)
            log.info("this broker (%d) is the controller, epoch %d", self.broker_id, rev)
            self._schedule_reconcile()
        else:
            kvs = result.reads[0] if result.reads else None
            if kvs:
                self._absorb((kvs,))
            else:
                self.clock.callLater(RETRY_S, self._try_claim)

    def _schedule_reconcile(self) -> None:
        if not self.is_controller:
            return
        if self._reconciling:
            self._reconcile_again = True
            return
        self._reconciling = True
        _run(self._reconcile())

    async def _reconcile(self) -> None:
        try:
            while self.is_controller and not self._stopped:
                self._reconcile_again = False
                now = self.clock.seconds()
                gave_up = {k for k, at in self._unclean_deadlines.items() if now >= at}
                decided = plan(self.view, unclean_default=self.cluster.unclean_leader_election,
                               gave_up=gave_up)
                self._await_log_ends(decided.waiting, now)
                plans = decided.writes
                lost = False
                for batch in batches(plans):
                    if not self.is_controller:
                        return
                    try:
                        revision = await self._write_elections(batch)
                    except _ETCD_FAILURES as exc:
                        log.warning("controller: writing %d partition(s) failed: %s; "
                                    "retrying", len(batch), exc)
                        self.clock.callLater(RETRY_S, self._schedule_reconcile)
                        return
                    if revision is None:
                        lost = True
                        break
                    self._elected(batch, revision)
                if not lost and not self._reconcile_again:
                    return
        finally:
            self._reconciling = False

    async def _write_elections(self, batch: list[PlannedElection]) -> int | None:
        """Write one batch of partition states with the controller's compares (its epoch,
        each key's revision): etcd's revision, or None when a compare was lost (what etcd
        holds is taken in). etcd failures propagate."""
        txn = write_partitions(self.layout, self.view.controller_epoch,
                               [p.write for p in batch])
        result = await self.client.txn(txn)
        self._note(result.header)
        if not result.succeeded:
            self._lost_compare(result.reads)
            return None
        return result.header.revision

    # ================================================================ preferred leaders

    def _arm_rebalance(self) -> None:
        interval = self.settings.leader_rebalance_check_ms
        if interval and not self._stopped:
            self._rebalance_call = self.clock.callLater(interval / 1000.0, self._rebalance_tick)

    def _rebalance_tick(self) -> None:
        """Every ``leader_rebalance_check_ms``: the controller hands partitions back to
        their preferred leaders (``preferred_leader_moves``), unless an election is being
        written (then at the next check)."""
        self._rebalance_call = None
        if self.is_controller and not self._reconciling:
            _run(self._rebalance())
        self._arm_rebalance()

    async def _rebalance(self) -> None:
        moves = preferred_leader_moves(self.view)
        for batch in batches(moves):
            if not self.is_controller or self._reconciling:
                return
            try:
                revision = await self._write_elections(batch)
            except _ETCD_FAILURES as exc:
                log.warning("controller: handing partitions back to their preferred leaders "
                            "failed: %s; trying at the next check", exc)
                return
            if revision is None:  # something moved meanwhile: the next check decides
                return
            for planned in batch:
                write = planned.write
                key = self.layout.partition(write.topic, write.partition)
                self.view.put(key, write.state.encode(), mod_revision=revision,
                              create_revision=0)
                self.preferred_elections += 1
                log.info("%s/%d: back to its preferred leader: broker %d leads epoch %d, "
                         "isr %s", write.topic, write.partition, write.state.leader,
                         write.state.leader_epoch, list(write.state.isr))
                self._apply_partition(write.topic, write.partition)

    def _await_log_ends(self, waiting: list[tuple[str, int, int]], now: float) -> None:
        """Unclean elections waiting for the live replicas' log ends: decide again when the
        wait (one lease TTL) ends, whatever arrived by then."""
        deadlines = {}
        for key in waiting:
            at = self._unclean_deadlines.get(key)
            if at is None:
                at = now + self.unclean_wait_s
                self.clock.callLater(self.unclean_wait_s, self._schedule_reconcile)
                topic, partition, epoch = key
                log.warning("%s/%d: offline (epoch %d) with unclean election on: waiting up "
                            "to %.1f s for the live replicas' log ends", topic, partition,
                            epoch, self.unclean_wait_s)
            deadlines[key] = at
        self._unclean_deadlines = deadlines

    def _lost_compare(self, reads: tuple[tuple[KeyValue, ...] | None, ...]) -> None:
        controller = reads[0] if reads else None
        if not controller:
            self.view.delete(self.layout.controller, revision=0)
        self._absorb(reads)
        log.info("controller: a compare was lost; deciding again on what etcd holds")

    def _elected(self, batch: list[PlannedElection], revision: int) -> None:
        for planned in batch:
            write, election = planned.write, planned.election
            key = self.layout.partition(write.topic, write.partition)
            self.view.put(key, write.state.encode(), mod_revision=revision, create_revision=0)
            state = write.state
            if election.unclean:
                self.unclean_elections += 1
                ends = planned.log_ends
                if ends:
                    basis = "log ends " + ", ".join(
                        f"broker {b}: {r.log_end} (last epoch {r.last_epoch})"
                        for b, r in sorted(ends.items()))
                else:
                    basis = (f"no log end reported within {self.unclean_wait_s:.1f} s; "
                             "first live replica in list order")
                log.warning("%s/%d: UNCLEAN election: broker %d leads epoch %d from outside "
                            "the ISR (%s); committed messages may be lost", write.topic,
                            write.partition, state.leader, state.leader_epoch, basis)
            elif election.offline:
                self.offline += 1
                log.warning("%s/%d: offline: no live replica in the ISR %s (epoch %d)",
                            write.topic, write.partition, list(state.isr), state.leader_epoch)
            else:
                self.elections += 1
                log.info("%s/%d: broker %d leads epoch %d, isr %s", write.topic,
                         write.partition, state.leader, state.leader_epoch, list(state.isr))
            self._apply_partition(write.topic, write.partition)

    # ================================================================ ISR

    def _isr_wanted(self, topic: str, partition: int) -> None:
        key = (topic, partition)
        if key in self._isr_inflight:
            self._isr_again.add(key)
            return
        if not self._session_ok or self._stopped:
            return
        self._isr_inflight.add(key)
        _run(self._propose_loop(key))

    async def _propose_loop(self, key: tuple[str, int]) -> None:
        try:
            while True:
                self._isr_again.discard(key)
                retry = await self._propose(*key)
                if retry:
                    self.clock.callLater(1.0, self._isr_wanted, *key)
                    return
                if key not in self._isr_again:
                    return
        finally:
            self._isr_inflight.discard(key)

    async def _propose(self, topic: str, partition: int) -> bool:
        """One ISR proposal; True when etcd could not be reached (retry later)."""
        if not self._session_ok:
            return False
        key = (topic, partition)
        state = self.view.partitions.get(key)
        mod = self.view.partition_mods.get(key)
        replicas = self.view.replicas(topic, partition)
        if state is None or mod is None or state.leader != self.broker_id or not replicas:
            return False
        try:
            facts = self.replication.isr_facts(topic, partition)
        except Exception:  # noqa: BLE001 - the topic went away meanwhile
            return False
        if not facts.leader or facts.epoch != state.leader_epoch \
                or facts.stored_epoch != state.leader_epoch:
            return False
        committed = frozenset(state.isr)
        desired = set(facts.desired)
        isr = IsrView(committed)
        out = [r for r in committed if r not in desired and r != self.broker_id]
        if out:
            proposed = isr.propose_shrink(out, leader=self.broker_id)
        else:
            joining = []
            alive = self.view.alive
            for r in sorted(desired - committed):
                if r not in alive:
                    continue    # the controller would take it out again
                try:
                    IsrView(committed).propose_expand(
                        r, facts.progress.get(r, -1), facts.hw,
                        epoch_start_offset=facts.epoch_start)
                except NotCaughtUp:
                    continue
                joining.append(r)
            if not joining:
                return False
            proposed = IsrView(committed, committed | frozenset(joining))
        pending = proposed.pending or frozenset()
        new_isr = tuple(r for r in replicas if r in pending)
        self.replication.set_isr(topic, partition, tuple(state.isr), new_isr)
        write = PartitionWrite(topic, partition, mod,
                               PartitionState(self.broker_id, state.leader_epoch, new_isr))
        try:
            result = await self.client.txn(write_isr(self.layout, self.broker_id, self.lease,
                                                     write))
        except _ETCD_FAILURES as exc:
            log.warning("%s/%d: ISR change to %s not written: %s", topic, partition,
                        list(new_isr), exc)
            self.replication.set_isr(topic, partition, tuple(state.isr))
            return True
        self._note(result.header)
        if result.succeeded:
            pkey = self.layout.partition(topic, partition)
            self.view.put(pkey, write.state.encode(), mod_revision=result.header.revision,
                          create_revision=0)
            self.replication.set_isr(topic, partition, new_isr)
            log.info("%s/%d: ISR %s -> %s (committed in etcd)", topic, partition,
                     list(state.isr), list(new_isr))
        else:
            self._absorb(result.reads)
            self._apply_partition(topic, partition)
            self._isr_again.add(key)
        return False
