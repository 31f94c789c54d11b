"""The console's view of the cluster: which brokers exist, which one is the controller, and
who leads and replicates each partition.

Owns: ``ClusterView`` (the seam: what the console asks about the cluster), ``Placement``
and ``BrokerEntry`` (its plain answers) and ``LocalClusterView``, what one broker knows on
its own: a single broker is the only broker, the controller and the leader of every
partition, with itself as the only in-sync replica; a broker with a static ``cluster``
section knows the brokers of its configuration and the replica state its replication
service holds for each partition (its own role, the leader it follows, the ISR when it
leads).

``ControlPlaneView`` is the view of a broker whose cluster runs on etcd
(``cluster.etcd``): brokers, controller, leaders, epochs and committed ISRs as etcd holds
them, through the control plane's public ``metadata()``. It is handed to
``ConsoleService.for_broker(cluster=...)``; nothing else in the console changes.

Must not import: the replication package's internals, transports, the store. It reads the
replication service through ``ReplicaStatusSource``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from broker.errors import SkerryError

__all__ = ["BrokerEntry", "ClusterView", "ControlPlaneView", "LocalClusterView", "Placement",
           "ReplicaStatusSource"]


@dataclass(frozen=True, slots=True)
class BrokerEntry:
    """One broker of the cluster as the console lists it."""

    broker_id: int
    address: str
    local: bool
    """True for the broker serving this console."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Who holds one partition: ``leader`` is a broker id (None: unknown to this broker),
    ``replicas`` and ``isr`` broker ids, ``role`` this broker's role for it."""

    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    under_replicated: bool
    epoch: int
    role: str


class ClusterView(Protocol):
    """What the console asks about the cluster (the control plane's seam)."""

    @property
    def mode(self) -> str:
        """``single`` (one broker), ``static`` (a ``cluster`` section, no controller) or
        whatever a control plane calls itself."""
        ...

    def brokers(self) -> list[BrokerEntry]: ...

    def controller(self) -> int | None:
        """The controller's broker id; None when there is none (or it is unknown)."""
        ...

    def placement(self, topic: str, partition: int) -> Placement: ...


class ReplicaStatusSource(Protocol):
    """What ``LocalClusterView`` reads of ``broker.services.replication``."""

    @property
    def cluster(self) -> Any: ...

    def status(self, topic: str, partition: int) -> Any: ...


class LocalClusterView:
    """What this broker knows by itself (see the module docstring)."""

    def __init__(self, replication: ReplicaStatusSource,
                 advertised: Callable[[], str]) -> None:
        """``advertised()``: this broker's V1 address (known once it listens)."""
        self._replication = replication
        self._advertised = advertised
        cluster = replication.cluster
        self._self_id: int = cluster.broker_id if cluster is not None else 0

    @property
    def mode(self) -> str:
        return "single" if self._replication.cluster is None else "static"

    def brokers(self) -> list[BrokerEntry]:
        cluster = self._replication.cluster
        if cluster is None:
            return [BrokerEntry(0, self._advertised(), True)]
        return [BrokerEntry(i, str(cluster.address(i)), i == cluster.broker_id)
                for i in cluster.broker_ids]

    def controller(self) -> int | None:
        # A single broker decides everything itself; a static cluster has no controller.
        return self._self_id if self._replication.cluster is None else None

    def placement(self, topic: str, partition: int) -> Placement:
        try:
            status = self._replication.status(topic, partition)
        except (SkerryError, KeyError, IndexError):
            return Placement(None, (), (), False, 0, "unknown")
        role = getattr(status.role, "value", str(status.role))
        if self._replication.cluster is None:
            return Placement(self._self_id, (self._self_id,), tuple(status.isr),
                             bool(status.under_replicated), status.epoch, role)
        leader = status.leader if status.leader >= 0 else None
        return Placement(leader, tuple(status.replicas), tuple(status.isr),
                         bool(status.under_replicated), status.epoch, role)


class MetadataSource(Protocol):
    """What ``ControlPlaneView`` reads of ``broker.services.control.ControlPlane``: its
    ``metadata()`` (live brokers, controller, partitions with leader, epoch, ISR and
    replicas; ``-1`` leader = offline)."""

    def metadata(self) -> Any: ...


class ControlPlaneView:
    """The cluster as etcd holds it (see the module docstring). Brokers are those of the
    address book (``cluster.brokers``); a broker whose lease is gone is listed with its
    configured address and leads nothing. A partition whose leader is ``-1`` is offline:
    shown with no leader and counted as under-replicated."""

    def __init__(self, control: MetadataSource, address_book: Any, self_id: int) -> None:
        """``address_book``: the ``ClusterConfig`` (``broker_ids``, ``address(i)``)."""
        self._control = control
        self._book = address_book
        self._self_id = self_id

    @property
    def mode(self) -> str:
        return "etcd"

    def brokers(self) -> list[BrokerEntry]:
        live = self._control.metadata().brokers
        return [BrokerEntry(i, str(live.get(i, self._book.address(i))), i == self._self_id)
                for i in self._book.broker_ids]

    def controller(self) -> int | None:
        controller = self._control.metadata().controller
        return None if controller is None else int(controller)

    def placement(self, topic: str, partition: int) -> Placement:
        info = self._control.metadata().partitions.get((topic, partition))
        if info is None:
            return Placement(None, (), (), False, 0, "unknown")
        leader = info.leader if info.leader >= 0 else None
        role = ("leader" if leader == self._self_id
                else "follower" if self._self_id in info.replicas else "none")
        under = leader is None or len(info.isr) < len(info.replicas)
        return Placement(leader, tuple(info.replicas), tuple(info.isr), under, info.epoch, role)
