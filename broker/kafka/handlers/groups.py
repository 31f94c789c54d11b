"""The Kafka group and offset APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups.

Owns: those handlers and ``GROUP_HANDLERS`` (request class of ``broker.kafka.codec`` ->
``handler(ctx, request) -> response`` or a ``Deferred`` of one), which
``broker.kafka.handlers.dispatch`` merges into its table. They translate requests into
calls on the Kafka group service (``Context.groups``: ``broker.services.kafka_groups``,
whose coordinator is ``groups.classic``) and its answers into responses. Refusals are the
domain's (``groups.kafka_errors``) and reach the wire through ``broker.kafka.errors``
(raised: the dispatcher answers the request's error layout; per partition: the handler
puts ``code_for(error)`` there).

Rules of this layer (kafka-wire-notes §3.6-3.11, docs/kafka-groups.md):

* FindCoordinator names one broker for every group: this one, or in a cluster
  ``Context.placement``'s coordinator (the live broker of lowest id), and the other
  members answer the group APIs with NOT_COORDINATOR_FOR_GROUP (16), which makes clients
  ask FindCoordinator again (ListGroups there: no groups). Group state and committed
  offsets are that broker's own files (docs/kafka-groups.md, "In a cluster");
* JoinGroup v0 has no rebalance timeout: the coordinator uses the session timeout;
* OffsetCommit v0 (no generation) and v1/v2 with generation -1 and member ``""`` are
  "simple" commits (accepted while the group has no live member, like Kafka); a partition
  of an unknown topic answers 3, an offset outside ``[0, hw + 1]`` answers 1
  (OFFSET_OUT_OF_RANGE, V1 COMMIT's range), a group-level refusal answers its code on
  every partition; the commit is answered once ``offsets.json`` holds it;
* OffsetFetch answers -1 (metadata ``""``) where nothing is committed, which is what makes
  a client apply its ``auto.offset.reset``; v0 answers 3 for an unknown topic;
* while no group service is wired in, or it is shutting down, the group APIs answer
  COORDINATOR_NOT_AVAILABLE (15), which clients retry.

Must not import: Twisted's reactor, sockets, files, the store, the protocol; only
``Deferred`` for waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from broker.errors import Unavailable
from broker.kafka import codec as c
from broker.kafka.errors import ErrorCode, KafkaError, code_for
from broker.kafka.handlers.context import Context
from groups.classic_effects import CommittedOffset, JoinReply, SyncReply
from groups.kafka_errors import KafkaGroupError

__all__ = ["GROUP_HANDLERS", "find_coordinator", "join_group", "sync_group", "heartbeat",
           "leave_group", "offset_commit", "offset_fetch", "describe_groups", "list_groups"]

_NO_COORDINATOR = "the Kafka group coordinator is not available"


def _service(ctx: Context, group_id: str | None = None) -> Any:
    """The Kafka group service, or COORDINATOR_NOT_AVAILABLE; NOT_COORDINATOR_FOR_GROUP on
    a cluster member that does not coordinate the group (COORDINATOR_LOAD_IN_PROGRESS
    while it is loading the group's partition)."""
    if ctx.groups is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, _NO_COORDINATOR)
    if group_id is not None and ctx.placement is not None and ctx.placement.loading(group_id):
        raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                         f"broker {ctx.node.broker_id} is loading group {group_id}")
    if not _coordinates(ctx, group_id):
        raise KafkaError(ErrorCode.NOT_COORDINATOR_FOR_GROUP,
                         f"broker {ctx.node.broker_id} does not coordinate group {group_id}")
    return ctx.groups


def _coordinates(ctx: Context, group_id: str | None = None) -> bool:
    placement = ctx.placement
    if placement is None:
        return True
    coordinator = placement.coordinator(group_id)
    return coordinator is not None and coordinator.broker_id == ctx.node.broker_id


