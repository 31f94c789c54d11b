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
   failure reads and decides again. A broker that registers gets back the partitions it
   is the preferred leader of once in their committed ISR for ``leader_return_delay_ms``
   (``LeaderReturns``); every ``leader_rebalance_check_ms`` all partitions go back to
   their preferred leaders.
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

Parts, one responsibility each, that ``ControlPlane`` combines: ``session`` (1 and 6, and
the session file, written through ``data.atomic``), ``watch`` (2), ``controller`` (3 and
preferred leaders), ``isr`` (4), ``log_ends`` (5), ``operations`` (the public cluster-wide
operations); ``base`` holds what they share.

Must not import: the global reactor, the transports, the store's modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from broker.services.control.base import ETCD_FAILURES, log, run_logged
from broker.services.control.controller import ControllerDuties
from broker.services.control.isr import IsrProposals
from broker.services.control.log_ends import LogEndReports
from broker.services.control.operations import TopicOperations
from broker.services.control.session import EtcdSession, SessionFile
from broker.services.control.watch import ClusterWatch
from broker.services.etcd import (
    EtcdClient,
    LeaseKeeper,
    LeaseNotFound,
    Watch,
)
from broker.services.replication.results import IsrFacts
from replication.cluster import ClusterConfig
from replication.control.keys import (
    NO_LEADER,
    BrokerRegistration,
    KeyLayout,
    TopicRecord,
)
from replication.control.preferred import LeaderReturns
from replication.control.view import (
    ClusterView,
)

__all__ = ["ControlPlane", "ClusterMetadata", "PartitionInfo", "LocalTopics",
           "ReplicaControl", "SESSION_FILE"]

SESSION_FILE = "cluster-session.json"
"""In the data dir: ``{"lease": id, "incarnation": n}`` of the current session."""


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



class ControlPlane(EtcdSession, ClusterWatch, LogEndReports, ControllerDuties, IsrProposals,
                   TopicOperations):
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
        self.session_file = SessionFile(self.data_dir / SESSION_FILE)
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
        self.returns = LeaderReturns(self.settings.leader_return_delay_ms / 1000.0)
        """Partitions a broker that registered gets back (``leader_return_delay_ms``)."""
        self._return_call: Any = None
        self._returning = False
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

    # ================================================================ lifecycle

    def start(self) -> Deferred[None]:
        """Register, read every key, watch, compete for controller; ``ready`` fires then."""
        return run_logged(self._start())

    async def _start(self) -> None:
        await self._open_session()
        await self._load()
        self._session_ok = True
        self._registered_myself()
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
        for call in (self._rebalance_call, self._return_call):
            if call is not None and call.active():
                call.cancel()
        if self._watch is not None:
            self._watch.cancel()
        if self.keeper is not None:
            self.keeper.stop()
        if self.lease:
            try:
                await self.client.revoke(self.lease)
                log.info("revoked etcd lease %x", self.lease)
            except (LeaseNotFound, *ETCD_FAILURES) as exc:
                log.warning("could not revoke etcd lease %x: %s", self.lease, exc)

    def _address(self, broker_id: int) -> str:
        registration = self.view.brokers.get(broker_id)
        if registration is not None:
            return registration.addr
        try:
            return str(self.cluster.address(broker_id))
        except KeyError:
            return "unknown"

