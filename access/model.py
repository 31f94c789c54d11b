"""The nouns of authorization, named as Kafka names them.

Owns: ``ResourceType`` (Topic, Group, Cluster), ``PatternType`` (Literal, Prefixed),
``Operation`` (Read, Write, Create, Delete, Alter, Describe, ClusterAction,
DescribeConfigs, AlterConfigs, IdempotentWrite, All), ``Permission`` (Allow, Deny), the
operations each one implies (``IMPLIED_BY``: Read, Write, Delete and Alter imply Describe;
AlterConfigs implies DescribeConfigs), which operations apply to which resource type
(``OPERATIONS_BY_RESOURCE``), principals (``User:<name>``, ``User:*``) and
``AclBinding`` (principal x host x operation x permission x resource pattern).

Must not import: ``broker``, Twisted, files.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from access.errors import InvalidAcl
from data.names import is_valid_name

__all__ = [
    "ResourceType",
    "PatternType",
    "Operation",
    "Permission",
    "AclBinding",
    "IMPLIED_BY",
    "OPERATIONS_BY_RESOURCE",
    "CLUSTER_NAME",
    "WILDCARD",
    "ANONYMOUS",
    "principal_of",
    "parse_enum",
]

CLUSTER_NAME = "kafka-cluster"
"""The one cluster resource's name, as Kafka spells it."""
WILDCARD = "*"
"""A literal resource name matching every resource of its type, and ``User:*``'s name."""
ANONYMOUS = "User:ANONYMOUS"
"""The principal of a connection that carries no user (TANK, an auth-less listener)."""


class ResourceType(enum.Enum):
    __hash__ = object.__hash__  # members are singletons; C-level hash for the cache keys

    TOPIC = "Topic"
    GROUP = "Group"
    CLUSTER = "Cluster"


class PatternType(enum.Enum):
    __hash__ = object.__hash__  # members are singletons; C-level hash for the cache keys

    LITERAL = "Literal"
    """The name itself, or ``*``: every resource of the type."""
    PREFIXED = "Prefixed"
    """Every resource whose name starts with the pattern's name."""


class Operation(enum.Enum):
    __hash__ = object.__hash__  # members are singletons; C-level hash for the cache keys

    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DELETE = "Delete"
    ALTER = "Alter"
    DESCRIBE = "Describe"
    CLUSTER_ACTION = "ClusterAction"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    ALTER_CONFIGS = "AlterConfigs"
    IDEMPOTENT_WRITE = "IdempotentWrite"
    ALL = "All"


class Permission(enum.Enum):
    __hash__ = object.__hash__  # members are singletons; C-level hash for the cache keys

    ALLOW = "Allow"
    DENY = "Deny"


IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset((Operation.DESCRIBE, Operation.READ, Operation.WRITE,
                                   Operation.DELETE, Operation.ALTER)),
    Operation.DESCRIBE_CONFIGS: frozenset((Operation.DESCRIBE_CONFIGS,
                                           Operation.ALTER_CONFIGS)),
}
"""An ALLOW of any operation in the set also allows the key (Kafka's AclAuthorizer: "Read,
Write, Delete and Alter imply Describe; AlterConfigs implies DescribeConfigs"). A DENY
never implies: denying Read does not deny Describe."""

_O = Operation
OPERATIONS_BY_RESOURCE: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset((_O.READ, _O.WRITE, _O.CREATE, _O.DELETE, _O.ALTER,
                                   _O.DESCRIBE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.ALL)),
    ResourceType.GROUP: frozenset((_O.READ, _O.DESCRIBE, _O.DELETE, _O.ALL)),
    ResourceType.CLUSTER: frozenset((_O.CLUSTER_ACTION, _O.CREATE, _O.ALTER, _O.DESCRIBE,
                                     _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                                     _O.IDEMPOTENT_WRITE, _O.ALL)),
}
"""The operations an ACL may name for each resource type (Kafka's table in its
authorization docs, less the types Skerry has no use for)."""


