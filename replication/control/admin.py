"""The Flux admin commands' metadata on a broker without etcd, and the forced-election rule.

Owns: ``force_leader`` (the operator's forced election, ``ADMIN_SET_PARTITION_LEADER``: the
new leader must be in the partition's ISR unless unclean election is allowed, the new ISR
must hold the leader, and the leader epoch moves by one as in an automatic election), and
``LocalMetadata``: the record a broker without etcd keeps for the seed broker's admin
commands (registered brokers, forced partition states, a ``term`` and an ``index``), as an
immutable value whose every change returns the next value. The shell
(``broker/services/cluster_admin.py``) persists the next value before it takes effect, so
the index never goes back across a restart.

``term`` is 1 here: there is no consensus to have terms. ``index`` counts the changes, one
per accepted ``ADMIN_CREATE_TOPIC``, ``ADMIN_REGISTER_BROKER`` or
``ADMIN_SET_PARTITION_LEADER`` (etcd's revision plays that part with etcd). A heartbeat
changes nothing stored (etcd's keepalive does not move the revision either).

Must not import: Twisted, ``broker``, ``time``, sockets or files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from replication.control.keys import NO_LEADER, PartitionState
from replication.errors import InvalidReplicaRequest

__all__ = [
    "LOCAL_TERM",
    "FORMAT_VERSION",
    "RegisteredBroker",
    "LocalMetadata",
    "force_leader",
]

LOCAL_TERM = 1
"""The term a broker without etcd answers with."""

FORMAT_VERSION = 1


def force_leader(current: PartitionState | None, leader: int, isr: Sequence[int], *,
                 unclean_allowed: bool = False) -> PartitionState:
    """The partition's state after the operator forces ``leader`` with ``isr``.

    - ``isr`` must name ``leader`` (a leader is always in its own ISR).
    - ``leader`` must be in the *current* ISR (``current.isr``), since only those replicas
      hold every committed offset; a leader from outside it is refused unless
      ``unclean_allowed`` (then committed data may be lost, as with an unclean automatic
      election).
    - The leader epoch moves by one, also when the leader stays (the new ISR is a new
      decision that the old epoch's writes must not race).

    ``current`` None: the partition has no recorded state yet; any leader goes, epoch 0.

    >>> s = PartitionState(leader=1, leader_epoch=4, isr=(1, 2))
    >>> force_leader(s, 2, [2, 1])
    PartitionState(leader=2, leader_epoch=5, isr=(2, 1))
    >>> force_leader(s, 0, [0])
    Traceback (most recent call last):
    ...
    replication.errors.InvalidReplicaRequest: broker 0 is not in the partition's ISR [1 2]; a leader from outside the ISR may lack committed messages (unclean election is off)
    """
    if leader == NO_LEADER or leader < 0:
        raise InvalidReplicaRequest("leader must be a broker id")
    if leader not in isr:
        raise InvalidReplicaRequest(f"the isr [{' '.join(map(str, isr))}] must include "
                                    f"the leader {leader}")
    if current is None:
        return PartitionState(leader, 0, tuple(isr))
    if leader not in current.isr and not unclean_allowed:
        raise InvalidReplicaRequest(
            f"broker {leader} is not in the partition's ISR [{' '.join(map(str, current.isr))}]"
            "; a leader from outside the ISR may lack committed messages (unclean election "
            "is off)")
    ordered = (leader, *(r for r in isr if r != leader))
    return PartitionState(leader, current.leader_epoch + 1, ordered)


@dataclass(frozen=True, slots=True)
class RegisteredBroker:
    """A broker as ``ADMIN_REGISTER_BROKER`` recorded it."""

    broker_id: int
    host: str
    port: int
    epoch: int = 0

    @property
    def addr(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class LocalMetadata:
    """What a broker without etcd records for the admin commands (module docstring).

    Every change returns ``(next value, None)``; the caller persists ``next.to_json()``
    first and only then uses it. ``known_brokers`` (the ``cluster.brokers`` address book,
    when there is one) limits which ids may register."""

    index: int = 0
    brokers: Mapping[int, RegisteredBroker] = field(default_factory=dict)
    partitions: Mapping[tuple[str, int], PartitionState] = field(default_factory=dict)
    term: int = LOCAL_TERM

    # ------------------------------------------------------------------ changes

    def topic_created(self) -> LocalMetadata:
        """A topic was created through ADMIN_CREATE_TOPIC: one change."""
        return replace(self, index=self.index + 1)

    def register(self, broker_id: int, host: str, port: int, epoch: int | None, *,
                 address_book: Iterable[int] | None = None) -> LocalMetadata:
        """ADMIN_REGISTER_BROKER. A registration with an epoch below the recorded one is a
        stale incarnation and refused; without an epoch the recorded one is kept."""
        if address_book is not None:
            book = set(address_book)
            if broker_id not in book:
                raise InvalidReplicaRequest(
                    f"broker {broker_id} is not in this cluster's address book "
                    f"(cluster.brokers: {' '.join(map(str, sorted(book)))})")
        if not 0 < port <= 65535:
            raise InvalidReplicaRequest(f"port must be between 1 and 65535, got {port}")
        before = self.brokers.get(broker_id)
        if epoch is None:
            epoch = before.epoch if before is not None else 0
        elif before is not None and epoch < before.epoch:
            raise InvalidReplicaRequest(f"broker {broker_id} is registered with epoch "
                                        f"{before.epoch}; epoch {epoch} is stale")
        brokers = dict(self.brokers)
        brokers[broker_id] = RegisteredBroker(broker_id, host, port, epoch)
        return replace(self, index=self.index + 1, brokers=brokers)

    def check_heartbeat(self, broker_id: int) -> None:
        """ADMIN_BROKER_HEARTBEAT changes nothing stored; an unregistered id is refused."""
        if broker_id not in self.brokers:
            raise InvalidReplicaRequest(f"unknown broker {broker_id}; register it first "
                                        "(ADMIN_REGISTER_BROKER)")

    def set_leader(self, topic: str, partition: int, leader: int, isr: Sequence[int], *,
                   unclean_allowed: bool = False,
                   current: PartitionState | None = None,
                   known: Iterable[int] | None = None) -> LocalMetadata:
        """ADMIN_SET_PARTITION_LEADER (``force_leader``). ``current`` is the partition's
        state when the caller knows better than this record (a cluster member's own view of
        its ISR); else the recorded state. ``known``: the broker ids the leader and the ISR
        may name (registered brokers and the address book)."""
        if known is not None:
            ids = set(known)
            for broker in (leader, *isr):
                if broker not in ids:
                    listed = " ".join(map(str, sorted(ids))) or "none"
                    raise InvalidReplicaRequest(f"unknown broker {broker} (known brokers: "
                                                f"{listed}; register it first)")
        before = current if current is not None else self.partitions.get((topic, partition))
        state = force_leader(before, leader, isr, unclean_allowed=unclean_allowed)
        partitions = dict(self.partitions)
        partitions[(topic, partition)] = state
        return replace(self, index=self.index + 1, partitions=partitions)

    def forget_topic(self, topic: str) -> LocalMetadata:
        """Drop the partition states of a deleted topic (not a change of its own)."""
        kept = {k: v for k, v in self.partitions.items() if k[0] != topic}
        return replace(self, partitions=kept)

    # ------------------------------------------------------------------ queries

    def broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def leader_of(self, topic: str, partition: int) -> PartitionState | None:
        return self.partitions.get((topic, partition))

    # ------------------------------------------------------------------ persistence

    def to_json(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "term": self.term,
            "index": self.index,
            "brokers": {str(b.broker_id): {"host": b.host, "port": b.port, "epoch": b.epoch}
                        for b in sorted(self.brokers.values(), key=lambda b: b.broker_id)},
            "partitions": [
                {"topic": t, "partition": p, "leader": s.leader,
                 "leader_epoch": s.leader_epoch, "isr": list(s.isr)}
                for (t, p), s in sorted(self.partitions.items())],
        }

    @classmethod
    def from_json(cls, raw: Any) -> LocalMetadata:
        """Strict: ``ValueError`` naming what is wrong (a damaged or foreign file)."""
        if not isinstance(raw, dict) or raw.get("version") != FORMAT_VERSION:
            raise ValueError(f"not a version {FORMAT_VERSION} cluster metadata document")
        index = _int(raw.get("index"), "index")
        term = _int(raw.get("term"), "term")
        brokers: dict[int, RegisteredBroker] = {}
        raw_brokers = raw.get("brokers")
        if not isinstance(raw_brokers, dict):
            raise ValueError("brokers: expected an object")
        for key, value in raw_brokers.items():
            if not (isinstance(key, str) and key.isdigit()) or not isinstance(value, dict):
                raise ValueError(f"brokers.{key}: expected an id and an object")
            host = value.get("host")
            if not isinstance(host, str) or not host:
                raise ValueError(f"brokers.{key}.host: expected a host")
            brokers[int(key)] = RegisteredBroker(int(key), host,
                                                 _int(value.get("port"), f"brokers.{key}.port"),
                                                 _int(value.get("epoch"), f"brokers.{key}.epoch"))
        partitions: dict[tuple[str, int], PartitionState] = {}
        raw_parts = raw.get("partitions")
        if not isinstance(raw_parts, list):
            raise ValueError("partitions: expected a list")
        for item in raw_parts:
            if not isinstance(item, dict) or not isinstance(item.get("topic"), str):
                raise ValueError("partitions: expected objects with a topic")
            isr = item.get("isr")
            if not isinstance(isr, list):
                raise ValueError("partitions.isr: expected a list")
            leader = item.get("leader")
            if isinstance(leader, bool) or not isinstance(leader, int):
                raise ValueError("partitions.leader: expected a number")
            partitions[(item["topic"], _int(item.get("partition"), "partition"))] = \
                PartitionState(leader, _int(item.get("leader_epoch"), "leader_epoch"),
                               tuple(_int(r, "isr") for r in isr))
        return cls(index, brokers, partitions, term)

    def dumps(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True).encode() + b"\n"


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what}: expected a whole number >= 0, got {value!r}")
    return value
