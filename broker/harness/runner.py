"""``skerry harness``: simulated consumers, chaos and invariant checks against a running broker.

Owns: the harness's I/O on asyncio streams: ``MemberConnection`` (the shared client's
pipelined connection, ``broker.client.aio``, that also tracks a member's last refreshed
session), ``SimConsumer`` (JOIN/SYNC, then HEARTBEAT every session timeout / 3 beside a
CONSUME/COMMIT loop; any GENERATION_MISMATCH means re-JOIN), the producer that feeds the
topic, the observer (DESCRIBE_GROUP every 20 ms), the prober (deliberately fenced requests
and OFFSET checks), the chaos executor, and ``run`` with its exit code. Every wait is
bounded: each request by ``request_timeout_s``, the whole run by duration + settle + a
fixed margin. It only ever connects to the one bootstrap address.

The rules live in ``broker.harness.check`` (pure); this module feeds it what was sent and
answered, with the monotonic times of both.

Must not import: Twisted, or any of the broker's own code (``broker.core``, ``broker.v1.codec``,
``groups``...) other than the Python client ``broker.client`` and its own
``broker.harness.check`` and ``broker.harness.chart``. The harness is a client and judges
the broker by its wire answers only.
"""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import sys
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TextIO

from broker.client.aio import Address, ClientError, Connection, ConnectionLost, Reply
from broker.client.codec import parse_messages
from broker.harness.check import (
    ChaosEvent,
    Checker,
    Observation,
    chaos_schedule,
    format_report,
)

__all__ = [
    "HarnessOptions",
    "MemberConnection",
    "SetupError",
    "run",
]

#: Requests whose acceptance refreshes a member's session (spec: each accepted one does).
REFRESHING = frozenset({"JOIN", "SYNC", "HEARTBEAT", "COMMIT"})
POLL_INTERVAL_S = 0.02  # DESCRIBE_GROUP observation period
IDLE_POLL_S = 0.05  # a consumer with nothing to read waits this long
PROBE_INTERVAL_S = 0.2  # one fencing probe this often
OFFSET_CHECK_INTERVAL_S = 0.5
CONSUME_MAX = 100
_MIN_PAUSE_MARGIN_S = 0.2


class SetupError(Exception):
    """The run could not start (no broker at the address, unusable topic or group)."""


@dataclass(frozen=True)
class HarnessOptions:
    """What ``skerry harness`` was asked to do."""

    host: str = "127.0.0.1"
    port: int = 9092
    consumers: int = 5
    duration_s: float = 30.0
    seed: int = 0
    assignor: str = "round_robin"
    session_timeout_ms: int = 1000
    topic: str = "harness"
    group: str = "harness"
    partitions: int = 12
    produce_rate: float = 200.0
    request_timeout_s: float = 5.0
    chart: str | None = None
    json_output: bool = False
    protocol: str = "classic"
    """``classic`` (JOIN/SYNC/HEARTBEAT) or ``consumer`` (KIP-848: GROUP_HEARTBEAT,
    ``broker.harness.kip848``); with ``consumer`` the session timeout is the broker's
    ``groups.consumer_session_timeout_ms`` and ``session_timeout_ms`` must name it."""

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def settle_s(self) -> float:
        """Quiet time after the chaos window: paused members resume, every death is
        resolved and the consumers catch up before the final checks."""
        return max(2.0, 3 * self.session_timeout_ms / 1000)


# ---------------------------------------------------------------------------- wire client

