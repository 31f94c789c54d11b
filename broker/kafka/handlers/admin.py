"""The Kafka admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs, DescribeCluster, DeleteGroups, OffsetDelete, DeleteRecords,
DescribeLogDirs.

Owns: ``ADMIN_HANDLERS`` and ``ADMIN_VERSIONS`` (merged into the dispatcher's table),
``TOPIC_CONFIGS`` (the topic settings Skerry has, under Kafka's names) and the handlers.
Topics are the core's (``create_topic``, ``delete_topic``, ``add_partitions``,
``alter_topic``: the same operations V1's admin commands use); groups are the Kafka group
service's (``delete_group``, ``delete_offsets``).

Rules (docs/kafka.md, "Admin APIs"):

* the topic configs are ``TOPIC_CONFIGS``: ``retention.ms``, ``retention.bytes`` (-1 =
  no limit), ``cleanup.policy``, ``min.compaction.lag.ms``, ``delete.retention.ms``,
  ``segment.bytes``, ``segment.ms`` and ``message.timestamp.type`` are the topic's own
  (set at creation, altered by IncrementalAlterConfigs, kept in ``topic.json``: the
  ``TopicConfig`` fields of the same meaning); ``min.insync.replicas`` is set at creation
  only; ``max.message.bytes`` is broker-wide and read-only here. A name Skerry does not
  have: INVALID_CONFIG (40), as Kafka answers an unknown topic config; a read-only one set
  to another value, or a value the topic cannot take: INVALID_CONFIG with the reason;
* the changes a cluster must agree on (creating, deleting and growing topics, altering
  their configs) are made on a single broker only; a cluster member answers
  POLICY_VIOLATION (44) with a pointer to the cluster's own admin commands;
* DeleteGroups removes an Empty group and its committed offsets (NON_EMPTY_GROUP 68 while
  it has members, GROUP_ID_NOT_FOUND 69 when there is nothing); OffsetDelete removes some
  partitions' offsets of a group without live members (GROUP_SUBSCRIBED_TO_TOPIC 86 per
  partition otherwise, as Kafka answers for a consuming group).

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from twisted.internet.defer import Deferred, fail, gatherResults

from broker.config import TOPIC_EXTRA_KEYS
from broker.errors import BadRequest, SkerryError
from broker.kafka import codec as c
from broker.kafka.errors import ErrorCode, KafkaError, code_for
from broker.kafka.handlers.context import Context
from broker.kafka.handlers.groups import _call, _service
from broker.kafka.handlers.metadata import CLUSTER_ID, CLUSTER_OPERATIONS, topic_id_of
from data.names import is_valid_name
from data.store import TopicConfig
from groups.kafka_errors import KafkaGroupError

__all__ = ["ADMIN_HANDLERS", "ADMIN_VERSIONS", "TOPIC_CONFIGS", "TopicSetting"]

TOPIC, BROKER = 2, 4
"""Kafka's ConfigResource types."""
TOPIC_SOURCE, STATIC_BROKER_SOURCE, DEFAULT_SOURCE = 1, 4, 5
"""Kafka's ConfigSource values (1: DYNAMIC_TOPIC_CONFIG, 4: STATIC_BROKER_CONFIG,
5: DEFAULT_CONFIG)."""
STRING, INT, LONG, LIST = 2, 3, 5, 7
"""Kafka's ConfigType values (DescribeConfigs v3+)."""
SET, DELETE = 0, 1
"""IncrementalAlterConfigs operations (APPEND 2 and SUBTRACT 3 are for list configs)."""
CLUSTER_REFUSED = ("a cluster member does not change topics through Kafka's admin APIs: use "
                   "the seed broker's admin commands (docs/cluster.md)")


@dataclass(frozen=True)
class TopicSetting:
    """A Kafka topic config Skerry has: its value for a topic, its type, whether it is
    the topic's own (else broker-wide), the ``TopicConfig`` field it sets (None:
    read-only here), whether it is set at creation and whether IncrementalAlterConfigs
    changes it afterwards, and how a value is read (``parse``: the text -> the field's
    value, ``KafkaError`` INVALID_CONFIG when it cannot be)."""

    value: Callable[[Context, TopicConfig], str]
    config_type: int
    own: bool
    field: str | None = None
    at_creation: bool = False
    doc: str = ""
    alterable: bool = False
    parse: Callable[[str, str | None], Any] | None = None


