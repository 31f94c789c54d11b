"""Idempotent producer state (KIP-98, simplified): which sequence numbers each producer
id wrote to a partition, and at which offsets, so a resend is answered with the original
offsets instead of being appended again.

Owns: the ``pid``/``seq`` user headers idempotent messages carry (``producer_headers``,
``producer_fields``), ``ProducerState`` (one partition's producers, rebuilt from the log
after a start) and ``Producers`` (the states of every partition, and the sequence rules:
a gap is ``BadRequest``, an unknown producer may start anywhere).

Must not import: transports, Twisted, the other core modules.
"""

from __future__ import annotations

from broker.errors import BadRequest
from data.format import HeaderKind, decode_user_headers, encode_user_headers
from data.log import PartitionLog

__all__ = ["PID_HEADER", "SEQ_HEADER", "ProducerState", "Producers", "check_next",
           "no_longer_retained", "producer_fields", "producer_headers"]


PID_HEADER = b"pid"
SEQ_HEADER = b"seq"
_PID_MARK = bytes([HeaderKind.STRING]) + (3).to_bytes(4, "little") + PID_HEADER


def producer_headers(key_headers: bytes, pid: str, seq: int) -> bytes:
    """User headers of an idempotent message: the key header (if any), then
    ``pid`` (string) and ``seq`` (uint64, little-endian)."""
    return key_headers + encode_user_headers([
        (HeaderKind.STRING, PID_HEADER, HeaderKind.STRING, pid.encode()),
        (HeaderKind.STRING, SEQ_HEADER, HeaderKind.UINT64, seq.to_bytes(8, "little")),
    ])


def producer_fields(user_headers: bytes) -> tuple[str, int] | None:
    """``(pid, seq)`` carried in a record's user headers, or None."""
    if _PID_MARK not in user_headers:
        return None
    try:
        headers = decode_user_headers(user_headers)
    except ValueError:
        return None
    pid = seq = None
    for _kk, name, vkind, value in headers:
        if name == PID_HEADER:
            pid = value.decode(errors="replace")
        elif name == SEQ_HEADER and vkind == HeaderKind.UINT64 and len(value) == 8:
            seq = int.from_bytes(value, "little")
    return None if pid is None or seq is None else (pid, seq)


class ProducerState:
    """Idempotent produce (KIP-98, simplified) for one partition: per producer id, the
    sequence numbers it wrote and their offsets, as runs ``[first_seq, first_offset, count]``
    (a run grows while both numbers go up by one, so a producer writing alone costs one run).

    ``last_seq`` also counts messages queued for this turn's append, so a pipelined producer
    is checked against what it already sent. Rebuilt from the log (``scan``) the first time a
    partition sees an idempotent produce after a start, so it survives restarts.
    """

    __slots__ = ("log", "runs", "last_seq", "high", "start")

    def __init__(self, plog: PartitionLog) -> None:
        self.log = plog
        self.runs: dict[str, list[list[int]]] = {}
        self.last_seq: dict[str, int] = {}
        self.high = -1  # the newest offset recorded
        self.start = plog.first_offset  # the log start offset when producers were last pruned

    def forget_removed(self) -> None:
        """Forget the producers whose every recorded message retention has removed (Kafka's
        rule: a producer's state goes once the log start passes its last batch), so that a
        long-running writer with a new producer id per task and micro-batch (the Spark sink)
        does not grow this state without bound. A producer with messages queued this turn is
        kept. A later resend from a forgotten producer is appended as new: its originals are
        gone from the log anyway."""
        start = self.log.first_offset
        if start <= self.start:
            return
        self.start = start
        last_seq = self.last_seq
        gone = [pid for pid, runs in self.runs.items()
                if runs[-1][1] + runs[-1][2] <= start
                and last_seq.get(pid) == runs[-1][0] + runs[-1][2] - 1]
        for pid in gone:
            del self.runs[pid]
            last_seq.pop(pid, None)

    @classmethod
    def scan(cls, plog: PartitionLog) -> ProducerState:
        """The state a partition's log implies (reads every retained record once)."""
        state = cls(plog)
        at = plog.first_offset
        while at < plog.next_offset:
            result = plog.read(at, 65536, 64 << 20)
            if not result.records:
                break
            for record in result.records:
                if record.user_headers:
                    fields = producer_fields(record.user_headers)
                    if fields is not None:
                        pid, seq = fields
                        state.record(pid, seq, record.offset)
                        state.last_seq[pid] = max(state.last_seq.get(pid, -1), seq)
            at = result.next_offset
        return state

    def record(self, pid: str, seq: int, offset: int) -> None:
        """Remember that ``pid``'s message ``seq`` is at ``offset``."""
        runs = self.runs.setdefault(pid, [])
        if offset > self.high:
            self.high = offset
        if runs:
            last = runs[-1]
            if last[0] + last[2] == seq and last[1] + last[2] == offset:
                last[2] += 1
                return
        runs.append([seq, offset, 1])

    def record_run(self, pid: str, first_seq: int, first_offset: int, count: int) -> None:
        """``record`` for ``count`` consecutive messages (a batch) at once."""
        if count <= 0:
            return
        runs = self.runs.setdefault(pid, [])
        self.high = max(self.high, first_offset + count - 1)
        if runs:
            last = runs[-1]
            if last[0] + last[2] == first_seq and last[1] + last[2] == first_offset:
                last[2] += count
                return
        runs.append([first_seq, first_offset, count])

    def offset_of(self, pid: str, seq: int) -> int | None:
        """The offset ``pid``'s message ``seq`` went to (None: not appended yet, or unknown)."""
        for first_seq, first_offset, count in reversed(self.runs.get(pid, ())):
            if first_seq <= seq < first_seq + count:
                return first_offset + seq - first_seq
        return None


class Producers:
    """The idempotent-produce state of every partition that has seen an idempotent produce
    since the start, and the sequence rules checked against it."""

    def __init__(self) -> None:
        self._states: dict[tuple[str, int], ProducerState] = {}

    def state(self, topic: str, partition: int, plog: PartitionLog) -> ProducerState:
        """The partition's state (scanned from the log when it has none yet, when the log
        was replaced, or when the log was truncated below it)."""
        state = self._states.get((topic, partition))
        if state is None or state.log is not plog or plog.next_offset <= state.high:
            state = self._states[(topic, partition)] = ProducerState.scan(plog)
        state.forget_removed()
        return state

    def known(self, topic: str, partition: int) -> ProducerState | None:
        """The partition's state if it has one (no scan)."""
        return self._states.get((topic, partition))

    def forget(self, topic: str, partition: int) -> None:
        """Drop the partition's state; it is rebuilt from the log at its next use."""
        self._states.pop((topic, partition), None)


def check_next(state: ProducerState, topic: str, partition: int, pid: str,
               seq: int) -> int | None:
    """The last sequence number ``pid`` queued or wrote on the partition (None: unknown
    producer); ``BadRequest`` when ``seq`` leaves a gap after it."""
    last = state.last_seq.get(pid)
    if last is not None and seq > last + 1:
        raise BadRequest(f"out of order sequence {seq} for producer {pid} on partition "
                         f"{partition} of {topic}; expected {last + 1}")
    return last


def no_longer_retained(topic: str, partition: int, pid: str, seq: int) -> BadRequest:
    """A resend whose original the log no longer holds."""
    return BadRequest(f"sequence {seq} of producer {pid} on partition {partition} of "
                      f"{topic} is no longer retained")
