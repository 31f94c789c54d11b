"""The one error hierarchy of Skerry.

Owns: every exception that can reach a client, with its wire ``code`` (exactly the codes of
``spec/v1-protocol.md`` plus the additive ones), a ``retriable`` flag and a description,
and the ``for_code`` registry that maps a wire code back to its class.

Must not import: Twisted, the store, sockets. Domain packages (``groups``, ``replication``,
``data``) raise these; transports translate them into their own error shape.

Finer classes (stale generation, unknown member, partition not owned) map onto the spec's
codes and keep their own message, so the log tells them apart while the wire stays exact.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "SkerryError",
    "BadRequest",
    "UnknownCommand",
    "ReplicationTimeout",
    "NotLeader",
    "GenerationMismatch",
    "StaleGeneration",
    "UnknownMember",
    "UnknownGroup",
    "PartitionNotOwned",
    "Unavailable",
    "Unauthenticated",
    "StorageError",
    "InternalError",
    "for_code",
]

_REGISTRY: dict[str, type[SkerryError]] = {}


class SkerryError(Exception):
    """A failure a client is told about. ``str(error)`` is the wire message."""

    code: ClassVar[str] = "INTERNAL"
    retriable: ClassVar[bool] = False
    description: ClassVar[str] = "internal error"

    def __init__(self, message: str | None = None) -> None:
        text = message if message else self.description
        # Wire messages are never empty and never contain '|' or a newline (spec: Framing).
        text = text.replace("|", "/").replace("\r", " ").replace("\n", " ").strip() or self.description
        super().__init__(text)
        self.message = text

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        # The first class declaring a code owns it in the registry; subclasses that only
        # refine the message (StaleGeneration -> GENERATION_MISMATCH) do not replace it.
        if "code" in cls.__dict__ and cls.code not in _REGISTRY:
            _REGISTRY[cls.code] = cls


class BadRequest(SkerryError):
    code = "BAD_REQUEST"
    description = "malformed envelope or invalid command arguments"


class UnknownCommand(SkerryError):
    code = "UNKNOWN_COMMAND"
    description = "unsupported command"


class ReplicationTimeout(SkerryError):
    code = "REPLICATION_TIMEOUT"
    retriable = True
    description = "acks=all could not be satisfied before the ack timeout"


class NotLeader(SkerryError):
    code = "NOT_LEADER"
    retriable = True
    description = "partition is in follower role on this broker"


class GenerationMismatch(SkerryError):
    code = "GENERATION_MISMATCH"
    retriable = True
    description = "stale generation, unknown member or group, or partition not owned"


class StaleGeneration(GenerationMismatch):
    description = "stale generation"


class UnknownMember(GenerationMismatch):
    description = "unknown member"


class UnknownGroup(GenerationMismatch):
    description = "unknown group"


class PartitionNotOwned(GenerationMismatch):
    description = "partition not assigned to this member"


class Unavailable(SkerryError):
    code = "UNAVAILABLE"
    retriable = True
    description = "broker unavailable"


class Unauthenticated(SkerryError):
    code = "UNAUTHENTICATED"
    description = "authentication required"


class StorageError(SkerryError):
    code = "STORAGE_ERROR"
    description = "storage failure; nothing was acknowledged"


class InternalError(SkerryError):
    code = "INTERNAL"
    description = "internal error"


def for_code(code: str) -> type[SkerryError]:
    """The exception class for a wire code (``InternalError`` for an unknown one)."""
    return _REGISTRY.get(code, InternalError)
