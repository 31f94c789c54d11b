"""Tests for broker/services/groups.py, the Twisted shell of the group coordinator: session
timers on a task.Clock, and groups.json/offsets.json on a temporary directory."""

from __future__ import annotations

import collections
import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from broker.errors import (
    InvalidGroupRequest,
    StaleGeneration,
    StorageError,
    TooManyMembers,
    Unavailable,
    UnknownMember,
)
from broker.services.groups import GroupService
from broker.v1.errors import code_for
from data.fs import OS_FS
from groups.coordinator import Assignment, GroupCoordinator


class RecordingFS:
    """The real file layer, counting completed replacements per file name and failing the
    writes of the file names in ``fail`` with ENOSPC."""

    def __init__(self) -> None:
        self.replaced: collections.Counter[str] = collections.Counter()
        self.fail: set[str] = set()
        self._paths: dict[int, str] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(OS_FS, name)

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fd = OS_FS.open(path, flags, mode)
        self._paths[fd] = path
        return fd

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        name = os.path.basename(self._paths.get(fd, "")).removesuffix(".tmp")
        if name in self.fail:
            raise OSError(errno.ENOSPC, "No space left on device")
        return OS_FS.write(fd, data)

    def close(self, fd: int) -> None:
        self._paths.pop(fd, None)
        OS_FS.close(fd)

    def replace(self, src: str, dst: str) -> None:
        OS_FS.replace(src, dst)
        self.replaced[os.path.basename(dst)] += 1


class ManualRunner:
    """A ``run_in_thread`` whose jobs wait until the test runs them: a write in flight."""

    def __init__(self) -> None:
        self.pending: list[tuple[Callable[[], None], Deferred[None]]] = []

    def __call__(self, function: Callable[[], None]) -> Deferred[None]:
        d: Deferred[None] = Deferred()
        self.pending.append((function, d))
        return d

    def run_next(self) -> None:
        function, d = self.pending.pop(0)
        try:
            function()
        except Exception as error:  # noqa: BLE001 - handed to the Deferred like a thread would
            d.errback(error)
        else:
            d.callback(None)


class _ServiceTestCase(SynchronousTestCase):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path: Path) -> None:
        self.data_dir = str(tmp_path / "data")

    def setUp(self) -> None:
        self.clock = Clock()
        self.fs = RecordingFS()
        self.counts = {"orders": 3}
        self.hw = {0: 9, 1: -1, 2: 2}

    def service(self, runner: Any = maybeDeferred, clock: Clock | None = None,
                **limits: int) -> GroupService:
        coordinator = GroupCoordinator(lambda t: self.counts.get(t, 0), **limits)
        return GroupService(coordinator, clock or self.clock, self.data_dir,
                            hw_for=lambda t, p: self.hw[p], earliest_for=lambda t, p: 1,
                            fs=self.fs, run_in_thread=runner)

    def on_disk(self, name: str) -> Any:
        with open(os.path.join(self.data_dir, name)) as handle:
            return json.load(handle)

    def disk_generation(self, group: str = "g", topic: str = "orders") -> int:
        for entry in self.on_disk("groups.json")["groups"]:
            if (entry["group"], entry["topic"]) == (group, topic):
                return int(entry["generation"])
        raise AssertionError("group not on disk")

    def joined(self, service: GroupService, member: str, **options: Any) -> Assignment:
        d = service.join("g", "orders", member, **options)
        self.clock.advance(0)
        return self.successResultOf(d)

    def timer_of(self, member: str, clock: Clock | None = None) -> Any:
        key = f"heartbeat:g:orders:{member}"
        [call] = [c for c in (clock or self.clock).getDelayedCalls() if c.args[0] == key]
        return call


