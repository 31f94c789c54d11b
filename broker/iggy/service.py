"""The Iggy transport's shell: builds its objects over the broker's core and listens.

Owns: ``IggyService`` (catalog, user store, handlers and factory over one ``BrokerCore``),
the root-credential rule (first start only: from the config keys ``iggy.root_username`` /
``iggy.root_password``, else the environment variables ``IGGY_ROOT_USERNAME`` /
``IGGY_ROOT_PASSWORD``, else ``iggy``/``iggy`` — but only for a listener on a loopback
address: any other address refuses to start without explicit credentials), removing
orphaned ``__iggy.<n>`` store topics and re-applying the catalog's retention settings at
start, the heartbeat loop that keeps connected clients' group memberships alive, and
measuring the process and host facts GetStats reports.

Must not import: the global reactor (it comes as an argument to ``listen``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import platform
import resource
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from broker.core import BrokerCore
from broker.iggy.handlers import IggyHandlers, NodeInfo, SystemInfo
from broker.iggy.mapping import Catalog, store_retention
from broker.iggy.protocol import IggyFactory
from broker.iggy.users import (
    DEFAULT_SCRYPT_N,
    UserStore,
    check_password,
    check_username,
    hash_password,
)
from data.fs import OS_FS, FileLayer

__all__ = ["IggyService", "is_loopback", "root_credentials", "DEFAULT_ROOT"]

log = logging.getLogger("skerry.iggy")

DEFAULT_ROOT = ("iggy", "iggy")
"""The real clients' default login, used only for a listener on a loopback address."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
                 run_in_thread: Callable[[Callable[[], Any]], Deferred[Any]],
                 now_us: Callable[[], int], fs: FileLayer = OS_FS,
                 environ: Mapping[str, str] | None = None,
                 scrypt_n: int = DEFAULT_SCRYPT_N) -> None:
        self.core = core
        self.config = config
        self.clock = clock
        self.environ = os.environ if environ is None else environ
        self.scrypt_n = scrypt_n
        data_dir = config["data_dir"]
        self.data_dir = data_dir
        store = core.store
        self.catalog = Catalog(data_dir, store_topics=lambda: list(store.topics), now_us=now_us,
                               fs=fs)
        self.users = UserStore(data_dir, now_us=now_us, fs=fs)
        self.node = NodeInfo()
        self.handlers = IggyHandlers(
            core, self.catalog, self.users, clock=clock, now_us=now_us,
            run_in_thread=run_in_thread, system_info=self.system_info, node=self.node,
            scrypt_n=scrypt_n, max_payload=config["limits.max_message_bytes"])
        self.factory = IggyFactory(
            self.handlers, clock,
            max_frame_bytes=config["iggy.max_frame_bytes"],
            max_connections=config["limits.max_connections"],
            idle_timeout_ms=config["limits.idle_timeout_ms"],
            max_pending_output_bytes=config["limits.max_pending_output_bytes"])
        self._cpu_mark: tuple[float, float] | None = None
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
        for orphan in self.catalog.orphans():
            log.warning("iggy: removing store topic %s: no stream owns it (a topic create or "
                        "delete stopped half-way)", orphan)
            self.core.delete_topic(orphan)
        for stream in self.catalog.streams.values():
            for topic in stream.topics.values():
                if topic.message_expiry is None and topic.max_topic_size is None:
                    continue
                store_topic = self.core.store.topics.get(topic.store)
                if store_topic is None:
                    continue
                retention_ms, retention_bytes = store_retention(topic.message_expiry or 0,
                                                           topic.max_topic_size or 0,
                                                           len(store_topic.partitions))
                self.core.set_topic_retention(topic.store, retention_ms, retention_bytes)
        self.handlers.remove_stale_members()
        loop = LoopingCall(self.handlers.heartbeat)
        loop.clock = self.clock
        loop.start(self.handlers.session_timeout_ms / 3000.0, now=False).addErrback(
            lambda failure: log.error("iggy heartbeat loop failed: %s", failure.getTraceback()))
        self._heartbeats = loop
        self.started = True

    def listen(self, reactor: Any, host: str, port: int) -> Any:
        """Prepare (see ``prepare``) and listen; returns the listening port."""
        self.prepare(host)
        listening = reactor.listenTCP(port, self.factory, interface=host, backlog=1024)
        address = listening.getHost()
        self.node.ip = address.host
        self.node.tcp_port = address.port
        return listening

    def stop(self) -> None:
        """Refuse new connections and stop the heartbeat loop."""
        self.factory.refusing = "broker is shutting down"
        if self._heartbeats is not None and self._heartbeats.running:
            self._heartbeats.stop()
        self._heartbeats = None

    def all_idle(self) -> bool:
        return self.factory.all_idle()

    # ------------------------------------------------------------------ system facts

    def system_info(self) -> SystemInfo:
        """The process and host facts of GetStats (Linux /proc where available)."""
        page = os.sysconf("SC_PAGE_SIZE")
        total = os.sysconf("SC_PHYS_PAGES") * page
        available = os.sysconf("SC_AVPHYS_PAGES") * page
        rss = 0
        try:
            with open("/proc/self/statm", encoding="ascii") as statm:
                rss = int(statm.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = usage.ru_utime + usage.ru_stime
        now = self.clock.seconds()
        cpu_usage = 0.0
        if self._cpu_mark is not None and now > self._cpu_mark[0]:
            cpu_usage = 100.0 * (cpu - self._cpu_mark[1]) / (now - self._cpu_mark[0])
        self._cpu_mark = (now, cpu)
        try:
            disk = os.statvfs(self.data_dir)
            free_disk, total_disk = disk.f_bavail * disk.f_frsize, disk.f_blocks * disk.f_frsize
        except OSError:
            free_disk = total_disk = 0
        try:
            load = os.getloadavg()[0] / (os.cpu_count() or 1) * 100.0
        except OSError:
            load = 0.0
        uname = platform.uname()
        return SystemInfo(
            process_id=os.getpid(), cpu_usage=max(0.0, cpu_usage), total_cpu_usage=load,
            memory_usage=rss, total_memory=total, available_memory=available,
            hostname=socket.gethostname(), os_name=uname.system, os_version=uname.version,
            kernel_version=uname.release, threads_count=threading.active_count(),
            free_disk_space=free_disk, total_disk_space=total_disk)