class MemberConnection(Connection):
    """The shared client's ``Connection`` (``broker.client.aio``) that also tracks what
    the broker last heard from the member using it: the send time of the last accepted
    refreshing request. ``request`` returns ERR answers instead of raising them: the
    harness records refusals as observations."""

    refreshing: frozenset[str] = REFRESHING
    """The commands whose acceptance refreshes the session (KIP-848 members: only
    GROUP_HEARTBEAT)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last_refresh_ok = float("-inf")
        self.on_reply = self._note_refresh

    def _note_refresh(self, command: str, reply: Reply) -> None:
        if reply.ok and command in self.refreshing:
            self.last_refresh_ok = max(self.last_refresh_ok, reply.sent)

    async def request(self, command: str, args: str | bytes = "", *,
                      timeout: float | None = None, check: bool = False) -> Reply:
        """Send one request and wait for its answer, OK or ERR; ``ClientError`` on a closed
        connection or when no answer came within the timeout (the connection is then
        dropped, since the answers after it could no longer be trusted to be on time)."""
        return await super().request(command, args, timeout=timeout, check=check)

    def refresh_anchor(self) -> float:
        """The latest moment the broker may have refreshed the member's session: the send
        time of its last accepted refreshing request, or of one still unanswered."""
        unanswered = [sent for command, sent in self.unanswered()
                      if command in self.refreshing]
        return max([self.last_refresh_ok, *unanswered])


def _assignment(reply: Reply) -> tuple[int, tuple[int, ...]]:
    return int(reply.field("generation")), tuple(reply.ints("assigned"))


def _messages(reply: Reply) -> list[tuple[int, bytes]]:
    """``messages=<offset>:<base64>,...`` of a CONSUME ... enc=b64 answer."""
    return [(m.offset, m.value) for m in parse_messages(reply, 0, b64=True)]


# ---------------------------------------------------------------------------- consumers

LIVE, PAUSED, KILLED, LEFT = "live", "paused", "killed", "left"


class SimConsumer:
    """One simulated group member on its own connection."""

    def __init__(self, harness: Harness, member_id: str) -> None:
        self.h = harness
        self.member_id = member_id
        self.state = "new"
        self.conn: MemberConnection | None = None
        self.generation = 0
        self.assigned: tuple[int, ...] = ()
        self.positions: dict[int, int] = {}
        self.epochs: dict[int, tuple[int, int]] = {}  # partition -> (epoch, acked floor)
        self.joining = False
        self._join_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect, JOIN and SYNC, then run the heartbeat and work loops."""
        self.conn = await self.h.connect(f"consumer {self.member_id}")
        self._set_state(LIVE)
        self.generation, self.assigned = 0, ()
        await self._join()
        self._task = self.h.spawn(self._supervise())

    def kill(self) -> float:
        """Drop the connection; returns the death anchor (see ``refresh_anchor``)."""
        assert self.conn is not None
        anchor = self.conn.refresh_anchor()
        self._set_state(KILLED)
        self._stop_task()
        self.conn.abort()
        return anchor

    async def pause(self, duration: float) -> None:
        """Go silent on the open connection for ``duration``, come back as a zombie that
        must be fenced, then re-join."""
        assert self.conn is not None
        paused_at = self.h.clock()
        self._set_state(PAUSED)
        await self._stop_task_and_wait()
        await self.conn.settle(self.h.options.request_timeout_s)
        self.h.checker.record_death(self.member_id, "pause", self.conn.refresh_anchor())
        old_generation, old_positions = self.generation, dict(self.positions)
        await asyncio.sleep(max(0.0, paused_at + duration - self.h.clock()))
        if self.h.stopping or self.conn.closed:
            return
        await self._zombie_probe(old_generation, old_positions)
        self._set_state(LIVE)
        try:
            await self._join()
        except ClientError as exc:
            self.h.checker.error(f"{self.member_id} resuming: {exc}")
            await self._reconnect()
        self._task = self.h.spawn(self._supervise())

    async def leave(self) -> None:
        """Stop and LEAVE the group (end of the run; answers are not judged). Other members
        leaving move the generation on, so each LEAVE goes with the generation a JOIN (of
        a current member: no rebalance) has just answered."""
        await self._stop_task_and_wait()
        conn = self.conn
        if conn is not None and not conn.closed and self.state == LIVE:
            opts = self.h.options
            try:
                for _ in range(5):
                    joined = await conn.request(
                        "JOIN", f"{self._ids()} session_timeout_ms={opts.session_timeout_ms}",
                        timeout=2.0)
                    if not joined.ok:
                        break
                    generation, _ = _assignment(joined)
                    left = await conn.request("LEAVE", f"{self._ids()} {generation}",
                                              timeout=2.0)
                    if left.ok or left.code != "GENERATION_MISMATCH":
                        break
            except ClientError:
                pass  # leaving is best effort: the session timeout evicts a member anyway
        self._set_state(LEFT)
        if conn is not None:
            await conn.close()

    async def quiesce(self) -> None:
        """Stop the loops and wait for every answer (before the final checks)."""
        await self._stop_task_and_wait()
        if self.conn is not None:
            await self.conn.settle(self.h.options.request_timeout_s)

    def _stop_task(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _stop_task_and_wait(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _set_state(self, state: str) -> None:
        self.state = state
        self.h.note_state(self.member_id, state)

    def _ids(self) -> str:
        return f"{self.h.options.group} {self.h.options.topic} {self.member_id}"

    # ------------------------------------------------------------------ loops

    async def _supervise(self) -> None:
        while self.state == LIVE and not self.h.stopping:
            loops = [asyncio.ensure_future(self._heartbeat_loop()),
                     asyncio.ensure_future(self._work_loop())]
            try:
                done, _ = await asyncio.wait(loops, return_when=asyncio.FIRST_EXCEPTION)
                for task in done:
                    task.result()
                return
            except ClientError as exc:
                if self.state != LIVE or self.h.stopping:
                    return  # killed or paused under our feet: not a failure
                self.h.checker.error(f"{self.member_id}: {exc}")
            finally:
                for task in loops:
                    task.cancel()
                await asyncio.gather(*loops, return_exceptions=True)
            await self._reconnect()

    async def _reconnect(self) -> None:
        """After an unexpected connection loss: a new connection and a new JOIN."""
        while self.state == LIVE and not self.h.stopping:
            await asyncio.sleep(0.1)
            try:
                if self.conn is not None:
                    self.conn.abort()
                self.conn = await self.h.connect(f"consumer {self.member_id}")
                await self._join()
                return
            except ClientError as exc:
                self.h.checker.error(f"{self.member_id} reconnecting: {exc}")

    async def _heartbeat_loop(self) -> None:
        interval = self.h.options.session_timeout_ms / 3000
        while True:
            await asyncio.sleep(interval)
            generation = self.generation
            reply = await self._request("HEARTBEAT", f"{self._ids()} {generation}")
            if not reply.ok:
                await self._refused("HEARTBEAT", reply, generation)

    async def _work_loop(self) -> None:
        while True:
            generation, assigned = self.generation, self.assigned
            progressed = False
            for partition in assigned:
                if self.generation != generation or self.joining:
                    break
                progressed = await self._consume(generation, partition) or progressed
            if not progressed:
                await asyncio.sleep(IDLE_POLL_S)

    async def _consume(self, generation: int, partition: int) -> bool:
        """One CONSUME and its COMMIT; True when messages were consumed."""
        checker, opts = self.h.checker, self.h.options
        epoch = self.epochs.get(partition)
        if epoch is None:
            floor = checker.acked_floor(partition)
            reply = await self._request("OFFSET", f"{opts.group} {opts.topic} {partition}")
            if not reply.ok:
                checker.error(f"{self.member_id}: OFFSET refused: {reply.code} {reply.payload}")
                return False
            committed = int(reply.field("offset"))
            checker.record_offset(partition, committed, floor, reply.answered)
            if self.generation != generation:
                return False
            epoch = (checker.new_epoch(), floor)
            self.epochs[partition] = epoch
            self.positions[partition] = committed
        position = self.positions[partition]
        reply = await self._request(
            "CONSUME", f"{opts.topic} {partition} {position} max={CONSUME_MAX} enc=b64")
        if not reply.ok:
            checker.error(f"{self.member_id}: CONSUME refused: {reply.code} {reply.payload}")
            return False
        messages = _messages(reply)
        if not messages:
            return False
        for offset, value in messages:
            checker.record_delivery(epoch[0], partition, offset, value, epoch[1], reply.answered)
        if self.epochs.get(partition) is epoch:
            self.positions[partition] = messages[-1][0] + 1
        offset = messages[-1][0] + 1
        reply = await self._request(
            "COMMIT", f"{self._ids()} {generation} {partition} {offset}")
        if reply.ok:
            checker.record_commit_ack(partition, offset)
        else:
            await self._refused("COMMIT", reply, generation)
        return True

    async def _refused(self, command: str, reply: Reply, generation: int) -> None:
        if reply.code == "GENERATION_MISMATCH":
            await self._rejoin(generation)
        else:
            self.h.checker.error(f"{self.member_id}: {command} refused: {reply.code} "
                                 f"{reply.payload}")

    async def _request(self, command: str, args: str) -> Reply:
        if self.conn is None:
            raise ConnectionLost(f"{self.member_id}: not connected")
        return await self.conn.request(command, args)

    # ------------------------------------------------------------------ joining

    async def _rejoin(self, failed_generation: int) -> None:
        async with self._join_lock:
            if self.generation == failed_generation:
                await self._join()

    async def _join(self) -> None:
        """JOIN, then SYNC to the generation JOIN answered; again while a rebalance
        slips in between."""
        checker, opts = self.h.checker, self.h.options
        self.joining = True
        try:
            for _ in range(50):
                floor = checker.generation_floor()
                reply = await self._request(
                    "JOIN", f"{self._ids()} assignor={opts.assignor} "
                            f"session_timeout_ms={opts.session_timeout_ms}")
                if not reply.ok:
                    checker.error(f"{self.member_id}: JOIN refused: {reply.code} "
                                  f"{reply.payload}")
                    await asyncio.sleep(0.1)
                    continue
                generation, assigned = _assignment(reply)
                checker.record_assignment(self.member_id, generation, assigned, source="JOIN",
                                          floor=floor, answered=reply.answered)
                floor = checker.generation_floor()
                reply = await self._request("SYNC", f"{self._ids()} {generation}")
                if reply.ok:
                    generation, assigned = _assignment(reply)
                    checker.record_assignment(self.member_id, generation, assigned,
                                              source="SYNC", floor=floor,
                                              answered=reply.answered)
                    self._adopt(generation, assigned)
                    return
                if reply.code != "GENERATION_MISMATCH":
                    checker.error(f"{self.member_id}: SYNC refused: {reply.code} "
                                  f"{reply.payload}")
            raise ConnectionLost(f"{self.member_id}: could not join in 50 attempts")
        finally:
            self.joining = False

    def _adopt(self, generation: int, assigned: tuple[int, ...]) -> None:
        if generation != self.generation:
            self.positions.clear()
            self.epochs.clear()
        self.generation, self.assigned = generation, assigned

    async def _zombie_probe(self, generation: int, positions: dict[int, int]) -> None:
        """Back from a pause longer than the session timeout: the old generation must be
        refused (COMMIT of what it was reading, else a HEARTBEAT)."""
        checker = self.h.checker
        try:
            if positions:
                partition, offset = sorted(positions.items())[0]
                reply = await self._request(
                    "COMMIT", f"{self._ids()} {generation} {partition} {offset}")
                checker.record_probe("zombie_commit", reply.ok, reply.code, reply.answered,
                                     f"{self.member_id} generation {generation} partition "
                                     f"{partition}")
            else:
                reply = await self._request("HEARTBEAT", f"{self._ids()} {generation}")
                checker.record_probe("zombie_heartbeat", reply.ok, reply.code, reply.answered,
                                     f"{self.member_id} generation {generation}")
        except ClientError as exc:
            checker.error(f"{self.member_id} zombie probe: {exc}")


# ---------------------------------------------------------------------------- the run

@dataclass
class _Timeline:
    """What the chart draws: member states and chaos events over time."""

    states: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    chaos: list[tuple[float, str, str]] = field(default_factory=list)


class Harness:
    """One run: setup, consumers, producer, observer, prober, chaos, report."""

    def __init__(self, options: HarnessOptions,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.clock = clock
        self.checker = Checker(options.session_timeout_ms,
                               incremental=options.protocol == "consumer")
        self.consumers: dict[str, SimConsumer] = {}
        self.stopping = False
        self.chaos_counts: Counter[str] = Counter()
        self.timeline = _Timeline()
        self.partitions = options.partitions
        self.started = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._next_member = 0
        self.producing = True
        self._last_committed: list[int] = []

    async def connect(self, name: str) -> MemberConnection:
        """A connection for ``name`` (a consumer, the observer...); ``ClientError`` with the
        shared client's message when the address is wrong."""
        conn = await MemberConnection.open(Address(self.options.host, self.options.port),
                                           self.options.request_timeout_s, self.clock)
        assert isinstance(conn, MemberConnection)
        if self.options.protocol == "consumer":  # KIP-848: only heartbeats refresh
            conn.refreshing = frozenset({"GROUP_HEARTBEAT"})
        return conn

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            self.checker.error(f"task failed: {type(exc).__name__}: {exc}")

    def note_state(self, member: str, state: str) -> None:
        self.timeline.states.setdefault(member, []).append((self.clock(), state))

    def live_members(self) -> frozenset[str]:
        return frozenset(m for m, c in self.consumers.items() if c.state == LIVE)

    # ------------------------------------------------------------------ setup

    async def setup(self) -> MemberConnection:
        """Check the broker answers, create (or adopt) the topic, refuse a group that
        already has members."""
        try:
            control = await self.connect("control")
        except ClientError as exc:
            raise SetupError(str(exc)) from None
        try:
            await self._prepare(control)
        except (SetupError, ClientError) as exc:
            await control.close()
            raise SetupError(str(exc)) from None
        return control

    async def _prepare(self, control: MemberConnection) -> None:
        opts = self.options
        ping = await control.request("PING")
        if not ping.ok:
            raise SetupError(f"{opts.bootstrap} answered PING with {ping.code} {ping.payload}")
        created = await control.request(
            "ADMIN_CREATE_TOPIC", f"{opts.topic} {opts.partitions} 1")
        if not created.ok:
            meta = await control.request("METADATA", opts.topic)
            if not meta.ok:
                raise SetupError(f"cannot create topic {opts.topic}: {created.code} "
                                 f"{created.payload}")
            self.partitions = int(meta.field("partitions"))
        described = await control.request("DESCRIBE_GROUP", f"{opts.group} {opts.topic}")
        if described.ok and described.items("members"):
            raise SetupError(f"group {opts.group} on topic {opts.topic} already has members "
                             f"{described.items('members')}; use another --group")
        self.checker.start_generation = int(described.field("generation")) \
            if described.ok else 0

    # ------------------------------------------------------------------ main

    async def run(self) -> dict[str, Any]:
        opts = self.options
        control = await self.setup()
        self.started = self.clock()
        for _ in range(opts.consumers):
            await self._add_member()
        workers = [self.spawn(self._observe()), self.spawn(self._probe()),
                   self.spawn(self._produce())]
        chaos_start = self.clock()
        await self._chaos(chaos_start)
        await asyncio.sleep(max(0.0, chaos_start + opts.duration_s - self.clock()))
        self.producing = False
        await asyncio.sleep(opts.settle_s)
        # Stop: members first (pauses, joins, loops), then the observer and prober.
        self.stopping = True
        members = [t for t in self._tasks if t not in workers]
        for task in members:
            task.cancel()
        await asyncio.gather(*members, return_exceptions=True)
        for consumer in self.consumers.values():
            await consumer.quiesce()
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        await self._final_checks(control)
        for consumer in list(self.consumers.values()):
            await consumer.leave()
        await control.close()
        return self.report()

    async def _add_member(self, member_id: str | None = None) -> None:
        if member_id is None:
            member_id = f"c{self._next_member:03d}"
            self._next_member += 1
        consumer = self.consumers.get(member_id)
        if consumer is None:
            if self.options.protocol == "consumer":
                from broker.harness.kip848 import HeartbeatConsumer

                consumer = HeartbeatConsumer(self, member_id)
            else:
                consumer = SimConsumer(self, member_id)
        self.consumers[member_id] = consumer
        try:
            await consumer.start()
        except ClientError as exc:
            self.checker.error(f"{member_id} could not start: {exc}")
            consumer._set_state(KILLED)

    # ------------------------------------------------------------------ chaos

    async def _chaos(self, start: float) -> None:
        opts = self.options
        for event in chaos_schedule(opts.seed, opts.duration_s, opts.session_timeout_ms):
            await asyncio.sleep(max(0.0, start + event.at - self.clock()))
            await self._chaos_step(event)

    async def _chaos_step(self, event: ChaosEvent) -> None:
        opts = self.options
        now = self.clock()
        if event.action in ("kill", "pause"):
            live = sorted(m for m, c in self.consumers.items()
                          if c.state == LIVE and not c.joining and c.generation > 0)
            if len(self.live_members()) <= 1 or not live:
                self._skip(now, event.action, "only one live member" if live
                           else "every live member is joining")
                return
            consumer = self.consumers[live[int(event.pick * len(live))]]
            self.timeline.chaos.append((now, event.action, consumer.member_id))
            self.chaos_counts[event.action] += 1
            if event.action == "kill":
                self.checker.record_death(consumer.member_id, "kill", consumer.kill())
            else:
                minimum = opts.session_timeout_ms / 1000 + self.checker.slack_s \
                    + _MIN_PAUSE_MARGIN_S
                self.spawn(consumer.pause(max(event.pause_s, minimum)))
            return
        live = len(self.live_members())
        if event.action == "restart":
            dead = sorted(m for m, c in self.consumers.items()
                          if c.state == KILLED and self.checker.resolved_death(m))
            if dead:
                member = dead[int(event.pick * len(dead))]
                self.timeline.chaos.append((now, "restart", member))
                self.chaos_counts["restart"] += 1
                self.spawn(self._add_member(member))
                return
            if live >= opts.consumers:
                self._skip(now, "restart", "no killed member to restart")
                return
        elif live >= max(opts.consumers + 1, opts.consumers * 3 // 2):
            self._skip(now, "add", f"already {live} live members")
            return
        self.timeline.chaos.append((now, "add", f"c{self._next_member:03d}"))
        self.chaos_counts["add"] += 1
        self.spawn(self._add_member())

    def _skip(self, now: float, action: str, why: str) -> None:
        self.chaos_counts["skipped"] += 1
        self.timeline.chaos.append((now, f"skip {action}", why))

    # ------------------------------------------------------------------ workers

    async def _observe(self) -> None:
        """DESCRIBE_GROUP every POLL_INTERVAL_S, fed to the checker."""
        opts, checker = self.options, self.checker
        conn = await self.connect("observer")
        try:
            while True:
                tick = self.clock()
                floor = checker.generation_floor()
                refreshed = {m: c.conn.last_refresh_ok for m, c in self.consumers.items()
                             if c.state == LIVE and c.conn is not None}
                reply = await conn.request("DESCRIBE_GROUP", f"{opts.group} {opts.topic}")
                if reply.ok:
                    members = {}
                    for entry in reply.items("members"):
                        member, _, parts = entry.partition(":")
                        members[member] = tuple(int(p) for p in parts.split(",") if p)
                    checker.record_describe(Observation(
                        sent=reply.sent, answered=reply.answered,
                        generation=int(reply.field("generation")),
                        state=reply.field("state"), members=members,
                        partitions=len(reply.items("partitions")),
                        live=self.live_members()), floor=floor, refreshed=refreshed)
                    self._last_committed = reply.ints("committed")
                elif reply.code != "GENERATION_MISMATCH":
                    checker.error(f"DESCRIBE_GROUP refused: {reply.code} {reply.payload}")
                await asyncio.sleep(max(0.0, tick + POLL_INTERVAL_S - self.clock()))
        except ClientError as exc:
            checker.error(f"observer: {exc}")
        finally:
            await conn.close()

    async def _probe(self) -> None:
        """Requests the broker must fence, one every PROBE_INTERVAL_S, and OFFSET checks."""
        opts, checker = self.options, self.checker
        conn = await self.connect("prober")
        rng = random.Random(self.options.seed + 1)
        kinds = ("unknown_member", "stale_generation", "not_owner")
        if opts.protocol == "consumer":
            from broker.harness.kip848 import probe_consumer_group

            await probe_consumer_group(self, conn, rng)
            return
        count = 0
        last_offsets = self.clock()
        try:
            while True:
                await asyncio.sleep(PROBE_INTERVAL_S)
                generation = checker.generation_floor()
                kind = kinds[count % len(kinds)]
                count += 1
                ids = f"{opts.group} {opts.topic}"
                if kind == "unknown_member" and generation > 0:
                    reply = await conn.request("HEARTBEAT", f"{ids} ghost-{count} {generation}")
                    checker.record_probe(kind, reply.ok, reply.code, reply.answered,
                                         f"ghost-{count} generation {generation}")
                elif kind == "stale_generation" and generation > 0:
                    live = sorted(self.live_members())
                    if live:
                        member = rng.choice(live)
                        reply = await conn.request("HEARTBEAT",
                                                   f"{ids} {member} {generation - 1}")
                        checker.record_probe(kind, reply.ok, reply.code, reply.answered,
                                             f"{member} generation {generation - 1}")
                elif kind == "not_owner":
                    await self._probe_not_owner(conn, rng)
                if self.clock() - last_offsets >= OFFSET_CHECK_INTERVAL_S:
                    last_offsets = self.clock()
                    await self._check_offsets(conn)
        except ClientError as exc:
            checker.error(f"prober: {exc}")
        finally:
            await conn.close()

    async def _probe_not_owner(self, conn: MemberConnection, rng: random.Random) -> None:
        """COMMIT, in the newest observed generation, of a partition that the committing
        member does not own in it; the offset is the committed one, so even a wrongly
        accepted probe moves nothing."""
        if not self.checker.observations or not self._last_committed:
            return
        obs = self.checker.observations[-1]
        candidates = [(m, p) for m in sorted(obs.members) for p in range(obs.partitions)
                      if p not in obs.members[m] and p < len(self._last_committed)]
        if not candidates:
            return
        member, partition = rng.choice(candidates)
        opts = self.options
        reply = await conn.request(
            "COMMIT", f"{opts.group} {opts.topic} {member} {obs.generation} {partition} "
                      f"{self._last_committed[partition]}")
        self.checker.record_probe("not_owner", reply.ok, reply.code, reply.answered,
                                  f"{member} partition {partition} generation {obs.generation}")

    async def _check_offsets(self, conn: MemberConnection) -> None:
        """OFFSET of every partition, pipelined; none may be below an acknowledged commit."""
        opts, checker = self.options, self.checker
        floors = {p: checker.acked_floor(p) for p in range(self.partitions)}
        replies = await asyncio.gather(*(
            conn.request("OFFSET", f"{opts.group} {opts.topic} {p}")
            for p in range(self.partitions)))
        for p, reply in zip(range(self.partitions), replies, strict=True):
            if reply.ok:
                checker.record_offset(p, int(reply.field("offset")), floors[p], reply.answered)
            else:
                checker.error(f"OFFSET refused: {reply.code} {reply.payload}")

    async def _produce(self) -> None:
        """Feed the topic at ``produce_rate`` messages per second, round-robin over the
        partitions, until the chaos window ends."""
        opts, checker = self.options, self.checker
        conn = await self.connect("producer")
        run_id = secrets.token_hex(3)
        seq = 0
        budget = 0.0
        tick = 0.05
        try:
            while self.producing:
                budget += opts.produce_rate * tick
                batch = []
                while budget >= 1:
                    budget -= 1
                    batch.append((seq % self.partitions, f"m{seq}-{run_id}"))
                    seq += 1
                started = self.clock()
                replies = await asyncio.gather(*(
                    conn.request("PRODUCE", f"{opts.topic} k:{value} partition={partition}")
                    for partition, value in batch))
                for (partition, value), reply in zip(batch, replies, strict=True):
                    if reply.ok:
                        checker.record_produced(partition, int(reply.field("offset")),
                                                value.encode())
                    else:
                        checker.error(f"PRODUCE refused: {reply.code} {reply.payload}")
                await asyncio.sleep(max(0.0, started + tick - self.clock()))
        except ClientError as exc:
            checker.error(f"producer: {exc}")
        finally:
            await conn.close()

    async def _final_checks(self, conn: MemberConnection) -> None:
        """After the consumers stopped: every acknowledged commit is still there."""
        try:
            await self._check_offsets(conn)
        except ClientError as exc:
            self.checker.error(f"final OFFSET check: {exc}")
        self.checker.finish(self.clock())

    # ------------------------------------------------------------------ report

    def report(self) -> dict[str, Any]:
        opts = self.options
        report = self.checker.summary()
        report["setup"] = {
            "bootstrap": opts.bootstrap, "consumers": opts.consumers,
            "duration_s": opts.duration_s, "session_timeout_ms": opts.session_timeout_ms,
            "assignor": opts.assignor, "protocol": opts.protocol, "seed": opts.seed,
            "topic": opts.topic,
            "group": opts.group, "partitions": self.partitions,
            "produce_rate": opts.produce_rate,
            "elapsed_s": round(self.clock() - self.started, 3),
        }
        report["chaos"] = {a: self.chaos_counts.get(a, 0)
                           for a in ("kill", "pause", "restart", "add", "skipped")}
        report["chaos_log"] = [[round(t - self.started, 3), action, member]
                               for t, action, member in self.timeline.chaos]
        report["passed"] = report["violations"] == 0 and report["errors"] == 0
        return report


def _where(task: asyncio.Task[Any]) -> str:
    """Where a task is waiting: its innermost frame as ``function:line``."""
    stack = task.get_stack()
    if not stack:
        return "?"
    frame = stack[-1]
    return f"{frame.f_code.co_name}:{frame.f_lineno}"


def _chart_unavailable() -> str | None:
    """Why ``--chart`` cannot work here, or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return ("--chart needs matplotlib, which is not installed; install it with "
                "pip install 'skerry[harness]' (or pip install matplotlib), or run "
                "without --chart")
    return None


def run(options: HarnessOptions, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the harness and print its report (to ``out``, default stdout; progress and
    setup errors to ``err``, default stderr); 0 when no invariant was violated and nothing
    failed, 1 otherwise, 2 when the run could not start."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    if options.chart:
        why = _chart_unavailable()
        if why is not None:
            print(f"skerry harness: {why}", file=err)
            return 2
    harness = Harness(options)
    limit = options.duration_s + options.settle_s + 60 + options.consumers * 0.5
    print(f"skerry harness: {options.consumers} consumers against {options.bootstrap}, "
          f"{options.duration_s:g} s of chaos (seed {options.seed}), topic {options.topic}, "
          f"group {options.group}", file=err, flush=True)

    async def bounded() -> dict[str, Any]:
        main = asyncio.ensure_future(harness.run())
        done, _ = await asyncio.wait([main], timeout=limit)
        if done:
            return main.result()
        # A hang is a harness bug: say where every task was stuck, then give up.
        stuck = sorted({_where(task) for task in asyncio.all_tasks()
                        if task is not asyncio.current_task()})
        harness.checker.error(f"the run did not finish within {limit:.0f} s; waiting in: "
                              + "; ".join(stuck))
        main.cancel()
        await asyncio.wait([main], timeout=5)
        return harness.report()

    try:
        report = asyncio.run(bounded())
    except SetupError as exc:
        print(f"skerry harness: {exc}", file=err)
        return 2
    if options.chart:
        from broker.harness.chart import write_chart

        write_chart(options.chart, harness.checker, harness.timeline, start=harness.started,
                    partitions=harness.partitions,
                    title=f"skerry harness: {options.consumers} consumers, seed {options.seed}")
    if options.json_output:
        out.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
    else:
        out.write(format_report(report) + "\n")
        if options.chart:
            out.write(f"chart: {options.chart}\n")
    return 0 if report["passed"] else 1
