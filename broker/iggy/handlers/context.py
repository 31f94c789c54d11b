"""What every Iggy command handler shares: the collaborators, the per-client session, and
the lookups and checks a command starts with.

Owns: ``Session`` and ``Membership`` (one connected client and its consumer groups),
``NodeInfo`` (this broker as GetClusterMetadata describes it), and ``Context``: the core,
the group service, the catalog and the user store the shell passed in, the settings, and
the steps most commands begin with: the permission gate (``need``), resolving a stream,
topic, partition or consumer group (``stream``, ``topic``, ``check_partition``,
``group``), and the stream, topic and partition records the replies carry. Also
``logged`` and ``all_done`` (the group service's), the two ways the handlers wait on several ``Deferred``\\ s.

Everything reaches the core, the group service and the services through their public
methods.

Must not import: Twisted's reactor, sockets, files, the store (a ``TopicConfig`` is only a
type here), the protocol.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from broker.core import BrokerCore
from broker.iggy import codec as c
from broker.iggy.codec import ConsumerKind, Identifier, PartitionInfo, StreamInfo, TopicInfo
from broker.iggy.errors import IggyError, Status
from broker.services.groups import GroupService, all_done
from broker.services.host_facts import SystemInfo
from broker.services.iggy_catalog import (
    Catalog,
    GroupEntry,
    StreamEntry,
    TopicEntry,
    group_name_for_consumer,
)
from broker.services.iggy_users import Access, Need, User, UserStore

if TYPE_CHECKING:
    from data.store import TopicConfig

__all__ = ["Context", "Session", "Membership", "NodeInfo", "logged", "all_done"]

log = logging.getLogger("skerry.iggy")


@dataclass
class NodeInfo:
    """This broker as GetClusterMetadata describes it (the listener fills in the address)."""

    name: str = "skerry-0"
    ip: str = "127.0.0.1"
    tcp_port: int = 0


@dataclass
class Membership:
    """A session's membership of one consumer group."""

    stream_id: int
    topic_id: int
    group_id: int
    group: str
    store: str
    cursor: int = 0


@dataclass
class Session:
    """One connected Iggy client."""

    client_id: int
    address: str
    user_id: int | None = None
    memberships: dict[tuple[str, str], Membership] = field(default_factory=dict)
    closed: bool = False


