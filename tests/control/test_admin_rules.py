"""The pure rules behind the seed broker's admin commands (``replication.control.admin``):
the forced election and the local metadata record's changes and file format."""

from __future__ import annotations

import pytest

from replication.control.admin import LocalMetadata, force_leader
from replication.control.keys import PartitionState
from replication.errors import InvalidReplicaRequest

S = PartitionState(leader=1, leader_epoch=4, isr=(1, 2))


class ForceLeaderTests:
    @pytest.mark.parametrize(("current", "leader", "isr", "unclean", "want"), [
        (S, 2, (2, 1), False, PartitionState(2, 5, (2, 1))),
        (S, 1, (2, 1), False, PartitionState(1, 5, (1, 2))),   # same leader: epoch moves
        (S, 0, (0,), True, PartitionState(0, 5, (0,))),        # unclean allowed
        (None, 3, (3, 0), False, PartitionState(3, 0, (3, 0))),  # nothing recorded yet
    ])
    def test_accepted(self, current: PartitionState | None, leader: int,
                      isr: tuple[int, ...], unclean: bool, want: PartitionState) -> None:
        """The new leader leads the next epoch, first in its ISR."""
        assert force_leader(current, leader, isr, unclean_allowed=unclean) == want

    @pytest.mark.parametrize(("leader", "isr", "message"), [
        (0, (0,), r"not in the partition.s ISR \[1 2\]"),
        (2, (1,), "must include the leader 2"),
    ])
    def test_refused(self, leader: int, isr: tuple[int, ...], message: str) -> None:
        """A leader outside the current ISR (unclean off) or outside its own ISR is refused."""
        with pytest.raises(InvalidReplicaRequest, match=message):
            force_leader(S, leader, isr)


class LocalMetadataTests:
    def test_changes_count_and_round_trip(self) -> None:
        """Each change moves the index by one; the JSON document gives the same value back."""
        meta = LocalMetadata().topic_created().register(1, "h", 9092, None)
        meta = meta.set_leader("t", 0, 1, (1,), known={1})
        assert meta.index == 3 and meta.term == 1
        assert LocalMetadata.from_json(meta.to_json()) == meta

    def test_refusals_leave_the_value_as_it_was(self) -> None:
        """A refused registration raises and the record is unchanged (immutable values)."""
        meta = LocalMetadata().register(1, "h", 9092, 5)
        with pytest.raises(InvalidReplicaRequest, match="stale"):
            meta.register(1, "h", 9092, 4)
        with pytest.raises(InvalidReplicaRequest, match="address book"):
            meta.register(7, "h", 9092, None, address_book=[0, 1])
        assert meta.index == 1 and meta.brokers[1].epoch == 5

    @pytest.mark.parametrize("raw", [
        {}, {"version": 2}, {"version": 1, "term": 1, "index": -1, "brokers": {},
                             "partitions": []},
        {"version": 1, "term": 1, "index": 0, "brokers": {"x": {}}, "partitions": []},
        {"version": 1, "term": 1, "index": 0, "brokers": {},
         "partitions": [{"topic": "t", "partition": 0, "leader": True, "leader_epoch": 0,
                         "isr": []}]},
    ])
    def test_a_damaged_document_is_refused(self, raw: object) -> None:
        """Decoding is strict: a foreign or damaged file is news, not something to guess at."""
        with pytest.raises(ValueError):
            LocalMetadata.from_json(raw)
