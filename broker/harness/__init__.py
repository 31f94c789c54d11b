"""The rebalance harness: real consumer-group members under a seeded chaos schedule, the
invariant checker and the chart (``skerry harness``)."""
