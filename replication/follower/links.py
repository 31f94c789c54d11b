"""What the fetch loop and the leader probe need from the network, as ports the broker fills.

Owns: ``ReplicaLinks`` (ask another broker for its epoch of a partition; open a connection
of one's own to a leader; close everything) and ``LeaderLink`` (one such connection, for
one fetch session's pulls). Answers come back as the domain's values
(``replication.wire.EpochReply``, ``PullReply``); failures as the domain's errors:
``NotLeader`` when the peer says it does not lead, ``PeerRefusal`` (and its kinds) when it
refuses, ``MalformedPeerReply`` when its reply does not parse, and any other exception
(a lost connection, a timeout) when there was no answer at all.

The broker supplies the implementation that speaks V1 (``broker.peer_links``:
``REPLICA_EPOCH`` and ``REPLICA_PULL`` over authenticated, optionally TLS connections);
tests may supply any other.

Must not import: ``broker``, the global reactor.
"""

from __future__ import annotations

from typing import Protocol

from twisted.internet.defer import Deferred

from replication.wire import EpochReply, PullReply

__all__ = ["LeaderLink", "ReplicaLinks"]


class LeaderLink(Protocol):
    """A connection to the leader owned by one fetch session (long polls hold it)."""

    @property
    def lost(self) -> bool:
        """The connection is closed (by either side); pulls on it fail."""
        ...

    def pull(self, topic: str, partition: int, replica_id: int, offset: int, epoch: int, *,
             wait_ms: int, max_bytes: int) -> Deferred[PullReply]:
        """Fetch records from ``offset`` (reporting this replica holds everything before
        it), waiting up to ``wait_ms`` for some; ``epoch`` is the newest this replica
        knows."""
        ...

    def close(self) -> None:
        """Close the connection; a pull still waiting fails."""
        ...


class ReplicaLinks(Protocol):
    """The follower's links to the other brokers of the cluster."""

    def epoch(self, broker_id: int, topic: str, partition: int, replica_id: int, epoch: int,
              last_epoch: int | None) -> Deferred[EpochReply]:
        """Tell ``broker_id`` this replica's epoch and learn its own (a short request on a
        shared connection); ``last_epoch`` is the latest epoch of the asker's log (None when
        it has none), which the answer's end offset is about."""
        ...

    def open(self, broker_id: int) -> Deferred[LeaderLink]:
        """A new connection to ``broker_id`` for the caller alone."""
        ...

    def close(self) -> None:
        """Close every connection; later requests fail."""
        ...
