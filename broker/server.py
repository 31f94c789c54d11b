"""The broker's shell: builds the object graph, owns the reactor, listeners, signals,
persistence threads and the orderly shutdown.

Owns: wiring ``Store`` -> ``ReplicationService`` -> ``GroupService`` -> ``BrokerCore`` ->
transports, and in a multi-broker cluster the ``ReplicaManager`` (fetch loops and leader
probes over connections to the other brokers); raising the open-file limit; the startup
summary; shutdown on SIGTERM/SIGINT (stop accepting, answer what is in flight, flush and
fsync, mark a clean shutdown, exit 0).

A cluster member's part of the graph (replication links, etcd control plane, admin plane,
cluster-wide group coordinator, peer security checks) is built by ``broker.cluster_wiring``.

Everything below it takes the clock and the thread runner from here, so tests can build the
same graph over ``task.Clock`` and a synchronous runner.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import resource
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.internet.interfaces import IReactorTime

from broker.cluster_wiring import (
    admin_plane,
    check_peer_security,
    cluster_coordinators,
    control_plane,
    live_brokers,
    replica_links,
)
from broker.config import Config
from broker.core import BrokerCore, Watermarks
from broker.iggy.service import IggyService
from broker.peer_links import Connector
from broker.services.group_log import GroupStateLog
from broker.services.groups import GroupService
from broker.services.replication import ReplicationService
from broker.transport.listeners import Listener
from broker.v1.handlers.dispatch import Handlers
from broker.v1.lane import lane_for
from broker.v1.protocol import V1Factory
from broker.v1.service import v1_listener
from data import speedups
from data.errors import DataDirError
from data.fs import OS_FS, FileLayer
from data.store import StorageConfig, Store
from groups.coordinator import GroupCoordinator
from groups.records import GroupRecords
from replication.follower import ReplicaManager

__all__ = ["Broker", "build_broker", "run", "raise_open_file_limit", "keep_freed_memory"]

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
    kafka: Any = None
    """``broker.kafka.service.KafkaService``: the Kafka transport (None unless
    ``kafka_port`` is set)."""
    tank: Any = None
    """``broker.tank.service.TankService``: the TANK binary transport (None unless
    ``tank_port`` is set)."""
    metrics: Any = None
    """``broker.metrics.MetricsService``: /metrics and /health (None unless
    ``metrics_port`` is set)."""
    tls: Any = None
    """``broker.tls.server_options`` when ``tls.cert``/``tls.key`` are set: the V1, Iggy,
    Kafka, TANK and metrics listeners then speak TLS only."""
    console: Any = None
    """``broker.console.ConsoleService``: the web console (None unless ``console_port`` is
    set)."""
    kafka_groups: Any = None
    """``broker.services.kafka_groups.KafkaGroupService``: the Kafka consumer groups
    (``kafka-groups.json``), sharing committed offsets with V1 groups."""
    consumer_groups: Any = None
    """``broker.services.consumer_groups.ConsumerGroupService``: KIP-848 consumer groups
    (V1 GROUP_HEARTBEAT), in memory, sharing committed offsets too."""
    control: Any = None
    """``broker.services.control.ControlPlane`` when ``cluster.etcd`` is set (None: the
    operator-driven mode)."""
    group_peers: Any = None
    """The connections that forward group commands to their coordinators (a cluster on
    etcd; ``broker.peer_links.Peers``)."""
    acls: Any = None
    """``broker.services.acls.AclService``: the ACLs in force and where they are stored."""
    _lane_reactor: Any = None
    """The reactor whose ``read_lanes`` hold the V1 factory's lane (``listen``)."""
    lane_state = "off (not listening)"
    """The V1 read lane (``broker.v1.lane``): "on", or "off (why)"; in the listening line."""

    def listen(self, reactor: Any) -> list[str]:
        """Start every configured listener; returns their ``host:port`` descriptions."""
        host = self.config["host"]
        plain = reactor
        if self.tls is not None:
            from broker.tls import TLSListener

            reactor = TLSListener(plain, self.tls)
        if self.tls is not None:
            self.lane_state = "off (TLS)"
        elif not self.config["v1.read_lane"]:
            self.lane_state = "off (v1.read_lane: false)"
        else:
            lane = lane_for(self.v1_factory, plain)
            if isinstance(lane, str):
                self.lane_state = lane
            else:  # the lean reactor, the compiled lane: before any connection
                self.v1_factory.lane = lane
                plain.read_lanes.append(lane)
                self._lane_reactor = plain
                self.lane_state = "on"
        addresses = []
        for listener in self.listeners():
            port = listener.listen(reactor, host, self.config[listener.setting])
            self.ports.append(port)
            address = port.getHost()
            addresses.append(f"{listener.name}={address.host}:{address.port}")
        if self.console is not None:
            addresses.append(self.console.listen(plain, self.config["console.host"],
                                                 self.config["console_port"], tls=self.tls))
        if self.metrics is not None:  # last: it reports the broker ready
            addresses.append(self.metrics.listen(plain, host, self.config["metrics_port"],
                                                 tls=self.tls))
        if self.console is not None:
            self.console.set_listeners(addresses)
        return addresses

    def listeners(self) -> list[Listener]:
        """The transports' listeners (``broker.transport.listeners``), in the order
        ``listen`` opens them: V1, then Iggy, Kafka and TANK where configured."""
        out = [v1_listener(self.v1_factory, self.config.cluster)]
        out += [service.listener for service in (self.iggy, self.kafka, self.tank)
                if service is not None]
        return out

    def stop(self) -> Deferred[None]:
        """Stop accepting, answer what is in flight, flush and fsync, close the store."""
        listeners = self.listeners()
        for listener in listeners:
            listener.refuse()
        if self.metrics is not None:
            self.metrics.stopping()  # /health: 503 stopping while in-flight work drains
        if self.iggy is not None:
            self.iggy.stop()  # its heartbeat loop
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
                if (self.core.idle() and all(listener.idle() for listener in listeners)) \
                        or clock.seconds() > deadline:
                    d.callback(None)
                else:
                    clock.callLater(0.01, check)

            check()
            return d

        def finish(_: object) -> Deferred[None]:
            lane = self.v1_factory.lane
            if lane is not None and lane in getattr(self._lane_reactor, "read_lanes", ()):
                self._lane_reactor.read_lanes.remove(lane)  # every reply is out by now
                log.info("V1 read lane: %d requests taken, %d of them queued behind", *lane.taken())
            if self.group_peers is not None:
                self.group_peers.close()
            if self.kafka_groups is not None:
                self.kafka_groups.close()
            if self.consumer_groups is not None:
                self.consumer_groups.close()
            return self.core.stop()

        def leave_etcd(_: object) -> Deferred[None] | None:
            if self.acls is not None:
                self.acls.stop()
            # Revoking the lease deletes this broker's registration at once: the controller
            # moves its partitions now, not a TTL later.
            return None if self.control is None else self.control.stop()

        result = DeferredList(stops).addCallback(wait_answered).addCallback(leave_etcd) \
            .addCallback(finish)
        if self.metrics is not None:
            result.addCallback(self.metrics.stop)
        if self.console is not None:
            result.addCallback(self.console.stop)
        result.addCallback(lambda _: log.info("clean shutdown complete"))
        return result


