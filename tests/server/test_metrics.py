"""Metrics and health: what an operator scraping /metrics and probing /health sees.

Most tests drive the real core, store and V1 transport in memory (StringTransport
connections, ``task.Clock`` time, fsyncs run inline), then read the Prometheus text the
endpoint would serve, so latencies are exact. The last ones run a real ``skerry serve`` and
scrape it over HTTP.
"""

from __future__ import annotations

import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactor, StringTransport
from twisted.web.test.requesthelper import DummyRequest

from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.metrics import MetricsService, StartupResponder
from broker.server import Broker, build_broker
from broker.version import skerry_version
from data import speedups
from tests.support import BrokerProcess


def scrape(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a Prometheus text page, keyed by (name, labels)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: dict[Any, float], name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


@pytest.fixture(autouse=True)
def close_harnesses() -> Iterator[None]:
    """Each Harness's store gives its files and lock back after the test (no shutdown)."""
    yield
    while Harness.unclosed:
        Harness.unclosed.pop().broker.core.store.close()


class Harness:
    """A broker with metrics on, over task.Clock and inline fsyncs."""

    #: Harnesses not yet closed (``close_harnesses`` above closes them after each test).
    unclosed: list[Harness] = []

    def __init__(self, tmp_path: Path, **config: Any) -> None:
        Harness.unclosed.append(self)
        self.clock = Clock()
        raw = {"data_dir": str(tmp_path / "data"), "metrics_port": 0,
               "topics": {"orders": {"partitions": 1}}, **config}
        self.broker: Broker = build_broker(config_from_mapping(raw), self.clock,
                                           run_in_thread=synchronous)
        assert self.broker.metrics is not None
        self.service: MetricsService = self.broker.metrics

    def connect(self) -> tuple[Any, StringTransport]:
        proto = self.broker.v1_factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        return proto, transport

    def send(self, proto: Any, *lines: str) -> None:
        proto.dataReceived("".join(line + "\n" for line in lines).encode())
        self.clock.advance(0)  # the reactor turn ends: appends, fsyncs, group writes

    def samples(self) -> dict[Any, float]:
        return scrape(self.service.metrics.render().decode())


def replies(transport: StringTransport) -> list[str]:
    return transport.value().decode().splitlines()


class TrafficTests:
    def test_messages_and_bytes_in_and_out_per_topic(self, tmp_path: Path) -> None:
        """Messages and bytes appended and read are counted per topic; bytes are the
        record bytes as stored, so they add up to the partition's size on disk."""
        h = Harness(tmp_path)
        proto, tr = h.connect()
        h.send(proto, *[f"V1|{i}|PRODUCE|orders k{i}:value-{i}" for i in range(5)])
        h.send(proto, "V1|9|PRODUCE|payments k:aGVsbG8gd29ybGQ= enc=b64",
               "V1|10|CONSUME|orders 0 0")
        assert replies(tr)[-1].startswith("V1|10|OK|messages=0:value-0,1:value-1,")
        stored = h.broker.core.store.topic("orders").partitions[0].size_bytes()
        s = h.samples()
        assert value(s, "skerry_messages_in_total", topic="orders") == 5
        assert value(s, "skerry_bytes_in_total", topic="orders") == stored
        assert value(s, "skerry_messages_out_total", topic="orders") == 5
        assert value(s, "skerry_bytes_out_total", topic="orders") == stored
        assert value(s, "skerry_messages_in_total", topic="payments") == 1
        assert value(s, "skerry_messages_out_total", topic="payments") is None

    def test_deleted_topic_drops_its_counters(self, tmp_path: Path) -> None:
        """A deleted topic's series leave the page (a re-created one starts from zero)."""
        h = Harness(tmp_path)
        proto, _ = h.connect()
        h.send(proto, "V1|1|PRODUCE|gone k:v", "V1|2|ADMIN_DELETE_TOPIC|gone")
        s = h.samples()
        assert value(s, "skerry_messages_in_total", topic="gone") is None
        assert value(s, "skerry_partition_log_end_offset", topic="gone", partition="0") is None

    def test_requests_counted_per_command_with_pipelined_produce_in_bulk(
            self, tmp_path: Path) -> None:
        """100 PRODUCE lines in one read (the fast path), a PING and a malformed line are
        counted per command; the pipelined PRODUCEs appear 100 times in the latency
        histogram too (one observation weighted by the run)."""
        h = Harness(tmp_path)
        proto, tr = h.connect()
        h.send(proto, *[f"V1|{i}|PRODUCE|orders k:v{i}" for i in range(100)],
               "V1|100|PING|", "hello")
        assert len(replies(tr)) == 102
        s = h.samples()
        assert value(s, "skerry_requests_total", command="PRODUCE", transport="v1") == 100
        assert value(s, "skerry_requests_total", command="PING", transport="v1") == 1
        assert value(s, "skerry_requests_total", command="INVALID", transport="v1") == 1
        assert value(s, "skerry_request_duration_seconds_count", command="PRODUCE",
                     transport="v1") == 100
        assert value(s, "skerry_request_duration_seconds_count", command="PING",
                     transport="v1") == 1

    def test_request_response_produces_are_each_timed(self, tmp_path: Path) -> None:
        """PRODUCEs sent one at a time, each waiting for its reply (the request/response
        path, whose reply skips the ordering queue), are each counted and timed once."""
        h = Harness(tmp_path)
        proto, tr = h.connect()
        for i in range(3):
            h.send(proto, f"V1|{i}|PRODUCE|orders k:v{i}")
            assert len(replies(tr)) == i + 1
        s = h.samples()
        assert value(s, "skerry_requests_total", command="PRODUCE", transport="v1") == 3
        assert value(s, "skerry_request_duration_seconds_count", command="PRODUCE",
                     transport="v1") == 3

    def test_latency_is_measured_on_the_broker_clock(self, tmp_path: Path) -> None:
        """A long poll answered 2 s after it arrived lands in the 2.5 s bucket and not the
        1 s one, with a sum of exactly 2 s."""
        h = Harness(tmp_path)
        waiting, tr = h.connect()
        h.send(waiting, "V1|1|CONSUME|orders 0 0 wait_ms=5000")
        assert replies(tr) == []
        h.clock.advance(2.0)
        producer, _ = h.connect()
        h.send(producer, "V1|2|PRODUCE|orders k:v")
        assert replies(tr) == ["V1|1|OK|messages=0:v hw=0"]
        s = h.samples()
        name = "skerry_request_duration_seconds"
        assert value(s, name + "_bucket", command="CONSUME", transport="v1", le="1.0") == 0
        assert value(s, name + "_bucket", command="CONSUME", transport="v1", le="2.5") == 1
        assert value(s, name + "_sum", command="CONSUME", transport="v1") == 2.0

    def test_every_fsync_is_timed(self, tmp_path: Path) -> None:
        """With fsync=always each group-commit fsync adds one observation of fsync latency."""
        h = Harness(tmp_path, storage={"fsync": "always"})
        proto, tr = h.connect()
        before = h.broker.core.committer.syncs
        h.send(proto, "V1|1|PRODUCE|orders k:v")
        h.send(proto, "V1|2|PRODUCE|orders k:w")
        assert replies(tr)[-1] == "V1|2|OK|partition=0 offset=1 hw=1"
        syncs = h.broker.core.committer.syncs - before
        assert syncs == 2
        assert value(h.samples(), "skerry_fsync_seconds_count") == syncs


class StateTests:
    def test_connections_gauge(self, tmp_path: Path) -> None:
        """The gauge follows open V1 connections."""
        h = Harness(tmp_path)
        first, _ = h.connect()
        h.connect()
        assert value(h.samples(), "skerry_connections", transport="v1") == 2
        first.connectionLost(None)
        assert value(h.samples(), "skerry_connections", transport="v1") == 1

    def test_group_lag_members_and_rebalances(self, tmp_path: Path) -> None:
        """Per-partition lag is hw + 1 - committed; members and rebalances follow JOINs."""
        h = Harness(tmp_path)
        proto, tr = h.connect()
        h.send(proto, "V1|1|JOIN|analytics orders c1",
               *[f"V1|{i}|PRODUCE|orders k:v{i}" for i in range(2, 5)])
        h.send(proto, "V1|5|COMMIT|analytics orders c1 1 0 1")
        assert replies(tr)[-1] == "V1|5|OK|committed=true"
        s = h.samples()
        key = {"group": "analytics", "topic": "orders"}
        assert value(s, "skerry_group_lag", partition="0", **key) == 2
        assert value(s, "skerry_group_lag_total", **key) == 2
        assert value(s, "skerry_group_committed_offset", partition="0", **key) == 1
        assert value(s, "skerry_group_members", **key) == 1
        assert value(s, "skerry_group_coordinator", **key) == 0  # a single broker: itself
        assert value(s, "skerry_group_rebalances_total", **key) == 1
        h.send(proto, "V1|6|JOIN|analytics orders c2")
        s = h.samples()
        assert value(s, "skerry_group_members", **key) == 2
        assert value(s, "skerry_group_rebalances_total", **key) == 2

    def test_consumer_group_type_epochs_and_pending(self, tmp_path: Path) -> None:
        """A KIP-848 group (GROUP_HEARTBEAT) shows as type consumer with its group epoch,
        each member's epoch, and what each owns and still waits for; a classic group on
        the same broker shows as type classic."""
        h = Harness(tmp_path, topics={"orders": {"partitions": 4}})
        proto, tr = h.connect()
        h.send(proto, "V1|1|GROUP_HEARTBEAT|dash w1 0 topics=orders",
               "V1|2|GROUP_HEARTBEAT|dash w2 0 topics=orders",
               "V1|3|GROUP_HEARTBEAT|dash w1 1", "V1|4|JOIN|analytics orders c1")
        assert [r.split("|")[2] for r in replies(tr)] == ["OK"] * 4, replies(tr)
        s = h.samples()
        key = {"group": "dash", "topic": "orders"}
        assert value(s, "skerry_group_info", type="consumer", **key) == 1
        assert value(s, "skerry_group_info", type="classic", group="analytics",
                     topic="orders") == 1
        assert value(s, "skerry_group_epoch", **key) == 2
        assert value(s, "skerry_group_member_epoch", member="w1", **key) == 1
        assert value(s, "skerry_group_member_epoch", member="w2", **key) == 2
        assert value(s, "skerry_group_member_partitions", member="w1", state="assigned",
                     **key) == 2
        assert value(s, "skerry_group_member_partitions", member="w2", state="assigned",
                     **key) == 0
        assert value(s, "skerry_group_member_partitions", member="w2", state="pending",
                     **key) == 2
        assert value(s, "skerry_group_members", **key) == 2

    def test_isr_size_and_under_replicated_partitions(self, tmp_path: Path) -> None:
        """A new replication-factor-2 partition is under-replicated (followers start
        outside the ISR) until its follower reports the leader's last offset."""
        h = Harness(tmp_path, topics={"orders": {"partitions": 1},
                                      "rt": {"partitions": 1, "replication_factor": 2}})
        proto, tr = h.connect()
        h.send(proto, "V1|2|PRODUCE|rt k:v")
        key = {"topic": "rt", "partition": "0"}
        s = h.samples()
        assert value(s, "skerry_partition_isr_size", **key) == 1
        assert value(s, "skerry_partition_replicas", **key) == 2
        assert value(s, "skerry_partition_under_replicated", **key) == 1
        assert value(s, "skerry_under_replicated_partitions") == 1
        h.send(proto, "V1|3|REPLICA_FETCH|rt 0 1 0")
        assert "isr=[0 1]" in replies(tr)[-1]
        s = h.samples()
        assert value(s, "skerry_partition_isr_size", **key) == 2
        assert value(s, "skerry_partition_under_replicated", **key) == 0
        assert value(s, "skerry_under_replicated_partitions") == 0
        assert value(s, "skerry_partition_high_watermark", **key) == 0
        assert value(s, "skerry_partition_log_end_offset", **key) == 1


def render(service: MetricsService, path: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
    request = DummyRequest([path])
    resource = service.site.getResourceFor(request)
    body = resource.render(request)
    headers = {k.lower(): v[0] for k, v in request.responseHeaders.getAllRawHeaders()}
    return request.responseCode or 200, headers, body


class HealthTests:
    def test_health_follows_the_broker_lifecycle(self, tmp_path: Path) -> None:
        """/health is 503 starting until the listeners are up, 200 ready, then 503
        stopping once shutdown begins; skerry_ready follows it."""
        h = Harness(tmp_path)
        assert render(h.service, b"health")[::2] == (503, b"starting\nskerry %s\n" % skerry_version().encode())
        assert value(h.samples(), "skerry_ready") == 0
        h.broker.listen(MemoryReactor())
        assert render(h.service, b"health")[::2] == (200, b"ready\nskerry %s\n" % skerry_version().encode())
        assert value(h.samples(), "skerry_ready") == 1
        h.service.stopping()
        assert render(h.service, b"health")[::2] == (503, b"stopping\nskerry %s\n" % skerry_version().encode())

    def test_metrics_say_which_implementation_runs(self, tmp_path: Path) -> None:
        """skerry_implementation{loops=...} is 1 for the loops that run (compiled or the
        Python twin: data.speedups) and 0 for the others."""
        h = Harness(tmp_path)
        samples = h.samples()
        running = speedups.implementation()
        assert value(samples, "skerry_implementation", loops=running) == 1
        others = {"compiled", "python", "mixed"} - {running}
        assert [value(samples, "skerry_implementation", loops=k) for k in sorted(others)] == [0, 0]

    def test_metrics_page_is_prometheus_text(self, tmp_path: Path) -> None:
        """/metrics answers the Prometheus text format with its content type."""
        h = Harness(tmp_path)
        proto, _ = h.connect()
        h.send(proto, "V1|1|PRODUCE|orders k:v")
        code, headers, body = render(h.service, b"metrics")
        assert code == 200
        assert headers[b"content-type"].startswith(b"text/plain; version=")
        assert value(scrape(body.decode()), "skerry_messages_in_total", topic="orders") == 1

    def test_startup_responder_answers_starting_and_hands_the_socket_over(self) -> None:
        """While the store opens, a thread answers 503 starting (404 elsewhere); the
        socket it hands over is still listening, so a client that connects in between is
        served rather than refused."""
        responder = StartupResponder("127.0.0.1", 0)
        host, port = responder.address
        try:
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(f"http://{host}:{port}/health", timeout=5)
            assert (info.value.code, info.value.read()) == (503, b"starting\nskerry %s\n" % skerry_version().encode())
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(f"http://{host}:{port}/nope", timeout=5)
            assert info.value.code == 404
        finally:
            sock = responder.hand_over()
        with sock, socket.create_connection((host, port), timeout=5) as client:
            sock.setblocking(True)
            sock.settimeout(5)
            accepted, _ = sock.accept()
            accepted.close()
            assert client.fileno() >= 0


def metrics_url(proc: BrokerProcess) -> str:
    found = re.findall(r"metrics=([0-9.]+):([0-9]+)", proc.log_text())
    assert found, proc.log_text()
    host, port = found[-1]  # the latest start (the log is kept across restarts)
    return f"http://{host}:{port}"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class EndToEndTests:
    def test_scrape_after_traffic_and_ready_after_recovery(self, tmp_path: Path) -> None:
        """A real broker with metrics_port: after produce and consume traffic /metrics has
        the named series with the right values; after a kill -9 the restarted broker
        recovers and /health says ready; SIGTERM still exits 0."""
        proc = BrokerProcess(tmp_path, {"metrics_port": 0,
                                        "topics": {"orders": {"partitions": 1}}})
        with proc:
            client = proc.client()
            client.send(b"".join(b"V1|%d|PRODUCE|orders k:v%d\n" % (i, i) for i in range(10)))
            assert client.readlines(10)[-1] == b"V1|9|OK|partition=0 offset=9 hw=9"
            assert client.request("V1|10|CONSUME|orders 0 0").startswith(
                "V1|10|OK|messages=0:v0,")
            status, body = get(metrics_url(proc) + "/metrics")
            assert status == 200
            s = scrape(body)
            assert value(s, "skerry_messages_in_total", topic="orders") == 10
            assert value(s, "skerry_messages_out_total", topic="orders") == 10
            assert value(s, "skerry_requests_total", command="PRODUCE", transport="v1") == 10
            assert value(s, "skerry_requests_total", command="CONSUME", transport="v1") == 1
            assert value(s, "skerry_connections", transport="v1") == 1
            assert value(s, "skerry_partition_high_watermark", topic="orders", partition="0") == 9
            assert value(s, "skerry_fsync_seconds_count") >= 1
            client.close()
            proc.kill9()
            proc.start()
            assert get(metrics_url(proc) + "/health") == (200, f"ready\nskerry {skerry_version()}\n")
            s = scrape(get(metrics_url(proc) + "/metrics")[1])
            assert value(s, "skerry_ready") == 1
            assert value(s, "skerry_partition_log_end_offset", topic="orders", partition="0") == 10
            assert proc.stop() == 0
