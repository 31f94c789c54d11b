"""What every Kafka request handler shares: the collaborators, this broker's node facts,
and the settings the handlers read.

Owns: ``NodeInfo`` (this broker as Metadata and FindCoordinator describe it: broker id,
advertised host and port; the listener fills in the address once bound) and ``Context``:
the core, the node, the optional ``groups`` slot (the Kafka group service; ``None`` until
the group half of the transport is wired in, and the group APIs then answer
COORDINATOR_NOT_AVAILABLE), the clock, ``now_us``, the limits the data handlers apply, and the
optional ``placement`` (``Placement``: in a cluster, the brokers' Kafka addresses, each
partition's leader, replicas and ISR, and the group coordinator; None on a single broker,
which leads everything and coordinates every group).

Everything reaches the core through its public methods.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from twisted.internet.interfaces import IReactorTime

from broker.core import BrokerCore
from data.names import IGGY_STORE_PREFIX

__all__ = ["Context", "NodeInfo", "Placement", "PartitionPlacement", "INTERNAL_TOPIC_PREFIXES"]

INTERNAL_TOPIC_PREFIXES = (IGGY_STORE_PREFIX,)
"""Store topics Kafka clients do not see (the Iggy transport's own topics)."""


@dataclass
class NodeInfo:
    """This broker as Kafka clients see it. Clients connect to what Metadata says, not to
    their bootstrap address: ``host``/``port`` must be reachable by them."""

    broker_id: int = 0
    host: str = "127.0.0.1"
    port: int = 0


@dataclass(frozen=True)
class PartitionPlacement:
    """A partition as Kafka's Metadata describes it: broker ids."""

    leader: int
    """-1: no leader now (Metadata answers LEADER_NOT_AVAILABLE for it; clients retry)."""
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int = 0
    """The partition's leader epoch (Metadata v7+; clients fence stale leaders by it)."""


class Placement(Protocol):
    """Where things are in a cluster, as Kafka clients must be told (implemented over the
    replication service and the control plane by ``broker.kafka.service``)."""

    def brokers(self) -> Sequence[NodeInfo]:
        """The live brokers' Kafka listeners, as clients reach them."""
        ...

    def partition(self, topic: str, partition: int) -> PartitionPlacement: ...

    def leads(self, topic: str, partition: int) -> bool:
        """True when this broker leads the partition (Kafka consumers fetch from the
        leader only; elsewhere a Fetch answers NOT_LEADER_FOR_PARTITION)."""
        ...

    def coordinator(self, group_id: str | None = None) -> NodeInfo | None:
        """The broker coordinating ``group_id`` (without one: every Kafka group; None:
        none live now)."""
        ...

    def loading(self, group_id: str) -> bool:
        """True while this broker is loading ``group_id``'s coordinator partition."""
        ...

    def controller(self) -> int:
        """The controller's broker id (-1: none now)."""
        ...


class Context:
    """The collaborators and settings of one Kafka transport."""

    def __init__(self, core: BrokerCore, *, node: NodeInfo, clock: IReactorTime,
                 now_us: Callable[[], int], max_message_bytes: int,
                 auto_create_topics: bool, groups: Any = None,
                 placement: Placement | None = None,
                 fetch_max_bytes: int = 16 << 20) -> None:
        self.core = core
        self.placement = placement
        """In a cluster: brokers, leaders and the group coordinator; None: a single broker."""
        self.client_host = ""
        """The address of the client whose request is being handled (set by the dispatcher
        before each handler runs; read synchronously by JoinGroup)."""
        self.requester: Any = None
        """The connection whose request is being handled (set by the dispatcher, like
        ``client_host``): its ``principal`` is what ACLs are checked for."""
        self.node = node
        self.clock = clock
        self.now_us = now_us
        self.max_message_bytes = max_message_bytes
        """Largest value (payload) a produced message may carry: error 10 above it."""
        self.fetch_max_bytes = fetch_max_bytes
        """Most record bytes one Fetch answer carries, below what the client asks
        (``kafka.fetch_max_bytes``; the first batch whole in any case)."""
        self.auto_create_topics = auto_create_topics
        self.groups = groups
        self.advertised: dict[int, tuple[int, int]] = {}
        """Api key -> the versions served, which ApiVersions advertises (set by the
        dispatcher from the handler modules' ``VERSIONS``)."""
        """The Kafka group service (``broker.services.kafka_groups``) once wired in; the
        handlers of ``handlers.groups`` use it. ``None``: no group APIs."""
        self.acls: Any = None
        """``broker.services.acls.AclService``: the rules Kafka's ACL APIs manage (the
        shell sets it; ``None``: they answer SECURITY_DISABLED)."""
        self.consumer_groups: Any = None
        """``broker.services.consumer_groups.ConsumerGroupService``: KIP-848 consumer groups
        (ConsumerGroupHeartbeat/Describe; the shell sets it; ``None``: those APIs answer
        COORDINATOR_NOT_AVAILABLE and the classic group APIs see no consumer group)."""
        self.producer_ids: Any = None
        """``broker.services.producer_ids.ProducerIds``: InitProducerId's ids (the shell
        sets it; ``None``: InitProducerId answers COORDINATOR_NOT_AVAILABLE)."""

    @staticmethod
    def visible(topic: str) -> bool:
        """True for a topic Kafka clients may see (not one of another transport's own)."""
        return not topic.startswith(INTERNAL_TOPIC_PREFIXES)
