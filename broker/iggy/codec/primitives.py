"""The Iggy wire's building blocks: little-endian integers, names, identifiers, consumers,
the request enums, and ``Reader`` (a cursor over a payload that checks every length).

Owns: ``Identifier`` (a u32 or a 1-255 byte name), ``Consumer``, ``ConsumerKind``,
``PollingKind``, ``PartitioningKind``, ``CompressionAlgorithm``, the shared ``struct``
formats and the small writers (``pack_name``, ``pack_text32``...) the request and reply
encoders share. A read past the payload, a bad identifier or a bad flag raises
``IggyError`` with the status that answers it; nothing here raises anything else on bad
input.

Must not import: Twisted, sockets, files, the core, the other codec modules but ``status``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from broker.iggy.codec.status import IggyError, Status

# The codec package's public names; ``Reader``, the ``struct`` formats and the ``pack_*``
# writers are shared by its modules only.
__all__ = [
    "Identifier",
    "Consumer",
    "ConsumerKind",
    "PollingKind",
    "PartitioningKind",
    "CompressionAlgorithm",
    "MAX_NAME_BYTES",
]

U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
MAX_NAME_BYTES = 255


class ConsumerKind(IntEnum):
    CONSUMER = 1
    CONSUMER_GROUP = 2


class PollingKind(IntEnum):
    OFFSET = 1
    TIMESTAMP = 2
    FIRST = 3
    LAST = 4
    NEXT = 5


class PartitioningKind(IntEnum):
    BALANCED = 1
    PARTITION_ID = 2
    MESSAGES_KEY = 3


class CompressionAlgorithm(IntEnum):
    NONE = 1
    GZIP = 2
    LZ4 = 3
    ZSTD = 4


class Reader:
    """A cursor over a payload; every read checks that the bytes are there."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _need(self, n: int, what: str) -> int:
        pos = self.pos
        if pos + n > len(self.data):
            raise IggyError(Status.INVALID_FORMAT,
                            f"payload ends in the {what} (needs {n} bytes at byte {pos}, "
                            f"{len(self.data) - pos} left)")
        self.pos = pos + n
        return pos

    def u8(self, what: str) -> int:
        return self.data[self._need(1, what)]

    def u32(self, what: str) -> int:
        return U32.unpack_from(self.data, self._need(4, what))[0]  # type: ignore[no-any-return]

    def u64(self, what: str) -> int:
        return U64.unpack_from(self.data, self._need(8, what))[0]  # type: ignore[no-any-return]

    def raw(self, n: int, what: str) -> bytes:
        pos = self._need(n, what)
        return bytes(self.data[pos:pos + n])

    def boolean(self, what: str) -> bool:
        value = self.u8(what)
        if value > 1:
            raise IggyError(Status.INVALID_BOOLEAN_VALUE, f"{what} is {value}; expected 0 or 1")
        return value == 1

    def text(self, n: int, what: str, status: Status) -> str:
        raw = self.raw(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IggyError(status, f"{what} is not valid UTF-8") from exc

    def name(self, what: str, status: Status) -> str:
        """``u8 length`` (1..255) then that many UTF-8 bytes."""
        length = self.u8(f"{what} length")
        if length == 0:
            raise IggyError(status, f"{what} is empty")
        return self.text(length, what, status)

    def optional_text32(self, what: str) -> str | None:
        """``u32 length`` (0 = absent) then UTF-8 bytes."""
        length = self.u32(f"{what} length")
        if length == 0:
            return None
        if length > len(self.data) - self.pos:
            raise IggyError(Status.INVALID_FORMAT, f"{what} length {length} runs past the payload")
        return self.text(length, what, Status.INVALID_FORMAT)

    def identifier(self, what: str) -> Identifier:
        kind = self.u8(f"{what} kind")
        length = self.u8(f"{what} length")
        if kind == 1:
            if length != 4:
                raise IggyError(Status.INVALID_IDENTIFIER,
                                f"numeric {what} has length {length}; expected 4")
            return Identifier(U32.unpack(self.raw(4, what))[0])
        if kind == 2:
            if length == 0:
                raise IggyError(Status.INVALID_IDENTIFIER, f"{what} name is empty")
            return Identifier(self.text(length, what, Status.INVALID_IDENTIFIER))
        raise IggyError(Status.INVALID_IDENTIFIER, f"{what} kind {kind}; expected 1 or 2")

    def optional_partition(self) -> int | None:
        flag = self.u8("partition flag")
        value = self.u32("partition id")
        if flag > 1:
            raise IggyError(Status.INVALID_FORMAT, f"partition flag {flag}; expected 0 or 1")
        return value if flag == 1 else None

    def consumer(self) -> Consumer:
        kind = self.u8("consumer kind")
        if kind not in (1, 2):
            raise IggyError(Status.INVALID_FORMAT, f"consumer kind {kind}; expected 1 or 2")
        return Consumer(ConsumerKind(kind), self.identifier("consumer id"))

    def end(self) -> None:
        left = len(self.data) - self.pos
        if left:
            raise IggyError(Status.INVALID_FORMAT,
                            f"{left} unexpected byte(s) after the payload at byte {self.pos}")


@dataclass(frozen=True, slots=True)
class Identifier:
    """A stream, topic, user, consumer group or consumer id: a u32 or a 1-255 byte name."""

    value: int | str

    @property
    def numeric(self) -> bool:
        return isinstance(self.value, int)

    def encode(self) -> bytes:
        value = self.value
        if isinstance(value, int):
            return b"\x01\x04" + U32.pack(value)
        raw = value.encode("utf-8")
        if not 1 <= len(raw) <= MAX_NAME_BYTES:
            raise ValueError(f"identifier {value!r} must be 1-255 bytes")
        return bytes((2, len(raw))) + raw

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, slots=True)
class Consumer:
    """Who polls: a consumer (its own offsets) or a consumer group."""

    kind: ConsumerKind
    id: Identifier

    def encode(self) -> bytes:
        return bytes((int(self.kind),)) + self.id.encode()


def pack_name(value: str) -> bytes:
    """``u8 length`` (1..255) then the UTF-8 bytes; ``ValueError`` otherwise."""
    raw = value.encode("utf-8")
    if not 1 <= len(raw) <= MAX_NAME_BYTES:
        raise ValueError(f"name {value!r} must be 1-255 bytes")
    return bytes((len(raw),)) + raw


def pack_optional_partition(partition_id: int | None) -> bytes:
    """``u8 flag, u32 partition id`` (flag 0 and id 0: none)."""
    return b"\x00\x00\x00\x00\x00" if partition_id is None else b"\x01" + U32.pack(partition_id)


def pack_text32(value: str | None) -> bytes:
    """``u32 length`` (0: absent) then the UTF-8 bytes."""
    if value is None:
        return U32.pack(0)
    raw = value.encode("utf-8")
    return U32.pack(len(raw)) + raw


def pack_short_name(value: str) -> bytes:
    """A reply's name: ``u8 length`` then at most 255 UTF-8 bytes (cut, never refused)."""
    raw = value.encode("utf-8")[:MAX_NAME_BYTES]
    return bytes((len(raw),)) + raw


def pack_str32(value: str) -> bytes:
    """A reply's string: ``u32 length`` then the UTF-8 bytes."""
    raw = value.encode("utf-8")
    return U32.pack(len(raw)) + raw
