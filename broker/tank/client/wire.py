"""The TANK client's own byte helpers: little-endian packing, varints, a decode cursor.

Written separately from ``broker.tank.codec`` on purpose (spec/tank-notes.md §8): the
tests check each side against the other and against the notes' golden bytes, so a
misreading shared by both would be invisible. Owns: ``Out`` (a byte builder),
``In`` (a cursor that raises ``TankDecodeError``), ``varint_bytes``, ``split_frames``.

Must not import: Twisted, ``broker.core``, the store, ``broker.tank.codec``.
"""

from __future__ import annotations

import struct

__all__ = ["In", "Out", "TankDecodeError", "split_frames", "varint_bytes"]


class TankDecodeError(ValueError):
    """A reply (or bundle) this client cannot decode."""


def varint_bytes(n: int) -> bytes:
    """``PackUInt32``: 7 bits at a time, low bits first, top bit set while more follow."""
    if n < 0 or n >= 1 << 32:
        raise ValueError(f"varint {n} is not a u32")
    out = []
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


class Out:
    """Append-only builder; ``frame(msg_id)`` prepends ``msg_id:u8 payload_size:u32``."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def put(self, fmt: str, *values: int) -> Out:
        self.buf += struct.pack("<" + fmt, *values)
        return self

    def s8(self, value: bytes | str) -> Out:
        if isinstance(value, str):
            value = value.encode()
        if len(value) > 255:
            raise ValueError("str8 value longer than 255 bytes")
        self.buf.append(len(value))
        self.buf += value
        return self

    def var(self, n: int) -> Out:
        self.buf += varint_bytes(n)
        return self

    def raw(self, data: bytes) -> Out:
        self.buf += data
        return self

    def frame(self, msg_id: int) -> bytes:
        return struct.pack("<BI", msg_id, len(self.buf)) + bytes(self.buf)


class In:
    """Cursor over ``data[pos:end]``."""

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def left(self) -> int:
        return self.end - self.pos

    def get(self, fmt: str) -> int:
        size = struct.calcsize("<" + fmt)
        if self.pos + size > self.end:
            raise TankDecodeError(f"short read: {fmt} at {self.pos}")
        (value,) = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += size
        return value

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise TankDecodeError(f"short read: {n} bytes at {self.pos}")
        chunk = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return chunk

    def s8(self) -> bytes:
        return self.take(self.get("B"))

    def var(self) -> int:
        """``UnpackUInt32``; at most 5 bytes."""
        result = shift = 0
        for _ in range(5):
            if self.pos >= self.end:
                raise TankDecodeError("short read: varint")
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                if result >> 32:
                    raise TankDecodeError("varint over 32 bits")
                return result
            shift += 7
        raise TankDecodeError("varint over 5 bytes")


def split_frames(buf: bytearray) -> list[tuple[int, bytes]]:
    """Remove and return every whole ``(msg_id, payload)`` at the front of ``buf``."""
    frames = []
    while len(buf) >= 5:
        msg_id, size = struct.unpack_from("<BI", buf, 0)
        if len(buf) < 5 + size:
            break
        frames.append((msg_id, bytes(buf[5:5 + size])))
        del buf[:5 + size]
    return frames
