"""Iggy's ``Permissions`` blob: a user's global, per-stream and per-topic rights as values,
and their bytes.

Owns: ``GlobalPermissions``, ``StreamPermissions``, ``TopicPermissions``, ``Permissions``
(with ``encode``/``decode`` of the blob), and the optional permissions field of CreateUser
and UpdatePermissions (``read_permissions``/``permissions_field``). The user store keeps the
same blob (hex) in its file, so the bytes here are also the stored form. What a user may do
with them is ``broker.services.iggy_users.Access``.

Must not import: Twisted, sockets, files, the core, the other codec modules but
``primitives`` and ``status``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from broker.iggy.codec.primitives import U32, Reader
from broker.iggy.codec.status import IggyError, Status

__all__ = [
    "GlobalPermissions",
    "StreamPermissions",
    "TopicPermissions",
    "Permissions",
]


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


@dataclass(frozen=True, slots=True)
class Permissions:
    """A user's permissions (Iggy's ``Permissions`` blob).

    Bytes: ten ``u8`` global flags, then ``u8 has_streams``; each stream is ``u32 id``, six
    flags, ``u8 has_topics``, its topics (``u32 id``, four flags, ``u8 more``) and
    ``u8 more``. Stream and topic maps are encoded in id order (Iggy's own order is a
    hash map's).
    """

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
            out += U32.pack(sid)
            out += bytes((sp.manage_stream, sp.read_stream, sp.manage_topics, sp.read_topics,
                          sp.poll_messages, sp.send_messages))
            topics = sorted(sp.topics or (), key=lambda item: item[0])
            if topics:
                out.append(1)
                for tindex, (tid, tp) in enumerate(topics):
                    out += U32.pack(tid)
                    out += bytes((tp.manage_topic, tp.read_topic, tp.poll_messages,
                                  tp.send_messages))
                    out.append(1 if tindex < len(topics) - 1 else 0)
            else:
                out.append(0)
            out.append(1 if index < len(streams) - 1 else 0)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes) -> Permissions:
        """Parse the blob; ``IggyError(INVALID_FORMAT)`` when it is truncated or has bytes
        left over."""
        r = Reader(data)

        def flag(what: str) -> bool:
            return r.u8(what) == 1

        glob = GlobalPermissions(*(flag(f"permission {f}") for f in _GLOBAL_FIELDS))
        streams: list[tuple[int, StreamPermissions]] | None = None
        if flag("streams flag"):
            streams = []
            while True:
                sid = r.u32("stream permission id")
                flags = [flag("stream permission flag") for _ in range(6)]
                topics: list[tuple[int, TopicPermissions]] | None = None
                if flag("topics flag"):
                    topics = []
                    while True:
                        tid = r.u32("topic permission id")
                        topics.append((tid, TopicPermissions(
                            *(flag("topic permission flag") for _ in range(4)))))
                        if not flag("more topics flag"):
                            break
                streams.append((sid, StreamPermissions(
                    *flags, topics=tuple(topics) if topics is not None else None)))
                if not flag("more streams flag"):
                    break
        r.end()
        return cls(glob, tuple(streams) if streams is not None else None)

    @classmethod
    def root(cls) -> Permissions:
        return cls(GlobalPermissions(*([True] * 10)))


def read_permissions(r: Reader) -> Permissions | None:
    """``u8 has_permissions, u32 length`` (always there), then ``length`` bytes if present."""
    present = r.boolean("has_permissions")
    length = r.u32("permissions length")
    if not present:
        if length:
            raise IggyError(Status.INVALID_FORMAT, "permissions length without permissions")
        return None
    if length == 0:
        raise IggyError(Status.INVALID_FORMAT, "permissions flagged but empty")
    return Permissions.decode(r.raw(length, "permissions"))


def permissions_field(permissions: Permissions | None) -> bytes:
    """The field ``read_permissions`` reads: ``u8 has_permissions, u32 length``, the blob."""
    if permissions is None:
        return b"\x00" + U32.pack(0)
    blob = permissions.encode()
    return b"\x01" + U32.pack(len(blob)) + blob
