"""The Iggy system commands: Ping, GetStats, GetSnapshot, GetClusterMetadata and the client
listings GetMe, GetClient, GetClients.

Owns: ``SystemHandlers`` and the figures GetStats reports (the catalog's counts, the
transport's byte counters, the host facts from the injected ``system_info``), the
``snapshot.json`` archive of GetSnapshot, and ``SERVER_VERSION``/``SERVER_SEMVER``.

Must not import: Twisted's reactor, sockets, files (the snapshot archive is built in
memory; host facts come from ``system_info``), the store, the protocol.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from dataclasses import fields

from broker.iggy import codec as c
from broker.iggy.access import Need
from broker.iggy.codec import ClientGroup, ClientInfo
from broker.iggy.handlers.context import Context, Session
from broker.iggy.handlers.sessions import Sessions
from broker.services.iggy_users import User

__all__ = ["SystemHandlers", "SERVER_VERSION", "SERVER_SEMVER"]

SERVER_VERSION = "skerry 0.1.0 (iggy binary protocol 0.8)"
SERVER_SEMVER = 1000  # 0.1.0 as Iggy numbers versions: major * 1_000_000 + minor * 1_000 + patch


class SystemHandlers:
    """Ping, stats, snapshot, cluster metadata and the client listings."""

    def __init__(self, ctx: Context, sessions: Sessions) -> None:
        self.ctx = ctx
        self.sessions = sessions
        self.started_at_us = ctx.now_us()
        self._started_at_s = ctx.clock.seconds()

    def ping(self, session: Session, user: User | None, cmd: c.Ping) -> bytes:
        return b""

    def get_stats(self, session: Session, user: User, cmd: c.GetStats) -> bytes:
        self.ctx.need(session, Need.DESCRIBE_CLUSTER)
        return c.encode_stats(self._stats())

    def get_snapshot(self, session: Session, user: User, cmd: c.GetSnapshot) -> bytes:
        """A zip archive with one ``snapshot.json``: stats, streams, topics, clients."""
        self.ctx.need(session, Need.DESCRIBE_CLUSTER)
        stats = self._stats()
        doc = {
            "server": SERVER_VERSION,
            "stats": {f.name: getattr(stats, f.name) for f in fields(stats)},
            "catalog": self.ctx.catalog.to_json(),
            "clients": [{"client_id": s.client_id, "address": s.address, "user_id": s.user_id,
                         "consumer_groups": len(s.memberships)}
                        for s in self.sessions.all()],
        }
        # gmtime only converts the injected clock's value (zip needs 1980 or later).
        stamp = time.gmtime(max(self.ctx.now_us() // 1_000_000, 315532800))[:6]
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            info = zipfile.ZipInfo("snapshot.json", date_time=stamp)
            archive.writestr(info, json.dumps(doc, indent=2, sort_keys=True))
        return buffer.getvalue()

    def get_cluster_metadata(self, session: Session, user: User,
                             cmd: c.GetClusterMetadata) -> bytes:
        node = self.ctx.node
        return c.encode_cluster_metadata("skerry", [c.ClusterNode(node.name, node.ip,
                                                                  node.tcp_port)])

    def get_me(self, session: Session, user: User, cmd: c.GetMe) -> bytes:
        return c.encode_client_details(*self._client_info(session))

    def get_client(self, session: Session, user: User, cmd: c.GetClient) -> bytes:
        self.ctx.need(session, Need.DESCRIBE_CLUSTER)
        other = self.sessions.get(cmd.client_id)
        return b"" if other is None else c.encode_client_details(*self._client_info(other))

    def get_clients(self, session: Session, user: User, cmd: c.GetClients) -> bytes:
        self.ctx.need(session, Need.DESCRIBE_CLUSTER)
        return b"".join(c.encode_client(self._client_info(s)[0]) for s in self.sessions.all())

    # ---------------------------------------------------------------- helpers

    def _counts(self) -> tuple[int, int, int, int, int, int, int]:
        """(streams, topics, partitions, segments, messages, bytes, groups) of the catalog."""
        ctx = self.ctx
        ctx.catalog.sync_default()
        streams = topics = partitions = segments = messages = size = groups = 0
        for stream in ctx.catalog.list_streams():
            streams += 1
            for topic in stream.topics.values():
                config = ctx.core.topic_config(topic.store)
                if config is None:
                    continue
                topics += 1
                groups += len(topic.groups)
                for p in range(config.partitions):
                    info = ctx.partition_info(topic, p)
                    partitions += 1
                    segments += info.segments_count
                    messages += info.messages_count
                    size += info.size
        return streams, topics, partitions, segments, messages, size, groups

    def _stats(self) -> c.StatsInfo:
        ctx = self.ctx
        sysinfo = ctx.system_info()
        streams, topics, partitions, segments, messages, size, groups = self._counts()
        run_time = int((ctx.clock.seconds() - self._started_at_s) * 1_000_000)
        return c.StatsInfo(
            process_id=sysinfo.process_id, cpu_usage=sysinfo.cpu_usage,
            total_cpu_usage=sysinfo.total_cpu_usage, memory_usage=sysinfo.memory_usage,
            total_memory=sysinfo.total_memory, available_memory=sysinfo.available_memory,
            run_time=max(0, run_time), start_time=self.started_at_us,
            read_bytes=ctx.read_bytes, written_bytes=ctx.written_bytes,
            messages_size_bytes=size, streams_count=streams, topics_count=topics,
            partitions_count=partitions, segments_count=segments, messages_count=messages,
            clients_count=len(self.sessions), consumer_groups_count=groups,
            hostname=sysinfo.hostname, os_name=sysinfo.os_name, os_version=sysinfo.os_version,
            kernel_version=sysinfo.kernel_version, server_version=SERVER_VERSION,
            server_semver=SERVER_SEMVER, threads_count=sysinfo.threads_count,
            free_disk_space=sysinfo.free_disk_space, total_disk_space=sysinfo.total_disk_space)

    @staticmethod
    def _client_info(s: Session) -> tuple[ClientInfo, list[ClientGroup]]:
        groups = [ClientGroup(m.stream_id, m.topic_id, m.group_id)
                  for m in sorted(s.memberships.values(),
                                  key=lambda m: (m.stream_id, m.topic_id, m.group_id))]
        return ClientInfo(s.client_id, s.user_id, s.address, len(groups)), groups
