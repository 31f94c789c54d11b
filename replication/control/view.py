"""One broker's copy of the cluster's keys in etcd, and the controller's decisions over it.

Owns: ``ClusterView`` (every key under ``/skerry/<cluster id>/`` as last read or watched:
live brokers, the controller and its epoch, topics, partitions, each with the mod revision
the next compare needs, and the replicas' log-end reports for offline partitions),
``plan`` / ``plan_elections`` (the controller's writes after any change:
``election.elect_leader`` for every partition, batched under etcd's txn size limit, and
the partitions whose unclean election waits for the replicas' log ends) and
``forced_election`` (the operator's ``ADMIN_SET_PARTITION_LEADER`` / ``skerry cluster
elect``: the same epoch bump and fencing as an automatic election).

The view is fed plain values (key, value, revisions, lease) by the shell
(``broker.services.control``) from ranges, watch events and txn answers. A write older than
what the view holds is ignored, so a txn answer applied early and the watch event
delivering the same write later do not fight. A value that does not decode (a foreign
writer under the prefix) is skipped and reported by ``put``'s answer, never guessed around.

Must not import: Twisted, ``broker``, ``time``, sockets or files.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from replication.control.election import Election, elect_leader
from replication.control.errors import BadKey, IneligibleLeader, InvalidIsr, MalformedValue
from replication.control.keys import (
    NO_LEADER,
    BrokerKey,
    BrokerRegistration,
    ControllerKey,
    ControllerRecord,
    KeyLayout,
    LogEndKey,
    LogEndReport,
    ParsedKey,
    PartitionKey,
    PartitionState,
    TopicKey,
    TopicRecord,
)
from replication.control.txn import PartitionWrite

__all__ = ["ClusterView", "PlannedElection", "ElectionPlan", "plan", "plan_elections",
           "forced_election", "preferred_leader_moves", "MAX_WRITES_PER_TXN"]

MAX_WRITES_PER_TXN = 60
"""Partition writes per controller txn: ``2 + 2 * 60`` ops stays under etcd's default
``--max-txn-ops`` of 128."""


@dataclass
class ClusterView:
    """The keys of one cluster as this broker last saw them."""

    layout: KeyLayout
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    broker_leases: dict[int, int] = field(default_factory=dict)
    controller: int | None = None
    controller_epoch: int = 0
    """The controller key's create_revision (0: no controller)."""
    topics: dict[str, TopicRecord] = field(default_factory=dict)
    topic_mods: dict[str, int] = field(default_factory=dict)
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    partition_mods: dict[tuple[str, int], int] = field(default_factory=dict)
    log_ends: dict[tuple[str, int], dict[int, LogEndReport]] = field(default_factory=dict)
    """``logends/<t>/<p>/<broker>``: (topic, partition) -> broker -> its report."""
    revision: int = 0
    """The newest revision applied (a range's header, a watch event, a txn answer)."""

    def _mod(self, parsed: ParsedKey) -> int:
        match parsed:
            case TopicKey(topic):
                return self.topic_mods.get(topic, 0)
            case PartitionKey(topic, partition):
                return self.partition_mods.get((topic, partition), 0)
        return 0

    def put(self, key: str, value: bytes, *, mod_revision: int, create_revision: int,
            lease: int = 0) -> ParsedKey | None:
        """A key was written (or read). Returns which key, or None when it is not one of
        the layout's, is older than the view's copy, or does not decode."""
        try:
            parsed = self.layout.parse(key)
        except BadKey:
            return None
        if mod_revision and mod_revision < self._mod(parsed):
            return None
        self.revision = max(self.revision, mod_revision)
        try:
            match parsed:
                case BrokerKey(broker_id):
                    self.brokers[broker_id] = BrokerRegistration.decode(value)
                    self.broker_leases[broker_id] = lease
                case ControllerKey():
                    self.controller = ControllerRecord.decode(value).broker
                    self.controller_epoch = create_revision
                case TopicKey(topic):
                    self.topics[topic] = TopicRecord.decode(value)
                    self.topic_mods[topic] = mod_revision
                case PartitionKey(topic, partition):
                    self.partitions[(topic, partition)] = PartitionState.decode(value)
                    self.partition_mods[(topic, partition)] = mod_revision
                case LogEndKey(topic, partition, broker_id):
                    report = LogEndReport.decode(value)
                    self.log_ends.setdefault((topic, partition), {})[broker_id] = report
        except MalformedValue:
            return None
        return parsed

    def delete(self, key: str, *, revision: int) -> ParsedKey | None:
        """A key was deleted (lease expiry or revocation, a topic deletion)."""
        try:
            parsed = self.layout.parse(key)
        except BadKey:
            return None
        self.revision = max(self.revision, revision)
        match parsed:
            case BrokerKey(broker_id):
                self.brokers.pop(broker_id, None)
                self.broker_leases.pop(broker_id, None)
            case ControllerKey():
                self.controller = None
                self.controller_epoch = 0
            case TopicKey(topic):
                self.topics.pop(topic, None)
                self.topic_mods.pop(topic, None)
            case PartitionKey(topic, partition):
                self.partitions.pop((topic, partition), None)
                self.partition_mods.pop((topic, partition), None)
            case LogEndKey(topic, partition, broker_id):
                reports = self.log_ends.get((topic, partition), {})
                reports.pop(broker_id, None)
                if not reports:
                    self.log_ends.pop((topic, partition), None)
        return parsed

    @property
    def alive(self) -> frozenset[int]:
        """The brokers holding a registration (a live lease)."""
        return frozenset(self.brokers)

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        record = self.topics.get(topic)
        if record is None or partition >= len(record.replicas):
            return ()
        return record.replicas[partition]

    def partitions_of(self, topic: str) -> Iterator[tuple[int, PartitionState]]:
        record = self.topics.get(topic)
        for p in range(record.partitions if record else 0):
            state = self.partitions.get((topic, p))
            if state is not None:
                yield p, state

    def under_replicated(self) -> list[tuple[str, int]]:
        """Partitions whose committed ISR is smaller than their replica list."""
        return sorted(key for key, state in self.partitions.items()
                      if len(state.isr) < len(self.replicas(*key)) or state.leader == NO_LEADER)