def build_broker(config: Config, clock: IReactorTime, *,
                 run_in_thread: Callable[[Callable[[], Any]], Deferred[Any]],
                 fs: FileLayer = OS_FS,
                 now_us: Callable[[], int] | None = None,
                 connect: Connector | None = None,
                 etcd_transport: Any = None) -> Broker:
    """Open the store in ``config['data_dir']`` and wire every layer over it.

    ``data.errors.DataDirError`` when the directory cannot be used (it is a file, or another
    broker holds its lock); nothing in it has been touched then.

    With a ``cluster`` section the fetch loops start at once; ``connect`` opens connections
    to the other brokers (TCP over ``clock``, which must then be the reactor, by default).
    With ``cluster.etcd`` the control plane starts too; ``etcd_transport`` carries its HTTP
    calls (``broker.services.etcd.TreqTransport`` over ``clock`` by default).
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
    # Group state and committed offsets live in the internal topic __skerry_groups
    # (read here, before anything serves; written through the core once it exists). In a
    # cluster each broker still keeps its own JSON files (docs/groups.md, "In a cluster").
    # A cluster on etcd: each broker holds the partitions of the topic it leads (the
    # coordinators, broker/services/coordinators.py); without etcd, its own JSON files.
    state_log = None
    cluster_groups = config.cluster is not None and config.cluster.etcd is not None
    if config.cluster is None or cluster_groups:
        # One broker has one coordinator: one partition is enough (fewer files, one batch
        # per write); a cluster spreads its groups over 10.
        partitions = config["groups.state_topic_partitions"] or (10 if cluster_groups else 1)
        state_log = GroupStateLog(store, data_dir, clock, partitions=partitions,
                                  fs=fs, run_in_thread=run_in_thread, cluster=cluster_groups)
    groups = GroupService(coordinator, clock, data_dir, fs=fs, run_in_thread=run_in_thread,
                          hw_for=marks.hw, earliest_for=marks.earliest,
                          latest_for=marks.latest, state_log=state_log)
    # Kafka's classic groups: their own coordinator, the same offsets (and each refuses a
    # group id the other holds live).
    from broker.services.kafka_groups import KafkaGroupService

    kafka_groups = KafkaGroupService(groups, clock, data_dir, fs=fs,
                                     run_in_thread=run_in_thread, state_log=state_log)
    # KIP-848 consumer groups (GROUP_HEARTBEAT): the same offsets, and each of the three
    # coordinators refuses a group id another holds live.
    from broker.services.consumer_groups import ConsumerGroupService
    from groups.consumer_coordinator import ConsumerConfig

    consumer_groups = ConsumerGroupService(
        groups, clock, lambda: {name: topic.config.partitions
                                for name, topic in store.topics.items()},
        other_protocol=kafka_groups.coordinator.live_protocol,
        topic_id=lambda name: _topic_uuid(store, name),
        config=ConsumerConfig(
            session_timeout_ms=config["groups.consumer_session_timeout_ms"],
            heartbeat_interval_ms=config["groups.consumer_heartbeat_interval_ms"]),
        state_log=state_log)
    if state_log is not None:
        consumer_groups.load_groups(state_log.loaded.consumer_groups)
    core = BrokerCore(config, store, clock, replication=replication, groups=groups,
                      run_in_thread=run_in_thread)
    # KIP-848 groups follow their topics: created (regex subscriptions), deleted, grown.
    core.add_topic_listener(lambda _topic: consumer_groups.metadata_changed())

    if state_log is not None:
        state_log.attach(core, GroupRecords(coordinator, kafka_groups.coordinator,
                                            consumer_groups.coordinator))
    replication.set_log_syncer(core.when_durable)
    # Long polls wake when hw moves for any reason, timer-driven ISR changes included.
    replication.add_hw_listener(core.notify_hw)
    replication.add_change_listener(core.forget_producers)
    replication.add_copy_listener(core.replica_copied)
    core.start()
    authorizer = _authorizer(config)
    core.access.authorizer = authorizer  # before the handlers: they bind the checked paths
    handlers = Handlers(core, groups, replication)
    handlers.consumer_groups = consumer_groups
    # What /metrics and the console show of groups: classic and KIP-848 ones alike.
    group_views = handlers.group_views()
    if config["auth.tokens_file"] is not None:
        from broker.auth import TokenStore

        handlers.auth_tokens = TokenStore.from_file(config["auth.tokens_file"])
        if config.cluster is not None:  # broker-only commands want a peer principal
            handlers.peer_users = config.cluster.security.peer_users
    factory = V1Factory(
        handlers, clock,
        max_line_bytes=config["limits.max_line_bytes"],
        max_message_bytes=config["limits.max_message_bytes"],
        max_connections=config["limits.max_connections"],
        idle_timeout_ms=config["limits.idle_timeout_ms"],
        max_pending_output_bytes=config["limits.max_pending_output_bytes"],
    )
    manager = None
    peer_connect = None
    if config.cluster is not None:
        manager, peer_connect = replica_links(config, clock, replication, connect)
    control = None
    if config.cluster is not None and config.cluster.etcd is not None:
        control = control_plane(config, clock, core, replication, etcd_transport)
        handlers.control = control
    handlers.admin = admin_plane(config, core, handlers, replication, control, fs)
    group_peers = None
    if cluster_groups and state_log is not None:
        group_peers = cluster_coordinators(config, clock, store, core, replication, control, handlers,
                                    state_log, groups, kafka_groups, peer_connect)
    handlers.acls = _acl_service(config, authorizer, control, clock)
    iggy = None
    if config["iggy_port"] is not None:
        from broker.services.host_facts import HostFacts
        from broker.services.iggy_catalog import Catalog
        from broker.services.iggy_users import UserStore
        from data.store import wall_clock_us

        iggy_now_us = now_us or wall_clock_us
        iggy = IggyService(
            core, config, clock, run_in_thread=run_in_thread, now_us=iggy_now_us,
            groups=groups, acls=handlers.acls,
            catalog=Catalog(data_dir, store_topics=core.topic_names, now_us=iggy_now_us, fs=fs),
            users=UserStore(data_dir, now_us=iggy_now_us, fs=fs),
            system_info=HostFacts(data_dir, clock))
        if group_peers is not None:  # Iggy's group commands reach each group's coordinator
            iggy.handlers.ctx.router.route_through(
                handlers.coordinators, handlers.forward, live_brokers(config, control))
            iggy.handlers.sessions.number_clients_from(config.cluster.broker_id)
    kafka = None
    if config["kafka_port"] is not None:
        from broker.kafka.service import KafkaService
        from data.store import wall_clock_us

        placement = None
        if config.cluster is not None:
            from broker.kafka.service import ClusterPlacement

            placement = ClusterPlacement(core, config.cluster, replication, control)
            placement.coordinators = handlers.coordinators
        kafka = KafkaService(core, config, clock, now_us=now_us or wall_clock_us,
                             groups=kafka_groups, placement=placement,
                             tokens=handlers.auth_tokens)
        kafka.ctx.producer_ids = _producer_ids(data_dir, control, fs)
        kafka.ctx.acls = handlers.acls  # CreateAcls/DescribeAcls/DeleteAcls
        kafka.ctx.consumer_groups = consumer_groups  # ConsumerGroupHeartbeat/Describe
    tank = None
    if config["tank_port"] is not None:
        from broker.tank.service import TankService

        tank = TankService(core, config, clock, is_leader=replication.is_leader)
    metrics = None
    if config["metrics_port"] is not None:
        from broker.metrics import MetricsService

        metrics = MetricsService.for_broker(core, factory, clock, groups=group_views,
                                            replication=replication,
                                            tokens=handlers.auth_tokens)
    if metrics is not None and control is not None:
        metrics.metrics.control = control
    if metrics is not None and config.cluster is not None:
        metrics.metrics.broker_id = config.cluster.broker_id
    if metrics is not None:
        core.access.on_refused = metrics.metrics.refused
        for name, service in (("iggy", iggy), ("kafka", kafka), ("tank", tank)):
            if service is not None:
                metrics.metrics.add_transport(name, service.factory,
                                              service.factory.handlers.boundary.counts)
    tls = None
    if config["tls.cert"] is not None:
        from broker.tls import server_options

        tls = server_options(config["tls.cert"], config["tls.key"])
    console = None
    if config["console_port"] is not None:
        from broker.console import ConsoleService

        cluster_view = None
        if control is not None:
            from broker.console.cluster import ControlPlaneView

            cluster_view = ControlPlaneView(control, config.cluster,
                                            config.cluster.broker_id)
        console = ConsoleService.for_broker(
            core, factory, clock, config=config, groups=group_views, replication=replication,
            tokens=handlers.auth_tokens,
            counters=metrics.metrics if metrics is not None else None, cluster=cluster_view)
        console.data.access = handlers.acls
    return Broker(config, core, factory, store, replication, replicas=manager, iggy=iggy,
                  metrics=metrics, tls=tls, console=console, kafka=kafka,
                  kafka_groups=kafka_groups, tank=tank, control=control,
                  consumer_groups=consumer_groups, acls=handlers.acls,
                  group_peers=group_peers)


def _authorizer(config: Config) -> Any:
    """The ACL authorizer (docs/security.md): on with ``auth.tokens_file``, super users
    from ``auth.super_users`` and the cluster's peer users; its rules come from
    ``_acl_service``."""
    from access import Authorizer

    return Authorizer(enabled=config["auth.tokens_file"] is not None,
                      super_users=config.super_users,
                      allow_everyone_if_no_acl_found=config[
                          "auth.allow_everyone_if_no_acl_found"])


def _acl_service(config: Config, authorizer: Any, control: Any, clock: IReactorTime) -> Any:
    """Where the ACLs live: ``acls.json`` in the data directory on one broker, the key
    ``/skerry/<cluster id>/acls`` in etcd in a cluster (``broker/services/acls.py``). With
    etcd the load is retried every second until it succeeds; until then only super users
    pass (no ACL found)."""
    from broker.services.acls import AclService, EtcdAcls, FileAcls

    if control is None:
        service = AclService(authorizer, FileAcls(config["data_dir"]))
        service.start()
        return service
    service = AclService(authorizer, EtcdAcls(control.client, control.layout.prefix + "acls"))

    def start() -> None:
        d = service.start()
        if d is not None:
            d.addErrback(retry)

    def retry(failure: Any) -> None:
        log.warning("reading the ACLs from etcd failed (%s); retrying in 1 s", failure.value)
        clock.callLater(1.0, start)

    start()
    return service


def _topic_uuid(store: Any, name: str) -> Any:
    """A store topic's own id as a ``uuid.UUID`` (what Kafka's Metadata tells clients;
    KIP-848 assignments name topics by it), None for a topic without one."""
    import uuid

    topic = store.topics.get(name)
    tid = None if topic is None else topic.config.topic_id
    return uuid.UUID(hex=tid) if tid else None


def _producer_ids(data_dir: str, control: Any, fs: Any) -> Any:
    """Producer ids for Kafka's InitProducerId: blocks from the data directory's own mark,
    or in a cluster with etcd, from the cluster's counter (``broker.services.producer_ids``)."""
    from broker.services.producer_ids import EtcdBlockSource, LocalBlockSource, ProducerIds

    local = LocalBlockSource(data_dir, fs)
    if control is None:
        return ProducerIds(local)
    return ProducerIds(EtcdBlockSource(control.client, control.layout.prefix, local))


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


