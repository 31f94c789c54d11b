"""bench/reactor_dispatch.py: both loops read every request and print their CPU per read
event, the reactor's beside the bare loop's."""

from __future__ import annotations

import re

import pytest

from bench import reactor_dispatch


def test_both_loops_read_every_request_and_print_their_cost(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert reactor_dispatch.main(["--connections", "4", "--turns", "20"]) == 0
    out = capsys.readouterr().out
    bare = re.search(r"bare epoll \+ recv:\s+([\d.]+) us", out)
    lean = re.search(r"LeanEPollReactor:\s+([\d.]+) us", out)
    assert bare and lean, out
    assert float(bare.group(1)) > 0 and float(lean.group(1)) > 0, out