@dataclass(frozen=True, slots=True)
class PlannedElection:
    """One partition the controller writes: the write and the election that produced it.
    ``log_ends``: for an unclean election, the reports it ranked (empty: none arrived in
    time, the leader is the first live replica in list order)."""

    write: PartitionWrite
    election: Election
    log_ends: Mapping[int, LogEndReport] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ElectionPlan:
    """``plan``'s answer: the writes, and the offline partitions whose unclean election
    waits for log-end reports, as ``(topic, partition, offline leader epoch)``."""

    writes: list[PlannedElection]
    waiting: list[tuple[str, int, int]]


def current_reports(view: ClusterView, topic: str, partition: int, state: PartitionState,
                    live: Collection[int]) -> dict[int, LogEndReport]:
    """The reports that count for the partition now: from live replicas, made for the
    offline epoch the key holds."""
    replicas = view.replicas(topic, partition)
    return {b: r for b, r in view.log_ends.get((topic, partition), {}).items()
            if b in live and b in replicas and r.offline_epoch == state.leader_epoch}


def plan(view: ClusterView, *, unclean_default: bool = False,
         alive: Collection[int] | None = None,
         gave_up: Collection[tuple[str, int, int]] = ()) -> ElectionPlan:
    """Every partition whose state the election rule changes given the live brokers, in
    (topic, partition) order (the caller writes them in batches of ``MAX_WRITES_PER_TXN``),
    and the unclean elections still waiting.

    A topic's ``settings.unclean_leader_election`` (true or false) overrides the cluster's
    ``unclean_default``. An unclean election takes two steps, so the log ends it compares
    no longer move:

    1. the partition goes offline first (``leader = -1``, epoch + 1: a leader that is only
       cut off from etcd is fenced and its followers stop fetching from it);
    2. its live replicas publish their log ends for that epoch (``logends/...``); once
       every live replica did, or the caller's deadline for ``(topic, partition, epoch)``
       passed (``gave_up``), the best ranked (``election.unclean_rank``) leads. Until then
       the partition is listed in ``waiting``.
    """
    live = view.alive if alive is None else frozenset(alive)
    writes: list[PlannedElection] = []
    waiting: list[tuple[str, int, int]] = []
    for (topic, partition), state in sorted(view.partitions.items()):
        record = view.topics.get(topic)
        if record is None or partition >= record.partitions:
            continue
        unclean = record.settings.get("unclean_leader_election")
        allowed = unclean if isinstance(unclean, bool) else unclean_default
        replicas = record.replicas[partition]
        election = elect_leader(state, replicas, live)
        reports: dict[int, LogEndReport] = {}
        if election.offline and allowed and state.leader == NO_LEADER:
            reports = current_reports(view, topic, partition, state, live)
            candidates = [r for r in replicas if r in live]
            key = (topic, partition, state.leader_epoch)
            if candidates and not all(r in reports for r in candidates) \
                    and key not in gave_up:
                waiting.append(key)
                continue
            election = elect_leader(
                state, replicas, live, unclean_allowed=True,
                log_end_by_replica={b: r.log_end for b, r in reports.items()},
                last_epoch_by_replica={b: r.last_epoch for b, r in reports.items()})
        if election.changed:
            writes.append(PlannedElection(PartitionWrite(
                topic, partition, view.partition_mods.get((topic, partition), 0),
                election.state), election, reports))
    return ElectionPlan(writes, waiting)


