"""The control plane as the admin commands see it, and its shell for a broker without etcd.

Owns: the ``AdminPlane`` interface the V1 handlers call for the seed broker's five admin
commands (``ADMIN_CREATE_TOPIC``, ``ADMIN_REGISTER_BROKER``, ``ADMIN_BROKER_HEARTBEAT``,
``ADMIN_SET_PARTITION_LEADER``, ``ADMIN_GET_METADATA``) and for leader hints, the values it
answers with (``Applied``: the term and index of a change; ``LeaderHint``; ``AdminMetadata``),
and ``LocalControl``: the implementation for a broker without etcd, over the pure
``replication.control.admin.LocalMetadata`` kept in ``<data_dir>/cluster-metadata.json``
(replaced atomically, ``data.atomic``; written before a change takes effect, so ``index``
survives restarts and never goes back). With etcd the cluster control-plane service answers
the same interface (term = etcd's Raft term, index = the revision of the write).

In the operator-driven cluster mode (a ``cluster`` section without etcd), a forced election
(``ADMIN_SET_PARTITION_LEADER``) is carried out by the broker it names: sent to that broker,
it checks the leader against the ISR it last heard of and promotes itself (a new leader
epoch, which fences the old leader, exactly as ``SET_PARTITION_ROLE leader``).

Must not import: the global reactor (nothing here waits on time), transports, the store's
modules.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from twisted.internet.defer import Deferred, fail, succeed

from broker.errors import BadRequest, SkerryError, StorageError, Unavailable
from data.atomic import read_json, write_atomic
from data.fs import OS_FS, FileLayer
from data.names import INTERNAL_PREFIX
from replication.cluster import ClusterConfig
from replication.control.admin import LocalMetadata
from replication.control.keys import NO_LEADER, PartitionState

__all__ = ["Applied", "LeaderHint", "AdminMetadata", "AdminPlane", "LocalControl",
           "EtcdAdmin", "METADATA_FILE"]

log = logging.getLogger("skerry.cluster")

METADATA_FILE = "cluster-metadata.json"


@dataclass(frozen=True, slots=True)
class Applied:
    """Where a control-plane change landed: ``term`` and ``index`` of the write.
    ``address``: for a registration, the ``(host, port)`` the control plane holds for the
    broker when that is not what was sent (with etcd, brokers register themselves)."""

    term: int
    index: int
    address: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class LeaderHint:
    """Who leads a partition, as far as this broker knows: a broker id, its V1 address
    (None when unknown) and the leader epoch."""

    leader: int
    addr: str | None
    epoch: int


@dataclass(frozen=True, slots=True)
class AdminMetadata:
    """``ADMIN_GET_METADATA``: topic names and broker ids, both sorted."""

    topics: list[str]
    brokers: list[int]


class AdminPlane(Protocol):
    """What the V1 handlers ask of the control plane (local file, or etcd)."""

    def create_topic(self, topic: str, partitions: int, replication_factor: int,
                     min_insync_replicas: int | None, retention_ms: int | None,
                     retention_bytes: int | None,
                     extra: Mapping[str, Any] | None = None) -> Deferred[Applied]: ...

    def register_broker(self, broker_id: int, host: str, port: int,
                        epoch: int | None) -> Deferred[Applied]: ...

    def heartbeat(self, broker_id: int) -> Deferred[Applied]: ...

    def elect(self, topic: str, partition: int, leader: int,
              isr: tuple[int, ...]) -> Deferred[Applied]: ...

    def metadata(self) -> AdminMetadata: ...

    def leader_of(self, topic: str, partition: int) -> LeaderHint | None: ...


class _Replicas(Protocol):
    """What ``LocalControl`` needs of the replication service in operator mode."""

    def status(self, topic: str, partition: int) -> Any: ...

    def set_role(self, topic: str, partition: int, role: str) -> int: ...


class LocalControl:
    """``AdminPlane`` of a broker without etcd: ``term=1`` and an index kept on disk.

    ``create_locally(topic, partitions, rf, min_isr, retention_ms, retention_bytes)``
    creates the topic on this broker (its refusals answer the command unchanged);
    ``topic_names`` lists the topics; ``check_partition(topic, partition)`` refuses an
    unknown topic or a partition out of range.
    """

    def __init__(self, data_dir: str, *, create_locally: Callable[..., Any],
                 topic_names: Callable[[], list[str]],
                 check_partition: Callable[[str, int], Any],
                 cluster: ClusterConfig | None = None, replicas: _Replicas | None = None,
                 unclean_allowed: bool = False, fs: FileLayer = OS_FS) -> None:
        self._path = os.path.join(data_dir, METADATA_FILE)
        self._fs = fs
        self._create_locally = create_locally
        self._topic_names = topic_names
        self._check_partition = check_partition
        self._cluster = cluster
        self._replicas = replicas
        self._unclean = unclean_allowed
        raw = read_json(self._path, None, fs)
        self._state = LocalMetadata() if raw is None else LocalMetadata.from_json(raw)

    @property
    def state(self) -> LocalMetadata:
        return self._state

    def _commit(self, state: LocalMetadata) -> Applied:
        """Persist ``state`` (atomically, durably), then make it current."""
        try:
            write_atomic(self._path, state.dumps(), self._fs)
        except OSError as exc:
            raise StorageError(f"cannot write {METADATA_FILE}: {exc.strerror or exc}") \
                from None
        self._state = state
        return Applied(state.term, state.index)

    def _run(self, change: Callable[[], Applied]) -> Deferred[Applied]:
        try:
            return succeed(change())
        except SkerryError as error:
            return fail(error)

    def _address_book(self) -> list[int] | None:
        return None if self._cluster is None else list(self._cluster.broker_ids)

    # ------------------------------------------------------------------ the commands

    def create_topic(self, topic: str, partitions: int, replication_factor: int,
                     min_insync_replicas: int | None, retention_ms: int | None,
                     retention_bytes: int | None,
                     extra: Mapping[str, Any] | None = None) -> Deferred[Applied]:
        def change() -> Applied:
            self._create_locally(topic, partitions, replication_factor, min_insync_replicas,
                                 retention_ms, retention_bytes, extra)
            return self._commit(self._state.topic_created())
        return self._run(change)

    def register_broker(self, broker_id: int, host: str, port: int,
                        epoch: int | None) -> Deferred[Applied]:
        return self._run(lambda: self._commit(self._state.register(
            broker_id, host, port, epoch, address_book=self._address_book())))

    def heartbeat(self, broker_id: int) -> Deferred[Applied]:
        def check() -> Applied:
            state = self._state
            if broker_id not in state.brokers and broker_id not in (self._address_book() or ()):
                state.check_heartbeat(broker_id)
            return Applied(state.term, state.index)
        return self._run(check)

    def elect(self, topic: str, partition: int, leader: int,
              isr: tuple[int, ...]) -> Deferred[Applied]:
        def change() -> Applied:
            self._check_partition(topic, partition)
            known = set(self._state.brokers) | set(self._address_book() or ())
            current = None
            cluster, replicas = self._cluster, self._replicas
            if cluster is not None and replicas is not None:
                if leader != cluster.broker_id:
                    where = cluster.brokers.get(leader)
                    raise BadRequest(
                        f"operator mode (no etcd): send ADMIN_SET_PARTITION_LEADER to broker "
                        f"{leader}{f' at {where}' if where else ''}, which promotes itself; "
                        f"this is broker {cluster.broker_id}")
                info = replicas.status(topic, partition)
                if info.replica < 0:
                    raise BadRequest(f"broker {leader} holds no replica of {topic}/{partition}")
                current = PartitionState(info.leader, info.epoch,
                                         tuple(info.replicas[i] for i in info.isr
                                               if i < len(info.replicas)))
            state = self._state.set_leader(topic, partition, leader, isr,
                                           unclean_allowed=self._unclean, current=current,
                                           known=known)
            applied = self._commit(state)
            if current is not None and replicas is not None:
                replicas.set_role(topic, partition, "leader")
                log.info("%s/%d: forced election: broker %d leads (ISR given [%s])", topic,
                         partition, leader, " ".join(map(str, isr)))
            return applied
        return self._run(change)

    def metadata(self) -> AdminMetadata:
        brokers = set(self._state.brokers) | set(self._address_book() or ())
        return AdminMetadata(sorted(self._topic_names()), sorted(brokers))

    def leader_of(self, topic: str, partition: int) -> LeaderHint | None:
        """The recorded forced leader, when its address is known."""
        state = self._state.leader_of(topic, partition)
        if state is None or state.leader == NO_LEADER:
            return None
        return LeaderHint(state.leader, self.address(state.leader), state.leader_epoch)

    def address(self, broker_id: int) -> str | None:
        """A broker's V1 address: the address book first, else its registration."""
        if self._cluster is not None and broker_id in self._cluster.brokers:
            return str(self._cluster.brokers[broker_id])
        registered = self._state.brokers.get(broker_id)
        return None if registered is None else registered.addr

    def topic_deleted(self, topic: str) -> None:
        """Forget a deleted topic's forced leaders (persisted with the next change)."""
        self._state = self._state.forget_topic(topic)


