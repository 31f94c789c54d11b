"""``GroupRouter`` (``broker/services/group_router.py``): the group operations the Iggy
transport performs for its clients, served here when this broker coordinates the group,
else sent to the coordinator as the V1 line a client would send, with its answer (or its
refusal, as the same domain error) coming back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.trial.unittest import SynchronousTestCase

from broker.client.codec import parse_reply
from broker.errors import (
    CoordinatorLoading,
    GenerationMismatch,
    PartitionNotOwned,
    StorageError,
    Unavailable,
    UnknownGroup,
    UnknownMember,
)
from broker.services.coordinators import Route, Routing
from broker.services.group_router import GroupRouter, GroupView
from groups.group import Group, Member


@dataclass
class FakeCoordinators:
    """Groups whose name starts with ``here`` are coordinated here, ``loading`` are
    loading, ``gone`` have no leader; every other group is coordinated by broker 2."""

    broker_id: int = 0

    def route(self, group: str) -> Routing:
        if group.startswith("here"):
            return Routing(Route.LOCAL, 0)
        if group.startswith("loading"):
            return Routing(Route.LOADING, 0)
        if group.startswith("gone"):
            return Routing(Route.UNAVAILABLE, 0)
        return Routing(Route.FORWARD, 1, 2)


class FakeGroups:
    """A ``GroupService`` that records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def offset(self, group: str, topic: str, partition: int) -> int:
        self.calls.append(("offset", group, topic, partition))
        return 11

    def list_groups(self) -> list[tuple[str, str]]:
        return [("here", "t")]


class Peer:
    """The broker link: each line sent, and the answer to give."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.sent: list[tuple[int, bytes]] = []

    def __call__(self, broker: int, build: Any) -> Deferred[Any]:
        line = build(f"fwd-{len(self.sent)}")
        self.sent.append((broker, line))
        command = line.split(b"|")[2].decode()
        answer = self.answers[command]
        if isinstance(answer, Exception):
            return fail(answer)
        return succeed(parse_reply(answer.replace(b"CID", f"fwd-{len(self.sent) - 1}".encode())))


def _result(d: Deferred[Any]) -> Any:
    out: list[Any] = []
    d.addBoth(out.append)
    assert out, "not fired"
    return out[0]


class GroupRouterTests(SynchronousTestCase):
    def router(self, answers: dict[str, Any]) -> tuple[GroupRouter, FakeGroups, Peer]:
        groups, peer = FakeGroups(), Peer(answers)
        router = GroupRouter(groups)
        router.route_through(FakeCoordinators(), peer, lambda: [0, 1, 2])
        return router, groups, peer

    def test_single_broker_serves_everything_here(self) -> None:
        """Without coordinators every operation is the local call, answered at once."""
        groups = FakeGroups()
        router = GroupRouter(groups)
        self.assertTrue(router.is_single())
        self.assertEqual(_result(router.offset("g", "t", 1)), 11)
        self.assertEqual(groups.calls, [("offset", "g", "t", 1)])
        self.assertEqual(router.forwarded, 0)

    def test_other_coordinator_gets_the_v1_line(self) -> None:
        """A group coordinated elsewhere: the V1 command goes to that broker, and the
        answer is read back; nothing is asked of the local service."""
        router, groups, peer = self.router({
            "OFFSET": b"V1|CID|OK|offset=42",
            "JOIN": b"V1|CID|OK|generation=3 assigned=[0 2]",
        })
        self.assertEqual(_result(router.offset("g", "t", 1)), 42)
        self.assertEqual(_result(router.join("g", "t", "iggy-ab-1", session_timeout_ms=9000)),
                         (3, [0, 2]))
        self.assertEqual(peer.sent, [(2, b"V1|fwd-0|OFFSET|g t 1\n"),
                                     (2, b"V1|fwd-1|JOIN|g t iggy-ab-1 session_timeout_ms=9000\n")])
        self.assertEqual(groups.calls, [])
        self.assertEqual(router.forwarded, 2)

    def test_view_reads_describe_group(self) -> None:
        """DESCRIBE_GROUP's members and generation become a ``GroupView``; an unknown
        group (GENERATION_MISMATCH) is None."""
        router, _, _ = self.router({"DESCRIBE_GROUP": (
            b"V1|CID|OK|state=stable generation=4 assignor=range members=[a:0,1 b:2 c:] "
            b"partitions=[0 1 2] committed=[0 0 0] hw=[1 1 1] lag=[1 1 1] coordinator=2")})
        view = _result(router.view("g", "t"))
        self.assertEqual(view, GroupView(4, {"a": (0, 1), "b": (2,), "c": ()}))
        self.assertEqual(view.assigned("a"), [0, 1])
        router, _, _ = self.router({"DESCRIBE_GROUP": b"V1|CID|ERR|GENERATION_MISMATCH|no group"})
        self.assertIsNone(_result(router.view("g", "t")))

    def test_refusals_come_back_as_domain_errors(self) -> None:
        """The coordinator's error code becomes the refusal it stands for; a coordinator
        that does not answer is Unavailable; a loading or missing coordinator refuses
        without asking anyone."""
        router, _, peer = self.router({
            "COMMIT": b"V1|CID|ERR|GENERATION_MISMATCH|stale generation",
            "ADMIN_COMMIT": b"V1|CID|ERR|STORAGE_ERROR|disk full",
            "LEAVE": ConnectionRefusedError("refused"),
        })
        self.assertIsInstance(_result(router.commit("g", "t", "m", 1, 0, 5)).value,
                              GenerationMismatch)
        self.assertIsInstance(_result(router.admin_commit("g", "t", 0, 5)).value, StorageError)
        self.assertIsInstance(_result(router.leave("g", "t", "m", 1)).value, Unavailable)
        self.assertIsInstance(_result(router.offset("loading-g", "t", 0)).value,
                              CoordinatorLoading)
        self.assertIsInstance(_result(router.offset("gone-g", "t", 0)).value, Unavailable)
        self.assertEqual(len(peer.sent), 3)

    def test_list_groups_asks_every_other_live_broker(self) -> None:
        """LIST_GROUPS: this broker's groups and those every other live broker answers."""
        router, _, peer = self.router({"LIST_GROUPS": b"V1|CID|OK|groups=[g1:t g2:u]"})
        self.assertEqual(_result(router.list_groups()),
                         [("g1", "t"), ("g2", "u"), ("here", "t")])
        self.assertEqual([b for b, _ in peer.sent], [1, 2])

    def test_rejoin_refusals_keep_their_kind(self) -> None:
        """V1 answers every rejoin refusal GENERATION_MISMATCH; the refusal coming back is
        the one the coordinator raised (as the domain words it), so a transport maps it
        to the same status as when the group is served here."""
        messages = {}
        grp = Group("g", "t", generation=1, partitions=2, members=[Member("m", 10000)],
                    assignment={"m": [0]})
        for error, call in ((PartitionNotOwned, lambda: grp.validate_member("m", 1, partition=1)),
                            (UnknownMember, lambda: grp.validate_member("x", 1))):
            try:
                call()
            except error as raised:
                messages[error] = str(raised)
        for error, message in [*messages.items(), (UnknownGroup, "no group g on topic t")]:
            router, _, _ = self.router({"COMMIT": b"V1|CID|ERR|GENERATION_MISMATCH|"
                                                  + message.encode()})
            refused = _result(router.commit("g", "t", "m", 1, 1, 5)).value
            self.assertIs(type(refused), error, message)
