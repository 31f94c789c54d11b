"""The Iggy dispatcher: one request's code and payload -> the handler -> its reply frame.

Owns: ``IggyHandlers``: the explicit table ``{codec.Ping: system.ping, ...}`` from each
command class to the handler method of its job (``SystemHandlers``, ``UserHandlers``,
``CatalogHandlers``, ``MessageHandlers``, ``GroupHandlers``) with an unknown-command
fallback (``unknown_command``, as IRC's ``handleCommand`` falls back to ``irc_unknown``),
the authentication gate every command passes, and the handler boundary: a refusal
(``broker.iggy.errors.REFUSALS``) becomes its status frame, anything else is logged with
its traceback and answered ``ERROR``; nothing raises out of ``dispatch``. It also builds
the shared ``Context`` and ``Sessions`` and is what the connection and the shell call:
``open_session``, ``close_session``, ``heartbeat``, ``remove_stale_members``.

``dispatch(session, code, payload)`` returns the whole reply frame, or a ``Deferred`` that
fires with it (waits for an fsync, ``groups.json``/``offsets.json`` writes, password
hashing).

Must not import: Twisted's reactor, sockets, files (system facts come from the injected
``system_info``), the store, the protocol; only ``Deferred`` for waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

from broker.core import BrokerCore
from broker.errors import Unavailable
from broker.iggy import codec as c
from broker.iggy.errors import REFUSALS, IggyError, Status, status_for
from broker.iggy.handlers.catalog import CatalogHandlers
from broker.iggy.handlers.context import Context, NodeInfo, Session
from broker.iggy.handlers.groups import GroupHandlers
from broker.iggy.handlers.messages import MessageHandlers
from broker.iggy.handlers.sessions import Sessions
from broker.iggy.handlers.system import SystemHandlers
from broker.iggy.handlers.users import UserHandlers
from broker.services.groups import GroupService
from broker.services.host_facts import SystemInfo
from broker.services.iggy_catalog import Catalog
from broker.services.iggy_users import User, UserStore
from broker.transport.boundary import Boundary

__all__ = ["IggyHandlers", "Handler"]

log = logging.getLogger("skerry.iggy")

Handler = Callable[[Session, User | None, Any], "bytes | Deferred[bytes]"]
"""A handler method: ``(session, user or None, command) -> reply payload`` (or a Deferred
firing with it); it refuses by raising one of ``REFUSALS``."""

_OPEN_CODES = frozenset((c.Code.PING, c.Code.LOGIN_USER, c.Code.LOGIN_WITH_PERSONAL_ACCESS_TOKEN))
_KNOWN_CODES = frozenset(int(code) for code in c.Code)


class IggyHandlers:
    """The Iggy handler table over one ``BrokerCore``, group service, catalog and user
    store."""

    def __init__(self, core: BrokerCore, groups: GroupService, catalog: Catalog,
                 users: UserStore, *, clock: IReactorTime, now_us: Callable[[], int],
                 run_in_thread: Callable[[Callable[[], Any]], Deferred[Any]],
                 system_info: Callable[[], SystemInfo], node: NodeInfo | None = None,
                 scrypt_n: int, max_payload: int, max_partitions_per_topic: int,
                 max_topics: int, session_timeout_ms: int) -> None:
        self.core = core
        self.users = users
        self.boundary: Boundary[bytes] = Boundary(
            "iggy", log, closing=lambda: core.closing, refusals=REFUSALS,
            refused=_refused, internal=_internal)
        """Every exception -> an error status (``broker.transport.boundary``); counts the
        requests per command for ``/metrics``."""
        self.ctx = Context(core, groups, catalog, users, clock=clock, now_us=now_us,
                           run_in_thread=run_in_thread, system_info=system_info,
                           node=node or NodeInfo(), scrypt_n=scrypt_n, max_payload=max_payload,
                           max_partitions_per_topic=max_partitions_per_topic,
                           max_topics=max_topics, session_timeout_ms=session_timeout_ms)
        self.sessions = Sessions(self.ctx)
        self.system_handlers = SystemHandlers(self.ctx, self.sessions)
        self.user_handlers = UserHandlers(self.ctx, self.sessions)
        self.catalog_handlers = CatalogHandlers(self.ctx, self.sessions)
        self.message_handlers = MessageHandlers(self.ctx, self.sessions)
        self.group_handlers = GroupHandlers(self.ctx, self.sessions)
        self.table = self._table()

    def _table(self) -> dict[type[c.Command], Handler]:
        """Every command class and the handler that serves it."""
        system, users, catalog = self.system_handlers, self.user_handlers, self.catalog_handlers
        messages, groups = self.message_handlers, self.group_handlers
        return {
            # system and clients
            c.Ping: system.ping,
            c.GetStats: system.get_stats,
            c.GetSnapshot: system.get_snapshot,
            c.GetClusterMetadata: system.get_cluster_metadata,
            c.GetMe: system.get_me,
            c.GetClient: system.get_client,
            c.GetClients: system.get_clients,
            # users, logins, personal access tokens
            c.GetUser: users.get_user,
            c.GetUsers: users.get_users,
            c.CreateUser: users.create_user,
            c.DeleteUser: users.delete_user,
            c.UpdateUser: users.update_user,
            c.UpdatePermissions: users.update_permissions,
            c.ChangePassword: users.change_password,
            c.LoginUser: users.login_user,
            c.LogoutUser: users.logout_user,
            c.GetPersonalAccessTokens: users.get_tokens,
            c.CreatePersonalAccessToken: users.create_token,
            c.DeletePersonalAccessToken: users.delete_token,
            c.LoginWithPersonalAccessToken: users.login_token,
            # messages and stored offsets
            c.PollMessages: messages.poll_messages,
            c.SendMessages: messages.send_messages,
            c.FlushUnsavedBuffer: messages.flush_unsaved_buffer,
            c.GetConsumerOffset: messages.get_consumer_offset,
            c.StoreConsumerOffset: messages.store_consumer_offset,
            c.DeleteConsumerOffset: messages.delete_consumer_offset,
            # streams, topics, partitions, segments
            c.GetStream: catalog.get_stream,
            c.GetStreams: catalog.get_streams,
            c.CreateStream: catalog.create_stream,
            c.DeleteStream: catalog.delete_stream,
            c.UpdateStream: catalog.update_stream,
            c.PurgeStream: catalog.purge_stream,
            c.GetTopic: catalog.get_topic,
            c.GetTopics: catalog.get_topics,
            c.CreateTopic: catalog.create_topic,
            c.DeleteTopic: catalog.delete_topic,
            c.UpdateTopic: catalog.update_topic,
            c.PurgeTopic: catalog.purge_topic,
            c.CreatePartitions: catalog.create_partitions,
            c.DeletePartitions: catalog.delete_partitions,
            c.DeleteSegments: catalog.delete_segments,
            # consumer groups
            c.GetConsumerGroup: groups.get_consumer_group,
            c.GetConsumerGroups: groups.get_consumer_groups,
            c.CreateConsumerGroup: groups.create_consumer_group,
            c.DeleteConsumerGroup: groups.delete_consumer_group,
            c.JoinConsumerGroup: groups.join_consumer_group,
            c.LeaveConsumerGroup: groups.leave_consumer_group,
        }

    # ================================================================ injected, replaceable

    @property
    def run_in_thread(self) -> Callable[[Callable[[], Any]], Deferred[Any]]:
        """Runs slow work (password hashing) off the reactor thread."""
        return self.ctx.run_in_thread

    @run_in_thread.setter
    def run_in_thread(self, run: Callable[[Callable[[], Any]], Deferred[Any]]) -> None:
        self.ctx.run_in_thread = run

    @property
    def system_info(self) -> Callable[[], SystemInfo]:
        """Measures the process and host facts GetStats reports."""
        return self.ctx.system_info

    @system_info.setter
    def system_info(self, measure: Callable[[], SystemInfo]) -> None:
        self.ctx.system_info = measure

    @property
    def session_timeout_ms(self) -> int:
        return self.ctx.session_timeout_ms

    # ================================================================ connections, timers

    def open_session(self, address: str) -> Session:
        return self.sessions.new(address)

    def close_session(self, session: Session) -> None:
        """The connection closed: leave its consumer groups."""
        self.sessions.end(session)

    def heartbeat(self) -> None:
        """Keep every connected client's group memberships alive (see ``Sessions``)."""
        self.sessions.heartbeat()

    def remove_stale_members(self) -> None:
        """Drop group members a previous run of the Iggy transport left behind."""
        self.sessions.remove_stale_members()

    # ================================================================ dispatch

    def dispatch(self, session: Session, code: int, payload: bytes) -> bytes | Deferred[bytes]:
        """The reply frame for one request (or a Deferred firing with it).

        Checks run in this order: a known code (else InvalidCommand), a logged-in active
        user unless the command is Ping or a login (else Unauthenticated, before the
        payload is even parsed), the payload (its own status), permissions and existence
        inside the handler, then the operation."""
        user: User | None = None
        if session.user_id is not None:
            user = self.users.get(session.user_id)
            if user is None or not user.active:
                session.user_id = None
                user = None
        if user is None and code not in _OPEN_CODES:
            return c.frame_error(Status.UNAUTHENTICATED if code in _KNOWN_CODES
                                 else Status.INVALID_COMMAND)
        session.principal = user.username if user is not None else None
        try:
            cmd = c.decode_request(code, payload)
        except IggyError as error:
            self.boundary.count("INVALID")
            log.debug("iggy: client %d sent a bad request (code %d): %s", session.client_id,
                      code, error.message)
            return c.frame_error(error.status)
        boundary = self.boundary
        name = type(cmd).__name__
        boundary.count(name)
        handler = self.table.get(type(cmd))
        if handler is None:
            return self.unknown_command(session, cmd)
        if boundary.shutting_down() and type(cmd) is not c.Ping:
            return c.frame_error(status_for(Unavailable("broker is shutting down")))
        session.command = type(cmd)
        try:
            result = handler(session, user, cmd)
        except REFUSALS as error:
            return boundary.refusal(cmd, error)
        except Exception as error:
            return boundary.fault(name, cmd, error)
        if isinstance(result, Deferred):
            return result.addCallbacks(c.frame_ok, self._failed, errbackArgs=(cmd,))
        return c.frame_ok(result)

    def unknown_command(self, session: Session, cmd: c.Command) -> bytes:
        """A command the codec decodes but no handler serves: InvalidCommand, and the
        connection carries on."""
        log.warning("iggy: client %d sent %s, which has no handler", session.client_id,
                    type(cmd).__name__)
        return c.frame_error(Status.INVALID_COMMAND)

    def _failed(self, failure: Failure, cmd: Any) -> bytes:
        return self.boundary.failed(type(cmd).__name__, cmd, failure.value,
                                    failure.getTraceback())


def _refused(cmd: Any, error: BaseException) -> bytes:
    """A refusal's error status (``broker.iggy.errors.status_for``)."""
    return c.frame_error(status_for(error))


def _internal(cmd: Any, error: BaseException) -> bytes:
    """A bug's status: ``ERROR`` (1)."""
    return c.frame_error(Status.ERROR)
