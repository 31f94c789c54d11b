"""Requests pipelined behind a held command (one that waits for the answers before it:
here behind a long poll) are run once it is answered, however many bytes they take; the
broker stops reading the socket meanwhile instead of closing the connection as if they
were one over-long line. Driven in memory over the real core and store."""

from __future__ import annotations

from pathlib import Path

from tests.reliability.inmemory import InMemoryBroker


def test_pings_pipelined_behind_a_long_poll_past_the_line_limit_are_all_answered(
        tmp_path: Path) -> None:
    h = InMemoryBroker(tmp_path / "data", None, limits={"max_line_bytes": 1000},
                       topics={"t": {"partitions": 1}})
    try:
        proto, tr = h.connect()
        pings = b"".join(b"V1|%d|PING|\n" % i for i in range(2, 300))
        assert len(pings) > 3 * 1000
        proto.dataReceived(b"V1|1|CONSUME|t 0 0 wait_ms=500\n" + pings)
        h.settle()
        assert tr.value() == b""  # the long poll is answered first, in 0.5 s
        assert tr.producerState == "paused"  # nothing more is read meanwhile
        h.clock.advance(0.5)
        h.settle()
        replies = tr.value().splitlines()
        assert replies[0] == b"V1|1|OK|messages= hw=-1"
        assert replies[1:] == [b"V1|%d|OK" % i for i in range(2, 300)]
        assert not tr.disconnecting and tr.producerState == "producing"
    finally:
        h.close()


def test_a_line_over_the_limit_behind_a_held_command_is_still_refused(
        tmp_path: Path) -> None:
    h = InMemoryBroker(tmp_path / "data", None, limits={"max_line_bytes": 1000},
                       topics={"t": {"partitions": 1}})
    try:
        proto, tr = h.connect()
        proto.dataReceived(b"V1|1|CONSUME|t 0 0 wait_ms=500\nV1|2|PING|\nV1|3|PING|"
                           + b"x" * 2000)
        h.clock.advance(0.5)
        h.settle()
        assert tr.value().splitlines() == [
            b"V1|1|OK|messages= hw=-1", b"V1|2|OK",
            b"V1|0|ERR|BAD_REQUEST|line too long: more than 1000 bytes (the broker's "
            b"limits.max_line_bytes)"]
        assert tr.disconnecting
    finally:
        h.close()
