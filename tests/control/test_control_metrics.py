"""The control plane's counters on /metrics: elections, unclean elections (the spec's
"a warning and a metric"), offline partitions, preferred-leader moves, and whether this broker is the controller."""

from __future__ import annotations

from types import SimpleNamespace

from twisted.internet.task import Clock

from broker.metrics import BrokerMetrics


def test_control_counters_are_exported() -> None:
    """A broker with a control plane exports its election counters; one without does not."""
    metrics = BrokerMetrics(Clock())
    assert b"skerry_control" not in metrics.render()
    metrics.control = SimpleNamespace(elections=3, unclean_elections=1, offline=2,
                                      preferred_elections=4, is_controller=True)
    text = metrics.render().decode()
    assert "skerry_control_elections_total 3.0" in text
    assert "skerry_control_unclean_elections_total 1.0" in text
    assert "skerry_control_offline_total 2.0" in text
    assert "skerry_control_preferred_elections_total 4.0" in text
    assert "skerry_control_is_controller 1.0" in text
