"""The fetch loop on its port alone: ``PartitionFetcher`` driven through a ``ReplicaLinks``
that is no V1 at all (answers and domain errors handed over directly), so what it does on
each kind of answer is the domain's rule, not the wire's."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock

from replication.epochs import EpochLookup
from replication.errors import MalformedPeerReply, NotLeader, PeerCannotAnswer, PeerRefusal
from replication.follower import FetcherState, FetchSettings, PartitionFetcher
from replication.roles import Role
from replication.wire import EpochReply, PullReply


class View:
    """One follower replica (position 1 of brokers 0, 1, 2) with an empty log."""

    topic, partition, replicas = "t", 0, (0, 1, 2)
    is_replica, gone, local_replica, role, confirmed = True, False, 1, Role.FOLLOWER, False

    def __init__(self) -> None:
        self.known_epoch, self.last_epoch, self.log_end = 3, -1, 0
        self.leader = -1
        self.applied: list[PullReply] = []

    def observe_epoch(self, epoch: int) -> bool:
        newer = epoch > self.known_epoch
        self.known_epoch = max(self.known_epoch, epoch)
        return newer

    def set_leader(self, broker_id: int) -> None:
        self.leader = broker_id

    def truncate_for(self, answer: EpochLookup) -> int:
        return self.log_end

    def truncate_to(self, offset: int) -> None:
        self.log_end = offset

    def apply(self, reply: PullReply) -> Deferred[None]:
        self.applied.append(reply)
        self.log_end += reply.count
        return succeed(None)


class Link:
    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.lost = False
        self.pulled_from: list[int] = []

    def pull(self, topic: str, partition: int, replica_id: int, offset: int, epoch: int, *,
             wait_ms: int, max_bytes: int) -> Deferred[PullReply]:
        self.pulled_from.append(offset)
        answer = self.answers.pop(0) if self.answers else Deferred()  # then: a long poll
        return fail(answer) if isinstance(answer, Exception) else \
            answer if isinstance(answer, Deferred) else succeed(answer)

    def close(self) -> None:
        self.lost = True


class Links:
    """Broker 0 leads epoch 3; broker 2 answers what ``other`` says."""

    def __init__(self, pulls: list[Any], other: Any) -> None:
        self.pulls = pulls
        self.other = other
        self.asked: list[int] = []
        self.opened: list[Link] = []
        self.closed = False

    def epoch(self, broker_id: int, topic: str, partition: int, replica_id: int, epoch: int,
              last_epoch: int | None) -> Deferred[EpochReply]:
        self.asked.append(broker_id)
        if broker_id == 0:
            return succeed(EpochReply(Role.LEADER, 3, True, -1, 0, 10, 10))
        return fail(self.other) if isinstance(self.other, Exception) else succeed(self.other)

    def open(self, broker_id: int) -> Deferred[Link]:
        link = Link(self.pulls)
        self.opened.append(link)
        return succeed(link)

    def close(self) -> None:
        self.closed = True  # the port's close: these links hold nothing to release


def records(count: int) -> PullReply:
    return PullReply(3, 0, 10, 0, (0, 1), (), count, b"x" * count)


def run(pulls: list[Any], other: Any = None) -> tuple[PartitionFetcher, View, Links, Clock]:
    view, clock = View(), Clock()
    links = Links(pulls, other if other is not None else PeerCannotAnswer("UNAVAILABLE"))
    fetcher = PartitionFetcher(view, links, clock, FetchSettings(retry_backoff_ms=250))
    fetcher.start()
    return fetcher, view, links, clock


def test_the_leader_is_found_and_followed_through_the_port() -> None:
    """An unreachable-for-now replica does not stop the choice; the leader's records are
    appended and the next pull starts where they end."""
    fetcher, view, links, _clock = run([records(4), records(2)])
    assert fetcher.state is FetcherState.FETCHING and view.leader == 0
    assert [r.count for r in view.applied] == [4, 2]
    assert links.opened[0].pulled_from == [0, 4, 6]


def test_not_leader_from_the_leader_starts_a_new_discovery_at_once() -> None:
    fetcher, _view, links, _clock = run([NotLeader("fenced by epoch 4")])
    assert links.asked == [0, 2, 0, 2]  # asked again straight away, no back-off
    assert links.opened[0].lost and len(links.opened) == 2
    assert fetcher.state is FetcherState.FETCHING


def test_a_refusal_or_a_malformed_answer_backs_off_before_asking_again() -> None:
    for error in (PeerRefusal("BAD_REQUEST no replica state"),
                  MalformedPeerReply("REPLICA_PULL reply without data=")):
        fetcher, _view, links, clock = run([error])
        assert fetcher.state is FetcherState.BACKOFF and links.asked == [0, 2]
        clock.advance(0.25)
        assert links.asked == [0, 2, 0, 2] and fetcher.state is FetcherState.FETCHING


def test_no_leader_among_the_answers_backs_off() -> None:
    """Only a deposed leader (epoch 2 < the known 3) answers as leader: nobody is chosen."""
    view, clock = View(), Clock()
    links = Links([], PeerCannotAnswer("UNAVAILABLE"))
    links.epoch = lambda bid, *a: succeed(EpochReply(Role.LEADER, 2, True, -1, 0, 0, 0)) \
        if bid == 0 else fail(NotLeader("x"))  # type: ignore[method-assign]
    fetcher = PartitionFetcher(view, links, clock, FetchSettings())
    fetcher.start()
    assert fetcher.state is FetcherState.BACKOFF and links.opened == []
