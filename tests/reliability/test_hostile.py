"""Hostile clients (CI-sized): random bytes, over-long lines without a newline, slowloris,
idle connections and clients that never read. The broker answers well-behaved clients
throughout, closes what the limits say, and bounds what a bad client can make it hold.
bench/reliability.py runs the large versions (5,000 idle connections, memory figures)."""

from __future__ import annotations

import random
import socket
import time
from pathlib import Path

from tests.reliability.inmemory import InMemoryBroker
from tests.support import BrokerProcess


def _broker(tmp_path: Path, **limits: int) -> InMemoryBroker:
    return InMemoryBroker(tmp_path / "data", storage={"fsync": "never"},
                          topics={"t": {"partitions": 1}},
                          limits={"max_line_bytes": 1024, "idle_timeout_ms": 5000,
                                  "max_pending_output_bytes": 4096, **limits})


class HostileInMemoryTests:
    def test_random_byte_sessions_do_not_disturb_others(self, tmp_path: Path) -> None:
        """Fifty sessions of random bytes get error lines or are closed; a good client on
        the side is answered after every burst."""
        h = _broker(tmp_path)
        good, good_tr = h.connect()
        rng = random.Random(5)
        for i in range(50):
            proto, _tr = h.connect()
            proto.dataReceived(rng.randbytes(rng.randint(1, 3000)))
            assert h.request(good, good_tr, f"V1|{i}|PING|") == [f"V1|{i}|OK".encode()]
        h.close()

    def test_over_long_line_without_newline_is_cut_off(self, tmp_path: Path) -> None:
        """A line growing past limits.max_line_bytes with no newline gets BAD_REQUEST and
        the connection closes; the broker keeps at most one line of it buffered."""
        h = _broker(tmp_path)
        proto, tr = h.connect()
        for _ in range(10):
            proto.dataReceived(b"x" * 200)
        assert tr.disconnecting
        assert tr.value() == b"V1|0|ERR|BAD_REQUEST|line too long\n"
        assert len(proto._buffer) <= 1025
        h.close()

    def test_slowloris_is_closed_by_the_idle_timeout_only_when_silent(self,
                                                                      tmp_path: Path) -> None:
        """One byte per 100 ms keeps a connection alive (it is not idle) and its line is
        answered when complete; a silent one is closed after idle_timeout_ms."""
        h = _broker(tmp_path)
        slow, slow_tr = h.connect()
        silent, silent_tr = h.connect()
        for byte in b"V1|1|PING|\n":
            slow.dataReceived(bytes([byte]))
            h.clock.advance(0.1)
        assert slow_tr.value() == b"V1|1|OK\n"
        h.clock.advance(3.0)
        assert not silent_tr.disconnecting
        h.clock.advance(1.0)
        assert silent_tr.disconnecting and not slow_tr.disconnecting
        h.close()

    def test_client_that_never_reads_is_paused(self, tmp_path: Path) -> None:
        """A client pipelining requests while never reading is paused once its unsent
        replies pass max_pending_output_bytes; the broker stops reading from it."""
        h = _broker(tmp_path)
        proto, tr = h.connect()
        tr.producerState = "producing"
        proto.dataReceived(b"".join(b"V1|%d|CONSUME|t 0 0\n" % i for i in range(2000)))
        h.settle()
        # StringTransport has no socket buffer: the protocol's own flow control must act.
        assert proto.paused or len(tr.value()) < 2000 * 40
        h.close()


class HostileProcessTests:
    def test_many_idle_connections_and_latency_of_a_good_client(self, tmp_path: Path) -> None:
        """With 300 idle connections and 5 over-long-line senders open, a well-behaved
        client's p99 PING latency stays within 2x its baseline (plus 2 ms of slack for a
        noisy CI machine) and broker memory grows by less than 50 MiB."""
        with BrokerProcess(tmp_path, {"limits": {"max_line_bytes": 4096}}) as broker:
            client = broker.client()

            def p99() -> float:
                samples = []
                for i in range(1000):
                    start = time.perf_counter()
                    client.request(f"V1|{i}|PING|")
                    samples.append(time.perf_counter() - start)
                return sorted(samples)[int(len(samples) * 0.99)]

            baseline = p99()
            rss0 = broker.rss_bytes()
            idle = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(300)]
            hostile = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(5)]
            for sock in hostile:
                try:
                    sock.sendall(b"y" * 8192)
                except OSError:
                    pass
            # Measure the steady state, not the accepts: once the newest idle connection
            # answers a PING, the broker has taken in every connection opened before it.
            probe = idle[-1]
            probe.sendall(b"V1|p|PING|\n")
            probe.settimeout(10)
            assert probe.recv(64).startswith(b"V1|p|OK")
            loaded = p99()
            growth = broker.rss_bytes() - rss0
            for sock in idle + hostile:
                sock.close()
            client.close()
            assert loaded <= 2 * baseline + 0.002, (baseline, loaded)
            assert growth < 50 * 2**20
