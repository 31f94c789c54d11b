"""The Kafka Metadata API: the brokers, and each topic's partitions with their leaders.

Owns: ``VERSIONS`` (the Metadata versions served) and ``metadata``, over the core's public
methods (kafka-wire-notes §6): a topic is a Skerry topic of the same name (the Iggy
transport's ``__iggy.*`` store topics hidden), brokers and leaders are this broker alone,
or in a cluster ``Context.placement``'s, and Metadata auto-creates a requested topic as
V1's PRODUCE would (``auto_create_topics``).

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

from access import NotAuthorized
from broker.errors import InvalidTopicName, NotLeader, UnknownTopic
from broker.kafka import codec as c
from broker.kafka.access import may_auto_create
from broker.kafka.errors import ErrorCode
from broker.kafka.handlers.context import Context

__all__ = ["VERSIONS", "metadata", "CLUSTER_ID"]

VERSIONS: dict[c.ApiKey, tuple[int, int]] = {c.ApiKey.METADATA: (0, 12)}
"""The Metadata versions served (and advertised)."""

CLUSTER_ID = "skerry"

TOPIC_OPERATIONS = sum(1 << b for b in (3, 4, 5, 6, 7, 8, 10, 11))
"""Kafka's authorized-operations bit field for a topic when asked (v8+): READ, WRITE,
CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (no ACLs here: a
client that may connect may do all of them)."""
CLUSTER_OPERATIONS = sum(1 << b for b in (4, 5, 7, 8, 9, 10, 11, 12))
"""The cluster's: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
ALTER_CONFIGS, IDEMPOTENT_WRITE, and (bit 4) WRITE."""
NO_TOPIC_ID = bytes(16)


def topic_id_of(config: object) -> bytes:
    """A topic's id as Kafka's 16 bytes (all zeroes for a topic created without one)."""
    tid = getattr(config, "topic_id", None)
    return bytes.fromhex(tid) if tid else NO_TOPIC_ID


def metadata(ctx: Context, request: c.MetadataRequest) -> c.MetadataResponse:
    """Every visible topic, or the ones asked for, by name or (v10+) by id (an unknown id:
    UNKNOWN_TOPIC_ID); a named topic is created when ``auto_create_topics`` allows and the
    request does too (v4+'s ``allow_auto_topic_creation``), as V1's PRODUCE creates them;
    a topic still being created across a cluster answers LEADER_NOT_AVAILABLE, which
    clients retry. This broker as the only broker, or in a cluster the live brokers and
    each partition's leader, leader epoch, replicas and ISR. Topic ids (v10+) are the ids
    kept in each topic's ``topic.json`` (docs/kafka.md, Topic ids)."""
    core = ctx.core
    if request.all_topics:
        names = sorted(t for t in core.topic_names() if ctx.visible(t))
    else:
        names = list(dict.fromkeys(request.topics or ()))
    topics = []
    operations = TOPIC_OPERATIONS if request.include_topic_authorized_operations \
        else c.NO_AUTHORIZED_OPERATIONS
    for name in names:
        visible = ctx.visible(name)
        config = core.topic_config(name) if visible else None
        if config is None:
            # The core's one auto-create policy (``Topics.resolve``), this request's say
            # (v4+'s ``allow_auto_topic_creation``) and Kafka's Create ACL when it would
            # create; another transport's hidden topics are unknown here.
            code: ErrorCode | None = None
            try:
                if not visible:
                    raise UnknownTopic("unknown topic")
                config = core.resolve(name, None, request.allow_auto_topic_creation,
                                      lambda name=name: may_auto_create(ctx, ctx.requester,
                                                                        name)).config
            except NotAuthorized:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            except NotLeader:  # created through the cluster's control plane meanwhile
                code = ErrorCode.LEADER_NOT_AVAILABLE
            except InvalidTopicName:
                code = ErrorCode.INVALID_TOPIC_EXCEPTION
            except UnknownTopic:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if code is not None:
                topics.append(c.MetadataTopic(int(code), name, ()))
                continue
        topics.append(c.MetadataTopic(0, name, tuple(
            _partition_metadata(ctx, name, p) for p in range(config.partitions)),
            topic_id=topic_id_of(config), topic_authorized_operations=operations))
    if request.topic_ids:
        by_id = {topic_id_of(core.topic_config(t)): t for t in core.topic_names()
                 if ctx.visible(t)}
        for tid in dict.fromkeys(request.topic_ids):
            name = by_id.get(tid) if tid != NO_TOPIC_ID else None
            if name is None:
                unnamed = None if request.header.api_version >= 12 else ""  # nullable from v12
                topics.append(c.MetadataTopic(int(ErrorCode.UNKNOWN_TOPIC_ID),
                                              unnamed, (), topic_id=tid))  # type: ignore[arg-type]
                continue
            config = core.topic_config(name)
            assert config is not None
            topics.append(c.MetadataTopic(0, name, tuple(
                _partition_metadata(ctx, name, p) for p in range(config.partitions)),
                topic_id=tid, topic_authorized_operations=operations))
    cluster_operations = CLUSTER_OPERATIONS if request.include_cluster_authorized_operations \
        else c.NO_AUTHORIZED_OPERATIONS
    node = ctx.node
    placement = ctx.placement
    if placement is None:
        return c.MetadataResponse((c.MetadataBroker(node.broker_id, node.host, node.port),),
                                  tuple(topics), controller_id=node.broker_id,
                                  cluster_id=CLUSTER_ID,
                                  cluster_authorized_operations=cluster_operations)
    return c.MetadataResponse(
        tuple(c.MetadataBroker(b.broker_id, b.host, b.port) for b in placement.brokers()),
        tuple(topics), controller_id=placement.controller(), cluster_id=CLUSTER_ID,
        cluster_authorized_operations=cluster_operations)


def _partition_metadata(ctx: Context, topic: str, partition: int) -> c.MetadataPartition:
    placement = ctx.placement
    if placement is None:
        me = ctx.node.broker_id
        return c.MetadataPartition(0, partition, me, (me,), (me,), 0)
    where = placement.partition(topic, partition)
    code = 0 if where.leader >= 0 else int(ErrorCode.LEADER_NOT_AVAILABLE)
    return c.MetadataPartition(code, partition, where.leader, where.replicas, where.isr,
                               where.leader_epoch)
