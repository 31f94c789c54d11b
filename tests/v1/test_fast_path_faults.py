"""A bug under the PRODUCE fast path is answered, not a dropped connection: the fast path
(runs of plain PRODUCE lines scanned in place) skips ``Handlers.dispatch`` but answers
through the same boundary (``Handlers.boundary``, ``broker.transport``), so a fault inside
the core is ``INTERNAL`` exactly as ``dispatch`` answers it on the full path."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.v1.test_protocol import Harness, lines


def _broken(key: bytes) -> Any:
    raise RuntimeError("injected fault")


@pytest.mark.parametrize("requests", [
    [b"V1|1|PRODUCE|t k:v\n"],  # one line: the per-message call
    [b"V1|1|PRODUCE|t k:v\nV1|2|PRODUCE|t k:w\nV1|3|PRODUCE|t k:x\n"],  # a run in one call
])
def test_a_fault_under_the_fast_path_answers_internal_and_keeps_serving(
        tmp_path: Path, requests: list[bytes], caplog: pytest.LogCaptureFixture) -> None:
    """A fault inside the core while a fast-path PRODUCE is queued: each request of the
    read is answered ``INTERNAL`` with its correlation id, the fault is logged with its
    traceback, the connection stays open, and the next requests are served."""
    h = Harness(tmp_path, topics={"t": {"partitions": 1}})
    proto, transport = h.connect()
    pipeline = h.broker.core._produce
    pipeline._key_info = _broken  # the first thing a produce asks of a new key
    with caplog.at_level(logging.ERROR, logger="skerry.v1"):
        for data in requests:
            proto.dataReceived(data)
    h.turn()
    count = sum(data.count(b"\n") for data in requests)
    assert lines(transport) == [b"V1|%d|ERR|INTERNAL|internal error" % i
                                for i in range(1, count + 1)]
    assert "injected fault" in caplog.text and "Traceback" in caplog.text
    assert not transport.disconnecting
    # The full path answers the same fault the same way.
    transport.clear()
    proto.dataReceived(b"V1|9|PRODUCE|t k:v partition=0\n")
    h.turn()
    assert lines(transport) == [b"V1|9|ERR|INTERNAL|internal error"]
    # Once the fault is gone, the same connection produces again.
    del pipeline._key_info
    transport.clear()
    proto.dataReceived(b"V1|10|PRODUCE|t k:v\nV1|11|PING|\n")
    h.turn()
    h.thread.run_all()  # the fsync that covers it
    assert lines(transport) == [b"V1|10|OK|partition=0 offset=0 hw=0", b"V1|11|OK"]
