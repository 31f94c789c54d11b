"""The Kafka data APIs: Metadata, Produce, Fetch, ListOffsets.

Owns: the handlers of those four APIs over the core's public methods, and their mapping
rules (kafka-wire-notes §6): a topic is a Skerry topic of the same name (the Iggy
transport's ``__iggy.*`` store topics hidden), leaders are ``Context.leader_for``,
Metadata auto-creates a requested topic as V1's PRODUCE would (``auto_create_topics``),
Kafka's high watermark is Skerry's ``hw + 1``, acks -1 is ``acks=all``, and keys and
values map as ``broker.kafka.mapping`` says.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

from typing import Any

from broker.kafka import codec as c
from broker.kafka.errors import ErrorCode
from broker.kafka.handlers.context import Context
from data.names import is_valid_name

__all__ = ["metadata", "produce", "fetch", "list_offsets"]

CLUSTER_ID = "skerry"


# ================================================================ Metadata


def metadata(ctx: Context, request: c.MetadataRequest) -> c.MetadataResponse:
    """Every visible topic, or the ones asked for (created when ``auto_create_topics``
    allows, as V1's PRODUCE creates them); this broker as the only broker."""
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
            config = core.resolve(name, None, True).config
        topics.append(c.MetadataTopic(0, name, tuple(
            _partition_metadata(ctx, name, p) for p in range(config.partitions))))
    node = ctx.node
    return c.MetadataResponse((c.MetadataBroker(node.broker_id, node.host, node.port),),
                              tuple(topics), controller_id=node.broker_id,
                              cluster_id=CLUSTER_ID)


def _partition_metadata(ctx: Context, topic: str, partition: int) -> c.MetadataPartition:
    leader = ctx.leader_for(topic, partition)
    return c.MetadataPartition(0, partition, leader, (leader,), (leader,))


# ================================================================ Produce, Fetch, ListOffsets


def produce(ctx: Context, request: c.ProduceRequest) -> Any:
    raise NotImplementedError


def fetch(ctx: Context, request: c.FetchRequest) -> Any:
    raise NotImplementedError


def list_offsets(ctx: Context, request: c.ListOffsetsRequest) -> Any:
    raise NotImplementedError
