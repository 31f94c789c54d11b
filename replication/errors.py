"""The replication package's own exceptions, in the replica's words.

Owns: ``ReplicationError`` and its kinds: ``NotLeader`` (this replica does not lead the
partition, or no longer does), ``InvalidReplicaRequest`` (a replica id, role or offset that
cannot apply) and ``ReplicationTimeout`` (``acks=all`` not satisfied in time; the record
stays in the log). Plain classes with no wire code: each transport maps them onto its own
(``broker.v1.errors``, ``broker.iggy.errors``). Also the idempotent producer's refusals
(``ProducerStateError``: ``InvalidProducerEpoch``, ``OutOfOrderSequence``), which
``replication.producer_state`` raises. And what the follower's links to other brokers
(``replication.follower.links``) fail with when a peer answers but not with what was asked:
``PeerRefusal`` (refused; ``PeerCannotAnswer`` when it could not answer for now,
``PeerNotAuthenticated`` when it does not take this broker for a peer) and
``MalformedPeerReply``; a peer that answers NOT_LEADER is a ``NotLeader``.

Must not import: Twisted, anything of ``broker``. Only the neutral root
``data.refusal.SkerryError``.
"""

from __future__ import annotations

from data.refusal import SkerryError

__all__ = ["ReplicationError", "NotLeader", "InvalidReplicaRequest", "ReplicationTimeout",
           "PeerError", "PeerRefusal", "PeerCannotAnswer", "PeerNotAuthenticated",
           "MalformedPeerReply", "ProducerStateError", "InvalidProducerEpoch",
           "OutOfOrderSequence"]


class ReplicationError(SkerryError):
    """A replication request or acknowledgement refused."""

    description = "replication request refused"


class NotLeader(ReplicationError):
    """The partition is in follower role on this broker (or leadership moved on).

    ``leader``, ``addr`` and ``epoch`` name the leader when this broker knows it (a broker
    id, its V1 ``host:port``, the leader epoch); transports may pass them on as a hint."""

    description = "partition is in follower role on this broker"

    def __init__(self, message: str | None = None, *, leader: int | None = None,
                 addr: str | None = None, epoch: int | None = None) -> None:
        super().__init__(message)
        self.leader = leader
        self.addr = addr
        self.epoch = epoch


class InvalidReplicaRequest(ReplicationError):
    """A replica id, role or offset that cannot apply to this partition."""

    description = "invalid replica request"


class ReplicationTimeout(ReplicationError):
    """``acks=all`` could not be satisfied before the ack timeout."""

    description = "acks=all could not be satisfied before the ack timeout"


class PeerError(ReplicationError):
    """Another broker's answer to a replication request (an epoch query, a pull) was not the
    one asked for. The fetch loop and the leader probe back off or ask again; a transport
    that ever sees one answers "unavailable, retry"."""

    description = "another broker did not answer the replication request"


class PeerRefusal(PeerError):
    """Another broker refused the request; the message carries its answer."""

    description = "another broker refused the replication request"


class PeerCannotAnswer(PeerRefusal):
    """Another broker could not answer for now (overloaded, shutting down, a bug there): no
    news about its epoch, unlike a refusal that says it holds nothing of the partition."""

    description = "another broker could not answer the replication request"


class PeerNotAuthenticated(PeerCannotAnswer):
    """Another broker does not take this one for a broker (``cluster.peer_users``)."""

    description = "another broker does not take this one for a peer"


class MalformedPeerReply(PeerError):
    """Another broker's reply does not parse (a missing field, bad data)."""

    description = "malformed reply from another broker"


class ProducerStateError(SkerryError):
    """A batch of an idempotent producer refused by the partition's producer state."""

    description = "idempotent produce refused"


class InvalidProducerEpoch(ProducerStateError):
    """The batch carries an older epoch than the partition has seen from its producer id:
    a newer instance of the producer fenced this one (Kafka's INVALID_PRODUCER_EPOCH)."""

    description = "producer epoch is older than the partition's"


class OutOfOrderSequence(ProducerStateError):
    """The batch's first sequence number does not follow the last one the partition holds
    from its producer (a gap, a batch older than the last five, or a new epoch that does not
    start at 0): Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER."""

    description = "out of order sequence number"
