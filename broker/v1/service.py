"""The V1 transport as the shell sees it: its listener (as ``broker.iggy.service``,
``broker.kafka.service`` and ``broker.tank.service`` give theirs).

Owns: ``v1_listener``, the ``broker.transport.listeners.Listener`` of the V1 port, which
warns once bound when a cluster's ``cluster.brokers`` gives this broker another port (the
other brokers would not reach it).

Must not import: Twisted's reactor, the store, groups or replication.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.transport.listeners import Listener
from broker.v1.protocol import V1Factory

__all__ = ["v1_listener"]

log = logging.getLogger("skerry.server")


def v1_listener(factory: V1Factory, cluster: Any = None) -> Listener:
    """The V1 listener over ``factory``; ``cluster``: the configuration's ``cluster`` (or
    None), whose address for this broker the bound port is checked against."""
    def bound(address: Any) -> None:
        if cluster is None:
            return
        own = cluster.address(cluster.broker_id)
        if own.port != address.port:
            log.warning("listening on port %d but cluster.brokers gives broker %d the "
                        "address %s: the other brokers will not reach this one",
                        address.port, cluster.broker_id, own)

    return Listener("v1", "port", factory, bound=bound)
