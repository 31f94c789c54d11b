"""Broker configuration: the schema, its defaults, and validation of a YAML file plus flags.

Owns: the one description of every configuration key (type, default, bounds, help text),
loading YAML, merging command-line overrides, and turning every mistake into a
``ConfigError`` that names the key. ``docs/configuration.md`` is generated from ``SCHEMA``
(``skerry config-reference``) so the reference cannot drift from the code. The ``cluster``
section (a multi-broker cluster) is parsed by ``replication.cluster`` and checked against
the topics here.

Must not import: Twisted, the store, sockets. (``replication.cluster`` is pure.)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from data.names import MAX_NAME_CHARS, NAME_CHARS, is_valid_name
from replication.cluster import ClusterConfig

__all__ = [
    "ConfigError",
    "Config",
    "TopicSettings",
    "TOPIC_EXTRA_KEYS",
    "SCHEMA",
    "load_config",
    "config_from_mapping",
    "reference_markdown",
]



class ConfigError(ValueError):
    """A configuration mistake; the message names the key and what is wrong."""


@dataclass(frozen=True)
class Key:
    """One configuration key: dotted path, type, default, bounds and a sentence of help."""

    path: str
    kind: str  # "int", "int?", "bool", "str", "str?", "choice"
    default: Any
    help: str
    minimum: int | None = None
    choices: tuple[str, ...] = ()


# Every key the broker understands. Order is the order of docs/configuration.md.
SCHEMA: tuple[Key, ...] = (
    Key("host", "str", "127.0.0.1", "Address the V1 listener binds to."),
    Key("port", "int", 9092, "TCP port of the V1 line-protocol listener (0 picks a free one).", 0),
    Key("data_dir", "str", "./skerry-data", "Folder for topics and the broker's other state files."),
    Key("auto_create_topics", "bool", True,
        "Create a topic on first PRODUCE, CONSUME or JOIN with the defaults below."),
    Key("iggy_port", "int?", None, "TCP port of the Iggy binary listener; null turns it off.", 0),
    Key("iggy.root_username", "str?", None,
        "Root user created on the Iggy listener's first start; null: IGGY_ROOT_USERNAME, "
        "else iggy (loopback listeners only)."),
    Key("iggy.root_password", "str?", None,
        "That root user's password; null: IGGY_ROOT_PASSWORD, else iggy (loopback only)."),
    Key("iggy.max_frame_bytes", "int", 16777216,
        "Longest Iggy request frame; a longer one gets an error and the connection closes.",
        1024),
    Key("kafka_port", "int?", None,
        "TCP port of the Kafka wire-protocol listener (docs/kafka.md); null turns it off. "
        "With auth.tokens_file, Kafka clients log in with SASL PLAIN as its users.", 0),
    Key("kafka.max_frame_bytes", "int", 16777216,
        "Longest Kafka request frame; a longer one closes the connection.", 1024),
    Key("kafka.fetch_max_bytes", "int", 16777216,
        "Most record bytes one Kafka Fetch answer carries, whatever the client asks (Kafka's "
        "broker fetch.max.bytes, 55 MiB there): an answer is built in memory, so this bounds "
        "a fetch's memory. The first batch always goes out whole.", 1024),
    Key("kafka.advertised", "str?", None,
        "host:port Kafka clients are told to connect to (Metadata, FindCoordinator), as "
        "Kafka's advertised.listeners; null: the listener's own address. Required when "
        "host is a wildcard (0.0.0.0, ::). In a cluster: cluster.kafka_brokers."),
    Key("tank_port", "int?", None,
        "TCP port of the TANK binary listener (TANK's own default is 11011); null turns it "
        "off. Loopback hosts only and not with auth.tokens_file: TANK carries no credentials.",
        0),
    Key("tank.max_frame_bytes", "int", 16777216,
        "Longest TANK request frame; a longer one closes the connection (as TANK does).",
        1024),
    Key("metrics_port", "int?", None, "HTTP port for /metrics and /health; null turns it off.", 0),
    Key("log_level", "choice", "info", "Log verbosity.",
        choices=("debug", "info", "warning", "error")),
    Key("reactor", "choice", "lean",
        "Event loop of skerry serve. lean: Twisted's epoll reactor dispatching plain read "
        "events without its per-event logging context, reading 64 KiB at a time unless the "
        "previous read filled that (docs/performance.md); twisted: Twisted's default "
        "reactor, unchanged.",
        choices=("lean", "twisted")),
    Key("v1.read_lane", "bool", True,
        "Under the lean reactor, serve request/response PRODUCEs of plain-TCP V1 connections "
        "a reactor turn at a time in compiled code (broker.v1.lane; replies byte for byte "
        "the same); off under TLS. false: every read takes the "
        "connection's own path."),
    Key("defaults.partitions", "int", 3, "Partitions of an auto-created topic.", 1),
    Key("defaults.replication_factor", "int", 1, "Replication factor of an auto-created topic.", 1),
    Key("defaults.min_insync_replicas", "int", 1,
        "In-sync replicas an acks=all produce needs.", 1),
    Key("defaults.retention_ms", "int?", None,
        "Delete whole segments whose newest message is older than this; null keeps forever.", 1),
    Key("defaults.retention_bytes", "int?", None,
        "Delete oldest whole segments while a partition is larger than this; null = no limit.", 1),
    Key("defaults.cleanup_policy", "choice", "delete",
        "delete: retention removes old segments; compact: keep the latest message per key "
        "(docs/storage.md, Compaction); compact,delete: both.",
        choices=("delete", "compact", "compact,delete")),
    Key("defaults.min_compaction_lag_ms", "int", 0,
        "A message is not compacted away before it is this old.", 0),
    Key("defaults.delete_retention_ms", "int", 86400000,
        "How long a tombstone (empty value) stays readable on a compacted topic.", 0),
    Key("defaults.message_timestamp_type", "choice", "CreateTime",
        "Timestamp Kafka consumers see: the producer's (CreateTime) or the append time.",
        choices=("CreateTime", "LogAppendTime")),
    Key("groups.session_timeout_ms", "int", 10000,
        "A group member not heard from for this long is evicted.", 1),
    Key("groups.state_topic_partitions", "int?", None,
        "Partitions of the internal topic __skerry_groups (group state and committed "
        "offsets), set when it is created; a group's coordinator is its partition's leader. "
        "null: 10 in a cluster, 1 on a single broker.", 1),
    Key("groups.consumer_session_timeout_ms", "int", 45000,
        "KIP-848 consumer groups (GROUP_HEARTBEAT): a member not heard from for this long "
        "is fenced (Kafka's group.consumer.session.timeout.ms).", 1),
    Key("groups.consumer_heartbeat_interval_ms", "int", 5000,
        "KIP-848 consumer groups: how often members are told to heartbeat; must be below "
        "the consumer session timeout.", 1),
    Key("replication.replica_lag_timeout_ms", "int", 10000,
        "A follower not caught up for this long leaves the ISR.", 1),
    Key("replication.ack_timeout_ms", "int", 2000,
        "How long an acks=all produce waits before REPLICATION_TIMEOUT.", 1),
    Key("replication.fetch_wait_ms", "int", 500,
        "Cluster: how long a caught-up follower's fetch waits at the leader for new records "
        "(long poll); must be below replica_lag_timeout_ms.", 1),
    Key("replication.fetch_max_bytes", "int", 1048576,
        "Cluster: most message bytes one follower fetch carries (at least one message).",
        1024),
    Key("replication.retry_backoff_ms", "int", 250,
        "Cluster: wait before a follower looks for the leader again, or a leader asks "
        "unanswered replicas again, after an error.", 1),
    Key("replication.request_timeout_ms", "int", 5000,
        "Cluster: a request to another broker unanswered this long (beyond a fetch's wait) "
        "drops that connection.", 100),
    Key("storage.fsync", "choice", "always",
        "always: OK only after fsync (group commit); interval: fsync every "
        "fsync_interval_ms; never: leave it to the OS.",
        choices=("always", "interval", "never")),
    Key("storage.fsync_interval_ms", "int", 1000, "Period of the fsync under fsync: interval.", 1),
    Key("storage.group_commit", "choice", "turn",
        "Where fsync: always runs its group commit. turn: on the reactor thread once per "
        "event-loop turn, after the turn's requests were read (as Redis's appendfsync "
        "always); thread: on a worker thread while the reactor keeps reading.",
        choices=("turn", "thread")),
    Key("storage.segment_bytes", "int", 67108864, "A segment file rolls at this size.", 4096),
    Key("storage.segment_ms", "int", 604800000, "A segment rolls once it is this old.", 1),
    Key("storage.cleaner_interval_ms", "int", 15000,
        "How often the log cleaner looks for compacted partitions worth cleaning "
        "(Kafka's log.cleaner.backoff.ms).", 10),
    Key("limits.max_line_bytes", "int", 1048576,
        "Longest request line; longer ones are refused and the connection closed.", 64),
    Key("limits.max_message_bytes", "int", 1048576, "Largest PRODUCE value (bytes).", 1),
    Key("limits.max_connections", "int", 10000,
        "Connections beyond this get UNAVAILABLE and are closed.", 1),
    Key("limits.idle_timeout_ms", "int", 600000,
        "A connection silent for this long is closed.", 1),
    Key("limits.consume_max_messages", "int", 1000, "Most messages in one CONSUME reply.", 1),
    Key("limits.consume_max_bytes", "int", 1048576,
        "Most value bytes in one CONSUME reply (at least one message is always sent).", 1),
    Key("limits.max_pending_output_bytes", "int", 1048576,
        "Unsent reply bytes after which the broker stops reading from that client.", 1024),
    Key("limits.max_topics", "int", 10000, "Most topics the broker holds.", 1),
    Key("limits.max_partitions_per_topic", "int", 1024, "Most partitions of one topic.", 1),
    Key("limits.max_groups", "int", 10000, "Most (group, topic) pairs.", 1),
    Key("limits.max_members_per_group", "int", 1000, "Most members of one group.", 1),
    Key("auth.tokens_file", "str?", None,
        "File of `<user>:<sha256 of token>` lines (`skerry auth add <user> <file>`); "
        "when set, V1 clients must send AUTH before anything but PING, and /metrics wants a "
        "user's token (HTTP Basic or Bearer). Required to listen on a non-loopback host."),
    Key("auth.super_users", "str?", None,
        "Comma-separated users (`alice,ops` or Kafka's `User:alice;User:ops`) that may do "
        "everything whatever the ACLs say (docs/security.md). The cluster's peer users are "
        "super users too."),
    Key("auth.allow_everyone_if_no_acl_found", "bool", False,
        "With auth.tokens_file: let every user touch a resource no ACL names (Kafka's "
        "allow.everyone.if.no.acl.found). False: only super users may; the upgrade path "
        "sets it true until the ACLs are written (docs/security.md)."),
    Key("tls.cert", "str?", None,
        "PEM certificate (and chain): when set with tls.key, the V1, Iggy, Kafka, TANK and metrics "
        "listeners speak TLS only."),
    Key("tls.key", "str?", None, "PEM private key of tls.cert."),
    Key("console_port", "int?", None,
        "HTTP port of the web console and its JSON API (docs/console.md); null turns it off. "
        "Same rules as /metrics: HTTPS with tls.cert, a V1 user's token with "
        "auth.tokens_file.", 0),
    Key("console.host", "str", "127.0.0.1",
        "Address the console binds to; a non-loopback one needs auth.tokens_file."),
    Key("console.sample_interval_ms", "int", 5000,
        "How often the console samples group lag and traffic rates (one hour kept in "
        "memory).", 100),
)

_BY_PATH = {key.path: key for key in SCHEMA}
_SECTIONS = {key.path.split(".")[0] for key in SCHEMA if "." in key.path}
_TOP_LEVEL = ("topics", "cluster")
# What an unknown key is compared with -> the key suggested: every key, section and
# top-level name as itself, and the last part of a dotted key as the whole key.
_SUGGESTIONS = {
    **{key.path.rsplit(".", 1)[1]: key.path for key in SCHEMA if "." in key.path},
    **{name: name for name in (*_BY_PATH, *_SECTIONS, *_TOP_LEVEL)},
}
_TOPIC_KEYS = ("partitions", "replication_factor", "min_insync_replicas",
               "retention_ms", "retention_bytes", "cleanup_policy", "min_compaction_lag_ms",
               "delete_retention_ms", "message_timestamp_type")
TOPIC_EXTRA_KEYS = ("cleanup_policy", "min_compaction_lag_ms", "delete_retention_ms",
                    "segment_bytes", "segment_ms", "message_timestamp_type")
"""Topic settings besides partitions, replication and retention (``TopicSettings``'
fields with defaults; the store's ``TopicConfig`` has the same names)."""


@dataclass(frozen=True)
class TopicSettings:
    """A topic declared in the config file (or the defaults for auto-created ones)."""

    partitions: int
    replication_factor: int
    min_insync_replicas: int
    retention_ms: int | None
    retention_bytes: int | None
    cleanup_policy: str = "delete"
    min_compaction_lag_ms: int = 0
    delete_retention_ms: int = 86_400_000
    segment_bytes: int | None = None
    """The topic's own segment size (None: ``storage.segment_bytes``)."""
    segment_ms: int | None = None
    """The topic's own segment age (None: ``storage.segment_ms``)."""
    message_timestamp_type: str = "CreateTime"
    """Kafka's ``message.timestamp.type`` (docs/kafka.md, record batches)."""


@dataclass(frozen=True)
class Config:
    """The validated configuration: ``values`` maps every dotted key to its value."""

    values: Mapping[str, Any]
    topics: Mapping[str, TopicSettings] = field(default_factory=dict)
    cluster: ClusterConfig | None = None
    """The ``cluster`` section; None for a single broker."""

    def __getitem__(self, path: str) -> Any:
        return self.values[path]

    @property
    def super_users(self) -> frozenset[str]:
        """``auth.super_users`` as principals (``User:<name>``), with the cluster's peer
        users: they act as brokers, which Kafka lists in ``super.users`` too."""
        raw = self["auth.super_users"] or ""
        names = {part.strip().removeprefix("User:") for part in raw.replace(";", ",").split(",")}
        if self.cluster is not None:
            names.update(self.cluster.security.peer_users or ())
        return frozenset(f"User:{name}" for name in names if name)

    @property
    def topic_defaults(self) -> TopicSettings:
        return TopicSettings(
            partitions=self["defaults.partitions"],
            replication_factor=self["defaults.replication_factor"],
            min_insync_replicas=self["defaults.min_insync_replicas"],
            retention_ms=self["defaults.retention_ms"],
            retention_bytes=self["defaults.retention_bytes"],
            cleanup_policy=self["defaults.cleanup_policy"],
            min_compaction_lag_ms=self["defaults.min_compaction_lag_ms"],
            delete_retention_ms=self["defaults.delete_retention_ms"],
            message_timestamp_type=self["defaults.message_timestamp_type"],
        )


def _check(key: Key, value: Any, where: str) -> Any:
    kind = key.kind
    if value is None and kind.endswith("?"):
        return None
    if kind in ("int", "int?"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected a whole number, got {value!r}")
        if key.minimum is not None and value < key.minimum:
            raise ConfigError(f"{where}: must be at least {key.minimum}, got {value}")
        if key.path.endswith("port") and value > 65535:
            raise ConfigError(f"{where}: a port is at most 65535, got {value}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if kind in ("str", "str?"):
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}: expected a non-empty string, got {value!r}")
        return value
    if kind == "choice":
        if value not in key.choices:
            raise ConfigError(f"{where}: expected one of {', '.join(key.choices)}, got {value!r}")
        return value
    raise AssertionError(f"unknown kind {kind}")  # a bug in SCHEMA, not user input


def _topic(name: Any, raw: Any, defaults: TopicSettings) -> TopicSettings:
    where = f"topics.{name}"
    if not is_valid_name(name):
        raise ConfigError(f"{where}: a topic name is 1-{MAX_NAME_CHARS} characters of [{NAME_CHARS}]")
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping of topic settings")
    values: dict[str, Any] = {}
    for setting, value in raw.items():
        if setting not in _TOPIC_KEYS:
            raise ConfigError(_unknown_key(f"{where}.{setting}", str(setting), _TOPIC_KEYS)
                              + f" (known: {', '.join(_TOPIC_KEYS)})")
        values[setting] = _check(_BY_PATH[f"defaults.{setting}"], value, f"{where}.{setting}")
    settings = TopicSettings(**{k: values.get(k, getattr(defaults, k)) for k in _TOPIC_KEYS})
    if settings.min_insync_replicas > settings.replication_factor:
        raise ConfigError(
            f"{where}.min_insync_replicas: {settings.min_insync_replicas} is greater than "
            f"replication_factor {settings.replication_factor}")
    return settings


def _unknown_key(where: str, name: str | None = None,
                 known: Iterable[str] | None = None) -> str:
    """``"<where>: unknown key"``, with the nearest known key when one is close enough.

    ``name`` is matched against ``known``; by default ``where`` is matched against every
    key, section and top-level name, and against the last part of each dotted key, so
    ``fsync`` at the top suggests ``storage.fsync`` and ``storage.partitions`` suggests
    ``defaults.partitions``."""
    if known is None:
        suggest = _SUGGESTIONS
    else:
        suggest = {key: key for key in known}
    close = difflib.get_close_matches(where if name is None else name, list(suggest), n=1)
    if not close:
        return f"{where}: unknown key"
    return f"{where}: unknown key; did you mean {suggest[close[0]]}?"


def config_from_mapping(raw: Mapping[str, Any] | None,
                        overrides: Mapping[str, Any] | None = None) -> Config:
    """Validate a parsed YAML document plus flag overrides (dotted keys) into a ``Config``."""
    raw = dict(raw or {})
    values: dict[str, Any] = {key.path: key.default for key in SCHEMA}
    topics_raw = raw.pop("topics", None)
    cluster_raw = raw.pop("cluster", None)
    for name, value in raw.items():
        if not isinstance(name, str):
            raise ConfigError(f"{name!r}: configuration keys are strings")
        if name in _SECTIONS:
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise ConfigError(f"{name}: expected a mapping")
            for sub, subvalue in value.items():
                path = f"{name}.{sub}"
                if path not in _BY_PATH:
                    raise ConfigError(_unknown_key(path))
                values[path] = _check(_BY_PATH[path], subvalue, path)
        elif name in _BY_PATH:
            values[name] = _check(_BY_PATH[name], value, name)
        else:
            raise ConfigError(_unknown_key(name))
    for path, value in (overrides or {}).items():
        if value is not None:
            values[path] = _check(_BY_PATH[path], value, f"--{path.replace('_', '-')}")
    if values["defaults.min_insync_replicas"] > values["defaults.replication_factor"]:
        raise ConfigError(
            "defaults.min_insync_replicas: greater than defaults.replication_factor")
    if (values["tls.cert"] is None) != (values["tls.key"] is None):
        raise ConfigError("tls: set both tls.cert and tls.key, or neither")
    advertised = values["kafka.advertised"]
    if advertised is not None:
        host, _, port = advertised.rpartition(":")
        if not host.strip("[]") or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ConfigError(f"kafka.advertised: expected host:port, got {advertised!r}")
    if values["defaults.partitions"] > values["limits.max_partitions_per_topic"]:
        raise ConfigError("defaults.partitions: greater than limits.max_partitions_per_topic")
    config = Config(values)
    topics: dict[str, TopicSettings] = {}
    if topics_raw is not None:
        if not isinstance(topics_raw, Mapping):
            raise ConfigError("topics: expected a mapping of topic name to settings")
        for name, settings in topics_raw.items():
            topics[name] = _topic(name, settings, config.topic_defaults)
    cluster = _cluster(cluster_raw, values, topics) if cluster_raw is not None else None
    return Config(values, topics, cluster)


def _cluster(raw: Any, values: Mapping[str, Any],
             topics: Mapping[str, TopicSettings]) -> ClusterConfig:
    try:
        cluster = ClusterConfig.from_mapping(raw)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if values["kafka_port"] is not None and not cluster.kafka_brokers:
        raise ConfigError("cluster.kafka_brokers: required with kafka_port in a cluster (each "
                          "broker's Kafka address, which Kafka clients are sent to for the "
                          "partitions it leads; docs/kafka.md)")
    brokers = len(cluster.brokers)
    if values["defaults.replication_factor"] > brokers:
        raise ConfigError(f"defaults.replication_factor: {values['defaults.replication_factor']} "
                          f"is larger than the cluster ({brokers} brokers)")
    for name, settings in topics.items():
        for partition in range(settings.partitions):
            try:
                cluster.replicas(name, partition, settings.replication_factor)
            except ValueError as exc:
                raise ConfigError(f"topics.{name}: {exc}") from None
    for name, lists in cluster.replicas_by_topic.items():
        declared = topics.get(name)
        if declared is not None and len(lists) > declared.partitions:
            raise ConfigError(f"cluster.replicas.{name}: {len(lists)} lists for "
                              f"{declared.partitions} partitions")
    _cluster_security(cluster, values)
    if values["replication.fetch_wait_ms"] >= values["replication.replica_lag_timeout_ms"]:
        raise ConfigError("replication.fetch_wait_ms: must be below "
                          "replication.replica_lag_timeout_ms, or idle followers would leave "
                          "the ISR while they wait")
    return cluster


def _cluster_security(cluster: ClusterConfig, values: Mapping[str, Any]) -> None:
    """Replication links speak TLS exactly when the listeners do (every broker of a cluster
    has the same ``tls`` and ``auth``), so they need the CA to verify the other brokers
    with; with authentication on, the brokers need the users allowed to act as brokers and
    this broker's own user and token (docs/replication.md, Security between brokers)."""
    security = cluster.security
    if values["tls.cert"] is not None and security.tls_ca is None:
        raise ConfigError("cluster.tls.ca: required with tls.cert: replication connects to "
                          "the other brokers over TLS and verifies their certificates "
                          "against this CA")
    if values["tls.cert"] is None and security.tls_ca is not None:
        raise ConfigError("cluster.tls.ca: set without tls.cert: replication uses TLS "
                          "exactly when the listeners do")
    if values["auth.tokens_file"] is not None:
        for key, value in (("peer_users", security.peer_users),
                           ("peer_user", security.peer_user)):
            if not value:
                raise ConfigError(f"cluster.{key}: required with auth.tokens_file: the "
                                  f"brokers authenticate to each other as peer users")


def load_config(path: str | None, overrides: Mapping[str, Any] | None = None) -> Config:
    """Read the YAML file at ``path`` (none: defaults only) and apply ``overrides``."""
    raw: Any = None
    if path is not None:
        try:
            with open(path, encoding="utf-8") as handle:
                raw = yaml.safe_load(handle)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})") from exc
        if raw is not None and not isinstance(raw, Mapping):
            raise ConfigError(f"{path}: the top level must be a mapping of keys")
    return config_from_mapping(raw, overrides)