class SessionTimerTests(_ServiceTestCase):
    def test_expiry_at_exactly_the_session_timeout(self) -> None:
        """A silent member is evicted by its timer exactly one session timeout after its
        last request: still a member 1 ms before, gone (next generation, on disk) at the
        deadline, without any other request arriving."""
        self.clock.advance(123.5)
        service = self.service()
        self.joined(service, "c1")
        self.joined(service, "c2")
        self.assertEqual(self.timer_of("c1").getTime(), 123.5 + 10.0)
        self.clock.advance(9.999)
        self.assertEqual(sorted(service.coordinator.group("g", "orders").members), ["c1", "c2"])
        self.clock.advance(0.1)
        self.assertEqual(service.coordinator.group("g", "orders").members, {})
        self.assertEqual(self.disk_generation(), 4)

    def test_heartbeat_resets_the_timeout(self) -> None:
        """Each accepted HEARTBEAT (or SYNC, COMMIT, JOIN) restarts the session timeout."""
        service = self.service()
        self.joined(service, "c1", session_timeout_ms=4000)
        for _ in range(5):
            self.clock.advance(3.0)
            service.heartbeat("g", "orders", "c1", 1)
        self.clock.advance(3.0)
        self.successResultOf(service.sync("g", "orders", "c1", 1))
        self.clock.advance(3.999)
        self.assertIn("c1", service.coordinator.group("g", "orders").members)
        self.clock.advance(0.001)
        self.assertNotIn("c1", service.coordinator.group("g", "orders").members)

    def test_refused_heartbeat_does_not_refresh(self) -> None:
        """A HEARTBEAT with a stale generation is refused and does not keep the member
        alive."""
        service = self.service()
        self.joined(service, "c1")
        self.clock.advance(6.0)
        self.assertRaises(StaleGeneration, service.heartbeat, "g", "orders", "c1", 7)
        self.clock.advance(4.0)
        self.assertEqual(service.coordinator.group("g", "orders").members, {})

    def test_stale_timer_does_nothing(self) -> None:
        """A timer armed before the member's last refresh, if it fires anyway, evicts no
        one and leaves the newer timer armed."""
        service = self.service()
        self.joined(service, "c1")
        old = self.timer_of("c1")
        old_func, old_args = old.func, old.args  # cancel() drops them
        self.clock.advance(5.0)
        service.heartbeat("g", "orders", "c1", 1)
        self.assertFalse(old.active())
        old_func(*old_args)  # the old firing, e.g. one the reactor had already queued
        self.clock.advance(0)
        self.assertIn("c1", service.coordinator.group("g", "orders").members)
        self.assertEqual(self.timer_of("c1").getTime(), 15.0)
        self.assertEqual(self.fs.replaced["groups.json"], 1)

    def test_leave_cancels_the_timer(self) -> None:
        """LEAVE answers once groups.json holds the next generation and disarms the timer."""
        service = self.service()
        self.joined(service, "c1")
        self.joined(service, "c2")
        d = service.leave("g", "orders", "c1", 2)
        self.assertNoResult(d)
        self.clock.advance(0)
        self.assertIsNone(self.successResultOf(d))
        self.assertEqual(self.disk_generation(), 3)
        self.assertEqual([c.args[0] for c in self.clock.getDelayedCalls()],
                         ["heartbeat:g:orders:c2"])

    def test_restored_members_get_a_fresh_timeout(self) -> None:
        """After a restart, restored members count their session timeout from the restart
        (on the new process's monotonic clock), not from before it."""
        first = self.service()
        self.joined(first, "c1", session_timeout_ms=5000)
        self.clock.advance(4.0)
        later = Clock()
        later.advance(7000.0)
        second = self.service(clock=later)
        self.assertEqual(self.timer_of("c1", later).getTime(), 7005.0)
        later.advance(4.999)
        self.assertIn("c1", second.coordinator.group("g", "orders").members)
        later.advance(0.001)
        self.assertEqual(second.coordinator.group("g", "orders").members, {})
        self.assertEqual(self.disk_generation(), 2)


class DurableGenerationTests(_ServiceTestCase):
    def test_join_waits_for_groups_json(self) -> None:
        """JOIN answers only once groups.json holds the new generation."""
        runner = ManualRunner()
        service = self.service(runner)
        d = service.join("g", "orders", "c1")
        self.clock.advance(0)
        self.assertNoResult(d)
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "groups.json")))
        runner.run_next()
        self.assertEqual(self.successResultOf(d), Assignment(1, [0, 1, 2]))
        self.assertEqual(self.disk_generation(), 1)

    def test_sync_after_eviction_waits_for_the_write(self) -> None:
        """After an eviction, a SYNC (or a rejoin) naming the new generation is answered only
        once groups.json holds it."""
        runner = ManualRunner()
        service = self.service(runner)
        first = service.join("g", "orders", "c1")
        self.clock.advance(0)
        runner.run_next()
        self.clock.advance(1.0)
        second = service.join("g", "orders", "c2")
        self.clock.advance(0)
        runner.run_next()
        self.assertEqual((self.successResultOf(first), self.successResultOf(second)),
                         (Assignment(1, [0, 1, 2]), Assignment(2, [1])))
        self.clock.advance(9.0)  # c1's session ends: generation 3, write now in flight
        self.assertEqual(len(runner.pending), 1)
        synced = service.sync("g", "orders", "c2", 3)
        rejoined = service.join("g", "orders", "c2")
        self.assertNoResult(synced)
        self.assertNoResult(rejoined)
        self.assertEqual(self.disk_generation(), 2)
        runner.run_next()
        self.assertEqual(self.disk_generation(), 3)
        self.assertEqual(self.successResultOf(synced), Assignment(3, [0, 1, 2]))
        self.assertEqual(self.successResultOf(rejoined), Assignment(3, [0, 1, 2]))

    def test_current_member_join_answers_at_once(self) -> None:
        """A JOIN by a current member with nothing pending is answered without a write."""
        service = self.service()
        self.joined(service, "c1")
        self.assertEqual(self.successResultOf(service.join("g", "orders", "c1")),
                         Assignment(1, [0, 1, 2]))
        self.assertEqual(self.fs.replaced["groups.json"], 1)

    def test_partition_growth_rebalances(self) -> None:
        """Adding partitions to the topic rebalances its groups with members, on disk."""
        service = self.service()
        self.joined(service, "c1")
        self.counts["orders"] = 5
        service.partitions_changed("orders")
        self.clock.advance(0)
        self.assertEqual(self.disk_generation(), 2)
        self.assertEqual(self.successResultOf(service.sync("g", "orders", "c1", 2)),
                         Assignment(2, [0, 1, 2, 3, 4]))


