"""Kafka's primitive types: signed big-endian integers, strings, bytes and arrays.

Owns: ``Reader`` (a cursor over a request body that checks every length and raises
``Malformed``), ``Malformed`` (the codec-internal "these bytes do not parse" signal, which
``requests.parse_request`` turns into a ``MalformedRequest`` result) and the ``Writer``
the response and message-set encoders share. Layouts (kafka-wire-notes §2.1)::

    int8/16/32/64   two's complement, big-endian (every integer is signed)
    string          int16 length N, N bytes of UTF-8; N = -1 is null where nullable
    bytes           int32 length N, N bytes; N = -1 is null where nullable
    array of X      int32 count N, N x X; N = -1 is null where nullable

and the flexible versions' (KIP-482)::

    uvarint         unsigned LEB128, at most 5 bytes (a uint32)
    compact string  uvarint N+1, N bytes of UTF-8; 0 is null where nullable
    compact bytes   uvarint N+1, N bytes; 0 is null where nullable
    compact array   uvarint N+1, N x X; 0 is null where nullable
    tagged fields   uvarint count, then count x (uvarint tag, uvarint size, size bytes)
    uuid            16 bytes

Must not import: Twisted, sockets, files, the core, the store, the other codec modules.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import TypeVar

__all__: list[str] = []  # shared by the codec's modules only

T = TypeVar("T")

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT32 = struct.Struct(">I")


_SMALL = [bytes([i]) for i in range(0x80)]
"""One-byte varints, prebuilt."""


class Malformed(Exception):
    """Bytes that do not parse as what they claim to be (truncated, a negative length
    where none is allowed, bad UTF-8, trailing bytes). A peer error, never a bug here."""


class Reader:
    """A cursor over ``data``; every read checks that its bytes are there."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def _take(self, n: int, what: str) -> bytes:
        pos = self.pos
        if n < 0 or pos + n > len(self.data):
            raise Malformed(f"body ends in the {what} (needs {n} bytes at byte {pos}, "
                            f"{len(self.data) - pos} left)")
        self.pos = pos + n
        return self.data[pos:pos + n]

    def _unpack(self, fmt: struct.Struct, what: str) -> int:
        pos = self.pos
        if pos + fmt.size > len(self.data):
            raise Malformed(f"body ends in the {what} (needs {fmt.size} bytes at byte {pos}, "
                            f"{len(self.data) - pos} left)")
        self.pos = pos + fmt.size
        return fmt.unpack_from(self.data, pos)[0]

    def int8(self, what: str) -> int:
        return self._unpack(INT8, what)

    def int16(self, what: str) -> int:
        return self._unpack(INT16, what)

    def int32(self, what: str) -> int:
        return self._unpack(INT32, what)

    def int64(self, what: str) -> int:
        return self._unpack(INT64, what)

    def nullable_string(self, what: str) -> str | None:
        n = self.int16(f"{what} length")
        if n == -1:
            return None
        if n < 0:
            raise Malformed(f"{what}: string length {n}")
        raw = self._take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise Malformed(f"{what}: not UTF-8 ({e.reason} at byte {e.start})") from None

    def string(self, what: str) -> str:
        s = self.nullable_string(what)
        if s is None:
            raise Malformed(f"{what}: null where a string is required")
        return s

    def nullable_bytes(self, what: str) -> bytes | None:
        n = self.int32(f"{what} length")
        if n == -1:
            return None
        if n < 0:
            raise Malformed(f"{what}: bytes length {n}")
        return self._take(n, what)

    def bytes_(self, what: str) -> bytes:
        b = self.nullable_bytes(what)
        if b is None:
            raise Malformed(f"{what}: null where bytes are required")
        return b

    def nullable_array(self, item: Callable[[Reader], T], what: str) -> tuple[T, ...] | None:
        n = self.int32(f"{what} count")
        if n == -1:
            return None
        if n < 0:
            raise Malformed(f"{what}: array count {n}")
        # Every item takes at least one byte: a count larger than what is left is a lie,
        # refused before looping (a 4-byte body cannot ask for 2**31 iterations).
        if n > self.remaining():
            raise Malformed(f"{what}: {n} items cannot fit in {self.remaining()} bytes")
        return tuple(item(self) for _ in range(n))

    def array(self, item: Callable[[Reader], T], what: str) -> tuple[T, ...]:
        items = self.nullable_array(item, what)
        if items is None:
            raise Malformed(f"{what}: null where an array is required")
        return items

    def uvarint(self, what: str) -> int:
        data = self.data
        pos = self.pos
        result = 0
        shift = 0
        while True:
            if pos >= len(data):
                raise Malformed(f"body ends in the {what} (an unfinished varint at byte {pos})")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 28:
                raise Malformed(f"{what}: a varint longer than 5 bytes")
        self.pos = pos
        return result

    def compact_nullable_string(self, what: str) -> str | None:
        n = self.uvarint(f"{what} length") - 1
        if n == -1:
            return None
        raw = self._take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise Malformed(f"{what}: not UTF-8 ({e.reason} at byte {e.start})") from None

    def compact_string(self, what: str) -> str:
        s = self.compact_nullable_string(what)
        if s is None:
            raise Malformed(f"{what}: null where a string is required")
        return s

    def compact_nullable_bytes(self, what: str) -> bytes | None:
        n = self.uvarint(f"{what} length") - 1
        if n == -1:
            return None
        return self._take(n, what)

    def compact_bytes(self, what: str) -> bytes:
        b = self.compact_nullable_bytes(what)
        if b is None:
            raise Malformed(f"{what}: null where bytes are required")
        return b

    def compact_nullable_array(self, item: Callable[[Reader], T], what: str
                               ) -> tuple[T, ...] | None:
        n = self.uvarint(f"{what} count") - 1
        if n == -1:
            return None
        if n > self.remaining():
            raise Malformed(f"{what}: {n} items cannot fit in {self.remaining()} bytes")
        return tuple(item(self) for _ in range(n))

    def compact_array(self, item: Callable[[Reader], T], what: str) -> tuple[T, ...]:
        items = self.compact_nullable_array(item, what)
        if items is None:
            raise Malformed(f"{what}: null where an array is required")
        return items

    def uuid(self, what: str) -> bytes:
        return self._take(16, what)

    def boolean(self, what: str) -> bool:
        return self._unpack(INT8, what) != 0

    def tagged_fields(self, known: dict[int, Callable[[Reader], object]], what: str
                      ) -> dict[int, object]:
        """The tagged fields section: each known tag read by its reader from exactly its
        ``size`` bytes; unknown tags skipped (KIP-482: a reader ignores what it does not
        know)."""
        n = self.uvarint(f"{what} tagged field count")
        if n > self.remaining():
            raise Malformed(f"{what}: {n} tagged fields cannot fit in {self.remaining()} bytes")
        found: dict[int, object] = {}
        last = -1
        for _ in range(n):
            tag = self.uvarint(f"{what} tag")
            if tag <= last:
                raise Malformed(f"{what}: tag {tag} after tag {last} (tags must ascend)")
            last = tag
            size = self.uvarint(f"{what} tag {tag} size")
            raw = self._take(size, f"{what} tag {tag}")
            read = known.get(tag)
            if read is not None:
                sub = Reader(raw)
                found[tag] = read(sub)
                sub.end(f"{what} tag {tag}")
        return found

    def end(self, what: str) -> None:
        if self.pos != len(self.data):
            raise Malformed(f"{len(self.data) - self.pos} bytes after the end of the {what}")


