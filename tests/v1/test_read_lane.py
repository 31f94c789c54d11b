"""The V1 read lane (``broker.v1.lane``, ``broker/v1/_clane.c``) on a real broker: the same
bytes as the connection's own path (``v1.read_lane: false``) for the same conversations,
replies in request order when a request follows before the answer, half-closes answered,
refusals, many connections, a client that does not read its replies, and bytes that are
not requests at all. Each broker is ``skerry serve`` on a free 127.0.0.1 port."""

from __future__ import annotations

import random
import re
import select
import socket
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from data import speedups
from tests.support import BrokerProcess, V1Client

pytestmark = pytest.mark.skipif(
    speedups.load("broker.v1._clane") is None,
    reason="the read lane is compiled only (broker/v1/_clane.c not built or "
           "SKERRY_NO_EXTENSIONS set); the connection's own path is tested everywhere else")

OFF = {"v1": {"read_lane": False}}


def _broker(tmp_path: Path, name: str, config: dict[str, Any]) -> BrokerProcess:
    """A broker whose auto-created topics have one partition (offsets say the order)."""
    return BrokerProcess(tmp_path / name, {"defaults": {"partitions": 1}, **config}).start()


def _lane_line(broker: BrokerProcess) -> str:
    match = re.search(r"V1 read lane: (.*)", broker.log_text())
    assert match is not None, broker.log_text()
    return match.group(1)


def _taken(broker: BrokerProcess) -> int:
    """Stops the broker; the requests its lane took, from its last log line about it."""
    return _counts(broker)[0]


def _counts(broker: BrokerProcess) -> tuple[int, int]:
    """Stops the broker; (requests its lane took, how many of them had their slot put into
    the connection's queue because more came first), from its last log line about it."""
    assert broker.stop() == 0
    if _lane_line(broker).startswith("off"):
        return 0, 0
    found = re.findall(r"V1 read lane: (\d+) requests taken, (\d+) of them queued",
                       broker.log_text())
    assert found, broker.log_text()
    return int(found[-1][0]), int(found[-1][1])


# One conversation: (connection, bytes to send, replies to read then). Sends that read
# nothing are followed by a pause, so the next send is a read of its own.
SCRIPT: list[tuple[int, bytes, int]] = [
    (0, b"V1|1|PRODUCE|orders k1:v1\n", 1),
    (1, b"V1|2|PRODUCE|orders k1:v2 acks=0\n", 1),
    (0, b"V1|3|PRODUCE|orders :v3 acks=all\r\n", 1),
    (2, b"V1|4|PRODUCE|fresh k:first\n", 1),  # auto-created on the lane's door
    (0, b"V1|5|PRODUCE|__reserved k:v\n", 1),  # not the lane's shape: the full path
    (1, b"V1|6|PRODUCE|orders k2:" + b"x" * 900 + b"\n", 1),
    (2, b"V1|7|PING|\n", 1),
    (0, b"V1|8|PRODUCE|orders k1:a\nV1|9|PRODUCE|orders k1:b\n", 2),  # pipelined: own path
    (1, b"V1|10|PRODUCE|orders k1:", 0),  # half a line, then the rest
    (1, b"split\n", 1),
    (2, b"V1|11|PRODUCE|orders k1:c acks=2\n", 1),  # bad acks: the codec's error
    (2, b"garbage without a newline at first", 0),
    (2, b" and then one\n", 1),
    (0, b"V1|12|PRODUCE|orders k3:after\n", 1),
    (0, b"".join(b"V1|b%d|PRODUCE|orders k:%d\n" % (i, i) for i in range(3000)), 3000),
    (1, b"V1|13|PRODUCE|orders k1:d\n", 1),
    (2, b"V1|14|CONSUME|orders 0 0 max=1000\n", 1),
    (0, b"V1|15|CONSUME|fresh 0 0 max=10\n", 1),
]


def _play(broker: BrokerProcess, script: list[tuple[int, bytes, int]]) -> list[bytes]:
    clients = [broker.client() for _ in range(3)]
    replies: list[bytes] = []
    try:
        for index, data, count in script:
            clients[index].send(data)
            if count == 0:
                time.sleep(0.05)
            replies += clients[index].readlines(count)
    finally:
        for client in clients:
            client.close()
    return replies


