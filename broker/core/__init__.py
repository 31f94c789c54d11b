"""The broker core: the one place every transport goes through to reach the store and the
replication layer.

Split by job, one module each: ``topics`` (topic lifecycle, limits, write refusals),
``produce`` (the produce pipeline: per-turn batches, acks, whole-batch produces),
``producers`` (V1's idempotent producer state), ``idempotence`` (Kafka's idempotent
producer state, KIP-98), ``reads`` (high watermarks, reads, long polls),
``periodic`` (interval fsync, retention), ``durability`` (group commit), ``ports`` (the
collaborators' ``Protocol``\\ s), and ``core`` (``BrokerCore``, the facade composing them).
This package re-exports what transports and the shell import.

Must not import: transports, sockets. Time comes from the injected ``clock``.
"""

from broker.core.core import BrokerCore
from broker.core.idempotence import ProducerBatch, ProducerStateStore
from broker.core.produce import ProduceCallback, ProduceRequest, ProduceResult, fnv1a_32
from broker.core.reads import PartitionSummary, Watermarks

__all__ = ["BrokerCore", "ProduceCallback", "PartitionSummary", "ProduceRequest", "ProduceResult",
           "ProducerBatch", "ProducerStateStore", "Watermarks", "fnv1a_32"]
