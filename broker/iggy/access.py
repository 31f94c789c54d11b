"""What each Iggy command needs, in the ACL model every transport shares (docs/security.md),
and how Iggy's own permissions blob maps onto ACL bindings.

Owns: ``Need`` (the checks an Iggy handler asks the core's gate for, each one Kafka-named
operation on a topic, a group or the cluster), ``NEEDS`` (command class -> the needs its
handler checks; the dispatcher refuses a handler that checks anything else, so the table
and the code cannot drift apart), ``rows`` (docs/security.md's Iggy rows), and the
mapping of Iggy permissions (``Permissions``: global, per-stream and per-topic flags) to
bindings for ``User:<name>`` (``bindings_for``) and back (``permissions_from``, what
GetUser shows).

Resources: an Iggy topic is the Skerry topic that holds it (the ``default`` stream's
topics by their own names, other streams' topics ``__iggy.<n>``); an Iggy consumer group
is the Skerry group of its name (a plain consumer's offsets: its ``__iggy-consumer-<id>``
group); streams themselves are catalog entries, so creating, renaming and deleting them is
Create on the cluster (deleting and purging also need Delete on each topic of the stream).

Must not import: Twisted, sockets, the store.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

from access import AclBinding, Operation, PatternType, Permission, ResourceType
from access.model import CLUSTER_NAME, WILDCARD
from broker.iggy import codec as c
from broker.iggy.codec.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)

__all__ = ["Need", "NEEDS", "NONE", "rows", "bindings_for", "permissions_from"]

Op = Operation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


class Need(enum.Enum):
    """One check: an operation on a resource type (the handler names the resource)."""

    DESCRIBE_CLUSTER = (Op.DESCRIBE, CLUSTER)
    ALTER_CLUSTER = (Op.ALTER, CLUSTER)
    CREATE_CLUSTER = (Op.CREATE, CLUSTER)
    CREATE_TOPIC = (Op.CREATE, TOPIC)  # an alternative to Create Cluster (default stream)
    DESCRIBE_TOPIC = (Op.DESCRIBE, TOPIC)
    READ_TOPIC = (Op.READ, TOPIC)
    WRITE_TOPIC = (Op.WRITE, TOPIC)
    DELETE_TOPIC = (Op.DELETE, TOPIC)
    ALTER_TOPIC = (Op.ALTER, TOPIC)
    ALTER_TOPIC_CONFIGS = (Op.ALTER_CONFIGS, TOPIC)
    READ_GROUP = (Op.READ, GROUP)
    DESCRIBE_GROUP = (Op.DESCRIBE, GROUP)
    DELETE_GROUP = (Op.DELETE, GROUP)

    @property
    def operation(self) -> Operation:
        return self.value[0]

    @property
    def resource_type(self) -> ResourceType:
        return self.value[1]

    @property
    def label(self) -> str:
        return f"{self.operation.value} {self.resource_type.value}"


N = Need
NEEDS: dict[type, tuple[Need, ...]] = {
    c.GetStats: (N.DESCRIBE_CLUSTER,),
    c.GetSnapshot: (N.DESCRIBE_CLUSTER,),
    c.GetClient: (N.DESCRIBE_CLUSTER,),
    c.GetClients: (N.DESCRIBE_CLUSTER,),
    c.GetUser: (N.DESCRIBE_CLUSTER,),  # of another user; one's own needs nothing
    c.GetUsers: (N.DESCRIBE_CLUSTER,),
    c.CreateUser: (N.ALTER_CLUSTER,),
    c.DeleteUser: (N.ALTER_CLUSTER,),
    c.UpdateUser: (N.ALTER_CLUSTER,),
    c.UpdatePermissions: (N.ALTER_CLUSTER,),
    c.ChangePassword: (N.ALTER_CLUSTER,),  # of another user; one's own needs nothing
    c.SendMessages: (N.WRITE_TOPIC,),
    c.FlushUnsavedBuffer: (N.WRITE_TOPIC,),
    c.PollMessages: (N.READ_TOPIC, N.READ_GROUP),  # the group's: consumer group or consumer
    c.GetConsumerOffset: (N.DESCRIBE_TOPIC, N.DESCRIBE_GROUP),
    c.StoreConsumerOffset: (N.READ_TOPIC, N.READ_GROUP),
    c.DeleteConsumerOffset: (N.READ_TOPIC, N.DELETE_GROUP),
    c.GetStream: (N.DESCRIBE_CLUSTER, N.DESCRIBE_TOPIC),  # either one: see ALTERNATIVES
    c.GetStreams: (N.DESCRIBE_CLUSTER, N.DESCRIBE_TOPIC),
    c.CreateStream: (N.CREATE_CLUSTER,),
    c.UpdateStream: (N.CREATE_CLUSTER,),
    c.DeleteStream: (N.CREATE_CLUSTER, N.DELETE_TOPIC),  # Delete on each of its topics
    c.PurgeStream: (N.DELETE_TOPIC,),  # on each of its topics
    c.GetTopic: (N.DESCRIBE_TOPIC,),
    c.GetTopics: (N.DESCRIBE_CLUSTER,),
    c.CreateTopic: (N.CREATE_CLUSTER, N.CREATE_TOPIC),  # either one
    c.DeleteTopic: (N.DELETE_TOPIC,),
    c.UpdateTopic: (N.ALTER_TOPIC_CONFIGS,),
    c.PurgeTopic: (N.DELETE_TOPIC,),
    c.CreatePartitions: (N.ALTER_TOPIC,),
    c.DeletePartitions: (N.ALTER_TOPIC,),
    c.DeleteSegments: (N.DELETE_TOPIC,),
    c.GetConsumerGroup: (N.DESCRIBE_TOPIC, N.DESCRIBE_GROUP),
    c.GetConsumerGroups: (N.DESCRIBE_TOPIC,),
    c.CreateConsumerGroup: (N.READ_TOPIC, N.READ_GROUP),
    c.DeleteConsumerGroup: (N.DESCRIBE_TOPIC, N.DELETE_GROUP),
    c.JoinConsumerGroup: (N.READ_TOPIC, N.READ_GROUP),
    c.LeaveConsumerGroup: (N.READ_GROUP,),
}
"""Kafka's choices where Kafka has the request (Produce: Write Topic; Fetch: Read Topic;
OffsetCommit: Read Group and Topic; OffsetFetch: Describe; DeleteGroups: Delete Group;
CreateTopics: Create Cluster or Topic; DeleteTopics and DeleteRecords: Delete Topic;
CreatePartitions: Alter Topic; IncrementalAlterConfigs: AlterConfigs Topic); user and
server management as Kafka's ACL and config requests: Alter / Describe Cluster."""