def reference_markdown() -> str:
    """The configuration reference as Markdown, generated from ``SCHEMA``."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from `broker/config.py` (`skerry config-reference`); every key is optional.",
        "A YAML file given with `--config` sets them; `--host`, `--port`, `--data-dir` and",
        "`--log-level` override the file. An unknown key or a bad value stops startup with a",
        "message naming the key (exit code 2); for an unknown key it suggests the nearest",
        "known one (`storage.fsynk: unknown key; did you mean storage.fsync?`).",
        "",
        "| key | type | default | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for key in SCHEMA:
        kind = {"int": "integer", "int?": "integer or null", "bool": "boolean",
                "str": "string", "str?": "string or null"}.get(key.kind, " \\| ".join(key.choices))
        default = "null" if key.default is None else str(key.default).lower() \
            if isinstance(key.default, bool) else str(key.default)
        lines.append(f"| `{key.path}` | {kind} | `{default}` | {key.help} |")
    lines += [
        "",
        "## Topics",
        "",
        "`topics: {<name>: {partitions, replication_factor, min_insync_replicas, retention_ms,",
        "retention_bytes, message_timestamp_type}}` declares topics created at startup; unset",
        "settings take the `defaults` above. `min_insync_replicas` greater than",
        "`replication_factor` is an error. `message_timestamp_type` is Kafka's",
        "`message.timestamp.type` (docs/kafka.md); in a cluster, topics take the default.",
        "",
        "## Cluster",
        "",
        "Without a `cluster` section the broker runs alone. With one it is a member of a",
        "multi-broker cluster (see `docs/replication.md`):",
        "",
        "```yaml",
        "cluster:",
        "  broker_id: 1                  # this broker; one of the ids below",
        "  brokers:                      # every broker's V1 address, this one included",
        "    0: 127.0.0.1:9092",
        "    1: 127.0.0.1:9093",
        "    2: 127.0.0.1:9094",
        "  replicas:                     # optional: replica lists, leader of epoch 0 first",
        "    orders: [[0, 1, 2], [1, 2, 0], [2, 0, 1]]",
        "```",
        "",
        "Partition `p` of a topic without explicit lists is held by the broker ids in",
        "ascending order rotated by `p`, the first `replication_factor` of them. Every broker",
        "gets the same `brokers`, `replicas` and `topics`; only `broker_id` (and `port`)",
        "differ. A replication factor larger than the cluster is an error, and so is",
        "`replication.fetch_wait_ms` not below `replication.replica_lag_timeout_ms`.",
        "",
        "With `cluster.etcd` the cluster runs itself (automatic failover, cluster-wide",
        "topics; `docs/replication.md`, Automatic failover with etcd):",
        "",
        "```yaml",
        "cluster:",
        "  id: prod-1                    # key prefix /skerry/<id>/ in etcd (default skerry)",
        "  etcd:",
        "    endpoints: [http://10.0.0.1:2379]",
        "    lease_ttl_ms: 6000          # broker liveness (etcd raises it to at least 2 s)",
        "    ca: null                    # TLS to etcd: CA file, client cert and key",
        "    cert: null",
        "    key: null",
        "    fence_writes_on_session_loss: false",
        "    leader_rebalance_check_ms: 300000  # hand partitions back to their first replica",
        "                                      # when it is up and in sync; 0: never",
        "    leader_return_delay_ms: 3000      # a broker that (re)joins leads its preferred",
        "                                      # partitions once in sync this long; 0: never",
        "  unclean_leader_election: false",
        "```",
        "",
        "With `tls.cert` or `auth.tokens_file` set, the brokers also need the keys of",
        "docs/replication.md, Security between brokers: `cluster.tls.ca` (the CA that signed",
        "the other brokers' certificates), `cluster.peer_users` (the users allowed to act as",
        "brokers), and this broker's `cluster.peer_user` with `cluster.peer_token_file` (its",
        "token, a file of mode 0600).",
        "",
        "With `kafka_port` set, a cluster also needs every broker's Kafka address as Kafka",
        "clients reach it (Kafka's advertised listeners): Metadata lists them and names each",
        "partition's leader among them (docs/kafka.md, In a cluster):",
        "",
        "```yaml",
        "cluster:",
        "  kafka_brokers:",
        "    0: 10.0.0.1:9093",
        "    1: 10.0.0.2:9093",
        "    2: 10.0.0.3:9093",
        "```",
        "",
    ]
    return "\n".join(lines)
