"""The V1 line-protocol codec: bytes of one request line in, a typed command out.

Owns: the exact wire contract of ``spec/v1-protocol.md`` as far as it can be checked without
state, through ``Codec``: the envelope (``V1|<cid>|<COMMAND>|<args>``) and its errors, the
choice of the command's parser, and the two parsers that need the codec's limits (PRODUCE,
PRODUCE_BATCH); ``CommandError`` (a refused line and its reply) and ``CodecLimits``. Checks
run in the spec's order: envelope -> command known -> argument syntax and ranges. All of them
answer BAD_REQUEST (UNKNOWN_COMMAND for the second); existence, generation, membership and
ownership are the handlers' business.

The rest of the V1 wire lives next door in this package, one responsibility a module: the
command classes in ``commands``, the argument checks in ``fields``, the other commands'
parsers in ``parse``, the PRODUCE fast path in ``scan`` (``Codec.scan_produce``: runs of
plain PRODUCEs scanned in place in the read buffer, compiled or its regex twin
``_scan_produce_py``; whatever it accepts ``parse_command`` accepts with the same fields),
every reply line in ``replies``, the line splitter in ``framing``. This module re-exports
their public names (``__all__``), so the handlers and the protocol use the codec as one
namespace (``c.Produce``, ``c.err``).

Imports, each for one reason: ``broker.errors`` (the refusals it raises), ``broker.v1.errors``
(``code_for``, for a ``CommandError``'s text) and its sibling modules.

Must not import: Twisted, sockets, the store, ``groups`` or ``replication``; it does no I/O
and reads no clock.
"""


from __future__ import annotations

from dataclasses import dataclass

from broker.errors import BadRequest, SkerryError, UnknownCommand
from broker.v1.codec import fields
from broker.v1.codec.commands import (
    ALL_COMMANDS,
    CLUSTER_COMMANDS,
    COMMANDS,
    CONTROL_COMMANDS,
    DATA_COMMANDS,
    MAX_INT,
    MAX_KEY_BYTES,
    MAX_NAME_CHARS,
    SECURITY_COMMANDS,
    VERSION,
    AdminAclAdd,
    AdminAclList,
    AdminAclRemove,
    AdminAddPartitions,
    AdminAlterTopic,
    AdminBrokerHeartbeat,
    AdminCommit,
    AdminCreateTopic,
    AdminDeleteGroup,
    AdminDeleteTopic,
    AdminGetMetadata,
    AdminRegisterBroker,
    AdminResetOffsets,
    AdminSetPartitionLeader,
    Auth,
    Command,
    Commit,
    Consume,
    DescribeGroup,
    Fetch,
    GroupHeartbeat,
    Heartbeat,
    Join,
    Leave,
    ListGroups,
    Metadata,
    Offset,
    Offsets,
    Ping,
    Produce,
    ProduceBatch,
    ReplicaEpoch,
    ReplicaFetch,
    ReplicaPull,
    ReplicaStatus,
    SetPartitionRole,
    Sync,
    is_plain_key,
    is_plain_value,
)
from broker.v1.codec.framing import LineSplitter, LineTooLong
from broker.v1.codec.parse import (
    ACK_MODES,
    ACKS_MESSAGE,
    KEY_VALUE_MESSAGE,
    PARSERS,
    _Parser,
    acl_entry,
    decode_batch,
    producer_fields,
    too_big,
)
from broker.v1.codec.replies import (
    COMMITTED,
    DELETED,
    HEARTBEAT_OK,
    LEFT,
    LINE_TOO_LONG_REPLY,
    acls_added_payload,
    acls_payload,
    admin_topic_payload,
    altered_topic_payload,
    assignment_payload,
    broker_heartbeat_payload,
    broker_registered_payload,
    cluster_metadata_payload,
    consume_reply,
    consume_reply_raw,
    describe_group_payload,
    err,
    fetch_raw_reply,
    fetch_reply,
    format_bool,
    format_limit,
    format_list,
    group_heartbeat_payload,
    groups_payload,
    offset_payload,
    offsets_payload,
    offsets_range_payload,
    ok,
    partition_leader_payload,
    produce_batch_payload,
    produce_ok,
    produce_payload,
    replica_epoch_payload,
    replica_fetch_payload,
    replica_pull_reply,
    replica_status_payload,
    role_payload,
    topic_deleted_payload,
    topic_metadata_payload,
    topic_partitions_payload,
    topics_payload,
)
from broker.v1.codec.scan import (
    FAST_ACKS,
    PRODUCE_LINE_RE,
    ProduceRun,
    scan_produce,
)
from broker.v1.codec.scan import _scan_produce_py as _scan_produce_py  # the twin, for its tests
from broker.v1.errors import code_for

