"""The Python client's ``group_heartbeat`` (V1 GROUP_HEARTBEAT, KIP-848 groups): the
arguments it sends, and a hand-over against a real broker: join, a second member, the
revocation confirmed through ``owned``, a regex subscription carried as base64, a commit at
the member epoch, refusals as ``GenerationMismatchError``, and leaving."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.client.codec import GenerationMismatchError, group_heartbeat_args
from broker.client.sync import Client
from tests.support import BrokerProcess


def test_arguments() -> None:
    """-1/-2 become leave/leave_static; the regex goes as base64 (enc=b64); owned is
    sorted."""
    assert group_heartbeat_args("g", "m", 0, topics=["a", "b"], regex="a|b",
                                rebalance_timeout_ms=5) == \
        "g m 0 topics=a,b regex=YXxi enc=b64 rebalance_timeout_ms=5"
    assert group_heartbeat_args("g", "m", -1) == "g m leave"
    assert group_heartbeat_args("g", "m", -2, instance="i") == "g m leave_static instance=i"
    assert group_heartbeat_args("g", "m", 3, owned=[("b", 1), ("a", 2)], assignor="range") \
        == "g m 3 assignor=range owned=a:2,b:1"
    assert group_heartbeat_args("g", "m", 3, owned=[]) == "g m 3 owned="


def test_hand_over(tmp_path: Path) -> None:
    """Two members share a topic through the client methods alone."""
    with BrokerProcess(tmp_path / "broker", {}) as proc:
        with Client(f"127.0.0.1:{proc.port}", timeout=10) as client:
            client.call("ADMIN_CREATE_TOPIC", "clicks 4 1")
            first = client.group_heartbeat("dash", "w1", 0, topics=["clicks"])
            assert (first.epoch, first.assigned) == (1, tuple(("clicks", p) for p in range(4)))
            second = client.group_heartbeat("dash", "w2", 0, regex="cl.*|nothing")
            assert (second.epoch, second.assigned) == (2, ())
            assert second.target == (("clicks", 2), ("clicks", 3))
            revoke = client.group_heartbeat("dash", "w1", 1, owned=first.assigned)
            assert revoke.assigned == (("clicks", 0), ("clicks", 1))
            done = client.group_heartbeat("dash", "w1", 1, owned=revoke.assigned)
            assert done.epoch == 2
            got = client.group_heartbeat("dash", "w2", 2, owned=[])
            assert got.assigned == (("clicks", 2), ("clicks", 3))
            client.commit("dash", "clicks", "w2", 2, 3, 0)
            with pytest.raises(GenerationMismatchError):
                client.commit("dash", "clicks", "w2", 1, 3, 0)
            with pytest.raises(GenerationMismatchError):
                client.group_heartbeat("dash", "w2", 9)
            left = client.group_heartbeat("dash", "w1", -1)
            assert (left.epoch, left.assigned, left.target) == (-1, (), ())
