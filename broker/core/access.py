"""The access gate: the core's one check of who may do what, for every transport.

Owns: ``AccessGate.check(requester, operation, resource_type, name)`` (raises
``access.NotAuthorized``), ``allowed`` (the same decision without raising, to leave
unauthorized names out of lists), the log line of a refusal (once per connection, per
principal, operation and resource) and the refusal counter fed to ``/metrics``.

A requester is the connection (or any request context) a request came from: its
``principal`` attribute is the authenticated user name (``None``: not logged in, or a
transport without users such as TANK: ``User:ANONYMOUS``). The decision itself is
``access.Authorizer``'s; the rules it holds are kept current by
``broker.services.acls.AclService`` (a file on one broker, etcd in a cluster).

Must not import: transports, sockets, files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from access import Authorizer, NotAuthorized, Operation, ResourceType, principal_of

__all__ = ["AccessGate", "Refused"]

log = logging.getLogger("skerry.access")

Refused = Callable[[str, str], None]
"""``refused(operation, resource_type)``: the metrics counter's hook."""


class AccessGate:
    """Checks requests against the authorizer; logs and counts refusals."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer
        self.on_refused: Refused | None = None
        self.refusals = 0
        """Every refusal since start (the metrics counter has them by operation)."""

    @property
    def enabled(self) -> bool:
        return self.authorizer.enabled

    @staticmethod
    def principal(requester: Any) -> str:
        """``User:<name>`` of the requester, ``User:ANONYMOUS`` without one."""
        return principal_of(getattr(requester, "principal", None))

    def allowed(self, requester: Any, operation: Operation, resource_type: ResourceType,
                name: str) -> bool:
        authorizer = self.authorizer
        if not authorizer.enabled:
            return True
        return authorizer.authorize(principal_of(getattr(requester, "principal", None)),
                                    operation, resource_type, name)

    def check(self, requester: Any, operation: Operation, resource_type: ResourceType,
              name: str) -> None:
        """Return when allowed; else log (once per connection and rule), count and raise
        ``NotAuthorized``."""
        authorizer = self.authorizer
        if not authorizer.enabled:
            return
        principal = principal_of(getattr(requester, "principal", None))
        if authorizer.authorize(principal, operation, resource_type, name):
            return
        raise self.refuse(requester, principal, operation, resource_type, name)

    def check_any(self, requester: Any,
                  alternatives: tuple[tuple[Operation, ResourceType, str], ...]) -> None:
        """Allowed when any one of ``alternatives`` is (Kafka's CreateTopics: Create on the
        cluster or on the topic); refused naming the last one."""
        if not self.authorizer.enabled:
            return
        for operation, resource_type, name in alternatives:
            if self.allowed(requester, operation, resource_type, name):
                return
        operation, resource_type, name = alternatives[-1]
        raise self.refuse(requester, self.principal(requester), operation, resource_type,
                          name)

    def refuse(self, requester: Any, principal: str, operation: Operation,
               resource_type: ResourceType, name: str) -> NotAuthorized:
        resource = f"{resource_type.value}:{name}"
        self.refusals += 1
        if self.on_refused is not None:
            self.on_refused(operation.value, resource_type.value)
        seen = getattr(requester, "access_refused", None)
        if seen is None:
            seen = set()
            try:
                requester.access_refused = seen
            except AttributeError:  # a context that takes no attributes: log every time
                pass
        key = (principal, operation, resource)
        if key not in seen:
            seen.add(key)
            log.warning("not authorized: %s may not %s %s (from %s)", principal,
                        operation.value, resource, getattr(requester, "peer", "?"))
        return NotAuthorized(principal, operation.value, resource)
