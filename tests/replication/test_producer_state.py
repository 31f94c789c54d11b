"""Tests for replication/producer_state.py: every rule a batch of an idempotent producer is
checked against (as a current Kafka broker answers), the five batches kept, rebuilding from
stored record ids, housekeeping and the snapshot bytes. Pure tables."""

from __future__ import annotations

from typing import Any

import pytest

from data.idempotence import batch_ids, producer_record_id
from replication.errors import InvalidProducerEpoch, OutOfOrderSequence
from replication.producer_state import (
    BatchMetadata,
    Continuation,
    ProducerStateManager,
    add_sequence,
    decode_snapshot,
    encode_snapshot,
    in_sequence,
)

MAX = 2**31 - 1

# The producer 7's history on the partition before each case: epoch 2, batches of ten
# records with sequences 0-9, 10-19, ... 60-69 at offsets 100-109, 110-119, ... 160-169.
_HISTORY = [(7, 2, s, s + 9, 100 + s, 109 + s) for s in range(0, 70, 10)]


def _state(history: list[tuple[int, int, int, int, int, int]] = _HISTORY) -> ProducerStateManager:
    state = ProducerStateManager(100)
    for pid, epoch, fs, ls, fo, lo in history:
        state.append(pid, epoch, fs, ls, fo, lo, timestamp=1000 + fo)
    return state


# (why, producer, epoch, first_seq, last_seq, expected): expected is None (append), an
# exception class, or ("dup", first_offset) / ("cont", held).
RULES: list[tuple[str, int, int, int, int, Any]] = [
    ("the next batch follows the last one", 7, 2, 70, 79, None),
    ("a one-record next batch", 7, 2, 70, 70, None),
    ("a retry of the last batch is a duplicate: its offsets", 7, 2, 60, 69, ("dup", 160)),
    ("a retry of the fifth-newest batch is a duplicate", 7, 2, 20, 29, ("dup", 120)),
    ("a retry older than the five kept: out of order", 7, 2, 10, 19, OutOfOrderSequence),
    ("a range that matches no kept batch exactly: out of order", 7, 2, 60, 65, OutOfOrderSequence),
    ("a gap after the last batch: out of order", 7, 2, 71, 80, OutOfOrderSequence),
    ("a batch behind the last one: out of order", 7, 2, 65, 74, OutOfOrderSequence),
    ("an older epoch is fenced", 7, 1, 70, 79, InvalidProducerEpoch),
    ("an older epoch is fenced even for a known range", 7, 1, 60, 69, InvalidProducerEpoch),
    ("a new epoch starting at 0", 7, 3, 0, 9, None),
    ("a new epoch not starting at 0: out of order", 7, 3, 70, 79, OutOfOrderSequence),
    ("an unknown producer may start at 0", 8, 0, 0, 4, None),
    ("an unknown producer may start anywhere (KIP-360)", 8, 0, 500, 504, None),
]


