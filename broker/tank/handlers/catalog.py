"""The TANK catalog requests: DiscoverPartitions (0x06), CreateTopic (0x07), and the
standalone answers to ReloadConf (0x08), Status (0x0a), DiscoverTopics (0x0b) and
DiscoverTopology (0x0c) (spec/tank-notes.md §7).

Owns: ``CatalogHandlers``. DiscoverPartitions gives each partition's first available seq
and hw (TANK numbering, ``Context.marks``), a follower's 0xfd (0xfc with the leader once
known), 0xfb for a partition id the topic does not have, and count 0 for an unknown topic.
CreateTopic creates the store topic with that many partitions and the configured
defaults (1 already exists, 4 invalid name or partition count; the TANK partition config
text is accepted and ignored: Skerry's retention is set in its own configuration).
Skerry answers as one standalone TANK node: Status and DiscoverTopics are not cluster
aware, DiscoverTopology says "single node" (count 0xFFFF); ReloadConf has nothing to
reload (TANK re-reads a partition's config file) and answers 0 for an existing partition,
1 otherwise.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

import logging

from broker.errors import SkerryError
from broker.tank.codec import (
    CreateTopic,
    CreateTopicError,
    CreateTopicReply,
    DiscoverPartitions,
    DiscoverPartitionsReply,
    DiscoverTopics,
    DiscoverTopicsReply,
    DiscoverTopology,
    DiscoverTopologyReply,
    PartitionFault,
    PartitionUnavailable,
    PartitionWatermarks,
    ReloadConf,
    ReloadConfReply,
    Status,
    StatusReply,
    TopicInfo,
)
from broker.tank.errors import create_topic_code
from broker.tank.handlers.context import Context
from data.names import is_valid_name

__all__ = ["CatalogHandlers"]

log = logging.getLogger("skerry.tank")


class CatalogHandlers:
    """Topics and partitions, and the single-node answers."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.core = ctx.core

    def discover_partitions(self, req: DiscoverPartitions) -> DiscoverPartitionsReply:
        found = self.ctx.topic(req.topic)
        if found is None:
            return DiscoverPartitionsReply(req.request_id, req.topic, ())
        name, count = found
        ids = req.partitions or tuple(range(min(count, 0xFFFF)))
        out: list[PartitionWatermarks | PartitionUnavailable] = []
        for partition in ids:
            if partition >= count:
                out.append(PartitionUnavailable(PartitionFault.SYSTEM))
            elif not self.ctx.is_leader(name, partition):
                leader = self.ctx.leader_of(name, partition)
                out.append(PartitionUnavailable(PartitionFault.NO_LEADER) if leader is None
                           else PartitionUnavailable(PartitionFault.OTHER_LEADER, leader))
            else:
                try:
                    marks = self.ctx.marks(name, partition)
                except (KeyError, IndexError, SkerryError):
                    out.append(PartitionUnavailable(PartitionFault.SYSTEM))
                    continue
                out.append(PartitionWatermarks(marks.first_available, marks.hw))
        return DiscoverPartitionsReply(req.request_id, req.topic, tuple(out))

    def create_topic(self, req: CreateTopic) -> CreateTopicReply:
        try:
            name = req.topic.decode("ascii")
        except UnicodeDecodeError:
            name = ""
        if not is_valid_name(name) or not 1 <= req.partitions <= \
                self.ctx.max_partitions_per_topic:
            return CreateTopicReply(req.request_id, req.topic, CreateTopicError.INVALID_REQUEST)
        if self.core.topic_config(name) is not None:
            return CreateTopicReply(req.request_id, req.topic, CreateTopicError.ALREADY_EXISTS)
        if req.config:
            log.info("tank: CreateTopic %s: TANK partition config ignored (%d bytes)", name,
                     len(req.config))
        try:
            self.core.create_topic(name, req.partitions,
                                   self.core.config.topic_defaults.replication_factor,
                                   None, None, None)
        except SkerryError as error:
            log.info("tank: CreateTopic %s refused: %s", name, error)
            return CreateTopicReply(req.request_id, req.topic, create_topic_code(error))
        except OSError as error:  # out of file descriptors or disk space, say
            log.warning("tank: CreateTopic %s failed: %s", name, error)
            return CreateTopicReply(req.request_id, req.topic, CreateTopicError.SYSTEM_FAULT)
        return CreateTopicReply(req.request_id, req.topic, CreateTopicError.OK)

    def reload_conf(self, req: ReloadConf) -> ReloadConfReply:
        found = self.ctx.topic(req.topic)
        ok = found is not None and req.partition < found[1]
        return ReloadConfReply(req.request_id, req.topic, req.partition, 0 if ok else 1)

    def status(self, req: Status) -> StatusReply:
        names = self.core.topic_names()
        partitions = 0
        for name in names:
            config = self.core.topic_config(name)
            partitions += 0 if config is None else config.partitions
        return StatusReply(req.request_id, len(names), partitions)

    def discover_topics(self, req: DiscoverTopics) -> DiscoverTopicsReply:
        topics = []
        for name in sorted(self.core.topic_names()):
            config = self.core.topic_config(name)
            if config is not None:
                topics.append(TopicInfo(name.encode("ascii"), min(config.partitions, 0xFFFF)))
        return DiscoverTopicsReply(req.request_id, tuple(topics))

    def discover_topology(self, req: DiscoverTopology) -> DiscoverTopologyReply:
        return DiscoverTopologyReply(req.request_id)
