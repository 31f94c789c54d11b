"""The V1 transport over the real core and store, driven in memory: StringTransport
connections, task.Clock time, and a thread runner the test controls so that "the fsync
returned" is an explicit step. These prove group commit (no OK before the fsync that
covers it; one fsync for many appends), reply ordering, idle timeouts and storage faults."""

from __future__ import annotations

import errno
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from broker.config import config_from_mapping
from broker.server import Broker, build_broker
from tests.fakes.fs import FaultyFileLayer, RecordingFileLayer
from tests.reliability.inmemory import InMemoryBroker
from tests.support import ManualThread


class Harness:
    #: Harnesses not yet closed (``close_harnesses`` below closes them after each test).
    unclosed: list[Harness] = []

    def __init__(self, tmp_path: Path, fs: Any = None, **config: Any) -> None:
        Harness.unclosed.append(self)
        self.clock = Clock()
        self.thread = ManualThread()
        raw = {"data_dir": str(tmp_path / "data"), **config}
        kwargs = {} if fs is None else {"fs": fs}
        self.broker: Broker = build_broker(config_from_mapping(raw), self.clock,
                                           run_in_thread=self.thread, **kwargs)
        self.thread.run_all()

    def connect(self) -> tuple[Any, StringTransport]:
        proto = self.broker.v1_factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        return proto, transport

    def turn(self) -> None:
        """End of a reactor turn: queued produces are appended (fsyncs only get queued)."""
        self.clock.advance(0)

    def close(self) -> None:
        """Give the store's files and lock back (no shutdown: the test is over)."""
        try:
            self.broker.core.store.close()
        except Exception:  # noqa: BLE001 - a store failed on purpose still releases its lock
            self.broker.core.store.lock.release()


@pytest.fixture(autouse=True)
def close_harnesses() -> Iterator[None]:
    yield
    while Harness.unclosed:
        Harness.unclosed.pop().close()


def lines(transport: StringTransport) -> list[bytes]:
    return transport.value().splitlines()


def test_no_ok_before_the_fsync_that_covers_it(tmp_path: Path) -> None:
    """fsync=always: a PRODUCE is answered only after an fsync that started after its
    append returned, and one fsync covers the appends of many connections."""
    fs = RecordingFileLayer()
    h = Harness(tmp_path, fs=fs, storage={"fsync": "always", "group_commit": "thread"},
                topics={"t": {"partitions": 1}})
    conns = [h.connect() for _ in range(20)]
    for i, (proto, _) in enumerate(conns):
        proto.dataReceived(f"V1|{i}|PRODUCE|t k:v{i}\n".encode())
    h.turn()
    log_writes = fs.ops("write", ".log")
    assert len(log_writes) == 1  # one write for the 20 messages of this turn
    assert all(tr.value() == b"" for _, tr in conns)
    # A second wave arrives while the first fsync is still running.
    for i, (proto, _) in enumerate(conns):
        proto.dataReceived(f"V1|b{i}|PRODUCE|t k:w{i}\n".encode())
    h.turn()
    assert all(tr.value() == b"" for _, tr in conns)
    fsyncs_before = len(fs.ops("fsync", ".log"))
    h.thread.run_all()  # the fsyncs return
    fsyncs = fs.ops("fsync", ".log")
    assert 1 <= len(fsyncs) - fsyncs_before <= 2
    last_write_seq = max(e.seq for e in fs.ops("write", ".log"))
    assert max(e.seq for e in fsyncs) > last_write_seq
    for i, (_, tr) in enumerate(conns):
        got = lines(tr)
        assert got[0].startswith(f"V1|{i}|OK|partition=0 offset=".encode())
        assert got[1].startswith(f"V1|b{i}|OK|partition=0 offset=".encode())
    assert len(fsyncs) < 40  # 40 acknowledged appends, far fewer fsyncs


