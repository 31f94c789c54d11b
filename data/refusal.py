"""The root of every refusal: a request turned down for a reason the peer is told about.

Owns: ``SkerryError``, the one base class of the exceptions that answer a request (the
broker's own in ``broker.errors``, the domain's in ``groups.errors``, ``replication.errors``
and ``data.errors``), so that one ``except SkerryError`` at a handler boundary tells a
refusal from a bug. It carries a one-line message and a ``description`` (the message when
none is given), and no wire code: each transport maps classes onto its own codes
(``broker.v1.errors``, ``broker.iggy.errors``).

It lives here, beside the storage package's neutral modules (``data.names``, ``data.keys``),
because the domain packages may import ``data`` but never ``broker``.

Must not import: anything of Skerry, Twisted, sockets.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["SkerryError"]


class SkerryError(Exception):
    """A failure a client is told about. ``str(error)`` is the message.

    The message is kept as given (the ``description`` when none is): escaping it for a wire
    is the transport's job (V1's ``ERR`` line replaces ``|`` and line breaks,
    ``broker.v1.replies.err``; a Kafka error message carries them as they are).
    """

    description: ClassVar[str] = "internal error"

    def __init__(self, message: str | None = None) -> None:
        text = message if message else self.description
        super().__init__(text)
        self.message = text
