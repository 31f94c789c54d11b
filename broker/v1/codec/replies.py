"""V1 replies: every line the broker writes, and nothing else formats one.

Owns: ``V1|<cid>|OK|<payload>`` and ``V1|<cid>|ERR|<CODE>|<message>`` lines, the payload
shapes of the spec's commands (produce, assignment, replica and consume payloads), the
whole-line builders of the hot replies (``produce_ok``, ``consume_reply``, ``fetch_reply``),
and the over-long-line answer (``line_too_long_reply``).

Must not import: Twisted, sockets, the store, ``groups`` or ``replication``; it does no I/O
and reads no clock. ``broker.errors`` gives the error classes whose code and message an
error line carries.
"""

from __future__ import annotations

import binascii
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from broker.errors import BadRequest, SkerryError
from broker.transport.slots import CID, REPLY
from broker.v1.codec.commands import BAD_VALUE_RE, is_plain_key, is_plain_value
from broker.v1.errors import code_for, message_for
from data import speedups
from data.format import (
    KEY_HEADER_NAME,
    KIND_STRING,
    consume_items,
    decode_user_headers,
    payload_spans,
)

__all__ = [
    "admin_topic_payload",
    "assignment_payload",
    "broker_heartbeat_payload",
    "broker_registered_payload",
    "cluster_metadata_payload",
    "partition_leader_payload",
    "consume_reply",
    "consume_reply_raw",
    "err",
    "fetch_raw_reply",
    "fetch_reply",
    "format_bool",
    "format_list",
    "LINE_TOO_LONG_REPLY",
    "line_too_long_reply",
    "ok",
    "produce_batch_payload",
    "produce_ok",
    "produce_payload",
    "replica_epoch_payload",
    "replica_fetch_payload",
    "replica_pull_reply",
    "replica_status_payload",
    "role_payload",
]

LINE_TOO_LONG_REPLY = b"V1|0|ERR|BAD_REQUEST|line too long\n"
"""The spec's over-long-line answer; ``line_too_long_reply`` extends its message."""


def line_too_long_reply(max_line_bytes: int) -> bytes:
    """What the broker writes, before closing the connection, for a line over the length
    limit: the spec's line (cid 0, ``BAD_REQUEST``, message ``line too long``) with the
    message going on to name the limit and the setting, so that the sender knows what to
    change. Messages are free text; a client matching the spec's words still finds them
    at the start (no ``|`` and no ``=`` are added)."""
    return b"V1|0|ERR|BAD_REQUEST|line too long: more than %d bytes (the broker's " \
           b"limits.max_line_bytes)\n" % max_line_bytes


def format_list(items: Iterable[object]) -> str:
    """A payload list: ``[a b c]``, space-separated; ``[]`` when empty."""
    return "[" + " ".join(map(str, items)) + "]"


def format_bool(value: bool) -> str:
    """A payload boolean: ``true`` or ``false``."""
    return "true" if value else "false"


def ok(cid: str, payload: str | None = None) -> bytes:
    """``V1|<cid>|OK\\n`` or ``V1|<cid>|OK|<payload>\\n``."""
    if payload is None:
        return f"V1|{cid}|OK\n".encode()
    return f"V1|{cid}|OK|{payload}\n".encode()


def err(cid: str, error: SkerryError) -> bytes:
    """``V1|<cid>|ERR|<CODE>|<message>\\n``; the message is never empty, '|' or newline free."""
    message = message_for(error)
    if not message or "|" in message or "\n" in message or "\r" in message:
        message = (
            message.replace("|", "/").replace("\r", " ").replace("\n", " ").strip()
            or error.description
        )
    return f"V1|{cid}|ERR|{code_for(error)}|{message}\n".encode()


PRODUCE_OK = b"V1|%b|OK|partition=%d offset=%d hw=%d\n"
"""The PRODUCE success line as a ``%`` template over (cid bytes, partition, offset, hw):
what ``produce_ok`` fills, applied in place by a transport answering produces in bulk."""


