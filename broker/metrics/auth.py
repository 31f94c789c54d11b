"""``HttpAuth``: ``/metrics`` (and the console) want the V1 users' credentials, as HTTP Basic
(user and token) or ``Bearer <token>``, checked in constant time; a refusal (401) is
answered after ``broker.auth.FIRST_DELAY_S`` on the reactor clock.

Must not import: the store, the transports.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from twisted.internet.interfaces import IReactorTime
from twisted.web.server import NOT_DONE_YET

from broker.auth import FIRST_DELAY_S, TokenStore
from broker.metrics.registry import log


class HttpAuth:
    """Who may read ``/metrics`` when authentication is configured: the V1 users, with the
    same tokens. ``Authorization: Basic base64(<user>:<token>)`` (what Prometheus'
    ``basic_auth`` sends) or ``Authorization: Bearer <token>`` (Prometheus'
    ``authorization``; the token of any user). Never logs a token."""

    REALM = b'Basic realm="skerry metrics", charset="UTF-8"'

    def __init__(self, tokens: TokenStore, clock: IReactorTime) -> None:
        self._tokens = tokens
        self._clock = clock

    def user_for(self, header: bytes | None) -> str | None:
        """The user the ``Authorization`` header proves to be, or None."""
        if not header:
            return None
        scheme, _, credentials = header.strip().partition(b" ")
        scheme = scheme.lower()
        try:
            if scheme == b"basic":
                decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
                user, colon, token = decoded.partition(":")
                return user if colon and self._tokens.verify(user, token) else None
            if scheme == b"bearer":
                token = credentials.strip().decode("ascii")
                found = None
                for user in self._tokens.users:  # every user, so the time tells nothing
                    if self._tokens.verify(user, token) and found is None:
                        found = user
                return found
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
        return None

    def refuse(self, request: Any) -> Any:
        """Answer 401 after the failed-attempt delay (on the reactor clock)."""
        peer = request.getClientAddress()
        log.warning("metrics: refused a request for /metrics from %s: %s",
                    getattr(peer, "host", "?"),
                    "bad credentials" if request.getHeader(b"authorization")
                    else "no credentials")
        request.setResponseCode(401)
        request.setHeader(b"www-authenticate", self.REALM)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        request.setHeader(b"cache-control", b"no-store")

        def answer() -> None:
            request.write(b"authentication required\n")
            request.finish()

        call = self._clock.callLater(FIRST_DELAY_S, answer)
        request.notifyFinish().addErrback(lambda _: call.cancel() if call.active() else None)
        return NOT_DONE_YET
