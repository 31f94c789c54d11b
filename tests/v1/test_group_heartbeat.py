"""V1 ``GROUP_HEARTBEAT`` (KIP-848 consumer groups over the line protocol): the codec's
table of accepted and refused lines, and docs/protocol.md's transcript replayed line for
line against a real broker (hand-over, COMMIT with member epochs, fencing, leave, the
cross-protocol refusal and the argument refusals)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.codec import group_heartbeat_args
from broker.v1.codec import Codec, CommandError, GroupHeartbeat
from tests.support import ROOT, BrokerProcess

DOC = ROOT / "docs" / "protocol.md"

ACCEPTED = [
    (b"V1|1|GROUP_HEARTBEAT|g m 0 topics=a,b rebalance_timeout_ms=1000",
     GroupHeartbeat("1", "g", "m", 0, ("a", "b"), None, None, 1000, None, None)),
    (b"V1|2|GROUP_HEARTBEAT|g m 7 owned=a:1,a:0,b:2,a:1",
     GroupHeartbeat("2", "g", "m", 7, owned=(("a", 0), ("a", 1), ("b", 2)))),
    (b"V1|3|GROUP_HEARTBEAT|g m 3 owned=", GroupHeartbeat("3", "g", "m", 3, owned=())),
    (b"V1|4|GROUP_HEARTBEAT|g m leave", GroupHeartbeat("4", "g", "m", -1)),
    (b"V1|5|GROUP_HEARTBEAT|g m leave_static instance=i-1",
     GroupHeartbeat("5", "g", "m", -2, instance="i-1")),
    (b"V1|6|GROUP_HEARTBEAT|g m 0 regex=b3JkZXJzfHBheQ== enc=b64 assignor=range topics=",
     GroupHeartbeat("6", "g", "m", 0, (), "orders|pay", "range")),
    (b"V1|7|GROUP_HEARTBEAT|g m 0 regex=orders-.* assignor=",
     GroupHeartbeat("7", "g", "m", 0, regex="orders-.*", assignor="")),
]

REFUSED = [
    (b"V1|1|GROUP_HEARTBEAT|g m -1", "member epoch must be a non-negative integer"),
    (b"V1|2|GROUP_HEARTBEAT|g m 2147483648", "member epoch must be at most 2147483647"),
    (b"V1|3|GROUP_HEARTBEAT|g m", "GROUP_HEARTBEAT <group> <member_id>"),
    (b"V1|4|GROUP_HEARTBEAT|g m 0 owned=a", "owned entries are <topic>:<partition>"),
    (b"V1|5|GROUP_HEARTBEAT|g m 0 owned=a:x", "partition must be a non-negative integer"),
    (b"V1|6|GROUP_HEARTBEAT|g m 0 enc=b64", "enc=b64 applies to regex="),
    (b"V1|7|GROUP_HEARTBEAT|g m 0 regex=!! enc=b64", "regex"),
    (b"V1|11|GROUP_HEARTBEAT|g m 0 regex=YQ== enc=hex", "expected enc=b64"),
    (b"V1|8|GROUP_HEARTBEAT|g m 0 topics=a,,b", "topic"),
    (b"V1|9|GROUP_HEARTBEAT|g m/x 0", "member id"),
    (b"V1|10|GROUP_HEARTBEAT|g m 0 session_timeout_ms=5", "unknown option"),
]


class TestCodec:
    @pytest.mark.parametrize(("line", "expected"), ACCEPTED)
    def test_accepted(self, line: bytes, expected: GroupHeartbeat) -> None:
        """Each line parses into exactly these fields (None: not sent)."""
        assert Codec().parse_command(line) == expected

    @pytest.mark.parametrize(("line", "message"), REFUSED)
    def test_refused(self, line: bytes, message: str) -> None:
        """Each malformed line is BAD_REQUEST naming what is wrong."""
        with pytest.raises(CommandError) as caught:
            Codec().parse_command(line)
        reply = caught.value.reply().decode()
        assert "|ERR|BAD_REQUEST|" in reply and message in reply, reply


def _transcript() -> list[tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### Consumer groups with server-side assignment", 1)[1]
    section = section.split("\n### ", 1)[0]
    return [(m.group(1), m.group(2)) for m in
            re.finditer(r"^(V1\|\S*\|[A-Z_]+\|.*?)\s+->\s+(V1\|.*)$", section, re.M)]


def test_the_documented_session(tmp_path: Path) -> None:
    """docs/protocol.md's GROUP_HEARTBEAT transcript is what a real broker answers, line
    for line: w2 gets nothing until w1's heartbeat confirms the revocation, then exactly
    w1's former partitions; commits need the current member epoch and an owned
    partition; a JOIN into the group is refused while it has members."""
    pairs = _transcript()
    assert len(pairs) >= 12
    with BrokerProcess(tmp_path / "broker", {}) as proc:
        client = proc.client()
        assert "|OK|" in client.request("V1|1|ADMIN_CREATE_TOPIC|clicks 4 1")
        for request, reply in pairs:
            assert client.request(request) == reply, request
        client.close()


def test_describe_group_shows_each_kind_in_its_own_shape(tmp_path: Path) -> None:
    """DESCRIBE_GROUP of a consumer group carries the additive fields; once its members
    have left and the name is JOINed the classic way, the classic group is described
    exactly as before (no type=, nothing added)."""
    with BrokerProcess(tmp_path / "broker", {}) as proc:
        client = proc.client()
        assert "|OK|" in client.request("V1|1|ADMIN_CREATE_TOPIC|clicks 2 1")
        assert "|OK|" in client.request("V1|2|GROUP_HEARTBEAT|dash w1 0 topics=clicks")
        assert client.request("V1|3|DESCRIBE_GROUP|dash clicks") == (
            "V1|3|OK|state=stable generation=1 assignor=uniform members=[w1:0,1] "
            "partitions=[0 1] committed=[0 0] hw=[-1 -1] lag=[0 0] type=consumer "
            "group_epoch=1 assignment_epoch=1 epochs=[w1:1] pending=[]")
        assert "|OK|" in client.request("V1|4|GROUP_HEARTBEAT|dash w1 leave")
        assert client.request("V1|5|JOIN|dash clicks c1") == \
            "V1|5|OK|generation=1 assigned=[0 1]"
        assert client.request("V1|6|DESCRIBE_GROUP|dash clicks") == (
            "V1|6|OK|state=stable generation=1 assignor=round_robin members=[c1:0,1] "
            "partitions=[0 1] committed=[0 0] hw=[-1 -1] lag=[0 0]")
        client.close()


def test_reserved_names_are_refused(tmp_path: Path) -> None:
    """The Iggy transport's internal topics cannot be subscribed to, and its consumer
    pseudo-groups cannot be used, through GROUP_HEARTBEAT (docs/protocol.md, Reserved
    names)."""
    with BrokerProcess(tmp_path / "broker", {}) as proc:
        client = proc.client()
        topic = client.request("V1|1|GROUP_HEARTBEAT|g m 0 topics=__iggy.x")
        group = client.request("V1|2|GROUP_HEARTBEAT|iggy.consumer.x m 0 topics=t")
        assert topic.startswith("V1|1|ERR|BAD_REQUEST|topic __iggy.x is reserved"), topic
        assert group.startswith("V1|2|ERR|BAD_REQUEST|group iggy.consumer.x is reserved"), group
        client.close()


names = st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,20}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(group=names, member=names, epoch=st.integers(-2, 2_147_483_647),
       topics=st.none() | st.lists(names, max_size=4),
       regex=st.none() | st.text(max_size=30),
       assignor=st.none() | st.sampled_from(["uniform", "range"]),
       timeout=st.none() | st.integers(0, 2_147_483_647),
       instance=st.none() | names,
       owned=st.none() | st.lists(st.tuples(names, st.integers(0, 10_000)), max_size=6))
def test_the_client_encoding_parses_back(group: str, member: str, epoch: int,
                                         topics: list[str] | None, regex: str | None,
                                         assignor: str | None, timeout: int | None,
                                         instance: str | None,
                                         owned: list[tuple[str, int]] | None) -> None:
    """Whatever the Python client sends (``group_heartbeat_args``) the server's codec
    parses into exactly those fields: any regex text survives (base64), -1/-2 become the
    leave words and back, owned partitions arrive as a sorted set."""
    args = group_heartbeat_args(group, member, epoch, topics=topics, regex=regex,
                                assignor=assignor, rebalance_timeout_ms=timeout,
                                instance=instance, owned=owned)
    command = Codec().parse_command(f"V1|x|GROUP_HEARTBEAT|{args}".encode())
    assert command == GroupHeartbeat(
        "x", group, member, epoch, None if topics is None else tuple(topics), regex, assignor,
        timeout, instance, None if owned is None else tuple(sorted(set(owned))))
