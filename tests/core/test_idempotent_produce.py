"""Kafka's idempotent producer in the core, over the real store, driven in memory
(``InMemoryBroker``: task.Clock, a thread runner the test drives): ``produce`` of a framed batch with a
``ProducerBatch`` appends a batch once, answers its retries with the original offsets,
refuses fenced epochs and sequence gaps without writing, and keeps all that across a clean
restart, a crash (no snapshot at the end: rebuilt from the log tail) and a failover (a
replica holding the leader's replicated records, in whole or in part)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from broker.core import ProducerBatch, ProduceRequest, ProduceResult
from data.format import encode_record
from data.idempotence import parse_record_id
from replication.errors import InvalidProducerEpoch, OutOfOrderSequence
from tests.reliability.inmemory import InMemoryBroker


def framed(values: list[bytes]) -> tuple[bytes, list[int]]:
    """Records framed for ``BrokerCore.produce`` (``framed``) (store-stamped fields zero) and their ends."""
    records = [encode_record(0, 0, 0, 0, v, b"") for v in values]
    ends, at = [], 0
    for r in records:
        at += len(r)
        ends.append(at)
    return b"".join(records), ends


class Node:
    """One in-memory broker with a topic ``t`` of one partition."""

    def __init__(self, data_dir: Path, **config: Any) -> None:
        self.h = InMemoryBroker(data_dir, topics={"t": {"partitions": 1}},
                                storage={"fsync": "interval", **config})
        self.core = self.h.broker.core

    @property
    def log(self) -> Any:
        return self.core.resolve("t", 0, False).partitions[0]

    def produce(self, values: list[bytes], pid: int, epoch: int, seq: int) -> Any:
        """The produce's answer: a ProduceResult, or the error it raised or answered."""
        messages, ends = framed(values)
        answers: list[Any] = []
        try:
            self.core.produce(ProduceRequest("t", 0, "1", framed=messages, ends=ends,
                                             producer=ProducerBatch(pid, epoch, seq)),
                              answers.append)
        except Exception as error:  # noqa: BLE001 - the refusal is the answer under test
            return error
        self.h.settle()
        assert len(answers) == 1
        return answers[0].error or answers[0]

    def values(self) -> list[bytes]:
        log = self.log
        return [r.payload for r in log.read(log.first_offset, 1 << 20, 1 << 30).records]

    def close(self) -> None:
        self.h.close()


@pytest.fixture
def node(tmp_path: Path) -> Any:
    n = Node(tmp_path / "a")
    yield n
    if not n.log.closed:
        n.close()


def offset(answer: Any) -> int:
    assert type(answer) is ProduceResult, answer
    return answer.offset


class ProduceTests:

    def test_retry_is_answered_with_the_original_offset_and_not_written(self, node: Node) -> None:
        """The same batch sent twice is stored once; the retry gets the first offset."""
        assert offset(node.produce([b"a", b"b", b"c"], 1000, 0, 0)) == 0
        assert offset(node.produce([b"a", b"b", b"c"], 1000, 0, 0)) == 0
        assert offset(node.produce([b"d"], 1000, 0, 3)) == 3
        assert offset(node.produce([b"a", b"b", b"c"], 1000, 0, 0)) == 0
        assert node.values() == [b"a", b"b", b"c", b"d"]

    def test_records_carry_their_producer_fields(self, node: Node) -> None:
        """Each stored record's id names the producer, epoch and its own sequence."""
        node.produce([b"a", b"b"], 77, 3, 40)
        marks = [parse_record_id(r.id) for r in node.log.read(0, 10, 1 << 20).records]
        assert [(m.producer_id, m.epoch, m.sequence, m.first, m.last) for m in marks] == [
            (77, 3, 40, True, False), (77, 3, 41, False, True)]

    @pytest.mark.parametrize("pid, epoch, seq, error", [
        (1000, 0, 5, OutOfOrderSequence),   # a gap: 3 expected
        (1000, 0, 1, OutOfOrderSequence),   # behind, and no kept batch has that range
        (1000, 1, 3, OutOfOrderSequence),   # a new epoch starts at 0
    ])
    def test_refusals_write_nothing(self, node: Node, pid: int, epoch: int, seq: int,
                                    error: type) -> None:
        """A refused batch raises the domain error at once and appends nothing."""
        node.produce([b"a", b"b", b"c"], 1000, 0, 0)
        assert isinstance(node.produce([b"x"], pid, epoch, seq), error)
        assert node.values() == [b"a", b"b", b"c"]

    def test_a_newer_epoch_fences_the_older(self, node: Node) -> None:
        """Once epoch 1 wrote, epoch 0 is refused (INVALID_PRODUCER_EPOCH on Kafka)."""
        node.produce([b"a"], 5, 0, 0)
        assert offset(node.produce([b"b"], 5, 1, 0)) == 1
        assert isinstance(node.produce([b"c"], 5, 0, 1), InvalidProducerEpoch)
        assert node.values() == [b"a", b"b"]

    def test_plain_produces_in_between_do_not_disturb(self, node: Node) -> None:
        """Batches without a producer interleaved change nothing for the producer."""
        node.produce([b"a"], 5, 0, 0)
        messages, ends = framed([b"plain"])
        node.core.produce(ProduceRequest("t", 0, "1", framed=messages, ends=ends),
                          lambda _r: None)
        node.h.settle()
        assert offset(node.produce([b"a"], 5, 0, 0)) == 0
        assert offset(node.produce([b"b"], 5, 0, 1)) == 2


