"""The listener description (``broker.transport.listeners``) and the shell's loop over it:
every transport is checked, opened and told its address the same way, refused and waited
for the same way while the broker stops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactor

from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.server import build_broker
from broker.transport.listeners import BACKLOG, Listener


class Factory:
    def __init__(self) -> None:
        self.refusing: str | None = None
        self.busy = False

    def all_idle(self) -> bool:
        return not self.busy


class ListenerTests:
    def test_listen_checks_opens_and_learns_the_address(self) -> None:
        """``before`` sees the host first, the socket is opened with the shared backlog,
        and ``bound`` learns the address the reactor gave."""
        calls: list[Any] = []
        factory = Factory()
        listener = Listener("x", "x_port", factory, before=calls.append,
                            bound=lambda a: calls.append(a.port))
        reactor = MemoryReactor()
        listener.listen(reactor, "127.0.0.1", 0)
        ((port, got, backlog, interface),) = reactor.tcpServers
        assert (port, got, backlog, interface) == (0, factory, BACKLOG, "127.0.0.1")
        assert calls[0] == "127.0.0.1" and isinstance(calls[1], int)

    def test_a_refused_check_opens_nothing(self) -> None:
        """A ``before`` that raises ``ValueError`` refuses the start: no socket."""
        def refuse(host: str) -> None:
            raise ValueError(f"not on {host}")

        reactor = MemoryReactor()
        with pytest.raises(ValueError, match="not on 0.0.0.0"):
            Listener("x", "x_port", Factory(), before=refuse).listen(reactor, "0.0.0.0", 0)
        assert reactor.tcpServers == []

    def test_refuse_and_idle(self) -> None:
        """``refuse`` turns new connections away; ``idle`` is the factory's."""
        factory = Factory()
        listener = Listener("x", "x_port", factory)
        listener.refuse()
        assert factory.refusing == "broker is shutting down"
        factory.busy = True
        assert not listener.idle()


class ShellTests:
    def test_the_shell_opens_every_configured_transport(self, tmp_path: Path) -> None:
        """``Broker.listen`` loops over the listeners: V1, Kafka and TANK here, each on its
        own setting's port, named in the addresses it reports."""
        broker = build_broker(config_from_mapping({
            "data_dir": str(tmp_path / "data"), "port": 0, "kafka_port": 0, "tank_port": 0,
            "host": "127.0.0.1"}), Clock(), run_in_thread=synchronous)
        assert [(lst.name, lst.setting) for lst in broker.listeners()] == [
            ("v1", "port"), ("kafka", "kafka_port"), ("tank", "tank_port")]
        reactor = MemoryReactor()
        addresses = broker.listen(reactor)
        assert [a.split("=")[0] for a in addresses] == ["v1", "kafka", "tank"]
        assert [server[1] for server in reactor.tcpServers] == [
            broker.v1_factory, broker.kafka.factory, broker.tank.factory]
        assert broker.kafka.node.host == "0.0.0.0"  # told its bound address