class Writer:
    """Appends Kafka primitives to a list of byte chunks; ``getvalue`` joins them."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def getvalue(self) -> bytes:
        return b"".join(self.parts)

    def raw(self, b: bytes) -> None:
        self.parts.append(b)

    def int8(self, v: int) -> None:
        self.parts.append(INT8.pack(v))

    def int16(self, v: int) -> None:
        self.parts.append(INT16.pack(v))

    def int32(self, v: int) -> None:
        self.parts.append(INT32.pack(v))

    def int64(self, v: int) -> None:
        self.parts.append(INT64.pack(v))

    def nullable_string(self, s: str | None) -> None:
        if s is None:
            self.parts.append(INT16.pack(-1))
            return
        raw = s.encode("utf-8")
        self.parts.append(INT16.pack(len(raw)))
        self.parts.append(raw)

    string = nullable_string

    def nullable_bytes(self, b: bytes | None) -> None:
        if b is None:
            self.parts.append(INT32.pack(-1))
            return
        self.parts.append(INT32.pack(len(b)))
        self.parts.append(b)

    bytes_ = nullable_bytes

    def array(self, items: Iterable[T], write: Callable[[Writer, T], None]) -> None:
        items = tuple(items)
        self.parts.append(INT32.pack(len(items)))
        for it in items:
            write(self, it)

    def nullable_array(self, items: Iterable[T] | None, write: Callable[[Writer, T], None]) -> None:
        if items is None:
            self.parts.append(INT32.pack(-1))
            return
        self.array(items, write)

    def uvarint(self, v: int) -> None:
        if v < 0x80:
            self.parts.append(_SMALL[v])
            return
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))

    def int32_array(self, items: Iterable[int]) -> None:
        items = tuple(items)
        self.parts.append(INT32.pack(len(items)))
        self.parts.extend(INT32.pack(v) for v in items)