FREED_MEMORY_KEPT_BYTES = 256 << 20
"""How much freed heap the broker keeps for reuse instead of handing it back to the kernel."""

MMAP_THRESHOLD_BYTES = 32 << 20
"""Allocations up to this size come from the heap (glibc's largest setting)."""


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep freed memory for the next allocation (True when set).

    A large Kafka fetch reads and encodes megabytes per partition into fresh ``bytes``,
    then frees them. By default glibc gives that memory back (``brk`` trimmed,
    ``munmap``) and the next fetch page-faults it in again: 4 KiB at a time, each page
    zeroed by the kernel. perf of a 6-partition librdkafka consume put those faults at a
    tenth of the broker's CPU. With a fixed mmap threshold and a trim threshold of
    ``FREED_MEMORY_KEPT_BYTES``, the broker reuses the pages; its resident memory stays
    near its peak after large fetches instead of falling back. Not glibc (musl, macOS):
    nothing is changed."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    m_trim_threshold, m_mmap_threshold = -1, -3  # malloc.h
    return bool(mallopt(m_mmap_threshold, MMAP_THRESHOLD_BYTES)) \
        and bool(mallopt(m_trim_threshold, FREED_MEMORY_KEPT_BYTES))


LISTENER_SETTINGS = ("port", "iggy_port", "kafka_port", "tank_port", "console_port",
                     "metrics_port")
