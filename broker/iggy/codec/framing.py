"""Iggy's frame heads: what comes before every request and every reply payload.

Owns: ``REQUEST_HEAD`` and ``REPLY_HEAD`` (the two ``struct`` layouts) and the reply frames
``frame_ok`` and ``frame_error``. Little-endian throughout::

    request: u32 length (= 4 + N), u32 code, N bytes of payload
    reply:   u32 status, u32 length (= N), N bytes of payload  (status != 0: N = 0)

Splitting a byte stream into request frames is the connection's job
(``broker.iggy.protocol``); it reads the head with ``REQUEST_HEAD``.

Must not import: Twisted, sockets, files, the core, the other codec modules.
"""

from __future__ import annotations

import struct

__all__ = ["REQUEST_HEAD", "REPLY_HEAD", "frame_ok", "frame_error"]

REQUEST_HEAD = struct.Struct("<II")
"""``length, code`` of a request (``length`` counts the code and the payload)."""
REPLY_HEAD = struct.Struct("<II")
"""``status, length`` of a reply (``length`` counts the payload only)."""


def frame_ok(payload: bytes = b"") -> bytes:
    """A success reply: ``status 0, u32 length, payload``."""
    return REPLY_HEAD.pack(0, len(payload)) + payload


def frame_error(status: int) -> bytes:
    """An error reply: ``status, length 0``, no payload."""
    return REPLY_HEAD.pack(int(status), 0)
