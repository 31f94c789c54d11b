"""The broker's shell: builds the object graph, owns the reactor, listeners, signals,
persistence threads and the orderly shutdown.

Owns: wiring ``Store`` -> ``ReplicationService`` -> ``GroupService`` -> ``BrokerCore`` ->
transports, and in a multi-broker cluster the ``ReplicaManager`` (fetch loops and leader
probes over connections to the other brokers); raising the open-file limit; the startup
summary; shutdown on SIGTERM/SIGINT (stop accepting, answer what is in flight, flush and
fsync, mark a clean shutdown, exit 0).

Everything below it takes the clock and the thread runner from here, so tests can build the
same graph over ``task.Clock`` and a synchronous runner.
"""

from __future__ import annotations

import logging
import os
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.internet.interfaces import IReactorTime

from broker.config import Config
from broker.core import BrokerCore, Watermarks
from broker.iggy.service import IggyService
from broker.services.groups import GroupService
from broker.services.replication import ReplicationService
from broker.v1.handlers import Handlers
from broker.v1.protocol import V1Factory
from data import speedups
from data.errors import DataDirError
from data.fs import OS_FS, FileLayer
from data.store import StorageConfig, Store
from groups.coordinator import GroupCoordinator
from replication.follower import Connector, FetchSettings, ReplicaManager, tcp_connector

__all__ = ["Broker", "build_broker", "run", "raise_open_file_limit", "cluster_security_refusal"]

log = logging.getLogger("skerry.server")


@dataclass
class Broker:
    """A built broker: the core plus its transports' factories and listening ports."""

    config: Config
    core: BrokerCore
    v1_factory: V1Factory
    store: Store
    replication: ReplicationService
    ports: list[Any] = field(default_factory=list)
    replicas: ReplicaManager | None = None
    """The fetch loops and leader probes of a cluster member (None on a single broker)."""
    iggy: IggyService | None = None
    """The Iggy binary transport (None unless ``iggy_port`` is set)."""
    metrics: Any = None
    """``broker.metrics.MetricsService``: /metrics and /health (None unless
    ``metrics_port`` is set)."""
    tls: Any = None
    """``broker.tls.server_options`` when ``tls.cert``/``tls.key`` are set: the V1, Iggy and
    metrics listeners then speak TLS only."""

    def listen(self, reactor: Any) -> list[str]:
        """Start every configured listener; returns their ``host:port`` descriptions."""
        host = self.config["host"]
        plain = reactor
        if self.tls is not None:
            from broker.tls import TLSListener

            reactor = TLSListener(plain, self.tls)
        port = reactor.listenTCP(self.config["port"], self.v1_factory, interface=host,
                                 backlog=1024)
        self.ports.append(port)
        address = port.getHost()
        cluster = self.config.cluster
        if cluster is not None:
            own = cluster.address(cluster.broker_id)
            if own.port != address.port:
                log.warning("listening on port %d but cluster.brokers gives broker %d the "
                            "address %s: the other brokers will not reach this one",
                            address.port, cluster.broker_id, own)
        addresses = [f"v1={address.host}:{address.port}"]
        if self.iggy is not None:
            iggy_port = self.iggy.listen(reactor, host, self.config["iggy_port"])
            self.ports.append(iggy_port)
            iggy_address = iggy_port.getHost()
            addresses.append(f"iggy={iggy_address.host}:{iggy_address.port}")
        if self.metrics is not None:  # last: it reports the broker ready
            addresses.append(self.metrics.listen(plain, host, self.config["metrics_port"],
                                                 tls=self.tls))
        return addresses

    def stop(self) -> Deferred[None]:
        """Stop accepting, answer what is in flight, flush and fsync, close the store."""
        self.v1_factory.refusing = "broker is shutting down"
        if self.metrics is not None:
            self.metrics.stopping()  # /health: 503 stopping while in-flight work drains
        if self.iggy is not None:
            self.iggy.stop()
        stops = [maybeDeferred(p.stopListening) for p in self.ports]
        self.ports.clear()
        clock = self.core.clock
        if self.replicas is not None:
            self.replicas.stop()
        self.replication.release_pulls()

        def wait_answered(_: object) -> Deferred[None]:
            self.core.flush()
            d: Deferred[None] = Deferred()
            deadline = clock.seconds() + 5.0

            def check() -> None:
                if (self.v1_factory.all_idle() and self.core.idle()
                        and (self.iggy is None or self.iggy.all_idle())) \
                        or clock.seconds() > deadline:
                    d.callback(None)
                else:
                    clock.callLater(0.01, check)

            check()
            return d

        def finish(_: object) -> Deferred[None]:
            return self.core.stop()

        result = DeferredList(stops).addCallback(wait_answered).addCallback(finish)
        if self.metrics is not None:
            result.addCallback(self.metrics.stop)
        result.addCallback(lambda _: log.info("clean shutdown complete"))
        return result


