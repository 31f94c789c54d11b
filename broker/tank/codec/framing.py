"""TANK frames and the frame splitter (spec/tank-notes.md §1).

Owns: the message ids (``MsgId``), ``Frame``, ``encode_frame``, the ping the broker sends
on accept (``PING_FRAME``) and ``FrameSplitter``, which cuts a byte stream fed in chunks of
any size into frames::

    frame => msg_id:u8 payload_size:u32 payload        (payload_size excludes the 5 bytes)

A frame announcing more than ``max_frame_size`` payload bytes gives a ``FrameTooLarge``
object (not an exception): the shell logs it and closes the connection; the splitter
yields nothing more afterwards. Which ids a server accepts is ``requests``' business.

The splitting itself is the kit's (``broker.transport.frames``); this module names TANK's
head.

Must not import: Twisted, sockets, ``broker.core``, the store, ``broker.tank.client``.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from broker.transport.frames import FrameSplitter as _Splitter

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "FRAME_HEADER_SIZE",
    "Frame",
    "FrameSplitter",
    "FrameTooLarge",
    "MsgId",
    "PING_FRAME",
    "encode_frame",
]

FRAME_HEADER_SIZE = 5
# A consume reply may carry 64 MiB per partition; a request is small. 64 MiB + slack.
DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024 + 64 * 1024

_HEADER = struct.Struct("<BI")


class MsgId(enum.IntEnum):
    """``enum class TankAPIMsgType : uint8_t`` (``common.h``); §1's table."""

    PRODUCE = 0x01
    CONSUME = 0x02
    PING = 0x03
    OBSOLETE_REG_REPLICA = 0x04
    PRODUCE_WITH_SEQNUM = 0x05  # its reply goes out as PRODUCE (§2.9)
    DISCOVER_PARTITIONS = 0x06
    CREATE_TOPIC = 0x07
    RELOAD_CONF = 0x08
    CONSUME_PEER = 0x09  # broker to broker only
    STATUS = 0x0A
    DISCOVER_TOPICS = 0x0B
    DISCOVER_TOPOLOGY = 0x0C


@dataclass(frozen=True, slots=True)
class Frame:
    """One whole frame: its id byte (any value; not yet checked) and its payload."""

    msg_id: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class FrameTooLarge:
    """The peer announced a payload over the limit; the connection should be closed."""

    msg_id: int
    payload_size: int
    limit: int

    def __str__(self) -> str:
        return (f"frame 0x{self.msg_id:02x} announces {self.payload_size} payload bytes, "
                f"over the limit of {self.limit}")


def encode_frame(msg_id: int, payload: bytes) -> bytes:
    return _HEADER.pack(msg_id, len(payload)) + payload


PING_FRAME = encode_frame(MsgId.PING, b"")


def _frame(head: tuple[int, int], payload: bytes) -> Frame:
    return Frame(head[0], payload)


def _too_large(head: tuple[int, int], limit: int) -> FrameTooLarge:
    return FrameTooLarge(head[0], head[1], limit)


class FrameSplitter(_Splitter[Frame]):
    """Feed bytes in any chunk size; get back whole frames in order.

    ``feed`` returns a list of ``Frame`` and, at most once, a final ``FrameTooLarge``;
    after that the splitter is broken (``broken``) and ignores further input. The
    splitting is ``broker.transport.frames``' (shared with Iggy and Kafka); this names
    TANK's head.
    """

    __slots__ = ()

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        super().__init__(_HEADER, 1, max_frame_size, frame=_frame,  # type: ignore[arg-type]
                         refuse=_too_large)  # type: ignore[arg-type]

    @property
    def max_frame_size(self) -> int:
        return self.max_body
