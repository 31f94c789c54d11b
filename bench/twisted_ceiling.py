"""The Twisted ceiling: a do-nothing Twisted line responder, the reactor's own limit.

Owns: a Twisted server on the broker's reactor (the default, epoll) that answers each V1
request line with a canned reply of the broker's shape (``bench.echo.canned_reply``), doing
per read only C-speed work: one ``bytes.count`` of line feeds and one ``write`` of the reply
repeated; TCP_NODELAY on each connection as the broker sets it. What the broker adds on
top of this, per message, is its own work: ``bench/run_all`` measures this responder with
the same load as each Skerry workload, in the same run, and prints the ratio (target (a):
Skerry >= 0.9x of it).

Must not import: broker internals (it is what the broker would be with no work to do).
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Sequence

from twisted.internet import protocol

from bench.echo import canned_reply

__all__ = ["LineResponder", "main"]


class LineResponder(protocol.Protocol):
    """Writes the canned reply once for every ``\\n`` received."""

    reply = b""

    def connectionMade(self) -> None:
        sock = self.transport.getHandle()  # type: ignore[attr-defined]
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def dataReceived(self, data: bytes) -> None:
        n = data.count(b"\n")
        if n:
            self.transport.write(self.reply if n == 1 else self.reply * n)  # type: ignore[union-attr]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.twisted_ceiling",
        description="Answer each V1 request line at once with a canned reply, on Twisted's "
                    "default reactor (until killed).")
    p.add_argument("--mode", choices=("produce", "consume"), default="produce")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--value-size", type=int, default=100)
    args = p.parse_args(argv)
    from twisted.internet import reactor

    factory = protocol.Factory.forProtocol(LineResponder)
    LineResponder.reply = canned_reply("v1", args.mode, args.batch, args.value_size)
    port = reactor.listenTCP(args.port, factory, interface=args.host)  # type: ignore[attr-defined]
    print(f"responder listening on {args.host}:{port.getHost().port} "
          f"({type(reactor).__name__})", file=sys.stderr, flush=True)
    reactor.run()  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    sys.exit(main())
