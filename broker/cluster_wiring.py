"""The cluster wiring of the broker's shell: what a member of a multi-broker cluster adds to
the object graph ``broker.server.build_broker`` builds.

Owns: the replication links (``replica_links``: ``ReplicaManager`` over authenticated,
optionally TLS connections), the etcd control plane (``control_plane``), what admin commands
ask (``admin_plane``), the cluster-wide group coordinator and its forwarding
(``cluster_coordinators``, ``live_brokers``), and the checks of the files of
docs/replication.md, Security between brokers (``check_peer_security``, ``peer_tls``,
``etcd_security``).

Must not import: ``broker.server`` (which imports this), the transports' protocols; services
and classes it wires are imported where they are built.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from broker.config import Config
from broker.core import BrokerCore
from broker.peer_links import Connector, Peers, V1ReplicaLinks, authenticating, tcp_connector
from broker.services.group_log import GroupStateLog
from broker.services.groups import GroupService
from broker.services.replication import ReplicationService
from broker.v1.handlers.dispatch import Handlers
from data.fs import FileLayer
from data.store import Store
from replication.follower import FetchSettings, ReplicaManager

log = logging.getLogger("skerry.server")

__all__ = ["admin_plane", "check_peer_security", "cluster_coordinators", "control_plane",
           "etcd_security", "live_brokers", "peer_tls", "replica_links"]


def replica_links(config: Config, clock: IReactorTime, replication: ReplicationService,
                  connect: Connector | None) -> tuple[ReplicaManager, Connector]:
    """The replication links of a cluster member, started: the ``ReplicaManager`` (fetch
    loops and leader probes) over V1 links (``broker.peer_links``) on ``connect`` (default: TCP, TLS with ``tls.cert``, logged in
    as the peer user when ``cluster.peer_token_file`` is set); returns it and the connector
    the group forwarding reuses."""
    assert config.cluster is not None
    settings = FetchSettings(
        wait_ms=config["replication.fetch_wait_ms"],
        max_bytes=config["replication.fetch_max_bytes"],
        retry_backoff_ms=config["replication.retry_backoff_ms"],
        request_timeout_ms=config["replication.request_timeout_ms"],
    )
    if connect is None:
        connect = tcp_connector(clock, settings.request_timeout_ms / 1000.0,
                                peer_tls(config))
    security = config.cluster.security
    if security.peer_user is not None and security.peer_token_file is not None:
        from broker.auth import read_peer_token

        connect = authenticating(connect, security.peer_user,
                                 read_peer_token(security.peer_token_file), clock)
    links = V1ReplicaLinks(Peers(config.cluster, connect, clock,
                                 request_timeout_ms=settings.request_timeout_ms))
    manager = ReplicaManager(replication, links, clock, settings)
    manager.start()
    return manager, connect


def cluster_coordinators(config: Config, clock: IReactorTime, store: Store, core: BrokerCore,
                  replication: ReplicationService, control: Any, handlers: Handlers,
                  state_log: GroupStateLog, groups: GroupService, kafka_groups: Any,
                  connect: Connector | None) -> Any:
    """The cluster-wide group coordinator of a ``cluster.etcd`` member (docs/cluster.md,
    Consumer groups): ``__skerry_groups`` requested from the controller (RF min(3,
    brokers), min ISR 2 with RF 3), the partitions this broker leads loaded and unloaded
    as leadership moves, and group commands for other coordinators forwarded to them.
    Returns the forwarding connections (closed at stop)."""
    from broker.services.coordinators import CoordinatorPartitions
    from broker.v1.handlers.forward import FORWARD_CID_PREFIX
    from groups.records import GROUPS_TOPIC, GROUPS_TOPIC_SETTINGS

    cluster = config.cluster
    assert cluster is not None and connect is not None
    rf = min(3, len(cluster.brokers))
    min_isr = 2 if rf >= 3 else 1

    def ensure_topic() -> None:
        if store.topic(GROUPS_TOPIC) is None:
            control.request_topic(GROUPS_TOPIC, state_log.partitions, rf, min_isr,
                                  GROUPS_TOPIC_SETTINGS)
            clock.callLater(1.0, ensure_topic)

    clock.callLater(0.2, ensure_topic)
    coordinators = CoordinatorPartitions(cluster.broker_id, state_log, store, replication,
                                         clock, groups, kafka_groups,
                                         leader_of=handlers.admin.leader_of,
                                         consumer_groups=handlers.consumer_groups)
    coordinators.start()

    def forwarding_connect(address: Any) -> Deferred[Any]:
        def prefixed(proto: Any) -> Any:
            proto.cid_prefix = FORWARD_CID_PREFIX
            return proto

        return connect(address).addCallback(prefixed)

    peers = Peers(cluster, forwarding_connect, clock,
                  request_timeout_ms=config["replication.request_timeout_ms"])
    handlers.coordinators = coordinators
    handlers.forward = peers.request
    if state_log.legacy_pending:  # old group files: offsets of groups coordinated elsewhere
        from broker.services.coordinators import LegacyImport
        from broker.services.group_router import GroupRouter

        router = GroupRouter(groups)
        router.route_through(coordinators, peers.request, live_brokers(config, control))
        LegacyImport(state_log, router, clock,
                     has_topic=lambda name: store.topic(name) is not None).start()
    return peers


def live_brokers(config: Config, control: Any) -> Callable[[], list[int]]:
    """The ids of the cluster's live brokers (etcd's view when there is one)."""
    cluster = config.cluster
    assert cluster is not None

    def live() -> list[int]:
        if control is not None:
            return sorted(control.view.brokers)
        return sorted(cluster.brokers)

    return live


def admin_plane(config: Config, core: BrokerCore, handlers: Handlers,
                 replication: ReplicationService, control: Any, fs: FileLayer) -> Any:
    """What the seed broker's admin commands and NOT_LEADER hints ask
    (``broker/services/cluster_admin.py``): the etcd control plane when there is one, else
    the local metadata file in the data dir (docs/cluster.md)."""
    from broker.services.cluster_admin import EtcdAdmin, LocalControl

    if control is not None:
        admin: Any = EtcdAdmin(control, config.cluster)
    else:
        admin = LocalControl(
            config["data_dir"], create_locally=handlers.create_topic_here,
            topic_names=core.topic_names,
            check_partition=lambda topic, partition: core.resolve(topic, partition, False),
            cluster=config.cluster,
            replicas=replication if config.cluster is not None else None,
            unclean_allowed=bool(getattr(config.cluster, "unclean_leader_election", False)),
            fs=fs)
    replication.set_leader_lookup(admin.leader_of, authoritative=control is not None)
    return admin


def control_plane(config: Config, clock: IReactorTime, core: BrokerCore,
                   replication: ReplicationService, transport: Any) -> Any:
    """The etcd control plane of a ``cluster.etcd`` member, started (it registers, reads
    every key and watches in the background; partitions take writes once read)."""
    from broker.services.control import ControlPlane
    from broker.services.control.topics import CoreTopics
    from broker.services.etcd import EtcdClient, TreqTransport

    cluster = config.cluster
    assert cluster is not None and cluster.etcd is not None
    if transport is None:
        transport = TreqTransport(clock, **etcd_security(cluster.etcd))
    client = EtcdClient(list(cluster.etcd.endpoints), clock, transport)
    control = ControlPlane(cluster, clock, client, replication, CoreTopics(core, replication),
                           config["data_dir"],
                           default_min_isr=config["defaults.min_insync_replicas"])

    def remote_create(name: str, settings: Any) -> None:
        extra = {k: v for k, v in (("retention_ms", settings.retention_ms),
                                   ("retention_bytes", settings.retention_bytes))
                 if v is not None}
        control.request_topic(name, settings.partitions, settings.replication_factor,
                              settings.min_insync_replicas, extra)

    core.set_remote_create(remote_create)
    control.start()
    return control


def etcd_security(etcd: Any) -> dict[str, Any]:
    """``TreqTransport``'s TLS files and etcd login from ``cluster.etcd`` (docs/replication.md,
    Security between brokers); the password file must be private like a peer token."""
    kwargs: dict[str, Any] = {"ca": etcd.ca, "cert": etcd.cert, "key": etcd.key}
    if etcd.user is not None:
        from broker.auth import read_peer_token

        kwargs["user"] = etcd.user
        kwargs["password"] = read_peer_token(etcd.password_file, "cluster.etcd.password_file")
    return kwargs


def peer_tls(config: Config) -> Callable[[str], Any] | None:
    """The client TLS options of replication links (``tls.cert`` set: the other brokers
    listen with TLS), verifying them against ``cluster.tls.ca``; None for plain TCP."""
    cluster = config.cluster
    if config["tls.cert"] is None or cluster is None or cluster.security.tls_ca is None:
        return None
    from broker.tls import ClientTLS

    return ClientTLS(cluster.security.tls_ca).options_for


def check_peer_security(config: Config) -> None:
    """The files of docs/replication.md, Security between brokers: the CA (readable, PEM)
    and this broker's peer token (readable by its owner only). Raises ``TLSConfigError`` or
    ``AuthFileError`` with one line; warns when the local tokens file would refuse the peer
    user's token (every broker should share one)."""
    cluster = config.cluster
    if cluster is None:
        return
    from broker.auth import TokenStore, read_peer_token

    peer_tls(config)
    if cluster.etcd is not None:   # the etcd CA, client certificate and password file
        from twisted.internet import reactor

        from broker.services.etcd import TreqTransport

        TreqTransport(reactor, **etcd_security(cluster.etcd))
    security = cluster.security
    if security.peer_user is None or security.peer_token_file is None:
        return
    token = read_peer_token(security.peer_token_file)
    if config["auth.tokens_file"] is not None:
        tokens = TokenStore.from_file(config["auth.tokens_file"])
        if not tokens.verify(security.peer_user, token):
            log.warning("cluster.peer_token_file: this broker's own auth.tokens_file does not "
                        "accept that token for user %s; brokers sharing that file will "
                        "refuse this one's replication", security.peer_user)