class EtcdAdmin:
    """``AdminPlane`` over the etcd control plane (``broker.services.control``): ``term`` is
    etcd's Raft term and ``index`` the revision of the write (of the newest revision this
    broker saw, for the commands that write nothing). Brokers register themselves through
    their leases, so ``ADMIN_REGISTER_BROKER`` and ``ADMIN_BROKER_HEARTBEAT`` answer with the
    registration state: an id outside the address book is refused, and so is a heartbeat
    for a broker etcd holds no live registration of."""

    def __init__(self, control: Any, cluster: ClusterConfig | None) -> None:
        self._control = control
        self._cluster = cluster

    @staticmethod
    def _applied(d: Deferred[Any]) -> Deferred[Applied]:
        """``(term, index)`` as ``Applied``; a write whose outcome etcd left unknown (no
        answer in time) is UNAVAILABLE saying so, not a bug."""
        from broker.services.etcd import OutcomeUnknown

        def unknown(failure: Any) -> Any:
            failure.trap(OutcomeUnknown)
            raise Unavailable("etcd did not answer in time: the change may or may not have "
                              "been made; look (ADMIN_GET_METADATA) before sending it again")

        return d.addCallbacks(lambda ti: Applied(int(ti[0]), int(ti[1])), unknown)

    def _now(self) -> Applied:
        term, index = self._control.term_index()
        return Applied(term, index)

    def create_topic(self, topic: str, partitions: int, replication_factor: int,
                     min_insync_replicas: int | None, retention_ms: int | None,
                     retention_bytes: int | None,
                     extra: Mapping[str, Any] | None = None) -> Deferred[Applied]:
        settings = {k: v for k, v in (("retention_ms", retention_ms),
                                      ("retention_bytes", retention_bytes)) if v is not None}
        settings.update(extra or {})
        return self._applied(Deferred.fromCoroutine(self._control.create_topic(
            topic, partitions, replication_factor, min_isr=min_insync_replicas,
            settings=settings)))

    def register_broker(self, broker_id: int, host: str, port: int,
                        epoch: int | None) -> Deferred[Applied]:
        if self._cluster is not None and broker_id not in self._cluster.brokers:
            return fail(BadRequest(
                f"broker {broker_id} is not in this cluster's address book (cluster.brokers: "
                f"{' '.join(map(str, self._cluster.broker_ids))}); brokers register "
                "themselves through their etcd leases"))
        # The registration state: the address the broker registered with its lease, else
        # (not running now) the address book's.
        registered = self._control.registration(broker_id)
        addr = registered.addr if registered is not None else (
            str(self._cluster.brokers[broker_id]) if self._cluster is not None else None)
        now = self._now()
        if addr is None:
            return succeed(now)
        host, _, port = addr.rpartition(":")
        return succeed(Applied(now.term, now.index, (host.strip("[]"), int(port))))

    def heartbeat(self, broker_id: int) -> Deferred[Applied]:
        if self._control.registration(broker_id) is None:
            return fail(BadRequest(f"broker {broker_id} holds no live registration in etcd"))
        return succeed(self._now())

    def elect(self, topic: str, partition: int, leader: int,
              isr: tuple[int, ...]) -> Deferred[Applied]:
        return self._applied(Deferred.fromCoroutine(
            self._control.elect(topic, partition, leader, isr or None)))

    def metadata(self) -> AdminMetadata:
        meta = self._control.metadata()
        # The broker's own topics (__skerry_groups) are listed nowhere users look.
        return AdminMetadata(sorted(t for t in meta.topics if not t.startswith(INTERNAL_PREFIX)),
                             sorted(meta.brokers))

    def leader_of(self, topic: str, partition: int) -> LeaderHint | None:
        found = self._control.leader_of(topic, partition)
        return None if found is None else LeaderHint(found[0], found[1], found[2])