def build_broker(config: Config, clock: IReactorTime, *,
                 run_in_thread: Callable[[Callable[[], Any]], Deferred[Any]],
                 fs: FileLayer = OS_FS,
                 now_us: Callable[[], int] | None = None,
                 connect: Connector | None = None) -> Broker:
    """Open the store in ``config['data_dir']`` and wire every layer over it.

    ``data.errors.DataDirError`` when the directory cannot be used (it is a file, or another
    broker holds its lock); nothing in it has been touched then.

    With a ``cluster`` section the fetch loops start at once; ``connect`` opens connections
    to the other brokers (TCP over ``clock``, which must then be the reactor, by default).
    """
    data_dir = config["data_dir"]  # the store creates it, and locks it before anything else
    storage = StorageConfig(
        fsync=config["storage.fsync"],
        fsync_interval_ms=config["storage.fsync_interval_ms"],
        segment_bytes=config["storage.segment_bytes"],
        segment_ms=config["storage.segment_ms"],
    )
    kwargs: dict[str, Any] = {"fs": fs, "logger": logging.getLogger("skerry.store")}
    if now_us is not None:
        kwargs["now_us"] = now_us
    store = Store(data_dir, storage, **kwargs)
    replication = ReplicationService(
        store, clock,
        replica_lag_timeout_ms=config["replication.replica_lag_timeout_ms"],
        ack_timeout_ms=config["replication.ack_timeout_ms"],
        fsync_always=config["storage.fsync"] == "always",
        cluster=config.cluster,
    )

    def partitions_for(topic: str) -> int:
        found = store.topic(topic)
        return 0 if found is None else found.config.partitions

    # The group service reads offsets from the store and the replication service directly,
    # so it exists before the core, which tells it of topic changes.
    marks = Watermarks(store, replication)
    coordinator = GroupCoordinator(
        partitions_for=partitions_for,
        session_timeout_ms=config["groups.session_timeout_ms"],
        max_groups=config["limits.max_groups"],
        max_members_per_group=config["limits.max_members_per_group"],
    )
    groups = GroupService(coordinator, clock, data_dir, fs=fs, run_in_thread=run_in_thread,
                          hw_for=marks.hw, earliest_for=marks.earliest,
                          latest_for=marks.latest)
    core = BrokerCore(config, store, clock, replication=replication, groups=groups,
                      run_in_thread=run_in_thread)
    replication.set_log_syncer(core.when_durable)
    # Long polls wake when hw moves for any reason, timer-driven ISR changes included.
    replication.add_hw_listener(core.notify_hw)
    replication.add_change_listener(core.forget_producers)
    core.start()
    handlers = Handlers(core, groups, replication)
    if config["auth.tokens_file"] is not None:
        from broker.auth import TokenStore

        handlers.auth_tokens = TokenStore.from_file(config["auth.tokens_file"])
    factory = V1Factory(
        handlers, clock,
        max_line_bytes=config["limits.max_line_bytes"],
        max_message_bytes=config["limits.max_message_bytes"],
        max_connections=config["limits.max_connections"],
        idle_timeout_ms=config["limits.idle_timeout_ms"],
        max_pending_output_bytes=config["limits.max_pending_output_bytes"],
    )
    manager = None
    if config.cluster is not None:
        settings = FetchSettings(
            wait_ms=config["replication.fetch_wait_ms"],
            max_bytes=config["replication.fetch_max_bytes"],
            retry_backoff_ms=config["replication.retry_backoff_ms"],
            request_timeout_ms=config["replication.request_timeout_ms"],
        )
        if connect is None:
            connect = tcp_connector(clock, settings.request_timeout_ms / 1000.0)
        manager = ReplicaManager(replication, config.cluster, clock, connect, settings)
        manager.start()
    iggy = None
    if config["iggy_port"] is not None:
        from broker.services.host_facts import HostFacts
        from broker.services.iggy_catalog import Catalog
        from broker.services.iggy_users import UserStore
        from data.store import wall_clock_us

        iggy_now_us = now_us or wall_clock_us
        iggy = IggyService(
            core, config, clock, run_in_thread=run_in_thread, now_us=iggy_now_us,
            groups=groups,
            catalog=Catalog(data_dir, store_topics=core.topic_names, now_us=iggy_now_us, fs=fs),
            users=UserStore(data_dir, now_us=iggy_now_us, fs=fs),
            system_info=HostFacts(data_dir, clock))
    metrics = None
    if config["metrics_port"] is not None:
        from broker.metrics import MetricsService

        metrics = MetricsService.for_broker(core, factory, clock, groups=groups,
                                            replication=replication,
                                            tokens=handlers.auth_tokens)
    tls = None
    if config["tls.cert"] is not None:
        from broker.tls import server_options

        tls = server_options(config["tls.cert"], config["tls.key"])
    return Broker(config, core, factory, store, replication, replicas=manager, iggy=iggy,
                  metrics=metrics, tls=tls)


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard limit; returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit: %s", exc)
    return soft


