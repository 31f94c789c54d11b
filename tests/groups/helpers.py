"""Shared helpers of the group tests (not tests themselves)."""

from __future__ import annotations

from typing import Any

from groups.coordinator import GroupCoordinator


def snapshot(coordinator: GroupCoordinator) -> Any:
    """Everything observable about the coordinator's state, as plain comparable data:
    per group its state, generation, assignor, partition count, members (session timeout,
    deadline, timer token) and assignment, plus every committed offset."""
    groups = {
        (g.group, g.topic): (
            g.state, g.generation, g.assignor, g.partitions,
            {m: (x.session_timeout_ms, x.deadline_ms, x.token) for m, x in g.members.items()},
            {m: list(p) for m, p in g.assignment.items()},
        )
        for g in coordinator.groups()
    }
    return groups, coordinator.committed()


def state_on_disk(data_dir: str) -> Any:
    """The group state a stopped broker's data directory holds (its ``__skerry_groups``
    topic, or legacy JSON files not migrated yet): a ``groups.loader.LoadedState``."""
    from twisted.internet.task import Clock

    from broker.services.group_log import GroupStateLog
    from data.store import Store

    store = Store(data_dir)
    try:
        return GroupStateLog(store, data_dir, Clock(), partitions=50).loaded
    finally:
        store.close()
