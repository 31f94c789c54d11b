"""The load generator's wire: request encoders for V1 and RESP (Redis streams), and the
reply counters and consume codecs that find reply boundaries in a byte stream without
decoding more than they must. ``bench.loadgen`` drives them.

Must not import: broker internals (``broker``, ``groups``, ``replication``, ``data``).
"""

from __future__ import annotations

from typing import Any, Protocol

_VALUE_ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


_FIELD = b"v"


#: Every byte of a run of XADD replies: ``$<len>`` headers and ``<ms>-<seq>`` ids.
_ID_REPLY_BYTES = b"0123456789-$\r\n"


class ReplyError(Exception):
    """A reply the benchmark cannot accept: an error answer or an unexpected shape."""


def make_value(size: int) -> bytes:
    """A ``size``-byte value that is a plain V1 value (no whitespace, ``|`` or ``,``) and has
    no CR/LF, so both servers store and return it unchanged."""
    if size < 0:
        raise ValueError("value size must be >= 0")
    reps = size // len(_VALUE_ALPHABET) + 1
    return (_VALUE_ALPHABET * reps)[:size]


def v1_produce_request(cid: str, topic: str, key: str, value: bytes,
                       acks: str | None = None) -> bytes:
    """``V1|<cid>|PRODUCE|<topic> <key>:<value>[ acks=..]\\n`` as bytes."""
    opts = f" acks={acks}" if acks is not None else ""
    return (f"V1|{cid}|PRODUCE|{topic} {key}:".encode() + value + opts.encode() + b"\n")


def v1_consume_request(cid: str, topic: str, partition: int, offset: int, batch: int) -> bytes:
    """``V1|<cid>|CONSUME|<topic> <partition> <offset> max=<batch>\\n`` as bytes."""
    return f"V1|{cid}|CONSUME|{topic} {partition} {offset} max={batch}\n".encode()