class OffsetPersistenceTests(_ServiceTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.runner = ManualRunner()
        self.groups = self.service(self.runner)
        d = self.groups.join("g", "orders", "c1")
        self.clock.advance(0)
        self.runner.run_next()
        self.successResultOf(d)

    def test_commit_answers_after_offsets_json_holds_it(self) -> None:
        """COMMIT fires only after offsets.json holds the offset on disk."""
        seen: list[Any] = []
        d = self.groups.commit("g", "orders", "c1", 1, 2, 42)
        d.addCallback(lambda _: seen.append(self.on_disk("offsets.json")["offsets"]))
        self.clock.advance(0)
        self.assertEqual(seen, [])
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "offsets.json")))
        self.runner.run_next()
        self.assertEqual(seen, [[{"group": "g", "topic": "orders", "committed": {"2": 42}}]])
        self.assertEqual(self.groups.offset("g", "orders", 2), 42)

    def test_one_write_per_turn(self) -> None:
        """Many COMMITs in one reactor turn share one write of offsets.json."""
        waits = [self.groups.commit("g", "orders", "c1", 1, p, 10 + p) for p in (0, 1, 2)]
        waits.append(self.groups.commit("g", "orders", "c1", 1, 0, 20))
        self.clock.advance(0)
        self.assertEqual(len(self.runner.pending), 1)
        self.runner.run_next()
        for d in waits:
            self.assertIsNone(self.successResultOf(d))
        self.assertEqual(self.fs.replaced["offsets.json"], 1)
        self.assertEqual(self.on_disk("offsets.json")["offsets"][0]["committed"],
                         {"0": 20, "1": 11, "2": 12})

    def test_changes_during_a_write_share_the_next_one(self) -> None:
        """While a write is in flight no second one starts; everything committed meanwhile
        goes into one next write, and each COMMIT waits for a write that includes it."""
        a = self.groups.commit("g", "orders", "c1", 1, 0, 1)
        self.clock.advance(0)
        b = self.groups.commit("g", "orders", "c1", 1, 1, 2)
        c = self.groups.commit("g", "orders", "c1", 1, 2, 3)
        self.clock.advance(0)
        self.assertEqual(len(self.runner.pending), 1)
        self.runner.run_next()
        self.successResultOf(a)
        self.assertNoResult(b)
        self.assertNoResult(c)
        self.clock.advance(0)
        self.assertEqual(len(self.runner.pending), 1)
        self.runner.run_next()
        self.successResultOf(b)
        self.successResultOf(c)
        self.assertEqual(self.fs.replaced["offsets.json"], 2)

    def test_failed_write_fails_the_commit(self) -> None:
        """A write that fails answers its COMMITs with STORAGE_ERROR; once the disk works
        again the next write holds every accepted offset."""
        self.fs.fail.add("offsets.json")
        d = self.groups.commit("g", "orders", "c1", 1, 0, 5)
        self.clock.advance(0)
        self.runner.run_next()
        failure = self.failureResultOf(d, StorageError)
        self.assertEqual(code_for(failure.value), "STORAGE_ERROR")
        self.assertIn("could not write offsets.json", failure.value.message)
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "offsets.json")))
        self.fs.fail.clear()
        d = self.groups.commit("g", "orders", "c1", 1, 1, 6)
        self.clock.advance(0)
        self.runner.run_next()
        self.successResultOf(d)
        self.assertEqual(self.on_disk("offsets.json")["offsets"][0]["committed"],
                         {"0": 5, "1": 6})


class FailedGroupsWriteTests(_ServiceTestCase):
    def test_failed_join_write_is_retried_before_serving_the_generation(self) -> None:
        """A JOIN whose groups.json write failed gets STORAGE_ERROR; a later request that
        would serve that generation writes the file again first."""
        service = self.service()
        self.fs.fail.add("groups.json")
        d = service.join("g", "orders", "c1")
        self.clock.advance(0)
        self.failureResultOf(d, StorageError)
        self.fs.fail.clear()
        d = service.sync("g", "orders", "c1", 1)
        self.assertNoResult(d)
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d), Assignment(1, [0, 1, 2]))
        self.assertEqual(self.disk_generation(), 1)


