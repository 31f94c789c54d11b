"""The refusals of the Kafka classic group coordinator (``groups.classic``), in the domain's
words.

Owns: ``KafkaGroupError`` and its subclasses. They carry **no wire code**: the Kafka
transport maps each class onto its error code in one table (the expected rows are listed
in each docstring, after "Kafka:", and in docs/kafka-groups.md). A refusal raised by an
operation changed nothing; the same classes also travel as *values* in a ``Deliver``
effect when a held JoinGroup/SyncGroup is answered later, and as a heartbeat's reply when
the refusal comes with a session refresh (see ``groups.classic``).

Kept apart from ``groups.errors`` (V1's domain errors) on purpose: the two coordinators
refuse different things, and V1's module is being reshaped separately.

Must not import: Twisted, ``broker`` (no wire codes here), anything that does I/O.
"""

from __future__ import annotations

from data.refusal import SkerryError

__all__ = [
    "KafkaGroupError",
    "UnknownMemberId",
    "IllegalGeneration",
    "RebalanceInProgress",
    "InconsistentGroupProtocol",
    "GroupInUseByOtherProtocol",
    "InvalidGroupId",
    "InvalidSessionTimeout",
    "OffsetMetadataTooLarge",
    "GroupNotEmpty",
    "NotCoordinator",
    "CoordinatorLoading",
    "FencedInstanceId",
    "GroupIdNotFound",
]


class KafkaGroupError(SkerryError):
    """Base of every refusal of the classic coordinator: a *peer* mistake or a normal
    protocol signal (rejoin, retry), never a bug in Skerry (bugs raise
    ``groups.state.IllegalStateError``). A ``SkerryError`` like every domain refusal, so a
    handler boundary tells it from a bug in one ``except``."""

    description = "the group coordinator refused the request"


class UnknownMemberId(KafkaGroupError):
    """The member id is not (or no longer) a member of the group: it was never there, it
    left, its session expired, it missed the join barrier, or the group does not exist.
    Also a simple (generation -1) commit into a group with live members. The client
    forgets its member id and joins as a new member. Kafka: 25 UNKNOWN_MEMBER_ID."""


class FencedInstanceId(KafkaGroupError):
    """A static member's request from an incarnation another member id has replaced
    (KIP-345); the client must not rejoin with it."""


class IllegalGeneration(KafkaGroupError):
    """The request names a generation other than the group's current one: the member
    missed a rebalance. It must rejoin. Kafka: 22 ILLEGAL_GENERATION."""


class RebalanceInProgress(KafkaGroupError):
    """The group is rebalancing: the member must (re)join before it may sync, commit or
    keep its partitions. Also the answer to a held SyncGroup when a new rebalance starts
    before the leader's assignment arrived, and to a held request the same member
    superseded with a newer one. Kafka: 27 REBALANCE_IN_PROGRESS."""


class InconsistentGroupProtocol(KafkaGroupError):
    """The join's protocol type differs from the group's, or none of its protocols is
    supported by every member. Fatal for the client. Kafka: 23
    INCONSISTENT_GROUP_PROTOCOL."""


class GroupInUseByOtherProtocol(InconsistentGroupProtocol):
    """The group id has live members under another Skerry protocol (V1): two coordinators
    must never hand out the same partitions. Kafka: 23 INCONSISTENT_GROUP_PROTOCOL (the
    V1 side refuses the reverse case with BAD_REQUEST)."""


class InvalidGroupId(KafkaGroupError):
    """The group id is empty, or not a Skerry name (``[A-Za-z0-9._-]``, 1-249 characters,
    not ``.``/``..``): committed offsets are shared with V1's store, whose names follow
    that rule. Kafka: 24 INVALID_GROUP_ID."""


class InvalidSessionTimeout(KafkaGroupError):
    """The session timeout lies outside the coordinator's configured range. Kafka: 26
    INVALID_SESSION_TIMEOUT."""


class OffsetMetadataTooLarge(KafkaGroupError):
    """A committed offset's metadata string is longer than the configured limit (4096
    bytes by default, Kafka's ``offset.metadata.max.bytes``). Reported per partition.
    Kafka: 12 OFFSET_METADATA_TOO_LARGE."""


class GroupIdNotFound(KafkaGroupError):
    """An admin request for a group that has neither members nor committed offsets."""


class GroupNotEmpty(KafkaGroupError):
    """An admin deletion of a group that still has members. Kafka: 68 NON_EMPTY_GROUP
    (DeleteGroups, not among the 0.8.2-0.10.1 APIs; for tools)."""


class NotCoordinator(KafkaGroupError):
    """This broker is not the group's coordinator (not the leader of the group's partition
    of ``__skerry_groups``), or stopped being it while the request was held: the client
    asks FindCoordinator again. Kafka: 16 NOT_COORDINATOR."""


class CoordinatorLoading(KafkaGroupError):
    """This broker has just become the group's coordinator and is still reading the
    partition's records: retry shortly. Kafka: 14 COORDINATOR_LOAD_IN_PROGRESS."""