def _fill_produce_ok_py(tokens: Sequence[Any], partition: int, first_offset: int, hw: int) -> None:
    """Fill a run of PRODUCE slots (``[reply, cid bytes, ...]`` lists, in offset order) with
    their OK replies: token ``i`` went to ``first_offset + i``. The pure-Python twin (the
    reference) of ``broker.v1._cscan.fill_produce_ok``; ``fill_produce_ok`` is whichever
    ``data.speedups`` loaded. ``TypeError`` naming the first token of another shape (the
    tokens before it are filled)."""
    offset = first_offset
    try:
        for token in tokens:
            token[REPLY] = PRODUCE_OK % (token[CID], partition, offset, hw)
            offset += 1
    except (TypeError, IndexError):
        i = offset - first_offset
        raise TypeError(f"token {i} is not a [reply, cid bytes, ...] list") from None


_cscan = speedups.load("broker.v1._cscan")
fill_produce_ok: Callable[[Sequence[Any], int, int, int], None] = (
    _cscan.fill_produce_ok if _cscan is not None else _fill_produce_ok_py)


def produce_ok(cid: bytes, partition: int, offset: int, hw: int) -> bytes:
    """The whole PRODUCE success line, ``V1|<cid>|OK|partition=<n> offset=<n> hw=<n>``, for
    a correlation id still in bytes: the line ``ok(cid, produce_payload(...))`` gives, built
    in one ``%`` (the core answers pipelined produces in bulk through it)."""
    return PRODUCE_OK % (cid, partition, offset, hw)


def produce_payload(partition: int, offset: int, hw: int) -> str:
    """``partition=<n> offset=<n> hw=<n>``."""
    return f"partition={partition} offset={offset} hw={hw}"


def assignment_payload(generation: int, assigned: Sequence[int]) -> str:
    """``generation=<n> assigned=[0 1 2]`` (JOIN and SYNC); ``assigned=[]`` when none."""
    return f"generation={generation} assigned={format_list(assigned)}"


def replica_fetch_payload(
    replica: int, acked_offset: int, hw: int, isr: Sequence[int], under_replicated: bool
) -> str:
    """``replica=<id> acked_offset=<n> hw=<n> isr=[<ids>] under_replicated=<bool>``."""
    return (
        f"replica={replica} acked_offset={acked_offset} hw={hw} isr={format_list(isr)} "
        f"under_replicated={format_bool(under_replicated)}"
    )


def admin_topic_payload(topic: str, partitions: int, replication_factor: int, term: int,
                        index: int) -> str:
    """``topic=<t> partitions=<n> replication_factor=<r> term=<n> index=<n>``
    (ADMIN_CREATE_TOPIC: the seed broker's shape, ``term``/``index`` of the change)."""
    return (f"topic={topic} partitions={partitions} replication_factor={replication_factor} "
            f"term={term} index={index}")


def broker_registered_payload(broker_id: int, host: str, port: int, term: int,
                              index: int) -> str:
    """``broker_id=<id> host=<h> port=<p> term=<n> index=<n>`` (ADMIN_REGISTER_BROKER)."""
    return f"broker_id={broker_id} host={host} port={port} term={term} index={index}"


def broker_heartbeat_payload(broker_id: int, term: int, index: int) -> str:
    """``broker_id=<id> heartbeat=ok term=<n> index=<n>`` (ADMIN_BROKER_HEARTBEAT)."""
    return f"broker_id={broker_id} heartbeat=ok term={term} index={index}"


def partition_leader_payload(topic: str, partition: int, leader: int, isr: Sequence[int],
                             term: int, index: int) -> str:
    """``topic=<t> partition=<p> leader=<id> isr=[<ids>] term=<n> index=<n>``
    (ADMIN_SET_PARTITION_LEADER)."""
    return (f"topic={topic} partition={partition} leader={leader} isr={format_list(isr)} "
            f"term={term} index={index}")


HEARTBEAT_OK = "heartbeat=ok"
"""HEARTBEAT's payload."""
LEFT = "left=true"
"""LEAVE's payload."""
COMMITTED = "committed=true"
"""COMMIT's and ADMIN_COMMIT's payload."""
DELETED = "deleted=true"
"""ADMIN_DELETE_GROUP's payload."""


def format_limit(value: int | None) -> str:
    """A retention or segment setting on the wire: the number, or ``none`` for no limit."""
    return "none" if value is None else str(value)


def group_heartbeat_payload(member_id: str, epoch: int, interval_ms: int,
                            assigned: Iterable[tuple[str, int]],
                            target: Iterable[tuple[str, int]]) -> str:
    """GROUP_HEARTBEAT: ``member=<id> epoch=<n> interval_ms=<n> assigned=[t:p ...]
    target=[t:p ...]``."""
    return (f"member={member_id} epoch={epoch} interval_ms={interval_ms} "
            f"assigned={format_list(f'{t}:{p}' for t, p in assigned)} "
            f"target={format_list(f'{t}:{p}' for t, p in target)}")


