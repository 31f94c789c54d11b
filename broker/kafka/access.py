"""What each Kafka API needs, in the ACL model every transport shares (docs/security.md),
and its check through the core's gate in the shape Kafka answers it.

Owns: ``NEEDS`` (API key -> what it needs, Kafka's own choices; docs/security.md's Kafka
rows are made from it), ``screen(ctx, requester, request)`` (before the handler: the
request with the topics, groups or resources the requester may not touch taken out, and
their error entries; or the whole answer when the request is refused as a whole) and
``finish`` (after the handler: those error entries added to the handler's response in its
own layout, Metadata's and ListGroups' unauthorized entries left out).

Codes as Kafka answers: TOPIC_AUTHORIZATION_FAILED (29) per topic, GROUP_AUTHORIZATION_FAILED
(30) for a group, CLUSTER_AUTHORIZATION_FAILED (31) for the cluster. Refusals go through
``AccessGate.refuse``: logged once per connection and counted in ``/metrics``.

Without authentication (``AccessGate.enabled`` false) nothing is screened.

Must not import: Twisted's reactor, sockets, files, the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

from access import Operation, ResourceType
from access.model import CLUSTER_NAME
from broker.kafka import codec as c
from broker.kafka.errors import ErrorCode

__all__ = ["NEEDS", "screen", "finish", "Screened"]

Op = Operation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

NEEDS: dict[str, str] = {
    "PRODUCE": "Write Topic (per topic)",
    "FETCH": "Read Topic (per topic; a follower's fetch: ClusterAction Cluster)",
    "LIST_OFFSETS": "Describe Topic (per topic)",
    "METADATA": "Describe Topic (others left out of the answer); auto-create: Create "
                "Cluster or Create Topic",
    "OFFSET_COMMIT": "Read Group, Read Topic (per topic)",
    "OFFSET_FETCH": "Describe Group, Describe Topic (others answered 29, or left out of "
                    "an all-topics answer)",
    "FIND_COORDINATOR": "Describe Group (a transaction coordinator: nothing)",
    "JOIN_GROUP": "Read Group",
    "HEARTBEAT": "Read Group",
    "LEAVE_GROUP": "Read Group",
    "SYNC_GROUP": "Read Group",
    "DESCRIBE_GROUPS": "Describe Group (per group)",
    "LIST_GROUPS": "Describe Cluster (else only the groups the user may Describe)",
    "SASL_HANDSHAKE": "nothing (authentication)",
    "SASL_AUTHENTICATE": "nothing (authentication)",
    "API_VERSIONS": "nothing",
    "CREATE_TOPICS": "Create Cluster or Create Topic (per topic)",
    "DELETE_TOPICS": "Delete Topic (per topic)",
    "CREATE_PARTITIONS": "Alter Topic (per topic)",
    "DESCRIBE_CONFIGS": "DescribeConfigs Topic (a broker's: DescribeConfigs Cluster)",
    "INCREMENTAL_ALTER_CONFIGS": "AlterConfigs Topic (a broker's: AlterConfigs Cluster)",
    "DELETE_GROUPS": "Delete Group (per group)",
    "OFFSET_DELETE": "Delete Group, Read Topic (per topic)",
    "DELETE_RECORDS": "Delete Topic (per topic)",
    "DESCRIBE_CLUSTER": "Describe Cluster",
    "DESCRIBE_LOG_DIRS": "Describe Cluster",
    "INIT_PRODUCER_ID": "IdempotentWrite Cluster, or Write on any topic",
    "ADD_PARTITIONS_TO_TXN": "Write Topic (per topic; TransactionalId is not a resource "
                             "here)",
    "ADD_OFFSETS_TO_TXN": "Read Group",
    "END_TXN": "IdempotentWrite Cluster, or Write on any topic",
    "TXN_OFFSET_COMMIT": "Read Group, Read Topic (per topic)",
    "CREATE_ACLS": "Alter Cluster",
    "DESCRIBE_ACLS": "Describe Cluster",
    "DELETE_ACLS": "Alter Cluster",
    "CONSUMER_GROUP_HEARTBEAT": "Read Group, Describe Topic (each subscribed topic name; "
                                "else 29 for the whole request)",
    "CONSUMER_GROUP_DESCRIBE": "Describe Group (per group)",
}
"""Kafka's authorizer's choices (Kafka 3.x: Write on a topic implies IdempotentWrite for
a producer id). Every API the Kafka listener serves has a row (tests/access)."""

Screened = tuple[Any, Any]
"""``(request to run, error response to merge into its answer or None)``."""


def _name(entry: Any) -> str:
    name = getattr(entry, "name", None)
    if name is None:
        name = getattr(entry, "topic", "")
    return name or ""


class _Screen:
    def __init__(self, ctx: Any, requester: Any) -> None:
        self.gate = ctx.core.access
        self.ctx = ctx
        self.requester = requester

    def allowed(self, op: Operation, rtype: ResourceType, name: str) -> bool:
        return self.gate.allowed(self.requester, op, rtype, name)

    def check(self, op: Operation, rtype: ResourceType, name: str) -> bool:
        """Allowed, or logged and counted as a refusal and False."""
        if self.allowed(op, rtype, name):
            return True
        self.gate.refuse(self.requester, self.gate.principal(self.requester), op, rtype, name)
        return False

    def any_write(self) -> bool:
        if self.allowed(Op.IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME):
            return True
        if any(self.allowed(Op.WRITE, TOPIC, t) for t in self.ctx.core.topic_names()):
            return True
        return self.check(Op.IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME)

    def split(self, request: Any, field: str, keep: Callable[[Any], bool], code: int,
              error_response: Callable[[Any, int], Any]) -> Screened:
        entries = getattr(request, field) or ()
        allowed = tuple(e for e in entries if keep(e))
        if len(allowed) == len(entries):
            return request, None
        denied = tuple(e for e in entries if e not in allowed)
        refused = error_response(replace(request, **{field: denied}), code)
        if not allowed:
            return None, refused
        return replace(request, **{field: allowed}), refused


def screen(ctx: Any, requester: Any, request: Any,
           error_response: Callable[[Any, int], Any]) -> Screened:
    """``(request, refused)``: run the handler on ``request`` (None: do not run it) and
    add ``refused`` (an error response in the request's layout, or None) to its answer."""
    if not ctx.core.access.enabled:
        return request, None
    s = _Screen(ctx, requester)

    def whole(ok: bool, code: int) -> Screened:
        return (request, None) if ok else (None, error_response(request, code))

    def topics(op: Operation, field: str = "topics") -> Screened:
        return s.split(request, field, lambda t: s.check(op, TOPIC, _name(t)), TOPIC_DENIED,
                       error_response)

    def group_then_topics(gop: Operation, top: Operation, group: str) -> Screened:
        if not s.check(gop, GROUP, group):
            return None, error_response(request, GROUP_DENIED)
        return topics(top)

    if isinstance(request, (c.ApiVersionsRequest, c.SaslHandshakeRequest,
                            c.SaslAuthenticateRequest, c.MetadataRequest,
                            c.ListGroupsRequest)):
        return request, None  # nothing, or filtered by ``finish``
    if isinstance(request, c.ProduceRequest):
        return topics(Op.WRITE)
    if isinstance(request, c.FetchRequest):
        if request.replica_id >= 0:
            return whole(s.check(Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME), CLUSTER_DENIED)
        return topics(Op.READ)
    if isinstance(request, c.ListOffsetsRequest):
        return topics(Op.DESCRIBE)
    if isinstance(request, c.OffsetCommitRequest):
        return group_then_topics(Op.READ, Op.READ, request.group_id)
    if isinstance(request, c.TxnOffsetCommitRequest):
        return group_then_topics(Op.READ, Op.READ, request.group_id)
    if isinstance(request, c.OffsetDeleteRequest):
        return group_then_topics(Op.DELETE, Op.READ, request.group_id)
    if isinstance(request, c.OffsetFetchRequest):
        groups = [g.group_id for g in request.groups] or [request.group_id]
        return whole(all([s.check(Op.DESCRIBE, GROUP, g) for g in groups]), GROUP_DENIED)
    if isinstance(request, c.FindCoordinatorRequest):
        if request.key_type != 0:
            return request, None
        keys = request.coordinator_keys or (request.key,)
        return whole(all([s.check(Op.DESCRIBE, GROUP, k) for k in keys]), GROUP_DENIED)
    if isinstance(request, (c.JoinGroupRequest, c.SyncGroupRequest, c.HeartbeatRequest,
                            c.LeaveGroupRequest)):
        return whole(s.check(Op.READ, GROUP, request.group_id), GROUP_DENIED)
    if isinstance(request, c.ConsumerGroupHeartbeatRequest):
        if not s.check(Op.READ, GROUP, request.group_id):
            return None, error_response(request, GROUP_DENIED)
        names = request.subscribed_topic_names or ()
        return whole(all([s.check(Op.DESCRIBE, TOPIC, t) for t in names]), TOPIC_DENIED)
    if isinstance(request, c.ConsumerGroupDescribeRequest):
        return s.split(request, "group_ids", lambda g: s.check(Op.DESCRIBE, GROUP, g),
                       GROUP_DENIED, error_response)
    if isinstance(request, c.AddOffsetsToTxnRequest):
        return whole(s.check(Op.READ, GROUP, request.group_id), GROUP_DENIED)
    if isinstance(request, c.DescribeGroupsRequest):
        return s.split(request, "groups", lambda g: s.check(Op.DESCRIBE, GROUP, g),
                       GROUP_DENIED, error_response)
    if isinstance(request, c.DeleteGroupsRequest):
        return s.split(request, "groups_names", lambda g: s.check(Op.DELETE, GROUP, g),
                       GROUP_DENIED, error_response)
    if isinstance(request, c.CreateTopicsRequest):
        def may_create(t: Any) -> bool:
            return s.allowed(Op.CREATE, CLUSTER, CLUSTER_NAME) or s.check(
                Op.CREATE, TOPIC, t.name)
        return s.split(request, "topics", may_create, TOPIC_DENIED, error_response)
    if isinstance(request, c.DeleteTopicsRequest):
        if request.topics:
            return topics(Op.DELETE)
        return s.split(request, "topic_names", lambda n: s.check(Op.DELETE, TOPIC, n or ""),
                       TOPIC_DENIED, error_response)
    if isinstance(request, c.CreatePartitionsRequest):
        return topics(Op.ALTER)
    if isinstance(request, c.DeleteRecordsRequest):
        return topics(Op.DELETE)
    if isinstance(request, c.AddPartitionsToTxnRequest):
        return topics(Op.WRITE)
    if isinstance(request, (c.DescribeConfigsRequest, c.IncrementalAlterConfigsRequest)):
        op = Op.DESCRIBE_CONFIGS if isinstance(request, c.DescribeConfigsRequest) \
            else Op.ALTER_CONFIGS
        return _configs(s, request, op, error_response)
    if isinstance(request, (c.CreateAclsRequest, c.DeleteAclsRequest)):
        return whole(s.check(Op.ALTER, CLUSTER, CLUSTER_NAME), CLUSTER_DENIED)
    if isinstance(request, (c.DescribeClusterRequest, c.DescribeLogDirsRequest,
                            c.DescribeAclsRequest)):
        return whole(s.check(Op.DESCRIBE, CLUSTER, CLUSTER_NAME), CLUSTER_DENIED)
    if isinstance(request, (c.InitProducerIdRequest, c.EndTxnRequest)):
        return whole(s.any_write(), CLUSTER_DENIED)
    # an API without a row: refused, so a new API cannot slip through unchecked
    return whole(s.check(Op.ALTER, CLUSTER, CLUSTER_NAME), CLUSTER_DENIED)


_TOPIC_RESOURCE = 2


def _configs(s: _Screen, request: Any, op: Operation,
             error_response: Callable[[Any, int], Any]) -> Screened:
    """Per resource: a topic's needs ``op`` on it (29), a broker's on the cluster (31)."""
    def ok(r: Any) -> bool:
        if r.resource_type == _TOPIC_RESOURCE:
            return s.check(op, TOPIC, r.resource_name)
        return s.check(op, CLUSTER, CLUSTER_NAME)
    resources = request.resources
    allowed = tuple(r for r in resources if ok(r))
    if len(allowed) == len(resources):
        return request, None
    denied_topics = tuple(r for r in resources if r not in allowed
                          and r.resource_type == _TOPIC_RESOURCE)
    denied_other = tuple(r for r in resources if r not in allowed
                         and r.resource_type != _TOPIC_RESOURCE)
    refused = None
    for denied, code in ((denied_topics, TOPIC_DENIED), (denied_other, CLUSTER_DENIED)):
        if denied:
            part = error_response(replace(request, resources=denied), code)
            refused = part if refused is None else merge(refused, part)
    if not allowed:
        return None, refused
    return replace(request, resources=allowed), refused


def merge(response: Any, refused: Any) -> Any:
    """``response`` with the entries of ``refused`` (same layout) appended to each of its
    lists."""
    if response is None or refused is None:
        return response if refused is None else refused
    changes = {}
    for f in fields(refused):
        extra = getattr(refused, f.name)
        if isinstance(extra, tuple) and extra:
            changes[f.name] = tuple(getattr(response, f.name) or ()) + extra
    return replace(response, **changes)


def finish(ctx: Any, requester: Any, request: Any, response: Any) -> Any:
    """Metadata: topics the requester may not Describe left out (all topics) or answered
    29 (named); ListGroups: without Describe Cluster only the groups it may Describe;
    OffsetFetch: topics it may not Describe answered 29 (named) or left out."""
    if response is None or not ctx.core.access.enabled:
        return response
    s = _Screen(ctx, requester)
    if isinstance(request, c.MetadataRequest):
        return _metadata(s, request, response)
    if isinstance(request, c.ListGroupsRequest):
        if s.allowed(Op.DESCRIBE, CLUSTER, CLUSTER_NAME):
            return response
        return replace(response, groups=tuple(
            g for g in response.groups if s.allowed(Op.DESCRIBE, GROUP, g.group_id)))
    if isinstance(request, c.OffsetFetchRequest) and response.topics:
        named = request.topics is not None
        out = []
        for t in response.topics:
            if s.allowed(Op.DESCRIBE, TOPIC, t.name):
                out.append(t)
            elif named:
                s.check(Op.DESCRIBE, TOPIC, t.name)
                out.append(replace(t, partitions=tuple(
                    replace(p, committed_offset=-1, error_code=TOPIC_DENIED)
                    for p in t.partitions)))
        return replace(response, topics=tuple(out))
    return response


def _metadata(s: _Screen, request: Any, response: Any) -> Any:
    out = []
    for t in response.topics:
        if t.name is None or s.allowed(Op.DESCRIBE, TOPIC, t.name):
            out.append(t)
        elif not request.all_topics:
            s.check(Op.DESCRIBE, TOPIC, t.name)
            out.append(c.MetadataTopic(TOPIC_DENIED, t.name, (), topic_id=t.topic_id))
    return replace(response, topics=tuple(out))


def may_auto_create(ctx: Any, requester: Any, topic: str) -> bool:
    """Metadata's auto-create: Create on the cluster or on the topic (Kafka's choice)."""
    gate = ctx.core.access
    if not gate.enabled:
        return True
    s = _Screen(ctx, requester)
    return s.allowed(Op.CREATE, CLUSTER, CLUSTER_NAME) or s.check(Op.CREATE, TOPIC, topic)

