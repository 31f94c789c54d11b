"""The client side of the V1 line protocol, sans I/O: bytes of requests out, values of replies in.

Owns: encoding request lines (``V1|<cid>|<COMMAND>|<arguments>\\n``, with a correlation id
the caller chooses); splitting a reply line into ``Reply`` (OK payload, or ERR code and
message); reading a payload: ``key=value`` fields (to the next space), ``[a b]`` lists,
``messages=`` items in their plain, ``enc=b64`` and ``detail=true`` forms, ``FETCH`` bodies
(base64 in the line, or ``enc=raw`` bytes after it) and ``PRODUCE_BATCH`` batches; the
client's exceptions, and ``for_code``, which maps a wire code back to its ``BrokerError``
class (as aiokafka's ``errors.for_code`` does); the client-side rules a request must keep
(names, plain keys and values) and the key hash that picks a partition.

Every V1 client of this repository goes through this module: ``broker.client.sync``,
``broker.client.aio`` (the ``skerry`` commands and the harness), the Spark connector, and the
replication fetcher's Twisted protocol.

Must not import: Twisted, asyncio, sockets, or anything of the broker's server side
(``broker.v1``, ``broker.core``, ``broker.errors``...), ``groups``, ``replication``, or the
store; of ``data`` only the neutral rule modules the broker shares (``data.names``,
``data.keys``, ``data.plaintext``). It is pure bytes in, values out, and the Spark workers
import it.
"""

from __future__ import annotations

import base64
import binascii
import operator
import re
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from data.keys import fnv1a_32
from data.names import is_valid_name
from data.plaintext import MAX_KEY_BYTES, is_plain_key, is_plain_value

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_KEY_BYTES",
    "MAX_LINE_BYTES",
    "MessageTooLargeError",
    "BadRequestError",
    "BatchAck",
    "BrokerError",
    "ClientError",
    "ClusterMap",
    "LeaderHint",
    "ConnectionLost",
    "Fetched",
    "GenerationMismatchError",
    "GroupHeartbeat",
    "InvalidArgumentError",
    "group_heartbeat_args",
    "Message",
    "NotLeaderError",
    "ProtocolViolation",
    "Reply",
    "check_acks",
    "check_key",
    "check_name",
    "check_number",
    "encode_batch",
    "encode_request",
    "fnv1a_32",
    "for_code",
    "is_plain_key",
    "is_plain_value",
    "is_valid_name",
    "parse_brokers",
    "parse_fetch",
    "parse_leader_hint",
    "parse_messages",
    "parse_reply",
    "partition_for_key",
    "payload_fields",
    "split_batch",
]

MAX_LINE_BYTES = 1 << 20
"""The broker's default ``limits.max_line_bytes``: what ``broker.client.sync.Client``
assumes a request line (with a PRODUCE_BATCH's raw body) may take unless told otherwise."""

MAX_BATCH_BYTES = 512 * 1024
"""The default size limit of one PRODUCE_BATCH's batch before base64: its line (a third
longer) stays under the broker's default ``limits.max_line_bytes`` of 1 MiB."""

_FIELD_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\[[^\]]*\]|[^ ]*)")


# -------------------------------------------------------------------------------- errors

class ClientError(Exception):
    """A failure of a client call, told in one line (``message``). ``exit_code`` is what the
    ``skerry`` commands exit with when it ends them."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class ConnectionLost(ClientError):
    """The connection ended before a request was answered. ``replies`` are the answers that
    did arrive for a batch of requests: those of its first ``len(replies)`` requests, in
    order; the rest may or may not have been applied."""

    def __init__(self, message: str, replies: Sequence[Reply] = ()) -> None:
        super().__init__(message)
        self.replies = list(replies)


class ProtocolViolation(ClientError, ValueError):
    """A line that is not what the V1 protocol promises (a bug, or a stranger on the port):
    the connection it came from cannot be trusted any more."""


class InvalidArgumentError(ClientError, ValueError):
    """An argument the broker would refuse, caught before anything is sent; ``argument``
    names it (``topic``, ``group``, ``member_id``, ``key``, ...). Also a ``ValueError``, as
    any bad argument is in Python. ``exit_code`` 2: a usage mistake."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(message, 2)
        self.argument = argument


