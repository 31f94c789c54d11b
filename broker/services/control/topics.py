"""This broker's topics as the control plane sees them: created, grown and deleted from
etcd's ``topics/<t>`` keys.

Owns: ``CoreTopics``, the ``LocalTopics`` of ``broker.services.control.service`` over the
core (``broker.core.BrokerCore``) and the replication service: a topic record read from
etcd becomes a local topic with the same partitions, replication factor, min ISR and
retention, and the replication service starts tracking (and fetching) it at once.

Must not import: the global reactor, the transports, the store's modules.
"""

from __future__ import annotations

from typing import Any, Protocol

from broker.core.topics import INTERNAL_PREFIX
from replication.control.keys import TopicRecord

__all__ = ["CoreTopics"]


class _Core(Protocol):
    def topic_names(self) -> list[str]: ...
    def topic_config(self, name: str) -> Any: ...
    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     min_insync_replicas: int | None, retention_ms: int | None,
                     retention_bytes: int | None) -> Any: ...
    def delete_topic(self, name: str) -> None: ...
    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              min_insync_replicas: int) -> Any: ...
    def add_partitions(self, name: str, count: int) -> Any: ...


class _Replication(Protocol):
    def topic_created(self, topic: str) -> None: ...


def _limit(settings: Any, name: str) -> int | None:
    value = settings.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class CoreTopics:
    """``LocalTopics`` over the core and the replication service."""

    def __init__(self, core: _Core, replication: _Replication) -> None:
        self._core = core
        self._replication = replication

    def names(self) -> list[str]:
        return self._core.topic_names()

    def partitions_of(self, name: str) -> int | None:
        config = self._core.topic_config(name)
        return None if config is None else config.partitions

    def local_record(self, name: str) -> tuple[int, int, int, dict[str, Any]] | None:
        config = self._core.topic_config(name)
        if config is None:
            return None
        settings: dict[str, Any] = {}
        if config.retention_ms is not None:
            settings["retention_ms"] = config.retention_ms
        if config.retention_bytes is not None:
            settings["retention_bytes"] = config.retention_bytes
        return (config.partitions, config.replication_factor, config.min_insync_replicas,
                settings)

    def create_local(self, name: str, record: TopicRecord) -> None:
        if name.startswith(INTERNAL_PREFIX):  # the broker's own: no retention, no limits
            self._core.create_internal_topic(name, record.partitions,
                                             record.replication_factor, record.min_isr)
            self._replication.topic_created(name)
            return
        self._core.create_topic(name, record.partitions, record.replication_factor,
                                record.min_isr, _limit(record.settings, "retention_ms"),
                                _limit(record.settings, "retention_bytes"))
        self._replication.topic_created(name)

    def grow_local(self, name: str, count: int) -> None:
        self._core.add_partitions(name, count)

    def delete_local(self, name: str) -> None:
        self._core.delete_topic(name)
