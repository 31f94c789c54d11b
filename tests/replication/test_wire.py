"""The cluster commands on the wire, both sides: the broker's codec parses the requests
the follower's V1 links (``broker.peer_links``) write, and those links (on
``broker.client.codec``) parse the replies the codec formats into the domain's values and errors, with record bytes of any value (commas, pipes, newlines, NUL) arriving unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.defer import Deferred, succeed
from twisted.python.failure import Failure

from broker.client.codec import (
    BadRequestError,
    NotLeaderError,
    ProtocolViolation,
    ReplicationTimeoutError,
    parse_reply,
    payload_fields,
)
from broker.errors import (
    BadRequest,
    InternalError,
    NotLeader,
    ReplicationTimeout,
    Unauthenticated,
    Unavailable,
)
from broker.peer_links import (
    V1ReplicaLinks,
    epoch_request,
    parse_epoch_reply,
    parse_pull_reply,
    pull_request,
)
from broker.v1 import codec as c
from broker.v1.errors import code_for
from replication.epochs import EpochEntry
from replication.errors import (
    MalformedPeerReply,
    PeerCannotAnswer,
    PeerNotAuthenticated,
    PeerRefusal,
)
from replication.roles import Role
from replication.wire import EpochReply, PullReply

CODEC = c.Codec()


def parse(line: bytes) -> c.Command | None:
    return CODEC.parse_command(line.rstrip(b"\n"))


class RequestParsingTests:

    def test_pull_request_round_trip(self) -> None:
        """A follower's REPLICA_PULL line parses into the command the broker dispatches."""
        line = pull_request("7", "orders", 2, 1, 990, 3, wait_ms=500, max_bytes=65536)
        assert line == b"V1|7|REPLICA_PULL|orders 2 1 990 3 wait_ms=500 max_bytes=65536\n"
        assert parse(line) == c.ReplicaPull("7", "orders", 2, 1, 990, 3, 500, 65536)
        assert parse(pull_request("8", "t", 0, 2, 0, 0)) == c.ReplicaPull("8", "t", 0, 2, 0, 0)

    def test_epoch_request_round_trip(self) -> None:
        """REPLICA_EPOCH carries last_epoch only when the asker's log has a history."""
        assert parse(epoch_request("1", "t", 0, 2, 5, 4)) == c.ReplicaEpoch("1", "t", 0, 2, 5, 4)
        assert epoch_request("1", "t", 0, 2, 5, None) == b"V1|1|REPLICA_EPOCH|t 0 2 5\n"
        assert epoch_request("1", "t", 0, 2, 5, -1) == b"V1|1|REPLICA_EPOCH|t 0 2 5\n"
        assert parse(b"V1|1|REPLICA_STATUS|t 3") == c.ReplicaStatus("1", "t", 3)

    @pytest.mark.parametrize("line", [
        b"V1|1|REPLICA_PULL|t 0 1 5",
        b"V1|1|REPLICA_PULL|t 0 1 5 -1",
        b"V1|1|REPLICA_PULL|t 0 1 5 0 max_bytes=0",
        b"V1|1|REPLICA_PULL|t 0 1 5 0 wait=3",
        b"V1|1|REPLICA_EPOCH|t 0 1",
        b"V1|1|REPLICA_EPOCH|t 0 1 2 last_epoch=x",
        b"V1|1|REPLICA_STATUS|t",
        b"V1|1|REPLICA_STATUS|t 0 extra",
        b"V1|1|REPLICA_STATUS|b@d 0",
    ])
    def test_bad_arguments_are_bad_request(self, line: bytes) -> None:
        """Malformed cluster commands get BAD_REQUEST with the request's cid."""
        with pytest.raises(c.CommandError) as info:
            parse(line)
        assert info.value.cid == "1"
        assert code_for(info.value.error) == "BAD_REQUEST"

    def test_cluster_commands_are_registered_apart(self) -> None:
        """The cluster commands are known to the codec but kept out of the single-broker
        command set."""
        assert set(c.CLUSTER_COMMANDS) == {"REPLICA_PULL", "REPLICA_EPOCH", "REPLICA_STATUS"}
        assert not set(c.CLUSTER_COMMANDS) & set(c.COMMANDS)
        assert c.ALL_COMMANDS == {**c.COMMANDS, **c.CLUSTER_COMMANDS, **c.DATA_COMMANDS,
                                  **c.CONTROL_COMMANDS}


