"""An independent Python TANK client: request building, reply decoding, a blocking socket.

Written from the client-side sections of spec/tank-notes.md (what libtank sends, how it
reads replies) and sharing no code with ``broker.tank.codec``, so the tests can check the
server codec against it and both against the notes' golden bytes:

* ``wire``: its own little-endian packing, varints and frame splitting;
* ``bundle``: the producer's bundle encoding and the consumer's chunk reading;
* ``api``: ``build_*`` requests and ``decode_*`` replies;
* ``blocking``: ``TankClient`` over a socket (replies matched by request id).

Must not import: Twisted, ``broker.core``, the store, ``broker.tank.codec``.
"""

from __future__ import annotations

from broker.tank.client.api import *  # noqa: F403
from broker.tank.client.api import __all__ as _api
from broker.tank.client.blocking import TankClient
from broker.tank.client.bundle import Consumed, Msg, bundle_for, read_chunk
from broker.tank.client.wire import TankDecodeError

__all__ = [*_api, "Consumed", "Msg", "TankClient", "TankDecodeError", "bundle_for",
           "read_chunk"]
