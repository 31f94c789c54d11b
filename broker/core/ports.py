"""The core's collaborators, typed: what the core asks of the store, the replication
service, the group service, the group committer and the metrics.

Owns: these ``typing.Protocol``\\ s only. The concrete classes (``data.store.Store``,
``broker.services.replication.ReplicationService``, ``broker.services.groups.GroupService``,
``broker.core.durability.GroupCommitter``, ``broker.metrics.BrokerMetrics``) match them
structurally; the shell (``broker.server``) builds them and passes them in at construction.

Must not import: the concrete collaborators above (they are named only in this text),
transports, Twisted beyond ``Deferred`` for typing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from twisted.internet.defer import Deferred

from broker.errors import NotLeader, SkerryError
from data.log import PartitionLog
from data.store import Topic, TopicConfig

__all__ = ["CommitWaiter", "Committer", "CoreMetrics", "GroupEvents", "ReplicationView", "StoreView"]

CommitWaiter = Callable[[SkerryError | None], None]
"""Called with None once an fsync covered the offsets waited for, with the error otherwise."""


class StoreView(Protocol):
    """What the core needs of the segment store (``data.store.Store``)."""

    @property
    def topics(self) -> Mapping[str, Topic]: ...

    def topic(self, name: str) -> Topic | None: ...

    def partition(self, name: str, partition: int) -> PartitionLog: ...

    def create_topic(self, name: str, config: TopicConfig) -> Topic: ...

    def delete_topic(self, name: str) -> None: ...

    def add_partitions(self, name: str, count: int) -> Topic: ...

    def alter_topic(self, name: str, changes: Mapping[str, int | str | None]) -> Topic: ...

    def enforce_retention(self, now_us: int | None = None) -> Sequence[Any]: ...

    def clean_policy(self, name: str) -> Any: ...

    def now_us(self) -> int: ...

    def sync_all(self) -> None: ...

    def close(self) -> None: ...


class ReplicationView(Protocol):
    """What the core needs of the replication service: who leads, where ``hw`` is, and
    the events of the leader's log (``broker.services.replication.ReplicationService``)."""

    def hw(self, topic: str, partition: int) -> int: ...

    def is_leader(self, topic: str, partition: int) -> bool: ...

    def not_leader_error(self, topic: str, partition: int) -> NotLeader: ...

    def on_appended(self, topic: str, partition: int) -> None: ...

    def on_durable(self, topic: str, partition: int) -> None: ...

    def committed(self, topic: str, partition: int, offset: int) -> bool: ...

    def wait_for_all(self, topic: str, partition: int, offset: int,
                     timeout_ms: int | None = None) -> Deferred[int]: ...

    def forget_topic(self, topic: str) -> None: ...

    def partitions_added(self, topic: str) -> None: ...

    def close(self) -> None: ...


class GroupEvents(Protocol):
    """What the core tells the group service (``broker.services.groups.GroupService``):
    topic changes, and the shutdown."""

    def topic_deleted(self, topic: str) -> None: ...

    def partitions_changed(self, topic: str) -> None: ...

    def close(self) -> Deferred[None]: ...


class Committer(Protocol):
    """Group commit (``broker.core.durability.GroupCommitter``)."""

    def wait(self, log: Any, upto: int, waiter: CommitWaiter) -> None: ...

    def idle(self) -> bool: ...


class CoreMetrics(Protocol):
    """The counters the core feeds (``broker.metrics.BrokerMetrics``), when metrics are on."""

    def appended(self, topic: str, payloads: Sequence[bytes],
                 headers: Sequence[bytes] | None) -> None: ...

    def produced(self, topic: str, count: int, nbytes: int) -> None: ...

    def consumed(self, topic: str, count: int, nbytes: int) -> None: ...

    def timed_fsync(self, sync: Callable[[], Any]) -> Callable[[], Any]: ...
