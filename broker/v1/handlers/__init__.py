"""The V1 transport's handlers, split by responsibility like Iggy's, Kafka's and TANK's:

- ``dispatch``: ``Handlers``, the table ``{Produce: ..., ...}`` and its boundary (refusals,
  bugs, shutting down, broker-only commands, ACLs, group routing), AUTH, the data commands
  (PING, PRODUCE, PRODUCE_BATCH, FETCH, CONSUME) and the group commands;
- ``context``: what they all share (``Connection``, ``HandlerContext``; the reply ``Slot``
  is the transport kit's, ``broker.transport.slots``);
- ``replication``: what followers and peer brokers send; ``admin``: topics, the control
  plane, METADATA, OFFSETS and ACLs;
- ``forward``: group commands relayed to their coordinator in a cluster.

Must not import: the store, groups or replication directly; they go through the core and
the services.
"""

from broker.v1.handlers.dispatch import BROKER_ONLY_COMMANDS, Handlers

__all__ = ["BROKER_ONLY_COMMANDS", "Handlers"]
