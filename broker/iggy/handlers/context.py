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

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IReactorTime

from access.authorizer import AclFilter
from access.model import CLUSTER_NAME
from broker.core import BrokerCore
from broker.iggy import codec as c
from broker.iggy.access import NEEDS, Need, bindings_for, permissions_from
from broker.iggy.codec import ConsumerKind, Identifier, PartitionInfo, StreamInfo, TopicInfo
from broker.iggy.codec.permissions import Permissions
from broker.iggy.errors import IggyError, Status
from broker.services.group_router import GroupRouter
from broker.services.groups import GroupService, all_done
from broker.services.host_facts import SystemInfo
from broker.services.iggy_catalog import (
    Catalog,
    GroupEntry,
    StreamEntry,
    TopicEntry,
    group_name_for_consumer,
)
from broker.services.iggy_users import ROOT_USER_ID, User, UserStore

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
    principal: str | None = None
    """The logged-in user's name: the ACLs' ``User:<name>`` (the dispatcher sets it)."""
    command: type | None = None
    """The class of the command being served (``broker.iggy.access.NEEDS``' key)."""

    @property
    def peer(self) -> str:
        return self.address


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
        self.router = GroupRouter(groups)
        """The group operations, at each group's coordinator (``route_through`` on a
        cluster member with etcd; else all here)."""
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
        self.acls: Any = None
        """``broker.services.acls.AclService``: where Iggy's permissions are written as
        ACL bindings (the shell sets it)."""
        self.balanced: dict[str, int] = {}
        """The next partition of each store topic's balanced sends."""
        self.read_bytes = 0
        self.written_bytes = 0

    # ================================================================ checks

    def need(self, session: Session, need: Need, name: str | None = None) -> None:
        """Refuse (``access.NotAuthorized``: Iggy's Unauthorized, 41) unless the session's
        user may do ``need`` on the topic or group ``name`` (the cluster for cluster
        needs), per the ACLs (``broker.iggy.access``). The root user may do everything."""
        self.need_any(session, ((need, name),))

    def need_any(self, session: Session, alternatives: tuple[tuple[Need, str | None], ...]
                 ) -> None:
        """Allowed when any one of ``alternatives`` is; refused naming the last one."""
        needs = NEEDS.get(session.command) if session.command is not None else None
        for need, _name in alternatives:
            if needs is None or need not in needs:
                raise AssertionError(f"{session.command}: {need} is not in its NEEDS row")
        if session.user_id == ROOT_USER_ID:
            return
        gate = self.core.access
        for need, name in alternatives[:-1]:
            if gate.allowed(session, need.operation, need.resource_type,
                            CLUSTER_NAME if name is None else name, always=True):
                return
        need, name = alternatives[-1]
        gate.check(session, need.operation, need.resource_type,
                   CLUSTER_NAME if name is None else name, always=True)

    def may(self, session: Session, need: Need, name: str | None = None) -> bool:
        """``need`` without refusing, logging or counting: for filtering lists."""
        if session.user_id == ROOT_USER_ID:
            return True
        return self.core.access.allowed(session, need.operation, need.resource_type,
                                        CLUSTER_NAME if name is None else name, always=True)

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

    def find_group(self, topic: TopicEntry, ident: Identifier) -> Deferred[GroupEntry]:
        """``group``, and when the group is unknown here on a cluster, the groups every
        coordinator holds for the topic adopted first (a group joined or given offsets
        through another broker)."""
        try:
            return succeed(self.group(topic, ident))
        except IggyError as missing:
            if self.router.is_single():
                return fail(missing)
            error = missing

        def listed(pairs: list[tuple[str, str]]) -> GroupEntry:
            names = [g for g, t in pairs if t == topic.store]
            if names:
                self.catalog.adopt_groups(topic, names)
            found = topic.group(ident.value)
            if found is None:
                raise error
            return found

        return self.router.list_groups().addCallback(listed)

    def adopt_all(self, topic: TopicEntry) -> Deferred[None]:
        """``adopt_groups`` with every coordinator's groups (a cluster), else this one's."""
        if self.router.is_single():
            self.adopt_groups(topic)
            return succeed(None)

        def listed(pairs: list[tuple[str, str]]) -> None:
            names = [g for g, t in pairs if t == topic.store]
            if names:
                self.catalog.adopt_groups(topic, names)

        return self.router.list_groups().addCallback(listed)

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

    def find_offsets_group(self, topic: TopicEntry, consumer: c.Consumer) -> Deferred[str]:
        """``offsets_group``, finding a consumer group at the coordinators when this broker
        does not know its name (``find_group``)."""
        if consumer.kind is ConsumerKind.CONSUMER:
            return succeed(group_name_for_consumer(consumer.id.value))
        return self.find_group(topic, consumer.id).addCallback(lambda group: group.name)

    # ================================================================ permissions <-> ACLs

    def topics_of(self, stream_id: int) -> list[tuple[int, str]]:
        """``(topic id, Skerry topic)`` of each topic of the stream (none: unknown)."""
        stream = self.catalog.stream(stream_id)
        if stream is None:
            return []
        if stream.is_default:
            self.catalog.sync_default()
        return [(t.id, t.store) for t in stream.topics.values()]

    def locate(self, store: str) -> tuple[int, int] | None:
        found = self.catalog.locate(store)
        return None if found is None else (found[0].id, found[1].id)

    def permissions_of(self, user: User) -> Permissions | None:
        """What GetUser shows: the root user's fixed set, else the user's ACLs read back."""
        if user.is_root:
            return Permissions.root()
        if self.acls is None:
            return None
        return permissions_from(user.username, self.acls.list(), self.locate)

    def write_permissions(self, username: str, permissions: Permissions | None,
                          old: str | None = None) -> Deferred[Any]:
        """Store ``permissions`` as ``User:<username>``'s ACL bindings (replacing theirs,
        and ``old``'s when the user was renamed)."""
        acls = bindings_for(username, permissions, self.topics_of)
        return self.acls.set_principal(f"User:{username}", acls,
                                       None if old is None else f"User:{old}")

    def rename_principal(self, old: str, new: str) -> Deferred[Any]:
        """Move every binding of ``User:<old>`` to ``User:<new>`` as it is (a rename)."""
        moved = [dataclasses.replace(acl, principal=f"User:{new}")
                 for acl in self.acls.list(AclFilter(principal=f"User:{old}"))]
        return self.acls.set_principal(f"User:{new}", moved, f"User:{old}")

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
