"""What the reactor adds per read event: ``LeanEPollReactor`` (``skerry serve``'s reactor)
against a bare ``select.epoll`` + ``recv`` loop, on the same sockets, in one process.

Both serve ``--connections`` loopback TCP connections; each round every client sends one
150-byte request (a PRODUCE line's size) and the server side reads until it has seen all of
them; CPU time (``time.process_time``: the recv syscalls included) per read event, best of
five rounds of ``--turns`` turns. The difference is the reactor's own dispatch per event
(looking up the selectable, the fast-path checks, the call into ``dataReceived``), which a
compiled event loop would save; docs/performance.md, "(d) and (e): the request/response path
trimmed".

    .venv/bin/python -m bench.reactor_dispatch [--connections 50] [--turns 400]

Bounded: five rounds of ``--turns`` turns; the sockets listen on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import select
import socket
import time
from collections.abc import Callable

from twisted.internet.protocol import Factory, Protocol

from broker.reactor import LeanEPollReactor

REQUEST = b"x" * 149 + b"\n"


class _Count(Protocol):
    reads = 0

    def dataReceived(self, data: bytes) -> None:
        _Count.reads += 1


def _per_event(clients: list[socket.socket], turns: int, serve: Callable[[], int]) -> float:
    """Best of five rounds of ``turns`` turns: every client sends one request, ``serve``
    reads until it has them all (returns the read events); CPU µs per event."""
    rounds = []
    for _ in range(5):
        spent, events = 0.0, 0
        for _ in range(turns):
            for client in clients:
                client.send(REQUEST)
            start = time.process_time()
            events += serve()
            spent += time.process_time() - start
        rounds.append(spent / events * 1e6)
    return min(rounds)


def lean(connections: int, turns: int) -> float:
    """CPU µs per read event under ``LeanEPollReactor``."""
    reactor = LeanEPollReactor()
    port = reactor.listenTCP(0, Factory.forProtocol(_Count), interface="127.0.0.1")
    clients = [socket.create_connection(("127.0.0.1", port.getHost().port))
               for _ in range(connections)]
    def serve() -> int:
        seen = _Count.reads
        while _Count.reads - seen < connections:
            reactor.doPoll(0)
        return _Count.reads - seen

    try:
        for _ in range(50):
            reactor.iterate(0.01)  # accept them all
        return _per_event(clients, turns, serve)
    finally:
        for client in clients:
            client.close()
        port.stopListening()
        for _ in range(5):
            reactor.iterate(0)
        reactor.disconnectAll()
        reactor._poller.close()


def bare(connections: int, turns: int) -> float:
    """CPU µs per read event of a bare ``epoll`` + ``recv`` loop."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(connections)
    clients, accepted = [], []
    for _ in range(connections):
        clients.append(socket.create_connection(server.getsockname()))
        conn, _ = server.accept()
        conn.setblocking(False)
        accepted.append(conn)
    poller = select.epoll()
    by_fd = {conn.fileno(): conn for conn in accepted}
    for fd in by_fd:
        poller.register(fd, select.EPOLLIN)
    def serve() -> int:
        got = 0
        while got < connections:
            for fd, _event in poller.poll(0, connections):
                by_fd[fd].recv(65536)
                got += 1
        return got

    try:
        return _per_event(clients, turns, serve)
    finally:
        poller.close()
        for sock in (*clients, *accepted, server):
            sock.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--turns", type=int, default=400)
    args = parser.parse_args(argv)
    plain = bare(args.connections, args.turns)
    ours = lean(args.connections, args.turns)
    print(f"{args.connections} connections, one 150-byte read each a turn, CPU per read event "
          f"(recv included), best of 5 rounds of {args.turns} turns:")
    print(f"  bare epoll + recv:  {plain:.2f} us")
    print(f"  LeanEPollReactor:   {ours:.2f} us  (+{ours - plain:.2f} us of dispatch)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
