"""The cluster description: which brokers exist, where they listen, who holds which replica.

Owns: ``ClusterConfig``, parsed from the ``cluster`` section of a broker's YAML (this
broker's ``broker_id``, the V1 address of every broker, optional explicit replica lists per
topic), and the placement rule: the replica list of partition ``p`` is the broker ids in
ascending order rotated by ``p``, cut to the replication factor, so leaders of epoch 0
spread over the brokers. Replica ids on the wire are positions in that list. Also the
security between brokers (``PeerSecurity``: the CA replication links verify peers against,
the principals allowed to act as brokers, this broker's own peer user and token file).

Must not import: Twisted, the store, sockets. Pure parsing and arithmetic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from data.names import is_valid_name
from replication.control.errors import BadKey
from replication.control.keys import KeyLayout

__all__ = ["BrokerAddress", "ClusterConfig", "EtcdSettings", "PeerSecurity", "default_replicas"]

_HOST_PORT_RE = re.compile(r"(?P<host>[^\s:]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """Where a broker's V1 listener is."""

    broker_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def default_replicas(broker_ids: Sequence[int], partition: int,
                     replication_factor: int) -> tuple[int, ...]:
    """Partition ``partition``'s replica list: the sorted broker ids rotated by the partition
    number, the first ``replication_factor`` of them. The first is the leader of epoch 0.

    >>> default_replicas([0, 1, 2], 0, 3), default_replicas([0, 1, 2], 1, 3)
    ((0, 1, 2), (1, 2, 0))
    >>> default_replicas([0, 1, 2], 2, 2)
    (2, 0)
    """
    ids = sorted(broker_ids)
    if replication_factor > len(ids):
        raise ValueError(f"replication factor {replication_factor} is larger than the "
                         f"cluster ({len(ids)} brokers)")
    count = len(ids)
    return tuple(ids[(partition + i) % count] for i in range(replication_factor))


