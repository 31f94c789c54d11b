"""V1 command handlers: translate parsed commands into core calls and results into reply lines.

Owns: the explicit table ``{Produce: handle_produce, ...}`` with an unknown-command fallback,
the order of the checks a command needs after the codec's syntax checks (existence and
ranges -> generation and ownership -> the operation), and the wire text of every success.

A handler is called as ``handler(cmd, slot, conn)`` and either returns the reply line
(answered at once) or returns ``None`` after arranging to put the line into ``slot[0]`` and
call ``conn.drain()`` later (produce, acks=all, group writes, long polls). The connection
is also the ``ProduceSink`` produce results go to; ``slot[1]`` holds the correlation id.

Must not import: Twisted's reactor, sockets, files. Only ``Deferred`` for waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.python.failure import Failure

from access import Operation, ResourceType
from access.model import CLUSTER_NAME
from broker.auth import TokenStore, failure_delay
from broker.core import BrokerCore, ProduceSink
from broker.errors import (
    BadRequest,
    CoordinatorLoading,
    InternalError,
    SkerryError,
    Unauthenticated,
    Unavailable,
)
from broker.services.cluster_admin import AdminPlane, Applied
from broker.services.consumer_groups import ConsumerGroupService
from broker.services.coordinators import Route
from broker.services.groups import GroupService
from broker.services.iggy_catalog import CONSUMER_GROUP_PREFIX, STORE_PREFIX
from broker.services.replication import ReplicationService
from broker.v1 import access as v1_access
from broker.v1 import codec as c
from broker.v1.errors import from_group_refusal
from broker.v1.forward import FORWARD_CID_PREFIX, GROUP_COMMANDS, command_line, relay
from groups.consumer_effects import HeartbeatRequest
from groups.kafka_errors import KafkaGroupError
from groups.records import GROUPS_TOPIC

__all__ = ["Handlers", "Slot", "BROKER_ONLY_COMMANDS"]

log = logging.getLogger("skerry.handlers")

Slot = list  # [reply line or None, correlation id as bytes]


class Connection(ProduceSink, Protocol):
    """What a handler may ask of the connection a command came from."""

    def drain(self) -> None:
        """Write every reply whose turn has come (after a slot was filled)."""


_lst = c.format_list
_bool = c.format_bool


_WRITE, _TOPIC = Operation.WRITE, ResourceType.TOPIC
"""Looked up once: the PRODUCE path checks them per message with ACLs on."""


def _limit(value: int | None) -> str:
    """A retention setting on the wire: the number, or ``none`` for no limit."""
    return "none" if value is None else str(value)

_PULL_DEFAULT_BYTES = 1048576
_PULL_MAX_BYTES = 16 * 1048576
"""REPLICA_PULL ``max_bytes``: the default, and the most one answer may carry."""
_DEFAULT_REBALANCE_TIMEOUT_MS = 60_000
"""GROUP_HEARTBEAT: the rebalance timeout of a join that names none."""
_FETCH_MAX_MESSAGES = 100_000
"""FETCH: the most records one answer carries (``max=`` may ask for fewer)."""


_GROUP_COMMANDS = (c.Join, c.Sync, c.Heartbeat, c.Leave, c.Commit, c.AdminCommit,
                   c.AdminResetOffsets, c.AdminDeleteGroup)
_TOPIC_WRITES = frozenset((c.Produce, c.ProduceBatch, c.AdminCreateTopic, c.AdminDeleteTopic,
                           c.AdminAddPartitions, *_GROUP_COMMANDS))
"""Commands V1 may not send for the Iggy transport's internal topics (``__iggy.*``):
writes, creating, deleting or growing them, and consumer groups on them."""
_GROUP_WRITES = frozenset((*_GROUP_COMMANDS, c.GroupHeartbeat))
"""Commands V1 may not send for the Iggy transport's consumer pseudo-groups
(``iggy.consumer.*``). Reading stays allowed for both (CONSUME of an existing topic, FETCH,
OFFSETS, METADATA, OFFSET, DESCRIBE_GROUP, LIST_GROUPS), and so do the replication commands,
which must reach every partition (docs/protocol.md, Reserved names)."""


BROKER_ONLY_COMMANDS = frozenset((
    "REPLICA_FETCH", "REPLICA_PULL", "REPLICA_EPOCH", "REPLICA_STATUS", "SET_PARTITION_ROLE",
    "ADMIN_CREATE_TOPIC", "ADMIN_REGISTER_BROKER", "ADMIN_BROKER_HEARTBEAT",
    "ADMIN_SET_PARTITION_LEADER", "ADMIN_GET_METADATA",
))
"""Commands only a broker principal may send on a cluster member with authentication on
(``Handlers.peer_users``): they move a partition's ISR, ``hw``, leadership or the cluster's
metadata (docs/replication.md, Security between brokers). Listed by wire name, so a command
added later under one of these names is gated the moment it exists."""


def _reserved_topic(topic: str) -> BadRequest:
    return BadRequest(f"topic {topic} is reserved for the Iggy transport's internal use "
                      f"(names starting with {STORE_PREFIX}): over V1 it can be read, not "
                      f"created, written, changed or consumed in a group")


def _check_reserved(cmd: Any) -> None:
    """``BadRequest`` for a V1 command that would create, write or change the Iggy
    transport's internal topics or consumer pseudo-groups."""
    kind = type(cmd)
    if kind in _TOPIC_WRITES and cmd.topic.startswith(STORE_PREFIX):
        raise _reserved_topic(cmd.topic)
    if kind in _GROUP_WRITES and cmd.group.startswith(CONSUMER_GROUP_PREFIX):
        raise BadRequest(f"group {cmd.group} is reserved for the Iggy transport's internal "
                         f"use (names starting with {CONSUMER_GROUP_PREFIX}): over V1 its "
                         f"offsets can be read, not changed")


