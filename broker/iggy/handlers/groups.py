"""The Iggy consumer-group commands: GetConsumerGroup(s), CreateConsumerGroup,
DeleteConsumerGroup, JoinConsumerGroup, LeaveConsumerGroup.

Owns: ``GroupHandlers``. An Iggy consumer group is the V1 group of the same name on the
topic's store topic: its id comes from the catalog, its members and their partitions from
the ``GroupService`` (each Iggy client joins as its own member, see ``Sessions``). A group
with V1 members is not deleted from the Iggy side.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred

from broker.iggy import codec as c
from broker.iggy.access import Need
from broker.iggy.codec import ConsumerGroupInfo, GroupMemberInfo
from broker.iggy.errors import IggyError, Status
from broker.iggy.handlers.context import Context, Membership, Session, all_done
from broker.iggy.handlers.sessions import Sessions
from broker.services.iggy_catalog import GroupEntry, TopicEntry
from broker.services.iggy_users import User

__all__ = ["GroupHandlers"]


class GroupHandlers:
    """Consumer groups: listing, creating, deleting, joining and leaving them."""

    def __init__(self, ctx: Context, sessions: Sessions) -> None:
        self.ctx = ctx
        self.groups = ctx.groups
        self.sessions = sessions

    def get_consumer_group(self, session: Session, user: User,
                           cmd: c.GetConsumerGroup) -> bytes:
        stream, topic, config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.DESCRIBE_TOPIC, topic.store)
        try:
            group = self.ctx.group(topic, cmd.group)
        except IggyError:
            return b""
        self.ctx.need(session, Need.DESCRIBE_GROUP, group.name)
        return c.encode_consumer_group_details(*self._group_info(topic, group,
                                                                 config.partitions))

    def get_consumer_groups(self, session: Session, user: User,
                            cmd: c.GetConsumerGroups) -> bytes:
        stream, topic, config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.DESCRIBE_TOPIC, topic.store)
        self.ctx.adopt_groups(topic)
        return b"".join(c.encode_consumer_group(self._group_info(topic, g, config.partitions)[0])
                        for g in sorted(topic.groups.values(), key=lambda g: g.id))

    def create_consumer_group(self, session: Session, user: User,
                              cmd: c.CreateConsumerGroup) -> bytes:
        stream, topic, config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.READ_TOPIC, topic.store)
        self.ctx.need(session, Need.READ_GROUP, cmd.name)
        self.ctx.adopt_groups(topic)
        group = self.ctx.catalog.add_group(topic, cmd.name)
        return c.encode_consumer_group_details(*self._group_info(topic, group,
                                                                 config.partitions))

    def delete_consumer_group(self, session: Session, user: User,
                              cmd: c.DeleteConsumerGroup) -> Deferred[bytes]:
        stream, topic, _config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.DESCRIBE_TOPIC, topic.store)
        group = self.ctx.group(topic, cmd.group)
        self.ctx.need(session, Need.DELETE_GROUP, group.name)
        grp = self.groups.group(group.name, topic.store)
        prefix = self.sessions.member_prefix()
        if grp is not None and any(not m.startswith(prefix) for m in grp.members):
            raise IggyError(Status.ERROR,
                            f"group {group.name} has V1 members; they must leave first")
        waits = []
        for other in self.sessions.all():
            membership = other.memberships.get((topic.store, group.name))
            if membership is not None:
                waits.append(self.sessions.leave(other, membership))
        if (group.name, topic.store) in set(self.groups.list_groups()):
            waits.append(self.groups.delete_group(group.name, topic.store))
        self.ctx.catalog.remove_group(topic, group)
        return all_done(waits).addCallback(lambda _: b"")

    def join_consumer_group(self, session: Session, user: User,
                            cmd: c.JoinConsumerGroup) -> Deferred[bytes]:
        stream, topic, _config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.READ_TOPIC, topic.store)
        group = self.ctx.group(topic, cmd.group)
        self.ctx.need(session, Need.READ_GROUP, group.name)
        membership = Membership(stream.id, topic.id, group.id, group.name, topic.store)
        return self.sessions.join(session, membership).addCallback(lambda _: b"")

    def leave_consumer_group(self, session: Session, user: User,
                             cmd: c.LeaveConsumerGroup) -> Deferred[bytes]:
        stream, topic, _config = self.ctx.topic(cmd.stream, cmd.topic)
        group = self.ctx.group(topic, cmd.group)
        self.ctx.need(session, Need.READ_GROUP, group.name)
        membership = session.memberships.get((topic.store, group.name))
        if membership is None:
            raise IggyError(Status.CONSUMER_GROUP_MEMBER_NOT_FOUND,
                            f"client {session.client_id} is not a member of {group.name}")
        return self.sessions.leave(session, membership).addCallback(lambda _: b"")

    def _group_info(self, topic: TopicEntry, group: GroupEntry, partitions: int
                    ) -> tuple[ConsumerGroupInfo, list[GroupMemberInfo]]:
        grp = self.groups.group(group.name, topic.store)
        members: list[GroupMemberInfo] = []
        if grp is not None:
            members = sorted((GroupMemberInfo(self.sessions.member_client(m),
                                              tuple(grp.assigned(m)))
                              for m in grp.members), key=lambda m: m.id)
        return ConsumerGroupInfo(group.id, partitions, len(members), group.name), members
