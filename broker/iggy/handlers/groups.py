"""The Iggy consumer-group commands: GetConsumerGroup(s), CreateConsumerGroup,
DeleteConsumerGroup, JoinConsumerGroup, LeaveConsumerGroup.

Owns: ``GroupHandlers``. An Iggy consumer group is the V1 group of the same name on the
topic's store topic: its id comes from the catalog, its members and their partitions from
the group's coordinator through the context's ``GroupRouter`` (each Iggy client joins as
its own member, see ``Sessions``). A group with V1 members is not deleted from the Iggy
side.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, FirstError, gatherResults
from twisted.python.failure import Failure

from broker.errors import GenerationMismatch
from broker.iggy import codec as c
from broker.iggy.access import Need
from broker.iggy.codec import ConsumerGroupInfo, GroupMemberInfo
from broker.iggy.errors import IggyError, Status
from broker.iggy.handlers.context import Context, Membership, Session, all_done
from broker.iggy.handlers.sessions import Sessions
from broker.services.group_router import GroupView
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
                           cmd: c.GetConsumerGroup) -> Deferred[bytes]:
        stream, topic, config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.DESCRIBE_TOPIC, topic.store)

        def found(group: GroupEntry) -> Deferred[bytes]:
            self.ctx.need(session, Need.DESCRIBE_GROUP, group.name)
            return self._group_info(topic, group, config.partitions).addCallback(
                lambda info: c.encode_consumer_group_details(*info))

        def missing(failure: Failure) -> bytes:
            failure.trap(IggyError)
            return b""

        return self.ctx.find_group(topic, cmd.group).addCallbacks(found, missing)

    def get_consumer_groups(self, session: Session, user: User,
                            cmd: c.GetConsumerGroups) -> Deferred[bytes]:
        stream, topic, config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.DESCRIBE_TOPIC, topic.store)

        def adopted(_: object) -> Deferred[bytes]:
            groups = sorted(topic.groups.values(), key=lambda g: g.id)
            infos = [self._group_info(topic, g, config.partitions) for g in groups]
            return gather_results(infos).addCallback(
                lambda done: b"".join(c.encode_consumer_group(info[0]) for info in done))

        return self.ctx.adopt_all(topic).addCallback(adopted)

    def create_consumer_group(self, session: Session, user: User,
                              cmd: c.CreateConsumerGroup) -> Deferred[bytes]:
        stream, topic, config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.READ_TOPIC, topic.store)
        self.ctx.need(session, Need.READ_GROUP, cmd.name)

        def adopted(_: object) -> Deferred[bytes]:
            group = self.ctx.catalog.add_group(topic, cmd.name)
            return self._group_info(topic, group, config.partitions).addCallback(
                lambda info: c.encode_consumer_group_details(*info))

        return self.ctx.adopt_all(topic).addCallback(adopted)

    def delete_consumer_group(self, session: Session, user: User,
                              cmd: c.DeleteConsumerGroup) -> Deferred[bytes]:
        stream, topic, _config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.DESCRIBE_TOPIC, topic.store)
        router = self.ctx.router

        def found(group: GroupEntry) -> Deferred[bytes]:
            self.ctx.need(session, Need.DELETE_GROUP, group.name)
            return router.view(group.name, topic.store).addCallback(seen, group)

        def seen(view: GroupView | None, group: GroupEntry) -> Deferred[bytes]:
            if view is not None and any(not m.startswith("iggy-") for m in view.members):
                raise IggyError(Status.ERROR,
                                f"group {group.name} has V1 members; they must leave first")
            waits = []
            for other in self.sessions.all():
                membership = other.memberships.get((topic.store, group.name))
                if membership is not None:
                    waits.append(self.sessions.leave(other, membership))
            self.ctx.catalog.remove_group(topic, group)

            def delete(_: object) -> Deferred[None]:
                return router.delete_group(group.name, topic.store).addErrback(
                    lambda f: f.trap(GenerationMismatch))  # nothing to delete there

            return all_done(waits).addCallback(delete).addCallback(lambda _: b"")

        return self.ctx.find_group(topic, cmd.group).addCallback(found)

    def join_consumer_group(self, session: Session, user: User,
                            cmd: c.JoinConsumerGroup) -> Deferred[bytes]:
        stream, topic, _config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.READ_TOPIC, topic.store)

        def found(group: GroupEntry) -> Deferred[bytes]:
            self.ctx.need(session, Need.READ_GROUP, group.name)
            membership = Membership(stream.id, topic.id, group.id, group.name, topic.store)
            return self.sessions.join(session, membership).addCallback(lambda _: b"")

        return self.ctx.find_group(topic, cmd.group).addCallback(found)

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
                    ) -> Deferred[tuple[ConsumerGroupInfo, list[GroupMemberInfo]]]:
        def seen(view: GroupView | None) -> tuple[ConsumerGroupInfo, list[GroupMemberInfo]]:
            members: list[GroupMemberInfo] = []
            if view is not None:
                members = sorted((GroupMemberInfo(self.sessions.member_client(m),
                                                  tuple(parts))
                                  for m, parts in view.members.items()), key=lambda m: m.id)
            return ConsumerGroupInfo(group.id, partitions, len(members), group.name), members

        return self.ctx.router.view(group.name, topic.store).addCallback(seen)


def gather_results(waits: list[Deferred[Any]]) -> Deferred[list[Any]]:
    """Every result of ``waits`` in order; the first failure fails the whole."""
    return gatherResults(waits, consumeErrors=True).addErrback(
        lambda f: f.value.subFailure if f.check(FirstError) else f)