_HERE = object()
"""``_route_group_command``: serve the command on this broker."""


def _unreachable(failure: Failure, broker: int) -> Failure:
    if isinstance(failure.value, SkerryError):
        return failure
    return Failure(Unavailable(f"the group's coordinator, broker {broker}, did not answer "
                               f"({failure.getErrorMessage() or type(failure.value).__name__}); "
                               f"retry"))


def _pull_reply(cid: str, result: Any) -> bytes:
    return c.replica_pull_reply(cid, epoch=result.epoch, hw=result.hw, leo=result.leo,
                                start=result.start, isr=result.isr, epochs=result.epochs,
                                count=result.count, data=result.data)


class Handlers:
    """The V1 handler table over one ``BrokerCore``, the group service and the
    replication service (the shell passes all three in)."""

    def __init__(self, core: BrokerCore, groups: GroupService,
                 replication: ReplicationService) -> None:
        self.core = core
        self.groups = groups
        self.replication = replication
        self.produce_message: Callable[..., None] = core.produce_to
        """The one PRODUCE handler: a parsed PRODUCE comes here through ``produce``, and the
        transport's fast path (the codec's ``scan_produce``) straight from the framer. It is
        the core's entry itself (``BrokerCore.produce_to``), so the fast path pays no extra
        call per message; with ACLs on, ``_checked_produce``. The result goes to
        ``sink.produced`` with the slot as its token; refusals that change nothing (unknown
        topic, NOT_LEADER...) raise ``SkerryError`` at once."""
        if core.access.enabled:  # ACLs: the fast path checks Write too (broker/v1/access.py)
            self.produce_message = self._checked_produce
            self.produce_run = self._checked_produce_run  # type: ignore[method-assign]
        self.table: dict[type, Callable[[Any, Slot, Connection], bytes | None]] = {
            c.Ping: self.ping,
            c.Produce: self.produce,
            c.Consume: self.consume,
            c.Join: self.join,
            c.GroupHeartbeat: self.group_heartbeat,
            c.Sync: self.sync,
            c.Heartbeat: self.heartbeat,
            c.Leave: self.leave,
            c.Commit: self.commit,
            c.Offset: self.offset,
            c.ReplicaFetch: self.replica_fetch,
            c.SetPartitionRole: self.set_partition_role,
            c.AdminCreateTopic: self.admin_create_topic,
            c.AdminDeleteTopic: self.admin_delete_topic,
            c.AdminAddPartitions: self.admin_add_partitions,
            c.AdminAlterTopic: self.admin_alter_topic,
            c.Metadata: self.metadata,
            c.Offsets: self.offsets,
            c.DescribeGroup: self.describe_group,
            c.ListGroups: self.list_groups,
            c.AdminDeleteGroup: self.admin_delete_group,
            c.AdminResetOffsets: self.admin_reset_offsets,
            c.AdminCommit: self.admin_commit,
            c.ReplicaPull: self.replica_pull,
            c.ReplicaEpoch: self.replica_epoch,
            c.ReplicaStatus: self.replica_status,
            c.Auth: self.auth,
            c.Fetch: self.fetch,
            c.ProduceBatch: self.produce_batch,
            c.AdminRegisterBroker: self.admin_register_broker,
            c.AdminBrokerHeartbeat: self.admin_broker_heartbeat,
            c.AdminSetPartitionLeader: self.admin_set_partition_leader,
            c.AdminGetMetadata: self.admin_get_metadata,
            c.AdminAclAdd: self.admin_acl_add,
            c.AdminAclRemove: self.admin_acl_remove,
            c.AdminAclList: self.admin_acl_list,
        }

    # ------------------------------------------------------------- dispatch

    def dispatch(self, cmd: Any, slot: Slot, conn: Connection) -> bytes | None:
        """Run the handler for ``cmd``; every failure becomes an error line, never a crash."""
        handler = self.table.get(type(cmd))
        if handler is None:
            return c.err(cmd.cid, InternalError(f"no handler for {type(cmd).__name__}"))
        if self.core.closing and not isinstance(cmd, c.Ping):
            from broker.errors import Unavailable
            return c.err(cmd.cid, Unavailable("broker is shutting down"))
        peers = self.peer_users
        if peers is not None and cmd.name in BROKER_ONLY_COMMANDS:
            principal = getattr(conn, "principal", None)
            if principal not in peers:
                if not getattr(conn, "broker_only_refused", False):  # once per connection
                    conn.broker_only_refused = True  # type: ignore[attr-defined]
                    log.warning("%s from %s refused: user %s is not in cluster.peer_users",
                                cmd.name, getattr(conn, "peer", "?"), principal)
                return c.err(cmd.cid, Unauthenticated(
                    f"{cmd.name} needs a broker principal: user {principal} is not one of "
                    f"cluster.peer_users"))
        if type(cmd) is not c.Produce:
            # Effects happen in request order: queued produces of this turn land first.
            self.core.flush()
        try:
            if self.core.access.enabled:
                v1_access.check(cmd, self.core.access.check_any, conn)
            _check_reserved(cmd)
            if self.coordinators is not None and isinstance(cmd, GROUP_COMMANDS + (c.ListGroups,)):
                routed = self._route_group_command(cmd, slot, conn)
                if routed is not _HERE:
                    return routed
            return handler(cmd, slot, conn)
        except SkerryError as error:
            return c.err(cmd.cid, error)
        except Exception:
            log.exception("handler for %s failed", type(cmd).__name__)
            return c.err(cmd.cid, InternalError())

    # ------------------------------------------------------------- cluster coordinators

    coordinators: Any = None
    """Set by the shell on a cluster member with etcd
    (``broker.services.coordinators.CoordinatorPartitions``): where each group is
    coordinated. None: every group is served here."""
    forward: Callable[[int, Callable[[str], bytes]], Deferred[Any]] | None = None
    """Set with ``coordinators``: ``forward(broker_id, build)`` sends ``build(cid)`` to that
    broker over the broker link and fires with its ``Reply``; its correlation ids start
    with ``FORWARD_CID_PREFIX``."""

    def _route_group_command(self, cmd: Any, slot: Slot, conn: Connection) -> Any:
        """Serve a group command here (``_HERE``), answer that the coordinator is loading
        or unavailable, or forward it to the coordinator and relay its answer."""
        forwarded = cmd.cid.startswith(FORWARD_CID_PREFIX)
        if isinstance(cmd, c.ListGroups):
            return _HERE if forwarded else self._list_groups_everywhere(cmd, slot, conn)
        routing = self.coordinators.route(cmd.group)
        if routing.route is Route.LOCAL:
            return _HERE
        if routing.route is Route.LOADING:
            raise CoordinatorLoading(f"the coordinator of group {cmd.group} is loading its "
                                     f"state; retry")
        if routing.route is Route.UNAVAILABLE or forwarded or self.forward is None:
            raise Unavailable(f"no coordinator for group {cmd.group} right now "
                              f"(partition {routing.partition} of {GROUPS_TOPIC} has no "
                              f"leader here); retry")
        d = self.forward(routing.broker, lambda cid: command_line(cmd, cid))
        d.addErrback(_unreachable, routing.broker)
        self._later(cmd, d, lambda reply: relay(reply, cmd.cid), slot, conn)
        return None

    def _list_groups_everywhere(self, cmd: c.ListGroups, slot: Slot, conn: Connection) -> None:
        """LIST_GROUPS in a cluster: this broker's groups and every other live broker's,
        asked with a forwarded LIST_GROUPS (which each answers with its own)."""
        assert self.forward is not None
        brokers = self.replication.cluster.brokers
        if self.control is not None:  # the live ones: a dead broker would only time out
            brokers = self.control.view.brokers
        others = [b for b in sorted(brokers) if b != self.coordinators.broker_id]
        asks = [self.forward(b, lambda cid: command_line(cmd, cid))
                for b in others]

        def merge(results: list[tuple[bool, Any]]) -> bytes:
            pairs = {f"{g}:{t}" for g, t in self.groups.list_groups()}
            for ok, reply in results:
                if ok and reply.ok and reply.payload.startswith("groups=["):
                    pairs.update(p for p in reply.payload[8:-1].split(" ") if p)
            return c.ok(cmd.cid, "groups=" + _lst(sorted(pairs)))

        d = DeferredList(asks, consumeErrors=True)
        self._later(cmd, d, merge, slot, conn)
        return None

    def _later(self, cmd: Any, d: Deferred[Any], render: Callable[[Any], bytes],
               slot: Slot, conn: Connection) -> None:
        """Fill ``slot`` from a Deferred result (or its error) and drain."""

        def done(result: Any) -> None:
            slot[0] = self._render(cmd, result, render)
            conn.drain()

        d.addBoth(done)

    def _render(self, cmd: Any, result: Any, render: Callable[[Any], bytes]) -> bytes:
        """The reply line for a Deferred's result: ``render(result)``, or the error line."""
        if isinstance(result, Failure):
            if isinstance(result.value, SkerryError):
                return c.err(cmd.cid, result.value)
            log.error("%s failed: %s", type(cmd).__name__, result.getTraceback())
            return c.err(cmd.cid, InternalError())
        try:
            return render(result)
        except SkerryError as error:
            return c.err(cmd.cid, error)

    def _answer(self, cmd: Any, d: Deferred[Any], render: Callable[[Any], bytes],
                slot: Slot, conn: Connection) -> bytes | None:
        """The reply at once when ``d`` has fired already (a control plane without etcd),
        else ``_later``."""
        if not d.called:
            self._later(cmd, d, render, slot, conn)
            return None
        box: list[Any] = []
        d.addBoth(box.append)
        return self._render(cmd, box[0], render)

    # ------------------------------------------------------------- basics

    auth_tokens: TokenStore | None = None
    """Set by the shell when ``auth.tokens_file`` is configured (``broker/auth.py``)."""
    peer_users: frozenset[str] | None = None
    """Set by the shell on a cluster member with authentication on: the principals
    (``cluster.peer_users``) allowed to send ``BROKER_ONLY_COMMANDS``. None: no gate."""

    def auth(self, cmd: c.Auth, slot: Slot, conn: Any) -> bytes | None:
        """``AUTH <user> <token>``: marks the connection authenticated. A failure is answered
        after a delay that doubles per failure on this connection (reactor clock; other
        connections are not held up), and an AUTH sent during that delay is checked only
        once it is over, so pipelining guesses gains nothing. No token is ever logged."""
        tokens = self.auth_tokens
        if tokens is None:
            return c.ok(cmd.cid)  # authentication is not configured: nothing to check
        clock = self.core.clock
        user, token = cmd.user, cmd.token

        def check() -> tuple[bool, bytes]:
            if tokens.verify(user, token):
                conn.authenticated = True
                conn.principal = user
                conn.auth_failures = 0
                log.info("AUTH ok: user %s from %s", user, getattr(conn, "peer", "?"))
                return True, c.ok(cmd.cid)
            conn.auth_failures += 1
            conn.auth_ready_at = clock.seconds() + failure_delay(conn.auth_failures)
            log.warning("AUTH failed: user %s from %s (failure %d on this connection)",
                        user, getattr(conn, "peer", "?"), conn.auth_failures)
            return False, c.err(cmd.cid, Unauthenticated("invalid user or token"))

        def answer(reply: bytes) -> None:
            slot[0] = reply
            conn.drain()

        def run(ok: bool, reply: bytes) -> None:
            if ok:
                answer(reply)
            else:
                clock.callLater(conn.auth_ready_at - clock.seconds(), answer, reply)

        def checked_later() -> None:
            run(*check())
            queue = conn.auth_queue
            queue.popleft()
            if queue:  # the next pipelined AUTH waits out this one's delay
                clock.callLater(max(0.0, conn.auth_ready_at - clock.seconds()), queue[0])

        queue = conn.auth_queue
        wait = conn.auth_ready_at - clock.seconds()
        if queue or wait > 0:
            queue.append(checked_later)
            if len(queue) == 1:
                clock.callLater(max(0.0, wait), checked_later)
            return None
        ok, reply = check()
        if ok:
            return reply
        run(ok, reply)
        return None

    def ping(self, cmd: c.Ping, slot: Slot, conn: Connection) -> bytes:
        return c.ok(cmd.cid)

    def produce(self, cmd: c.Produce, slot: Slot, conn: Connection) -> None:
        self.produce_message(cmd.topic, cmd.partition, cmd.key.encode(), cmd.value, cmd.acks,
                             conn, slot, cmd.pid, cmd.seq)
        return None

    def produce_run(self, topic: str, keys: Sequence[bytes], values: Sequence[bytes],
                    acks: str, sink: ProduceSink, slots: Sequence[Slot]) -> None:
        """``produce_message`` for a run of plain PRODUCEs of one topic and one acks level
        (the transport's fast path over a read), one call for the run; a refusal raises
        before any of them is queued (``BrokerCore.produce_run``)."""
        self.core.produce_run(topic, keys, values, acks, sink, slots)

    def _checked_produce(self, topic: str, partition: int | None, key: bytes, value: bytes,
                         acks: str, sink: ProduceSink, slot: Slot, pid: str | None = None,
                         seq: int | None = None) -> None:
        """``produce_message`` with ACLs on: Write on the topic first (a cached decision),
        and Create (on the cluster or the topic) when the produce would create it."""
        self.core.check_access(sink, _WRITE, _TOPIC, topic)
        if self.core.topic_config(topic) is None:
            self._check_create(sink, topic)
        self.core.produce_to(topic, partition, key, value, acks, sink, slot, pid, seq)

    def _checked_produce_run(self, topic: str, keys: Sequence[bytes],
                             values: Sequence[bytes], acks: str, sink: ProduceSink,
                             slots: Sequence[Slot]) -> None:
        self.core.check_access(sink, _WRITE, _TOPIC, topic)
        if self.core.topic_config(topic) is None:
            self._check_create(sink, topic)
        self.core.produce_run(topic, keys, values, acks, sink, slots)

    def _check_create(self, sink: Any, topic: str) -> None:
        self.core.access.check_any(sink, ((Operation.CREATE, ResourceType.CLUSTER,
                                           CLUSTER_NAME),
                                          (Operation.CREATE, ResourceType.TOPIC, topic)))

    def fetch(self, cmd: c.Fetch, slot: Slot, conn: Connection) -> bytes:
        """Additive FETCH: committed records as their on-disk bytes (binary-safe bulk read)."""
        max_bytes = min(cmd.max_bytes or _PULL_DEFAULT_BYTES, _PULL_MAX_BYTES)
        max_messages = min(cmd.max_messages or _FETCH_MAX_MESSAGES, _FETCH_MAX_MESSAGES)
        result, hw, start = self.core.fetch_raw(cmd.topic, cmd.partition, cmd.offset,
                                                max_messages, max_bytes)
        reply = c.fetch_raw_reply if cmd.raw else c.fetch_reply
        return reply(cmd.cid, hw=hw, start=start, next_offset=result.next_offset,
                     count=result.count, data=result.raw)

    def produce_batch(self, cmd: c.ProduceBatch, slot: Slot, conn: Connection) -> None:
        """Additive PRODUCE_BATCH: one partition's messages appended together, answered once
        as durable as ``acks`` asks (``BrokerCore.produce_keyed_batch``)."""
        idempotent = cmd.pid is not None

        def done(result: Any) -> None:
            if isinstance(result, SkerryError):
                slot[0] = c.err(cmd.cid, result)
            else:
                slot[0] = c.ok(cmd.cid, c.produce_batch_payload(
                    result.partition, result.offset, result.count, result.hw,
                    result.duplicates if idempotent else None))
            conn.drain()

        self.core.produce_keyed_batch(cmd.topic, cmd.partition, cmd.keys, cmd.values, cmd.acks,
                                      done, cmd.pid, cmd.seq)
        return None

    def consume(self, cmd: c.Consume, slot: Slot, conn: Connection) -> bytes | None:
        if cmd.topic.startswith(STORE_PREFIX) and self.core.topic_config(cmd.topic) is None:
            raise _reserved_topic(cmd.topic)  # read it if it exists; never auto-create it
        if not cmd.detail:  # the common form: straight from the stored bytes, no records
            raw, hw = self.core.read_raw(cmd.topic, cmd.partition, cmd.offset, cmd.max_messages)
            if (raw.count or not cmd.wait_ms) and not raw.gapped:  # gapped: each its offset
                line = c.consume_reply_raw(cmd.cid, raw.raw, raw.ends,
                                           raw.next_offset - raw.count, hw, b64=cmd.b64)
                if line is not None:
                    return line
        result, hw = self.core.read(cmd.topic, cmd.partition, cmd.offset, cmd.max_messages)
        if result.records or not cmd.wait_ms:
            return c.consume_reply(cmd.cid, result.records, hw, b64=cmd.b64, detail=cmd.detail,
                                   headers=cmd.headers)[0]
        # Long poll: answer once a committed message at the offset exists, or at the deadline.
        start = max(cmd.offset, self.core.earliest_offset(cmd.topic, cmd.partition))
        d = self.core.wait_for_data(cmd.topic, cmd.partition, start, cmd.wait_ms)

        def render(_: object) -> bytes:
            again, hw2 = self.core.read(cmd.topic, cmd.partition, cmd.offset, cmd.max_messages)
            return c.consume_reply(cmd.cid, again.records, hw2, b64=cmd.b64, detail=cmd.detail,
                                   headers=cmd.headers)[0]

        self._later(cmd, d, render, slot, conn)
        return None

    # ------------------------------------------------------------- groups

    def _group_topic(self, topic: str, partition: int | None = None) -> None:
        """Existence and range checks for member-scoped group commands (no auto-create)."""
        config = self.core.topic_config(topic)
        if config is None:
            from broker.errors import UnknownGroup
            raise UnknownGroup("no such group (unknown topic)")
        if partition is not None and partition >= config.partitions:
            raise BadRequest(f"partition {partition} out of range; topic {topic} has "
                             f"{config.partitions} partitions")

    def _check_session_timeout(self, value: int | None) -> None:
        if value is not None and not 100 <= value <= 3_600_000:
            raise BadRequest("session_timeout_ms must be between 100 and 3600000")

    def join(self, cmd: c.Join, slot: Slot, conn: Connection) -> None:
        self._check_session_timeout(cmd.session_timeout_ms)
        self.core.resolve(cmd.topic, None, True)
        d = maybeDeferred(self.groups.join, cmd.group, cmd.topic, cmd.member_id,
                          cmd.assignor, cmd.session_timeout_ms)
        self._later(cmd, d, lambda r: c.ok(cmd.cid, c.assignment_payload(r[0], r[1])), slot, conn)
        return None

    def sync(self, cmd: c.Sync, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic)
        d = maybeDeferred(self.groups.sync, cmd.group, cmd.topic, cmd.member_id,
                          cmd.generation)
        self._later(cmd, d, lambda r: c.ok(cmd.cid, c.assignment_payload(r[0], r[1])), slot, conn)
        return None

    def heartbeat(self, cmd: c.Heartbeat, slot: Slot, conn: Connection) -> bytes:
        self._group_topic(cmd.topic)
        self.groups.heartbeat(cmd.group, cmd.topic, cmd.member_id, cmd.generation)
        return c.ok(cmd.cid, "heartbeat=ok")

    def leave(self, cmd: c.Leave, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic)
        d = maybeDeferred(self.groups.leave, cmd.group, cmd.topic, cmd.member_id,
                          cmd.generation)
        self._later(cmd, d, lambda _: c.ok(cmd.cid, "left=true"), slot, conn)
        return None

    def _check_commit_offset(self, topic: str, partition: int, offset: int) -> None:
        hw = self.core.hw(topic, partition)
        if offset > hw + 1:
            raise BadRequest(f"offset {offset} out of range; must be between 0 and hw+1 ({hw + 1})")

    def commit(self, cmd: c.Commit, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic, cmd.partition)
        self._check_commit_offset(cmd.topic, cmd.partition, cmd.offset)
        consumer = self.consumer_groups
        if consumer is not None and consumer.is_consumer_group(cmd.group):
            # A KIP-848 group (GROUP_HEARTBEAT): the generation is the member epoch.
            try:
                d = consumer.commit(cmd.group, cmd.member_id, cmd.generation, cmd.topic,
                                    cmd.partition, cmd.offset)
            except KafkaGroupError as refusal:
                raise from_group_refusal(refusal) from None
            self._later(cmd, d, lambda _: c.ok(cmd.cid, "committed=true"), slot, conn)
            return None
        d = maybeDeferred(self.groups.commit, cmd.group, cmd.topic, cmd.member_id,
                          cmd.generation, cmd.partition, cmd.offset)
        self._later(cmd, d, lambda _: c.ok(cmd.cid, "committed=true"), slot, conn)
        return None

    consumer_groups: ConsumerGroupService | None = None
    """Set by the shell: the KIP-848 consumer groups GROUP_HEARTBEAT serves (None: the
    command is refused)."""

    def group_heartbeat(self, cmd: c.GroupHeartbeat, slot: Slot, conn: Connection) -> bytes:
        """``GROUP_HEARTBEAT``: one KIP-848 heartbeat (join, heartbeat, leave); the reply
        is the member's id, epoch, heartbeat interval, the partitions it may consume now
        and its target."""
        service = self.consumer_groups
        if service is None:
            raise BadRequest("GROUP_HEARTBEAT is not enabled on this broker")
        for topic in cmd.topics or ():
            if topic.startswith(STORE_PREFIX):
                raise _reserved_topic(topic)
        ids = {name: meta.topic_id for name, meta in service.topics().items()}
        owned = None
        if cmd.owned is not None:
            by_topic: dict[Any, set[int]] = {}
            for topic, partition in cmd.owned:
                if topic in ids:  # a topic deleted since is owned by nobody
                    by_topic.setdefault(ids[topic], set()).add(partition)
            owned = tuple((t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))
        timeout = cmd.rebalance_timeout_ms
        if timeout is None:
            timeout = _DEFAULT_REBALANCE_TIMEOUT_MS if cmd.member_epoch == 0 else -1
        request = HeartbeatRequest(
            cmd.group, cmd.member_id, cmd.member_epoch, instance_id=cmd.instance,
            rebalance_timeout_ms=timeout, topic_names=cmd.topics, topic_regex=cmd.regex,
            server_assignor=cmd.assignor, owned=owned, client_id="v1",
            client_host=str(getattr(conn, "peer", "")))
        try:
            reply = service.heartbeat(request)
        except KafkaGroupError as refusal:
            raise from_group_refusal(refusal) from None
        assigned, target = service.assignment_of(cmd.group, reply.member_id)
        return c.ok(cmd.cid, (
            f"member={reply.member_id} epoch={reply.member_epoch} "
            f"interval_ms={reply.heartbeat_interval_ms} "
            f"assigned={_lst(f'{t}:{p}' for t, p in assigned)} "
            f"target={_lst(f'{t}:{p}' for t, p in target)}"))

    def offset(self, cmd: c.Offset, slot: Slot, conn: Connection) -> bytes:
        config = self.core.topic_config(cmd.topic)
        if config is None:
            return c.ok(cmd.cid, "offset=0")
        if cmd.partition >= config.partitions:
            raise BadRequest(f"partition {cmd.partition} out of range; topic {cmd.topic} has "
                             f"{config.partitions} partitions")
        return c.ok(cmd.cid, f"offset={self.groups.offset(cmd.group, cmd.topic, cmd.partition)}")

    def describe_group(self, cmd: c.DescribeGroup, slot: Slot, conn: Connection) -> bytes:
        info = self.groups.describe(cmd.group, cmd.topic)
        members = " ".join(f"{m}:{','.join(str(p) for p in parts)}"
                           for m, parts in info.members)
        return c.ok(cmd.cid, (
            f"state={info.state} generation={info.generation} assignor={info.assignor} "
            f"members=[{members}] partitions={_lst(info.partitions)} "
            f"committed={_lst(info.committed)} hw={_lst(info.hw)} lag={_lst(info.lag)}"
            + ("" if self.coordinators is None
               else f" coordinator={self.coordinators.broker_id}")))

    def list_groups(self, cmd: c.ListGroups, slot: Slot, conn: Connection) -> bytes:
        pairs = self.groups.list_groups()
        if self.core.access.enabled:  # groups the user may not Describe are left out
            pairs = [(g, t) for g, t in pairs
                     if self.core.allowed(conn, Operation.DESCRIBE, ResourceType.GROUP, g)]
        return c.ok(cmd.cid, "groups=" + _lst(f"{g}:{t}" for g, t in pairs))

    def admin_delete_group(self, cmd: c.AdminDeleteGroup, slot: Slot, conn: Connection) -> None:
        d = maybeDeferred(self.groups.delete_group, cmd.group, cmd.topic)
        self._later(cmd, d, lambda _: c.ok(cmd.cid, "deleted=true"), slot, conn)
        return None

    def admin_reset_offsets(self, cmd: c.AdminResetOffsets, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic, cmd.partition)
        d = maybeDeferred(self.groups.reset_offsets, cmd.group, cmd.topic, cmd.target,
                          cmd.partition)
        self._later(cmd, d, lambda offsets: c.ok(
            cmd.cid, "offsets=" + _lst(f"{p}:{o}" for p, o in sorted(offsets.items()))),
            slot, conn)
        return None

    def admin_commit(self, cmd: c.AdminCommit, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic, cmd.partition)
        self._check_commit_offset(cmd.topic, cmd.partition, cmd.offset)
        d = maybeDeferred(self.groups.admin_commit, cmd.group, cmd.topic, cmd.partition,
                          cmd.offset)
        self._later(cmd, d, lambda _: c.ok(cmd.cid, "committed=true"), slot, conn)
        return None

    # ------------------------------------------------------------- replication

    def replica_fetch(self, cmd: c.ReplicaFetch, slot: Slot, conn: Connection) -> bytes:
        self.core.resolve(cmd.topic, cmd.partition, False)
        result = self.replication.replica_fetch(cmd.topic, cmd.partition, cmd.replica_id,
                                                     cmd.offset)
        self.core.notify_hw(cmd.topic, cmd.partition)
        return c.ok(cmd.cid, c.replica_fetch_payload(result.replica, result.acked_offset,
                                                     result.hw, result.isr,
                                                     result.under_replicated))

    def set_partition_role(self, cmd: c.SetPartitionRole, slot: Slot, conn: Connection) -> bytes:
        self.core.resolve(cmd.topic, cmd.partition, False)
        hw = self.replication.set_role(cmd.topic, cmd.partition, cmd.role)
        self.core.notify_hw(cmd.topic, cmd.partition)
        return c.ok(cmd.cid, c.role_payload(cmd.topic, cmd.partition, cmd.role, hw))

    # ------------------------------------------------------------- clusters

    def replica_pull(self, cmd: c.ReplicaPull, slot: Slot, conn: Connection) -> bytes | None:
        """A follower's fetch: records from ``offset`` on; long-polls with ``wait_ms`` when
        the follower is caught up (so an idle cluster does not spin)."""
        self.core.resolve(cmd.topic, cmd.partition, False)
        replication = self.replication
        max_bytes = min(cmd.max_bytes or _PULL_DEFAULT_BYTES, _PULL_MAX_BYTES)
        result = replication.pull(cmd.topic, cmd.partition, cmd.replica_id, cmd.offset,
                                  cmd.epoch, max_bytes=max_bytes)
        if result.count or not cmd.wait_ms or result.epoch != cmd.epoch \
                or cmd.offset != result.leo or result.hw_news:
            return _pull_reply(cmd.cid, result)
        d = replication.wait_for_records(cmd.topic, cmd.partition, cmd.offset, cmd.wait_ms,
                                         cmd.replica_id)

        def render(_: object) -> bytes:
            again = replication.pull(cmd.topic, cmd.partition, cmd.replica_id, cmd.offset,
                                     cmd.epoch, max_bytes=max_bytes, record=False)
            return _pull_reply(cmd.cid, again)

        self._later(cmd, d, render, slot, conn)
        return None

    def replica_epoch(self, cmd: c.ReplicaEpoch, slot: Slot, conn: Connection) -> bytes:
        self.core.resolve(cmd.topic, cmd.partition, False)
        answer = self.replication.epoch_query(cmd.topic, cmd.partition, cmd.replica_id,
                                                   cmd.epoch, cmd.last_epoch)
        return c.ok(cmd.cid, c.replica_epoch_payload(
            str(answer.role), answer.epoch, answer.confirmed, answer.end_epoch,
            answer.end_offset, answer.leo, answer.hw))

    def replica_status(self, cmd: c.ReplicaStatus, slot: Slot, conn: Connection) -> bytes:
        self.core.resolve(cmd.topic, cmd.partition, False)
        info = self.replication.status(cmd.topic, cmd.partition)
        return c.ok(cmd.cid, c.replica_status_payload(
            role=str(info.role), epoch=info.epoch, confirmed=info.confirmed, hw=info.hw,
            leo=info.leo, start=info.start, isr=info.isr,
            under_replicated=info.under_replicated, replica=info.replica,
            replicas=info.replicas, leader=info.leader, epochs=info.epochs))

    # ------------------------------------------------------------- topics

    control: Any = None
    """``broker.services.control.ControlPlane`` with ``cluster.etcd``: topic changes then go
    through etcd (every broker applies them from its watch)."""

    admin: AdminPlane | None = None
    """What the seed broker's admin commands ask (``broker/services/cluster_admin.py``): set
    by the shell; the local metadata file without etcd, the etcd control plane with it."""

    def _admin(self) -> AdminPlane:
        if self.admin is None:
            raise BadRequest("this broker has no control plane configured")
        return self.admin

    def admin_create_topic(self, cmd: c.AdminCreateTopic, slot: Slot,
                           conn: Connection) -> bytes | None:
        """The seed broker's shape: the topic's settings, then ``term``/``index`` of the
        change (its own reply fields, added at the end: older parsers read on)."""
        d = self._admin().create_topic(cmd.topic, cmd.partitions, cmd.replication_factor,
                                       cmd.min_insync_replicas, cmd.retention_ms,
                                       cmd.retention_bytes, dict(cmd.settings))
        return self._answer(cmd, d, lambda a: c.ok(cmd.cid, c.admin_topic_payload(
            cmd.topic, cmd.partitions, cmd.replication_factor, a.term, a.index)), slot, conn)

    def create_topic_here(self, topic: str, partitions: int, replication_factor: int,
                          min_insync_replicas: int | None, retention_ms: int | None,
                          retention_bytes: int | None,
                          extra: Mapping[str, Any] | None = None) -> None:
        """Create a topic on this broker (a control plane without etcd calls this)."""
        self.core.create_topic(topic, partitions, replication_factor, min_insync_replicas,
                               retention_ms, retention_bytes, extra)
        if self.replication.cluster is not None:
            self.replication.topic_created(topic)  # followers start fetching now

    def admin_register_broker(self, cmd: c.AdminRegisterBroker, slot: Slot,
                              conn: Connection) -> bytes | None:
        d = self._admin().register_broker(cmd.broker_id, cmd.host, cmd.port, cmd.epoch)

        def render(a: Applied) -> bytes:
            host, port = a.address if a.address is not None else (cmd.host, cmd.port)
            return c.ok(cmd.cid, c.broker_registered_payload(cmd.broker_id, host, port,
                                                             a.term, a.index))

        return self._answer(cmd, d, render, slot, conn)

    def admin_broker_heartbeat(self, cmd: c.AdminBrokerHeartbeat, slot: Slot,
                               conn: Connection) -> bytes | None:
        d = self._admin().heartbeat(cmd.broker_id)
        return self._answer(cmd, d, lambda a: c.ok(cmd.cid, c.broker_heartbeat_payload(
            cmd.broker_id, a.term, a.index)), slot, conn)

    def admin_set_partition_leader(self, cmd: c.AdminSetPartitionLeader, slot: Slot,
                                   conn: Connection) -> bytes | None:
        """The operator's forced election (docs/cluster.md): refused for a leader outside
        the partition's ISR unless unclean election is allowed."""
        self.core.resolve(cmd.topic, cmd.partition, False)
        d: Deferred[Applied] = self._admin().elect(cmd.topic, cmd.partition, cmd.leader,
                                                     cmd.isr)

        def render(a: Applied) -> bytes:
            self.core.notify_hw(cmd.topic, cmd.partition)
            return c.ok(cmd.cid, c.partition_leader_payload(
                cmd.topic, cmd.partition, cmd.leader, cmd.isr, a.term, a.index))

        return self._answer(cmd, d, render, slot, conn)

    def admin_get_metadata(self, cmd: c.AdminGetMetadata, slot: Slot,
                           conn: Connection) -> bytes:
        view = self._admin().metadata()
        return c.ok(cmd.cid, c.cluster_metadata_payload(view.topics, view.brokers))

    def admin_delete_topic(self, cmd: c.AdminDeleteTopic, slot: Slot,
                           conn: Connection) -> bytes | None:
        if self.control is not None:
            d = Deferred.fromCoroutine(self.control.delete_topic(cmd.topic))
            self._later(cmd, d, lambda _ti: c.ok(cmd.cid, f"topic={cmd.topic} deleted=true"),
                        slot, conn)
            return None
        self.core.delete_topic(cmd.topic)
        forget = getattr(self.admin, "topic_deleted", None)
        if forget is not None:
            forget(cmd.topic)
        return c.ok(cmd.cid, f"topic={cmd.topic} deleted=true")

    def admin_add_partitions(self, cmd: c.AdminAddPartitions, slot: Slot,
                             conn: Connection) -> bytes | None:
        if self.control is not None:
            d = Deferred.fromCoroutine(self.control.add_partitions(cmd.topic, cmd.partitions))
            self._later(cmd, d, lambda _ti: c.ok(
                cmd.cid, f"topic={cmd.topic} partitions={cmd.partitions}"), slot, conn)
            return None
        topic = self.core.add_partitions(cmd.topic, cmd.partitions)
        return c.ok(cmd.cid, f"topic={cmd.topic} partitions={topic.config.partitions}")

    def admin_alter_topic(self, cmd: c.AdminAlterTopic, slot: Slot,
                          conn: Connection) -> bytes | None:
        """Change a topic's settings: with etcd in the topic's record, which every broker
        watches and applies (docs/cluster.md), otherwise on this broker."""
        changes = dict(cmd.changes)
        if self.control is not None:
            d = Deferred.fromCoroutine(self.control.alter_topic(cmd.topic, changes))
            self._later(cmd, d, lambda _ti: self._altered(cmd), slot, conn)
            return None
        self.core.alter_topic(cmd.topic, changes)
        return self._altered(cmd)

    def _altered(self, cmd: c.AdminAlterTopic) -> bytes:
        """ADMIN_ALTER_TOPIC's answer: the retention settings, then (additive) the
        compaction settings when the topic is compacted or the request named one, and the
        segment settings when set or named."""
        config = self.core.topic_config(cmd.topic)
        if config is None:
            raise BadRequest(f"unknown topic {cmd.topic}")
        named = {name for name, _value in cmd.changes}
        payload = (f"topic={cmd.topic} retention_ms={_limit(config.retention_ms)} "
                   f"retention_bytes={_limit(config.retention_bytes)}")
        if config.cleanup_policy != "delete" or named & {"cleanup_policy", "min_compaction_lag_ms",
                                                         "delete_retention_ms"}:
            payload += (f" cleanup_policy={config.cleanup_policy} "
                        f"min_compaction_lag_ms={config.min_compaction_lag_ms} "
                        f"delete_retention_ms={config.delete_retention_ms}")
        for name in ("segment_bytes", "segment_ms"):
            if name in named or getattr(config, name) is not None:
                payload += f" {name}={_limit(getattr(config, name))}"
        return c.ok(cmd.cid, payload)

    def metadata(self, cmd: c.Metadata, slot: Slot, conn: Connection) -> bytes:
        cluster = self.replication.cluster
        if cmd.topic is None:
            names = self.core.topic_names()
            if self.core.access.enabled:  # Kafka: topics the user may not Describe are left out
                names = [n for n in names
                         if self.core.allowed(conn, Operation.DESCRIBE, ResourceType.TOPIC, n)]
            payload = "topics=" + _lst(sorted(names))
            if cluster is not None:
                # Additive, in a cluster: every broker's V1 address (and, with etcd, the
                # controller), so a client can reach the leaders METADATA <topic> names.
                payload += " brokers=" + _lst(f"{b}@{a}" for b, a in cluster.brokers.items())
                if self.control is not None:
                    controller = self.control.controller
                    payload += f" controller={-1 if controller is None else controller}"
            return c.ok(cmd.cid, payload)
        cfg = self.core.topic_config(cmd.topic)
        if cfg is None:
            raise BadRequest("unknown topic")
        roles, hws, under = [], [], []
        summaries = [self.core.partition_summary(cmd.topic, p) for p in range(cfg.partitions)]
        for p in range(cfg.partitions):
            info = self.replication.describe(cmd.topic, p)
            roles.append(info.role)
            hws.append(info.hw)
            under.append(_bool(info.under_replicated))
        return c.ok(cmd.cid, (
            f"topic={cmd.topic} partitions={cfg.partitions} "
            f"replication_factor={cfg.replication_factor} "
            f"min_insync_replicas={cfg.min_insync_replicas} roles={_lst(roles)} hw={_lst(hws)} "
            f"earliest={_lst(ps.first_offset for ps in summaries)} "
            f"next={_lst(ps.next_offset for ps in summaries)} under_replicated={_lst(under)}"
            # Additive, for `skerry topics describe`: record bytes and segment files.
            f" size={_lst(ps.size_bytes for ps in summaries)}"
            f" segments={_lst(ps.segment_count for ps in summaries)}"
            + (self._leaders(cmd.topic, cfg.partitions) if cluster is not None else "")))

    def _leaders(self, topic: str, partitions: int) -> str:
        """Additive, in a cluster: `` leaders=[<broker id> ...] epochs=[<n> ...]``, each
        partition's leader as this broker knows it (``-1``: unknown or offline) and its
        leader epoch; the addresses are in ``METADATA``'s ``brokers=``."""
        leaders, epochs = [], []
        for p in range(partitions):
            leader, epoch = self.replication.leader_view(topic, p)
            leaders.append(leader)
            epochs.append(epoch)
        return f" leaders={_lst(leaders)} epochs={_lst(epochs)}"

    def offsets(self, cmd: c.Offsets, slot: Slot, conn: Connection) -> bytes:
        self.core.resolve(cmd.topic, cmd.partition, False)
        hw = self.core.hw(cmd.topic, cmd.partition)
        payload = f"earliest={self.core.earliest_offset(cmd.topic, cmd.partition)} latest={hw + 1}"
        if cmd.ts_ms is not None:
            found = self.core.offset_for_timestamp(cmd.topic, cmd.partition, cmd.ts_ms * 1000)
            payload += f" offset={-1 if found is None or found > hw else found}"
        return c.ok(cmd.cid, payload)

    # ------------------------------------------------------------- ACLs (docs/security.md)

    acls: Any = None
    """``broker.services.acls.AclService``: set by the shell (a file on one broker, etcd in
    a cluster)."""

    def _acls(self) -> Any:
        if self.acls is None:
            raise BadRequest("this broker keeps no ACLs")
        return self.acls

    def admin_acl_add(self, cmd: c.AdminAclAdd, slot: Slot, conn: Connection) -> bytes | None:
        d = self._acls().add([cmd.binding])
        return self._answer(cmd, d, lambda added: c.ok(cmd.cid, f"added={len(added)}"),
                            slot, conn)

    def admin_acl_remove(self, cmd: c.AdminAclRemove, slot: Slot,
                         conn: Connection) -> bytes | None:
        d = self._acls().remove(cmd.filter)
        return self._answer(cmd, d, lambda gone: c.ok(
            cmd.cid, f"removed={len(gone)} acls=" + _lst(map(c.acl_entry, gone))), slot, conn)

    def admin_acl_list(self, cmd: c.AdminAclList, slot: Slot, conn: Connection) -> bytes:
        found = self._acls().list(cmd.filter)
        return c.ok(cmd.cid, "acls=" + _lst(map(c.acl_entry, found)))
