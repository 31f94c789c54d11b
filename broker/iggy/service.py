"""The Iggy transport's shell: builds its objects over the broker's core and listens.

Owns: ``IggyService`` (handlers and factory over one ``BrokerCore`` and the services the
broker's shell built for it: the catalog, the user store, the host facts),
the one-time migration of stored Iggy permissions to ACL bindings, the root-credential rule (first start only: from the config keys ``iggy.root_username`` /
``iggy.root_password``, else the environment variables ``IGGY_ROOT_USERNAME`` /
``IGGY_ROOT_PASSWORD``, else ``iggy``/``iggy`` — but only for a listener on a loopback
address: any other address refuses to start without explicit credentials), removing
orphaned ``__iggy.<n>`` store topics and re-applying the catalog's retention settings at
start, and the heartbeat loop that keeps connected clients' group memberships alive.

Must not import: the global reactor (it comes as an argument to ``listen``), the file
layer: it reads and writes no file itself (what the transport keeps on disk,
``broker.services`` keeps; the broker's shell builds those services and passes them in).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from broker.auth import is_loopback
from broker.core import BrokerCore
from broker.iggy.handlers import IggyHandlers, NodeInfo
from broker.iggy.protocol import IggyFactory
from broker.services.groups import GroupService
from broker.services.host_facts import SystemInfo
from broker.services.iggy_catalog import Catalog, store_retention
from broker.services.iggy_users import (
    DEFAULT_SCRYPT_N,
    UserStore,
    check_password,
    check_username,
    hash_password,
)
from broker.transport.listeners import Listener

__all__ = ["IggyService", "is_loopback", "root_credentials", "DEFAULT_ROOT"]

log = logging.getLogger("skerry.iggy")

DEFAULT_ROOT = ("iggy", "iggy")
"""The real clients' default login, used only for a listener on a loopback address."""


def root_credentials(config: Any, environ: Mapping[str, str], host: str) -> tuple[str, str]:
    """The root user's credentials for a first start, per the rule in the module doc.

    ``ValueError`` when only one half is given, or when none are given and ``host`` is
    not a loopback address."""
    username = config["iggy.root_username"] or environ.get("IGGY_ROOT_USERNAME") or None
    password = config["iggy.root_password"] or environ.get("IGGY_ROOT_PASSWORD") or None
    if (username is None) != (password is None):
        raise ValueError("give both iggy.root_username and iggy.root_password (or both "
                         "IGGY_ROOT_USERNAME and IGGY_ROOT_PASSWORD), not one")
    if username is None or password is None:
        if not is_loopback(host):
            raise ValueError(f"the Iggy listener on {host} needs root credentials: set "
                             f"iggy.root_username and iggy.root_password (or "
                             f"IGGY_ROOT_USERNAME and IGGY_ROOT_PASSWORD); the default "
                             f"iggy/iggy is allowed on a loopback address only")
        return DEFAULT_ROOT
    return username, password


