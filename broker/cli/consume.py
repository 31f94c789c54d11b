"""``skerry consume``: print a topic's messages, from an offset or a time, once or following,
alone or as a member of a consumer group.

Owns: where reading starts (``--offset``, ``--from-beginning``, ``--from-timestamp`` through
``OFFSETS ts=``, a group's committed offsets), the read loops (one connection per partition
when following, so one idle partition's long poll never delays another), the group member
(JOIN and SYNC, HEARTBEAT on its own connection every third of the session timeout, re-JOIN
after GENERATION_MISMATCH, COMMIT after each printed batch, LEAVE on the way out, Ctrl-C
included), and the output formats: plain values, one JSON object per line, or a
kcat-style ``-f`` format string (``compile_format``). In a cluster each partition is read
from its leader (``_leaders``).

Every read asks for ``detail=true enc=b64``, so any stored bytes arrive intact, and
``headers=true`` when the output shows a timestamp or headers: a message's timestamp is
the producer's own (``producer_timestamp_ms``), never the broker's append time passed off
as it (that one is ``%A`` and ``"append_time"``). The JSON form carries a value (and a key,
a header value) as UTF-8 text when it decodes, else as base64 with ``"value_encoding":
"base64"`` (``"key_encoding"``).

Must not import: Twisted or the broker's server side; it speaks V1 through
``broker.client.aio`` only.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, BinaryIO, TextIO

from broker.cli.explain import unknown_topic
from broker.client.aio import (
    Address,
    BrokerError,
    Connection,
    Message,
    ToolError,
    parse_address,
    parse_detail_messages,
)
from broker.client.codec import ClusterMap, parse_brokers

__all__ = [
    "ConsumeOptions",
    "ConsumeSummary",
    "consume",
    "compile_format",
    "format_message",
    "parse_timestamp",
]

_BATCH = 500
"""``max=`` of each CONSUME (the broker's own limits still apply)."""
_TOPIC_POLL_S = 0.5
"""How often ``--follow`` looks again for a topic that does not exist yet."""


@dataclass(frozen=True)
class ConsumeOptions:
    address: Address
    topic: str
    partition: int | None = None
    offset: str | None = None
    """``earliest``, ``latest`` or a number; None: earliest, or latest with ``follow``."""
    from_timestamp_ms: int | None = None
    follow: bool = False
    max_messages: int | None = None
    group: str | None = None
    consumer_id: str | None = None
    session_timeout_ms: int = 10_000
    output_format: str = "plain"
    """``plain``, ``json``, or a kcat-style format string (``compile_format``)."""
    print_key: bool = False
    """Plain format: the key and a tab before each value."""
    print_timestamp: bool = False
    """Plain format: the producer's timestamp (ms) and a tab first."""
    print_headers: bool = False
    """Plain format: the headers (``name:value,...`` or ``NO_HEADERS``) and a tab, after
    the timestamp and before the key."""

    @property
    def wants_headers(self) -> bool:
        """Whether reads ask for ``headers=true`` (producer timestamps and headers)."""
        return self.output_format != "plain" or self.print_timestamp or self.print_headers
    wait_ms: int = 1000
    """Long-poll time of each CONSUME while following."""
    timeout: float = 10.0


@dataclass
class ConsumeSummary:
    consumed: int = 0
    interrupted: bool = False
    output_closed: bool = False
    committed: dict[int, int] | None = None
    """With a group: the offsets this run committed, by partition."""

    def line(self, options: ConsumeOptions) -> str:
        noun = "message" if self.consumed == 1 else "messages"
        text = f"consumed {self.consumed} {noun} from {options.topic}"
        if options.group is not None:
            text += f" as {_member_id(options)} in group {options.group}"
        return text


def parse_timestamp(text: str, flag: str = "--from-timestamp") -> int:
    """Milliseconds since the epoch from digits or ISO-8601 (``2024-05-01T12:00:00Z``;
    without a zone the local time zone applies).

    >>> parse_timestamp("1700000000123")
    1700000000123
    >>> parse_timestamp("2023-11-14T22:13:20.123Z")
    1700000000123
    """
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError(f"{flag} must be milliseconds since the epoch or an "
                        f"ISO-8601 time such as 2024-05-01T12:00:00Z, not {text!r}", 2) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return round(moment.timestamp() * 1000)


def _text_or_b64(data: bytes) -> tuple[str, bool]:
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), True


