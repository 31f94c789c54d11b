"""End-to-end tests of consumer groups: the real ``skerry serve`` process spoken to over TCP,
as consumers would. Assignments, eviction on time, fencing, restart and kill -9 durability
of the group state topic, and COMMIT throughput under the default fsync policy.

Timing is measured from the test's side with ``time.monotonic()`` against the real broker
process; the bounds leave room for process scheduling on a busy machine but not for a
broker that evicts late or early.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.groups.helpers import state_on_disk
from tests.support import BrokerProcess, V1Client

SESSION_MS = 500

_ASSIGNMENT_RE = re.compile(r"V1\|[^|]+\|OK\|generation=(\d+) assigned=\[([\d ]*)\]")
_MEMBERS_RE = re.compile(r"generation=(\d+) .*members=\[([^\]]*)\]")


def _assignment(reply: str) -> tuple[int, list[int]]:
    match = _ASSIGNMENT_RE.fullmatch(reply)
    assert match, reply
    return int(match.group(1)), [int(p) for p in match.group(2).split()]


def _describe(client: V1Client, group: str, topic: str) -> tuple[int, dict[str, list[int]]]:
    """DESCRIBE_GROUP as ``(generation, {member: partitions})``."""
    reply = client.request(f"V1|d|DESCRIBE_GROUP|{group} {topic}")
    assert reply.startswith("V1|d|OK|"), reply
    match = _MEMBERS_RE.search(reply)
    assert match, reply
    members: dict[str, list[int]] = {}
    for entry in match.group(2).split():
        member, _, parts = entry.partition(":")
        members[member] = [int(p) for p in parts.split(",") if p]
    return int(match.group(1)), members


def _assert_partitioned(assignments: Iterable[list[int]], partitions: int) -> None:
    """Every partition is assigned exactly once."""
    flat = [p for parts in assignments for p in parts]
    assert sorted(flat) == list(range(partitions)), flat


def _produce_each(client: V1Client, topic: str, partitions: int, per_partition: int) -> None:
    """Pipeline ``per_partition`` messages into every partition and wait for every ack."""
    lines = [f"V1|p{p}.{i}|PRODUCE|{topic} k:m{i} partition={p}\n"
             for p in range(partitions) for i in range(per_partition)]
    client.send("".join(lines).encode())
    for reply in client.readlines(len(lines)):
        assert b"|OK|" in reply, reply


def _join_all(client: V1Client, group: str, topic: str, members: list[str],
              session_ms: int) -> dict[str, list[int]]:
    """JOIN every member, then SYNC each to the latest generation; returns the assignment."""
    generation = 0
    for member in members:
        generation, _ = _assignment(client.request(
            f"V1|j|JOIN|{group} {topic} {member} session_timeout_ms={session_ms}"))
    assigned = {}
    for member in members:
        gen, assigned[member] = _assignment(
            client.request(f"V1|s|SYNC|{group} {topic} {member} {generation}"))
        assert gen == generation
    return assigned


@pytest.fixture
def broker(tmp_path: Path):
    with BrokerProcess(tmp_path) as proc:
        yield proc


class GroupLifecycleTests:
    def test_three_members_get_disjoint_covering_assignments(self, broker: BrokerProcess) -> None:
        """Three consumers JOIN; after SYNC to the latest generation their assignments are
        disjoint and together cover every partition, and DESCRIBE_GROUP agrees."""
        c = broker.client()
        assert c.request("V1|0|ADMIN_CREATE_TOPIC|orders 7 1").startswith("V1|0|OK|")
        generations = []
        for member in ("a", "b", "c"):
            gen, _ = _assignment(c.request(
                f"V1|1|JOIN|g orders {member} session_timeout_ms={SESSION_MS}"))
            generations.append(gen)
        assert generations == [1, 2, 3]
        assigned = {}
        for member in ("a", "b", "c"):
            gen, assigned[member] = _assignment(c.request(f"V1|2|SYNC|g orders {member} 3"))
            assert gen == 3
        _assert_partitioned(assigned.values(), 7)
        assert all(assigned.values()), assigned
        assert _describe(c, "g", "orders") == (3, assigned)

    def test_silent_member_is_evicted_on_time_and_the_others_take_over(
            self, broker: BrokerProcess) -> None:
        """A member that stops heartbeating is evicted by the broker on its own, not before
        its session timeout and within session timeout + 100 ms of its last heartbeat; the
        others are fenced from the old generation and SYNC to the new one, which covers
        every partition."""
        c = broker.client()
        assert c.request("V1|0|ADMIN_CREATE_TOPIC|evict 6 1").startswith("V1|0|OK|")
        _join_all(c, "g", "evict", ["a", "b", "c"], SESSION_MS)
        generation = 3
        session = SESSION_MS / 1000
        # c's last heartbeat: the broker received it no earlier than this send time.
        last_heartbeat = time.monotonic()
        assert c.request(f"V1|h|HEARTBEAT|g evict c {generation}") == "V1|h|OK|heartbeat=ok"
        observations: list[tuple[float, float, bool]] = []  # (sent, answered, c listed)
        next_heartbeat = 0.0
        deadline = last_heartbeat + 5
        rebalanced = False
        while time.monotonic() < deadline and not rebalanced:
            now = time.monotonic()
            if now >= next_heartbeat:  # a and b stay alive, every SESSION/5
                for member in ("a", "b"):
                    sent = time.monotonic()
                    reply = c.request(f"V1|h|HEARTBEAT|g evict {member} {generation}")
                    if reply.startswith("V1|h|ERR|GENERATION_MISMATCH|"):
                        # c's eviction moved the generation between two polls: seen now.
                        observations.append((sent, time.monotonic(), False))
                        rebalanced = True
                        break
                    assert reply == "V1|h|OK|heartbeat=ok"
                next_heartbeat = now + session / 5
                if rebalanced:
                    break
            sent = time.monotonic()
            gen, members = _describe(c, "g", "evict")
            observations.append((sent, time.monotonic(), "c" in members))
            if "c" not in members:
                break
            time.sleep(0.02)
        gen, members = _describe(c, "g", "evict")
        assert "c" not in members
        listed = [o for o in observations if o[2]]
        gone = [o for o in observations if not o[2]]
        assert gone, "c was never evicted"
        # Not early: every answer that arrived before the session timeout still lists c.
        assert all(o[2] for o in observations if o[1] < last_heartbeat + session)
        # On time: no request sent later than session + 100 ms still saw c ...
        assert max(o[0] for o in listed) <= last_heartbeat + session + 0.1
        # ... and the eviction was seen soon after (slack for scheduling and the poll).
        assert gone[0][1] - last_heartbeat <= session + 0.1 + 0.4
        assert gen == generation + 1
        for member in ("a", "b"):
            assert c.request(f"V1|h|HEARTBEAT|g evict {member} {generation}").startswith(
                "V1|h|ERR|GENERATION_MISMATCH|")
        assigned = {}
        for member in ("a", "b"):
            new_gen, assigned[member] = _assignment(
                c.request(f"V1|s|SYNC|g evict {member} {gen}"))
            assert new_gen == gen
        _assert_partitioned(assigned.values(), 6)
        assert members == assigned
        assert c.request(f"V1|x|SYNC|g evict c {gen}").startswith("V1|x|ERR|GENERATION_MISMATCH|")

    def test_commit_by_a_non_owner_is_refused(self, broker: BrokerProcess) -> None:
        """COMMIT of a partition the member does not own, with a stale generation, or by
        an unknown member is refused with GENERATION_MISMATCH and changes no offset; the
        owner's COMMIT is stored."""
        c = broker.client()
        assert c.request("V1|0|ADMIN_CREATE_TOPIC|fence 3 1").startswith("V1|0|OK|")
        _produce_each(c, "fence", 3, 5)
        assigned = _join_all(c, "g", "fence", ["a", "b", "c"], 10_000)
        owner = next(m for m, parts in assigned.items() if 1 in parts)
        other = next(m for m in assigned if m != owner)
        assert c.request(f"V1|1|COMMIT|g fence {owner} 3 1 4") == "V1|1|OK|committed=true"
        refused = [
            f"V1|2|COMMIT|g fence {other} 3 1 5",  # not the owner
            f"V1|3|COMMIT|g fence {owner} 2 1 5",  # stale generation
            f"V1|4|COMMIT|g fence {owner} 4 1 5",  # a generation that does not exist yet
            "V1|5|COMMIT|g fence stranger 3 1 5",  # unknown member
            f"V1|6|COMMIT|other-group fence {owner} 3 1 5",  # unknown group
        ]
        for line in refused:
            cid = line.split("|")[1]
            assert c.request(line).startswith(f"V1|{cid}|ERR|GENERATION_MISMATCH|"), line
        assert c.request("V1|7|OFFSET|g fence 1") == "V1|7|OK|offset=4"


