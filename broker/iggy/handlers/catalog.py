"""The Iggy catalog commands: streams, topics, partitions and segments.

Owns: ``CatalogHandlers``: GetStream(s), CreateStream, UpdateStream, DeleteStream,
PurgeStream, GetTopic(s), CreateTopic, UpdateTopic, DeleteTopic, PurgeTopic,
CreatePartitions, DeletePartitions (refused: the store never removes a partition) and
DeleteSegments. Streams, topics and their Iggy settings are kept by
``broker.services.iggy_catalog.Catalog``; the store topics behind them are created,
deleted, grown and purged through ``BrokerCore``; a topic going away takes its consumer
groups and stored offsets with it.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

import logging

from twisted.internet.defer import Deferred

from broker.iggy import codec as c
from broker.iggy.access import Need
from broker.iggy.errors import IggyError, Status
from broker.iggy.handlers.context import Context, Session, all_done
from broker.iggy.handlers.sessions import Sessions
from broker.services.iggy_catalog import STORE_PREFIX, StreamEntry, TopicEntry, store_retention
from broker.services.iggy_users import User

__all__ = ["CatalogHandlers"]

log = logging.getLogger("skerry.iggy")


class CatalogHandlers:
    """Streams, topics, partitions and segments."""

    def __init__(self, ctx: Context, sessions: Sessions) -> None:
        self.ctx = ctx
        self.catalog = ctx.catalog
        self.core = ctx.core
        self.sessions = sessions

    # ================================================================ streams

    def get_stream(self, session: Session, user: User, cmd: c.GetStream) -> bytes:
        stream = self.catalog.stream(cmd.stream.value)
        if stream is None:
            self.ctx.need(session, Need.DESCRIBE_CLUSTER)
            return b""
        if not self._may_see(session, stream):
            self.ctx.need(session, Need.DESCRIBE_CLUSTER)
        return c.encode_stream_details(*self.ctx.stream_info(stream))

    def get_streams(self, session: Session, user: User, cmd: c.GetStreams) -> bytes:
        self.catalog.sync_default()
        return b"".join(c.encode_stream(self.ctx.stream_info(s)[0])
                        for s in self.catalog.list_streams()
                        if self._may_see(session, s))

    def _may_see(self, session: Session, stream: StreamEntry) -> bool:
        """Describe Cluster, or Describe on one of the stream's topics."""
        return self.ctx.may(session, Need.DESCRIBE_CLUSTER) or any(
            self.ctx.may(session, Need.DESCRIBE_TOPIC, t.store) for t in stream.topics.values())

    def create_stream(self, session: Session, user: User, cmd: c.CreateStream) -> bytes:
        self.ctx.need(session, Need.CREATE_CLUSTER)
        stream = self.catalog.add_stream(cmd.name)
        log.info("iggy: created stream %r (id %d)", stream.name, stream.id)
        return c.encode_stream_details(*self.ctx.stream_info(stream))

    def update_stream(self, session: Session, user: User, cmd: c.UpdateStream) -> bytes:
        stream = self.ctx.stream(cmd.stream)
        self.ctx.need(session, Need.CREATE_CLUSTER)
        self.catalog.rename_stream(stream, cmd.name)
        return b""

    def delete_stream(self, session: Session, user: User,
                      cmd: c.DeleteStream) -> Deferred[bytes]:
        stream = self.ctx.stream(cmd.stream)
        self.ctx.need(session, Need.CREATE_CLUSTER)
        for topic in stream.topics.values():
            self.ctx.need(session, Need.DELETE_TOPIC, topic.store)
        if stream.is_default:
            raise IggyError(Status.CANNOT_DELETE_STREAM,
                            "stream default holds the V1 topics and cannot be deleted")
        waits = []
        for topic in list(stream.topics.values()):
            waits.append(self._drop_topic(stream, topic, keep_entry=True))
        self.catalog.remove_stream(stream)
        log.info("iggy: deleted stream %r (id %d)", stream.name, stream.id)
        return all_done(waits).addCallback(lambda _: b"")

    def purge_stream(self, session: Session, user: User, cmd: c.PurgeStream) -> Deferred[bytes]:
        stream = self.ctx.stream(cmd.stream)
        if stream.is_default:
            self.catalog.sync_default()
        for topic in stream.topics.values():
            self.ctx.need(session, Need.DELETE_TOPIC, topic.store)
        waits = [self._purge(topic) for topic in list(stream.topics.values())
                 if self.ctx.has_store(topic.store)]
        return all_done(waits).addCallback(lambda _: b"")

    # ================================================================ topics

    def get_topic(self, session: Session, user: User, cmd: c.GetTopic) -> bytes:
        stream = self.ctx.stream(cmd.stream)
        topic = self.catalog.topic(stream, cmd.topic.value, self.ctx.has_store)
        if topic is None:
            self.ctx.need(session, Need.DESCRIBE_TOPIC, cmd.topic.value
                          if stream.is_default and not cmd.topic.numeric else "*")
            return b""
        self.ctx.need(session, Need.DESCRIBE_TOPIC, topic.store)
        return c.encode_topic_details(*self._topic_info(topic))

    def get_topics(self, session: Session, user: User, cmd: c.GetTopics) -> bytes:
        stream = self.ctx.stream(cmd.stream)
        self.ctx.need(session, Need.DESCRIBE_CLUSTER)
        return b"".join(c.encode_topic(t) for t in self.ctx.stream_info(stream)[1])

    def create_topic(self, session: Session, user: User, cmd: c.CreateTopic) -> bytes:
        stream = self.ctx.stream(cmd.stream)
        self.ctx.need_any(session, ((Need.CREATE_CLUSTER, None), (
            Need.CREATE_TOPIC, cmd.name if stream.is_default else STORE_PREFIX)))
        if stream.is_default:
            self.catalog.sync_default()
        self.catalog.check_new_topic(stream, cmd.name)
        if cmd.partitions_count < 1:
            raise IggyError(Status.INVALID_PARTITIONS_COUNT, "a topic needs at least 1 partition")
        if cmd.partitions_count > self.ctx.max_partitions_per_topic:
            raise IggyError(Status.TOO_MANY_PARTITIONS,
                            f"at most {self.ctx.max_partitions_per_topic} partitions per topic")
        if not 1 <= cmd.compression <= 4:
            raise IggyError(Status.INVALID_FORMAT, f"compression algorithm {cmd.compression}")
        if len(self.core.topic_names()) >= self.ctx.max_topics:
            raise IggyError(Status.TOO_MANY_TOPICS, "topic limit reached")
        store = self.catalog.store_name_for(stream, cmd.name)
        retention_ms, retention_bytes = store_retention(cmd.message_expiry, cmd.max_topic_size,
                                                        cmd.partitions_count)
        self.core.create_topic(store, cmd.partitions_count, 1, 1, retention_ms, retention_bytes)
        topic = self.catalog.add_topic(stream, cmd.name, store, compression=cmd.compression,
                                       message_expiry=cmd.message_expiry,
                                       max_topic_size=cmd.max_topic_size,
                                       replication_factor=cmd.replication_factor)
        log.info("iggy: created topic %r in stream %r (store topic %s)", topic.name,
                 stream.name, store)
        return c.encode_topic_details(*self._topic_info(topic))

    def update_topic(self, session: Session, user: User, cmd: c.UpdateTopic) -> bytes:
        stream, topic, config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.ALTER_TOPIC_CONFIGS, topic.store)
        if not 1 <= cmd.compression <= 4:
            raise IggyError(Status.INVALID_FORMAT, f"compression algorithm {cmd.compression}")
        self.catalog.update_topic(stream, topic, name=cmd.name, compression=cmd.compression,
                                  message_expiry=cmd.message_expiry,
                                  max_topic_size=cmd.max_topic_size,
                                  replication_factor=cmd.replication_factor)
        retention_ms, retention_bytes = store_retention(cmd.message_expiry, cmd.max_topic_size,
                                                        config.partitions)
        self.core.set_topic_retention(topic.store, retention_ms, retention_bytes)
        return b""

    def delete_topic(self, session: Session, user: User, cmd: c.DeleteTopic) -> Deferred[bytes]:
        stream, topic, _config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.DELETE_TOPIC, topic.store)
        d = self._drop_topic(stream, topic)
        log.info("iggy: deleted topic %r of stream %r", topic.name, stream.name)
        return d.addCallback(lambda _: b"")

    def purge_topic(self, session: Session, user: User, cmd: c.PurgeTopic) -> Deferred[bytes]:
        stream, topic, _config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.DELETE_TOPIC, topic.store)
        return self._purge(topic).addCallback(lambda _: b"")

    # ================================================================ partitions, segments

    def create_partitions(self, session: Session, user: User,
                          cmd: c.CreatePartitions) -> bytes:
        stream, topic, config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.ALTER_TOPIC, topic.store)
        if cmd.partitions_count < 1:
            raise IggyError(Status.INVALID_PARTITIONS_COUNT, "add at least 1 partition")
        total = config.partitions + cmd.partitions_count
        if total > self.ctx.max_partitions_per_topic:
            raise IggyError(Status.TOO_MANY_PARTITIONS,
                            f"at most {self.ctx.max_partitions_per_topic} partitions per topic")
        self.core.add_partitions(topic.store, total)
        return b""

    def delete_partitions(self, session: Session, user: User,
                          cmd: c.DeletePartitions) -> bytes:
        stream, topic, _config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.ALTER_TOPIC, topic.store)
        raise IggyError(Status.FEATURE_UNAVAILABLE,
                        "partitions are never removed (the store keeps every partition)")

    def delete_segments(self, session: Session, user: User, cmd: c.DeleteSegments) -> bytes:
        stream, topic, config = self.ctx.topic(cmd.stream, cmd.topic)
        self.ctx.need(session, Need.DELETE_TOPIC, topic.store)
        self.ctx.check_partition(config, cmd.partition_id)
        if cmd.segments_count < 1:
            raise IggyError(Status.INVALID_SEGMENTS_COUNT, "delete at least 1 segment")
        self.core.delete_oldest_segments(topic.store, cmd.partition_id, cmd.segments_count)
        return b""

    # ================================================================ helpers

    def _topic_info(self, topic: TopicEntry) -> tuple[c.TopicInfo, list[c.PartitionInfo]]:
        config = self.core.topic_config(topic.store)
        assert config is not None  # callers found or created the store topic
        return self.ctx.topic_info(topic, config)

    def _drop_topic(self, stream: StreamEntry, topic: TopicEntry,
                    keep_entry: bool = False) -> Deferred[None]:
        if not keep_entry:
            self.catalog.remove_topic(stream, topic)
        d = self.sessions.forget_groups(topic.store)
        if self.ctx.has_store(topic.store):
            self.core.delete_topic(topic.store)
        self.ctx.balanced.pop(topic.store, None)
        return d

    def _purge(self, topic: TopicEntry) -> Deferred[None]:
        """Remove every message of a topic: the store topic is recreated empty with the
        same settings (offsets start at 0 again) and its stored offsets are forgotten."""
        cfg = self.core.topic_config(topic.store)
        assert cfg is not None  # callers checked that the store topic exists
        d = self.sessions.forget_groups(topic.store)
        self.core.delete_topic(topic.store)
        self.core.create_topic(topic.store, cfg.partitions, cfg.replication_factor,
                               cfg.min_insync_replicas, cfg.retention_ms, cfg.retention_bytes)
        return d
