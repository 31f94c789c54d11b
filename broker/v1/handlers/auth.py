"""V1 ``AUTH``: authenticating a connection (``broker/auth.py``'s tokens), with a delay that
doubles per failure on the connection.

Must not import: Twisted's reactor, sockets, files. Only ``Deferred`` for waiting.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.auth import TokenStore, failure_delay
from broker.errors import (
    Unauthenticated,
)
from broker.v1 import codec as c
from broker.v1.handlers.context import (
    HandlerContext,
    Slot,
)

log = logging.getLogger("skerry.handlers")


class AuthHandlers(HandlerContext):
    """``AUTH`` and the principals allowed broker-only commands."""

    # ------------------------------------------------------------- basics

    auth_tokens: TokenStore | None = None
    """Set by the shell when ``auth.tokens_file`` is configured (``broker/auth.py``)."""
    peer_users: frozenset[str] | None = None
    """Set by the shell on a cluster member with authentication on: the principals
    (``cluster.peer_users``) allowed to send ``BROKER_ONLY_COMMANDS``. None: no gate."""

    def auth(self, cmd: c.Auth, slot: Slot, conn: Any) -> bytes | None:
        """``AUTH <user> <token>``: marks the connection authenticated. A failure is answered
        after a delay that doubles per failure on this connection (reactor clock; other
        connections are not held up), and an AUTH sent during that delay is checked only
        once it is over, so pipelining guesses gains nothing. No token is ever logged."""
        tokens = self.auth_tokens
        if tokens is None:
            return c.ok(cmd.cid)  # authentication is not configured: nothing to check
        clock = self.core.clock
        user, token = cmd.user, cmd.token

        def check() -> tuple[bool, bytes]:
            if tokens.verify(user, token):
                conn.authenticated = True
                conn.principal = user
                conn.auth_failures = 0
                log.info("AUTH ok: user %s from %s", user, getattr(conn, "peer", "?"))
                return True, c.ok(cmd.cid)
            conn.auth_failures += 1
            conn.auth_ready_at = clock.seconds() + failure_delay(conn.auth_failures)
            log.warning("AUTH failed: user %s from %s (failure %d on this connection)",
                        user, getattr(conn, "peer", "?"), conn.auth_failures)
            return False, c.err(cmd.cid, Unauthenticated("invalid user or token"))

        def answer(reply: bytes) -> None:
            slot[0] = reply
            conn.drain()

        def run(ok: bool, reply: bytes) -> None:
            if ok:
                answer(reply)
            else:
                clock.callLater(conn.auth_ready_at - clock.seconds(), answer, reply)

        def checked_later() -> None:
            run(*check())
            queue = conn.auth_queue
            queue.popleft()
            if queue:  # the next pipelined AUTH waits out this one's delay
                clock.callLater(max(0.0, conn.auth_ready_at - clock.seconds()), queue[0])

        queue = conn.auth_queue
        wait = conn.auth_ready_at - clock.seconds()
        if queue or wait > 0:
            queue.append(checked_later)
            if len(queue) == 1:
                clock.callLater(max(0.0, wait), checked_later)
            return None
        ok, reply = check()
        if ok:
            return reply
        run(ok, reply)
        return None