def _timestamp(message: Message) -> int:
    """The message's own timestamp: the producer's; the append time from a broker that
    does not send it."""
    if message.producer_timestamp_ms is not None:
        return message.producer_timestamp_ms
    return message.timestamp_ms if message.timestamp_ms is not None else -1


def _plain_headers(message: Message) -> bytes:
    """kafka-console-consumer's ``print.headers`` form: ``name:value,...``, or
    ``NO_HEADERS``."""
    if not message.headers:
        return b"NO_HEADERS"
    return b",".join(name + b":" + value for name, value in message.headers)


_FIELDS: dict[str, Callable[[Message, str], bytes]] = {
    "t": lambda m, topic: topic.encode(),
    "p": lambda m, topic: b"%d" % m.partition,
    "o": lambda m, topic: b"%d" % m.offset,
    "k": lambda m, topic: m.key,
    "K": lambda m, topic: b"%d" % len(m.key),
    "s": lambda m, topic: m.value,
    "S": lambda m, topic: b"%d" % len(m.value),
    "T": lambda m, topic: b"%d" % _timestamp(m),
    "A": lambda m, topic: b"%d" % (m.timestamp_ms if m.timestamp_ms is not None else -1),
    "h": lambda m, topic: b",".join(n + b"=" + v for n, v in m.headers),
}
FORMAT_TOKENS = ("%t topic, %p partition, %o offset, %k key, %K key length, %s value, "
                 "%S value length, %T the producer's timestamp (ms), %A the broker's append "
                 "time (ms), %h headers (name=value,...), %% a %; \\n \\t \\r \\\\ "
                 "escapes")
"""What a ``--format`` string may hold (kcat's ``-f``, plus ``%A``)."""
_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\"}

Formatter = Callable[[Message, str], bytes]


def compile_format(text: str) -> Formatter:
    """A kcat-style format string as a function of (message, topic) -> bytes: ``%`` tokens
    (``FORMAT_TOKENS``) and backslash escapes; nothing is added (end it with ``\\n``).
    ``ToolError`` (exit 2) for an unknown token.

    >>> compile_format("%p:%o %k=%s @%T\\\\n")(Message(2, 7, 5, b"u1", b"paid", 4), "t")
    b'2:7 u1=paid @4\\n'
    """
    parts: list[bytes | Callable[[Message, str], bytes]] = []
    literal = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        if char in "%\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if char == "%" and nxt == "%":
                literal += b"%"
            elif char == "%" and nxt in _FIELDS:
                if literal:
                    parts.append(bytes(literal))
                    literal.clear()
                parts.append(_FIELDS[nxt])
            elif char == "\\" and nxt in _ESCAPES:
                literal += _ESCAPES[nxt]
            elif char == "%":
                raise ToolError(f"--format: unknown token %{nxt}; use {FORMAT_TOKENS}", 2)
            else:
                literal += char.encode()
                i += 1
                continue
            i += 2
            continue
        if char == "%":
            raise ToolError("--format: a lone % at the end; write %% for a % sign", 2)
        literal += char.encode()
        i += 1
    if literal:
        parts.append(bytes(literal))

    def render(message: Message, topic: str) -> bytes:
        return b"".join(part if isinstance(part, bytes) else part(message, topic)
                        for part in parts)

    return render


def _json_headers(message: Message) -> list[dict[str, str]]:
    out = []
    for name, value in message.headers:
        text, b64 = _text_or_b64(value)
        header = {"key": name.decode("utf-8", "replace"), "value": text}
        if b64:
            header["value_encoding"] = "base64"
        out.append(header)
    return out