class RuleTests:

    @pytest.mark.parametrize("why, pid, epoch, first_seq, last_seq, expected", RULES,
                             ids=[r[0] for r in RULES])
    def test_rule(self, why: str, pid: int, epoch: int, first_seq: int, last_seq: int,
                  expected: Any) -> None:
        """Each case answers as Kafka's broker does; a refusal changes nothing."""
        state = _state()
        before = encode_snapshot(state)
        if isinstance(expected, type):
            with pytest.raises(expected):
                state.check(pid, epoch, first_seq, last_seq)
            assert encode_snapshot(state) == before
            return
        answer = state.check(pid, epoch, first_seq, last_seq)
        if expected is None:
            assert answer is None
        elif expected[0] == "dup":
            assert isinstance(answer, BatchMetadata)
            assert (answer.first_offset, answer.last_offset) == (expected[1], expected[1] + 9)
        assert encode_snapshot(state) == before

    def test_only_five_batches_are_kept(self) -> None:
        """After a sixth batch, the first one is no longer recognised as a duplicate."""
        state = ProducerStateManager()
        for i in range(6):
            state.append(1, 0, i, i, i, i, timestamp=0)
        assert [b.first_seq for b in state.producers[1].batches] == [1, 2, 3, 4, 5]
        with pytest.raises(OutOfOrderSequence):
            state.check(1, 0, 0, 0)
        assert isinstance(state.check(1, 0, 1, 1), BatchMetadata)

    def test_epoch_bump_resets_sequences(self) -> None:
        """An appended batch of a new epoch forgets the older epoch's batches: its ranges
        are no longer duplicates, and the old epoch is fenced."""
        state = _state()
        state.append(7, 3, 0, 4, 170, 174, timestamp=0)
        assert [b.first_seq for b in state.producers[7].batches] == [0]
        assert state.check(7, 3, 5, 9) is None
        with pytest.raises(InvalidProducerEpoch):
            state.check(7, 2, 70, 79)

    def test_sequence_wraps_at_int32(self) -> None:
        """After 2**31 - 1 the next sequence is 0, within a batch and between batches."""
        assert add_sequence(MAX, 1) == 0
        assert add_sequence(MAX - 1, 4) == 2
        assert in_sequence(MAX, 0) and in_sequence(5, 6)
        assert not in_sequence(MAX, 1) and not in_sequence(0, MAX)
        state = ProducerStateManager()
        state.append(1, 0, MAX - 4, MAX, 0, 4, timestamp=0)
        assert state.check(1, 0, 0, 9) is None
        with pytest.raises(OutOfOrderSequence):
            state.check(1, 0, 1, 9)
        state.append(1, 0, MAX - 1, 2, 5, 8, timestamp=0)  # a batch across the wrap
        assert isinstance(state.check(1, 0, MAX - 1, 2), BatchMetadata)
        assert state.check(1, 0, 3, 3) is None

    def test_producers_do_not_share_state(self) -> None:
        """Another producer id's batches neither deduplicate nor order this one's."""
        state = _state()
        state.append(9, 0, 0, 9, 170, 179, timestamp=0)
        assert state.check(7, 2, 70, 79) is None
        assert state.check(9, 0, 10, 19) is None
        with pytest.raises(OutOfOrderSequence):
            state.check(9, 0, 60, 69)


class ContinuationTests:

    def test_retry_of_a_batch_held_in_part_appends_the_rest(self) -> None:
        """A batch whose log holds only its first records (a follower that copied part of
        it became leader): its retry is a continuation, not out of order."""
        state = _state()
        state.append(7, 2, 70, 73, 170, 173, timestamp=0, complete=False)
        answer = state.check(7, 2, 70, 79)
        assert answer == Continuation(state.producers[7].batches[-1])
        assert answer.held == 4
        state.append(7, 2, 70, 79, 170, 179, timestamp=0)
        assert state.producers[7].batches[-1] == BatchMetadata(70, 79, 170, 179, 0, True)
        assert len(state.producers[7].batches) == 5
        assert isinstance(state.check(7, 2, 70, 79), BatchMetadata)

    def test_a_shorter_or_other_batch_is_not_a_continuation(self) -> None:
        """Only the same first sequence with a longer range continues a batch held in part."""
        state = _state()
        state.append(7, 2, 70, 73, 170, 173, timestamp=0, complete=False)
        assert state.check(7, 2, 74, 79) is None
        with pytest.raises(OutOfOrderSequence):
            state.check(7, 2, 70, 72)


def _rows(*batches: tuple[int, int, int, int, int]) -> list[tuple[int, int, int]]:
    """Records ``(offset, id, timestamp)`` of whole batches (pid, epoch, base_seq, count,
    first_offset)."""
    rows = []
    for pid, epoch, seq, count, offset in batches:
        ids = batch_ids(pid, epoch, seq, count)
        rows += [(offset + i, int.from_bytes(bytes(ids[i]), "little"), 5) for i in range(count)]
    return rows


