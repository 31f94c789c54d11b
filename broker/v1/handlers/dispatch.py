"""V1 command handlers: translate parsed commands into core calls and results into reply lines.

Owns: the explicit table ``{Produce: handle_produce, ...}`` with an unknown-command fallback,
the order of the checks a command needs after the codec's syntax checks (existence and
ranges -> generation and ownership -> the operation), and the wire text of every success.

A handler is called as ``handler(cmd, slot, conn)`` and either returns the reply line
(answered at once) or returns ``None`` after arranging to put the line into ``slot[REPLY]`` and
call ``conn.drain()`` later (produce, acks=all, group writes, long polls). The connection's
``produced`` is the ``ProduceCallback`` PRODUCE results go to; ``slot[CID]`` holds the correlation id
(``broker.transport.slots``).

Must not import: Twisted's reactor, sockets, files. Only ``Deferred`` for waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.python.failure import Failure

from access import Operation, ResourceType
from access.model import CLUSTER_NAME
from broker.auth import TokenStore, failure_delay
from broker.core import BrokerCore, ProduceRequest, ProduceResult
from broker.errors import (
    BadRequest,
    CoordinatorLoading,
    InternalError,
    SkerryError,
    Unauthenticated,
    Unavailable,
)
from broker.services.consumer_groups import ConsumerGroupService
from broker.services.coordinators import Route
from broker.services.group_views import GroupViews
from broker.services.groups import GroupService
from broker.services.replication import ReplicationService
from broker.transport.boundary import Boundary
from broker.transport.slots import REPLY, Slot
from broker.v1 import access as v1_access
from broker.v1 import codec as c
from broker.v1.errors import from_group_refusal
from broker.v1.handlers.admin import AdminHandlers
from broker.v1.handlers.context import (
    _DEFAULT_REBALANCE_TIMEOUT_MS,
    _FETCH_MAX_MESSAGES,
    _HERE,
    _PULL_DEFAULT_BYTES,
    _PULL_MAX_BYTES,
    _TOPIC,
    _WRITE,
    BROKER_ONLY_COMMANDS,
    Connection,
    _check_reserved,
    _reserved_topic,
    _unreachable,
)
from broker.v1.handlers.forward import FORWARD_CID_PREFIX, GROUP_COMMANDS, command_line, relay
from broker.v1.handlers.replication import ReplicationHandlers
from data.names import IGGY_STORE_PREFIX
from groups.consumer_effects import HeartbeatRequest
from groups.kafka_errors import KafkaGroupError
from groups.records import GROUPS_TOPIC

__all__ = ["Handlers", "Slot", "BROKER_ONLY_COMMANDS"]

log = logging.getLogger("skerry.handlers")


class Handlers(ReplicationHandlers, AdminHandlers):
    """The V1 handler table over one ``BrokerCore``, the group service and the
    replication service (the shell passes all three in)."""

    def __init__(self, core: BrokerCore, groups: GroupService,
                 replication: ReplicationService) -> None:
        self.core = core
        self.groups = groups
        self.replication = replication
        self.boundary: Boundary[bytes] = Boundary(
            "v1", log, closing=lambda: core.closing, refusals=(SkerryError,),
            refused=_refused, internal=_internal)
        """Every exception -> an ERR line (``broker.transport.boundary``); the PRODUCE fast
        path (``broker.v1.protocol``) answers through it too."""
        self.check_produce: Callable[[Any, str], None] | None = None
        """With ACLs on (``broker/v1/access.py``), what a PRODUCE to a topic checks before it
        goes to the core (``_check_produce``: Write, and Create when it would create the
        topic); None without ACLs. The transport's fast path checks it too."""
        if core.access.enabled:
            self.check_produce = self._check_produce
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
        if self.boundary.shutting_down() and not isinstance(cmd, c.Ping):
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
            if not self._from_peer_broker(cmd, conn):
                _check_reserved(cmd)  # a broker forwards Iggy's own groups and topics
            if self.coordinators is not None and isinstance(cmd, GROUP_COMMANDS + (c.ListGroups,)):
                routed = self._route_group_command(cmd, slot, conn)
                if routed is not _HERE:
                    return routed
            return handler(cmd, slot, conn)
        except SkerryError as error:
            return c.err(cmd.cid, error)
        except Exception as error:
            return self.boundary.fault(cmd.name, cmd.cid, error)

    # ------------------------------------------------------------- cluster coordinators

    coordinators: Any = None
    """Set by the shell on a cluster member with etcd
    (``broker.services.coordinators.CoordinatorPartitions``): where each group is
    coordinated. None: every group is served here."""
    forward: Callable[[int, Callable[[str], bytes]], Deferred[Any]] | None = None
    """Set with ``coordinators``: ``forward(broker_id, build)`` sends ``build(cid)`` to that
    broker over the broker link and fires with its ``Reply``; its correlation ids start
    with ``FORWARD_CID_PREFIX``."""

    def _from_peer_broker(self, cmd: Any, conn: Connection) -> bool:
        """A group command another broker forwarded (its correlation id, and with
        authentication a broker principal): the Iggy transport's names are allowed."""
        if not cmd.cid.startswith(FORWARD_CID_PREFIX) or self.coordinators is None:
            return False
        return self.peer_users is None or getattr(conn, "principal", None) in self.peer_users

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
            pairs = {f"{g}:{t}" for g, t in self.group_views().list_groups()}
            for ok, reply in results:
                if ok and reply.ok and reply.payload.startswith("groups=["):
                    pairs.update(p for p in reply.payload[8:-1].split(" ") if p)
            return c.ok(cmd.cid, c.groups_payload(sorted(pairs)))

        d = DeferredList(asks, consumeErrors=True)
        self._later(cmd, d, merge, slot, conn)
        return None

    def _later(self, cmd: Any, d: Deferred[Any], render: Callable[[Any], bytes],
               slot: Slot, conn: Connection) -> None:
        """Fill ``slot`` from a Deferred result (or its error) and drain."""

        def done(result: Any) -> None:
            slot[REPLY] = self._render(cmd, result, render)
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
            slot[REPLY] = reply
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
        """PRODUCE: one message to the core's one door (``BrokerCore.produce``), answered
        through ``conn.produced`` with the slot as its token; refusals that change nothing
        (unknown topic, NOT_LEADER...) raise ``SkerryError`` at once. The transport's fast
        path builds the same request for a run of plain PRODUCEs."""
        if self.check_produce is not None:
            self.check_produce(conn, cmd.topic)
        self.core.produce(ProduceRequest(cmd.topic, cmd.partition, cmd.acks,
                                         (cmd.key.encode(),), (cmd.value,), (slot,),
                                         create=True, pid=cmd.pid, seq=cmd.seq),
                          conn.produced)
        return None

    def _check_produce(self, conn: Any, topic: str) -> None:
        """Write on the topic (a cached decision), and Create (on the cluster or the topic)
        when the produce would create it."""
        self.core.check_access(conn, _WRITE, _TOPIC, topic)
        if self.core.topic_config(topic) is None:
            self._check_create(conn, topic)

    def _check_create(self, conn: Any, topic: str) -> None:
        self.core.access.check_any(conn, ((Operation.CREATE, ResourceType.CLUSTER,
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
        as durable as ``acks`` asks (``BrokerCore.produce`` with ``whole``)."""
        idempotent = cmd.pid is not None

        def done(result: ProduceResult) -> None:
            if result.error is not None:
                slot[REPLY] = c.err(cmd.cid, result.error)
            else:
                slot[REPLY] = c.ok(cmd.cid, c.produce_batch_payload(
                    result.partition, result.offset, result.count, result.hw,
                    result.duplicates if idempotent else None))
            conn.drain()

        self.core.produce(ProduceRequest(cmd.topic, cmd.partition, cmd.acks, cmd.keys,
                                         cmd.values, whole=True, pid=cmd.pid, seq=cmd.seq),
                          done)
        return None

    def consume(self, cmd: c.Consume, slot: Slot, conn: Connection) -> bytes | None:
        if cmd.topic.startswith(IGGY_STORE_PREFIX) and self.core.topic_config(cmd.topic) is None:
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
        return c.ok(cmd.cid, c.HEARTBEAT_OK)

    def leave(self, cmd: c.Leave, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic)
        d = maybeDeferred(self.groups.leave, cmd.group, cmd.topic, cmd.member_id,
                          cmd.generation)
        self._later(cmd, d, lambda _: c.ok(cmd.cid, c.LEFT), slot, conn)
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
            self._later(cmd, d, lambda _: c.ok(cmd.cid, c.COMMITTED), slot, conn)
            return None
        d = maybeDeferred(self.groups.commit, cmd.group, cmd.topic, cmd.member_id,
                          cmd.generation, cmd.partition, cmd.offset)
        self._later(cmd, d, lambda _: c.ok(cmd.cid, c.COMMITTED), slot, conn)
        return None

    consumer_groups: ConsumerGroupService | None = None
    """Set by the shell: the KIP-848 consumer groups GROUP_HEARTBEAT serves (None: the
    command is refused)."""

    def group_heartbeat(self, cmd: c.GroupHeartbeat, slot: Slot,
                        conn: Connection) -> bytes | None:
        """``GROUP_HEARTBEAT``: one KIP-848 heartbeat (join, heartbeat, leave); the reply
        is the member's id, epoch, heartbeat interval, the partitions it may consume now
        and its target."""
        service = self.consumer_groups
        if service is None:
            raise BadRequest("GROUP_HEARTBEAT is not enabled on this broker")
        for topic in cmd.topics or ():
            if topic.startswith(IGGY_STORE_PREFIX):
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
        persisted = service.persist_count
        try:
            reply = service.heartbeat(request)
        except KafkaGroupError as refusal:
            raise from_group_refusal(refusal) from None
        assigned, target = service.assignment_of(cmd.group, reply.member_id)
        line = c.ok(cmd.cid, c.group_heartbeat_payload(
            reply.member_id, reply.member_epoch, reply.heartbeat_interval_ms, assigned, target))
        if service.persist_count == persisted:
            return line
        # The group changed: answered once __skerry_groups holds it, so what the member
        # acts on survives a restart or a coordinator failover.
        self._later(cmd, service.durable(), lambda _: line, slot, conn)
        return None

    def offset(self, cmd: c.Offset, slot: Slot, conn: Connection) -> bytes:
        config = self.core.topic_config(cmd.topic)
        if config is None:
            return c.ok(cmd.cid, c.offset_payload(0))
        if cmd.partition >= config.partitions:
            raise BadRequest(f"partition {cmd.partition} out of range; topic {cmd.topic} has "
                             f"{config.partitions} partitions")
        return c.ok(cmd.cid, c.offset_payload(
            self.groups.offset(cmd.group, cmd.topic, cmd.partition)))

    def group_views(self) -> GroupViews:
        """Classic and KIP-848 consumer groups as DESCRIBE_GROUP and LIST_GROUPS show
        them."""
        def partitions_for(topic: str) -> int:
            config = self.core.topic_config(topic)
            return 0 if config is None else config.partitions

        return GroupViews(self.groups, self.consumer_groups, hw_for=self.core.hw,
                          partitions_for=partitions_for)

    def describe_group(self, cmd: c.DescribeGroup, slot: Slot, conn: Connection) -> bytes:
        info = self.group_views().describe(cmd.group, cmd.topic)
        coordinator = None if self.coordinators is None else self.coordinators.broker_id
        return c.ok(cmd.cid, c.describe_group_payload(info, coordinator))

    def list_groups(self, cmd: c.ListGroups, slot: Slot, conn: Connection) -> bytes:
        pairs = self.group_views().list_groups()
        if self.core.access.enabled:  # groups the user may not Describe are left out
            pairs = [(g, t) for g, t in pairs
                     if self.core.allowed(conn, Operation.DESCRIBE, ResourceType.GROUP, g)]
        return c.ok(cmd.cid, c.groups_payload(f"{g}:{t}" for g, t in pairs))

    def admin_delete_group(self, cmd: c.AdminDeleteGroup, slot: Slot, conn: Connection) -> None:
        d = maybeDeferred(self.groups.delete_group, cmd.group, cmd.topic)
        self._later(cmd, d, lambda _: c.ok(cmd.cid, c.DELETED), slot, conn)
        return None

    def admin_reset_offsets(self, cmd: c.AdminResetOffsets, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic, cmd.partition)
        d = maybeDeferred(self.groups.reset_offsets, cmd.group, cmd.topic, cmd.target,
                          cmd.partition)
        self._later(cmd, d, lambda offsets: c.ok(cmd.cid, c.offsets_payload(offsets)),
                    slot, conn)
        return None

    def admin_commit(self, cmd: c.AdminCommit, slot: Slot, conn: Connection) -> None:
        self._group_topic(cmd.topic, cmd.partition)
        self._check_commit_offset(cmd.topic, cmd.partition, cmd.offset)
        d = maybeDeferred(self.groups.admin_commit, cmd.group, cmd.topic, cmd.partition,
                          cmd.offset)
        self._later(cmd, d, lambda _: c.ok(cmd.cid, c.COMMITTED), slot, conn)
        return None

def _refused(cid: str, error: BaseException) -> bytes:
    """A refusal's ERR line (its code from ``broker.v1.errors``)."""
    return c.err(cid, error)  # type: ignore[arg-type]


def _internal(cid: str, error: BaseException) -> bytes:
    """A bug's ERR line: ``INTERNAL``, without the bug's text."""
    return c.err(cid, InternalError())