class RestartTests(_ServiceTestCase):
    def test_restart_restores_groups_generations_and_offsets(self) -> None:
        """A new GroupService over the same directory has the same groups, generations,
        assignors, assignments and offsets; generations continue from there."""
        first = self.service()
        self.joined(first, "c1", assignor="range")
        self.joined(first, "c2")
        waits = [first.commit("g", "orders", "c1", 2, 1, 8), first.join("h", "orders", "x")]
        self.clock.advance(0)
        waits.append(first.leave("h", "orders", "x", 1))
        closed = first.close()
        self.clock.advance(0)
        for d in waits + [closed]:
            self.successResultOf(d)

        later = Clock()
        second = self.service(clock=later)
        self.assertEqual(second.list_groups(), [("g", "orders"), ("h", "orders")])
        self.assertEqual(self.successResultOf(second.sync("g", "orders", "c1", 2)),
                         Assignment(2, [0, 1]))
        self.assertEqual(second.offset("g", "orders", 1), 8)
        self.assertEqual(second.describe("h", "orders").generation, 2)
        d = second.join("h", "orders", "y")
        later.advance(0)
        self.assertEqual(self.successResultOf(d), Assignment(3, [0, 1, 2]))

    def test_damaged_file_refuses_to_load(self) -> None:
        """A damaged groups.json stops the load with ValueError naming the file."""
        os.makedirs(self.data_dir)
        with open(os.path.join(self.data_dir, "groups.json"), "w") as handle:
            handle.write('{"version": 1, "groups": [{"group": "g"}]}')
        with self.assertRaises(ValueError) as caught:
            self.service()
        self.assertIn("groups.json: groups[0]: missing", str(caught.exception))


class AdminAndShutdownTests(_ServiceTestCase):
    def test_admin_commands(self) -> None:
        """ADMIN_COMMIT, ADMIN_RESET_OFFSETS and ADMIN_DELETE_GROUP answer once the files
        hold the change; DESCRIBE_GROUP and LIST_GROUPS read the current state; all three
        admin changes are refused while the group has live members."""
        service = self.service()
        self.joined(service, "c1")
        self.assertRaises(InvalidGroupRequest, service.delete_group, "g", "orders")
        d = service.leave("g", "orders", "c1", 1)
        self.clock.advance(0)
        self.successResultOf(d)
        d = service.admin_commit("g", "orders", 0, 4)
        self.assertNoResult(d)
        self.clock.advance(0)
        self.successResultOf(d)
        self.assertEqual(self.on_disk("offsets.json")["offsets"][0]["committed"], {"0": 4})
        d = service.reset_offsets("g", "orders", "latest", 2)
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d), {2: 3})  # hw 2 -> next offset 3
        d = service.reset_offsets("g", "orders", "earliest")
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(d), {0: 1, 1: 1, 2: 1})
        description = service.describe("g", "orders")
        self.assertEqual((description.state, description.generation, description.committed,
                          description.hw, description.lag),
                         ("empty", 2, (1, 1, 1), (9, -1, 2), (9, 0, 2)))
        self.assertEqual(service.list_groups(), [("g", "orders")])
        d = service.delete_group("g", "orders")
        self.clock.advance(0)
        self.successResultOf(d)
        self.assertEqual((self.on_disk("groups.json")["groups"],
                          self.on_disk("offsets.json")["offsets"]), ([], []))
        self.assertEqual(service.list_groups(), [])

    def test_close_flushes_and_stops(self) -> None:
        """close() waits for pending writes, disarms every session timer, and later
        requests are refused with UNAVAILABLE."""
        runner = ManualRunner()
        service = self.service(runner)
        service.join("g", "orders", "c1")
        closed = service.close()
        [write] = self.clock.getDelayedCalls()  # the timer is gone, the pending write stays
        self.assertEqual(write.args, ())
        self.clock.advance(0)
        self.assertNoResult(closed)
        runner.run_next()
        self.successResultOf(closed)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.disk_generation(), 1)
        self.assertRaises(Unavailable, service.join, "g", "orders", "c2")
        self.assertRaises(Unavailable, service.heartbeat, "g", "orders", "c1", 1)

    def test_limits_reach_the_caller(self) -> None:
        """The configured limits apply through the service, refused synchronously."""
        service = self.service(max_members_per_group=1)
        self.joined(service, "c1")
        self.assertRaises(TooManyMembers, service.join, "g", "orders", "c2")
        self.assertRaises(UnknownMember, service.heartbeat, "g", "orders", "c2", 1)