__all__ = [
    "HEARTBEAT_OK",
    "LEFT",
    "COMMITTED",
    "DELETED",
    "format_limit",
    "group_heartbeat_payload",
    "offset_payload",
    "describe_group_payload",
    "groups_payload",
    "offsets_payload",
    "topic_deleted_payload",
    "topic_partitions_payload",
    "altered_topic_payload",
    "topics_payload",
    "topic_metadata_payload",
    "offsets_range_payload",
    "acls_added_payload",
    "acls_payload",
    "AdminAclAdd",
    "AdminAclList",
    "AdminAclRemove",
    "acl_entry",
    "AdminAddPartitions",
    "AdminBrokerHeartbeat",
    "AdminGetMetadata",
    "AdminRegisterBroker",
    "AdminSetPartitionLeader",
    "CONTROL_COMMANDS",
    "AdminCommit",
    "AdminCreateTopic",
    "AdminDeleteGroup",
    "AdminDeleteTopic",
    "AdminResetOffsets",
    "ALL_COMMANDS",
    "Auth",
    "SECURITY_COMMANDS",
    "CLUSTER_COMMANDS",
    "DATA_COMMANDS",
    "Fetch",
    "fetch_reply",
    "fetch_raw_reply",
    "decode_batch",
    "ProduceBatch",
    "produce_batch_payload",
    "COMMANDS",
    "Codec",
    "CodecLimits",
    "Command",
    "consume_reply_raw",
    "produce_ok",
    "AdminAlterTopic",
    "ACK_MODES",
    "FAST_ACKS",
    "PRODUCE_LINE_RE",
    "VERSION",
    "CommandError",
    "Commit",
    "Consume",
    "DescribeGroup",
    "GroupHeartbeat",
    "Heartbeat",
    "Join",
    "LINE_TOO_LONG_REPLY",
    "Leave",
    "LineSplitter",
    "LineTooLong",
    "ListGroups",
    "MAX_INT",
    "MAX_KEY_BYTES",
    "MAX_NAME_CHARS",
    "Metadata",
    "Offset",
    "Offsets",
    "Ping",
    "Produce",
    "ReplicaEpoch",
    "ReplicaFetch",
    "ReplicaPull",
    "ReplicaStatus",
    "SetPartitionRole",
    "Sync",
    "admin_topic_payload",
    "assignment_payload",
    "broker_heartbeat_payload",
    "broker_registered_payload",
    "cluster_metadata_payload",
    "partition_leader_payload",
    "consume_reply",
    "err",
    "format_bool",
    "format_list",
    "is_plain_key",
    "is_plain_value",
    "ok",
    "produce_payload",
    "replica_epoch_payload",
    "replica_fetch_payload",
    "replica_pull_reply",
    "replica_status_payload",
    "role_payload",
]
class CommandError(Exception):
    """A request line refused by the codec; the broker answers ``err(e.cid, e.error)``.

    ``cid`` is ``"0"`` when the envelope itself was unreadable, else the request's correlation
    id. ``error`` is a ``BadRequest`` or an ``UnknownCommand``.
    """

    def __init__(self, cid: str, error: SkerryError) -> None:
        super().__init__(cid, error)
        self.cid = cid
        self.error = error

    def __str__(self) -> str:
        return f"cid={self.cid} {code_for(self.error)}: {self.error.message}"

    def reply(self) -> bytes:
        """The complete error line for this refusal (with the trailing newline)."""
        return err(self.cid, self.error)


@dataclass(frozen=True)
class CodecLimits:
    """Limits the codec enforces while parsing.

    ``max_message_bytes`` bounds a PRODUCE value in bytes (after base64 decoding).
    """

    max_message_bytes: int = 1048576

    def __post_init__(self) -> None:
        if self.max_message_bytes < 0:
            raise ValueError(f"max_message_bytes must be >= 0, got {self.max_message_bytes}")


_DEFAULT_LIMITS = CodecLimits()



