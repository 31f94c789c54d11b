"""End-to-end: V1 clients using GROUP_HEARTBEAT against a real ``skerry serve`` process,
each on its own connection and thread, behaving as KIP-848 consumers: they give a partition
up when an answer takes it away (after 250 ms of finishing the work in hand) and report
what they own on every heartbeat. Three members share 6 partitions, a fourth joins, then one is killed. From the clients' own
records: no partition is ever owned by two of them at once, every partition is owned again
after the death, and the survivors never lose a partition they kept. Then, under a steady
producer with members that consume and auto-commit: every message is consumed, and only
the dead member's unacknowledged work is consumed twice."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

from tests.support import BrokerProcess

SESSION_MS = 1000
INTERVAL_MS = 100
REVOKE_MS = 250
_REPLY = re.compile(r"V1\|[^|]*\|OK\|member=(\S+) epoch=(-?\d+) interval_ms=\d+ "
                    r"assigned=\[([^\]]*)\] target=\[[^\]]*\]")


class Member(threading.Thread):
    """One consumer: heartbeats every interval; records (partition, start, end) intervals
    of ownership with the monotonic clock of this process."""

    def __init__(self, port: int, name: str) -> None:
        super().__init__(daemon=True)
        from tests.support import V1Client

        self.client = V1Client(port, timeout=10)
        self.name_ = name
        self.owned: dict[int, float] = {}   # partition -> since
        self.intervals: list[tuple[int, float, float]] = []
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.lost: list[int] = []

    def _drop(self, partitions: set[int], now: float) -> None:
        for partition in partitions:
            self.intervals.append((partition, self.owned.pop(partition), now))

    def run(self) -> None:
        epoch, n = 0, 0
        while not self.stop.is_set():
            n += 1
            owned = ",".join(f"t:{p}" for p in sorted(self.owned))
            extra = " topics=t" if epoch == 0 else ""
            reply = self.client.request(
                f"V1|{n}|GROUP_HEARTBEAT|g {self.name_} {epoch}{extra} owned={owned}")
            now = time.monotonic()
            match = _REPLY.fullmatch(reply)
            if match is None:
                if "GENERATION_MISMATCH" not in reply:
                    self.errors.append(reply)
                self.lost.extend(self.owned)
                self._drop(set(self.owned), now)
                epoch = 0
                continue
            epoch = int(match.group(2))
            assigned = {int(item.split(":")[1]) for item in match.group(3).split()}
            revoked = set(self.owned) - assigned
            if revoked:
                # Like onPartitionsRevoked: finish and commit the work in hand first; the
                # partitions are still this member's until that is done.
                time.sleep(REVOKE_MS / 1000)
                now = time.monotonic()
            self._drop(revoked, now)
            for partition in assigned - set(self.owned):
                self.owned[partition] = now
            time.sleep(INTERVAL_MS / 1000)
        self._drop(set(self.owned), time.monotonic())

    def partitions(self) -> set[int]:
        return set(self.owned)


def _wait(condition, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_join_and_kill_never_two_owners(tmp_path: Path) -> None:
    """3 members, a 4th joins, one is killed: no overlap of ownership intervals ever,
    every partition owned again within the session timeout plus a few heartbeats, and
    the survivors keep every partition they had (uniform is sticky)."""
    config = {"groups": {"consumer_session_timeout_ms": SESSION_MS,
                         "consumer_heartbeat_interval_ms": INTERVAL_MS}}
    with BrokerProcess(tmp_path / "broker", config) as proc:
        admin = proc.client()
        assert "|OK|" in admin.request("V1|1|ADMIN_CREATE_TOPIC|t 6 1")
        members = [Member(proc.port, f"m{i}") for i in range(3)]
        for m in members:
            m.start()

        def covered(live: list[Member]) -> bool:
            owned = [p for m in live for p in m.partitions()]
            return sorted(owned) == list(range(6))

        _wait(lambda: covered(members) and all(len(m.partitions()) == 2 for m in members))
        fourth = Member(proc.port, "m3")
        fourth.start()
        members.append(fourth)
        _wait(lambda: covered(members) and fourth.partitions())
        before = {m.name_: m.partitions() for m in members}
        victim = members[0]
        victim.stop.set()   # killed: never speaks again (the broker fences it on time)
        victim.join(5)
        killed_at = time.monotonic()
        survivors = members[1:]
        _wait(lambda: covered(survivors), timeout=SESSION_MS / 1000 + 5)
        reowned = time.monotonic() - killed_at
        for m in survivors:
            assert before[m.name_] <= m.partitions(), (m.name_, before, m.partitions())
        for m in survivors:
            m.stop.set()
        for m in survivors:
            m.join(5)
        intervals = sorted((p, start, end) for m in members for p, start, end in m.intervals)
        held_until: dict[int, float] = {}
        for partition, start, end in intervals:
            assert start >= held_until.get(partition, 0.0), \
                f"partition {partition} owned twice: from {start}, already until " \
                f"{held_until[partition]}"
            held_until[partition] = max(end, held_until.get(partition, 0.0))
        assert len(intervals) >= 6
        assert all(not m.errors for m in members), [m.errors for m in members]
        assert all(not m.lost for m in survivors), [m.lost for m in survivors]
        assert reowned < SESSION_MS / 1000 + 2, reowned
        admin.close()


_MESSAGES = re.compile(r"V1\|[^|]*\|OK\|messages=(\S*) hw=(-?\d+)")


class Worker(Member):
    """A member that also consumes: OFFSET when it gets a partition, CONSUME in every
    round, COMMIT (with its member epoch) every 500 ms like an auto-commit, and a COMMIT of
    a partition an answer takes away before it reports the partition released."""

    def __init__(self, port: int, name: str) -> None:
        super().__init__(port, name)
        self.positions: dict[int, int] = {}
        self.consumed: list[tuple[int, int]] = []
        self.acked: dict[int, int] = {}
        self.epoch = 0
        self.n = 0
        self.next_commit = 0.0
        self.rounds: list[float] = []  # when each round of consuming started

    def _call(self, line: str) -> str:
        self.n += 1
        return self.client.request(f"V1|{self.n}|{line}")

    def _commit(self, partition: int) -> None:
        position = self.positions.get(partition)
        if position is None:
            return
        reply = self._call(f"COMMIT|g t {self.name_} {self.epoch} {partition} {position}")
        if "|OK|" in reply:
            self.acked[partition] = position

    def _drop(self, partitions: set[int], now: float) -> None:
        for partition in partitions:
            if self.epoch > 0:
                self._commit(partition)
            self.positions.pop(partition, None)
        super()._drop(partitions, time.monotonic())

    def run(self) -> None:
        while not self.stop.is_set():
            owned = ",".join(f"t:{p}" for p in sorted(self.owned))
            extra = " topics=t" if self.epoch == 0 else ""
            reply = self._call(f"GROUP_HEARTBEAT|g {self.name_} {self.epoch}{extra} "
                               f"owned={owned}")
            match = _REPLY.fullmatch(reply)
            if match is None:
                if "GENERATION_MISMATCH" not in reply:
                    self.errors.append(reply)
                self.lost.extend(self.owned)
                self.epoch = 0  # fenced: what it holds is not its own any more
                self._drop(set(self.owned), time.monotonic())
                continue
            self.epoch = int(match.group(2))
            assigned = {int(item.split(":")[1]) for item in match.group(3).split()}
            revoked = set(self.owned) - assigned
            if revoked:
                time.sleep(REVOKE_MS / 1000)  # finish the work in hand, then commit it
            self._drop(revoked, time.monotonic())
            for partition in assigned - set(self.owned):
                self.owned[partition] = time.monotonic()
            if self.owned:
                self.rounds.append(time.monotonic())
            for partition in sorted(self.owned):
                if self.stop.is_set():
                    break  # killed mid-round: no last commit
                if partition not in self.positions:
                    answer = self._call(f"OFFSET|g t {partition}")
                    self.positions[partition] = int(answer.rsplit("=", 1)[1])
                answer = self._call(f"CONSUME|t {partition} {self.positions[partition]} max=50")
                got = _MESSAGES.fullmatch(answer)
                assert got is not None, answer
                offsets = [int(m.split(":", 1)[0]) for m in got.group(1).split(",") if m]
                if offsets:
                    self.consumed += [(partition, o) for o in offsets]
                    self.positions[partition] = offsets[-1] + 1
            if time.monotonic() >= self.next_commit:  # auto-commit, every 500 ms
                for partition in sorted(self.owned):
                    self._commit(partition)
                self.next_commit = time.monotonic() + 0.5
            time.sleep(INTERVAL_MS / 1000)
        # Stopped (killed, or the end of the test): no last commit, as after kill -9.
        Member._drop(self, set(self.owned), time.monotonic())


def test_every_message_is_consumed_through_a_join_and_a_death(tmp_path: Path) -> None:
    """Under a steady producer, 3 consuming members, a 4th joining and one killed: every
    message produced is consumed, and a message is consumed twice only if the killed member
    had consumed it without its commit being acknowledged (hand-overs commit first)."""
    config = {"groups": {"consumer_session_timeout_ms": SESSION_MS,
                         "consumer_heartbeat_interval_ms": INTERVAL_MS}}
    with BrokerProcess(tmp_path / "broker", config) as proc:
        admin = proc.client()
        assert "|OK|" in admin.request("V1|1|ADMIN_CREATE_TOPIC|t 6 1")
        produced: list[tuple[int, int]] = []
        stop_producing = threading.Event()

        def produce() -> None:
            client = proc.client()
            i = 0
            while not stop_producing.is_set():
                partition = i % 6
                reply = client.request(f"V1|p{i}|PRODUCE|t k:v{i} partition={partition}")
                produced.append((partition, int(reply.split("offset=")[1].split()[0])))
                i += 1
                time.sleep(0.005)
            client.close()

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        workers = [Worker(proc.port, f"w{i}") for i in range(3)]
        for w in workers:
            w.start()
        time.sleep(1.5)
        fourth = Worker(proc.port, "w3")
        fourth.start()
        workers.append(fourth)
        time.sleep(1.5)
        # The joiner dies: it only ever gained partitions, so every message consumed twice
        # must be one it had consumed without an acknowledged commit.
        victim = fourth
        victim.stop.set()
        victim.join(5)
        time.sleep(SESSION_MS / 1000 + 1.0)
        stop_producing.set()
        producer.join(5)
        survivors = workers[:3]
        wanted = set(produced)

        def everything_consumed() -> bool:
            return wanted <= {x for w in workers for x in w.consumed}

        _wait(everything_consumed, timeout=15)
        for w in survivors:
            w.stop.set()
        for w in survivors:
            w.join(5)
        seen: dict[tuple[int, int], int] = {}
        for w in workers:
            for x in w.consumed:
                seen[x] = seen.get(x, 0) + 1
        twice = {x for x, n in seen.items() if n > 1}
        unacked = {(p, o) for p, o in victim.consumed if o >= victim.acked.get(p, 0)}
        assert twice <= unacked, sorted(twice - unacked)[:10]
        assert all(not w.errors for w in workers), [w.errors for w in workers]
        assert len(wanted) > 300
        # The members that kept partitions never stopped: their longest pause between two
        # rounds of consuming, across the join and the death (a round also waits the
        # heartbeat interval, and 250 ms when it hands a partition over).
        gaps = [b - a for w in survivors for a, b in zip(w.rounds, w.rounds[1:], strict=False)]
        longest = max(gaps)
        print(f"survivors' longest stop: {longest * 1000:.0f} ms over {len(gaps)} rounds")
        assert longest < 2.0, longest
        admin.close()
