"""The rebalance harness's pure half: the seeded chaos schedule, the invariant checker and
the report.

Owns: ``chaos_schedule`` (which member events happen when, from a seed), ``Checker`` (every
invariant ``skerry harness`` checks, fed with what the simulated consumers and the observer
saw and *when*: every method takes the monotonic times it needs as arguments), the latency
statistics and the text/JSON report.

Must not import: sockets, asyncio, Twisted, ``time`` or anything of the broker's own code
(``broker.core``, ``groups``...). The harness judges the broker only by its wire answers,
so the checker must not share code with what it checks; tests drive it with made-up
observations.

Soundness rule for every timing check: a violation is reported only when the order of
events proves it. A request's *send* time is a lower bound of the moment the broker
processed it and its *answer* time an upper bound; e.g. "still a member after session
timeout + 100 ms" needs a DESCRIBE_GROUP *sent* after that bound that still lists it.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CHAOS_ACTIONS",
    "INVARIANTS",
    "ChaosEvent",
    "Checker",
    "DeathRecord",
    "Observation",
    "chaos_schedule",
    "format_report",
    "percentile",
]

#: Invariant names, in report order. The first five are the issue's; ``duplicates`` counts
#: re-deliveries no rebalance explains and ``integrity`` a consumed value that differs from
#: the value produced at that offset.
INVARIANTS = ("exclusivity", "coverage", "fencing", "liveness", "durability", "duplicates",
              "integrity", "processing")
"""``processing`` (KIP-848 runs): a message the producer got acknowledged that no member
consumed by the end of the run."""
CHAOS_ACTIONS = ("kill", "pause", "restart", "add")
_KEPT_MESSAGES = 50  # violation and error texts kept for the report (all are counted)


# ---------------------------------------------------------------------------- chaos schedule

@dataclass(frozen=True)
class ChaosEvent:
    """One planned chaos step, ``at`` seconds after the chaos window opens.

    ``kill``: drop a live member's connection; it sends nothing more (the broker must evict).
    ``pause``: a live member keeps its connection but sends nothing for ``pause_s`` (longer
    than the session timeout), then must be fenced and re-join. ``restart``: a killed and
    evicted member comes back with the same consumer id. ``add``: a new member joins.
    ``pick`` (0 <= pick < 1) chooses among the members eligible at that moment.
    """

    at: float
    action: str
    pick: float
    pause_s: float = 0.0


def chaos_schedule(seed: int, duration_s: float, session_timeout_ms: int) -> list[ChaosEvent]:
    """The chaos plan for a run: the same seed, duration and timeout give the same plan.

    Deaths (``kill`` and ``pause``) come one at a time, 1.3 to 2.2 session timeouts apart, so
    a dying member's partitions are not handed to another member that is itself dying and
    each death-to-reassignment time measures one eviction. Between two deaths there are zero
    to two joins (``restart`` 70 %, ``add`` 30 %) at random moments; the executor turns a
    restart with nobody to restart into an add while the group is below its starting size. Pauses last 1.5 to 2.5 session
    timeouts. Nothing is planned in the last session timeout of the window.

    >>> [(e.at, e.action) for e in chaos_schedule(7, 10.0, 1000)][:4]
    [(0.662, 'kill'), (2.027, 'kill'), (3.784, 'kill'), (4.012, 'restart')]
    """
    rng = random.Random(seed)
    session = session_timeout_ms / 1000.0
    end = duration_s - session
    events: list[ChaosEvent] = []
    t = rng.uniform(0.5, 1.0) * session
    while t < end:
        action = "kill" if rng.random() < 0.6 else "pause"
        pause_s = rng.uniform(1.5, 2.5) * session if action == "pause" else 0.0
        events.append(ChaosEvent(round(t, 3), action, rng.random(), round(pause_s, 3)))
        gap = rng.uniform(1.3, 2.2) * session
        for _ in range(rng.choice((0, 1, 1, 2))):
            at = t + rng.uniform(0.1, 0.95) * gap
            if at < end:
                join = "restart" if rng.random() < 0.7 else "add"
                events.append(ChaosEvent(round(at, 3), join, rng.random()))
        t += gap
    events.sort(key=lambda e: e.at)
    return events


# ---------------------------------------------------------------------------- records

@dataclass(frozen=True)
class Observation:
    """One DESCRIBE_GROUP answer: sent and answered (monotonic seconds), what it said, and
    which members the harness considered live when the answer arrived."""

    sent: float
    answered: float
    generation: int
    state: str
    members: Mapping[str, tuple[int, ...]]
    partitions: int
    live: frozenset[str]


@dataclass
class DeathRecord:
    """A member that stopped talking (killed or paused); ``anchor`` is the latest moment the
    broker may have refreshed its session: the answer time of its last accepted JOIN, SYNC,
    HEARTBEAT or COMMIT, or the moment it stopped when one was still unanswered.
    ``evicted``/``reassigned`` are the answer times of the first DESCRIBE_GROUP that no
    longer listed it / that showed its partitions owned by live members."""

    member: str
    kind: str
    anchor: float
    partitions: tuple[int, ...] = ()
    evicted: float | None = None
    reassigned: float | None = None
    late: bool = False

    @property
    def resolved(self) -> bool:
        return self.reassigned is not None


@dataclass
class _Delivered:
    epochs: set[int] = field(default_factory=set)
    value: bytes = b""


# ---------------------------------------------------------------------------- checker

class Checker:
    """Every invariant of the rebalance harness, checked as the answers arrive.

    1. exclusivity: within a generation no partition has two owners, and a member's
       assignment is the same in every answer about that generation (JOIN, SYNC and
       DESCRIBE_GROUP answers all count).
    2. coverage: a DESCRIBE_GROUP answer with members assigns every partition.
    3. fencing: a request with a stale generation, from an unknown member or for a
       partition the member does not own is refused with GENERATION_MISMATCH.
    4. liveness: a member that stopped is no longer listed by a DESCRIBE_GROUP sent more than
       session timeout + ``slack_s`` after its last refresh; and a live member is never
       missing from an answer that came back before its last refresh + session timeout.
    5. durability: no answer shows a generation below one already seen before its request
       was sent, and OFFSET never answers below a commit acknowledged before it was sent.
    Also: ``duplicates`` (a message delivered twice within one ownership epoch, or below an
    offset acknowledged before that epoch started) and ``integrity`` (a consumed value that
    is not the one produced at that offset).
    """

    def __init__(self, session_timeout_ms: int, *, slack_s: float = 0.1,
                 incremental: bool = False) -> None:
        self.incremental = incremental
        """KIP-848 (GROUP_HEARTBEAT) members: partitions move one at a time within one
        group epoch, so exclusivity is judged on who holds a partition at each moment
        (``record_held``/``record_released``), not per generation; coverage is not
        required at every instant (a partition being handed over has no owner for a
        moment); and every produced message must have been consumed by the end."""
        self._holders: dict[int, str] = {}
        self.session_s = session_timeout_ms / 1000.0
        self.slack_s = slack_s
        self.violations: Counter[str] = Counter()
        self.messages: list[str] = []
        self.errors: list[str] = []
        self.error_count = 0
        self.observations: list[Observation] = []
        self.deaths: list[DeathRecord] = []
        self.probes: Counter[str] = Counter()
        self.generations: set[int] = set()
        self.first_generation: int | None = None
        self.start_generation: int | None = None  # the group's generation before the run
        self.max_generation = 0
        self.acked: dict[int, int] = {}
        self.commits_acked = 0
        self.offset_checks = 0
        self.deliveries = 0
        self.redeliveries = 0
        self.produced_count = 0
        self._owners: dict[int, dict[int, str]] = {}
        self._assigned: dict[tuple[int, str], tuple[int, ...]] = {}
        self._pending_deaths: list[DeathRecord] = []
        self._delivered: dict[tuple[int, int], _Delivered] = {}
        self._produced: dict[tuple[int, int], bytes] = {}
        self._epochs = 0

    # ------------------------------------------------------------------ bookkeeping

    @property
    def violation_count(self) -> int:
        return sum(self.violations.values())

    def violate(self, kind: str, at: float, message: str) -> None:
        """Record a violation of invariant ``kind`` seen at monotonic time ``at``."""
        assert kind in INVARIANTS, kind
        self.violations[kind] += 1
        if len(self.messages) < _KEPT_MESSAGES:
            self.messages.append(f"[{kind}] t={at:.3f}: {message}")

    def error(self, message: str) -> None:
        """Something went wrong that is not an invariant (timeout, unexpected error code)."""
        self.error_count += 1
        if len(self.errors) < _KEPT_MESSAGES:
            self.errors.append(message)

    def generation_floor(self) -> int:
        """The highest generation answered so far; pass it back with the answer of a request
        sent now (every later answer must be at least this)."""
        return self.max_generation

    def acked_floor(self, partition: int) -> int:
        """The highest commit acknowledged so far for ``partition`` (0 when none)."""
        return self.acked.get(partition, 0)

    def _generation(self, generation: int, floor: int, at: float, what: str) -> None:
        if generation < floor:
            self.violate("durability", at, f"{what} answered generation {generation} after "
                                           f"generation {floor} had been seen")
        self.generations.add(generation)
        if self.first_generation is None:
            self.first_generation = generation
        self.max_generation = max(self.max_generation, generation)

    def _own(self, generation: int, member: str, assigned: Iterable[int], at: float,
             what: str) -> None:
        parts = tuple(sorted(assigned))
        known = self._assigned.setdefault((generation, member), parts)
        if known != parts:
            self.violate("exclusivity", at, f"{what}: {member} has {list(parts)} in generation "
                                            f"{generation}, earlier {list(known)}")
            return
        owners = self._owners.setdefault(generation, {})
        for p in parts:
            other = owners.setdefault(p, member)
            if other != member:
                self.violate("exclusivity", at, f"{what}: partition {p} assigned to both "
                                                f"{other} and {member} in generation {generation}")

    # ------------------------------------------------------------------ assignments

    def record_assignment(self, member: str, generation: int, assigned: Iterable[int],
                          *, source: str, floor: int, answered: float) -> None:
        """A JOIN or SYNC answer of ``member`` (``source`` is the command)."""
        self._generation(generation, floor, answered, f"{source} of {member}")
        self._own(generation, member, assigned, answered, f"{source} of {member}")

    def record_describe(self, obs: Observation, *, floor: int,
                        refreshed: Mapping[str, float]) -> None:
        """A DESCRIBE_GROUP answer. ``refreshed`` maps every member the harness considers
        live to the send time of its last refresh acknowledged before ``obs.sent``."""
        self.observations.append(obs)
        self._generation(obs.generation, floor, obs.answered, "DESCRIBE_GROUP")
        if self.incremental:  # one answer never shows a partition owned twice
            seen: dict[int, str] = {}
            for member, parts in sorted(obs.members.items()):
                for p in parts:
                    other = seen.setdefault(p, member)
                    if other != member:
                        self.violate("exclusivity", obs.answered, f"DESCRIBE_GROUP: partition "
                                     f"{p} owned by both {other} and {member} at group epoch "
                                     f"{obs.generation}")
        else:
            for member, parts in obs.members.items():
                self._own(obs.generation, member, parts, obs.answered, "DESCRIBE_GROUP")
        if obs.members and not self.incremental:
            owned = {p for parts in obs.members.values() for p in parts}
            missing = sorted(set(range(obs.partitions)) - owned)
            if missing:
                self.violate("coverage", obs.answered, f"generation {obs.generation} has "
                             f"{len(obs.members)} members but partitions {missing} unassigned")
        for member, last in refreshed.items():
            # The broker answered before the session could have run out: it must list them.
            if member not in obs.members and obs.answered < last + self.session_s:
                self.violate("liveness", obs.answered,
                             f"live member {member} missing {obs.answered - last:.3f} s after "
                             f"its last acknowledged refresh")
        for death in list(self._pending_deaths):
            self._judge(death, obs)

    # ------------------------------------------------------------------ holding (KIP-848)

    def record_held(self, member: str, partitions: Iterable[int], answered: float, *,
                    anchors: Mapping[str, float]) -> None:
        """A heartbeat answer (received at ``answered``) lets ``member`` consume
        ``partitions`` from now on. A partition still held by another member that has not
        sent the heartbeat releasing it is owned twice, unless that member may have been
        fenced meanwhile: ``anchors`` maps each holder to the send time of its last
        accepted heartbeat, and a holder silent for a session timeout before ``answered``
        may have been fenced by the broker (the harness then stops counting it only when
        it learns so)."""
        for p in partitions:
            holder = self._holders.get(p)
            if holder is not None and holder != member:
                anchor = anchors.get(holder, float("-inf"))
                if answered < anchor + self.session_s:
                    self.violate("exclusivity", answered,
                                 f"partition {p} given to {member} while {holder} still held "
                                 f"it (its release not sent; last heartbeat "
                                 f"{answered - anchor:.3f} s before)")
            self._holders[p] = member

    def record_released(self, member: str, partitions: Iterable[int]) -> None:
        """``member`` stopped consuming ``partitions`` (the heartbeat reporting it is about
        to be sent; or it died, or was told it is fenced)."""
        for p in partitions:
            if self._holders.get(p) == member:
                del self._holders[p]

    # ------------------------------------------------------------------ deaths

    def record_death(self, member: str, kind: str, anchor: float) -> DeathRecord:
        """``member`` stopped talking (``kind`` kill or pause); ``anchor`` is the latest
        moment the broker may have refreshed its session (see ``DeathRecord``).
        Observations already made after ``anchor`` are judged at once."""
        death = DeathRecord(member, kind, anchor)
        for obs in reversed(self.observations):
            if obs.sent < anchor and member in obs.members:
                death.partitions = tuple(obs.members[member])
                break
        self.deaths.append(death)
        self._pending_deaths.append(death)
        for obs in [o for o in self.observations if o.sent >= anchor]:
            self._judge(death, obs)
        return death

    def _judge(self, death: DeathRecord, obs: Observation) -> None:
        if obs.sent < death.anchor or death.resolved:
            return
        member = death.member
        if member in obs.members:
            death.partitions = tuple(obs.members[member])
            bound = death.anchor + self.session_s + self.slack_s
            if obs.sent > bound and not death.late:
                death.late = True
                self.violate("liveness", obs.answered,
                             f"{member} ({death.kind}) still a member {obs.sent - death.anchor:.3f}"
                             f" s after its last heartbeat (bound {self.session_s + self.slack_s:.3f} s)")
            return
        if death.evicted is None:
            death.evicted = obs.answered
        owner = {p: m for m, parts in obs.members.items() for p in parts}
        if all(owner.get(p) in obs.live for p in death.partitions):
            death.reassigned = obs.answered
            self._pending_deaths.remove(death)

    def resolved_death(self, member: str) -> bool:
        """True when ``member``'s latest death was seen evicted and reassigned."""
        for death in reversed(self.deaths):
            if death.member == member:
                return death.resolved
        return False

    # ------------------------------------------------------------------ fencing

    def record_probe(self, kind: str, ok: bool, code: str | None, at: float,
                     detail: str) -> None:
        """A request that must be fenced (stale generation, unknown member, partition not
        owned, a paused member's zombie commit) got ``ok`` / error ``code``."""
        self.probes[kind] += 1
        if ok or code != "GENERATION_MISMATCH":
            answer = "accepted" if ok else f"refused with {code}"
            self.violate("fencing", at, f"{kind} probe {detail} was {answer}, "
                                        f"expected GENERATION_MISMATCH")

    # ------------------------------------------------------------------ offsets

    def record_commit_ack(self, partition: int, offset: int) -> None:
        """A COMMIT of ``offset`` was acknowledged (it is durable from now on)."""
        self.commits_acked += 1
        if offset > self.acked.get(partition, -1):
            self.acked[partition] = offset

    def record_offset(self, partition: int, offset: int, floor: int, at: float) -> None:
        """OFFSET answered ``offset``; ``floor`` is ``acked_floor`` when it was sent."""
        self.offset_checks += 1
        if offset < floor:
            self.violate("durability", at, f"OFFSET of partition {partition} answered "
                                           f"{offset}, below the acknowledged commit {floor}")

    # ------------------------------------------------------------------ messages

    def record_produced(self, partition: int, offset: int, value: bytes) -> None:
        self.produced_count += 1
        self._produced[(partition, offset)] = value

    def new_epoch(self) -> int:
        """A fresh ownership epoch: a member (re)starting to read a partition from the
        committed offset."""
        self._epochs += 1
        return self._epochs

    def record_delivery(self, epoch: int, partition: int, offset: int, value: bytes,
                        floor: int, at: float) -> None:
        """A consumed message. ``floor`` is the commit acknowledged for the partition before
        the epoch's OFFSET request was sent: a rebalance may re-deliver what was consumed
        but not committed, never something committed before the reader started."""
        self.deliveries += 1
        key = (partition, offset)
        seen = self._delivered.get(key)
        if seen is None:
            self._delivered[key] = _Delivered({epoch}, value)
            return
        self.redeliveries += 1
        if epoch in seen.epochs:
            self.violate("duplicates", at, f"partition {partition} offset {offset} delivered "
                                           f"twice to the same reader without a rebalance")
        elif offset < floor:
            self.violate("duplicates", at, f"partition {partition} offset {offset} delivered "
                                           f"again though commit {floor} was acknowledged "
                                           f"before this reader started")
        seen.epochs.add(epoch)

    @property
    def unique_deliveries(self) -> int:
        return len(self._delivered)

    # ------------------------------------------------------------------ end of run

    def finish(self, at: float) -> None:
        """End-of-run checks: every consumed value is the one produced at that offset; with
        KIP-848 members, every produced message was consumed."""
        if self.incremental:
            missing = sorted(set(self._produced) - set(self._delivered))
            if missing:
                self.violate("processing", at, f"{len(missing)} produced messages never "
                             f"consumed, first {missing[:5]} (partition, offset)")
        for (partition, offset), seen in sorted(self._delivered.items()):
            produced = self._produced.get((partition, offset))
            if produced is not None and produced != seen.value:
                self.violate("integrity", at, f"partition {partition} offset {offset}: consumed "
                             f"{seen.value[:40]!r}, produced {produced[:40]!r}")

    def summary(self) -> dict[str, Any]:
        """Everything the report shows, as plain data (the ``--json`` document)."""
        evictions = [d.evicted - d.anchor for d in self.deaths if d.evicted is not None]
        reassignments = [d.reassigned - d.anchor for d in self.deaths
                         if d.reassigned is not None]
        first = self.start_generation if self.start_generation is not None \
            else max(0, (self.first_generation or 1) - 1)
        return {
            "violations": self.violation_count,
            "violations_by_invariant": {k: self.violations.get(k, 0) for k in INVARIANTS},
            "violation_messages": list(self.messages),
            "errors": self.error_count,
            "error_messages": list(self.errors),
            "rebalances": self.max_generation - first,
            "generations": {"first": first, "last": self.max_generation,
                            "seen": len(self.generations)},
            "deaths": len(self.deaths),
            "deaths_unresolved": sum(1 for d in self.deaths if not d.resolved),
            "death_to_eviction_s": _stats(evictions),
            "death_to_reassignment_s": _stats(reassignments),
            "fencing_probes": dict(sorted(self.probes.items())),
            "messages_produced": self.produced_count,
            "messages_consumed": self.deliveries,
            "messages_unique": self.unique_deliveries,
            "redeliveries": self.redeliveries,
            "duplicate_violations": self.violations.get("duplicates", 0),
            "commits_acknowledged": self.commits_acked,
            "offset_checks": self.offset_checks,
            "describe_polls": len(self.observations),
        }


