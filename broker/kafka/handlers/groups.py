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

* FindCoordinator names the group's coordinator: this broker alone; on a cluster with etcd
  the leader of the group's partition of ``__skerry_groups`` (``Context.placement``), with
  COORDINATOR_LOAD_IN_PROGRESS while this broker loads that partition; in the operator mode
  (a cluster without etcd) the live broker of lowest id, whose own files hold the groups.
  A broker that is not the group's coordinator answers the group APIs NOT_COORDINATOR (16),
  which makes clients ask FindCoordinator again;
* JoinGroup v0 has no rebalance timeout: the coordinator uses the session timeout;
* OffsetCommit v0 (no generation) and v1/v2 with generation -1 and member ``""`` are
  "simple" commits (accepted while the group has no live member, like Kafka); a partition
  of an unknown topic answers 3, a negative offset answers 1 (OFFSET_OUT_OF_RANGE: the
  store keeps -1 for "nothing committed"); an offset past the log end is stored, as Kafka
  stores it (the consumer's next Fetch then meets OFFSET_OUT_OF_RANGE and applies its
  ``auto.offset.reset``; lag reads 0); a group-level refusal answers its code on
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

from twisted.internet.defer import Deferred, fail, gatherResults
from twisted.python.failure import Failure

from broker.errors import Unavailable
from broker.kafka import codec as c
from broker.kafka.errors import ErrorCode, KafkaError, code_for
from broker.kafka.handlers.context import Context
from groups.classic_effects import CommittedOffset, JoinReply, SyncReply
from groups.kafka_errors import KafkaGroupError

__all__ = ["GROUP_HANDLERS", "GROUP_VERSIONS", "find_coordinator", "join_group", "sync_group", "heartbeat",
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


TRANSACTIONS_REFUSED = "Skerry has no Kafka transactions (docs/kafka.md, Transactions)"


def find_coordinator(ctx: Context, request: c.FindCoordinatorRequest
                     ) -> c.FindCoordinatorResponse:
    """FindCoordinator v0-v4: the broker coordinating every group (this one, or in a
    cluster the placement's; none live: COORDINATOR_NOT_AVAILABLE), for one key (v0-v3) or
    each of a batch (v4+, KIP-699). A transaction coordinator (key type 1) is refused with
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53): no transactions here, and that error stops
    a transactional producer at once instead of a retry loop."""
    v = request.header.api_version
    code, message, node = 0, None, None
    if request.key_type != 0:
        code, message = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), \
            TRANSACTIONS_REFUSED
    elif ctx.groups is None:
        code, message = int(ErrorCode.COORDINATOR_NOT_AVAILABLE), _NO_COORDINATOR
    else:
        # Each group its own coordinator: its partition's leader (a cluster on etcd).
        node = ctx.node if ctx.placement is None else ctx.placement.coordinator(
            request.key if v < 4 else None)
        if node is None:
            code, message = int(ErrorCode.COORDINATOR_NOT_AVAILABLE), \
                "no live broker coordinates Kafka groups now"
    if v >= 4:
        def one(key: str) -> c.Coordinator:
            found = node
            if code == 0 and ctx.placement is not None:
                found = ctx.placement.coordinator(key)
            if found is None:
                return c.Coordinator(key, -1, "", -1,
                                     code or int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                                     message or "no live broker coordinates the group now")
            return c.Coordinator(key, found.broker_id, found.host, found.port, code, message)

        return c.FindCoordinatorResponse(0, -1, "", -1, coordinators=tuple(
            one(key) for key in request.coordinator_keys))
    if node is None:
        raise KafkaError(ErrorCode(code), message or "")
    return c.FindCoordinatorResponse(0, node.broker_id, node.host, node.port)


def join_group(ctx: Context, request: c.JoinGroupRequest) -> Deferred[c.JoinGroupResponse]:
    """JoinGroup v0-v9: answered when the join barrier completes (the leader's answer
    lists every member's metadata, and from v5 their group instance ids); static members
    (v5+ ``group.instance.id``) as ``groups.classic`` describes."""
    service = _service(ctx, request.group_id)
    consumer = ctx.consumer_groups
    if consumer is not None and consumer.live_protocol(request.group_id) is not None:
        raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                         f"group {request.group_id} is a consumer group (KIP-848) with "
                         f"members; the classic protocol cannot join it")
    v = request.header.api_version
    rebalance = request.rebalance_timeout_ms if v >= 1 else None
    d = _call(service.join, request.group_id, request.member_id,
              client_id=request.header.client_id or "",
              client_host=f"/{ctx.client_host}" if ctx.client_host else "",
              session_timeout_ms=request.session_timeout_ms, rebalance_timeout_ms=rebalance,
              protocol_type=request.protocol_type,
              protocols=[(p.name, p.metadata) for p in request.protocols],
              group_instance_id=request.group_instance_id)
    return d.addCallback(_join_response, request.protocol_type)


