"""The Iggy transport's wire errors: which status answers which of Skerry's exceptions.

Owns: ``STATUS_BY_ERROR`` (the one table, one row per exception class: the class that
raised it, or the nearest base class with a row, decides the status), ``status_for``
(exception -> status) and ``REFUSALS`` (the exceptions a handler answers with a status
and no traceback: refusals, not bugs). The codes themselves, and ``IggyError`` (a refusal
the transport raises with its status already chosen), are ``broker.iggy.codec.status``';
they are re-exported here so the transport imports its errors from one place.

Anything else a handler raises is a bug: the dispatcher logs it with its traceback and
answers ``ERROR`` (1).

Must not import: Twisted, the store, sockets, the handlers, the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping

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

__all__ = ["Status", "IggyError", "STATUS_BY_ERROR", "REFUSALS", "status_for"]

STATUS_BY_ERROR: Mapping[type[BaseException], Status] = {
    # broker.errors: the core, consumer groups, replication, storage
    Unauthenticated: Status.UNAUTHENTICATED,
    UnknownMember: Status.CONSUMER_GROUP_MEMBER_NOT_FOUND,
    PartitionNotOwned: Status.CONSUMER_GROUP_PARTITION_NOT_OWNED,
    UnknownGroup: Status.CONSUMER_GROUP_NAME_NOT_FOUND,
    GenerationMismatch: Status.CONSUMER_GROUP_MEMBER_NOT_FOUND,  # and StaleGeneration
    ReplicationTimeout: Status.TASK_TIMEOUT,
    StorageError: Status.IO_ERROR,
    BadRequest: Status.INVALID_COMMAND,
    UnknownCommand: Status.INVALID_COMMAND,
    NotLeader: Status.ERROR,
    Unavailable: Status.ERROR,
}
"""Skerry's exceptions -> Iggy status; a class without a row takes its nearest base's."""

REFUSALS: tuple[type[Exception], ...] = (IggyError, SkerryError)
"""What a handler may raise to refuse a request (answered with ``status_for``, logged
without a traceback)."""


def status_for(error: BaseException) -> Status:
    """The status that answers ``error``: its own for an ``IggyError``, the table's row for
    the error's class or its nearest base class, ``ERROR`` (1) for anything else."""
    if isinstance(error, IggyError):
        return error.status
    for cls in type(error).__mro__:
        status = STATUS_BY_ERROR.get(cls)
        if status is not None:
            return status
    return Status.ERROR
