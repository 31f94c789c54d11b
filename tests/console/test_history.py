"""The console's memory of lag and rates, on ``task.Clock``: what the charts are drawn from.

A broker is built in memory (``build_broker`` over ``task.Clock``, fsyncs inline), driven
through its V1 transport and group service, and the console's documents are read directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from broker.config import config_from_mapping
from broker.console.history import History, Ring
from broker.core.durability import synchronous
from broker.server import Broker, build_broker


class _Harness:
    def __init__(self, tmp_path: Path, interval_ms: int) -> None:
        self.clock = Clock()
        raw = {"data_dir": str(tmp_path / "data"), "console_port": 0,
               "console": {"sample_interval_ms": interval_ms},
               "topics": {"orders": {"partitions": 2}}}
        self.broker: Broker = build_broker(config_from_mapping(raw), self.clock,
                                           run_in_thread=synchronous)
        self.console = self.broker.console
        self.proto = self.broker.v1_factory.buildProtocol(None)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)

    def send(self, *lines: str) -> None:
        self.proto.dataReceived("".join(line + "\n" for line in lines).encode())
        self.clock.advance(0)

    def group(self) -> dict[str, Any]:
        return self.console.data.group("billing", "orders")  # type: ignore[no-any-return]


class RingTests:
    def test_keeps_the_last_capacity_samples_oldest_first(self) -> None:
        """A full ring drops its oldest sample for each new one."""
        ring: Ring[int] = Ring(3)
        for t in range(5):
            ring.add(float(t), t * 10)
        assert list(ring) == [(2.0, 20), (3.0, 30), (4.0, 40)]
        assert ring.last() == (4.0, 40) and len(ring) == 3


class HistoryTests:
    def test_capacity_is_one_hour_of_samples(self) -> None:
        """At a 5 s interval, 720 samples; at 60 s, 60."""
        assert History(5.0, lambda: 0.0, None, None).capacity == 720
        assert History(60.0, lambda: 0.0, None, None).capacity == 60

    def test_lag_is_sampled_on_the_clock_and_an_hour_is_kept(self, tmp_path: Path) -> None:
        """The sampler runs every interval of the broker clock; each sample holds the lag of
        every partition; after more than an hour the oldest samples are gone."""
        h = _Harness(tmp_path, interval_ms=60_000)
        h.broker.console.sampler.start()
        h.send("V1|1|PRODUCE|orders a:1 partition=0", "V1|2|PRODUCE|orders a:2 partition=0",
               "V1|3|PRODUCE|orders b:1 partition=1",
               "V1|4|JOIN|billing orders m1 session_timeout_ms=3600000")
        assert h.group()["history"]["samples"] == []  # the group did not exist at t=0
        h.clock.advance(60)
        samples = h.group()["history"]["samples"]
        assert samples == [{"age_s": 0.0, "lag": {"0": 2, "1": 1}}]
        h.send("V1|5|PRODUCE|orders a:3 partition=0")
        h.clock.advance(30)
        assert len(h.group()["history"]["samples"]) == 1  # not yet the next interval
        h.clock.advance(30)
        samples = h.group()["history"]["samples"]
        assert [s["lag"]["0"] for s in samples] == [2, 3]
        assert [s["age_s"] for s in samples] == [60.0, 0.0]
        for _ in range(70):
            h.clock.advance(60)
        samples = h.group()["history"]["samples"]
        assert len(samples) == 60 and samples[0]["age_s"] == 59 * 60.0
        h.broker.console.sampler.stop()

    def test_deleted_group_loses_its_series(self, tmp_path: Path) -> None:
        """A group deleted by ADMIN_DELETE_GROUP is dropped from the history at the next
        sample (its memory is freed)."""
        h = _Harness(tmp_path, interval_ms=1000)
        h.broker.console.sampler.start()
        h.send("V1|1|JOIN|billing orders m1")
        h.clock.advance(1)
        assert ("billing", "orders") in h.console.history.lag
        h.send("V1|2|LEAVE|billing orders m1 1",
               "V1|3|ADMIN_DELETE_GROUP|billing orders")
        h.clock.advance(1)
        assert ("billing", "orders") not in h.console.history.lag
        h.broker.console.sampler.stop()

    def test_rates_come_from_the_traffic_counters(self, tmp_path: Path) -> None:
        """Produce and consume rates are the counters' growth per second between samples."""
        h = _Harness(tmp_path, interval_ms=2000)
        h.broker.console.sampler.start()
        h.send(*[f"V1|{i}|PRODUCE|orders k:v{i} partition=0" for i in range(10)])
        h.clock.advance(2)
        h.send("V1|20|CONSUME|orders 0 0 max=4")
        h.clock.advance(2)
        doc = h.console.data.overview()
        produce = [r["messages_per_s"] for r in doc["rates"]["produce"]]
        consume = [r["messages_per_s"] for r in doc["rates"]["consume"]]
        assert produce == [5.0, 0.0] and consume == [0.0, 2.0]
        assert doc["totals"]["messages_in"] == 10 and doc["totals"]["messages_out"] == 4
        h.broker.console.sampler.stop()

    def test_with_metrics_on_the_console_reads_the_same_counters(self, tmp_path: Path) -> None:
        """With /metrics on as well, the console's totals are /metrics' counters (one set
        of counters fed by the core, not two)."""
        clock = Clock()
        raw = {"data_dir": str(tmp_path / "data"), "console_port": 0, "metrics_port": 0,
               "topics": {"orders": {"partitions": 1}}}
        broker = build_broker(config_from_mapping(raw), clock, run_in_thread=synchronous)
        proto = broker.v1_factory.buildProtocol(None)
        proto.makeConnection(StringTransport())
        proto.dataReceived(b"V1|1|PRODUCE|orders k:v\nV1|2|PRODUCE|orders k:w\n")
        clock.advance(0)
        assert broker.core.metrics is broker.metrics.metrics
        assert broker.console.data.overview()["totals"]["messages_in"] == 2
        assert broker.metrics.metrics.messages_in == {"orders": 2}
