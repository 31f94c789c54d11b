"""End-to-end tests: the real `skerry serve` process on a free loopback port, spoken to over
TCP exactly as `nc` or a client SDK would."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import ROOT, BrokerProcess, V1Client


@pytest.fixture
def broker(tmp_path: Path):
    with BrokerProcess(tmp_path) as proc:
        yield proc


def test_nc_style_session(broker: BrokerProcess) -> None:
    """A person typing into nc gets the spec's replies: ping, produce, consume, errors."""
    c = broker.client()
    assert c.request("V1|1|PING|") == "V1|1|OK"
    produced = c.request("V1|42|PRODUCE|orders user1:created")
    match = re.fullmatch(r"V1\|42\|OK\|partition=(\d+) offset=0 hw=0", produced)
    assert match, produced
    part = match.group(1)
    assert c.request("V1|43|PRODUCE|orders user1:paid acks=all") == \
        f"V1|43|OK|partition={part} offset=1 hw=1"
    assert c.request(f"V1|44|CONSUME|orders {part} 0") == \
        "V1|44|OK|messages=0:created,1:paid hw=1"
    assert c.request("V1|48|PRODUCE|orders nocolon") == \
        "V1|48|ERR|BAD_REQUEST|message must be key:value"
    assert c.request("V1|49|PRODUCE|orders a:b acks=2") == \
        "V1|49|ERR|BAD_REQUEST|invalid ack mode; expected acks=0, acks=1 or acks=all"
    assert c.request("hello").startswith("V1|0|ERR|BAD_REQUEST|")
    assert c.request("V1|50|FROB|").startswith("V1|50|ERR|UNKNOWN_COMMAND|")
    # The connection survives every error above.
    assert c.request("V1|51|PING|") == "V1|51|OK"


def test_crlf_and_blank_lines(broker: BrokerProcess) -> None:
    """telnet's CRLF endings are accepted and blank lines get no reply at all."""
    c = broker.client()
    c.send(b"\r\n\n\r\nV1|7|PING|\r\n\nV1|8|PING|\n")
    assert c.readlines(2) == [b"V1|7|OK", b"V1|8|OK"]


def test_ten_thousand_pipelined_requests_in_one_write(broker: BrokerProcess) -> None:
    """10,000 requests sent in one write are all answered, in request order."""
    c = broker.client(timeout=60)
    lines = []
    for i in range(10_000):
        if i % 3 == 2:
            lines.append(f"V1|{i}|PING|")
        else:
            lines.append(f"V1|{i}|PRODUCE|pipe k{i % 7}:v{i}")
    c.send(("\n".join(lines) + "\n").encode())
    replies = c.readlines(10_000)
    last_offset: dict[str, int] = {}
    for i, reply in enumerate(replies):
        text = reply.decode()
        assert text.startswith(f"V1|{i}|OK"), (i, text)
        if i % 3 != 2:
            m = re.fullmatch(rf"V1\|{i}\|OK\|partition=(\d+) offset=(\d+) hw=(-?\d+)", text)
            assert m, text
            p, off = m.group(1), int(m.group(2))
            assert off == last_offset.get(p, -1) + 1
            last_offset[p] = off
    assert sum(v + 1 for v in last_offset.values()) == 6667


def test_over_long_line_is_refused_and_closed(tmp_path: Path) -> None:
    """A line over limits.max_line_bytes gets the spec's error and the connection closes;
    other clients carry on."""
    with BrokerProcess(tmp_path, {"limits": {"max_line_bytes": 1024}}) as proc:
        other = proc.client()
        c = proc.client()
        c.send(b"V1|1|PRODUCE|t k:" + b"x" * 2000 + b"\n")
        assert c.readline() == (b"V1|0|ERR|BAD_REQUEST|line too long: more than 1024 bytes "
                                b"(the broker's limits.max_line_bytes)")
        assert c.closed_by_peer()
        # Exactly at the limit is fine (a trailing \r does not count).
        line = b"V1|2|PRODUCE|t k:" + b"y" * (1024 - len(b"V1|2|PRODUCE|t k:"))
        assert len(line) == 1024
        assert other.request(line + b"\r").startswith("V1|2|OK|")
        assert other.request("V1|3|PING|") == "V1|3|OK"