def test_turn_group_commit_answers_after_one_fsync_at_the_end_of_the_turn(
        tmp_path: Path) -> None:
    """storage.group_commit: turn (the default): the PRODUCEs of 20 connections read in one
    turn are answered at the end of that turn, after one fsync that followed their append;
    nothing is answered before it."""
    fs = RecordingFileLayer()
    h = Harness(tmp_path, fs=fs, storage={"fsync": "always"}, topics={"t": {"partitions": 1}})
    conns = [h.connect() for _ in range(20)]
    for i, (proto, _) in enumerate(conns):
        proto.dataReceived(f"V1|{i}|PRODUCE|t k:v{i}\n".encode())
    assert all(tr.value() == b"" for _, tr in conns)
    fsyncs_before = len(fs.ops("fsync", ".log"))
    h.turn()
    assert h.thread.jobs == []  # nothing went to a worker thread
    fsyncs = fs.ops("fsync", ".log")[fsyncs_before:]
    assert len(fsyncs) == 1
    assert fsyncs[0].seq > max(e.seq for e in fs.ops("write", ".log"))
    for i, (_, tr) in enumerate(conns):
        assert lines(tr) == [f"V1|{i}|OK|partition=0 offset={i} hw=19".encode()]


def test_replies_stay_in_request_order_while_a_produce_waits(tmp_path: Path) -> None:
    """A PING pipelined behind a PRODUCE that waits for its fsync is answered after it."""
    h = Harness(tmp_path, storage={"fsync": "always", "group_commit": "thread"})
    proto, tr = h.connect()
    proto.dataReceived(b"V1|1|PRODUCE|t a:1\nV1|2|PING|\nV1|3|CONSUME|t 0 0\n")
    h.turn()
    assert tr.value() == b""
    h.thread.run_all()
    got = lines(tr)
    assert [g.split(b"|")[1] for g in got] == [b"1", b"2", b"3"]
    assert got[1] == b"V1|2|OK"


def test_a_pipelined_consume_sees_the_produce_before_it(tmp_path: Path) -> None:
    """Effects happen in request order: a CONSUME pipelined behind PRODUCEs that wait for
    their fsync runs only after they were answered, so it reads what they wrote; lines
    after it wait too, and the PRODUCEs themselves still share one append."""
    h = Harness(tmp_path, storage={"fsync": "always", "group_commit": "thread"}, topics={"t": {"partitions": 1}})
    proto, tr = h.connect()
    proto.dataReceived(b"V1|1|PRODUCE|t a:x\nV1|2|PRODUCE|t a:y\nV1|3|CONSUME|t 0 0\n"
                       b"V1|4|PRODUCE|t a:z\nV1|5|CONSUME|t 0 0\n")
    h.turn()
    assert tr.value() == b""
    for _ in range(5):  # each fsync lets the next held command run
        h.thread.run_all()
        h.turn()
    assert lines(tr) == [
        b"V1|1|OK|partition=0 offset=0 hw=1",
        b"V1|2|OK|partition=0 offset=1 hw=1",
        b"V1|3|OK|messages=0:x,1:y hw=1",
        b"V1|4|OK|partition=0 offset=2 hw=2",
        b"V1|5|OK|messages=0:x,1:y,2:z hw=2",
    ]


def test_acks_zero_does_not_wait_for_the_fsync(tmp_path: Path) -> None:
    """acks=0 is answered without waiting for durability."""
    h = Harness(tmp_path, storage={"fsync": "always"}, topics={"t": {"partitions": 1}})
    proto, tr = h.connect()
    proto.dataReceived(b"V1|1|PRODUCE|t a:1 acks=0\n")
    h.turn()
    assert lines(tr) == [b"V1|1|OK|partition=0 offset=0 hw=-1"]
    h.thread.run_all()


def test_idle_connection_is_closed(tmp_path: Path) -> None:
    """A connection silent for limits.idle_timeout_ms is closed; traffic resets the timer."""
    h = Harness(tmp_path, limits={"idle_timeout_ms": 1000})
    proto, tr = h.connect()
    h.clock.advance(0.9)
    proto.dataReceived(b"V1|1|PING|\n")
    h.clock.advance(0.9)
    assert not tr.disconnecting
    h.clock.advance(0.2)
    assert tr.disconnecting


