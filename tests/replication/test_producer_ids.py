"""Tests for replication/producer_ids.py: handing out ids from reserved blocks, asking for
the next block in time, and the etcd compare-and-set that reserves a block. Pure."""

from __future__ import annotations

import pytest

from replication.control.txn import Compare, Get, Put, Target
from replication.producer_ids import (
    BLOCK_SIZE,
    ProducerIdAllocator,
    ProducerIdBlock,
    decode_counter,
    encode_counter,
    reserve_txn,
)


class AllocatorTests:

    def test_ids_come_from_the_blocks_in_order(self) -> None:
        """Each id once, block after block; None when nothing is reserved."""
        alloc = ProducerIdAllocator()
        assert alloc.take() is None
        alloc.add_block(ProducerIdBlock(10, 2))
        alloc.add_block(ProducerIdBlock(500, 1))
        assert [alloc.take() for _ in range(4)] == [10, 11, 500, None]

    def test_next_block_is_wanted_before_this_one_runs_out(self) -> None:
        """Wanted at a tenth of a block left, and not again while one is requested."""
        alloc = ProducerIdAllocator()
        assert alloc.wants_block()
        alloc.requested = True
        assert not alloc.wants_block()
        alloc.add_block(ProducerIdBlock(0, BLOCK_SIZE))
        assert not alloc.requested and not alloc.wants_block()
        for _ in range(BLOCK_SIZE - BLOCK_SIZE // 10 - 1):
            alloc.take()
        assert not alloc.wants_block()
        alloc.take()
        assert alloc.wants_block()

    @pytest.mark.parametrize("block", [ProducerIdBlock(-1, 5), ProducerIdBlock(0, 0),
                                       ProducerIdBlock(2**63 - 2, 5)])
    def test_bad_blocks_are_refused(self, block: ProducerIdBlock) -> None:
        """Negative, empty, or past Kafka's int64 range: a bug, refused."""
        with pytest.raises(ValueError):
            ProducerIdAllocator().add_block(block)


class CounterTests:

    @pytest.mark.parametrize("raw", [b"", b"{}", b'{"next": -1}', b'{"next": "5"}',
                                     b'{"next": true}', b"[1]"])
    def test_bad_counters_are_refused(self, raw: bytes) -> None:
        """Anything but {"next": <int >= 0>} is a ValueError."""
        with pytest.raises(ValueError):
            decode_counter(raw)

    def test_first_reservation_creates_the_key(self) -> None:
        """No key: compare CREATE == 0, reserve from the floor."""
        txn, block = reserve_txn("/skerry/c/producer_ids", None, 0, 1000, floor=42)
        assert block == ProducerIdBlock(42, 1000)
        assert txn.compare == (Compare("/skerry/c/producer_ids", Target.CREATE, 0),)
        assert txn.success == (Put("/skerry/c/producer_ids", encode_counter(1042)),)
        assert txn.failure == (Get("/skerry/c/producer_ids"),)

    @pytest.mark.parametrize("counter, floor, first", [(3000, 0, 3000), (3000, 5000, 5000),
                                                      (3000, 2000, 3000)])
    def test_next_reservation_compares_the_read_revision(self, counter: int, floor: int,
                                                         first: int) -> None:
        """An existing key: compare MOD == the revision read; never below the floor."""
        txn, block = reserve_txn("k", encode_counter(counter), 77, 1000, floor)
        assert block == ProducerIdBlock(first, 1000)
        assert txn.compare == (Compare("k", Target.MOD, 77),)
        assert txn.success == (Put("k", encode_counter(first + 1000)),)
