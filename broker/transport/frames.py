"""The one length-prefixed frame splitter (Iggy, Kafka and TANK frames).

Owns: ``FrameSplitter``, which cuts a byte stream fed in chunks of any size (one byte at a
time included) into whole frames, bounding each frame's body. A transport describes its
head once: a ``struct`` layout, which of its fields is the length, and how many bytes of
the head after the length field the length counts::

    Kafka  size:int32 body                 (size = body bytes)          head ">i", field 0
    TANK   msg_id:u8 size:u32 body         (size = body bytes)          head "<BI", field 1
    Iggy   length:u32 code:u32 body        (length = 4 + body bytes)    head "<II", field 0,
                                                                        counted 4

and two small functions of its own: ``frame(head, body)`` builds what a whole frame becomes
(the body itself, a ``Frame``, a ``(code, body)`` pair), ``refuse(head, limit)`` the
transport's refusal object for a length that is negative, shorter than what it must count,
or whose body is over ``max_body``. A refusal ends the list ``feed`` returns; after it the
splitter is broken and returns nothing more (the stream cannot be re-synchronised: the
connection closes).

Sans-I/O: no sockets, no Twisted; the connection feeds it and dispatches what it returns.

Must not import: Twisted, the core, any transport.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["FrameSplitter"]

FrameT = TypeVar("FrameT")


class FrameSplitter(Generic[FrameT]):
    """Bytes in any chunking -> whole frames in order (see the module doc)."""

    __slots__ = ("head", "field", "counted", "max_body", "frame", "refuse", "broken", "_buf")

    def __init__(self, head: struct.Struct, field: int, max_body: int, *,
                 frame: Callable[[tuple[Any, ...], bytes], FrameT],
                 refuse: Callable[[tuple[Any, ...], int], Any], counted: int = 0) -> None:
        if max_body < 0:
            raise ValueError(f"the frame limit must be >= 0, not {max_body}")
        self.head = head
        self.field = field
        self.counted = counted
        self.max_body = max_body
        self.frame = frame
        self.refuse = refuse
        self.broken: Any = None
        """The refusal returned, once a length was refused (then nothing more is read)."""
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Any]:
        """The frames ``data`` completes, in order; a refusal, if any, comes last."""
        if self.broken is not None:
            return []
        buf = self._buf
        buf += data
        out: list[Any] = []
        size = self.head.size
        unpack = self.head.unpack_from
        field = self.field
        counted = self.counted
        max_body = self.max_body
        frame = self.frame
        pos = 0
        end_of_data = len(buf)
        while end_of_data - pos >= size:
            head = unpack(buf, pos)
            body = head[field] - counted
            if body < 0 or body > max_body:
                self.broken = self.refuse(head, max_body)
                out.append(self.broken)
                buf.clear()
                return out
            end = pos + size + body
            if end > end_of_data:
                break
            with memoryview(buf) as view:  # one copy of the body, not two
                out.append(frame(head, bytes(view[pos + size:end])))
            pos = end
        if pos:
            del buf[:pos]
        return out

    def clear(self) -> None:
        """Drop what is buffered (the connection is closing)."""
        self._buf = bytearray()
