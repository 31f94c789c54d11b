"""SASL PLAIN for the Kafka listener: Kafka clients log in with the users of
``auth.tokens_file`` (user name, and the user's token as the password), as V1 clients do
with ``AUTH``.

Owns: ``SaslGate``, one connection's way through authentication, and ``parse_plain``
(RFC 4616's ``authzid NUL authcid NUL passwd``). Both of Kafka's exchanges: SaslHandshake
v0 then the raw token (kafka-wire-notes §1.2), and SaslHandshake v1 then the token inside
a SaslAuthenticate request (KIP-152; what current clients use, since the broker
advertises both):

1. before authentication a connection may send ApiVersions and SaslHandshake, nothing
   else (anything else closes it: Kafka's ILLEGAL_SASL_STATE, which is fatal there too);
2. SaslHandshake with mechanism ``PLAIN`` answers 0 and ``["PLAIN"]``; another mechanism
   answers 33 UNSUPPORTED_SASL_MECHANISM with ``["PLAIN"]`` (the client gives up);
3. after a v0 handshake the next frame is the raw PLAIN token, not a Kafka request; a good
   one is answered by an empty frame (four zero bytes) and the connection is
   authenticated; a bad one is logged and the connection closed after
   ``broker.auth.failure_delay`` (0.25 s), as Kafka closes;
4. after a v1 handshake the next frame is a SaslAuthenticate (v0-v2) carrying the token: a
   good one is answered error 0 (session lifetime 0: no expiry); a bad one is answered
   58 SASL_AUTHENTICATION_FAILED with a message, then closed after the same delay.

The token is never logged or kept. On a listener without ``auth.tokens_file`` there is no
gate, and a SaslHandshake answers 34 ILLEGAL_SASL_STATE (the handler in ``handlers``).

Must not import: Twisted, sockets, the store.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from broker.auth import TokenStore
from broker.kafka import codec as c

__all__ = ["SaslGate", "Step", "parse_plain", "MECHANISM"]

MECHANISM = "PLAIN"

_OPEN_KEYS = frozenset((int(c.ApiKey.API_VERSIONS), int(c.ApiKey.SASL_HANDSHAKE)))
_FAILED = "Authentication failed: invalid credentials"


class Step(enum.Enum):
    DISPATCH = "dispatch"
    """An ApiVersions before authentication: answer it as usual."""
    REPLY = "reply"
    """Write ``reply`` (the handshake's answer, or the empty frame of a good token)."""
    CLOSE = "close"
    """Close the connection (``delay_s`` later: a failed login), after writing ``reply``
    when there is one (SaslAuthenticate's error 58)."""


@dataclass(frozen=True)
class Outcome:
    step: Step
    reply: bytes = b""
    delay_s: float = 0.0
    why: str = ""
    user: str | None = None


def parse_plain(token: bytes) -> tuple[str, str, str] | None:
    """``(authzid, authcid, password)`` of a PLAIN token; None when malformed."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        return None
    try:
        authzid, authcid, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        return None
    if not authcid or not password:
        return None
    return authzid, authcid, password


class SaslGate:
    """One connection's SASL state, until it is authenticated."""

    def __init__(self, tokens: TokenStore, failure_delay_s: float) -> None:
        self.tokens = tokens
        self.failure_delay_s = failure_delay_s
        self.expect_token = False
        self.expect_authenticate = False

    def step(self, frame: bytes) -> Outcome:
        if self.expect_token:
            return self._token(frame)
        if self.expect_authenticate:
            return self._authenticate(frame)
        key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if key not in _OPEN_KEYS:
            return Outcome(Step.CLOSE, why=f"api key {key} before SASL authentication")
        if key == c.ApiKey.API_VERSIONS:
            return Outcome(Step.DISPATCH)
        request = c.parse_request(frame)
        if not isinstance(request, c.SaslHandshakeRequest):
            return Outcome(Step.CLOSE, why=f"a SaslHandshake it could not read ({request})")
        if request.mechanism != MECHANISM:
            reply = c.encode_response(request.header, c.SaslHandshakeResponse(
                int(c.ErrorCode.UNSUPPORTED_SASL_MECHANISM), (MECHANISM,)))
            return Outcome(Step.REPLY, reply)
        if request.header.api_version >= 1:
            self.expect_authenticate = True
        else:
            self.expect_token = True
        return Outcome(Step.REPLY, c.encode_response(
            request.header, c.SaslHandshakeResponse(0, (MECHANISM,))))

    def _authenticate(self, frame: bytes) -> Outcome:
        request = c.parse_request(frame)
        if not isinstance(request, c.SaslAuthenticateRequest):
            return Outcome(Step.CLOSE, delay_s=self.failure_delay_s,
                           why=f"a SaslAuthenticate it could not read ({request})")
        outcome = self._token(request.auth_bytes)
        if outcome.step is Step.REPLY:
            return Outcome(Step.REPLY, c.encode_response(
                request.header, c.SaslAuthenticateResponse(0)), user=outcome.user)
        return Outcome(Step.CLOSE, c.encode_response(request.header, c.SaslAuthenticateResponse(
            int(c.ErrorCode.SASL_AUTHENTICATION_FAILED), _FAILED)),
            delay_s=outcome.delay_s, why=outcome.why, user=outcome.user)

    def _token(self, frame: bytes) -> Outcome:
        parsed = parse_plain(frame)
        if parsed is None:
            return Outcome(Step.CLOSE, delay_s=self.failure_delay_s,
                           why="a malformed SASL PLAIN token")
        authzid, user, password = parsed
        if authzid not in ("", user):
            return Outcome(Step.CLOSE, delay_s=self.failure_delay_s, user=user,
                           why=f"SASL PLAIN for user {user} on behalf of another")
        if not self.tokens.verify(user, password):
            return Outcome(Step.CLOSE, delay_s=self.failure_delay_s, user=user,
                           why=f"SASL PLAIN failed for user {user}")
        return Outcome(Step.REPLY, b"\x00\x00\x00\x00", user=user)