class ReplyTests:

    @settings(max_examples=200, deadline=None)
    @given(st.binary(max_size=600), st.integers(0, 50), st.integers(-1, 10**12))
    def test_pull_reply_carries_any_bytes(self, data: bytes, epoch: int, hw: int) -> None:
        """Whatever bytes the records hold, the reply is one line and the follower gets
        them back exactly, with every other field."""
        count = 3 if data else 0
        line = c.replica_pull_reply("9", epoch=epoch, hw=hw, leo=hw + 5, start=0,
                                    isr=[0, 2], epochs=[(0, 0), (epoch, 4)], count=count,
                                    data=data)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        reply = parse_reply(line[:-1])
        assert reply.ok and reply.cid == "9"
        pulled = parse_pull_reply(reply.payload)
        assert pulled == PullReply(epoch, hw, hw + 5, 0, (0, 2),
                                   (EpochEntry(0, 0), EpochEntry(epoch, 4)), count, data)

    def test_epoch_reply(self) -> None:
        """REPLICA_EPOCH's payload parses into role, epoch, confirmation and the lookup."""
        payload = c.replica_epoch_payload("leader", 4, True, 3, 990, 1200, 1100)
        assert payload == ("role=leader epoch=4 confirmed=true end_epoch=3 end_offset=990 "
                           "leo=1200 hw=1100")
        reply = parse_reply(c.ok("2", payload)[:-1])
        assert parse_epoch_reply(reply.payload) == EpochReply(Role.LEADER, 4, True, 3, 990,
                                                                    1200, 1100)

    def test_status_payload_lists(self) -> None:
        """REPLICA_STATUS lists parse as lists, whatever their spaces."""
        payload = c.replica_status_payload(
            role="follower", epoch=2, confirmed=False, hw=9, leo=10, start=0, isr=[0, 1],
            under_replicated=True, replica=1, replicas=[4, 5, 6], leader=4,
            epochs=[(0, 0), (2, 7)])
        fields = payload_fields(payload)
        assert fields["isr"] == "[0 1]" and fields["replicas"] == "[4 5 6]"
        assert fields["epochs"] == "[0:0 2:7]" and fields["leader"] == "4"

    def test_error_replies_map_to_error_classes(self) -> None:
        """ERR replies become the error class of their code, message kept."""
        cases = [(NotLeader("fenced by epoch 3"), NotLeaderError),
                 (BadRequest("unknown topic"), BadRequestError),
                 (ReplicationTimeout("slow"), ReplicationTimeoutError)]
        for error, cls in cases:
            reply = parse_reply(c.err("5", error)[:-1])
            assert not reply.ok and reply.cid == "5"
            assert isinstance(reply.error(), cls)
            assert reply.error().code == code_for(error)
            assert reply.error().broker_message == error.message

    @pytest.mark.parametrize("line", [b"", b"V2|1|OK", b"V1|1", b"V1|1|MAYBE|x", b"V1|1|ERR"])
    def test_not_a_reply(self, line: bytes) -> None:
        """Lines that are not V1 replies are protocol violations."""
        with pytest.raises(ProtocolViolation):
            parse_reply(line)

    @pytest.mark.parametrize("payload", [
        b"epoch=1 hw=0 leo=1 start=0 isr=[0] epochs=[] count=1",
        b"epoch=1 hw=0 leo=1 start=0 isr=[0] epochs=[] count=1 data=!!!",
        b"epoch=1 hw=0 leo=1 start=0 isr=[0] epochs=[] count=0 data=AAAA",
        b"epoch=x hw=0 leo=1 start=0 isr=[0] epochs=[] count=0 data=",
        b"epoch=1 hw=0 leo=1 start=0 isr=0 epochs=[] count=0 data=",
        b"epoch=1 hw=0 leo=1 start=0 isr=[0] epochs=[1-2] count=0 data=",
    ])
    def test_bad_pull_payloads(self, payload: bytes) -> None:
        """A pull answer missing a field, or with inconsistent data, is refused."""
        with pytest.raises(ProtocolViolation):
            parse_pull_reply(payload)

    def test_bad_epoch_payload(self) -> None:
        """An epoch answer with an unknown role or a non-boolean is refused."""
        for payload in (b"role=boss epoch=1 confirmed=true end_epoch=0 end_offset=0 leo=0 hw=0",
                        b"role=leader epoch=1 confirmed=yes end_epoch=0 end_offset=0 leo=0 hw=0"):
            with pytest.raises(ProtocolViolation):
                parse_epoch_reply(payload)


class _AnsweringPeers:
    """``Peers`` stand-in: every request is answered with ``answer(cid)``."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.sent: list[bytes] = []

    def request(self, broker_id: int, build: Any) -> Deferred[Any]:
        self.sent.append(build("9"))
        return succeed(parse_reply(self.answer))


def _outcome(d: Deferred[Any]) -> Any:
    results: list[Any] = []
    d.addBoth(results.append)
    (result,) = results
    return result.value if isinstance(result, Failure) else result


class PeerAnswerTests:
    """What the follower sees of another broker's answers: the broker's V1 links turn them
    into the domain's values and errors (``replication.errors``), so the fetch loop knows no
    wire code."""

    def _epoch(self, answer: bytes) -> Any:
        peers = _AnsweringPeers(answer)
        d = V1ReplicaLinks(peers).epoch(2, "t", 0, 1, 5, 4)  # type: ignore[arg-type]
        assert peers.sent == [b"V1|9|REPLICA_EPOCH|t 0 1 5 last_epoch=4\n"]
        return _outcome(d)

    def test_an_answer_is_the_domain_value(self) -> None:
        payload = c.replica_epoch_payload("follower", 5, False, 4, 90, 100, 80)
        assert self._epoch(c.ok("9", payload)[:-1]) == EpochReply(
            Role.FOLLOWER, 5, False, 4, 90, 100, 80)

    @pytest.mark.parametrize(("error", "domain"), [
        (NotLeader("fenced by epoch 6"), NotLeader),
        (Unavailable("shutting down"), PeerCannotAnswer),
        (InternalError("bug"), PeerCannotAnswer),
        (Unauthenticated("not a peer user"), PeerNotAuthenticated),
        (BadRequest("no replica state"), PeerRefusal),
    ])
    def test_refusals_become_domain_errors(self, error: Exception, domain: type) -> None:
        """Each ERR code a peer may answer becomes one ``replication.errors`` class; its
        text is kept for the log. A transport that ever sees one answers "retry"."""
        got = self._epoch(c.err("9", error)[:-1])
        assert type(got) is domain
        assert str(error) in str(got)
        assert code_for(got) == ("NOT_LEADER" if domain is NotLeader else "UNAVAILABLE")

    def test_a_reply_that_does_not_parse_is_malformed(self) -> None:
        got = self._epoch(c.ok("9", "role=boss epoch=1")[:-1])
        assert isinstance(got, MalformedPeerReply) and "role='boss'" in str(got)
        assert not isinstance(got, PeerRefusal)