def test_too_many_connections(tmp_path: Path) -> None:
    """At limits.max_connections a new connection gets UNAVAILABLE and is closed; once one
    closes, a new one is accepted."""
    with BrokerProcess(tmp_path, {"limits": {"max_connections": 3}}) as proc:
        clients = [proc.client() for _ in range(3)]
        for i, c in enumerate(clients):
            assert c.request(f"V1|{i}|PING|") == f"V1|{i}|OK"
        extra = proc.client()
        assert extra.readline().startswith(b"V1|0|ERR|UNAVAILABLE|")
        assert extra.closed_by_peer()
        clients[0].close()
        deadline = time.monotonic() + 5
        reply = ""
        while reply != "V1|9|OK" and time.monotonic() < deadline:
            # The broker notices the close asynchronously; until then it still refuses.
            again = proc.client()
            reply = again.request("V1|9|PING|")
        assert reply == "V1|9|OK"
        assert clients[1].request("V1|10|PING|") == "V1|10|OK"


def test_client_that_never_reads_is_paused(tmp_path: Path) -> None:
    """A client that sends requests but never reads replies is paused: the broker's memory
    stays within 64 MiB of its baseline and another client keeps working."""
    config = {"storage": {"fsync": "never"}}
    with BrokerProcess(tmp_path, config) as proc:
        c = proc.client()
        value = "v" * 1000
        # 1,000 messages of 1 KB: every CONSUME from 0 answers about 1 MB.
        c.send(b"".join(f"V1|{i}|PRODUCE|big k:{value} partition=0\n".encode()
                        for i in range(1000)))
        c.readlines(1000)
        baseline = proc.rss_bytes()
        greedy = socket.create_connection(("127.0.0.1", proc.port))
        greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        greedy.setblocking(False)
        request = b"V1|1|CONSUME|big 0 0\n" * 1000
        cap = 64 * 1024 * 1024  # 3 million requests, each asking for a 1 MB reply
        sent = 0
        stalled_since = None
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and sent < cap:
            try:
                sent += greedy.send(request)
                stalled_since = None
            except BlockingIOError:
                # Kernel buffers are full: the broker has stopped reading this client.
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > 1.0:
                    break
                time.sleep(0.01)
        assert sent < cap, "the broker kept reading a client that never reads its replies"
        other = proc.client()
        for i in range(50):
            assert other.request(f"V1|{i}|PING|") == f"V1|{i}|OK"
        growth = proc.rss_bytes() - baseline
        assert growth < 64 * 1024 * 1024, growth
        greedy.close()


def test_restart_keeps_topics_messages_and_offsets(tmp_path: Path) -> None:
    """After SIGTERM (exit 0) and a restart, topics, messages and committed offsets are there."""
    proc = BrokerProcess(tmp_path).start()
    try:
        c = proc.client()
        assert c.request("V1|1|PRODUCE|keep k:one partition=1") == \
            "V1|1|OK|partition=1 offset=0 hw=0"
        assert c.request("V1|2|PRODUCE|keep k:two partition=1").startswith("V1|2|OK|")
        join = c.request("V1|3|JOIN|g keep member-a")
        assert join == "V1|3|OK|generation=1 assigned=[0 1 2]"
        assert c.request("V1|4|COMMIT|g keep member-a 1 1 2") == "V1|4|OK|committed=true"
        c.close()
        assert proc.stop() == 0
        assert "clean shutdown complete" in proc.log_text()
        proc.start()
        c = proc.client()
        assert c.request("V1|5|CONSUME|keep 1 0") == "V1|5|OK|messages=0:one,1:two hw=1"
        assert c.request("V1|6|OFFSET|g keep 1") == "V1|6|OK|offset=2"
        assert c.request("V1|7|METADATA|") == "V1|7|OK|topics=[keep]"
    finally:
        proc.stop()