def _join_response(reply: JoinReply, protocol_type: str) -> c.JoinGroupResponse:
    instances = reply.instance_ids or (None,) * len(reply.members)
    return c.JoinGroupResponse(0, reply.generation, reply.protocol, reply.leader,
                               reply.member_id,
                               tuple(c.JoinGroupMember(m, meta, instance) for (m, meta), instance
                                     in zip(reply.members, instances, strict=True)),
                               protocol_type=protocol_type)


def sync_group(ctx: Context, request: c.SyncGroupRequest) -> Deferred[c.SyncGroupResponse]:
    """SyncGroup v0-v5: the member's assignment once the leader has sent it; v5 echoes the
    protocol type and name the client sent (clients check them against their own)."""
    service = _service(ctx, request.group_id)
    assignments = {a.member_id: a.assignment for a in request.assignments} or None
    d = _call(service.sync, request.group_id, request.generation_id, request.member_id,
              assignments, request.group_instance_id)
    return d.addCallback(lambda reply: c.SyncGroupResponse(
        0, _assignment(reply), protocol_type=request.protocol_type,
        protocol_name=request.protocol_name))


def _assignment(reply: SyncReply) -> bytes:
    return reply.assignment


def heartbeat(ctx: Context, request: c.HeartbeatRequest) -> c.HeartbeatResponse:
    """Heartbeat v0-v4: 0, or 27 REBALANCE_IN_PROGRESS while a rebalance waits (rejoin)."""
    service = _service(ctx, request.group_id)
    pending = _call(service.heartbeat, request.group_id, request.generation_id,
                    request.member_id, request.group_instance_id)
    return c.HeartbeatResponse(0 if pending is None else int(code_for(pending)))


def leave_group(ctx: Context, request: c.LeaveGroupRequest) -> Deferred[c.LeaveGroupResponse]:
    """LeaveGroup v0-v5: the members go at once and the others rebalance. v3+ names
    several (KIP-345), each by member id or group instance id, each with its own outcome;
    v0-v2's one member refused refuses the request."""
    service = _service(ctx, request.group_id)
    if request.header.api_version < 3:
        d = _call(service.leave, request.group_id, request.member_id)
        return d.addCallback(lambda _: c.LeaveGroupResponse(0))
    outcomes: list[Deferred[Any]] = []
    for member in request.members:
        try:
            one = _call(service.leave, request.group_id, member.member_id,
                        member.group_instance_id)
        except KafkaGroupError as refusal:
            one = fail(refusal)
        outcomes.append(one.addCallbacks(lambda _: 0, _member_code))
    members = request.members

    def respond(codes: list[int]) -> c.LeaveGroupResponse:
        return c.LeaveGroupResponse(0, members=tuple(
            c.LeaveGroupMemberResponse(m.member_id, m.group_instance_id, code)
            for m, code in zip(members, codes, strict=True)))

    return gatherResults(outcomes).addCallback(respond)


def _member_code(failure: Failure) -> int:
    failure.trap(KafkaGroupError)
    return int(code_for(failure.value))


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
    consumer = _consumer_group(ctx, request.group_id)
    try:
        if consumer is not None:  # a KIP-848 group: the generation is the member epoch
            _check_consumer_commit(consumer, request, generation, member_id)
            d = _call(consumer.commit_offsets, request.group_id, member_id, generation,
                      offsets)
            return d.addCallback(respond)
        d = _call(service.commit_offsets, request.group_id, generation, member_id, offsets,
                  request.group_instance_id)
    except KafkaGroupError as refusal:
        return respond(refusal)  # the group's refusal, on every partition
    return d.addCallback(respond)


def _consumer_group(ctx: Context, group_id: str) -> Any:
    """The consumer group service when ``group_id`` is a KIP-848 consumer group here (with
    or without members), else None."""
    consumer = ctx.consumer_groups
    if consumer is None or not consumer.is_consumer_group(group_id):
        return None
    return consumer


