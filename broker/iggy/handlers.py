"""Iggy command handlers: decoded commands -> core, catalog, users and groups -> replies.

Owns: the explicit table ``{codec.Ping: self.ping, ...}`` with an unknown-command fallback,
the per-client ``Session`` (client id, address, logged-in user, consumer-group memberships
and their partition cursors), the authentication and permission gate every command passes,
and the Iggy semantics over the shared core: streams and topics through the catalog
(``broker.services.iggy_catalog``), messages through ``BrokerCore.produce_batch`` and
``BrokerCore.read`` (records are Iggy messages on disk, so a poll sends ``ReadResult.raw``
as is), consumer groups and stored offsets through the V1 ``GroupService``.

``dispatch(session, code, payload)`` returns the whole reply frame, or a ``Deferred`` that
fires with it (waits for an fsync, ``groups.json``/``offsets.json`` writes, password
hashing). Every failure becomes a status frame; nothing raises out of ``dispatch``.

Must not import: Twisted's reactor, sockets, files (system facts come from the injected
``system_info``); only ``Deferred`` for waiting.
"""

from __future__ import annotations

import io
import json
import logging
import secrets
import struct
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, maybeDeferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

from broker.core import BrokerCore, ProduceResult, fnv1a_32
from broker.errors import SkerryError, Unavailable
from broker.iggy import codec as c
from broker.iggy.codec import (
    ClientGroup,
    ClientInfo,
    ConsumerGroupInfo,
    ConsumerKind,
    GroupMemberInfo,
    Identifier,
    PartitionInfo,
    PartitioningKind,
    PollingKind,
    StreamInfo,
    TokenInfo,
    TopicInfo,
    UserInfo,
)
from broker.iggy.errors import REFUSALS, IggyError, Status, status_for
from broker.services.host_facts import SystemInfo
from broker.services.iggy_catalog import (
    Catalog,
    GroupEntry,
    StreamEntry,
    TopicEntry,
    group_name_for_consumer,
    store_retention,
)
from broker.services.iggy_users import (
    ACTIVE,
    Access,
    Need,
    User,
    UserStore,
    check_password,
    check_status,
    check_username,
    hash_password,
    verify_password,
)

__all__ = ["IggyHandlers", "Session", "SystemInfo", "NodeInfo", "SERVER_VERSION", "SERVER_SEMVER"]

log = logging.getLogger("skerry.iggy")

SERVER_VERSION = "skerry 0.1.0 (iggy binary protocol 0.8)"
SERVER_SEMVER = 1000  # 0.1.0 as Iggy numbers versions: major * 1_000_000 + minor * 1_000 + patch
_U32 = struct.Struct("<I")
_OPEN_CODES = frozenset((c.Code.PING, c.Code.LOGIN_USER, c.Code.LOGIN_WITH_PERSONAL_ACCESS_TOKEN))
_KNOWN_CODES = frozenset(int(code) for code in c.Code)
_EMPTY_POLL = c.encode_polled_prefix(0, 0, 0)


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


Handler = Callable[[Session, User | None, Any], "bytes | Deferred[bytes]"]


