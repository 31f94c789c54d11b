"""``skerry produce``: lines from stdin to a topic, pipelined, with a progress bar and a summary.

Owns: turning input lines into PRODUCE requests (``key:value`` split at the first ``:``, or
whole lines as values with ``--key``; a value that is not a plain V1 value goes with
``enc=b64`` automatically), reading stdin on a thread so a slow pipe or a person typing is
sent line by line while a fast file is sent in big batches, keeping at most ``window``
requests in flight on one connection, the progress bar (tqdm on stderr: only when stdin is
a file or a pipe and stderr is a terminal), and the summary line and exit code. A refusal
that every later line would get too (``broker.cli.explain.ends_produce``: authentication,
an unknown topic the broker will not create, an over-long line...) stops the run at the
first line it meets, told once in the summary with what to do and the line to resume
from; refusals about one line are printed per line (in words, ``explain_reply``). In a
cluster (the broker's METADATA lists brokers) each line goes to its partition's leader and a
NOT_LEADER answer sends it again where the leader is (``_produce_routed``; routing state in
the client codec's ``ClusterMap``).

Must not import: Twisted or the broker's server side. The plain-key and plain-value rules
(what needs ``enc=b64``) come from the client codec, ``broker.client.codec``.
"""

from __future__ import annotations

import asyncio
import base64
import os
import stat
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any, BinaryIO, TextIO

from broker.cli.explain import elect_hint, ends_produce, explain_reply
from broker.client.aio import Address, Connection, ConnectionLost, Reply, ToolError, parse_address
from broker.client.codec import (
    ClusterMap,
    is_plain_key,
    is_plain_value,
    parse_brokers,
    parse_leader_hint,
)

__all__ = ["ProduceOptions", "ProduceSummary", "produce", "request_args", "count_lines"]

_CHUNK = 1 << 16
_MAX_ERRORS_SHOWN = 20


class _Halt(Exception):
    """A refusal every later line would get too (``broker.cli.explain.ends_produce``): the
    run stops there; ``summary.stopped`` says why and what to do."""


@dataclass(frozen=True)
class ProduceOptions:
    address: Address
    topic: str
    key: bytes | None = None
    """With a key, every line is a value under this key; without, lines are key:value."""
    acks: str = "1"
    partition: int | None = None
    window: int = 5000
    """Requests in flight at most (sent, not yet answered)."""
    progress: bool | None = None
    """None: a bar when stdin is a file or a pipe and stderr a terminal; False: never."""
    quiet: bool = False
    timeout: float = 30.0


@dataclass
class ProduceSummary:
    produced: int = 0
    """Messages the broker acknowledged (answered OK)."""
    errors: int = 0
    """Lines refused: by this tool (not ``key:value``, ...) or by the broker (``ERR``)."""
    seconds: float = 0.0
    stopped: str | None = None
    """Why the run ended early (the connection was lost, Ctrl-C, a refusal every later
    line would share: ``line N: <what to do>``), or None."""
    interrupted: bool = False
    last_acknowledged: int = 0
    """Input line number of the last message the broker acknowledged; 0: none."""
    resume_line: int = 1
    """The first input line not dealt with: every line before it was acknowledged,
    refused or skipped, so sending again from here loses nothing."""
    unanswered: list[int] = field(default_factory=list)
    """Input lines sent but never answered (the connection was lost): stored or not,
    nobody knows; they are from ``resume_line`` on, so a resend repeats the stored ones."""

    def line(self, topic: str) -> str:
        rate = self.produced / max(self.seconds, 1e-3)
        noun = "message" if self.produced == 1 else "messages"
        text = (f"produced {self.produced} {noun} to {topic} in {self.seconds:.2f} s "
                f"({rate:,.0f} msgs/s); {self.errors} error{'' if self.errors == 1 else 's'}")
        if self.stopped:
            text += f"; stopped: {self.stopped}"
            if self.unanswered:
                count = len(self.unanswered)
                text += (f"; {count} message{'' if count == 1 else 's'} sent without an "
                         f"answer (lines {self.unanswered[0]}-{self.unanswered[-1]}), "
                         "stored or not")
            last = self.last_acknowledged
            text += (f"; last acknowledged line {last}" if last else "; no line acknowledged")
            text += f", resume from line {self.resume_line}"
        return text


