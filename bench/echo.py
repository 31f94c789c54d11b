"""A canned-reply responder: the "server" that measures the load generator's own ceiling.

Owns: a TCP server that answers every request it receives at once with one fixed reply,
doing per read only C-speed work (``bytes.count`` of a request marker, one ``write`` of the
reply repeated). Requests are recognised by a marker that occurs exactly once in each of
the benchmark's requests: ``b"\\n"`` for V1 lines, ``b"XADD"`` / ``b"XRANGE"`` for RESP. The
canned replies have the shape the real servers send, so the client does the same work as
in the real run: ``canned_reply(protocol, mode)``.

Must not import: broker internals; the load generator's loops (only its request and value
helpers, so the canned consume replies match what the generator parses).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from bench.loadgen import make_value

__all__ = ["CannedResponder", "canned_reply", "request_marker", "start_responder", "main"]


def request_marker(protocol: str, mode: str) -> bytes:
    """The bytes that occur once per benchmark request of this protocol and mode."""
    if protocol == "v1":
        return b"\n"
    return b"XADD" if mode == "produce" else b"XRANGE"


def canned_reply(protocol: str, mode: str, batch: int = 1000, value_size: int = 100) -> bytes:
    """A reply shaped like the real server's: a produce ack, or a full batch of messages."""
    value = make_value(value_size)
    if protocol == "v1":
        if mode == "produce":
            return b"V1|0|OK|partition=0 offset=123456 hw=123456\n"
        msgs = b",".join(b"%d:%s" % (i, value) for i in range(batch))
        return b"V1|0|OK|messages=" + msgs + b" hw=%d\n" % (batch - 1)
    if mode == "produce":
        return b"$15\r\n1700000000000-0\r\n"
    parts = [b"*%d\r\n" % batch]
    for i in range(batch):
        entry_id = b"1700000000000-%d" % i
        parts.append(b"*2\r\n$%d\r\n%s\r\n*2\r\n$1\r\nv\r\n$%d\r\n%s\r\n"
                     % (len(entry_id), entry_id, len(value), value))
    return b"".join(parts)


class CannedResponder(asyncio.Protocol):
    """Writes ``reply`` once for every ``marker`` received."""

    def __init__(self, marker: bytes, reply: bytes) -> None:
        self.marker = marker
        self.reply = reply
        self._keep = len(marker) - 1
        self._tail = b""
        self.transport: Any = None
        self.answered = 0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._tail:
            data = self._tail + data
        n = data.count(self.marker)
        if self._keep:
            last = data.rfind(self.marker)
            cut = max(last + len(self.marker) if last >= 0 else 0, len(data) - self._keep)
            self._tail = data[cut:]
        if n:
            self.answered += n
            self.transport.write(self.reply if n == 1 else self.reply * n)


async def start_responder(marker: bytes, reply: bytes, host: str = "127.0.0.1",
                          port: int = 0) -> asyncio.Server:
    """Listen on ``host:port`` (0 = a free port) on the running loop."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: CannedResponder(marker, reply), host, port)


async def _serve(marker: bytes, reply: bytes, host: str, port: int) -> None:
    server = await start_responder(marker, reply, host, port)
    bound = server.sockets[0].getsockname()[1]
    print(f"responder listening on {host}:{bound}", file=sys.stderr, flush=True)
    async with server:
        await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.echo",
        description="Answer each benchmark request at once with a canned reply (until killed).")
    p.add_argument("--protocol", choices=("v1", "resp"), required=True)
    p.add_argument("--mode", choices=("produce", "consume"), default="produce")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--value-size", type=int, default=100)
    args = p.parse_args(argv)
    marker = request_marker(args.protocol, args.mode)
    reply = canned_reply(args.protocol, args.mode, args.batch, args.value_size)
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        try:
            runner.run(_serve(marker, reply, args.host, args.port))
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