def plan_elections(view: ClusterView, *, unclean_default: bool = False,
                   alive: Collection[int] | None = None,
                   gave_up: Collection[tuple[str, int, int]] = ()) -> list[PlannedElection]:
    """``plan``'s writes."""
    return plan(view, unclean_default=unclean_default, alive=alive, gave_up=gave_up).writes


def batches(items: Sequence[PlannedElection],
            size: int = MAX_WRITES_PER_TXN) -> list[list[PlannedElection]]:
    """``items`` cut in txn-sized batches."""
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def preferred_leader_moves(view: ClusterView, alive: Collection[int] | None = None
                           ) -> list[PlannedElection]:
    """Kafka's preferred-replica election: every partition led by another broker while its
    first replica (the preferred leader) is alive and in the committed ISR moves to that
    replica in ``leader_epoch + 1``, the ISR kept (the new leader first), in (topic,
    partition) order. Clean by construction: a committed-ISR member holds every committed
    offset. Partitions without a leader are left to ``plan``."""
    live = view.alive if alive is None else frozenset(alive)
    moves: list[PlannedElection] = []
    for (topic, partition), state in sorted(view.partitions.items()):
        record = view.topics.get(topic)
        if record is None or partition >= record.partitions:
            continue
        replicas = record.replicas[partition]
        preferred = replicas[0]
        if state.leader in (NO_LEADER, preferred) or preferred not in live \
                or preferred not in state.isr:
            continue
        moved = forced_election(state, replicas, preferred, None, live, unclean_allowed=False)
        moves.append(PlannedElection(
            PartitionWrite(topic, partition, view.partition_mods.get((topic, partition), 0),
                           moved), Election(moved, True, False), {}))
    return moves


def forced_election(current: PartitionState, replicas: Sequence[int], leader: int,
                    isr: Sequence[int] | None, alive: Collection[int], *,
                    unclean_allowed: bool) -> PartitionState:
    """The operator's election: ``leader`` leads ``leader_epoch + 1`` with ``isr`` (None:
    the committed ISR's live members, the leader first).

    Refused (``IneligibleLeader``) when ``leader`` is not a live replica, or is outside the
    committed ISR while unclean election is off; ``InvalidIsr`` when ``isr`` leaves out the
    leader, names a non-replica, or adds a replica the committed ISR lacks (that would
    count a replica missing committed offsets; only the leader's ISR changes add members,
    once they caught up).
    """
    if leader not in replicas:
        raise IneligibleLeader(f"broker {leader} is not a replica (replicas: "
                               f"{list(replicas)})")
    if leader not in alive:
        raise IneligibleLeader(f"broker {leader} is not alive (no registration in etcd)")
    in_isr = leader in current.isr
    if not in_isr and not unclean_allowed:
        raise IneligibleLeader(f"broker {leader} is outside the ISR {list(current.isr)} and "
                               "unclean leader election is off")
    if isr is None:
        members = [leader, *(r for r in current.isr if r != leader and r in alive)]
        if not in_isr:
            members = [leader]
    else:
        members = list(dict.fromkeys(isr))
        if leader not in members:
            raise InvalidIsr(f"ISR {members} leaves out the leader {leader}")
        for r in members:
            if r not in replicas:
                raise InvalidIsr(f"broker {r} is not a replica (replicas: {list(replicas)})")
            if r != leader and r not in current.isr:
                raise InvalidIsr(f"broker {r} is not in the committed ISR {list(current.isr)}; "
                                 "followers join the ISR once they caught up")
        members = [leader, *(r for r in members if r != leader)]
    return PartitionState(leader, current.leader_epoch + 1, tuple(members))
