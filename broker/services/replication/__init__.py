"""Replication's service shell: ``ReplicationService`` and the values it answers with.

Owns nothing itself: it names the package's public surface. The facade is
``service.ReplicationService``; each job is a module of its own (see ``service``).

Must not import: the global reactor, sockets, transports, the store's modules.
"""

from broker.services.replication.follower_side import ReplicaHandle
from broker.services.replication.partitions import PartitionLogView, StoreView
from broker.services.replication.results import (
    IsrFacts,
    PartitionStatus,
    PullResult,
    ReplicaFetchResult,
    ReplicaStatusInfo,
)
from broker.services.replication.service import ReplicationService

__all__ = [
    "ReplicationService",
    "ReplicaFetchResult",
    "IsrFacts",
    "PartitionStatus",
    "PullResult",
    "ReplicaStatusInfo",
    "ReplicaHandle",
    "StoreView",
    "PartitionLogView",
]