def offset_payload(offset: int) -> str:
    """OFFSET: ``offset=<n>``."""
    return f"offset={offset}"


def describe_group_payload(info: Any, coordinator: int | None) -> str:
    """DESCRIBE_GROUP: state, generation, assignor, ``members=[m:p,p ...]``, partitions,
    committed offsets, hw and lag per partition; for a KIP-848 group (``info.type`` ==
    ``"consumer"``) also type, group and assignment epochs, member epochs and pending
    partitions; `` coordinator=<id>`` in a cluster."""
    members = " ".join(f"{m}:{','.join(str(p) for p in parts)}" for m, parts in info.members)
    extra = ""
    if getattr(info, "type", "classic") == "consumer":
        # additive; a classic group's reply is as it always was
        pending = " ".join(f"{m}:{','.join(str(p) for p in parts)}" for m, parts in info.pending)
        extra = (f" type={info.type} group_epoch={info.group_epoch} "
                 f"assignment_epoch={info.assignment_epoch} "
                 f"epochs={format_list(f'{m}:{e}' for m, e in info.member_epochs)} "
                 f"pending=[{pending}]")
    return (f"state={info.state} generation={info.generation} assignor={info.assignor} "
            f"members=[{members}] partitions={format_list(info.partitions)} "
            f"committed={format_list(info.committed)} hw={format_list(info.hw)} "
            f"lag={format_list(info.lag)}" + extra
            + ("" if coordinator is None else f" coordinator={coordinator}"))


def groups_payload(pairs: Iterable[str]) -> str:
    """LIST_GROUPS: ``groups=[<group>:<topic> ...]`` (``pairs`` already ``g:t``)."""
    return "groups=" + format_list(pairs)


def offsets_payload(offsets: dict[int, int]) -> str:
    """ADMIN_RESET_OFFSETS: ``offsets=[<partition>:<offset> ...]``, by partition."""
    return "offsets=" + format_list(f"{p}:{o}" for p, o in sorted(offsets.items()))


def topic_deleted_payload(topic: str) -> str:
    """ADMIN_DELETE_TOPIC: ``topic=<t> deleted=true``."""
    return f"topic={topic} deleted=true"


def topic_partitions_payload(topic: str, partitions: int) -> str:
    """ADMIN_ADD_PARTITIONS: ``topic=<t> partitions=<n>``."""
    return f"topic={topic} partitions={partitions}"


def altered_topic_payload(topic: str, config: Any, named: set[str]) -> str:
    """ADMIN_ALTER_TOPIC: the retention settings, then (additive) the compaction settings
    when the topic is compacted or the request named one, and the segment settings when
    set or named (``named``: the settings the request changed)."""
    payload = (f"topic={topic} retention_ms={format_limit(config.retention_ms)} "
               f"retention_bytes={format_limit(config.retention_bytes)}")
    if config.cleanup_policy != "delete" or named & {"cleanup_policy", "min_compaction_lag_ms",
                                                     "delete_retention_ms"}:
        payload += (f" cleanup_policy={config.cleanup_policy} "
                    f"min_compaction_lag_ms={config.min_compaction_lag_ms} "
                    f"delete_retention_ms={config.delete_retention_ms}")
    for name in ("segment_bytes", "segment_ms"):
        if name in named or getattr(config, name) is not None:
            payload += f" {name}={format_limit(getattr(config, name))}"
    return payload


def topics_payload(names: Iterable[str], brokers: dict[int, Any] | None = None, *,
                   controller: int | None = None, with_controller: bool = False) -> str:
    """METADATA without a topic: ``topics=[...]``; additive in a cluster: every broker's V1
    address (``brokers=[<id>@<host:port> ...]``) and, with etcd, ``controller=<id>`` (-1:
    none known)."""
    payload = "topics=" + format_list(names)
    if brokers is not None:
        payload += " brokers=" + format_list(f"{b}@{a}" for b, a in brokers.items())
        if with_controller:
            payload += f" controller={-1 if controller is None else controller}"
    return payload


