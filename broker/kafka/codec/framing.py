"""Kafka's frames: the int32 size prefix, the request header and the response header.

Owns: ``FrameSplitter`` (bytes in any chunking -> whole request frames, with a bounded
frame size), ``FrameTooLarge`` (the error object it yields for an oversized or negative
size), ``RequestHeader`` with ``parse_header``, and ``frame_response``. Layouts
(kafka-wire-notes §2.2)::

    Request  => size:int32 api_key:int16 api_version:int16 correlation_id:int32
                client_id:nullable string [tagged fields] body   (size = bytes after the size)
    Response => size:int32 correlation_id:int32 [tagged fields] body

The tagged fields are there in a flexible version (request header v2, response header v1;
KIP-482), never after an ApiVersions response's correlation id. ``parse_header`` reads the
part every version shares (header v1: the client id stays an int16-length string in v2);
``wire`` reads the tagged fields where the api's table says the version is flexible.

Must not import: Twisted, sockets, files, the core, the store, codec modules other than
``primitives`` (the splitting itself is the kit's, ``broker.transport.frames``).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.kafka.codec.primitives import INT32, Reader
from broker.transport.frames import FrameSplitter as _Splitter

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "FrameSplitter",
    "FrameTooLarge",
    "RequestHeader",
    "frame_response",
    "parse_header",
]

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
"""The splitter's default bound (the Iggy listener's); Kafka's own default is 100 MiB."""


@dataclass(frozen=True)
class FrameTooLarge:
    """A size prefix the splitter refuses: above ``limit``, or negative. The connection
    must be closed (§2.2); the splitter yields nothing after it."""

    size: int
    limit: int

    def __str__(self) -> str:
        if self.size < 0:
            return f"negative frame size {self.size}"
        return f"frame of {self.size} bytes is over the {self.limit}-byte limit"


def _body(head: tuple[int, ...], body: bytes) -> bytes:
    return body


def _too_large(head: tuple[int, ...], limit: int) -> FrameTooLarge:
    return FrameTooLarge(head[0], limit)


class FrameSplitter(_Splitter[bytes]):
    """Cuts a byte stream into request frames (the bytes after each size prefix).

    ``feed(data)`` returns the frames completed by ``data``, in order; if a size prefix
    is refused, the list ends with one ``FrameTooLarge`` and every later ``feed`` returns
    ``[]``. Works for any chunking, one byte at a time included. Sans-I/O: the caller
    owns the socket. The splitting is ``broker.transport.frames``' (shared with Iggy and
    TANK); this names Kafka's head.
    """

    __slots__ = ()

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError(f"max_frame_bytes must be >= 0, not {max_frame_bytes}")
        super().__init__(INT32, 0, max_frame_bytes, frame=_body, refuse=_too_large)

    @property
    def max_frame_bytes(self) -> int:
        return self.max_body


@dataclass(frozen=True)
class RequestHeader:
    """Request header v1: which API at which version, the id the response echoes, and the
    client's name (nullable)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def parse_header(r: Reader) -> RequestHeader:
    """Read request header v1 at ``r``'s cursor (raises ``Malformed`` if truncated)."""
    return RequestHeader(r.int16("api_key"), r.int16("api_version"),
                         r.int32("correlation_id"), r.nullable_string("client_id"))


def frame_response(correlation_id: int, body: bytes) -> bytes:
    """``size, correlation_id, body``: one whole response frame."""
    return INT32.pack(4 + len(body)) + INT32.pack(correlation_id) + body
