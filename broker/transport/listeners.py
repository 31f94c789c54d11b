"""The one description of a transport's listener, which ``broker.server`` loops over.

Owns: ``Listener``: a transport's name (the ``name=host:port`` of the startup line and the
``transport`` label of ``/metrics``), the setting that gives its port, its connection
factory, what to check and prepare before listening (``before(host)``; a ``ValueError``
refuses the start) and what to learn once bound (``bound(address)``: e.g. the address
Kafka's Metadata advertises). ``listen`` opens it on the reactor it is given; ``refuse``
turns new connections away while the broker stops; ``idle`` says whether every connection
has been answered.

Must not import: Twisted's reactor (it is passed in), the core, any transport.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Listener", "BACKLOG"]

BACKLOG = 1024
"""``listen(2)``'s backlog for every transport's socket."""


@dataclass(frozen=True, slots=True)
class Listener:
    """One transport's listening socket (see the module doc)."""

    name: str
    setting: str
    factory: Any
    """A ``broker.connection.ConnectionFactory``."""
    before: Callable[[str], None] | None = None
    bound: Callable[[Any], None] | None = None

    def listen(self, reactor: Any, host: str, port: int) -> Any:
        """Check, listen on ``host:port`` and learn the bound address; the listening port."""
        if self.before is not None:
            self.before(host)
        listening = reactor.listenTCP(port, self.factory, interface=host, backlog=BACKLOG)
        if self.bound is not None:
            self.bound(listening.getHost())
        return listening

    def refuse(self, reason: str = "broker is shutting down") -> None:
        """Turn every new connection away (the transport's own refusal)."""
        self.factory.refusing = reason

    def idle(self) -> bool:
        """True when every request read on every connection has been answered."""
        return bool(self.factory.all_idle())
