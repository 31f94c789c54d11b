"""The answers of the cluster commands as plain values: what a leader's ``REPLICA_PULL``
and a replica's ``REPLICA_EPOCH`` answers hold.

Owns: ``PullReply`` and ``EpochReply``: what the fetch loop's links
(``replication.follower.links``) answer with. Reading them off V1 is the broker's
(``broker.peer_links``, on the shared client codec); formatting them is the broker's V1
codec.

Must not import: ``broker`` (this is domain code), Twisted, sockets, the store.
"""

from __future__ import annotations

from dataclasses import dataclass

from replication.epochs import EpochEntry
from replication.roles import Role

__all__ = ["EpochReply", "PullReply"]


@dataclass(frozen=True, slots=True)
class PullReply:
    """A leader's answer to REPLICA_PULL."""

    epoch: int
    hw: int
    leo: int
    start: int
    isr: tuple[int, ...]
    epochs: tuple[EpochEntry, ...]
    count: int
    data: bytes



@dataclass(frozen=True, slots=True)
class EpochReply:
    """A replica's answer to REPLICA_EPOCH: its role and epoch, and where the asked epoch
    ends in its log. The one type for both sides: the replica asked builds it
    (``ReplicationService.epoch_query``) and the asker reads it off the wire
    (``broker.peer_links.parse_epoch_reply``)."""

    role: Role
    epoch: int
    confirmed: bool
    end_epoch: int
    end_offset: int
    leo: int
    hw: int

    @property
    def leader(self) -> bool:
        """The replica answering leads the partition (confirmed or not)."""
        return self.role is Role.LEADER