def test_failed_fsync_answers_storage_error_and_fences_only_that_partition(
        tmp_path: Path) -> None:
    """A failed fsync on one partition answers its waiting producers STORAGE_ERROR, refuses
    further writes there, and leaves other partitions working."""
    fs = FaultyFileLayer(armed=False)
    h = Harness(tmp_path, fs=fs, storage={"fsync": "always"}, topics={"t": {"partitions": 2}})
    proto, tr = h.connect()
    fs.arm("fsync", nth=1, path_contains="/t/0/", error=errno.EIO)
    proto.dataReceived(b"V1|1|PRODUCE|t a:1 partition=0\nV1|2|PRODUCE|t b:2 partition=1\n")
    h.turn()
    h.thread.run_all()
    got = lines(tr)
    assert got[0].startswith(b"V1|1|ERR|STORAGE_ERROR|")
    assert got[1] == b"V1|2|OK|partition=1 offset=0 hw=0"
    tr.clear()
    proto.dataReceived(b"V1|3|PRODUCE|t a:1 partition=0\nV1|4|PRODUCE|t b:3 partition=1\n")
    h.turn()
    h.thread.run_all()
    got = lines(tr)
    assert got[0].startswith(b"V1|3|ERR|STORAGE_ERROR|")
    assert got[1] == b"V1|4|OK|partition=1 offset=1 hw=1"
    assert fs.calls == 1  # the failed fsync was never retried
    # Nothing unacknowledged is reported as stored: partition 0's hw never moved.
    proto.dataReceived(b"V1|5|CONSUME|t 0 0\n")
    assert lines(tr)[-1] == b"V1|5|OK|messages= hw=-1"


def test_over_long_line_disconnects(tmp_path: Path) -> None:
    """An over-long line gets the spec's error, naming the limit and the setting, and the
    transport is closing."""
    h = Harness(tmp_path, limits={"max_line_bytes": 100})
    proto, tr = h.connect()
    proto.dataReceived(b"V1|1|PING|\n" + b"x" * 50)
    proto.dataReceived(b"y" * 60)
    assert lines(tr) == [b"V1|1|OK", b"V1|0|ERR|BAD_REQUEST|line too long: more than 100 "
                                     b"bytes (the broker's limits.max_line_bytes)"]
    assert tr.disconnecting


def test_over_long_line_is_answered_after_the_requests_before_it(tmp_path: Path) -> None:
    """A PRODUCE still waiting for its turn's append when an over-long line arrives gets
    its OK first: replies keep request order, so a client matching answers in order learns
    which line was too long (and that the message before it was stored); nothing after
    the long line is read."""
    h = Harness(tmp_path, limits={"max_line_bytes": 100})
    proto, tr = h.connect()
    proto.dataReceived(b"V1|1|PRODUCE|t k:v\nV1|2|PRODUCE|t k:" + b"x" * 200
                       + b"\nV1|3|PRODUCE|t k:after\n")
    assert lines(tr) == []  # the produce waits for the end of the turn; so does the refusal
    assert not tr.disconnecting
    h.turn()
    h.thread.run_all()
    assert lines(tr) == [b"V1|1|OK|partition=0 offset=0 hw=0",
                         b"V1|0|ERR|BAD_REQUEST|line too long: more than 100 bytes (the "
                         b"broker's limits.max_line_bytes)"]
    assert tr.disconnecting
    proto.dataReceived(b"V1|4|PRODUCE|t k:later\n")  # ignored: nothing more is read
    assert len(lines(tr)) == 2


