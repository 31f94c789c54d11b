"""The consumer-group package's own exceptions, in the coordinator's words.

Owns: ``GroupError`` and one class per way a group request is refused: the member's view
is stale (``GenerationMismatch`` and its kinds: stale generation, unknown member, unknown
group, partition not owned), the request cannot apply (``InvalidGroupRequest``, with
``TooManyMembers``), or the broker has no room (``TooManyGroups``). Plain classes with no
wire code: each transport maps them onto its own (``broker.v1.errors``,
``broker.iggy.errors``).

Must not import: Twisted, anything of ``broker``. Only the neutral root
``data.refusal.SkerryError``.
"""

from __future__ import annotations

from data.refusal import SkerryError

__all__ = [
    "GroupError",
    "GenerationMismatch",
    "StaleGeneration",
    "UnknownMember",
    "UnknownGroup",
    "PartitionNotOwned",
    "InvalidGroupRequest",
    "TooManyMembers",
    "TooManyGroups",
    "CoordinatorLoading",
]


class GroupError(SkerryError):
    """A group request refused by the coordinator."""

    description = "group request refused"


class GenerationMismatch(GroupError):
    """The member's view of the group is not the coordinator's: rejoin, then retry."""

    description = "stale generation, unknown member or group, or partition not owned"


class StaleGeneration(GenerationMismatch):
    """The request names a generation that is not the group's current one."""

    description = "stale generation"


class UnknownMember(GenerationMismatch):
    """The member id is not a member of the group (never joined, left or expired)."""

    description = "unknown member"


class UnknownGroup(GenerationMismatch):
    """No group of this name on this topic."""

    description = "unknown group"


class PartitionNotOwned(GenerationMismatch):
    """The partition is not assigned to this member in this generation."""

    description = "partition not assigned to this member"


class InvalidGroupRequest(GroupError):
    """The request cannot apply as asked (unknown assignor, timeout out of range, another
    assignor while members are live, a reset or delete while members are live)."""

    description = "invalid group request"


class TooManyMembers(InvalidGroupRequest):
    """The group already has its maximum number of members."""

    description = "group is full"


class TooManyGroups(GroupError):
    """The coordinator already holds its maximum number of groups; try again later."""

    description = "too many groups"


class CoordinatorLoading(GroupError):
    """This broker has just become the coordinator of the group's partition of
    ``__skerry_groups`` and is still reading its records; retry shortly."""

    description = "group coordinator loading"
