"""The broker's CPU per offset commit against how many groups it holds: one broker (built as
``skerry serve`` builds it, over a ``task.Clock``, the store in a temporary directory)
holding ``G`` groups, each with a committed offset on every one of a topic's ``--partitions``
partitions, then ``--commits`` commits of one group, each in its own reactor turn and
answered once ``__skerry_groups`` holds it (the group log's write, ``acks=all``, through
the real produce path). Prints, per group count, the records the state has and the CPU
(process time) per commit.

    .venv/bin/python -m bench.group_commit_cpu [--groups 10,10000] [--partitions 50]

What it shows: a write that builds the records of what changed costs the same with 10 groups
as with 10,000; one that builds the whole state's records (what ``GroupStateLog`` did
before) costs in proportion to every group's records. Bounded: ``--commits`` commits per
group count, no time loop.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.task import Clock

from broker.config import config_from_mapping
from broker.server import build_broker

__all__ = ["run"]

TOPIC = "orders"


def _in_place(f: Callable[[], Any]) -> Deferred[Any]:
    return maybeDeferred(f)


def _settle(clock: Clock, done: list[Any]) -> None:
    for _ in range(1000):
        clock.advance(0)
        if done:
            return
    raise RuntimeError("the commit was never answered")


def run(groups: int, partitions: int, commits: int) -> dict[str, float]:
    """One broker with ``groups`` groups of ``partitions`` committed offsets each; the CPU
    seconds per commit of ``commits`` commits, one per reactor turn."""
    data_dir = tempfile.mkdtemp(prefix="skerry-gcpu-")
    clock = Clock()
    try:
        broker = build_broker(config_from_mapping({
            "data_dir": data_dir, "limits.max_groups": max(10_000, groups + 1)}),
            clock, run_in_thread=_in_place)
        broker.core.create_topic(TOPIC, partitions, 1, None, None, None)
        service = broker.core.groups
        filled: list[Any] = []
        for index in range(groups):
            for partition in range(partitions):
                d = service.admin_commit(f"group-{index}", TOPIC, partition, 0)
            if index % 1000 == 999 or index == groups - 1:
                filled.clear()
                d.addBoth(filled.append)
                _settle(clock, filled)
        records = groups * partitions
        start = time.process_time()
        for n in range(commits):
            done: list[Any] = []
            service.admin_commit("group-0", TOPIC, n % partitions, n + 1).addBoth(done.append)
            _settle(clock, done)
            if done[0] is not None:
                raise RuntimeError(f"commit failed: {done[0]}")
        cpu = (time.process_time() - start) / commits
        stopped = broker.stop()
        for _ in range(50):
            clock.advance(0.05)
            if stopped.called:
                break
        return {"groups": groups, "records": records, "cpu_ms_per_commit": cpu * 1000}
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", default="10,10000",
                        help="comma-separated group counts (default 10,10000)")
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--commits", type=int, default=50)
    args = parser.parse_args(argv)
    print(f"{'groups':>8} {'records':>9} {'CPU ms/commit':>14}")
    for count in (int(g) for g in args.groups.split(",")):
        row = run(count, args.partitions, args.commits)
        print(f"{row['groups']:>8} {row['records']:>9} {row['cpu_ms_per_commit']:>14.3f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
