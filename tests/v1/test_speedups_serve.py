"""``skerry serve`` says in one log line which implementation of the per-message loops runs,
and serves the same answers on both (a real broker on a free 127.0.0.1 port)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from data import speedups
from tests.support import BrokerProcess


def _wait_for_line(broker: BrokerProcess, needle: str) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in broker.log_text().splitlines():
            if needle in line:
                return line
        time.sleep(0.05)
    raise AssertionError(f"no {needle!r} line in the log:\n{broker.log_text()}")


@pytest.mark.parametrize("twin", [False, True], ids=["default", "SKERRY_NO_EXTENSIONS=1"])
def test_serve_logs_the_implementation_and_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   twin: bool) -> None:
    if twin:
        monkeypatch.setenv(speedups.ENV, "1")
    else:
        monkeypatch.delenv(speedups.ENV, raising=False)
    broker = BrokerProcess(tmp_path).start()
    try:
        line = _wait_for_line(broker, "per-message loops:")
        if twin:
            assert "pure Python" in line and "SKERRY_NO_EXTENSIONS is set" in line
        elif all(state == "compiled" for state in speedups.status.values()):
            assert "per-message loops: compiled (broker.v1._clane, broker.v1._cscan, data._cspeedups)" in line
        client = broker.client()
        client.send(b"V1|1|PRODUCE|orders k:v1\nV1|2|PRODUCE|orders k:v2\n"
                    b"V1|3|CONSUME|orders 0 0 max=10\n")
        replies = [client.readline() for _ in range(3)]
        assert replies[0].startswith(b"V1|1|OK|partition=0 offset=0")
        assert replies[1].startswith(b"V1|2|OK|partition=0 offset=1")
        assert replies[2].startswith(b"V1|3|OK|messages=0:v1,1:v2 hw=")
    finally:
        broker.stop()
