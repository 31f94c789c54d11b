"""The Iggy message commands: SendMessages, PollMessages, FlushUnsavedBuffer and the stored
consumer offsets (GetConsumerOffset, StoreConsumerOffset, DeleteConsumerOffset).

Owns: ``MessageHandlers``: picking a partition (given, by key, or balanced round-robin per
topic), checking the message area and handing it to ``BrokerCore.produce`` as is
(stored records are Iggy messages), choosing where a poll starts (offset, timestamp,
first, last, next: the consumer's stored offset) and answering ``ReadResult.raw`` as is,
and stored offsets, which are the committed offsets of a V1 group: the consumer group's
own, or ``iggy.consumer.<id>`` for a plain consumer (Iggy's "stored offset" is the last
one consumed, V1's committed offset the next one to read: they differ by one).

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

import struct
from typing import Any

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from broker.core import ProduceRequest, ProduceResult
from broker.errors import SkerryError
from broker.iggy import codec as c
from broker.iggy.access import NEEDS, Need
from broker.iggy.codec import ConsumerKind, PartitioningKind, PollingKind
from broker.iggy.errors import IggyError, Status
from broker.iggy.handlers.context import Context, Session
from broker.iggy.handlers.sessions import Sessions
from broker.services.iggy_catalog import TopicEntry
from broker.services.iggy_users import User

__all__ = ["MessageHandlers"]

_U32 = struct.Struct("<I")
_EMPTY_POLL = c.encode_polled_prefix(0, 0, 0)


class MessageHandlers:
    """Sending, polling and flushing messages; stored consumer offsets."""

    def __init__(self, ctx: Context, sessions: Sessions) -> None:
        self.ctx = ctx
        self.core = ctx.core
        self.groups = ctx.groups
        self.sessions = sessions

    # ================================================================ messages

    def send_messages(self, session: Session, user: User,
                      cmd: c.SendMessages) -> Deferred[bytes]:
        ctx = self.ctx
        stream, topic, config = ctx.topic(cmd.stream, cmd.topic)
        ctx.need(session, Need.WRITE_TOPIC, topic.store)
        count = config.partitions
        kind = cmd.partitioning
        if kind is PartitioningKind.PARTITION_ID:
            partition = _U32.unpack(cmd.key)[0]
            ctx.check_partition(config, partition)
        elif kind is PartitioningKind.MESSAGES_KEY:
            partition = self.core.partition_for_key(cmd.key, count)
        else:
            at = ctx.balanced.get(topic.store, 0)
            partition = at % count
            ctx.balanced[topic.store] = at + 1
        ends = c.check_messages(cmd.messages, cmd.count, ctx.max_payload, ends=cmd.ends)
        d: Deferred[bytes] = Deferred()

        def done(result: ProduceResult) -> None:
            if result.error is None:
                d.callback(b"")
            else:
                d.errback(result.error)

        self.core.produce(ProduceRequest(topic.store, partition, "1", framed=cmd.messages,
                                         ends=ends), done)
        ctx.written_bytes += len(cmd.messages)
        return d

    def poll_messages(self, session: Session, user: User,
                      cmd: c.PollMessages) -> bytes | Deferred[bytes]:
        ctx = self.ctx
        stream, topic, config = ctx.topic(cmd.stream, cmd.topic)
        ctx.need(session, Need.READ_TOPIC, topic.store)
        if cmd.count == 0:
            raise IggyError(Status.INVALID_MESSAGES_COUNT, "count must be at least 1")
        return _now_or_later(ctx.find_offsets_group(topic, cmd.consumer).addCallback(
            self._poll_as, session, cmd, topic, config))

    def _poll_as(self, group: str, session: Session, cmd: c.PollMessages, topic: TopicEntry,
                 config: Any) -> bytes | Deferred[bytes]:
        self.ctx.need(session, Need.READ_GROUP, group)
        consumer = cmd.consumer
        partition = cmd.partition_id
        if partition is None:
            if consumer.kind is ConsumerKind.CONSUMER_GROUP:
                membership = session.memberships.get((topic.store, group))
                if membership is None:
                    raise IggyError(Status.CONSUMER_GROUP_MEMBER_NOT_FOUND,
                                    f"client {session.client_id} is not a member of {group}")

                def chosen(assigned: list[int]) -> bytes | Deferred[bytes]:
                    if not assigned:
                        return _EMPTY_POLL
                    partition = assigned[membership.cursor % len(assigned)]
                    membership.cursor += 1
                    return self._poll(session, cmd, topic, config, group, partition)

                d = self.sessions.assigned(session, group, topic.store)
                return _now_or_later(d.addCallback(chosen))
            partition = 0
        return self._poll(session, cmd, topic, config, group, partition)

    def _poll(self, session: Session, cmd: c.PollMessages, topic: TopicEntry, config: Any,
              group: str, partition: int) -> bytes | Deferred[bytes]:
        ctx = self.ctx
        ctx.check_partition(config, partition)
        store = topic.store
        strategy = cmd.strategy
        if strategy is PollingKind.NEXT:
            d = self.ctx.router.offset(group, store, partition)
            return _now_or_later(d.addCallback(
                lambda start: self._read(session, cmd, store, group, partition, start)))
        hw = self.core.hw(store, partition)
        if strategy is PollingKind.OFFSET:
            start = cmd.value
        elif strategy is PollingKind.FIRST:
            start = self.core.partition_summary(store, partition).first_offset
        elif strategy is PollingKind.LAST:
            first = self.core.partition_summary(store, partition).first_offset
            start = max(first, hw + 1 - cmd.count)
        else:
            found = self.core.offset_for_timestamp(store, partition, cmd.value)
            start = hw + 1 if found is None or found > hw else found
        return self._read(session, cmd, store, group, partition, start)

    def _read(self, session: Session, cmd: c.PollMessages, store: str, group: str,
              partition: int, start: int) -> bytes | Deferred[bytes]:
        result, hw = self.core.read_raw(store, partition, start, cmd.count, create=False)
        reply = c.encode_polled_prefix(partition, max(hw, 0), result.count) + result.raw
        self.ctx.read_bytes += len(result.raw)
        if not (cmd.auto_commit and result.count):
            return reply
        d = self.sessions.commit(session, group, store, partition, result.next_offset)
        return d.addCallback(lambda _: reply)

    def flush_unsaved_buffer(self, session: Session, user: User,
                             cmd: c.FlushUnsavedBuffer) -> bytes | Deferred[bytes]:
        stream, topic, config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.WRITE_TOPIC, topic.store)
        self.ctx.check_partition(config, cmd.partition_id)
        self.core.flush()
        if not cmd.fsync:
            return b""
        d: Deferred[bytes] = Deferred()

        def synced(error: SkerryError | None) -> None:
            if error is None:
                d.callback(b"")
            else:
                d.errback(error)

        self.core.wait_synced(topic.store, cmd.partition_id, synced)
        return d

    # ================================================================ consumer offsets

    def get_consumer_offset(self, session: Session, user: User,
                            cmd: c.GetConsumerOffset) -> bytes | Deferred[bytes]:
        def found(target: tuple[TopicEntry, str, int]) -> Deferred[bytes]:
            topic, group, partition = target

            def answer(committed: int) -> bytes:
                if committed == 0:
                    return b""
                hw = self.core.hw(topic.store, partition)
                return c.encode_consumer_offset(partition, max(hw, 0), committed - 1)

            return self.ctx.router.offset(group, topic.store, partition).addCallback(answer)

        return _now_or_later(self._offset_target(session, cmd).addCallback(found))

    def store_consumer_offset(self, session: Session, user: User,
                              cmd: c.StoreConsumerOffset) -> Deferred[bytes]:
        def found(target: tuple[TopicEntry, str, int]) -> Deferred[None]:
            topic, group, partition = target
            hw = self.core.hw(topic.store, partition)
            if cmd.offset > hw:
                raise IggyError(Status.INVALID_OFFSET, f"offset {cmd.offset} is past the "
                                f"partition's current offset {hw}")
            return self.sessions.commit(session, group, topic.store, partition,
                                        cmd.offset + 1)

        return self._offset_target(session, cmd).addCallback(found).addCallback(
            lambda _: b"")

    def delete_consumer_offset(self, session: Session, user: User,
                               cmd: c.DeleteConsumerOffset) -> Deferred[bytes]:
        def found(target: tuple[TopicEntry, str, int]) -> Deferred[None]:
            topic, group, partition = target

            def held(committed: int) -> Deferred[None]:
                if committed == 0:
                    raise IggyError(Status.CONSUMER_OFFSET_NOT_FOUND,
                                    f"no stored offset for partition {partition}")
                return self.sessions.commit(session, group, topic.store, partition, 0)

            return self.ctx.router.offset(group, topic.store, partition).addCallback(held)

        return self._offset_target(session, cmd).addCallback(found).addCallback(
            lambda _: b"")

    def _offset_target(self, session: Session, cmd: Any
                       ) -> Deferred[tuple[TopicEntry, str, int]]:
        """The topic, the V1 group holding the consumer's offsets and the partition (0 when
        the command names none) of an offset command."""
        stream, topic, config = self.ctx.topic(cmd.stream, cmd.topic)
        topic_need, group_need = NEEDS[type(cmd)]
        self.ctx.need(session, topic_need, topic.store)

        def found(group: str) -> tuple[TopicEntry, str, int]:
            self.ctx.need(session, group_need, group)
            partition = 0 if cmd.partition_id is None else cmd.partition_id
            self.ctx.check_partition(config, partition)
            return topic, group, partition

        return self.ctx.find_offsets_group(topic, cmd.consumer).addCallback(found)


def _now_or_later(d: Deferred[Any]) -> Any:
    """The result of ``d`` when it has one already (a group served here: the reply is
    written at once, as before there were coordinators), else ``d`` itself."""
    if d.called and not d.paused and not isinstance(d.result, (Deferred, Failure)):
        value = d.result
        d.addErrback(lambda _: None)
        return value
    return d
