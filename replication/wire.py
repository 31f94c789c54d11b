"""The client side of the cluster commands: request lines a replica sends, replies it reads.

Owns: formatting ``REPLICA_PULL`` and ``REPLICA_EPOCH`` request lines, splitting any V1
reply line into OK/ERR, payload ``key=value`` fields (lists ``[a b c]`` included), and
turning the two cluster replies into typed values (``PullReply``, ``EpochReply``). An
error reply keeps its code and message; the fetch shell (``replication.follower``) turns
them into the exception class of the code (``broker.v1.errors.for_code``). The server side (parsing
requests, formatting replies) is ``broker.v1.codec``; the tests check both against each other.

Must not import: Twisted, sockets, the store, anything of ``broker``. Pure bytes in, values out.
"""

from __future__ import annotations

import binascii
import re
from dataclasses import dataclass

from replication.epochs import EpochEntry
from replication.roles import Role

__all__ = [
    "ProtocolViolation",
    "Reply",
    "PullReply",
    "EpochReply",
    "parse_reply",
    "payload_fields",
    "pull_request",
    "epoch_request",
]

_FIELD_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\[[^\]]*\]|[^ ]*)")


class ProtocolViolation(ValueError):
    """A reply line that is not what the V1 protocol promises (a bug or a stranger on the
    port); the connection it came from cannot be trusted any more."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One reply line: ``V1|<cid>|OK[|<payload>]`` or ``V1|<cid>|ERR|<code>|<message>``."""

    cid: str
    ok: bool
    payload: bytes = b""
    code: str = ""
    message: str = ""


def parse_reply(line: bytes) -> Reply:
    """Split a reply line (without its ``\\n``). ``ProtocolViolation`` for anything else."""
    if line.endswith(b"\r"):
        line = line[:-1]
    parts = line.split(b"|", 3)
    if len(parts) < 3 or parts[0] != b"V1":
        raise ProtocolViolation(f"not a V1 reply: {line[:80]!r}")
    cid = parts[1].decode(errors="replace")
    status = parts[2]
    if status == b"OK":
        return Reply(cid, True, parts[3] if len(parts) == 4 else b"")
    if status == b"ERR" and len(parts) == 4:
        code, _, message = parts[3].partition(b"|")
        return Reply(cid, False, b"", code.decode(errors="replace"),
                     message.decode(errors="replace"))
    raise ProtocolViolation(f"not a V1 reply: {line[:80]!r}")


def payload_fields(payload: bytes | str) -> dict[str, str]:
    """``key=value`` pairs of a payload; a list value keeps its brackets (``[0 1 2]``)."""
    text = payload.decode() if isinstance(payload, bytes) else payload
    return {m.group(1): m.group(2) for m in _FIELD_RE.finditer(text)}


def _int(fields: dict[str, str], key: str) -> int:
    try:
        return int(fields[key])
    except (KeyError, ValueError):
        raise ProtocolViolation(f"reply field {key}= missing or not a number: "
                                f"{fields.get(key)!r}") from None


def _int_list(fields: dict[str, str], key: str) -> tuple[int, ...]:
    raw = fields.get(key, "")
    if not (raw.startswith("[") and raw.endswith("]")):
        raise ProtocolViolation(f"reply field {key}= is not a list: {raw!r}")
    try:
        return tuple(int(item) for item in raw[1:-1].split())
    except ValueError:
        raise ProtocolViolation(f"reply field {key}= is not a list of numbers: {raw!r}") from None


def _epoch_entries(fields: dict[str, str]) -> tuple[EpochEntry, ...]:
    raw = fields.get("epochs", "")
    if not (raw.startswith("[") and raw.endswith("]")):
        raise ProtocolViolation(f"reply field epochs= is not a list: {raw!r}")
    entries: list[EpochEntry] = []
    for item in raw[1:-1].split():
        epoch, colon, start = item.partition(":")
        if not (colon and epoch.isdigit() and start.isdigit()):
            raise ProtocolViolation(f"bad epoch entry {item!r}")
        entries.append(EpochEntry(int(epoch), int(start)))
    return tuple(entries)


def _bool(fields: dict[str, str], key: str) -> bool:
    raw = fields.get(key)
    if raw not in ("true", "false"):
        raise ProtocolViolation(f"reply field {key}= is not true or false: {raw!r}")
    return raw == "true"


@dataclass(frozen=True, slots=True)
class PullReply:
    """A leader's answer to REPLICA_PULL."""

    epoch: int
    hw: int
    leo: int
    start: int
    isr: tuple[int, ...]
    epochs: tuple[EpochEntry, ...]
    count: int
    data: bytes

    @classmethod
    def from_payload(cls, payload: bytes) -> PullReply:
        head, sep, data = payload.partition(b" data=")
        if not sep:
            raise ProtocolViolation("REPLICA_PULL reply without data=")
        fields = payload_fields(head)
        try:
            raw = binascii.a2b_base64(data, strict_mode=True) if data else b""
        except binascii.Error as exc:
            raise ProtocolViolation(f"REPLICA_PULL data= is not base64: {exc}") from None
        count = _int(fields, "count")
        if (count == 0) != (not raw):
            raise ProtocolViolation(f"REPLICA_PULL count={count} with {len(raw)} data bytes")
        return cls(_int(fields, "epoch"), _int(fields, "hw"), _int(fields, "leo"),
                   _int(fields, "start"), _int_list(fields, "isr"), _epoch_entries(fields),
                   count, raw)


@dataclass(frozen=True, slots=True)
class EpochReply:
    """A replica's answer to REPLICA_EPOCH: its role and epoch, and where the asked epoch
    ends in its log. The one type for both sides: the replica asked builds it
    (``ReplicationService.epoch_query``) and the asker parses it (``from_payload``)."""

    role: Role
    epoch: int
    confirmed: bool
    end_epoch: int
    end_offset: int
    leo: int
    hw: int

    @property
    def leader(self) -> bool:
        """The replica answering leads the partition (confirmed or not)."""
        return self.role is Role.LEADER

    @classmethod
    def from_payload(cls, payload: bytes) -> EpochReply:
        fields = payload_fields(payload)
        role = fields.get("role")
        if role not in ("leader", "follower"):
            raise ProtocolViolation(f"REPLICA_EPOCH reply with role={role!r}")
        return cls(Role(role), _int(fields, "epoch"), _bool(fields, "confirmed"),
                   _int(fields, "end_epoch"), _int(fields, "end_offset"), _int(fields, "leo"),
                   _int(fields, "hw"))


def pull_request(cid: str, topic: str, partition: int, replica_id: int, offset: int,
                 epoch: int, *, wait_ms: int | None = None,
                 max_bytes: int | None = None) -> bytes:
    """A ``REPLICA_PULL`` request line, with its ``\\n``."""
    options = ""
    if wait_ms is not None:
        options += f" wait_ms={wait_ms}"
    if max_bytes is not None:
        options += f" max_bytes={max_bytes}"
    return (f"V1|{cid}|REPLICA_PULL|{topic} {partition} {replica_id} {offset} {epoch}"
            f"{options}\n").encode()


def epoch_request(cid: str, topic: str, partition: int, replica_id: int, epoch: int,
                  last_epoch: int | None) -> bytes:
    """A ``REPLICA_EPOCH`` request line, with its ``\\n`` (no ``last_epoch=`` when the
    asker's log has no history)."""
    option = "" if last_epoch is None or last_epoch < 0 else f" last_epoch={last_epoch}"
    return f"V1|{cid}|REPLICA_EPOCH|{topic} {partition} {replica_id} {epoch}{option}\n".encode()