class RestartTests:

    def test_clean_restart_keeps_the_state(self, tmp_path: Path) -> None:
        """After a clean stop (a snapshot at the log end), a retry is still recognised."""
        a = Node(tmp_path / "a")
        a.produce([b"a", b"b"], 9, 0, 0)
        a.produce([b"c"], 9, 0, 2)
        a.close()
        names = os.listdir(tmp_path / "a" / "topics" / "t" / "0")
        assert "00000000000000000003.producers" in names
        b = Node(tmp_path / "a")
        assert offset(b.produce([b"a", b"b"], 9, 0, 0)) == 0
        assert isinstance(b.produce([b"z"], 9, 0, 7), OutOfOrderSequence)
        assert b.values() == [b"a", b"b", b"c"]
        b.close()

    def test_crash_rebuilds_from_snapshot_and_log_tail(self, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
        """Snapshots are written when a segment rolls; a crash loses the state after the
        last one, which is rebuilt from the records after it."""
        a = Node(tmp_path / "a", segment_bytes=4096)
        for i in range(40):
            a.produce([b"v" * 100, b"w" * 100], 3, 0, 2 * i)
        snaps = [n for n in os.listdir(tmp_path / "a" / "topics" / "t" / "0")
                 if n.endswith(".producers")]
        assert len(snaps) == 1 and int(snaps[0].split(".")[0]) < 80
        monkeypatch.setattr(a.core._producer_states, "save_all", lambda: None)  # a crash
        a.close()
        b = Node(tmp_path / "a", segment_bytes=4096)
        assert offset(b.produce([b"v" * 100, b"w" * 100], 3, 0, 78)) == 78
        assert offset(b.produce([b"v" * 100, b"w" * 100], 3, 0, 70)) == 70
        assert isinstance(b.produce([b"x"], 3, 0, 60), OutOfOrderSequence)
        assert offset(b.produce([b"x"], 3, 0, 80)) == 80
        b.close()

    def test_lost_snapshot_rebuilds_from_the_whole_log(self, tmp_path: Path) -> None:
        """Without any snapshot (deleted, damaged) the state is rebuilt from every record."""
        a = Node(tmp_path / "a")
        a.produce([b"a"], 9, 0, 0)
        a.produce([b"b"], 9, 0, 1)
        a.close()
        part = tmp_path / "a" / "topics" / "t" / "0"
        for name in os.listdir(part):
            if name.endswith(".producers"):
                (part / name).write_bytes(b"damaged")
        b = Node(tmp_path / "a")
        assert offset(b.produce([b"b"], 9, 0, 1)) == 1
        assert offset(b.produce([b"c"], 9, 0, 2)) == 2
        b.close()


class FailoverTests:

    def test_a_replica_with_the_leaders_records_recognises_a_retry(self, tmp_path: Path) -> None:
        """A replica that holds the leader's records (as replication copies them) answers a
        retry sent to it after a leader change with the original offset: never twice."""
        leader, replica = Node(tmp_path / "a"), Node(tmp_path / "b")
        leader.produce([b"a", b"b"], 4, 0, 0)
        leader.produce([b"c", b"d"], 4, 0, 2)
        replica.log.append_records(leader.log.read(0, 100, 1 << 20).raw)
        replica.core.forget_producers("t", 0)  # what a role change does
        assert offset(replica.produce([b"c", b"d"], 4, 0, 2)) == 2
        assert offset(replica.produce([b"e"], 4, 0, 4)) == 4
        assert replica.values() == [b"a", b"b", b"c", b"d", b"e"]
        leader.close()
        replica.close()

    def test_a_replica_with_part_of_a_batch_appends_only_the_rest(self, tmp_path: Path) -> None:
        """A replica that copied only the beginning of the last batch: the retry appends the
        missing records and is answered with the batch's original first offset."""
        leader, replica = Node(tmp_path / "a"), Node(tmp_path / "b")
        leader.produce([b"a"], 4, 0, 0)
        leader.produce([b"b", b"c", b"d"], 4, 0, 1)
        replica.log.append_records(leader.log.read(0, 3, 1 << 20).raw)  # a, b, c
        replica.core.forget_producers("t", 0)
        assert offset(replica.produce([b"b", b"c", b"d"], 4, 0, 1)) == 1
        assert replica.values() == [b"a", b"b", b"c", b"d"]
        assert offset(replica.produce([b"b", b"c", b"d"], 4, 0, 1)) == 1
        assert offset(replica.produce([b"e"], 4, 0, 4)) == 4
        replica.close()
        again = Node(tmp_path / "b")
        assert offset(again.produce([b"b", b"c", b"d"], 4, 0, 1)) == 1
        assert again.values() == [b"a", b"b", b"c", b"d", b"e"]
        again.close()
        leader.close()


class FollowerStateTests:

    def test_a_follower_state_follows_its_copies_and_a_truncation(self, tmp_path: Path) -> None:
        """A follower keeps the state of what it copies (``replica_copied``); after its log
        is cut and takes another leader's records at the same offsets, the state is the new
        log's: the cut batch is unknown, the new leader's batch is known."""
        old, new, replica = Node(tmp_path / "a"), Node(tmp_path / "b"), Node(tmp_path / "c")
        old.produce([b"a", b"b"], 4, 0, 0)
        old.produce([b"c", b"d"], 4, 0, 2)
        new.log.append_records(old.log.read(0, 2, 1 << 20).raw)
        new.core.forget_producers("t", 0)
        new.produce([b"x", b"y"], 8, 0, 0)
        raw = old.log.read(0, 100, 1 << 20).raw
        replica.core.replica_copied("t", 0, replica.log, replica.log.append_records(raw), raw)
        states = replica.core._producer_states
        assert states.state("t", 0, replica.log).producers[4].last_seq == 3
        replica.log.truncate_to(2)  # the divergent tail: old's second batch
        raw = new.log.read(2, 100, 1 << 20).raw
        replica.core.replica_copied("t", 0, replica.log, replica.log.append_records(raw), raw)
        state = states.state("t", 0, replica.log)
        assert (state.producers[4].last_seq, state.producers[8].last_seq) == (1, 1)
        assert offset(replica.produce([b"x", b"y"], 8, 0, 0)) == 2  # a retry: not written
        assert offset(replica.produce([b"c", b"d"], 4, 0, 2)) == 4  # written now
        assert replica.values() == [b"a", b"b", b"x", b"y", b"c", b"d"]
        for node in (old, new, replica):
            node.close()


class HousekeepingTests:

    def test_retention_forgets_producers_whose_batches_are_gone(self, tmp_path: Path) -> None:
        """Once retention removed all of a producer's batches, it is unknown again: any
        sequence is accepted (as Kafka does), while a producer with batches left is still
        checked."""
        n = Node(tmp_path / "a", segment_bytes=4096)
        for i in range(10):
            n.produce([b"x" * 1000], 1, 0, i)
        n.produce([b"y" * 3000], 2, 0, 0)
        n.produce([b"y" * 3000], 3, 0, 0)
        n.core.delete_oldest_segments("t", 0, n.log.segment_count - 2)
        assert n.log.first_offset == 10
        assert offset(n.produce([b"z"], 1, 0, 500)) == 12  # forgotten: starts anywhere
        assert isinstance(n.produce([b"z"], 2, 0, 7), OutOfOrderSequence)
        n.close()

    def test_idle_producers_expire_after_a_day(self, node: Node) -> None:
        """A producer silent for longer than producer.id.expiration.ms (a day) is forgotten."""
        node.produce([b"a"], 1, 0, 0)
        node.h.clock.advance(86_400 + 120)
        node.produce([b"b"], 2, 0, 0)  # any produce on the partition tidies it
        assert offset(node.produce([b"c"], 1, 0, 99)) == 2