@dataclass(frozen=True, slots=True)
class EtcdSettings:
    """``cluster.etcd``: where the control plane's etcd is and how this broker uses it.

    Present = the cluster runs itself (automatic failover, cluster-wide topics; the
    contract is the spec's "Cluster control plane on etcd"); absent = the operator-driven
    mode (``SET_PARTITION_ROLE``). ``ca``/``cert``/``key`` are file paths for TLS to etcd
    (client certificates); None = plain HTTP. ``fence_writes_on_session_loss``: refuse
    writes once the last good keepalive + the lease TTL has passed (default: keep serving
    the current epoch while etcd is unreachable, Kafka's rule).
    """

    endpoints: tuple[str, ...]
    lease_ttl_ms: int = 6000
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    fence_writes_on_session_loss: bool = False
    user: str | None = None
    """etcd user for a role limited to the cluster's prefix (docs/replication.md, Security
    between brokers); its password is in ``password_file``."""
    password_file: str | None = None
    leader_rebalance_check_ms: int = 300_000
    """How often the controller hands each partition back to its preferred leader (the
    first replica) when that broker is alive and in the committed ISR; 0: never. Kafka's
    ``auto.leader.rebalance.enable`` with ``leader.imbalance.check.interval.seconds``
    (300 s there too)."""
    leader_return_delay_ms: int = 3000
    """A broker that registers (starts, or comes back) gets back the partitions it is the
    preferred leader of once it has been in their committed ISR this long, without waiting
    for the periodic check (``replication.control.preferred``); 0: never (only the periodic
    check hands them back)."""

    @property
    def lease_ttl_s(self) -> int:
        """The TTL asked of etcd, whole seconds (etcd raises anything below 2 s to 2 s)."""
        return max(2, -(-self.lease_ttl_ms // 1000))

    @classmethod
    def from_mapping(cls, raw: Any) -> EtcdSettings:
        """Validate ``cluster.etcd``; ``ValueError`` names the key at fault."""
        where = "cluster.etcd"
        if not isinstance(raw, Mapping):
            raise ValueError(f"{where}: expected a mapping with endpoints")
        known = ("endpoints", "lease_ttl_ms", "ca", "cert", "key",
                 "fence_writes_on_session_loss", "user", "password_file",
                 "leader_rebalance_check_ms", "leader_return_delay_ms")
        unknown = set(raw) - set(known)
        if unknown:
            raise ValueError(f"{where}.{sorted(map(str, unknown))[0]}: unknown key (known: "
                             f"{', '.join(known)})")
        endpoints = raw.get("endpoints")
        if isinstance(endpoints, str):
            endpoints = [endpoints]
        if not isinstance(endpoints, list) or not endpoints:
            raise ValueError(f"{where}.endpoints: expected a list of http(s)://host:port URLs")
        for url in endpoints:
            if not isinstance(url, str) or not _ENDPOINT_RE.fullmatch(url):
                raise ValueError(f"{where}.endpoints: {url!r} is not http(s)://host:port")
        ttl = raw.get("lease_ttl_ms", 6000)
        if isinstance(ttl, bool) or not isinstance(ttl, int) or not 1000 <= ttl <= 3_600_000:
            raise ValueError(f"{where}.lease_ttl_ms: expected milliseconds between 1000 and "
                             f"3600000, got {ttl!r}")
        files: dict[str, str | None] = {}
        for name in ("ca", "cert", "key"):
            value = raw.get(name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{where}.{name}: expected a file path or null")
            files[name] = value
        if (files["cert"] is None) != (files["key"] is None):
            raise ValueError(f"{where}.cert: cert and key go together")
        fence = raw.get("fence_writes_on_session_loss", False)
        if not isinstance(fence, bool):
            raise ValueError(f"{where}.fence_writes_on_session_loss: expected true or false")
        user, password_file = raw.get("user"), raw.get("password_file")
        if user is not None and not (isinstance(user, str) and user and user.isprintable()
                                     and " " not in user):
            raise ValueError(f"{where}.user: expected an etcd user name")
        if password_file is not None:
            password_file = _path(password_file, f"{where}.password_file")
        if (user is None) != (password_file is None):
            raise ValueError(f"{where}.user: user and password_file go together")
        check = raw.get("leader_rebalance_check_ms", 300_000)
        if isinstance(check, bool) or not isinstance(check, int) \
                or not (check == 0 or 1000 <= check <= 86_400_000):
            raise ValueError(f"{where}.leader_rebalance_check_ms: expected 0 (never) or "
                             f"milliseconds between 1000 and 86400000, got {check!r}")
        delay = raw.get("leader_return_delay_ms", 3000)
        if isinstance(delay, bool) or not isinstance(delay, int) \
                or not (delay == 0 or 100 <= delay <= 3_600_000):
            raise ValueError(f"{where}.leader_return_delay_ms: expected 0 (never) or "
                             f"milliseconds between 100 and 3600000, got {delay!r}")
        return cls(tuple(u.rstrip("/") for u in endpoints), ttl, files["ca"], files["cert"],
                   files["key"], fence, user, password_file, check, delay)


_ENDPOINT_RE = re.compile(r"https?://[^\s/:]+(:[0-9]{1,5})?/?")


@dataclass(frozen=True)
class PeerSecurity:
    """Who may act as a broker, and how this broker proves it is one (docs/replication.md,
    Security between brokers).

    YAML (inside ``cluster``)::

        tls: {ca: /etc/skerry/cluster-ca.pem}   # CA the other brokers' certificates chain to
        peer_users: [broker-0, broker-1, broker-2]
        peer_user: broker-1                      # this broker's user (in auth.tokens_file)
        peer_token_file: /etc/skerry/peer.token  # its token, mode 0600
    """

    tls_ca: str | None = None
    peer_users: frozenset[str] = frozenset()
    peer_user: str | None = None
    peer_token_file: str | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[Any, Any]) -> PeerSecurity:
        """The security keys of the ``cluster`` section; ``ValueError`` names the key."""
        tls_ca = None
        tls = raw.get("tls")
        if tls is not None:
            if not isinstance(tls, Mapping):
                raise ValueError("cluster.tls: expected a mapping with ca")
            unknown = set(tls) - {"ca"}
            if unknown:
                raise ValueError(f"cluster.tls.{sorted(map(str, unknown))[0]}: unknown key "
                                 "(known: ca)")
            tls_ca = _path(tls.get("ca"), "cluster.tls.ca")
        users: list[str] = []
        raw_users = raw.get("peer_users")
        if raw_users is not None:
            if not isinstance(raw_users, list) or not raw_users:
                raise ValueError("cluster.peer_users: expected a non-empty list of user names")
            for user in raw_users:
                if not is_valid_name(user):
                    raise ValueError(f"cluster.peer_users: {user!r} is not a user name")
                if user in users:
                    raise ValueError(f"cluster.peer_users: {user} listed twice")
                users.append(user)
        peer_user = raw.get("peer_user")
        if peer_user is not None and not is_valid_name(peer_user):
            raise ValueError(f"cluster.peer_user: {peer_user!r} is not a user name")
        token_file = raw.get("peer_token_file")
        if token_file is not None:
            token_file = _path(token_file, "cluster.peer_token_file")
        if (peer_user is None) != (token_file is None):
            raise ValueError("cluster.peer_user: set both cluster.peer_user and "
                             "cluster.peer_token_file, or neither")
        if peer_user is not None and users and peer_user not in users:
            raise ValueError(f"cluster.peer_user: {peer_user} is not one of cluster.peer_users "
                             f"({', '.join(users)}): the other brokers would refuse it")
        return cls(tls_ca, frozenset(users), peer_user, token_file)


@dataclass(frozen=True)
class ClusterConfig:
    """This broker's view of the cluster.

    YAML::

        cluster:
          broker_id: 1
          brokers:
            0: 127.0.0.1:9092
            1: 127.0.0.1:9093
            2: 127.0.0.1:9094
          replicas:                  # optional, per topic: one list per partition
            orders: [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
          id: prod-1                 # with etcd: the key prefix /skerry/<id>/
          etcd: {endpoints: [http://127.0.0.1:2379], lease_ttl_ms: 6000}
          unclean_leader_election: false
          kafka_brokers:             # with kafka_port: each broker's Kafka listener, as
            0: 127.0.0.1:19092       # Kafka clients reach it (Kafka's advertised.listeners)
            1: 127.0.0.1:19093
            2: 127.0.0.1:19094

    ``etcd`` None: the operator-driven mode (``SET_PARTITION_ROLE``), as before etcd.
    """

    broker_id: int
    brokers: Mapping[int, BrokerAddress]
    replicas_by_topic: Mapping[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)
    cluster_id: str = "skerry"
    etcd: EtcdSettings | None = None
    unclean_leader_election: bool = False
    security: PeerSecurity = field(default_factory=PeerSecurity)
    kafka_brokers: Mapping[int, BrokerAddress] = field(default_factory=dict)
    """Every broker's Kafka listener as Kafka clients reach it (empty: not given); Kafka's
    Metadata lists these and names the partition leaders among them."""

    @property
    def controlled(self) -> bool:
        """Leadership and ISR come from etcd (``cluster.etcd`` is set)."""
        return self.etcd is not None

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(sorted(self.brokers))

    def address(self, broker_id: int) -> BrokerAddress:
        return self.brokers[broker_id]

    def replicas(self, topic: str, partition: int,
                 replication_factor: int) -> tuple[int, ...]:
        """The broker ids holding ``topic``/``partition``, leader of epoch 0 first.

        An explicit list from the config wins (it must have ``replication_factor``
        entries); partitions beyond the explicit lists use ``default_replicas``.
        ``ValueError`` when the topic's replication factor does not fit.
        """
        explicit = self.replicas_by_topic.get(topic)
        if explicit is not None and partition < len(explicit):
            chosen = explicit[partition]
            if len(chosen) != replication_factor:
                raise ValueError(
                    f"cluster.replicas.{topic}[{partition}] lists {len(chosen)} brokers but "
                    f"the topic's replication factor is {replication_factor}")
            return chosen
        return default_replicas(self.broker_ids, partition, replication_factor)

    def position(self, topic: str, partition: int, replication_factor: int) -> int | None:
        """This broker's replica id (position in the list) for the partition; None when it
        holds no replica of it."""
        replicas = self.replicas(topic, partition, replication_factor)
        try:
            return replicas.index(self.broker_id)
        except ValueError:
            return None

    # ------------------------------------------------------------------ parsing

    @classmethod
    def from_mapping(cls, raw: Any) -> ClusterConfig:
        """Validate the ``cluster`` section; ``ValueError`` names the key at fault."""
        if not isinstance(raw, Mapping):
            raise ValueError("cluster: expected a mapping with broker_id and brokers")
        unknown = set(raw) - {"broker_id", "brokers", "replicas", "id", "etcd",
                              "unclean_leader_election", "kafka_brokers", *_SECURITY_KEYS}
        if unknown:
            raise ValueError(f"cluster.{sorted(map(str, unknown))[0]}: unknown key (known: "
                             "broker_id, brokers, replicas, id, etcd, "
                             "unclean_leader_election, kafka_brokers, "
                             f"{', '.join(_SECURITY_KEYS)})")
        if "broker_id" not in raw:
            raise ValueError("cluster.broker_id: missing")
        broker_id = _broker_id(raw["broker_id"], "cluster.broker_id")
        raw_brokers = raw.get("brokers")
        if not isinstance(raw_brokers, Mapping) or not raw_brokers:
            raise ValueError("cluster.brokers: expected a mapping of broker id to host:port")
        brokers: dict[int, BrokerAddress] = {}
        for key, value in raw_brokers.items():
            where = f"cluster.brokers.{key}"
            bid = _broker_id(key, where)
            if bid in brokers:
                raise ValueError(f"{where}: broker {bid} listed twice")
            brokers[bid] = _address(bid, value, where)
        if broker_id not in brokers:
            raise ValueError(f"cluster.broker_id: {broker_id} is not one of cluster.brokers "
                             f"({', '.join(map(str, sorted(brokers)))})")
        seen: dict[tuple[str, int], int] = {}
        for bid, address in sorted(brokers.items()):
            key = (address.host, address.port)
            if key in seen:
                raise ValueError(f"cluster.brokers.{bid}: same address as broker {seen[key]}")
            seen[key] = bid
        replicas: dict[str, tuple[tuple[int, ...], ...]] = {}
        raw_replicas = raw.get("replicas")
        if raw_replicas is not None:
            if not isinstance(raw_replicas, Mapping):
                raise ValueError("cluster.replicas: expected a mapping of topic to lists of "
                                 "broker ids")
            for topic, lists in raw_replicas.items():
                where = f"cluster.replicas.{topic}"
                if not is_valid_name(topic):
                    raise ValueError(f"{where}: not a topic name")
                replicas[topic] = _replica_lists(lists, brokers, where)
        cluster_id = raw.get("id", "skerry")
        try:
            KeyLayout(cluster_id if isinstance(cluster_id, str) else "")
        except BadKey:
            raise ValueError(f"cluster.id: expected 1-64 of [A-Za-z0-9._-], got "
                             f"{cluster_id!r}") from None
        etcd = EtcdSettings.from_mapping(raw["etcd"]) if raw.get("etcd") is not None else None
        unclean = raw.get("unclean_leader_election", False)
        if not isinstance(unclean, bool):
            raise ValueError("cluster.unclean_leader_election: expected true or false")
        kafka = _kafka_brokers(raw.get("kafka_brokers"), brokers)
        return cls(broker_id, dict(sorted(brokers.items())), replicas, cluster_id, etcd,
                   unclean, security=PeerSecurity.from_mapping(raw), kafka_brokers=kafka)


def _kafka_brokers(raw: Any, brokers: Mapping[int, BrokerAddress]
                   ) -> dict[int, BrokerAddress]:
    """``cluster.kafka_brokers``: absent, or a Kafka address for every broker of
    ``cluster.brokers`` (a partition led by a broker without one could not be reached)."""
    if raw is None:
        return {}
    where = "cluster.kafka_brokers"
    if not isinstance(raw, Mapping) or not raw:
        raise ValueError(f"{where}: expected a mapping of broker id to host:port")
    out: dict[int, BrokerAddress] = {}
    for key, value in raw.items():
        at = f"{where}.{key}"
        bid = _broker_id(key, at)
        if bid not in brokers:
            raise ValueError(f"{at}: broker {bid} is not one of cluster.brokers")
        if bid in out:
            raise ValueError(f"{at}: broker {bid} listed twice")
        out[bid] = _address(bid, value, at)
    missing = sorted(set(brokers) - set(out))
    if missing:
        raise ValueError(f"{where}: no Kafka address for broker {missing[0]} (every broker "
                         "needs one: Kafka clients connect to each partition's leader)")
    seen: dict[tuple[str, int], int] = {}
    for bid, address in sorted(out.items()):
        if (address.host, address.port) in seen:
            raise ValueError(f"{where}.{bid}: same address as broker "
                             f"{seen[(address.host, address.port)]}")
        seen[(address.host, address.port)] = bid
    return dict(sorted(out.items()))


_SECURITY_KEYS = ("tls", "peer_users", "peer_user", "peer_token_file")
"""The ``cluster`` keys ``PeerSecurity`` reads."""


def _path(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: expected a file path, got {value!r}")
    return value


def _broker_id(value: Any, where: str) -> int:
    if isinstance(value, str) and value.isdigit() and value.isascii():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: a broker id is a whole number >= 0, got {value!r}")
    return value


def _address(broker_id: int, value: Any, where: str) -> BrokerAddress:
    match = _HOST_PORT_RE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"{where}: expected host:port, got {value!r}")
    port = int(match.group("port"))
    if not 0 < port <= 65535:
        raise ValueError(f"{where}: port must be between 1 and 65535, got {port}")
    return BrokerAddress(broker_id, match.group("host").strip("[]"), port)


def _replica_lists(lists: Any, brokers: Mapping[int, BrokerAddress],
                   where: str) -> tuple[tuple[int, ...], ...]:
    if not isinstance(lists, list) or not lists:
        raise ValueError(f"{where}: expected one list of broker ids per partition")
    out: list[tuple[int, ...]] = []
    for index, replica_list in enumerate(lists):
        at = f"{where}[{index}]"
        if not isinstance(replica_list, list) or not replica_list:
            raise ValueError(f"{at}: expected a non-empty list of broker ids")
        ids = tuple(_broker_id(b, at) for b in replica_list)
        if len(set(ids)) != len(ids):
            raise ValueError(f"{at}: a broker is listed twice")
        for bid in ids:
            if bid not in brokers:
                raise ValueError(f"{at}: broker {bid} is not one of cluster.brokers")
        out.append(ids)
    return tuple(out)
