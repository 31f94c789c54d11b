"""The TANK dispatcher: one frame -> its request -> the handler -> the reply frame.

Owns: ``TankHandlers``: the explicit table ``{codec.Produce: produce.produce, ...}`` from
each request class to the handler method of its job (``ProduceHandlers``,
``ConsumeHandlers``, ``CatalogHandlers``), the fallback for a request the codec parses
but no handler serves (``unknown_request``: TANK closes the connection on what it does
not serve, and so does Skerry), and the handler boundary: nothing but ``CodecError``
(a malformed frame: the connection closes, as TANK does) raises out of ``dispatch_request``; a
handler's bug is logged with its traceback and answered with the request's "system
fault" shape (every produce partition 0x02, every consume partition 0xfb, a create topic
2), or closes the connection where TANK has no such shape.

``dispatch_request(parse(frame))`` returns the whole reply frame, a ``Deferred`` firing with it (a
produce waiting for its fsync, a long-poll consume), or None (a ping: no reply).

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

from broker.core import BrokerCore
from broker.tank import codec as c
from broker.tank.handlers.catalog import CatalogHandlers
from broker.tank.handlers.consume import ConsumeHandlers
from broker.tank.handlers.context import Context
from broker.tank.handlers.produce import ProduceHandlers
from broker.transport.boundary import Boundary

__all__ = ["TankHandlers", "Handler", "Unserved"]

log = logging.getLogger("skerry.tank")

Handler = Callable[[Any], "c.Reply | Deferred[c.Reply]"]
"""A handler method: ``request -> reply`` (or a Deferred firing with it)."""


class Unserved(Exception):
    """A request that has no answer: the connection is closed (TANK's way)."""


class TankHandlers:
    """The TANK handler table over one ``BrokerCore``."""

    def __init__(self, core: BrokerCore, clock: IReactorTime, *,
                 is_leader: Callable[[str, int], bool], max_message_bytes: int,
                 max_partitions_per_topic: int, max_read_bytes: int = 16 * 1024 * 1024
                 ) -> None:
        self.core = core
        self.boundary: Boundary[bytes] = Boundary(
            "tank", log, closing=lambda: core.closing, refusals=(),
            refused=_no_refusal, internal=_fault)
        """Every exception -> the request's system fault (``broker.transport.boundary``):
        the handlers answer refusals per partition themselves, so what reaches it is a
        bug; counts the requests per kind for ``/metrics``."""
        self.ctx = Context(core, clock, is_leader=is_leader,
                           max_message_bytes=max_message_bytes,
                           max_partitions_per_topic=max_partitions_per_topic,
                           max_read_bytes=max_read_bytes)
        self.produce_handlers = ProduceHandlers(self.ctx)
        self.consume_handlers = ConsumeHandlers(self.ctx)
        self.catalog_handlers = CatalogHandlers(self.ctx)
        self.table = self._table()

    def _table(self) -> dict[type, Handler]:
        produce, consume, catalog = (self.produce_handlers, self.consume_handlers,
                                     self.catalog_handlers)
        return {
            c.Produce: produce.produce,
            c.ProduceWithSeqnum: produce.produce,
            c.Consume: consume.consume,
            c.DiscoverPartitions: catalog.discover_partitions,
            c.CreateTopic: catalog.create_topic,
            c.ReloadConf: catalog.reload_conf,
            c.Status: catalog.status,
            c.DiscoverTopics: catalog.discover_topics,
            c.DiscoverTopology: catalog.discover_topology,
        }

    def parse(self, frame: c.Frame) -> c.Request:
        """The request a frame holds; ``CodecError`` when it is malformed or unknown."""
        return c.parse_request(frame)

    def dispatch_request(self, req: c.Request) -> bytes | Deferred[bytes] | None:
        """The reply to one parsed request (see the module doc; the protocol parses each
        frame with ``parse``); ``Unserved`` closes the connection."""
        if type(req) is c.Ping:
            return None  # a peer's ping needs no answer
        boundary = self.boundary
        name = type(req).__name__
        boundary.count(name)
        handler = self.table.get(type(req))
        if handler is None:
            return self.unknown_request(req)
        if type(req) in _FAULT_SHAPED and boundary.shutting_down():
            return self.fault_reply(req)  # TANK has no "unavailable": a system fault
        try:
            result = handler(req)
        except Exception as error:
            return boundary.fault(name, req, error)
        if isinstance(result, Deferred):
            return result.addCallbacks(c.encode_reply, self._failed, errbackArgs=(req,))
        try:
            return c.encode_reply(result)
        except Exception as error:
            return boundary.fault(f"{name} (encoding its reply)", req, error)

    def unknown_request(self, req: Any) -> None:
        """A request the codec parses but no handler serves: closed, as TANK does."""
        raise Unserved(f"{type(req).__name__} has no handler")

    def _failed(self, failure: Failure, req: Any) -> bytes | Failure:
        if failure.check(CancelledError):
            return failure  # its connection closed: nobody to answer
        return self.boundary.fault(type(req).__name__, req, failure.value,
                                   failure.getTraceback())

    @staticmethod
    def fault_reply(req: Any) -> bytes:
        """The request's answer when Skerry itself failed: a system fault in its shape."""
        if type(req) in (c.Produce, c.ProduceWithSeqnum):
            return c.encode_reply(c.ProduceReply(req.request_id, tuple(
                c.ProduceTopicAck(tuple(c.ProducePartitionAck(c.ProduceError.IO_FAULT)
                                        for _ in t.partitions)) for t in req.topics)))
        if type(req) is c.Consume:
            return c.encode_reply(c.ConsumeReply(req.request_id, tuple(
                c.ConsumeTopicReply(t.name, tuple(
                    c.ConsumePartitionReply(p.partition if p.partition != 0xFFFF else 0,
                                            c.ConsumeFlag.SYSTEM_ERROR)
                    for p in t.partitions)) for t in req.topics)))
        if type(req) is c.CreateTopic:
            return c.encode_reply(c.CreateTopicReply(req.request_id, req.topic,
                                                     c.CreateTopicError.SYSTEM_FAULT))
        raise Unserved(f"{type(req).__name__}: no way to report a system fault")


_FAULT_SHAPED = (c.Produce, c.ProduceWithSeqnum, c.Consume, c.CreateTopic)
"""The requests whose replies can say "system fault" (``fault_reply``): refused while the
broker shuts down; the others (discovery, status) are still served."""


def _no_refusal(req: Any, error: BaseException) -> bytes:
    raise error  # refusals=(): never called


def _fault(req: Any, error: BaseException) -> bytes:
    return TankHandlers.fault_reply(req)