class ReplayTests:

    def test_replay_rebuilds_what_appends_built(self) -> None:
        """Records stamped by batch_ids replay into the same state the appends made."""
        built = ProducerStateManager(0)
        for pid, epoch, seq, count, offset in [(1, 0, 0, 3, 0), (2, 4, 9, 1, 3), (1, 0, 3, 2, 4)]:
            built.append(pid, epoch, seq, seq + count - 1, offset, offset + count - 1, 5)
        replayed = ProducerStateManager(0)
        replayed.replay(_rows((1, 0, 0, 3, 0), (2, 4, 9, 1, 3), (1, 0, 3, 2, 4)))
        assert encode_snapshot(replayed) == encode_snapshot(built)
        assert replayed.end_offset == 6

    def test_records_without_producer_ids_are_skipped(self) -> None:
        """Plain records (random ids) advance end_offset and split nothing."""
        state = ProducerStateManager(0)
        rows = [(0, 0x1234, 5)] + _rows((1, 0, 0, 2, 1)) + [(3, 99, 5)]
        state.replay(rows)
        assert state.end_offset == 4
        assert list(state.producers[1].batches) == [BatchMetadata(0, 1, 1, 2, 5, True)]

    def test_a_batch_the_log_ends_in_is_held_in_part(self) -> None:
        """A tail batch without its last record is incomplete; its retry continues it, and
        the continuation's records replay into one whole batch."""
        rows = _rows((1, 0, 0, 5, 0))[:3]
        state = ProducerStateManager(0)
        state.replay(rows)
        assert state.producers[1].batches[-1] == BatchMetadata(0, 2, 0, 2, 5, False)
        assert isinstance(state.check(1, 0, 0, 4), Continuation)
        rest = batch_ids(1, 0, 3, 2, first=False)
        state.replay([(3 + i, int.from_bytes(bytes(rest[i]), "little"), 6) for i in range(2)])
        assert state.producers[1].batches[-1] == BatchMetadata(0, 4, 0, 4, 6, True)

    def test_interrupted_run_is_split(self) -> None:
        """A run interrupted by another record ends there, held in part."""
        rows = _rows((1, 0, 0, 4, 0))
        rows[2] = (2, producer_record_id(2, 0, 0, True, True), 5)
        state = ProducerStateManager(0)
        state.replay(rows)
        assert state.producers[1].batches[0] == BatchMetadata(0, 1, 0, 1, 5, False)
        assert state.producers[2].batches[0] == BatchMetadata(0, 0, 2, 2, 5, True)


class HousekeepingTests:

    def test_remove_before_log_start(self) -> None:
        """Producers whose last batch is below the log start go; others stay whole."""
        state = _state([(1, 0, 0, 9, 0, 9), (2, 0, 0, 9, 10, 19), (1, 0, 10, 10, 20, 20)])
        assert state.remove_before(20) == [2]
        assert sorted(state.producers) == [1]
        assert state.remove_before(21) == [1]

    def test_expire_idle_producers(self) -> None:
        """A producer idle longer than the expiry goes, with the injected time."""
        state = ProducerStateManager()
        state.append(1, 0, 0, 0, 0, 0, timestamp=1_000)
        state.append(2, 0, 0, 0, 1, 1, timestamp=5_000)
        assert state.expire(now_ms=10_000, idle_ms=6_000) == [1]
        assert sorted(state.producers) == [2]


class SnapshotTests:

    def test_round_trip(self) -> None:
        """A snapshot decodes to the same state: same checks answered, same end offset."""
        state = _state()
        state.append(9, 1, 0, 3, 170, 173, timestamp=8, complete=False)
        copy = decode_snapshot(encode_snapshot(state))
        assert copy.end_offset == state.end_offset == 174
        assert encode_snapshot(copy) == encode_snapshot(state)
        assert isinstance(copy.check(7, 2, 60, 69), BatchMetadata)
        assert isinstance(copy.check(9, 1, 0, 9), Continuation)

    @pytest.mark.parametrize("damage", ["flip", "truncate", "magic", "empty"])
    def test_damaged_snapshot_is_refused(self, damage: str) -> None:
        """Any damage is a ValueError (the caller rebuilds from the log instead)."""
        raw = bytearray(encode_snapshot(_state()))
        if damage == "flip":
            raw[20] ^= 1
        elif damage == "truncate":
            raw = raw[:-9]
        elif damage == "magic":
            raw[0:4] = b"XXXX"
        else:
            raw = bytearray()
        with pytest.raises(ValueError):
            decode_snapshot(bytes(raw))
