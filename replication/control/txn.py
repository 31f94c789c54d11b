"""etcd transactions as plain data, and the builders of every txn the control plane sends.

Owns: ``Compare``, ``Put``, ``Get``, ``Delete``, ``Txn`` (the shape of etcd's ``TxnRequest``
with ``str`` keys and ``bytes`` values, no encoding) and the builders:

========================  ===============================================================
``register_broker``       ``CREATE(brokers/<me>) == 0``; put it with my lease
``claim_controller``      ``CREATE(controller) == 0`` and ``LEASE(brokers/<me>) == my
                          lease``; put it with my lease (controller epoch = its
                          create_revision, read back from the answer's header revision)
``create_topic``          ``CREATE(topics/<t>) == 0``; put the topic and all its partitions
``write_partitions``      controller: ``CREATE(controller) == my epoch`` and, per key,
                          ``MOD(key) == the revision the decision was made on``
``write_isr``             leader: ``MOD(key) == read revision`` and
                          ``LEASE(brokers/<me>) == my lease``
``delete_topic``          ``MOD(topics/<t>) == read revision``; delete it and its partitions
``grow_topic``            ``MOD(topics/<t>) == read revision``; put the grown topic and the
                          new partitions
``report_log_end``        a replica of an offline partition: ``LEASE(brokers/<me>) == my
                          lease``; put ``logends/<t>/<p>/<me>`` bound to my lease
``withdraw_log_end``      the same replica once the partition has a leader: delete it
========================  ===============================================================

Each failure branch reads back what the compares were about, so one round trip tells the
loser what won. The etcd client (``broker.services.etcd``) encodes these for the gateway;
the fake etcd of the tests evaluates the same encoding.

Must not import: Twisted, ``broker``, ``time``, sockets or files.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from replication.control.errors import InvalidIsr, NotPartitionLeader
from replication.control.keys import (
    BrokerRegistration,
    ControllerRecord,
    KeyLayout,
    LogEndReport,
    PartitionState,
    TopicRecord,
)

__all__ = [
    "Target",
    "CompareOp",
    "Compare",
    "Put",
    "Get",
    "Delete",
    "Op",
    "Txn",
    "PartitionWrite",
    "register_broker",
    "claim_controller",
    "create_topic",
    "write_partitions",
    "write_isr",
    "delete_topic",
    "grow_topic",
    "alter_topic",
    "report_log_end",
    "withdraw_log_end",
]


class Target(enum.Enum):
    """What a compare reads of a key (etcd ``Compare.CompareTarget``). An absent key has
    version, create and mod revision 0 and lease 0."""

    VERSION = "VERSION"
    CREATE = "CREATE"
    MOD = "MOD"
    VALUE = "VALUE"
    LEASE = "LEASE"


class CompareOp(enum.Enum):
    """etcd ``Compare.CompareResult``."""

    EQUAL = "EQUAL"
    GREATER = "GREATER"
    LESS = "LESS"
    NOT_EQUAL = "NOT_EQUAL"


@dataclass(frozen=True, slots=True)
class Compare:
    """``target(key) <op> value``: ``value`` is bytes for ``VALUE``, an int otherwise."""

    key: str
    target: Target
    value: int | bytes
    op: CompareOp = CompareOp.EQUAL

    def __post_init__(self) -> None:
        if (self.target is Target.VALUE) != isinstance(self.value, bytes):
            raise TypeError(f"compare {self.target.value} needs "
                            f"{'bytes' if self.target is Target.VALUE else 'an int'}")


@dataclass(frozen=True, slots=True)
class Put:
    key: str
    value: bytes
    lease: int = 0


@dataclass(frozen=True, slots=True)
class Get:
    key: str
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Delete:
    key: str
    prefix: bool = False


Op = Put | Get | Delete


@dataclass(frozen=True, slots=True)
class Txn:
    """``if all(compare) then success else failure``, atomically at one revision."""

    compare: tuple[Compare, ...]
    success: tuple[Op, ...]
    failure: tuple[Op, ...] = ()


def register_broker(layout: KeyLayout, broker_id: int, registration: BrokerRegistration,
                    lease: int) -> Txn:
    """Announce this broker: ``brokers/<id>``, bound to its lease, only if absent (a live
    holder of the id keeps it; the failure branch shows who)."""
    key = layout.broker(broker_id)
    return Txn((Compare(key, Target.CREATE, 0),),
               (Put(key, registration.encode(), lease),),
               (Get(key),))


def claim_controller(layout: KeyLayout, broker_id: int, lease: int) -> Txn:
    """Become the controller if there is none, and only while registered with ``lease``."""
    return Txn((Compare(layout.controller, Target.CREATE, 0),
                Compare(layout.broker(broker_id), Target.LEASE, lease)),
               (Put(layout.controller, ControllerRecord(broker_id).encode(), lease),),
               (Get(layout.controller),))


def create_topic(layout: KeyLayout, topic: str, record: TopicRecord) -> Txn:
    """Create the topic and every partition (``PartitionState.initial``) in one txn."""
    key = layout.topic(topic)
    puts = [Put(key, record.encode())]
    puts += [Put(layout.partition(topic, p), PartitionState.initial(replicas).encode())
             for p, replicas in enumerate(record.replicas)]
    return Txn((Compare(key, Target.CREATE, 0),), tuple(puts), (Get(key),))


@dataclass(frozen=True, slots=True)
class PartitionWrite:
    """One partition's new state, decided on the key as read at ``mod_revision``."""

    topic: str
    partition: int
    mod_revision: int
    state: PartitionState