def topic_metadata_payload(topic: str, config: Any, roles: Sequence[str], hws: Sequence[int],
                           under: Sequence[bool], summaries: Sequence[Any],
                           leaders: tuple[Sequence[int], Sequence[int]] | None) -> str:
    """METADATA <topic>: partitions, replication settings, per partition role, hw, earliest
    and next offsets, under-replication; additive: record bytes and segment files (for
    ``skerry topics describe``) and, in a cluster, ``leaders=[...] epochs=[...]``."""
    return (f"topic={topic} partitions={config.partitions} "
            f"replication_factor={config.replication_factor} "
            f"min_insync_replicas={config.min_insync_replicas} roles={format_list(roles)} "
            f"hw={format_list(hws)} "
            f"earliest={format_list(ps.first_offset for ps in summaries)} "
            f"next={format_list(ps.next_offset for ps in summaries)} "
            f"under_replicated={format_list(format_bool(u) for u in under)}"
            f" size={format_list(ps.size_bytes for ps in summaries)}"
            f" segments={format_list(ps.segment_count for ps in summaries)}"
            + ("" if leaders is None else
               f" leaders={format_list(leaders[0])} epochs={format_list(leaders[1])}"))


def offsets_range_payload(earliest: int, latest: int, offset: int | None = None,
                          asked: bool = False) -> str:
    """OFFSETS: ``earliest=<n> latest=<n>``; with a timestamp asked, `` offset=<n>`` (-1:
    none at or after it)."""
    payload = f"earliest={earliest} latest={latest}"
    if asked:
        payload += f" offset={-1 if offset is None else offset}"
    return payload


def acls_added_payload(count: int) -> str:
    """ADMIN_ACL_ADD: ``added=<n>``."""
    return f"added={count}"


def acls_payload(entries: Iterable[str], removed: int | None = None) -> str:
    """ADMIN_ACL_LIST: ``acls=[...]``; ADMIN_ACL_REMOVE: ``removed=<n> acls=[...]``
    (``entries``: each binding as ``acl_entry`` writes it)."""
    listed = "acls=" + format_list(entries)
    return listed if removed is None else f"removed={removed} {listed}"


def cluster_metadata_payload(topics: Iterable[str], brokers: Iterable[int]) -> str:
    """``topics=[<names sorted>] brokers=[<ids sorted>]`` (ADMIN_GET_METADATA)."""
    return f"topics={format_list(sorted(topics))} brokers={format_list(sorted(brokers))}"


def role_payload(topic: str, partition: int, role: str, hw: int) -> str:
    """``topic=<name> partition=<n> role=<leader|follower> hw=<n>``."""
    return f"topic={topic} partition={partition} role={role} hw={hw}"


def _epoch_list(entries: Iterable[tuple[int, int]]) -> str:
    return format_list(f"{epoch}:{start}" for epoch, start in entries)


def fetch_reply(cid: str, *, hw: int, start: int, next_offset: int, count: int,
                data: bytes) -> bytes:
    """The whole FETCH success line: ``hw=<n> start=<n> next=<n> count=<n> data=<base64>``.

    ``data`` is the exact on-disk bytes of ``count`` records (docs/storage.md), standard
    base64 with padding (``data=`` when empty); ``next`` is the offset to ask for next.
    """
    return b"V1|%b|OK|hw=%d start=%d next=%d count=%d data=%b\n" % (
        cid.encode(), hw, start, next_offset, count, binascii.b2a_base64(data, newline=False))


def fetch_raw_reply(cid: str, *, hw: int, start: int, next_offset: int, count: int,
                    data: bytes) -> bytes:
    """The FETCH ``enc=raw`` success: the line ``hw=<n> start=<n> next=<n> count=<n>
    size=<n>``, then exactly ``size`` bytes, the records as stored (no base64, no line
    terminator after them; the next reply starts right after)."""
    return b"V1|%b|OK|hw=%d start=%d next=%d count=%d size=%d\n%b" % (
        cid.encode(), hw, start, next_offset, count, len(data), data)


def produce_batch_payload(partition: int, offset: int, count: int, hw: int,
                          duplicates: int | None = None) -> str:
    """``partition=<n> offset=<n> count=<n> hw=<n>`` (PRODUCE_BATCH), then
    ``duplicates=<n>`` when the batch was idempotent (pid/seq)."""
    text = f"partition={partition} offset={offset} count={count} hw={hw}"
    return text if duplicates is None else f"{text} duplicates={duplicates}"


