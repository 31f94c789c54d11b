"""The Twisted shell of producer id allocation (``replication.producer_ids``): where blocks
of ids are reserved, and the Deferreds InitProducerId waits on.

Owns: ``BlockSource`` (reserve the next block, durably, before any of its ids is used), its
two implementations, ``LocalBlockSource`` (a single broker: the high-water mark in
``<data_dir>/producer_ids.json``, replaced atomically with ``data.atomic``) and
``EtcdBlockSource`` (a cluster: compare-and-set on ``/skerry/<cluster>/producer_ids``, never
below the local mark), and ``ProducerIds`` (``allocate()``: the next id at once while the
current block lasts; the next block is asked for when a tenth of a block is left; callers
that arrive when none is left wait for it; a failed reservation fails them with
``Unavailable``, which Kafka clients retry).

Must not import: the transports, the global reactor.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.python.failure import Failure

from broker.errors import Unavailable
from data.atomic import read_json, write_json_atomic
from data.fs import OS_FS, FileLayer
from replication.producer_ids import (
    BLOCK_SIZE,
    ProducerIdAllocator,
    ProducerIdBlock,
    counter_key,
    reserve_txn,
)

__all__ = ["BlockSource", "LocalBlockSource", "EtcdBlockSource", "ProducerIds",
           "COUNTER_FILE"]

log = logging.getLogger("skerry.producer_ids")

COUNTER_FILE = "producer_ids.json"


class BlockSource(Protocol):
    def reserve(self, size: int) -> Deferred[ProducerIdBlock]:
        """Reserve the next ``size`` ids durably; the block once reserved."""
        ...


class LocalBlockSource:
    """Blocks from the data directory's own high-water mark."""

    def __init__(self, data_dir: str, fs: FileLayer = OS_FS) -> None:
        self.path = os.path.join(data_dir, COUNTER_FILE)
        self._fs = fs

    def mark(self) -> int:
        """The first id never reserved here (0 for a new data directory)."""
        doc = read_json(self.path, {"next": 0}, self._fs)
        value = doc.get("next") if isinstance(doc, dict) else None
        if type(value) is not int or value < 0:
            raise ValueError(f"{self.path}: expected {{\"next\": <id>}}")
        return value

    def advance_to(self, next_id: int) -> None:
        """Raise the mark to ``next_id`` (never lowers it), durably."""
        if next_id > self.mark():
            write_json_atomic(self.path, {"next": next_id}, self._fs)

    def reserve(self, size: int) -> Deferred[ProducerIdBlock]:
        return maybeDeferred(self._reserve, size)

    def _reserve(self, size: int) -> ProducerIdBlock:
        block = ProducerIdBlock(self.mark(), size)
        self.advance_to(block.next_after)
        return block


class EtcdBlockSource:
    """Blocks from the cluster's counter in etcd (``client``: ``EtcdClient``; ``prefix``:
    the control plane's ``/skerry/<cluster>/``). The counter never goes below ``local``'s
    mark, and the local mark follows each block, so ids stay unique whichever way a broker
    moves between running alone and in a cluster."""

    def __init__(self, client: Any, prefix: str, local: LocalBlockSource, *,
                 attempts: int = 20) -> None:
        self._client = client
        self._key = counter_key(prefix)
        self._local = local
        self._attempts = attempts

    def reserve(self, size: int) -> Deferred[ProducerIdBlock]:
        return Deferred.fromCoroutine(self._reserve(size))

    async def _reserve(self, size: int) -> ProducerIdBlock:
        found = await self._client.range(self._key)
        kv = found.kvs[0] if found.kvs else None
        for _ in range(self._attempts):
            txn, block = reserve_txn(self._key, kv.value if kv else None,
                                     kv.mod_revision if kv else 0, size, self._local.mark())
            result = await self._client.txn(txn)
            if result.succeeded:
                self._local.advance_to(block.next_after)
                return block
            read = result.reads[0] if result.reads else None
            kv = read[0] if read else None
        raise Unavailable(f"producer id block not reserved after {self._attempts} attempts")


class ProducerIds:
    """``allocate()``: a producer id no one got before."""

    def __init__(self, source: BlockSource, *, block_size: int = BLOCK_SIZE,
                 on_error: Callable[[Failure], None] | None = None) -> None:
        self._source = source
        self._block_size = block_size
        self._allocator = ProducerIdAllocator()
        self._waiting: list[Deferred[int]] = []
        self._on_error = on_error

    def allocate(self) -> Deferred[int]:
        """The next id: at once while reserved ids are left, otherwise once the next
        block is reserved (``Unavailable`` when that fails)."""
        pid = self._allocator.take()
        if pid is not None:
            self._maybe_prefetch()
            return succeed(pid)
        d: Deferred[int] = Deferred()
        self._waiting.append(d)
        self._maybe_prefetch()
        return d

    def _maybe_prefetch(self) -> None:
        if not self._allocator.wants_block():
            return
        self._allocator.requested = True
        self._source.reserve(self._block_size).addCallbacks(self._arrived, self._failed)

    def _arrived(self, block: ProducerIdBlock) -> None:
        self._allocator.add_block(block)
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            pid = self._allocator.take()
            if pid is None:  # more waiters than a block: they wait for the next one
                self._waiting.append(d)
            else:
                d.callback(pid)
        self._maybe_prefetch()

    def _failed(self, failure: Failure) -> None:
        self._allocator.requested = False
        log.warning("producer id block not reserved: %s", failure.getErrorMessage())
        if self._on_error is not None:
            self._on_error(failure)
        waiting, self._waiting = self._waiting, []
        error = Unavailable(f"no producer id available: {failure.getErrorMessage()}")
        for d in waiting:
            d.errback(error)
