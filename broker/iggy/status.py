"""Iggy's numeric status codes: the one table of every non-zero status the Iggy transport
sends, and the translation of Skerry's own errors into them.

Owns: ``Status`` (the codes, numbered exactly as Iggy's ``IggyError`` discriminants, which
never change meaning: a retired code is a gap, never reused), ``IggyError`` (a refusal
carrying one status; the transport answers it as a status with an empty payload), and
``status_for`` (``broker.errors`` -> status).

A status travels alone: ``u32 status, u32 length = 0`` and no payload (the seed: "in case
of errors, the length will be always equal to 0"). Messages stay in the broker's log.

Must not import: Twisted, the store, sockets, anything else of the Iggy package.
"""

from __future__ import annotations

from broker.errors import (
    BadRequest,
    GenerationMismatch,
    NotLeader,
    PartitionNotOwned,
    ReplicationTimeout,
    SkerryError,
    StorageError,
    Unauthenticated,
    Unavailable,
    UnknownCommand,
    UnknownGroup,
    UnknownMember,
)
from broker.iggy.codec.status import IggyError, Status

__all__ = ["Status", "IggyError", "status_for"]


# Most specific class first: GenerationMismatch's subclasses before the class itself.
_BY_CLASS: tuple[tuple[type[SkerryError], Status], ...] = (
    (Unauthenticated, Status.UNAUTHENTICATED),
    (UnknownMember, Status.CONSUMER_GROUP_MEMBER_NOT_FOUND),
    (PartitionNotOwned, Status.CONSUMER_GROUP_PARTITION_NOT_OWNED),
    (UnknownGroup, Status.CONSUMER_GROUP_NAME_NOT_FOUND),
    (GenerationMismatch, Status.CONSUMER_GROUP_MEMBER_NOT_FOUND),
    (ReplicationTimeout, Status.TASK_TIMEOUT),
    (StorageError, Status.IO_ERROR),
    (BadRequest, Status.INVALID_COMMAND),
    (UnknownCommand, Status.INVALID_COMMAND),
    (NotLeader, Status.ERROR),
    (Unavailable, Status.ERROR),
)


def status_for(error: BaseException) -> Status:
    """The status that answers ``error``: its own for an ``IggyError``, the table's for a
    Skerry error, ``ERROR`` (1) for anything else."""
    if isinstance(error, IggyError):
        return error.status
    for cls, status in _BY_CLASS:
        if isinstance(error, cls):
            return status
    return Status.ERROR
