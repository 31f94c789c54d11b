"""The Kafka group and offset APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch (DescribeGroups, ListGroups).

Owned by the consumer-group half of the Kafka transport (branch ``kafka-groups``), with
``broker/services/kafka_groups.py``. ``GROUP_HANDLERS`` maps a request class of
``broker.kafka.codec`` to its handler, ``handler(ctx, request) -> response`` (or a
``Deferred`` of one); ``broker.kafka.handlers.dispatch`` merges it into its table. A
request class with no entry here is answered by ``dispatch.no_coordinator``:
COORDINATOR_NOT_AVAILABLE (15) in the request's own layout.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GROUP_HANDLERS"]

GROUP_HANDLERS: dict[type, Any] = {}
"""Request class -> handler; empty until the group half fills it."""