def _limit(v: int | None) -> str:
    return "-1" if v is None else str(v)


def _number(minimum: int) -> Callable[[str, str | None], int | None]:
    return lambda name, value: _parse_number(name, value, minimum=minimum)


def _positive_or_default(name: str, value: str | None) -> int | None:
    """A positive integer; -1: the broker's setting (None)."""
    number = _parse_number(name, value, minimum=-1)
    if number == 0:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"invalid value {value!r} for {name}")
    return number


def _non_negative(name: str, value: str | None) -> int:
    number = _parse_number(name, value, minimum=0)
    assert number is not None
    return number


def _cleanup_policy(name: str, value: str | None) -> str:
    """Kafka's list ``delete``, ``compact`` or both, in either order."""
    parts = {part.strip() for part in (value or "").split(",")}
    if not parts or not parts <= {"delete", "compact"}:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"invalid value {value!r} for {name}: "
                         f"delete, compact or compact,delete")
    return "compact,delete" if len(parts) == 2 else parts.pop()


def _timestamp_type(name: str, value: str | None) -> str:
    if value not in ("CreateTime", "LogAppendTime"):
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"invalid value {value!r} for {name}: "
                         f"CreateTime or LogAppendTime")
    return value


TOPIC_CONFIGS: dict[str, TopicSetting] = {
    "retention.ms": TopicSetting(lambda ctx, t: _limit(t.retention_ms), LONG, True,
                                 "retention_ms", True, "how long messages are kept (-1: "
                                 "no limit)", True, _number(-1)),
    "retention.bytes": TopicSetting(lambda ctx, t: _limit(t.retention_bytes), LONG, True,
                                    "retention_bytes", True, "the size each partition is "
                                    "kept to (-1: no limit)", True, _number(-1)),
    "min.insync.replicas": TopicSetting(lambda ctx, t: str(t.min_insync_replicas), INT, True,
                                        "min_insync_replicas", True,
                                        "replicas an acks=all write needs", False, _number(1)),
    "segment.bytes": TopicSetting(
        lambda ctx, t: str(t.segment_bytes or ctx.core.config["storage.segment_bytes"]), INT,
        True, "segment_bytes", True, "segment size (-1 on a change: storage.segment_bytes)",
        True, _positive_or_default),
    "segment.ms": TopicSetting(
        lambda ctx, t: str(t.segment_ms or ctx.core.config["storage.segment_ms"]), LONG, True,
        "segment_ms", True, "segment age before a roll (-1 on a change: storage.segment_ms)",
        True, _positive_or_default),
    "cleanup.policy": TopicSetting(lambda ctx, t: t.cleanup_policy, LIST, True,
                                   "cleanup_policy", True, "delete, compact or both "
                                   "(docs/storage.md, Compaction)", True, _cleanup_policy),
    "min.compaction.lag.ms": TopicSetting(lambda ctx, t: str(t.min_compaction_lag_ms), LONG,
                                          True, "min_compaction_lag_ms", True,
                                          "a record is not compacted away before this age",
                                          True, _non_negative),
    "delete.retention.ms": TopicSetting(lambda ctx, t: str(t.delete_retention_ms), LONG, True,
                                        "delete_retention_ms", True, "how long a tombstone "
                                        "stays readable on a compacted topic", True,
                                        _non_negative),
    "max.message.bytes": TopicSetting(lambda ctx, t: str(ctx.max_message_bytes), INT, False,
                                      doc="the largest value accepted (broker-wide)"),
    "message.timestamp.type": TopicSetting(lambda ctx, t: t.message_timestamp_type, STRING,
                                           True, "message_timestamp_type", True,
                                           "the producer's timestamps (CreateTime) or the "
                                           "append time (LogAppendTime)", True,
                                           _timestamp_type),
}
"""Kafka's topic config names -> Skerry's settings, in DescribeConfigs' order."""


def _refuse_in_cluster(ctx: Context) -> None:
    if ctx.placement is not None:
        raise KafkaError(ErrorCode.POLICY_VIOLATION, CLUSTER_REFUSED)


def _visible_config(ctx: Context, name: str) -> TopicConfig | None:
    return ctx.core.topic_config(name) if ctx.visible(name) else None