def test_kill9_loses_no_acknowledged_message(tmp_path: Path) -> None:
    """With fsync=always, every produce acknowledged before a kill -9 is there after restart."""
    proc = BrokerProcess(tmp_path, {"storage": {"fsync": "always"}}).start()
    try:
        c = proc.client()
        acked: dict[int, str] = {}
        for i in range(300):
            c.send(f"V1|{i}|PRODUCE|crash k:value-{i} partition=0\n".encode())
        for _ in range(300):
            m = re.fullmatch(r"V1\|(\d+)\|OK\|partition=0 offset=(\d+) hw=\d+",
                             c.readline().decode())
            assert m
            acked[int(m.group(2))] = f"value-{m.group(1)}"
        # More in flight while the broker dies: unacknowledged, may or may not survive.
        c.send(b"".join(f"V1|x{i}|PRODUCE|crash k:late-{i} partition=0\n".encode()
                        for i in range(500)))
        proc.kill9()
        proc.start()
        c = proc.client()
        seen: dict[int, str] = {}
        offset = 0
        while True:
            reply = c.request(f"V1|r|CONSUME|crash 0 {offset}")
            body = reply.split("|", 3)[3]
            messages = body.split(" ")[0][len("messages="):]
            if not messages:
                break
            for item in messages.split(","):
                off, value = item.split(":", 1)
                seen[int(off)] = value
            offset = max(seen) + 1
        for off, value in acked.items():
            assert seen.get(off) == value
    finally:
        proc.stop()


def test_bad_config_exits_2_naming_the_key(tmp_path: Path) -> None:
    """An unknown key or a bad value stops startup with exit code 2 and names the key."""
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("storage:\n  fsync: sometimes\n")
    result = subprocess.run([sys.executable, "-m", "broker", "serve", "--config", str(cfg)],
                            cwd=ROOT, capture_output=True, timeout=60)
    assert result.returncode == 2
    assert b"storage.fsync" in result.stderr
    assert b"Traceback" not in result.stderr
    cfg.write_text("bogus_key: 1\n")
    result = subprocess.run([sys.executable, "-m", "broker", "serve", "--config", str(cfg)],
                            cwd=ROOT, capture_output=True, timeout=60)
    assert result.returncode == 2 and b"bogus_key" in result.stderr


def test_long_poll_answers_when_a_message_arrives(broker: BrokerProcess) -> None:
    """CONSUME wait_ms=... holds the reply until a committed message exists, then answers at
    once; with nothing arriving it answers empty when the wait ends."""
    waiter = V1Client(broker.port, timeout=0.5)
    assert waiter.request("V1|0|ADMIN_CREATE_TOPIC|quiet 1 1").startswith(
        "V1|0|OK|topic=quiet partitions=1 replication_factor=1 term=1 index=")
    waiter.send(b"V1|1|CONSUME|quiet 0 0 wait_ms=20000\n")
    with pytest.raises(TimeoutError):
        waiter.readline()
    producer = broker.client()
    assert producer.request("V1|2|PRODUCE|quiet k:hello").startswith("V1|2|OK|partition=0")
    waiter.sock.settimeout(5)
    assert waiter.readline() == b"V1|1|OK|messages=0:hello hw=0"
    started = time.monotonic()
    assert waiter.request("V1|3|CONSUME|quiet 0 1 wait_ms=300") == "V1|3|OK|messages= hw=0"
    assert time.monotonic() - started >= 0.25


