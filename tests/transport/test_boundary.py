"""The dispatch boundary (``broker.transport.boundary``): a refusal is answered in the
transport's shape, a bug is answered INTERNAL and logged, never a dropped connection (the V1
PRODUCE fast path included), shutting down is one check, and requests and connections are
counted per transport on ``/metrics``."""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.errors import Unavailable
from broker.server import build_broker
from broker.transport.boundary import Boundary
from tests.server.test_metrics import scrape, value


class Refused(Exception):
    pass


def make(closing: bool = False) -> Boundary[str]:
    return Boundary("t", logging.getLogger("test.boundary"), closing=lambda: closing,
                    refusals=(Refused,), refused=lambda req, e: f"refused {req}: {e}",
                    internal=lambda req, e: f"internal {req}")


def boom() -> str:
    raise KeyError("bug")


class BoundaryTests:
    def test_a_refusal_is_answered_in_the_transports_shape(self) -> None:
        """A refusal goes through ``refused`` with its message."""
        def refuse() -> str:
            raise Refused("no such topic")
        assert make().guard("PRODUCE", "7", refuse) == "refused 7: no such topic"

    def test_a_bug_is_answered_internal_and_logged(self,
                                                   caplog: pytest.LogCaptureFixture) -> None:
        """Any other exception is answered INTERNAL and logged with its traceback."""
        with caplog.at_level(logging.ERROR, "test.boundary"):
            assert make().guard("PRODUCE", "7", boom) == "internal 7"
        (record,) = caplog.records
        assert "handler for PRODUCE failed" in record.getMessage()
        assert record.exc_info is not None and record.exc_info[0] is KeyError

    def test_the_answer_of_a_handler_that_ran(self) -> None:
        """Without an exception, the handler's own answer is returned."""
        assert make().guard("PING", "1", lambda x: f"pong {x}", "a") == "pong a"

    def test_a_deferred_failure_takes_the_same_path(self) -> None:
        """``failed`` sorts a Deferred's exception the same way: refusal or bug."""
        b = make()
        assert b.failed("X", "1", Refused("later")) == "refused 1: later"
        assert b.failed("X", "1", ValueError("bug"), "Traceback: ...") == "internal 1"

    def test_shutting_down_is_the_cores_closing(self) -> None:
        assert make(closing=True).shutting_down()
        assert not make(closing=False).shutting_down()

    def test_requests_are_counted_per_command(self) -> None:
        """``count`` adds up per command (what /metrics shows)."""
        b = make()
        b.count("PRODUCE")
        b.count("PRODUCE", 31)
        b.count("PING")
        assert b.counts == {"PRODUCE": 32, "PING": 1}


class Broker:
    def __init__(self, tmp_path: Path, **config: Any) -> None:
        self.clock = Clock()
        raw = {"data_dir": str(tmp_path / "data"), "metrics_port": 0,
               "topics": {"orders": {"partitions": 1}}, **config}
        self.broker = build_broker(config_from_mapping(raw), self.clock,
                                   run_in_thread=synchronous)

    def connect(self, factory: Any) -> tuple[Any, StringTransport]:
        proto = factory.buildProtocol(("127.0.0.1", 1))
        transport = StringTransport()
        proto.makeConnection(transport)
        return proto, transport

    def samples(self) -> dict[Any, float]:
        assert self.broker.metrics is not None
        return scrape(self.broker.metrics.metrics.render().decode())


