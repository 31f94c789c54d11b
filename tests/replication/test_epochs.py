"""Tests for replication/epochs.py: the leader-epoch history, the KIP-101/KIP-279 lookup and
divergence rules, and choosing the leader among the replicas' answers. Pure tables."""

from __future__ import annotations

import pytest

from replication.epochs import (
    EpochEntry,
    EpochHistory,
    EpochLookup,
    PeerEpoch,
    choose_leader,
    divergence_offset,
)


class EpochHistoryTests:

    def test_assign_appends_newer_epochs(self) -> None:
        """Each promotion adds (epoch, start offset); the same epoch again changes nothing."""
        history = EpochHistory()
        assert history.latest_epoch == -1
        assert history.assign(0, 0)
        assert history.assign(2, 990)
        assert not history.assign(2, 1200)
        assert history.entries == (EpochEntry(0, 0), EpochEntry(2, 990))
        assert history.latest_epoch == 2

    def test_epoch_that_wrote_nothing_is_replaced(self) -> None:
        """An epoch whose start equals the next epoch's start held no records: it goes."""
        history = EpochHistory([(0, 0), (1, 50)])
        assert history.assign(3, 50)
        assert history.to_json() == [[0, 0], [3, 50]]

    @pytest.mark.parametrize("epoch, start", [(1, 60), (3, 40), (-1, 70), (4, -1)])
    def test_reordering_is_refused(self, epoch: int, start: int) -> None:
        """An older epoch or an earlier start would reorder history: ValueError, no change."""
        history = EpochHistory([(0, 0), (2, 50)])
        with pytest.raises(ValueError):
            history.assign(epoch, start)
        assert history.to_json() == [[0, 0], [2, 50]]

    @pytest.mark.parametrize("pairs", [[(1, 0), (1, 5)], [(2, 5), (1, 6)], [(0, 5), (1, 4)],
                                       [(-1, 0)]])
    def test_constructor_checks_order(self, pairs: list[tuple[int, int]]) -> None:
        """A persisted history out of order is reported, never silently accepted."""
        with pytest.raises(ValueError):
            EpochHistory(pairs)

    @pytest.mark.parametrize("offset, left", [
        (100, [[0, 0], [1, 50], [3, 80]]),
        (81, [[0, 0], [1, 50], [3, 80]]),
        (80, [[0, 0], [1, 50]]),
        (51, [[0, 0], [1, 50]]),
        (50, [[0, 0]]),
        (0, []),
    ])
    def test_truncate_from(self, offset: int, left: list[list[int]]) -> None:
        """Truncating the log at an offset drops the epochs that no longer hold records."""
        full = [[0, 0], [1, 50], [3, 80]]
        history = EpochHistory([(0, 0), (1, 50), (3, 80)])
        assert history.truncate_from(offset) == (left != full)
        assert history.to_json() == left

    @pytest.mark.parametrize("asked, expected", [
        (0, EpochLookup(0, 50)),
        (1, EpochLookup(1, 80)),
        (2, EpochLookup(1, 80)),
        (3, EpochLookup(3, 120)),
        (9, EpochLookup(3, 120)),
    ])
    def test_lookup(self, asked: int, expected: EpochLookup) -> None:
        """OffsetsForLeaderEpoch: the largest epoch <= the asked one and the offset where it
        ends (the next epoch's start, or the log end for the latest)."""
        history = EpochHistory([(0, 0), (1, 50), (3, 80)])
        assert history.lookup(asked, log_end=120) == expected

    def test_lookup_below_every_epoch(self) -> None:
        """With no epoch <= the asked one, nothing can match: the end is where history
        starts (the log end for an empty history)."""
        assert EpochHistory([(5, 10)]).lookup(3, 40) == EpochLookup(-1, 10)
        assert EpochHistory().lookup(3, 40) == EpochLookup(-1, 40)

    @pytest.mark.parametrize("start, end, expected", [
        (0, 10, [(0, 0)]),
        (40, 60, [(0, 0), (1, 50)]),
        (50, 51, [(1, 50)]),
        (79, 200, [(1, 50), (3, 80)]),
        (90, 95, [(3, 80)]),
    ])
    def test_covering(self, start: int, end: int, expected: list[tuple[int, int]]) -> None:
        """The entries labelling a range of offsets are exactly those that overlap it."""
        history = EpochHistory([(0, 0), (1, 50), (3, 80)])
        assert [(e.epoch, e.start_offset) for e in history.covering(start, end)] == expected

    def test_adopt_takes_only_newer_entries(self) -> None:
        """A follower copying records learns the epochs newer than its latest; older ones it
        already has; one that contradicts its history raises."""
        follower = EpochHistory([(0, 0)])
        assert follower.adopt([EpochEntry(0, 0), EpochEntry(2, 30)])
        assert not follower.adopt([EpochEntry(2, 30)])
        assert follower.to_json() == [[0, 0], [2, 30]]
        with pytest.raises(ValueError):
            follower.adopt([EpochEntry(4, 10)])

    def test_json_round_trip_and_damage(self) -> None:
        """The persisted form reads back equal; damaged forms raise ValueError."""
        history = EpochHistory([(0, 0), (4, 17)])
        assert EpochHistory.from_json(history.to_json()) == history
        assert EpochHistory.from_json(None) == EpochHistory()
        for bad in ("0:0", [[0]], [[0, "1"]], [[True, 0]], [[1, 0], [0, 5]]):
            with pytest.raises(ValueError):
                EpochHistory.from_json(bad)