class IggyService:
    """The Iggy binary transport over one broker core."""

    def __init__(self, core: BrokerCore, config: Any, clock: IReactorTime, *,
                 groups: GroupService, catalog: Catalog, users: UserStore,
                 system_info: Callable[[], SystemInfo],
                 run_in_thread: Callable[[Callable[[], Any]], Deferred[Any]],
                 now_us: Callable[[], int], acls: Any,
                 environ: Mapping[str, str] | None = None,
                 scrypt_n: int = DEFAULT_SCRYPT_N) -> None:
        self.core = core
        self.config = config
        self.clock = clock
        self.environ = os.environ if environ is None else environ
        self.scrypt_n = scrypt_n
        self.catalog = catalog
        self.users = users
        self.node = NodeInfo()
        self.handlers = IggyHandlers(
            core, groups, self.catalog, self.users, clock=clock, now_us=now_us,
            run_in_thread=run_in_thread, system_info=system_info, node=self.node,
            scrypt_n=scrypt_n, max_payload=config["limits.max_message_bytes"],
            max_partitions_per_topic=config["limits.max_partitions_per_topic"],
            max_topics=config["limits.max_topics"],
            session_timeout_ms=config["groups.session_timeout_ms"])
        self.acls = acls
        self.handlers.ctx.acls = acls
        self.factory = IggyFactory(
            self.handlers, clock,
            max_frame_bytes=config["iggy.max_frame_bytes"],
            max_connections=config["limits.max_connections"],
            idle_timeout_ms=config["limits.idle_timeout_ms"],
            max_pending_output_bytes=config["limits.max_pending_output_bytes"])
        self._heartbeats: LoopingCall | None = None
        self.started = False

    def prepare(self, host: str) -> None:
        """Check the root-credential rule for ``host``, create the root user on the first
        start, tidy the store and start the handlers. ``ValueError`` refuses the start."""
        if not self.users.initialized:
            username, password = root_credentials(self.config, self.environ, host)
            check_username(username)
            check_password(password)
            self.users.initialize(username, hash_password(password, self.scrypt_n))
        elif not is_loopback(host) and not (
                self.config["iggy.root_username"] or self.environ.get("IGGY_ROOT_USERNAME")):
            raise ValueError(f"the Iggy listener on {host} needs explicit root credentials "
                             f"(iggy.root_username/iggy.root_password or IGGY_ROOT_USERNAME/"
                             f"IGGY_ROOT_PASSWORD); they only create the root user on a first "
                             f"start, later starts keep the stored password")
        self.migrate_permissions()
        for orphan in self.catalog.orphans():
            log.warning("iggy: removing store topic %s: no stream owns it (a topic create or "
                        "delete stopped half-way)", orphan)
            self.core.delete_topic(orphan)
        for stream in self.catalog.list_streams():
            for topic in stream.topics.values():
                if topic.message_expiry is None and topic.max_topic_size is None:
                    continue
                config = self.core.topic_config(topic.store)
                if config is None:
                    continue
                retention_ms, retention_bytes = store_retention(topic.message_expiry or 0,
                                                                topic.max_topic_size or 0,
                                                                config.partitions)
                self.core.set_topic_retention(topic.store, retention_ms, retention_bytes)
        self.handlers.remove_stale_members()
        loop = LoopingCall(self.handlers.heartbeat)
        loop.clock = self.clock
        loop.start(self.handlers.session_timeout_ms / 3000.0, now=False).addErrback(
            lambda failure: log.error("iggy heartbeat loop failed: %s", failure.getTraceback()))
        self._heartbeats = loop
        self.started = True

    def migrate_permissions(self) -> None:
        """Once, for a data directory from before the ACLs: each user's stored Iggy
        permissions become ACL bindings (``broker.iggy.access.bindings_for``), then the blob
        is dropped from ``iggy-users.json``. A failed write leaves the blob for the next
        start."""
        for user in self.users.legacy_permissions():
            d = self.handlers.ctx.write_permissions(user.username, user.permissions)

            def done(_: Any, user: Any = user) -> None:
                self.users.forget_permissions(user)
                log.warning("iggy: migrated the stored permissions of user %r to ACL "
                            "bindings for User:%s (see `skerry acls list`)", user.username,
                            user.username)

            d.addCallbacks(done, lambda failure, user=user: log.error(
                "iggy: could not migrate the permissions of user %r: %s", user.username,
                failure.getErrorMessage()))

    @property
    def listener(self) -> Listener:
        """The Iggy listener (``broker.transport.listeners``): ``prepare`` first, then the
        bound address is what GetMe/GetClients report."""
        return Listener("iggy", "iggy_port", self.factory, before=self.prepare,
                        bound=self._bound)

    def listen(self, reactor: Any, host: str, port: int) -> Any:
        """Prepare (see ``prepare``) and listen; returns the listening port."""
        return self.listener.listen(reactor, host, port)

    def _bound(self, address: Any) -> None:
        self.node.ip = address.host
        self.node.tcp_port = address.port

    def stop(self) -> None:
        """Refuse new connections and stop the heartbeat loop."""
        self.factory.refusing = "broker is shutting down"
        if self._heartbeats is not None and self._heartbeats.running:
            self._heartbeats.stop()
        self._heartbeats = None

    def all_idle(self) -> bool:
        return self.factory.all_idle()
