"""InitProducerId (API key 22) for idempotent producers; transactions refused.

Owns: ``allocate_producer_id`` (what InitProducerId answers, as ``(error code, producer id,
epoch)``: a new id from ``Context.producer_ids`` with epoch 0 for a producer without a
``transactional_id``, as Kafka answers every non-transactional request, whatever
producer id and epoch it carries; 53 TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a
transactional one, Skerry having no transaction coordinator; 15 COORDINATOR_NOT_AVAILABLE,
which clients retry, when no id can be reserved now), ``VERSIONS`` and the handler
(``init_producer_id``, InitProducerId v0-v4: v3+ carry the producer's current id and epoch,
which a non-transactional request does not need: it gets a new id, as from Kafka).

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

import logging
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.python.failure import Failure

from broker.kafka import codec as c
from broker.kafka.errors import ErrorCode, code_for
from broker.kafka.handlers.context import Context

__all__ = ["VERSIONS", "allocate_producer_id", "init_producer_id", "NO_PRODUCER_ID",
           "NO_PRODUCER_EPOCH"]

VERSIONS: dict[c.ApiKey, tuple[int, int]] = {c.ApiKey.INIT_PRODUCER_ID: (0, 4)}
"""InitProducerId as far as the codec reads it."""

log = logging.getLogger("skerry.kafka")

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

Answer = tuple[int, int, int]
"""(error code, producer id, producer epoch)."""


def allocate_producer_id(ctx: Context, transactional_id: str | None) -> Deferred[Answer]:
    """What InitProducerId answers (module docstring). Never fails."""
    if transactional_id is not None:
        return succeed((int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), NO_PRODUCER_ID,
                        NO_PRODUCER_EPOCH))
    ids = ctx.producer_ids
    if ids is None:
        return succeed((int(ErrorCode.COORDINATOR_NOT_AVAILABLE), NO_PRODUCER_ID,
                        NO_PRODUCER_EPOCH))

    def refused(failure: Failure) -> Answer:
        log.warning("InitProducerId: %s", failure.getErrorMessage())
        code = code_for(failure.value)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR or code == ErrorCode.LEADER_NOT_AVAILABLE:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return int(code), NO_PRODUCER_ID, NO_PRODUCER_EPOCH

    d: Deferred[Any] = ids.allocate()
    return d.addCallbacks(lambda pid: (0, pid, 0), refused)


def init_producer_id(ctx: Context, request: c.InitProducerIdRequest
                     ) -> Deferred[c.InitProducerIdResponse]:
    """InitProducerId: ``allocate_producer_id``'s answer in the response's layout."""
    return allocate_producer_id(ctx, request.transactional_id).addCallback(
        lambda answer: c.InitProducerIdResponse(answer[0], answer[1], answer[2]))
