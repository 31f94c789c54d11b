"""Who may do what: the authorization model every transport shares (docs/security.md).

Owns: principals, resources and resource patterns, operations named as Kafka names them,
ACL bindings, the authorizer (``access.authorizer.Authorizer``, one fast ``authorize`` per
request), the JSON form the rules are stored in, and ``NotAuthorized``.

Must not import: ``broker``, Twisted, sockets, files. Only ``data`` (the refusal root).
"""

from access.authorizer import Authorizer
from access.errors import InvalidAcl, NotAuthorized
from access.model import (
    ANONYMOUS,
    WILDCARD,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    principal_of,
)

__all__ = [
    "ANONYMOUS",
    "WILDCARD",
    "AclBinding",
    "Authorizer",
    "InvalidAcl",
    "NotAuthorized",
    "Operation",
    "PatternType",
    "Permission",
    "ResourceType",
    "principal_of",
]