class DurabilityTests:
    def test_restart_keeps_offsets_and_generations(self, tmp_path: Path) -> None:
        """After SIGTERM and a restart OFFSET returns every committed value, the group's
        generation did not go backwards, and the next JOIN continues above it."""
        proc = BrokerProcess(tmp_path).start()
        try:
            c = proc.client()
            assert c.request("V1|0|ADMIN_CREATE_TOPIC|keep 4 1").startswith("V1|0|OK|")
            _produce_each(c, "keep", 4, 10)
            assigned = _join_all(c, "g", "keep", ["a", "b"], 10_000)
            assert c.request("V1|1|LEAVE|g keep b 2") == "V1|1|OK|left=true"
            gen, assigned = _assignment(c.request("V1|2|JOIN|g keep a"))
            assert gen == 3 and assigned == [0, 1, 2, 3]
            committed = {0: 3, 1: 10, 2: 1, 3: 7}
            for p, offset in committed.items():
                assert c.request(f"V1|3|COMMIT|g keep a 3 {p} {offset}") == \
                    "V1|3|OK|committed=true"
            before, _ = _describe(c, "g", "keep")
            c.close()
            assert proc.stop() == 0
            proc.start()
            c = proc.client()
            for p, offset in committed.items():
                assert c.request(f"V1|4|OFFSET|g keep {p}") == f"V1|4|OK|offset={offset}"
            after, members = _describe(c, "g", "keep")
            assert after >= before == 3
            assert members == {"a": [0, 1, 2, 3]}
            gen, _ = _assignment(c.request("V1|5|JOIN|g keep z"))
            assert gen == after + 1
        finally:
            proc.stop()

    def test_kill9_during_pipelined_commits_keeps_every_acknowledged_commit(
            self, tmp_path: Path) -> None:
        """kill -9 while four connections stream pipelined COMMITs: the group state topic
        still loads, holds the generation and at least every acknowledged commit, and
        after a restart OFFSET is at least the last acknowledged value of each partition."""
        proc = BrokerProcess(tmp_path).start()
        try:
            setup = proc.client(timeout=60)
            partitions, per_partition = 8, 400
            assert setup.request(f"V1|0|ADMIN_CREATE_TOPIC|crash {partitions} 1") \
                .startswith("V1|0|OK|")
            _produce_each(setup, "crash", partitions, per_partition)
            members = [f"m{i}" for i in range(4)]
            assigned = _join_all(setup, "g", "crash", members, 60_000)
            generation = len(members)
            before, _ = _describe(setup, "g", "crash")
            acked: dict[int, int] = {}
            lock = threading.Lock()
            stop = threading.Event()

            def stream(member: str) -> None:
                client = proc.client(timeout=10)
                owned = assigned[member]
                offset = 1
                try:
                    while offset <= per_partition and not stop.is_set():
                        chunk = []
                        for o in range(offset, min(offset + 10, per_partition + 1)):
                            chunk += [(p, o) for p in owned]
                        offset += 10
                        client.send("".join(
                            f"V1|{p}.{o}|COMMIT|g crash {member} {generation} {p} {o}\n"
                            for p, o in chunk).encode())
                        for _ in chunk:
                            reply = client.readline().decode()
                            m = re.fullmatch(r"V1\|(\d+)\.(\d+)\|OK\|committed=true", reply)
                            assert m, reply
                            with lock:
                                p, o = int(m.group(1)), int(m.group(2))
                                acked[p] = max(acked.get(p, 0), o)
                except (ConnectionError, OSError):
                    pass  # the broker died under us: what was acknowledged is what counts
                finally:
                    client.close()

            threads = [threading.Thread(target=stream, args=(m,)) for m in members]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with lock:
                    if sum(acked.values()) >= partitions * per_partition // 4:
                        break
                time.sleep(0.005)
            proc.kill9()
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
            with lock:
                final = dict(acked)
            assert sum(final.values()) >= partitions * per_partition // 4
            assert any(o < per_partition for o in final.values()), \
                "every commit was done before the kill; the test killed nothing in flight"
            loaded = state_on_disk(str(proc.data_dir))
            assert [g.generation for g in loaded.groups] == [generation]
            on_disk = loaded.offsets[("g", "crash")]
            for p, offset in final.items():
                assert on_disk.get(p, 0) >= offset, (p, on_disk, final)
            proc.start()
            c = proc.client()
            for p, offset in final.items():
                reply = c.request(f"V1|o|OFFSET|g crash {p}")
                assert int(reply.rsplit("=", 1)[1]) >= offset, (p, reply, offset)
            after, _ = _describe(c, "g", "crash")
            assert after >= before
        finally:
            proc.stop()