class Context:
    """The collaborators, settings and shared counters of one Iggy transport, and the
    lookups every handler class uses."""

    def __init__(self, core: BrokerCore, groups: GroupService, catalog: Catalog,
                 users: UserStore, *, clock: IReactorTime, now_us: Callable[[], int],
                 run_in_thread: Callable[[Callable[[], Any]], Deferred[Any]],
                 system_info: Callable[[], SystemInfo], node: NodeInfo, scrypt_n: int,
                 max_payload: int, max_partitions_per_topic: int, max_topics: int,
                 session_timeout_ms: int) -> None:
        self.core = core
        self.groups = groups
        self.catalog = catalog
        self.users = users
        self.clock = clock
        self.now_us = now_us
        self.run_in_thread = run_in_thread
        self.system_info = system_info
        self.node = node
        self.scrypt_n = scrypt_n
        self.max_payload = max_payload
        self.max_partitions_per_topic = max_partitions_per_topic
        self.max_topics = max_topics
        self.session_timeout_ms = session_timeout_ms
        self.balanced: dict[str, int] = {}
        """The next partition of each store topic's balanced sends."""
        self.read_bytes = 0
        self.written_bytes = 0

    # ================================================================ checks

    @staticmethod
    def need(user: User, need: Need, stream_id: int | None = None,
             topic_id: int | None = None) -> None:
        """Refuse with UNAUTHORIZED unless ``user`` may do ``need`` (there)."""
        if not Access.allows(user, need, stream_id, topic_id):
            raise IggyError(Status.UNAUTHORIZED,
                            f"user {user.username!r} lacks {need.value}"
                            + (f" on stream {stream_id}" if stream_id is not None else "")
                            + (f" topic {topic_id}" if topic_id is not None else ""))

    def has_store(self, name: str) -> bool:
        """True when the store topic ``name`` exists."""
        return self.core.topic_config(name) is not None

    def stream(self, ident: Identifier) -> StreamEntry:
        return self.catalog.require_stream(ident.value)

    def topic(self, stream_ident: Identifier, topic_ident: Identifier
              ) -> tuple[StreamEntry, TopicEntry, TopicConfig]:
        """The stream, the topic and its store topic's settings."""
        stream = self.stream(stream_ident)
        topic = self.catalog.require_topic(stream, topic_ident.value, self.has_store)
        config = self.core.topic_config(topic.store)
        assert config is not None  # require_topic checked that the store topic exists
        return stream, topic, config

    @staticmethod
    def check_partition(config: TopicConfig, partition_id: int) -> None:
        if partition_id >= config.partitions:
            raise IggyError(Status.PARTITION_NOT_FOUND,
                            f"partition {partition_id} not found; the topic has "
                            f"{config.partitions}")

    def group(self, topic: TopicEntry, ident: Identifier) -> GroupEntry:
        """The topic's consumer group (adopting V1 groups first when it is not known)."""
        group = topic.group(ident.value)
        if group is None:
            self.adopt_groups(topic)
            group = topic.group(ident.value)
        if group is None:
            if ident.numeric:
                raise IggyError(Status.CONSUMER_GROUP_ID_NOT_FOUND,
                                f"consumer group {ident} not found")
            raise IggyError(Status.CONSUMER_GROUP_NAME_NOT_FOUND,
                            f"consumer group {ident} not found")
        return group

    def adopt_groups(self, topic: TopicEntry) -> None:
        """Give the V1 groups of the topic's store topic an Iggy id."""
        names = [g for g, t in self.groups.list_groups() if t == topic.store]
        if names:
            self.catalog.adopt_groups(topic, names)

    def offsets_group(self, topic: TopicEntry, consumer: c.Consumer) -> str:
        """The V1 group whose committed offsets are this consumer's stored offsets."""
        if consumer.kind is ConsumerKind.CONSUMER:
            return group_name_for_consumer(consumer.id.value)
        return self.group(topic, consumer.id).name

    # ================================================================ records

    def partition_info(self, topic: TopicEntry, partition: int) -> PartitionInfo:
        summary = self.core.partition_summary(topic.store, partition)
        hw = self.core.hw(topic.store, partition)
        committed_end = min(summary.next_offset, hw + 1)
        return PartitionInfo(partition, topic.created_at, summary.segment_count, max(hw, 0),
                             summary.size_bytes,
                             max(0, committed_end - summary.first_offset))

    def topic_info(self, topic: TopicEntry, config: TopicConfig
                   ) -> tuple[TopicInfo, list[PartitionInfo]]:
        parts = [self.partition_info(topic, p) for p in range(config.partitions)]
        expiry = topic.message_expiry
        if expiry is None:
            expiry = config.retention_ms * 1000 if config.retention_ms else 0
        max_size = topic.max_topic_size
        if max_size is None:
            max_size = config.retention_bytes * len(parts) if config.retention_bytes else 0
        rf = topic.replication_factor
        if rf is None:
            rf = config.replication_factor
        info = TopicInfo(topic.id, topic.created_at, len(parts), expiry, topic.compression,
                         max_size, min(rf, 255), sum(p.size for p in parts),
                         sum(p.messages_count for p in parts), topic.name)
        return info, parts

    def stream_info(self, stream: StreamEntry) -> tuple[StreamInfo, list[TopicInfo]]:
        if stream.is_default:
            self.catalog.sync_default()
        topics = []
        for topic in sorted(stream.topics.values(), key=lambda t: t.id):
            config = self.core.topic_config(topic.store)
            if config is not None:
                topics.append(self.topic_info(topic, config)[0])
        info = StreamInfo(stream.id, stream.created_at, len(topics),
                          sum(t.size for t in topics), sum(t.messages_count for t in topics),
                          stream.name)
        return info, topics


def logged(d: Deferred[Any], what: str) -> None:
    """Nobody waits for ``d``: log its failure instead of leaving it unhandled."""
    d.addErrback(lambda failure: log.warning("iggy: %s failed: %s", what,
                                             failure.getErrorMessage()))