class DivergenceTests:

    @pytest.mark.parametrize("local, local_end, answer, expected", [
        # The leader knows our latest epoch: agree up to its end of it.
        ([(0, 0)], 1000, EpochLookup(0, 990), 990),
        # ... never beyond our own log end.
        ([(0, 0)], 10, EpochLookup(0, 30), 10),
        # Same epoch, same end: nothing to cut.
        ([(0, 0), (1, 50)], 80, EpochLookup(1, 80), 80),
        # Our latest epoch (2) never existed on the leader, which answers epoch 1 ending at
        # 70: our epoch 1 ended at 50 (where our epoch 2 began), so we cut at 50.
        ([(0, 0), (1, 20), (2, 50)], 80, EpochLookup(1, 70), 50),
        # The leader has nothing as old as ours: cut where its history starts.
        ([(0, 0)], 40, EpochLookup(-1, 0), 0),
        ([(3, 0)], 40, EpochLookup(-1, 25), 25),
        # No local history (copied before epochs were kept): the leader's start decides.
        ([], 40, EpochLookup(-1, 0), 0),
    ])
    def test_divergence_offset(self, local: list[tuple[int, int]], local_end: int,
                               answer: EpochLookup, expected: int) -> None:
        """Where a follower truncates, for the leader's answer about its latest epoch."""
        assert divergence_offset(EpochHistory(local), local_end, answer) == expected

    def test_old_leader_returning_after_failover(self) -> None:
        """The KIP-101 case: the old leader wrote 990..999 in epoch 0 that nobody copied; the
        new leader began epoch 1 at 990. The old leader cuts exactly its unreplicated tail."""
        old_leader = EpochHistory([(0, 0)])
        new_leader = EpochHistory([(0, 0), (1, 990)])
        answer = new_leader.lookup(old_leader.latest_epoch, log_end=1500)
        assert answer == EpochLookup(0, 990)
        assert divergence_offset(old_leader, 1000, answer) == 990


class ChooseLeaderTests:

    def test_highest_epoch_leader_wins(self) -> None:
        """Among replicas in leader role, the one with the highest epoch is the leader."""
        answers = [PeerEpoch(0, True, 1), PeerEpoch(1, False, 3), PeerEpoch(2, True, 3)]
        assert choose_leader(answers, 1) == PeerEpoch(2, True, 3)

    def test_deposed_leader_is_not_followed(self) -> None:
        """A leader of an epoch older than one this replica knows is a deposed leader."""
        assert choose_leader([PeerEpoch(0, True, 1)], 2) is None

    def test_tie_chooses_nobody(self) -> None:
        """Two replicas leading the same epoch is an operator mistake: follow neither."""
        assert choose_leader([PeerEpoch(0, True, 2), PeerEpoch(1, True, 2)], 0) is None

    def test_followers_only(self) -> None:
        """No replica in leader role: no leader (the fetcher backs off and asks again)."""
        assert choose_leader([PeerEpoch(0, False, 4)], 0) is None
