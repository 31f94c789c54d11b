"""Kafka's ACL APIs over the ACL store every transport shares (docs/security.md):
DescribeAcls, CreateAcls and DeleteAcls v0-v3, so Kafka's ``kafka-acls`` tool and
AdminClient's ``describe_acls``/``create_acls``/``delete_acls`` manage the same rules
as ``skerry acls`` (``broker.services.acls.AclService``: a file on one broker, etcd in
a cluster).

Owns: ``ACL_HANDLERS``, ``VERSIONS`` and the mapping of Kafka's wire codes (resource
type, pattern type, operation, permission) to the model's enums. What each needs (Alter
or Describe on the cluster) is checked before the handler (``broker.kafka.access``).
Without an ACL service (``ctx.acls`` None) they answer SECURITY_DISABLED (54).

Must not import: Twisted's reactor, sockets, files, the store.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, succeed

from access import AclBinding, InvalidAcl, Operation, PatternType, Permission, ResourceType
from access.authorizer import AclFilter
from broker.kafka import codec as c
from broker.kafka.handlers.context import Context

__all__ = ["ACL_HANDLERS", "VERSIONS"]

SECURITY_DISABLED = 54
INVALID_REQUEST = 42
ANY = 1

RESOURCE_TYPES = {2: ResourceType.TOPIC, 3: ResourceType.GROUP, 4: ResourceType.CLUSTER}
PATTERN_TYPES = {3: PatternType.LITERAL, 4: PatternType.PREFIXED}
OPERATIONS = {2: Operation.ALL, 3: Operation.READ, 4: Operation.WRITE, 5: Operation.CREATE,
              6: Operation.DELETE, 7: Operation.ALTER, 8: Operation.DESCRIBE,
              9: Operation.CLUSTER_ACTION, 10: Operation.DESCRIBE_CONFIGS,
              11: Operation.ALTER_CONFIGS, 12: Operation.IDEMPOTENT_WRITE}
PERMISSIONS = {2: Permission.DENY, 3: Permission.ALLOW}
"""Kafka's wire codes (``org.apache.kafka.common.acl``/``resource``) -> the model."""


def _code(table: dict[int, Any], value: Any) -> int:
    return next(k for k, v in table.items() if v is value)


class _Unmatched(Exception):
    """A filter naming a code with no counterpart here: it matches nothing."""


def _pick(table: dict[int, Any], code: int) -> Any:
    if code == ANY:
        return None
    if code not in table:
        raise _Unmatched(code)
    return table[code]


def _filter(f: Any) -> AclFilter:
    pattern = f.pattern_type_filter
    if pattern == 2:  # MATCH: every pattern that would match the name; approximated: any
        pattern = ANY
    return AclFilter(principal=f.principal_filter,
                     resource_type=_pick(RESOURCE_TYPES, f.resource_type_filter),
                     name=f.resource_name_filter,
                     pattern_type=_pick(PATTERN_TYPES, pattern),
                     operation=_pick(OPERATIONS, f.operation),
                     permission=_pick(PERMISSIONS, f.permission_type))


def describe_acls(ctx: Context, request: c.DescribeAclsRequest) -> c.DescribeAclsResponse:
    if ctx.acls is None:
        return c.DescribeAclsResponse(SECURITY_DISABLED, "no ACLs on this broker")
    try:
        found = ctx.acls.list(_filter(request))
    except _Unmatched:
        found = []
    by_resource: dict[tuple[int, str, int], list[c.AclDescription]] = {}
    for acl in found:
        key = (_code(RESOURCE_TYPES, acl.resource_type), acl.name,
               _code(PATTERN_TYPES, acl.pattern_type))
        by_resource.setdefault(key, []).append(c.AclDescription(
            acl.principal, acl.host, _code(OPERATIONS, acl.operation),
            _code(PERMISSIONS, acl.permission)))
    return c.DescribeAclsResponse(0, None, tuple(
        c.DescribedResource(rt, name, tuple(acls), pattern)
        for (rt, name, pattern), acls in by_resource.items()))


def create_acls(ctx: Context, request: c.CreateAclsRequest
                ) -> Deferred[c.CreateAclsResponse]:
    if ctx.acls is None:
        return succeed(c.CreateAclsResponse(tuple(
            c.AclCreationResult(SECURITY_DISABLED, "no ACLs on this broker")
            for _ in request.creations)))
    results: list[c.AclCreationResult] = []
    bindings: list[AclBinding] = []
    for x in request.creations:
        try:
            bindings.append(AclBinding(
                x.principal, RESOURCE_TYPES[x.resource_type], x.resource_name,
                PATTERN_TYPES[x.resource_pattern_type], OPERATIONS[x.operation],
                PERMISSIONS[x.permission_type], x.host))
            results.append(c.AclCreationResult(0))
        except (KeyError, InvalidAcl) as error:
            results.append(c.AclCreationResult(INVALID_REQUEST, str(error)))
    return ctx.acls.add(bindings).addCallback(
        lambda _added: c.CreateAclsResponse(tuple(results)))


def delete_acls(ctx: Context, request: c.DeleteAclsRequest
                ) -> Deferred[c.DeleteAclsResponse]:
    if ctx.acls is None:
        return succeed(c.DeleteAclsResponse(tuple(
            c.DeleteAclsFilterResult(SECURITY_DISABLED, "no ACLs on this broker")
            for _ in request.filters)))
    outcomes: list[Deferred[c.DeleteAclsFilterResult]] = []
    for f in request.filters:
        try:
            flt = _filter(f)
        except _Unmatched:
            outcomes.append(succeed(c.DeleteAclsFilterResult(0)))
            continue
        outcomes.append(ctx.acls.remove(flt).addCallback(lambda gone: c.DeleteAclsFilterResult(
            0, None, tuple(c.DeletedAcl(
                0, None, _code(RESOURCE_TYPES, a.resource_type), a.name, a.principal, a.host,
                _code(OPERATIONS, a.operation), _code(PERMISSIONS, a.permission),
                _code(PATTERN_TYPES, a.pattern_type)) for a in gone))))
    from twisted.internet.defer import gatherResults

    return gatherResults(outcomes).addCallback(
        lambda results: c.DeleteAclsResponse(tuple(results)))


ACL_HANDLERS: dict[type, Any] = {
    c.DescribeAclsRequest: describe_acls,
    c.CreateAclsRequest: create_acls,
    c.DeleteAclsRequest: delete_acls,
}

VERSIONS: dict[c.ApiKey, tuple[int, int]] = {
    c.ApiKey.DESCRIBE_ACLS: (1, 3),
    c.ApiKey.CREATE_ACLS: (1, 3),
    c.ApiKey.DELETE_ACLS: (1, 3),
}
"""v1+ (v0 has no pattern type: every rule literal)."""