def _check_consumer_commit(consumer: Any, request: c.OffsetCommitRequest, epoch: int,
                           member_id: str) -> None:
    """Kafka's ``ConsumerGroup.validateOffsetCommit``: a tool's commit (epoch < 0) into a
    group without members is taken; else the member must exist (UNKNOWN_MEMBER_ID), must
    use OffsetCommit v9+ (UNSUPPORTED_VERSION) and name its current epoch
    (STALE_MEMBER_EPOCH)."""
    group = consumer.coordinator.group(request.group_id)
    if epoch < 0 and (group is None or not group.members):
        return
    if request.header.api_version < 9 and group is not None \
            and member_id in group.members:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                         "members of a consumer group commit with OffsetCommit v9 or above")
    consumer.coordinator.validate_offset_commit(request.group_id, member_id, epoch)


def _check_commit(ctx: Context, topic: str, partition: int, offset: int) -> int:
    """0 when ``offset`` may be committed for the partition, else the partition's code."""
    config = ctx.core.topic_config(topic) if ctx.visible(topic) else None
    if config is None or not 0 <= partition < config.partitions:
        return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if offset < 0:
        return int(ErrorCode.OFFSET_OUT_OF_RANGE)
    return 0


def offset_fetch(ctx: Context, request: c.OffsetFetchRequest) -> c.OffsetFetchResponse:
    """OffsetFetch v0-v9: the committed offsets (-1 for none), the same entries V1's
    OFFSET reads; v2+ with no topics: every partition the group has committed; v8+ for
    several groups at once (KIP-709), each with its own error."""
    service = _service(ctx)
    v = request.header.api_version
    answers = []
    for group in request.asked():
        try:
            if v < 8:  # one group: refused as a whole when it is coordinated elsewhere
                _service(ctx, group.group_id)
            consumer = _consumer_group(ctx, group.group_id)
            if consumer is not None:  # v9+: a member names its epoch (STALE_MEMBER_EPOCH)
                _call(consumer.validate_offset_fetch, group.group_id, group.member_id,
                      group.member_epoch)
            topics = _fetch_group(ctx, service, group, v)
            answers.append(c.OffsetFetchGroupResponse(group.group_id, topics, 0))
        except KafkaGroupError as refusal:
            if v < 8:
                raise
            answers.append(c.OffsetFetchGroupResponse(group.group_id, (),
                                                      int(code_for(refusal))))
    if v >= 8:
        return c.OffsetFetchResponse((), groups=tuple(answers))
    return c.OffsetFetchResponse(answers[0].topics)


def _fetch_group(ctx: Context, service: Any, group: c.OffsetFetchGroup, v: int
                 ) -> tuple[c.OffsetFetchTopicResponse, ...]:
    if group.topics is None:  # every committed partition of the group
        wanted = [(t, p) for t in sorted(ctx.core.topic_names()) if ctx.visible(t)
                  for p in range(_partitions(ctx, t))]
        committed = _call(service.fetch_offsets, group.group_id, wanted)
        by_topic: dict[str, list[c.OffsetFetchPartitionResponse]] = {}
        for (topic, index), found in committed.items():
            if found is not None:
                by_topic.setdefault(topic, []).append(c.OffsetFetchPartitionResponse(
                    index, found.offset, found.metadata, 0))
        return tuple(c.OffsetFetchTopicResponse(t, tuple(ps)) for t, ps in by_topic.items())
    wanted = [(t.name, p) for t in group.topics for p in t.partition_indexes]
    committed = _call(service.fetch_offsets, group.group_id, wanted)

    def partition(topic: str, index: int) -> c.OffsetFetchPartitionResponse:
        found = committed.get((topic, index))
        if found is not None:
            return c.OffsetFetchPartitionResponse(index, found.offset, found.metadata, 0)
        code = 0
        if v == 0 and (not ctx.visible(topic) or ctx.core.topic_config(topic) is None):
            code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return c.OffsetFetchPartitionResponse(index, -1, "", code)

    return tuple(c.OffsetFetchTopicResponse(t.name, tuple(partition(t.name, p)
                                                          for p in t.partition_indexes))
                 for t in group.topics)


def _partitions(ctx: Context, topic: str) -> int:
    config = ctx.core.topic_config(topic)
    return 0 if config is None else config.partitions


# ================================================================ admin tools

GROUP_OPERATIONS = sum(1 << b for b in (3, 6, 8))
"""Kafka's authorized-operations bits for a group when asked (v3+): READ, DELETE,
DESCRIBE (no ACLs here)."""