class MessageTooLargeError(InvalidArgumentError):
    """A message of a PRODUCE_BATCH that cannot fit a request even alone: ``index`` is its
    place in the batch, ``size`` its key and value bytes, ``limit`` the line limit
    (``limits.max_line_bytes``) it was held to. Raised before the batch is sent."""

    def __init__(self, index: int, size: int, limit: int) -> None:
        super().__init__("values", f"message {index} of the batch ({size} bytes of key and "
                                   f"value) cannot fit one PRODUCE_BATCH request of at most "
                                   f"{limit} bytes (the broker's limits.max_line_bytes); "
                                   f"nothing of the batch was sent")
        self.index = index
        self.size = size
        self.limit = limit


class BrokerError(ClientError):
    """The broker answered ``ERR``: ``code`` is the wire code, ``broker_message`` its text,
    ``command`` what was asked (for the one-line ``message``). ``for_code`` picks the
    subclass of a code; an unknown code stays a plain ``BrokerError``."""

    code_name: ClassVar[str] = ""
    retriable: ClassVar[bool] = False

    def __init__(self, code: str, message: str, command: str = "") -> None:
        super().__init__(f"{command + ': ' if command else ''}{code}: {message}")
        self.code = code
        self.broker_message = message
        self.command = command

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.code_name:
            _BY_CODE.setdefault(cls.code_name, cls)


_BY_CODE: dict[str, type[BrokerError]] = {}


class BadRequestError(BrokerError):
    """``BAD_REQUEST``: malformed or inapplicable request; fix it, do not retry."""

    code_name = "BAD_REQUEST"


class UnknownCommandError(BrokerError):
    code_name = "UNKNOWN_COMMAND"


class ReplicationTimeoutError(BrokerError):
    """``acks=all`` was not met in time; the message may still become committed."""

    code_name = "REPLICATION_TIMEOUT"
    retriable = True


class NotLeaderError(BrokerError):
    code_name = "NOT_LEADER"
    retriable = True


class GenerationMismatchError(BrokerError):
    """Stale generation, unknown member or group, or a partition not owned: rejoin."""

    code_name = "GENERATION_MISMATCH"
    retriable = True


class UnavailableError(BrokerError):
    code_name = "UNAVAILABLE"
    retriable = True


class UnauthenticatedError(BrokerError):
    code_name = "UNAUTHENTICATED"


class NotAuthorizedError(BrokerError):
    """``NOT_AUTHORIZED``: logged in, but the ACLs do not allow this (docs/security.md)."""

    code_name = "NOT_AUTHORIZED"


class BrokerStorageError(BrokerError):
    code_name = "STORAGE_ERROR"


class BrokerInternalError(BrokerError):
    code_name = "INTERNAL"


def for_code(code: str) -> type[BrokerError]:
    """The ``BrokerError`` class of a wire code (``BrokerError`` itself for an unknown one)."""
    return _BY_CODE.get(code, BrokerError)


# -------------------------------------------------------------------------------- rules

_NAME_RULE = "1-249 characters of A-Z a-z 0-9 . _ - (not . or ..)"
_KEY_RULE = ("at most 255 bytes of UTF-8 without whitespace, '|', ',' or ':' (keys travel "
             "as plain text; values of any bytes are sent base64-encoded)")


def check_name(argument: str, value: object) -> str:
    """``value`` when it is a valid topic, group or consumer id (``data.names``, the rule the
    broker applies); else ``InvalidArgumentError`` naming ``argument``.

    ``check_name("topic", "bad name")`` raises with the message ``topic 'bad name' is not
    a valid name: 1-249 characters of A-Z a-z 0-9 . _ - (not . or ..)``.
    """
    if not is_valid_name(value):
        raise InvalidArgumentError(argument, f"{argument} {value!r} is not a valid name: "
                                             f"{_NAME_RULE}")
    return value  # type: ignore[return-value]  # is_valid_name checked it is a str


def check_key(key: bytes, argument: str = "key") -> bytes:
    """``key`` when it may travel as a plain V1 key (``data.plaintext``, the broker's rule);
    else ``InvalidArgumentError``."""
    if not is_plain_key(key):
        raise InvalidArgumentError(argument, f"{argument} {key[:60]!r} cannot be sent: a key "
                                             f"is {_KEY_RULE}")
    return key


