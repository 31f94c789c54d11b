"""Iggy's ``Permissions`` blob on the wire: the optional permissions field of CreateUser and
UpdatePermissions (``read_permissions``/``permissions_field``) and ``decode_permissions``,
which answers a bad blob as ``InvalidFormat``.

The values and the blob's bytes are the access layer's (``access.iggy_permissions``,
re-exported here): the user store keeps the same blob (hex) in its file and reads it
without importing this transport.

Must not import: Twisted, sockets, files, the core, the other codec modules but
``primitives`` and ``status``.
"""

from __future__ import annotations

from access.errors import InvalidPermissions
from access.iggy_permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from broker.iggy.codec.primitives import U32, Reader
from broker.iggy.codec.status import IggyError, Status

__all__ = [
    "GlobalPermissions",
    "StreamPermissions",
    "TopicPermissions",
    "Permissions",
    "decode_permissions",
]


def decode_permissions(blob: bytes) -> Permissions:
    """The blob as a value; ``IggyError(INVALID_FORMAT)`` when it is truncated or has bytes
    left over."""
    try:
        return Permissions.decode(blob)
    except InvalidPermissions as exc:
        raise IggyError(Status.INVALID_FORMAT, exc.message) from None


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
    return decode_permissions(r.raw(length, "permissions"))


def permissions_field(permissions: Permissions | None) -> bytes:
    """The field ``read_permissions`` reads: ``u8 has_permissions, u32 length``, the blob."""
    if permissions is None:
        return b"\x00" + U32.pack(0)
    blob = permissions.encode()
    return b"\x01" + U32.pack(len(blob)) + blob