def describe_groups(ctx: Context, request: c.DescribeGroupsRequest
                    ) -> c.DescribeGroupsResponse:
    """DescribeGroups v0-v6: state, protocol and members (metadata and assignment while
    Stable, group instance ids from v4); an unknown group is ``Dead``, and so is a KIP-848
    consumer group, which is not a classic group (Kafka's answer; v6, KIP-1043, answers
    both GROUP_ID_NOT_FOUND with a message instead)."""
    service = _service(ctx)
    v = request.header.api_version
    operations = GROUP_OPERATIONS if request.include_authorized_operations \
        else c.NO_AUTHORIZED_OPERATIONS
    described = []
    committed = _offset_groups(service)
    for group_id in request.groups:
        view = _call(service.describe, group_id)
        consumer = _consumer_group(ctx, group_id)
        if consumer is not None and (view.state == "Dead" or
                                     consumer.live_protocol(group_id) is not None):
            described.append(_not_classic(group_id, v, f"group {group_id} is not a classic "
                                          f"group: it is a consumer group (KIP-848)"))
            continue
        state = "Empty" if view.state == "Dead" and group_id in committed else view.state
        if state == "Dead":
            described.append(_not_classic(group_id, v, f"group {group_id} not found"))
            continue
        described.append(c.DescribedGroup(0, view.group_id, state, view.protocol_type,
                                          view.protocol, tuple(
            c.DescribedGroupMember(m.member_id, m.client_id, m.client_host, m.metadata,
                                   m.assignment, m.group_instance_id)
            for m in view.members), operations))
    return c.DescribeGroupsResponse(tuple(described))


def _not_classic(group_id: str, version: int, message: str) -> c.DescribedGroup:
    """No classic group of that id: ``Dead`` with no error below v6, GROUP_ID_NOT_FOUND
    with a message from v6."""
    if version >= 6:
        return c.DescribedGroup(int(ErrorCode.GROUP_ID_NOT_FOUND), group_id, "Dead", "", "",
                                error_message=message)
    return c.DescribedGroup(0, group_id, "Dead", "", "")


def list_groups(ctx: Context, request: c.ListGroupsRequest) -> c.ListGroupsResponse:
    """ListGroups v0-v5: every group, its protocol type, (v4+) its state and (v5+) its
    type: "classic" for Kafka classic groups (and every group id with committed offsets
    alone, Empty), "consumer" (protocol type "consumer") for KIP-848 consumer groups; none
    on a cluster member that does not coordinate them, as a Kafka broker lists only its own
    groups. v4's states filter and v5's types filter keep the groups they name
    (case-insensitive, as Kafka compares them)."""
    if ctx.groups is not None and not _coordinates(ctx):
        return c.ListGroupsResponse(0, ())
    service = _service(ctx)
    states = {s.lower() for s in request.states_filter}
    types = {t.lower() for t in request.types_filter}
    listed: dict[str, c.ListedGroup] = {}
    consumer_ids: set[str] = set()
    if ctx.consumer_groups is not None:
        for group_id, _type, state in _call(ctx.consumer_groups.list_groups):
            consumer_ids.add(group_id)
            listed[group_id] = c.ListedGroup(group_id, "consumer", state, "consumer")
    groups = dict(_call(service.list_groups))
    for group_id in sorted(_offset_groups(service) - groups.keys() - consumer_ids):
        groups[group_id] = ""  # a group known by its committed offsets alone: Empty
    for group_id, protocol_type in sorted(groups.items()):
        state = _call(service.describe, group_id).state
        if state == "Dead":
            state = "Empty"
        if group_id in consumer_ids and (state == "Empty" or ctx.consumer_groups.live_protocol(
                group_id) is not None):
            continue  # the consumer group's entry stands
        listed[group_id] = c.ListedGroup(group_id, protocol_type, state, "classic")
    return c.ListGroupsResponse(0, tuple(
        g for _, g in sorted(listed.items())
        if (not states or g.group_state.lower() in states)
        and (not types or g.group_type.lower() in types)))


def _offset_groups(service: Any) -> set[str]:
    """The group ids with committed offsets (any protocol's: they share the offsets).
    Kafka lists such a group as Empty, even with no member ever."""
    shared = getattr(service, "groups", None)
    if shared is None:
        return set()
    return {group for group, _ in shared.offset_keys()}


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

GROUP_VERSIONS: dict[c.ApiKey, tuple[int, int]] = {
    c.ApiKey.OFFSET_COMMIT: (0, 9),
    c.ApiKey.OFFSET_FETCH: (0, 9),
    c.ApiKey.FIND_COORDINATOR: (0, 4),
    c.ApiKey.JOIN_GROUP: (0, 9),
    c.ApiKey.HEARTBEAT: (0, 4),
    c.ApiKey.LEAVE_GROUP: (0, 5),
    c.ApiKey.SYNC_GROUP: (0, 5),
    c.ApiKey.DESCRIBE_GROUPS: (0, 6),
    c.ApiKey.LIST_GROUPS: (0, 5),
}
"""The versions these handlers serve (and ApiVersions advertises)."""