def test_the_lane_serves_the_same_bytes_as_the_connections_own_path(tmp_path: Path) -> None:
    fsync = {"storage": {"fsync": "always"}}
    on = _broker(tmp_path, "on", fsync)
    off = _broker(tmp_path, "off", {**fsync, **OFF})
    try:
        assert _lane_line(on) == "on"
        assert _lane_line(off) == "off (v1.read_lane: false)"
        with_lane = _play(on, SCRIPT)
        without = _play(off, SCRIPT)
    finally:
        taken_on, taken_off = _taken(on), _taken(off)
        off.stop()
    assert with_lane == without
    # What they said, so a lane that broke both the same way would show here too.
    assert with_lane[0] == b"V1|1|OK|partition=0 offset=0 hw=0"
    assert with_lane[3] == b"V1|4|OK|partition=0 offset=0 hw=0"  # created by the lane's door
    assert with_lane[4] == b"V1|5|OK|partition=0 offset=0 hw=0"  # the full path's
    assert with_lane[9] == b"V1|10|OK|partition=0 offset=6 hw=6"
    assert with_lane[10].startswith(b"V1|11|ERR|BAD_REQUEST|")
    consumed = with_lane[-2]
    assert consumed.startswith(b"V1|14|OK|messages=0:v1,1:v2,2:v3,3:" + b"x" * 900 + b",4:a,5:b,6:split,7:after,8:0,")
    assert with_lane[-1] == b"V1|15|OK|messages=0:first hw=0"
    # The single requests took the lane; the other broker's lane took none.
    assert taken_on >= 7
    assert taken_off == 0


def test_a_request_sent_before_the_answer_is_answered_after_it(tmp_path: Path) -> None:
    """fsync=always with the fsync in a thread holds each PRODUCE's answer until its fsync:
    a CONSUME (or PING) sent meanwhile must wait for it and see the message (the
    connection's queue gets the lane's slot first). The rule itself is tested without a
    broker below (``test_more_bytes_before_the_answer_queue_the_slot``)."""
    broker = _broker(tmp_path, "b", {"storage": {"fsync": "always", "group_commit": "thread"}})
    rng = random.Random(7)
    try:
        client = broker.client()
        for i in range(300):
            client.send(b"V1|p%d|PRODUCE|t k:m%d acks=all\n" % (i, i))
            time.sleep(rng.choice((0, 0.0005, 0.002)))
            if i % 2:
                client.send(b"V1|c%d|CONSUME|t 0 %d max=1\n" % (i, i))
            else:
                client.send(b"V1|g%d|PING|\n" % i)
            produced, second = client.readlines(2)
            assert produced == b"V1|p%d|OK|partition=0 offset=%d hw=%d" % (i, i, i)
            if i % 2:
                assert second.startswith(b"V1|c%d|OK|messages=%d:m%d hw=" % (i, i, i))
            else:
                assert second == b"V1|g%d|OK" % i
        client.close()
    finally:
        taken, queued = _counts(broker)
    assert taken > 0  # queued: when the fsync thread was slower than the client (see the unit tests)


def test_a_half_close_after_a_produce_gets_its_answer(tmp_path: Path) -> None:
    broker = _broker(tmp_path, "b", {"storage": {"fsync": "always"}})
    try:
        for i in range(40):
            client = broker.client()
            client.send(b"V1|%d|PRODUCE|t k:v%d\n" % (i, i))
            if i % 2:
                time.sleep(0.002)
            client.shut_write()
            assert client.read_to_eof() == b"V1|%d|OK|partition=0 offset=%d hw=%d\n" % (i, i, i)
            client.close()
    finally:
        assert _taken(broker) > 0


def test_a_refused_produce_is_refused_as_on_the_connections_own_path(tmp_path: Path) -> None:
    script = [(0, b"V1|1|PRODUCE|missing k:v\n", 1), (1, b"V1|2|PRODUCE|missing k:v\n", 1),
              (0, b"V1|3|PRODUCE|there k:v\n", 1)]
    config = {"auto_create_topics": False,
              "topics": {"there": {"partitions": 1, "replication_factor": 1}}}
    on = _broker(tmp_path, "on", config)
    off = _broker(tmp_path, "off", {**config, **OFF})
    try:
        with_lane, without = _play(on, script), _play(off, script)
    finally:
        on.stop()
        off.stop()
    assert with_lane == without
    assert with_lane[0] == b"V1|1|ERR|BAD_REQUEST|unknown topic"
    assert with_lane[2] == b"V1|3|OK|partition=0 offset=0 hw=0"