class V1FastPathTests:
    def test_a_bug_in_the_fast_path_is_answered_internal(self, tmp_path: Path) -> None:
        """An unexpected exception while a plain PRODUCE takes the fast path is answered
        ``INTERNAL`` and the connection keeps serving (it used to be dropped)."""
        b = Broker(tmp_path)

        def broken(*args: Any) -> None:
            raise RuntimeError("a bug")

        b.broker.core.produce = broken  # type: ignore[method-assign]
        proto, tr = b.connect(b.broker.v1_factory)
        proto.dataReceived(b"V1|1|PRODUCE|orders k:v\n")
        b.clock.advance(0)
        proto.dataReceived(b"V1|2|PING|\n")
        lines = tr.value().decode().splitlines()
        assert lines[0].startswith("V1|1|ERR|INTERNAL")
        assert lines[1].startswith("V1|2|OK")
        assert not tr.disconnecting

    def test_a_bug_in_a_pipelined_run_answers_each_request(self, tmp_path: Path) -> None:
        """A run of pipelined PRODUCEs that fails with a bug: each one is answered
        ``INTERNAL``, in order, and the connection stays."""
        b = Broker(tmp_path)

        def broken(*args: Any) -> None:
            raise RuntimeError("a bug")

        b.broker.core.produce = broken  # type: ignore[method-assign]
        proto, tr = b.connect(b.broker.v1_factory)
        proto.dataReceived(b"".join(b"V1|%d|PRODUCE|orders k:v\n" % i for i in range(3)))
        b.clock.advance(0)
        proto.dataReceived(b"V1|9|PING|\n")
        lines = tr.value().decode().splitlines()
        assert [line.split("|")[1:4] for line in lines[:3]] == [
            [str(i), "ERR", "INTERNAL"] for i in range(3)]
        assert lines[3].startswith("V1|9|OK")
        assert not tr.disconnecting

    def test_a_refusal_in_the_fast_path_keeps_its_code(self, tmp_path: Path) -> None:
        """A refusal (not a bug) in the fast path keeps its own code."""
        b = Broker(tmp_path)

        def refuse(*args: Any) -> None:
            raise Unavailable("not now")

        b.broker.core.produce = refuse  # type: ignore[method-assign]
        proto, tr = b.connect(b.broker.v1_factory)
        proto.dataReceived(b"V1|1|PRODUCE|orders k:v\n")
        assert tr.value().decode().startswith("V1|1|ERR|UNAVAILABLE|not now")


def kafka_api_versions(correlation_id: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, correlation_id, -1)  # ApiVersions v0, no client id
    return struct.pack(">i", len(body)) + body


class PerTransportMetricsTests:
    def test_requests_and_connections_per_transport(self, tmp_path: Path) -> None:
        """``/metrics`` shows each transport's open connections and its requests per
        command, V1's beside Kafka's and TANK's."""
        b = Broker(tmp_path, kafka_port=0, tank_port=0)
        v1, _ = b.connect(b.broker.v1_factory)
        kafka, ktr = b.connect(b.broker.kafka.factory)
        tank, _ = b.connect(b.broker.tank.factory)
        kafka.dataReceived(kafka_api_versions(1) + kafka_api_versions(2))
        assert len(ktr.value()) > 0
        v1.dataReceived(b"V1|1|PING|\n")
        s = b.samples()
        for transport in ("v1", "kafka", "tank"):
            assert value(s, "skerry_connections", transport=transport) == 1
        assert value(s, "skerry_requests_total", command="ApiVersions",
                     transport="kafka") == 2
        assert value(s, "skerry_requests_total", command="PING", transport="v1") == 1
        kafka.transport.loseConnection()
        kafka.connectionLost(None)
        assert value(b.samples(), "skerry_connections", transport="kafka") == 0


class ShuttingDownTests:
    def test_kafka_and_tank_refuse_writes_while_stopping(self, tmp_path: Path) -> None:
        """Once the broker stops, Kafka answers a request (ApiVersions aside) with its
        retriable LEADER_NOT_AVAILABLE and TANK a produce with its fault code, as V1 and
        Iggy answer UNAVAILABLE."""
        from broker.kafka.codec import ErrorCode
        from broker.tank import codec as tc

        b = Broker(tmp_path, kafka_port=0, tank_port=0)
        b.broker.core.closing = True
        kafka = b.broker.kafka.factory.handlers
        assert kafka.boundary.shutting_down()
        reply = kafka.dispatch(kafka_api_versions(5)[4:])
        assert isinstance(reply, bytes) and reply[8:10] == b"\x00\x00"  # still served
        find = struct.pack(">hhih", 10, 0, 6, -1) + struct.pack(">h", 1) + b"g"
        reply = kafka.dispatch(find)  # FindCoordinator v0: the error code comes first
        assert isinstance(reply, bytes)
        assert reply[8:10] == struct.pack(">h", ErrorCode.LEADER_NOT_AVAILABLE)
        tank = b.broker.tank.factory.handlers
        produce = tc.Produce(client_version=2, request_id=3, client_id=b"t", required_acks=1,
                             ack_timeout_ms=0, topics=(tc.ProduceTopic(b"orders", (
                                 tc.ProducePartition(0, tc.encode_bundle(
                                     [tc.Message(b"hello")])),)),))
        answer = tank.dispatch_request(produce)
        assert answer == tank.fault_reply(produce)
        b.broker.core.closing = False
        served: Any = tank.dispatch_request(produce)
        if isinstance(served, Deferred):  # waits for the turn's append
            results: list[bytes] = []
            served.addCallback(results.append)
            b.clock.advance(0)
            (served,) = results
        assert served != answer  # served again: appended, not a fault