class ThroughputTests:
    def test_a_thousand_commits_per_second_from_fifty_connections(
            self, broker: BrokerProcess) -> None:
        """50 connections, each a member committing its own partition 40 times and waiting
        for every answer before the next, sustain at least 1,000 acknowledged COMMITs per
        second with the default fsync durability (one group state write covers many
        commits), and OFFSET then shows every partition's last commit."""
        setup = broker.client(timeout=60)
        n, per_connection = 50, 40
        assert setup.request(f"V1|0|ADMIN_CREATE_TOPIC|busy {n} 1").startswith("V1|0|OK|")
        _produce_each(setup, "busy", n, per_connection)
        members = [f"m{i:02d}" for i in range(n)]
        assigned = _join_all(setup, "g", "busy", members, 60_000)
        assert all(len(parts) == 1 for parts in assigned.values())
        clients = {m: broker.client(timeout=30) for m in members}
        barrier = threading.Barrier(n + 1)
        failures: list[str] = []

        def commit_loop(member: str) -> None:
            client, (partition,) = clients[member], assigned[member]
            barrier.wait()
            for offset in range(1, per_connection + 1):
                reply = client.request(f"V1|{offset}|COMMIT|g busy {member} {n} {partition} "
                                       f"{offset}")
                if reply != f"V1|{offset}|OK|committed=true":
                    failures.append(reply)
                    return

        threads = [threading.Thread(target=commit_loop, args=(m,)) for m in members]
        for thread in threads:
            thread.start()
        barrier.wait()
        started = time.monotonic()
        for thread in threads:
            thread.join(timeout=60)
        elapsed = time.monotonic() - started
        assert not failures, failures[:3]
        rate = n * per_connection / elapsed
        assert rate >= 1000, f"{rate:.0f} commits/s"
        for p in range(n):
            assert setup.request(f"V1|o|OFFSET|g busy {p}") == f"V1|o|OK|offset={per_connection}"
        for client in clients.values():
            client.close()


