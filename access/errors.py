"""The access package's own exceptions.

Owns: ``NotAuthorized`` (an authenticated principal asked for an operation its ACLs do not
allow), ``InvalidAcl`` (a rule that cannot be stored) and ``InvalidPermissions`` (an Iggy
permissions blob that cannot be read). Plain classes with no wire code:
each transport maps them onto its own (V1 ``NOT_AUTHORIZED``, Iggy ``Unauthorized``).

Must not import: Twisted, anything of ``broker``. Only ``data.refusal.SkerryError``.
"""

from __future__ import annotations

from data.refusal import SkerryError

__all__ = ["NotAuthorized", "InvalidAcl", "InvalidPermissions"]


class NotAuthorized(SkerryError):
    """The principal may not perform the operation on the resource."""

    description = "not authorized"

    def __init__(self, principal: str = "User:ANONYMOUS", operation: str = "All",
                 resource: str = "Cluster:kafka-cluster", message: str | None = None) -> None:
        self.principal = principal
        self.operation = operation
        self.resource = resource
        self.resource_type = resource.partition(":")[0]
        """``Topic``, ``Group`` or ``Cluster``: which Kafka code answers (29, 30 or 31)."""
        super().__init__(message or f"{principal} may not {operation} {resource}")


class InvalidAcl(SkerryError):
    """An ACL binding or filter that is malformed (unknown operation, bad name...)."""

    description = "invalid ACL"


class InvalidPermissions(InvalidAcl):
    """An Iggy permissions blob (``access.iggy_permissions``) that ends early or has bytes
    left over. The Iggy codec answers it as ``InvalidFormat``."""

    description = "invalid permissions"
