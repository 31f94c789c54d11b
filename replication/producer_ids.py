"""Producer ids for Kafka's idempotent producers (InitProducerId), unique for the life of a
data directory and, in a cluster, across every broker: handed out from reserved *blocks*,
as Kafka's brokers take blocks of 1000 from the controller (KIP-730).

Owns: ``ProducerIdBlock``, ``ProducerIdAllocator`` (takes ids from the current block, wants
the next block before this one runs out, so a burst of new producers rarely waits), the
high-water-mark document both block sources keep (``{"next": <first id not reserved>}``,
``encode_counter``/``decode_counter``) and the etcd transaction that reserves a block in a
cluster (``reserve_txn``: compare-and-set on the counter key, reading it back on failure).

A block is reserved durably *before* any id of it is handed out, so a crash loses at most
the rest of a block (never reuses an id). In a cluster, the etcd counter never goes below
the broker's own local mark (``floor``), so ids a broker handed out alone stay unique when
it joins a cluster.

Must not import: Twisted, ``broker``, ``time``, sockets or files.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass

from replication.control.txn import Compare, Get, Put, Target, Txn

__all__ = ["BLOCK_SIZE", "MAX_PRODUCER_ID", "ProducerIdBlock", "ProducerIdAllocator",
           "counter_key", "encode_counter", "decode_counter", "reserve_txn"]

BLOCK_SIZE = 1000
"""Ids per reserved block (Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``)."""

MAX_PRODUCER_ID = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Ids ``first .. first + size - 1``."""

    first: int
    size: int

    @property
    def next_after(self) -> int:
        return self.first + self.size


class ProducerIdAllocator:
    """Hands out the ids of the blocks given to it, in order."""

    def __init__(self, *, prefetch_fraction: float = 0.1) -> None:
        self._blocks: deque[ProducerIdBlock] = deque()
        self._next = -1  # next id of the current block; -1: none
        self._end = -1
        self._prefetch = prefetch_fraction
        self.requested = False
        """True while a block was asked for and has not arrived (the shell sets it)."""

    def take(self) -> int | None:
        """The next unused id, or None when no reserved id is left."""
        if self._next >= self._end:
            if not self._blocks:
                return None
            block = self._blocks.popleft()
            self._next, self._end = block.first, block.next_after
        pid = self._next
        self._next += 1
        return pid

    @property
    def left(self) -> int:
        """Ids reserved and not handed out yet."""
        return max(0, self._end - self._next) + sum(b.size for b in self._blocks)

    def wants_block(self) -> bool:
        """Should the next block be asked for now (none asked for, less than the prefetch
        fraction of a block left)?"""
        return not self.requested and self.left <= BLOCK_SIZE * self._prefetch

    def add_block(self, block: ProducerIdBlock) -> None:
        """A reserved block arrived."""
        if block.size <= 0 or block.first < 0 or block.next_after - 1 > MAX_PRODUCER_ID:
            raise ValueError(f"bad producer id block {block}")
        self._blocks.append(block)
        self.requested = False


def encode_counter(next_id: int) -> bytes:
    """The high-water-mark document: the first id not reserved yet."""
    return json.dumps({"next": next_id}, separators=(",", ":")).encode()


def decode_counter(raw: bytes) -> int:
    """``ValueError`` for anything but ``{"next": <int >= 0>}``."""
    try:
        value = json.loads(raw)["next"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"bad producer id counter {raw[:80]!r}") from exc
    if type(value) is not int or value < 0:
        raise ValueError(f"bad producer id counter {raw[:80]!r}")
    return value


def counter_key(prefix: str) -> str:
    """The etcd key of the cluster's counter under the control plane's prefix
    (``/skerry/<cluster>/``): ``producer_ids``."""
    return f"{prefix}producer_ids"


def reserve_txn(key: str, current: bytes | None, mod_revision: int, size: int,
                floor: int = 0) -> tuple[Txn, ProducerIdBlock]:
    """The txn reserving the next block after the counter ``current`` (None: the key is
    absent) read at ``mod_revision``, and the block it reserves when it succeeds. On
    failure (another broker reserved meanwhile) the txn reads the key back."""
    start = max(floor, 0 if current is None else decode_counter(current))
    block = ProducerIdBlock(start, size)
    guard = (Compare(key, Target.CREATE, 0) if current is None
             else Compare(key, Target.MOD, mod_revision))
    return Txn((guard,), (Put(key, encode_counter(block.next_after)),), (Get(key),)), block
