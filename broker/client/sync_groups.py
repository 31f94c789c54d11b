"""The blocking client's group commands: a V1 group member's JOIN, SYNC, HEARTBEAT, COMMIT and LEAVE, KIP-848's GROUP_HEARTBEAT, and reading a committed offset.

Must not import: the broker's server side, Twisted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from broker.client.codec import (
    GroupHeartbeat,
    check_name,
    check_number,
    group_heartbeat_args,
)


@dataclass(frozen=True)
class Assignment:
    """A JOIN or SYNC answer: the group's generation and this member's partitions."""

    generation: int
    partitions: tuple[int, ...]


def _member(group: str, topic: str, member_id: str, generation: int | None = None) -> str:
    """``<group> <topic> <member_id>[ <generation>]`` of a group request, each checked."""
    check_name("group", group)
    check_name("topic", topic)
    check_name("member_id", member_id)
    if generation is None:
        return f"{group} {topic} {member_id}"
    return f"{group} {topic} {member_id} {check_number('generation', generation)}"


class GroupCalls:
    """Part of ``broker.client.sync.Client``: group membership and offsets."""

    def join(self, group: str, topic: str, member_id: str, *, assignor: str | None = None,
             session_timeout_ms: int | None = None) -> Assignment:
        """JOIN the group; the answer is the new generation and this member's partitions."""
        args = _member(group, topic, member_id)
        if assignor is not None:
            args += f" assignor={assignor}"
        if session_timeout_ms is not None:
            args += f" session_timeout_ms={session_timeout_ms}"
        reply = self.call("JOIN", args)
        return Assignment(reply.number("generation"), tuple(reply.ints("assigned")))

    def sync(self, group: str, topic: str, member_id: str, generation: int) -> Assignment:
        reply = self.call("SYNC", _member(group, topic, member_id, generation))
        return Assignment(reply.number("generation"), tuple(reply.ints("assigned")))

    def heartbeat(self, group: str, topic: str, member_id: str, generation: int) -> None:
        """Keep the member's session; ``GenerationMismatchError`` means rejoin."""
        self.call("HEARTBEAT", _member(group, topic, member_id, generation))

    def commit(self, group: str, topic: str, member_id: str, generation: int, partition: int,
               offset: int) -> None:
        """Commit ``offset``, the next offset to read, for an assigned partition."""
        self.call("COMMIT", f"{_member(group, topic, member_id, generation)} "
                            f"{check_number('partition', partition)} "
                            f"{check_number('offset', offset)}")

    def leave(self, group: str, topic: str, member_id: str, generation: int) -> None:
        self.call("LEAVE", _member(group, topic, member_id, generation))

    def group_heartbeat(self, group: str, member_id: str, epoch: int, *,
                        topics: Sequence[str] | None = None, regex: str | None = None,
                        assignor: str | None = None, rebalance_timeout_ms: int | None = None,
                        instance: str | None = None,
                        owned: Iterable[tuple[str, int]] | None = None) -> GroupHeartbeat:
        """One GROUP_HEARTBEAT of a KIP-848 consumer group (epoch 0 joins, -1 leaves, -2
        leaves for now): consume exactly ``assigned`` of the answer, send ``owned`` when
        what you consume changed, heartbeat every ``interval_ms``.
        ``GenerationMismatchError``: stop consuming everything and join again."""
        args = group_heartbeat_args(group, member_id, epoch, topics=topics, regex=regex,
                                    assignor=assignor,
                                    rebalance_timeout_ms=rebalance_timeout_ms,
                                    instance=instance, owned=owned)
        return GroupHeartbeat.from_reply(self.call("GROUP_HEARTBEAT", args))

    def committed(self, group: str, topic: str, partition: int) -> int:
        """The group's committed offset of a partition (0 when none: OFFSET)."""
        return self.call("OFFSET", f"{check_name('group', group)} {check_name('topic', topic)} "
                                   f"{check_number('partition', partition)}").number("offset")