def test_topic_creation_deletion_and_growth_are_each_logged_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Creating a topic (auto-created by PRODUCE, or by ADMIN_CREATE_TOPIC), growing it and
    deleting it each give one log line, not one from the core and one from the store."""
    h = Harness(tmp_path, storage={"fsync": "never"})
    proto, tr = h.connect()
    with caplog.at_level(logging.DEBUG):
        proto.dataReceived(b"V1|1|PRODUCE|auto k:v\n"
                           b"V1|2|ADMIN_CREATE_TOPIC|made 1 1\n"
                           b"V1|3|ADMIN_ADD_PARTITIONS|made 2\n"
                           b"V1|4|ADMIN_DELETE_TOPIC|made\n")
        h.turn()
        h.thread.run_all()
    assert [line.split(b"|")[2] for line in lines(tr)] == [b"OK"] * 4
    messages = [r.getMessage() for r in caplog.records]
    assert [m for m in messages if "created topic" in m] == [
        "created topic auto (partitions=3 replication_factor=1)",
        "created topic made (partitions=1 replication_factor=1)",
    ]
    assert [m for m in messages if "now has" in m] == ["topic made now has 2 partitions"]
    assert [m for m in messages if "deleted topic" in m] == ["deleted topic made"]


class PushbackTransport(StringTransport):
    """A StringTransport that, like Twisted's TCP transport, pauses its registered
    streaming producer once more than ``bufferSize`` bytes are waiting to be sent."""

    bufferSize = 65536

    def write(self, data: bytes) -> None:
        super().write(data)
        if self.producer is not None and len(self.value()) > self.bufferSize \
                and self.producerState == "producing":
            self.producer.pauseProducing()

    def pauseProducing(self) -> None:  # the protocol stops reading the socket
        self.producerState = "paused"

    def resumeProducing(self) -> None:
        self.producerState = "producing"

    def client_reads(self) -> list[bytes]:
        got = lines(self)
        self.clear()
        if self.producer is not None:
            self.producer.resumeProducing()
        return got


def test_unread_output_pauses_reading(tmp_path: Path) -> None:
    """Once unsent replies pass max_pending_output_bytes the connection stops processing
    requests until the client reads again; then every request is answered, in order."""
    h = Harness(tmp_path, storage={"fsync": "never"},
                limits={"max_pending_output_bytes": 4096}, topics={"t": {"partitions": 1}})
    proto = h.broker.v1_factory.buildProtocol(None)
    tr = PushbackTransport()
    proto.makeConnection(tr)
    assert tr.bufferSize == 4096
    proto.dataReceived(b"V1|p|PRODUCE|t k:" + b"v" * 3000 + b"\n")
    h.turn()
    tr.clear()
    proto.dataReceived(b"".join(f"V1|{i}|CONSUME|t 0 0\n".encode() for i in range(10)))
    assert proto.paused
    first = tr.client_reads()
    assert 0 < len(first) < 10
    answered = first
    for _ in range(10):
        answered += tr.client_reads()
    assert [a.split(b"|")[1] for a in answered] == [str(i).encode() for i in range(10)]


class ClosingTransport(PushbackTransport):
    """A PushbackTransport that records what had been written when ``loseConnection`` was
    called, and whether the protocol asked it to read again after the read EOF."""

    written_at_close: bytes | None = None
    read_eof = False
    resumed_after_eof = False

    def loseConnection(self) -> None:
        if self.written_at_close is None:
            self.written_at_close = self.value()
        super().loseConnection()

    def resumeProducing(self) -> None:
        if self.read_eof:
            self.resumed_after_eof = True
        super().resumeProducing()


def half_close(proto: Any, tr: ClosingTransport) -> None:
    """What the TCP transport does on the client's shutdown(SHUT_WR): stop reading and call
    ``readConnectionLost`` (the protocol is half-closeable), not ``connectionLost``."""
    tr.read_eof = True
    proto.readConnectionLost()


class HalfCloseTests:
    def _connect(self, h: Harness) -> tuple[Any, ClosingTransport]:
        proto = h.broker.v1_factory.buildProtocol(None)
        tr = ClosingTransport()
        proto.makeConnection(tr)
        return proto, tr

    def test_every_reply_is_written_before_the_close(self, tmp_path: Path) -> None:
        """After the client's half-close, requests waiting for an fsync, an acks=all and a
        CONSUME held behind them (and a PING behind that) are all answered, in order; only
        then is the connection closed, and the shutdown path sees it busy until then."""
        h = Harness(tmp_path, storage={"fsync": "always", "group_commit": "thread"}, topics={"t": {"partitions": 1}})
        proto, tr = self._connect(h)
        proto.dataReceived(b"V1|1|PING|\nV1|2|PRODUCE|t k:a\nV1|3|PRODUCE|t k:b acks=all\n"
                           b"V1|4|CONSUME|t 0 0\nV1|5|PING|\n")
        half_close(proto, tr)
        h.turn()
        assert lines(tr) == [b"V1|1|OK"]
        assert not tr.disconnecting
        assert not h.broker.v1_factory.all_idle()
        for _ in range(3):
            h.thread.run_all()
            h.turn()
        expected = [
            b"V1|1|OK",
            b"V1|2|OK|partition=0 offset=0 hw=1",  # one fsync covered both
            b"V1|3|OK|partition=0 offset=1 hw=1",
            b"V1|4|OK|messages=0:a,1:b hw=1",
            b"V1|5|OK",
        ]
        assert lines(tr) == expected
        assert tr.disconnecting
        assert tr.written_at_close is not None and tr.written_at_close.splitlines() == expected
        assert tr.producer is None  # unregistered, so a paused producer cannot hold the close
        assert h.broker.v1_factory.all_idle()

    def test_nothing_outstanding_closes_at_once(self, tmp_path: Path) -> None:
        """A half-close with every request answered (or none sent) closes at once."""
        h = Harness(tmp_path)
        proto, tr = self._connect(h)
        proto.dataReceived(b"V1|1|PING|\n")
        half_close(proto, tr)
        assert tr.disconnecting and tr.written_at_close == b"V1|1|OK\n"
        silent, silent_tr = self._connect(h)
        half_close(silent, silent_tr)
        assert silent_tr.disconnecting and silent_tr.written_at_close == b""

    def test_a_long_poll_is_answered_at_its_deadline_then_closed(self, tmp_path: Path) -> None:
        """A CONSUME long poll pending at the half-close answers as usual (here: empty, at
        its deadline), and the close follows it."""
        h = Harness(tmp_path, topics={"t": {"partitions": 1}})
        proto, tr = self._connect(h)
        proto.dataReceived(b"V1|1|CONSUME|t 0 0 wait_ms=500\nV1|2|PING|\n")
        half_close(proto, tr)
        h.clock.advance(0.4)
        assert tr.value() == b"" and not tr.disconnecting
        h.clock.advance(0.1)
        assert lines(tr) == [b"V1|1|OK|messages= hw=-1", b"V1|2|OK"]
        assert tr.disconnecting

    def test_an_unterminated_last_line_is_refused_not_run(self, tmp_path: Path) -> None:
        """Bytes after the last line feed at the half-close may be half a request from a
        client that died mid-write: they get BAD_REQUEST (cid 0) and are not run."""
        h = Harness(tmp_path, storage={"fsync": "never"}, topics={"t": {"partitions": 1}})
        proto, tr = self._connect(h)
        proto.dataReceived(b"V1|1|PING|\nV1|2|PRODUCE|t k:hal")
        half_close(proto, tr)
        assert lines(tr) == [
            b"V1|1|OK",
            b"V1|0|ERR|BAD_REQUEST|unterminated line at end of input: a request ends with "
            b"a line feed; it was not executed",
        ]
        assert tr.disconnecting
        other, other_tr = h.connect()
        other.dataReceived(b"V1|3|CONSUME|t 0 0\n")
        assert lines(other_tr) == [b"V1|3|OK|messages= hw=-1"]

    def test_a_paused_connection_answers_its_buffered_lines_then_closes(
            self, tmp_path: Path) -> None:
        """A client that half-closes while paused (its unread replies fill the buffer) gets
        every buffered request answered as it reads, then the close; the connection never
        asks the transport to read again after the EOF."""
        h = Harness(tmp_path, storage={"fsync": "never"},
                    limits={"max_pending_output_bytes": 4096}, topics={"t": {"partitions": 1}})
        proto, tr = self._connect(h)
        proto.dataReceived(b"V1|p|PRODUCE|t k:" + b"v" * 3000 + b"\n")
        h.turn()
        tr.clear()
        proto.dataReceived(b"".join(f"V1|{i}|CONSUME|t 0 0\n".encode() for i in range(10)))
        assert proto.paused
        half_close(proto, tr)
        answered: list[bytes] = []
        for _ in range(10):
            assert not tr.disconnecting
            answered += tr.client_reads()
            if tr.disconnecting:
                break
        answered += lines(tr)
        assert [a.split(b"|")[1] for a in answered] == [str(i).encode() for i in range(10)]
        assert tr.disconnecting and not tr.resumed_after_eof

    def test_the_idle_timeout_still_applies(self, tmp_path: Path) -> None:
        """A half-closed connection whose reply never comes (the fsync never returns) is
        still closed by limits.idle_timeout_ms."""
        h = Harness(tmp_path, storage={"fsync": "always", "group_commit": "thread"}, limits={"idle_timeout_ms": 1000},
                    topics={"t": {"partitions": 1}})
        proto, tr = self._connect(h)
        proto.dataReceived(b"V1|1|PRODUCE|t k:a\n")
        half_close(proto, tr)
        h.turn()
        h.clock.advance(0.9)
        assert not tr.disconnecting
        h.clock.advance(0.2)
        assert tr.disconnecting


class ServerFramingTests:
    """The framing the server runs (``V1Protocol`` over ``broker.v1.codec.framing.LineFramer``)
    gives the same replies however the bytes arrive."""

    REQUESTS = (
        b"V1|1|PING|\n"
        b"V1|2|PRODUCE|{t} user1:created\r\n"
        b"\n"
        b"\r\n"
        b"V1|3|PRODUCE|{t}   user1:paid    acks=all\n"
        b"hello\n"
        b"V1|4|PRODUCE|{t} k:\xc3\xa9t\xc3\xa9\n"
        b"V1|5|PRODUCE|{t} user2:shipped acks=0\n"
        b"V1|6|CONSUME|{t} 0 0\n"
        b"V1|7|PRODUCE|{t} user1:delivered\n"
        b"V1|8|PRODUCE|{t} a:YmluYXJ5 enc=b64\n"
        b"V1|9|NOPE|\n"
        b"V1|10|OFFSETS|{t} 0\n"
        b"V1|11|PRODUCE|{t} user1:last\n"
        b"V1|12|PRO"
    )

    def _replies(self, h: InMemoryBroker, topic: str, size: int) -> bytes:
        data = self.REQUESTS.replace(b"{t}", topic.encode())
        proto, tr = h.connect()
        for start in range(0, len(data), size):
            proto.dataReceived(data[start:start + size])
        h.settle(10)  # every held command runs once the replies before it are out
        proto.readConnectionLost()  # the half-close answers the unterminated tail
        h.settle()
        admin, admin_tr = h.connect()  # the topic's files are closed before the next size
        assert h.request(admin, admin_tr, f"V1|d|ADMIN_DELETE_TOPIC|{topic}")[0].startswith(
            b"V1|d|OK")
        return tr.value().replace(topic.encode(), b"{t}")

    def test_every_chunk_size_gives_the_same_replies(self, tmp_path: Path) -> None:
        """Pipelined requests (fast-path PRODUCEs, PRODUCEs the fast path leaves to the
        codec, a CONSUME held behind them, blank lines, \\r\\n, errors, an unterminated tail)
        get the same replies, in order, whether they arrive in one read or split at every
        chunk size from 1 byte (a fresh topic for each, so the offsets are the same)."""
        h = InMemoryBroker(tmp_path / "data", defaults={"partitions": 1})
        whole = self._replies(h, "t0000", len(self.REQUESTS) + 100)
        assert whole.splitlines() == [
            b"V1|1|OK",
            b"V1|2|OK|partition=0 offset=0 hw=3",
            b"V1|3|OK|partition=0 offset=1 hw=3",
            b"V1|0|ERR|BAD_REQUEST|malformed envelope: expected 4 pipe-separated fields (V1, "
            b"correlation id, command, arguments), got 1; a command without arguments still "
            b"ends with a pipe",
            b"V1|4|OK|partition=0 offset=2 hw=3",
            b"V1|5|OK|partition=0 offset=3 hw=-1",
            b"V1|6|OK|messages=0:created,1:paid,2:\xc3\xa9t\xc3\xa9,3:shipped hw=3",
            b"V1|7|OK|partition=0 offset=4 hw=5",
            b"V1|8|OK|partition=0 offset=5 hw=5",
            b"V1|9|ERR|UNKNOWN_COMMAND|unknown command 'NOPE'; commands are upper case, "
            b"e.g. PING",
            b"V1|10|OK|earliest=0 latest=6",
            b"V1|11|OK|partition=0 offset=6 hw=6",
            b"V1|0|ERR|BAD_REQUEST|unterminated line at end of input: a request ends with a "
            b"line feed; it was not executed",
        ]
        try:
            for size in range(1, len(self.REQUESTS)):
                assert self._replies(h, f"t{size:04d}", size) == whole, size
        finally:
            h.close()
