"""Iggy command handlers: decoded commands -> core, group service, catalog and users ->
replies.

A package split by job. Owns: nothing of its own; it re-exports what the connection, the
shell and the tests use (``IggyHandlers``, ``Session``, ``NodeInfo``, ``SystemInfo``, the
server version):

* ``dispatch``: ``IggyHandlers``, the table ``{command class: handler}`` with its
  unknown-command fallback, the authentication gate and the handler boundary;
* ``context``: what every handler shares (``Context``, ``Session``, ``Membership``,
  ``NodeInfo``) and the lookups and permission checks commands start with;
* ``sessions``: the connected clients and their consumer-group memberships;
* ``system``: Ping, stats, snapshot, cluster metadata, clients;
* ``users``: users, logins, personal access tokens;
* ``catalog``: streams, topics, partitions, segments;
* ``messages``: send, poll, flush, stored consumer offsets;
* ``groups``: consumer groups.

Handlers reach the core, the ``GroupService`` and the shell's services
(``broker.services``) through their public methods only, and the wire only through the
codec.

Must not import (nor may any module of the package): Twisted's reactor, sockets, files,
the store, the protocol.
"""

from __future__ import annotations

from broker.iggy.handlers.context import NodeInfo, Session
from broker.iggy.handlers.dispatch import IggyHandlers
from broker.iggy.handlers.system import SERVER_SEMVER, SERVER_VERSION
from broker.services.host_facts import SystemInfo

__all__ = ["IggyHandlers", "Session", "SystemInfo", "NodeInfo", "SERVER_VERSION", "SERVER_SEMVER"]
