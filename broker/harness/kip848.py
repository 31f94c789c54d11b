"""``skerry harness --protocol consumer``: simulated members of a KIP-848 consumer group,
driven by V1's GROUP_HEARTBEAT (docs/protocol.md), under the same chaos, producer,
observer and report as the classic members of ``broker.harness.runner``.

Owns: ``HeartbeatConsumer`` (joins with member epoch 0, heartbeats every ``interval_ms``
the broker names (at most a third of the session timeout) reporting the partitions it
holds in ``owned=``, consumes exactly what the last answer assigned, gives up a revoked
partition before the heartbeat that reports it released, commits with its member epoch,
and on GENERATION_MISMATCH stops everything and joins again at epoch 0) and
``probe_consumer_group`` (requests that must be fenced: a heartbeat from an unknown
member, one with an epoch ahead of the member's; and the OFFSET checks).

The exclusivity invariant is judged on what the members hold, as the clients see it
(``Checker.record_held``/``record_released``): a partition the broker hands to a member
while another still holds it (that member has not sent the heartbeat releasing it, and
has not been silent for a session timeout) is owned twice.

Must not import: Twisted, or any of the broker's own code other than the Python client
``broker.client`` and the harness's own modules (the harness judges the broker by its
wire answers only).
"""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING

from broker.client.aio import ClientError, ConnectionLost, Reply
from broker.harness.consumer import (
    IDLE_POLL_S,
    LEFT,
    LIVE,
    MemberConnection,
    SimConsumer,
)
from broker.harness.runner import OFFSET_CHECK_INTERVAL_S, PROBE_INTERVAL_S

if TYPE_CHECKING:
    from broker.harness.runner import Harness

__all__ = ["HEARTBEAT_ONLY", "HeartbeatConsumer", "probe_consumer_group"]

HEARTBEAT_ONLY = frozenset({"GROUP_HEARTBEAT"})
"""In a KIP-848 group only heartbeats refresh the session (a COMMIT does not)."""


def _partitions(reply: Reply, key: str, topic: str) -> tuple[int, ...]:
    """The partitions of ``topic`` in a ``key=[t:p ...]`` list."""
    out = []
    for item in reply.items(key):
        name, _, partition = item.rpartition(":")
        if name == topic:
            out.append(int(partition))
    return tuple(sorted(out))


