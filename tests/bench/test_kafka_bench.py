"""bench/kafka.py stays runnable: a tiny run against a real broker produces and consumes
every message and prints the table with its targets."""

from __future__ import annotations

import pytest

pytest.importorskip("confluent_kafka")

from bench import kafka as bench_kafka  # noqa: E402


def test_a_tiny_run_moves_every_message(capsys) -> None:
    assert bench_kafka.main(["--messages", "3000", "--no-reference"]) == 0
    out = capsys.readouterr().out
    assert "produce" in out and "consume" in out
    assert "(3,000 msgs in" in out
    assert "target 500,000" in out and "target 1,000,000" in out