def _call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the group service; shutting down (``Unavailable``) is COORDINATOR_NOT_AVAILABLE
    on the group APIs, whether it is raised now or fails a held request later."""
    try:
        result = function(*args, **kwargs)
    except Unavailable as error:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)) from None
    if isinstance(result, Deferred):
        result.addErrback(_coordinator_gone)
    return result


def _coordinator_gone(failure: Failure) -> Failure:
    if failure.check(Unavailable):
        return Failure(KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                  failure.getErrorMessage()))
    return failure


# ================================================================ coordinator and membership


def find_coordinator(ctx: Context, request: c.FindCoordinatorRequest
                     ) -> c.FindCoordinatorResponse:
    """FindCoordinator v0: the broker coordinating every group (this one, or in a cluster
    the placement's; none live: COORDINATOR_NOT_AVAILABLE)."""
    if ctx.groups is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, _NO_COORDINATOR)
    node = ctx.node if ctx.placement is None else ctx.placement.coordinator(request.key)
    if node is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no live broker coordinates "
                         "Kafka groups now")
    return c.FindCoordinatorResponse(0, node.broker_id, node.host, node.port)


def join_group(ctx: Context, request: c.JoinGroupRequest) -> Deferred[c.JoinGroupResponse]:
    """JoinGroup v0/v1: answered when the join barrier completes (the leader's answer
    lists every member's metadata)."""
    service = _service(ctx, request.group_id)
    rebalance = request.rebalance_timeout_ms if request.header.api_version >= 1 else None
    d = _call(service.join, request.group_id, request.member_id,
              client_id=request.header.client_id or "",
              client_host=f"/{ctx.client_host}" if ctx.client_host else "",
              session_timeout_ms=request.session_timeout_ms, rebalance_timeout_ms=rebalance,
              protocol_type=request.protocol_type,
              protocols=[(p.name, p.metadata) for p in request.protocols])
    return d.addCallback(_join_response)


def _join_response(reply: JoinReply) -> c.JoinGroupResponse:
    return c.JoinGroupResponse(0, reply.generation, reply.protocol, reply.leader,
                               reply.member_id,
                               tuple(c.JoinGroupMember(m, meta) for m, meta in reply.members))


def sync_group(ctx: Context, request: c.SyncGroupRequest) -> Deferred[c.SyncGroupResponse]:
    """SyncGroup v0: the member's assignment once the leader has sent it."""
    service = _service(ctx, request.group_id)
    assignments = {a.member_id: a.assignment for a in request.assignments} or None
    d = _call(service.sync, request.group_id, request.generation_id, request.member_id,
              assignments)
    return d.addCallback(lambda reply: c.SyncGroupResponse(0, _assignment(reply)))


def _assignment(reply: SyncReply) -> bytes:
    return reply.assignment


def heartbeat(ctx: Context, request: c.HeartbeatRequest) -> c.HeartbeatResponse:
    """Heartbeat v0: 0, or 27 REBALANCE_IN_PROGRESS while a rebalance waits (rejoin)."""
    service = _service(ctx, request.group_id)
    pending = _call(service.heartbeat, request.group_id, request.generation_id,
                    request.member_id)
    return c.HeartbeatResponse(0 if pending is None else int(code_for(pending)))


def leave_group(ctx: Context, request: c.LeaveGroupRequest) -> Deferred[c.LeaveGroupResponse]:
    """LeaveGroup v0: the member goes at once and the others rebalance."""
    service = _service(ctx, request.group_id)
    d = _call(service.leave, request.group_id, request.member_id)
    return d.addCallback(lambda _: c.LeaveGroupResponse(0))


# ================================================================ offsets


def offset_commit(ctx: Context, request: c.OffsetCommitRequest
                  ) -> Deferred[c.OffsetCommitResponse] | c.OffsetCommitResponse:
    """OffsetCommit v0-v2 (see the module doc for the per-partition rules)."""
    service = _service(ctx, request.group_id)
    codes: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    for topic in request.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            code = _check_commit(ctx, topic.name, p.partition_index, p.committed_offset)
            if code:
                codes[key] = code
            else:
                offsets[key] = CommittedOffset(p.committed_offset, p.committed_metadata or "")

    def respond(outcomes: dict[tuple[str, int], KafkaGroupError | None] | KafkaGroupError
                ) -> c.OffsetCommitResponse:
        def code(key: tuple[str, int]) -> int:
            if key in codes:
                return codes[key]
            outcome = outcomes if isinstance(outcomes, KafkaGroupError) else outcomes.get(key)
            return 0 if outcome is None else int(code_for(outcome))

        return c.OffsetCommitResponse(tuple(
            c.OffsetCommitTopicResponse(t.name, tuple(
                c.OffsetCommitPartitionResponse(p.partition_index,
                                                code((t.name, p.partition_index)))
                for p in t.partitions))
            for t in request.topics))

    generation = request.generation_id if request.header.api_version >= 1 else -1
    member_id = request.member_id if request.header.api_version >= 1 else ""
    try:
        d = _call(service.commit_offsets, request.group_id, generation, member_id, offsets)
    except KafkaGroupError as refusal:
        return respond(refusal)  # the group's refusal, on every partition
    return d.addCallback(respond)