class HeartbeatConsumer(SimConsumer):
    """One simulated KIP-848 member on its own connection. ``generation`` is its member
    epoch (0 until it has joined). It consumes and commits with the classic member's loop
    (``SimConsumer._consume``: a COMMIT carries the member epoch where a classic one
    carries the generation), one partition at a time under the work lock."""

    def __init__(self, harness: Harness, member_id: str) -> None:
        super().__init__(harness, member_id)
        self.interval_s = harness.options.session_timeout_ms / 3000
        self._work_lock = asyncio.Lock()
        self._releasing: set[int] = set()
        self._wake = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    def kill(self) -> float:
        self._stop_holding()
        return super().kill()

    async def pause(self, duration: float) -> None:
        self._stop_holding()  # the loops stop now; the next join starts from nothing
        await super().pause(duration)

    def _stop_holding(self) -> None:
        self.h.checker.record_released(self.member_id, (*self.assigned, *self._releasing))

    async def leave(self) -> None:
        """Stop and leave the group (``GROUP_HEARTBEAT <g> <m> leave``; best effort)."""
        await self._stop_task_and_wait()
        conn = self.conn
        if conn is not None and not conn.closed and self.state == LIVE:
            self._give_up_all()
            try:
                await conn.request("GROUP_HEARTBEAT", f"{self._group_ids()} leave",
                                   timeout=2.0)
            except ClientError:
                pass  # the session timeout removes a member anyway
        self._set_state(LEFT)
        if conn is not None:
            await conn.close()

    def _group_ids(self) -> str:
        return f"{self.h.options.group} {self.member_id}"

    def _give_up_all(self) -> None:
        """Stop consuming everything at once (joining again, leaving)."""
        self._stop_holding()
        self._releasing.clear()
        self.assigned = ()
        self.positions.clear()
        self.epochs.clear()

    # ------------------------------------------------------------------ heartbeats

    async def _join(self) -> None:
        """Join (again) with member epoch 0, owning nothing."""
        checker, opts = self.h.checker, self.h.options
        self.joining = True
        self._give_up_all()
        try:
            for _ in range(50):
                reply = await self._request(
                    "GROUP_HEARTBEAT",
                    f"{self._group_ids()} 0 topics={opts.topic} assignor={opts.assignor} "
                    f"rebalance_timeout_ms={max(3 * opts.session_timeout_ms, 3000)} owned=")
                if reply.ok:
                    self._answered(reply)
                    return
                checker.error(f"{self.member_id}: join refused: {reply.code} {reply.payload}")
                await asyncio.sleep(0.1)
            raise ConnectionLost(f"{self.member_id}: could not join in 50 attempts")
        finally:
            self.joining = False

    def _answered(self, reply: Reply) -> None:
        """Adopt an answer: the member epoch, and exactly the partitions it assigns (newly
        assigned ones are held from now on; revoked ones are dropped at once and reported
        released by the next heartbeat, sent without waiting for the interval)."""
        opts = self.h.options
        self.generation = int(reply.field("epoch"))
        interval = int(reply.field("interval_ms")) / 1000
        self.interval_s = min(interval, opts.session_timeout_ms / 3000)
        new = _partitions(reply, "assigned", opts.topic)
        added = sorted(set(new) - set(self.assigned))
        removed = set(self.assigned) - set(new)
        if added:
            anchors = {m: c.conn.last_refresh_ok for m, c in self.h.consumers.items()
                       if c.conn is not None}
            self.h.checker.record_held(self.member_id, added, reply.answered, anchors=anchors)
        for p in removed:
            self.positions.pop(p, None)
            self.epochs.pop(p, None)
        for p in added:  # read from the committed offset
            self.positions.pop(p, None)
            self.epochs.pop(p, None)
        self._releasing |= removed
        self.assigned = new
        if removed:
            self._wake.set()

    async def _heartbeat_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval_s)
            except TimeoutError:
                pass
            self._wake.clear()
            async with self._work_lock:  # no CONSUME/COMMIT in flight meanwhile
                epoch = self.generation
                owned = ",".join(f"{self.h.options.topic}:{p}" for p in self.assigned)
                self.h.checker.record_released(self.member_id, self._releasing)
                self._releasing.clear()
                reply = await self._request("GROUP_HEARTBEAT",
                                            f"{self._group_ids()} {epoch} owned={owned}")
                if reply.ok:
                    self._answered(reply)
                else:
                    await self._refused("GROUP_HEARTBEAT", reply, epoch)

    async def _work_loop(self) -> None:
        while True:
            progressed = False
            for partition in self.assigned:
                async with self._work_lock:
                    if partition not in self.assigned or self.joining:
                        continue
                    progressed = await self._consume(self.generation, partition) \
                        or progressed
            if not progressed:
                await asyncio.sleep(IDLE_POLL_S)

    async def _zombie_probe(self, generation: int, positions: dict[int, int]) -> None:
        """Back from a pause longer than the session timeout: the member was fenced, so its
        old epoch must be refused (a COMMIT of what it was reading, else a heartbeat)."""
        checker, opts = self.h.checker, self.h.options
        try:
            if positions:
                partition, offset = sorted(positions.items())[0]
                reply = await self._request(
                    "COMMIT", f"{opts.group} {opts.topic} {self.member_id} {generation} "
                              f"{partition} {offset}")
                checker.record_probe("zombie_commit", reply.ok, reply.code, reply.answered,
                                     f"{self.member_id} epoch {generation} partition "
                                     f"{partition}")
            else:
                reply = await self._request("GROUP_HEARTBEAT",
                                            f"{self._group_ids()} {generation} owned=")
                checker.record_probe("zombie_heartbeat", reply.ok, reply.code, reply.answered,
                                     f"{self.member_id} epoch {generation}")
        except ClientError as exc:
            checker.error(f"{self.member_id} zombie probe: {exc}")


async def probe_consumer_group(h: Harness, conn: MemberConnection,
                               rng: random.Random) -> None:
    """Requests the broker must fence, one every PROBE_INTERVAL_S (a heartbeat from a
    member that never joined; one from a live member with an epoch ahead of its own,
    which changes nothing), and the OFFSET checks."""
    opts, checker = h.options, h.checker
    count = 0
    last_offsets = h.clock()
    try:
        while True:
            await asyncio.sleep(PROBE_INTERVAL_S)
            count += 1
            if count % 2:
                reply = await conn.request("GROUP_HEARTBEAT",
                                           f"{opts.group} ghost-{count} 1 owned=")
                checker.record_probe("unknown_member", reply.ok, reply.code, reply.answered,
                                     f"ghost-{count} epoch 1")
            else:
                live = sorted(m for m, c in h.consumers.items()
                              if c.state == LIVE and c.generation > 0)
                if live:
                    member = rng.choice(live)
                    ahead = h.consumers[member].generation + 1000
                    reply = await conn.request("GROUP_HEARTBEAT",
                                               f"{opts.group} {member} {ahead}")
                    checker.record_probe("epoch_ahead", reply.ok, reply.code, reply.answered,
                                         f"{member} epoch {ahead}")
            if h.clock() - last_offsets >= OFFSET_CHECK_INTERVAL_S:
                last_offsets = h.clock()
                await h._check_offsets(conn)
    except ClientError as exc:
        checker.error(f"prober: {exc}")
    finally:
        await conn.close()

