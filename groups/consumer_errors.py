"""The refusals of the KIP-848 consumer-group coordinator (``groups.consumer_coordinator``),
in the domain's words.

Owns: one class per way a ConsumerGroupHeartbeat, ConsumerGroupDescribe or an
epoch-checked OffsetCommit/OffsetFetch is refused. Like ``groups.kafka_errors`` they carry
**no wire code**; each docstring names, after "Kafka:", the error code a Kafka transport's
table maps it onto. They subclass ``KafkaGroupError`` so a handler boundary that already
catches classic refusals catches these too. ``UnknownMemberId`` is reused from
``groups.kafka_errors`` (same meaning, same code 25).

Must not import: Twisted, ``broker``, anything that does I/O.
"""

from __future__ import annotations

from groups.kafka_errors import KafkaGroupError, UnknownMemberId

__all__ = [
    "ConsumerGroupError",
    "UnknownMemberId",
    "FencedMemberEpoch",
    "StaleMemberEpoch",
    "UnreleasedInstanceId",
    "FencedInstanceId",
    "UnsupportedAssignor",
    "InvalidConsumerGroupRequest",
    "InvalidRegularExpression",
    "GroupIdNotFound",
    "GroupIdInUseByOtherProtocol",
    "GroupMaxSizeReached",
    "ConsumerGroupNotEmpty",
]


class ConsumerGroupError(KafkaGroupError):
    """Base of every refusal of the consumer-group coordinator. A refusal changed nothing."""


class FencedMemberEpoch(ConsumerGroupError):
    """The heartbeat's member epoch is ahead of the coordinator's, or behind it by more than
    the one lost-response step Kafka forgives (the previous epoch, with owned partitions
    that are a subset of the current assignment). The member must give up all its
    partitions and rejoin with epoch 0. Kafka: 110 FENCED_MEMBER_EPOCH."""


class StaleMemberEpoch(ConsumerGroupError):
    """An OffsetCommit/OffsetFetch names a member epoch other than the member's current
    one: the member has moved on (or been moved) since. The client refreshes its epoch
    with a heartbeat and retries. Kafka: 113 STALE_MEMBER_EPOCH."""


class UnreleasedInstanceId(ConsumerGroupError):
    """A static member joins with a ``group.instance.id`` that another, still active member
    holds (it has not left with epoch -2 nor timed out). Kafka: 111
    UNRELEASED_INSTANCE_ID."""


class FencedInstanceId(ConsumerGroupError):
    """A heartbeat names a ``group.instance.id`` that now belongs to another member id: a
    newer incarnation replaced this one. Kafka: 82 FENCED_INSTANCE_ID."""


class UnsupportedAssignor(ConsumerGroupError):
    """``group.remote.assignor`` names an assignor the coordinator does not have (it has
    ``uniform`` and ``range``). Kafka: 112 UNSUPPORTED_ASSIGNOR."""


class InvalidConsumerGroupRequest(ConsumerGroupError):
    """The heartbeat breaks the protocol's own rules: a first heartbeat without a
    rebalance timeout or without a subscription, owned partitions on a join, an epoch
    below -2, epoch -2 without an instance id. Kafka: 42 INVALID_REQUEST."""


class InvalidRegularExpression(ConsumerGroupError):
    """The subscription's regular expression does not compile, or uses a construct RE2/J
    (Kafka's regex engine) lacks: back-references, look-around, atomic groups, possessive
    quantifiers, conditionals. Kafka: 128 INVALID_REGULAR_EXPRESSION."""


class GroupIdNotFound(ConsumerGroupError):
    """No consumer group of this id: a heartbeat with a non-zero epoch (or a leave) for a
    group the coordinator does not hold, a describe of an unknown group, or a group id
    held live by another protocol (a classic or V1 group). Kafka: 69
    GROUP_ID_NOT_FOUND."""


class GroupIdInUseByOtherProtocol(GroupIdNotFound):
    """The group id is live under another protocol (V1 members, a Kafka classic group):
    not a consumer group. Kafka: 69 GROUP_ID_NOT_FOUND (V1 answers BAD_REQUEST, as for the
    reverse case)."""


class GroupMaxSizeReached(ConsumerGroupError):
    """A new member would exceed the group's maximum size. Kafka: 81
    GROUP_MAX_SIZE_REACHED."""


class ConsumerGroupNotEmpty(ConsumerGroupError):
    """An admin deletion of a group that still has members. Kafka: 68 NON_EMPTY_GROUP."""