class TopicDeletionTests:

    def test_deleting_a_topic_forgets_its_groups_and_offsets(self, broker: BrokerProcess) -> None:
        """ADMIN_DELETE_TOPIC drops the topic's groups, members and committed offsets (as
        Kafka drops a deleted topic's offsets): a topic created again under the same name
        starts at generation 1 with no committed offsets, and the old member is unknown."""
        c = broker.client()
        assert c.request("V1|0|ADMIN_CREATE_TOPIC|gone 2 1").startswith("V1|0|OK|")
        assert c.request("V1|1|PRODUCE|gone k:v partition=0").startswith("V1|1|OK|")
        assert c.request("V1|2|JOIN|g gone m1") == "V1|2|OK|generation=1 assigned=[0 1]"
        assert c.request("V1|3|COMMIT|g gone m1 1 0 1") == "V1|3|OK|committed=true"
        assert c.request("V1|4|LIST_GROUPS|") == "V1|4|OK|groups=[g:gone]"
        assert c.request("V1|5|ADMIN_DELETE_TOPIC|gone") == "V1|5|OK|topic=gone deleted=true"
        assert c.request("V1|6|LIST_GROUPS|") == "V1|6|OK|groups=[]"
        assert c.request("V1|7|ADMIN_CREATE_TOPIC|gone 2 1").startswith("V1|7|OK|")
        assert c.request("V1|8|OFFSET|g gone 0") == "V1|8|OK|offset=0"
        assert c.request("V1|9|HEARTBEAT|g gone m1 1").startswith("V1|9|ERR|GENERATION_MISMATCH|")
        assert c.request("V1|10|JOIN|g gone m2") == "V1|10|OK|generation=1 assigned=[0 1]"