ALTERNATIVES = {
    c.CreateTopic: "Create Cluster or Create Topic (the topic's name in stream `default`; "
                   "`__iggy.` in other streams, whose topic names are not known yet)",
    c.GetStream: "Describe Cluster or Describe Topic on one of the stream's topics",
    c.GetStreams: "lists the streams the user may see as GetStream says (others left out)",
}
NOTES = {
    c.GetUser: " (another user's; one's own: nothing)",
    c.ChangePassword: " (another user's; one's own: nothing)",
    c.PollMessages: " (the consumer group's, or a plain consumer's offsets group)",
    c.DeleteStream: " on each topic of the stream",
    c.PurgeStream: " on each topic of the stream",
}

NONE = (c.Ping, c.LoginUser, c.LoginWithPersonalAccessToken, c.LogoutUser, c.GetMe,
        c.GetClusterMetadata, c.GetPersonalAccessTokens, c.CreatePersonalAccessToken,
        c.DeletePersonalAccessToken)
"""Commands that need no ACL: logging in and out, one's own client and tokens, where the
server is."""


def rows() -> list[tuple[str, str]]:
    """``(command code name, what it needs)`` for docs/security.md."""
    out = [(cls.CODE.name, "nothing (authentication only)" if cls not in (
        c.Ping, c.LoginUser, c.LoginWithPersonalAccessToken) else "nothing (before login)")
        for cls in NONE]
    for cls, needs in NEEDS.items():
        text = ALTERNATIVES.get(cls) or ", ".join(n.label for n in needs)
        out.append((cls.CODE.name, text + NOTES.get(cls, "")))
    return sorted(out)


# ---------------------------------------------------------------- Iggy permissions <-> ACLs

_ALL_TOPIC_OPS = (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.ALTER_CONFIGS)


def _allow(principal: str, rt: ResourceType, name: str, op: Operation) -> AclBinding:
    return AclBinding(principal, rt, name, PatternType.LITERAL, op, Permission.ALLOW)