# ---------------------------------------------------------------------------- statistics

def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty collection.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
    2.0
    >>> percentile([1.0, 2.0, 3.0, 4.0], 99)
    4.0
    """
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of nothing")
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "p50": None, "p99": None, "max": None}
    return {"n": len(values), "p50": round(percentile(values, 50), 4),
            "p99": round(percentile(values, 99), 4), "max": round(max(values), 4)}


def _fmt_stats(stats: Mapping[str, Any]) -> str:
    if not stats["n"]:
        return "n=0"
    return (f"n={stats['n']} p50={stats['p50']:.3f} s p99={stats['p99']:.3f} s "
            f"max={stats['max']:.3f} s")


def format_report(report: Mapping[str, Any]) -> str:
    """The human-readable report of a run (``report`` is ``Checker.summary()`` plus the
    run's ``setup`` and ``chaos`` sections)."""
    setup, chaos = report["setup"], report["chaos"]
    by = report["violations_by_invariant"]
    probes = report["fencing_probes"]
    lines = [
        f"skerry harness: {setup['consumers']} consumers, {setup['duration_s']:g} s of chaos, "
        f"session timeout {setup['session_timeout_ms']} ms, assignor {setup['assignor']}, "
        + ("" if setup.get("protocol", "classic") == "classic"
           else f"protocol {setup['protocol']} (GROUP_HEARTBEAT), ")
        + f"seed {setup['seed']}",
        f"  broker {setup['bootstrap']}, topic {setup['topic']} ({setup['partitions']} "
        f"partitions), group {setup['group']}, ran {setup['elapsed_s']:.1f} s",
        f"violations: {report['violations']}  ("
        + ", ".join(f"{k} {by[k]}" for k in INVARIANTS) + ")",
    ]
    lines += [f"  {m}" for m in report["violation_messages"][:20]]
    lines.append(f"errors: {report['errors']}")
    lines += [f"  {m}" for m in report["error_messages"][:20]]
    gens = report["generations"]
    lines += [
        f"rebalances: {report['rebalances']} (generation {gens['first']} -> {gens['last']})",
        "chaos: " + ", ".join(f"{chaos.get(a, 0)} {a}s" for a in CHAOS_ACTIONS)
        + f"; {chaos.get('skipped', 0)} skipped",
        f"death -> eviction:      {_fmt_stats(report['death_to_eviction_s'])}",
        f"death -> reassignment:  {_fmt_stats(report['death_to_reassignment_s'])}"
        + (f"  ({report['deaths_unresolved']} unresolved at the end)"
           if report["deaths_unresolved"] else ""),
        f"fencing probes: {sum(probes.values())} sent, all must be refused with "
        f"GENERATION_MISMATCH (" + ", ".join(f"{k} {v}" for k, v in probes.items()) + ")",
        f"messages: produced {report['messages_produced']}, consumed "
        f"{report['messages_consumed']} ({report['messages_unique']} unique), re-deliveries "
        f"{report['redeliveries']}, duplicate violations {report['duplicate_violations']}",
        f"commits acknowledged: {report['commits_acknowledged']}, OFFSET checks: "
        f"{report['offset_checks']}, DESCRIBE_GROUP polls: {report['describe_polls']}",
        "result: " + ("PASS" if report["violations"] == 0 and report["errors"] == 0
                      else "FAIL"),
    ]
    return "\n".join(lines)