def test_half_closed_client_gets_every_reply_then_eof(tmp_path: Path) -> None:
    """A client that pipelines requests and then shuts down its sending side
    (shutdown(SHUT_WR), what `nc -N` does at the end of its input) gets every reply, in
    order, then EOF: replies that wait for the fsync (storage.fsync=always), for acks=all
    and for a long poll's deadline included."""
    config = {"storage": {"fsync": "always"}, "topics": {"t": {"partitions": 1}}}
    with BrokerProcess(tmp_path, config) as proc:
        c = proc.client()
        c.send(b"V1|1|PING|\n"
               b"V1|2|PRODUCE|t k:a\n"
               b"V1|3|PRODUCE|t k:b acks=all\n"
               b"V1|4|PRODUCE|t k:c\n"
               b"V1|5|CONSUME|t 0 0\n"
               b"V1|6|CONSUME|t 0 3 wait_ms=300\n"
               b"V1|7|PING|\n")
        c.shut_write()
        started = time.monotonic()
        replies = c.read_to_eof().decode().splitlines()
        assert len(replies) == 7, replies
        assert replies[0] == "V1|1|OK"
        for i, reply in enumerate(replies[1:4]):  # one fsync may cover several appends
            assert re.fullmatch(rf"V1\|{i + 2}\|OK\|partition=0 offset={i} hw=[0-2]", reply), \
                replies
        assert replies[4:] == ["V1|5|OK|messages=0:a,1:b,2:c hw=2",
                               "V1|6|OK|messages= hw=2", "V1|7|OK"]
        assert 0.25 <= time.monotonic() - started < 5  # the long poll's deadline, then EOF


def test_half_close_with_nothing_pending_closes_at_once(broker: BrokerProcess) -> None:
    """A half-close with nothing outstanding closes at once; bytes after the last line feed
    are not run (half a request from a client that died mid-write) but answered
    BAD_REQUEST, so `printf 'V1|2|PING|' | nc -N` says why it got no OK."""
    other = broker.client()
    assert other.request("V1|0|ADMIN_CREATE_TOPIC|half 1 1").startswith("V1|0|OK|")
    c = broker.client(timeout=5)
    c.send(b"V1|1|PING|\nV1|2|PRODUCE|half k:hal")
    c.shut_write()
    started = time.monotonic()
    assert c.read_to_eof() == (b"V1|1|OK\nV1|0|ERR|BAD_REQUEST|unterminated line at end of "
                               b"input: a request ends with a line feed; it was not "
                               b"executed\n")
    assert time.monotonic() - started < 2
    assert other.request("V1|3|CONSUME|half 0 0") == "V1|3|OK|messages= hw=-1"


def test_half_closed_client_that_reads_late_gets_every_reply(tmp_path: Path) -> None:
    """3,000 pipelined requests, then the half-close, then a pause before reading: the
    broker is paused by its unread replies (max_pending_output_bytes) before and after the
    EOF, and still answers every request in order, then closes."""
    config = {"storage": {"fsync": "always"}, "topics": {"pipe": {"partitions": 1}},
              "limits": {"max_pending_output_bytes": 16384}}
    with BrokerProcess(tmp_path, config) as proc:
        c = proc.client(timeout=60)
        requests = [f"V1|{i}|CONSUME|pipe 0 0 max=50" if i % 3 == 2
                    else f"V1|{i}|PRODUCE|pipe k:{'v' * 100}" for i in range(3000)]
        c.send(("\n".join(requests) + "\n").encode())
        c.shut_write()
        time.sleep(0.5)
        replies = c.read_to_eof().decode().splitlines()
        assert len(replies) == 3000
        for i, reply in enumerate(replies):
            assert reply.startswith(f"V1|{i}|OK|"), reply[:80]


