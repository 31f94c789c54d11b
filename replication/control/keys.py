"""The control plane's key layout in etcd and the JSON documents its keys hold.

Owns: ``KeyLayout`` (every key under ``/skerry/<cluster id>/``, their prefixes, and the
parsing of a key read back from a range or a watch), the value records
(``BrokerRegistration``, ``ControllerRecord``, ``TopicRecord``, ``PartitionState``) and their
(de)serialisation to compact JSON bytes. Keys are ``str`` here; the etcd client encodes them
as UTF-8 (then base64 for the gateway).

Layout (the spec's "Keys" table)::

    /skerry/<cluster>/brokers/<id>          {"addr": "h:p", "incarnation": n}   lease-bound
    /skerry/<cluster>/controller            {"broker": id}                       lease-bound
    /skerry/<cluster>/topics/<t>            {"partitions", "replication_factor", "min_isr",
                                             "replicas", "settings"}
    /skerry/<cluster>/partitions/<t>/<p>    {"leader", "leader_epoch", "isr"}
    /skerry/<cluster>/logends/<t>/<p>/<id>  {"log_end", "last_epoch", "offline_epoch"}
                                                                          lease-bound

Decoding is strict: a missing field, a wrong type (``true`` is not an int) or an unknown
top-level key shape raises ``MalformedValue`` / ``BadKey``; unknown *extra* fields in a
value are ignored, so a newer broker may add fields an older one does not read.

Must not import: Twisted, ``broker``, ``time``, sockets or files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from data.names import NAME_CHARS, NAME_PATTERN
from replication.control.errors import BadKey, MalformedValue

__all__ = [
    "NO_LEADER",
    "KeyLayout",
    "BrokerKey",
    "ControllerKey",
    "TopicKey",
    "PartitionKey",
    "LogEndKey",
    "ParsedKey",
    "prefix_range_end",
    "BrokerRegistration",
    "ControllerRecord",
    "TopicRecord",
    "PartitionState",
    "LogEndReport",
]

NO_LEADER = -1
"""``PartitionState.leader`` of an offline partition."""

_CLUSTER_ID_RE = re.compile(f"[{NAME_CHARS}]{{1,64}}")
_TOPIC_RE = re.compile(NAME_PATTERN)
_INT_RE = re.compile(r"0|[1-9][0-9]{0,9}")


@dataclass(frozen=True, slots=True)
class BrokerKey:
    broker_id: int


@dataclass(frozen=True, slots=True)
class ControllerKey:
    """The controller key (``controller``): it names no topic, partition or broker."""


@dataclass(frozen=True, slots=True)
class TopicKey:
    topic: str


@dataclass(frozen=True, slots=True)
class PartitionKey:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class LogEndKey:
    """``logends/<t>/<p>/<broker>``: what a live replica of an offline partition holds."""

    topic: str
    partition: int
    broker_id: int


ParsedKey = BrokerKey | ControllerKey | TopicKey | PartitionKey | LogEndKey


def prefix_range_end(prefix: bytes) -> bytes:
    """etcd's ``range_end`` for "every key starting with ``prefix``": the prefix with its last
    byte that is not 0xff incremented and the rest cut (clientv3 ``GetPrefixRangeEnd``).

    >>> prefix_range_end(b"/skerry/c/brokers/")
    b'/skerry/c/brokers0'
    """
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\x00"  # every key


def _check_topic(topic: str) -> str:
    if not _TOPIC_RE.fullmatch(topic) or topic in (".", ".."):
        raise BadKey(f"topic name {topic!r} is not 1-249 of [A-Za-z0-9._-]")
    return topic


def _check_id(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadKey(f"{what} {value!r} is not a non-negative integer")
    return value


@dataclass(frozen=True, slots=True)
class KeyLayout:
    """Every key of one cluster, under ``/skerry/<cluster_id>/``.

    >>> layout = KeyLayout("prod-1")
    >>> layout.broker(2), layout.partition("orders", 3)
    ('/skerry/prod-1/brokers/2', '/skerry/prod-1/partitions/orders/3')
    >>> layout.parse("/skerry/prod-1/partitions/orders/3")
    PartitionKey(topic='orders', partition=3)
    """

    cluster_id: str

    def __post_init__(self) -> None:
        if not _CLUSTER_ID_RE.fullmatch(self.cluster_id) or self.cluster_id in (".", ".."):
            raise BadKey(f"cluster id {self.cluster_id!r} is not 1-64 of [A-Za-z0-9._-]")

    @property
    def prefix(self) -> str:
        return f"/skerry/{self.cluster_id}/"

    @property
    def brokers_prefix(self) -> str:
        return f"{self.prefix}brokers/"

    @property
    def topics_prefix(self) -> str:
        return f"{self.prefix}topics/"

    @property
    def controller(self) -> str:
        return f"{self.prefix}controller"

    def partitions_prefix(self, topic: str | None = None) -> str:
        """Every partition key, or those of one topic."""
        if topic is None:
            return f"{self.prefix}partitions/"
        return f"{self.prefix}partitions/{_check_topic(topic)}/"

    def log_ends_prefix(self, topic: str | None = None) -> str:
        """Every log-end report, or those of one topic."""
        if topic is None:
            return f"{self.prefix}logends/"
        return f"{self.prefix}logends/{_check_topic(topic)}/"

    def log_end(self, topic: str, partition: int, broker_id: int) -> str:
        """A replica's log-end report for an offline partition (unclean election)."""
        return (f"{self.log_ends_prefix(topic)}{_check_id(partition, 'partition')}/"
                f"{_check_id(broker_id, 'broker id')}")

    def broker(self, broker_id: int) -> str:
        return f"{self.brokers_prefix}{_check_id(broker_id, 'broker id')}"

    def topic(self, topic: str) -> str:
        return f"{self.topics_prefix}{_check_topic(topic)}"

    def partition(self, topic: str, partition: int) -> str:
        return f"{self.partitions_prefix(topic)}{_check_id(partition, 'partition')}"

    def parse(self, key: str) -> ParsedKey:
        """Which key of the layout ``key`` is; ``BadKey`` for anything else."""
        if not key.startswith(self.prefix):
            raise BadKey(f"key {key!r} is outside {self.prefix}")
        parts = key[len(self.prefix):].split("/")
        match parts:
            case ["controller"]:
                return ControllerKey()
            case ["brokers", broker] if _INT_RE.fullmatch(broker):
                return BrokerKey(int(broker))
            case ["topics", topic] if _TOPIC_RE.fullmatch(topic):
                return TopicKey(topic)
            case ["partitions", topic, p] if _TOPIC_RE.fullmatch(topic) and _INT_RE.fullmatch(p):
                return PartitionKey(topic, int(p))
            case ["logends", topic, p, b] if _TOPIC_RE.fullmatch(topic) \
                    and _INT_RE.fullmatch(p) and _INT_RE.fullmatch(b):
                return LogEndKey(topic, int(p), int(b))
        raise BadKey(f"key {key!r} is not one of the layout's keys")