def format_message(message: Message, output_format: str, *, print_key: bool = False,
                   print_timestamp: bool = False, print_headers: bool = False,
                   topic: str = "") -> bytes:
    """One output line. Plain: the value's bytes as they are, after the producer's
    timestamp (ms) and a tab with ``print_timestamp``, the headers and a tab with
    ``print_headers`` and the key's bytes and a tab with ``print_key`` (as
    kafka-console-consumer's ``print.timestamp``, ``print.headers`` and ``print.key``).
    JSON: an object with ``partition``, ``offset``, ``timestamp`` (the producer's, ms),
    ``append_time`` (the broker's, ms; when known), ``key``, ``value`` and, when there are
    any, ``headers``. Anything else is a ``compile_format`` string.

    >>> format_message(Message(2, 0, 1700000000999, b"user1", b"created", 1700000000123),
    ...                "plain", print_key=True, print_timestamp=True)
    b'1700000000123\\tuser1\\tcreated\\n'

    >>> format_message(Message(2, 0, 1700000000999, b"user1", b"created", 1700000000123),
    ...                "json")
    b'{"partition": 2, "offset": 0, "timestamp": 1700000000123, "append_time": 1700000000999, "key": "user1", "value": "created"}\\n'
    >>> format_message(Message(0, 5, 1, b"", b"\\xff\\x00"), "json")
    b'{"partition": 0, "offset": 5, "timestamp": 1, "key": "", "value": "/wA=", "value_encoding": "base64"}\\n'
    """
    if output_format == "plain":
        line = message.value + b"\n"
        if print_key:
            line = message.key + b"\t" + line
        if print_headers:
            line = _plain_headers(message) + b"\t" + line
        if print_timestamp:
            line = b"%d\t" % _timestamp(message) + line
        return line
    if output_format != "json":
        return compile_format(output_format)(message, topic)
    key, key_b64 = _text_or_b64(message.key)
    value, value_b64 = _text_or_b64(message.value)
    document: dict[str, Any] = {"partition": message.partition, "offset": message.offset,
                                "timestamp": _timestamp(message)}
    if message.producer_timestamp_ms is not None:
        document["append_time"] = message.timestamp_ms
    document.update(key=key, value=value)
    if key_b64:
        document["key_encoding"] = "base64"
    if value_b64:
        document["value_encoding"] = "base64"
    if message.headers:
        document["headers"] = _json_headers(message)
    return (json.dumps(document, ensure_ascii=False) + "\n").encode("utf-8")


def _member_id(options: ConsumeOptions) -> str:
    if options.consumer_id:
        return options.consumer_id
    host = "".join(c if c.isalnum() or c in "._-" else "-" for c in socket.gethostname())
    return f"skerry-cli-{host[:40] or 'host'}-{os.getpid()}"


class _Printer:
    """Writes messages to the output, stops at ``--max-messages``, notices a closed pipe."""

    def __init__(self, out: BinaryIO, options: ConsumeOptions) -> None:
        self._out = out
        self._options = options
        self._render = None if options.output_format in ("plain", "json") \
            else compile_format(options.output_format)
        limit = self._limit = options.max_messages
        self.count = 0
        self.closed = False
        self.finished = asyncio.Event()
        if limit == 0:
            self.finished.set()

    @property
    def done(self) -> bool:
        return self.finished.is_set()

    def emit(self, messages: Sequence[Message]) -> int:
        """Print what the limit allows; returns how many were printed (and flushed)."""
        if self.done:
            return 0
        if self._limit is not None:
            messages = messages[: self._limit - self.count]
        o = self._options
        if self._render is not None:
            data = b"".join(self._render(m, o.topic) for m in messages)
        else:
            data = b"".join(format_message(m, o.output_format, print_key=o.print_key,
                                           print_timestamp=o.print_timestamp,
                                           print_headers=o.print_headers) for m in messages)
        try:
            self._out.write(data)
            self._out.flush()
        except BrokenPipeError:
            self.closed = True
            self.finished.set()
            return 0
        self.count += len(messages)
        if self._limit is not None and self.count >= self._limit:
            self.finished.set()
        return len(messages)


Committer = Callable[[Connection, int, int], Awaitable[bool]]
"""``commit(conn, partition, next_offset)``: False when the group moved on (rejoin)."""


