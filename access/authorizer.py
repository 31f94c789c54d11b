"""The authorizer: ``authorize(principal, operation, resource_type, name) -> bool``.

Owns: the rules of Kafka's AclAuthorizer, on an index that answers per request:

1. Authentication off (``enabled=False``): everything is allowed (loopback development).
2. A super user (``auth.super_users``, and the brokers' own ``cluster.peer_users``) may do
   everything.
3. The ACLs that match the resource are the Literal ones of its name and of ``*`` and the
   Prefixed ones whose name starts the resource's name; those of the principal and of
   ``User:*`` count.
4. A matching DENY of the operation (or of All) refuses: deny wins.
5. A matching ALLOW of the operation, of All or of an operation that implies it
   (``model.IMPLIED_BY``) allows.
6. No ACL at all matches the resource: ``allow_everyone_if_no_acl_found`` decides (false
   by default: only super users may touch it); else refused.

The decisions are cached per (principal, operation, resource) until the rules change
(``replace`` / ``add`` / ``remove`` bump ``version``), so the steady state is one dict look-up.

Must not import: ``broker``, Twisted, files.
"""

from __future__ import annotations

from collections.abc import Iterable

from access.model import (
    IMPLIED_BY,
    WILDCARD,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

__all__ = ["Authorizer", "AclFilter"]

_ALL_USERS = "User:*"
_CACHE_LIMIT = 65536


class AclFilter:
    """Which bindings a list or a remove touches: every field None matches anything."""

    def __init__(self, *, principal: str | None = None,
                 resource_type: ResourceType | None = None, name: str | None = None,
                 pattern_type: PatternType | None = None, operation: Operation | None = None,
                 permission: Permission | None = None) -> None:
        self.principal = principal
        self.resource_type = resource_type
        self.name = name
        self.pattern_type = pattern_type
        self.operation = operation
        self.permission = permission

    def matches(self, acl: AclBinding) -> bool:
        return ((self.principal is None or acl.principal == self.principal)
                and (self.resource_type is None or acl.resource_type is self.resource_type)
                and (self.name is None or acl.name == self.name)
                and (self.pattern_type is None or acl.pattern_type is self.pattern_type)
                and (self.operation is None or acl.operation is self.operation)
                and (self.permission is None or acl.permission is self.permission))


class Authorizer:
    """The rules in force and the decision for one request."""

    def __init__(self, *, enabled: bool, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False,
                 acls: Iterable[AclBinding] = ()) -> None:
        self.enabled = enabled
        self.super_users = frozenset(super_users)
        """Principals (``User:<name>``) that may do everything."""
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.version = 0
        """Bumped on every change of the rules; connections compare it to drop caches."""
        self._acls: set[AclBinding] = set()
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        self._cache: dict[tuple[str, Operation, ResourceType, str], bool] = {}
        self.replace(acls)

    # ------------------------------------------------------------ the rules

    @property
    def acls(self) -> list[AclBinding]:
        """Every binding, sorted (for lists and for storing)."""
        return sorted(self._acls)

    def replace(self, acls: Iterable[AclBinding]) -> None:
        """Put ``acls`` in force instead of the current rules (a reload, a watch event)."""
        self._acls = set(acls)
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        for acl in self._acls:
            key = (acl.resource_type, acl.name)
            if acl.pattern_type is PatternType.PREFIXED:
                prefixed.setdefault(key, []).append(acl)
                lengths.setdefault(acl.resource_type, set()).add(len(acl.name))
            else:
                literal.setdefault(key, []).append(acl)
        self._literal = literal
        self._prefixed = prefixed
        self._prefix_lengths = {kind: sorted(n) for kind, n in lengths.items()}
        self._cache = {}
        self.version += 1

    def add(self, acls: Iterable[AclBinding]) -> list[AclBinding]:
        """Add bindings; returns those that were not there yet."""
        new = [acl for acl in acls if acl not in self._acls]
        if new:
            self.replace([*self._acls, *new])
        return new

    def remove(self, flt: AclFilter) -> list[AclBinding]:
        """Remove every binding ``flt`` matches; returns them."""
        gone = sorted(acl for acl in self._acls if flt.matches(acl))
        if gone:
            self.replace(self._acls.difference(gone))
        return gone

    def matching(self, flt: AclFilter) -> list[AclBinding]:
        return [acl for acl in self.acls if flt.matches(acl)]

    # ------------------------------------------------------------ the decision

    def is_super(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize(self, principal: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        """May ``principal`` do ``operation`` on the resource ``resource_type``/``name``?"""
        if not self.enabled:
            return True
        key = (principal, operation, resource_type, name)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        decision = self._decide(principal, operation, resource_type, name)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = decision
        return decision

    def _matching_acls(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        found: list[AclBinding] = []
        literal = self._literal
        found.extend(literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found.extend(literal.get((resource_type, WILDCARD), ()))
        prefixed = self._prefixed
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            found.extend(prefixed.get((resource_type, name[:length]), ()))
        return found

    def _decide(self, principal: str, operation: Operation, resource_type: ResourceType,
                name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self._matching_acls(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        mine = [acl for acl in acls if acl.principal in (principal, _ALL_USERS)]
        for acl in mine:
            if acl.permission is Permission.DENY and acl.operation in (operation,
                                                                       Operation.ALL):
                return False
        allowed = IMPLIED_BY.get(operation, frozenset((operation,)))
        for acl in mine:
            if acl.permission is Permission.ALLOW and (acl.operation is Operation.ALL
                                                       or acl.operation in allowed):
                return True
        return False
