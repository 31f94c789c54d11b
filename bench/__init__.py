"""Benchmarks: Skerry against Redis Streams, measured by one load generator in the same run.

Owns: the load generator (``bench.loadgen``), the canned-reply responder used to measure the
generator's own ceiling (``bench.echo``), starting and stopping the servers under test
(``bench.servers``), the workload suite (``bench.suite``) and the report written into
``docs/performance.md`` (``bench.report``). Other modules here (``bench.store``, the storage
benchmarks; ``bench.replication_scenario``) belong to their own benchmarks.

Must not import: broker internals (``broker``, ``groups``, ``replication``, ``data``); the
broker is measured from outside, over its wire protocol, exactly as Redis is.
"""
