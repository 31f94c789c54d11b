"""The SendMessages message area: checking it, splitting it, and building it for clients.

Owns: ``INDEX_SIZE`` (the 16-byte index entry), ``check_messages`` and ``split_messages``
(the message area -> end positions for ``BrokerCore.produce`` (framed), or the payload and
header lists), ``encode_messages`` (payloads -> the area a client
sends) and ``message_sizes`` (the area -> each message's size, for the index). Message
bytes (the 64-byte header) use the constants of ``data.format``: stored records are Iggy
messages. A malformed area raises ``IggyError`` with the status that answers it.

Must not import: Twisted, sockets, files, the core, the other codec modules but ``status``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import repeat
from operator import add, itemgetter

import numpy as np

from broker.iggy.codec.status import IggyError, Status
from data.format import (
    HEADER,
    HEADER_SIZE,
    USER_HEADERS_LENGTH_OFFSET,
    decode_user_headers,
    header_rows,
)

__all__ = ["INDEX_SIZE", "check_messages", "split_messages", "encode_messages"]

INDEX = struct.Struct("<IIQ")
INDEX_SIZE = INDEX.size
"""SendMessages index entry: ``0 u32, cumulative end position u32, 0 u64``."""


def encode_messages(payloads: Sequence[bytes], user_headers: Sequence[bytes] | None = None,
                    ids: Sequence[int] | None = None,
                    origin_timestamps: Sequence[int] | None = None) -> bytes:
    """Messages as a client sends them: the 64-byte header with checksum, offset and
    timestamp 0, then the payload, then the user headers."""
    parts = []
    for i, payload in enumerate(payloads):
        uh = user_headers[i] if user_headers is not None else b""
        ident = ids[i] if ids is not None else 0
        origin = origin_timestamps[i] if origin_timestamps is not None else 0
        parts.append(HEADER.pack(0, ident & 0xFFFFFFFFFFFFFFFF, ident >> 64, 0, 0, origin,
                                 len(uh), len(payload), 0))
        parts.append(payload)
        parts.append(uh)
    return b"".join(parts)


def message_sizes(messages: bytes) -> list[int]:
    """Each message's size (header, payload, user headers), walked from the headers."""
    sizes = []
    pos = 0
    while pos < len(messages):
        uhl, pl = struct.unpack_from("<II", messages, pos + USER_HEADERS_LENGTH_OFFSET)
        sizes.append(HEADER_SIZE + pl + uhl)
        pos += HEADER_SIZE + pl + uhl
    return sizes


def _walk_ends(messages: bytes) -> tuple[int, ...]:
    """Message end positions found by walking the headers (when there is no index)."""
    ends = []
    pos = 0
    total = len(messages)
    lengths = struct.Struct("<II")
    while pos < total:
        if pos + HEADER_SIZE > total:
            raise IggyError(Status.TOO_SMALL_MESSAGE,
                            f"message {len(ends)} at byte {pos}: {total - pos} bytes, less than "
                            f"a header")
        uhl, pl = lengths.unpack_from(messages, pos + USER_HEADERS_LENGTH_OFFSET)
        pos += HEADER_SIZE + pl + uhl
        ends.append(pos)
    return tuple(ends)


