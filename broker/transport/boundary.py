"""The dispatch boundary every transport runs its handlers behind.

Owns: ``Boundary``, one per transport, which keeps four promises the same way for V1,
Iggy, Kafka and TANK:

- every exception a handler raises becomes an answer in the transport's own shape, never a
  dropped connection: a *refusal* (an exception in ``refusals``: the domain's or the
  transport's "no") is answered through ``refused`` and logged without a traceback; anything
  else is a bug, logged with its traceback and answered through ``internal`` (V1
  ``INTERNAL``, Iggy status 1, Kafka -1 ``UNKNOWN_SERVER_ERROR``, TANK's system fault);
- "shutting down": ``shutting_down()`` is the one check (the core's ``closing``), which
  each transport answers with its own refusal (V1 and Iggy ``UNAVAILABLE``, Kafka and
  TANK the code their layout carries) for every request but a ping;
- requests per command: ``count`` adds to ``counts`` (a plain dict the metrics page reads
  at scrape time as ``skerry_requests_total{transport, command}``);
- a fast path (V1's PRODUCE scan) that does not go through ``guard`` calls ``refusal`` and
  ``fault`` itself, so its exceptions are answered the same way.

Deferred answers: a transport's errback calls ``fault`` or ``refusal`` with the failure's
exception (``failed``).

Sans-I/O: the boundary does no I/O and imports no Twisted; the connection writes what it
returns.

Must not import: Twisted, the core, any transport.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["Boundary"]

ReplyT = TypeVar("ReplyT")


class Boundary(Generic[ReplyT]):
    """One transport's dispatch boundary (see the module doc).

    ``refused(request, error)`` and ``internal(request, error)`` build the transport's
    answers; ``request`` is whatever the transport identifies a request by (a V1 cid, a
    parsed Kafka request, a TANK request).
    """

    __slots__ = ("transport", "log", "closing", "refusals", "refused", "internal", "counts")

    def __init__(self, transport: str, log: logging.Logger, *,
                 closing: Callable[[], bool],
                 refusals: tuple[type[BaseException], ...],
                 refused: Callable[[Any, BaseException], ReplyT],
                 internal: Callable[[Any, BaseException], ReplyT]) -> None:
        self.transport = transport
        self.log = log
        self.closing = closing
        self.refusals = refusals
        self.refused = refused
        self.internal = internal
        self.counts: dict[str, int] = {}
        """Requests received per command (what ``/metrics`` shows for this transport)."""

    def shutting_down(self) -> bool:
        """True once the broker stops: new requests (pings aside) are refused."""
        return self.closing()

    def count(self, command: str, n: int = 1) -> None:
        """``n`` requests of ``command`` were received."""
        counts = self.counts
        counts[command] = counts.get(command, 0) + n

    def guard(self, command: str, request: Any, handler: Callable[..., Any],
              *args: Any) -> Any:
        """``handler(*args)``, or the answer to what it raised (``refusal``/``fault``)."""
        try:
            return handler(*args)
        except self.refusals as error:
            return self.refused(request, error)
        except Exception as error:
            return self.fault(command, request, error)

    def refusal(self, request: Any, error: BaseException) -> ReplyT:
        """The answer to a refusal (no traceback: the client asked for something it may
        not have)."""
        return self.refused(request, error)

    def fault(self, command: str, request: Any, error: BaseException,
              traceback: str | None = None) -> ReplyT:
        """The answer to a bug: logged with its traceback (``traceback``: the text of one
        already formatted, a Deferred's), answered INTERNAL."""
        if traceback is not None:
            self.log.error("%s: %s failed: %s", self.transport, command, traceback)
        else:
            self.log.error("%s: handler for %s failed", self.transport, command,
                           exc_info=(type(error), error, error.__traceback__))
        return self.internal(request, error)

    def failed(self, command: str, request: Any, error: BaseException,
               traceback: str | None = None) -> ReplyT:
        """The answer to an exception a Deferred handler failed with (``traceback``: the
        failure's ``getTraceback()``)."""
        if isinstance(error, self.refusals):
            return self.refused(request, error)
        return self.fault(command, request, error, traceback)