def test_many_request_response_connections_each_message_stored_once(tmp_path: Path) -> None:
    broker = _broker(tmp_path, "b", {"storage": {"fsync": "interval"},
                                     "topics": {"t": {"partitions": 1,
                                                      "replication_factor": 1}}})
    offsets: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(n: int) -> None:
        try:
            client = broker.client()
            for i in range(100):
                reply = client.request(b"V1|%d.%d|PRODUCE|t c%d:%d.%d" % (n, i, n, n, i))
                match = re.fullmatch(rf"V1\|{n}\.{i}\|OK\|partition=0 offset=(\d+) hw=\d+",
                                     reply)
                assert match is not None, reply
                with lock:
                    offsets.append(int(match.group(1)))
            client.close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(30)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors, errors[0]
        assert sorted(offsets) == list(range(3000))
        consumer = broker.client()
        seen: list[bytes] = []
        while len(seen) < 3000:
            reply = consumer.request(b"V1|r|CONSUME|t 0 %d max=1000" % len(seen)).encode()
            body = reply.split(b"messages=", 1)[1].rsplit(b" hw=", 1)[0]
            seen += [item.split(b":", 1)[1] for item in body.split(b",")]
        assert sorted(seen) == sorted(b"%d.%d" % (n, i) for n in range(30) for i in range(100))
        consumer.close()
    finally:
        assert _taken(broker) > 0


def test_a_client_that_does_not_read_gets_every_reply_in_order(tmp_path: Path) -> None:
    """Single PRODUCEs sent one by one, no reply read until the end (the socket's send
    buffer fills, the lane's send comes up short and the connection's write path takes
    over, pausing reads): every reply arrives, in order."""
    broker = _broker(tmp_path, "b", {"storage": {"fsync": "interval"},
                                     "limits": {"max_pending_output_bytes": 65536}})
    try:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", broker.port))
        sock.settimeout(20)
        count = 6000
        for i in range(count):
            sock.sendall(b"V1|%d|PRODUCE|t k:%d\n" % (i, i))
            if i % 200 == 0:
                time.sleep(0.001)
        client = V1Client.__new__(V1Client)
        client.sock, client._buf = sock, b""
        for i in range(count):
            assert client.readline().startswith(b"V1|%d|OK|partition=0 offset=%d hw=" % (i, i))
        sock.close()
    finally:
        assert _taken(broker) > 0


def test_bytes_that_are_not_requests_do_not_hurt_the_broker(tmp_path: Path) -> None:
    broker = _broker(tmp_path, "b", {"storage": {"fsync": "interval"}})
    rng = random.Random(11)
    try:
        good = broker.client()
        assert good.request(b"V1|1|PRODUCE|t k:before") == "V1|1|OK|partition=0 offset=0 hw=0"
        pieces = [b"V1|", b"|PRODUCE|", b"t ", b"k:", b"v", b"\n", b"\r\n", b"|", b" acks=",
                  b"all", b"\x00", b"\xff", b"PING", b"CONSUME", b"9" * 300]
        for _ in range(60):
            noisy = broker.client(timeout=5)
            for _ in range(rng.randrange(1, 6)):
                blob = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 40)))
                try:
                    noisy.send(blob)
                except OSError:
                    break
            noisy.close()
        assert good.request(b"V1|2|PRODUCE|t k:after").startswith("V1|2|OK|partition=0 offset=")
        reply = good.request(b"V1|3|CONSUME|t 0 0 max=100000")
        assert reply.startswith("V1|3|OK|messages=0:before,")
        assert ":after hw=" in reply
        good.close()
    finally:
        assert _taken(broker) > 0


# ---------------------------------------------------------------- the compiled lane alone

class _Transport:
    """What the lane checks of a connection's transport: that the reactor maps its fd to
    it (the ``selectables`` dict)."""


class _Proto:
    def __init__(self) -> None:
        self._pending: deque[list[Any]] = deque()
        self._last_active = 0.0


def _lane_pair(selectables: dict[int, Any]) -> tuple[Any, socket.socket, socket.socket, Any]:
    """A lane, a connected socket pair (the broker's end non-blocking), and a registered
    connection for the broker's end."""
    clane = speedups.load("broker.v1._clane")
    assert clane is not None
    lane = clane.Lane(selectables, 1 << 20, 1 << 20)
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    transport, proto = _Transport(), _Proto()
    selectables[ours.fileno()] = transport
    lane.settle(ours.fileno(), proto, transport, proto._pending)
    return lane, ours, theirs, proto


def _await_readable(sock: socket.socket) -> None:
    select.select([sock], [], [], 5)


def _one_taken(selectables: dict[int, Any], before: Any = None
               ) -> tuple[Any, socket.socket, socket.socket, Any, int, list[list[Any]]]:
    """A lane pair (``before`` called on our end first) whose one PRODUCE the lane took:
    the lane, both ends, the connection, our fd and the group's slots."""
    lane, ours, theirs, proto = _lane_pair(selectables)
    if before is not None:
        before(ours)
    theirs.sendall(b"V1|1|PRODUCE|t k:v\n")
    _await_readable(ours)
    slots = lane.take([(ours.fileno(), select.EPOLLIN)], None, True, False)[2][0][4]
    return lane, ours, theirs, proto, ours.fileno(), slots