async def _read_partition(conn: Connection, options: ConsumeOptions, partition: int,
                          offset: int, printer: _Printer, follow: bool,
                          commit: Committer | None = None,
                          stop: asyncio.Event | None = None) -> int:
    """Print ``partition`` from ``offset``: until a read comes back empty (or, following,
    forever), the printer is done, or ``stop`` is set. Returns the next offset."""
    extra = f" wait_ms={options.wait_ms}" if follow else ""
    headers = options.wants_headers
    if headers:
        extra += " headers=true"
    timeout = options.timeout + (options.wait_ms / 1000.0 if follow else 0.0)
    while not printer.done and not (stop is not None and stop.is_set()):
        reply = await conn.request(
            "CONSUME", f"{options.topic} {partition} {offset} max={_BATCH} enc=b64 "
                       f"detail=true{extra}", timeout=timeout)
        messages = parse_detail_messages(reply, partition, headers)
        if not messages:
            if follow:
                continue
            break
        printed = printer.emit(messages)
        if not printed:
            break
        offset = messages[printed - 1].offset + 1
        if commit is not None and not await commit(conn, partition, offset):
            break
    return offset


async def _partitions(conn: Connection, topic: str, wait: bool = False,
                      err: TextIO | None = None) -> tuple[int, bool]:
    """The topic's partition count, and whether it had to be waited for. An unknown topic
    is ``ToolError``, or with ``wait`` looked for again every ``_TOPIC_POLL_S`` (METADATA
    never creates it) after one line on ``err``, as kafka-console-consumer waits."""
    waited = False
    while True:
        reply = await conn.request("METADATA", topic, check=False)
        if reply.ok:
            return reply.number("partitions"), waited
        if reply.payload != "unknown topic":
            raise BrokerError(reply.code or "?", reply.payload, "METADATA")
        if not wait:
            raise ToolError(unknown_topic(topic, "; `--follow` waits for it"))
        if not waited and err is not None:
            print(f"skerry consume: topic {topic} does not exist yet; waiting for it to be "
                  "created (Ctrl-C to stop)", file=err, flush=True)
        waited = True
        await asyncio.sleep(_TOPIC_POLL_S)


async def _start_offsets(conn: Connection, options: ConsumeOptions,
                         partitions: Sequence[int]) -> dict[int, int]:
    topic = options.topic
    if options.from_timestamp_ms is not None:
        futures = [conn.send("OFFSETS", f"{topic} {p} ts={options.from_timestamp_ms}")
                   for p in partitions]
        starts = {}
        for p, future in zip(partitions, futures, strict=True):
            reply = await conn.wait(future, "OFFSETS")
            found = reply.number("offset")
            starts[p] = found if found >= 0 else reply.number("latest")
        return starts
    where = options.offset or ("latest" if options.follow else "earliest")
    if where == "earliest":
        return dict.fromkeys(partitions, 0)  # the broker reads from the earliest retained
    if where == "latest":
        futures = [conn.send("OFFSETS", f"{topic} {p}") for p in partitions]
        return {p: (await conn.wait(f, "OFFSETS")).number("latest")
                for p, f in zip(partitions, futures, strict=True)}
    return dict.fromkeys(partitions, int(where))


