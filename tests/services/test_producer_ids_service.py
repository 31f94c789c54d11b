"""The producer id service (broker/services/producer_ids.py): ids unique across restarts
of one data directory (the high-water mark in producer_ids.json) and across the brokers of
a cluster (blocks reserved in etcd: the in-memory etcd of tests/control), waiting callers
served when a block arrives, and a failed reservation answered with Unavailable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from broker.errors import Unavailable
from broker.services.etcd import EtcdClient
from broker.services.producer_ids import EtcdBlockSource, LocalBlockSource, ProducerIds
from replication.producer_ids import ProducerIdBlock
from tests.control.fake_etcd import FakeEtcd, FakeGateway

ENDPOINTS = ["http://m1:2379"]
PREFIX = "/skerry/c/"


def result(d: Deferred[Any]) -> Any:
    out: list[Any] = []
    d.addBoth(out.append)
    assert out, "not answered"
    return out[0]


class LocalTests:

    def test_ids_stay_unique_across_restarts(self, tmp_path: Path) -> None:
        """A restarted broker never hands out an id again: it starts after the block the
        last run reserved (the rest of that block is skipped, as Kafka skips it)."""
        first = ProducerIds(LocalBlockSource(str(tmp_path)), block_size=10)
        got = [result(first.allocate()) for _ in range(25)]
        assert got == list(range(25))
        mark = json.loads((tmp_path / "producer_ids.json").read_text())["next"]
        assert mark >= 25
        again = ProducerIds(LocalBlockSource(str(tmp_path)), block_size=10)
        later = [result(again.allocate()) for _ in range(5)]
        assert min(later) >= mark and not set(later) & set(got)

    def test_the_mark_is_written_before_ids_are_used(self, tmp_path: Path) -> None:
        """The first id of a block is handed out only after the file covers the block."""
        ids = ProducerIds(LocalBlockSource(str(tmp_path)), block_size=100)
        assert result(ids.allocate()) == 0
        assert json.loads((tmp_path / "producer_ids.json").read_text())["next"] >= 100


class _Gate:
    """A block source whose reservations the test completes."""

    def __init__(self) -> None:
        self.pending: list[Deferred[ProducerIdBlock]] = []

    def reserve(self, size: int) -> Deferred[ProducerIdBlock]:
        d: Deferred[ProducerIdBlock] = Deferred()
        self.pending.append(d)
        return d


class WaitingTests:

    def test_callers_wait_for_the_block(self) -> None:
        """Callers arriving with no id reserved are answered, in order, when it arrives."""
        gate = _Gate()
        ids = ProducerIds(gate, block_size=3)
        waiting = [ids.allocate() for _ in range(4)]
        assert not any(d.called for d in waiting) and len(gate.pending) == 1
        gate.pending.pop(0).callback(ProducerIdBlock(100, 3))
        assert [result(d) for d in waiting[:3]] == [100, 101, 102]
        assert not waiting[3].called  # the fourth waits for the next block, already asked
        gate.pending.pop(0).callback(ProducerIdBlock(200, 3))
        assert result(waiting[3]) == 200

    def test_failed_reservation_fails_the_waiting_callers(self) -> None:
        """Unavailable (retriable for Kafka clients); the next call asks again."""
        gate = _Gate()
        ids = ProducerIds(gate, block_size=3)
        d = ids.allocate()
        gate.pending.pop(0).errback(RuntimeError("etcd down"))
        assert isinstance(result(d).value, Unavailable)
        d = ids.allocate()
        gate.pending.pop(0).callback(ProducerIdBlock(7, 3))
        assert result(d) == 7


class EtcdTests:

    def _broker(self, etcd: FakeEtcd, clock: Clock, data_dir: Path) -> ProducerIds:
        client = EtcdClient(ENDPOINTS, clock, FakeGateway(etcd, ENDPOINTS), request_timeout=2.0)
        return ProducerIds(EtcdBlockSource(client, PREFIX, LocalBlockSource(str(data_dir))),
                           block_size=10)

    def test_brokers_get_disjoint_ids(self, tmp_path: Path) -> None:
        """Three brokers of one cluster, interleaved: every id handed out once."""
        clock = Clock()
        etcd = FakeEtcd(clock)
        brokers = [self._broker(etcd, clock, tmp_path / str(i)) for i in range(3)]
        for i in range(3):
            (tmp_path / str(i)).mkdir()
        got: list[int] = []
        for _ in range(30):
            for b in brokers:
                got.append(result(b.allocate()))
        assert len(got) == len(set(got)) == 90
        stored = etcd.get(PREFIX + "producer_ids")
        assert stored is not None and json.loads(stored.value)["next"] > max(got)

    def test_cluster_counter_starts_above_a_brokers_own_ids(self, tmp_path: Path) -> None:
        """A broker that ran alone before joining lifts the cluster's counter above the ids
        it handed out alone."""
        data = tmp_path / "d"
        data.mkdir()
        alone = ProducerIds(LocalBlockSource(str(data)), block_size=500)
        solo = [result(alone.allocate()) for _ in range(3)]
        clock = Clock()
        etcd = FakeEtcd(clock)
        joined = self._broker(etcd, clock, data)
        assert result(joined.allocate()) >= 500 > max(solo)
