"""The Kafka Metadata API: the brokers, and each topic's partitions with their leaders.

Owns: ``VERSIONS`` (the Metadata versions served) and ``metadata``, over the core's public
methods (kafka-wire-notes §6): a topic is a Skerry topic of the same name (the Iggy
transport's ``__iggy.*`` store topics hidden), brokers and leaders are this broker alone,
or in a cluster ``Context.placement``'s, and Metadata auto-creates a requested topic as
V1's PRODUCE would (``auto_create_topics``).

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

from broker.errors import NotLeader
from broker.kafka import codec as c
from broker.kafka.errors import ErrorCode
from broker.kafka.handlers.context import Context
from data.names import is_valid_name

__all__ = ["VERSIONS", "metadata", "CLUSTER_ID"]

VERSIONS: dict[c.ApiKey, tuple[int, int]] = {c.ApiKey.METADATA: (0, 2)}
"""The Metadata versions served (and advertised)."""

CLUSTER_ID = "skerry"


def metadata(ctx: Context, request: c.MetadataRequest) -> c.MetadataResponse:
    """Every visible topic, or the ones asked for (created when ``auto_create_topics``
    allows, as V1's PRODUCE creates them; a topic still being created across a cluster
    answers LEADER_NOT_AVAILABLE, which clients retry); this broker as the only broker,
    or in a cluster the live brokers and each partition's leader, replicas and ISR."""
    core = ctx.core
    if request.all_topics:
        names = sorted(t for t in core.topic_names() if ctx.visible(t))
    else:
        names = list(dict.fromkeys(request.topics or ()))
    topics = []
    for name in names:
        config = core.topic_config(name) if ctx.visible(name) else None
        if config is None:
            if not is_valid_name(name):
                topics.append(c.MetadataTopic(int(ErrorCode.INVALID_TOPIC_EXCEPTION), name, ()))
                continue
            if not (ctx.visible(name) and ctx.auto_create_topics):
                topics.append(c.MetadataTopic(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name,
                                              ()))
                continue
            try:
                config = core.resolve(name, None, True).config
            except NotLeader:  # created through the cluster's control plane meanwhile
                topics.append(c.MetadataTopic(int(ErrorCode.LEADER_NOT_AVAILABLE), name, ()))
                continue
        topics.append(c.MetadataTopic(0, name, tuple(
            _partition_metadata(ctx, name, p) for p in range(config.partitions))))
    node = ctx.node
    placement = ctx.placement
    if placement is None:
        return c.MetadataResponse((c.MetadataBroker(node.broker_id, node.host, node.port),),
                                  tuple(topics), controller_id=node.broker_id,
                                  cluster_id=CLUSTER_ID)
    return c.MetadataResponse(
        tuple(c.MetadataBroker(b.broker_id, b.host, b.port) for b in placement.brokers()),
        tuple(topics), controller_id=placement.controller(), cluster_id=CLUSTER_ID)


def _partition_metadata(ctx: Context, topic: str, partition: int) -> c.MetadataPartition:
    placement = ctx.placement
    if placement is None:
        me = ctx.node.broker_id
        return c.MetadataPartition(0, partition, me, (me,), (me,))
    where = placement.partition(topic, partition)
    code = 0 if where.leader >= 0 else int(ErrorCode.LEADER_NOT_AVAILABLE)
    return c.MetadataPartition(code, partition, where.leader, where.replicas, where.isr)
