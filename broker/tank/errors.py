"""The TANK transport's wire errors: which code answers which of Skerry's exceptions.

TANK has no single status field: the same failure is spelled differently in each reply
(spec/tank-notes.md §3.2, §4.2, §7). Owns the one table, ``CODES_BY_ERROR``: one row per
exception class (``broker.errors``: the broker's own and the domain's re-exported ones),
giving the Produce ``err``, the Consume ``error_or_flags`` and the CreateTopic ``err``
that answer it; the class that raised, or its nearest base class with a row, decides.
Also ``TankRefusal`` (a refusal the handlers raise with its codes already chosen) and the
lookups ``produce_code``, ``consume_flag``, ``create_topic_code``.

Faults TANK cannot express have no row of their own and fall to the nearest: TANK has no
"invalid bundle" produce code, so a well-framed bundle Skerry refuses (bit 7, unknown
codec, snappy that does not decompress, a message over ``limits.max_message_bytes``) is
``0x02`` (the client reports SystemFail), as the notes recommend (§9). Only the codes the
reference client maps are ever sent: another produce code would make it abort.

Must not import: Twisted, the store, sockets, the handlers, the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from broker.errors import (
    BadRequest,
    InternalError,
    KeyRequired,
    NotLeader,
    ReplicationTimeout,
    SkerryError,
    StorageError,
    Unavailable,
)
from broker.tank.codec import ConsumeFlag, CreateTopicError, ProduceError
from broker.transport.errors import ErrorTable
from replication.errors import PeerError

__all__ = ["Codes", "CODES_BY_ERROR", "TankRefusal", "codes_for", "produce_code",
           "consume_flag", "create_topic_code"]


class Codes(NamedTuple):
    """What one failure is called in each TANK reply."""

    produce: ProduceError
    consume: ConsumeFlag
    create_topic: CreateTopicError


class TankRefusal(SkerryError):
    """A refusal whose TANK codes the handler chose itself (e.g. invalid sequence numbers)."""

    description = "refused by the TANK transport"

    def __init__(self, message: str, codes: Codes) -> None:
        super().__init__(message)
        self.codes = codes


_IO = Codes(ProduceError.IO_FAULT, ConsumeFlag.SYSTEM_ERROR, CreateTopicError.SYSTEM_FAULT)

CODES_BY_ERROR: Mapping[type[BaseException], Codes] = {
    # a follower partition: 0xfd until clusters elect leaders whose TANK address is known
    # (then 0xfc + addr4/port: see handlers.context.Context.leader_of)
    NotLeader: Codes(ProduceError.NO_LEADER, ConsumeFlag.NO_LEADER,
                     CreateTopicError.UNSUPPORTED),
    # acks=all not reached in time
    ReplicationTimeout: Codes(ProduceError.ACKS_TIMEOUT, ConsumeFlag.SYSTEM_ERROR,
                              CreateTopicError.SYSTEM_FAULT),
    # storage: an I/O fault, a partition that failed
    StorageError: _IO,
    # another broker did not answer a replication request
    PeerError: _IO,
    # a bundle with a keyless message to a compacted topic (TANK has no code of its own)
    KeyRequired: Codes(ProduceError.IO_FAULT, ConsumeFlag.SYSTEM_ERROR, CreateTopicError.INVALID_REQUEST),
    # a request the core refuses (a bundle the store will not take, a bad topic setting)
    BadRequest: Codes(ProduceError.IO_FAULT, ConsumeFlag.SYSTEM_ERROR,
                      CreateTopicError.INVALID_REQUEST),
    # shutting down, overloaded
    Unavailable: _IO,
    InternalError: _IO,
    SkerryError: _IO,
}
"""Skerry's exceptions -> TANK codes; a class without a row takes its nearest base's."""


codes_for: ErrorTable[Codes] = ErrorTable(
    CODES_BY_ERROR, _IO, carries=(TankRefusal, lambda e: e.codes))  # type: ignore[attr-defined]
"""The codes that answer an exception (a ``TankRefusal`` carries its own; anything that
is not a ``SkerryError`` is a bug and answered as a system fault)."""


def produce_code(error: BaseException) -> ProduceError:
    return codes_for(error).produce


def consume_flag(error: BaseException) -> ConsumeFlag:
    return codes_for(error).consume


def create_topic_code(error: BaseException) -> CreateTopicError:
    return codes_for(error).create_topic