def _message(error: BaseException) -> str:
    return str(error) or type(error).__name__


# ================================================================ CreateTopics


def create_topics(ctx: Context, request: c.CreateTopicsRequest) -> c.CreateTopicsResponse:
    """CreateTopics v0-v7: each topic created with the broker's defaults where the
    request says -1, its configs among ``TOPIC_CONFIGS``; v5+ answers the topic's
    partitions, replication factor and configs, v7+ its id. ``validate_only`` checks
    without creating."""
    results = []
    seen: set[str] = set()
    for topic in request.topics:
        if topic.name in seen:
            results.append(c.CreatedTopic(topic.name, int(ErrorCode.INVALID_REQUEST),
                                          "the topic is named twice in the request"))
            continue
        seen.add(topic.name)
        try:
            results.append(_create_topic(ctx, topic, request.validate_only))
        except KafkaError as refusal:
            results.append(c.CreatedTopic(topic.name, int(refusal.code), _message(refusal)))
    return c.CreateTopicsResponse(tuple(results))


def _create_topic(ctx: Context, topic: c.CreatableTopic, validate_only: bool
                  ) -> c.CreatedTopic:
    _refuse_in_cluster(ctx)
    name = topic.name
    if not is_valid_name(name) or not ctx.visible(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"invalid topic name {name!r}")
    if ctx.core.topic_config(name) is not None:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name} already exists")
    if topic.assignments:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "Skerry places replicas itself; give a partition count instead")
    defaults = ctx.core.config.topic_defaults
    partitions = defaults.partitions if topic.num_partitions == -1 else topic.num_partitions
    factor = defaults.replication_factor if topic.replication_factor == -1 \
        else topic.replication_factor
    if partitions < 1:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"{partitions} partitions")
    if factor != 1:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"replication factor {factor} is larger than the number of brokers "
                         f"(1)")
    settings = _creation_settings(ctx, topic.configs)
    min_isr = settings.pop("min_insync_replicas", None)
    retention_ms = settings.pop("retention_ms", defaults.retention_ms)
    retention_bytes = settings.pop("retention_bytes", defaults.retention_bytes)
    probe = replace(defaults, partitions=partitions, replication_factor=factor, **settings)
    try:
        TopicConfig(partitions=partitions, replication_factor=factor,
                    **{key: getattr(probe, key) for key in TOPIC_EXTRA_KEYS}).validate()
    except ValueError as refusal:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(refusal)) from None
    if not validate_only:
        try:
            ctx.core.create_topic(name, partitions, factor, min_isr, retention_ms,
                                  retention_bytes, settings)
        except BadRequest as refusal:
            raise KafkaError(ErrorCode.INVALID_REQUEST, _message(refusal)) from None
    config = ctx.core.topic_config(name)
    configs = None if config is None else tuple(
        c.CreatedTopicConfig(key, s.value(ctx, config), not s.alterable,
                             _source(ctx, s, config))
        for key, s in TOPIC_CONFIGS.items())
    return c.CreatedTopic(name, 0, None, topic_id_of(config), 0, partitions, factor, configs)


def _creation_settings(ctx: Context, configs: tuple[c.CreatableConfig, ...]
                       ) -> dict[str, Any]:
    """The ``TopicConfig`` fields a CreateTopics' configs set (INVALID_CONFIG otherwise)."""
    out: dict[str, Any] = {}
    for item in configs:
        setting = TOPIC_CONFIGS.get(item.name)
        if setting is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown topic config {item.name}")
        if setting.at_creation and setting.field is not None and setting.parse is not None:
            out[setting.field] = setting.parse(item.name, item.value)
        else:
            _check_fixed(ctx, item.name, item.value, setting)
    return out


def _parse_number(name: str, value: str | None, *, minimum: int) -> int | None:
    """An integer config value of at least ``minimum`` (-1: None, no limit)."""
    try:
        number = int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"invalid value {value!r} for {name}") from None
    if number < minimum:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"invalid value {value!r} for {name}")
    return None if number == -1 else number


def _check_fixed(ctx: Context, name: str, value: str | None, setting: TopicSetting) -> None:
    fixed = setting.value(ctx, TopicConfig(partitions=1))
    if value != fixed:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"{name} is {fixed} on Skerry and cannot be changed per topic")


# ================================================================ DeleteTopics


