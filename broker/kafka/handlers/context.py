"""What every Kafka request handler shares: the collaborators, this broker's node facts,
and the settings the handlers read.

Owns: ``NodeInfo`` (this broker as Metadata and FindCoordinator describe it: broker id,
advertised host and port; the listener fills in the address once bound) and ``Context``:
the core, the node, the optional ``groups`` slot (the Kafka group service; ``None`` until
the group half of the transport is wired in, and the group APIs then answer
COORDINATOR_NOT_AVAILABLE), the clock, ``now_us``, the limits the data handlers apply, and
``leader_for`` (the seam where a cluster's leader metadata plugs in).

Everything reaches the core through its public methods.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twisted.internet.interfaces import IReactorTime

from broker.core import BrokerCore

__all__ = ["Context", "NodeInfo", "INTERNAL_TOPIC_PREFIXES"]

INTERNAL_TOPIC_PREFIXES = ("__iggy.",)
"""Store topics Kafka clients do not see (the Iggy transport's own topics)."""


@dataclass
class NodeInfo:
    """This broker as Kafka clients see it. Clients connect to what Metadata says, not to
    their bootstrap address: ``host``/``port`` must be reachable by them."""

    broker_id: int = 0
    host: str = "127.0.0.1"
    port: int = 0


class Context:
    """The collaborators and settings of one Kafka transport."""

    def __init__(self, core: BrokerCore, *, node: NodeInfo, clock: IReactorTime,
                 now_us: Callable[[], int], max_message_bytes: int,
                 auto_create_topics: bool, groups: Any = None) -> None:
        self.core = core
        self.node = node
        self.clock = clock
        self.now_us = now_us
        self.max_message_bytes = max_message_bytes
        """Largest value (payload) a produced message may carry: error 10 above it."""
        self.auto_create_topics = auto_create_topics
        self.groups = groups
        """The Kafka group service (``broker.services.kafka_groups``) once wired in; the
        handlers of ``handlers.groups`` use it. ``None``: no group APIs."""

    def leader_for(self, topic: str, partition: int) -> int:
        """The broker id leading ``topic``/``partition``, as Metadata reports it.

        A single broker leads everything. This is the seam for a cluster: answer the
        replication layer's leader for the partition (and list its replicas and ISR) once
        Kafka listeners of every member are known; until then a cluster member reports
        itself, and a produce to a partition it does not lead gets NOT_LEADER_FOR_PARTITION."""
        return self.node.broker_id

    @staticmethod
    def visible(topic: str) -> bool:
        """True for a topic Kafka clients may see (not one of another transport's own)."""
        return not topic.startswith(INTERNAL_TOPIC_PREFIXES)
