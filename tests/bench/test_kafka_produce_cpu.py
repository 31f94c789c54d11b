"""bench/kafka_produce_cpu.py: a real producer's bytes recorded through a relay, then
replayed into an in-process broker for its CPU per record.

Recorded with librdkafka (no Java needed); Kafka's ProducerPerformance is the bench's
default client and runs in the Apache comparison's own test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")

from bench import kafka_produce_cpu  # noqa: E402


@pytest.mark.slow
@pytest.mark.integration
def test_a_recorded_producer_replays_every_record(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    recording = tmp_path / "rec"
    assert kafka_produce_cpu.main(["--client", "rdkafka", "--messages", "20000",
                                   "--partitions", "3", "--acks", "all", "--rounds", "2",
                                   "--keep", str(recording)]) == 0
    out = capsys.readouterr().out
    assert "recorded rdkafka at" in out
    # the broker advertised the relay, so the produce connection's bytes were recorded too:
    # more than the records' values alone
    sizes = [p.stat().st_size for p in recording.glob("conn*.bin")]
    assert sum(sizes) > 20000 * 100
    match = re.search(r"20,000 records of 100 bytes replayed in process: ([0-9.]+) us CPU", out)
    assert match and float(match.group(1)) > 0
    # a replay that does not append what the client sent is refused, not reported
    meta = json.loads((recording / "meta.json").read_text())
    (recording / "meta.json").write_text(json.dumps({**meta, "messages": 20001}))
    assert kafka_produce_cpu.main(["--replay", str(recording), "--rounds", "1"]) == 1
    assert "replay appended 20000 of 20001 records" in capsys.readouterr().err
