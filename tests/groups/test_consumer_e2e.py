"""End-to-end: V1 clients using GROUP_HEARTBEAT against a real ``skerry serve`` process,
each on its own connection and thread, behaving as KIP-848 consumers: they give a partition
up when an answer takes it away (after 250 ms of finishing the work in hand) and report
what they own on every heartbeat. Three members share 6 partitions, a fourth joins, then one is killed. From the clients' own
records: no partition is ever owned by two of them at once, every partition is owned again
after the death, and the survivors never lose a partition they kept."""

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
