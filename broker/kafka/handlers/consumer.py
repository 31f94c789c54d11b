"""The KIP-848 consumer-group APIs on the Kafka listener: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69), v0-v1 (docs/groups.md, "The consumer protocol on the Kafka
listener").

Owns: those handlers, ``CONSUMER_HANDLERS`` and ``CONSUMER_VERSIONS`` (merged into the
dispatcher's table), and ``consumer_group(ctx, group_id)``: whether a group id is a
consumer group, which the classic group handlers ask to route OffsetCommit/OffsetFetch
and to refuse a classic JoinGroup. They translate requests into calls on the consumer
group service (``Context.consumer_groups``: ``broker.services.consumer_groups``, whose
coordinator is ``groups.consumer_coordinator``) and its answers into responses. Topics
travel by id: the ids Metadata v10+ gives (``topic_id_of``), as ``uuid.UUID`` in the
domain. Refusals are the domain's (``groups.consumer_errors``) mapped by
``broker.kafka.errors``; the heartbeat's answer carries the refusal's message too.

Rules of this layer:

* ConsumerGroupHeartbeat v1 needs the member id the client made (KIP-1082): an empty one
  answers INVALID_REQUEST (42); v0 may send ``""`` to join and is given one;
* a group id live under the classic protocol (Kafka JoinGroup members, V1 or Iggy
  members) answers GROUP_ID_NOT_FOUND (69), as Kafka answers a consumer heartbeat for a
  group it cannot convert;
* ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND for a group that is not a consumer
  group (Kafka's admin client then asks DescribeGroups);
* without a consumer group service, or while it shuts down: COORDINATOR_NOT_AVAILABLE
  (15); on a cluster member that does not coordinate the group: NOT_COORDINATOR (16).

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

import uuid
from typing import Any

from broker.errors import Unavailable
from broker.kafka import codec as c
from broker.kafka.errors import ErrorCode, KafkaError, code_for
from broker.kafka.handlers.context import Context
from broker.kafka.handlers.groups import GROUP_OPERATIONS, _service
from groups.consumer_effects import HeartbeatRequest, TopicPartitionsView
from groups.kafka_errors import KafkaGroupError

__all__ = ["CONSUMER_HANDLERS", "CONSUMER_VERSIONS", "consumer_group_heartbeat",
           "consumer_group_describe", "consumer_group"]

_NO_SERVICE = "the consumer group coordinator (KIP-848) is not available"


def _consumer_service(ctx: Context, group_id: str) -> Any:
    """The consumer group service, after the checks every group API makes (coordinator
    here, not loading); COORDINATOR_NOT_AVAILABLE without one."""
    _service(ctx, group_id)
    if ctx.consumer_groups is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, _NO_SERVICE)
    return ctx.consumer_groups


def consumer_group(ctx: Context, group_id: str) -> Any:
    """The consumer group service when ``group_id`` is a consumer group (with or without
    members) on this broker, else None."""
    service = ctx.consumer_groups
    if service is None or not service.is_consumer_group(group_id):
        return None
    return service


def consumer_group_heartbeat(ctx: Context, request: c.ConsumerGroupHeartbeatRequest
                             ) -> c.ConsumerGroupHeartbeatResponse:
    """ConsumerGroupHeartbeat v0-v1: join (epoch 0), heartbeat, leave (-1), leave for now
    (-2, static members); the answer carries the member's epoch, the heartbeat interval and,
    when it changed, the partitions it owns now."""
    try:
        service = _consumer_service(ctx, request.group_id)
        if request.header.api_version >= 1 and not request.member_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "ConsumerGroupHeartbeat v1+ needs the member id the client "
                             "made (KIP-1082)")
        owned = None if request.topic_partitions is None else tuple(sorted(
            (uuid.UUID(bytes=t.topic_id), tuple(sorted(set(t.partitions))))
            for t in request.topic_partitions))
        reply = service.heartbeat(HeartbeatRequest(
            request.group_id, request.member_id, request.member_epoch,
            instance_id=request.instance_id, rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            topic_names=None if request.subscribed_topic_names is None
            else tuple(request.subscribed_topic_names),
            topic_regex=request.subscribed_topic_regex,
            server_assignor=request.server_assignor, owned=owned,
            client_id=request.header.client_id or "",
            client_host=f"/{ctx.client_host}" if ctx.client_host else ""))
    except Unavailable as error:
        return c.ConsumerGroupHeartbeatResponse(
            int(ErrorCode.COORDINATOR_NOT_AVAILABLE), str(error))
    except (KafkaError, KafkaGroupError) as refusal:
        return c.ConsumerGroupHeartbeatResponse(int(code_for(refusal)), str(refusal))
    assignment = None
    if reply.assignment is not None:
        assignment = c.ConsumerGroupHeartbeatAssignment(tuple(
            c.ConsumerTopicPartitions(topic.bytes, partitions)
            for topic, partitions in reply.assignment))
    return c.ConsumerGroupHeartbeatResponse(0, None, reply.member_id, reply.member_epoch,
                                            reply.heartbeat_interval_ms, assignment)


def _assignment(views: tuple[TopicPartitionsView, ...]) -> c.DescribedAssignment:
    return c.DescribedAssignment(tuple(
        c.DescribedTopicPartitions(v.topic_id.bytes, v.topic_name, v.partitions)
        for v in views))


def consumer_group_describe(ctx: Context, request: c.ConsumerGroupDescribeRequest
                            ) -> c.ConsumerGroupDescribeResponse:
    """ConsumerGroupDescribe v0-v1: each group's state, epochs, assignor and members (their
    epochs, subscriptions, current and target assignments; v1: member type 1, consumer);
    GROUP_ID_NOT_FOUND for a group id that is not a consumer group, each group on its
    own."""
    operations = GROUP_OPERATIONS if request.include_authorized_operations \
        else c.NO_AUTHORIZED_OPERATIONS
    out = []
    for group_id in request.group_ids:
        try:
            service = _consumer_service(ctx, group_id)
            view = service.describe(group_id)
        except (KafkaError, KafkaGroupError) as refusal:
            out.append(c.DescribedConsumerGroup(int(code_for(refusal)), group_id,
                                                str(refusal)))
            continue
        members = tuple(
            c.DescribedConsumerMember(
                m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id,
                m.client_host, m.topic_names, m.topic_regex, _assignment(m.assignment),
                _assignment(m.target))
            for m in view.members)
        out.append(c.DescribedConsumerGroup(0, view.group_id, None, view.state,
                                            view.group_epoch, view.assignment_epoch,
                                            view.assignor, members, operations))
    return c.ConsumerGroupDescribeResponse(tuple(out))


CONSUMER_HANDLERS: dict[type, Any] = {
    c.ConsumerGroupHeartbeatRequest: consumer_group_heartbeat,
    c.ConsumerGroupDescribeRequest: consumer_group_describe,
}
"""Request class -> handler, merged into the dispatcher's table."""

CONSUMER_VERSIONS: dict[c.ApiKey, tuple[int, int]] = {
    c.ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    c.ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
}
"""The versions these handlers serve (and ApiVersions advertises)."""