class Codec:
    """Parses request lines into commands under a set of ``CodecLimits``."""

    __slots__ = ("limits", "_max_value", "_max_b64_chars", "_parsers")

    def __init__(self, limits: CodecLimits = _DEFAULT_LIMITS) -> None:
        self.limits = limits
        self._max_value = limits.max_message_bytes
        self._max_b64_chars = 4 * ((limits.max_message_bytes + 2) // 3)
        self._parsers: dict[str, _Parser] = {
            **PARSERS,
            "PRODUCE": self._parse_produce,
            "PRODUCE_BATCH": self._parse_produce_batch,
        }
        assert self._parsers.keys() == ALL_COMMANDS.keys() | SECURITY_COMMANDS.keys()

    def scan_produce(self, buffer: bytes, pos: int, most: int,
                     max_line: int) -> tuple[ProduceRun, int]:
        """The framer's fast path (``LineFramer.take_fast``): the run of plain PRODUCE lines
        at ``pos`` under this codec's value limit (``scan_produce``: compiled or its twin)."""
        return scan_produce(buffer, pos, most, max_line, self._max_value)

    def parse_command(self, line: bytes) -> Command | None:
        """Parse one request line given WITHOUT its ``\\n`` terminator.

        One trailing ``\\r`` is stripped; an empty line gives None (the spec ignores blank
        lines). Otherwise returns a command object or raises ``CommandError``.
        """
        if line[-1:] == b"\r":
            line = line[:-1]
        if not line:
            return None
        try:
            text = line.decode()
        except UnicodeDecodeError:
            raise self._undecodable(line) from None
        fields = text.split("|")
        if len(fields) != 4:
            raise CommandError("0", _field_count_error(len(fields)))
        version, cid, command, args = fields
        if version != VERSION:
            raise CommandError("0", _version_error(version))
        if not cid:
            raise CommandError("0", BadRequest("empty correlation id"))
        if "\n" in cid or "\r" in cid:
            raise CommandError("0", _cid_line_break())
        parser = self._parsers.get(command)
        if parser is None:
            if not command:
                raise CommandError("0", BadRequest("empty command"))
            raise CommandError(cid, _unknown_command(command))
        try:
            return parser(cid, args)
        except BadRequest as exc:
            raise CommandError(cid, exc) from None

    def _undecodable(self, line: bytes) -> CommandError:
        """The error for a line that is not valid UTF-8, in check order."""
        fields = line.split(b"|")
        if len(fields) != 4:
            return CommandError("0", _field_count_error(len(fields)))
        version, raw_cid, raw_command, raw_args = fields
        if version != b"V1":
            return CommandError("0", _version_error(version.decode(errors="replace")))
        if not raw_cid:
            return CommandError("0", BadRequest("empty correlation id"))
        try:
            cid = raw_cid.decode()
        except UnicodeDecodeError as exc:
            return CommandError("0", _utf8_error("correlation id", exc))
        if "\n" in cid or "\r" in cid:
            return CommandError("0", _cid_line_break())
        if not raw_command:
            return CommandError("0", BadRequest("empty command"))
        try:
            command = raw_command.decode()
        except UnicodeDecodeError as exc:
            return CommandError(cid, _utf8_error("command", exc))
        if command not in self._parsers:
            return CommandError(cid, _unknown_command(command))
        try:
            raw_args.decode()
        except UnicodeDecodeError as exc:
            return CommandError(
                cid, _utf8_error("arguments", exc, hint="; send binary values with enc=b64")
            )
        raise AssertionError("undecodable line whose fields all decode")  # pragma: no cover

    def _parse_produce_batch(self, cid: str, args: str) -> ProduceBatch:
        tokens, options = fields.split_args("PRODUCE_BATCH", args)
        topic = fields.name(tokens[0], "topic")
        partition = fields.uint(tokens[1], "partition")
        acks = options.get("acks", "1")
        if acks not in ACK_MODES:
            raise BadRequest(ACKS_MESSAGE)
        pid, seq = producer_fields(options)
        text = options.get("data")
        encoding = options.get("enc")
        size = options.get("size")
        if encoding is not None or size is not None:  # additive: the batch follows the line
            if encoding != "raw":
                raise BadRequest(f"invalid encoding {fields.show(encoding or '')}; PRODUCE_BATCH "
                                 "takes enc=raw with size=<n> (or data=<base64 batch>)")
            if size is None:
                raise BadRequest("PRODUCE_BATCH enc=raw needs size=<n>: the batch's byte count")
            if text is not None:
                raise BadRequest("PRODUCE_BATCH takes data= or enc=raw size=<n>, not both")
            return ProduceBatch(cid, topic, partition, (), (), acks, pid, seq,
                                fields.uint(size, "size"))
        if text is None:
            raise BadRequest(f"PRODUCE_BATCH needs data=<base64 batch>; usage: {fields.USAGE['PRODUCE_BATCH']}")
        keys, values = decode_batch(fields.b64decode(text, "data", "PRODUCE_BATCH"), self._max_value)
        return ProduceBatch(cid, topic, partition, keys, values, acks, pid, seq)

    def with_body(self, cmd: ProduceBatch, body: bytes) -> ProduceBatch:
        """The raw PRODUCE_BATCH ``cmd`` (``size`` set) with the batch read after its line
        (``body``, exactly ``size`` bytes): its messages cut out as for ``data=``; a bad
        batch raises ``CommandError`` with the command's cid."""
        try:
            keys, values = decode_batch(body, self._max_value)
        except BadRequest as exc:
            raise CommandError(cmd.cid, exc) from None
        return ProduceBatch(cmd.cid, cmd.topic, cmd.partition, keys, values, cmd.acks, cmd.pid,
                            cmd.seq)

    @staticmethod
    def body_size(line: bytes, max_line_bytes: int) -> int | None:
        """How many bytes follow ``line`` (without its ``\\n``) on the wire as its body: the
        ``size=<n>`` of a PRODUCE_BATCH line (docs/protocol.md, ``enc=raw``), None for every
        other line. Read from the bytes before any other check, so a line refused for
        anything else still has its body skipped, never read as requests. The line and its
        body together fit ``max_line_bytes`` (as a ``data=`` line must). A size that cannot be
        read (not a number, given twice, over that limit) leaves the body's end unknown:
        ``CommandError``, after which the connection closes."""
        parts = line.split(b"|")
        if len(parts) != 4 or parts[2] != b"PRODUCE_BATCH" or b"size=" not in parts[3]:
            return None
        sizes = [token[5:] for token in parts[3].rstrip(b"\r").split(b" ")
                 if token.startswith(b"size=")]
        if not sizes:
            return None
        try:
            cid = parts[1].decode() if parts[0] == b"V1" and parts[1] else "0"
        except UnicodeDecodeError:
            cid = "0"
        if "\n" in cid or "\r" in cid:
            cid = "0"
        text = sizes[0]
        max_body = max(0, max_line_bytes - len(line))
        if len(sizes) > 1 or not text.isdigit() or not text.isascii() or len(text) > 12 \
                or int(text) > max_body:
            shown = b" ".join(b"size=" + size for size in sizes)[:40].decode(errors="replace")
            raise CommandError(cid, BadRequest(
                f"unreadable PRODUCE_BATCH body size {fields.show(shown)} (one size=<n>; the line "
                f"and its body fit {max_line_bytes} bytes: here at most {max_body}); the "
                "body's end is unknown, closing the connection"))
        return int(text)

    def _parse_produce(self, cid: str, args: str) -> Produce:
        tokens = args.split(" ")
        if "" in tokens:
            tokens = [token for token in tokens if token]
        count = len(tokens)
        if count < 2:
            raise fields.wrong_count("PRODUCE", count)
        topic = tokens[0]
        if not (topic.isalnum() and topic.isascii() and len(topic) <= MAX_NAME_CHARS):
            fields.name(topic, "topic")
        key, colon, value = tokens[1].partition(":")
        if not colon:
            raise BadRequest(KEY_VALUE_MESSAGE)
        if key:
            fields.key(key)
        acks = "1"
        partition = None
        b64 = False
        if count > 2:
            options = fields.options("PRODUCE", tokens, 2)
            mode = options.get("acks")
            if mode is not None:
                if mode not in ACK_MODES:
                    raise BadRequest(ACKS_MESSAGE)
                acks = mode
            text = options.get("partition")
            if text is not None:
                partition = fields.uint(text, "partition")
            encoding = options.get("enc")
            if encoding is not None:
                b64 = fields.encoding(encoding)
            pid, seq = producer_fields(options)
        else:
            pid = seq = None
        if b64:
            if len(value) > self._max_b64_chars:
                raise too_big(len(value) * 3 // 4, self._max_value)
            data = fields.b64decode(value, "value")
        else:
            if not (value.isprintable() and "," not in value):
                fields.plain_value_error(value)
            data = value.encode()
        if len(data) > self._max_value:
            raise too_big(len(data), self._max_value)
        return Produce(cid, topic, key, data, acks, partition, b64, pid, seq)


def _field_count_error(count: int) -> BadRequest:
    hint = (
        "a value containing a pipe character must be sent with enc=b64"
        if count > 4
        else "a command without arguments still ends with a pipe"
    )
    return BadRequest(
        "malformed envelope: expected 4 pipe-separated fields (V1, correlation id, command, "
        f"arguments), got {count}; {hint}"
    )


def _cid_line_break() -> BadRequest:
    # The cid is echoed verbatim, so a line break in it would split the reply line.
    return BadRequest("correlation id contains a line break")


def _version_error(version: str) -> BadRequest:
    return BadRequest(f"unsupported protocol version {fields.show(version)}; expected V1")


def _unknown_command(command: str) -> UnknownCommand:
    return UnknownCommand(f"unknown command {fields.show(command)}; commands are upper case, e.g. PING")


def _utf8_error(what: str, exc: UnicodeDecodeError, hint: str = "") -> BadRequest:
    byte = exc.object[exc.start]
    return BadRequest(
        f"invalid UTF-8 in the {what} (byte 0x{byte:02x} at position {exc.start}){hint}"
    )
