"""This broker's topics as the control plane sees them: created, grown and deleted from
etcd's ``topics/<t>`` keys.

Owns: ``CoreTopics``, the ``LocalTopics`` of ``broker.services.control.service`` over the
core (``broker.core.BrokerCore``) and the replication service: a topic record read from
etcd becomes a local topic with the same partitions, replication factor, min ISR and
retention, and the replication service starts tracking (and fetching) it at once.

Must not import: the global reactor, the transports, the store's modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from broker.config import TOPIC_EXTRA_KEYS
from broker.errors import BadRequest
from data.names import INTERNAL_PREFIX
from replication.control.keys import TopicRecord

__all__ = ["CoreTopics"]


class _Core(Protocol):
    def topic_names(self) -> list[str]: ...
    def topic_config(self, name: str) -> Any: ...
    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     min_insync_replicas: int | None, retention_ms: int | None,
                     retention_bytes: int | None,
                     extra: Mapping[str, Any] | None = None) -> Any: ...
    def alter_topic(self, name: str, changes: Mapping[str, Any]) -> Any: ...
    def delete_topic(self, name: str) -> None: ...
    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              min_insync_replicas: int) -> Any: ...
    def add_partitions(self, name: str, count: int) -> Any: ...


_ALTERABLE = ("retention_ms", "retention_bytes", *TOPIC_EXTRA_KEYS)
"""The settings an alter changes (``data.store.Store.ALTERABLE``)."""


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
        settings.update({key: value for key, value in config.to_json().items()
                         if key in TOPIC_EXTRA_KEYS})
        return (config.partitions, config.replication_factor, config.min_insync_replicas,
                settings)

    def create_local(self, name: str, record: TopicRecord) -> None:
        if name.startswith(INTERNAL_PREFIX):  # the broker's own: no retention, no limits
            self._core.create_internal_topic(name, record.partitions,
                                             record.replication_factor, record.min_isr)
            self._replication.topic_created(name)
            return
        extra = {key: value for key, value in record.settings.items()
                 if key in TOPIC_EXTRA_KEYS and value is not None}
        topic_id = record.settings.get("topic_id")
        self._core.create_topic(name, record.partitions, record.replication_factor,
                                record.min_isr, _limit(record.settings, "retention_ms"),
                                _limit(record.settings, "retention_bytes"), extra,
                                topic_id if isinstance(topic_id, str) else None)
        self._replication.topic_created(name)

    def alter_local(self, name: str, record: TopicRecord) -> None:
        """Apply the settings of the topic's record that differ from the local topic's
        (a setting the record does not name stays as it is)."""
        config = self._core.topic_config(name)
        if config is None:
            return
        changes = {key: record.settings[key] for key in _ALTERABLE
                   if key in record.settings and getattr(config, key) != record.settings[key]}
        if changes:
            self._core.alter_topic(name, changes)

    def check_alter(self, name: str, changes: Mapping[str, Any]) -> None:
        """``BadRequest`` unless ``changes`` are settings this broker's store takes."""
        config = self._core.topic_config(name)
        if config is None:
            raise BadRequest("unknown topic")
        other = set(changes) - set(_ALTERABLE)
        if other:
            raise BadRequest(f"cannot alter {sorted(other)}; only {sorted(_ALTERABLE)}")
        try:
            replace(config, **changes).validate()
        except (ValueError, TypeError) as exc:
            raise BadRequest(str(exc)) from exc

    def grow_local(self, name: str, count: int) -> None:
        self._core.add_partitions(name, count)

    def delete_local(self, name: str) -> None:
        self._core.delete_topic(name)