def bindings_for(username: str, permissions: Permissions | None,
                 topics_of: Callable[[int], Iterable[tuple[int, str]]]) -> list[AclBinding]:
    """The ACL bindings that give ``User:<username>`` what ``permissions`` gives in Iggy.

    ``topics_of(stream_id)`` lists ``(topic id, Skerry topic name)`` of a stream: a stream
    permission becomes bindings on each topic the stream has now (docs/iggy.md)."""
    principal = f"User:{username}"
    out: set[AclBinding] = set()
    if permissions is None:
        return []

    def topic_ops(name: str, *, manage: bool, read: bool, poll: bool, send: bool) -> None:
        ops: set[Operation] = set()
        if manage:
            ops.update(_ALL_TOPIC_OPS)
        if read or poll:
            ops.add(Op.READ)
        if send:
            ops.add(Op.WRITE)
        out.update(_allow(principal, TOPIC, name, op) for op in ops)
        if manage or read or poll:
            out.add(_allow(principal, GROUP, WILDCARD, Op.READ))
            if manage:
                out.add(_allow(principal, GROUP, WILDCARD, Op.DELETE))

    g = permissions.global_
    if g.manage_servers or g.manage_users:
        out.add(_allow(principal, CLUSTER, CLUSTER_NAME, Op.ALTER))
    if g.read_servers or g.read_users or g.read_streams or g.read_topics:
        out.add(_allow(principal, CLUSTER, CLUSTER_NAME, Op.DESCRIBE))
    if g.manage_streams:
        out.add(_allow(principal, CLUSTER, CLUSTER_NAME, Op.CREATE))
        out.add(_allow(principal, CLUSTER, CLUSTER_NAME, Op.DESCRIBE))
    topic_ops(WILDCARD, manage=g.manage_streams or g.manage_topics,
              read=g.read_streams or g.read_topics, poll=g.poll_messages, send=g.send_messages)
    for sid, sp in permissions.streams or ():
        for tid, name in topics_of(sid):
            tp = sp.topic(tid) or TopicPermissions()
            topic_ops(name, manage=sp.manage_stream or sp.manage_topics or tp.manage_topic,
                      read=sp.read_stream or sp.read_topics or tp.read_topic,
                      poll=sp.poll_messages or tp.poll_messages,
                      send=sp.send_messages or tp.send_messages)
    return sorted(out)


def permissions_from(username: str, acls: Iterable[AclBinding],
                     locate: Callable[[str], tuple[int, int] | None]) -> Permissions | None:
    """What Iggy's GetUser shows for ``User:<username>``: the allowing Literal bindings
    read back as Iggy flags (``locate(topic)``: the (stream id, topic id) of a Skerry topic,
    None when no Iggy stream lists it). None when the user has no such binding."""
    principal = f"User:{username}"
    mine = [a for a in acls if a.principal == principal and a.permission is Permission.ALLOW
            and a.pattern_type is PatternType.LITERAL]
    if not mine:
        return None
    cluster = {a.operation for a in mine if a.resource_type is CLUSTER}
    by_topic: dict[str, set[Operation]] = {}
    for a in mine:
        if a.resource_type is TOPIC:
            by_topic.setdefault(a.name, set()).add(a.operation)

    def flags(ops: set[Operation]) -> tuple[bool, bool, bool]:
        manage = Op.ALL in ops or set(_ALL_TOPIC_OPS) <= ops
        return manage, manage or Op.READ in ops, manage or Op.WRITE in ops

    any_ops = by_topic.pop(WILDCARD, set())
    manage, read, send = flags(any_ops)
    alter = Op.ALTER in cluster or Op.ALL in cluster
    describe = alter or Op.DESCRIBE in cluster or Op.CREATE in cluster
    glob = GlobalPermissions(
        manage_servers=alter, read_servers=describe, manage_users=alter, read_users=describe,
        manage_streams=Op.CREATE in cluster or Op.ALL in cluster, read_streams=describe and read,
        manage_topics=manage, read_topics=read, poll_messages=read, send_messages=send)
    streams: dict[int, list[tuple[int, TopicPermissions]]] = {}
    for name, ops in sorted(by_topic.items()):
        where = locate(name)
        if where is None:
            continue
        t_manage, t_read, t_send = flags(ops)
        streams.setdefault(where[0], []).append(
            (where[1], TopicPermissions(t_manage, t_read, t_read, t_send)))
    stream_perms = tuple((sid, StreamPermissions(topics=tuple(sorted(
        {tid: perms for tid, perms in topics}.items(), key=lambda item: item[0]))))
                         for sid, topics in sorted(streams.items()))
    return Permissions(glob, stream_perms or None)
