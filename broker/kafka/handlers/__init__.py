"""The Kafka transport's request handlers, split by job.

* ``dispatch``: ``KafkaHandlers`` (the table request class -> handler, the fallback for
  APIs without a handler, the handler boundary);
* ``context``: ``Context`` (the core, ``NodeInfo``, the optional group service, settings);
* ``data``: ApiVersions' neighbours, the data APIs: Metadata, Produce, Fetch, ListOffsets;
* ``groups``: the group and offset APIs (``GROUP_HANDLERS``; the group half's module).

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from broker.kafka.handlers.context import Context, NodeInfo
from broker.kafka.handlers.dispatch import CLOSE, KafkaHandlers

__all__ = ["CLOSE", "Context", "KafkaHandlers", "NodeInfo"]