def cluster_security_refusal(config: Config) -> str | None:
    """Why a cluster member cannot start with this configuration, or None.

    The fetch loops and leader probes reach the other brokers over plain TCP and send no
    AUTH: with ``tls.cert`` or ``auth.tokens_file`` set, every other broker would refuse
    them and the partitions would silently run without their followers."""
    if config.cluster is None:
        return None
    secured = [key for key in ("tls.cert", "auth.tokens_file") if config[key] is not None]
    if not secured:
        return None
    return (f"refusing to start a cluster member with {' and '.join(secured)} set: "
            f"replication between brokers speaks neither TLS nor AUTH yet, so the other "
            f"brokers would refuse this one's fetches; for now a cluster runs on loopback "
            f"addresses only, without them (docs/reliability.md, Security)")


def _log_always(logger: logging.Logger, message: str, *args: Any) -> None:
    """Log an INFO line whatever ``--log-level`` says, formatted like every other line.

    For the one line saying the broker is up: with ``--log-level warning`` a broker that
    printed nothing once ready would look hung. ``Logger.handle`` skips the level check
    that ``Logger.info`` makes; handlers still see an ordinary INFO record."""
    logger.handle(logger.makeRecord(logger.name, logging.INFO, __file__, 0, message, args,
                                    None))


def configure_logging(level: str) -> None:
    from twisted.logger import STDLibLogObserver, globalLogBeginner

    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    globalLogBeginner.beginLoggingTo([STDLibLogObserver()], redirectStandardIO=False)
    # Twisted's own chatter (factory start/stop per connection) is noise at info level.
    logging.getLogger("twisted").setLevel(max(logging.WARNING, logging.getLogger().level))


def run(config: Config) -> int:
    """Run a broker until SIGTERM/SIGINT; returns the process exit code."""
    configure_logging(config["log_level"])
    from broker.auth import AuthFileError, TokenStore, bind_refusal
    from broker.tls import TLSConfigError, server_options

    refusal = bind_refusal(config["host"], config["auth.tokens_file"] is not None)
    if refusal is None:
        refusal = cluster_security_refusal(config)
    if refusal is not None:  # a configuration mistake: exit 2 like a bad key
        log.error("%s", refusal)
        return 2
    try:  # the same checks build_broker makes, reported as configuration mistakes
        if config["auth.tokens_file"] is not None:
            TokenStore.from_file(config["auth.tokens_file"])
        if config["tls.cert"] is not None:
            server_options(config["tls.cert"], config["tls.key"])
    except (AuthFileError, TLSConfigError) as exc:
        log.error("%s", exc)
        return 2
    from twisted.internet import reactor, threads

    # Timers (session timeouts, ack timeouts, idle connections) must not jump with the
    # wall clock: every callLater and LoopingCall of this reactor runs on a monotonic clock.
    reactor.seconds = time.monotonic  # type: ignore[method-assign]
    nofile = raise_open_file_limit()
    reactor.suggestThreadPoolSize(4)
    started = time.monotonic()
    startup = None
    if config["metrics_port"] is not None:  # /health: 503 starting while the store recovers
        from broker.metrics import open_startup_listener

        try:
            startup = open_startup_listener(config)
        except OSError as exc:
            log.error("cannot listen on metrics_port %s: %s", config["metrics_port"], exc)
            return 1
    try:
        broker = build_broker(config, reactor, run_in_thread=threads.deferToThread)
    except DataDirError as exc:  # a file, or locked by another broker: its own words
        log.error("%s", exc)
        return 1
    except (OSError, ValueError) as exc:
        log.error("cannot open data dir %s: %s", config["data_dir"], exc)
        return 1
    if broker.metrics is not None:
        broker.metrics.startup = startup
    try:
        addresses = broker.listen(reactor)
    except Exception as exc:  # CannotListenError and friends: a clear line, no traceback
        log.error("cannot listen: %s", exc)
        broker.store.close()
        return 1
    store = broker.store
    _log_always(log, "skerry listening on %s; data in %s; %d topic(s): %s; fsync=%s; "
                "open-file limit %d; started in %.2fs; %s",
                " ".join(addresses), os.path.abspath(config["data_dir"]), len(store.topics),
                ", ".join(sorted(store.topics)) or "-", config["storage.fsync"], nofile,
                time.monotonic() - started,
                speedups.describe())  # compiled loops or the Python twin, and why
    reactor.addSystemEventTrigger("before", "shutdown", broker.stop)
    reactor.run()
    return 0