def check_number(argument: str, value: object) -> int:
    """``value`` as an ``int`` when it is a whole number >= 0 (partitions, offsets,
    generations): an int or anything that stands for one (``numpy.int64``), or a string
    of digits; ``InvalidArgumentError`` otherwise (a float, a negative number, text)."""
    number: int | None = None
    if isinstance(value, str):
        number = int(value) if value.isascii() and value.isdigit() else None
    elif not isinstance(value, bool):
        try:
            number = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            number = None
    if number is None or number < 0:
        raise InvalidArgumentError(argument, f"{argument} must be a whole number >= 0, not "
                                             f"{value!r}")
    return number


def check_acks(acks: object) -> str:
    """``acks`` when it is ``"0"``, ``"1"`` or ``"all"`` (an int 0 or 1 is taken too)."""
    text = str(acks) if isinstance(acks, int) and not isinstance(acks, bool) else acks
    if text not in ("0", "1", "all"):
        raise InvalidArgumentError("acks", f"acks must be \"0\", \"1\" or \"all\", not {acks!r}")
    return text  # type: ignore[return-value]


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition a PRODUCE without ``partition=`` goes to."""
    return fnv1a_32(key) % partitions


# -------------------------------------------------------------------------------- requests

def encode_request(cid: str | int, command: str, args: str | bytes = b"") -> bytes:
    """One request line with its ``\\n``: ``V1|<cid>|<command>|<args>``."""
    body = args if isinstance(args, bytes) else args.encode()
    return b"V1|%b|%b|%b\n" % (str(cid).encode(), command.encode(), body)


def encode_batch(keys: Sequence[bytes], values: Sequence[bytes]) -> bytes:
    """The PRODUCE_BATCH batch of ``(keys[i], values[i])`` (docs/protocol.md): count u32,
    key lengths (u8 each), value lengths (u32 each), the keys, the values; little-endian.
    An empty key is no key; a key has at most 255 bytes."""
    count = len(values)
    if len(keys) != count or count == 0:
        raise ValueError(f"a batch needs one key per value and at least one message "
                         f"({len(keys)} keys, {count} values)")
    key_lengths = bytes(map(len, keys))  # ValueError for a key over 255 bytes
    value_lengths = array("I", map(len, values))
    if sys.byteorder == "big":  # pragma: no cover
        value_lengths.byteswap()
    return b"".join((count.to_bytes(4, "little"), key_lengths, value_lengths.tobytes(),
                     *keys, *values))


# -------------------------------------------------------------------------------- replies

def _to_int(text: str, key: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ProtocolViolation(f"unexpected answer from the broker: {key}={text!r} is not "
                                "a number") from None


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer: ``ok``; for an error its ``code``; ``payload`` is the OK payload or the
    error message; ``cid`` the correlation id it echoed. ``sent`` and ``answered`` are the
    monotonic times of the request and of its answer when a connection measured them."""

    ok: bool
    code: str | None
    payload: str
    cid: str = ""
    sent: float = 0.0
    answered: float = 0.0

    @property
    def message(self) -> str:
        """The error message of an ERR reply (the payload)."""
        return self.payload

    def error(self, command: str = "") -> BrokerError:
        """The ``BrokerError`` an ERR reply stands for."""
        code = self.code or "?"
        return for_code(code)(code, self.payload, command)

    def check(self, command: str = "") -> Reply:
        """This reply when OK; raises its ``BrokerError`` when ERR."""
        if not self.ok:
            raise self.error(command)
        return self

    def field(self, key: str) -> str:
        """A ``key=value`` field, read to the next space (the protocol's rule)."""
        match = re.search(rf"(?:^| ){re.escape(key)}=(\S*)", self.payload)
        if match is None:
            raise ProtocolViolation(f"unexpected answer from the broker (no {key}=): "
                                    f"{self.payload[:200]!r}")
        return match.group(1)

    def has(self, key: str) -> bool:
        return re.search(rf"(?:^| ){re.escape(key)}=", self.payload) is not None

    def number(self, key: str) -> int:
        """An integer ``key=<n>`` field."""
        return _to_int(self.field(key), key)

    def items(self, key: str) -> list[str]:
        """A ``key=[a b c]`` list field (``[]`` is the empty list)."""
        match = re.search(rf"(?:^| ){re.escape(key)}=\[([^\]]*)\]", self.payload)
        if match is None:
            raise ProtocolViolation(f"unexpected answer from the broker (no {key}=[...]): "
                                    f"{self.payload[:200]!r}")
        return match.group(1).split()

    def ints(self, key: str) -> list[int]:
        return [_to_int(item, key) for item in self.items(key)]

    def bools(self, key: str) -> list[bool]:
        return [item == "true" for item in self.items(key)]

    def fields(self) -> dict[str, str]:
        """Every ``key=value`` pair; a list keeps its brackets (``[0 1 2]``)."""
        return payload_fields(self.payload)


