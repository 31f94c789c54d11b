"""Fuzzing the Iggy listener of a real broker process with over 100,000 random and mutated
frames on several connections at once: every well-framed frame gets exactly one reply,
framing attacks (lengths that cannot hold a code, oversized or lying lengths, truncated
headers) end only their own connection, and another client is answered throughout."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from broker.iggy import codec
from broker.iggy.codec import (
    Consumer,
    ConsumerKind,
    GlobalPermissions,
    Identifier,
    PartitioningKind,
    Permissions,
    PollingKind,
)
from tests.iggy.harness import RawClient, frame, iggy_port_of
from tests.support import BrokerProcess

CONNECTIONS = 8
FRAMES_PER_CONNECTION = 13_000
CHUNK = 250
SEED = 20240611

S, T = Identifier("fz"), Identifier("t")
GROUP = Consumer(ConsumerKind.CONSUMER_GROUP, Identifier("g"))
ME = Consumer(ConsumerKind.CONSUMER, Identifier(3))


def corpus() -> list[bytes]:
    """Valid request payloads to start from and mutate: every code except the two that
    hash a password (LoginUser, ChangePassword: scrypt costs ~50 ms on purpose, so they
    are fuzzed only through the random frames, and tested on their own elsewhere)."""
    messages = codec.encode_messages([b"payload", b"x" * 40], [b"", b"\x02" + struct.pack("<I", 1)
                                                              + b"k" + b"\x01" + struct.pack("<I", 1) + b"v"])
    commands: list[codec.Command] = [
        codec.Ping(), codec.GetStats(), codec.GetSnapshot(), codec.GetClusterMetadata(),
        codec.GetMe(), codec.GetClient(1), codec.GetClients(), codec.GetUser(Identifier(0)),
        codec.GetUsers(), codec.CreateUser("someone", "secret", 1, Permissions.root()),
        codec.DeleteUser(Identifier(1)), codec.UpdateUser(Identifier(1), "renamed", 2),
        codec.UpdatePermissions(Identifier(1), None),
        codec.GetPersonalAccessTokens(), codec.CreatePersonalAccessToken("tok", 0),
        codec.DeletePersonalAccessToken("tok"), codec.LoginWithPersonalAccessToken("nope"),
        codec.PollMessages(ME, S, T, 0, PollingKind.OFFSET, 0, 10, False),
        codec.PollMessages(GROUP, S, T, None, PollingKind.NEXT, 0, 5, True),
        codec.SendMessages(S, T, PartitioningKind.BALANCED, b"", 2, messages),
        codec.SendMessages(S, T, PartitioningKind.MESSAGES_KEY, b"key", 2, messages),
        codec.FlushUnsavedBuffer(S, T, 0, False),
        codec.GetConsumerOffset(ME, S, T, 1), codec.StoreConsumerOffset(ME, S, T, 0, 0),
        codec.DeleteConsumerOffset(ME, S, T, 0), codec.GetStream(S), codec.GetStreams(),
        codec.CreateStream("new"), codec.DeleteStream(S), codec.UpdateStream(S, "other"),
        codec.PurgeStream(S), codec.GetTopic(S, T), codec.GetTopics(S),
        codec.CreateTopic(S, 1, 1, 0, 0, 1, "new"), codec.DeleteTopic(S, T),
        codec.UpdateTopic(S, T, 1, 0, 0, 1, "t"), codec.PurgeTopic(S, T),
        codec.CreatePartitions(S, T, 1), codec.DeletePartitions(S, T, 1),
        codec.DeleteSegments(S, T, 0, 1), codec.GetConsumerGroup(S, T, Identifier("g")),
        codec.GetConsumerGroups(S, T), codec.CreateConsumerGroup(S, T, "g2"),
        codec.DeleteConsumerGroup(S, T, Identifier("g2")),
        codec.JoinConsumerGroup(S, T, Identifier("g")),
        codec.LeaveConsumerGroup(S, T, Identifier("g")),
    ]
    return [codec.encode_request(cmd) for cmd in commands]


def mutate(rng: random.Random, base: list[bytes]) -> bytes:
    """One well-framed frame (its length field is right) with a random or mutated body."""
    choice = rng.random()
    if choice < 0.15:
        code = rng.choice([rng.randrange(0, 1000), int(rng.choice(list(codec.Code)))])
        body = rng.randbytes(rng.randrange(0, 64))
        return frame(code, body)
    original = rng.choice(base)
    code = struct.unpack_from("<I", original, 4)[0]
    body = bytearray(original[8:])
    for _ in range(rng.randrange(1, 4)):
        op = rng.random()
        if op < 0.35 and body:
            body[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
        elif op < 0.55 and body:
            body[rng.randrange(len(body))] = rng.choice((0, 1, 2, 0x7F, 0xFF))
        elif op < 0.7 and body:
            del body[rng.randrange(len(body)):]
        elif op < 0.85:
            at = rng.randrange(len(body) + 1)
            body[at:at] = rng.randbytes(rng.randrange(1, 9))
        elif body and len(body) >= 4:
            at = rng.randrange(len(body) - 3)
            struct.pack_into("<I", body, at, rng.choice((0, 1, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF)))
    if rng.random() < 0.05:
        code = rng.randrange(0, 700)
    return frame(code, bytes(body))


def attack(rng: random.Random) -> tuple[bytes, int | None]:
    """A frame that breaks the framing itself (sent last on its connection), and the
    error status that answers it before the broker closes the connection (None: the
    frame is incomplete, so the broker waits for the rest)."""
    kind = rng.randrange(4)
    if kind == 0:
        return struct.pack("<II", rng.randrange(0, 4), 1), 4  # no room for the code
    if kind == 1:
        return struct.pack("<II", 0xFFFFFFF0, 1) + b"\x00" * 16, 3  # over max_frame_bytes
    if kind == 2:
        return struct.pack("<II", 5000, 200) + b"\x01" * 100, None  # promises more
    return b"\x10\x00\x00", None


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    proc = BrokerProcess(tmp_path_factory.mktemp("iggy-fuzz"),
                         {"iggy_port": 0, "storage": {"fsync": "never"},
                          "iggy": {"max_frame_bytes": 1 << 20}})
    with proc:
        port = iggy_port_of(proc.log_text())
        root = RawClient(port)
        assert root.login() == b"\x00" * 4 + b"\x04\x00\x00\x00" + b"\x00" * 4
        root.call(codec.CreateStream("fz"))
        root.call(codec.CreateTopic(S, 2, 1, 0, 0, 1, "t"))
        root.call(codec.CreateConsumerGroup(S, T, "g"))
        perms = Permissions(GlobalPermissions(read_streams=True, read_topics=True,
                                              poll_messages=True, send_messages=True))
        assert root.call(codec.CreateUser("fuzzer", "fuzz-pass", 1, perms))[:4] == b"\x00" * 4
        root.close()
        yield proc, port


def _fuzz_connection(port: int, frames: list[bytes], final: tuple[bytes, int | None],
                     counts: list[int], errors: list[str]) -> None:
    try:
        client = RawClient(port, timeout=30)
        assert client.login("fuzzer", "fuzz-pass")[:4] == b"\x00" * 4
        for start in range(0, len(frames), CHUNK):
            chunk = frames[start:start + CHUNK]
            client.send(b"".join(chunk))
            for _ in chunk:
                client.read_reply()
                counts.append(1)
        data, status = final
        client.send(data)
        if status is not None:
            assert client.read_reply() == struct.pack("<II", status, 0)
            assert client.closed_by_peer()
        client.close()
    except Exception as exc:  # reported by the test
        errors.append(f"{type(exc).__name__}: {exc}")


class FuzzTests:
    def test_a_hundred_thousand_frames(self, broker):
        """Every one of >100,000 fuzzed well-framed frames gets exactly one reply, framing
        attacks close only their connection, and a bystander is answered throughout."""
        proc, port = broker
        rng = random.Random(SEED)
        base = corpus()
        plans = []
        for _ in range(CONNECTIONS):
            frames = [mutate(rng, base) for _ in range(FRAMES_PER_CONNECTION)]
            plans.append((frames, attack(rng)))
        total = sum(len(f) for f, _ in plans)
        assert total >= 100_000
        counts: list[int] = []
        errors: list[str] = []
        stop = threading.Event()
        latencies: list[float] = []
        watchdog_errors: list[str] = []

        def watchdog() -> None:
            try:
                client = RawClient(port, timeout=10)
                client.login()
                poll = codec.PollMessages(ME, S, T, 0, PollingKind.FIRST, 0, 1, False)
                while not stop.is_set():
                    began = time.monotonic()
                    assert client.request(1) == b"\x00" * 8
                    assert client.call(poll)[:4] == b"\x00" * 4
                    latencies.append(time.monotonic() - began)
                    time.sleep(0.02)
                client.close()
            except Exception as exc:
                watchdog_errors.append(f"{type(exc).__name__}: {exc}")

        guard = threading.Thread(target=watchdog)
        guard.start()
        workers = [threading.Thread(target=_fuzz_connection, args=(port, frames, final, counts,
                                                                   errors))
                   for frames, final in plans]
        began = time.monotonic()
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        elapsed = time.monotonic() - began
        stop.set()
        guard.join(30)
        assert errors == []
        assert watchdog_errors == []
        assert len(counts) == total
        assert latencies and max(latencies) < 5.0, max(latencies)
        assert proc.proc.poll() is None
        # Still fully working afterwards.
        after = RawClient(port)
        after.login()
        send = codec.SendMessages(S, T, PartitioningKind.PARTITION_ID, struct.pack("<I", 1), 1,
                                  codec.encode_messages([b"still-alive"], None, [99]))
        assert after.call(send) == b"\x00" * 8
        last = after.call(codec.PollMessages(ME, S, T, 1, PollingKind.LAST, 0, 1, False))
        assert last.endswith(b"still-alive")
        print(f"fuzz: {total} frames on {CONNECTIONS} connections in {elapsed:.1f}s; "
              f"bystander {len(latencies)} round trips, max latency {max(latencies) * 1000:.0f} ms")

    def test_random_bytes_streams(self, broker):
        """Connections that send pure random bytes (no framing at all) are answered or
        closed, never hang the broker."""
        _proc, port = broker
        rng = random.Random(SEED + 1)
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            try:
                sock.sendall(rng.randbytes(rng.randrange(1, 4096)))
            except OSError:
                pass
            sock.close()
        probe = RawClient(port)
        assert probe.request(1) == b"\x00" * 8
