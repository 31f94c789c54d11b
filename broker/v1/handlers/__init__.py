"""The V1 transport's handlers: ``dispatch`` (the handler table and its boundary) and
``forward`` (group commands relayed to their coordinator in a cluster).

Must not import: the store, groups or replication directly; they go through the core and
the services.
"""

from broker.v1.handlers.dispatch import BROKER_ONLY_COMMANDS, Handlers

__all__ = ["BROKER_ONLY_COMMANDS", "Handlers"]