def request_args(topic: str, line: bytes, key: bytes | None, acks: str,
                 partition: int | None) -> bytes:
    """The PRODUCE arguments for one input line; ``ToolError`` when it cannot be sent.

    >>> request_args("orders", b"user1:created", None, "1", None)
    b'orders user1:created'
    >>> request_args("orders", b"hello world", b"k", "all", 2)
    b'orders k:aGVsbG8gd29ybGQ= enc=b64 acks=all partition=2'
    """
    if key is None:
        key, sep, value = line.partition(b":")
        if not sep:
            raise ToolError("no ':' between key and value (write key:value, or give --key "
                            "to send whole lines as values)")
        if not is_plain_key(key):
            raise ToolError("the key has whitespace, ',', '|' or ':' or is not UTF-8 "
                            "(keys travel as plain text)")
    else:
        value = line
    if is_plain_value(value):
        args = b"%b %b:%b" % (topic.encode(), key, value)
    else:
        args = b"%b %b:%b enc=b64" % (topic.encode(), key, base64.b64encode(value))
    if acks != "1":
        args += b" acks=" + acks.encode()
    if partition is not None:
        args += b" partition=%d" % partition
    return args


def count_lines(stream: IO[bytes]) -> int | None:
    """Lines left in ``stream`` when it is a regular file (read with ``pread``, so its
    position does not move), else None."""
    try:
        fd = stream.fileno()
        info = os.fstat(fd)
        position = stream.tell()  # the stream's own position (a buffer may read ahead)
    except (OSError, ValueError, AttributeError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    count = 0
    last = b"\n"
    while True:
        chunk = os.pread(fd, 1 << 20, position)
        if not chunk:
            break
        count += chunk.count(b"\n")
        last = chunk[-1:]
        position += len(chunk)
    return count + (last != b"\n")


def _show_progress(options: ProduceOptions, stdin: IO[bytes], err: TextIO) -> bool:
    if options.progress is False or options.quiet:
        return False
    try:
        return not stdin.isatty() and err.isatty()
    except (AttributeError, ValueError):
        return False


def _read_stdin(stream: BinaryIO, loop: asyncio.AbstractEventLoop,
                queue: asyncio.Queue[list[bytes] | BaseException | None],
                slots: threading.Semaphore, stop: threading.Event) -> None:
    """Thread body: push lists of complete lines (``\\n`` removed) as they arrive, then
    None at the end (or the exception that ended reading). Each push takes one of
    ``slots``, which the loop gives back when it takes the item off ``queue``."""
    # os.read on the descriptor when there is one: a thread blocked in the buffered
    # object's read would hold its lock, and the interpreter's exit (after Ctrl-C) waits
    # for that lock.
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    read = getattr(stream, "read1", stream.read) if fd is None \
        else (lambda size: os.read(fd, size))

    def put(item: list[bytes] | BaseException | None) -> None:
        # No coroutine is made here: one made for a loop that closes before running it
        # (Ctrl-C) would be reported as "never awaited" at exit.
        while not slots.acquire(timeout=0.5):
            if stop.is_set():
                return
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is gone
            return

    tail = b""
    try:
        while not stop.is_set():
            chunk = read(_CHUNK)
            if not chunk:
                break
            lines = (tail + chunk).split(b"\n") if tail else chunk.split(b"\n")
            tail = lines.pop()
            if lines:
                put(lines)
        if tail:
            put([tail])
        put(None)
    except (OSError, ValueError) as exc:
        put(exc)


class _Progress:
    """A tqdm bar on stderr, or nothing; errors printed through it so the bar stays whole."""

    def __init__(self, show: bool, total: int | None, err: TextIO, topic: str) -> None:
        self._err = err
        self._bar: Any = None
        if show:
            from tqdm import tqdm

            try:
                width = os.get_terminal_size(err.fileno()).columns
            except (OSError, ValueError, AttributeError):
                width = 0
            # A terminal that reports no width (some ptys) still gets an 80-column bar.
            self._bar = tqdm(total=total, unit="msg", unit_scale=True, file=err,
                             desc=f"produce {topic}", mininterval=0.2, leave=False,
                             dynamic_ncols=width > 0, ncols=None if width > 0 else 80,
                             nrows=None if width > 0 else 24)

    def update(self, count: int) -> None:
        if self._bar is not None and count:
            self._bar.update(count)

    def write(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text, file=self._err)
        else:
            print(text, file=self._err, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


async def produce(options: ProduceOptions, stdin: BinaryIO, err: TextIO,
                  clock: Callable[[], float] = time.monotonic) -> ProduceSummary:
    """Send every line of ``stdin``; returns the counts (errors are printed to ``err``).

    When the broker belongs to a cluster (its METADATA lists brokers), each message goes to
    its partition's leader instead (``_produce_routed``)."""
    conn = await Connection.open(options.address, options.timeout)
    try:
        listing = await conn.request("METADATA", check=False)
        brokers = parse_brokers(listing) if listing.ok else {}
    except ToolError:
        await conn.close()
        raise
    if brokers:
        return await _produce_routed(options, stdin, err, clock, conn, brokers)
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[list[bytes] | BaseException | None] = asyncio.Queue()
    slots = threading.Semaphore(8)  # chunks read ahead at most
    stop = threading.Event()
    show = _show_progress(options, stdin, err)
    progress = _Progress(show, count_lines(stdin) if show else None, err, options.topic)
    summary = ProduceSummary()
    shown = 0

    def report(lineno: int, text: str) -> None:
        nonlocal shown
        summary.errors += 1
        shown += 1
        if shown <= _MAX_ERRORS_SHOWN:
            progress.write(f"skerry produce: line {lineno}: {text}")
        elif shown == _MAX_ERRORS_SHOWN + 1:
            progress.write("skerry produce: (more errors; only the count is shown from now)")

    # Sent and not answered yet, oldest first: (input line numbers, their answers).
    inflight: deque[tuple[list[int], asyncio.Future[list[Reply]]]] = deque()
    in_flight = 0
    piece = max(1, options.window // 4)
    lineno = 0
    sent_through = 0  # every input line up to this one was sent (or skipped and reported)

    halt_line = 0  # the first line refused for a reason every later line shares

    def account(numbers: list[int], replies: list[Reply]) -> None:
        nonlocal halt_line
        for number, reply in zip(numbers, replies, strict=True):
            if reply.ok:
                summary.produced += 1
                summary.last_acknowledged = number
            elif halt_line:
                continue  # after the stop: the same refusal again, not news
            elif ends_produce(reply.code or "", reply.payload):
                halt_line = number
                summary.errors += 1
                summary.stopped = f"line {number}: {explain_reply(reply, options.topic)}"
            else:
                report(number, explain_reply(reply, options.topic))
        progress.update(len(numbers))

    async def settle(limit: int) -> None:
        """Account answers until at most ``limit`` requests are in flight (and take every
        answer already there)."""
        nonlocal in_flight
        while inflight and (in_flight > limit or inflight[0][1].done()):
            numbers, future = inflight[0]
            replies = await conn.result(future, "PRODUCE")
            inflight.popleft()  # only once answered: a wait cut short leaves it in place
            in_flight -= len(numbers)
            halted = bool(halt_line)
            account(numbers, replies)
            if halt_line and not halted:
                raise _Halt

    def unanswered() -> None:
        """Account what is still in flight when the run ends early: the answers of a batch
        that arrived before the connection went are counted, the rest is unanswered."""
        while inflight:
            numbers, future = inflight.popleft()
            replies: list[Reply] = []
            if future.done() and not future.cancelled():
                exc = future.exception()
                if exc is None:
                    replies = future.result()
                elif isinstance(exc, ConnectionLost):
                    replies = exc.replies
            account(numbers[:len(replies)], replies)
            summary.unanswered.extend(numbers[len(replies):])

    async def send_all() -> None:
        """Read stdin to its end, sending its lines in windows, and take every answer."""
        nonlocal lineno, sent_through, in_flight
        while True:
            if queue.empty():
                # Nothing more to send yet (a person typing, a slow pipe): take the answers
                # now, so counts and errors show as they happen, not at the next line.
                await settle(0)
            chunk = await queue.get()
            slots.release()
            if chunk is None:
                break
            if isinstance(chunk, BaseException):
                raise ToolError(f"cannot read stdin: {chunk}")
            batch: list[bytes] = []
            numbers: list[int] = []
            skipped = 0
            for raw in chunk:
                lineno += 1
                line = raw[:-1] if raw.endswith(b"\r") else raw
                if not line:
                    skipped += 1
                    continue
                try:
                    batch.append(request_args(options.topic, line, options.key, options.acks,
                                              options.partition))
                except ToolError as exc:
                    report(lineno, exc.message)
                    skipped += 1
                    continue
                numbers.append(lineno)
            progress.update(skipped)
            # Windows: never more than ``window`` requests sent and not yet answered.
            for first in range(0, len(batch), piece):
                part = batch[first:first + piece]
                await settle(options.window - len(part))
                inflight.append((numbers[first:first + piece],
                                 conn.send_batch("PRODUCE", part)))
                in_flight += len(part)
                sent_through = numbers[first + len(part) - 1]
                await conn.drain()
            sent_through = lineno
            await settle(options.window)
        await settle(0)

    reader = threading.Thread(target=_read_stdin, args=(stdin, loop, queue, slots, stop),
                              name="skerry-produce-stdin", daemon=True)
    start = clock()
    reader.start()
    try:
        try:
            await send_all()
        except asyncio.CancelledError:
            # Ctrl-C (or SIGTERM): send nothing more, but take the answers to what was sent,
            # so the count is exact and a resend from ``resume_line`` repeats nothing.
            summary.stopped = "interrupted"
            summary.interrupted = True
            stop.set()
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            try:
                await settle(0)
            except asyncio.CancelledError:  # a second Ctrl-C: stop waiting for answers
                conn.abort()
        except _Halt:
            # Send nothing more; take the answers to what was sent (some may be OK).
            stop.set()
            try:
                await settle(0)
            except ToolError:
                pass  # the rest is counted as sent without an answer below
    except ToolError as exc:
        if not conn.closed:
            raise
        summary.stopped = f"interrupted, then {exc.message}" if summary.interrupted \
            else exc.message
    finally:
        stop.set()
        unanswered()
        summary.resume_line = summary.unanswered[0] if summary.unanswered \
            else sent_through + 1
        if halt_line:
            summary.resume_line = halt_line
        summary.seconds = clock() - start
        progress.close()
        await conn.close()
    return summary


_ROUTE_ATTEMPTS = 12
"""Sends of one message at most in a cluster (NOT_LEADER or a lost connection each cost
one), ``_ROUTE_BACKOFF`` seconds apart when nothing new was learnt."""
_ROUTE_BACKOFF = 0.25


def _key_of(line: bytes, key: bytes | None) -> bytes:
    return key if key is not None else line.partition(b":")[0]


async def _produce_routed(options: ProduceOptions, stdin: BinaryIO, err: TextIO,
                          clock: Callable[[], float], first: Connection,
                          brokers: dict[int, str]) -> ProduceSummary:
    """``produce`` for a cluster: each line goes to its partition's leader (the key's hash,
    as the broker picks it, unless ``--partition``), in windows of ``window`` lines, all
    answered before the next window goes. A ``NOT_LEADER`` answer or a lost connection sends
    the line again (in input order) to the leader the answer names, or to whatever a fresh
    METADATA of every broker says, at most ``_ROUTE_ATTEMPTS`` times. Any other refusal
    (``REPLICATION_TIMEOUT`` included: the line may still be stored) is an error, as on one
    broker. A line sent again after a lost connection may be stored twice."""
    routes = ClusterMap(options.topic)
    routes.brokers.update(brokers)
    bootstrap = str(options.address)
    conns: dict[str, Connection] = {bootstrap: first}
    summary = ProduceSummary()
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[list[bytes] | BaseException | None] = asyncio.Queue()
    slots = threading.Semaphore(8)
    stop = threading.Event()
    show = _show_progress(options, stdin, err)
    progress = _Progress(show, count_lines(stdin) if show else None, err, options.topic)
    shown = 0

    def report(lineno: int, text: str) -> None:
        nonlocal shown
        summary.errors += 1
        shown += 1
        if shown <= _MAX_ERRORS_SHOWN:
            progress.write(f"skerry produce: line {lineno}: {text}")
        elif shown == _MAX_ERRORS_SHOWN + 1:
            progress.write("skerry produce: (more errors; only the count is shown from now)")

    async def conn_for(address: str) -> Connection:
        conn = conns.get(address)
        if conn is None or conn.closed:
            base = parse_address(address)
            target = Address(base.host, base.port, options.address.user,
                             options.address.token, options.address.tls)
            conn = await Connection.open(target, options.timeout)
            conns[address] = conn
        return conn

    async def refresh() -> None:
        """METADATA of every broker known; the newest epoch per partition wins."""
        fresh = ClusterMap(options.topic)
        fresh.brokers.update(routes.brokers)
        for address in dict.fromkeys([bootstrap, *routes.brokers.values()]):
            try:
                conn = await conn_for(address)
                listing = await conn.request("METADATA", check=False)
                if listing.ok:
                    fresh.update_brokers(listing)
                reply = await conn.request("METADATA", options.topic, check=False)
                if not reply.ok:  # unknown: a CONSUME creates it where auto-create is on
                    await conn.request("CONSUME", f"{options.topic} 0 0 max=1 enc=b64",
                                       check=False)
                    reply = await conn.request("METADATA", options.topic, check=False)
                if reply.ok:
                    fresh.update_topic(reply)
            except ToolError:
                continue
        if fresh.partitions:
            routes.partitions = fresh.partitions
            routes.brokers.update(fresh.brokers)
            routes.leaders = fresh.leaders

    def halt(number: int, why: str, retry: list[tuple[int, bytes, bytes]]) -> None:
        """Stop the run at line ``number``: nothing more is sent; the resume line is the
        first line not acknowledged or refused for good."""
        summary.errors += 1
        summary.stopped = f"line {number}: {why}"
        summary.resume_line = min([number, *(n for n, _l, _k in retry)])
        raise _Halt

    async def send_window(entries: list[tuple[int, bytes, bytes]]) -> None:
        """Send ``(line number, line, key)`` entries until each is answered for good."""
        pending = entries
        attempt = 0
        while pending:
            attempt += 1
            groups: dict[str, list[tuple[int, bytes, bytes, int]]] = {}
            for number, line, key in pending:
                partition = options.partition if options.partition is not None \
                    else routes.partition_for(key)
                address = routes.leader_address(partition)
                if address is None:
                    known = list(dict.fromkeys([bootstrap, *routes.brokers.values()]))
                    address = known[attempt % len(known)]
                groups.setdefault(address, []).append((number, line, key, partition))
            retry: list[tuple[int, bytes, bytes]] = []
            halts: list[tuple[int, str]] = []
            learnt = True
            sent: list[tuple[list[tuple[int, bytes, bytes, int]], Any, str]] = []
            for address, items in groups.items():
                try:
                    conn = await conn_for(address)
                except ToolError:
                    retry.extend((n, ln, k) for n, ln, k, _p in items)
                    for _n, _ln, _k, p in items:
                        routes.note_hint(p, None)
                    learnt = False
                    continue
                args = [request_args(options.topic, line, options.key, options.acks, p)
                        for _n, line, _k, p in items]
                sent.append((items, conn.send_batch("PRODUCE", args), address))
            for items, future, address in sent:
                conn = conns[address]
                try:
                    replies = await conn.result(future, "PRODUCE")
                except ToolError as exc:
                    replies = exc.replies if isinstance(exc, ConnectionLost) else []
                    conn.abort()
                    learnt = False
                for index, (number, line, key, partition) in enumerate(items):
                    if index >= len(replies):
                        retry.append((number, line, key))
                        routes.note_hint(partition, None)
                        continue
                    reply = replies[index]
                    if reply.ok:
                        summary.produced += 1
                        summary.last_acknowledged = max(summary.last_acknowledged, number)
                        progress.update(1)
                    elif reply.code == "NOT_LEADER":
                        if not routes.note_hint(partition, parse_leader_hint(reply.payload)):
                            learnt = False
                        retry.append((number, line, key))
                    elif ends_produce(reply.code or "", reply.payload):
                        halts.append((number, explain_reply(reply, options.topic)))
                    else:
                        report(number, explain_reply(reply, options.topic))
                        progress.update(1)
            if halts:
                halt(*min(halts), retry)
            if not retry:
                return
            if attempt >= _ROUTE_ATTEMPTS:
                number, _line, key = min(retry)
                partition = options.partition if options.partition is not None \
                    else routes.partition_for(key)
                halt(number, f"no broker took partition {partition} of {options.topic} as "
                             f"its leader after {attempt} attempts (NOT_LEADER or no "
                             f"connection); {elect_hint(options.topic, partition)}", retry)
            if not learnt:
                await asyncio.sleep(_ROUTE_BACKOFF)
                await refresh()
            pending = sorted(retry)

    async def send_all() -> None:
        lineno = 0
        window: list[tuple[int, bytes, bytes]] = []
        while True:
            chunk = await queue.get()
            slots.release()
            if chunk is None:
                break
            if isinstance(chunk, BaseException):
                raise ToolError(f"cannot read stdin: {chunk}")
            for raw in chunk:
                lineno += 1
                line = raw[:-1] if raw.endswith(b"\r") else raw
                if not line:
                    progress.update(1)
                    continue
                try:
                    request_args(options.topic, line, options.key, options.acks, None)
                except ToolError as exc:
                    report(lineno, exc.message)
                    progress.update(1)
                    continue
                window.append((lineno, line, _key_of(line, options.key)))
            if len(window) >= options.window or queue.empty():
                await send_window(window)
                summary.resume_line = lineno + 1
                window = []
        if window:
            await send_window(window)
        summary.resume_line = lineno + 1

    reader = threading.Thread(target=_read_stdin, args=(stdin, loop, queue, slots, stop),
                              name="skerry-produce-stdin", daemon=True)
    start = clock()
    try:
        for _ in range(20):  # a topic auto-created through etcd appears a moment later
            await refresh()
            if routes.partitions >= 1:
                break
            await asyncio.sleep(0.25)
        if routes.partitions < 1:
            raise ToolError(f"cannot learn the partitions of {options.topic} from any broker "
                            "(does the topic exist? in a cluster, create it first)")
        reader.start()
        await send_all()
    except _Halt:
        pass  # summary.stopped and resume_line say where and why
    except asyncio.CancelledError:
        summary.stopped = "interrupted"
        summary.interrupted = True
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
    finally:
        stop.set()
        summary.seconds = clock() - start
        progress.close()
        for conn in conns.values():
            await conn.close()
    return summary