def replica_pull_reply(
    cid: str,
    *,
    epoch: int,
    hw: int,
    leo: int,
    start: int,
    isr: Sequence[int],
    epochs: Iterable[tuple[int, int]],
    count: int,
    data: bytes,
    raw: bool = False,
) -> bytes:
    """The whole REPLICA_PULL success: ``epoch=<n> hw=<n> leo=<n> start=<n> isr=[<ids>]
    epochs=[<epoch>:<start_offset> ...] count=<n>``, then the records.

    ``data`` is the exact on-disk bytes of ``count`` records. Without ``raw`` they end the
    line as ``data=<base64>`` (standard, with padding; ``data=`` when empty), so any value
    travels, commas, pipes and newlines included. With ``raw`` (the ``enc=raw`` form) the
    line ends with ``size=<n>`` and exactly ``n`` bytes follow it as stored (no base64, no
    line terminator after them; the next reply starts right after). ``epochs`` are the
    leader-epoch entries labelling those records; ``leo`` the leader's log end offset
    (exclusive) and ``start`` its first retained offset.
    """
    head = (f"V1|{cid}|OK|epoch={epoch} hw={hw} leo={leo} start={start} "
            f"isr={format_list(isr)} epochs={_epoch_list(epochs)} count={count}").encode()
    if raw:
        return b"%b size=%d\n%b" % (head, len(data), data)
    return b"%b data=%b\n" % (head, binascii.b2a_base64(data, newline=False))


def replica_epoch_payload(
    role: str, epoch: int, confirmed: bool, end_epoch: int, end_offset: int, leo: int, hw: int
) -> str:
    """``role=<leader|follower> epoch=<n> confirmed=<bool> end_epoch=<n> end_offset=<n>
    leo=<n> hw=<n>`` (REPLICA_EPOCH)."""
    return (
        f"role={role} epoch={epoch} confirmed={format_bool(confirmed)} end_epoch={end_epoch} "
        f"end_offset={end_offset} leo={leo} hw={hw}"
    )


def replica_status_payload(
    *,
    role: str,
    epoch: int,
    confirmed: bool,
    hw: int,
    leo: int,
    start: int,
    isr: Sequence[int],
    under_replicated: bool,
    replica: int,
    replicas: Sequence[int],
    leader: int,
    epochs: Iterable[tuple[int, int]],
) -> str:
    """``role= epoch= confirmed= hw= leo= start= isr=[] under_replicated= replica=
    replicas=[<broker ids>] leader=<broker id> epochs=[<epoch>:<start_offset> ...]``
    (REPLICA_STATUS); ``leader=-1`` and ``replica=-1`` when unknown or not a replica."""
    return (
        f"role={role} epoch={epoch} confirmed={format_bool(confirmed)} hw={hw} leo={leo} "
        f"start={start} isr={format_list(isr)} under_replicated={format_bool(under_replicated)} "
        f"replica={replica} replicas={format_list(replicas)} leader={leader} "
        f"epochs={_epoch_list(epochs)}"
    )


_b2a = binascii.b2a_base64


def headers_field(user_headers: bytes, key: bytes | None) -> bytes:
    """A record's headers as one CONSUME field: ``<name b64>.<value b64>`` per header,
    joined by ``;`` (empty when none), the header that carries the V1 key left out (it is
    the key field). Base64, ``.`` and ``;`` never hold ``:``, ``,``, ``|`` or whitespace.
    Undecodable header bytes (never written by Skerry) read as no headers."""
    if not user_headers:
        return b""
    try:
        headers = decode_user_headers(user_headers)
    except ValueError:
        return b""
    parts = []
    for key_kind, name, value_kind, value in headers:
        if key is not None and key_kind == KIND_STRING and name == KEY_HEADER_NAME \
                and value_kind == KIND_STRING and value == key:
            key = None  # the key's own header, once
            continue
        parts.append(_b2a(name, newline=False) + b"." + _b2a(value, newline=False))
    return b";".join(parts)


