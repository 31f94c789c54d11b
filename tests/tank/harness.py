"""Test helpers for the TANK transport.

``Harness``: a whole broker built in memory over ``task.Clock`` with a synchronous thread
runner and the TANK service the shell builds for ``tank_port``; ``Conn`` feeds raw bytes
(in chunks of any size) to one connection over a ``StringTransport`` and splits what it
writes back into frames. ``tank_port_of``: the TANK port from a child broker's "skerry
listening on" line (the end-to-end tests). Expected bytes come from tests/tank/goldens.py
(the notes' captures) or the independent client, never from the server codec.
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
from broker.server import Broker, build_broker
from tests.support import ClockedHarness

__all__ = ["Conn", "Harness", "tank_port_of", "split"]

_LISTEN_RE = re.compile(r"skerry listening on .*?tank=([0-9.]+):([0-9]+)")
WALL_START_US = 1_700_000_000_000_000


def split(data: bytes) -> tuple[list[tuple[int, bytes]], bytes]:
    """Whole ``(msg_id, payload)`` frames at the front of ``data``, and the rest."""
    out = []
    pos = 0
    while len(data) - pos >= 5:
        msg_id, size = struct.unpack_from("<BI", data, pos)
        if len(data) - pos - 5 < size:
            break
        out.append((msg_id, data[pos + 5:pos + 5 + size]))
        pos += 5 + size
    return out, data[pos:]


def tank_port_of(log_text: str) -> int:
    match = _LISTEN_RE.search(log_text)
    if match is None:
        raise AssertionError(f"no tank listener in the log:\n{log_text}")
    return int(match.group(2))


class Conn:
    """One TANK connection over a ``StringTransport``."""

    def __init__(self, harness: Harness, port: int) -> None:
        self.harness = harness
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", port))
        self.proto = harness.service.factory.buildProtocol(self.transport.getPeer())
        self.proto.makeConnection(self.transport)

    def send(self, data: bytes, chunk: int | None = None) -> None:
        step = chunk or max(len(data), 1)
        for at in range(0, len(data), step):
            self.proto.dataReceived(data[at:at + step])
        self.harness.pump()

    def raw(self) -> bytes:
        data = self.transport.value()
        self.transport.clear()
        return data

    def frames(self) -> list[tuple[int, bytes]]:
        frames, rest = split(self.raw())
        assert rest == b"", rest
        return frames

    def request(self, data: bytes, chunk: int | None = None) -> bytes:
        """Send one request frame; return its whole reply frame."""
        self.send(data, chunk)
        out = self.raw()
        frames, rest = split(out)
        assert len(frames) == 1 and rest == b"", out
        return out

    @property
    def closed(self) -> bool:
        return bool(self.transport.disconnecting)

    def close(self) -> None:
        self.proto.connectionLost(None)
        self.harness.pump()


class Harness(ClockedHarness):
    """A broker with the TANK transport, in memory, on a ``task.Clock``."""

    def __init__(self, tmp_path: Path, config: dict[str, Any] | None = None) -> None:
        self.clock = Clock()
        self.clock.advance(1000)
        self.wall_us = WALL_START_US
        raw = {"data_dir": str(tmp_path / "data"), "port": 0, "tank_port": 0,
               "storage": {"fsync": "never"}, **(config or {})}
        self.config = config_from_mapping(raw)
        self.broker: Broker = build_broker(self.config, self.clock, run_in_thread=synchronous,
                                           now_us=self.now_us)
        self.service = self.broker.tank
        self._ports = 40000

    def connect(self) -> Conn:
        self._ports += 1
        conn = Conn(self, self._ports)
        assert conn.raw() == b"\x03\x00\x00\x00\x00"  # the greeting ping
        return conn

    def create(self, name: str, partitions: int = 1) -> None:
        self.core.create_topic(name, partitions, 1, None, None, None)

    def close(self) -> None:
        self.core.store.close()
