"""TANK's little-endian primitives and the one codec error (spec/tank-notes.md §1).

Owns: ``CodecError`` (every refusal of malformed input), the bounds-checked ``Reader``
(u8/u16/u32/u64, ``str8``, the u32 varint, raw bytes) and the matching pack helpers.

Nothing here raises anything but ``CodecError`` on bad input: a read past the end, a varint
longer than 5 bytes or above 2**32 - 1.

Must not import: Twisted, sockets, ``broker.core``, the store, ``broker.tank.client``.
"""

from __future__ import annotations

import struct

__all__ = [
    "CodecError",
    "Reader",
    "U16_MAX",
    "U32_MAX",
    "U64_MAX",
    "pack_str8",
    "pack_u8",
    "pack_u16",
    "pack_u32",
    "pack_u64",
    "pack_varint",
]

U16_MAX = 0xFFFF
U32_MAX = 0xFFFF_FFFF
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class CodecError(Exception):
    """Peer input that is not TANK: the broker answers it by closing the connection (§1).

    ``reason`` says what was wrong in words a log reader can act on.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def pack_u8(value: int) -> bytes:
    if not 0 <= value <= 0xFF:
        raise ValueError(f"u8 out of range: {value}")
    return bytes((value,))


def pack_u16(value: int) -> bytes:
    return _U16.pack(value)


def pack_u32(value: int) -> bytes:
    return _U32.pack(value)


def pack_u64(value: int) -> bytes:
    return _U64.pack(value)


def pack_str8(value: bytes) -> bytes:
    """``len:u8`` then the bytes; a name over 255 bytes is our bug, not the peer's."""
    if len(value) > 0xFF:
        raise ValueError(f"str8 longer than 255 bytes: {len(value)}")
    return bytes((len(value),)) + value


def pack_varint(value: int) -> bytes:
    """Unsigned LEB128 of a u32 (``Switch/compress.h`` ``PackUInt32``): 1 to 5 bytes."""
    if not 0 <= value <= U32_MAX:
        raise ValueError(f"varint out of u32 range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class Reader:
    """A cursor over one payload; every read checks the bounds and raises ``CodecError``."""

    __slots__ = ("_data", "_pos", "_end")

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self._data = data
        self._pos = pos
        self._end = len(data) if end is None else end

    @property
    def pos(self) -> int:
        return self._pos

    def remaining(self) -> int:
        return self._end - self._pos

    def at_end(self) -> bool:
        return self._pos >= self._end

    def expect_end(self, what: str) -> None:
        if self._pos != self._end:
            raise CodecError(f"{self._end - self._pos} trailing bytes after {what}")

    def _take(self, n: int, what: str) -> int:
        start = self._pos
        if n > self._end - start:
            raise CodecError(f"truncated {what}: need {n} bytes, {self._end - start} left")
        self._pos = start + n
        return start

    def u8(self, what: str = "u8") -> int:
        start = self._take(1, what)
        return self._data[start]

    def u16(self, what: str = "u16") -> int:
        return _U16.unpack_from(self._data, self._take(2, what))[0]

    def u32(self, what: str = "u32") -> int:
        return _U32.unpack_from(self._data, self._take(4, what))[0]

    def u64(self, what: str = "u64") -> int:
        return _U64.unpack_from(self._data, self._take(8, what))[0]

    def raw(self, n: int, what: str = "bytes") -> bytes:
        start = self._take(n, what)
        return bytes(self._data[start:start + n])

    def str8(self, what: str = "str8") -> bytes:
        return self.raw(self.u8(what), what)

    def varint(self, what: str = "varint") -> int:
        """A u32 LEB128: at most 5 bytes, and the value must fit 32 bits."""
        value = 0
        for shift in (0, 7, 14, 21, 28):
            byte = self.u8(what)
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if value > U32_MAX:
                    raise CodecError(f"{what}: varint above 2**32 - 1")
                return value
        raise CodecError(f"{what}: varint longer than 5 bytes")