def delete_topics(ctx: Context, request: c.DeleteTopicsRequest) -> c.DeleteTopicsResponse:
    """DeleteTopics v0-v6: by name (v6: or by id; an unknown id: UNKNOWN_TOPIC_ID)."""
    v = request.header.api_version
    wanted: list[tuple[str | None, bytes]] = (
        [(t.name, t.topic_id) for t in request.topics] if v >= 6
        else [(n, bytes(16)) for n in request.topic_names])
    by_id = {topic_id_of(ctx.core.topic_config(t)): t for t in ctx.core.topic_names()
             if ctx.visible(t)} if any(n is None for n, _ in wanted) else {}
    results = []
    for name, tid in wanted:
        if name is None:
            found = by_id.get(tid) if tid != bytes(16) else None
            if found is None:
                results.append(c.DeletedTopic(None, int(ErrorCode.UNKNOWN_TOPIC_ID),
                                              "no topic has that id", tid))
                continue
            name = found
        try:
            _refuse_in_cluster(ctx)
            config = _visible_config(ctx, name)
            if config is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name}")
            tid = topic_id_of(config)
            ctx.core.delete_topic(name)
            results.append(c.DeletedTopic(name, 0, None, tid))
        except KafkaError as refusal:
            results.append(c.DeletedTopic(name, int(refusal.code), _message(refusal), tid))
        except SkerryError as refusal:
            results.append(c.DeletedTopic(name, int(code_for(refusal)), _message(refusal),
                                          tid))
    return c.DeleteTopicsResponse(tuple(results))


# ================================================================ CreatePartitions


def create_partitions(ctx: Context, request: c.CreatePartitionsRequest
                      ) -> c.CreatePartitionsResponse:
    """CreatePartitions v0-v3: grow a topic to ``count`` partitions (never fewer:
    INVALID_PARTITIONS); manual assignments are refused."""
    results = []
    for topic in request.topics:
        try:
            _refuse_in_cluster(ctx)
            config = _visible_config(ctx, topic.name)
            if config is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"unknown topic {topic.name}")
            if topic.assignments is not None:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "Skerry places replicas itself")
            if topic.count <= config.partitions:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 f"topic {topic.name} has {config.partitions} partitions; "
                                 f"the new count must be larger")
            if not request.validate_only:
                ctx.core.add_partitions(topic.name, topic.count)
            results.append(c.PartitionsResult(topic.name, 0))
        except KafkaError as refusal:
            results.append(c.PartitionsResult(topic.name, int(refusal.code), _message(refusal)))
        except SkerryError as refusal:
            results.append(c.PartitionsResult(topic.name, int(ErrorCode.INVALID_PARTITIONS),
                                              _message(refusal)))
    return c.CreatePartitionsResponse(tuple(results))


# ================================================================ configs


def describe_configs(ctx: Context, request: c.DescribeConfigsRequest
                     ) -> c.DescribeConfigsResponse:
    """DescribeConfigs v0-v4: a topic's ``TOPIC_CONFIGS`` (all, or the keys asked for;
    an unknown key is left out, as Kafka does); a broker's: its settings in Kafka's
    names."""
    results = []
    for resource in request.resources:
        keys = resource.configuration_keys
        if resource.resource_type == TOPIC:
            config = _visible_config(ctx, resource.resource_name)
            if config is None:
                results.append(c.ConfigResult(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                              f"unknown topic {resource.resource_name}",
                                              TOPIC, resource.resource_name))
                continue
            entries = tuple(_entry(ctx, name, setting, config, request)
                            for name, setting in TOPIC_CONFIGS.items()
                            if keys is None or name in keys)
            results.append(c.ConfigResult(0, None, TOPIC, resource.resource_name, entries))
        elif resource.resource_type == BROKER:
            entries = tuple(c.ConfigEntry(name, value, True, STATIC_BROKER_SOURCE,
                                          config_type=ctype)
                            for name, value, ctype in _broker_configs(ctx)
                            if keys is None or name in keys)
            results.append(c.ConfigResult(0, None, BROKER, resource.resource_name, entries))
        else:
            results.append(c.ConfigResult(int(ErrorCode.INVALID_REQUEST),
                                          f"resource type {resource.resource_type} has no "
                                          f"configs here", resource.resource_type,
                                          resource.resource_name))
    return c.DescribeConfigsResponse(tuple(results))


