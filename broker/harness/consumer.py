"""The harness's simulated consumers: ``MemberConnection`` (the shared client's pipelined
connection, ``broker.client.aio``, that also tracks a member's last refreshed session) and
``SimConsumer`` (JOIN/SYNC, then HEARTBEAT every session timeout / 3 beside a CONSUME/COMMIT
loop; any GENERATION_MISMATCH means re-JOIN). ``broker.harness.runner`` runs them.

Must not import: Twisted, or any of the broker's own code other than the Python client
``broker.client`` and ``broker.harness.check``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from broker.client.aio import ClientError, Connection, ConnectionLost, Reply
from broker.client.codec import parse_messages

#: Requests whose acceptance refreshes a member's session (spec: each accepted one does).
REFRESHING = frozenset({"JOIN", "SYNC", "HEARTBEAT", "COMMIT"})


IDLE_POLL_S = 0.05  # a consumer with nothing to read waits this long


CONSUME_MAX = 100


if TYPE_CHECKING:
    from broker.harness.runner import Harness


LIVE, PAUSED, KILLED, LEFT = "live", "paused", "killed", "left"

class MemberConnection(Connection):
    """The shared client's ``Connection`` (``broker.client.aio``) that also tracks what
    the broker last heard from the member using it: the send and the answer time of the
    last accepted refreshing request (the broker refreshed the session somewhere between
    the two). ``request`` returns ERR answers instead of raising them: the harness records
    refusals as observations."""

    refreshing: frozenset[str] = REFRESHING
    """The commands whose acceptance refreshes the session (KIP-848 members: only
    GROUP_HEARTBEAT)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last_refresh_ok = float("-inf")
        """The send time of the last accepted refreshing request: the earliest moment the
        broker may have refreshed the session with it (a member must stay listed until
        this + session timeout)."""
        self.last_refresh_answered = float("-inf")
        """The answer time of that request: the latest moment the broker may have
        refreshed the session with it (a member that stopped must be gone by this +
        session timeout + slack)."""
        self.on_reply = self._note_refresh

    def _note_refresh(self, command: str, reply: Reply) -> None:
        if reply.ok and command in self.refreshing:
            self.last_refresh_ok = max(self.last_refresh_ok, reply.sent)
            self.last_refresh_answered = max(self.last_refresh_answered, reply.answered)

    async def request(self, command: str, args: str | bytes = "", *,
                      timeout: float | None = None, check: bool = False) -> Reply:
        """Send one request and wait for its answer, OK or ERR; ``ClientError`` on a closed
        connection or when no answer came within the timeout (the connection is then
        dropped, since the answers after it could no longer be trusted to be on time)."""
        return await super().request(command, args, timeout=timeout, check=check)

    def refresh_anchor(self, now: float) -> float:
        """The latest moment the broker may have refreshed the member's session, as seen
        when it stops talking at ``now``: the answer time of its last accepted refreshing
        request, or ``now`` when a refreshing request is still unanswered (the broker may
        yet read it; its send time would be only a lower bound)."""
        if any(command in self.refreshing for command, _ in self.unanswered()):
            return now
        return self.last_refresh_answered


def _assignment(reply: Reply) -> tuple[int, tuple[int, ...]]:
    return int(reply.field("generation")), tuple(reply.ints("assigned"))


def _messages(reply: Reply) -> list[tuple[int, bytes]]:
    """``messages=<offset>:<base64>,...`` of a CONSUME ... enc=b64 answer."""
    return [(m.offset, m.value) for m in parse_messages(reply, 0, b64=True)]


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
        anchor = self.conn.refresh_anchor(self.h.clock())
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
        self.h.checker.record_death(self.member_id, "pause",
                                    self.conn.refresh_anchor(self.h.clock()))
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
        """One CONSUME and its COMMIT; True when messages were consumed. The one
        consume-and-commit step of both kinds of member: ``generation`` is the classic
        generation or the KIP-848 member epoch (``broker.harness.kip848``), and the COMMIT
        line is the same for both. A generation that moved on while OFFSET was answered, or
        a partition re-read from its commit meanwhile, leaves the position alone."""
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