def test_one_produce_is_taken_and_its_answer_sent_at_once() -> None:
    selectables: dict[int, Any] = {}
    lane, ours, theirs, proto = _lane_pair(selectables)
    fd = ours.fileno()
    theirs.sendall(b"V1|7|PRODUCE|orders key:value acks=all\n")
    _await_readable(ours)
    rest, reads, groups = lane.take([(fd, select.EPOLLIN), (999, select.EPOLLIN)], 12.5, True,
                                      True)
    assert rest == [(999, select.EPOLLIN)] and reads == []
    [(topic, acks, keys, values, slots, owners)] = groups
    assert (topic, acks, keys, values) == (b"orders", "all", [b"key"], [b"value"])
    assert owners is None  # asked for with ACLs on: each slot's connection
    assert slots[0][:2] == [None, b"7"] and slots[0][3] == 12.5 and lane.busy(fd)
    assert proto._last_active == 12.5
    assert lane.answer(slots, 2, 41, 42) == []  # sent by the lane itself
    assert theirs.recv(100) == b"V1|7|OK|partition=2 offset=41 hw=42\n"
    assert slots[0] == [b"V1|7|OK|partition=2 offset=41 hw=42\n", b"7"] and not lane.busy(fd)
    assert lane.taken() == (1, 0)


def test_anything_but_one_plain_produce_is_handed_back_as_bytes() -> None:
    selectables: dict[int, Any] = {}
    lane, ours, theirs, proto = _lane_pair(selectables)
    fd = ours.fileno()
    for data in (b"V1|1|PING|\n", b"V1|1|PRODUCE|t k:v\nV1|2|PRODUCE|t k:v\n",
                 b"V1|1|PRODUCE|t k:v", b"V1|1|PRODUCE|t k:v acks=2\n"):
        theirs.sendall(data)
        _await_readable(ours)
        rest, reads, groups = lane.take([(fd, select.EPOLLIN)], None, True, False)
        assert (rest, reads, groups) == ([], [(fd, data)], [])
        # Handed back, the connection is off the lane until it says it is clean again.
        theirs.sendall(b"V1|3|PRODUCE|t k:v\n")
        _await_readable(ours)
        assert lane.take([(fd, select.EPOLLIN)], None, True, False) == ([(fd, select.EPOLLIN)], [], [])
        assert ours.recv(100) == b"V1|3|PRODUCE|t k:v\n"
        lane.settle(fd, proto, selectables[fd], proto._pending)
    # Not accepting (the broker stops): nothing is read.
    theirs.sendall(b"V1|4|PRODUCE|t k:v\n")
    _await_readable(ours)
    assert lane.take([(fd, select.EPOLLIN)], None, False, False) == ([(fd, select.EPOLLIN)], [], [])
    assert lane.taken() == (0, 0)


def test_more_bytes_before_the_answer_queue_the_slot() -> None:
    lane, ours, theirs, proto, fd, slots = _one_taken({})
    theirs.sendall(b"V1|2|PING|\n")
    _await_readable(ours)
    # The event goes to the connection's own path, the awaited slot first into its queue.
    assert lane.take([(fd, select.EPOLLIN)], None, True, False) == ([(fd, select.EPOLLIN)], [], [])
    assert list(proto._pending) == [slots[0]] and not lane.busy(fd)
    # The answer fills the slot and asks the connection to write it in its turn (drain).
    assert lane.answer(slots, 0, 5, 6) == [(proto, None)]
    assert list(proto._pending) == [[b"V1|1|OK|partition=0 offset=5 hw=6\n", b"1"]]
    assert ours.recv(100) == b"V1|2|PING|\n"  # the lane read none of it
    assert lane.taken() == (1, 1)


def _fill(ours: socket.socket) -> None:
    """Fill the way to the client, which does not read."""
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    while True:
        try:
            ours.send(b"x" * 65536)
        except BlockingIOError:
            break


def test_a_reply_the_socket_does_not_take_whole_goes_to_the_connection() -> None:
    lane, ours, theirs, proto, fd, slots = _one_taken({}, _fill)
    [(owner, rest)] = lane.answer(slots, 0, 0, 0)
    assert owner is proto and rest == b"V1|1|OK|partition=0 offset=0 hw=0\n"
    assert not lane.busy(fd)
    # Off the lane now: the next read is the connection's.
    theirs.sendall(b"V1|2|PRODUCE|t k:v\n")
    assert lane.take([(fd, select.EPOLLIN)], None, True, False)[0] == [(fd, select.EPOLLIN)]