def principal_of(user: str | None) -> str:
    """``User:<name>`` for an authenticated user; ``User:ANONYMOUS`` for none."""
    return ANONYMOUS if user is None else f"User:{user}"


def parse_enum(kind: type[Any], text: str, what: str) -> Any:
    """The member of ``kind`` whose value is ``text`` (case-insensitive, ``_`` and ``-``
    ignored, so ``cluster_action``, ``ClusterAction`` and ``CLUSTER-ACTION`` all match)."""
    folded = text.replace("_", "").replace("-", "").lower()
    for member in kind:
        if member.value.lower() == folded:
            return member
    names = ", ".join(m.value for m in kind)
    raise InvalidAcl(f"unknown {what} {text!r}; expected one of {names}")


@dataclass(frozen=True)
class AclBinding:
    """One rule: ``principal`` may (ALLOW) or may not (DENY) do ``operation`` on the
    resources ``resource_type``/``pattern_type``/``name`` match, from ``host``."""

    principal: str
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    operation: Operation
    permission: Permission
    host: str = WILDCARD

    def __post_init__(self) -> None:
        kind, colon, user = self.principal.partition(":")
        if kind != "User" or not colon or not (user == WILDCARD or is_valid_name(user)):
            raise InvalidAcl(f"principal {self.principal!r}: expected User:<name> or User:*")
        if self.operation not in OPERATIONS_BY_RESOURCE[self.resource_type]:
            raise InvalidAcl(f"operation {self.operation.value} does not apply to a "
                             f"{self.resource_type.value}")
        if self.resource_type is ResourceType.CLUSTER:
            if self.name != CLUSTER_NAME or self.pattern_type is not PatternType.LITERAL:
                raise InvalidAcl(f"the cluster resource is Literal {CLUSTER_NAME}")
        elif self.name == WILDCARD:
            if self.pattern_type is not PatternType.LITERAL:
                raise InvalidAcl("'*' is a Literal pattern (it matches every name)")
        elif not is_valid_name(self.name):
            raise InvalidAcl(f"resource name {self.name!r} is not a valid name or prefix")
        if self.host != WILDCARD:
            raise InvalidAcl("host: only '*' is supported (rules apply from every host)")

    def __lt__(self, other: AclBinding) -> bool:
        """Sorted by principal, resource type, name, pattern, operation, permission."""
        return self._order() < other._order()

    def _order(self) -> tuple[str, ...]:
        return (self.principal, self.resource_type.value, self.name, self.pattern_type.value,
                self.operation.value, self.permission.value, self.host)

    @property
    def resource(self) -> str:
        """``Topic:orders``, ``Topic:team-a.*`` (prefixed) — how refusals and lists name it."""
        star = "*" if self.pattern_type is PatternType.PREFIXED else ""
        return f"{self.resource_type.value}:{self.name}{star}"

    def to_json(self) -> dict[str, str]:
        return {"principal": self.principal, "resource_type": self.resource_type.value,
                "name": self.name, "pattern_type": self.pattern_type.value,
                "operation": self.operation.value, "permission": self.permission.value,
                "host": self.host}

    @classmethod
    def from_json(cls, raw: Any) -> AclBinding:
        if not isinstance(raw, dict):
            raise InvalidAcl(f"expected an object, got {raw!r}")
        try:
            return cls(str(raw["principal"]),
                       parse_enum(ResourceType, str(raw["resource_type"]), "resource type"),
                       str(raw["name"]),
                       parse_enum(PatternType, str(raw.get("pattern_type", "Literal")),
                                  "pattern type"),
                       parse_enum(Operation, str(raw["operation"]), "operation"),
                       parse_enum(Permission, str(raw.get("permission", "Allow")),
                                  "permission"),
                       str(raw.get("host", WILDCARD)))
        except KeyError as exc:
            raise InvalidAcl(f"missing field {exc.args[0]}") from None

    def key(self) -> str:
        """A stable one-line identity (an etcd key's last part, a file entry)."""
        return "|".join((self.principal, self.resource_type.value, self.pattern_type.value,
                         self.name, self.operation.value, self.permission.value, self.host))
