"""The consumer-group operations a transport performs *for* its clients (the Iggy
transport: its clients know nothing of V1 groups or coordinators), served wherever each
group is coordinated.

Owns: ``GroupRouter`` and ``GroupView``. On a single broker (and on a cluster member for
the groups it coordinates) every operation is the local ``GroupService`` call, answered at
once (an already fired ``Deferred``); on a cluster member with etcd, an operation on a
group another broker coordinates is sent to that broker as the V1 group command a client
would send there (``JOIN``, ``HEARTBEAT``, ``LEAVE``, ``COMMIT``, ``ADMIN_COMMIT``,
``OFFSET``, ``DESCRIBE_GROUP``, ``ADMIN_DELETE_GROUP``, ``LIST_GROUPS``) over the broker
link the V1 transport forwards on, and its answer (or its refusal, as the same domain
error) comes back. The coordinator writes the change into ``__skerry_groups`` with
acks=all before it answers, so what the caller is told is what the cluster holds.
A coordinator that is loading answers ``CoordinatorLoading``; no coordinator at all,
``Unavailable``.

Must not import: transports (``broker.v1``, ``broker.iggy``, ...), the global reactor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, fail, maybeDeferred, succeed

from broker.client.codec import ProtocolViolation, Reply, encode_request
from broker.errors import (
    BadRequest,
    CoordinatorLoading,
    GenerationMismatch,
    InternalError,
    NotAuthorized,
    NotLeader,
    PartitionNotOwned,
    ReplicationTimeout,
    SkerryError,
    StorageError,
    Unauthenticated,
    Unavailable,
    UnknownGroup,
    UnknownMember,
)

__all__ = ["GroupRouter", "GroupView", "Forward", "group_view_from", "groups_from"]

log = logging.getLogger("skerry.groups")

Forward = Callable[[int, Callable[[str], bytes]], Deferred[Reply]]
"""``forward(broker_id, build)``: send the line ``build(cid)`` to that broker over the
broker link; fires with its ``Reply``."""

_ERRORS: dict[str, type[SkerryError]] = {
    "BAD_REQUEST": BadRequest,
    "GENERATION_MISMATCH": GenerationMismatch,
    "UNAVAILABLE": Unavailable,
    "NOT_LEADER": NotLeader,
    "REPLICATION_TIMEOUT": ReplicationTimeout,
    "STORAGE_ERROR": StorageError,
    "UNAUTHENTICATED": Unauthenticated,
    "NOT_AUTHORIZED": NotAuthorized,
}
"""The coordinator's V1 error codes, back to the refusal they stand for."""


def _refusal(code: str, message: str) -> type[SkerryError]:
    """The refusal a coordinator's error stands for. V1 answers every "rejoin" refusal
    GENERATION_MISMATCH; the group domain's own wording tells which one it was, so the
    Iggy client gets the status it would get from the coordinator itself."""
    if code == "GENERATION_MISMATCH":
        if " is not assigned to " in message:
            return PartitionNotOwned
        if " is not a member of group " in message:
            return UnknownMember
        if message.startswith("no group "):
            return UnknownGroup
    return _ERRORS.get(code, InternalError)


@dataclass(frozen=True)
class GroupView:
    """A group as its members see it: the generation and each member's partitions."""

    generation: int
    members: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def assigned(self, member_id: str) -> list[int]:
        return list(self.members.get(member_id, ()))


def group_view_from(reply: Reply) -> GroupView | None:
    """The group a DESCRIBE_GROUP answer describes (``members=[m1:0,1 m2:2 m3:]``), None
    for an empty group at generation 0 (known only by its offsets); ``ProtocolViolation``
    for an answer that is not one."""
    members: dict[str, tuple[int, ...]] = {}
    for item in reply.items("members"):
        member, colon, parts = item.rpartition(":")
        if not colon or not member:
            raise ProtocolViolation(f"unexpected member in DESCRIBE_GROUP: {item[:80]!r}")
        try:
            members[member] = tuple(int(p) for p in parts.split(",") if p)
        except ValueError:
            raise ProtocolViolation(f"unexpected partitions in DESCRIBE_GROUP: "
                                    f"{item[:80]!r}") from None
    generation = reply.number("generation")
    if not members and generation == 0:
        return None
    return GroupView(generation, members)