def _fresh(ctx: Context, config: TopicConfig) -> TopicConfig:
    """The settings a topic of ``config``'s size would get from the broker if it were
    created now with none given (the defaults ``create_topic`` copies in)."""
    defaults = ctx.core.config.topic_defaults
    return TopicConfig(partitions=config.partitions,
                       replication_factor=config.replication_factor,
                       min_insync_replicas=min(config.replication_factor,
                                               defaults.min_insync_replicas),
                       retention_ms=defaults.retention_ms,
                       retention_bytes=defaults.retention_bytes,
                       topic_id=config.topic_id,
                       **{key: getattr(defaults, key) for key in TOPIC_EXTRA_KEYS})


def _source(ctx: Context, setting: TopicSetting, config: TopicConfig) -> int:
    """Kafka's ConfigSource of a topic setting: DYNAMIC_TOPIC_CONFIG when the topic's
    value is its own (differs from what the broker gives a new topic), else
    DEFAULT_CONFIG. Skerry copies the defaults into a topic when it is created, so a value
    set on purpose to the default cannot be told apart and reads as DEFAULT_CONFIG."""
    if setting.own and setting.value(ctx, config) != setting.value(ctx, _fresh(ctx, config)):
        return TOPIC_SOURCE
    return DEFAULT_SOURCE


def _entry(ctx: Context, name: str, setting: TopicSetting, config: TopicConfig,
           request: c.DescribeConfigsRequest) -> c.ConfigEntry:
    value = setting.value(ctx, config)
    source = _source(ctx, setting, config)
    synonyms = (c.ConfigSynonym(name, value, source),) if request.include_synonyms else ()
    return c.ConfigEntry(name, value, not setting.alterable, source, source == DEFAULT_SOURCE,
                         False, synonyms, setting.config_type,
                         setting.doc if request.include_documentation else None)


def _broker_configs(ctx: Context) -> list[tuple[str, str, int]]:
    config = ctx.core.config
    defaults = config.topic_defaults
    return [
        ("auto.create.topics.enable", str(ctx.auto_create_topics).lower(), 1),
        ("num.partitions", str(defaults.partitions), INT),
        ("default.replication.factor", str(defaults.replication_factor), INT),
        ("min.insync.replicas", str(defaults.min_insync_replicas), INT),
        ("log.retention.ms", _limit(defaults.retention_ms), LONG),
        ("log.retention.bytes", _limit(defaults.retention_bytes), LONG),
        ("log.segment.bytes", str(config["storage.segment_bytes"]), INT),
        ("message.max.bytes", str(ctx.max_message_bytes), INT),
    ]


def incremental_alter_configs(ctx: Context, request: c.IncrementalAlterConfigsRequest
                              ) -> c.IncrementalAlterConfigsResponse:
    """IncrementalAlterConfigs v0-v1: a topic's alterable ``TOPIC_CONFIGS`` SET or
    DELETE (back to the broker's default), all of a resource's changes or none; every
    other name refused (INVALID_CONFIG)."""
    results = []
    for resource in request.resources:
        try:
            if resource.resource_type != TOPIC:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "only topic configs change here; the broker's are its "
                                 "configuration file's")
            _refuse_in_cluster(ctx)
            config = _visible_config(ctx, resource.resource_name)
            if config is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"unknown topic {resource.resource_name}")
            changes = _changes(ctx, resource.configs)
            try:
                replace(config, **changes).validate()
            except ValueError as refusal:
                raise KafkaError(ErrorCode.INVALID_CONFIG, str(refusal)) from None
            if changes and not request.validate_only:
                ctx.core.alter_topic(resource.resource_name, changes)
            results.append(c.AlterResult(0, None, TOPIC, resource.resource_name))
        except KafkaError as refusal:
            results.append(c.AlterResult(int(refusal.code), _message(refusal),
                                         resource.resource_type, resource.resource_name))
        except BadRequest as refusal:
            results.append(c.AlterResult(int(ErrorCode.INVALID_CONFIG), _message(refusal),
                                         resource.resource_type, resource.resource_name))
    return c.IncrementalAlterConfigsResponse(tuple(results))


