"""One KIP-848 consumer group: its members, epochs, target assignment and who owns which
partition; the reconciliation of one member; regular-expression subscriptions.

Owns: ``ConsumerMember``, ``ConsumerGroup``, ``reconcile`` (Kafka's
``CurrentAssignmentBuilder``: one step of a member towards its target, the rules of
``groups.consumer_state.RECONCILIATION_RULES``), ``compile_subscription_regex`` (RE2/J
semantics checked on Python's ``re``) and the ``Partitions`` shape.

Three epochs, as in Kafka:

* the **group epoch** goes up by one whenever the group's *inputs* change: a member joins,
  leaves or is fenced, a subscription changes, a subscribed topic appears, disappears or
  gains partitions;
* the **assignment epoch** is the group epoch the current target assignment was computed
  for (``ConsumerGroup.set_target``);
* each **member epoch** is the assignment epoch the member has reconciled to; it only
  moves forward when the member has given up every partition the target takes from it.

``ConsumerGroup.set_member_assignment`` is the only way a member's owned partitions change,
and it refuses (``IllegalStateError``) to give a partition that another member still holds,
as assigned or pending revocation: no partition ever has two owners. ``update_state``
derives the group state from the epochs and moves through the table.

Must not import: Twisted, ``broker``, anything that does I/O or reads a clock. Time arrives
as ``now_ms`` in ``groups.consumer_coordinator``, which alone mutates these objects.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from re import _constants, _parser  # the parsed tree, to find what RE2 lacks

from groups.consumer_errors import InvalidRegularExpression
from groups.consumer_state import (
    STATIC_LEAVE_EPOCH,
    ConsumerGroupState,
    IllegalStateError,
    MemberState,
    check_group_transition,
    check_member_transition,
)

__all__ = [
    "Partitions",
    "TopicMeta",
    "ConsumerMember",
    "ConsumerGroup",
    "reconcile",
    "compile_subscription_regex",
    "is_internal_topic",
    "freeze",
]

Partitions = dict[uuid.UUID, frozenset[int]]
"""Partitions by topic id; a topic with no partition is left out."""


@dataclass(frozen=True, slots=True)
class TopicMeta:
    """What the coordinator needs to know of a topic: its id and partition count."""

    topic_id: uuid.UUID
    partitions: int


def freeze(partitions: Mapping[uuid.UUID, Iterable[int]]) -> Partitions:
    """A clean ``Partitions``: frozensets, empty topics dropped."""
    return {topic: frozenset(ps) for topic, ps in partitions.items() if ps}


def _minus(a: Partitions, b: Mapping[uuid.UUID, frozenset[int]]) -> Partitions:
    return freeze({t: ps - b.get(t, frozenset()) for t, ps in a.items()})


def _pairs(partitions: Mapping[uuid.UUID, Iterable[int]]) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in partitions.items() for p in ps}


def is_internal_topic(name: str) -> bool:
    """Topics whose name starts with ``__`` (``__skerry_groups``, ``__consumer_offsets``)
    are internal: a regular expression never matches them, as in Kafka."""
    return name.startswith("__")


# Constructs Python's ``re`` accepts and RE2/J refuses (Kafka parses the regex with RE2/J).
_RE2_MISSING = {"GROUPREF": "back-references", "GROUPREF_EXISTS": "conditionals",
                "ASSERT": "look-ahead/look-behind", "ASSERT_NOT": "look-ahead/look-behind",
                "ATOMIC_GROUP": "atomic groups",
                "POSSESSIVE_REPEAT": "possessive quantifiers"}


@functools.lru_cache(maxsize=1024)
def compile_subscription_regex(pattern: str) -> re.Pattern[str]:
    """Compile a ``SubscribedTopicRegex`` with Kafka's semantics (RE2/J), or raise
    ``InvalidRegularExpression``.

    Matching is a *full* match of the topic name (Java's ``Matcher.matches``: ``orders.*``
    matches ``orders-eu``, ``orders`` does not match ``orders-eu``), ASCII classes (``\\d``
    is ``[0-9]``, as in RE2). Constructs RE2 does not have are refused even though Python
    has them: back-references, look-around, atomic groups, possessive quantifiers and
    conditionals. RE2's ``\\pL``/``\\p{Greek}`` classes and ``\\z`` do not exist in Python's
    ``re`` and are refused too (use ``\\Z``).

    >>> bool(compile_subscription_regex("orders.*").fullmatch("orders-eu"))
    True
    >>> compile_subscription_regex("(a)\\\\1")
    Traceback (most recent call last):
    ...
    groups.consumer_errors.InvalidRegularExpression: regular expression '(a)\\\\1' uses back-references, which Kafka's RE2/J does not support
    """
    try:
        compiled = re.compile(pattern, re.ASCII)
        tree = _parser.parse(pattern, re.ASCII)
    except (re.error, RecursionError, OverflowError) as error:
        raise InvalidRegularExpression(f"regular expression {pattern!r} does not compile: "
                                       f"{error}") from None
    missing = _re2_missing(tree)
    if missing:
        raise InvalidRegularExpression(f"regular expression {pattern!r} uses {missing}, "
                                       f"which Kafka's RE2/J does not support")
    return compiled


def _re2_missing(tree: object) -> str | None:
    """The first construct of a parsed pattern that RE2 lacks, or None."""
    stack: list[object] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, _parser.SubPattern):
            stack.extend(node.data)
        elif isinstance(node, tuple | list):
            if len(node) == 2 and isinstance(node[0], _constants._NamedIntConstant):
                name = str(node[0])
                if name in _RE2_MISSING:
                    return _RE2_MISSING[name]
            stack.extend(node)
    return None


@dataclass(slots=True)
class ConsumerMember:
    """A member of a consumer group, as the coordinator knows it.

    ``assigned`` is what the member owns at ``member_epoch``; ``revoking`` what it was asked
    to give up and has not confirmed yet (still its own: nobody else may be given it).
    ``session_token``/``rebalance_token`` identify its armed timers (a firing with another
    token is stale); timers are not persisted.
    """

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    topic_names: tuple[str, ...] = ()
    topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    revoking: Partitions = field(default_factory=dict)
    session_token: int = 0
    rebalance_token: int = 0

    def is_away(self) -> bool:
        """A static member that left with epoch -2 and may come back."""
        return self.member_epoch == STATIC_LEAVE_EPOCH

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        """STABLE at the assignment epoch (Kafka's ``isReconciledTo``)."""
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def subscribed_topics(self, topics: Mapping[str, TopicMeta]) -> set[str]:
        """The existing topics this member subscribes to: its names, and every
        non-internal topic its regex fully matches."""
        wanted = {name for name in self.topic_names if name in topics}
        if self.topic_regex:
            pattern = compile_subscription_regex(self.topic_regex)
            wanted |= {name for name in topics
                       if not is_internal_topic(name) and pattern.fullmatch(name)}
        return wanted


class ConsumerGroup:
    """The state of one consumer group. Mutated only by ``groups.consumer_coordinator``.

    ``members`` keeps join order; ``static`` maps each ``group.instance.id`` to its member
    id; ``target`` maps each member id to its target partitions at ``assignment_epoch``;
    ``topics`` is the metadata of the subscribed topics the target was computed against
    (a change means a new group epoch); ``assignor`` is the assignor of the last target.
    """

    __slots__ = ("group_id", "state", "group_epoch", "assignment_epoch", "members",
                 "static", "target", "topics", "assignor", "_owner")

    def __init__(self, group_id: str, *, group_epoch: int = 0, assignment_epoch: int = 0,
                 members: Iterable[ConsumerMember] = (),
                 target: Mapping[str, Partitions] | None = None,
                 topics: Mapping[str, TopicMeta] | None = None,
                 assignor: str = "uniform") -> None:
        if assignment_epoch > group_epoch or assignment_epoch < 0:
            raise ValueError(f"group {group_id}: assignment epoch {assignment_epoch} must be "
                             f"between 0 and the group epoch {group_epoch}")
        self.group_id = group_id
        self.group_epoch = group_epoch
        self.assignment_epoch = assignment_epoch
        self.members: dict[str, ConsumerMember] = {}
        self.static: dict[str, str] = {}
        self.target: dict[str, Partitions] = {m: freeze(p) for m, p in (target or {}).items()}
        self.topics: dict[str, TopicMeta] = dict(topics or {})
        self.assignor = assignor
        self._owner: dict[tuple[uuid.UUID, int], str] = {}
        self.state = ConsumerGroupState.EMPTY
        for member in members:
            if member.member_id in self.members:
                raise ValueError(f"group {group_id}: member {member.member_id} given twice")
            self.add(member)
            owned, member.assigned, member.revoking = (member.assigned, member.revoking), {}, {}
            self.set_member_assignment(member, owned[0], owned[1])
        self.state = self._derived_state()

    def __repr__(self) -> str:
        return (f"ConsumerGroup({self.group_id!r}, state={self.state.value}, "
                f"epoch={self.group_epoch}, assignment_epoch={self.assignment_epoch}, "
                f"members={list(self.members)})")

    # ------------------------------------------------------------------ the machine

    def _derived_state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if all(m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    def update_state(self) -> ConsumerGroupState:
        """Derive the state from members and epochs (Kafka's ``maybeUpdateGroupState``) and
        move to it through the table; ``IllegalStateError`` (unchanged) if it forbids it."""
        target = self._derived_state()
        check_group_transition(self.group_id, self.state, target)
        self.state = target
        return target

    def bump_epoch(self) -> None:
        """The group's inputs changed: group epoch + 1, and the state follows."""
        self.group_epoch += 1
        self.update_state()

    def set_target(self, target: Mapping[str, Partitions], assignor: str) -> None:
        """Install the target computed for the current group epoch."""
        self.target = {member: freeze(target.get(member, {})) for member in self.members}
        self.assignment_epoch = self.group_epoch
        self.assignor = assignor
        self.update_state()

    def transition_to(self, target: ConsumerGroupState) -> None:
        """Move to ``target`` (only DEAD is ever asked for by name: an admin deletion)."""
        check_group_transition(self.group_id, self.state, target)
        self.state = target

    # ------------------------------------------------------------------ members

    def add(self, member: ConsumerMember) -> None:
        """Add a member (no partitions yet; its target is empty until the next target)."""
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static[member.instance_id] = member.member_id
        self.target.setdefault(member.member_id, {})

    def remove(self, member_id: str) -> ConsumerMember:
        """Remove a member: its partitions become free, its target goes."""
        member = self.members.pop(member_id)
        for key in _pairs(member.assigned) | _pairs(member.revoking):
            del self._owner[key]
        if member.instance_id is not None and self.static.get(member.instance_id) == member_id:
            del self.static[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def replace_static(self, old_id: str, new: ConsumerMember) -> None:
        """A static member came back under a new member id: ``new`` takes over the old
        member's epoch, partitions and target, without a new group epoch."""
        old = self.members.pop(old_id)
        new.member_epoch, new.previous_member_epoch = old.member_epoch, old.previous_member_epoch
        new.state, new.assigned, new.revoking = old.state, old.assigned, old.revoking
        for key in _pairs(old.assigned) | _pairs(old.revoking):
            self._owner[key] = new.member_id
        self.members[new.member_id] = new
        assert new.instance_id is not None
        self.static[new.instance_id] = new.member_id
        self.target[new.member_id] = self.target.pop(old_id, {})

    def owner(self, topic_id: uuid.UUID, partition: int) -> str | None:
        """The member holding a partition (assigned or pending revocation), or None."""
        return self._owner.get((topic_id, partition))

    def owners(self) -> dict[tuple[uuid.UUID, int], str]:
        """Every held partition and its one holder (a copy)."""
        return dict(self._owner)

    def set_member_assignment(self, member: ConsumerMember, assigned: Partitions,
                              revoking: Partitions) -> None:
        """The only way a member's partitions change. ``IllegalStateError`` (nothing
        changed) if it would give a partition another member holds, or list a partition
        both as assigned and as revoking."""
        new = _pairs(assigned)
        new_revoking = _pairs(revoking)
        if new & new_revoking:
            raise IllegalStateError(f"member {member.member_id}: partitions both assigned "
                                    f"and revoking: {sorted(new & new_revoking)}")
        for key in new | new_revoking:
            holder = self._owner.get(key)
            if holder is not None and holder != member.member_id:
                raise IllegalStateError(f"group {self.group_id}: {key} is held by {holder}; "
                                        f"it cannot be given to {member.member_id}")
        for key in _pairs(member.assigned) | _pairs(member.revoking):
            del self._owner[key]
        for key in new | new_revoking:
            self._owner[key] = member.member_id
        member.assigned, member.revoking = freeze(assigned), freeze(revoking)

    def set_member_state(self, member: ConsumerMember, state: MemberState, epoch: int) -> None:
        """Move a member to ``state`` at member epoch ``epoch`` (checked by the table)."""
        check_member_transition(member.member_id, member.state, state)
        if epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = epoch
        member.state = state

    def subscribed_topics(self, topics: Mapping[str, TopicMeta]) -> dict[str, TopicMeta]:
        """The metadata of every existing topic some member subscribes to."""
        names: set[str] = set()
        for member in self.members.values():
            names |= member.subscribed_topics(topics)
        return {name: topics[name] for name in sorted(names)}

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members name (ties: the smaller name); ``default`` if none
        does (Kafka's ``computePreferredServerAssignor``)."""
        votes: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if not votes:
            return default
        return min(votes, key=lambda name: (-votes[name], name))


def reconcile(group: ConsumerGroup, member: ConsumerMember,
              owned: Mapping[uuid.UUID, Iterable[int]] | None,
              subscribed_ids: frozenset[uuid.UUID]) -> None:
    """One reconciliation step of ``member`` towards its target (Kafka's
    ``CurrentAssignmentBuilder.build``), with ``owned`` the partitions its heartbeat says it
    owns (None: the heartbeat did not say). See ``RECONCILIATION_RULES``.

    * STABLE at the assignment epoch: nothing to do.
    * UNREVOKED_PARTITIONS: wait while ``owned`` still lists a revoked partition (or is
      None); once it does not, compute the next step.
    * otherwise compute the next step: keep ``assigned ∩ target``; what the target drops is
      revoked (unless ``owned`` shows the member already dropped it); what the target adds
      is given only where no other member holds it (the rest is *unreleased*).
    """
    epoch = group.assignment_epoch
    owned_pairs = None if owned is None else _pairs(owned)

    def still_owns(revoking: Partitions) -> bool:
        return owned_pairs is None or bool(owned_pairs & _pairs(revoking))

    if member.state is MemberState.STABLE and member.member_epoch == epoch:
        return
    if member.state is MemberState.UNREVOKED_PARTITIONS and still_owns(member.revoking):
        return
    target = group.target.get(member.member_id, {})
    target = {t: ps for t, ps in target.items() if t in subscribed_ids}
    keep: dict[uuid.UUID, frozenset[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    add: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic in set(target) | set(member.assigned):
        wanted = target.get(topic, frozenset())
        current = member.assigned.get(topic, frozenset())
        keep[topic] = current & wanted
        revoke[topic] = current - wanted
        free = set()
        for partition in wanted - current:
            holder = group.owner(topic, partition)
            if holder is None or holder == member.member_id:
                free.add(partition)
            else:
                unreleased = True
        add[topic] = frozenset(free)
    keep_p, revoke_p, add_p = freeze(keep), freeze(revoke), freeze(add)
    if revoke_p and still_owns(revoke_p):
        group.set_member_assignment(member, keep_p, revoke_p)
        group.set_member_state(member, MemberState.UNREVOKED_PARTITIONS, member.member_epoch)
        return
    assigned = freeze({t: keep_p.get(t, frozenset()) | add_p.get(t, frozenset())
                       for t in set(keep_p) | set(add_p)})
    group.set_member_assignment(member, assigned, {})
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    group.set_member_state(member, state, epoch)


def partitions_minus(a: Partitions, b: Partitions) -> Partitions:
    """``a`` without ``b``, per topic."""
    return _minus(a, b)
