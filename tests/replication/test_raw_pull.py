"""REPLICA_PULL ``enc=raw``: the leader sends the records as raw bytes after the reply line
(no base64), the follower's connection reads them however the network splits them, and a
follower still refuses records that do not check (a flipped bit is never appended)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.defer import Deferred, succeed
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from broker.client.codec import ProtocolViolation, parse_reply
from broker.errors import BadRequest
from broker.peer_links import (
    MAX_REPLY_BYTES,
    PeerProtocol,
    RawReply,
    V1ReplicaLinks,
    parse_pull_raw_reply,
    parse_pull_reply,
    pull_request,
)
from broker.v1 import codec as c
from broker.v1.errors import code_for
from data import format as fmt
from data.store import StorageConfig, Store, TopicConfig
from replication.epochs import EpochEntry
from replication.errors import MalformedPeerReply, PeerRefusal
from replication.wire import PullReply

CODEC = c.Codec()


def _raw_reply(cid: str, data: bytes, count: int = 2) -> bytes:
    return c.replica_pull_reply(cid, epoch=3, hw=10, leo=12, start=0, isr=[0, 2],
                                epochs=[(3, 9)], count=count if data else 0, data=data,
                                raw=True)


def _connected() -> tuple[PeerProtocol, StringTransport]:
    proto = PeerProtocol()
    transport = StringTransport()
    proto.makeConnection(transport)
    return proto, transport


def _results(d: Deferred[Any]) -> list[Any]:
    got: list[Any] = []
    d.addBoth(got.append)
    return got


class RequestTests:

    def test_the_follower_asks_for_raw_bytes(self) -> None:
        line = pull_request("7", "orders", 2, 1, 990, 3, wait_ms=500, max_bytes=65536, raw=True)
        assert line == b"V1|7|REPLICA_PULL|orders 2 1 990 3 wait_ms=500 max_bytes=65536 enc=raw\n"
        assert CODEC.parse_command(line[:-1]) == c.ReplicaPull("7", "orders", 2, 1, 990, 3, 500,
                                                               65536, True)
        assert CODEC.parse_command(b"V1|8|REPLICA_PULL|t 0 1 5 0 enc=b64") == \
            c.ReplicaPull("8", "t", 0, 1, 5, 0)

    def test_an_unknown_encoding_is_a_bad_request(self) -> None:
        with pytest.raises(c.CommandError) as info:
            CODEC.parse_command(b"V1|1|REPLICA_PULL|t 0 1 5 0 enc=hex")
        assert code_for(info.value.error) == "BAD_REQUEST"
        assert "enc=raw" in info.value.error.message


class ReplyTests:

    @settings(max_examples=100, deadline=None)
    @given(st.binary(max_size=600))
    def test_raw_and_base64_answers_carry_the_same_pull(self, data: bytes) -> None:
        """The raw form is the base64 form's line with ``size=`` for ``data=``, then the
        bytes; both give the follower the same ``PullReply``."""
        raw = _raw_reply("9", data)
        head, _nl, body = raw.partition(b"\n")
        assert body == data and head.endswith(b" size=%d" % len(data))
        b64 = c.replica_pull_reply("9", epoch=3, hw=10, leo=12, start=0, isr=[0, 2],
                                   epochs=[(3, 9)], count=2 if data else 0, data=data)
        want = PullReply(3, 10, 12, 0, (0, 2), (EpochEntry(3, 9),), 2 if data else 0, data)
        assert parse_pull_raw_reply(parse_reply(head).payload, body) == want
        assert parse_pull_reply(parse_reply(b64[:-1]).payload) == want

    @pytest.mark.parametrize(("payload", "body"), [
        (b"epoch=1 hw=0 leo=1 start=0 isr=[0] epochs=[] count=1", b"x"),
        (b"epoch=1 hw=0 leo=1 start=0 isr=[0] epochs=[] count=1 size=2", b"x"),
        (b"epoch=1 hw=0 leo=1 start=0 isr=[0] epochs=[] count=1 size=-1", b"x"),
        (b"epoch=1 hw=0 leo=1 start=0 isr=[0] epochs=[] count=0 size=1", b"x"),
        (b"epoch=1 hw=0 leo=1 start=0 isr=[0] epochs=[] count=1 size=0", b""),
        (b"hw=0 leo=1 start=0 isr=[0] epochs=[] count=1 size=1", b"x"),
    ])
    def test_bad_raw_answers_are_refused(self, payload: bytes, body: bytes) -> None:
        with pytest.raises(ProtocolViolation):
            parse_pull_raw_reply(payload, body)


class ConnectionTests:
    """``PeerProtocol.request_raw``: the bytes after the line, however they arrive."""

    @settings(max_examples=100, deadline=None)
    @given(st.binary(max_size=300), st.lists(st.integers(1, 400), max_size=8))
    def test_the_tail_is_read_across_any_split(self, data: bytes, cuts: list[int]) -> None:
        """A raw answer, then an ordinary one on the same connection, delivered in pieces
        cut anywhere (inside the line, inside the bytes, across both): each request gets
        its own answer, the bytes exactly."""
        proto, transport = _connected()
        first = _results(proto.request_raw(lambda cid: pull_request(cid, "t", 0, 1, 0, 3,
                                                                    raw=True)))
        second = _results(proto.request(lambda cid: b"V1|%b|PING\n" % cid.encode()))
        assert transport.value().startswith(b"V1|1|REPLICA_PULL|t 0 1 0 3 enc=raw\n")
        stream = _raw_reply("1", data) + b"V1|2|OK|PONG\n"
        at = 0
        for cut in [*cuts, len(stream)]:
            proto.dataReceived(stream[at:at + cut])
            at = min(len(stream), at + cut)
        proto.dataReceived(stream[at:])
        assert not proto.lost
        (answer,) = first
        assert isinstance(answer, RawReply) and answer.body == data
        assert answer.reply.ok and answer.reply.payload.endswith(f"size={len(data)}")
        assert [r.payload for r in second] == ["PONG"]

    def test_an_error_answer_has_no_tail(self) -> None:
        proto, _transport = _connected()
        first = _results(proto.request_raw(lambda cid: pull_request(cid, "t", 0, 1, 0, 3,
                                                                    raw=True)))
        second = _results(proto.request(lambda cid: b"V1|%b|PING\n" % cid.encode()))
        proto.dataReceived(c.err("1", BadRequest("no such topic")) + b"V1|2|OK|PONG\n")
        assert first[0].reply.code == "BAD_REQUEST" and first[0].body == b""
        assert second[0].payload == "PONG"

    @pytest.mark.parametrize("line", [
        b"V1|1|OK|epoch=1 count=1",
        b"V1|1|OK|epoch=1 count=1 size=x",
        b"V1|1|OK|epoch=1 count=1 size=%d" % (MAX_REPLY_BYTES + 1),
    ])
    def test_a_size_it_cannot_frame_drops_the_connection(self, line: bytes) -> None:
        """Without a usable size the stream cannot be followed: the connection closes and
        the request fails (the fetch loop backs off and reconnects)."""
        proto, transport = _connected()
        first = _results(proto.request_raw(lambda cid: pull_request(cid, "t", 0, 1, 0, 3,
                                                                    raw=True)))
        proto.dataReceived(line + b"\n")
        assert proto.lost and transport.disconnecting
        assert isinstance(first[0], Failure)

    def test_a_connection_lost_mid_tail_fails_the_request(self) -> None:
        proto, _transport = _connected()
        first = _results(proto.request_raw(lambda cid: pull_request(cid, "t", 0, 1, 0, 3,
                                                                    raw=True)))
        proto.dataReceived(_raw_reply("1", b"x" * 100)[:-40])
        assert first == []
        proto.connectionLost(Failure(ConnectionError("reset")))
        assert isinstance(first[0], Failure)


class _FakeProto:
    """A ``PeerProtocol`` stand-in answering each pull with the next canned answer."""

    lost = False

    def __init__(self, *answers: bytes) -> None:
        self.answers = list(answers)
        self.sent: list[bytes] = []

    def request(self, build: Any) -> Deferred[Any]:
        self.sent.append(build("1"))
        return succeed(parse_reply(self.answers.pop(0)))

    def request_raw(self, build: Any) -> Deferred[Any]:
        self.sent.append(build("1"))
        head, _nl, body = self.answers.pop(0).partition(b"\n")
        return succeed(RawReply(parse_reply(head), body))


class _Peers:
    def __init__(self, proto: _FakeProto) -> None:
        self.proto = proto

    def open(self, broker_id: int) -> Deferred[Any]:
        return succeed(self.proto)


class LinkTests:

    def _pull(self, links: V1ReplicaLinks) -> Any:
        got = _results(links.open(4).addCallback(
            lambda link: link.pull("t", 0, 1, 0, 3, wait_ms=100, max_bytes=1000)))
        (result,) = got
        return result.value if isinstance(result, Failure) else result

    def test_pulls_ask_raw_and_fall_back_for_an_older_leader(self) -> None:
        """A leader that does not know ``enc=raw`` refuses it as an unknown option: that
        pull fails (the fetch loop backs off), and pulls from it use base64 from then on."""
        refusal = c.err("1", BadRequest("unknown option enc for REPLICA_PULL (known "
                                        "options: wait_ms, max_bytes)"))[:-1]
        b64 = c.replica_pull_reply("1", epoch=3, hw=0, leo=0, start=0, isr=[0], epochs=[],
                                   count=0, data=b"")[:-1]
        proto = _FakeProto(refusal, b64, _raw_reply("1", b""))
        links = V1ReplicaLinks(_Peers(proto))  # type: ignore[arg-type]
        assert isinstance(self._pull(links), PeerRefusal)
        assert self._pull(links) == PullReply(3, 0, 0, 0, (0,), (), 0, b"")
        assert proto.sent[0].endswith(b" enc=raw\n") and not proto.sent[1].endswith(b"raw\n")

    def test_a_raw_answer_whose_size_lies_is_malformed(self) -> None:
        head, _nl, body = _raw_reply("1", b"abcdef").partition(b"\n")
        proto = _FakeProto(head + b"\n" + body[:-1])
        got = self._pull(V1ReplicaLinks(_Peers(proto)))  # type: ignore[arg-type]
        assert isinstance(got, MalformedPeerReply) and "size" in str(got)


def _payload(i: int) -> bytes:
    return b"record-%d" % i * 3


class CorruptPullTests:
    """What a follower does with a pull's bytes: the compiled check refuses a record that
    does not verify, and nothing is appended (the fetch loop backs off and re-pulls)."""

    def test_a_flipped_bit_in_a_raw_pull_is_refused_not_appended(self, tmp_path: Path) -> None:
        store = Store(str(tmp_path), StorageConfig())
        try:
            leader, follower = store.create_topic("t", TopicConfig(partitions=2)).partitions
            leader.append([_payload(i) for i in range(5)], [fmt.key_header(b"k")] * 5)
            read = leader.read_raw(0, 100, 1 << 20)
            head, _nl, body = c.replica_pull_reply(
                "1", epoch=0, hw=0, leo=5, start=0, isr=[0], epochs=[(0, 0)],
                count=read.count, data=read.raw, raw=True).partition(b"\n")
            bad = bytearray(body)
            bad[len(bad) - 3] ^= 0x10  # a payload byte of the last record
            pulled = parse_pull_raw_reply(parse_reply(head).payload, bytes(bad))
            with pytest.raises(ValueError, match="checksum mismatch"):
                follower.append_records(pulled.data)
            assert follower.next_offset == 0 and follower.size_bytes() == 0
            good = parse_pull_raw_reply(parse_reply(head).payload, body)
            assert follower.append_records(good.data) == 0
            assert follower.read_raw(0, 100, 1 << 20).raw == read.raw
        finally:
            store.close()
