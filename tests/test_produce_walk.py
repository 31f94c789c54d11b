"""The PRODUCE walk of docs/architecture.md is the one the code takes: for each transport a
produce is run in memory under a profiler, and the Skerry functions on the call stack when
the request reaches the core's produce entry, when the store appends it, when the core
decides it is durable enough for ``acks``, and when the reply is written are the walk, in
that order, each function once. The doc lists them; this test
fails when the code and the doc part (and when a walk grows past ``MAX_HOPS``).

Only functions under ``broker/`` count (not Twisted, not the test, not the store below
``PartitionLog.append``): what a reader follows from the bytes to the reply.
"""

from __future__ import annotations

import re
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from twisted.internet.testing import StringTransport

from broker.core.produce import ProducePipeline
from data.log import PartitionLog
from tests.support import ROOT

MAX_HOPS = 10
"""The issue's aim: at most ten hops from the bytes to the reply."""

BROKER = str(ROOT / "broker") + "/"
DOC = ROOT / "docs" / "architecture.md"

_ENTRIES = {ProducePipeline.produce.__code__}
_APPENDS = {PartitionLog.append.__code__, PartitionLog.append_framed.__code__}
_WRITE = StringTransport.write.__code__
_DURABLE = ProducePipeline._when_durable.__code__


def _chain(frame: FrameType | None) -> list[str]:
    """The ``broker/`` functions on the stack below ``frame``, outermost first."""
    names: list[str] = []
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith(BROKER):
            names.append(code.co_qualname)
        frame = frame.f_back
    return names[::-1]


def walk(run: Callable[[], Any]) -> list[str]:
    """The walk of what ``run`` does: the functions on the stack at the core's produce
    entry, at the store append, at the one rule that answers by ``acks``
    (``ProducePipeline._when_durable``) and at the reply's write, in that order, each
    once."""
    seen: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code in _ENTRIES or code is _DURABLE:
            stack = [*_chain(frame.f_back), code.co_qualname]
        elif code in _APPENDS or code is _WRITE:
            stack = _chain(frame.f_back)
        else:
            return
        seen.extend(name for name in stack if name not in seen)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return seen


# ---------------------------------------------------------------- the four transports


def v1_walk(tmp_path: Path, line: bytes) -> list[str]:
    from tests.v1.test_protocol import Harness

    h = Harness(tmp_path, storage={"fsync": "interval"}, topics={"orders": {"partitions": 1}})
    proto, transport = h.connect()
    proto.dataReceived(b"V1|0|PRODUCE|orders warm:up\n")  # the topic's first append
    h.turn()
    transport.clear()

    def run() -> None:
        proto.dataReceived(line)
        h.turn()

    path = walk(run)
    assert transport.value().startswith(b"V1|7|OK|partition=0 offset=1"), transport.value()
    return path


def kafka_walk(tmp_path: Path) -> list[str]:
    from tests.kafka.harness import Harness, request
    from tests.kafka.test_data import message, produce_body, produce_reply

    h = Harness(tmp_path)
    h.core.create_topic("orders", 1, 1, None, None, None)
    conn = h.connect()
    body = produce_body("orders", 0, message(0, b"user1", b"paid"), acks=1)

    def run() -> None:
        conn.send_raw(request(0, 0, 7, body))
        h.advance(0)

    path = walk(run)
    replies = conn.responses()
    assert [produce_reply(b) for _, b in replies] == [[(0, 0)]], replies
    h.close()
    return path


def iggy_walk(tmp_path: Path) -> list[str]:
    from broker.iggy import codec
    from broker.iggy.codec import Identifier, PartitioningKind
    from tests.iggy.harness import Harness

    h = Harness(tmp_path)
    h.broker.core.create_topic("orders", 1, 1, None, None, None)
    conn = h.connect(login=True)
    send = codec.SendMessages(Identifier("default"), Identifier("orders"),
                              PartitioningKind.PARTITION_ID, struct.pack("<I", 0), 1,
                              codec.encode_messages([b"paid"]))

    def run() -> None:
        conn.send_raw(codec.encode_request(send))
        h.advance(0)

    path = walk(run)
    assert conn.replies() == [b"\x00" * 8]
    h.close()
    return path


def tank_walk(tmp_path: Path) -> list[str]:
    from broker.tank import client as tc
    from broker.tank import codec as sc
    from tests.tank.harness import Harness

    h = Harness(tmp_path)
    h.create("orders")
    conn = h.connect()
    frame = tc.build_produce(5, [(b"orders", 0, [tc.Msg(b"paid", b"user1", 1_700_000_000_000)])])

    def run() -> None:
        conn.send(frame)
        h.advance(0)

    path = walk(run)
    assert conn.raw() == sc.encode_frame(1, bytes([5, 0, 0, 0, 0]))
    h.close()
    return path


WALKS: dict[str, Callable[[Path], list[str]]] = {
    "V1 PRODUCE, fast path": lambda p: v1_walk(p, b"V1|7|PRODUCE|orders user1:paid\n"),
    "V1 PRODUCE, full path": lambda p: v1_walk(p, b"V1|7|PRODUCE|orders user1:paid partition=0\n"),
    "Kafka Produce": kafka_walk,
    "Iggy SendMessages": iggy_walk,
    "TANK produce": tank_walk,
}


def documented() -> dict[str, list[str]]:
    """Each walk as docs/architecture.md lists it: a line ``- **<name>** (N hops): `a` →
    `b` → …``."""
    walks: dict[str, list[str]] = {}
    for name, count, steps in re.findall(r"^- \*\*(.+?)\*\* \((\d+) hops\): (.+)$",
                                         DOC.read_text(), re.M):
        hops = re.findall(r"`([^`]+)`", steps)
        assert int(count) == len(hops), f"{name}: says {count} hops, lists {len(hops)}"
        walks[name] = hops
    return walks


@pytest.mark.parametrize("name", list(WALKS))
def test_the_documented_produce_walk_is_the_real_one(tmp_path: Path, name: str) -> None:
    """The functions a produce passes through, from the socket read to the reply's write,
    are the ones docs/architecture.md lists, in order, and at most ``MAX_HOPS``."""
    measured = WALKS[name](tmp_path)
    assert documented().get(name) == measured, (
        f"docs/architecture.md's walk of {name} is not the code's; the code's is:\n"
        f"- **{name}** ({len(measured)} hops): " + " → ".join(f"`{n}`" for n in measured))
    assert len(measured) <= MAX_HOPS, measured


if __name__ == "__main__":  # print the walks, to write the doc from
    import tempfile

    for name, measure in WALKS.items():
        with tempfile.TemporaryDirectory() as tmp:
            path = measure(Path(tmp))
        print(f"- **{name}** ({len(path)} hops): " + " → ".join(f"`{n}`" for n in path))
