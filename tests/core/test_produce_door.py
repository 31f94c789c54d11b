"""The core's one produce door, ``BrokerCore.produce(request, answer)``, as a transport sees
it: one ``ProduceResult`` per partition a keyed request reached, carrying that partition's
tokens in offset order; a whole batch answered once; a failure carried in ``error``."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.core import ProduceRequest, ProduceResult
from broker.errors import UnknownTopic
from data.keys import fnv1a_32
from tests.reliability.inmemory import InMemoryBroker


@pytest.fixture
def broker(tmp_path: Path) -> InMemoryBroker:
    h = InMemoryBroker(tmp_path, topics={"t": {"partitions": 3}})
    yield h
    h.close()


def test_a_keyed_request_is_answered_once_per_partition_with_its_tokens(
        broker: InMemoryBroker) -> None:
    keys = [b"user%d" % i for i in range(12)]
    answers: list[ProduceResult] = []
    broker.broker.core.produce(ProduceRequest("t", None, "1", keys, [b"v"] * 12,
                                              list(range(12))), answers.append)
    broker.settle()
    by_partition = {r.partition: r for r in answers}
    assert len(answers) == len(by_partition) == len({fnv1a_32(k) % 3 for k in keys})
    for partition, result in by_partition.items():
        mine = [i for i, key in enumerate(keys) if fnv1a_32(key) % 3 == partition]
        assert result.error is None
        assert (list(result.tokens), result.offset, result.count) == (mine, 0, len(mine))


def test_two_requests_in_one_turn_share_the_append_and_keep_their_own_answers(
        broker: InMemoryBroker) -> None:
    first: list[ProduceResult] = []
    second: list[ProduceResult] = []
    core = broker.broker.core
    core.produce(ProduceRequest("t", 1, "1", [b"a", b"b"], [b"1", b"2"], ["a", "b"]),
                 first.append)
    core.produce(ProduceRequest("t", 1, "0", [b"c"], [b"3"], ["c"]), second.append)
    broker.settle()
    assert [(r.offset, r.count, list(r.tokens)) for r in first] == [(0, 2, ["a", "b"])]
    assert [(r.offset, r.count, list(r.tokens)) for r in second] == [(2, 1, ["c"])]


def test_a_whole_batch_is_answered_once(broker: InMemoryBroker) -> None:
    answers: list[ProduceResult] = []
    broker.broker.core.produce(ProduceRequest("t", 2, "1", [b"k"] * 3, [b"x", b"y", b"z"],
                                              whole=True), answers.append)
    broker.settle()
    assert [(r.partition, r.offset, r.count, r.error) for r in answers] == [(2, 0, 3, None)]


def test_a_refusal_that_changes_nothing_raises_and_answers_nothing(
        broker: InMemoryBroker) -> None:
    answers: list[ProduceResult] = []
    with pytest.raises(UnknownTopic):
        broker.broker.core.produce(ProduceRequest("missing", None, "1", [b"k"], [b"v"]),
                                   answers.append)
    broker.settle()
    assert answers == []
