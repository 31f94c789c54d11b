"""V1 framing: the one line splitter, the one the server runs and the tests test.

Owns: cutting a byte stream into ``\\n``-terminated request lines with ``LineReceiver``'s
rules (``delimiter = b"\\n"``, a maximum length, nothing after an over-long line) except that
the ``\\r`` of a ``\\r\\n`` terminator does not count toward the length limit; a cursor over
each read, so a connection can stop in the middle of a buffer (a command held back, the
client paused) and go on later from the same byte; and the place where a codec's fast path
is tried: a run of requests scanned at the cursor, in place, before any line is cut.

Why a cursor and not ``LineReceiver``: LineReceiver re-splits the whole rest of the buffer
for every line, which is quadratic on a burst of thousands of pipelined requests; here each
read is walked once (``bytes.find`` from the cursor, or the fast scan at the cursor), and
the rest is sliced once, at the end of the read (``end_of_read``).

One request is not a line alone: a PRODUCE_BATCH ``enc=raw size=<n>`` line is followed by
``n`` bytes of batch, which the caller takes with ``take_body`` once it has read the line's
size (``Codec.body_size``), so they are never cut into lines.

``LineFramer`` is the server's interface (``broker.v1.protocol``); ``LineSplitter`` is the
list-returning face over the same framer that the codec's framing tests feed in every chunk
size.

Must not import: Twisted, sockets, the codec's command classes, the store, ``groups`` or
``replication``: it sees bytes only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["LineFramer", "LineSplitter", "LineTooLong", "TOO_LONG", "FastScan"]

FastScan = Callable[[bytes, int, int, int], "tuple[list[Any], int]"]
"""A codec's fast path: ``scan(buffer, pos, most, max_line)`` gives the run of at most
``most`` requests it takes at ``pos`` (each a tuple whose last item is the request's start)
and the position after them (``Codec.scan_produce``)."""


@dataclass(frozen=True)
class LineTooLong:
    """Marker from the framer: a line exceeded the limit; answer ``line_too_long_reply``
    and close the connection."""


TOO_LONG = LineTooLong()
"""The one ``LineTooLong`` the framer hands out."""


class LineFramer:
    """A cursor over the bytes read from one connection.

    ``feed`` adds a read; ``take_fast`` hands out the run of requests the fast path matches
    at the cursor and ``next_request`` the next line, until the caller stops asking (it may stop at any point and ask again after a later ``feed``
    or with nothing new); ``end_of_read`` keeps the unread rest for the next read and
    applies the length limit to it.

    The length limit counts a line's bytes without its terminator, and a telnet client's
    terminator is ``\\r\\n``: a line is too long when it has more than ``max_line_bytes``
    bytes, not counting one ``\\r`` just before the ``\\n``. Unread bytes that can no longer
    become a legal line are reported at ``end_of_read`` without waiting for a newline, so
    memory stays bounded: a tail over the limit (unless its one extra byte is the ``\\r`` of
    a ``\\r\\n`` on its way), and any unread rest over ``max_line_bytes + 1`` bytes, unless
    the caller says the rest is requests it stopped at (a held command), after which it
    stops reading the socket: one read bounds what it keeps. After the first
    ``TOO_LONG`` the framer hands out nothing more.
    """

    __slots__ = ("max_line", "_buffer", "_pos", "_fast", "overflowed", "at_end")

    def __init__(self, max_line_bytes: int, fast: FastScan | None = None) -> None:
        if max_line_bytes < 0:
            raise ValueError(f"max_line_bytes must be >= 0, got {max_line_bytes}")
        self.max_line = max_line_bytes
        self._buffer = b""
        self._pos = 0
        self._fast = fast
        self.overflowed = False
        self.at_end = False
        """True when the last ``take_fast`` took every byte read (what a request/response
        client's every read looks like): the caller may skip ``end_of_read``, the next
        ``feed`` starts from an empty buffer. Reset by ``feed``."""

    @property
    def buffered(self) -> int:
        """How many bytes were read and not handed out yet."""
        return len(self._buffer) - self._pos

    def feed(self, data: bytes) -> None:
        """Add a read behind the bytes not handed out yet."""
        if self.overflowed:
            return
        self.at_end = False
        buffer = self._buffer
        if self._pos:
            buffer = buffer[self._pos:]
            self._pos = 0
        self._buffer = buffer + data if buffer else data

    def take_fast(self, most: int = 32) -> list[Any]:
        """The run of requests at the cursor that the fast path takes (each within the
        limit), at most ``most``, in order, one call for the run (``Codec.scan_produce``:
        compiled, or its Python twin); the cursor moves past them. Taken as a run, not one
        call a request: that is most of a pipelined PRODUCE's framing cost. The run is short
        because its items live until the caller is done with it, and thousands of live
        tuples (GC-tracked objects) would set off the cyclic collector, which shows in the
        p99 latency of a pipelined load. A caller that stops in the middle of the run gives
        the rest back with ``rewind`` (a request's start is its tuple's last item)."""
        buffer = self._buffer
        run, pos = self._fast(buffer, self._pos, most, self.max_line)  # type: ignore[misc]
        if run:
            self._pos = pos
            if pos == len(buffer):  # the read ends here (a request/response client's every read)
                self.at_end = True
        return run

    def take_one(self, data: bytes) -> Any:
        """``feed(data)`` then ``take_fast(1)``, when ``data`` is exactly one request of
        the fast path and nothing was buffered before it (a request/response client's every
        read): that request, in one call, and the framer stays empty. Otherwise None and
        nothing happened: the caller feeds the read as usual (what was scanned in vain is
        one line)."""
        if self._pos != len(self._buffer) or self.overflowed:
            return None
        run, pos = self._fast(data, 0, 1, self.max_line)  # type: ignore[misc]
        if pos != len(data) or not run:
            return None
        self._buffer = data
        self._pos = pos
        self.at_end = True
        return run[0]

    def rewind(self, pos: int) -> None:
        """Move the cursor back to ``pos``, the start of a request ``take_fast`` handed
        out that the caller did not run (it was paused in the middle of the run)."""
        self._pos = pos
        self.at_end = False

    def next_request(self) -> bytes | LineTooLong | None:
        """The next complete line without its ``\\n`` (a ``\\r`` before it stays; the
        codec strips it); ``TOO_LONG`` for an over-long line (once; the framer is then
        empty); None when no complete line is left."""
        buffer = self._buffer
        start = self._pos
        end = buffer.find(b"\n", start)
        if end < 0:
            return None
        self._pos = end + 1
        limit = self.max_line
        if end - start > limit and not (end - start == limit + 1 and buffer[end - 1] == 13):
            return self._overflow()
        return buffer[start:end]

    def take_body(self, size: int) -> bytes | None:
        """The ``size`` bytes at the cursor (a request's body: PRODUCE_BATCH ``enc=raw``),
        or None while fewer have been read; the cursor moves past them. The caller bounds
        ``size`` by ``max_line_bytes``, so the unread rest of a body on its way stays within
        the limit ``end_of_read`` applies."""
        buffer = self._buffer
        start = self._pos
        end = start + size
        if end > len(buffer):
            return None
        self._pos = end
        return buffer[start:end]

    def end_of_read(self, bound: bool = True) -> LineTooLong | None:
        """Keep the unread rest for the next read (one slice per read); ``TOO_LONG`` when
        it can no longer become a legal line (see the class docstring). ``bound`` False:
        the rest is requests the caller stopped at (a held command) and stopped reading
        after, so what it keeps is bounded by one read: no length check."""
        pos = self._pos
        rest = self._buffer[pos:] if pos else self._buffer
        self._buffer = rest
        self._pos = 0
        size = len(rest)
        limit = self.max_line
        if not bound:
            return None
        if size > limit + 1 or (size == limit + 1 and rest[-1] != 13 and b"\n" not in rest):
            return self._overflow()
        return None

    def take_rest(self) -> bytes:
        """Every byte not handed out yet, which the framer then forgets (the client
        half-closed after an unterminated line)."""
        rest = self._buffer[self._pos:]
        self.clear()
        return rest

    def clear(self) -> None:
        """Forget every byte not handed out yet (the connection is closing)."""
        self._buffer = b""
        self._pos = 0

    def _overflow(self) -> LineTooLong:
        self.overflowed = True
        self.clear()
        return TOO_LONG


class LineSplitter:
    """A ``LineFramer`` that returns lists: ``feed`` gives every line a read completed (and
    ``LineTooLong``, at most once). The codec's framing tests drive the server's framer
    through it."""

    __slots__ = ("_framer",)

    def __init__(self, max_line_bytes: int) -> None:
        self._framer = LineFramer(max_line_bytes)

    @property
    def overflowed(self) -> bool:
        """True once a ``LineTooLong`` was produced; later input is discarded."""
        return self._framer.overflowed

    def feed(self, data: bytes) -> list[bytes | LineTooLong]:
        """Add ``data``; return the lines it completed (and ``LineTooLong``, at most once)."""
        framer = self._framer
        if framer.overflowed:
            return []
        framer.feed(data)
        out: list[bytes | LineTooLong] = []
        while True:
            item = framer.next_request()
            if item is None:
                break
            out.append(item)  # type: ignore[arg-type]
            if item is TOO_LONG:
                return out
        if framer.end_of_read() is not None:
            out.append(TOO_LONG)
        return out
