"""An in-process broker for reliability tests: ``build_broker`` over ``task.Clock``, a thread
runner the test drives, and StringTransport connections. Nothing here touches real time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from broker.config import config_from_mapping
from broker.server import Broker, build_broker
from tests.support import ManualThread

__all__ = ["ManualThread", "InMemoryBroker"]




class InMemoryBroker:
    """One broker built over ``data_dir`` with a fake clock; ``fs`` is any FileLayer."""

    def __init__(self, data_dir: Path, fs: Any = None, now_us: Callable[[], int] | None = None,
                 **config: Any) -> None:
        self.clock = Clock()
        self.thread = ManualThread()
        raw = {"data_dir": str(data_dir), **config}
        kwargs: dict[str, Any] = {}
        if fs is not None:
            kwargs["fs"] = fs
        if now_us is not None:
            kwargs["now_us"] = now_us
        self.broker: Broker = build_broker(config_from_mapping(raw), self.clock,
                                           run_in_thread=self.thread, **kwargs)
        self.thread.run_all()

    def connect(self) -> tuple[Any, StringTransport]:
        proto = self.broker.v1_factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        return proto, transport

    def settle(self, rounds: int = 5) -> None:
        """Let queued work finish: reactor turns and thread jobs, a few times over."""
        for _ in range(rounds):
            self.clock.advance(0)
            self.thread.run_all()
            self.clock.advance(0)

    def request(self, proto: Any, transport: StringTransport, line: str) -> list[bytes]:
        """Send one line, settle, return (and clear) every reply line written so far."""
        transport.clear()
        proto.dataReceived(line.encode() + b"\n")
        self.settle()
        out = transport.value().splitlines()
        transport.clear()
        return out

    def close(self) -> None:
        d = self.broker.stop()
        for _ in range(50):
            self.settle()
            self.clock.advance(0.05)
            if d.called:
                break
