"""The TANK transport's shell: builds its objects over the broker's core and listens.

Owns: ``TankService`` (handlers and factory over one ``BrokerCore``; the replication
service's ``is_leader`` passed in by the broker's shell) and ``tank_refusal``, the rule
for where the listener may run. TANK carries no credentials (no request has a field for
them, spec/tank-notes.md §3-§7), so the listener cannot take part in Skerry's
authentication: it refuses to start on an address that is not loopback, and when
``auth.tokens_file`` is set (every TANK client would skip the V1 AUTH the tokens file
asks for). With ``tls.cert`` it speaks TLS like the other listeners (a TANK client then
reaches it through a TLS tunnel such as stunnel; the reference client has no TLS).

Must not import: the global reactor (it comes as an argument to ``listen``), the file
layer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from twisted.internet.interfaces import IReactorTime

from broker.auth import is_loopback
from broker.core import BrokerCore
from broker.tank.handlers import TankHandlers
from broker.tank.protocol import TankFactory
from broker.transport.listeners import Listener

__all__ = ["TankService", "tank_refusal"]

log = logging.getLogger("skerry.tank")


def tank_refusal(config: Any) -> str | None:
    """Why the TANK listener cannot start with this configuration, or None."""
    if config["tank_port"] is None:
        return None
    host = config["host"]
    if not is_loopback(host):
        return (f"refusing to start the TANK listener on {host}: TANK requests carry no "
                f"credentials, so it would let any machine that reaches it read and write "
                f"every topic; listen on 127.0.0.1 (docs/tank.md, Security)")
    if config["auth.tokens_file"] is not None:
        return ("refusing to start the TANK listener with auth.tokens_file set: TANK requests "
                "carry no credentials, so its clients would skip the AUTH the tokens file asks "
                "for; turn tank_port off or run without auth.tokens_file (docs/tank.md, "
                "Security)")
    return None


class TankService:
    """The TANK binary transport over one broker core."""

    def __init__(self, core: BrokerCore, config: Any, clock: IReactorTime, *,
                 is_leader: Callable[[str, int], bool]) -> None:
        self.core = core
        self.config = config
        self.handlers = TankHandlers(
            core, clock, is_leader=is_leader,
            max_message_bytes=config["limits.max_message_bytes"],
            max_partitions_per_topic=config["limits.max_partitions_per_topic"])
        self.factory = TankFactory(
            self.handlers, clock,
            max_frame_bytes=config["tank.max_frame_bytes"],
            max_connections=config["limits.max_connections"],
            idle_timeout_ms=config["limits.idle_timeout_ms"],
            max_pending_output_bytes=config["limits.max_pending_output_bytes"])

    @property
    def listener(self) -> Listener:
        """The TANK listener (``broker.transport.listeners``): ``tank_refusal`` is checked
        first (``ValueError``)."""
        return Listener("tank", "tank_port", self.factory, before=self._check)

    def listen(self, reactor: Any, host: str, port: int) -> Any:
        """Check ``tank_refusal`` (``ValueError``) and listen; returns the listening port."""
        return self.listener.listen(reactor, host, port)

    def _check(self, host: str) -> None:
        refusal = tank_refusal(self.config)
        if refusal is not None:
            raise ValueError(refusal)

    def stop(self) -> None:
        """Refuse new connections."""
        self.factory.refusing = "broker is shutting down"

    def all_idle(self) -> bool:
        return self.factory.all_idle()