def _changes(ctx: Context, configs: tuple[c.AlterableConfig, ...]) -> dict[str, Any]:
    defaults = ctx.core.config.topic_defaults
    changes: dict[str, Any] = {}
    for item in configs:
        setting = TOPIC_CONFIGS.get(item.name)
        if setting is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown topic config {item.name}")
        if item.config_operation not in (SET, DELETE):
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"{item.name} is not a list: only SET and DELETE apply")
        if not setting.alterable or setting.field is None or setting.parse is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"{item.name} cannot be changed on Skerry after the topic is "
                             f"created" if setting.own else
                             f"{item.name} is broker-wide on Skerry")
        if item.config_operation == DELETE:
            changes[setting.field] = getattr(defaults, setting.field)
        else:
            changes[setting.field] = setting.parse(item.name, item.value)
    return changes


# ================================================================ DescribeCluster


def describe_cluster(ctx: Context, request: c.DescribeClusterRequest
                     ) -> c.DescribeClusterResponse:
    """DescribeCluster v0-v1: the brokers Metadata names, the controller, the cluster id."""
    operations = CLUSTER_OPERATIONS if request.include_cluster_authorized_operations \
        else c.NO_AUTHORIZED_OPERATIONS
    placement = ctx.placement
    if placement is None:
        node = ctx.node
        return c.DescribeClusterResponse(0, CLUSTER_ID, node.broker_id, (
            c.ClusterBroker(node.broker_id, node.host, node.port),),
            cluster_authorized_operations=operations)
    return c.DescribeClusterResponse(0, CLUSTER_ID, placement.controller(), tuple(
        c.ClusterBroker(b.broker_id, b.host, b.port) for b in placement.brokers()),
        cluster_authorized_operations=operations)


# ================================================================ records and log dirs


def delete_records(ctx: Context, request: c.DeleteRecordsRequest) -> c.DeleteRecordsResponse:
    """DeleteRecords v0-v2: the records before ``offset`` go, as far as whole segments
    reach (Skerry deletes segments, never part of one): every segment whose records all
    lie below the offset is deleted, and the answer's low watermark is the first offset
    still kept, which may be below the one asked for. ``-1`` means the high watermark; an
    offset outside ``[first retained, high watermark]``: OFFSET_OUT_OF_RANGE."""
    topics = []
    for topic in request.topics:
        parts = []
        for part in topic.partitions:
            try:
                parts.append(_delete_records(ctx, topic.name, part))
            except KafkaError as refusal:
                parts.append(c.DeleteRecordsPartitionResult(part.partition_index, -1,
                                                            int(refusal.code)))
        topics.append(c.DeleteRecordsTopicResult(topic.name, tuple(parts)))
    return c.DeleteRecordsResponse(tuple(topics))


def _delete_records(ctx: Context, topic: str, part: c.DeleteRecordsPartition
                    ) -> c.DeleteRecordsPartitionResult:
    _refuse_in_cluster(ctx)
    index = part.partition_index
    config = _visible_config(ctx, topic)
    if config is None or not 0 <= index < config.partitions:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}/{index}")
    core = ctx.core
    end = core.hw(topic, index) + 1
    target = end if part.offset == -1 else part.offset
    summary = core.partition_summary(topic, index)
    if not summary.first_offset <= target <= end:
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {target} of {topic}/{index}")
    bases = summary.segment_bases
    whole = sum(1 for i in range(len(bases) - 1) if bases[i + 1] <= target)
    if whole:
        core.delete_oldest_segments(topic, index, whole)
    return c.DeleteRecordsPartitionResult(index, core.earliest_offset(topic, index), 0)


def describe_log_dirs(ctx: Context, request: c.DescribeLogDirsRequest
                      ) -> c.DescribeLogDirsResponse:
    """DescribeLogDirs v0-v4: one log directory (the data directory), with each asked
    topic's partitions and their record bytes (indexes not counted); no lag, no future
    replicas (Skerry moves no replica between directories)."""
    core = ctx.core
    wanted = request.topics
    names = sorted(t for t in core.topic_names() if ctx.visible(t)) if wanted is None \
        else [t.topic for t in wanted if _visible_config(ctx, t.topic) is not None]
    picked = {t.topic: set(t.partitions) for t in wanted or ()}
    results = []
    for name in names:
        config = core.topic_config(name)
        if config is None:
            continue
        parts = tuple(c.LogDirPartition(p, core.partition_summary(name, p).size_bytes)
                      for p in range(config.partitions)
                      if wanted is None or p in picked.get(name, ()))
        results.append(c.LogDirTopicResult(name, parts))
    return c.DescribeLogDirsResponse((c.LogDirResult(0, str(core.config["data_dir"]),
                                                     tuple(results)),))