def resp_command(*args: bytes) -> bytes:
    """One RESP command: an array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


def resp_xadd_request(stream: str, value: bytes) -> bytes:
    """``XADD <stream> * v <value>`` (auto id, one field) in RESP."""
    return resp_command(b"XADD", stream.encode(), b"*", _FIELD, value)


class ReplyCounter(Protocol):
    """Counts complete replies in a byte stream, remembering error replies."""

    errors: int
    first_error: str | None

    def feed(self, data: bytes) -> int:
        """Take the next bytes; return how many replies they completed (errors included)."""
        ...


class V1ReplyCounter:
    """Counts V1 reply lines; a line holding ``|ERR|`` is an error reply."""

    def __init__(self) -> None:
        self._tail = b""
        self.errors = 0
        self.first_error: str | None = None

    def feed(self, data: bytes) -> int:
        if self._tail:
            data = self._tail + data
        end = data.rfind(b"\n")
        if end < 0:
            self._tail = data
            return 0
        count = data.count(b"\n", 0, end + 1)
        if data.count(b"V1|", 0, end + 1) != count:
            raise ReplyError(f"not a V1 reply stream: {data[:120]!r}")
        if data.find(b"|ERR|", 0, end) >= 0:
            self.errors += data.count(b"|ERR|", 0, end)
            if self.first_error is None:
                at = data.find(b"|ERR|", 0, end)
                start = data.rfind(b"\n", 0, at) + 1
                self.first_error = data[start:data.find(b"\n", at)].decode(errors="replace")
        self._tail = data[end + 1:]
        return count


def _skip_resp(buf: bytes, pos: int) -> int:
    """End of the RESP reply starting at ``pos``, or -1 when it is not complete yet."""
    nl = buf.find(b"\r\n", pos)
    if nl < 0:
        return -1
    kind = buf[pos]
    if kind == 36:  # $ bulk string
        size = int(buf[pos + 1:nl])
        if size < 0:
            return nl + 2
        end = nl + 4 + size
        return end if end <= len(buf) else -1
    if kind in (43, 45, 58):  # + simple, - error, : integer
        return nl + 2
    if kind == 42:  # * array
        items = int(buf[pos + 1:nl])
        p = nl + 2
        for _ in range(max(items, 0)):
            p = _skip_resp(buf, p)
            if p < 0:
                return -1
        return p
    raise ReplyError(f"not a RESP reply at byte {pos}: {buf[pos:pos + 40]!r}")


class RespReplyCounter:
    """Counts RESP replies; ``-`` replies are errors.

    Fast path, for a run of XADD answers (bulk strings holding ``<ms>-<seq>`` entry ids):
    the complete lines of the buffer alternate ``$<len>`` headers and ids, so the replies
    are the line count halved. It is taken only when the buffer starts with ``$``, holds
    nothing but digits, ``-``, ``$`` and CRLF, has exactly one ``$`` per header line, and
    no line starting with ``-`` and no ``$-1`` null. Anything else (errors, other reply
    types, bulk contents that are not ids) is walked frame by frame with bulk lengths
    honoured (``_skip_resp``), which is exact for every RESP2 reply.
    """

    def __init__(self) -> None:
        self._buf = b""
        self.errors = 0
        self.first_error: str | None = None

    def feed(self, data: bytes) -> int:
        buf = self._buf + data if self._buf else data
        end = buf.rfind(b"\n") + 1
        if end == 0:
            self._buf = buf
            return 0
        lines = buf.count(b"\n", 0, end)
        if (buf[0] == 36 and buf.count(b"$", 0, end) == (lines + 1) // 2
                and not buf[:end].translate(None, _ID_REPLY_BYTES)
                and buf.find(b"\n-", 0, end) < 0 and buf.find(b"$-", 0, end) < 0):
            cut = end if lines % 2 == 0 else buf.rfind(b"\n", 0, end - 1) + 1
            self._buf = buf[cut:]
            return lines // 2
        return self._walk(buf)

    def _walk(self, buf: bytes) -> int:
        pos = 0
        count = 0
        size = len(buf)
        while pos < size:
            end = _skip_resp(buf, pos)
            if end < 0:
                break
            if buf[pos] == 45:
                self.errors += 1
                if self.first_error is None:
                    self.first_error = buf[pos + 1:end - 2].decode(errors="replace")
            count += 1
            pos = end
        self._buf = buf[pos:]
        return count


class ConsumeCodec(Protocol):
    """Builds batch-read requests and reads their replies (one request outstanding)."""

    start: Any

    def request(self, position: Any) -> bytes:
        """The request reading one batch from ``position``."""
        ...

    def feed(self, data: bytes) -> tuple[int, Any] | None:
        """Take bytes; once the reply is complete return (messages, next position)."""
        ...


class V1ConsumeCodec:
    """CONSUME walking one partition by offset; the reply is one line."""

    _PREFIX = b"|OK|messages="

    def __init__(self, topic: str, partition: int, batch: int, cid: str = "c") -> None:
        self.topic = topic
        self.partition = partition
        self.batch = batch
        self.cid = cid
        self.start: int = 0
        self._chunks: list[bytes] = []

    def request(self, position: int) -> bytes:
        return v1_consume_request(self.cid, self.topic, self.partition, position, self.batch)

    def feed(self, data: bytes) -> tuple[int, int] | None:
        if data.find(b"\n") < 0:
            self._chunks.append(data)
            return None
        if self._chunks:
            self._chunks.append(data)
            data = b"".join(self._chunks)
            self._chunks = []
        end = data.find(b"\n")
        if end != len(data) - 1:
            raise ReplyError("more than one CONSUME reply outstanding")
        head = data.find(self._PREFIX, 0, 200)
        tail = data.rfind(b" hw=", 0, end)
        if not data.startswith(b"V1|") or head < 0 or tail < 0:
            raise ReplyError(f"unexpected CONSUME reply: {data[:200]!r}")
        first = head + len(self._PREFIX)
        if first == tail:
            return 0, self.start  # nothing left: walk again from the start
        count = data.count(b",", first, tail) + 1
        last = data.rfind(b",", first, tail) + 1 or first
        colon = data.find(b":", last, tail)
        return count, int(data[last:colon]) + 1


class RespConsumeCodec:
    """XRANGE walking one stream with COUNT; continues after the last id of each reply.

    The reply ``*N`` is complete when the buffer ends with a whole value right after the
    N-th ``[id, [v, value]]`` entry's field name: checked at the tail first (cheap), then
    by counting the field markers once. Entries must be the benchmark's own (one field
    ``v``, values of ``value_size`` bytes without CR/LF): an error is refused, and so is a
    reply longer than N such entries could be; a shorter reply of another shape is never
    taken as complete (the load then ends at its drain timeout without counting it).
    """

    _FIELD_MARK = b"\r\n*2\r\n$1\r\n" + _FIELD + b"\r\n$"

    def __init__(self, stream: str, batch: int, value_size: int) -> None:
        self.stream = stream.encode()
        self.batch = str(batch).encode()
        self.start: bytes = b"-"
        self._tail_len = len(b"%d\r\n" % value_size) + value_size + 2
        # An entry with the longest possible id (two 20-digit numbers): a reply longer
        # than N of these cannot be N entries of the expected shape.
        self._max_entry = (len(b"*2\r\n$41\r\n") + 41 + len(self._FIELD_MARK)
                           + self._tail_len)
        self._chunks: list[bytes] = []
        self._size = 0
        self._count = -1
        self._max_size = 0

    def request(self, position: bytes) -> bytes:
        return resp_command(b"XRANGE", self.stream, position, b"+", b"COUNT", self.batch)

    def _done(self) -> None:
        self._chunks, self._size, self._count = [], 0, -1

    def feed(self, data: bytes) -> tuple[int, bytes] | None:
        chunks = self._chunks
        chunks.append(data)
        self._size += len(data)
        if self._count < 0:
            buf = b"".join(chunks) if len(chunks) > 1 else data
            nl = buf.find(b"\r\n")
            if nl < 0:
                return None
            if buf[0] != 42:
                raise ReplyError(f"XRANGE failed: {buf[:200]!r}")
            self._count = int(buf[1:nl])
            self._max_size = nl + 2 + self._count * self._max_entry
            if self._count == 0:
                if len(buf) != nl + 2:
                    raise ReplyError("data after an empty XRANGE reply")
                self._done()
                return 0, self.start
        if self._size > self._max_size:
            raise ReplyError(f"XRANGE reply longer than {self._count} entries of the "
                             "benchmark's shape")
        if not data.endswith(b"\n"):
            return None
        buf = b"".join(chunks) if len(chunks) > 1 else data
        self._chunks = [buf]
        mark = buf.rfind(self._FIELD_MARK)
        if (not buf.endswith(b"\r\n") or mark < 0
                or len(buf) - mark - len(self._FIELD_MARK) != self._tail_len):
            return None
        entries = buf.count(self._FIELD_MARK)
        if entries < self._count:
            return None
        count = self._count
        self._done()
        if entries != count:
            raise ReplyError(f"XRANGE reply holds {entries} entries, announced {count}")
        last_id = buf[buf.rfind(b"\n", 0, mark) + 1:mark]
        return count, b"(" + last_id