def write_partitions(layout: KeyLayout, controller_epoch: int,
                     writes: Sequence[PartitionWrite]) -> Txn:
    """The controller's leadership changes, fenced by its epoch (the controller key's
    create_revision) and each key's mod revision. All or nothing: on failure the answer
    holds the controller key and every partition key, to decide again. Keep a batch under
    etcd's ``--max-txn-ops`` (128 by default): ``2 + 2 * len(writes)`` ops."""
    if not writes:
        raise ValueError("write_partitions needs at least one write")
    compare = [Compare(layout.controller, Target.CREATE, controller_epoch)]
    success: list[Op] = []
    failure: list[Op] = [Get(layout.controller)]
    for w in writes:
        key = layout.partition(w.topic, w.partition)
        compare.append(Compare(key, Target.MOD, w.mod_revision))
        success.append(Put(key, w.state.encode()))
        failure.append(Get(key))
    return Txn(tuple(compare), tuple(success), tuple(failure))


def write_isr(layout: KeyLayout, broker_id: int, lease: int, write: PartitionWrite) -> Txn:
    """The leader's ISR change: same leader and epoch, a new ISR that keeps the leader,
    fenced by the key's mod revision and by this broker still holding its lease."""
    state = write.state
    if state.leader != broker_id:
        raise NotPartitionLeader(f"broker {broker_id} writes the ISR of {write.topic}/"
                                 f"{write.partition} whose leader is {state.leader}")
    if broker_id not in state.isr:
        raise InvalidIsr(f"ISR {list(state.isr)} leaves out its leader {broker_id}")
    key = layout.partition(write.topic, write.partition)
    return Txn((Compare(key, Target.MOD, write.mod_revision),
                Compare(layout.broker(broker_id), Target.LEASE, lease)),
               (Put(key, state.encode()),),
               (Get(key),))


def delete_topic(layout: KeyLayout, topic: str, mod_revision: int) -> Txn:
    """Delete the topic, every partition key and every log-end report, if the topic is
    still as read."""
    key = layout.topic(topic)
    return Txn((Compare(key, Target.MOD, mod_revision),),
               (Delete(key), Delete(layout.partitions_prefix(topic), prefix=True),
                Delete(layout.log_ends_prefix(topic), prefix=True)),
               (Get(key),))


def grow_topic(layout: KeyLayout, topic: str, mod_revision: int, before: TopicRecord,
               after: TopicRecord) -> Txn:
    """Add partitions: the topic record grows, the new partitions start as
    ``PartitionState.initial``; only if the topic is still as read."""
    if after.partitions <= before.partitions:
        raise ValueError("a topic only grows")
    key = layout.topic(topic)
    puts: list[Op] = [Put(key, after.encode())]
    puts += [Put(layout.partition(topic, p), PartitionState.initial(after.replicas[p]).encode())
             for p in range(before.partitions, after.partitions)]
    return Txn((Compare(key, Target.MOD, mod_revision),), tuple(puts), (Get(key),))


def alter_topic(layout: KeyLayout, topic: str, mod_revision: int, after: TopicRecord) -> Txn:
    """Change a topic's settings (its shape stays): only if the topic is still as read."""
    key = layout.topic(topic)
    return Txn((Compare(key, Target.MOD, mod_revision),), (Put(key, after.encode()),), (Get(key),))


def report_log_end(layout: KeyLayout, broker_id: int, lease: int, topic: str,
                   partition: int, report: LogEndReport) -> Txn:
    """A live replica of an offline partition publishes its log end for the controller's
    unclean election, bound to its lease (it vanishes with the broker), only while this
    broker still holds that lease."""
    key = layout.log_end(topic, partition, broker_id)
    return Txn((Compare(layout.broker(broker_id), Target.LEASE, lease),),
               (Put(key, report.encode(), lease),))


def withdraw_log_end(layout: KeyLayout, broker_id: int, topic: str, partition: int) -> Txn:
    """The partition has a leader again: the replica's report is of no use any more."""
    return Txn((), (Delete(layout.log_end(topic, partition, broker_id)),))