def parse_reply(line: bytes, sent: float = 0.0, answered: float = 0.0) -> Reply:
    """Split one reply line (without its ``\\n``; one ``\\r`` is dropped).
    ``ProtocolViolation`` for anything but ``V1|<cid>|OK[|payload]`` and
    ``V1|<cid>|ERR|<code>|<message>``."""
    if line.endswith(b"\r"):
        line = line[:-1]
    parts = line.split(b"|", 4)
    if len(parts) < 3 or parts[0] != b"V1":
        raise ProtocolViolation(f"not a V1 reply: {line[:200]!r}")
    cid = parts[1].decode("utf-8", "replace")
    status = parts[2]
    if status == b"OK":
        payload = line[len(parts[1]) + 7:] if len(parts) > 3 else b""
        return Reply(True, None, payload.decode("utf-8", "replace"), cid, sent, answered)
    if status == b"ERR" and len(parts) > 3:
        code = parts[3].decode("utf-8", "replace")
        message = parts[4].decode("utf-8", "replace") if len(parts) > 4 else ""
        return Reply(False, code, message, cid, sent, answered)
    raise ProtocolViolation(f"not a V1 reply: {line[:200]!r}")


def payload_fields(payload: bytes | str) -> dict[str, str]:
    """``key=value`` pairs of a payload; a list value keeps its brackets (``[0 1 2]``)."""
    text = payload.decode() if isinstance(payload, bytes) else payload
    return {m.group(1): m.group(2) for m in _FIELD_RE.finditer(text)}


def int_field(fields: dict[str, str], key: str) -> int:
    """``fields[key]`` as a number; ``ProtocolViolation`` when missing or not one."""
    try:
        return int(fields[key])
    except (KeyError, ValueError):
        raise ProtocolViolation(f"reply field {key}= missing or not a number: "
                                f"{fields.get(key)!r}") from None


def list_field(fields: dict[str, str], key: str) -> list[str]:
    """``fields[key]`` as the items of a ``[a b c]`` list."""
    raw = fields.get(key, "")
    if not (raw.startswith("[") and raw.endswith("]")):
        raise ProtocolViolation(f"reply field {key}= is not a list: {raw!r}")
    return raw[1:-1].split()


def int_list_field(fields: dict[str, str], key: str) -> tuple[int, ...]:
    """``fields[key]`` as a ``[1 2 3]`` list of numbers."""
    try:
        return tuple(int(item) for item in list_field(fields, key))
    except ValueError:
        raise ProtocolViolation(f"reply field {key}= is not a list of numbers: "
                                f"{fields.get(key)!r}") from None