def groups_from(reply: Reply) -> list[tuple[str, str]]:
    """The ``(group, topic)`` pairs of a LIST_GROUPS answer (``groups=[g:t ...]``);
    ``ProtocolViolation`` for an answer that is not one."""
    pairs = []
    for item in reply.items("groups"):
        group, colon, topic = item.rpartition(":")
        if not colon or not group or not topic:
            raise ProtocolViolation(f"unexpected group in LIST_GROUPS: {item[:80]!r}")
        pairs.append((group, topic))
    return pairs


class GroupRouter:
    """Group operations on ``groups`` (a ``GroupService``), or on the group's coordinator
    once ``route_through`` was called (a cluster member with etcd)."""

    def __init__(self, groups: Any) -> None:
        self.groups = groups
        self._coordinators: Any = None
        self._forward: Forward | None = None
        self._brokers: Callable[[], list[int]] = list
        self.forwarded = 0
        """How many operations were sent to another broker."""

    def route_through(self, coordinators: Any, forward: Forward,
                      live_brokers: Callable[[], list[int]]) -> None:
        """Serve each group where ``coordinators.route(group)`` says; ``live_brokers()``
        are asked for their groups by ``list_groups``."""
        self._coordinators = coordinators
        self._forward = forward
        self._brokers = live_brokers

    # ------------------------------------------------------------------ where

    def _remote(self, group: str) -> int | None:
        """None: served here; else the broker to send to. Raises when nobody serves the
        group right now."""
        if self._coordinators is None:
            return None
        routing = self._coordinators.route(group)
        kind = routing.route.value
        if kind == "local":
            return None
        if kind == "loading":
            raise CoordinatorLoading(f"the coordinator of group {group} is loading its "
                                     f"state; retry")
        if kind == "forward" and self._forward is not None:
            return int(routing.broker)
        raise Unavailable(f"no coordinator for group {group} right now; retry")

    def is_single(self) -> bool:
        """True when every group is served here (no cluster coordinators)."""
        return self._coordinators is None

    def is_local(self, group: str) -> bool:
        """True when the group is served here (no round trip)."""
        try:
            return self._remote(group) is None
        except SkerryError:
            return False

    def _ask(self, broker: int, command: str, args: str) -> Deferred[Reply]:
        assert self._forward is not None
        self.forwarded += 1
        d = self._forward(broker, lambda cid: encode_request(cid, command, args))

        def answered(reply: Reply) -> Reply:
            if not reply.ok:
                raise _refusal(reply.code or "", reply.payload)(
                    f"coordinator (broker {broker}): {reply.payload}")
            return reply

        def unreachable(failure: Any) -> Any:
            if failure.check(SkerryError):
                return failure
            raise Unavailable(f"the coordinator (broker {broker}) did not answer: "
                              f"{failure.getErrorMessage()}; retry")

        return d.addCallbacks(answered, unreachable).addErrback(unreachable)

    def _run(self, group: str, local: Callable[[], Any], command: str, args: str,
             answer: Callable[[Reply], Any]) -> Deferred[Any]:
        try:
            broker = self._remote(group)
        except SkerryError as error:
            return fail(error)
        if broker is None:
            return maybeDeferred(local)
        return self._ask(broker, command, args).addCallback(answer)

    # ------------------------------------------------------------------ operations

    def view(self, group: str, topic: str) -> Deferred[GroupView | None]:
        """The group's generation and members (None: no live group)."""
        def local() -> GroupView | None:
            grp = self.groups.group(group, topic)
            if grp is None:
                return None
            return GroupView(grp.generation, {m: tuple(grp.assigned(m)) for m in grp.members})

        try:
            broker = self._remote(group)
        except SkerryError as error:
            return fail(error)
        if broker is None:
            return maybeDeferred(local)

        def missing(failure: Any) -> None:
            failure.trap(GenerationMismatch)  # DESCRIBE_GROUP's "no group g on topic t"
            return None

        return self._ask(broker, "DESCRIBE_GROUP", f"{group} {topic}").addCallbacks(
            group_view_from, missing)

    def join(self, group: str, topic: str, member_id: str,
             session_timeout_ms: int | None = None) -> Deferred[tuple[int, list[int]]]:
        """JOIN: ``(generation, assigned)``."""
        return self._run(
            group,
            lambda: self.groups.join(group, topic, member_id,
                                     session_timeout_ms=session_timeout_ms),
            "JOIN", f"{group} {topic} {member_id}"
            + ("" if session_timeout_ms is None else f" session_timeout_ms={session_timeout_ms}"),
            lambda r: (r.number("generation"), r.ints("assigned")))

    def heartbeat(self, group: str, topic: str, member_id: str,
                  generation: int) -> Deferred[None]:
        return self._run(group, lambda: self.groups.heartbeat(group, topic, member_id,
                                                              generation),
                         "HEARTBEAT", f"{group} {topic} {member_id} {generation}",
                         lambda _: None)

    def leave(self, group: str, topic: str, member_id: str, generation: int) -> Deferred[None]:
        return self._run(group, lambda: self.groups.leave(group, topic, member_id, generation),
                         "LEAVE", f"{group} {topic} {member_id} {generation}", lambda _: None)

    def commit(self, group: str, topic: str, member_id: str, generation: int, partition: int,
               offset: int) -> Deferred[None]:
        return self._run(group, lambda: self.groups.commit(group, topic, member_id, generation,
                                                           partition, offset),
                         "COMMIT", f"{group} {topic} {member_id} {generation} {partition} "
                                   f"{offset}", lambda _: None)

    def admin_commit(self, group: str, topic: str, partition: int,
                     offset: int) -> Deferred[None]:
        return self._run(group, lambda: self.groups.admin_commit(group, topic, partition,
                                                                 offset),
                         "ADMIN_COMMIT", f"{group} {topic} {partition} {offset}",
                         lambda _: None)

    def offset(self, group: str, topic: str, partition: int) -> Deferred[int]:
        """The committed offset (V1's next to read), 0 when none."""
        return self._run(group, lambda: self.groups.offset(group, topic, partition),
                         "OFFSET", f"{group} {topic} {partition}", lambda r: r.number("offset"))

    def delete_group(self, group: str, topic: str) -> Deferred[None]:
        return self._run(group, lambda: self.groups.delete_group(group, topic),
                         "ADMIN_DELETE_GROUP", f"{group} {topic}", lambda _: None)

    def list_groups(self) -> Deferred[list[tuple[str, str]]]:
        """Every ``(group, topic)`` with state or offsets: this broker's, and in a cluster
        every other live broker's (each answers for the groups it coordinates)."""
        here = set(self.groups.list_groups())
        if self._coordinators is None or self._forward is None:
            return succeed(sorted(here))
        me = self._coordinators.broker_id
        asks = [self._ask(b, "LIST_GROUPS", "") for b in self._brokers() if b != me]

        def merged(results: list[tuple[bool, Any]]) -> list[tuple[str, str]]:
            pairs = set(here)
            for ok, reply in results:
                if not ok:
                    log.info("iggy groups: a broker did not list its groups: %s",
                             reply.getErrorMessage())
                    continue
                pairs.update(groups_from(reply))
            return sorted(pairs)

        return DeferredList(asks, consumeErrors=True).addCallback(merged)