async def _until_finished(tasks: Sequence[asyncio.Task[Any]],
                          *events: asyncio.Event) -> None:
    """Wait until every task ended or any event is set; then cancel what still runs and
    re-raise the first task failure."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        pending = set(tasks)
        while pending:
            done, _ = await asyncio.wait({*pending, *waiters},
                                         return_when=asyncio.FIRST_COMPLETED)
            pending -= done
            for task in done:
                if task in tasks and not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            if any(w in done for w in waiters):
                break
    finally:
        for item in [*tasks, *waiters]:
            item.cancel()
        await asyncio.gather(*tasks, *waiters, return_exceptions=True)


async def _leaders(conn: Connection, options: ConsumeOptions) -> dict[int, Address]:
    """In a cluster (METADATA lists brokers): each partition's leader's address, where
    reads see every committed message first (a follower's ``hw`` trails by a fetch). Empty
    for a single broker, or when a leader is unknown (that partition is read from the
    bootstrap broker: any replica serves CONSUME)."""
    listing = await conn.request("METADATA", check=False)
    brokers = parse_brokers(listing) if listing.ok else {}
    if not brokers:
        return {}
    routes = ClusterMap(options.topic)
    routes.brokers.update(brokers)
    reply = await conn.request("METADATA", options.topic, check=False)
    if reply.ok:
        routes.update_topic(reply)
    out = {}
    for partition in range(routes.partitions):
        address = routes.leader_address(partition)
        if address is not None:
            base = parse_address(address)
            out[partition] = Address(base.host, base.port, options.address.user,
                                     options.address.token, options.address.tls)
    return out


async def _follow(options: ConsumeOptions, offsets: dict[int, int], printer: _Printer,
                  commit: Committer | None = None,
                  stop: asyncio.Event | None = None,
                  leaders: dict[int, Address] | None = None) -> None:
    """Read every partition of ``offsets`` at once, each on its own connection (to the
    partition's leader when ``leaders`` names it)."""
    where = leaders or {}
    conns = [await Connection.open(where.get(p, options.address), options.timeout)
             for p in offsets]
    try:
        tasks = [asyncio.ensure_future(_read_partition(c, options, p, o, printer, True,
                                                       commit, stop))
                 for c, (p, o) in zip(conns, offsets.items(), strict=True)]
        events = [printer.finished] + ([stop] if stop is not None else [])
        await _until_finished(tasks, *events)
    finally:
        for c in conns:
            await c.close()


class _Member:
    """This tool as a member of a consumer group on one topic."""

    def __init__(self, options: ConsumeOptions, conn: Connection) -> None:
        assert options.group is not None
        self.options = options
        self.group = options.group
        self.member_id = _member_id(options)
        self.conn = conn
        self.generation = -1
        self.assigned: list[int] = []
        self.rebalance = asyncio.Event()
        self.committed: dict[int, int] = {}

    def _ids(self) -> str:
        return f"{self.group} {self.options.topic} {self.member_id}"

    async def join(self) -> None:
        """JOIN (a current member gets the current generation back), then SYNC."""
        self.rebalance.clear()
        joined = await self.conn.request(
            "JOIN", f"{self._ids()} session_timeout_ms={self.options.session_timeout_ms}")
        generation = joined.number("generation")
        synced = await self.conn.request("SYNC", f"{self._ids()} {generation}", check=False)
        if not synced.ok:
            if synced.code == "GENERATION_MISMATCH":  # moved on between the two: again
                self.rebalance.set()
                self.generation, self.assigned = generation, []
                return
            raise BrokerError(synced.code or "?", synced.payload, "SYNC")
        self.generation = synced.number("generation")
        self.assigned = synced.ints("assigned")

    async def committed_offsets(self) -> dict[int, int]:
        futures = [self.conn.send("OFFSET", f"{self.group} {self.options.topic} {p}")
                   for p in self.assigned]
        return {p: (await self.conn.wait(f, "OFFSET")).number("offset")
                for p, f in zip(self.assigned, futures, strict=True)}

    async def heartbeats(self) -> None:
        """HEARTBEAT every third of the session timeout on a connection of its own (long
        polls on the others never delay it); a GENERATION_MISMATCH asks for a rejoin."""
        interval = self.options.session_timeout_ms / 3000.0
        conn = await Connection.open(self.options.address, self.options.timeout)
        try:
            while True:
                await asyncio.sleep(interval)
                generation = self.generation
                reply = await conn.request("HEARTBEAT", f"{self._ids()} {generation}",
                                           check=False)
                if not reply.ok:
                    if reply.code != "GENERATION_MISMATCH":
                        raise BrokerError(reply.code or "?", reply.payload, "HEARTBEAT")
                    if generation == self.generation:
                        self.rebalance.set()
        finally:
            await conn.close()

    async def commit(self, conn: Connection, partition: int, offset: int) -> bool:
        reply = await conn.request(
            "COMMIT", f"{self._ids()} {self.generation} {partition} {offset}", check=False)
        if reply.ok:
            self.committed[partition] = offset
            return True
        if reply.code == "GENERATION_MISMATCH":
            self.rebalance.set()
            return False
        raise BrokerError(reply.code or "?", reply.payload, "COMMIT")

    async def leave(self) -> None:
        """LEAVE with the current generation (looked up again if ours is stale)."""
        if self.generation < 0 or self.conn.closed:
            return
        reply = await self.conn.request("LEAVE", f"{self._ids()} {self.generation}",
                                        check=False)
        if reply.ok or reply.code != "GENERATION_MISMATCH":
            return
        described = await self.conn.request("DESCRIBE_GROUP",
                                            f"{self.group} {self.options.topic}", check=False)
        if described.ok and any(m.split(":", 1)[0] == self.member_id
                                for m in described.items("members")):
            await self.conn.request(
                "LEAVE", f"{self._ids()} {described.number('generation')}", check=False)


async def _consume_group(options: ConsumeOptions, conn: Connection,
                         printer: _Printer) -> dict[int, int]:
    """Consume as a group member until the printer is done or (without ``follow``) the
    assigned partitions are read to their end in one generation; always LEAVE."""
    member = _Member(options, conn)
    heartbeats: asyncio.Task[None] | None = None
    try:
        await member.join()
        heartbeats = asyncio.ensure_future(member.heartbeats())
        while not printer.done:
            if member.rebalance.is_set():
                await member.join()
                continue
            offsets = await member.committed_offsets()
            if options.follow:
                await _follow_generation(options, offsets, printer, member, heartbeats)
                continue
            for partition, offset in offsets.items():
                await _read_partition(conn, options, partition, offset, printer, False,
                                      member.commit, member.rebalance)
                if member.rebalance.is_set() or printer.done:
                    break
            if not member.rebalance.is_set():
                break
    finally:
        if heartbeats is not None:
            heartbeats.cancel()
            await asyncio.gather(heartbeats, return_exceptions=True)
        await member.leave()
    return member.committed


async def _follow_generation(options: ConsumeOptions, offsets: dict[int, int],
                             printer: _Printer, member: _Member,
                             heartbeats: asyncio.Task[None]) -> None:
    """Follow the partitions of one generation until it ends (a rebalance), the printer is
    done, or a reader or the heartbeats fail (their error is raised)."""
    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(member.rebalance.wait()),
                                        asyncio.ensure_future(printer.finished.wait())]
    reader = None
    if offsets:
        reader = asyncio.ensure_future(
            _follow(options, offsets, printer, member.commit, member.rebalance))
        waits.append(reader)
    try:
        done, _ = await asyncio.wait({*waits, heartbeats}, return_when=asyncio.FIRST_COMPLETED)
        for task in (reader, heartbeats):
            if task is not None and task in done and not task.cancelled() \
                    and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


async def consume(options: ConsumeOptions, out: BinaryIO,
                  err: TextIO | None = None) -> ConsumeSummary:
    """Print messages to ``out`` as ``options`` asks; Ctrl-C (cancellation) ends it cleanly:
    a group member commits what it printed and leaves. Following a topic that does not
    exist yet waits for it (a note on ``err``), then reads it from its start."""
    printer = _Printer(out, options)
    summary = ConsumeSummary()
    conn = await Connection.open(options.address, options.timeout)
    opened: list[Connection] = []
    try:
        count, appeared = await _partitions(conn, options.topic, options.follow, err)
        if appeared and options.offset is None and options.from_timestamp_ms is None:
            # Everything in a topic that appeared while we waited is new to this run.
            options = replace(options, offset="earliest")
        if options.partition is not None and options.partition >= count:
            raise ToolError(f"partition {options.partition} out of range; topic "
                            f"{options.topic} has {count} partitions", 2)
        if options.group is not None:
            summary.committed = await _consume_group(options, conn, printer)
        else:
            partitions = [options.partition] if options.partition is not None \
                else list(range(count))
            offsets = await _start_offsets(conn, options, partitions)
            leaders = await _leaders(conn, options)
            if options.follow:
                await _follow(options, offsets, printer, leaders=leaders)
            else:
                for partition in partitions:
                    target = conn
                    if partition in leaders:
                        target = await Connection.open(leaders[partition], options.timeout)
                        opened.append(target)
                    await _read_partition(target, options, partition, offsets[partition],
                                          printer, False)
                    if printer.done:
                        break
    except asyncio.CancelledError:
        summary.interrupted = True
    finally:
        await conn.close()
        for other in opened:
            await other.close()
    summary.consumed = printer.count
    summary.output_closed = printer.closed
    return summary
