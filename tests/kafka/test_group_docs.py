"""docs/kafka-groups.md replayed against a real broker: the kcat command, the V1 transcript
lines (shared offsets and the cross-protocol refusal) and the Python example, with this
test's ports in place of the page's 9092."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.kafka.harness import kafka_port_of
from tests.kafka.test_group_clients import events, finish, member, produce
from tests.support import ROOT, BrokerProcess, debian_tool

DOC = ROOT / "docs" / "kafka-groups.md"


def blocks(language: str = "") -> list[str]:
    """The page's fenced code blocks in ``language`` ("" for plain ones)."""
    return [body for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", DOC.read_text(),
                                              re.S | re.M) if lang == language]


def transcript_lines() -> list[tuple[str, str]]:
    """Every ``V1|... -> V1|...`` line of the page's plain code blocks."""
    lines = []
    for block in blocks():
        for line in block.splitlines():
            if line.startswith("V1|") and " -> " in line:
                request, reply = line.split(" -> ", 1)
                lines.append((request.strip(), reply.strip()))
    return lines


def test_the_worked_example(tmp_path: Path) -> None:
    """kcat -G as the page shows it consumes the 30 messages; the transcript's OFFSET and
    DESCRIBE_GROUP answers are the broker's; with a Kafka member live the transcript's JOIN
    is refused with the page's message; the Python example then reads exactly the 5
    messages produced after kcat's commits."""
    kcat = debian_tool("kcat", "kcat")
    pytest.importorskip("confluent_kafka")
    [command] = [b for b in blocks() if b.startswith("$ kcat")]
    lines = transcript_lines()
    assert [r.split("|")[2] for r, _ in lines] == ["OFFSET", "DESCRIBE_GROUP", "JOIN"]
    [python] = blocks("python")
    with BrokerProcess(tmp_path / "broker", {"kafka_port": 0}) as proc:
        port = kafka_port_of(proc.log_text())
        v1 = proc.client()
        assert "|OK|" in v1.request("V1|1|ADMIN_CREATE_TOPIC|orders 3 1")
        produce(v1, "orders", 3, 0, 30)
        args = command.strip().removeprefix("$ kcat").replace("127.0.0.1:9092",
                                                              f"127.0.0.1:{port}").split()
        run = subprocess.run([kcat, *args], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert len(run.stdout.splitlines()) == 30
        for request, reply in lines[:2]:
            assert v1.request(request) == reply

        stop, log = tmp_path / "stop", tmp_path / "live.log"
        live = member(port, "ck", "default", "orders", "analytics", log, stop=stop)
        try:
            deadline = time.monotonic() + 30
            while not any(e["e"] == "assign" for e in events(log)):
                assert time.monotonic() < deadline
                time.sleep(0.1)
            request, reply = lines[2]
            assert v1.request(request) == reply
        finally:
            stop.touch()
            finish(live, log)

        produce(v1, "orders", 3, 30, 5)
        scope: dict[str, object] = {}
        exec(python.replace("127.0.0.1:9092", f"127.0.0.1:{port}"), scope)  # noqa: S102
        got = sorted(m.value().decode() for m in scope["messages"])  # type: ignore[attr-defined]
        assert got == sorted(f"m{i}" for i in range(30, 35))
        v1.close()
