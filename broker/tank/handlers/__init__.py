"""TANK request handlers: parsed requests -> the core -> replies.

A package split by job; it re-exports what the connection, the shell and the tests use:

* ``dispatch``: ``TankHandlers``, the table ``{request class: handler}`` with its
  unknown-request fallback and the handler boundary;
* ``context``: what every handler shares (``Context``: the core, the settings, the
  TANK <-> Skerry mapping of names and numbers, the leader seam);
* ``produce``: Produce and ProduceWithSeqnum;
* ``consume``: Consume and its long poll;
* ``catalog``: DiscoverPartitions, CreateTopic and the single-node answers.

Handlers reach the core through its public methods only, and the wire only through the
codec.

Must not import (nor may any module of the package): Twisted's reactor, sockets, files,
the store, the protocol.
"""

from __future__ import annotations

from broker.tank.handlers.context import Context, Marks
from broker.tank.handlers.dispatch import TankHandlers, Unserved

__all__ = ["TankHandlers", "Context", "Marks", "Unserved"]