# --- values -----------------------------------------------------------------------------

def _dumps(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def _loads(raw: bytes, what: str) -> Mapping[str, Any]:
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedValue(f"{what}: not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise MalformedValue(f"{what}: not a JSON object")
    return document


def _int(document: Mapping[str, Any], name: str, what: str, *, minimum: int = 0) -> int:
    value = document.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise MalformedValue(f"{what}: {name!r} is {value!r}, not an integer >= {minimum}")
    return value


def _ids(value: Any, name: str, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(
            isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value):
        raise MalformedValue(f"{what}: {name!r} is {value!r}, not a list of broker ids")
    if len(set(value)) != len(value):
        raise MalformedValue(f"{what}: {name!r} names a broker twice: {value!r}")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """``brokers/<id>``: where a live broker listens; ``incarnation`` grows at each start, so
    the controller tells a restart (new incarnation) from a keepalive."""

    addr: str
    incarnation: int

    def encode(self) -> bytes:
        return _dumps({"addr": self.addr, "incarnation": self.incarnation})

    @classmethod
    def decode(cls, raw: bytes) -> BrokerRegistration:
        doc = _loads(raw, "broker registration")
        addr = doc.get("addr")
        if not isinstance(addr, str) or not addr:
            raise MalformedValue(f"broker registration: 'addr' is {addr!r}")
        return cls(addr, _int(doc, "incarnation", "broker registration"))


@dataclass(frozen=True, slots=True)
class ControllerRecord:
    """``controller``: which broker is the controller. Its epoch is not stored: it is the
    key's ``create_revision``, which etcd assigns and nobody can forge."""

    broker: int

    def encode(self) -> bytes:
        return _dumps({"broker": self.broker})

    @classmethod
    def decode(cls, raw: bytes) -> ControllerRecord:
        return cls(_int(_loads(raw, "controller"), "broker", "controller"))


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """``topics/<t>``: a topic's shape. ``replicas[p]`` is partition ``p``'s replica list
    (its order is the election's preference order); ``settings`` holds the rest (retention,
    ``unclean_leader_election``...) as plain JSON values."""

    partitions: int
    replication_factor: int
    min_isr: int
    replicas: tuple[tuple[int, ...], ...]
    settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        what = "topic"
        if self.partitions < 1 or len(self.replicas) != self.partitions:
            raise MalformedValue(f"{what}: {self.partitions} partitions but "
                                 f"{len(self.replicas)} replica lists")
        if not 1 <= self.min_isr <= self.replication_factor:
            raise MalformedValue(f"{what}: min_isr {self.min_isr} is not in "
                                 f"1..{self.replication_factor}")
        for p, replicas in enumerate(self.replicas):
            if len(replicas) != self.replication_factor or len(set(replicas)) != len(replicas):
                raise MalformedValue(f"{what}: partition {p}'s replicas {list(replicas)} are "
                                     f"not {self.replication_factor} distinct brokers")

    @property
    def unclean_leader_election(self) -> bool:
        return self.settings.get("unclean_leader_election") is True

    def encode(self) -> bytes:
        return _dumps({"partitions": self.partitions,
                       "replication_factor": self.replication_factor,
                       "min_isr": self.min_isr,
                       "replicas": [list(r) for r in self.replicas],
                       "settings": dict(self.settings)})

    @classmethod
    def decode(cls, raw: bytes) -> TopicRecord:
        what = "topic"
        doc = _loads(raw, what)
        replicas = doc.get("replicas")
        if not isinstance(replicas, list):
            raise MalformedValue(f"{what}: 'replicas' is {replicas!r}, not a list of lists")
        settings = doc.get("settings", {})
        if not isinstance(settings, dict):
            raise MalformedValue(f"{what}: 'settings' is {settings!r}, not an object")
        return cls(_int(doc, "partitions", what, minimum=1),
                   _int(doc, "replication_factor", what, minimum=1),
                   _int(doc, "min_isr", what, minimum=1),
                   tuple(_ids(r, "replicas", what) for r in replicas),
                   settings)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """``partitions/<t>/<p>``: the partition's leader (``NO_LEADER`` when offline), its leader
    epoch and its *committed* ISR (in the order it was written)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]

    def encode(self) -> bytes:
        return _dumps({"leader": self.leader, "leader_epoch": self.leader_epoch,
                       "isr": list(self.isr)})

    @classmethod
    def decode(cls, raw: bytes) -> PartitionState:
        what = "partition state"
        doc = _loads(raw, what)
        return cls(_int(doc, "leader", what, minimum=NO_LEADER),
                   _int(doc, "leader_epoch", what),
                   _ids(doc.get("isr"), "isr", what))

    @classmethod
    def initial(cls, replicas: Sequence[int]) -> PartitionState:
        """A new partition: the first replica leads epoch 0, every replica in the ISR."""
        return cls(replicas[0], 0, tuple(replicas))


@dataclass(frozen=True, slots=True)
class LogEndReport:
    """``logends/<t>/<p>/<broker>``: a live replica's log end offset and the leader epoch
    of its last record (``last_epoch``, -1 for an empty log), published bound to its lease
    once it saw the partition offline at ``offline_epoch`` (the partition key's
    ``leader_epoch`` then). The controller's unclean election reads these; a report made
    for another epoch is stale and ignored.

    >>> LogEndReport.decode(LogEndReport(120, 3, 5).encode())
    LogEndReport(log_end=120, last_epoch=3, offline_epoch=5)
    """

    log_end: int
    last_epoch: int
    offline_epoch: int

    def encode(self) -> bytes:
        return _dumps({"log_end": self.log_end, "last_epoch": self.last_epoch,
                       "offline_epoch": self.offline_epoch})

    @classmethod
    def decode(cls, raw: bytes) -> LogEndReport:
        what = "log-end report"
        doc = _loads(raw, what)
        return cls(_int(doc, "log_end", what), _int(doc, "last_epoch", what, minimum=-1),
                   _int(doc, "offline_epoch", what))