def consume_reply(
    cid: str, records: Sequence[Any], hw: int, *, b64: bool = False, detail: bool = False,
    headers: bool = False,
) -> tuple[bytes, int]:
    """The whole CONSUME success line and how many of ``records`` it carries.

    ``records`` have ``.offset`` (int), ``.timestamp`` (int, microseconds), ``.payload``
    (bytes) and ``.key`` (bytes or None). Plain form: ``messages=0:created,1:paid hw=1``
    (``messages= hw=<n>`` when empty). ``b64``: every value (and, with ``detail``, every key)
    in standard base64. ``detail``: ``<offset>:<timestamp_ms>:<key>:<value>`` per message;
    with ``headers`` also (records then need ``.origin_timestamp`` and ``.user_headers``)
    ``<offset>:<timestamp_ms>:<producer_timestamp_ms>:<headers>:<key>:<value>``: the time
    the broker appended it, the producer's own time (the append time when it gave none),
    and ``headers_field``. Key and value stay last, as a plain value may hold ``:``.

    A plain reply never carries a value (or, with ``detail``, a key) that breaks the plain
    rule: it stops just before that record, and raises ``BadRequest`` naming the offset and
    ``enc=b64`` when it is the first one.
    """
    items: list[bytes] = []
    append = items.append
    if detail:
        for record in records:
            key = record.key if record.key is not None else b""
            payload = record.payload
            if b64:
                key = _b2a(key, newline=False)
                payload = _b2a(payload, newline=False)
            elif not (is_plain_key(key) and is_plain_value(payload)):
                if not items:
                    raise _not_plain(record.offset, "key or value")
                break
            if headers:
                append(b"%d:%d:%d:%b:%b:%b" % (
                    record.offset, record.timestamp // 1000,
                    (record.origin_timestamp or record.timestamp) // 1000,
                    headers_field(record.user_headers, record.key), key, payload))
            else:
                append(b"%d:%d:%b:%b" % (record.offset, record.timestamp // 1000, key,
                                         payload))
    elif b64:
        for record in records:
            append(b"%d:%b" % (record.offset, _b2a(record.payload, newline=False)))
    else:
        for record in records:
            payload = record.payload
            if not is_plain_value(payload):
                if not items:
                    raise _not_plain(record.offset, "value")
                break
            append(b"%d:%b" % (record.offset, payload))
    line = b"V1|%b|OK|messages=%b hw=%d\n" % (cid.encode(), b",".join(items), hw)
    return line, len(items)


def consume_reply_raw(cid: str, raw: bytes, ends: Sequence[int], first_offset: int, hw: int,
                      *, b64: bool = False) -> bytes | None:
    """``consume_reply`` (plain or ``b64``, not ``detail``) built straight from stored
    records: ``raw`` holds ``len(ends)`` records back to back with dense offsets from
    ``first_offset``, ``ends`` their end positions. The payloads are cut and the line is
    joined by C-level ``map`` over the batch, with no record objects.

    Returns None when a plain reply cannot carry every value (one breaks the plain rule):
    the caller then answers with ``consume_reply``, which stops before that record.
    """
    k = len(ends)
    if k == 0:
        return b"V1|%b|OK|messages= hw=%d\n" % (cid.encode(), hw)
    if b64:
        bodies, stops = payload_spans(raw, ends)
        payloads = map(_b64_no_newline, map(raw.__getitem__, map(slice, bodies, stops)))
        items = b",".join(map(b"%d:%b".__mod__,
                              zip(range(first_offset, first_offset + k), payloads, strict=True)))
    else:
        items = consume_items(raw, ends, first_offset)  # compiled when data.speedups says so
    if not b64:
        # Plain only if the separators are the only commas and nothing else breaks the rule.
        if items.isascii():
            if len(items) - len(items.translate(None, _ASCII_NOT_PLAIN)) != k - 1:
                return None
        elif items.count(b",") != k - 1 or not is_plain_value(items.replace(b",", b"")):
            return None
    return b"V1|%b|OK|messages=%b hw=%d\n" % (cid.encode(), items, hw)


_b64_no_newline = functools.partial(binascii.b2a_base64, newline=False)
_ASCII_NOT_PLAIN = bytes(b for b in range(128) if BAD_VALUE_RE.match(chr(b)))
"""The ASCII bytes a plain value may not hold (whitespace as ``str.split`` sees it, ``,``, ``|``)."""


def _not_plain(offset: int, what: str) -> BadRequest:
    return BadRequest(
        f"message at offset {offset} has a {what} that cannot be sent as plain text "
        "(whitespace, a comma, a pipe or invalid UTF-8); read it with enc=b64"
    )