def _check_commit(ctx: Context, topic: str, partition: int, offset: int) -> int:
    """0 when ``offset`` may be committed for the partition, else the partition's code."""
    config = ctx.core.topic_config(topic) if ctx.visible(topic) else None
    if config is None or not 0 <= partition < config.partitions:
        return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not 0 <= offset <= ctx.core.hw(topic, partition) + 1:
        return int(ErrorCode.OFFSET_OUT_OF_RANGE)
    return 0


def offset_fetch(ctx: Context, request: c.OffsetFetchRequest) -> c.OffsetFetchResponse:
    """OffsetFetch v0/v1: the committed offsets (-1 for none), the same entries V1's
    OFFSET reads."""
    service = _service(ctx, request.group_id)
    wanted = [(t.name, p) for t in request.topics for p in t.partition_indexes]
    committed = _call(service.fetch_offsets, request.group_id, wanted)
    v0 = request.header.api_version == 0

    def partition(topic: str, index: int) -> c.OffsetFetchPartitionResponse:
        found = committed.get((topic, index))
        if found is not None:
            return c.OffsetFetchPartitionResponse(index, found.offset, found.metadata, 0)
        code = 0
        if v0 and (not ctx.visible(topic) or ctx.core.topic_config(topic) is None):
            code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return c.OffsetFetchPartitionResponse(index, -1, "", code)

    return c.OffsetFetchResponse(tuple(
        c.OffsetFetchTopicResponse(t.name, tuple(partition(t.name, p)
                                                 for p in t.partition_indexes))
        for t in request.topics))


# ================================================================ admin tools


def describe_groups(ctx: Context, request: c.DescribeGroupsRequest
                    ) -> c.DescribeGroupsResponse:
    """DescribeGroups v0: state, protocol and members (metadata and assignment while
    Stable); an unknown group is ``Dead``."""
    service = _service(ctx)
    described = []
    for group_id in request.groups:
        view = _call(service.describe, group_id)
        described.append(c.DescribedGroup(0, view.group_id, view.state, view.protocol_type,
                                          view.protocol, tuple(
            c.DescribedGroupMember(m.member_id, m.client_id, m.client_host, m.metadata,
                                   m.assignment) for m in view.members)))
    return c.DescribeGroupsResponse(tuple(described))


def list_groups(ctx: Context, request: c.ListGroupsRequest) -> c.ListGroupsResponse:
    """ListGroups v0: every Kafka group and its protocol type (none on a cluster member
    that does not coordinate them, as a Kafka broker lists only its own groups)."""
    if ctx.groups is not None and not _coordinates(ctx):
        return c.ListGroupsResponse(0, ())
    service = _service(ctx)
    return c.ListGroupsResponse(0, tuple(c.ListedGroup(g, t)
                                         for g, t in _call(service.list_groups)))


GROUP_HANDLERS: dict[type, Any] = {
    c.FindCoordinatorRequest: find_coordinator,
    c.JoinGroupRequest: join_group,
    c.SyncGroupRequest: sync_group,
    c.HeartbeatRequest: heartbeat,
    c.LeaveGroupRequest: leave_group,
    c.OffsetCommitRequest: offset_commit,
    c.OffsetFetchRequest: offset_fetch,
    c.DescribeGroupsRequest: describe_groups,
    c.ListGroupsRequest: list_groups,
}
"""Request class -> handler, merged into the dispatcher's table."""
