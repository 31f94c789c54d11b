"""What every TANK handler shares: the core, the settings, and the lookups requests
start with.

Owns: ``Context``: the ``BrokerCore`` the shell passed in, the clock, the limits, the
replication view's ``is_leader`` (injected), the seam ``leader_of`` (where a follower
partition's leader listens for TANK, for the 0xfc replies: None until clusters elect
leaders and publish their TANK addresses, so a follower answers 0xfd "no leader"), and
the mapping of spec/tank-notes.md §9: a TANK topic name to the Skerry topic (``topic``),
and a partition's marks in TANK numbering (``marks``: seq = offset + 1, hw = V1 hw + 1,
first available = first retained offset + 1, 0 when the partition holds nothing).

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from twisted.internet.interfaces import IReactorTime

from broker.core import BrokerCore
from broker.tank.codec import Endpoint
from data.names import is_valid_name

__all__ = ["Context", "Marks"]


@dataclass(frozen=True, slots=True)
class Marks:
    """A partition in TANK numbering, with the offsets they come from."""

    first_offset: int  # first retained offset
    hw_offset: int  # last committed offset (-1: none)

    @property
    def hw(self) -> int:
        """TANK's hw: the last committed seq (0 when empty)."""
        return self.hw_offset + 1

    @property
    def first_available(self) -> int:
        """TANK's first available seq (0 when the partition holds nothing committed)."""
        return self.first_offset + 1 if self.hw_offset >= self.first_offset else 0


class Context:
    """The collaborators and settings every TANK handler uses."""

    def __init__(self, core: BrokerCore, clock: IReactorTime, *,
                 is_leader: Callable[[str, int], bool], max_message_bytes: int,
                 max_partitions_per_topic: int, max_read_bytes: int) -> None:
        self.core = core
        self.clock = clock
        self.is_leader = is_leader
        self.max_message_bytes = max_message_bytes
        self.max_partitions_per_topic = max_partitions_per_topic
        self.max_read_bytes = max_read_bytes
        """Most stored record bytes one consume reads per partition (before encoding)."""
        self.leader_of: Callable[[str, int], Endpoint | None] = lambda topic, partition: None
        """Where the leader of a partition this broker follows listens for TANK clients;
        None (the default, until clusters elect leaders): answered 0xfd instead of 0xfc."""

    def topic(self, name: bytes) -> tuple[str, int] | None:
        """The Skerry topic a TANK name is, and its partition count; None when there is
        none (names outside the store's rules included: TANK calls them unknown)."""
        try:
            text = name.decode("ascii")
        except UnicodeDecodeError:
            return None
        if not is_valid_name(text):
            return None
        config = self.core.topic_config(text)
        if config is None:
            return None
        return text, config.partitions

    def marks(self, topic: str, partition: int) -> Marks:
        return Marks(self.core.earliest_offset(topic, partition), self.core.hw(topic, partition))

    def acks_for(self, topic: str) -> str:
        """TANK's required_acks is cluster-only (0 = all of the ISR): V1 ``acks=1``, or
        ``all`` when the topic has replicas (§9)."""
        config = self.core.topic_config(topic)
        return "all" if config is not None and config.replication_factor > 1 else "1"
