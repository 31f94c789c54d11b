"""The broker's own refusals, and the one import point for every refusal a handler sees.

Owns: the broker-level exceptions (``BadRequest``, ``UnknownCommand``, ``Unavailable``,
``Unauthenticated``, ``InternalError``). Re-exports, under their usual names, the root
``SkerryError`` (``data.refusal``) and the domain's classes (``groups.errors``,
``replication.errors``, ``data.errors``), so ``from broker.errors import NotLeader`` works
in the broker. None of them carries a wire code: each transport maps classes onto its own
codes in one table (``broker.v1.errors``: codes and the ``for_code`` registry;
``broker.iggy.errors``: statuses).

Must not import: Twisted, the store, sockets, any transport.
"""

from __future__ import annotations

from access.errors import InvalidAcl, NotAuthorized
from data.errors import KeyRequired, StorageError
from data.refusal import SkerryError
from groups.errors import (
    CoordinatorLoading,
    GenerationMismatch,
    GroupError,
    InvalidGroupRequest,
    PartitionNotOwned,
    StaleGeneration,
    TooManyGroups,
    TooManyMembers,
    UnknownGroup,
    UnknownMember,
)
from replication.errors import (
    InvalidReplicaRequest,
    NotLeader,
    ReplicationError,
    ReplicationTimeout,
)

__all__ = [
    "SkerryError",
    "BadRequest",
    "UnknownTopic",
    "UnknownPartition",
    "InvalidTopicName",
    "UnknownCommand",
    "Unavailable",
    "Unauthenticated",
    "InternalError",
    # re-exported from the domain
    "GroupError",
    "GenerationMismatch",
    "StaleGeneration",
    "UnknownMember",
    "UnknownGroup",
    "PartitionNotOwned",
    "InvalidGroupRequest",
    "TooManyMembers",
    "TooManyGroups",
    "CoordinatorLoading",
    "ReplicationError",
    "NotLeader",
    "InvalidReplicaRequest",
    "ReplicationTimeout",
    "StorageError",
    "KeyRequired",
    "NotAuthorized",
    "InvalidAcl",
]


class BadRequest(SkerryError):
    """A malformed envelope, invalid arguments, or a request that cannot apply."""

    description = "malformed envelope or invalid command arguments"


class UnknownTopic(BadRequest):
    """No such topic, and the request may not create it (``auto_create_topics``)."""


class UnknownPartition(BadRequest):
    """The topic has (or would have) fewer partitions than the request names."""


class InvalidTopicName(BadRequest):
    """A name no topic may have (``data.names``); nothing is created."""


class UnknownCommand(SkerryError):
    """The command name is not one the transport knows."""

    description = "unsupported command"


class Unavailable(SkerryError):
    """The broker refuses for now (connection limit, overload, shutting down)."""

    description = "broker unavailable"


class Unauthenticated(SkerryError):
    """Authentication is required or failed."""

    description = "authentication required"


class InternalError(SkerryError):
    """A bug in the broker, answered as such; the connection stays usable."""

    description = "internal error"
