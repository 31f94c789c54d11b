"""Iggy's frame heads: what comes before every request and every reply payload.

Owns: ``REQUEST_HEAD`` and ``REPLY_HEAD`` (the two ``struct`` layouts) and the reply frames
``frame_ok`` and ``frame_error``. Little-endian throughout::

    request: u32 length (= 4 + N), u32 code, N bytes of payload
    reply:   u32 status, u32 length (= N), N bytes of payload  (status != 0: N = 0)

``request_splitter`` cuts a byte stream into ``(code, payload)`` requests with the kit's
splitter (``broker.transport.frames``); a length that cannot hold the code, or whose payload
is over the limit, gives a ``FrameRefused`` (the connection answers it and closes).

Must not import: Twisted, sockets, files, the core, the other codec modules.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from broker.transport.frames import FrameSplitter

__all__ = ["REQUEST_HEAD", "REPLY_HEAD", "FrameRefused", "frame_ok", "frame_error",
           "request_splitter"]

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


@dataclass(frozen=True, slots=True)
class FrameRefused:
    """A request length the splitter refuses: shorter than the code (4), or a payload over
    ``limit``. The stream cannot be re-synchronised; nothing after it is read."""

    length: int
    limit: int

    def __str__(self) -> str:
        return f"frame of length {self.length} (limit {self.limit + 4})"


def _request(head: tuple[int, int], payload: bytes) -> tuple[int, bytes]:
    return head[1], payload


def _refused(head: tuple[int, int], limit: int) -> FrameRefused:
    return FrameRefused(head[0], limit)


def request_splitter(max_payload: int) -> FrameSplitter[tuple[int, bytes]]:
    """A splitter of requests ``u32 length, u32 code, payload`` into ``(code, payload)``,
    with payloads of at most ``max_payload`` bytes."""
    return FrameSplitter(REQUEST_HEAD, 0, max_payload, frame=_request,  # type: ignore[arg-type]
                         refuse=_refused, counted=4)  # type: ignore[arg-type]
