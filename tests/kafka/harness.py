"""Test helpers for the Kafka transport.

``Harness``: a whole broker built in memory over ``task.Clock`` with a synchronous thread
runner and a ``KafkaService`` over its core, and ``Conn`` clients speaking raw frames over
``StringTransport`` (no sockets, no real time). ``request``: a request frame packed by hand
(header v1 + body bytes), so expected bytes never come from the codec under test.
``kafka_port_of``: the Kafka port from a child broker's "skerry listening on" line.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.kafka.service import KafkaService
from broker.server import Broker, build_broker
from tests.support import ClockedHarness

__all__ = ["Harness", "Conn", "request", "kafka_port_of", "i16", "i32", "i64", "string",
           "WALL_START_US"]

_LISTEN_RE = re.compile(r"kafka=([0-9.]+):([0-9]+)")
WALL_START_US = 1_700_000_000_000_000


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    raw = s.encode()
    return i16(len(raw)) + raw


def request(api_key: int, version: int, correlation_id: int, body: bytes = b"",
            client_id: str | None = "test") -> bytes:
    """A whole request frame: size, header v1, body."""
    payload = i16(api_key) + i16(version) + i32(correlation_id) + string(client_id) + body
    return i32(len(payload)) + payload


def kafka_port_of(log_text: str) -> int:
    match = _LISTEN_RE.search(log_text)
    if match is None:
        raise AssertionError(f"no kafka listener in the log:\n{log_text}")
    return int(match.group(2))


class Conn:
    """One Kafka connection over a ``StringTransport``."""

    def __init__(self, harness: Harness, port: int) -> None:
        self.harness = harness
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", port))
        self.proto = harness.service.factory.buildProtocol(self.transport.getPeer())
        self.proto.makeConnection(self.transport)

    def send_raw(self, data: bytes) -> None:
        self.proto.dataReceived(data)
        self.harness.pump()

    def responses(self) -> list[tuple[int, bytes]]:
        """(correlation id, body) of every complete response written since the last call."""
        data = self.transport.value()
        out = []
        pos = 0
        while pos + 4 <= len(data):
            (size,) = struct.unpack_from(">i", data, pos)
            if pos + 4 + size > len(data):
                break
            (cid,) = struct.unpack_from(">i", data, pos + 4)
            out.append((cid, data[pos + 8:pos + 4 + size]))
            pos += 4 + size
        self.transport.clear()
        if pos < len(data):
            self.transport.write(data[pos:])
        return out

    def call(self, api_key: int, version: int, body: bytes = b"", cid: int = 7) -> bytes:
        """Send one request; returns its response body (asserts exactly one response)."""
        self.send_raw(request(api_key, version, cid, body))
        got = self.responses()
        assert len(got) == 1, got
        assert got[0][0] == cid
        return got[0][1]

    @property
    def closed(self) -> bool:
        return bool(self.transport.disconnecting)


class Harness(ClockedHarness):
    """A broker with the Kafka transport, in memory, on a ``task.Clock``."""

    def __init__(self, tmp_path: Path, config: dict[str, Any] | None = None) -> None:
        self.clock = Clock()
        self.clock.advance(1000)
        self.wall_us = WALL_START_US
        raw = {"data_dir": str(tmp_path / "data"), "port": 0,
               "storage": {"fsync": "never"}, **(config or {})}
        self.config = config_from_mapping(raw)
        self.broker: Broker = build_broker(self.config, self.clock, run_in_thread=synchronous,
                                           now_us=self.now_us)
        self.service = KafkaService(self.broker.core, self.config, self.clock,
                                    now_us=self.now_us)
        self.service.node.port = 9092
        self._ports = 40000

    def serve_modern_table(self) -> None:
        """Advertise and serve what the handlers serve once the data path is modern
        (record batches v2 and InitProducerId: the other helpers' work), so the other APIs'
        newer versions are served here without the classic-era cap
        (``handlers.dispatch.CLASSIC_ERA``). Produce v3+/Fetch v4+/InitProducerId are in
        the table only to lift the cap; the tests that use this do not send them."""
        from broker.kafka import codec as c
        from broker.kafka.handlers import admin, data, dispatch, groups, metadata

        lifted = {c.ApiKey.PRODUCE: (0, 9), c.ApiKey.FETCH: (0, 12),
                  c.ApiKey.INIT_PRODUCER_ID: (0, 4)}
        table = dispatch.advertised_versions(dispatch.VERSIONS, metadata.VERSIONS,
                                             data.VERSIONS, groups.GROUP_VERSIONS,
                                             admin.ADMIN_VERSIONS, lifted)
        self.service.handlers.versions = table
        self.service.ctx.advertised = table

    def connect(self) -> Conn:
        self._ports += 1
        return Conn(self, self._ports)

    def close(self) -> None:
        self.service.stop()
        d = self.broker.core.stop()
        for _ in range(50):
            if d.called:
                break
            self.advance(0.02)


def start_kafka_broker(workdir: Path, config: dict[str, Any] | None = None
                       ) -> tuple[Any, int]:
    """A child ``skerry serve`` with the Kafka listener on a free loopback port:
    ``(BrokerProcess, kafka port)``; the caller stops it (``with`` or ``stop``)."""
    from tests.support import BrokerProcess

    proc = BrokerProcess(workdir, {"kafka_port": 0, **(config or {})})
    proc.start()
    return proc, kafka_port_of(proc.log_text())
