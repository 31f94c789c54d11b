"""A tiny in-memory stand-in for the store, with the attributes replication reads.

``FakeStore.reopen()`` simulates a broker restart: a new store object over the same
persisted replication state and the recovered log ends (optionally losing the tail that was
never fsynced), so a new ``ReplicationService`` can be built over it.
"""

from __future__ import annotations

import copy
import errno
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FakeTopicConfig:
    partitions: int
    replication_factor: int = 1
    min_insync_replicas: int = 1


class FakeLog:
    """Offsets of one partition log plus its small state document."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.first_offset = 0
        self.next_offset = 0
        self.durable_offset = 0
        self.state: dict[str, Any] = {}
        self.saved: list[dict[str, Any]] = []  # every document written, in order
        self.fail_saves = False

    def append(self, count: int = 1, *, durable: bool = True) -> int:
        """Append ``count`` messages; returns the first offset."""
        first = self.next_offset
        self.next_offset += count
        if durable:
            self.durable_offset = self.next_offset
        return first

    def sync(self) -> int:
        self.durable_offset = self.next_offset
        return self.durable_offset

    def load_state(self) -> dict[str, Any]:
        return copy.deepcopy(self.state)

    def save_state(self, state: dict[str, Any]) -> None:
        if self.fail_saves:
            raise OSError(errno.ENOSPC, "No space left on device")
        document = json.loads(json.dumps(state))  # what a JSON file would give back
        self.state = document
        self.saved.append(document)


class FakeTopic:
    def __init__(self, name: str, config: FakeTopicConfig) -> None:
        self.name = name
        self.config = config
        self.partitions = [FakeLog(name, p) for p in range(config.partitions)]


class FakeStore:
    def __init__(self) -> None:
        self.topics: dict[str, FakeTopic] = {}

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     min_insync_replicas: int = 1) -> FakeTopic:
        topic = FakeTopic(name, FakeTopicConfig(partitions, replication_factor,
                                                min_insync_replicas))
        self.topics[name] = topic
        return topic

    def topic(self, name: str) -> FakeTopic | None:
        return self.topics.get(name)

    def partition(self, name: str, partition: int) -> FakeLog:
        return self.topics[name].partitions[partition]

    def add_partitions(self, name: str, count: int) -> FakeTopic:
        old = self.topics[name]
        config = FakeTopicConfig(count, old.config.replication_factor,
                                 old.config.min_insync_replicas)
        old.config = config
        old.partitions.extend(FakeLog(name, p) for p in range(len(old.partitions), count))
        return old

    def delete_topic(self, name: str) -> None:
        del self.topics[name]

    def reopen(self, *, lose_unsynced: bool = False) -> FakeStore:
        """The store as a restarted broker finds it."""
        fresh = FakeStore()
        for name, topic in self.topics.items():
            copy_topic = FakeTopic(name, topic.config)
            for old, new in zip(topic.partitions, copy_topic.partitions, strict=True):
                end = old.durable_offset if lose_unsynced else old.next_offset
                new.next_offset = new.durable_offset = end
                new.first_offset = old.first_offset
                new.state = copy.deepcopy(old.state)
            fresh.topics[name] = copy_topic
        return fresh
