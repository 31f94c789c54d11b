"""The Python client of the V1 protocol (docs/client.md), used by the ``skerry`` commands, the
harness and the Spark connector, and under the replication fetcher's Twisted protocol.

``codec`` (sans I/O: request lines, replies, payloads, errors and ``for_code``, the rules of
names, keys and values), ``sync`` (``Client``, blocking) and ``aio`` (``Connection``, asyncio,
pipelined). Must not import: Twisted or any of the broker's server modules.
"""
