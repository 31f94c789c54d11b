"""An in-memory cluster for tests: real brokers (``build_broker`` over real stores in
``tmp_path``) whose connections to each other are ``twisted.test.iosim`` pumps, each broker
on its own ``task.Clock`` advanced together, and fsyncs run synchronously.

``Network.crash(i)`` is a kill -9: the broker's objects are abandoned (its clock is never
advanced again, so none of its timers fire) and every connection to it drops; its files
stay as they were. ``Network.start(i)`` builds a broker over the same data dir again.
Clients speak V1 to a broker through a ``StringTransport`` (``Network.client``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.test import iosim

from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.peer_links import PeerProtocol
from broker.server import Broker, build_broker
from replication.cluster import BrokerAddress

TOPIC = "t"




class Client:
    """A V1 client connection to one in-memory broker."""

    def __init__(self, network: Network, broker_id: int) -> None:
        self.network = network
        node = network.nodes[broker_id]
        self.proto = node.broker.v1_factory.buildProtocol(None)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)
        self._seq = 0
        self._seen = 0

    def send(self, args: str) -> str:
        """Send ``COMMAND|args`` and return the cid used."""
        self._seq += 1
        cid = str(self._seq)
        self.proto.dataReceived(f"V1|{cid}|{args}\n".encode())
        return cid

    def replies(self) -> list[str]:
        """Every reply line received so far (not yet returned)."""
        lines = self.transport.value().decode().splitlines()
        fresh = lines[self._seen:]
        self._seen = len(lines)
        return fresh

    def request(self, args: str, *, within: float = 5.0) -> str:
        """Send one request and run the network until its reply comes back."""
        cid = self.send(args)
        waited = 0.0
        while True:
            self.network.flush()
            for line in self.replies():
                if line.startswith(f"V1|{cid}|"):
                    return line
            if waited >= within:
                raise AssertionError(f"no reply to {args!r} within {within} s")
            self.network.advance(0.01)
            waited += 0.01


class Node:
    def __init__(self, broker_id: int, data_dir: Path, config: dict[str, Any]) -> None:
        self.broker_id = broker_id
        self.data_dir = data_dir
        self.config = config
        self.clock = Clock()
        self.broker: Broker | None = None
        self.alive = False
        self.run_in_thread: Any = synchronous


class Network:
    """``count`` brokers sharing one cluster description."""

    #: Every network not yet closed; tests/conftest.py closes them after each test, so a
    #: test that forgets leaves no segment files or locks open in the test process.
    unclosed: list[Network] = []

    def __init__(self, tmp_path: Path, count: int = 3, *, partitions: int = 1,
                 replication_factor: int = 3, min_isr: int = 2,
                 replication: dict[str, Any] | None = None,
                 storage: dict[str, Any] | None = None,
                 start: bool = True) -> None:
        self.tmp_path = tmp_path
        self.addresses = {i: f"10.0.0.{i + 1}:9092" for i in range(count)}
        self.nodes: dict[int, Node] = {}
        self.pumps: list[tuple[int, int, iosim.IOPump]] = []
        self.connects: list[tuple[int, int]] = []
        self.blocked: set[frozenset[int]] = set()
        self.built: list[Broker] = []  # every broker started, crashed ones included
        Network.unclosed.append(self)
        repl = {"replica_lag_timeout_ms": 2000, "ack_timeout_ms": 1500, "fetch_wait_ms": 500,
                "retry_backoff_ms": 100, "request_timeout_ms": 1000, **(replication or {})}
        for i in range(count):
            config = {
                "data_dir": str(tmp_path / f"b{i}"),
                "storage": {"fsync": "always", **(storage or {})},
                "replication": repl,
                "auto_create_topics": False,
                "topics": {TOPIC: {"partitions": partitions,
                                   "replication_factor": replication_factor,
                                   "min_insync_replicas": min_isr}},
                "cluster": {"broker_id": i, "brokers": dict(self.addresses)},
            }
            self.nodes[i] = Node(i, tmp_path / f"b{i}", config)
        if start:
            for i in range(count):
                self.start(i)

    # ------------------------------------------------------------------ brokers

    def start(self, broker_id: int) -> Broker:
        node = self.nodes[broker_id]
        node.clock = Clock()
        node.broker = build_broker(config_from_mapping(node.config), node.clock,
                                   run_in_thread=node.run_in_thread,
                                   connect=self._connector(broker_id))
        self.built.append(node.broker)
        node.alive = True
        return node.broker

    def close(self) -> None:
        """Close the files of every broker this network started (a crashed broker's too:
        its process is gone, but in memory its store still holds them). No shutdown is
        run; what the test checked is done."""
        for broker in self.built:
            try:
                broker.core.store.close()
            except Exception:  # noqa: BLE001 - a broken store still gives its files back
                pass
        self.built.clear()
        if self in Network.unclosed:
            Network.unclosed.remove(self)

    def crash(self, broker_id: int) -> None:
        """kill -9: abandon the broker, drop every connection it had and, as the kernel does
        for a dead process, its data directory's lock."""
        node = self.nodes[broker_id]
        node.alive = False
        if node.broker is not None:
            node.broker.core.store.lock.release()
        for entry in list(self.pumps):
            src, dst, pump = entry
            if broker_id in (src, dst):
                self._cut(pump)
                self.pumps.remove(entry)

    def partition(self, a: int, b: int) -> None:
        """Cut the network between brokers ``a`` and ``b`` (both stay up)."""
        self.blocked.add(frozenset((a, b)))
        for entry in list(self.pumps):
            if {entry[0], entry[1]} == {a, b}:
                self._cut(entry[2])
                self.pumps.remove(entry)

    def heal(self, a: int, b: int) -> None:
        self.blocked.discard(frozenset((a, b)))

    def stop(self, broker_id: int) -> None:
        """A clean shutdown (SIGTERM)."""
        node = self.nodes[broker_id]
        assert node.broker is not None
        done: list[object] = []
        node.broker.stop().addBoth(done.append)
        for _ in range(2000):
            if done:
                break
            self.advance(0.01)
        assert done, "broker did not stop"
        node.alive = False
        for entry in list(self.pumps):
            if broker_id in (entry[0], entry[1]):
                self._cut(entry[2])
                self.pumps.remove(entry)

    def broker(self, broker_id: int) -> Broker:
        broker = self.nodes[broker_id].broker
        assert broker is not None
        return broker

    def service(self, broker_id: int) -> Any:
        return self.broker(broker_id).core.replication

    def plog(self, broker_id: int, partition: int = 0) -> Any:
        return self.broker(broker_id).core.store.partition(TOPIC, partition)

    def client(self, broker_id: int) -> Client:
        return Client(self, broker_id)

    # ------------------------------------------------------------------ the network

    def _connector(self, source: int) -> Any:
        def connect(address: BrokerAddress) -> Deferred[PeerProtocol]:
            node = self.nodes.get(address.broker_id)
            self.connects.append((source, address.broker_id))
            if node is None or not node.alive or not self.nodes[source].alive \
                    or frozenset((source, address.broker_id)) in self.blocked:
                return fail(ConnectionRefusedError(str(address)))
            assert node.broker is not None
            server = node.broker.v1_factory.buildProtocol(None)
            client = PeerProtocol()
            pump = iosim.connect(server, iosim.FakeTransport(server, isServer=True),
                                 client, iosim.FakeTransport(client, isServer=False),
                                 greet=False, clock=Clock())
            self.pumps.append((source, address.broker_id, pump))
            return succeed(client)

        return connect

    @staticmethod
    def _cut(pump: iosim.IOPump) -> None:
        for io in (pump.clientIO, pump.serverIO):
            if not io.disconnected:
                io.disconnecting = io.disconnected = True
                io.reportDisconnect()

    def _live_clocks(self) -> list[Clock]:
        return [n.clock for n in self.nodes.values() if n.alive]

    def flush(self) -> None:
        """Deliver every byte and run every timer due now, until nothing moves."""
        for _ in range(100_000):
            moved = False
            for clock in self._live_clocks():
                if any(c.getTime() <= clock.seconds() for c in clock.getDelayedCalls()):
                    clock.advance(0)
                    moved = True
            for entry in list(self.pumps):
                pump = entry[2]
                if pump.pump(advanceClock=False):
                    moved = True
                if pump.clientIO.disconnected and pump.serverIO.disconnected:
                    self.pumps.remove(entry)
            if not moved:
                return
        raise AssertionError("the network never went quiet")

    def advance(self, seconds: float, step: float = 0.01) -> None:
        """Let ``seconds`` pass on every live broker's clock, in steps."""
        left = seconds
        while left > 1e-9:
            self.flush()
            dt = min(step, left)
            for clock in self._live_clocks():
                clock.advance(dt)
            left -= dt
        self.flush()

    def run_until(self, condition: Any, *, within: float = 10.0, step: float = 0.01) -> float:
        """Advance until ``condition()`` holds; returns the simulated seconds it took."""
        waited = 0.0
        self.flush()
        while not condition():
            if waited >= within:
                raise AssertionError(f"condition not met within {within} simulated seconds")
            self.advance(step, step)
            waited += step
        return waited

    # ------------------------------------------------------------------ helpers

    def status(self, broker_id: int, partition: int = 0) -> Any:
        return self.service(broker_id).status(TOPIC, partition)

    def confirmed_leader(self, broker_id: int, partition: int = 0) -> bool:
        return self.service(broker_id).is_leader(TOPIC, partition)

    def log_bytes(self, broker_id: int, partition: int = 0, upto: int | None = None) -> bytes:
        """The exact bytes of the broker's log from its start up to ``upto`` (exclusive)."""
        plog = self.plog(broker_id, partition)
        end = plog.next_offset if upto is None else upto
        out: list[bytes] = []
        at = plog.first_offset
        while at < end:
            result = plog.read(at, 100_000, 1 << 24, end)
            if not result.records:
                break
            out.append(result.raw)
            at = result.next_offset
        return b"".join(out)


def produce_reply_offsets(lines: list[str]) -> list[int]:
    """The offsets of successful PRODUCE replies, in reply order."""
    out = []
    for line in lines:
        match = re.search(r"\|OK\|partition=\d+ offset=(\d+) hw=", line)
        if match:
            out.append(int(match.group(1)))
    return out

