"""Iggy's per-user permissions as values, and the blob that stores them.

Owns: ``GlobalPermissions``, ``StreamPermissions``, ``TopicPermissions`` and
``Permissions`` with ``encode``/``decode`` of Iggy's ``Permissions`` blob. The blob is what
CreateUser and UpdatePermissions carry and also the form the Iggy user store keeps (hex) in
its file, so both the transport (``broker.iggy.codec.permissions`` frames it) and the user
store (``broker.services.iggy_users``) use these values without either importing the other.
What a user may do with them is the Iggy transport's ACL mapping (``broker.iggy.access``).

Bytes: ten ``u8`` global flags, then ``u8 has_streams``; each stream is ``u32 id`` (little
endian), six flags, ``u8 has_topics``, its topics (``u32 id``, four flags, ``u8 more``) and
``u8 more``. Stream and topic maps are encoded in id order (Iggy's own order is a hash
map's). A blob that ends early or has bytes left over raises ``InvalidPermissions``.

Must not import: ``broker``, Twisted, files.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, fields

from access.errors import InvalidPermissions

__all__ = [
    "GlobalPermissions",
    "StreamPermissions",
    "TopicPermissions",
    "Permissions",
]

_U32 = struct.Struct("<I")


@dataclass(frozen=True, slots=True)
class GlobalPermissions:
    manage_servers: bool = False
    read_servers: bool = False
    manage_users: bool = False
    read_users: bool = False
    manage_streams: bool = False
    read_streams: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False


_GLOBAL_FIELDS = tuple(f.name for f in fields(GlobalPermissions))


@dataclass(frozen=True, slots=True)
class TopicPermissions:
    manage_topic: bool = False
    read_topic: bool = False
    poll_messages: bool = False
    send_messages: bool = False


@dataclass(frozen=True, slots=True)
class StreamPermissions:
    manage_stream: bool = False
    read_stream: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False
    topics: tuple[tuple[int, TopicPermissions], ...] | None = None

    def topic(self, topic_id: int) -> TopicPermissions | None:
        for tid, perms in self.topics or ():
            if tid == topic_id:
                return perms
        return None


class _Blob:
    """A cursor over the blob; running past its end is ``InvalidPermissions``."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def flag(self, what: str) -> bool:
        if self.pos >= len(self.data):
            raise InvalidPermissions(f"permissions blob ends before the {what}")
        self.pos += 1
        return self.data[self.pos - 1] == 1

    def u32(self, what: str) -> int:
        if self.pos + 4 > len(self.data):
            raise InvalidPermissions(f"permissions blob ends before the {what}")
        (value,) = _U32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def end(self) -> None:
        if self.pos != len(self.data):
            raise InvalidPermissions(
                f"{len(self.data) - self.pos} bytes left over after the permissions")


@dataclass(frozen=True, slots=True)
class Permissions:
    """A user's permissions (Iggy's ``Permissions`` blob, module docstring)."""

    global_: GlobalPermissions = field(default_factory=GlobalPermissions)
    streams: tuple[tuple[int, StreamPermissions], ...] | None = None

    def stream(self, stream_id: int) -> StreamPermissions | None:
        for sid, perms in self.streams or ():
            if sid == stream_id:
                return perms
        return None

    def encode(self) -> bytes:
        g = self.global_
        out = bytearray(bytes(int(getattr(g, f)) for f in _GLOBAL_FIELDS))
        streams = sorted(self.streams or (), key=lambda item: item[0])
        if not streams:
            out.append(0)
            return bytes(out)
        out.append(1)
        for index, (sid, sp) in enumerate(streams):
            out += _U32.pack(sid)
            out += bytes((sp.manage_stream, sp.read_stream, sp.manage_topics, sp.read_topics,
                          sp.poll_messages, sp.send_messages))
            topics = sorted(sp.topics or (), key=lambda item: item[0])
            if topics:
                out.append(1)
                for tindex, (tid, tp) in enumerate(topics):
                    out += _U32.pack(tid)
                    out += bytes((tp.manage_topic, tp.read_topic, tp.poll_messages,
                                  tp.send_messages))
                    out.append(1 if tindex < len(topics) - 1 else 0)
            else:
                out.append(0)
            out.append(1 if index < len(streams) - 1 else 0)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes) -> Permissions:
        """Parse the blob; ``InvalidPermissions`` when it is truncated or has bytes left
        over."""
        r = _Blob(data)
        glob = GlobalPermissions(*(r.flag(f"permission {f}") for f in _GLOBAL_FIELDS))
        streams: list[tuple[int, StreamPermissions]] | None = None
        if r.flag("streams flag"):
            streams = []
            while True:
                sid = r.u32("stream permission id")
                flags = [r.flag("stream permission flag") for _ in range(6)]
                topics: list[tuple[int, TopicPermissions]] | None = None
                if r.flag("topics flag"):
                    topics = []
                    while True:
                        tid = r.u32("topic permission id")
                        topics.append((tid, TopicPermissions(
                            *(r.flag("topic permission flag") for _ in range(4)))))
                        if not r.flag("more topics flag"):
                            break
                streams.append((sid, StreamPermissions(
                    *flags, topics=tuple(topics) if topics is not None else None)))
                if not r.flag("more streams flag"):
                    break
        r.end()
        return cls(glob, tuple(streams) if streams is not None else None)

    @classmethod
    def root(cls) -> Permissions:
        return cls(GlobalPermissions(*([True] * 10)))