# ================================================================ groups


def delete_groups(ctx: Context, request: c.DeleteGroupsRequest
                  ) -> Deferred[c.DeleteGroupsResponse]:
    """DeleteGroups v0-v2: each group's outcome (see the module doc)."""
    service = _service(ctx)
    outcomes: list[Deferred[int]] = []
    for group_id in request.groups_names:
        try:
            one = _call(service.delete_group, group_id)
        except KafkaGroupError as refusal:
            one = fail(refusal)
        outcomes.append(one.addCallbacks(lambda _: 0, _code))
    names = request.groups_names
    return gatherResults(outcomes).addCallback(lambda codes: c.DeleteGroupsResponse(tuple(
        c.DeletedGroup(g, code) for g, code in zip(names, codes, strict=True))))


def offset_delete(ctx: Context, request: c.OffsetDeleteRequest
                  ) -> Deferred[c.OffsetDeleteResponse] | c.OffsetDeleteResponse:
    """OffsetDelete v0: the listed partitions' committed offsets forgotten (see the
    module doc); an unknown topic's partitions: UNKNOWN_TOPIC_OR_PARTITION."""
    service = _service(ctx)
    if ctx.groups is not None and service.coordinator.group(request.group_id) is None \
            and not any(g == request.group_id for g, _ in service.groups.offset_keys()):
        return c.OffsetDeleteResponse(int(ErrorCode.GROUP_ID_NOT_FOUND))
    pending: list[Deferred[Any]] = []
    for topic in request.topics:
        if _visible_config(ctx, topic.name) is None:
            pending.append(_ready(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
            continue
        try:
            d = _call(service.delete_offsets, request.group_id, topic.name, topic.partitions)
            pending.append(d.addCallbacks(lambda _: 0, _code))
        except KafkaGroupError:
            pending.append(_ready(int(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)))
    topics = request.topics

    def respond(codes: list[int]) -> c.OffsetDeleteResponse:
        return c.OffsetDeleteResponse(0, tuple(
            c.OffsetDeleteTopicResult(t.name, tuple(
                c.OffsetDeletePartitionResult(p, code) for p in t.partitions))
            for t, code in zip(topics, codes, strict=True)))

    return gatherResults(pending).addCallback(respond)


def _ready(code: int) -> Deferred[int]:
    d: Deferred[int] = Deferred()
    d.callback(code)
    return d


def _code(failure: Any) -> int:
    failure.trap(KafkaGroupError, KafkaError)
    return int(code_for(failure.value))


ADMIN_HANDLERS: dict[type, Any] = {
    c.CreateTopicsRequest: create_topics,
    c.DeleteTopicsRequest: delete_topics,
    c.CreatePartitionsRequest: create_partitions,
    c.DescribeConfigsRequest: describe_configs,
    c.IncrementalAlterConfigsRequest: incremental_alter_configs,
    c.DescribeClusterRequest: describe_cluster,
    c.DeleteGroupsRequest: delete_groups,
    c.OffsetDeleteRequest: offset_delete,
    c.DeleteRecordsRequest: delete_records,
    c.DescribeLogDirsRequest: describe_log_dirs,
}
"""Request class -> handler, merged into the dispatcher's table."""

ADMIN_VERSIONS: dict[c.ApiKey, tuple[int, int]] = {
    c.ApiKey.CREATE_TOPICS: (0, 7),
    c.ApiKey.DELETE_TOPICS: (0, 6),
    c.ApiKey.CREATE_PARTITIONS: (0, 3),
    c.ApiKey.DESCRIBE_CONFIGS: (0, 4),
    c.ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    c.ApiKey.DESCRIBE_CLUSTER: (0, 1),
    c.ApiKey.DELETE_GROUPS: (0, 2),
    c.ApiKey.OFFSET_DELETE: (0, 0),
    c.ApiKey.DELETE_RECORDS: (0, 2),
    c.ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
}
"""The versions these handlers serve (and ApiVersions advertises)."""