def bool_field(fields: dict[str, str], key: str) -> bool:
    """``fields[key]`` as ``true`` or ``false``."""
    raw = fields.get(key)
    if raw not in ("true", "false"):
        raise ProtocolViolation(f"reply field {key}= is not true or false: {raw!r}")
    return raw == "true"


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a CONSUME answer. ``timestamp_ms`` (when the broker appended it) and
    ``key`` come only with ``detail=true`` (else ``None`` and ``b""``);
    ``producer_timestamp_ms`` (the producer's own time, the append time when it gave none)
    and ``headers`` (``(name, value)`` pairs, the key's own header left out) only with
    ``headers=true`` too (else ``None`` and ``()``)."""

    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes
    value: bytes
    producer_timestamp_ms: int | None = None
    headers: tuple[tuple[bytes, bytes], ...] = ()


def _headers(field: str) -> tuple[tuple[bytes, bytes], ...]:
    """``<name b64>.<value b64>`` pairs joined by ``;`` (the ``headers=true`` field)."""
    if not field:
        return ()
    pairs = []
    for part in field.split(";"):
        name, dot, value = part.partition(".")
        if not dot:
            raise ValueError(f"header {part!r} has no '.'")
        pairs.append((base64.b64decode(name, validate=True),
                      base64.b64decode(value, validate=True)))
    return tuple(pairs)


def parse_messages(reply: Reply, partition: int, *, b64: bool = False,
                   detail: bool = False, headers: bool = False) -> list[Message]:
    """The ``messages=`` of a CONSUME answer asked with ``enc=b64``, ``detail=true`` and
    ``headers=true`` as given: items split on ``,``; each ``<offset>:<value>`` (split at
    the first ``:``), with detail ``<offset>:<timestamp_ms>:<key>:<value>``, with headers
    too ``<offset>:<timestamp_ms>:<producer_timestamp_ms>:<headers>:<key>:<value>``; keys
    and values decoded from base64 with ``b64``."""
    raw = reply.field("messages")
    if not raw:
        return []
    out = []
    for item in raw.split(","):
        try:
            producer: int | None = None
            pairs: tuple[tuple[bytes, bytes], ...] = ()
            if detail and headers:
                offset, ts, pts, hdrs, key, value = item.split(":", 5)
                timestamp: int | None = int(ts)
                producer = int(pts)
                pairs = _headers(hdrs)
            elif detail:
                offset, ts, key, value = item.split(":", 3)
                timestamp = int(ts)
            else:
                offset, value = item.split(":", 1)
                timestamp, key = None, ""
            if b64:
                out.append(Message(partition, int(offset), timestamp, base64.b64decode(key),
                                   base64.b64decode(value), producer, pairs))
            else:
                out.append(Message(partition, int(offset), timestamp, key.encode(),
                                   value.encode(), producer, pairs))
        except (ValueError, binascii.Error):
            raise ProtocolViolation(f"unexpected message in the broker's answer: "
                                    f"{item[:200]!r}") from None
    return out


@dataclass(frozen=True)
class Fetched:
    """One FETCH answer: ``count`` records as on-disk bytes in ``data``."""

    hw: int
    start: int
    next_offset: int
    count: int
    data: bytes | bytearray


def parse_fetch(reply: Reply) -> tuple[Fetched, int | None]:
    """A FETCH answer: with ``enc=b64`` the records are in the line (``size`` is None);
    with ``enc=raw`` the ``Fetched`` has no data yet and ``size`` bytes follow the line:
    the caller reads them and replaces ``data``."""
    head, sep, data = reply.payload.partition(" data=")
    fields = payload_fields(head)
    fetched = Fetched(int_field(fields, "hw"), int_field(fields, "start"),
                      int_field(fields, "next"), int_field(fields, "count"), b"")
    if sep:
        try:
            raw = binascii.a2b_base64(data) if data else b""
        except binascii.Error as exc:
            raise ProtocolViolation(f"FETCH data= is not base64: {exc}") from None
        return Fetched(fetched.hw, fetched.start, fetched.next_offset, fetched.count, raw), None
    return fetched, int_field(fields, "size")


@dataclass(frozen=True)
class BatchAck:
    """One PRODUCE_BATCH answer: ``count`` messages appended at ``offset`` onwards after
    ``duplicates`` the partition already held (idempotent resend)."""

    partition: int
    offset: int
    count: int
    duplicates: int

    @classmethod
    def from_reply(cls, reply: Reply) -> BatchAck:
        fields = reply.fields()
        return cls(int_field(fields, "partition"), int_field(fields, "offset"),
                   int_field(fields, "count"), int(fields.get("duplicates", "0")))


def split_batch(batch: bytes, max_bytes: int, limit: int | None = None
                ) -> list[tuple[bytes, int]]:
    """A batch of ``encode_batch`` cut into batches of at most ``max_bytes`` bytes each,
    in order, with their message counts: ``[(batch, count)]`` as it is when it fits.
    ``MessageTooLargeError`` (naming ``limit``, default ``max_bytes``) when one message
    does not fit even alone; ``ValueError`` when ``batch`` is not a well-formed batch."""
    count = int.from_bytes(batch[:4], "little")
    if len(batch) <= max_bytes:
        return [(batch, count)]
    keys_at = 4 + 5 * count
    key_lengths = batch[4:4 + count]
    value_lengths = array("I")
    value_lengths.frombytes(batch[4 + count:keys_at])
    if sys.byteorder == "big":  # pragma: no cover
        value_lengths.byteswap()
    values_at = keys_at + sum(key_lengths)
    if count == 0 or values_at + sum(value_lengths) != len(batch):
        raise ValueError("not a PRODUCE_BATCH batch: its lengths do not add up")
    pieces: list[tuple[bytes, int]] = []
    first = 0  # the first message of the piece being built
    key_at, value_at = keys_at, values_at  # where that message's key and value start
    key_end, value_end = key_at, value_at
    size = 4
    for i in range(count):
        one = 5 + key_lengths[i] + value_lengths[i]
        if 4 + one > max_bytes:
            raise MessageTooLargeError(i, one - 5, max_bytes if limit is None else limit)
        if size + one > max_bytes:
            pieces.append((_piece(batch, first, i, count, key_lengths, value_lengths,
                                  (key_at, key_end), (value_at, value_end)), i - first))
            first, key_at, value_at, size = i, key_end, value_end, 4
        size += one
        key_end += key_lengths[i]
        value_end += value_lengths[i]
    pieces.append((_piece(batch, first, count, count, key_lengths, value_lengths,
                          (key_at, key_end), (value_at, value_end)), count - first))
    return pieces


def _piece(batch: bytes, first: int, end: int, count: int, key_lengths: bytes,
           value_lengths: array[int], keys: tuple[int, int], values: tuple[int, int]) -> bytes:
    lengths = value_lengths[first:end]
    if sys.byteorder == "big":  # pragma: no cover
        lengths.byteswap()
    return b"".join(((end - first).to_bytes(4, "little"), key_lengths[first:end],
                     lengths.tobytes(), batch[keys[0]:keys[1]], batch[values[0]:values[1]]))


# -------------------------------------------------------------------------------- leaders

_HINT_RE = re.compile(r"leader=(\d+) addr=(\S+) epoch=(\d+)(?: |$)")


@dataclass(frozen=True, slots=True)
class LeaderHint:
    """Who leads a partition: a broker id, its V1 ``host:port`` and the leader epoch."""

    leader: int
    addr: str
    epoch: int


def parse_leader_hint(message: str) -> LeaderHint | None:
    """The leader a ``NOT_LEADER`` message names in its first fields (``leader=<id>
    addr=<host:port> epoch=<n> ...``), or None when it names none.

    >>> parse_leader_hint("leader=1 addr=10.0.0.2:9092 epoch=3 partition 0 is a follower")
    LeaderHint(leader=1, addr='10.0.0.2:9092', epoch=3)
    """
    match = _HINT_RE.match(message)
    if match is None:
        return None
    return LeaderHint(int(match.group(1)), match.group(2), int(match.group(3)))


def parse_brokers(reply: Reply) -> dict[int, str]:
    """``brokers=[<id>@<host:port> ...]`` of a cluster's ``METADATA`` answer (empty for a
    single broker, whose answer has no such field)."""
    if not reply.has("brokers"):
        return {}
    out: dict[int, str] = {}
    for item in reply.items("brokers"):
        ident, at, addr = item.partition("@")
        if not at or not ident.isdigit() or not addr:
            raise ProtocolViolation(f"unexpected broker in METADATA: {item[:100]!r}")
        out[int(ident)] = addr
    return out


class ClusterMap:
    """Where one topic's partitions are led, sans I/O: fed with ``METADATA`` answers (from
    one or several brokers: for each partition the leader with the newest epoch wins) and
    ``NOT_LEADER`` hints; asked for the address to send a partition's writes to.

    ``brokers`` is empty for a single broker (its METADATA names no brokers): everything
    then goes to the bootstrap address."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.partitions = 0
        self.brokers: dict[int, str] = {}
        self.leaders: dict[int, tuple[int, int]] = {}  # partition -> (broker id, epoch)

    def update_brokers(self, reply: Reply) -> None:
        """From a ``METADATA`` (topic list) answer."""
        self.brokers.update(parse_brokers(reply))

    def update_topic(self, reply: Reply) -> None:
        """From a ``METADATA <topic>`` answer: the partition count and, in a cluster, each
        partition's leader (kept when the answer's epoch is not newer)."""
        self.partitions = reply.number("partitions")
        if not reply.has("leaders"):
            return
        leaders, epochs = reply.ints("leaders"), reply.ints("epochs")
        for partition, (leader, epoch) in enumerate(zip(leaders, epochs, strict=False)):
            if leader < 0:
                continue
            known = self.leaders.get(partition)
            if known is None or epoch >= known[1]:
                self.leaders[partition] = (leader, epoch)

    def note_hint(self, partition: int, hint: LeaderHint | None) -> bool:
        """A ``NOT_LEADER`` answer for ``partition``: take its hint when it is news (True);
        without one (or an older one), forget the partition's leader (False): ask again."""
        known = self.leaders.get(partition)
        if hint is not None and (known is None or hint.epoch >= known[1]) \
                and known != (hint.leader, hint.epoch):
            self.leaders[partition] = (hint.leader, hint.epoch)
            self.brokers.setdefault(hint.leader, hint.addr)
            return True
        self.leaders.pop(partition, None)
        return False

    def partition_for(self, key: bytes) -> int:
        """The partition a message with ``key`` goes to (the broker's own rule)."""
        if self.partitions < 1:
            raise ClientError(f"no partition count known for topic {self.topic}")
        return partition_for_key(key, self.partitions)

    def leader_address(self, partition: int) -> str | None:
        """The V1 address of the partition's leader; None when unknown (or one broker)."""
        known = self.leaders.get(partition)
        if known is None:
            return None
        return self.brokers.get(known[0])


