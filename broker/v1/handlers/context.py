"""What every V1 handler module shares: the connection a command came
from, the attributes the shell sets, and how a handler answers later.

Owns: ``Connection``, ``HandlerContext`` (the state the
handler mixins read) and the small checks and constants more than one handler module
uses.

Must not import: Twisted's reactor, sockets, files. Only ``Deferred`` for waiting.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from twisted.python.failure import Failure

from access import Operation, ResourceType
from broker.core import BrokerCore, ProduceResult
from broker.errors import (
    BadRequest,
    SkerryError,
    Unavailable,
)
from broker.services.consumer_groups import ConsumerGroupService
from broker.services.groups import GroupService
from broker.services.replication import ReplicationService
from broker.transport.boundary import Boundary
from broker.v1 import codec as c
from data.names import IGGY_GROUP_PREFIX, IGGY_STORE_PREFIX

log = logging.getLogger("skerry.handlers")



class Connection(Protocol):
    """What a handler may ask of the connection a command came from."""

    def produced(self, result: ProduceResult) -> None:
        """The ``ProduceCallback`` of this connection's PRODUCEs: fill the slots
        (``result.tokens``) with their replies, then write what is due."""

    def drain(self) -> None:
        """Write every reply whose turn has come (after a slot was filled)."""


_WRITE, _TOPIC = Operation.WRITE, ResourceType.TOPIC
"""Looked up once: the PRODUCE path checks them per message with ACLs on."""

_PULL_DEFAULT_BYTES = 1048576
_PULL_MAX_BYTES = 16 * 1048576
"""REPLICA_PULL ``max_bytes``: the default, and the most one answer may carry."""
_DEFAULT_REBALANCE_TIMEOUT_MS = 60_000
"""GROUP_HEARTBEAT: the rebalance timeout of a join that names none."""
_FETCH_MAX_MESSAGES = 100_000
"""FETCH: the most records one answer carries (``max=`` may ask for fewer)."""


_GROUP_COMMANDS = (c.Join, c.Sync, c.Heartbeat, c.Leave, c.Commit, c.AdminCommit,
                   c.AdminResetOffsets, c.AdminDeleteGroup)
_TOPIC_WRITES = frozenset((c.Produce, c.ProduceBatch, c.AdminCreateTopic, c.AdminDeleteTopic,
                           c.AdminAddPartitions, *_GROUP_COMMANDS))
"""Commands V1 may not send for the Iggy transport's internal topics (``__iggy.*``):
writes, creating, deleting or growing them, and consumer groups on them."""
_GROUP_WRITES = frozenset((*_GROUP_COMMANDS, c.GroupHeartbeat))
"""Commands V1 may not send for the Iggy transport's consumer pseudo-groups
(``iggy.consumer.*``). Reading stays allowed for both (CONSUME of an existing topic, FETCH,
OFFSETS, METADATA, OFFSET, DESCRIBE_GROUP, LIST_GROUPS), and so do the replication commands,
which must reach every partition (docs/protocol.md, Reserved names)."""


BROKER_ONLY_COMMANDS = frozenset((
    "REPLICA_FETCH", "REPLICA_PULL", "REPLICA_EPOCH", "REPLICA_STATUS", "SET_PARTITION_ROLE",
    "ADMIN_CREATE_TOPIC", "ADMIN_REGISTER_BROKER", "ADMIN_BROKER_HEARTBEAT",
    "ADMIN_SET_PARTITION_LEADER", "ADMIN_GET_METADATA",
))

"""Commands only a broker principal may send on a cluster member with authentication on
(``Handlers.peer_users``): they move a partition's ISR, ``hw``, leadership or the cluster's
metadata (docs/replication.md, Security between brokers). Listed by wire name, so a command
added later under one of these names is gated the moment it exists."""


def _reserved_topic(topic: str) -> BadRequest:
    return BadRequest(f"topic {topic} is reserved for the Iggy transport's internal use "
                      f"(names starting with {IGGY_STORE_PREFIX}): over V1 it can be read, not "
                      f"created, written, changed or consumed in a group")


def _check_reserved(cmd: Any) -> None:
    """``BadRequest`` for a V1 command that would create, write or change the Iggy
    transport's internal topics or consumer pseudo-groups."""
    kind = type(cmd)
    if kind in _TOPIC_WRITES and cmd.topic.startswith(IGGY_STORE_PREFIX):
        raise _reserved_topic(cmd.topic)
    if kind in _GROUP_WRITES and cmd.group.startswith(IGGY_GROUP_PREFIX):
        raise BadRequest(f"group {cmd.group} is reserved for the Iggy transport's internal "
                         f"use (names starting with {IGGY_GROUP_PREFIX}): over V1 its "
                         f"offsets can be read, not changed")


_HERE = object()
"""``_route_group_command``: serve the command on this broker."""


def _unreachable(failure: Failure, broker: int) -> Failure:
    if isinstance(failure.value, SkerryError):
        return failure
    return Failure(Unavailable(f"the group's coordinator, broker {broker}, did not answer "
                               f"({failure.getErrorMessage() or type(failure.value).__name__}); "
                               f"retry"))


def _pull_reply(cid: str, result: Any, raw: bool = False) -> bytes:
    return c.replica_pull_reply(cid, epoch=result.epoch, hw=result.hw, leo=result.leo,
                                start=result.start, isr=result.isr, epochs=result.epochs,
                                count=result.count, data=result.data, raw=raw)


class HandlerContext:
    """The state every handler mixin reads (set by ``Handlers.__init__`` and the shell);
    ``Handlers`` (``dispatch``) gives them ``_later``, ``_render`` and ``_answer``, the
    helpers that answer a command later."""

    core: BrokerCore
    groups: GroupService
    replication: ReplicationService
    boundary: Boundary[bytes]
    consumer_groups: ConsumerGroupService | None = None
    coordinators: Any = None
    forward: Any = None