def check_messages(messages: bytes, count: int, max_payload: int,
                   max_user_headers: int = 100 * 1024, ends: Sequence[int] = (),
                   ) -> tuple[int, ...]:
    """Check the SendMessages message area exactly as ``split_messages`` does, without
    splitting it; return the end positions of the messages (for ``BrokerCore.produce``, which
    stamps the area in place). Raises the same ``IggyError`` for the same input.

    The header fields are read as columns (``data.format.header_rows``), so a batch costs
    a few array operations, not Python work per message (user headers, when a message has
    any, are still decoded one by one)."""
    if not ends:
        ends = _walk_ends(messages)
    n = len(ends)
    total = len(messages)
    if not n or ends[-1] != total:
        raise IggyError(Status.INVALID_MESSAGES_SIZE,
                        f"the messages end at {ends[-1] if n else 0}; the area has "
                        f"{total} bytes")
    if n != count:
        raise IggyError(Status.INVALID_MESSAGES_COUNT,
                        f"messages_count says {count}; the area holds {n}")
    end_at = np.fromiter(ends, dtype=np.int64, count=n)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = end_at[:-1]
    if int(starts.max()) + HEADER_SIZE > total:
        raise IggyError(Status.TOO_SMALL_MESSAGE, "a message header is cut short")
    fields = np.ascontiguousarray(
        header_rows(np.frombuffer(messages, dtype=np.uint8))[starts, USER_HEADERS_LENGTH_OFFSET:])
    words = fields.view("<u4")  # user_headers_length, payload_length, reserved (2 words)
    uhls = words[:, 0].astype(np.int64)
    pls = words[:, 1].astype(np.int64)
    stops = starts + HEADER_SIZE + pls
    if not np.array_equal(stops + uhls, end_at):
        raise IggyError(Status.INVALID_MESSAGES_SIZE,
                        "a message's payload and header lengths disagree with the index")
    if words[:, 2:].any():
        raise IggyError(Status.INVALID_RESERVED_FIELD, "a message's reserved field is not 0")
    if int(pls.min()) == 0:
        raise IggyError(Status.EMPTY_MESSAGE_PAYLOAD,
                        f"message {int(np.argmin(pls))} has no payload")
    if int(pls.max()) > max_payload:
        raise IggyError(Status.TOO_BIG_MESSAGE_PAYLOAD,
                        f"a {int(pls.max())}-byte payload; at most {max_payload}")
    if uhls.any():
        if int(uhls.max()) > max_user_headers:
            raise IggyError(Status.TOO_BIG_USER_HEADERS,
                            f"{int(uhls.max())} bytes of user headers; at most {max_user_headers}")
        for index in np.nonzero(uhls)[0].tolist():
            try:
                decode_user_headers(messages[int(stops[index]):ends[index]])
            except ValueError as exc:
                raise IggyError(Status.CANNOT_READ_HEADERS_PAYLOAD,
                                f"message {index}: {exc}") from exc
    return tuple(ends)


def split_messages(messages: bytes, count: int, max_payload: int,
                   max_user_headers: int = 100 * 1024, ends: Sequence[int] = (),
                   ) -> tuple[list[bytes], list[bytes] | None, list[int], list[int]]:
    """Split the SendMessages message area: ``(payloads, user_headers, ids, origin
    timestamps)`` (``user_headers`` is None when no message has any).

    ``ends`` are the index table's end positions (walked from the headers when empty).
    Each message must start where the previous one ended with a complete 64-byte header
    whose lengths end it exactly at its index entry, ``reserved`` 0, a payload of
    1..``max_payload`` bytes and well-formed user headers of at most ``max_user_headers``
    bytes; there must be ``count`` of them. Checksum, offset and timestamp are the server's
    to stamp and are ignored. The checks are ``check_messages``'; the split is C-level
    ``map`` over the batch: no Python bytecode runs per message unless it has user headers.
    """
    ends = check_messages(messages, count, max_payload, max_user_headers, ends)
    n = len(ends)
    starts = (0, *ends[:-1])
    heads = list(map(HEADER.unpack_from, repeat(messages, n), starts))
    bodies = list(map(add, starts, repeat(HEADER_SIZE, n)))
    stops = list(map(add, bodies, map(itemgetter(7), heads)))
    cut = messages.__getitem__
    payloads = list(map(cut, map(slice, bodies, stops)))
    headers = list(map(cut, map(slice, stops, ends))) if any(map(itemgetter(6), heads)) else None
    los = list(map(itemgetter(1), heads))
    if any(map(itemgetter(2), heads)):
        ids = [lo | hi << 64 for lo, hi in zip(los, map(itemgetter(2), heads), strict=True)]
    else:
        ids = los
    return payloads, headers, ids, list(map(itemgetter(5), heads))