def test_a_closed_connection_is_forgotten_and_a_reused_fd_is_not_mistaken() -> None:
    selectables: dict[int, Any] = {}
    lane, ours, theirs, proto, fd, slots = _one_taken(selectables)
    lane.forget(fd, proto)
    assert lane.answer(slots, 0, 0, 0) == []  # gone: nothing sent, nobody to tell
    assert slots[0] == [b"V1|1|OK|partition=0 offset=0 hw=0\n", b"1"]
    # An fd the reactor now maps to another transport is not read by the lane.
    lane.settle(fd, proto, selectables[fd], proto._pending)
    selectables[fd] = _Transport()
    theirs.sendall(b"V1|2|PRODUCE|t k:v\n")
    _await_readable(ours)
    assert lane.take([(fd, select.EPOLLIN)], None, True, False)[0] == [(fd, select.EPOLLIN)]
    assert ours.recv(100) == b"V1|2|PRODUCE|t k:v\n"


def test_with_metrics_on_the_lane_counts_and_times_its_requests(tmp_path: Path) -> None:
    from tests.server.test_metrics import get, metrics_url, scrape, value

    broker = _broker(tmp_path, "b", {"metrics_port": 0, "storage": {"fsync": "interval"}})
    try:
        assert _lane_line(broker) == "on"
        client = broker.client()
        for i in range(25):
            assert client.request(b"V1|%d|PRODUCE|t k:%d" % (i, i)).startswith(f"V1|{i}|OK|")
        client.send(b"V1|p|PRODUCE|t k:a\nV1|q|PRODUCE|t k:b\n")  # pipelined: the own path
        client.readlines(2)
        status, text = get(metrics_url(broker) + "/metrics")
        assert status == 200
        samples = scrape(text)
        assert value(samples, "skerry_requests_total", command="PRODUCE", transport="v1") == 27
        assert value(samples, "skerry_request_duration_seconds_count", command="PRODUCE",
                     transport="v1") == 27
        client.close()
    finally:
        assert _taken(broker) >= 25


def test_with_acls_each_request_is_checked_against_its_own_connection(tmp_path: Path) -> None:
    """auth.tokens_file turns ACLs on: alice may write orders, not payments, bob nothing;
    the lane takes their PRODUCEs and answers each as the connection's path does."""
    from broker.auth import hash_token

    users = {"alice": "tok-alice-8Hq2", "admin": "tok-admin-3Zp9", "bob": "tok-bob-5Kt1"}
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"{u}:{hash_token(t)}\n" for u, t in users.items()))
    config = {"auth": {"tokens_file": str(tokens), "super_users": "admin"},
              "topics": {"orders": {"partitions": 1}, "payments": {"partitions": 1}},
              "storage": {"fsync": "interval"}}
    script = [(0, b"V1|1|AUTH|admin tok-admin-3Zp9\n", 1),
              (0, b"V1|2|ADMIN_ACL_ADD|User:alice Topic orders Write\n", 1),
              (1, b"V1|3|PRODUCE|orders k:before-auth\n", 1),
              (1, b"V1|4|AUTH|alice tok-alice-8Hq2\n", 1),
              (2, b"V1|5|AUTH|bob tok-bob-5Kt1\n", 1)]
    for i in range(6, 30):
        script.append((1 + i % 2, b"V1|%d|PRODUCE|%s k:%d\n" % (
            i, b"orders" if i % 3 else b"payments", i), 1))
    script.append((0, b"V1|99|CONSUME|orders 0 0 max=100\n", 1))
    on = _broker(tmp_path, "on", config)
    off = _broker(tmp_path, "off", {**config, **OFF})
    try:
        with_lane, without = _play(on, script), _play(off, script)
    finally:
        taken = _taken(on)
        off.stop()
    assert with_lane == without
    assert with_lane[2].startswith(b"V1|3|ERR|UNAUTHENTICATED|")
    allowed = [line for line in with_lane if b"|OK|partition=" in line]
    refused = [line for line in with_lane if b"|ERR|NOT_AUTHORIZED|" in line]
    # alice (connection 1: the even cids) writes orders only; bob (2: the odd) nothing.
    assert len(allowed) == len([i for i in range(6, 30) if i % 2 == 0 and i % 3])
    assert len(refused) == 24 - len(allowed)
    assert with_lane[-1] == b"V1|99|OK|messages=0:8,1:10,2:14,3:16,4:20,5:22,6:26,7:28 hw=7"
    assert taken >= len(allowed)