@dataclass(frozen=True)
class GroupHeartbeat:
    """A GROUP_HEARTBEAT answer (KIP-848 groups): the member's id and epoch (-1 after
    ``leave``, -2 after ``leave_static``), how often to heartbeat, the partitions it may
    consume now and its target, as ``(topic, partition)`` pairs."""

    member_id: str
    epoch: int
    interval_ms: int
    assigned: tuple[tuple[str, int], ...]
    target: tuple[tuple[str, int], ...]

    @classmethod
    def from_reply(cls, reply: Reply) -> GroupHeartbeat:
        def pairs(key: str) -> tuple[tuple[str, int], ...]:
            out = []
            for item in reply.items(key):
                topic, _, partition = item.rpartition(":")
                out.append((topic, _to_int(partition, key)))
            return tuple(out)

        return cls(reply.field("member"), reply.number("epoch"), reply.number("interval_ms"),
                   pairs("assigned"), pairs("target"))


def group_heartbeat_args(group: str, member_id: str, epoch: int, *,
                         topics: Sequence[str] | None = None, regex: str | None = None,
                         assignor: str | None = None, rebalance_timeout_ms: int | None = None,
                         instance: str | None = None,
                         owned: Iterable[tuple[str, int]] | None = None) -> str:
    """The arguments of one GROUP_HEARTBEAT: ``epoch`` -1 is ``leave``, -2 ``leave_static``;
    a regex always travels base64-encoded (``regex=<b64> enc=b64``) (it may hold ``|`` or spaces); None: not
    sent (unchanged). ``InvalidArgumentError`` for a name or number the broker would
    refuse."""
    words = {-1: "leave", -2: "leave_static"}
    check_name("group", group)
    check_name("member_id", member_id)
    word = words.get(epoch) if isinstance(epoch, int) else None
    args = f"{group} {member_id} {word or check_number('epoch', epoch)}"
    if topics is not None:
        args += " topics=" + ",".join(check_name("topic", t) for t in topics)
    if regex is not None:
        args += " regex=" + base64.b64encode(regex.encode("utf-8")).decode("ascii") + " enc=b64"
    if assignor is not None:
        args += f" assignor={assignor}"
    if assignor is not None and assignor:
        check_name("assignor", assignor)
    if rebalance_timeout_ms is not None:
        args += f" rebalance_timeout_ms={check_number('rebalance_timeout_ms', rebalance_timeout_ms)}"
    if instance is not None:
        args += f" instance={check_name('instance', instance)}"
    if owned is not None:
        pairs = sorted({(check_name("topic", t), check_number("partition", p)) for t, p in owned})
        args += " owned=" + ",".join(f"{t}:{p}" for t, p in pairs)
    return args