"""Every setting that opens a listener, in the order ``Broker.listen`` opens them (the
transports' ``Broker.listeners()``, then the console and the metrics endpoint)."""


def listener_addresses(config: Config) -> list[tuple[str, str, int]]:
    """``(setting, host, port)`` of every listener the configuration asks for (port 0,
    "any free port", included: it cannot clash)."""
    found = []
    for setting in LISTENER_SETTINGS:
        port = config[setting]
        if port is None:
            continue
        host = config["console.host"] if setting == "console_port" else config["host"]
        found.append((setting, host, int(port)))
    return found


def check_listener_ports(config: Config) -> str | None:
    """Bind and listen on every configured port, then let go: None when each could be
    had, else the one line to log, naming the address and the setting. Run before the
    data directory is created or locked, so a port clash leaves nothing on disk. Sockets
    take ``SO_REUSEADDR``, as Twisted's listeners do, so a port of a broker that has just
    stopped (TIME_WAIT) is not mistaken for a taken one; they stay open until all are
    bound, so two settings naming the same port are caught too."""
    held: list[socket.socket] = []
    try:
        for setting, host, port in listener_addresses(config):
            if port == 0:
                continue
            # the address family Twisted's listenTCP picks: IPv6 for an IPv6 literal only
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            try:
                sock = socket.socket(family, socket.SOCK_STREAM)
                held.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((host, port))
                sock.listen(1)
            except OSError as exc:
                where = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
                if exc.errno == errno.EADDRINUSE:
                    return (f"cannot listen on {where} ({setting}): address already in use "
                            f"(another broker or program has it); stop it, or set {setting} "
                            "to a free port")
                reason = exc.strerror or str(exc)
                return f"cannot listen on {where} ({setting}): {reason}"
        return None
    finally:
        for sock in held:
            sock.close()


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
    if refusal is None and config["console_port"] is not None:
        console_refusal = bind_refusal(config["console.host"],
                                       config["auth.tokens_file"] is not None)
        refusal = console_refusal and f"console.host: {console_refusal}"
    if refusal is None:
        from broker.tank.service import tank_refusal

        refusal = tank_refusal(config)
    if refusal is not None:  # a configuration mistake: exit 2 like a bad key
        log.error("%s", refusal)
        return 2
    try:  # the same checks build_broker makes, reported as configuration mistakes
        if config["auth.tokens_file"] is not None:
            TokenStore.from_file(config["auth.tokens_file"])
        if config["tls.cert"] is not None:
            server_options(config["tls.cert"], config["tls.key"])
        check_peer_security(config)
    except (AuthFileError, TLSConfigError) as exc:
        log.error("%s", exc)
        return 2
    clash = check_listener_ports(config)  # before anything is created on disk
    if clash is not None:
        log.error("%s", clash)
        return 1
    if config["reactor"] == "lean":  # before anything imports twisted.internet.reactor
        from broker.reactor import install_reactor

        install_reactor()
    from twisted.internet import reactor, threads

    # Timers (session timeouts, ack timeouts, idle connections) must not jump with the
    # wall clock: every callLater and LoopingCall of this reactor runs on a monotonic clock.
    reactor.seconds = time.monotonic  # type: ignore[method-assign]
    nofile = raise_open_file_limit()
    keep_freed_memory()
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
                "open-file limit %d; started in %.2fs; %s; V1 read lane: %s",
                " ".join(addresses), os.path.abspath(config["data_dir"]), len(store.topics),
                ", ".join(sorted(store.topics)) or "-", config["storage.fsync"], nofile,
                time.monotonic() - started,
                speedups.describe(),  # compiled loops or the Python twin, and why
                broker.lane_state)
    reactor.addSystemEventTrigger("before", "shutdown", broker.stop)
    reactor.run()
    return 0