class IggyHandlers:
    """The Iggy handler table over one ``BrokerCore``, catalog and user store."""

    def __init__(self, core: BrokerCore, catalog: Catalog, users: UserStore, *,
                 clock: IReactorTime, now_us: Callable[[], int],
                 run_in_thread: Callable[[Callable[[], Any]], Deferred[Any]],
                 system_info: Callable[[], SystemInfo], node: NodeInfo | None = None,
                 scrypt_n: int = 1 << 14, max_payload: int = 1 << 20,
                 session_timeout_ms: int | None = None) -> None:
        self.core = core
        self.catalog = catalog
        self.users = users
        self.clock = clock
        self.now_us = now_us
        self.run_in_thread = run_in_thread
        self.system_info = system_info
        self.node = node or NodeInfo()
        self.scrypt_n = scrypt_n
        self.max_payload = max_payload
        self.session_timeout_ms = session_timeout_ms or core.config["groups.session_timeout_ms"]
        self.sessions: dict[int, Session] = {}
        self._next_client_id = 1
        self.boot = secrets.token_hex(4)
        self._balanced: dict[str, int] = {}
        self._dummy_hash: str | None = None
        self.started_at_us = now_us()
        self._started_at_s = clock.seconds()
        self.read_bytes = 0
        self.written_bytes = 0
        self.table: dict[type, Handler] = {
            c.Ping: self.ping,
            c.GetStats: self.get_stats,
            c.GetSnapshot: self.get_snapshot,
            c.GetClusterMetadata: self.get_cluster_metadata,
            c.GetMe: self.get_me,
            c.GetClient: self.get_client,
            c.GetClients: self.get_clients,
            c.GetUser: self.get_user,
            c.GetUsers: self.get_users,
            c.CreateUser: self.create_user,
            c.DeleteUser: self.delete_user,
            c.UpdateUser: self.update_user,
            c.UpdatePermissions: self.update_permissions,
            c.ChangePassword: self.change_password,
            c.LoginUser: self.login_user,
            c.LogoutUser: self.logout_user,
            c.GetPersonalAccessTokens: self.get_tokens,
            c.CreatePersonalAccessToken: self.create_token,
            c.DeletePersonalAccessToken: self.delete_token,
            c.LoginWithPersonalAccessToken: self.login_token,
            c.PollMessages: self.poll_messages,
            c.SendMessages: self.send_messages,
            c.FlushUnsavedBuffer: self.flush_unsaved_buffer,
            c.GetConsumerOffset: self.get_consumer_offset,
            c.StoreConsumerOffset: self.store_consumer_offset,
            c.DeleteConsumerOffset: self.delete_consumer_offset,
            c.GetStream: self.get_stream,
            c.GetStreams: self.get_streams,
            c.CreateStream: self.create_stream,
            c.DeleteStream: self.delete_stream,
            c.UpdateStream: self.update_stream,
            c.PurgeStream: self.purge_stream,
            c.GetTopic: self.get_topic,
            c.GetTopics: self.get_topics,
            c.CreateTopic: self.create_topic,
            c.DeleteTopic: self.delete_topic,
            c.UpdateTopic: self.update_topic,
            c.PurgeTopic: self.purge_topic,
            c.CreatePartitions: self.create_partitions,
            c.DeletePartitions: self.delete_partitions,
            c.DeleteSegments: self.delete_segments,
            c.GetConsumerGroup: self.get_consumer_group,
            c.GetConsumerGroups: self.get_consumer_groups,
            c.CreateConsumerGroup: self.create_consumer_group,
            c.DeleteConsumerGroup: self.delete_consumer_group,
            c.JoinConsumerGroup: self.join_consumer_group,
            c.LeaveConsumerGroup: self.leave_consumer_group,
        }

    # ================================================================ lifecycle

    def remove_stale_members(self) -> None:
        """Drop group members a previous run of the Iggy transport left behind (their
        connections are gone; a restored member would otherwise hold its partitions until
        its session timed out)."""
        groups = self.core.groups
        for grp in list(groups.coordinator.groups()):
            for member in sorted(grp.members):
                if member.startswith("iggy-") and not member.startswith(self._member_prefix()):
                    try:
                        _logged(groups.leave(grp.group, grp.topic, member, grp.generation),
                                "removing a stale member")
                        log.info("iggy: removed stale member %s of group %s on %s", member,
                                 grp.group, grp.topic)
                    except SkerryError as error:
                        log.warning("iggy: could not remove stale member %s: %s", member,
                                    error.message)

    def open_session(self, address: str) -> Session:
        session = Session(self._next_client_id, address)
        self._next_client_id += 1
        self.sessions[session.client_id] = session
        return session

    def close_session(self, session: Session) -> None:
        """The connection closed: leave its consumer groups."""
        session.closed = True
        self.sessions.pop(session.client_id, None)
        if self.core.closing:
            return
        for membership in list(session.memberships.values()):
            try:
                _logged(self._leave(session, membership), "leaving a group")
            except SkerryError as error:
                log.info("iggy: client %d leaving %s on %s: %s", session.client_id,
                         membership.group, membership.store, error.message)
        session.memberships.clear()

    def _member_prefix(self) -> str:
        return f"iggy-{self.boot}-"

    def member_id(self, session: Session) -> str:
        return f"{self._member_prefix()}{session.client_id}"

    def heartbeat(self) -> None:
        """Refresh the group membership of every connected client (the shell calls this
        every third of the session timeout: Iggy clients send no group heartbeats), and
        rejoin a membership the coordinator lost."""
        groups = self.core.groups
        if self.core.closing:
            return
        for session in list(self.sessions.values()):
            member = self.member_id(session)
            for membership in list(session.memberships.values()):
                grp = groups.coordinator.group(membership.group, membership.store)
                try:
                    if grp is not None and member in grp.members:
                        groups.heartbeat(membership.group, membership.store, member,
                                         grp.generation)
                    else:
                        _logged(groups.join(membership.group, membership.store, member,
                                            session_timeout_ms=self.session_timeout_ms),
                                "rejoining a group")
                except SkerryError as error:
                    log.info("iggy: refreshing client %d in %s on %s: %s", session.client_id,
                             membership.group, membership.store, error.message)

    # ================================================================ dispatch

    def dispatch(self, session: Session, code: int, payload: bytes) -> bytes | Deferred[bytes]:
        """The reply frame for one request (or a Deferred firing with it).

        Checks run in this order: a known code (else InvalidCommand), a logged-in active
        user unless the command is Ping or a login (else Unauthenticated, before the
        payload is even parsed), the payload (its own status), permissions and existence
        inside the handler, then the operation."""
        user: User | None = None
        if session.user_id is not None:
            user = self.users.users.get(session.user_id)
            if user is None or not user.active:
                session.user_id = None
                user = None
        if user is None and code not in _OPEN_CODES:
            return c.frame_error(Status.UNAUTHENTICATED if code in _KNOWN_CODES
                                 else Status.INVALID_COMMAND)
        try:
            cmd = c.decode_request(code, payload)
        except IggyError as error:
            log.debug("iggy: client %d sent a bad request (code %d): %s", session.client_id,
                      code, error.message)
            return c.frame_error(error.status)
        handler = self.table.get(type(cmd))
        if handler is None:
            return c.frame_error(Status.INVALID_COMMAND)
        if self.core.closing and type(cmd) is not c.Ping:
            return c.frame_error(status_for(Unavailable("broker is shutting down")))
        try:
            result = handler(session, user, cmd)
        except REFUSALS as error:
            return c.frame_error(status_for(error))
        except Exception:
            log.exception("iggy: handler for %s failed", type(cmd).__name__)
            return c.frame_error(Status.ERROR)
        if isinstance(result, Deferred):
            return result.addCallbacks(c.frame_ok, self._failed, errbackArgs=(cmd,))
        return c.frame_ok(result)

    @staticmethod
    def _failed(failure: Failure, cmd: Any) -> bytes:
        error = failure.value
        if not isinstance(error, REFUSALS):
            log.error("iggy: %s failed: %s", type(cmd).__name__, failure.getTraceback())
        return c.frame_error(status_for(error))

    # ================================================================ helpers

    @staticmethod
    def _need(user: User, need: Need, stream_id: int | None = None,
              topic_id: int | None = None) -> None:
        if not Access.allows(user, need, stream_id, topic_id):
            raise IggyError(Status.UNAUTHORIZED,
                            f"user {user.username!r} lacks {need.value}"
                            + (f" on stream {stream_id}" if stream_id is not None else "")
                            + (f" topic {topic_id}" if topic_id is not None else ""))

    def _has_store(self, name: str) -> bool:
        return name in self.core.store.topics

    def _stream(self, ident: Identifier) -> StreamEntry:
        return self.catalog.require_stream(ident.value)

    def _topic(self, stream_ident: Identifier, topic_ident: Identifier
               ) -> tuple[StreamEntry, TopicEntry, Any]:
        stream = self._stream(stream_ident)
        topic = self.catalog.require_topic(stream, topic_ident.value, self._has_store)
        return stream, topic, self.core.store.topics[topic.store]

    @staticmethod
    def _partition(store_topic: Any, partition_id: int) -> Any:
        if partition_id >= len(store_topic.partitions):
            raise IggyError(Status.PARTITION_NOT_FOUND,
                            f"partition {partition_id} not found; the topic has "
                            f"{len(store_topic.partitions)}")
        return store_topic.partitions[partition_id]

    def _hw(self, store: str, partition: int) -> int:
        return self.core.hw(store, partition)

    def _partition_info(self, topic: TopicEntry, p: int, plog: Any) -> PartitionInfo:
        hw = self._hw(topic.store, p)
        committed_end = min(plog.next_offset, hw + 1)
        return PartitionInfo(p, topic.created_at, plog.segment_count, max(hw, 0),
                             plog.size_bytes(), max(0, committed_end - plog.first_offset))

    def _topic_info(self, topic: TopicEntry, store_topic: Any
                    ) -> tuple[TopicInfo, list[PartitionInfo]]:
        parts = [self._partition_info(topic, p, plog)
                 for p, plog in enumerate(store_topic.partitions)]
        cfg = store_topic.config
        expiry = topic.message_expiry
        if expiry is None:
            expiry = cfg.retention_ms * 1000 if cfg.retention_ms else 0
        max_size = topic.max_topic_size
        if max_size is None:
            max_size = cfg.retention_bytes * len(parts) if cfg.retention_bytes else 0
        rf = topic.replication_factor
        if rf is None:
            rf = cfg.replication_factor
        info = TopicInfo(topic.id, topic.created_at, len(parts), expiry, topic.compression,
                         max_size, min(rf, 255), sum(p.size for p in parts),
                         sum(p.messages_count for p in parts), topic.name)
        return info, parts

    def _stream_info(self, stream: StreamEntry) -> tuple[StreamInfo, list[TopicInfo]]:
        if stream.is_default:
            self.catalog.sync_default()
        topics = []
        for topic in sorted(stream.topics.values(), key=lambda t: t.id):
            store_topic = self.core.store.topics.get(topic.store)
            if store_topic is not None:
                topics.append(self._topic_info(topic, store_topic)[0])
        info = StreamInfo(stream.id, stream.created_at, len(topics),
                          sum(t.size for t in topics), sum(t.messages_count for t in topics),
                          stream.name)
        return info, topics

    def _run(self, function: Callable[[], Any]) -> Deferred[Any]:
        return self.run_in_thread(function)

    # ================================================================ system

    def ping(self, session: Session, user: User | None, cmd: c.Ping) -> bytes:
        return b""

    def _counts(self) -> tuple[int, int, int, int, int, int, int]:
        """(streams, topics, partitions, segments, messages, bytes, groups) of the catalog."""
        self.catalog.sync_default()
        streams = topics = partitions = segments = messages = size = groups = 0
        for stream in self.catalog.streams.values():
            streams += 1
            for topic in stream.topics.values():
                store_topic = self.core.store.topics.get(topic.store)
                if store_topic is None:
                    continue
                topics += 1
                groups += len(topic.groups)
                for p, plog in enumerate(store_topic.partitions):
                    info = self._partition_info(topic, p, plog)
                    partitions += 1
                    segments += info.segments_count
                    messages += info.messages_count
                    size += info.size
        return streams, topics, partitions, segments, messages, size, groups

    def _stats(self) -> c.StatsInfo:
        sysinfo = self.system_info()
        streams, topics, partitions, segments, messages, size, groups = self._counts()
        run_time = int((self.clock.seconds() - self._started_at_s) * 1_000_000)
        return c.StatsInfo(
            process_id=sysinfo.process_id, cpu_usage=sysinfo.cpu_usage,
            total_cpu_usage=sysinfo.total_cpu_usage, memory_usage=sysinfo.memory_usage,
            total_memory=sysinfo.total_memory, available_memory=sysinfo.available_memory,
            run_time=max(0, run_time), start_time=self.started_at_us,
            read_bytes=self.read_bytes, written_bytes=self.written_bytes,
            messages_size_bytes=size, streams_count=streams, topics_count=topics,
            partitions_count=partitions, segments_count=segments, messages_count=messages,
            clients_count=len(self.sessions), consumer_groups_count=groups,
            hostname=sysinfo.hostname, os_name=sysinfo.os_name, os_version=sysinfo.os_version,
            kernel_version=sysinfo.kernel_version, server_version=SERVER_VERSION,
            server_semver=SERVER_SEMVER, threads_count=sysinfo.threads_count,
            free_disk_space=sysinfo.free_disk_space, total_disk_space=sysinfo.total_disk_space)

    def get_stats(self, session: Session, user: User, cmd: c.GetStats) -> bytes:
        self._need(user, Need.READ_SERVERS)
        return c.encode_stats(self._stats())

    def get_snapshot(self, session: Session, user: User, cmd: c.GetSnapshot) -> bytes:
        """A zip archive with one ``snapshot.json``: stats, streams, topics, clients."""
        self._need(user, Need.READ_SERVERS)
        stats = self._stats()
        doc = {
            "server": SERVER_VERSION,
            "stats": {f.name: getattr(stats, f.name) for f in fields(stats)},
            "catalog": self.catalog.to_json(),
            "clients": [{"client_id": s.client_id, "address": s.address, "user_id": s.user_id,
                         "consumer_groups": len(s.memberships)}
                        for s in sorted(self.sessions.values(), key=lambda s: s.client_id)],
        }
        # gmtime only converts the injected clock's value (zip needs 1980 or later).
        stamp = time.gmtime(max(self.now_us() // 1_000_000, 315532800))[:6]
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            info = zipfile.ZipInfo("snapshot.json", date_time=stamp)
            archive.writestr(info, json.dumps(doc, indent=2, sort_keys=True))
        return buffer.getvalue()

    def get_cluster_metadata(self, session: Session, user: User,
                             cmd: c.GetClusterMetadata) -> bytes:
        node = c.ClusterNode(self.node.name, self.node.ip, self.node.tcp_port)
        return c.encode_cluster_metadata("skerry", [node])

    def _client_info(self, s: Session) -> tuple[ClientInfo, list[ClientGroup]]:
        groups = [ClientGroup(m.stream_id, m.topic_id, m.group_id)
                  for m in sorted(s.memberships.values(),
                                  key=lambda m: (m.stream_id, m.topic_id, m.group_id))]
        return ClientInfo(s.client_id, s.user_id, s.address, len(groups)), groups

    def get_me(self, session: Session, user: User, cmd: c.GetMe) -> bytes:
        return c.encode_client_details(*self._client_info(session))

    def get_client(self, session: Session, user: User, cmd: c.GetClient) -> bytes:
        self._need(user, Need.READ_SERVERS)
        other = self.sessions.get(cmd.client_id)
        return b"" if other is None else c.encode_client_details(*self._client_info(other))

    def get_clients(self, session: Session, user: User, cmd: c.GetClients) -> bytes:
        self._need(user, Need.READ_SERVERS)
        return b"".join(c.encode_client(self._client_info(s)[0])
                        for s in sorted(self.sessions.values(), key=lambda s: s.client_id))

    # ================================================================ users

    @staticmethod
    def _user_info(u: User) -> UserInfo:
        return UserInfo(u.id, u.created_at, u.status, u.username)

    def get_user(self, session: Session, user: User, cmd: c.GetUser) -> bytes:
        found = self.users.get(cmd.user_id.value)
        if found is None or found.id != user.id:
            self._need(user, Need.READ_USERS)
        if found is None:
            return b""
        return c.encode_user_details(self._user_info(found), found.permissions)

    def get_users(self, session: Session, user: User, cmd: c.GetUsers) -> bytes:
        self._need(user, Need.READ_USERS)
        return b"".join(c.encode_user(self._user_info(u))
                        for u in sorted(self.users.users.values(), key=lambda u: u.id))

    def create_user(self, session: Session, user: User, cmd: c.CreateUser) -> Deferred[bytes]:
        self._need(user, Need.MANAGE_USERS)
        check_username(cmd.username)
        check_password(cmd.password)
        check_status(cmd.status)
        if self.users.by_name(cmd.username) is not None:
            raise IggyError(Status.USER_ALREADY_EXISTS, f"user {cmd.username!r} exists")
        n = self.scrypt_n

        def created(password_hash: str) -> bytes:
            new = self.users.create(cmd.username, password_hash, cmd.status, cmd.permissions)
            log.info("iggy: user %s created user %r (id %d)", user.username, new.username, new.id)
            return c.encode_user_details(self._user_info(new), new.permissions)

        return self._run(lambda: hash_password(cmd.password, n)).addCallback(created)

    def _target_user(self, ident: Identifier) -> User:
        return self.users.require(ident.value)

    def delete_user(self, session: Session, user: User, cmd: c.DeleteUser) -> bytes:
        self._need(user, Need.MANAGE_USERS)
        target = self._target_user(cmd.user_id)
        self.users.delete(target)
        for s in self.sessions.values():
            if s.user_id == target.id:
                s.user_id = None
        log.info("iggy: user %s deleted user %r", user.username, target.username)
        return b""

    def update_user(self, session: Session, user: User, cmd: c.UpdateUser) -> bytes:
        self._need(user, Need.MANAGE_USERS)
        self.users.update(self._target_user(cmd.user_id), cmd.username, cmd.status)
        return b""

    def update_permissions(self, session: Session, user: User,
                           cmd: c.UpdatePermissions) -> bytes:
        self._need(user, Need.MANAGE_USERS)
        self.users.set_permissions(self._target_user(cmd.user_id), cmd.permissions)
        return b""

    def change_password(self, session: Session, user: User,
                        cmd: c.ChangePassword) -> Deferred[bytes]:
        target = self._target_user(cmd.user_id)
        if target.id != user.id:
            self._need(user, Need.MANAGE_USERS)
        check_password(cmd.new_password)
        encoded = target.password_hash
        n = self.scrypt_n

        def work() -> str | None:
            if not verify_password(cmd.current_password, encoded):
                return None
            return hash_password(cmd.new_password, n)

        def done(new_hash: str | None) -> bytes:
            if new_hash is None:
                raise IggyError(Status.INVALID_CREDENTIALS, "current password does not match")
            if self.users.users.get(target.id) is target:
                self.users.set_password_hash(target, new_hash)
            return b""

        return self._run(work).addCallback(done)

    def _dummy(self) -> str:
        """A hash to check unknown usernames against, so that they take as long as known
        ones (runs in the worker thread; a benign race computes it twice at most)."""
        if self._dummy_hash is None:
            self._dummy_hash = hash_password(secrets.token_hex(8), self.scrypt_n)
        return self._dummy_hash

    def login_user(self, session: Session, user: User | None,
                   cmd: c.LoginUser) -> Deferred[bytes]:
        found = self.users.by_name(cmd.username)
        known = found.password_hash if found is not None else None

        def done(ok: bool) -> bytes:
            current = self.users.by_name(cmd.username)
            if not ok or current is None or current is not found:
                log.info("iggy: client %d (%s) failed to log in as %r", session.client_id,
                         session.address, cmd.username)
                raise IggyError(Status.INVALID_CREDENTIALS, "invalid username or password")
            if current.status != ACTIVE:
                raise IggyError(Status.USER_INACTIVE, f"user {cmd.username!r} is inactive")
            session.user_id = current.id
            log.debug("iggy: client %d logged in as %r", session.client_id, current.username)
            return c.encode_identity(current.id)

        return self._run(lambda: verify_password(cmd.password, known or self._dummy())
                         ).addCallback(done)

    def logout_user(self, session: Session, user: User, cmd: c.LogoutUser) -> bytes:
        session.user_id = None
        return b""

    # ================================================================ tokens

    def get_tokens(self, session: Session, user: User, cmd: c.GetPersonalAccessTokens) -> bytes:
        return b"".join(c.encode_token(TokenInfo(t.name, t.expiry_at))
                        for t in self.users.tokens(user, self.now_us()))

    def create_token(self, session: Session, user: User,
                     cmd: c.CreatePersonalAccessToken) -> bytes:
        raw = self.users.create_token(user, cmd.name, cmd.expiry, self.now_us())
        return c.encode_raw_token(raw)

    def delete_token(self, session: Session, user: User,
                     cmd: c.DeletePersonalAccessToken) -> bytes:
        if cmd.name not in user.tokens:
            raise IggyError(Status.RESOURCE_NOT_FOUND, f"no token {cmd.name!r}")
        self.users.delete_token(user, cmd.name)
        return b""

    def login_token(self, session: Session, user: User | None,
                    cmd: c.LoginWithPersonalAccessToken) -> bytes:
        found = self.users.login_token(cmd.token, self.now_us())
        session.user_id = found.id
        return c.encode_identity(found.id)

    # ================================================================ messages

    def _group_for(self, topic: TopicEntry, ident: Identifier) -> GroupEntry:
        group = topic.group(ident.value)
        if group is None:
            self._adopt_groups(topic)
            group = topic.group(ident.value)
        if group is None:
            if ident.numeric:
                raise IggyError(Status.CONSUMER_GROUP_ID_NOT_FOUND,
                                f"consumer group {ident} not found")
            raise IggyError(Status.CONSUMER_GROUP_NAME_NOT_FOUND,
                            f"consumer group {ident} not found")
        return group

    def _adopt_groups(self, topic: TopicEntry) -> None:
        names = [g for g, t in self.core.groups.list_groups() if t == topic.store]
        if names:
            self.catalog.adopt_groups(topic, names)

    def _offsets_group(self, topic: TopicEntry, consumer: c.Consumer) -> str:
        """The V1 group whose committed offsets are this consumer's stored offsets."""
        if consumer.kind is ConsumerKind.CONSUMER:
            return group_name_for_consumer(consumer.id.value)
        return self._group_for(topic, consumer.id).name

    def _commit(self, session: Session, group: str, store: str, partition: int,
                next_offset: int) -> Deferred[None]:
        """Store ``next_offset`` (V1's "next to read") for ``group``: as a member when this
        client is one, as an admin write when the group has no live members."""
        groups = self.core.groups
        grp = groups.coordinator.group(group, store)
        member = self.member_id(session)
        if grp is not None and member in grp.members:
            return groups.commit(group, store, member, grp.generation, partition, next_offset)
        if grp is None or not grp.members:
            return groups.admin_commit(group, store, partition, next_offset)
        raise IggyError(Status.CONSUMER_GROUP_MEMBER_NOT_FOUND,
                        f"client {session.client_id} is not a member of group {group}")

    def poll_messages(self, session: Session, user: User,
                      cmd: c.PollMessages) -> bytes | Deferred[bytes]:
        stream, topic, store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.POLL, stream.id, topic.id)
        if cmd.count == 0:
            raise IggyError(Status.INVALID_MESSAGES_COUNT, "count must be at least 1")
        consumer = cmd.consumer
        group = self._offsets_group(topic, consumer)
        partition = cmd.partition_id
        if partition is None:
            if consumer.kind is ConsumerKind.CONSUMER_GROUP:
                membership = session.memberships.get((topic.store, group))
                if membership is None:
                    raise IggyError(Status.CONSUMER_GROUP_MEMBER_NOT_FOUND,
                                    f"client {session.client_id} is not a member of {group}")
                grp = self.core.groups.coordinator.group(group, topic.store)
                assigned = grp.assigned(self.member_id(session)) if grp is not None else []
                if not assigned:
                    return _EMPTY_POLL
                partition = assigned[membership.cursor % len(assigned)]
                membership.cursor += 1
            else:
                partition = 0
        plog = self._partition(store_topic, partition)
        store = topic.store
        hw = self._hw(store, partition)
        strategy = cmd.strategy
        if strategy is PollingKind.OFFSET:
            start = cmd.value
        elif strategy is PollingKind.NEXT:
            start = self.core.groups.offset(group, store, partition)
        elif strategy is PollingKind.FIRST:
            start = plog.first_offset
        elif strategy is PollingKind.LAST:
            start = max(plog.first_offset, hw + 1 - cmd.count)
        else:
            found = plog.offset_for_timestamp(cmd.value)
            start = hw + 1 if found is None or found > hw else found
        result, hw = self.core.read_raw(store, partition, start, cmd.count, create=False)
        reply = c.encode_polled_prefix(partition, max(hw, 0), result.count) + result.raw
        self.read_bytes += len(result.raw)
        if not (cmd.auto_commit and result.count):
            return reply
        d = self._commit(session, group, store, partition, result.next_offset)
        return d.addCallback(lambda _: reply)

    def send_messages(self, session: Session, user: User,
                      cmd: c.SendMessages) -> Deferred[bytes]:
        stream, topic, store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.SEND, stream.id, topic.id)
        count = len(store_topic.partitions)
        kind = cmd.partitioning
        if kind is PartitioningKind.PARTITION_ID:
            partition = _U32.unpack(cmd.key)[0]
            self._partition(store_topic, partition)
        elif kind is PartitioningKind.MESSAGES_KEY:
            partition = self.core.partition_for_key(cmd.key, count)
        else:
            at = self._balanced.get(topic.store, 0)
            partition = at % count
            self._balanced[topic.store] = at + 1
        ends = c.check_messages(cmd.messages, cmd.count, self.max_payload, ends=cmd.ends)
        d: Deferred[bytes] = Deferred()

        def done(result: Any) -> None:
            if type(result) is ProduceResult:
                d.callback(b"")
            else:
                d.errback(result)

        self.core.produce_framed(topic.store, partition, cmd.messages, ends, "1", done)
        self.written_bytes += len(cmd.messages)
        return d

    def flush_unsaved_buffer(self, session: Session, user: User,
                             cmd: c.FlushUnsavedBuffer) -> bytes | Deferred[bytes]:
        stream, topic, store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.SEND, stream.id, topic.id)
        plog = self._partition(store_topic, cmd.partition_id)
        self.core.flush()
        if not cmd.fsync:
            return b""
        d: Deferred[bytes] = Deferred()

        def synced(error: SkerryError | None) -> None:
            if error is None:
                d.callback(b"")
            else:
                d.errback(error)

        self.core.committer.wait(plog, plog.next_offset, synced)
        return d

    # ================================================================ consumer offsets

    def _offset_target(self, session: Session, user: User, cmd: Any
                       ) -> tuple[TopicEntry, str, int]:
        stream, topic, store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.POLL, stream.id, topic.id)
        group = self._offsets_group(topic, cmd.consumer)
        partition = 0 if cmd.partition_id is None else cmd.partition_id
        self._partition(store_topic, partition)
        return topic, group, partition

    def get_consumer_offset(self, session: Session, user: User,
                            cmd: c.GetConsumerOffset) -> bytes:
        topic, group, partition = self._offset_target(session, user, cmd)
        committed = self.core.groups.offset(group, topic.store, partition)
        if committed == 0:
            return b""
        hw = self._hw(topic.store, partition)
        return c.encode_consumer_offset(partition, max(hw, 0), committed - 1)

    def store_consumer_offset(self, session: Session, user: User,
                              cmd: c.StoreConsumerOffset) -> Deferred[bytes]:
        topic, group, partition = self._offset_target(session, user, cmd)
        hw = self._hw(topic.store, partition)
        if cmd.offset > hw:
            raise IggyError(Status.INVALID_OFFSET,
                            f"offset {cmd.offset} is past the partition's current offset {hw}")
        return self._commit(session, group, topic.store, partition,
                            cmd.offset + 1).addCallback(lambda _: b"")

    def delete_consumer_offset(self, session: Session, user: User,
                               cmd: c.DeleteConsumerOffset) -> Deferred[bytes]:
        topic, group, partition = self._offset_target(session, user, cmd)
        if self.core.groups.offset(group, topic.store, partition) == 0:
            raise IggyError(Status.CONSUMER_OFFSET_NOT_FOUND,
                            f"no stored offset for partition {partition}")
        return self._commit(session, group, topic.store, partition, 0).addCallback(lambda _: b"")

    # ================================================================ streams

    def get_stream(self, session: Session, user: User, cmd: c.GetStream) -> bytes:
        stream = self.catalog.stream(cmd.stream.value)
        if stream is None:
            self._need(user, Need.READ_STREAM)
            return b""
        self._need(user, Need.READ_STREAM, stream.id)
        return c.encode_stream_details(*self._stream_info(stream))

    def get_streams(self, session: Session, user: User, cmd: c.GetStreams) -> bytes:
        self.catalog.sync_default()
        return b"".join(c.encode_stream(self._stream_info(s)[0])
                        for s in sorted(self.catalog.streams.values(), key=lambda s: s.id)
                        if Access.allows(user, Need.READ_STREAM, s.id))

    def create_stream(self, session: Session, user: User, cmd: c.CreateStream) -> bytes:
        self._need(user, Need.CREATE_STREAM)
        stream = self.catalog.add_stream(cmd.name)
        log.info("iggy: created stream %r (id %d)", stream.name, stream.id)
        return c.encode_stream_details(*self._stream_info(stream))

    def update_stream(self, session: Session, user: User, cmd: c.UpdateStream) -> bytes:
        stream = self._stream(cmd.stream)
        self._need(user, Need.MANAGE_STREAM, stream.id)
        self.catalog.rename_stream(stream, cmd.name)
        return b""

    def delete_stream(self, session: Session, user: User,
                      cmd: c.DeleteStream) -> Deferred[bytes]:
        stream = self._stream(cmd.stream)
        self._need(user, Need.MANAGE_STREAM, stream.id)
        if stream.is_default:
            raise IggyError(Status.CANNOT_DELETE_STREAM,
                            "stream default holds the V1 topics and cannot be deleted")
        waits = []
        for topic in list(stream.topics.values()):
            waits.append(self._drop_topic(stream, topic, keep_entry=True))
        self.catalog.remove_stream(stream)
        log.info("iggy: deleted stream %r (id %d)", stream.name, stream.id)
        return _all(waits).addCallback(lambda _: b"")

    def purge_stream(self, session: Session, user: User, cmd: c.PurgeStream) -> Deferred[bytes]:
        stream = self._stream(cmd.stream)
        self._need(user, Need.MANAGE_STREAM, stream.id)
        if stream.is_default:
            self.catalog.sync_default()
        waits = [self._purge(topic) for topic in list(stream.topics.values())
                 if self._has_store(topic.store)]
        return _all(waits).addCallback(lambda _: b"")

    # ================================================================ topics

    def get_topic(self, session: Session, user: User, cmd: c.GetTopic) -> bytes:
        stream = self._stream(cmd.stream)
        topic = self.catalog.topic(stream, cmd.topic.value, self._has_store)
        if topic is None:
            self._need(user, Need.READ_STREAM, stream.id)
            return b""
        self._need(user, Need.READ_TOPIC, stream.id, topic.id)
        return c.encode_topic_details(*self._topic_info(topic, self.core.store.topics[topic.store]))

    def get_topics(self, session: Session, user: User, cmd: c.GetTopics) -> bytes:
        stream = self._stream(cmd.stream)
        self._need(user, Need.READ_STREAM, stream.id)
        return b"".join(c.encode_topic(t) for t in self._stream_info(stream)[1])

    def create_topic(self, session: Session, user: User, cmd: c.CreateTopic) -> bytes:
        stream = self._stream(cmd.stream)
        self._need(user, Need.CREATE_TOPIC, stream.id)
        if stream.is_default:
            self.catalog.sync_default()
        self.catalog.check_new_topic(stream, cmd.name)
        if cmd.partitions_count < 1:
            raise IggyError(Status.INVALID_PARTITIONS_COUNT, "a topic needs at least 1 partition")
        if cmd.partitions_count > self.core.config["limits.max_partitions_per_topic"]:
            raise IggyError(Status.TOO_MANY_PARTITIONS,
                            f"at most {self.core.config['limits.max_partitions_per_topic']} "
                            f"partitions per topic")
        if not 1 <= cmd.compression <= 4:
            raise IggyError(Status.INVALID_FORMAT, f"compression algorithm {cmd.compression}")
        if len(self.core.store.topics) >= self.core.config["limits.max_topics"]:
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
        return c.encode_topic_details(*self._topic_info(topic, self.core.store.topics[store]))

    def update_topic(self, session: Session, user: User, cmd: c.UpdateTopic) -> bytes:
        stream, topic, store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.MANAGE_TOPIC, stream.id, topic.id)
        if not 1 <= cmd.compression <= 4:
            raise IggyError(Status.INVALID_FORMAT, f"compression algorithm {cmd.compression}")
        self.catalog.update_topic(stream, topic, name=cmd.name, compression=cmd.compression,
                                  message_expiry=cmd.message_expiry,
                                  max_topic_size=cmd.max_topic_size,
                                  replication_factor=cmd.replication_factor)
        retention_ms, retention_bytes = store_retention(cmd.message_expiry, cmd.max_topic_size,
                                                   len(store_topic.partitions))
        self.core.set_topic_retention(topic.store, retention_ms, retention_bytes)
        return b""

    def _forget_groups(self, store: str) -> Deferred[None]:
        """Leave and delete every group (and stored offsets) of a store topic going away."""
        groups = self.core.groups
        waits = []
        for session in list(self.sessions.values()):
            for key, membership in list(session.memberships.items()):
                if membership.store == store:
                    try:
                        waits.append(self._leave(session, membership))
                    except SkerryError:
                        session.memberships.pop(key, None)
        for group, topic in groups.list_groups():
            if topic != store:
                continue
            try:
                waits.append(groups.delete_group(group, topic))
            except SkerryError as error:
                log.warning("iggy: group %s on %s stays: %s", group, topic, error.message)
        return _all(waits)

    def _drop_topic(self, stream: StreamEntry, topic: TopicEntry,
                    keep_entry: bool = False) -> Deferred[None]:
        if not keep_entry:
            self.catalog.remove_topic(stream, topic)
        d = self._forget_groups(topic.store)
        if self._has_store(topic.store):
            self.core.delete_topic(topic.store)
        self._balanced.pop(topic.store, None)
        return d

    def delete_topic(self, session: Session, user: User, cmd: c.DeleteTopic) -> Deferred[bytes]:
        stream, topic, _store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.MANAGE_TOPIC, stream.id, topic.id)
        d = self._drop_topic(stream, topic)
        log.info("iggy: deleted topic %r of stream %r", topic.name, stream.name)
        return d.addCallback(lambda _: b"")

    def _purge(self, topic: TopicEntry) -> Deferred[None]:
        """Remove every message of a topic: the store topic is recreated empty with the
        same settings (offsets start at 0 again) and its stored offsets are forgotten."""
        cfg = self.core.store.topics[topic.store].config
        d = self._forget_groups(topic.store)
        self.core.delete_topic(topic.store)
        self.core.create_topic(topic.store, cfg.partitions, cfg.replication_factor,
                               cfg.min_insync_replicas, cfg.retention_ms, cfg.retention_bytes)
        return d

    def purge_topic(self, session: Session, user: User, cmd: c.PurgeTopic) -> Deferred[bytes]:
        stream, topic, _store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.MANAGE_TOPIC, stream.id, topic.id)
        return self._purge(topic).addCallback(lambda _: b"")

    # ================================================================ partitions, segments

    def create_partitions(self, session: Session, user: User,
                          cmd: c.CreatePartitions) -> bytes:
        stream, topic, store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.MANAGE_TOPIC, stream.id, topic.id)
        if cmd.partitions_count < 1:
            raise IggyError(Status.INVALID_PARTITIONS_COUNT, "add at least 1 partition")
        total = len(store_topic.partitions) + cmd.partitions_count
        if total > self.core.config["limits.max_partitions_per_topic"]:
            raise IggyError(Status.TOO_MANY_PARTITIONS,
                            f"at most {self.core.config['limits.max_partitions_per_topic']} "
                            f"partitions per topic")
        self.core.add_partitions(topic.store, total)
        return b""

    def delete_partitions(self, session: Session, user: User,
                          cmd: c.DeletePartitions) -> bytes:
        stream, topic, _store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.MANAGE_TOPIC, stream.id, topic.id)
        raise IggyError(Status.FEATURE_UNAVAILABLE,
                        "partitions are never removed (the store keeps every partition)")

    def delete_segments(self, session: Session, user: User, cmd: c.DeleteSegments) -> bytes:
        stream, topic, store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.MANAGE_TOPIC, stream.id, topic.id)
        self._partition(store_topic, cmd.partition_id)
        if cmd.segments_count < 1:
            raise IggyError(Status.INVALID_SEGMENTS_COUNT, "delete at least 1 segment")
        self.core.delete_oldest_segments(topic.store, cmd.partition_id, cmd.segments_count)
        return b""

    # ================================================================ consumer groups

    def _member_client(self, member: str) -> int:
        prefix = self._member_prefix()
        if member.startswith(prefix) and member[len(prefix):].isdigit():
            return int(member[len(prefix):])
        return fnv1a_32(member.encode("utf-8")) | 0x80000000

    def _group_info(self, topic: TopicEntry, group: GroupEntry, partitions: int
                    ) -> tuple[ConsumerGroupInfo, list[GroupMemberInfo]]:
        grp = self.core.groups.coordinator.group(group.name, topic.store)
        members: list[GroupMemberInfo] = []
        if grp is not None:
            members = sorted((GroupMemberInfo(self._member_client(m), tuple(grp.assigned(m)))
                              for m in grp.members), key=lambda m: m.id)
        return ConsumerGroupInfo(group.id, partitions, len(members), group.name), members

    def get_consumer_group(self, session: Session, user: User,
                           cmd: c.GetConsumerGroup) -> bytes:
        stream, topic, store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.READ_TOPIC, stream.id, topic.id)
        try:
            group = self._group_for(topic, cmd.group)
        except IggyError:
            return b""
        return c.encode_consumer_group_details(
            *self._group_info(topic, group, len(store_topic.partitions)))

    def get_consumer_groups(self, session: Session, user: User,
                            cmd: c.GetConsumerGroups) -> bytes:
        stream, topic, store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.READ_TOPIC, stream.id, topic.id)
        self._adopt_groups(topic)
        count = len(store_topic.partitions)
        return b"".join(c.encode_consumer_group(self._group_info(topic, g, count)[0])
                        for g in sorted(topic.groups.values(), key=lambda g: g.id))

    def create_consumer_group(self, session: Session, user: User,
                              cmd: c.CreateConsumerGroup) -> bytes:
        stream, topic, store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.READ_TOPIC, stream.id, topic.id)
        self._adopt_groups(topic)
        group = self.catalog.add_group(topic, cmd.name)
        return c.encode_consumer_group_details(
            *self._group_info(topic, group, len(store_topic.partitions)))

    def delete_consumer_group(self, session: Session, user: User,
                              cmd: c.DeleteConsumerGroup) -> Deferred[bytes]:
        stream, topic, _store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.READ_TOPIC, stream.id, topic.id)
        group = self._group_for(topic, cmd.group)
        groups = self.core.groups
        grp = groups.coordinator.group(group.name, topic.store)
        prefix = self._member_prefix()
        if grp is not None and any(not m.startswith(prefix) for m in grp.members):
            raise IggyError(Status.ERROR,
                            f"group {group.name} has V1 members; they must leave first")
        waits = []
        for other in list(self.sessions.values()):
            membership = other.memberships.get((topic.store, group.name))
            if membership is not None:
                waits.append(self._leave(other, membership))
        if (group.name, topic.store) in set(groups.list_groups()):
            waits.append(groups.delete_group(group.name, topic.store))
        self.catalog.remove_group(topic, group)
        return _all(waits).addCallback(lambda _: b"")

    def join_consumer_group(self, session: Session, user: User,
                            cmd: c.JoinConsumerGroup) -> Deferred[bytes]:
        stream, topic, _store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.READ_TOPIC, stream.id, topic.id)
        group = self._group_for(topic, cmd.group)
        key = (topic.store, group.name)
        d = maybeDeferred(self.core.groups.join, group.name, topic.store,
                          self.member_id(session), session_timeout_ms=self.session_timeout_ms)

        def joined(_: object) -> bytes:
            if not session.closed and key not in session.memberships:
                session.memberships[key] = Membership(stream.id, topic.id, group.id,
                                                      group.name, topic.store)
            return b""

        return d.addCallback(joined)

    def _leave(self, session: Session, membership: Membership) -> Deferred[None]:
        session.memberships.pop((membership.store, membership.group), None)
        groups = self.core.groups
        grp = groups.coordinator.group(membership.group, membership.store)
        member = self.member_id(session)
        if grp is None or member not in grp.members:
            return succeed(None)
        return groups.leave(membership.group, membership.store, member, grp.generation)

    def leave_consumer_group(self, session: Session, user: User,
                             cmd: c.LeaveConsumerGroup) -> Deferred[bytes]:
        stream, topic, _store_topic = self._topic(cmd.stream, cmd.topic)
        self._need(user, Need.READ_TOPIC, stream.id, topic.id)
        group = self._group_for(topic, cmd.group)
        membership = session.memberships.get((topic.store, group.name))
        if membership is None:
            raise IggyError(Status.CONSUMER_GROUP_MEMBER_NOT_FOUND,
                            f"client {session.client_id} is not a member of {group.name}")
        return self._leave(session, membership).addCallback(lambda _: b"")


def _logged(d: Deferred[Any], what: str) -> None:
    """Nobody waits for ``d``: log its failure instead of leaving it unhandled."""
    d.addErrback(lambda failure: log.warning("iggy: %s failed: %s", what,
                                             failure.getErrorMessage()))


def _all(waits: list[Deferred[Any]]) -> Deferred[None]:
    """Fires when every Deferred has; fails with the first failure."""
    if not waits:
        return succeed(None)

    def first_failure(results: list[tuple[bool, Any]]) -> Failure | None:
        for ok, value in results:
            if not ok:
                return value  # type: ignore[no-any-return]
        return None

    return DeferredList(waits, consumeErrors=True).addCallback(first_failure)
