"""``bench/group_failover.py``: its checks catch what they are for (synthetic member
logs), and one run on real processes (one etcd member, three brokers, three V1 and three
confluent-kafka members under a steady producer) survives a kill -9 of the groups'
coordinator with nothing committed lost, moved back or read again."""

from __future__ import annotations

from typing import Any

import pytest

from bench.group_coordinator import TTL_MS
from bench.group_failover import KAFKA_GROUP, V1_GROUP, check, run
from tests.support import debian_tool


def _ev(group: str, name: str, ev: str, t: float, p: int, offset: int
        ) -> tuple[str, str, dict[str, Any]]:
    return group, name, {"ev": ev, "t": t, "p": p, "offset": offset}


def test_a_clean_history_passes() -> None:
    events = [_ev(V1_GROUP, "v0", "start", 1, 0, 0), _ev(V1_GROUP, "v0", "read", 2, 0, 0),
              _ev(V1_GROUP, "v0", "commit", 3, 0, 100), _ev(V1_GROUP, "v1", "start", 6, 0, 100),
              _ev(V1_GROUP, "v1", "read", 7, 0, 100), _ev(V1_GROUP, "v1", "commit", 8, 0, 200)]
    assert check(events, 5.0) == []


def test_a_commit_moved_back_is_caught() -> None:
    events = [_ev(KAFKA_GROUP, "k0", "commit", 3, 1, 300),
              _ev(KAFKA_GROUP, "k1", "commit", 6, 1, 200)]
    assert any("moved back" in p for p in check(events, 5.0))


def test_a_member_starting_below_the_last_commit_is_caught() -> None:
    events = [_ev(V1_GROUP, "v0", "commit", 3, 2, 300), _ev(V1_GROUP, "v1", "start", 6, 2, 0)]
    assert any("below the last acknowledged commit" in p for p in check(events, 5.0))


def test_reading_committed_messages_again_after_the_kill_is_caught() -> None:
    events = [_ev(KAFKA_GROUP, "k0", "commit", 3, 0, 300), _ev(KAFKA_GROUP, "k0", "read", 6, 0, 250)]
    assert any("after the kill" in p for p in check(events, 5.0))


@pytest.mark.slow
def test_one_kill_of_the_coordinator_under_load() -> None:
    """Every check of the run passes (``run`` raises naming what went wrong otherwise),
    and both groups are served again within TTL + 4 s: the target is TTL + 2 s, which
    the bench's 20 runs meet at the median (docs/cluster.md) and once missed by 0.2 s;
    one run on a CI machine busy with other tests gets 2 s more."""
    debian_tool("etcd", "etcd-server")  # a skip locally when missing, a failure in CI
    pytest.importorskip("confluent_kafka")
    (took,) = run(1, quiet=True)
    assert took <= TTL_MS / 1000 + 4, took
