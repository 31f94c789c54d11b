"""bench.suite --reactor (A/B runs of the broker's reactor, docs/performance.md): the
setting reaches the broker's configuration, and a broker with either setting serves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.servers import start_skerry
from bench.suite import build_parser


def test_the_option_is_parsed() -> None:
    assert build_parser().parse_args(["--reactor", "twisted"]).reactor == "twisted"
    assert build_parser().parse_args([]).reactor is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--reactor", "asyncio"])


@pytest.mark.parametrize("reactor", ["twisted", "lean"])
def test_a_broker_started_with_the_setting_answers(tmp_path: Path, reactor: str) -> None:
    server = start_skerry(tmp_path, "never", ["t"], reactor=reactor)  # waits for PING's OK
    try:
        config = json.loads((tmp_path / "skerry-never.yaml").read_text())
        assert config["reactor"] == reactor
    finally:
        server.stop()