def _serve(*args: str, timeout: float = 30) -> tuple[int, list[str], float]:
    """Run `skerry serve` to completion: (exit code, non-empty output lines, seconds)."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "broker", "serve", "--port", "0", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            timeout=timeout)
    lines = [line for line in result.stdout.decode(errors="replace").splitlines() if line]
    return result.returncode, lines, time.monotonic() - started


class DataDirLockTests:
    """Two brokers on one data directory: the second is refused by the directory's lock."""

    def test_second_broker_exits_with_one_line_naming_dir_and_pid(self, tmp_path: Path) -> None:
        """A second broker on a data directory in use exits non-zero within seconds with one
        line naming the directory and the first broker's pid."""
        with BrokerProcess(tmp_path / "first") as first:
            assert first.proc is not None
            code, lines, seconds = _serve("--data-dir", str(first.data_dir))
            assert code != 0
            assert seconds < 10
            assert len(lines) == 1, lines
            assert f"data directory {first.data_dir} is locked by pid {first.proc.pid}" \
                in lines[0]

    def test_refused_broker_leaves_the_first_unaffected(self, tmp_path: Path) -> None:
        """While a second broker is refused, the first keeps producing and consuming, and no
        clean-shutdown marker appears under it; it is its own clean stop that writes one."""
        marker = tmp_path / "skerry-data" / "topics" / "~clean-shutdown"
        proc = BrokerProcess(tmp_path).start()
        try:
            c = proc.client()
            assert c.request("V1|1|PRODUCE|kept k:before partition=0").startswith("V1|1|OK|")
            for _ in range(2):
                code, _lines, _seconds = _serve("--data-dir", str(proc.data_dir))
                assert code != 0
            assert not marker.exists()
            assert c.request("V1|2|PRODUCE|kept k:after partition=0 acks=all") == \
                "V1|2|OK|partition=0 offset=1 hw=1"
            assert c.request("V1|3|CONSUME|kept 0 0") == "V1|3|OK|messages=0:before,1:after hw=1"
            assert proc.proc is not None and proc.proc.poll() is None
            assert "ERROR" not in proc.log_text()
            c.close()
            assert proc.stop() == 0
            assert marker.exists()
        finally:
            proc.stop()

    def test_data_dir_usable_again_after_clean_stop_and_kill9(self, tmp_path: Path) -> None:
        """The lock lives only as long as its broker: after a clean stop and after a kill -9
        a new broker starts on the directory and finds its messages."""
        proc = BrokerProcess(tmp_path).start()
        try:
            c = proc.client()
            assert c.request("V1|1|PRODUCE|t k:one partition=0").startswith("V1|1|OK|")
            c.close()
            assert proc.stop() == 0
            proc.start()
            c = proc.client()
            assert c.request("V1|2|PRODUCE|t k:two partition=0").startswith("V1|2|OK|")
            c.close()
            proc.kill9()
            assert (proc.data_dir / ".lock").exists()  # left behind, and harmless
            proc.start()
            c = proc.client()
            assert c.request("V1|3|CONSUME|t 0 0") == "V1|3|OK|messages=0:one,1:two hw=1"
            assert proc.proc is not None
            assert (proc.data_dir / ".lock").read_text() == f"{proc.proc.pid}\n"
        finally:
            proc.stop()


class StartupMessageTests:
    """What `skerry serve` prints when it starts, or cannot."""

    def test_data_dir_that_is_a_file_is_named_as_such(self, tmp_path: Path) -> None:
        """--data-dir pointing at a regular file exits 1 with one line saying the path is a
        file, not a directory (not "[Errno 17] File exists"), and leaves the file alone."""
        path = tmp_path / "skerry-data"
        path.write_text("my notes\n")
        code, lines, _seconds = _serve("--data-dir", str(path))
        assert code == 1
        assert len(lines) == 1, lines
        assert lines[0].endswith(f"data directory {path} is a file, not a directory")
        assert "Errno" not in lines[0]
        assert path.read_text() == "my notes\n"

    def test_listening_line_shows_at_log_level_warning(self, tmp_path: Path) -> None:
        """With log_level warning the info lines are gone, but the one line saying the
        broker listens is still printed, so the terminal does not look hung."""
        proc = BrokerProcess(tmp_path, {"log_level": "warning"})
        try:
            proc.start(timeout=15)
            assert proc.client().request("V1|1|PING|") == "V1|1|OK"
            lines = proc.log_text().splitlines()
            assert len(lines) == 1, lines
            assert " skerry listening on v1=127.0.0.1:" in lines[0]
        finally:
            proc.stop()
